/*
 * rel_common.h - helpers shared by the reliability tests and the fuzz target.
 *
 * - An independent reading of the header's documented input ranges ("expectations"): given a
 *   descriptor, args and metadata, the set of checks they violate, each with the status the header
 *   documents and the "<struct>.<field>" names a detail may start with. A call is right when it
 *   succeeds exactly when nothing is violated, and otherwise returns one of the violated checks'
 *   statuses with a detail naming one of its fields.
 * - Tensor extents in elements from a descriptor (wide arithmetic, so hostile strides cannot wrap).
 * - The float64 oracle (tests/oracle.c) driven from a library descriptor, and a comparison of the
 *   library's output rows against it with a tolerance that accounts for fp32 logit rounding.
 * - Guarded buffers: a pattern before and after a payload, to prove nothing was written.
 */
#ifndef R35A_REL_COMMON_H
#define R35A_REL_COMMON_H

#include "rdna35attn.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- expectations ---- */

#define REL_MAX_VIOLATIONS 96
#define REL_MAX_PREFIXES 3

typedef struct rel_violation {
    r35a_status status;
    int nprefixes;
    char prefix[REL_MAX_PREFIXES][64]; /* e.g. "paged_attention_desc.num_kv_heads" */
} rel_violation;

typedef struct rel_expect {
    int count;
    rel_violation v[REL_MAX_VIOLATIONS];
} rel_expect;

void rel_expect_init(rel_expect *e);
/* Records a violated check; p1 and p2 may be NULL. */
void rel_expect_add(rel_expect *e, r35a_status status, const char *p0, const char *p1, const char *p2);

/* The struct sizes of 0.1.0, which the library still accepts (the header: the struct up to the
 * first field added in 0.2). */
#define REL_PAGED_DESC_SIZE_0_1 offsetof(r35a_paged_attention_desc, use_sinks)
#define REL_PAGED_ARGS_SIZE_0_1 offsetof(r35a_paged_attention_args, sinks)
#define REL_VARLEN_DESC_SIZE_0_1 offsetof(r35a_varlen_attention_desc, use_sinks)
#define REL_VARLEN_ARGS_SIZE_0_1 offsetof(r35a_varlen_attention_args, sinks)
/* ... and of 0.2.0 (up to the first field added in 0.3). */
#define REL_PAGED_DESC_SIZE_0_2 offsetof(r35a_paged_attention_desc, lse_token_stride)
#define REL_PAGED_ARGS_SIZE_0_2 offsetof(r35a_paged_attention_args, lse)
#define REL_VARLEN_DESC_SIZE_0_2 offsetof(r35a_varlen_attention_desc, lse_token_stride)
#define REL_VARLEN_ARGS_SIZE_0_2 offsetof(r35a_varlen_attention_args, lse)
#define REL_PAGED_DESC_SIZE_0_3 offsetof(r35a_paged_attention_desc, k_scale_page_stride)

/* What a struct means: itself (today's struct_size), or its 0.1.0 prefix with the later fields at
 * their documented defaults (copied into *tmp); NULL for a NULL struct or another struct_size. */
const r35a_paged_attention_desc *rel_paged_desc_meant(const r35a_paged_attention_desc *d,
                                                      r35a_paged_attention_desc *tmp);
const r35a_varlen_attention_desc *rel_varlen_desc_meant(const r35a_varlen_attention_desc *d,
                                                        r35a_varlen_attention_desc *tmp);
const r35a_paged_attention_args *rel_paged_args_meant(const r35a_paged_attention_args *a,
                                                      r35a_paged_attention_args *tmp);
const r35a_varlen_attention_args *rel_varlen_args_meant(const r35a_varlen_attention_args *a,
                                                        r35a_varlen_attention_args *tmp);
/* The dtype of a paged call's K and V (kv_dtype, or dtype when kv_dtype is 0), and whether it is
 * an 8-bit one (fp8_e4m3, int8: stored x scale). */
r35a_dtype rel_kv_dtype(const r35a_paged_attention_desc *d);
bool rel_dtype_is_8bit(r35a_dtype dtype);

/* Plan-time checks of a descriptor (desc may be NULL). */
void rel_expect_paged_desc(const r35a_paged_attention_desc *d, rel_expect *e);
void rel_expect_varlen_desc(const r35a_varlen_attention_desc *d, rel_expect *e);
/* Run-time checks of the args struct (pointers, struct_size, ALiBi, sinks, scales) against a
 * valid desc. */
void rel_expect_paged_args(const r35a_paged_attention_desc *d, const r35a_paged_attention_args *a,
                           rel_expect *e);
void rel_expect_varlen_args(const r35a_varlen_attention_desc *d, const r35a_varlen_attention_args *a,
                            rel_expect *e);
/* Run-time checks of host metadata contents (and 8-bit KV scale values) against a valid desc; the
 * args' metadata (and scale) pointers must be non-NULL and hold the documented number of entries. */
void rel_expect_paged_data(const r35a_paged_attention_desc *d, const r35a_paged_attention_args *a,
                           rel_expect *e);
void rel_expect_varlen_data(const r35a_varlen_attention_desc *d, const r35a_varlen_attention_args *a,
                            rel_expect *e);

/* True when (status, detail) is what e allows: R35A_OK with "" when e is empty, otherwise a status
 * of some violation whose prefix starts the detail (followed by ':', '[', ' ' or the end).
 * Otherwise false with an explanation in why. */
bool rel_expect_explains(const rel_expect *e, r35a_status status, const char *detail, char *why,
                         size_t why_len);

/* True for the pinned status values 0 .. 13. */
bool rel_status_documented(r35a_status status);

/* Appends text to the NUL-terminated string in buf[cap], cut at the buffer's end (reports only). */
void rel_append(char *buf, size_t cap, const char *text);

/* ---- extents ---- */

/* Elements spanned from a tensor's base: vector_len + sum over count > 0 of (count-1) * stride,
 * computed in 128 bits. Negative counts count as 0. */
__int128 rel_extent(int64_t vector_len, int n, const int64_t *counts, const int64_t *strides);

typedef struct rel_paged_extents {
    __int128 q, o, k, v, block_table; /* elements (block_table: int32 entries) */
    __int128 k_scale, v_scale;        /* the per-token-head scale tensors (float32) */
} rel_paged_extents;

typedef struct rel_varlen_extents {
    __int128 q, k, v, o;
} rel_varlen_extents;

void rel_paged_extents_of(const r35a_paged_attention_desc *d, rel_paged_extents *x);
void rel_varlen_extents_of(const r35a_varlen_attention_desc *d, rel_varlen_extents *x);

size_t rel_dtype_size(r35a_dtype dtype); /* 0 for an unknown dtype; 1 for the 8-bit KV dtypes */

/* ---- oracle and comparison ---- */

/* Runs tests/oracle.c on a library problem; ref gets [num_tokens][num_q_heads][head_size]. Returns
 * the oracle's status (0 or -1). */
int rel_oracle_paged(const r35a_paged_attention_desc *d, const r35a_paged_attention_args *a, double *ref);
int rel_oracle_varlen(const r35a_varlen_attention_desc *d, const r35a_varlen_attention_args *a, double *ref);

/* Max |x| over the elements of a strided tensor's vectors. */
double rel_max_abs_rows(r35a_dtype dtype, const void *base, int32_t tokens, int32_t heads,
                        int32_t head_size, int64_t token_stride, int64_t head_stride);

/* The absolute error the library may add to an output element on top of the dtype's relative
 * tolerance: fp32 rounding of logits up to logit_bound in magnitude (a dot of head_size products)
 * moves softmax weights, and fp32 sums over up to max_keys terms, both times max|v|. */
double rel_extra_abs_tolerance(int32_t head_size, double logit_bound, int64_t max_keys, double v_max);

typedef struct rel_compare {
    double err_max;          /* max |out - ref| over the owned elements */
    double ref_max;          /* max |ref| */
    double tol_abs;          /* the tolerance applied */
    size_t checked, bad, nonfinite, unwritten, outside;
    char first[512];         /* the first few problems, for the report */
} rel_compare;

/* Compares output rows [tokens][heads][head_size] at the given strides (out has out_bytes, poisoned
 * with 0xFF before the call) against ref. Rows may overlap (stride 0, short strides): an element is
 * right when it matches some row that owns it. Every byte outside the rows must still be 0xFF.
 * tol_abs = tol_rel * max(max|ref|, 1e-6) + extra_abs. True when everything passes. */
bool rel_compare_rows(r35a_dtype dtype, const void *out, size_t out_bytes, int32_t tokens,
                      int32_t heads, int32_t head_size, int64_t token_stride, int64_t head_stride,
                      const double *ref, double tol_rel, double extra_abs, rel_compare *c);

/* Relative tolerance of a dtype: test_util's TU_TOL_*. */
double rel_tolerance(r35a_dtype dtype);

/* ---- guarded buffers ---- */

#define REL_GUARD_BYTES 256u
#define REL_GUARD_BYTE 0xA5u

typedef struct rel_guarded {
    uint8_t *alloc;          /* guard | payload | guard */
    uint8_t *payload;
    size_t bytes;            /* payload bytes */
} rel_guarded;

/* Allocates, fills the guards with REL_GUARD_BYTE and the payload with fill. */
void rel_guarded_alloc(rel_guarded *g, size_t bytes, uint8_t fill);
void rel_guarded_free(rel_guarded *g);
/* True when both guards still hold REL_GUARD_BYTE. */
bool rel_guards_intact(const rel_guarded *g);
/* FNV-1a of the whole allocation, guards included. */
uint64_t rel_guarded_hash(const rel_guarded *g);

uint64_t rel_hash(const void *p, size_t bytes, uint64_t h);

/* ---- values ---- */

/* splitmix64 step: the next pseudo-random 64 bits of *state. */
uint64_t rel_next(uint64_t *state);
/* Elements marked in reached (one byte per element) get offset + amp * U(-1, 1); every other element
 * gets a quiet NaN, so any read of an element no call may read shows in the output. */
void rel_fill_tensor(r35a_dtype dtype, void *buf, size_t elems, const uint8_t *reached, double amp,
                     double offset, uint64_t *state);

#endif
