/*
 * prefill_args.h - the argument of the encoder family's paged siblings (kernels/encoder/encoder.hip,
 * <variant>_paged): causal prefill over the paged KV cache, the paged op's semantics
 * (include/rdna35attn.h): sequence s has M = query_start_loc[s + 1] - query_start_loc[s] query rows and
 * L = seq_lens[s] keys; query i (0 .. M-1) sits at position L - M + i and sees keys 0 .. L - M + i;
 * key j is slot j % page_size of page block_table[s * block_table_stride + j / page_size]. GQA: query
 * head h reads kv head h / kv_group.
 *
 * Included by C11 host code (src/) and by the device code: a plain C struct passed BY VALUE as the
 * kernel's single argument, and static inline functions. Strides in ELEMENTS, int64.
 *
 * Rows: the G = kv_group query heads of a kv head are packed into one item, M x G rows of a sequence,
 * row r = query token r / G of query head g G + r % G (kv head g), so a K/V block staged once serves
 * every query head that reads it; row r sits at position L - M + r / G.
 *
 * Launch (graph-capture safe: host-known values only), R = rows per workgroup of the variant (rows x
 * NW), nrb = ceil(max_query_len G / R):
 *     grid = { num_seqs * nrb, num_heads / G, 1 },  block = { 32 * NW }
 * Workgroup (x, g) serves row block x % nrb of sequence x / nrb and kv head g; it exits at once when
 * the sequence has M <= min_query_len (the decode launch of a mixed batch serves those) or fewer rows
 * than its first. The body is the encoder's (one group per workgroup, no tail split), with K/V rows
 * read through the block table: a page size that is a multiple of 16 keeps every 16-key sub-tile of a
 * block in one page, so a block costs one table entry per sub-tile.
 *
 * Device checks (device_error.h): each workgroup checks its sequence's query_start_loc entries and
 * seq_len before reading anything (r35a_paged_sequence_error); a bad sequence's rows of kv head g's
 * query heads are written as NaN by the workgroup of its row block 0 (when its query range is sound) and recorded. A
 * block_table entry outside 0..num_pages-1 is never dereferenced: page 0 is read in its place and the
 * workgroup's rows become NaN (R35A_DEVICE_ERROR_PAGE_INDEX recorded).
 *
 * Model features: a sliding window (the group streams only the blocks from its first row's window on;
 * keys below it in the first block, whose pages no row reaches, are neither read nor looked up),
 * softcap and ALiBi on the scores, sinks in the denominator, the LSE output (rdna35attn.h).
 *
 * Fast-path rules (src/plan_encoder.c r35a_plan_prefill; the portable kernel serves the rest): f16 /
 * bf16 with a 16-bit cache, a head size with a workgroup-wide encoder variant, page_size a multiple of
 * 16, Q / O / K / V strides multiples of 8 elements
 * and 16-byte aligned pointers (encoder_args.h), the Q / O token strides and the K / V slot strides
 * below 2^24 elements (32-bit per-thread offsets within a block).
 */
#ifndef R35A_PREFILL_ARGS_H
#define R35A_PREFILL_ARGS_H

#include "common/host_device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct r35a_prefill_args {
    const void *q;                   /* row (token t, head h): q + t * q_token_stride + h * q_head_stride */
    const void *k_cache;             /* key j of kv head g: k_cache + page * k_page_stride + g * k_head_stride
                                        + slot * k_slot_stride */
    const void *v_cache;
    void *out;                       /* may not alias q, k_cache, v_cache */
    const int32_t *query_start_loc;  /* [num_seqs + 1] */
    const int32_t *seq_lens;         /* [num_seqs] */
    const int32_t *block_table;      /* [num_seqs * block_table_stride] */

    int64_t q_token_stride, q_head_stride;   /* all multiples of 8 (16-byte rows) */
    int64_t o_token_stride, o_head_stride;
    int64_t k_page_stride, k_head_stride, k_slot_stride;
    int64_t v_page_stride, v_head_stride, v_slot_stride;
    int64_t block_table_stride;

    int32_t num_seqs;
    int32_t num_heads;               /* Hq */
    int32_t kv_group;                /* G = Hq / Hkv >= 1: the query heads packed into one item (grid.y = Hkv) */
    int32_t page_size;               /* a multiple of 16 */
    int32_t num_pages;               /* block_table entries must lie in 0 .. num_pages-1 (checked) */
    int32_t max_query_len;           /* host-known bound on every M (checked; shapes the grid) */
    int32_t max_seq_len;             /* host-known bound on every L (checked) */
    int32_t num_tokens;              /* rows of Q and O: query_start_loc entries lie in 0 .. num_tokens */
    int32_t min_query_len;           /* sequences with M <= this exit at once (a mixed batch's decode rows) */
    float scale_log2;                /* softmax_scale * log2(e) */
    uint32_t *error;                 /* the context's device error record (device_error.h) */

    /* The model features (rdna35attn.h "Semantics of the scores"), each off at its zero. */
    int32_t window;                  /* > 0: row at position p sees keys p - window + 1 .. p only */
    float softcap;                   /* > 0: s = softcap tanh(s / softcap) */
    float softcap_in;                /* softmax_scale / softcap: the scores' factor inside tanh */
    float softcap_out;               /* softcap / softmax_scale: tanh's factor back to score units */
    float inv_scale;                 /* 1 / softmax_scale: ALiBi's bias in score units */
    int32_t pad0;
    const float *alibi_slopes;       /* [num_heads] or NULL: s += slope (j - p) */
    const float *sinks;              /* [num_heads] or NULL: raw sink logits joining the denominator */
    float *lse;                      /* NULL, or the natural-log LSE of each row at
                                        lse[t * lse_token_stride + h * lse_head_stride] */
    int64_t lse_token_stride, lse_head_stride;
} r35a_prefill_args;

#define R35A_PREFILL_ARGS_BYTES 256  /* sizeof(r35a_prefill_args) on LP64: the kernarg size checked by tools */
#ifdef __cplusplus
static_assert(sizeof(r35a_prefill_args) == R35A_PREFILL_ARGS_BYTES, "host and device must agree on the layout");
#else
_Static_assert(sizeof(r35a_prefill_args) == R35A_PREFILL_ARGS_BYTES, "host and device must agree on the layout");
#endif

/* The K / V slot strides bound a per-thread 32-bit byte offset within a 16-key sub-tile. */
#define R35A_PREFILL_MAX_SLOT_STRIDE ((int64_t)1 << 24)
/* Keys per sub-tile: a page size must be a multiple of it. */
#define R35A_PREFILL_PAGE_ALIGN 16

/* Packed rows of a sequence, max_query_len x G: the kernel's row index is a 32-bit int. */
#define R35A_PREFILL_MAX_ROWS ((int64_t)1 << 30)

/* grid[3] of a paged sibling with R rows per workgroup, num_heads query heads in groups of kv_group.
 * Returns 0 when there is nothing to launch (max_query_len, num_seqs or num_heads is 0), the packed
 * rows max_query_len x kv_group pass R35A_PREFILL_MAX_ROWS or grid.x would pass 2^31 - 1, else 1. */
R35A_HD int r35a_prefill_grid(int32_t num_seqs, int32_t max_query_len, int32_t num_heads, int32_t kv_group,
                              int32_t rows_per_workgroup, uint32_t grid[3]) {
    const int64_t rows = max_query_len > 0 && kv_group > 0 ? (int64_t)max_query_len * kv_group : 0;
    const int64_t nrb = rows <= R35A_PREFILL_MAX_ROWS ? (rows + rows_per_workgroup - 1) / rows_per_workgroup : 0;
    const int64_t x = nrb * (num_seqs > 0 ? num_seqs : 0);
    grid[0] = x <= 0x7fffffff ? (uint32_t)x : 0u;
    grid[1] = (uint32_t)(num_heads > 0 && kv_group > 0 ? num_heads / kv_group : 0);
    grid[2] = 1u;
    return grid[0] > 0 && grid[1] > 0;
}

#ifdef __cplusplus
}
#endif

#endif /* R35A_PREFILL_ARGS_H */
