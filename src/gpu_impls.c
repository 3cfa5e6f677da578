/* gpu_impls.c - the GPU implementation entries (see gpu_impls.h), shared by backend_hip.c and
 * backend_cuda.c: planning with plan_gfx1151.c, the kernels' argument structs, the fallback to the
 * portable kernel for misaligned pointers, the split counters' memset ahead of a decode launch and
 * the second launch of a mixed batch. Kernel handles and launches come from ctx->gpu_runtime. */
#include "gpu_impls.h"

#include "planner.h"

#include <stdio.h>
#include <string.h>

static const r35a_gpu_runtime *runtime_of(const r35a_context *ctx) { return ctx->gpu_runtime; }

/* Launches kernel `index` of `family` through the context's runtime (see r35a_gpu_runtime.launch). */
static r35a_status launch(const r35a_context *ctx, r35a_gpu_family family, int index, const char *name,
                          const uint32_t grid[3], const uint32_t block[3], void *args, size_t args_size,
                          void *clear, size_t clear_bytes, void *stream)
{
    const r35a_gpu_runtime *rt = runtime_of(ctx);
    return rt->launch(ctx, rt->kernels[family][index], name, grid, block, args, args_size, clear, clear_bytes,
                      stream);
}

/* R35A_FORCE (test-only) naming one kernel of a family, e.g. "decode_f16_d128_r16_kw2_dw2_w8": the
 * planner then considers that kernel only. Dispatch calls a family's entry only when R35A_FORCE is
 * unset, the family's name, or one of its kernels' names. */
static const char *forced_kernel(const char *family)
{
    const char *force = r35a_forced_impl();
    return force && strcmp(force, family) != 0 ? force : NULL;
}

static void fill_info(r35a_plan_info *info, const r35a_gpu_launch *l, const char *name)
{
    snprintf(info->implementation, sizeof info->implementation, "%s", name);
    info->workspace_bytes = l->workspace_bytes;
    memcpy(info->grid, l->grid, sizeof info->grid);
    memcpy(info->block, l->block, sizeof info->block);
    info->num_splits = l->num_splits;
}

static bool nothing_to_launch(const uint32_t grid[3]) { return grid[0] == 0 || grid[1] == 0 || grid[2] == 0; }

/* ---- the generic (portable) kernel ---- */

static bool generic_paged_supports(const r35a_context *ctx, const void *desc, char *reason, size_t reason_len)
{
    r35a_gpu_launch l;
    return r35a_plan_generic_paged(desc, runtime_of(ctx)->arch, forced_kernel("generic"), &l, reason, reason_len);
}

static r35a_status generic_paged_plan(const r35a_context *ctx, const void *desc, r35a_plan_info *info)
{
    r35a_gpu_launch l;
    char why[256];
    if (!r35a_plan_generic_paged(desc, runtime_of(ctx)->arch, forced_kernel("generic"), &l, why, sizeof why))
        return r35a_fail(R35A_ERR_INTERNAL, "generic paged planner declined after accepting: %s", why);
    fill_info(info, &l, r35a_generic_kernels[l.kernel].name);
    return R35A_OK;
}

/* Launches generic kernel `kernel` with one workgroup per (query token, query head); both ops use
 * this grid. Nothing is launched for an empty call. */
static r35a_status launch_generic(const r35a_context *ctx, int kernel, int32_t num_tokens, int32_t num_q_heads,
                                  void *kernel_args, size_t kernel_args_size, void *stream)
{
    uint32_t grid[3], block[3] = {R35A_GENERIC_THREADS, 1, 1};
    r35a_generic_grid(num_tokens, num_q_heads, grid);
    if (nothing_to_launch(grid))
        return R35A_OK;
    return launch(ctx, R35A_GPU_GENERIC, kernel, r35a_generic_kernels[kernel].name, grid, block, kernel_args,
                  kernel_args_size, NULL, 0, stream);
}

/* Runs the generic paged kernel `kernel` over the sequences with M > min_query_len. */
static r35a_status run_generic_paged(const r35a_context *ctx, int kernel, const r35a_paged_attention_desc *d,
                                     const r35a_paged_attention_args *args, int32_t min_query_len, void *stream)
{
    r35a_generic_paged_args ka;
    r35a_fill_generic_paged_args(d, args, min_query_len, &ka);
    return launch_generic(ctx, kernel, d->num_tokens, d->num_q_heads, &ka, sizeof ka, stream);
}

static r35a_status generic_paged_run(const r35a_context *ctx, const r35a_plan *plan, const void *args,
                                     void *workspace, size_t workspace_bytes, void *stream)
{
    (void)workspace;
    (void)workspace_bytes;
    int k = r35a_find_generic_kernel(plan->info.implementation);
    if (k < 0)
        return r35a_fail(R35A_ERR_INTERNAL, "plan names unknown kernel %s", plan->info.implementation);
    return run_generic_paged(ctx, k, &plan->desc.paged, args, 0, stream);
}

static bool generic_varlen_supports(const r35a_context *ctx, const void *desc, char *reason, size_t reason_len)
{
    r35a_gpu_launch l;
    return r35a_plan_generic_varlen(desc, runtime_of(ctx)->arch, forced_kernel("generic"), &l, reason, reason_len);
}

static r35a_status generic_varlen_plan(const r35a_context *ctx, const void *desc, r35a_plan_info *info)
{
    r35a_gpu_launch l;
    char why[256];
    if (!r35a_plan_generic_varlen(desc, runtime_of(ctx)->arch, forced_kernel("generic"), &l, why, sizeof why))
        return r35a_fail(R35A_ERR_INTERNAL, "generic varlen planner declined after accepting: %s", why);
    fill_info(info, &l, r35a_generic_kernels[l.kernel].name);
    return R35A_OK;
}

/* Runs the generic varlen kernel `kernel` over all segments. */
static r35a_status run_generic_varlen(const r35a_context *ctx, int kernel, const r35a_varlen_attention_desc *d,
                                      const r35a_varlen_attention_args *args, void *stream)
{
    r35a_generic_varlen_args ka;
    r35a_fill_generic_varlen_args(d, args, &ka);
    return launch_generic(ctx, kernel, d->num_tokens, d->num_q_heads, &ka, sizeof ka, stream);
}

static r35a_status generic_varlen_run(const r35a_context *ctx, const r35a_plan *plan, const void *args,
                                      void *workspace, size_t workspace_bytes, void *stream)
{
    (void)workspace;
    (void)workspace_bytes;
    int k = r35a_find_generic_kernel(plan->info.implementation);
    if (k < 0)
        return r35a_fail(R35A_ERR_INTERNAL, "plan names unknown kernel %s", plan->info.implementation);
    return run_generic_varlen(ctx, k, &plan->desc.varlen, args, stream);
}

/* ---- the tuned encoder variants (non-causal varlen) ---- */

static bool encoder_supports(const r35a_context *ctx, const void *desc, char *reason, size_t reason_len)
{
    r35a_gpu_launch l;
    return r35a_plan_encoder(desc, runtime_of(ctx)->arch, forced_kernel("encoder"), &l, reason, reason_len);
}

static r35a_status encoder_plan(const r35a_context *ctx, const void *desc, r35a_plan_info *info)
{
    r35a_gpu_launch l;
    char why[256];
    if (!r35a_plan_encoder(desc, runtime_of(ctx)->arch, forced_kernel("encoder"), &l, why, sizeof why))
        return r35a_fail(R35A_ERR_INTERNAL, "encoder planner declined after accepting: %s", why);
    fill_info(info, &l, r35a_encoder_variants[l.kernel].name);
    return R35A_OK;
}

/* One launch for all segments, shaped by the plan (host-known values only); nothing is read back. */
static r35a_status encoder_run(const r35a_context *ctx, const r35a_plan *plan, const void *args_v,
                               void *workspace, size_t workspace_bytes, void *stream)
{
    (void)workspace;
    (void)workspace_bytes;
    const r35a_gpu_runtime *rt = runtime_of(ctx);
    const r35a_varlen_attention_desc *d = &plan->desc.varlen;
    const r35a_varlen_attention_args *args = args_v;
    int v = r35a_find_encoder_variant(plan->info.implementation);
    if (v < 0)
        return r35a_fail(R35A_ERR_INTERNAL, "plan names unknown kernel %s", plan->info.implementation);
    const r35a_encoder_variant *var = &r35a_encoder_variants[v];

    char why[128];
    if (!r35a_encoder_pointers_aligned(args, why, sizeof why)) {
        /* Pointers are only known now; the portable kernel serves any alignment. */
        r35a_gpu_launch g;
        char gwhy[256];
        if (!r35a_plan_generic_varlen(d, rt->arch, NULL, &g, gwhy, sizeof gwhy))
            return r35a_fail(R35A_ERR_INVALID_ARGUMENT, "varlen_attention_args: %s as %s needs, and no generic "
                             "kernel serves the call: %s", why, var->name, gwhy);
        r35a_log("varlen: %s cannot run: %s; running %s instead", var->name, why,
                 r35a_generic_kernels[g.kernel].name);
        return run_generic_varlen(ctx, g.kernel, d, args, stream);
    }
    if (nothing_to_launch(plan->info.grid))
        return R35A_OK;
    r35a_encoder_args ka;
    r35a_fill_encoder_args(d, args, &ka);
    return launch(ctx, R35A_GPU_ENCODER, v, var->name, plan->info.grid, plan->info.block, &ka, sizeof ka, NULL, 0,
                  stream);
}

/* ---- the tuned decode variants ----
 * A call with max_query_len <= 8 is one decode launch. A mixed batch (max_query_len > 8) is two
 * launches on the caller's stream: the decode variant for the sequences with M <= 8 (it skips the
 * others), then the generic kernel with min_query_len = 8 for the rest. The plan names both,
 * "decode_...+generic_paged_...", and its grid, block, splits and workspace are the decode launch's. */

static bool plan_tuned(const r35a_context *ctx, const r35a_paged_attention_desc *d, r35a_gpu_launch *dl,
                       r35a_gpu_launch *gl, bool *mixed, char *reason, size_t reason_len)
{
    const r35a_gpu_runtime *rt = runtime_of(ctx);
    *mixed = d->max_query_len > R35A_DECODE_MAX_QUERY_LEN;
    if (!*mixed)
        return r35a_plan_decode(d, rt->arch, rt->planner_cus, forced_kernel("decode"), dl, reason, reason_len);
    return r35a_plan_mixed(d, rt->arch, rt->planner_cus, forced_kernel("decode"), dl, gl, reason, reason_len);
}

static bool decode_supports(const r35a_context *ctx, const void *desc, char *reason, size_t reason_len)
{
    r35a_gpu_launch dl, gl;
    bool mixed;
    return plan_tuned(ctx, desc, &dl, &gl, &mixed, reason, reason_len);
}

static r35a_status decode_plan(const r35a_context *ctx, const void *desc, r35a_plan_info *info)
{
    const r35a_paged_attention_desc *d = desc;
    r35a_gpu_launch dl, gl;
    bool mixed;
    char why[256];
    if (!plan_tuned(ctx, d, &dl, &gl, &mixed, why, sizeof why))
        return r35a_fail(R35A_ERR_INTERNAL, "decode planner declined after accepting: %s", why);
    fill_info(info, &dl, r35a_decode_variants[dl.kernel].name);
    if (mixed) {
        const char *generic = r35a_generic_kernels[gl.kernel].name;
        snprintf(info->implementation, sizeof info->implementation, "%s+%s", r35a_decode_variants[dl.kernel].name,
                 generic);
        /* dispatch.c adds this note to the plan's fallback_reason. */
        snprintf(info->fallback_reason, sizeof info->fallback_reason,
                 "max_query_len %d > %d: the sequences with M > %d run on %s in a second launch",
                 (int)d->max_query_len, R35A_DECODE_MAX_QUERY_LEN, R35A_DECODE_MAX_QUERY_LEN, generic);
    }
    return R35A_OK;
}

static r35a_status decode_run(const r35a_context *ctx, const r35a_plan *plan, const void *args_v,
                              void *workspace, size_t workspace_bytes, void *stream)
{
    (void)workspace_bytes;
    const r35a_gpu_runtime *rt = runtime_of(ctx);
    const r35a_paged_attention_desc *d = &plan->desc.paged;
    const r35a_paged_attention_args *args = args_v;
    /* "decode_..." or, for a mixed batch, "decode_...+generic_paged_...". */
    char name[sizeof plan->info.implementation];
    snprintf(name, sizeof name, "%s", plan->info.implementation);
    char *plus = strchr(name, '+');
    if (plus)
        *plus = '\0';
    int v = r35a_find_decode_variant(name);
    int mixed_generic = plus ? r35a_find_generic_kernel(plus + 1) : -1;
    if (v < 0 || (plus && mixed_generic < 0))
        return r35a_fail(R35A_ERR_INTERNAL, "plan names unknown kernel %s", plan->info.implementation);
    const r35a_decode_variant *var = &r35a_decode_variants[v];

    char why[128];
    if (!r35a_decode_pointers_aligned(args, workspace, plan->info.num_splits, why, sizeof why)) {
        /* Pointers are only known now; the portable kernel serves any alignment and needs no workspace. */
        r35a_gpu_launch g;
        char gwhy[256];
        if (!r35a_plan_generic_paged(d, rt->arch, NULL, &g, gwhy, sizeof gwhy))
            return r35a_fail(R35A_ERR_INVALID_ARGUMENT, "paged_attention_args: %s as %s needs, and no generic "
                             "kernel serves the call: %s", why, var->name, gwhy);
        r35a_log("paged: %s cannot run: %s; running %s instead", var->name, why,
                 r35a_generic_kernels[g.kernel].name);
        return run_generic_paged(ctx, g.kernel, d, args, 0, stream);
    }

    if (!nothing_to_launch(plan->info.grid)) {
        /* The decode launch serves M <= max_query_len, capped at 8 in a mixed batch (as planned). */
        const r35a_paged_attention_desc part = r35a_decode_part(d);
        r35a_gpu_launch l;
        memset(&l, 0, sizeof l);
        l.kernel = v;
        l.num_splits = plan->info.num_splits;
        l.num_row_groups = r35a_decode_num_row_groups(part.num_q_heads / part.num_kv_heads, part.max_query_len,
                                                      var->rows);
        r35a_decode_args ka;
        r35a_fill_decode_args(&part, args, &l, workspace, &ka);

        /* The split-KV arrival counters must start at zero, and the caller's workspace may hold anything
         * (another op's scratch): clear them on the stream, ahead of the kernel. */
        size_t counters = l.num_splits > 1 ? (size_t)r35a_decode_counters_bytes(part.num_seqs, part.num_kv_heads,
                                                                                l.num_row_groups)
                                           : 0;
        r35a_status rs = launch(ctx, R35A_GPU_DECODE, v, var->name, plan->info.grid, plan->info.block, &ka,
                                sizeof ka, workspace, counters, stream);
        if (rs != R35A_OK)
            return rs;
    }
    if (!plus)
        return R35A_OK;
    /* Mixed batch: the sequences with M > 8 on the same stream (a failure here leaves the decode
     * launch queued: only a broken device or runtime fails a launch whose shape was planned). */
    return run_generic_paged(ctx, mixed_generic, d, args, R35A_DECODE_MAX_QUERY_LEN, stream);
}

const r35a_impl r35a_gpu_paged_tuned = {"decode", R35A_OP_PAGED, R35A_BACKEND_GPU,
                                        decode_supports, decode_plan, decode_run};
const r35a_impl r35a_gpu_paged_generic = {"generic", R35A_OP_PAGED, R35A_BACKEND_GPU,
                                          generic_paged_supports, generic_paged_plan, generic_paged_run};
const r35a_impl r35a_gpu_varlen_generic = {"generic", R35A_OP_VARLEN, R35A_BACKEND_GPU,
                                           generic_varlen_supports, generic_varlen_plan, generic_varlen_run};
const r35a_impl r35a_gpu_varlen_encoder = {"encoder", R35A_OP_VARLEN, R35A_BACKEND_GPU,
                                           encoder_supports, encoder_plan, encoder_run};
