/*
 * decode_args.h - the WMMA paged decode / speculative decode kernels (kernels/decode/decode.hip): their
 * by-value argument, the host formulas that go with it (row groups, split count, grid, workgroup
 * size, workspace layout) and the rules a call must meet to run on them (the kernel's own
 * IsSupportedArgument: the planner and the tests call these, nobody restates them).
 *
 * Included by C11 host code (src/, tests/) and by the device code. Units: strides and offsets in
 * ELEMENTS of the tensor's dtype (K and V: of kv_dtype, one byte for the 8-bit caches), int64
 * wherever a cache, Q/O buffer or table can exceed 2^31 elements. Pointers are device pointers.
 *
 * Every decode kernel serves, at run time: softcap and ALiBi (the logit transform runs in the key
 * loop only when set) and attention sinks (joined where a row is normalized). The K/V element
 * format (the Q/O dtype, fp8 e4m3 or int8 with scales per tensor or per kv head) is the kernel's.
 *
 * Kernels: decode_<dtype>[_<kv>]_d<D>_r<R>_kw<KW>_dw<DW>_w<waves>   (variants/variants.def,
 * R35A_DECODE_VARIANT; kv: fp8 or int8 for an 8-bit K/V cache, nothing when K and V have the dtype),
 * and per dtype the split merge decode_merge_<dtype> (every decode code object has both), launched
 * after a decode kernel whose plan has more than one split (see "the split merge" below).
 *
 * One workgroup per (split, kv head x row group, sequence):
 *     grid = { num_splits, num_kv_heads * num_row_groups, num_seqs },  block = { 32 * KW * DW }.
 * A row group is R consecutive query rows of one kv head; the G * M rows of (sequence s, kv head g)
 * are ordered row = h_local * M + i (query head g*G + h_local, query token i). The kernel serves
 * sequences with 1 <= M <= max_query_len and skips the others (M = 0: nothing to write; M larger:
 * the generic kernel serves them in the same call).
 *
 * Every decode kernel writes the softmax LSE when args.lse is set (a uniform run-time branch where a
 * row is normalized): from the row's base-2 state (m, l) and its sink, (mu + log2(l 2^(m - mu) +
 * 2^(sink - mu))) x ln 2 with mu = max(m, sink), -inf for a row that saw no key, NaN where the row's
 * O is NaN (softmax.h row_lse).
 *
 * Bad device metadata (device_error.h): a sequence that fails r35a_paged_sequence_error has its rows
 * (and their LSE) written as NaN by the workgroups of split 0 and row group 0 (one per kv head) when
 * its query_start_loc range is sound, and recorded; a block_table entry outside the cache met while
 * streaming is replaced by page 0 (read, never used: the (sequence, kv head, row group)'s rows and
 * LSE come out NaN) and recorded.
 */
#ifndef R35A_DECODE_ARGS_H
#define R35A_DECODE_ARGS_H

#include "common/host_device.h"
#include "common/window.h"
#include "common/occupancy.h"
#include "common/kv_format.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct r35a_decode_args {
    const void *q;                   /* [tokens][num_kv_heads * group_size][D], dtype */
    const void *k_cache;             /* pages of kv_dtype elements; rows 16-byte aligned */
    const void *v_cache;
    void *out;                       /* like q */
    const int32_t *seq_lens;         /* [num_seqs] */
    const int32_t *query_start_loc;  /* [num_seqs + 1] */
    const int32_t *block_table;      /* [num_seqs * block_table_stride] */
    void *workspace;                 /* r35a_decode_workspace_bytes() bytes; NULL when num_splits == 1 */
    const float *sinks;              /* [num_kv_heads * group_size] raw sink logits, or NULL (none) */
    const float *alibi_slopes;       /* [num_kv_heads * group_size], or NULL (no ALiBi) */
    const float *k_scale, *v_scale;  /* 8-bit KV: [1] or [num_kv_heads] (kv_scale_per_head); else NULL */
    uint32_t *error;                 /* the context's device error record (device_error.h) */

    int64_t q_token_stride, q_head_stride;   /* multiples of R35A_DECODE_ROW_ALIGN */
    int64_t o_token_stride, o_head_stride;
    /* K and V, in kv_dtype elements: multiples of r35a_decode_kv_row_align(its bytes per element) */
    int64_t k_page_stride, k_head_stride, k_slot_stride;
    int64_t v_page_stride, v_head_stride, v_slot_stride;
    int64_t block_table_stride;

    int32_t num_seqs;
    int32_t num_kv_heads;
    int32_t group_size;              /* G = num_q_heads / num_kv_heads */
    int32_t page_size;               /* any multiple of R35A_DECODE_PAGE_MULTIPLE */
    int32_t window;                  /* 0 = none */
    int32_t max_query_len;           /* serve sequences with M <= this (<= R, and <= 8 by design) */
    int32_t num_row_groups;          /* r35a_decode_num_row_groups() */
    int32_t num_splits;              /* >= 1; r35a_decode_num_splits() */
    /* The bounds the device metadata is checked against (device_error.h): a sequence's rows must lie
     * in 0..num_tokens, its seq_len in 0..max_seq_len, its M at most query_len_bound (the
     * descriptor's max_query_len; max_query_len above is what this launch serves), every reached
     * block_table entry in 0..num_pages-1. */
    int32_t num_tokens;
    int32_t num_pages;
    int32_t max_seq_len;
    int32_t query_len_bound;
    float scale_log2;                /* softmax_scale * log2(e): logits are computed in base 2 */
    float logit_softcap;             /* 0 = off; > 0: cap * tanh(s / cap), then ALiBi */
    int32_t kv_scale_per_head;       /* 8-bit KV: scales indexed by kv head (1) or not (0) */
    /* The split records' shape (the variant's R and D: the merge kernel reads records of this many
     * rows and floats) and the fewest tiles a split may take (r35a_decode_seq_splits). */
    int32_t rows_per_group;
    int32_t head_size;
    int32_t min_split_tiles;
    int32_t reserved;
    /* The softmax LSE output (rdna35attn.h "Softmax LSE"), or NULL (none): lse[t * lse_token_stride +
     * h * lse_head_stride] for query token t, query head h, in floats. Written where a row is
     * normalized: by the single split's workgroup, or by the split merge. */
    float *lse;
    int64_t lse_token_stride, lse_head_stride;
} r35a_decode_args;

/* ---- the rules a call must meet (the planner falls back to the portable kernel otherwise) ---- */

/* Largest M (query tokens per sequence) the decode kernels serve, by design. */
#define R35A_DECODE_MAX_QUERY_LEN 8
/* A 16-key tile never straddles a page: the page size is a multiple of the tile. */
#define R35A_DECODE_PAGE_MULTIPLE 16
/* Q, K and V rows are read with 128-bit loads (and copies): every row starts 16 bytes after the
 * previous one's start at a multiple, i.e. Q strides are multiples of 8 16-bit elements, K and V
 * strides multiples of 16 / (bytes per element) elements (8 for a 16-bit cache, 16 for an 8-bit
 * one), and q, k_cache, v_cache (and the workspace) are 16-byte aligned. */
#define R35A_DECODE_ROW_BYTES 16
#define R35A_DECODE_ROW_ALIGN 8
#define R35A_DECODE_POINTER_ALIGN 16

R35A_HD int r35a_decode_page_size_ok(int32_t page_size) {
    return page_size > 0 && page_size % R35A_DECODE_PAGE_MULTIPLE == 0;
}
/* A Q stride (16-bit elements). */
R35A_HD int r35a_decode_stride_ok(int64_t stride) { return stride % R35A_DECODE_ROW_ALIGN == 0; }
/* Elements of a K or V row alignment unit, for elements of kv_elem_bytes (1 or 2) bytes. */
R35A_HD int32_t r35a_decode_kv_row_align(int32_t kv_elem_bytes) { return R35A_DECODE_ROW_BYTES / kv_elem_bytes; }
/* A K or V stride, in elements of kv_elem_bytes bytes. */
R35A_HD int r35a_decode_kv_stride_ok(int64_t stride, int32_t kv_elem_bytes) {
    return stride % r35a_decode_kv_row_align(kv_elem_bytes) == 0;
}
R35A_HD int r35a_decode_pointer_ok(const void *p) { return (uintptr_t)p % R35A_DECODE_POINTER_ALIGN == 0; }

/* ---- launch formulas ---- */

/* Tuning constants of the split planner. */
#define R35A_DECODE_MAX_SPLITS 64
#define R35A_DECODE_WGS_PER_CU 2           /* workgroups per CU the splits aim at (bandwidth saturation) */
/* The fewest 16-key tiles a split takes (the plan's min_split_tiles). A split costs one record (rows
 * x D floats written, then read by the merge kernel: 6 % of a 4-tile split's KV bytes at 4 rows, 25 %
 * at 16, L2-resident) and a workgroup's fixed latency chain; more splits put more round trips in
 * flight where the batch alone leaves the device idle. Measured on an H200 with lab/decode_ab.py
 * (R35A_DECODE_MIN_SPLIT_TILES=4 against 16): 4 tiles (64 keys) made batch 1 at 1K keys 1.15x faster
 * (D 128 G 4: 12.1 -> 10.4 us) and changed nothing at longer contexts, where the resident-workgroup
 * cap sets the count.
 * gfx11 takes the same rule (its 40 CUs are filled at short contexts the same way; not measured). */
#define R35A_DECODE_MIN_TILES_PER_SPLIT 4
/* SIMDs per compute unit, for the resident-workgroup count of an occupancy contract, come from the
 * arch table (variants/archs.tsv `simds_per_cu`): a gfx11 CU has 2 SIMD32 (a WGP, which ROCm reports
 * as one multiprocessor on RDNA, has 4); an NVIDIA SM (the planner's CU there) has 4 sub-partitions. */

R35A_HD int32_t r35a_decode_num_row_groups(int32_t group_size, int32_t max_query_len, int32_t rows_per_group) {
    int64_t rows = (int64_t)group_size * max_query_len;
    return (int32_t)((rows + rows_per_group - 1) / rows_per_group);
}

/* Keys one sequence's rows can reach, rounded out to whole 16-key tiles: what the splits share. */
R35A_HD int64_t r35a_decode_max_tiles(int32_t max_seq_len, int32_t max_query_len, int32_t window) {
    const int64_t keys = r35a_window_reach(max_seq_len, max_query_len, window);
    return (keys + 15) / 16 + 1; /* +1: the reached range need not start on a tile boundary */
}

/* The 16-key tiles a sequence of L keys and M query tokens reaches on the device: [tile_lo,
 * tile_lo + ntiles), from the earliest key any of its rows sees (its window) to its last key. The
 * one formula the decode and merge kernels share. */
R35A_HD int32_t r35a_decode_seq_tile_lo(int32_t L, int32_t M, int32_t window) {
    return (int32_t)(r35a_window_first_key(L - M, window) >> 4);
}
R35A_HD int32_t r35a_decode_seq_ntiles(int32_t L, int32_t M, int32_t window) {
    const int32_t hi = ((L > 0 ? L : 0) + 15) >> 4, n = hi - r35a_decode_seq_tile_lo(L, M, window);
    return n > 0 ? n : 0;
}

/* Splits one sequence really uses, on the device, from its own tile count: the planned count (the
 * grid's x, made for max_seq_len) or fewer, so that every split keeps at least min_tiles tiles.
 * Workgroups with split >= this exit at once, the merge kernel merges this many records, and with 1
 * the only workgroup writes O directly (no record). A plan for a long max_seq_len thus costs short
 * sequences nothing. */
R35A_HD int32_t r35a_decode_seq_splits(int32_t planned, int64_t tiles, int32_t min_tiles) {
    int64_t by_len = tiles / (min_tiles > 0 ? min_tiles : 1);
    if (by_len < 1) by_len = 1;
    return by_len < planned ? (int32_t)by_len : planned;
}

/* Split `split` of nsplit takes tiles [first, first + count) of the sequence's ntiles (relative to
 * its tile_lo): balanced, every split ceil or floor of ntiles / nsplit tiles. */
R35A_HD int32_t r35a_decode_split_first_tile(int32_t split, int32_t nsplit, int32_t ntiles) {
    return (int32_t)((int64_t)split * ntiles / nsplit);
}

/* Workgroups of a variant resident on one CU at once, from its occupancy contract (waves per SIMD)
 * and its waves per workgroup. */
R35A_HD int32_t r35a_decode_resident_wgs_per_cu(int32_t simds_per_cu, int32_t waves_per_simd, int32_t waves_per_wg) {
    int32_t n = waves_per_wg > 0 ? simds_per_cu * waves_per_simd / waves_per_wg : 1;
    return n > 0 ? n : 1;
}

/* Split count from host-known values only (graph-capture safe). Workgroups without splits:
 * wgs = sequences x kv heads x row groups. Aim: R35A_DECODE_WGS_PER_CU workgroups per CU, so
 * ceil(num_cus x WGS_PER_CU / wgs) splits, but never more workgroups than the CUs hold at once
 * (num_cus x resident_per_cu: a partial second round of workgroups would leave most of the machine
 * idle while it runs), at least min_tiles tiles per split and at most R35A_DECODE_MAX_SPLITS. One
 * split (no merge, no workspace) when wgs alone fills the aim. */
R35A_HD int32_t r35a_decode_num_splits(int32_t num_seqs, int32_t num_kv_heads, int32_t num_row_groups,
                                       int32_t max_seq_len, int32_t max_query_len, int32_t window,
                                       int32_t num_cus, int32_t resident_per_cu, int32_t min_tiles) {
    int64_t wgs = (int64_t)num_seqs * num_kv_heads * num_row_groups;
    if (wgs <= 0) return 1;
    int64_t target = (int64_t)num_cus * R35A_DECODE_WGS_PER_CU;
    int64_t cap = (int64_t)num_cus * (resident_per_cu > R35A_DECODE_WGS_PER_CU ? resident_per_cu : R35A_DECODE_WGS_PER_CU);
    int64_t want = (target + wgs - 1) / wgs;
    if (want * wgs > cap) want = cap / wgs;
    int64_t by_len = r35a_decode_max_tiles(max_seq_len, max_query_len, window) / (min_tiles > 0 ? min_tiles : 1);
    if (want > by_len) want = by_len;
    if (want > R35A_DECODE_MAX_SPLITS) want = R35A_DECODE_MAX_SPLITS;
    if (want < 1) want = 1;
    return (int32_t)want;
}

R35A_HD void r35a_decode_grid(int32_t num_seqs, int32_t num_kv_heads, int32_t num_row_groups, int32_t num_splits,
                              uint32_t grid[3]) {
    grid[0] = (uint32_t)num_splits;
    grid[1] = (uint32_t)num_kv_heads * (uint32_t)num_row_groups;
    grid[2] = (uint32_t)num_seqs;
}

/* Waves of a variant's workgroup (key groups x d slices x row waves) and its threads. */
R35A_HD int32_t r35a_decode_waves(int32_t kw, int32_t dw, int32_t rw) { return kw * dw * rw; }
R35A_HD uint32_t r35a_decode_block_threads(int32_t kw, int32_t dw, int32_t rw) { return 32u * (uint32_t)r35a_decode_waves(kw, dw, rw); }

/* ---- the split merge: a second launch (only when num_splits > 1) ----
 * With more than one planned split, every workgroup of a sequence that uses several (its
 * r35a_decode_seq_splits) writes its partial record to the workspace and exits; the merge kernel
 * (decode_merge_<dtype>, kernels/decode/decode.hip), launched right after on the same stream with the same
 * argument struct, combines each row's records and writes O. r35a_decode_merge_lanes() lanes per 4
 * consecutive d of a row (with 4, each merges every 4th record, then they combine), all rows and d of
 * all (sequence, kv head, row group) at once: the merge is as parallel as the output (times the
 * lanes), and it needs no arrival counters (so no clear before the launch, no atomics, no fences).
 * Its grid is host-known: x covers the rows a row group can hold (min(R, G x max_query_len)) x D / 4
 * x lanes in blocks of R35A_DECODE_MERGE_THREADS; y and z are the decode grid's. Sequences that use one
 * split (written directly by the decode kernel), that the decode launch skips (M = 0 or M above its
 * max_query_len) or whose metadata fails its check exit at once. */
#define R35A_DECODE_MERGE_THREADS 128
/* Lanes per (row, 4 d): 4 (each merges every 4th record) when the planned splits are more than
 * R35A_DECODE_MERGE_FEW_SPLITS, else 1 (a lane merges them all: with 2-8 records, 4 lanes would
 * quadruple a batch-16 merge's workgroups for nothing; measured on an H200). From the
 * planned count, so the host's grid and the kernel agree. */
#define R35A_DECODE_MERGE_FEW_SPLITS 8
R35A_HD int32_t r35a_decode_merge_lanes(int32_t num_splits) { return num_splits > R35A_DECODE_MERGE_FEW_SPLITS ? 4 : 1; }
R35A_HD void r35a_decode_merge_grid(int32_t num_seqs, int32_t num_kv_heads, int32_t num_row_groups,
                                    int32_t rows_per_group, int32_t group_size, int32_t max_query_len,
                                    int32_t head_size, int32_t num_splits, uint32_t grid[3]) {
    const int64_t rows = (int64_t)group_size * max_query_len < rows_per_group ? (int64_t)group_size * max_query_len
                                                                             : rows_per_group;
    const int64_t items = rows * (head_size / 4) * r35a_decode_merge_lanes(num_splits);
    grid[0] = (uint32_t)((items + R35A_DECODE_MERGE_THREADS - 1) / R35A_DECODE_MERGE_THREADS);
    grid[1] = (uint32_t)num_kv_heads * (uint32_t)num_row_groups;
    grid[2] = (uint32_t)num_seqs;
}

/* ---- workspace (only when num_splits > 1; else 0 bytes and args.workspace may be NULL) ----
 * One partial record per (sequence, kv head, row group, split), index
 *     ((s * num_kv_heads * num_row_groups) + g * num_row_groups + rg) * num_splits + split
 * (a sequence that uses fewer splits, r35a_decode_seq_splits(), uses the first ones), each
 * r35a_decode_record_floats() floats: m[R], l[R] (each row's base-2 running max and sum over the
 * split's keys), then the R x D unnormalized f32 accumulator, row-major in natural d order and
 * already multiplied by the V scale of an 8-bit cache (the merge kernel needs no fragment layout and
 * no scale). Only the rows that exist are written and read. The workspace needs no initialization
 * and may be shared with other work between runs: a run writes every record it reads. */
R35A_HD int64_t r35a_decode_record_floats(int32_t rows_per_group, int32_t head_size) {
    return 2 * (int64_t)rows_per_group + (int64_t)rows_per_group * head_size;
}
R35A_HD int64_t r35a_decode_workspace_bytes(int32_t num_seqs, int32_t num_kv_heads, int32_t num_row_groups,
                                            int32_t num_splits, int32_t rows_per_group, int32_t head_size) {
    if (num_splits <= 1) return 0;
    return (int64_t)num_seqs * num_kv_heads * num_row_groups * num_splits *
           r35a_decode_record_floats(rows_per_group, head_size) * 4;
}

#ifdef __cplusplus
}
#endif

#endif /* R35A_DECODE_ARGS_H */
