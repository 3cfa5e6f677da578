/* internal.h - shared declarations of the host library (not installed). */
#ifndef R35A_INTERNAL_H
#define R35A_INTERNAL_H

#include "rdna35attn.h"
#include "env.h"
#include "launch.h"
#include "status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- operations and implementations ---- */

typedef enum r35a_op { R35A_OP_PAGED = 1, R35A_OP_VARLEN = 2 } r35a_op;

/* The runtime a GPU context's implementation entries launch through (gpu_impls.h). */
typedef struct r35a_gpu_runtime r35a_gpu_runtime;

struct r35a_context {
    r35a_backend backend;        /* active backend: GPU or REFERENCE */
    r35a_context_info info;
    void *gpu;                   /* GPU backend state (backend_hip.c, backend_cuda.c); NULL on the reference */
    const r35a_gpu_runtime *gpu_runtime; /* a GPU context's runtime (inside ctx->gpu); NULL on the reference */
};

/* One entry of the ordered implementation list of an op (dispatch.c). */
typedef struct r35a_impl {
    const char *name;            /* log label; a variant name for tuned GPU kernels */
    r35a_op op;
    r35a_backend backend;        /* the context backend this entry runs on */
    /* Plans desc (== plan->desc) into plan->info and, for GPU entries, plan->gpu, and returns true;
     * or returns false, with why in reason, when it does not serve desc (dispatch then clears what
     * it may have written). */
    bool (*try_plan)(const r35a_context *ctx, r35a_plan *plan, char *reason, size_t reason_len);
    /* Runs on validated desc and args. Must write nothing when it fails. */
    r35a_status (*run)(const r35a_context *ctx, const r35a_plan *plan, const void *args,
                       void *workspace, size_t workspace_bytes, void *stream);
} r35a_impl;

struct r35a_plan {
    r35a_op op;
    const r35a_context *ctx;
    const r35a_impl *impl;
    r35a_plan_info info;
    union {
        r35a_paged_attention_desc paged;
        r35a_varlen_attention_desc varlen;
    } desc;
    r35a_gpu_plan gpu;           /* GPU entries: the launches run() makes */
};

/* Picks the first implementation of ctx's backend that serves plan->desc and lets it plan (dispatch.c). */
r35a_status r35a_dispatch(const r35a_context *ctx, r35a_op op, r35a_plan *plan);

/* ---- validation (validate.c) ---- */
r35a_status r35a_validate_paged_desc(const r35a_paged_attention_desc *desc);
r35a_status r35a_validate_varlen_desc(const r35a_varlen_attention_desc *desc);
/* Pointer checks of args against desc (both backends). */
r35a_status r35a_validate_paged_args(const r35a_paged_attention_desc *desc,
                                     const r35a_paged_attention_args *args);
r35a_status r35a_validate_varlen_args(const r35a_varlen_attention_desc *desc,
                                      const r35a_varlen_attention_args *args);
/* Content checks of host-visible metadata (seq_lens, query_start_loc, block_table, cu_seqlens);
 * only possible where the metadata is host memory (reference backend). */
r35a_status r35a_validate_paged_data(const r35a_paged_attention_desc *desc,
                                     const r35a_paged_attention_args *args);
r35a_status r35a_validate_varlen_data(const r35a_varlen_attention_desc *desc,
                                      const r35a_varlen_attention_args *args);

/* Size of one element of dtype in bytes; 0 for an unknown dtype. */
size_t r35a_dtype_size(r35a_dtype dtype);
/* "f16", "bf16", "f32"; "?" for an unknown dtype. */
const char *r35a_dtype_name(r35a_dtype dtype);

/* ---- CPU reference (reference.c) ----
 * Inputs are already validated, metadata contents included. Returns R35A_OK, or
 * R35A_ERR_OUT_OF_MEMORY (through r35a_fail) before writing anything if scratch allocation fails. */
r35a_status r35a_reference_paged_attention(const r35a_paged_attention_desc *desc,
                                           const r35a_paged_attention_args *args);
r35a_status r35a_reference_varlen_attention(const r35a_varlen_attention_desc *desc,
                                            const r35a_varlen_attention_args *args);

#endif
