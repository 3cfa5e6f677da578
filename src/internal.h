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

typedef enum r35a_op { R35A_OP_PAGED = 1, R35A_OP_VARLEN = 2, R35A_OP_MERGE = 3 } r35a_op;

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

/* A descriptor of any op. */
typedef union r35a_op_desc {
    r35a_paged_attention_desc paged;
    r35a_varlen_attention_desc varlen;
    r35a_merge_states_desc merge;
} r35a_op_desc;

struct r35a_plan {
    r35a_op op;
    const r35a_context *ctx;
    const r35a_impl *impl;
    r35a_plan_info info;
    r35a_op_desc desc;           /* the validated descriptor, at today's struct size */
    r35a_gpu_plan gpu;           /* GPU entries: the launches run() makes */
};

/* Picks the first implementation of ctx's backend that serves plan->desc and lets it plan (dispatch.c). */
r35a_status r35a_dispatch(const r35a_context *ctx, r35a_op op, r35a_plan *plan);

/* The element strides of each op's descriptor, by name (validation checks each; the planners copy
 * them into the kernels' argument structs). */
#define R35A_PAGED_STRIDES(X)                                                                               \
    X(q_token_stride) X(q_head_stride) X(o_token_stride) X(o_head_stride) X(k_page_stride) X(k_head_stride) \
    X(k_slot_stride) X(v_page_stride) X(v_head_stride) X(v_slot_stride) X(block_table_stride)
/* The paged descriptor's per-token-head scale strides (float32 elements; the portable kernel's only). */
#define R35A_PAGED_SCALE_STRIDES(X)                                                                         \
    X(k_scale_page_stride) X(k_scale_slot_stride) X(k_scale_head_stride) X(v_scale_page_stride)              \
    X(v_scale_slot_stride) X(v_scale_head_stride)
#define R35A_MERGE_STRIDES(X)                                                                               \
    X(part_stride) X(part_token_stride) X(part_head_stride) X(lse_part_stride) X(lse_token_stride)           \
    X(lse_head_stride) X(o_token_stride) X(o_head_stride) X(out_lse_token_stride) X(out_lse_head_stride)
#define R35A_VARLEN_STRIDES(X)                                                                              \
    X(q_token_stride) X(q_head_stride) X(k_token_stride) X(k_head_stride) X(v_token_stride) X(v_head_stride) \
    X(o_token_stride) X(o_head_stride)

/* ---- validation (validate.c) ---- */

/* The struct sizes of 0.1.0 (before the fields added in 0.2): a struct as 0.1.0 declared it is the
 * prefix of today's up to these offsets. */
#define R35A_PAGED_DESC_SIZE_0_1 offsetof(r35a_paged_attention_desc, use_sinks)
#define R35A_PAGED_ARGS_SIZE_0_1 offsetof(r35a_paged_attention_args, sinks)
#define R35A_VARLEN_DESC_SIZE_0_1 offsetof(r35a_varlen_attention_desc, use_sinks)
#define R35A_VARLEN_ARGS_SIZE_0_1 offsetof(r35a_varlen_attention_args, sinks)
/* ... and of 0.2.0 (before the fields added in 0.3, which open with an int64 so that they start at
 * 0.2.0's sizeof, its tail padding included: a 0.2.0 struct's padding never lands in a field). */
#define R35A_PAGED_DESC_SIZE_0_2 offsetof(r35a_paged_attention_desc, lse_token_stride)
#define R35A_PAGED_ARGS_SIZE_0_2 offsetof(r35a_paged_attention_args, lse)
#define R35A_VARLEN_DESC_SIZE_0_2 offsetof(r35a_varlen_attention_desc, lse_token_stride)
#define R35A_VARLEN_ARGS_SIZE_0_2 offsetof(r35a_varlen_attention_args, lse)
/* ... and of 0.3.0 (before the fields added in 0.4: the paged descriptor's per-token-head scale
 * strides, which open with an int64 for the same reason; no other struct grew in 0.4). */
#define R35A_PAGED_DESC_SIZE_0_3 offsetof(r35a_paged_attention_desc, k_scale_page_stride)

/* Any op's run arguments. */
typedef union r35a_op_args {
    r35a_paged_attention_args paged;
    r35a_varlen_attention_args varlen;
    r35a_merge_states_args merge;
} r35a_op_args;

/* Copies the caller's descriptor or args of op, of today's size or an earlier release's, into
 * *full (today's layout, struct_size = sizeof), giving the fields the caller's release did not have
 * their defaults. Fails (NULL pointer, unknown struct_size) without touching *full. Everything past
 * this point reads the full copy only, never the caller's struct. */
r35a_status r35a_upgrade_desc(r35a_op op, const void *desc, r35a_op_desc *full);
r35a_status r35a_upgrade_args(r35a_op op, const void *args, r35a_op_args *full);
/* Descriptor checks on a full descriptor. */
r35a_status r35a_validate_desc(r35a_op op, const r35a_op_desc *desc);
/* Pointer checks of full args against desc (both backends) and, with host_data, the contents of
 * the metadata (seq_lens, query_start_loc, block_table, cu_seqlens, scales): possible only where
 * it is host memory (the reference backend). */
r35a_status r35a_validate_args(r35a_op op, const r35a_op_desc *desc, const r35a_op_args *args, bool host_data);

/* Size of one element of dtype in bytes; 0 for an unknown dtype. */
size_t r35a_dtype_size(r35a_dtype dtype);
/* "f16", "bf16", "f32", "fp8_e4m3", "int8"; "?" for an unknown dtype. */
const char *r35a_dtype_name(r35a_dtype dtype);
/* Whether dtype is one of the 8-bit KV-cache dtypes (stored x scale; never Q, O or varlen). */
static inline bool r35a_dtype_is_kv8(r35a_dtype dtype)
{
    return dtype == R35A_DTYPE_FP8_E4M3 || dtype == R35A_DTYPE_INT8;
}
/* The dtype of a paged call's K and V: kv_dtype, or dtype when kv_dtype is 0 (the default). */
static inline r35a_dtype r35a_paged_kv_dtype(const r35a_paged_attention_desc *desc)
{
    return desc->kv_dtype != 0 ? desc->kv_dtype : desc->dtype;
}

/* ---- CPU reference (reference.c) ----
 * Inputs are already validated, metadata contents included. Returns R35A_OK, or
 * R35A_ERR_OUT_OF_MEMORY (through r35a_fail) before writing anything if scratch allocation fails. */
r35a_status r35a_reference_paged_attention(const r35a_paged_attention_desc *desc,
                                           const r35a_paged_attention_args *args);
r35a_status r35a_reference_varlen_attention(const r35a_varlen_attention_desc *desc,
                                            const r35a_varlen_attention_args *args);
r35a_status r35a_reference_merge_states(const r35a_merge_states_desc *desc, const r35a_merge_states_args *args);

/* The name of op in messages: "paged", "varlen", "merge". */
static inline const char *r35a_op_name(r35a_op op)
{
    return op == R35A_OP_PAGED ? "paged" : op == R35A_OP_VARLEN ? "varlen" : "merge";
}

#endif
