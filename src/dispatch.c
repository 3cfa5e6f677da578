/* dispatch.c - the ordered implementation list of each op and the choice among them.
 *
 * Most specialized first, reference last (oneDNN / libdeflate style). The first entry that runs on
 * the context's backend and whose supports() accepts the descriptor serves the plan; the reasons
 * of the entries that declined become the plan's fallback_reason. R35A_LOG=1 prints each decision;
 * R35A_FORCE=<name> (test-only) restricts the choice to the entry of that name, or to one kernel of
 * a GPU entry ("decode_f16_d128_...", "generic_paged_...", "encoder_bf16_d64_..."). */
#include "internal.h"

#include "gpu_impls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the CPU reference entries ---- */

static bool reference_try_plan(const r35a_context *ctx, r35a_plan *plan, char *reason, size_t reason_len)
{
    (void)ctx;
    (void)reason;
    (void)reason_len;
    plan->info.workspace_bytes = 0;
    plan->info.num_splits = 1;
    return true; /* serves every valid descriptor */
}

static r35a_status reference_run(const r35a_context *ctx, const r35a_plan *plan, const void *args, void *workspace,
                                 size_t workspace_bytes, void *stream)
{
    (void)ctx;
    (void)workspace;
    (void)workspace_bytes;
    (void)stream;
    switch (plan->op) {
    case R35A_OP_PAGED: return r35a_reference_paged_attention(&plan->desc.paged, args);
    case R35A_OP_VARLEN: return r35a_reference_varlen_attention(&plan->desc.varlen, args);
    case R35A_OP_MERGE: break;
    }
    return r35a_reference_merge_states(&plan->desc.merge, args);
}

static const r35a_impl reference_paged = {"reference", R35A_OP_PAGED, R35A_BACKEND_REFERENCE, reference_try_plan,
                                          reference_run};
static const r35a_impl reference_varlen = {"reference", R35A_OP_VARLEN, R35A_BACKEND_REFERENCE, reference_try_plan,
                                           reference_run};
static const r35a_impl reference_merge = {"reference", R35A_OP_MERGE, R35A_BACKEND_REFERENCE, reference_try_plan,
                                          reference_run};

/* ---- the ordered lists: tuned GPU variants, then the portable GPU kernel, then the reference ---- */

/* The GPU entries (gpu_impls.c) serve a context of either GPU backend (HIP or CUDA). */
static const r35a_impl *const paged_impls[] = {&r35a_gpu_paged_tuned, &r35a_gpu_paged_generic, &reference_paged};
static const r35a_impl *const varlen_impls[] = {&r35a_gpu_varlen_encoder, &r35a_gpu_varlen_generic,
                                                &reference_varlen};
static const r35a_impl *const merge_impls[] = {&r35a_gpu_merge_generic, &reference_merge};

/* R35A_FORCE=<name> selects an entry by its name ("decode", "generic", "reference") or by the name
 * of one of its kernels ("decode_f16_d128_...", "generic_paged_..."), which the entry then uses. */
static bool answers_to(const r35a_impl *impl, const char *force)
{
    size_t n = strlen(impl->name);
    return strncmp(force, impl->name, n) == 0 && (force[n] == '\0' || force[n] == '_');
}

r35a_status r35a_dispatch(const r35a_context *ctx, r35a_op op, r35a_plan *plan)
{
    const r35a_impl *const *list = paged_impls;
    size_t count = sizeof paged_impls / sizeof *paged_impls;
    if (op == R35A_OP_VARLEN) {
        list = varlen_impls;
        count = sizeof varlen_impls / sizeof *varlen_impls;
    } else if (op == R35A_OP_MERGE) {
        list = merge_impls;
        count = sizeof merge_impls / sizeof *merge_impls;
    }
    const char *op_name = r35a_op_name(op);
    const char *force = r35a_forced_impl();
    char declined[sizeof plan->info.fallback_reason] = "";

    for (size_t i = 0; i < count; ++i) {
        const r35a_impl *impl = list[i];
        if (impl->backend != ctx->backend)
            continue;
        if (force && !answers_to(impl, force))
            continue;
        char why[256] = "";
        /* Each attempt starts from a clean plan: a declining entry may have written part of it. */
        memset(&plan->info, 0, sizeof plan->info);
        plan->info.struct_size = sizeof plan->info;
        memset(&plan->gpu, 0, sizeof plan->gpu);
        if (!impl->try_plan(ctx, plan, why, sizeof why)) {
            r35a_log("%s: %s declines: %s", op_name, impl->name, why);
            r35a_text_append(declined, sizeof declined, "; ", "%s: %s", impl->name, why);
            continue;
        }
        plan->impl = impl;
        if (!plan->info.implementation[0]) /* GPU entries name the kernel they chose */
            snprintf(plan->info.implementation, sizeof plan->info.implementation, "%s", impl->name);
        /* An entry may leave a note of a partial fallback in fallback_reason (a mixed batch's
         * sequences with M > 8 on the generic kernel); it follows the reasons of the entries that declined. */
        char note[sizeof plan->info.fallback_reason];
        snprintf(note, sizeof note, "%s", plan->info.fallback_reason);
        snprintf(plan->info.fallback_reason, sizeof plan->info.fallback_reason, "%s", declined);
        if (note[0])
            r35a_text_append(plan->info.fallback_reason, sizeof plan->info.fallback_reason, "; ", "%s: %s", impl->name, note);
        r35a_log("%s: chose %s (workspace %zu bytes, grid %ux%ux%u, splits %d)%s%s", op_name,
                 plan->info.implementation, plan->info.workspace_bytes, plan->info.grid[0], plan->info.grid[1],
                 plan->info.grid[2], plan->info.num_splits, plan->info.fallback_reason[0] ? "; fallback: " : "",
                 plan->info.fallback_reason);
        return R35A_OK;
    }
    if (force)
        return r35a_fail(R35A_ERR_UNSUPPORTED, "R35A_FORCE=%s: no %s implementation of that name on the %s backend%s%s",
                         force, op_name, ctx->info.backend_name, declined[0] ? " accepts this call: " : "", declined);
    return r35a_fail(R35A_ERR_UNSUPPORTED, "%s: no implementation of the %s backend serves it: %s",
                     op == R35A_OP_MERGE ? "merge_states_desc" : op == R35A_OP_PAGED ? "paged_attention_desc"
                                                                                       : "varlen_attention_desc",
                     ctx->info.backend_name, declined);
}
