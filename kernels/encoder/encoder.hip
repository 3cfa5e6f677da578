/*
 * encoder.hip - non-causal varlen (encoder / ViT) attention on matrix fragments (gfx11 wave32 WMMA;
 * the same source on NVIDIA mma.sync through the fragment layer).
 *
 * A GROUP of waves serves one block of query rows of one (segment, head); see encoder_args.h for the
 * grid. Normally a group is the whole workgroup (R = 16 T NW rows); in the small-problem tiling
 * (maxlen > 0) every wave is its own group (16 T rows, no workgroup barrier), so a workgroup of NW
 * waves serves NW short segments at once. Every query row sees every key of its segment, so there
 * is no mask except at the segment's end.
 *
 * The products run "transposed" (as in decode.hip), query rows along the accumulator's n axis:
 *     S^T[key][row]  = K[key][:] . Q[row][:]       A = K sub-tile (16 keys x 16 d, from LDS)
 *                                                 B = Q^T (registers, staged once through LDS;
 *                                                     NVIDIA, large tiles: read from the staged
 *                                                     tile per block, encoder_cfg Q_SMEM)
 *     O^T[d][row]   += V^T[d][key] . P^T[key][row] A = V^T (from LDS)
 *                                                 B = P^T (the S^T accumulator, re-packed in
 *                                                     registers by b_from_acc_keys)
 * so a query row's softmax statistics are per accumulator column and the rescale of O by the
 * running-max correction is a per-column multiply.
 *
 * K/V staging: the group streams the segment's keys in blocks of KB, staged in LDS, one barrier per
 * block; every K and V^T operand read serves the wave's T row tiles. Two ways, chosen by the
 * fragment layer (R35A_FRAG_ENC_ASYNC):
 *   - through registers (gfx11): every thread loads its share of block b+1 (128-bit loads of whole
 *     rows) before the products of block b and stores it after them into the other half of a double
 *     buffer: K row-major, V transposed to V^T (key pairs packed into 32-bit words);
 *   - asynchronous copies (NVIDIA: cp.async): block b + NSTAGE - 1 is copied straight into a ring of
 *     NSTAGE stages while the warps compute on block b, no registers held; K and V rows land as
 *     they are in memory and the V^T operands come from ldmatrix.trans of the V rows.
 * Keys past the segment's end are never read (zeros in LDS); the scores of the block holding the
 * segment's end are masked to -inf past it.
 *
 * Softmax: fp32, base 2 (scale_log2 = softmax_scale * log2 e folded on the host), lazy rescale: a
 * row's running max m moves only when its probabilities in a block would exceed 2^8. Every block is
 * exponentiated speculatively against the current m; when a column's share of the block's sum
 * exceeds 2^8 (then and only then can one probability exceed it, or overflow), a rare wave-uniform
 * branch recomputes the tile's scores, takes their max, rescales O and l and exponentiates again.
 * The first block always takes that branch. So no per-block max is computed at all, and
 * probabilities stay <= 2^8 before the final division (fine for f32 sums and f16/bf16 operands).
 *
 * Output: O^T / l is re-packed by b_from_acc into B-operand layout (lane = query row, 16 contiguous
 * d values) and each lane writes 16 bytes of its row: whole-row 128-bit stores, no scatter.
 *
 * Tail halves (encoder_args.h "Tail split"; the NVIDIA tables): a workgroup-wide variant's tail kernel
 * serves an item (R rows) as two workgroups of R / 2 rows. Its waves form two key groups of NW / 2 row
 * waves (KG = 2): both stage every K/V block as the variant does, key group k computes keys
 * [k KB / 2, (k + 1) KB / 2) of each, and at the end key group 1 leaves m, l and O^T in LDS for key
 * group 0, which joins them (the split-KV merge inside a workgroup) and writes the rows. Half the
 * rows and half the chain of blocks per wave: shorter workgroups for a part-empty last round.
 *
 * Compile-time: element type, D (and its padding DP to a multiple of 16), T, KB, NW, the group mode:
 * they size registers and LDS (gfx11: static LDS; NVIDIA: dynamic shared memory of exactly the
 * layout's size, published as <name>_lds_bytes for the host). Run-time: segments (cu_seqlens), head count, strides, scale. Head
 * size 72 runs as 80: K and Q columns 72..79 are zeros in LDS; O^T rows 72..79 are computed from
 * whatever V^T rows 72..79 hold and never stored. kernels/README_encoder.md has the budgets and the
 * model.
 */
#include "common/device.h"
#include "common/device_error.h"
#include "encoder/encoder_frag.h"
#include "encoder/encoder_args.h"

namespace r35a {

/* Packing of the probabilities P (finite, >= 0) into the PV product's operand: bf16 with the
 * target's cheapest round-to-nearest (device.h), f16 with the usual conversion. */
struct bf16_prob_t {
    R35A_DEV u32 pack2(float lo, float hi) { return pack_prob_bf16x2(lo, hi); }
};
template <class E>
struct prob_pack { typedef E type; };
template <>
struct prob_pack<bf16_t> { typedef bf16_prob_t type; };

template <int A, int B>
struct cdiv { static constexpr int value = (A + B - 1) / B; };
template <int X>
struct pow2_at_least { static constexpr int value = X <= 1 ? 1 : 2 * pow2_at_least<(X + 1) / 2>::value; };
template <>
struct pow2_at_least<1> { static constexpr int value = 1; };
template <int A, int B>
struct imax_t { static constexpr int value = A > B ? A : B; };

/* Shared memory a kernel may use on the target, given how many of its workgroups the occupancy
 * contract puts on one LDS (gfx11: static LDS, a WGP's 128 KiB shared by 4 SIMDs; NVIDIA: dynamic
 * shared memory, an SM's 228 KiB split by the contract, encoder_args.h r35a_encoder_nv_smem_bytes). */
template <int NW, int WAVES>
struct lds_budget {
#if defined(R35A_TARGET_CUDA)
    static constexpr int value = r35a_encoder_nv_smem_bytes(WAVES, NW);
#else
    static constexpr int WGS = (4 * WAVES + NW - 1) / NW;
    static constexpr int value = R35A_GFX11_LDS_PER_WGP / WGS < R35A_GFX11_LDS_PER_WORKGROUP
                                     ? R35A_GFX11_LDS_PER_WGP / WGS
                                     : R35A_GFX11_LDS_PER_WORKGROUP;
#endif
};

template <class E, int D, int T, int KB, int NW, int WAVES, int MAXLEN, int KG = 1>
struct encoder_cfg {
    static constexpr int DP = (D + 15) / 16 * 16;   /* head size padded to whole 16-wide chunks */
    static constexpr int DC = DP / 16;              /* d chunks */
    static constexpr int D8 = D / 8;                /* 16-byte chunks of a row in memory */
    static constexpr int KBC = KB / KG;             /* keys of a block one wave computes (its key group's share) */
    static constexpr int NS = KBC / 16;             /* ... in 16-key sub-tiles */
    static constexpr bool SHORT = MAXLEN > 0;       /* small-problem tiling: one wave per group */
    static constexpr int GW = SHORT ? 1 : NW;       /* waves per group (one K/V stream, one barrier domain) */
    static constexpr int NG = NW / GW;              /* groups per workgroup */
    static constexpr int GT = 32 * GW;              /* threads per group */
    /* Key groups (a tail half, encoder_args.h tail_items): the group's waves split into KG key groups
     * of RW row waves; all serve the same R rows, key group k computing keys [k KBC, (k + 1) KBC) of
     * every staged block, and key group 1's (m, l, O) joins key group 0's through LDS at the end. */
    static constexpr int RW = GW / KG;              /* row waves per key group */
    static constexpr int R = 16 * T * RW;           /* query rows per group */
    /* Row tiles a wave carries through one pass over the keys: all T, or fewer where the fragment
     * layer's registers do not hold T tiles' Q, O and scores at once (the gfx11 emulation on
     * NVIDIA: gfx11's replicated operands take twice the registers); the passes then stream the
     * segment's keys again. */
    static constexpr int TE = R35A_FRAG_ENC_TILES_PER_PASS < T ? R35A_FRAG_ENC_TILES_PER_PASS : T;
    static constexpr int PASSES = T / TE;
    static constexpr bool ASYNC = R35A_FRAG_ENC_ASYNC;
    static_assert(D % 8 == 0 && D <= 256, "rows are loaded in 16-byte chunks");
    static_assert(KB % 16 == 0 && KB >= 16, "blocks are whole 16-key sub-tiles");
    static_assert(T == 1 || T == 2, "one or two row tiles per wave");
    static_assert(KG == 1 || (KG == 2 && !SHORT && GW % 2 == 0 && KB % 32 == 0),
                  "key groups: 1, or 2 halves of a workgroup-wide group's waves and of each block");
    static_assert(R <= 128 && KB <= 128,
                  "per-thread row offsets are 32-bit byte offsets: rows * token stride (< 2^24) * 2 < 2^32");
    /* LDS row strides in elements. The +8 (16 bytes) staggers rows across banks for the 16-row
     * operand reads; rows stay 16-byte aligned. */
    static constexpr int KLD = DP + 8;              /* K block, Q staging (and V rows when ASYNC): [row][d] */
    static constexpr int VLD = ASYNC ? KLD : KB + 8;/* V rows [key][d] (ASYNC) or V^T rows [d][key] */
    static constexpr int K_ELEMS = KB * KLD;
    static constexpr int V_ELEMS = ASYNC ? KB * KLD : DP * VLD;
    static constexpr int STAGE = K_ELEMS + V_ELEMS;
    static constexpr int Q_ELEMS = R * KLD;
    static constexpr int BUDGET = lds_budget<NW, WAVES>::value;
    /* Q^T operands in shared memory instead of registers (asynchronous streaming only: NVIDIA).
     * Registers held across a block: Q^T 4 and O^T 8 per 16-row tile and 16-wide d chunk, the scores
     * 8 per tile and 16-key sub-tile. Up to Q_REGS_MAX of them the Q^T operands stay in registers,
     * read once per pass (D = 128, 32 rows per warp, 16 keys per block: 208, 255 registers in all,
     * no spill; 32 keys per block: 224, spilled). Above it the Q tile stays in shared memory for the
     * whole pass (beside the K/V stages) and each d chunk's Q^T operands are read once per block
     * (one ldmatrix per 16-row tile, shared by the block's NS K operand reads): 4 TE DC registers
     * free for larger key blocks, as FlashAttention keeps Q. */
#ifndef R35A_ENC_Q_REGS_MAX   /* tools/tune_encoder.py may build a tiling both ways (0: Q in shared memory) */
#define R35A_ENC_Q_REGS_MAX 208
#endif
    static constexpr int Q_REGS_MAX = R35A_ENC_Q_REGS_MAX;
    static constexpr bool Q_SMEM = ASYNC && !SHORT && TE * DC * (4 + 8) + TE * NS * 8 > Q_REGS_MAX;
    /* Asynchronous streaming: three stages when they fit, and Q staged beside stage 0 (whose copies
     * are then already in flight) when that fits. Otherwise the Q staging overlays everything. With
     * Q_SMEM the Q tile comes first and the stages after it, never overlaid. */
    static constexpr int Q_HELD = Q_SMEM ? Q_ELEMS : 0;   /* elements before the stages */
    static constexpr int NSTAGE =
        SHORT ? 1
        : !ASYNC ? 2
        : Q_SMEM ? (NG * 2 * (Q_ELEMS + 3 * STAGE) <= BUDGET ? 3 : 2)
                 : (NG * 2 * imax_t<3 * STAGE, Q_ELEMS>::value <= BUDGET ? 3 : 2);
    static constexpr bool Q_BESIDE =
        ASYNC && !SHORT && !Q_SMEM && NG * 2 * (STAGE + imax_t<(NSTAGE - 1) * STAGE, Q_ELEMS>::value) <= BUDGET;
    /* stage 0's copies may be issued before Q is staged: they do not land on it */
    static constexpr bool ISSUE_BEFORE_Q = Q_BESIDE || Q_SMEM;
    static constexpr int Q_OFFSET = Q_BESIDE ? STAGE : 0;
    /* The key groups' merge (KG > 1), after the last block: each wave of key group 1 leaves its m and
     * l (NCOL each per row tile) and O^T (ACC_ELEMS per tile and d chunk) in the group's LDS, lane
     * fastest. */
    static constexpr int MERGE_FLOATS_PER_LANE = TE * (2 * frag::NCOL + DC * frag::ACC_ELEMS);
    static constexpr int MERGE_ELEMS = KG > 1 ? (KG - 1) * RW * 32 * MERGE_FLOATS_PER_LANE * 2 : 0;
    static constexpr int GROUP_ELEMS = imax_t<MERGE_ELEMS,
        Q_SMEM     ? Q_ELEMS + NSTAGE * STAGE
        : Q_BESIDE ? STAGE + imax_t<(NSTAGE - 1) * STAGE, Q_ELEMS>::value
                   : imax_t<NSTAGE * STAGE, Q_ELEMS>::value>::value;
    static constexpr int LDS_BYTES = NG * GROUP_ELEMS * 2;
    static_assert(LDS_BYTES <= BUDGET, "LDS use breaks the variant's occupancy contract (waves) or the target's limit");
    /* Register staging: K and Q in 16-byte chunks (row-major, d fastest); V in units of two keys x
     * one chunk, so the transposing LDS store writes key pairs as 32-bit words. */
    static constexpr int K_CHUNKS = KB * D8;
    static constexpr int K_PER_THREAD = cdiv<K_CHUNKS, GT>::value;
    static constexpr int V_UNITS = (KB / 2) * D8;
    static constexpr int V_PER_THREAD = cdiv<V_UNITS, GT>::value;
    static constexpr int Q_CHUNKS = R * D8;
    static constexpr int Q_PER_THREAD = cdiv<Q_CHUNKS, GT>::value;
};

/* The K/V block a thread carries from global memory to LDS (register staging). */
template <int KPT, int VPT>
struct kv_regs {
    u32x4 k[KPT];
    u32x4 v[VPT][2];
};

#if R35A_FRAG_ENC_ASYNC
/* Asynchronous copy of rows [0, ROWS) of a block into a tile (row r at tile + r * ld, 16-byte chunks
 * in place). Row r is read at src + r * stride bytes, UPR chunks of 16 bytes; rows >= nvalid are not
 * read and land as zeros.
 *
 * The group's GT threads take "slots" of rows (a power of two, or a multiple of 32, chunks wide) so
 * that a warp reads whole rows (coalesced) and a thread keeps its chunk u and its row r0 modulo the
 * rows per pass RS across passes: every destination is a base register plus an immediate, every
 * source one multiply-add of the (opaque, hence not hoisted out of the block loop) row stride. */
template <int ROWS, int UPR, int GT>
R35A_DEV void copy_rows_async(u16 *tile, int ld, const char *src, u32 stride, int nvalid, int gtid) {
    constexpr int SPR = UPR <= 32 ? pow2_at_least<UPR>::value : (UPR + 31) / 32 * 32;   /* slots per row */
    constexpr int RS = SPR <= GT ? GT / SPR : 1;                                          /* rows per pass */
    constexpr int UPT = SPR <= GT ? 1 : SPR / GT;                                         /* slots per thread and row */
    constexpr int PASSES = (ROWS + RS - 1) / RS;
    const int r0 = SPR <= GT ? gtid / SPR : 0;
    const int u0 = SPR <= GT ? gtid % SPR : gtid;
    opaque(stride);
    const char *const src0 = src + r0 * stride;               /* r0 * stride < 2^32 (encoder_args.h) */
    u16 *const dst0 = tile + r0 * ld;
    const bool full = nvalid >= ROWS;
#pragma unroll
    for (int k = 0; k < UPT; ++k) {
        const int u = u0 + k * GT;
        if (UPR % SPR != 0 && u >= UPR)
            continue;
        const int col = 8 * u;                                /* elements */
#pragma unroll
        for (int p = 0; p < PASSES; ++p) {
            const int pr = p * RS;                            /* compile-time */
            if (ROWS % RS != 0 && r0 + pr >= ROWS)
                continue;
            u16 *const d = dst0 + pr * ld + col;
            const char *sp;
            bool fill = true;
            if (full) {
                sp = src0 + (u64)(u32)pr * stride + 16 * u;
            } else {                                           /* rows past nvalid: row 0 stands in, zeros land */
                fill = r0 + pr < nvalid;
                sp = src + (u64)(u32)(fill ? r0 + pr : 0) * stride + 16 * u;
            }
            async_copy_16(d, sp, fill);
        }
    }
}
#endif

/* Lazy-rescale threshold: a row's running max moves only when a block's probabilities against it
 * could exceed 2^8 (some column's share of the block's sum does). Probabilities then stay <= 2^8
 * before normalization: exact enough in f32, no overflow in f16/bf16. */
#define R35A_ENC_RESCALE_LIMIT 256.0f

/* A segment whose cu_seqlens entries fail their check (device_error.h): when only its length is wrong
 * (longer than max_seqlen, its range inside 0..num_tokens) the group of its row block 0 writes all its
 * rows of head h as NaN, those past max_seqlen included (no other workgroup has them); thread 0 of
 * head 0 records it. The error path only. */
template <class E, int D, int GT>
R35A_DEV void bad_segment(const r35a_encoder_args &a, u32 code, int s, int h, int t0, int t1, int gtid) {
    if (code == R35A_DEVICE_ERROR_SEGMENT_LEN) {
        const u16 nan = E::from_f32(quiet_nan());
        u16 *const og = (u16 *)a.out + (i64)t0 * a.o_token_stride + (i64)h * a.o_head_stride;
        for (i64 idx = gtid; idx < (i64)(t1 - t0) * D; idx += GT)
            store_u16(og + (idx / D) * a.o_token_stride + idx % D, nan);
    }
    if (h == 0 && gtid == 0) report_bad_data(a.error, code, (u32)s);
}

/* Group g of the workgroup serves item (segment s, row block xb, head h): the R rows of the KG = 1
 * tiling, all of them, or with KG = 2 (a tail half) half `half` of them. */
template <class E, int D, int T, int KB, int NW, int WAVES, int MAXLEN, int KG>
R35A_DEV void encoder_body(const r35a_encoder_args &a, unsigned char *smem, int g, int s, int xb, int h, int half) {
    typedef encoder_cfg<E, D, T, KB, NW, WAVES, MAXLEN, KG> C;
    typedef typename prob_pack<E>::type P;
    constexpr int DC = C::DC, D8 = C::D8, NS = C::NS, KLD = C::KLD, GT = C::GT, KBC = C::KBC;

    const int tid = thread_x(), w = wave_id();
    const int gw = w - g * C::GW;                            /* the wave within its group */
    const int kgi = gw / C::RW;                              /* its key group */
    const int rw = gw - kgi * C::RW;                         /* its row wave within the key group */
    /* the thread within its group (a one-wave group: the lane, whose range the compiler knows) */
    const int gtid = C::GW == 1 ? lane_id() : tid - g * GT;
    u16 *const lds = (u16 *)smem + g * C::GROUP_ELEMS;
    auto group_sync = [&]() {
        if constexpr (C::GW == 1)
            wave_lds_sync();
        else
            block_sync();
    };

    if (s >= a.num_segments)
        return;                                              /* group-uniform: no barrier is shared with other groups */
    const int t0 = a.cu_seqlens[s], t1 = a.cu_seqlens[s + 1];
    /* metadata the host never saw: checked before anything else is read (group-uniform) */
    const u32 bad = r35a_varlen_segment_error(s, a.num_segments, t0, t1, a.num_tokens, a.max_seqlen);
    if (bad != R35A_DEVICE_ERROR_NONE) {
        if (xb == 0 && half <= 0) bad_segment<E, D, GT>(a, bad, s, h, t0, t1, gtid);
        return;
    }
    const int len = t1 - t0;
    const int row0 = xb * C::R * KG + (half > 0 ? C::R : 0);
    if (row0 >= len)
        return;

    /* Uniform bases (scalar registers); per-thread offsets below are 32-bit byte offsets from them
     * (token strides < 2^24 elements, see encoder_args.h), so loads use the SGPR + VGPR form. */
    const char *const qg = (const char *)a.q + 2 * ((i64)t0 * a.q_token_stride + (i64)h * a.q_head_stride);
    const char *const kg = (const char *)a.k + 2 * ((i64)t0 * a.k_token_stride + (i64)h * a.k_head_stride);
    const char *const vg = (const char *)a.v + 2 * ((i64)t0 * a.v_token_stride + (i64)h * a.v_head_stride);
    u16 *const og = (u16 *)a.out + (i64)t0 * a.o_token_stride + (i64)h * a.o_head_stride;
    const u32x4 zero4 = {0u, 0u, 0u, 0u};
    const int nblk = (len + KB - 1) / KB;

#if R35A_FRAG_ENC_ASYNC
    /* ---- K/V blocks: asynchronous copies into stage st ---- */
    auto kstage = [&](int st) { return lds + C::Q_HELD + st * C::STAGE; };
    auto vstage = [&](int st) { return lds + C::Q_HELD + st * C::STAGE + C::K_ELEMS; };
    auto issue = [&](int blk, int st) {
        const int key0 = blk * KB;
        copy_rows_async<KB, D8, GT>(kstage(st), KLD, kg + 2 * (i64)key0 * a.k_token_stride,
                                               (u32)(2 * a.k_token_stride), len - key0, gtid);
        copy_rows_async<KB, D8, GT>(vstage(st), KLD, vg + 2 * (i64)key0 * a.v_token_stride,
                                                (u32)(2 * a.v_token_stride), len - key0, gtid);
    };
    /* K and V^T are the products' first operands (the hardware's B on NVIDIA): the _b loads bind the
     * ldmatrix results in the register pairs the product reads, so no moves form them (with the plain
     * loads 991 of the D = 128 kernel's 4096 SASS instructions were moves, 321 with these; cuobjdump,
     * kernels/README_encoder.md) */
    auto k_operand = [&](const u16 *kl, int j, int c) { return frag::load_vec16_lds_b(kl + 16 * j * KLD + 16 * c, KLD); };
    auto v_operand = [&](const u16 *vl, int j, int c) {
        return frag::load_vec16_lds_trans_b(vl + 16 * j * KLD + 16 * c, KLD);
    };
#else
    /* ---- K/V blocks through registers: this thread's chunks (fixed over blocks) ---- */
    constexpr int KPT = C::K_PER_THREAD, VPT = C::V_PER_THREAD, VLD = C::VLD;
    auto kstage = [&](int st) { return lds + st * C::STAGE; };
    auto vstage = [&](int st) { return lds + st * C::STAGE + C::K_ELEMS; };
    /* Chunk i of this thread: K chunk (key, d8) and V unit (key pair kp, d8). A group of one wave
     * (SHORT) carries a whole block alone, so its chunks go key-fastest: the thread keeps one key (or
     * key pair) and its chunks are a fixed distance apart, every address a base plus an immediate
     * (no per-chunk registers). Wider groups go d-fastest: a wave reads whole rows. */
    constexpr bool KEY_FAST = C::SHORT && GT % KB == 0 && GT % (KB / 2) == 0;
    auto k_chunk = [&](int i, int &key, int &d8) {
        if constexpr (KEY_FAST) {
            key = gtid % KB;
            d8 = gtid / KB + i * (GT / KB);
        } else {
            const int idx = gtid + i * GT;
            key = idx / D8;
            d8 = idx - key * D8;
        }
        return KEY_FAST ? d8 < D8 : (C::K_CHUNKS % GT == 0 || gtid + i * GT < C::K_CHUNKS);
    };
    /* V units: the key pair that shares a 32-bit word of V^T is the fragment layer's (the B operand
     * of P^T holds key row_of_kslot(p) in k-slot p). */
    auto v_chunk = [&](int i, int &kp, int &d8) {
        if constexpr (KEY_FAST) {
            kp = gtid % (KB / 2);
            d8 = gtid / (KB / 2) + i * (GT / (KB / 2));
        } else {
            const int idx = gtid + i * GT;
            d8 = idx / (KB / 2);
            kp = idx - d8 * (KB / 2);
        }
        return KEY_FAST ? d8 < D8 : (C::V_UNITS % GT == 0 || gtid + i * GT < C::V_UNITS);
    };
    auto v_key_of = [&](int kp, int hi) { return 16 * (kp >> 3) + frag::row_of_kslot(2 * (kp & 7) + hi); };
    /* keys >= len are neither read nor kept (zeros); parts: 1 K, 2 V, 3 both */
    auto load_kv = [&](int blk, kv_regs<KPT, VPT> &r, int parts) {
        const int key0 = blk * KB;
        const char *const kb = kg + 2 * (i64)key0 * a.k_token_stride;
        const char *const vb = vg + 2 * (i64)key0 * a.v_token_stride;
        const int nk = len - key0;                             /* keys left; >= KB: a full block */
        const bool full = nk >= KB;
#pragma unroll
        for (int i = 0; i < KPT; ++i) {
            int key, d8;
            const bool in = k_chunk(i, key, d8);
            if ((parts & 1) && in) {
                const u32 off = (u32)(2 * key * a.k_token_stride) + 16u * d8;
                r.k[i] = full || key < nk ? load_b128(kb + off) : zero4;
            }
        }
#pragma unroll
        for (int i = 0; i < VPT; ++i) {
            int kp, d8;
            const bool in = v_chunk(i, kp, d8);
            if ((parts & 2) && in) {
#pragma unroll
                for (int hi = 0; hi < 2; ++hi) {
                    const int key = v_key_of(kp, hi);
                    const u32 off = (u32)(2 * key * a.v_token_stride) + 16u * d8;
                    r.v[i][hi] = full || key < nk ? load_b128(vb + off) : zero4;
                }
            }
        }
    };
    auto store_kv = [&](int st, const kv_regs<KPT, VPT> &r, int parts) {
        u16 *const kl = kstage(st);
        u16 *const vl = vstage(st);
#pragma unroll
        for (int i = 0; i < KPT; ++i) {
            int key, d8;
            if (k_chunk(i, key, d8) && (parts & 1)) *(u32x4 *)(kl + key * KLD + 8 * d8) = r.k[i];
        }
#pragma unroll
        for (int i = 0; i < VPT; ++i) {
            int kp, d8;
            if (v_chunk(i, kp, d8) && (parts & 2)) {
                /* V[key_lo][d], V[key_hi][d] -> one word of V^T row d at key slots 2kp, 2kp+1 */
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const u32 x = r.v[i][0][e], y = r.v[i][1][e];
                    *(u32 *)(vl + (8 * d8 + 2 * e) * VLD + 2 * kp) = byte_perm(y, x, 0x05040100u);
                    *(u32 *)(vl + (8 * d8 + 2 * e + 1) * VLD + 2 * kp) = byte_perm(y, x, 0x07060302u);
                }
            }
        }
    };
    auto k_operand = [&](const u16 *kl, int j, int c) { return frag::load_vec16_lds(kl + 16 * j * KLD + 16 * c, KLD); };
    auto v_operand = [&](const u16 *vl, int j, int c) { return frag::load_vec16_lds(vl + 16 * c * VLD + 16 * j, VLD); };
    kv_regs<KPT, VPT> kv;
#endif

    const float sl2 = a.scale_log2;
    for (int pass = 0; pass < C::PASSES; ++pass) {
        constexpr int TE = C::TE;
        /* ---- Q: stage the group's rows through LDS (zeros past the segment and in the padding
         * columns), then each wave takes this pass's TE of its T tiles as B operands ---- */
#if R35A_FRAG_ENC_ASYNC
        if constexpr (C::ISSUE_BEFORE_Q) {
            issue(0, 0);                                         /* lands beside the Q staging */
            async_commit();
        }
#else
        if constexpr (!C::SHORT && R35A_FRAG_ENC_PREFETCH)
            load_kv(0, kv, 3);                                   /* in flight during the Q staging */
#endif
        {
            constexpr int QPT = C::Q_PER_THREAD;
            u16 *const ql = lds + C::Q_OFFSET;
            u32x4 qr[QPT];
            const char *const qb = qg + 2 * (i64)row0 * a.q_token_stride;
#pragma unroll
            for (int i = 0; i < QPT; ++i) {
                const int idx = gtid + i * GT;
                const int r = idx / D8, d8 = idx - r * D8;
                const bool ok = (C::Q_CHUNKS % GT == 0 || idx < C::Q_CHUNKS) && row0 + r < len;
                qr[i] = ok ? load_b128(qb + ((u32)(2 * r * a.q_token_stride) + 16u * d8)) : zero4;
            }
#pragma unroll
            for (int i = 0; i < QPT; ++i) {
                const int idx = gtid + i * GT;
                const int r = idx / D8, d8 = idx - r * D8;
                if (C::Q_CHUNKS % GT == 0 || idx < C::Q_CHUNKS) *(u32x4 *)(ql + r * KLD + 8 * d8) = qr[i];
            }
            if constexpr (C::DP != D) {
                for (int r = gtid; r < C::R; r += GT)
                    for (int d = D; d < C::DP; d += 8) *(u32x4 *)(ql + r * KLD + d) = zero4;
            }
        }
        group_sync();
        const int wrow0 = row0 + rw * 16 * T + 16 * TE * pass;   /* first row of this wave in this pass */
        const bool wave_has_rows = wrow0 < len;                  /* uniform per wave */
        /* Q^T operand of this pass's tile t, d chunk c, from the staged rows */
        auto q_operand = [&](int t, int c) {
            return frag::load_vec16_lds(lds + C::Q_OFFSET + (rw * 16 * T + 16 * (TE * pass + t)) * KLD + 16 * c, KLD);
        };
        /* Q^T in registers for the pass (Q_SMEM: read per block from the staged rows, see encoder_cfg) */
        [[maybe_unused]] frag::ab qf[C::Q_SMEM ? 1 : TE][C::Q_SMEM ? 1 : DC];
        if constexpr (!C::Q_SMEM) {   /* (not through q_operand: the gfx11 code object stays as it was) */
#pragma unroll
            for (int t = 0; t < TE; ++t)
#pragma unroll
                for (int c = 0; c < DC; ++c)
                    qf[t][c] = frag::load_vec16_lds(lds + C::Q_OFFSET + (rw * 16 * T + 16 * (TE * pass + t)) * KLD + 16 * c,
                                                    KLD);
            group_sync();                                        /* Q staging is free again */
        }
        if constexpr (C::DP != D) {                              /* K padding columns: zeros, once per stage */
            for (int r = gtid; r < C::NSTAGE * KB; r += GT)
                for (int d = D; d < C::DP; d += 8) *(u32x4 *)(kstage(r / KB) + (r % KB) * KLD + d) = zero4;
        }

        /* ---- online softmax over the key blocks ---- */
        frag::colv m[TE], l[TE];
        frag::acc o[TE][DC];
#pragma unroll
        for (int t = 0; t < TE; ++t) {
            m[t] = frag::colv_fill(neg_inf());
            l[t] = frag::colv_fill(0.f);
#pragma unroll
            for (int c = 0; c < DC; ++c) o[t][c] = frag::acc_zero();
        }

        /* One block on stage st (this wave's key group's KBC keys of it): S^T = K Q^T, the softmax
         * update, O^T += V^T P^T. */
        auto compute = [&](int b, int st) {
            const int key0 = b * KB + kgi * KBC;
            if (!wave_has_rows || (KG > 1 && key0 >= len))   /* uniform */
                return;
            const u16 *const kl = kstage(st) + (KG > 1 ? kgi * KBC * KLD : 0);
            const u16 *const vl = vstage(st) + (KG > 1 ? kgi * KBC * (C::ASYNC ? KLD : 1) : 0);
            const bool partial = key0 + KBC > len;
            frag::acc sc[TE][NS];
            frag::ab pf[TE][NS];

            /* S^T of tile tsel (or of all T tiles: tsel < 0); in a partial block (computed once, with
             * tsel < 0) the scores past the segment's end are set to -inf */
            auto scores = [&](int tsel) {
                if constexpr (C::Q_SMEM) {
                    /* d chunk outermost: its TE Q^T operands serve the block's NS K operands */
#pragma unroll
                    for (int c = 0; c < DC; ++c) {
                        frag::ab qc[TE];
#pragma unroll
                        for (int t = 0; t < TE; ++t)
                            if (tsel < 0 || t == tsel) qc[t] = q_operand(t, c);
#pragma unroll
                        for (int j = 0; j < NS; ++j) {
                            const frag::ab kf = k_operand(kl, j, c);
#pragma unroll
                            for (int t = 0; t < TE; ++t)
                                if (tsel < 0 || t == tsel)
                                    sc[t][j] = c == 0 ? frag::mma_zero<E>(kf, qc[t])
                                                      : frag::mma_enc<E>(kf, qc[t], sc[t][j]);
                        }
                    }
                } else {
#pragma unroll
                    for (int j = 0; j < NS; ++j) {
#pragma unroll
                        for (int c = 0; c < DC; ++c) {
                            const frag::ab kf = k_operand(kl, j, c);
#pragma unroll
                            for (int t = 0; t < TE; ++t)
                                if (tsel < 0 || t == tsel)
                                    sc[t][j] = c == 0 ? frag::mma_zero<E>(kf, qf[t][c])
                                                      : frag::mma_enc<E>(kf, qf[t][c], sc[t][j]);
                        }
                    }
                }
            };
            scores(-1);
            if (partial) {
#pragma unroll
                for (int j = 0; j < NS; ++j)
                    if (key0 + 16 * j + 16 > len) {                  /* the sub-tile holding the end, or past it */
#pragma unroll
                        for (int e = 0; e < frag::ACC_ELEMS; ++e)
                            if (key0 + 16 * j + frag::acc_m(e) >= len)
#pragma unroll
                                for (int t = 0; t < TE; ++t) sc[t][j].v[e] = neg_inf();
                    }
            }
            /* P^T = exp2(S^T * scale_log2 - m) in place; returns this lane's share of the block's
             * column sums */
            auto exponentiate = [&](int t) {
                frag::colv bs = frag::colv_fill(0.f);
#pragma unroll
                for (int j = 0; j < NS; ++j) {
#pragma unroll
                    for (int e = 0; e < frag::ACC_ELEMS; ++e)
                        sc[t][j].v[e] = exp2_fast(__builtin_fmaf(sc[t][j].v[e], sl2, -m[t].v[frag::acc_slot(e)]));
                    const frag::colv ps = frag::col_sum_share(sc[t][j]);
#pragma unroll
                    for (int c = 0; c < frag::NCOL; ++c) bs.v[c] += ps.v[c];
                }
                return bs;
            };

#pragma unroll
            for (int t = 0; t < TE; ++t) {
                /* Speculatively against the running max; once more, exactly, when the block moves it
                 * (rare, wave-uniform). The first block (which sets the max) and a partial last block
                 * (its masked scores are not recomputed) go the exact way at once. One copy of each
                 * path: the branches do not double the live registers. */
                bool exact = !R35A_FRAG_ENC_SPECULATE || b == 0 || partial;
                frag::colv bs;
                for (;;) {
                    if (exact) {
                        /* redo: the exponentiation overwrote them */
                        if (R35A_FRAG_ENC_SPECULATE && !(b == 0 || partial)) {
                            /* a memory clobber: the compiler must not hoist this rare recomputation's
                             * K operand reads out of the loop into registers held for the whole block */
                            wave_lds_sync();
                            scores(t);
                        }
                        frag::acc mx = sc[t][0];
#pragma unroll
                        for (int j = 1; j < NS; ++j)
#pragma unroll
                            for (int e = 0; e < frag::ACC_ELEMS; ++e) mx.v[e] = fmax_nonan(mx.v[e], sc[t][j].v[e]);
                        const frag::colv cm = frag::col_max(mx); /* finite: the block holds a key */
                        frag::colv corr;
#pragma unroll
                        for (int c = 0; c < frag::NCOL; ++c) {
                            const float mn = fmax(m[t].v[c], cm.v[c] * sl2);
                            corr.v[c] = exp2_fast(m[t].v[c] - mn);   /* 0 on the first block */
                            m[t].v[c] = mn;
                            l[t].v[c] *= corr.v[c];
                        }
                        if (b > 0)                               /* O is still zero in the first block */
#pragma unroll
                            for (int c = 0; c < DC; ++c)
#pragma unroll
                                for (int e = 0; e < frag::ACC_ELEMS; ++e) o[t][c].v[e] *= corr.v[frag::acc_slot(e)];
                    }
                    bs = exponentiate(t);
                    if (exact)
                        break;
                    bool big = false;
#pragma unroll
                    for (int c = 0; c < frag::NCOL; ++c) big |= bs.v[c] > R35A_ENC_RESCALE_LIMIT;   /* also +inf */
                    if (!wave_any(big))
                        break;
                    exact = true;
                }
#pragma unroll
                for (int c = 0; c < frag::NCOL; ++c) l[t].v[c] += bs.v[c];
#pragma unroll
                for (int j = 0; j < NS; ++j) pf[t][j] = frag::b_from_acc_keys<P>(sc[t][j]);
            }

            /* O^T += V^T P^T */
#pragma unroll
            for (int j = 0; j < NS; ++j) {
#pragma unroll
                for (int c = 0; c < DC; ++c) {
                    const frag::ab vf = v_operand(vl, j, c);
#pragma unroll
                    for (int t = 0; t < TE; ++t) o[t][c] = frag::mma_enc<E>(vf, pf[t][j], o[t][c]);
                }
            }
        };

#if R35A_FRAG_ENC_ASYNC
        if constexpr (C::SHORT) {
            for (int b = 0; b < nblk; ++b) {
                issue(b, 0);
                async_commit();
                async_wait<0>();
                group_sync();
                compute(b, 0);
                group_sync();                                    /* the stage is refilled next */
            }
        } else {
            constexpr int NST = C::NSTAGE;
            if constexpr (!C::ISSUE_BEFORE_Q) {
                issue(0, 0);
                async_commit();
            }
#pragma unroll
            for (int st = 1; st < NST - 1; ++st) {
                if (st < nblk) issue(st, st);
                async_commit();                               /* possibly empty: keeps the group count uniform */
            }
            int st = 0;
            for (int b = 0; b < nblk; ++b) {
                async_wait<NST - 2>();                        /* this thread's copies of block b have landed */
                group_sync();                                    /* everyone's have; block b - 1's stage is free */
                const int nb = b + NST - 1;
                if (nb < nblk) issue(nb, st == 0 ? NST - 1 : st - 1);
                async_commit();
                compute(b, st);
                st = st + 1 == NST ? 0 : st + 1;
            }
        }
#else
        if constexpr (C::SHORT || !R35A_FRAG_ENC_PREFETCH) {
            for (int b = 0; b < nblk; ++b) {
                /* K, then V, then the products: half the registers at a time (a one-wave group
                 * carries the whole block alone; the emulation has no room for a prefetch) */
                load_kv(b, kv, 1);
                store_kv(0, kv, 1);
                load_kv(b, kv, 2);
                store_kv(0, kv, 2);
                group_sync();
                compute(b, 0);
                group_sync();                                    /* the stage is refilled next */
            }
        } else {
            store_kv(0, kv, 3);
            group_sync();
            for (int b = 0; b < nblk; ++b) {
                const bool more = b + 1 < nblk;
                if (more) load_kv(b + 1, kv, 3);                 /* in flight during the products */
                compute(b, b & 1);
                if (more) store_kv((b + 1) & 1, kv, 3);
                group_sync();
            }
        }
#endif

        /* ---- the key groups' merge: key group 1's m, l and O^T joined into key group 0's ---- */
        if constexpr (KG > 1) {
#if R35A_FRAG_ENC_ASYNC
            async_wait<0>();                                     /* (only empty copy groups can be left) */
#endif
            group_sync();                                        /* every wave is done with the stages */
            float *const mf = (float *)lds + rw * 32 * C::MERGE_FLOATS_PER_LANE + lane_id();
            if (kgi == 1 && wave_has_rows) {
                int i = 0;
#pragma unroll
                for (int t = 0; t < TE; ++t) {
#pragma unroll
                    for (int c = 0; c < frag::NCOL; ++c) {
                        mf[32 * i++] = m[t].v[c];
                        mf[32 * i++] = l[t].v[c];
                    }
#pragma unroll
                    for (int c = 0; c < DC; ++c)
#pragma unroll
                        for (int e = 0; e < frag::ACC_ELEMS; ++e) mf[32 * i++] = o[t][c].v[e];
                }
            }
            group_sync();
            if (kgi == 0 && wave_has_rows) {
                int i = 0;
#pragma unroll
                for (int t = 0; t < TE; ++t) {
                    frag::colv c0, c1;
#pragma unroll
                    for (int c = 0; c < frag::NCOL; ++c) {
                        /* key group 1 may have had no keys (m1 = -inf, l1 = 0, O^T 0): c1 = 0 */
                        const float m1 = mf[32 * i++], l1 = mf[32 * i++];
                        const float mn = fmax(m[t].v[c], m1);
                        c0.v[c] = exp2_fast(m[t].v[c] - mn);
                        c1.v[c] = exp2_fast(m1 - mn);
                        l[t].v[c] = l[t].v[c] * c0.v[c] + l1 * c1.v[c];
                    }
#pragma unroll
                    for (int c = 0; c < DC; ++c)
#pragma unroll
                        for (int e = 0; e < frag::ACC_ELEMS; ++e) {
                            const int sl = frag::acc_slot(e);
                            o[t][c].v[e] = o[t][c].v[e] * c0.v[sl] + mf[32 * i++] * c1.v[sl];
                        }
                }
            }
        }

        /* ---- O = O^T / l, written as whole rows (16-byte stores) ---- */
        if (wave_has_rows && kgi == 0) {
#pragma unroll
            for (int t = 0; t < TE; ++t) {
                const frag::colv lt = frag::col_sum_finish(l[t]);
                frag::colv inv;
#pragma unroll
                for (int c = 0; c < frag::NCOL; ++c) inv.v[c] = rcp_fast(lt.v[c]);   /* l >= 1: the max counts 1 */
                const int trow0 = wrow0 + 16 * t;
#pragma unroll
                for (int c = 0; c < DC; ++c) {
                    frag::acc x = o[t][c];
#pragma unroll
                    for (int e = 0; e < frag::ACC_ELEMS; ++e) x.v[e] *= inv.v[frag::acc_slot(e)];
                    frag::ab ob = frag::b_from_acc<E>(x);
                    frag::pin(ob);                                   /* see pin(): the store below is per lane */
                    frag::store_vec16_global_pv(ob, imin(16, D - 16 * c), [&](int n) -> void * {
                        const int row = trow0 + n;
                        return row < len ? og + (i64)row * a.o_token_stride + 16 * c : nullptr;
                    });
                }
            }
        }
        if constexpr (C::PASSES > 1) {                           /* the next pass restages Q and K/V */
#if R35A_FRAG_ENC_ASYNC
            async_wait<0>();
#endif
            group_sync();
        }
    } /* pass */
}

/* The kernel of a variant: a normal launch (grid { workgroups of items, heads }, encoder_args.h), or,
 * for a workgroup-wide tiling with args.tail_items > 0, a one-dimensional grid over the items before
 * the tail (items in head-major order), whose last tail_items items the variant's tail kernel below
 * serves. */
template <class E, int D, int T, int KB, int NW, int WAVES, int MAXLEN>
R35A_DEV void encoder_kernel(const r35a_encoder_args &a) {
    typedef encoder_cfg<E, D, T, KB, NW, WAVES, MAXLEN, 1> C;
#if defined(R35A_TARGET_CUDA)
    /* launched with exactly C::LDS_BYTES (<name>_lds_bytes below), within the contract's budget */
    extern __shared__ __align__(16) unsigned char smem[];
#else
    __shared__ __attribute__((aligned(16))) unsigned char smem[C::LDS_BYTES];
#endif
    const int g = wave_id() / C::GW;                         /* this wave's group (uniform) */
    int s, xb, h;
    if (!C::SHORT && a.tail_items > 0) {                     /* uniform */
        grid_launch_dependents();                            /* the tail kernel may start on free slots */
        const i64 nrb = ((i64)a.max_seqlen + C::R - 1) / C::R, per_head = nrb * a.num_segments;
        const i64 item = block_x();
        h = (int)(item / per_head);
        const i64 rem = item - h * per_head;
        s = (int)(rem / nrb);
        xb = (int)(rem - s * nrb);
    } else {
        const int nrb = (a.max_seqlen + C::R - 1) / C::R;   /* row blocks per segment */
        const int item = block_x() * C::NG + g;
        s = item / nrb;
        xb = item - s * nrb;
        h = block_y();
    }
    encoder_body<E, D, T, KB, NW, WAVES, MAXLEN, 1>(a, smem, g, s, xb, h, -1);
}

/* The tail kernel of a workgroup-wide variant: the last args.tail_items items (head-major order), each
 * as two workgroups of half its rows whose waves split every block's keys into two key groups (KG =
 * 2): shorter workgroups for the last, part-empty round of the device's workgroup slots. Grid
 * { 2 tail_items, 1, 1 }. */
template <class E, int D, int T, int KB, int NW, int WAVES>
R35A_DEV void encoder_tail_kernel(const r35a_encoder_args &a) {
    typedef encoder_cfg<E, D, T, KB, NW, WAVES, 0, 2> C;
#if defined(R35A_TARGET_CUDA)
    extern __shared__ __align__(16) unsigned char smem[];
#else
    __shared__ __attribute__((aligned(16))) unsigned char smem[C::LDS_BYTES];
#endif
    const i64 nrb = ((i64)a.max_seqlen + 2 * C::R - 1) / (2 * C::R), per_head = nrb * a.num_segments;
    const i64 item = per_head * a.num_heads - a.tail_items + block_x() / 2;
    const int h = (int)(item / per_head);
    const i64 rem = item - h * per_head;
    const int s = (int)(rem / nrb), xb = (int)(rem - s * nrb);
    encoder_body<E, D, T, KB, NW, WAVES, 0, 2>(a, smem, 0, s, xb, h, (int)(block_x() & 1));
    /* Launched programmatically after the variant's launch (NVIDIA): it reads nothing that launch
     * writes, but it must not end before it, so that the stream's later work sees both. */
    grid_dependency_wait();
}

} /* namespace r35a */

/* NVIDIA: a variant is launched with exactly the dynamic shared memory its layout uses, published as
 * the device global <name>_lds_bytes, which the host reads at module load (src/gpu_runtime.c), as
 * for decode: the one place the size is decided is encoder_cfg. gfx11: static LDS, no symbol. */
#if defined(R35A_TARGET_CUDA)
#define R35A_ENCODER_LDS_SYMBOL(name, dtype, D, rows, KB, NW, WAVES, MAXLEN, KG)                          \
    extern "C" __device__ const int name##_lds_bytes =                                                     \
        r35a::encoder_cfg<r35a::dtype##_t, D, (rows) / 16, KB, NW, WAVES, MAXLEN, KG>::LDS_BYTES;
#else
#define R35A_ENCODER_LDS_SYMBOL(name, dtype, D, rows, KB, NW, WAVES, MAXLEN, KG)
#endif

/* One extern "C" kernel per variant; the symbol is the variant name. rows = 16 * T. Each
 * workgroup-wide variant (maxlen 0) also has its tail kernel, listed in variants.def on its own line. */
#define R35A_ENCODER_VARIANT(arch, name, dtype, D, rows, KB, NW, WAVES, MAXLEN)                        \
    R35A_ENCODER_LDS_SYMBOL(name, dtype, D, rows, KB, NW, WAVES, MAXLEN, 1)                               \
    R35A_KERNEL R35A_KERNEL_BOUNDS(32 * (NW), R35A_FRAG_ENC_WAVES(WAVES)) void name(r35a_encoder_args a) { \
        r35a::encoder_kernel<r35a::dtype##_t, D, (rows) / 16, KB, NW, WAVES, MAXLEN>(a);                  \
    }
#define R35A_ENCODER_TAIL(arch, name, variant, dtype, D, rows, KB, NW, WAVES)                              \
    R35A_ENCODER_LDS_SYMBOL(name, dtype, D, rows, KB, NW, WAVES, 0, 2)                                    \
    R35A_KERNEL R35A_KERNEL_BOUNDS(32 * (NW), R35A_FRAG_ENC_WAVES(WAVES)) void name(r35a_encoder_args a) { \
        r35a::encoder_tail_kernel<r35a::dtype##_t, D, (rows) / 16, KB, NW, WAVES>(a);                     \
    }
/* R35A_ENCODER_VARIANT_LIST names a list of R35A_ENCODER_VARIANT(...) / R35A_ENCODER_TAIL(...) lines to
 * instantiate instead of variants/variants.def: a compile unit's (tools/gen_variants.py --units), or
 * a tuner's candidates. */
#ifdef R35A_ENCODER_VARIANT_LIST
#include R35A_ENCODER_VARIANT_LIST
#else
#include "variants.def"
#endif
#undef R35A_ENCODER_VARIANT
#undef R35A_ENCODER_TAIL
#undef R35A_ENCODER_LDS_SYMBOL
