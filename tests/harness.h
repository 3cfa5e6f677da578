/*
 * harness.h - attention "problems" for the tests: a spec (shape, layout and what to stress), the
 * host buffers it implies (filled, poisoned, with guard regions and NaN-filled gaps), the library
 * call, the oracle and the comparison.
 *
 * Memory is reached through a tu_mem table so GPU suites can reuse every problem with device
 * copies: tu_mem_host() hands the host buffers to the library directly (reference backend).
 */
#ifndef R35A_TEST_HARNESS_H
#define R35A_TEST_HARNESS_H

#include "oracle.h"
#include "rdna35attn.h"
#include "test_util.h"

#include <stdbool.h>
#include <stdint.h>

/* ---- memory the library is given ---- */
typedef struct tu_mem {
    const char *name;
    /* A buffer for the library holding a copy of host[0 .. bytes). */
    void *(*upload)(void *user, const void *host, size_t bytes);
    /* Copies bytes of a library buffer back into host. */
    void (*download)(void *user, void *host, const void *buffer, size_t bytes);
    /* A library buffer of bytes, contents unspecified (workspace). */
    void *(*alloc)(void *user, size_t bytes);
    void (*release)(void *user, void *buffer, const void *host);
    /* Waits for the library's work on stream; 0 on success. */
    int (*sync)(void *user, void *stream);
    void *user;
    void *stream;
} tu_mem;

const tu_mem *tu_mem_host(void);

/* ---- KV cache layouts ---- */
typedef struct kv_layout {
    bool nhd;        /* false: [page][head][slot][D] (HND); true: [page][slot][head][D] (NHD) */
    int32_t pad[3];  /* extra elements after the vector, the inner and the outer level */
} kv_layout;

/* ---- paged attention ---- */
#define H_MAX_SEQS 256

typedef struct paged_spec {
    r35a_dtype dtype;
    int32_t num_seqs;
    int32_t seq_len[H_MAX_SEQS];     /* L per sequence */
    int32_t q_len[H_MAX_SEQS];       /* M per sequence, <= L; L = 0 needs M = 0 */
    int32_t num_q_heads, num_kv_heads, head_size, page_size;
    int32_t window;
    float softmax_scale;             /* 0: 1/sqrt(head_size) */
    float logit_softcap;
    int32_t use_alibi;
    /* attention sinks: sinks[h] = sink_center + sink_amp * U(-1, 1); with sink_some_neg_inf every
     * third head's sink is -inf (no sink) */
    int32_t use_sinks;
    double sink_center, sink_amp;
    bool sink_some_neg_inf;
    /* 8-bit KV cache (kv_dtype R35A_DTYPE_FP8_E4M3 / R35A_DTYPE_INT8; 0 = dtype): K and V are drawn
     * as for a 16-bit cache (k_amp, v_offset) and quantized with scales that map their range onto
     * most of the stored range; per kv head (kv_scale_per_head 1) each head gets its own scales;
     * per token and kv head (2) each (page, slot, head) its own, in tensors [num_pages][page_size]
     * [hkv] (K) and [num_pages][hkv][page_size] (V), padded by scale_pad at each level, every
     * unreached element NaN with nan_fill (only reached keys' scales may be read). scale_decades
     * > 0 (per token only): each key's V scale times 10^(scale_decades x U(-1, 1)), its K scale times
     * 10^(min(scale_decades, 0.5) x U(-1, 1)), the stored values unchanged, so the real V of the keys
     * span 2 x scale_decades decades (K at most one) */
    r35a_dtype kv_dtype;
    int32_t kv_scale_per_head;
    int32_t scale_pad;
    double scale_decades;
    /* pass 0.1.0's struct sizes (the prefix before the 0.2 fields) for the desc and the args */
    bool struct_sizes_0_1;
    kv_layout k_layout, v_layout;
    int32_t q_token_pad, q_head_pad, o_token_pad, o_head_pad;
    int32_t bt_pad;                  /* block_table_stride - ceil(max_seq_len / page_size) */
    int32_t extra_pages;             /* cache pages no sequence uses (NaN-filled) */
    int32_t max_query_len_slack, max_seq_len_slack; /* descriptor bounds above the actual maxima */
    int32_t force_num_pages;         /* 0, or num_pages for plan reuse (>= the pages needed) */
    bool shuffle_pages;              /* physical pages in random order */
    bool garbage_unreached;          /* invalid page ids in block-table entries no query reaches */
    bool nan_fill;                   /* NaN in gaps, unused pages and slots past L */
    double q_amp, k_amp, v_offset;   /* value distributions */
    /* Q's magnitudes below q_amp: each (token, head) row times 2^-e, e uniform in [0, q_row_exp_drop],
     * each element times 2^-u, u uniform in [0, q_elem_exp_drop] (powers of two of the stored values:
     * exact while in the dtype's range; bf16 holds what f16 cannot). Only down: the logits of a row
     * scale with it, and logits far above ~1e4 are beyond what f32 softmax arithmetic matches to the
     * oracle (paged_spec_logit_std), so q_amp and k_amp set the largest row's logits */
    int32_t q_row_exp_drop, q_elem_exp_drop;
    bool defer_oracle;               /* init leaves ref zero: the caller runs paged_problem_oracle
                                        (after changing inputs, or only for a sample of cases) */
    /* the LSE output (0.3): use_lse asks for it (today's struct sizes only), into a float buffer
     * [tokens][hq + lse_pad] whose gaps must stay poisoned; checked against the oracle's */
    bool use_lse;
    int32_t lse_pad;
} paged_spec;

/* Defaults: one sequence L = 1, M = 1; HND; contiguous Q/O; f16; no window, softcap, ALiBi. */
void paged_spec_init(paged_spec *s, r35a_dtype dtype, int32_t hq, int32_t hkv, int32_t d,
                     int32_t page_size);
/* Appends a sequence; returns false when full. */
bool paged_spec_add_seq(paged_spec *s, int32_t seq_len, int32_t q_len);
/* Multiply-adds of one oracle evaluation (for sizing sweeps). */
double paged_spec_cost(const paged_spec *s);
/* Elements of one cache (K or V) the spec allocates, roughly (for sizing sweeps). */
double paged_spec_cache_elems(const paged_spec *s);
/* Standard deviation of the scaled logits the value distributions give. fp32 logits carry an
 * absolute error of about |logit| * 2^-24, which becomes relative output error, so f32 cases keep
 * this small enough for TU_TOL_F32 (see tu_limit_f32_logits). */
double paged_spec_logit_std(const paged_spec *s);
/* One-line description with every parameter (printed on failure for replay). */
void paged_spec_describe(const paged_spec *s, char *buf, size_t len);

/* An LSE output under test: buf[t * token_stride + h] (poisoned around the rows), and ref
 * [tokens][hq] from the oracle. */
typedef struct h_lse {
    float *buf;
    size_t elems;
    int64_t token_stride;
    double *ref;
} h_lse;

/* LSE tolerance: |got - ref| <= this x max(1, |ref|) (the LSE is a log: its absolute error is the
 * relative error of the softmax denominator); -inf must be -inf, NaN never passes. */
#define H_LSE_TOL_F32 1e-5
#define H_LSE_TOL_16BIT 2e-4
/* Checks lse against its reference for tokens x hq rows and that every element between rows is
 * still poisoned; prints the first mismatches under label. true when it passes. */
bool h_lse_check(const h_lse *lse, r35a_dtype dtype, int32_t tokens, int32_t hq, const char *label);

typedef struct paged_problem {
    paged_spec spec;
    r35a_paged_attention_desc desc;
    int32_t num_tokens, num_pages, bt_stride;
    void *q, *k, *v;
    size_t q_bytes, k_bytes, v_bytes;  /* K and V: elements of the KV dtype */
    uint8_t *out_alloc;              /* guard | rows with gaps | guard */
    size_t out_alloc_bytes, out_guard_bytes;
    uint8_t *out_mask;               /* bytes the call owns */
    int32_t *seq_lens, *query_start_loc, *block_table;
    size_t bt_entries;
    float *alibi;
    float *sinks;                    /* [hq] or NULL */
    float *k_scale, *v_scale;        /* 8-bit KV: [n_scales] (1 or hkv) / [k,v_scale_elems]; else NULL */
    int32_t n_scales;
    size_t k_scale_elems, v_scale_elems; /* elements of each scale tensor */
    int64_t ks_strides[3], vs_strides[3]; /* per token and kv head: page, slot, head strides */
    double *ref;                     /* oracle [num_tokens][hq][D] */
    double ref_max;
    uint64_t input_hash;
    h_lse lse;                       /* spec.use_lse: the LSE output and the oracle's */
} paged_problem;

/* Builds the buffers from spec with values from rng and runs the oracle. 0 on success. */
int paged_problem_init(paged_problem *p, const paged_spec *spec, tu_rng *rng);
/* Runs the oracle on p's current host buffers (ref, ref_max). 0 on success. */
int paged_problem_oracle(paged_problem *p);
void paged_problem_free(paged_problem *p);

/* Runs the library on p (planning unless plan is given), compares with the oracle, records the
 * result in the statistics and prints a report on failure. label names the case. */
bool paged_problem_check(r35a_context *ctx, paged_problem *p, const r35a_plan *plan,
                         const tu_mem *mem, const char *label);

/* Build (values from rng) + check + free, with the spec and the replay line printed on failure. */
bool paged_run_case(r35a_context *ctx, const paged_spec *spec, tu_rng *rng, const char *group,
                    int index);

/* Prints where the time went (problem building, oracle, library, comparison). */
void harness_print_timing(const char *program);

/* ---- varlen attention ---- */
#define H_MAX_SEGMENTS 512

typedef enum varlen_layout {
    VARLEN_SEPARATE = 0,   /* separate Q, K, V buffers, strides with the pads below */
    VARLEN_FUSED = 1       /* one [tokens][hq + 2*hkv][D] buffer read in place (+ token pad) */
} varlen_layout;

typedef struct varlen_spec {
    r35a_dtype dtype;
    int32_t num_segments;
    int32_t seg_len[H_MAX_SEGMENTS];
    int32_t num_q_heads, num_kv_heads, head_size;
    int32_t causal;
    float softmax_scale;       /* 0: 1/sqrt(head_size) */
    float logit_softcap;
    int32_t use_sinks;         /* sinks as in paged_spec */
    double sink_center, sink_amp;
    bool struct_sizes_0_1;     /* pass 0.1.0's struct sizes for the desc and the args */
    varlen_layout layout;
    int32_t token_pad[4];      /* q, k, v, o extra elements per token (fused: [0] for the buffer) */
    int32_t head_pad[4];       /* q, k, v, o extra elements per head (separate buffers only) */
    int32_t max_seqlen_slack;
    bool nan_fill;
    double q_amp, k_amp, v_offset;
    double k_growth;           /* key amplitude grows along each segment: k_amp x (1 + k_growth x pos),
                                  pos 0 .. 1 (the running max keeps rising: online-softmax rescales) */
    bool defer_oracle;         /* as in paged_spec: varlen_problem_oracle runs it */
    bool use_lse;              /* as in paged_spec */
    int32_t lse_pad;
} varlen_spec;

void varlen_spec_init(varlen_spec *s, r35a_dtype dtype, int32_t hq, int32_t hkv, int32_t d);
bool varlen_spec_add_segment(varlen_spec *s, int32_t len);
double varlen_spec_cost(const varlen_spec *s);
double varlen_spec_logit_std(const varlen_spec *s);
void varlen_spec_describe(const varlen_spec *s, char *buf, size_t len);

typedef struct varlen_problem {
    varlen_spec spec;
    r35a_varlen_attention_desc desc;
    int32_t num_tokens;
    void *qkv;                       /* fused buffer, or NULL */
    void *q, *k, *v;                 /* into qkv when fused */
    size_t qkv_bytes, q_bytes, k_bytes, v_bytes;
    uint8_t *out_alloc;
    size_t out_alloc_bytes, out_guard_bytes;
    uint8_t *out_mask;
    int32_t *cu_seqlens;
    float *sinks;                    /* [hq] or NULL */
    double *ref;
    double ref_max;
    uint64_t input_hash;
    h_lse lse;
} varlen_problem;

int varlen_problem_init(varlen_problem *p, const varlen_spec *spec, tu_rng *rng);
int varlen_problem_oracle(varlen_problem *p);
void varlen_problem_free(varlen_problem *p);
bool varlen_problem_check(r35a_context *ctx, varlen_problem *p, const r35a_plan *plan,
                          const tu_mem *mem, const char *label);
bool varlen_run_case(r35a_context *ctx, const varlen_spec *spec, tu_rng *rng, const char *group,
                     int index);

#endif
