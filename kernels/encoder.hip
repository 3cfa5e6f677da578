/*
 * encoder.hip - non-causal varlen (encoder / ViT) attention on WMMA (gfx11 wave32).
 *
 * One workgroup per (query-row block, segment, head); see encoder_args.h for the grid. Every query
 * row of a segment sees every key of the segment, so there is no mask except at the segment's end.
 *
 * The products run "transposed" (as in decode.hip), query rows along the accumulator's n axis:
 *     S^T[key][row]  = K[key][:] . Q[row][:]       A = K sub-tile (16 keys x 16 d, from LDS)
 *                                                 B = Q^T (registers, staged once through LDS)
 *     O^T[d][row]   += V^T[d][key] . P^T[key][row] A = V^T (transposed into LDS once per block)
 *                                                 B = P^T (the S^T accumulator, re-packed)
 * so a query row's softmax statistics are per accumulator column and the rescale of O by the
 * running-max correction is a per-column multiply.
 *
 * Tiling: NW waves per workgroup, each owning T 16-row tiles (R = 16 T NW rows per workgroup). The
 * workgroup streams the segment's keys in blocks of KB: all threads load a block (128-bit loads of
 * whole rows, keys past the segment's end are not read) into registers while the waves compute on
 * the previous block, then store it to the other half of a double buffer in LDS (K row-major, V
 * transposed), one barrier per block. Each wave reads every K and V^T operand of a block once and
 * uses it for its T tiles. One online-softmax update per block and tile (KB / 16 sub-tiles).
 *
 * Softmax: fp32, base 2 (scale_log2 = softmax_scale * log2 e folded on the host), lazy rescale:
 * a row's running max only moves when a block beats it by more than 2^8, so the O and l rescale is
 * a rare, wave-uniform branch (probabilities stay <= 2^8 before normalization).
 *
 * Output: O^T / l is re-packed by b_from_acc into B-operand layout (lane = query row, 16 contiguous
 * d values) and each lane writes 16 bytes of its row: whole-row 128-bit stores, no scatter.
 *
 * Compile-time: element type, D (and its padding DP to a multiple of 16), T, KB, NW: they size
 * registers and LDS. Run-time: segments (cu_seqlens), head count, strides, scale. Head size 72 runs
 * as 80: K and Q columns 72..79 are zeros in LDS; O^T rows 72..79 are computed from whatever V^T
 * rows 72..79 hold and never stored. kernels/README_encoder.md has the budgets and the model.
 */
#include "common/device.h"
#include "common/fragment.h"
#include "common/encoder_args.h"

namespace r35a {

/* Packing of the probabilities P (finite, >= 0) into the PV product's operand. bf16: round half
 * away from zero, one integer add per value instead of round-to-nearest-even's three; the two
 * differ only on exact ties (low 16 bits 0x8000, one value in 2^16). f16: the usual conversion. */
struct bf16_prob_t {
    R35A_DEV u32 pack2(float lo, float hi) {
        return byte_perm(__builtin_bit_cast(u32, hi) + 0x8000u, __builtin_bit_cast(u32, lo) + 0x8000u, 0x07060302u);
    }
};
template <class E>
struct prob_pack { typedef E type; };
template <>
struct prob_pack<bf16_t> { typedef bf16_prob_t type; };

template <int A, int B>
struct cdiv { static constexpr int value = (A + B - 1) / B; };

template <class E, int D, int T, int KB, int NW, int WAVES>
struct encoder_cfg {
    static constexpr int DP = (D + 15) / 16 * 16;   /* head size padded to whole 16-wide chunks */
    static constexpr int DC = DP / 16;              /* d chunks */
    static constexpr int D8 = D / 8;                /* 16-byte chunks of a row in memory */
    static constexpr int NS = KB / 16;              /* 16-key sub-tiles per block */
    static constexpr int THREADS = 32 * NW;
    static constexpr int R = 16 * T * NW;           /* query rows per workgroup */
    static_assert(D % 8 == 0 && D <= 256, "rows are loaded in 16-byte chunks");
    static_assert(KB % 16 == 0 && KB >= 16, "blocks are whole 16-key sub-tiles");
    static_assert(T == 1 || T == 2, "one or two row tiles per wave");
    static_assert(16 * T * NW <= 128 && KB <= 128,
                  "per-thread row offsets are 32-bit byte offsets: rows * token stride (< 2^24) * 2 < 2^32");
    /* LDS row strides in elements. The +8 (16 bytes) staggers rows across banks for the 16-row
     * operand reads; rows stay 16-byte aligned. */
    static constexpr int KLD = DP + 8;              /* K block, Q staging: [key or row][d] */
    static constexpr int VLD = KB + 8;              /* V^T block: [d][key] */
    static constexpr int K_BYTES = KB * KLD * 2;
    static constexpr int V_BYTES = DP * VLD * 2;
    static constexpr int KV_BYTES = 2 * (K_BYTES + V_BYTES);   /* double buffer */
    static constexpr int Q_BYTES = R * KLD * 2;                /* overlays the K/V buffers */
    static constexpr int LDS_BYTES = KV_BYTES > Q_BYTES ? KV_BYTES : Q_BYTES;
    /* Cooperative loads: K and Q in 16-byte chunks (row-major, d fastest); V in units of two keys
     * x one chunk, so the transposing LDS store writes key pairs as 32-bit words. */
    static constexpr int K_CHUNKS = KB * D8;
    static constexpr int K_PER_THREAD = cdiv<K_CHUNKS, THREADS>::value;
    static constexpr int V_UNITS = (KB / 2) * D8;
    static constexpr int V_PER_THREAD = cdiv<V_UNITS, THREADS>::value;
    static constexpr int Q_CHUNKS = R * D8;
    static constexpr int Q_PER_THREAD = cdiv<Q_CHUNKS, THREADS>::value;
    /* Occupancy contract: WAVES waves on each of a WGP's 4 SIMDs share its 128 KiB of LDS. */
    static constexpr int WGS_PER_WGP = (4 * WAVES + NW - 1) / NW;
    static constexpr int LDS_BUDGET = 131072 / WGS_PER_WGP < 65536 ? 131072 / WGS_PER_WGP : 65536;
    static_assert(LDS_BYTES <= LDS_BUDGET, "LDS use breaks the variant's occupancy contract (waves)");
};

/* The K/V block a thread carries from global memory to LDS. */
template <int KPT, int VPT>
struct kv_regs {
    u32x4 k[KPT];
    u32x4 v[VPT][2];
};

/* Online-softmax threshold (base 2): a row's running max is only raised when a block's max exceeds
 * it by more than this, so the O rescale (and its exp2) runs in a few blocks only, not in every one.
 * Probabilities then stay <= 2^8 before normalization: exact enough in f32, no overflow in f16/bf16. */
#define R35A_ENC_RESCALE_TAU 8.0f

template <class E, int D, int T, int KB, int NW, int WAVES>
R35A_DEV void encoder_kernel(const r35a_encoder_args &a) {
    typedef encoder_cfg<E, D, T, KB, NW, WAVES> C;
    constexpr int DC = C::DC, D8 = C::D8, NS = C::NS, KLD = C::KLD, VLD = C::VLD, THREADS = C::THREADS;
    constexpr int KPT = C::K_PER_THREAD, VPT = C::V_PER_THREAD, QPT = C::Q_PER_THREAD;
    __shared__ __attribute__((aligned(16))) unsigned char smem[C::LDS_BYTES];
    u16 *const lds = (u16 *)smem;
    /* LDS: K block buffers 0 and 1, then V^T buffers 0 and 1; the Q staging overlays them. */
    auto kbuf = [&](int buf) { return lds + buf * (KB * KLD); };
    auto vbuf = [&](int buf) { return lds + 2 * KB * KLD + buf * (C::DP * VLD); };

    const int tid = thread_x(), w = wave_id();
    const int nrb = (a.max_seqlen + C::R - 1) / C::R;       /* row blocks per segment (grid.x = nrb * segments) */
    const int s = block_x() / nrb, xb = block_x() - s * nrb, h = block_y();
    const int t0 = a.cu_seqlens[s];
    const int len = a.cu_seqlens[s + 1] - t0;
    const int row0 = xb * C::R;
    if (row0 >= len) return;                                  /* whole workgroup: uniform */

    /* Uniform bases (scalar registers); per-thread offsets below are 32-bit byte offsets from them
     * (token strides < 2^24 elements, see encoder_args.h), so loads use the SGPR + VGPR form. */
    const char *const qg = (const char *)a.q + 2 * ((i64)t0 * a.q_token_stride + (i64)h * a.q_head_stride);
    const char *const kg = (const char *)a.k + 2 * ((i64)t0 * a.k_token_stride + (i64)h * a.k_head_stride);
    const char *const vg = (const char *)a.v + 2 * ((i64)t0 * a.v_token_stride + (i64)h * a.v_head_stride);
    u16 *const og = (u16 *)a.out + (i64)t0 * a.o_token_stride + (i64)h * a.o_head_stride;
    const u32x4 zero4 = {0u, 0u, 0u, 0u};

    /* ---- this thread's chunks of a K/V block (fixed over blocks) ---- */
    u32 k_off[KPT], v_off[VPT][2];
    int k_key[KPT], v_key[VPT];
#pragma unroll
    for (int i = 0; i < KPT; ++i) {
        const int idx = tid + i * THREADS;
        const int key = idx / D8, d8 = idx - key * D8;
        const bool in = C::K_CHUNKS % THREADS == 0 || idx < C::K_CHUNKS;
        k_key[i] = in ? key : KB;                               /* KB: no chunk */
        k_off[i] = (u32)(2 * key * a.k_token_stride) + 16u * d8;
    }
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
        const int idx = tid + i * THREADS;
        const int d8 = idx / (KB / 2), kp = idx - d8 * (KB / 2);
        const bool in = C::V_UNITS % THREADS == 0 || idx < C::V_UNITS;
        v_key[i] = in ? 2 * kp : KB;
        v_off[i][0] = (u32)(2 * (2 * kp) * a.v_token_stride) + 16u * d8;
        v_off[i][1] = (u32)(2 * (2 * kp + 1) * a.v_token_stride) + 16u * d8;
    }

    /* ---- block loads: keys >= len are neither read nor kept (zeros) ---- */
    auto load_kv = [&](int blk, kv_regs<KPT, VPT> &r) {
        const int key0 = blk * KB;
        const char *const kb = kg + 2 * (i64)key0 * a.k_token_stride;
        const char *const vb = vg + 2 * (i64)key0 * a.v_token_stride;
        const int nk = len - key0;                             /* keys left; >= KB: a full block */
        if (nk >= KB) {
#pragma unroll
            for (int i = 0; i < KPT; ++i)
                if (C::K_CHUNKS % THREADS == 0 || k_key[i] < KB) r.k[i] = load_b128(kb + k_off[i]);
#pragma unroll
            for (int i = 0; i < VPT; ++i)
                if (C::V_UNITS % THREADS == 0 || v_key[i] < KB) {
                    r.v[i][0] = load_b128(vb + v_off[i][0]);
                    r.v[i][1] = load_b128(vb + v_off[i][1]);
                }
        } else {
#pragma unroll
            for (int i = 0; i < KPT; ++i) r.k[i] = k_key[i] < nk ? load_b128(kb + k_off[i]) : zero4;
#pragma unroll
            for (int i = 0; i < VPT; ++i) {
                r.v[i][0] = v_key[i] < nk ? load_b128(vb + v_off[i][0]) : zero4;
                r.v[i][1] = v_key[i] + 1 < nk ? load_b128(vb + v_off[i][1]) : zero4;
            }
        }
    };
    auto store_kv = [&](int buf, const kv_regs<KPT, VPT> &r) {
        u16 *const kl = kbuf(buf);
        u16 *const vl = vbuf(buf);
#pragma unroll
        for (int i = 0; i < KPT; ++i) {
            const int idx = tid + i * THREADS;
            const int key = idx / D8, d8 = idx - key * D8;
            if (C::K_CHUNKS % THREADS == 0 || idx < C::K_CHUNKS) *(u32x4 *)(kl + key * KLD + 8 * d8) = r.k[i];
        }
#pragma unroll
        for (int i = 0; i < VPT; ++i) {
            const int idx = tid + i * THREADS;
            const int d8 = idx / (KB / 2), kp = idx - d8 * (KB / 2);
            if (C::V_UNITS % THREADS == 0 || idx < C::V_UNITS) {
                /* V[2kp][d], V[2kp+1][d] -> one word of V^T row d */
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const u32 x = r.v[i][0][e], y = r.v[i][1][e];
                    *(u32 *)(vl + (8 * d8 + 2 * e) * VLD + 2 * kp) = byte_perm(y, x, 0x05040100u);
                    *(u32 *)(vl + (8 * d8 + 2 * e + 1) * VLD + 2 * kp) = byte_perm(y, x, 0x07060302u);
                }
            }
        }
    };

    /* ---- Q: stage the workgroup's rows through LDS (zeros past the segment and in the padding
     * columns), then each wave takes its T tiles as B operands ---- */
    const int nblk = (len + KB - 1) / KB;
    kv_regs<KPT, VPT> kv;
    {
        u32x4 qr[QPT];
        const char *const qb = qg + 2 * (i64)row0 * a.q_token_stride;
#pragma unroll
        for (int i = 0; i < QPT; ++i) {
            const int idx = tid + i * THREADS;
            const int r = idx / D8, d8 = idx - r * D8;
            const bool ok = (C::Q_CHUNKS % THREADS == 0 || idx < C::Q_CHUNKS) && row0 + r < len;
            qr[i] = ok ? load_b128(qb + ((u32)(2 * r * a.q_token_stride) + 16u * d8)) : zero4;
        }
        load_kv(0, kv);
#pragma unroll
        for (int i = 0; i < QPT; ++i) {
            const int idx = tid + i * THREADS;
            const int r = idx / D8, d8 = idx - r * D8;
            if (C::Q_CHUNKS % THREADS == 0 || idx < C::Q_CHUNKS) *(u32x4 *)(lds + r * KLD + 8 * d8) = qr[i];
        }
        if constexpr (C::DP != D) {
            for (int r = tid; r < C::R; r += THREADS)
                for (int d = D; d < C::DP; d += 8) *(u32x4 *)(lds + r * KLD + d) = zero4;
        }
    }
    block_sync();
    const int wrow0 = row0 + w * 16 * T;                    /* first row of this wave */
    const bool wave_has_rows = wrow0 < len;                 /* uniform per wave */
    frag::ab qf[T][DC];
#pragma unroll
    for (int t = 0; t < T; ++t)
#pragma unroll
        for (int c = 0; c < DC; ++c) qf[t][c] = frag::load_vec16_lds(lds + (w * 16 * T + 16 * t) * KLD + 16 * c, KLD);
    block_sync();                                           /* Q staging is free again */
    store_kv(0, kv);
    if constexpr (C::DP != D) {                             /* K padding columns: zeros, once */
        for (int r = tid; r < 2 * KB; r += THREADS)
            for (int d = D; d < C::DP; d += 8) *(u32x4 *)(lds + r * KLD + d) = zero4;
    }
    block_sync();

    /* ---- online softmax over the key blocks ---- */
    frag::colv m[T], l[T];
    frag::acc o[T][DC];
#pragma unroll
    for (int t = 0; t < T; ++t) {
        m[t] = frag::colv_fill(neg_inf());
        l[t] = frag::colv_fill(0.f);
#pragma unroll
        for (int c = 0; c < DC; ++c) o[t][c] = frag::acc_zero();
    }
    const float sl2 = a.scale_log2;

    for (int b = 0; b < nblk; ++b) {
        const bool more = b + 1 < nblk;
        if (more) load_kv(b + 1, kv);                       /* in flight during the products */
        if (wave_has_rows) {
            const u16 *const kl = kbuf(b & 1);
            const u16 *const vl = vbuf(b & 1);
            const int key0 = b * KB;

            /* S^T = K Q^T for the block's NS sub-tiles */
            frag::acc sc[T][NS];
#pragma unroll
            for (int j = 0; j < NS; ++j) {
#pragma unroll
                for (int t = 0; t < T; ++t) sc[t][j] = frag::acc_zero();
#pragma unroll
                for (int c = 0; c < DC; ++c) {
                    const frag::ab kf = frag::load_vec16_lds(kl + 16 * j * KLD + 16 * c, KLD);
#pragma unroll
                    for (int t = 0; t < T; ++t) sc[t][j] = frag::mma<E>(kf, qf[t][c], sc[t][j]);
                }
            }
            if (key0 + KB > len) {                          /* the segment ends in this block */
#pragma unroll
                for (int j = 0; j < NS; ++j)
#pragma unroll
                    for (int e = 0; e < frag::ACC_ELEMS; ++e)
                        if (key0 + 16 * j + frag::acc_m(e) >= len)
#pragma unroll
                            for (int t = 0; t < T; ++t) sc[t][j].v[e] = neg_inf();
            }

            /* P^T = exp2(S^T * scale_log2 - m), running sums, lazy rescale of O */
            frag::ab pf[T][NS];
#pragma unroll
            for (int t = 0; t < T; ++t) {
                frag::acc mx = sc[t][0];
#pragma unroll
                for (int j = 1; j < NS; ++j)
#pragma unroll
                    for (int e = 0; e < frag::ACC_ELEMS; ++e) mx.v[e] = fmax_nonan(mx.v[e], sc[t][j].v[e]);
                const frag::colv cm = frag::col_max(mx);    /* finite: the block holds a key */
                bool raise = false;
#pragma unroll
                for (int c = 0; c < frag::NCOL; ++c) raise |= cm.v[c] * sl2 > m[t].v[c] + R35A_ENC_RESCALE_TAU;
                if (wave_any(raise)) {
                    frag::colv corr;
#pragma unroll
                    for (int c = 0; c < frag::NCOL; ++c) {
                        const float mn = fmax(m[t].v[c], cm.v[c] * sl2);
                        corr.v[c] = exp2_fast(m[t].v[c] - mn);   /* 0 on the first block */
                        m[t].v[c] = mn;
                        l[t].v[c] *= corr.v[c];
                    }
#pragma unroll
                    for (int c = 0; c < DC; ++c)
#pragma unroll
                        for (int e = 0; e < frag::ACC_ELEMS; ++e) o[t][c].v[e] *= corr.v[frag::acc_slot(e)];
                }
#pragma unroll
                for (int j = 0; j < NS; ++j) {
#pragma unroll
                    for (int e = 0; e < frag::ACC_ELEMS; ++e)
                        sc[t][j].v[e] = exp2_fast(__builtin_fmaf(sc[t][j].v[e], sl2, -m[t].v[frag::acc_slot(e)]));
                    const frag::colv ps = frag::col_sum_share(sc[t][j]);
#pragma unroll
                    for (int c = 0; c < frag::NCOL; ++c) l[t].v[c] += ps.v[c];
                    pf[t][j] = frag::b_from_acc<typename prob_pack<E>::type>(sc[t][j]);
                }
            }

            /* O^T += V^T P^T */
#pragma unroll
            for (int j = 0; j < NS; ++j)
#pragma unroll
                for (int c = 0; c < DC; ++c) {
                    const frag::ab vf = frag::load_vec16_lds(vl + 16 * c * VLD + 16 * j, VLD);
#pragma unroll
                    for (int t = 0; t < T; ++t) o[t][c] = frag::mma<E>(vf, pf[t][j], o[t][c]);
                }
        }
        if (more) store_kv((b + 1) & 1, kv);
        block_sync();
    }

    /* ---- O = O^T / l, written as whole rows (16-byte stores) ---- */
    if (!wave_has_rows) return;
#pragma unroll
    for (int t = 0; t < T; ++t) {
        const frag::colv lt = frag::col_sum_finish(l[t]);
        frag::colv inv;
#pragma unroll
        for (int c = 0; c < frag::NCOL; ++c) inv.v[c] = rcp_fast(lt.v[c]);   /* l >= 1: the max key counts >= 1 */
        const int trow0 = wrow0 + 16 * t;
#pragma unroll
        for (int c = 0; c < DC; ++c) {
            frag::acc x = o[t][c];
#pragma unroll
            for (int e = 0; e < frag::ACC_ELEMS; ++e) x.v[e] *= inv.v[frag::acc_slot(e)];
            frag::ab ob = frag::b_from_acc<E>(x);
            frag::pin(ob);                                  /* see pin(): the store below is per lane */
            frag::store_vec16_global(ob, imin(16, D - 16 * c), [&](int n) -> void * {
                const int row = trow0 + n;
                return row < len ? og + (i64)row * a.o_token_stride + 16 * c : nullptr;
            });
        }
    }
}

} /* namespace r35a */

/* One extern "C" kernel per variant; the symbol is the variant name. rows = 16 * T. */
#define R35A_ENCODER_VARIANT(arch, name, dtype, D, rows, KB, NW, WAVES)                                 \
    R35A_KERNEL R35A_KERNEL_BOUNDS(32 * (NW), WAVES) void name(r35a_encoder_args a) {                    \
        r35a::encoder_kernel<r35a::dtype##_t, D, (rows) / 16, KB, NW, WAVES>(a);                          \
    }
/* Until tools/gen_variants.py emits the encoder rows into variants.def, a tool may point
 * R35A_ENCODER_VARIANT_LIST at a list of R35A_ENCODER_VARIANT(...) lines made from
 * variants/gfx1151_encoder.tsv (tools/emu_check_encoder.py does). */
#ifdef R35A_ENCODER_VARIANT_LIST
#include R35A_ENCODER_VARIANT_LIST
#else
#include "../variants/variants.def"
#endif
#undef R35A_ENCODER_VARIANT
