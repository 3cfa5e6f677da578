/*
 * generic_args.h - the portable kernel (kernels/generic/generic.hip: plain HIP, no WMMA): its by-value
 * arguments for the paged and the varlen op, the launch grid, and the rules a call must meet.
 * It serves any head size up to the kernel's dmax, any page size, softcap, ALiBi, attention sinks,
 * windows, causal chunked prefill, 8-bit KV caches (fp8 e4m3, int8; scales per tensor or per kv
 * head, dequantized in registers), and varlen (causal or not, GQA, sinks, any strides). The KV
 * dtype is a run-time argument: one paged kernel per (Q/O dtype, dmax) serves every KV dtype.
 *
 * Kernels: generic_paged_<dtype>_dmax<N>, generic_varlen_<dtype>_dmax<N>   (R35A_GENERIC_KERNEL)
 *          merge_states_<dtype>: the merge of partial (O, LSE) states       (R35A_GENERIC_MERGE_KERNEL)
 *
 * Both attention kernels write the row's softmax LSE (natural log, sink included, -inf for a row
 * that sees no key, NaN for a NaN row) when their lse pointer is set; the merge kernel has the same
 * grid with num_heads for num_q_heads.
 *
 * One workgroup of R35A_GENERIC_THREADS threads per (query token, query head):
 *     grid = { num_tokens, num_q_heads, 1 }.
 * Included by C11 host code and by the device code. Strides in ELEMENTS of the dtype (K and V:
 * of the KV dtype, one byte for the 8-bit ones).
 *
 * Device metadata is checked as device_error.h says: each workgroup checks the sequence (segment)
 * its row belongs to and the pages its row reads, and one strided share of all sequences'
 * query_start_loc / seq_lens (cu_seqlens) entries, so every entry is checked by some workgroup.
 */
#ifndef R35A_GENERIC_ARGS_H
#define R35A_GENERIC_ARGS_H

#include "common/host_device.h"
#include "common/window.h"
#include "common/kv_format.h"

#ifdef __cplusplus
extern "C" {
#endif

#define R35A_GENERIC_THREADS 128


typedef struct r35a_generic_paged_args {
    const void *q, *k_cache, *v_cache;
    void *out;
    const int32_t *seq_lens, *query_start_loc, *block_table;
    uint32_t *error;                 /* the context's device error record (device_error.h) */
    const float *alibi_slopes;       /* [num_q_heads] or NULL */
    const float *sinks;              /* [num_q_heads] raw sink logits, or NULL */
    const float *k_scale, *v_scale;  /* 8-bit KV: [1], [num_kv_heads] or per (page, slot, kv head);
                                        NULL otherwise */
    int64_t q_token_stride, q_head_stride;
    int64_t o_token_stride, o_head_stride;
    int64_t k_page_stride, k_head_stride, k_slot_stride;
    int64_t v_page_stride, v_head_stride, v_slot_stride;
    int64_t block_table_stride;
    int32_t num_seqs;
    int32_t num_tokens;
    int32_t num_q_heads;
    int32_t num_kv_heads;
    int32_t head_size;               /* 1 .. the kernel's dmax */
    int32_t page_size;               /* >= 1 */
    int32_t num_pages;               /* block_table entries must be 0 .. num_pages-1 */
    int32_t max_seq_len;             /* bounds of the metadata, checked on the device */
    int32_t max_query_len;
    int32_t window;                  /* 0 = none */
    int32_t min_query_len;           /* serve only sequences with M > this (0: all); the decode
                                        kernel of the same call serves the others */
    float softmax_scale;
    float logit_softcap;             /* 0 = off */
    int32_t kv_dtype;                /* R35A_KV_* (common/kv_format.h) */
    int32_t kv_scale_per_head;       /* 8-bit KV: scales per tensor (0), per kv head (1), per token
                                        and kv head (2: the k_scale_* / v_scale_* strides) */
    float *lse;                      /* float32 LSE per row, or NULL (none written) */
    int64_t lse_token_stride, lse_head_stride;
    /* per token and kv head: float32 elements between pages, slots and kv heads of the scales */
    int64_t k_scale_page_stride, k_scale_slot_stride, k_scale_head_stride;
    int64_t v_scale_page_stride, v_scale_slot_stride, v_scale_head_stride;
} r35a_generic_paged_args;

typedef struct r35a_generic_varlen_args {
    const void *q, *k, *v;
    void *out;
    const int32_t *cu_seqlens;       /* [num_segments + 1] */
    const float *sinks;              /* [num_q_heads] raw sink logits, or NULL */
    uint32_t *error;                 /* the context's device error record (device_error.h) */
    int64_t q_token_stride, q_head_stride;
    int64_t k_token_stride, k_head_stride;
    int64_t v_token_stride, v_head_stride;
    int64_t o_token_stride, o_head_stride;
    int32_t num_segments;
    int32_t num_tokens;
    int32_t num_q_heads;
    int32_t num_kv_heads;
    int32_t head_size;
    int32_t causal;
    int32_t max_seqlen;              /* bound on every segment's length, checked on the device */
    float softmax_scale;
    float logit_softcap;
    float *lse;                      /* float32 LSE per row, or NULL (none written) */
    int64_t lse_token_stride, lse_head_stride;
} r35a_generic_varlen_args;

/* merge_states_<dtype>: one workgroup per (token, head) row, like the attention kernels. Parts whose
 * LSE is -inf are not read. Strides in elements (dtype for O, float32 for LSE). */
typedef struct r35a_generic_merge_args {
    const void *parts_o;             /* [num_parts][num_tokens][num_heads][head_size], dtype */
    const float *parts_lse;          /* [num_parts][num_tokens][num_heads] */
    void *out;                       /* [num_tokens][num_heads][head_size], dtype */
    float *out_lse;                  /* [num_tokens][num_heads], or NULL */
    int64_t part_stride, part_token_stride, part_head_stride;
    int64_t lse_part_stride, lse_token_stride, lse_head_stride;
    int64_t o_token_stride, o_head_stride;
    int64_t out_lse_token_stride, out_lse_head_stride;
    int32_t num_parts;
    int32_t num_tokens;
    int32_t num_heads;
    int32_t head_size;
} r35a_generic_merge_args;

R35A_HD void r35a_generic_grid(int32_t num_tokens, int32_t num_q_heads, uint32_t grid[3]) {
    grid[0] = (uint32_t)num_tokens;
    grid[1] = (uint32_t)num_q_heads;
    grid[2] = 1u;
}

/* The grid fits the launch limits (grid.x counts threads in 32 bits on HIP). */
R35A_HD int r35a_generic_tokens_fit_grid(int32_t num_tokens) {
    return (uint64_t)(num_tokens > 0 ? num_tokens : 0) * R35A_GENERIC_THREADS <= R35A_GRID_X_THREADS_MAX;
}
R35A_HD int r35a_generic_heads_fit_grid(int32_t num_q_heads) { return (uint32_t)num_q_heads <= R35A_GRID_YZ_MAX; }

#ifdef __cplusplus
}
#endif

#endif /* R35A_GENERIC_ARGS_H */
