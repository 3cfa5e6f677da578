/*
 * decode_body.h - the part of the decode kernel written against the fragment layer: the online-softmax
 * state, the output stores and the kernel body, templates over the layer (Frag: a layer.h struct;
 * its layout is config.h's decode_cfg). decode.hip instantiates them on the target's layer
 * (layer_target: fragment.h) and, where the target has them, on the 8-row layer (layer_n8: NVIDIA's
 * native layer, decode/rows8_nv.h) for the rows-8 variants and the 4-row layer (layer_d4: gfx11,
 * decode/rows4_gfx11.h) for the rows-4 variants. A layer's B operands (Q^T, P^T) are its `bop` (its
 * `ab` except in the 4-row layer). The parts it composes: the policies (policy.h), the tile feed
 * (feed.h), the KV pipelines (the layer's kv_pipe_*), the softmax rules (softmax.h), the
 * bad-sequence epilogue (epilogue.h).
 *
 * Row tiles. A layer's products hold Frag::TILE_ROWS query rows per tile (16; 8 in layer_n8, 4 in
 * layer_d4); a variant's R rows per workgroup are T = ceil(R / TILE_ROWS) tiles, RT = T x TILE_ROWS
 * rows of them.
 * Where RT > R (rows 8 on a 16-row layer: gfx11's, or NVIDIA's gfx11 emulation in the tests) the
 * tile's rows past R are padding: they see no key, and nothing of theirs is stored.
 */
#ifndef R35A_DECODE_BODY_H
#define R35A_DECODE_BODY_H

#include "decode/policy.h"
#include "decode/layer.h"
#include "decode/config.h"
#include "decode/feed.h"
#include "decode/softmax.h"
#include "decode/timing.h"
#include "decode/epilogue.h"

namespace r35a {

/* Online-softmax state of one row tile of a wave: running max m (base 2), running sum share l,
 * and the O^T accumulators of the wave's d slice. */
template <class Frag, int NC>
struct row_state {
    typename Frag::colv m, l;
    typename Frag::acc o[NC];
};

/* Merges state b into a: both are partial softmaxes of disjoint key sets. */
template <class Frag, int NC>
R35A_DEV void merge_state(row_state<Frag, NC> &a, const typename Frag::colv &mb, const typename Frag::colv &lb, const typename Frag::acc *ob) {
    for (int c = 0; c < Frag::NCOL; ++c) {
        float ca, cb;
        const float mx = merge_scales(a.m.v[c], mb.v[c], ca, cb);
        a.l.v[c] = a.l.v[c] * ca + lb.v[c] * cb;
        a.m.v[c] = mx;
        for (int k = 0; k < NC; ++k)
            for (int e = 0; e < Frag::ACC_ELEMS; ++e)
                if (Frag::acc_slot(e) == c) a.o[k].v[e] = a.o[k].v[e] * ca + ob[k].v[e] * cb;
    }
}

/* Writes one accumulator fragment of O (row tile t, 16-wide d chunk ch of the head) scaled by inv,
 * only the rows that exist. O^T row m of the fragment is element P::v_d_of_m(m) of the chunk (the
 * pipeline's V^T operands may come with their d permuted). */
template <class Frag, class E, class P>
R35A_DEV void store_o(const r35a_decode_args &a, const typename Frag::acc &o, const typename Frag::colv &inv, int t, int ch, int rg,
                      int R, int q0, int M, int g, const bool (&ok)[Frag::NCOL]) {
    u16 *orow[Frag::NCOL];
#pragma unroll
    for (int c = 0; c < Frag::NCOL; ++c) {
        const int row = rg * R + t * Frag::TILE_ROWS + Frag::acc_n_of_slot(c);
        const int hl = ok[c] ? row / M : 0, i = row - hl * M;
        orow[c] = (u16 *)a.out + (i64)(q0 + i) * a.o_token_stride + (i64)(g * a.group_size + hl) * a.o_head_stride + 16 * ch;
    }
#pragma unroll
    for (int e = 0; e < Frag::ACC_ELEMS; ++e) {
        const int sl = Frag::acc_slot(e);
        if (ok[sl]) store_u16(orow[sl] + P::v_d_of_m(Frag::acc_m(e)), E::from_f32(o.v[e] * inv.v[sl]));
    }
}

/* Writes one accumulator fragment of a split's partial O (row tile t, 16-wide d chunk ch of the head)
 * into its record's accumulator (decode_args.h: R x D f32, row-major, natural d order), times v_fac
 * (the V scale of an 8-bit cache, else 1), only the rows that exist. */
template <class Frag, class P>
R35A_DEV void store_record(float *acc_rows, const typename Frag::acc &o, float v_fac, int t, int ch, int D,
                           const bool (&ok)[Frag::NCOL]) {
#pragma unroll
    for (int e = 0; e < Frag::ACC_ELEMS; ++e) {
        const int sl = Frag::acc_slot(e);
        const int row = t * Frag::TILE_ROWS + Frag::acc_n_of_slot(sl);
        if (ok[sl]) store_f32(acc_rows + (i64)row * D + 16 * ch + P::v_d_of_m(Frag::acc_m(e)), o.v[e] * v_fac);
    }
}

/* The kernel body (C: decode_cfg<E, KV, ...>); smem: the kernel's LDS (C::LDS_BYTES). */
template <class C, class E, class KV>
R35A_DEV void decode_body(const r35a_decode_args &a, unsigned char *smem) {
    constexpr int NC = C::NC, DS = C::DS, R = C::R, S = C::STAGES, KW = C::KGROUPS, DW = C::DSLICES,
                  D = C::HEAD, T = C::T, RW = C::ROWWAVES, TW = C::TW,
                  TR = C::TR, RT = C::RT;
    constexpr bool B8 = kv_is_8bit<KV>::value;
    constexpr int EB = B8 ? 1 : 2;   /* bytes per K/V element */
    typedef typename C::Frag Frag;   /* the fragment layer (layer.h) */
    typedef typename C::pipe P;
    typedef typename pv_elem<E, KV>::type PV;   /* the P.V products' element type (device.h) */
    typedef typename qk_elem<E, KV>::type QK;   /* the Q.K products' element type (device.h) */

    /* wave w: row wave rw (row tiles t0 .. t0 + TW - 1 of the R rows), key group kg, d slice dg */
    const int w = wave_id();
    const int rw = RW > 1 ? w / (KW * DW) : 0, kg = RW > 1 ? (w / DW) % KW : w / DW, dg = w % DW;
    const int t0 = rw * TW;
    const int split = block_x(), y = block_y(), s = block_z();
    R35A_TIMING(decode_timing tm; tm.t0 = decode_timing::now();)
    const int g = y / a.num_row_groups, rg = y - g * a.num_row_groups;

    /* the first table entries are in flight with the metadata (guess_table_block) */
    const table_guess guess = guess_table_block(a, s, split, kg, KW);
    const seq_meta sq = read_seq(a, s);
    const int q0 = sq.q0, M = sq.M, L = sq.L;
    /* metadata the host never saw: checked before anything that depends on it is read (the guess
     * depends on host-checked values only) */
    const u32 bad = r35a_paged_sequence_error(s, a.num_seqs, q0, q0 + M, L, a.num_tokens, a.query_len_bound,
                                              a.max_seq_len);
    if (bad != R35A_DEVICE_ERROR_NONE) {
        if (split == 0 && rg == 0) bad_sequence<E, D, C::THREADS>(a, bad, s, g, q0, q0 + M);
        return;
    }
    if (M <= 0 || M > a.max_query_len) return;            /* no rows, or the generic kernel's */
    const int G = a.group_size;
    const int rows = G * M;
    if (rg * R >= rows) return;

    /* Keys the rows reach: [lo, L); whole tiles [tile_lo, tile_hi) split evenly over the splits
     * this sequence uses (the planned count or fewer: decode_args.h). */
    const int W = a.window;
    const int lo = (int)r35a_window_first_key(L - M, W);
    const wave_tiles wt = split_wave_tiles(L, M, W, a.num_splits, a.min_split_tiles, split, kg, KW);
    const int nsplit = wt.nsplit;
    if (split >= nsplit) return;                          /* the merge kernel reads nsplit records */
    const int t_begin = wt.t_begin, t_end = wt.t_end;
    const int niter = t_end > t_begin ? (t_end - t_begin + KW - 1) / KW : 0;
    /* Tiles inside [full_lo, full_hi] are visible to every row: no mask needed. */
    const int full_lo = (int)r35a_window_first_key(L - 1, W), full_hi = L - M;

    /* ---- per-row (accumulator column) information ---- */
    int row_hi[TW][Frag::NCOL];   /* the row's query position p (its last key); -1: padding, sees nothing */
    bool row_ok[TW][Frag::NCOL];   /* [t]: the wave's row tile t0 + t */
    /* the logit transform: softcap (cap x tanh(s / cap)) then ALiBi (slope x (j - p)), in base 2 */
    const bool capped = a.logit_softcap > 0.f, alibi = a.alibi_slopes != nullptr;
    /* each row's ALiBi slope (base 2) in LDS: read per tile only by calls with ALiBi, no register
     * held across the loop */
    float *const slopes = (float *)(smem + C::SLOPE_OFF);
    if (alibi) {
        for (int r = thread_x(); r < RT; r += C::THREADS)
            slopes[r] = load_f32(a.alibi_slopes + g * G + imin(rg * R + r, rows - 1) / M) * LOG2E_F;
        block_sync();
    }
#pragma unroll
    for (int t = 0; t < TW; ++t)
#pragma unroll
        for (int c = 0; c < Frag::NCOL; ++c) {
            const int row = rg * R + (t0 + t) * TR + Frag::acc_n_of_slot(c);
            /* a row of the group that exists (the tile's rows past R: padding) */
            const bool ok = (RT == R || (t0 + t) * TR + Frag::acc_n_of_slot(c) < R) && row < rows;
            const int i = ok ? row % M : 0;
            const int p = L - M + i;
            row_ok[t][c] = ok;
            row_hi[t][c] = ok ? p : -1;                          /* a padding row sees nothing */
        }
    /* Scales: a raw dot of the products times sl2 is the base-2 logit. 8-bit caches: the kv head's K
     * scale and the conversion's unit join it, its V scale (v_fac) the output normalization. Without
     * a transform the scale rides in the exponent (xs = sl2); with one, the transform produces base-2
     * logits and xs = 1. */
    float sl2 = a.scale_log2, v_fac = 1.f;
    if constexpr (B8) {
        const int si = a.kv_scale_per_head ? g : 0;
        sl2 *= load_f32(a.k_scale + si) * kv8_unit<KV>();
        v_fac = load_f32(a.v_scale + si) * kv8_unit<KV>();
    }
    const float xs = capped || alibi ? 1.f : sl2;
    const softcap_rule cap = softcap_rule::make(a.logit_softcap, sl2);

    /* ---- the KV pipeline starts first: its table entries and first tiles are in flight while Q loads ---- */
    /* a shared pipeline: the region of the (key group, d slice), this wave's share of each tile,
     * named barrier 1 + its index */
    const int pipe_index = C::SHARED_PIPES ? kg * DW + dg : w;
    P pipe = make_pipe<P>(smem + pipe_index * C::WAVE_REGION, rw, 1 + pipe_index);
    tile_feed feed;
    feed.bt = a.block_table + (i64)s * a.block_table_stride;
    feed.k_base = (const char *)a.k_cache + ((i64)g * a.k_head_stride + dg * DS) * EB;
    feed.v_base = (const char *)a.v_cache + ((i64)g * a.v_head_stride + dg * DS) * EB;
    feed.k_page = a.k_page_stride * EB;
    feed.v_page = a.v_page_stride * EB;
    feed.k_slot = a.k_slot_stride * EB;
    feed.v_slot = a.v_slot_stride * EB;
    feed.B = a.page_size;
    feed.L = L;
    feed.lo = lo;
    feed.num_pages = a.num_pages;
    feed.bad = false;
    feed.r = wt;
    feed.kw = KW;
    feed.kg = kg;
    if (niter > 0) {
        feed.start(guess);
#pragma unroll
        for (int p = 0; p < S - 1; ++p) feed.issue(pipe, p, p);
    }

    /* ---- f16 products for bf16 queries (C::Q_RESCALE, device.h qk_elem): each row's power-of-two
     * scale from its largest |element| over the whole head, so that every d slice scales alike; one
     * wave per row, through LDS ---- */
    float *const qsc = (float *)(smem + C::QSC_OFF);
    if constexpr (C::Q_RESCALE) {
        for (int r = w; r < RT; r += C::NW) {
            const int row = rg * R + r;
            float amax = 0.f;   /* padding rows: scale 1 */
            if (row < rows && (RT == R || r < R)) {
                const int hl = row / M, i = row - hl * M;
                const u16 *qrow = (const u16 *)a.q + (i64)(q0 + i) * a.q_token_stride + (i64)(g * G + hl) * a.q_head_stride;
                for (int d = lane_id(); d < D; d += 32) amax = fmax(amax, __builtin_fabsf(bf16_to_f32(load_u16(qrow + d))));
            }
            /* every lane stores the same value: under `if (lane 0)` clang sank the reduction's last
             * v_permlanex16 into the branch, where it reads the inactive lanes 16-31 as nothing */
            qsc[r] = q_row_scale(wave_max(amax));
        }
        block_sync();
    }

    /* ---- Q^T fragments of this wave's d slice (B operand: vector = query row) ---- */
    typename Frag::bop qf[C::Q_LDS ? 1 : TW][NC];
    u16 *const qs = (u16 *)(smem + C::Q_OFF) + dg * RT * C::QROW;   /* Q_STAGED: this d slice's RT rows */
    if constexpr (C::Q_STAGED) {
        /* RT rows x DS of each d slice, 16 bytes per thread and step; padding rows are zeros */
        constexpr int CPR = DS / 8, CHUNKS = DW * RT * CPR;
        /* Q_RESCALE: every lane in every round, a lane past the last chunk redoing it (the same bytes to
         * the same place), so that the scale's LDS read is never under a divergent branch: gfx11emu
         * reads LDS for inactive lanes too, at whatever their address registers hold */
        for (int idx = C::Q_RESCALE ? 0 : thread_x(); idx < CHUNKS; idx += C::THREADS) {
            const int ci = C::Q_RESCALE ? imin(idx + thread_x(), CHUNKS - 1) : idx;
            const int sl = ci / (RT * CPR), rem = ci - sl * RT * CPR, r = rem / CPR, d8 = rem - r * CPR;
            const int row = rg * R + r;
            const int rr = imin(row, rows - 1), hl = rr / M, i = rr - hl * M;
            u32x4 x = load_b128((const u16 *)a.q + (i64)(q0 + i) * a.q_token_stride +
                                (i64)(g * G + hl) * a.q_head_stride + sl * DS + 8 * d8);
            if (row >= rows || (RT != R && r >= R)) x = u32x4{0u, 0u, 0u, 0u};
            if constexpr (C::Q_RESCALE) {
                const float sc = qsc[r];
#pragma unroll
                for (int q = 0; q < 4; ++q) x[q] = bf16x2_to_f16x2_scaled(x[q], sc);
            }
            u16 *const dst = (u16 *)(smem + C::Q_OFF) + (sl * RT + r) * C::QROW;
            if constexpr (!P::K_PERM) {
                *(u32x4 *)(dst + 8 * d8) = x;
            } else {   /* the k order of the pipeline's K operands: words moved within their 16-element chunk */
                u32 *const chunk = (u32 *)(dst + 16 * (d8 >> 1));
#pragma unroll
                for (int q = 0; q < 4; ++q) chunk[Frag::k8_q_word_pos(4 * (d8 & 1) + q)] = x[q];
            }
        }
        block_sync();
        if constexpr (!C::Q_LDS)   /* staged to be held in registers: read once */
#pragma unroll
            for (int t = 0; t < TW; ++t)
#pragma unroll
                for (int c = 0; c < NC; ++c) qf[t][c] = Frag::template load_bop_lds<P::K_PERM>(qs + (t0 + t) * TR * C::QROW + 16 * c, C::QROW);
    } else {
#pragma unroll
        for (int t = 0; t < TW; ++t)
#pragma unroll
            for (int c = 0; c < NC; ++c)
                qf[t][c] = Frag::template load_bop_global_u16<P::K_PERM>(
                    [&](int n) -> const void * {
                        /* padding rows: a real row */
                        const int row = RT == R ? imin(rg * R + (t0 + t) * TR + n, rows - 1)
                                                : imin(rg * R + imin((t0 + t) * TR + n, R - 1), rows - 1);
                        const int hl = row / M, i = row - hl * M;
                        const i64 off = (i64)(q0 + i) * a.q_token_stride + (i64)(g * G + hl) * a.q_head_stride + dg * DS + 16 * c;
                        return (const u16 *)a.q + off;
                    },
                    [&](int n) { return (RT == R || (t0 + t) * TR + n < R) && rg * R + (t0 + t) * TR + n < rows; });
#if defined(R35A_TARGET_AMDGCN)   /* Q_RESCALE is gfx11's only (device.h): bop_row_of_word is its layers' */
        if constexpr (C::Q_RESCALE)
#pragma unroll
            for (int t = 0; t < TW; ++t)
#pragma unroll
                for (int c = 0; c < NC; ++c)
#pragma unroll
                    for (int j = 0; j < C::BOP_WORDS; ++j)
                        qf[t][c].v[j] = bf16x2_to_f16x2_scaled(qf[t][c].v[j], qsc[(t0 + t) * TR + Frag::bop_row_of_word(j)]);
#endif
    }
    /* the inverse scales of the wave's rows, multiplied into their raw dot products */
    float qinv[C::Q_RESCALE ? TW : 1][Frag::NCOL];
    if constexpr (C::Q_RESCALE)
#pragma unroll
        for (int t = 0; t < TW; ++t)
#pragma unroll
            for (int c = 0; c < Frag::NCOL; ++c) qinv[t][c] = q_row_unscale(qsc[(t0 + t) * TR + Frag::acc_n_of_slot(c)]);
    /* Q^T fragment (the wave's row tile t, d chunk c) of this wave's slice */
    auto q_frag = [&](int t, int c) -> typename Frag::bop {
        if constexpr (C::Q_LDS) return Frag::template load_bop_lds<P::K_PERM>(qs + (t0 + t) * TR * C::QROW + 16 * c, C::QROW);
        else return qf[t][c];
    };

    row_state<Frag, NC> st[TW];
#pragma unroll
    for (int t = 0; t < TW; ++t) {
        st[t].m = Frag::colv_fill(neg_inf());
        st[t].l = Frag::colv_fill(0.f);
#pragma unroll
        for (int c = 0; c < NC; ++c) st[t].o[c] = Frag::acc_zero();
    }

    float *const px = (float *)(smem + C::PX_BASE + w * C::PX_STRIDE);   /* this wave's partial S^T */
    /* the reduced S^T of this wave's (row wave, key group) */
    float *const sr = (float *)(smem + C::SR_OFF) + (rw * KW + kg) * TW * Frag::ACC_NATIVE_FLOATS;

    for (int it0 = 0; it0 < niter; it0 += S) {
#pragma unroll
        for (int u = 0; u < S; ++u) {   /* stage u holds the wave's tile it0 + u */
            const int it = it0 + u;
            if (it >= niter) break;
            /* The loads of tile it + S - 1 start before this tile is waited for: S tiles in flight
             * at this point, S - 1 during the products (a shared pipeline waits first: its barrier
             * frees the slot the issue refills; S - 1 in flight either way). */
            if constexpr (!P::WAIT_FIRST) feed.issue(pipe, (u + S - 1) % S, it + S - 1);
            pipe.wait(u);
            if constexpr (P::WAIT_FIRST) feed.issue(pipe, (u + S - 1) % S, it + S - 1);
            const int tile = t_begin + it * KW + kg;
            const bool active = tile < t_end;                 /* uniform per wave */
            const int j0 = tile * 16;

            typename Frag::acc sacc[TW];
            if (active) {
                const typename Frag::ab k0 = pipe.k_operand(u, 0);
#pragma unroll
                for (int t = 0; t < TW; ++t) sacc[t] = Frag::template mma<QK>(k0, q_frag(t, 0), Frag::acc_zero());
#pragma unroll
                for (int c = 1; c < NC; ++c) {
                    const typename Frag::ab kf = pipe.k_operand(u, c);
#pragma unroll
                    for (int t = 0; t < TW; ++t) sacc[t] = Frag::template mma<QK>(kf, q_frag(t, c), sacc[t]);
                }
            }
            if constexpr (DW > 1) {
                /* Add the DW partial S^T tiles of the key group: reduce-scatter (each wave sums a
                 * 1/DW slice over the DW partials) then every wave reads the whole sum, so all DW
                 * waves hold bit-identical scores and make identical softmax decisions. */
                if (active)
#pragma unroll
                    for (int t = 0; t < TW; ++t) Frag::acc_store_lds(px + t * Frag::ACC_NATIVE_FLOATS, sacc[t]);
                block_sync_lds();
                if (active) {
                    /* the partial S^T of the DW waves of this (row wave, key group) */
                    const float *grp = (const float *)(smem + C::PX_BASE + (rw * KW + kg) * DW * C::PX_STRIDE);
#pragma unroll
                    for (int kk = 0; kk < (C::SLICE + 31) / 32; ++kk) {
                        /* (a slice narrower than the wave: the spare lanes redo its last element) */
                        const int f = dg * C::SLICE + imin(lane_id() + 32 * kk, C::SLICE - 1);
                        float sum = grp[f];
#pragma unroll
                        for (int d = 1; d < DW; ++d) sum += grp[d * (C::PX_STRIDE / 4) + f];
                        sr[f] = sum;
                    }
                }
                block_sync_lds();
                if (active)
#pragma unroll
                    for (int t = 0; t < TW; ++t) sacc[t] = Frag::acc_load_lds(sr + t * Frag::ACC_NATIVE_FLOATS);
            }
            if (!active) continue;
            if constexpr (C::Q_RESCALE)   /* the rows' scales out of the raw dots (powers of two: exact) */
#pragma unroll
                for (int t = 0; t < TW; ++t)
#pragma unroll
                    for (int e = 0; e < Frag::ACC_ELEMS; ++e) sacc[t].v[e] *= qinv[t][Frag::acc_slot(e)];

            /* Logits: the transform (only in calls that have one: uniform branches), then the masks
             * (a select: keys past the end may be NaN). Without a transform the scale is folded into
             * the exponent below. */
            if (capped) {
#pragma unroll
                for (int t = 0; t < TW; ++t)
#pragma unroll
                    for (int e = 0; e < Frag::ACC_ELEMS; ++e) sacc[t].v[e] = cap(sacc[t].v[e]);
            } else if (alibi) {
#pragma unroll
                for (int t = 0; t < TW; ++t)
#pragma unroll
                    for (int e = 0; e < Frag::ACC_ELEMS; ++e) sacc[t].v[e] *= sl2;
            }
            if (alibi) {
#pragma unroll
                for (int t = 0; t < TW; ++t) {
                    /* slope x (j - p): j - p of element e is the column's j0 + m(0) - p plus a constant */
                    float sb[Frag::NCOL], sl[Frag::NCOL];
#pragma unroll
                    for (int c = 0; c < Frag::NCOL; ++c) {
                        sl[c] = slopes[(t0 + t) * TR + Frag::acc_n_of_slot(c)];
                        sb[c] = sl[c] * (float)(j0 + Frag::acc_m(0) - row_hi[t][c]);
                    }
#pragma unroll
                    for (int e = 0; e < Frag::ACC_ELEMS; ++e) {
                        const int c = Frag::acc_slot(e);
                        sacc[t].v[e] = __builtin_fmaf(sl[c], (float)(Frag::acc_m(e) - Frag::acc_m(0)), sacc[t].v[e] + sb[c]);
                    }
                }
            }
            const bool need_mask = !(j0 >= full_lo && j0 + 15 <= full_hi);
            typename Frag::bop pf[TW];
#pragma unroll
            for (int t = 0; t < TW; ++t) {
                typename Frag::acc &sc = sacc[t];
                if (need_mask)
#pragma unroll
                    for (int e = 0; e < Frag::ACC_ELEMS; ++e) {
                        const int j = j0 + Frag::acc_m(e), c = Frag::acc_slot(e);
                        if (j > row_hi[t][c] || j < (int)r35a_window_first_key(row_hi[t][c], W)) sc.v[e] = neg_inf();
                    }
                const typename Frag::colv mx = Frag::col_max(sc);
                typename Frag::colv corr, mu;
                bool moved = false;
#pragma unroll
                for (int c = 0; c < Frag::NCOL; ++c) {
                    const float mn = fmax(st[t].m.v[c], mx.v[c] * xs);
                    mu.v[c] = mn == neg_inf() ? 0.f : mn;
                    corr.v[c] = exp2_fast(st[t].m.v[c] - mu.v[c]);
                    moved |= mn != st[t].m.v[c];
                    st[t].m.v[c] = mn;
                }
#pragma unroll
                for (int e = 0; e < Frag::ACC_ELEMS; ++e)
                    sc.v[e] = exp2_fast(__builtin_fmaf(sc.v[e], xs, -mu.v[Frag::acc_slot(e)]));
                const typename Frag::colv ps = Frag::col_sum_share(sc);
#pragma unroll
                for (int c = 0; c < Frag::NCOL; ++c) st[t].l.v[c] = st[t].l.v[c] * corr.v[c] + ps.v[c];
                /* O is rescaled only when a row's max moved (rare after the first tiles; exact either
                 * way: an unmoved max gives corr = 1). */
                if (wave_any(moved))
#pragma unroll
                    for (int k = 0; k < NC; ++k)
#pragma unroll
                        for (int e = 0; e < Frag::ACC_ELEMS; ++e) st[t].o[k].v[e] *= corr.v[Frag::acc_slot(e)];
                pf[t] = Frag::template b_from_acc<PV>(sc);
            }
            pipe.prepare_v(u);
#pragma unroll
            for (int c = 0; c < NC; ++c) {
                const typename Frag::ab vf = pipe.v_operand(u, c);
#pragma unroll
                for (int t = 0; t < TW; ++t) st[t].o[c] = Frag::template mma<PV>(vf, pf[t], st[t].o[c]);
                R35A_DECODE_CHUNK_FENCE();
            }
            pipe.release(u);
        }
    }
    pipe.drain();
    /* the split merge launched after this kernel may get its workgroups resident once every workgroup
     * is past its loop (they wait for this kernel's end in grid_dependency_wait): its launch overlaps
     * this kernel's tail (measured on the H200: triggered at the kernel's entry instead, its waiting
     * workgroups slowed long contexts by 2-5 %) */
    grid_launch_dependents();
#pragma unroll
    for (int t = 0; t < TW; ++t) st[t].l = Frag::col_sum_finish(st[t].l);
    /* A block-table entry outside the cache: page 0 was streamed in its place; NaN state makes the
     * rows of every merge NaN (NaN x 0 stays NaN). Uniform per wave; the error path only. */
    if (wave_any(feed.bad)) {
#pragma unroll
        for (int t = 0; t < TW; ++t) {
            st[t].l = Frag::colv_fill(quiet_nan());
#pragma unroll
            for (int c = 0; c < NC; ++c)
#pragma unroll
                for (int e = 0; e < Frag::ACC_ELEMS; ++e) st[t].o[c].v[e] = quiet_nan();
        }
        if (lane_id() == 0) report_bad_data(a.error, R35A_DEVICE_ERROR_PAGE_INDEX, (u32)s);
    }

    /* ---- merge the key groups of the workgroup (binary tree through LDS) ---- */
    if constexpr (KW > 1) {
        float *const mb = (float *)smem;
        for (int step = 1; step < KW; step *= 2) {
            block_sync();   /* previous users of this LDS (the loop, the previous round) are done */
            if (kg % (2 * step) == step) {
                float *slot = mb + (kg / (2 * step)) * C::MSLOT_FLOATS;
                for (int t = 0; t < TW; ++t)
                    for (int c = 0; c < NC; ++c)
                        Frag::acc_store_lds(slot + ((dg * T + t0 + t) * NC + c) * Frag::ACC_NATIVE_FLOATS, st[t].o[c]);
                if (dg == 0)
                    for (int t = 0; t < TW; ++t) {
                        Frag::colv_store(slot + C::MSLOT_ACC + (t0 + t) * TR, st[t].m, false);
                        Frag::colv_store(slot + C::MSLOT_ACC + RT + (t0 + t) * TR, st[t].l, false);
                    }
            }
            block_sync();
            if (kg % (2 * step) == 0) {
                const float *slot = mb + (kg / (2 * step)) * C::MSLOT_FLOATS;
                for (int t = 0; t < TW; ++t) {
                    typename Frag::acc ob[NC];
                    for (int c = 0; c < NC; ++c)
                        ob[c] = Frag::acc_load_lds(slot + ((dg * T + t0 + t) * NC + c) * Frag::ACC_NATIVE_FLOATS);
                    merge_state<Frag, NC>(st[t], Frag::colv_load(slot + C::MSLOT_ACC + (t0 + t) * TR, false),
                                    Frag::colv_load(slot + C::MSLOT_ACC + RT + (t0 + t) * TR, false), ob);
                }
            }
        }
    }

    R35A_TIMING(tm.mark();)
    /* ---- splits: publish the partial record; the merge kernel, launched next, combines them ---- */
    if (nsplit > 1) {
        if (kg == 0) {
            const i64 group = ((i64)s * a.num_kv_heads + g) * a.num_row_groups + rg;
            const i64 rec_floats = r35a_decode_record_floats(R, D);
            float *const rec = (float *)a.workspace + (group * a.num_splits + split) * rec_floats;
            /* unrolled, no break: st[] indexed by a run-time t would go to local memory (NVIDIA) */
#pragma unroll
            for (int t = 0; t < TW; ++t) {
                if (rg * R + (t0 + t) * TR >= rows) continue;       /* a row tile of padding only */
                if (dg == 0) {
                    if constexpr (RT == R) {
                        Frag::colv_store(rec + (t0 + t) * TR, st[t].m, true);
                        Frag::colv_store(rec + R + (t0 + t) * TR, st[t].l, true);
                    } else {   /* the record has R rows: a tile's padding rows past them are not stored */
#pragma unroll
                        for (int c = 0; c < Frag::NCOL; ++c)
                            if (Frag::col_owner(c) && row_ok[t][c]) {
                                const int n = (t0 + t) * TR + Frag::acc_n_of_slot(c);
                                store_f32(rec + n, st[t].m.v[c]);
                                store_f32(rec + R + n, st[t].l.v[c]);
                            }
                    }
                }
#pragma unroll
                for (int c = 0; c < NC; ++c)
                    store_record<Frag, P>(rec + 2 * R, st[t].o[c], v_fac, t0 + t, dg * NC + c, D, row_ok[t]);
            }
        }
        R35A_TIMING(tm.done(a, R, D, false);)
        return;
    }
    R35A_TIMING(tm.done(a, R, D, false);)
    if (kg != 0) return;

    /* ---- one split: O = O^T / (l + the sink's share), zeros for rows that saw no key; the LSE when
     * the call writes it (a uniform branch), by the lane that owns the row's column. What only this
     * part reads of the argument is read here (args_here). ---- */
    const r35a_decode_args &ah = args_here(a);
    const bool write_lse = ah.lse != nullptr && dg == 0;
#pragma unroll
    for (int t = 0; t < TW; ++t) {
        typename Frag::colv inv;
#pragma unroll
        for (int c = 0; c < Frag::NCOL; ++c) {
            const int row = imin(rg * R + (t0 + t) * TR + Frag::acc_n_of_slot(c), rows - 1), hl = row / M;
            const float sink2 = sink_base2(ah, g * G + hl);
            inv.v[c] = row_inv(st[t].m.v[c], st[t].l.v[c], sink2) * v_fac;
            if (write_lse && Frag::col_owner(c) && row_ok[t][c])
                store_lse(ah, q0 + row - hl * M, g * G + hl, row_lse(st[t].m.v[c], st[t].l.v[c], sink2));
        }
#pragma unroll
        for (int c = 0; c < NC; ++c) store_o<Frag, E, P>(ah, st[t].o[c], inv, t0 + t, dg * NC + c, rg, R, q0, M, g, row_ok[t]);
    }
}

/* The kernel of one variant: one body, its LDS declared here.
 * NVIDIA: dynamic shared memory, launched with exactly C::LDS_BYTES (<name>_lds_bytes below; at most
 * r35a_nv_smem_bytes(), the contract's share; the static 48 KiB would cap the cp.async stages). */
template <class Frag, class E, class KV, int D, int R, int KW, int DW, int RW, int WAVES, int PIPE, int STAGES, int QPLACE>
R35A_DEV void decode_kernel(const r35a_decode_args &a) {
    typedef decode_cfg<Frag, E, KV, D, R, KW, DW, RW, WAVES, PIPE, STAGES, QPLACE> C;
#if defined(R35A_TARGET_CUDA)
    extern __shared__ __align__(16) unsigned char smem_dynamic[];
    unsigned char *const smem = smem_dynamic;
#else
    __shared__ __attribute__((aligned(16))) unsigned char smem[C::LDS_BYTES];
#endif
    decode_body<C, E, KV>(a, smem);
}

} /* namespace r35a */

#endif /* R35A_DECODE_BODY_H */
