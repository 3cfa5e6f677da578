/*
 * oracle.h - an independent float64 oracle for paged and varlen attention.
 *
 * Written straight from the semantics in include/rdna35attn.h, with a materialized softmax per row
 * (all logits of the row in an array, the sink with them, then max, exp, sum, weighted sum of V;
 * the LSE, on request, is max + log(sum)).
 * 8-bit KV caches are decoded by the oracle's own table (fp8 e4m3fn, int8) and scaled in float64. It takes its own
 * parameter structs rather than the library's descriptors and shares no code with src/. Slow and
 * obviously correct on purpose.
 */
#ifndef R35A_TEST_ORACLE_H
#define R35A_TEST_ORACLE_H

#include "rdna35attn.h"

#include <stdint.h>

typedef struct oracle_paged {
    r35a_dtype dtype;        /* of Q (and of K and V unless kv_dtype is set) */
    r35a_dtype kv_dtype;     /* 0 = dtype; R35A_DTYPE_FP8_E4M3 / R35A_DTYPE_INT8: K and V hold
                                bytes, real value = stored value x scale */
    const float *k_scale, *v_scale; /* 8-bit KV: [1], [num_kv_heads], or per (page, slot, kv head) */
    int32_t kv_scale_per_head;      /* 0 per tensor, 1 per kv head, 2 per token and kv head: the
                                       scale of (page, slot, g) is k_scale[page * ks_page + slot *
                                       ks_slot + g * ks_head] (v_scale with the vs_* strides) */
    int64_t ks_page, ks_slot, ks_head, vs_page, vs_slot, vs_head;
    const float *sinks;      /* [num_q_heads] raw sink logits, NULL = none */
    int32_t num_seqs;
    int32_t num_tokens;
    int32_t num_q_heads, num_kv_heads, head_size;
    int32_t page_size, num_pages, block_table_stride;
    int32_t window;          /* 0 = none */
    double softmax_scale;
    double logit_softcap;    /* 0 = off */
    const float *alibi_slopes; /* NULL = off */
    const void *q;
    int64_t q_token_stride, q_head_stride;
    const void *k;
    int64_t k_page_stride, k_head_stride, k_slot_stride;
    const void *v;
    int64_t v_page_stride, v_head_stride, v_slot_stride;
    const int32_t *seq_lens;        /* [num_seqs] */
    const int32_t *query_start_loc; /* [num_seqs + 1] */
    const int32_t *block_table;     /* [num_seqs * block_table_stride] */
    double *lse;                    /* NULL, or [num_tokens][num_q_heads]: each row's LSE (natural
                                       log of its softmax denominator, sink included; -inf for a
                                       row that sees no key) */
} oracle_paged;

typedef struct oracle_varlen {
    r35a_dtype dtype;
    int32_t num_segments;
    int32_t num_tokens;
    int32_t num_q_heads, num_kv_heads, head_size;
    int32_t causal;
    double softmax_scale;
    double logit_softcap;
    const float *sinks;      /* [num_q_heads] raw sink logits, NULL = none */
    const void *q;
    int64_t q_token_stride, q_head_stride;
    const void *k;
    int64_t k_token_stride, k_head_stride;
    const void *v;
    int64_t v_token_stride, v_head_stride;
    const int32_t *cu_seqlens;      /* [num_segments + 1] */
    double *lse;                    /* NULL, or [num_tokens][num_q_heads] (as oracle_paged.lse) */
} oracle_varlen;

/* Writes out[(t * num_q_heads + h) * head_size + e] for every query row. Returns 0, or -1 with a
 * message on stderr when the problem itself is malformed (a reached block-table entry out of
 * range, a reached K/V element that is not finite, bad metadata): that is a harness bug. */
int oracle_paged_attention(const oracle_paged *p, double *out);
int oracle_varlen_attention(const oracle_varlen *p, double *out);

#endif
