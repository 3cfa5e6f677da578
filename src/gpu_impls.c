/* gpu_impls.c - the GPU implementation entries (see gpu_impls.h), shared by backend_hip.c and
 * backend_cuda.c.
 *
 * Planning happens once: try_plan() stores the launches (with the context's kernel handles) and,
 * for the fast families, the portable launch that replaces them when a run's pointers are not
 * 16-byte aligned. A run fills the argument structs from the plan's descriptor and the run's
 * arguments and launches, in stream order; it never plans again. */
#include "gpu_impls.h"

#include "gpu_runtime.h"
#include "planner.h"

#include <stdio.h>
#include <string.h>

static const r35a_gpu_runtime *runtime_of(const r35a_context *ctx) { return ctx->gpu_runtime; }
static const char *tuning_of(const r35a_context *ctx) { return runtime_of(ctx)->arch->tuning; }

/* R35A_FORCE (test-only) naming one kernel of a family, e.g. "decode_f16_d128_r16_kw2_dw2_w6_wmma16_pregs2_qlds": the
 * planner then considers that kernel only. Dispatch calls a family's entry only when R35A_FORCE is
 * unset, the family's name, or one of its kernels' names. */
static const char *forced_kernel(const char *family)
{
    const char *force = r35a_forced_impl();
    return force && strcmp(force, family) != 0 ? force : NULL;
}

/* The kernel a launch runs, by name: its registry row's, a decode variant's split merge, or an encoder
 * variant's tail kernel or paged sibling. */
static const char *launch_name(const r35a_gpu_launch *l)
{
    return l->split_merge     ? r35a_decode_merge_name(r35a_decode_variants[l->kernel].dtype)
           : l->encoder_tail  ? r35a_encoder_tail_name(l->kernel)
           : l->encoder_paged ? r35a_encoder_paged_name(l->kernel)
                              : r35a_registry_name(l->family, l->kernel);
}

/* Sets the launch's kernel handle; false (with why) if the context has none for it. */
static bool bind(const r35a_context *ctx, r35a_gpu_launch *l, char *reason, size_t cap)
{
    if (l->split_merge) {   /* no LDS */
        l->handle = r35a_gpu_decode_merge_handle(runtime_of(ctx), l->kernel);
        l->shared_bytes = 0;
    } else if (l->encoder_tail) {
        l->handle = r35a_gpu_encoder_tail_handle(runtime_of(ctx), l->kernel);
        l->shared_bytes = r35a_gpu_encoder_tail_shared_bytes(runtime_of(ctx), l->kernel);
    } else if (l->encoder_paged) {
        l->handle = r35a_gpu_encoder_paged_handle(runtime_of(ctx), l->kernel);
        l->shared_bytes = r35a_gpu_encoder_paged_shared_bytes(runtime_of(ctx), l->kernel);
    } else {
        l->handle = r35a_gpu_kernel_handle(runtime_of(ctx), l->family, l->kernel);
        /* NVIDIA: the kernel's own dynamic shared memory (0 on HIP and for static-LDS kernels) */
        l->shared_bytes = r35a_gpu_kernel_shared_bytes(runtime_of(ctx), l->family, l->kernel);
    }
    if (!l->handle)
        r35a_text_append(reason, cap, ", ", "kernel %s has no handle on this context", launch_name(l));
    return l->handle != NULL;
}

/* Keeps the planned launches in the plan and describes them in its info: the implementation names
 * every launch's kernel ('+'-joined); grid, block, splits are the first launch's; the workspace is
 * the largest any launch uses (they run one after the other on one stream). */
static bool keep_launches(const r35a_context *ctx, r35a_plan *plan, const r35a_gpu_launch *launches, int n,
                          char *reason, size_t cap)
{
    r35a_gpu_plan *g = &plan->gpu;
    r35a_plan_info *info = &plan->info;
    g->num_launches = n;
    info->workspace_bytes = 0;
    info->implementation[0] = '\0';
    for (int i = 0; i < n; ++i) {
        g->launches[i] = launches[i];
        if (!bind(ctx, &g->launches[i], reason, cap))
            return false;
        r35a_text_append(info->implementation, sizeof info->implementation, "+", "%s", launch_name(&launches[i]));
        if (launches[i].workspace_bytes > info->workspace_bytes)
            info->workspace_bytes = launches[i].workspace_bytes;
    }
    memcpy(info->grid, launches[0].grid, sizeof info->grid);
    memcpy(info->block, launches[0].block, sizeof info->block);
    info->num_splits = launches[0].num_splits;
    return true;
}

/* The portable launch a fast plan falls back to when a run's pointers miss its alignment. */
static void keep_fallback(const r35a_context *ctx, r35a_plan *plan, bool planned, const r35a_gpu_launch *l)
{
    char ignored[64] = "";
    plan->gpu.has_fallback = planned;
    if (planned) {
        plan->gpu.fallback = *l;
        plan->gpu.has_fallback = bind(ctx, &plan->gpu.fallback, ignored, sizeof ignored);
    }
}

/* ---- try_plan of each entry ---- */

static bool generic_paged_try_plan(const r35a_context *ctx, r35a_plan *plan, char *reason, size_t cap)
{
    r35a_gpu_launch l;
    return r35a_plan_generic_paged(&plan->desc.paged, tuning_of(ctx), forced_kernel("generic"), &l, reason, cap) &&
           keep_launches(ctx, plan, &l, 1, reason, cap);
}

static bool generic_varlen_try_plan(const r35a_context *ctx, r35a_plan *plan, char *reason, size_t cap)
{
    r35a_gpu_launch l;
    return r35a_plan_generic_varlen(&plan->desc.varlen, tuning_of(ctx), forced_kernel("generic"), &l, reason, cap) &&
           keep_launches(ctx, plan, &l, 1, reason, cap);
}

static bool generic_merge_try_plan(const r35a_context *ctx, r35a_plan *plan, char *reason, size_t cap)
{
    r35a_gpu_launch l;
    return r35a_plan_generic_merge(&plan->desc.merge, tuning_of(ctx), forced_kernel("generic"), &l, reason, cap) &&
           keep_launches(ctx, plan, &l, 1, reason, cap);
}

/* One launch for all segments (two with the tail split), shaped from host-known values only; nothing
 * is read back. */
static bool encoder_try_plan(const r35a_context *ctx, r35a_plan *plan, char *reason, size_t cap)
{
    const r35a_varlen_attention_desc *d = &plan->desc.varlen;
    r35a_gpu_launch l[R35A_ENCODER_MAX_LAUNCHES], fallback;
    int n = 0;
    char ignored[256];
    if (!r35a_plan_encoder(d, tuning_of(ctx), runtime_of(ctx)->planner_cus, forced_kernel("encoder"), l, &n, reason,
                           cap) ||
        !keep_launches(ctx, plan, l, n, reason, cap))
        return false;
    keep_fallback(ctx, plan, r35a_plan_generic_varlen(d, tuning_of(ctx), NULL, &fallback, ignored, sizeof ignored),
                  &fallback);
    return true;
}

/* A call with max_query_len <= 8 is one decode launch, followed by its split merge when it has
 * more than one split. A mixed batch (max_query_len > 8) adds the encoder's paged sibling (prefill) or
 * the generic kernel for the rest (it skips the decode kernel's sequences), all on the caller's
 * stream. A single sequence of more than 8 query tokens is a prefill: the paged sibling alone; so is
 * a mixed batch of a head size no decode variant serves (the sibling takes every sequence). */
static bool decode_try_plan(const r35a_context *ctx, r35a_plan *plan, char *reason, size_t cap)
{
    const r35a_gpu_runtime *rt = runtime_of(ctx);
    const r35a_paged_attention_desc *d = &plan->desc.paged;
    r35a_gpu_launch l[R35A_MAX_LAUNCHES], generic, fallback;
    const bool mixed = d->max_query_len > R35A_DECODE_MAX_QUERY_LEN;
    char ignored[256];
    if (mixed && d->num_seqs == 1 && d->num_tokens > R35A_DECODE_MAX_QUERY_LEN) {
        /* its M is num_tokens, known here: no decode rows (not when R35A_FORCE names a decode variant) */
        char why[256] = "";
        if (forced_kernel("decode")) {
            r35a_text_append(reason, cap, ", ", "one sequence of %d query tokens (a prefill) and R35A_FORCE names a "
                             "decode variant", (int)d->num_tokens);
            return false;
        }
        if (!r35a_plan_prefill(d, rt->arch->tuning, rt->planner_cus, 0, &l[0], why, sizeof why)) {
            r35a_text_append(reason, cap, ", ", "one sequence of %d query tokens (a prefill): %s", (int)d->num_tokens, why);
            return false;
        }
        if (!keep_launches(ctx, plan, l, 1, reason, cap))
            return false;
        keep_fallback(ctx, plan, r35a_plan_generic_paged(d, rt->arch->tuning, NULL, &fallback, ignored, sizeof ignored),
                      &fallback);
        return true;
    }
    if (!mixed) {
        if (!r35a_plan_decode(d, rt->arch->tuning, rt->planner_cus, forced_kernel("decode"), &l[0], reason, cap))
            return false;
    } else if (!r35a_plan_mixed(d, rt->arch->tuning, rt->planner_cus, forced_kernel("decode"), &l[0], &generic, reason,
                                cap)) {
        /* no decode kernel for the short sequences (a head size without a decode variant): the paged
         * sibling serves every sequence when it serves the call (not when R35A_FORCE names a decode
         * variant) */
        char why[256] = "";
        if (forced_kernel("decode") ||
            !r35a_plan_prefill(d, rt->arch->tuning, rt->planner_cus, 0, &l[0], why, sizeof why))
            return false;
        reason[0] = '\0';
        if (!keep_launches(ctx, plan, l, 1, reason, cap))
            return false;
        keep_fallback(ctx, plan, r35a_plan_generic_paged(d, rt->arch->tuning, NULL, &fallback, ignored, sizeof ignored),
                      &fallback);
        return true;
    }
    int n = 1;
    const r35a_paged_attention_desc part = r35a_decode_part(d);   /* what the decode launch was planned on */
    if (r35a_plan_decode_merge(&part, &l[0], &l[n]))
        ++n;
    if (mixed)
        l[n++] = generic;
    if (!keep_launches(ctx, plan, l, n, reason, cap))
        return false;
    if (mixed) /* dispatch.c adds this note to the plan's fallback_reason */
        snprintf(plan->info.fallback_reason, sizeof plan->info.fallback_reason,
                 "max_query_len %d > %d: the sequences with M > %d run on %s in a separate launch",
                 (int)d->max_query_len, R35A_DECODE_MAX_QUERY_LEN, R35A_DECODE_MAX_QUERY_LEN, launch_name(&generic));
    keep_fallback(ctx, plan, r35a_plan_generic_paged(d, rt->arch->tuning, NULL, &fallback, ignored, sizeof ignored),
                  &fallback);
    return true;
}

/* ---- run: the same for every GPU entry ---- */

/* Whether the run's pointers meet the alignment of the plan's fast launches (plans of the portable
 * kernel alone have none); otherwise writes which pointer does not. */
static bool pointers_fit(const r35a_plan *plan, const void *args, const void *workspace, char *why, size_t cap)
{
    const r35a_gpu_launch *first = &plan->gpu.launches[0];
    /* a paged sibling (prefill) anywhere in the plan: its 16-byte rows of q, k_cache, v_cache and out */
    for (int i = 0; i < plan->gpu.num_launches; ++i)
        if (plan->gpu.launches[i].encoder_paged && !r35a_prefill_pointers_aligned(args, why, cap))
            return false;
    switch (first->family) {
    case R35A_GPU_DECODE: return r35a_decode_pointers_aligned(args, workspace, first->num_splits, why, cap);
    case R35A_GPU_ENCODER:
        return first->encoder_paged || r35a_encoder_pointers_aligned(args, why, cap);
    case R35A_GPU_GENERIC:
    case R35A_GPU_NUM_FAMILIES: break;
    }
    return true;
}

/* An empty grid, or a call without query rows: rdna35attn.h promises that num_tokens 0 launches
 * nothing (so reads and checks nothing), whatever the grid the other sizes give (the encoder's comes
 * from max_seqlen). */
static bool nothing_to_launch(const r35a_plan *plan, const uint32_t grid[3])
{
    const int32_t num_tokens = plan->op == R35A_OP_PAGED    ? plan->desc.paged.num_tokens
                               : plan->op == R35A_OP_VARLEN ? plan->desc.varlen.num_tokens
                                                            : plan->desc.merge.num_tokens;
    return num_tokens == 0 || grid[0] == 0 || grid[1] == 0 || grid[2] == 0;
}

/* Fills launch l's argument struct and launches it on stream. */
static r35a_status launch_one(const r35a_context *ctx, const r35a_plan *plan, const r35a_gpu_launch *l,
                              const void *args, void *workspace, void *stream)
{
    if (nothing_to_launch(plan, l->grid))
        return R35A_OK;
    union {
        r35a_decode_args decode;
        r35a_generic_paged_args generic_paged;
        r35a_generic_varlen_args generic_varlen;
        r35a_generic_merge_args generic_merge;
        r35a_encoder_args encoder;
        r35a_prefill_args prefill;
    } ka;
    /* every kernel gets the bounds of its metadata checks from its fill function and the context's
     * device error record here (device_error.h) */
    switch (l->family) {
    case R35A_GPU_DECODE:
        r35a_fill_decode_args(&plan->desc.paged, args, l, workspace, &ka.decode);
        ka.decode.error = runtime_of(ctx)->error_device;
        break;
    case R35A_GPU_GENERIC:
        if (plan->op == R35A_OP_PAGED) {
            r35a_fill_generic_paged_args(&plan->desc.paged, args, l->min_query_len, &ka.generic_paged);
            ka.generic_paged.error = runtime_of(ctx)->error_device;
        } else if (plan->op == R35A_OP_MERGE) {
            r35a_fill_generic_merge_args(&plan->desc.merge, args, &ka.generic_merge);   /* no metadata to check */
        } else {
            r35a_fill_generic_varlen_args(&plan->desc.varlen, args, &ka.generic_varlen);
            ka.generic_varlen.error = runtime_of(ctx)->error_device;
        }
        break;
    case R35A_GPU_ENCODER:
        if (l->encoder_paged) {   /* the paged sibling: a paged call's prefill rows */
            r35a_fill_prefill_args(&plan->desc.paged, args, l->min_query_len, &ka.prefill);
            ka.prefill.error = runtime_of(ctx)->error_device;
            break;
        }
        r35a_fill_encoder_args(&plan->desc.varlen, args, &ka.encoder);
        ka.encoder.error = runtime_of(ctx)->error_device;
        ka.encoder.tail_items = l->tail_items;
        break;
    case R35A_GPU_NUM_FAMILIES:
        return r35a_fail(R35A_ERR_INTERNAL, "plan holds a launch of no kernel family");
    }
    /* the split merge waits for its decode launch in the kernel, an encoder tail kernel for the
     * encoder launch before it ends (programmatic dependent launch) */
    return runtime_of(ctx)->launch(ctx, l->handle, launch_name(l), l->grid, l->block, &ka, l->shared_bytes,
                                   l->programmatic, stream);
}

static r35a_status gpu_run(const r35a_context *ctx, const r35a_plan *plan, const void *args, void *workspace,
                           size_t workspace_bytes, void *stream)
{
    (void)workspace_bytes; /* checked against the plan's by api.c */
    const r35a_gpu_plan *g = &plan->gpu;
    const r35a_gpu_launch *launches = g->launches;
    int n = g->num_launches;
    char why[128];
    if (!pointers_fit(plan, args, workspace, why, sizeof why)) {
        /* Pointers are only known now; the portable kernel serves any alignment and needs no workspace. */
        if (!g->has_fallback)
            return r35a_fail(R35A_ERR_INVALID_ARGUMENT, "%s_attention_args: %s as %s needs, and no generic kernel "
                             "serves the call", r35a_op_name(plan->op), why,
                             plan->info.implementation);
        r35a_log("%s: %s cannot run: %s; running %s instead", r35a_op_name(plan->op),
                 plan->info.implementation, why, r35a_registry_name(g->fallback.family, g->fallback.kernel));
        launches = &g->fallback;
        n = 1;
    }
    /* A later launch's failure leaves the earlier ones queued: only a broken device or runtime fails
     * a launch whose shape was planned. */
    for (int i = 0; i < n; ++i) {
        r35a_status st = launch_one(ctx, plan, &launches[i], args, workspace, stream);
        if (st != R35A_OK)
            return st;
    }
    return R35A_OK;
}

const r35a_impl r35a_gpu_paged_tuned = {"decode", R35A_OP_PAGED, R35A_BACKEND_GPU, decode_try_plan, gpu_run};
const r35a_impl r35a_gpu_paged_generic = {"generic", R35A_OP_PAGED, R35A_BACKEND_GPU, generic_paged_try_plan, gpu_run};
const r35a_impl r35a_gpu_varlen_generic = {"generic", R35A_OP_VARLEN, R35A_BACKEND_GPU, generic_varlen_try_plan,
                                           gpu_run};
const r35a_impl r35a_gpu_varlen_encoder = {"encoder", R35A_OP_VARLEN, R35A_BACKEND_GPU, encoder_try_plan, gpu_run};
const r35a_impl r35a_gpu_merge_generic = {"generic", R35A_OP_MERGE, R35A_BACKEND_GPU, generic_merge_try_plan, gpu_run};
