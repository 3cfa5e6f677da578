/*
 * decode/merge.h - the split merge (decode_args.h "the split merge"): the kernel launched after a
 * decode launch of several splits combines their partial records, all rows and d of all groups in
 * parallel. decode.hip instantiates it once per Q/O dtype (decode_merge_f16, decode_merge_bf16).
 */
#ifndef R35A_DECODE_MERGE_H
#define R35A_DECODE_MERGE_H

#include "decode/policy.h"
#include "decode/feed.h"
#include "decode/softmax.h"
#include "decode/timing.h"

namespace r35a {

/* The online merge of two partial softmax states of one row (disjoint records): (m, l, o) takes (mb,
 * lb, ob) in (merge_scales). Two states that saw no key stay (-inf, 0, 0). */
R35A_DEV void merge_partial(float &m, float &l, float (&o)[4], float mb, float lb, const float (&ob)[4]) {
    float ca, cb;
    const float mx = merge_scales(m, mb, ca, cb);
    l = l * ca + lb * cb;
#pragma unroll
    for (int j = 0; j < 4; ++j) o[j] = o[j] * ca + ob[j] * cb;
    m = mx;
}

/* One lane's share of the split merge: the online merge over records part, part + P, ... of the
 * sequence's nsplit (row n, elements d..d+3), RB records' loads in flight per round trip. */
template <int RB, int P>
R35A_DEV void merge_records(const float *grec, i64 rec_floats, int R, int D, int n, int d, int part, int nsplit,
                            float &m_run, float &l_run, float (&o)[4]) {
    for (int k0 = 0; k0 < nsplit; k0 += RB * P) {
        float mk[RB], lk[RB];
        u32x4 ak[RB];
#pragma unroll
        for (int r = 0; r < RB; ++r) {   /* records past nsplit re-read the last one (never weighed) */
            const float *rec = grec + imin(k0 + r * P + part, nsplit - 1) * rec_floats;
            mk[r] = load_f32(rec + n);
            lk[r] = load_f32(rec + R + n);
            ak[r] = load_b128(rec + 2 * R + (i64)n * D + d);
        }
        /* branch-free (a record past nsplit weighs 0), so no load is sunk to its use: all RB records'
         * loads are in flight together */
        float mb = m_run;
#pragma unroll
        for (int r = 0; r < RB; ++r) mb = k0 + r * P + part < nsplit ? fmax(mb, mk[r]) : mb;
        const float mu = mb == neg_inf() ? 0.f : mb;
        const float c = exp2_fast(m_run - mu);   /* 0 while no record had a key; NaN state stays NaN */
        l_run *= c;
#pragma unroll
        for (int j = 0; j < 4; ++j) o[j] *= c;
#pragma unroll
        for (int r = 0; r < RB; ++r) {
            const float w = k0 + r * P + part < nsplit ? exp2_fast(mk[r] - mu) : 0.f;
            l_run = __builtin_fmaf(w, lk[r], l_run);
            const u32x4 x = ak[r];
#pragma unroll
            for (int j = 0; j < 4; ++j) {   /* (clang-19 for gfx11 read element 0 for every j of
                                             * __builtin_bit_cast(float, ak[r][j]): the element is copied first) */
                const u32 bits = x[j];
                o[j] = __builtin_fmaf(w, __builtin_bit_cast(float, bits), o[j]);
            }
        }
        m_run = mb;
    }
}

/* The split merge (decode_args.h "the split merge"): P = r35a_decode_merge_lanes(planned splits)
 * adjacent lanes share one item, a row n of the row group and its 4 consecutive d values
 * 4 (item % (D / 4)). With P = 4 lane `part` runs an online merge over the records part, part + 4,
 * ... (merge_records: 4 or 16 records' loads in flight at a time, as the sequence's split count needs;
 * up to 64 records in one round trip), the lanes combine their partial states (two cross-lane steps),
 * normalize with the row's sink (row_inv) and each writes one of the 4 outputs; with P = 1 (at most 8
 * splits) one lane merges all records in one round trip and writes the 4. The row's LSE (when the
 * call writes it) comes from the merged (m, l) and the sink (row_lse), written by lane 0 of d = 0. No LDS, no barrier; lanes
 * whose item has no row compute on row 0 and write nothing (the cross-lane steps need every lane of
 * the wave). */
template <class E>
R35A_DEV void decode_merge(const r35a_decode_args &a) {
    R35A_TIMING(decode_timing tm; tm.t0 = decode_timing::now();)
    /* Everything up to the records' loads reads only the call's inputs, so it runs before
     * grid_dependency_wait (on NVIDIA the workgroups are resident during the decode launch's tail):
     * the metadata's round trip is off the critical path. */
    const int s = block_z(), y = block_y();
    const int g = y / a.num_row_groups, rg = y - g * a.num_row_groups;
    const seq_meta sq = read_seq(a, s);
    const int q0 = sq.q0, M = sq.M, L = sq.L;
    /* the decode launch wrote these rows (NaN for bad metadata, directly for one split) or skips them:
     * every exit here is uniform over the workgroup */
    if (r35a_paged_sequence_error(s, a.num_seqs, q0, q0 + M, L, a.num_tokens, a.query_len_bound, a.max_seq_len) !=
        R35A_DEVICE_ERROR_NONE)
        return;
    if (M <= 0 || M > a.max_query_len) return;
    const int nsplit = r35a_decode_seq_splits(a.num_splits, r35a_decode_seq_ntiles(L, M, a.window), a.min_split_tiles);
    if (nsplit <= 1) return;
    const int R = a.rows_per_group, D = a.head_size, G = a.group_size, rows = G * M;
    if (rg * R >= rows) return;
    const int P = r35a_decode_merge_lanes(a.num_splits);   /* 1 or 4, uniform */
    const int t = block_x() * R35A_DECODE_MERGE_THREADS + thread_x();
    const int item = P == 4 ? t >> 2 : t, part = t - item * P;
    const int n_item = item / (D / 4), d = 4 * (item - n_item * (D / 4));
    const bool live = n_item < R && rg * R + n_item < rows;
    const int n = live ? n_item : 0;   /* row 0 of the group exists (rg * R < rows) */
    if (!wave_any(live)) return;       /* a whole wave without a row (uniform) */

    const int row = rg * R + n, hl = row / M, i = row - hl * M;
    const float sink2 = sink_base2(a, g * G + hl);
    const i64 rec_floats = r35a_decode_record_floats(R, D);
    grid_dependency_wait();   /* the decode launch's records (programmatic dependent launch on NVIDIA) */
    const float *const grec = (const float *)a.workspace + (((i64)s * a.num_kv_heads + g) * a.num_row_groups + rg) *
                                                               a.num_splits * rec_floats;
    float m_run = neg_inf(), l_run = 0.f, o[4] = {0.f, 0.f, 0.f, 0.f};
    /* as many loads per lane and round trip as its records need (uniform: the sequence's nsplit) */
    if (P == 1) {   /* at most R35A_DECODE_MERGE_FEW_SPLITS records */
        if (nsplit <= 4)
            merge_records<4, 1>(grec, rec_floats, R, D, n, d, 0, nsplit, m_run, l_run, o);
        else
            merge_records<8, 1>(grec, rec_floats, R, D, n, d, 0, nsplit, m_run, l_run, o);
    } else {
        const int per_lane = (nsplit + 3) / 4;
        if (per_lane <= 4)
            merge_records<4, 4>(grec, rec_floats, R, D, n, d, part, nsplit, m_run, l_run, o);
        else
            merge_records<16, 4>(grec, rec_floats, R, D, n, d, part, nsplit, m_run, l_run, o);
    }
    /* the 4 lanes of an item combine their states: after the two steps every one holds the whole */
    if (P == 4) {
        float ob[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) ob[j] = lane_xor_row<1>(o[j]);
        merge_partial(m_run, l_run, o, lane_xor_row<1>(m_run), lane_xor_row<1>(l_run), ob);
#pragma unroll
        for (int j = 0; j < 4; ++j) ob[j] = lane_xor_row<2>(o[j]);
        merge_partial(m_run, l_run, o, lane_xor_row<2>(m_run), lane_xor_row<2>(l_run), ob);
    }
    /* l_run > 0 whenever a record saw a key (its max contributes 1); row_inv gives 0 for a row that
     * saw none and joins the sink */
    const float inv = row_inv(m_run, l_run, sink2);
    /* the row's LSE, when the call writes it (uniform), by the lane of its first item */
    if (a.lse && live && d == 0 && part == 0) store_lse(a, q0 + i, g * G + hl, row_lse(m_run, l_run, sink2));
    u16 *const out = (u16 *)a.out + (i64)(q0 + i) * a.o_token_stride + (i64)(g * G + hl) * a.o_head_stride + d;
    if (P == 4) {
        float mine = o[0];   /* lane `part` writes element d + part (a select, no indexed register) */
#pragma unroll
        for (int j = 1; j < 4; ++j) mine = part == j ? o[j] : mine;
        if (live) store_u16(out + part, E::from_f32(mine * inv));
    } else if (live) {
        /* Four adjacent elements, stored one by one: a row may start at any even byte (O strides are
         * free, e.g. odd), and clang merges four adjacent u16 stores into one global_store_b64 that
         * relies on the driver's unaligned-access mode (the gfx11 emulator, like a strict mode, drops
         * the low address bits: the row landed 2 bytes early, found by the emulator fuzz). The opaque
         * offsets keep the stores apart; the merge writes a few bytes per item, so nothing is lost. */
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            int at = j;
            opaque(at);
            store_u16(out + at, E::from_f32(o[j] * inv));
        }
    }
    R35A_TIMING(tm.done(a, R, D, true);)
}

} /* namespace r35a */

#endif /* R35A_DECODE_MERGE_H */
