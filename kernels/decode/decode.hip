/*
 * decode.hip - paged-KV decode and speculative decode on matrix fragments (gfx11 WMMA; NVIDIA
 * mma.sync through the same sources, kernels/target/fragment.h).
 *
 * One workgroup per (KV split, kv head x row group, sequence); see decode_args.h for the grid and
 * the workspace. All G x M query rows of a kv head (up to R of them, in row tiles) share one pass over
 * the KV cache, so each KV byte of a split is read once.
 *
 * The products run "transposed", with the query rows along the accumulator's n (column) axis:
 *     S^T[key][row]  = K[key][:] . Q[row][:]        A = K tile (16 keys x 16 d),
 *                                                  B = Q^T     (registers, loaded once)
 *     O^T[d][row]   += V^T[d][key] . P^T[key][row]  A = V^T     (the V tile read transposed),
 *                                                  B = P^T     (the S^T accumulator, re-packed)
 * so a query row's softmax statistics are per accumulator column and the rescale of O by the
 * running-max correction is a per-column multiply.
 *
 * KV streaming is a software pipeline of S stages (frag::kv_pipe_*, from the fragment layer): each
 * wave issues the loads of its tile i + S - 1 (and its block-table entry was loaded 32 tiles ago)
 * before it computes tile i, so S - 1 tiles stay in flight across the products. gfx11 stages tiles
 * in registers (K as operand fragments, V transposed through LDS right before use); NVIDIA in shared
 * memory by cp.async (K by ldmatrix, V by ldmatrix.trans).
 *
 * Waves: NW = KW x DW x RW. The KW key groups take 16-key tiles round-robin, each with its own online
 * softmax; the DW waves of a key group split the head dimension into DW slices of DS = D / DW
 * (each owns its slice of Q, K, V and O) and add their partial S^T tiles through LDS by
 * reduce-scatter (two LDS-only barriers per tile). The RW row waves split the R rows into RW
 * parts of T / RW row tiles on the same keys (each row wave has its own S^T exchange); where the
 * stages are in shared memory (NVIDIA) they share one pipeline (each copies its share of a tile; a
 * named barrier per tile), so a rows-32 workgroup reads its KV once with the registers of a rows-16
 * wave (two rows-16 row groups read it twice). Key groups merge through LDS at the end of the
 * split; splits write partial records to the workspace, and the merge kernel (decode_merge_<dtype>,
 * at the end of this file), launched next on the same stream, combines them, all rows and d of all
 * groups in parallel (decode_args.h "the split merge"). A sequence uses r35a_decode_seq_splits() of
 * the planned splits (fewer when it is short), each a balanced share of its tiles.
 *
 * Model features (decode_args.h): the logit transform (softcap, then ALiBi) runs in the loop only when
 * the call has one (a uniform branch per tile); attention sinks join each row's denominator once,
 * where the row is normalized (the single split's store or the split merge). The K/V element format
 * is compiled in (variants: the table's kv column): 16-bit (the Q/O dtype) or 8-bit (fp8 e4m3,
 * int8), whose tiles move half the bytes and are dequantized in registers to the Q/O dtype
 * (device.h kv8x2); the caller's scales (times the conversion's unit) join the logit scale (K) and
 * the output normalization (V). (One kernel body per format: two bodies in one kernel made clang
 * spill SGPRs in every variant.)
 *
 * Rows 8 on NVIDIA (variants/sm_90.tsv): a second fragment layer, decode/rows8_nv.h, holds the query
 * rows as the products' n = 8 (16 on every other layer), and the body (decode_body.h) is compiled for
 * it too (namespace r35a::n8): no product, exponent or shuffle then works on padding rows when a kv
 * head has G x M <= 8 rows. (None is enabled in the table yet: variants/sm_90.tsv says why.)
 * Rows 4 on gfx11 (variants/gfx1151.tsv): likewise decode/rows4_gfx11.h, 4-row tiles whose products are
 * v_dot2 instead of WMMA (namespace r35a::d4): a kv head with G x M <= 4 rows no longer pays for 12
 * padding rows of a 16 x 16 x 16 WMMA; its 8-bit K is converted half a row per half-wave.
 *
 * Compile-time: element type, K/V element format, D, R (rows per workgroup, in ceil(R / 16) row
 * tiles; R / 8 on the rows-8 layer, R / 4 on the rows-4 one), KW, DW, RW, WAVES (the occupancy
 * contract), and the policies the table row names (variants/<arch>.tsv): the fragment layer, the KV
 * pipeline (registers, shared-memory stages private or shared by the row waves; the stage count)
 * and where Q^T lives (registers, staged through LDS once, read from LDS per tile). decode_cfg lays
 * them out and fails the build where the LDS of the occupancy contract cannot hold them.
 * Run-time: page size (any multiple of 16), strides, G, M (per sequence), window, scale, splits,
 * softcap, ALiBi, sinks, the 8-bit scales (per tensor or per kv head).
 *
 * Bad device metadata (device_error.h): one scalar check of the sequence's entries per workgroup
 * before anything is read (a bad sequence's rows are written as NaN and recorded), one compare per
 * block-table entry as it is read (a page outside the cache is never dereferenced: page 0 is
 * streamed instead and the wave's softmax state is made NaN, which every merge carries to O).
 * Non-finite values: a NaN or +inf logit makes p (hence l and O) NaN in its row and every merge
 * multiplies it in (NaN x 0 is NaN), a -inf one gives p = 0; keys no row reaches are zeroed in the
 * staged V tile, so their values never meet a product. A key that some rows of the sequence and kv
 * head see and others do not (the first and last tiles' edges) shares the products of the tile:
 * its NaN / Inf value elements reach those elements of the other rows too (p = 0 times NaN).
 */
#include "common/device.h"
#include "common/device_error.h"
#include "decode/decode_layers.h"
#include "decode/decode_args.h"

namespace r35a {

/* The policies a variant's table row names (variants/<arch>.tsv): its KV pipeline (pipe) and where
 * its Q^T lives (q); the macro R35A_DECODE_VARIANT pastes the row's words onto these names. */
enum { DECODE_PIPE_regs = 0, DECODE_PIPE_lds = 1, DECODE_PIPE_lds_shared = 2 };
enum { DECODE_Q_regs = 0, DECODE_Q_staged = 1, DECODE_Q_lds = 2 };

constexpr int cmax(int a, int b) { return a > b ? a : b; }
constexpr float LOG2E_F = 1.4426950408889634f;

/* Keeps the scheduler from hoisting every chunk's operand loads ahead of the products (on gfx11 it
 * would hold all V^T fragments of a tile at once: NC x 8 VGPRs). */
#ifndef R35A_DECODE_CHUNK_FENCE
#define R35A_DECODE_CHUNK_FENCE() sched_barrier()
#endif

/* Merging two partial softmax states of one row whose base-2 maxima are ma and mb: returns the
 * merged max and sets the factors 2^(ma - mu), 2^(mb - mu) that rescale each side (mu: the max, or 0
 * where neither saw a key, so never -inf - -inf). A NaN state stays NaN. The key-group merge and
 * the split merge's cross-lane combine both use it. */
R35A_DEV float merge_scales(float ma, float mb, float &ca, float &cb) {
    const float mx = fmax(ma, mb), mu = mx == neg_inf() ? 0.f : mx;
    ca = exp2_fast(ma - mu);
    cb = exp2_fast(mb - mu);
    return mx;
}

/* A wave's KV pipeline on its LDS region: a shared one (kv_pipe_lds with SHARERS > 1) also takes the
 * wave's share of each tile (its row wave) and the sharers' named barrier. */
template <class P>
R35A_DEV P make_pipe(unsigned char *region, int sharer, int barrier) {
    if constexpr (P::SHARERS > 1) {
        return P(region, sharer, barrier);
    } else {
        (void)sharer;
        (void)barrier;
        return P(region);
    }
}

/* The tiles one wave of a workgroup streams: split `split` of the sequence's whole tiles (split evenly
 * over the splits it uses, decode_args.h), every KW-th from the key group's kg: for the kernel body
 * and its table guess (the merge counts its records with the same decode_args.h rules). */
struct wave_tiles {
    int nsplit, t_begin, t_end, mine;   /* splits the sequence uses, the split's [t_begin, t_end), the wave's count */
};
R35A_DEV wave_tiles split_wave_tiles(int L, int M, int W, int planned, int min_tiles, int split, int kg, int kw) {
    wave_tiles r;
    const int tile_lo = r35a_decode_seq_tile_lo(L, M, W), ntiles = r35a_decode_seq_ntiles(L, M, W);
    r.nsplit = r35a_decode_seq_splits(planned, ntiles, min_tiles);
    r.t_begin = tile_lo + r35a_decode_split_first_tile(split, r.nsplit, ntiles);
    r.t_end = tile_lo + r35a_decode_split_first_tile(split + 1, r.nsplit, ntiles);
    r.mine = r.t_end - r.t_begin > kg ? (r.t_end - r.t_begin - kg + kw - 1) / kw : 0;
    return r;
}
/* Tile of a wave's step i, clamped to its last one (to t_begin for a wave without tiles). */
R35A_DEV int wave_tile(const wave_tiles &r, int i, int kg, int kw) {
    return r.mine > 0 ? r.t_begin + imin(i, r.mine - 1) * kw + kg : r.t_begin;
}

/* The first block of a wave's block-table entries, read before the sequence's metadata arrives:
 * the entries of the tiles the wave would take if the sequence had max_seq_len keys and one query
 * (a decode step at batch 1, as plans are made). tile_feed::start keeps them when the real tiles
 * turn out the same for every lane, so the first KV loads wait for one round trip (the metadata
 * and the table together) instead of two. Reads stay in bounds: the host checked that a row of the
 * table holds ceil(max_seq_len / page_size) entries. idx -1: no guess (the workgroup would have no
 * tiles). */
struct table_guess {
    int idx, entry;
};
R35A_DEV table_guess guess_table_block(const r35a_decode_args &a, int s, int split, int kg, int kw) {
    table_guess g;
    g.idx = -1;
    g.entry = 0;
    const wave_tiles r = split_wave_tiles(a.max_seq_len, 1, a.window, a.num_splits, a.min_split_tiles, split, kg, kw);
    if (split >= r.nsplit || r.mine <= 0) return g;   /* uniform */
    g.idx = wave_tile(r, lane_id(), kg, kw) * 16 / a.page_size;
    g.entry = load_i32(a.block_table + (i64)s * a.block_table_stride + g.idx);
    return g;
}

/* Where a wave's tiles come from: its tile i is tile t_begin + i * KW + kg of the sequence. The
 * block-table entries are read 32 tiles at a time, one per lane (page and slot of tile 32b + lane),
 * a block ahead of use, so issuing a tile never waits for its table entry; issue() picks the
 * entry with a lane read and starts the tile's loads. The one place KV addresses are formed (and
 * where a check of the entries against the cache's page count would go).
 * Pipelines that count their loads in order (gfx11's vmcnt: registers, P::ISSUE_ALWAYS) issue a
 * load every step: a step past the wave's last tile reloads that tile (a cache hit, never used), so
 * every path through the loop issues the same loads and the compiler's waits stay exact (a load
 * issued on one path only makes it wait for everything, the next tile's loads included). */
struct tile_feed {
    const int32_t *bt;
    const char *k_base, *v_base;   /* this kv head's d slice in page 0 slot 0 */
    i64 k_page, v_page, k_slot, v_slot;   /* bytes */
    int B, L, lo, kw, kg, num_pages;
    wave_tiles r;                 /* the wave's tiles */
    int page_cur, slot_cur, page_next, slot_next;
    bool bad;                     /* this lane read a block-table entry outside 0..num_pages-1 */

    R35A_MEMBER int tile_of(int i) const { return wave_tile(r, i, kg, kw); }
    /* block b's table index of this lane (its tile 32 b + lane) and the tile's first slot in the page */
    R35A_MEMBER int table_index(int b, int &slot) const {
        const int key = tile_of(32 * b + lane_id()) * 16, idx = key / B;
        slot = key - idx * B;
        return idx;
    }
    R35A_MEMBER int checked_page(int entry) {
        const bool ok = r35a_page_index_ok(entry, num_pages);   /* one compare per page entry */
        bad |= !ok;
        return ok ? entry : 0;
    }
    R35A_MEMBER void table_block(int b, int &page, int &slot) { page = checked_page(load_i32(bt + table_index(b, slot))); }
    /* block 0 from the guess where every lane's index agrees (uniform), else read now */
    R35A_MEMBER void start(const table_guess &guess) {
        const int idx = table_index(0, slot_cur);
        int entry = guess.entry;
        if (wave_any(idx != guess.idx)) entry = load_i32(bt + idx);
        page_cur = checked_page(entry);
        if (r.mine > 32) table_block(1, page_next, slot_next);
    }
    template <class P>
    R35A_MEMBER void issue(P &pipe, int slot, int i) {
        const int mine = r.mine;
        if (!P::ISSUE_ALWAYS && i >= mine) {   /* uniform: this wave has no tile i */
            pipe.skip(slot);
            return;
        }
        if (i > 0 && (i & 31) == 0 && i < mine) {   /* the next block of table entries; load the one after */
            page_cur = page_next;
            slot_cur = slot_next;
            if (mine > i + 32) table_block((i >> 5) + 1, page_next, slot_next);
        }
        const int tile = tile_of(i), lane = (i < mine ? i : imax(mine - 1, 0)) & 31;
        const i64 page = read_lane(page_cur, lane);
        const i64 slot_in_page = read_lane(slot_cur, lane);
        pipe.issue(slot, k_base + page * k_page + slot_in_page * k_slot, v_base + page * v_page + slot_in_page * v_slot,
                   k_slot, v_slot, imin(16, L - 16 * tile), imax(lo - 16 * tile, 0));
    }
};

/* Softcap in base 2: s -> cap x tanh(s_nat / cap) x log2(e) for a raw dot s (s_nat = s x sl2 / log2 e),
 * with tanh|x| = (1 - e^-2|x|) / (1 + e^-2|x|) (device.h tanh_fast) and the constants folded:
 * 5 VALU and 2 transcendentals per logit. */
struct softcap_rule {
    float kneg, cap2;   /* -2 log2(e) / cap x (the natural scale), cap x log2(e) */
    R35A_DEV softcap_rule make(float cap, float sl2) {
        softcap_rule r;
        r.cap2 = cap * LOG2E_F;
        r.kneg = cap > 0.f ? -2.f * sl2 / cap : 0.f;   /* -2.885 x (s_nat / cap) = -2 x s x sl2 / cap */
        return r;
    }
    R35A_MEMBER float operator()(float s) const {
        const float t = exp2_fast(kneg * __builtin_fabsf(s));
        return __builtin_copysignf(__builtin_fmaf(-cap2, t, cap2) * rcp_fast(1.f + t), s);
    }
};

/* The one place a row is normalized: 1 / (its softmax denominator), the sink joining the denominator
 * here, once (m, l: the row's base-2 running max and sum over all its keys; sink2: its sink logit in
 * base 2, -inf for none). A row that saw no key (m = -inf) gives 0 whatever the sink; a NaN or +inf
 * sink gives NaN (the row's whole output). */
R35A_DEV float row_inv(float m, float l, float sink2) {
    if (m == neg_inf()) return 0.f;
    const float mu = fmax(m, sink2), cm = exp2_fast(m - mu);
    return cm * rcp_fast(l * cm + exp2_fast(sink2 - mu));
}

/* A query row's sink logit in base 2 (-inf without sinks). */
R35A_DEV float sink_base2(const r35a_decode_args &a, int h) { return a.sinks ? load_f32(a.sinks + h) * LOG2E_F : neg_inf(); }

/* Where a sequence's query rows and keys are: the one place its metadata is read. */
struct seq_meta {
    int q0, M, L;
};
R35A_DEV seq_meta read_seq(const r35a_decode_args &a, int s) {
    seq_meta m;
    m.q0 = a.query_start_loc[s];
    m.M = a.query_start_loc[s + 1] - m.q0;
    m.L = a.seq_lens[s];
    return m;
}

/* R35A_DECODE_TIMING=1 (a measurement build, NVIDIA only, never the default): thread 0 of each
 * workgroup that has tiles writes 16 u64 to the workspace past the planned bytes (the caller
 * allocates 128 bytes per workgroup of both launches): globaltimer ns at entry, loop end and exit
 * (the single-split path: before its O store), SM | kind << 32 (kind 0: a decode workgroup, 1: a
 * merge workgroup, whose slots follow the decode grid's and whose loop end is its exit). Read by
 * tools/decode_timeline.py. */
#if defined(R35A_DECODE_TIMING) && R35A_DECODE_TIMING && defined(R35A_TARGET_CUDA)
struct decode_timing {
    unsigned long long t0, t1;
    R35A_MEMBER static unsigned long long now() {
        unsigned long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        return t;
    }
    R35A_MEMBER void mark() { t1 = now(); }
    /* id: the workgroup's slot (decode: its grid index; merge: the decode grid's size + its index) */
    R35A_MEMBER void done(const r35a_decode_args &a, int rows_per_group, int head, bool merge) {
        if (threadIdx.x != 0 || !a.workspace) return;   /* a single-split plan passes no workspace */
        unsigned sm;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        const long long base = r35a_decode_workspace_bytes(a.num_seqs, a.num_kv_heads, a.num_row_groups, a.num_splits,
                                                           rows_per_group, head);
        long long id = ((long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
        if (merge) id += (long long)a.num_splits * gridDim.y * gridDim.z;
        unsigned long long *rec = (unsigned long long *)((char *)a.workspace + base) + 16 * id;
        rec[0] = t0;
        rec[1] = merge ? now() : t1;
        rec[2] = now();
        rec[3] = sm | ((unsigned long long)merge << 32);
    }
};
#define R35A_TIMING(...) __VA_ARGS__
#else
#define R35A_TIMING(...)
#endif

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
 * splits) one lane merges all records in one round trip and writes the 4. No LDS, no barrier; lanes
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

/* A sequence whose metadata fails its check: its rows of kv head g become NaN (all M tokens, every
 * one of the G query heads, whatever the row groups and splits cover) when its query_start_loc
 * range is sound, and thread 0 of kv head 0 records it. Called by the workgroup of split 0 and row
 * group 0 of each kv head; the error path only. */
template <class E, int D, int THREADS>
R35A_DEV void bad_sequence(const r35a_decode_args &a, u32 code, int s, int g, int q0, int q1) {
    if (code != R35A_DEVICE_ERROR_QUERY_START_LOC) {
        const int M = q1 - q0, G = a.group_size;
        const u16 nan = E::from_f32(quiet_nan());
        for (i64 idx = thread_x(); idx < (i64)M * G * D; idx += THREADS) {
            const int d = (int)(idx % D), row = (int)(idx / D), hl = row % G, i = row / G;
            store_u16((u16 *)a.out + (i64)(q0 + i) * a.o_token_stride + (i64)(g * G + hl) * a.o_head_stride + d, nan);
        }
    }
    if (g == 0 && thread_x() == 0) report_bad_data(a.error, code, (u32)s);
}

/* The element format of a variant's K and V: kv16 (the Q/O dtype E), fp8, int8 (device.h). */
struct kv_kv16_t {};
template <class E, class K>
struct kv_type {
    typedef K type;
};
template <class E>
struct kv_type<E, kv_kv16_t> {
    typedef E type;
};

/* The configuration, softmax state, stores and kernel body, on the target's fragment layer. */
#include "decode_body.h"

#if defined(R35A_FRAG_HAS_N8)
/* ... and again on the 8-row layer (decode/rows8_nv.h), for the variants with rows 8 */
namespace n8 {
namespace frag = ::r35a::frag_n8;
#include "decode_body.h"
} /* namespace n8 */
#endif
#if defined(R35A_FRAG_HAS_D4)
/* ... and again on the 4-row layer (decode/rows4_gfx11.h), for the variants with rows 4 */
namespace d4 {
namespace frag = ::r35a::frag_d4;
#include "decode_body.h"
} /* namespace d4 */
#endif

/* The fragment layer a variant's body runs on (variants/<arch>.tsv layer): the target's (wmma16 on
 * gfx11, mma16 on NVIDIA: 16-row tiles), gfx11's 4-row v_dot2 layer (dot4: the body in namespace d4)
 * or NVIDIA's 8-row mma layer (mma8: namespace n8). */
enum { DECODE_LAYER_TARGET = 0, DECODE_LAYER_N8 = 1, DECODE_LAYER_D4 = 2 };
template <class E, class KV, int D, int R, int KW, int DW, int RW, int WAVES, int LAYER, int PIPE, int S, int QPLACE>
struct decode_entry {
    static_assert(LAYER != LAYER, "layer: this target has no such fragment layer");
};
template <class E, class KV, int D, int R, int KW, int DW, int RW, int WAVES, int PIPE, int S, int QPLACE>
struct decode_entry<E, KV, D, R, KW, DW, RW, WAVES, DECODE_LAYER_TARGET, PIPE, S, QPLACE> {
    typedef decode_cfg<E, KV, D, R, KW, DW, RW, WAVES, PIPE, S, QPLACE> cfg;
    R35A_MEMBER static void run(const r35a_decode_args &a) { decode_kernel<E, KV, D, R, KW, DW, RW, WAVES, PIPE, S, QPLACE>(a); }
};
#if defined(R35A_FRAG_HAS_N8)
template <class E, class KV, int D, int R, int KW, int DW, int RW, int WAVES, int PIPE, int S, int QPLACE>
struct decode_entry<E, KV, D, R, KW, DW, RW, WAVES, DECODE_LAYER_N8, PIPE, S, QPLACE> {
    typedef n8::decode_cfg<E, KV, D, R, KW, DW, RW, WAVES, PIPE, S, QPLACE> cfg;
    R35A_MEMBER static void run(const r35a_decode_args &a) {
        n8::decode_kernel<E, KV, D, R, KW, DW, RW, WAVES, PIPE, S, QPLACE>(a);
    }
};
#endif
#if defined(R35A_FRAG_HAS_D4)
template <class E, class KV, int D, int R, int KW, int DW, int RW, int WAVES, int PIPE, int S, int QPLACE>
struct decode_entry<E, KV, D, R, KW, DW, RW, WAVES, DECODE_LAYER_D4, PIPE, S, QPLACE> {
    typedef d4::decode_cfg<E, KV, D, R, KW, DW, RW, WAVES, PIPE, S, QPLACE> cfg;
    R35A_MEMBER static void run(const r35a_decode_args &a) {
        d4::decode_kernel<E, KV, D, R, KW, DW, RW, WAVES, PIPE, S, QPLACE>(a);
    }
};
#endif

} /* namespace r35a */

/* A table row's policy words (layer, pipe, stages, q) as decode_entry's parameters. The gfx11-emulation
 * test build (R35A_FRAGMENT_EMULATE_GFX11=1: NVIDIA's tables run on gfx11's lane layouts) has one
 * layer and no shared-memory stages: it runs every row on that layer with two register stages and
 * Q^T in LDS, whatever the row names. */
#define R35A_DECODE_LAYER_wmma16 r35a::DECODE_LAYER_TARGET
#define R35A_DECODE_LAYER_mma16 r35a::DECODE_LAYER_TARGET
#define R35A_DECODE_LAYER_dot4 r35a::DECODE_LAYER_D4
#define R35A_DECODE_LAYER_mma8 r35a::DECODE_LAYER_N8
#if defined(R35A_FRAGMENT_EMULATE_GFX11) && R35A_FRAGMENT_EMULATE_GFX11
#define R35A_DECODE_POLICY(layer, pipe, stages, q) r35a::DECODE_LAYER_TARGET, r35a::DECODE_PIPE_regs, 2, r35a::DECODE_Q_lds
#else
#define R35A_DECODE_POLICY(layer, pipe, stages, q)                                                         \
    R35A_DECODE_LAYER_##layer, r35a::DECODE_PIPE_##pipe, stages, r35a::DECODE_Q_##q
#endif

/* NVIDIA: the dynamic shared memory a variant is launched with is exactly what its layout uses,
 * published as the device global <name>_lds_bytes, which the host reads at module load
 * (src/gpu_runtime.c): the one place the size is decided is decode_cfg. (A launch with the whole
 * budget of the occupancy contract instead would let fewer workgroups share an SM than fit.) */
#define R35A_DECODE_ENTRY(dtype, kv, D, R, KW, DW, RW, WAVES, layer, pipe, stages, q)                      \
    r35a::decode_entry<r35a::dtype##_t, r35a::kv_type<r35a::dtype##_t, r35a::kv_##kv##_t>::type, D, R, KW, DW, RW, WAVES, \
                       R35A_DECODE_POLICY(layer, pipe, stages, q)>
#if defined(R35A_TARGET_CUDA)
#define R35A_DECODE_LDS_SYMBOL(name, ...)                                                                  \
    extern "C" __device__ const int name##_lds_bytes = R35A_DECODE_ENTRY(__VA_ARGS__)::cfg::LDS_BYTES;
#else
#define R35A_DECODE_LDS_SYMBOL(name, ...)
#endif

/* One extern "C" kernel per variant; the symbol is the variant name. */
#define R35A_DECODE_VARIANT(arch, name, dtype, kv, D, R, KW, DW, RW, WAVES, layer, pipe, stages, q)         \
    R35A_DECODE_LDS_SYMBOL(name, dtype, kv, D, R, KW, DW, RW, WAVES, layer, pipe, stages, q)               \
    R35A_KERNEL R35A_KERNEL_BOUNDS(32 * (KW) * (DW) * (RW), WAVES) void name(r35a_decode_args a) {         \
        R35A_DECODE_ENTRY(dtype, kv, D, R, KW, DW, RW, WAVES, layer, pipe, stages, q)::run(a);             \
    }
/* A tool may point R35A_DECODE_VARIANT_LIST at its own list of R35A_DECODE_VARIANT(...) lines
 * (tools/tune_variants.py compiles candidate tilings this way). */
#ifdef R35A_DECODE_VARIANT_LIST
#include R35A_DECODE_VARIANT_LIST
#else
#include "variants.def"
#endif
#undef R35A_DECODE_VARIANT
#undef R35A_DECODE_LDS_SYMBOL
#undef R35A_DECODE_ENTRY
#undef R35A_DECODE_POLICY

/* The split merge of every variant of a Q/O dtype (decode_args.h "the split merge"): launched after a
 * decode kernel whose plan has more than one split, with the same argument struct. No LDS; 4 waves
 * per SIMD at least: 16 records' loads in flight take ~100 registers (at 8 waves, NVIDIA's 64
 * registers spilled 392 bytes). */
R35A_KERNEL R35A_KERNEL_BOUNDS(R35A_DECODE_MERGE_THREADS, 4) void decode_merge_f16(r35a_decode_args a) {
    r35a::decode_merge<r35a::f16_t>(a);
}
R35A_KERNEL R35A_KERNEL_BOUNDS(R35A_DECODE_MERGE_THREADS, 4) void decode_merge_bf16(r35a_decode_args a) {
    r35a::decode_merge<r35a::bf16_t>(a);
}
