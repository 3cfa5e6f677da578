/* plan_generic.c - the portable kernel's planner (see planner.h) and its argument structs. */
#include "planner.h"

#include <stdio.h>
#include <string.h>

/* ---- the portable kernel ---- */

static bool plan_generic(r35a_op op, r35a_dtype dtype, int32_t head_size, int32_t num_tokens, int32_t num_q_heads,
                         const char *arch, const char *only, r35a_gpu_launch *out, char *reason, size_t cap)
{
    reason[0] = '\0';
    int forced;
    const char *what = op == R35A_OP_PAGED    ? "paged generic kernel"
                       : op == R35A_OP_VARLEN ? "varlen generic kernel"
                                              : "merge kernel";
    if (!r35a_registry_forced(R35A_GPU_GENERIC, what, arch, only, &forced, reason, cap))
        return false;
    if (forced >= 0 && r35a_generic_kernels[forced].op != op) {
        snprintf(reason, cap, "no %s %s for %s", what, only, arch);
        return false;
    }
    if (dtype != R35A_DTYPE_F16 && dtype != R35A_DTYPE_BF16) {
        r35a_text_append(reason, cap, ", ", "dtype %s (the GPU kernels are f16/bf16)", r35a_dtype_name(dtype));
        return false;
    }
    int best = -1;
    int32_t largest = 0;
    for (int i = 0; i < R35A_NUM_GENERIC_KERNELS; ++i) {
        const r35a_generic_kernel *k = &r35a_generic_kernels[i];
        if (!r35a_same_name(k->arch, arch) || k->op != op || k->dtype != dtype || (forced >= 0 && i != forced))
            continue;
        if (k->dmax > largest)
            largest = k->dmax;
        if (k->dmax >= head_size && (best < 0 || k->dmax < r35a_generic_kernels[best].dmax))
            best = i;
    }
    if (best < 0) {
        if (largest > 0)
            r35a_text_append(reason, cap, ", ", "head_size %d above the largest built, %d", (int)head_size, (int)largest);
        else
            r35a_text_append(reason, cap, ", ", "no %s %s kernel built for %s", r35a_op_name(op), r35a_dtype_name(dtype),
                             arch);
        return false;
    }
    if (!r35a_generic_tokens_fit_grid(num_tokens)) {
        r35a_text_append(reason, cap, ", ", "num_tokens %d above the grid limit %u", (int)num_tokens,
                         (unsigned)(R35A_GRID_X_THREADS_MAX / R35A_GENERIC_THREADS));
        return false;
    }
    if (!r35a_generic_heads_fit_grid(num_q_heads)) {
        r35a_text_append(reason, cap, ", ", "num_q_heads %d above the grid limit %u", (int)num_q_heads, R35A_GRID_YZ_MAX);
        return false;
    }
    r35a_launch_init(out, R35A_GPU_GENERIC, best);
    r35a_generic_grid(num_tokens, num_q_heads, out->grid);
    out->block[0] = R35A_GENERIC_THREADS;
    out->block[1] = out->block[2] = 1;
    out->workspace_bytes = 0;
    return true;
}

bool r35a_plan_generic_paged(const r35a_paged_attention_desc *d, const char *arch, const char *only,
                             r35a_gpu_launch *out, char *reason, size_t cap)
{
    /* every KV dtype the API accepts is a run-time argument of the one paged kernel */
    return plan_generic(R35A_OP_PAGED, d->dtype, d->head_size, d->num_tokens, d->num_q_heads, arch, only, out,
                        reason, cap);
}

bool r35a_plan_generic_varlen(const r35a_varlen_attention_desc *d, const char *arch, const char *only,
                              r35a_gpu_launch *out, char *reason, size_t cap)
{
    return plan_generic(R35A_OP_VARLEN, d->dtype, d->head_size, d->num_tokens, d->num_q_heads, arch, only, out,
                        reason, cap);
}

bool r35a_plan_generic_merge(const r35a_merge_states_desc *d, const char *arch, const char *only, r35a_gpu_launch *out,
                             char *reason, size_t cap)
{
    return plan_generic(R35A_OP_MERGE, d->dtype, d->head_size, d->num_tokens, d->num_heads, arch, only, out, reason,
                        cap);
}

void r35a_fill_generic_paged_args(const r35a_paged_attention_desc *d, const r35a_paged_attention_args *a,
                                  int32_t min_query_len, r35a_generic_paged_args *out)
{
    memset(out, 0, sizeof *out);
    R35A_PAGED_POINTERS(R35A_COPY_FROM_ARGS)
    R35A_PAGED_STRIDES(R35A_COPY_FROM_DESC)
    R35A_PAGED_SCALE_STRIDES(R35A_COPY_FROM_DESC)
    out->alibi_slopes = d->use_alibi ? a->alibi_slopes : NULL;
    out->sinks = d->use_sinks ? a->sinks : NULL;
    const r35a_dtype kv = r35a_paged_kv_dtype(d);
    out->kv_dtype = r35a_dtype_is_kv8(kv) ? (int32_t)kv : R35A_KV_AS_Q;
    out->kv_scale_per_head = d->kv_scale_per_head;
    out->k_scale = r35a_dtype_is_kv8(kv) ? a->k_scale : NULL;
    out->v_scale = r35a_dtype_is_kv8(kv) ? a->v_scale : NULL;
    R35A_GENERIC_SHAPE(R35A_COPY_FROM_DESC)
    out->num_seqs = d->num_seqs;
    out->page_size = d->page_size;
    out->num_pages = d->num_pages;
    out->max_seq_len = d->max_seq_len;
    out->max_query_len = d->max_query_len;
    out->window = d->window;
    out->min_query_len = min_query_len;
    out->lse = d->use_lse ? a->lse : NULL;
    out->lse_token_stride = d->lse_token_stride;
    out->lse_head_stride = d->lse_head_stride;
    /* out->error: the context's record, set by the launch (gpu_impls.c) */
}

void r35a_fill_generic_varlen_args(const r35a_varlen_attention_desc *d, const r35a_varlen_attention_args *a,
                                   r35a_generic_varlen_args *out)
{
    memset(out, 0, sizeof *out);
    R35A_VARLEN_POINTERS(R35A_COPY_FROM_ARGS)
    R35A_VARLEN_STRIDES(R35A_COPY_FROM_DESC)
    R35A_GENERIC_SHAPE(R35A_COPY_FROM_DESC)
    out->sinks = d->use_sinks ? a->sinks : NULL;
    out->num_segments = d->num_segments;
    out->causal = d->causal;
    out->max_seqlen = d->max_seqlen;
    out->lse = d->use_lse ? a->lse : NULL;
    out->lse_token_stride = d->lse_token_stride;
    out->lse_head_stride = d->lse_head_stride;
}

void r35a_fill_generic_merge_args(const r35a_merge_states_desc *d, const r35a_merge_states_args *a,
                                  r35a_generic_merge_args *out)
{
    memset(out, 0, sizeof *out);
    out->parts_o = a->parts_o;
    out->parts_lse = a->parts_lse;
    out->out = a->out;
    out->out_lse = d->use_out_lse ? a->out_lse : NULL;
    R35A_MERGE_STRIDES(R35A_COPY_FROM_DESC)
    out->num_parts = d->num_parts;
    out->num_tokens = d->num_tokens;
    out->num_heads = d->num_heads;
    out->head_size = d->head_size;
}

