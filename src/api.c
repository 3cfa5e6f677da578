/* api.c - public entry points: version, status strings, error detail, contexts, plans, runs.
 *
 * Every entry point clears the thread-local detail first, validates, then delegates: validation to
 * validate.c, the choice of implementation to dispatch.c, the work to the chosen implementation. */
#include "internal.h"

#include "backend_cuda.h"
#include "backend_hip.h"
#include "gpu_runtime.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define R35A_STR2(x) #x
#define R35A_STR(x) R35A_STR2(x)

unsigned r35a_version_number(void) { return R35A_VERSION_NUMBER; }

const char *r35a_version_string(void)
{
    return R35A_STR(R35A_VERSION_MAJOR) "." R35A_STR(R35A_VERSION_MINOR) "." R35A_STR(R35A_VERSION_PATCH);
}

/* ---- contexts ---- */

void r35a_context_options_init(r35a_context_options *options)
{
    if (!options)
        return;
    memset(options, 0, sizeof *options);
    options->struct_size = sizeof *options;
    options->backend = R35A_BACKEND_AUTO;
    options->device_index = 0;
}

static void copy_text(char *dst, size_t cap, const char *src) { snprintf(dst, cap, "%s", src); }

static void host_arch_name(char *dst, size_t cap)
{
#if defined(__x86_64__)
    copy_text(dst, cap, "x86_64");
#elif defined(__aarch64__)
    copy_text(dst, cap, "aarch64");
#else
    copy_text(dst, cap, "host");
#endif
}

/* Fills ctx for the reference backend; why says why it was chosen. */
static void become_reference(r35a_context *ctx, const char *why)
{
    ctx->backend = R35A_BACKEND_REFERENCE;
    ctx->info.backend = R35A_BACKEND_REFERENCE;
    ctx->info.device_index = -1;
    copy_text(ctx->info.backend_name, sizeof ctx->info.backend_name, "reference");
    host_arch_name(ctx->info.arch, sizeof ctx->info.arch);
    copy_text(ctx->info.reason, sizeof ctx->info.reason, why);
}

r35a_status r35a_context_create(const r35a_context_options *options, r35a_context **context)
{
    r35a_clear_error();
    if (!context)
        return r35a_fail(R35A_ERR_NULL_POINTER, "context: NULL output pointer");
    *context = NULL;
    r35a_context_options defaults;
    if (!options) {
        r35a_context_options_init(&defaults);
        options = &defaults;
    }
    if (options->struct_size != sizeof(r35a_context_options))
        return r35a_fail(R35A_ERR_STRUCT_SIZE, "context_options.struct_size: %zu is not %zu",
                         options->struct_size, sizeof(r35a_context_options));
    if (options->backend != R35A_BACKEND_AUTO && options->backend != R35A_BACKEND_GPU &&
        options->backend != R35A_BACKEND_REFERENCE)
        return r35a_fail(R35A_ERR_INVALID_ARGUMENT, "context_options.backend: %d is not an r35a_backend",
                         (int)options->backend);
    if (options->device_index < 0)
        return r35a_fail(R35A_ERR_INVALID_ARGUMENT, "context_options.device_index: %d is negative",
                         (int)options->device_index);

    r35a_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return r35a_fail(R35A_ERR_OUT_OF_MEMORY, "context: allocation of %zu bytes failed", sizeof *ctx);
    ctx->info.struct_size = sizeof ctx->info;
    if (options->backend == R35A_BACKEND_REFERENCE) {
        become_reference(ctx, "reference backend requested");
    } else {
        /* HIP first, then CUDA; the reasons of both when neither serves (CUDA's only when this build
         * has NVIDIA cubins at all). */
        char why[200];
        bool served = r35a_hip_context_init(ctx, options->device_index, why, sizeof why);
        if (!served) {
            char cuda_why[200];
            bool cuda_built = false;
            served = r35a_cuda_context_init(ctx, options->device_index, &cuda_built, cuda_why, sizeof cuda_why);
            if (!served && cuda_built) {
                /* both reasons, cut to the field's size (still informative) */
                size_t used = strlen(why), room = sizeof why - used;
                if (room > 3) {
                    memcpy(why + used, "; ", 2);
                    size_t n = strlen(cuda_why);
                    n = n < room - 3 ? n : room - 3;
                    memcpy(why + used + 2, cuda_why, n);
                    why[used + 2 + n] = '\0';
                }
            }
        }
        if (!served) {
            if (options->backend == R35A_BACKEND_GPU) {
                free(ctx);
                return r35a_fail(R35A_ERR_BACKEND_UNAVAILABLE, "context_options.backend: GPU requested but %s",
                                 why);
            }
            char auto_why[sizeof ctx->info.reason];
            snprintf(auto_why, sizeof auto_why, "auto: %s", why);
            become_reference(ctx, auto_why);
        }
    }
    r35a_log("context: backend %s (%s), arch %s", ctx->info.backend_name, ctx->info.reason, ctx->info.arch);
    *context = ctx;
    return R35A_OK;
}

/* On a GPU context, what kernels of earlier runs recorded about bad device metadata
 * (kernels/common/device_error.h), reported once and cleared; R35A_OK on the reference. */
static r35a_status take_device_error(const r35a_context *context)
{
    return context->gpu_runtime ? r35a_gpu_take_device_error(context->gpu_runtime) : R35A_OK;
}

r35a_status r35a_context_check_device(r35a_context *context)
{
    r35a_clear_error();
    if (!context)
        return r35a_fail(R35A_ERR_NULL_POINTER, "context: NULL");
    return take_device_error(context);
}

void r35a_context_destroy(r35a_context *context)
{
    if (!context)
        return;
    if (context->gpu_runtime)
        context->gpu_runtime->release(context);
    free(context);
}

/* The checks of a get_info call: its object and output struct exist, the struct's size is ours. */
static r35a_status check_info_call(const void *object, const char *object_name, const void *info, size_t struct_size,
                                   size_t expected, const char *info_name)
{
    r35a_clear_error();
    if (!object)
        return r35a_fail(R35A_ERR_NULL_POINTER, "%s: NULL", object_name);
    if (!info)
        return r35a_fail(R35A_ERR_NULL_POINTER, "info: NULL");
    if (struct_size != expected)
        return r35a_fail(R35A_ERR_STRUCT_SIZE, "%s.struct_size: %zu is not %zu", info_name, struct_size, expected);
    return R35A_OK;
}

r35a_status r35a_context_get_info(const r35a_context *context, r35a_context_info *info)
{
    r35a_status st = check_info_call(context, "context", info, info ? info->struct_size : 0, sizeof *info,
                                     "context_info");
    if (st == R35A_OK)
        *info = context->info;
    return st;
}

/* ---- plans ---- */

r35a_status r35a_plan_get_info(const r35a_plan *plan, r35a_plan_info *info)
{
    r35a_status st = check_info_call(plan, "plan", info, info ? info->struct_size : 0, sizeof *info, "plan_info");
    if (st == R35A_OK)
        *info = plan->info;
    return st;
}

void r35a_plan_destroy(r35a_plan *plan) { free(plan); }

/* "paged attention", "varlen attention", "merge states": what a plan was made for, in messages. */
static const char *op_title(r35a_op op)
{
    return op == R35A_OP_MERGE ? "merge states" : op == R35A_OP_PAGED ? "paged attention" : "varlen attention";
}

static r35a_status plan_op(r35a_op op, r35a_context *context, const void *desc, r35a_plan **out)
{
    r35a_clear_error();
    if (!out)
        return r35a_fail(R35A_ERR_NULL_POINTER, "plan: NULL output pointer");
    *out = NULL;
    if (!context)
        return r35a_fail(R35A_ERR_NULL_POINTER, "context: NULL");
    r35a_status st = take_device_error(context);
    if (st != R35A_OK)
        return st;
    r35a_op_desc full;
    st = r35a_upgrade_desc(op, desc, &full);
    if (st == R35A_OK)
        st = r35a_validate_desc(op, &full);
    if (st != R35A_OK)
        return st;
    r35a_plan *plan = calloc(1, sizeof *plan);
    if (!plan)
        return r35a_fail(R35A_ERR_OUT_OF_MEMORY, "plan: allocation of %zu bytes failed", sizeof *plan);
    plan->op = op;
    plan->ctx = context;
    plan->info.struct_size = sizeof plan->info;
    plan->desc = full;
    st = r35a_dispatch(context, op, plan);
    if (st != R35A_OK) {
        free(plan);
        return st;
    }
    *out = plan;
    return R35A_OK;
}

/* The plan belongs to this context and op; the workspace fits; the args are upgraded and checked
 * (their metadata contents too where they are host memory), then the plan's implementation runs. */
static r35a_status run_op(r35a_op op, r35a_context *context, const r35a_plan *plan, const void *args,
                          void *workspace, size_t workspace_bytes, void *stream)
{
    r35a_clear_error();
    if (!context)
        return r35a_fail(R35A_ERR_NULL_POINTER, "context: NULL");
    r35a_status st = take_device_error(context);
    if (st != R35A_OK)
        return st;
    if (!plan)
        return r35a_fail(R35A_ERR_NULL_POINTER, "plan: NULL");
    if (plan->op != op)
        return r35a_fail(R35A_ERR_PLAN_MISMATCH, "plan: made for %s, run as %s", op_title(plan->op),
                         op_title(op));
    if (plan->ctx != context)
        return r35a_fail(R35A_ERR_PLAN_MISMATCH, "plan: made by another context");
    if (workspace_bytes < plan->info.workspace_bytes)
        return r35a_fail(R35A_ERR_WORKSPACE_TOO_SMALL, "workspace_bytes: %zu is below the plan's %zu",
                         workspace_bytes, plan->info.workspace_bytes);
    if (plan->info.workspace_bytes > 0 && !workspace)
        return r35a_fail(R35A_ERR_NULL_POINTER, "workspace: NULL but the plan needs %zu bytes",
                         plan->info.workspace_bytes);
    r35a_op_args full;
    st = r35a_upgrade_args(op, args, &full);
    if (st == R35A_OK)
        st = r35a_validate_args(op, &plan->desc, &full, context->backend == R35A_BACKEND_REFERENCE);
    if (st != R35A_OK)
        return st;
    return plan->impl->run(context, plan, &full, workspace, workspace_bytes, stream);
}

r35a_status r35a_paged_attention_plan(r35a_context *context, const r35a_paged_attention_desc *desc,
                                      r35a_plan **plan)
{
    return plan_op(R35A_OP_PAGED, context, desc, plan);
}

r35a_status r35a_varlen_attention_plan(r35a_context *context, const r35a_varlen_attention_desc *desc,
                                       r35a_plan **plan)
{
    return plan_op(R35A_OP_VARLEN, context, desc, plan);
}

r35a_status r35a_paged_attention_run(r35a_context *context, const r35a_plan *plan,
                                     const r35a_paged_attention_args *args, void *workspace,
                                     size_t workspace_bytes, void *stream)
{
    return run_op(R35A_OP_PAGED, context, plan, args, workspace, workspace_bytes, stream);
}

r35a_status r35a_varlen_attention_run(r35a_context *context, const r35a_plan *plan,
                                      const r35a_varlen_attention_args *args, void *workspace,
                                      size_t workspace_bytes, void *stream)
{
    return run_op(R35A_OP_VARLEN, context, plan, args, workspace, workspace_bytes, stream);
}

r35a_status r35a_merge_states_plan(r35a_context *context, const r35a_merge_states_desc *desc, r35a_plan **plan)
{
    return plan_op(R35A_OP_MERGE, context, desc, plan);
}

r35a_status r35a_merge_states_run(r35a_context *context, const r35a_plan *plan, const r35a_merge_states_args *args,
                                  void *workspace, size_t workspace_bytes, void *stream)
{
    return run_op(R35A_OP_MERGE, context, plan, args, workspace, workspace_bytes, stream);
}

/* ---- descriptor defaults ----
 * The descriptors grew in 0.2 and again in 0.3, and the paged one in 0.4. A binary built against
 * an earlier header hands r35a_*_desc_init a struct of that release's size, so writing today's size
 * would overflow it. On ELF platforms the library therefore keeps each earlier release's functions
 * under its symbol version (R35A_0: 0.1.0's, R35A_0.2: 0.2.0's, R35A_0.3: 0.3.0's paged one; each
 * fills its release's prefix and sets struct_size to that size, which plan calls accept) and
 * exports today's under R35A_0.4 (paged) and R35A_0.3 (varlen, unchanged since) in
 * src/rdna35attn.map, the versions a newly linked binary binds to. Elsewhere (no symbol versions)
 * only today's exist, under the plain names. */

#if defined(__ELF__)
#define PAGED_DESC_INIT r35a_paged_attention_desc_init_v0_4
#define VARLEN_DESC_INIT r35a_varlen_attention_desc_init_v0_3
__asm__(".symver r35a_paged_attention_desc_init_v0_4, r35a_paged_attention_desc_init@@R35A_0.4");
__asm__(".symver r35a_paged_attention_desc_init_v0_3, r35a_paged_attention_desc_init@R35A_0.3");
__asm__(".symver r35a_varlen_attention_desc_init_v0_3, r35a_varlen_attention_desc_init@@R35A_0.3");
__asm__(".symver r35a_paged_attention_desc_init_v0_2, r35a_paged_attention_desc_init@R35A_0.2");
__asm__(".symver r35a_varlen_attention_desc_init_v0_2, r35a_varlen_attention_desc_init@R35A_0.2");
__asm__(".symver r35a_paged_attention_desc_init_v0_1, r35a_paged_attention_desc_init@R35A_0");
__asm__(".symver r35a_varlen_attention_desc_init_v0_1, r35a_varlen_attention_desc_init@R35A_0");
#define DECLARE_OLD_INITS(v)                                                                                         \
    R35A_API void r35a_paged_attention_desc_init_##v(r35a_paged_attention_desc *desc, r35a_dtype dtype,               \
                                                     int32_t num_seqs, int32_t num_tokens, int32_t max_query_len,     \
                                                     int32_t max_seq_len, int32_t num_q_heads, int32_t num_kv_heads,  \
                                                     int32_t head_size, int32_t page_size, int32_t num_pages);        \
    R35A_API void r35a_varlen_attention_desc_init_##v(r35a_varlen_attention_desc *desc, r35a_dtype dtype,             \
                                                      int32_t num_segments, int32_t num_tokens, int32_t max_seqlen,   \
                                                      int32_t num_q_heads, int32_t num_kv_heads, int32_t head_size);
DECLARE_OLD_INITS(v0_1)
DECLARE_OLD_INITS(v0_2)
R35A_API void r35a_paged_attention_desc_init_v0_3(r35a_paged_attention_desc *desc, r35a_dtype dtype, int32_t num_seqs,
                                                  int32_t num_tokens, int32_t max_query_len, int32_t max_seq_len,
                                                  int32_t num_q_heads, int32_t num_kv_heads, int32_t head_size,
                                                  int32_t page_size, int32_t num_pages);
R35A_API void PAGED_DESC_INIT(r35a_paged_attention_desc *desc, r35a_dtype dtype, int32_t num_seqs,
                              int32_t num_tokens, int32_t max_query_len, int32_t max_seq_len, int32_t num_q_heads,
                              int32_t num_kv_heads, int32_t head_size, int32_t page_size, int32_t num_pages);
R35A_API void VARLEN_DESC_INIT(r35a_varlen_attention_desc *desc, r35a_dtype dtype, int32_t num_segments,
                               int32_t num_tokens, int32_t max_seqlen, int32_t num_q_heads, int32_t num_kv_heads,
                               int32_t head_size);
#else
#define PAGED_DESC_INIT r35a_paged_attention_desc_init
#define VARLEN_DESC_INIT r35a_varlen_attention_desc_init
#endif

/* The fields both descriptors share (same names): zeros first, then the shape, the default scale
 * and contiguous Q/O rows. */
#define FILL_SHAPE(d, size, dtype_, num_tokens_, num_q_heads_, num_kv_heads_, head_size_)             \
    do {                                                                                               \
        memset(&(d), 0, sizeof(d));                                                                    \
        (d).struct_size = (size);                                                                      \
        (d).dtype = (dtype_);                                                                          \
        (d).num_tokens = (num_tokens_);                                                                \
        (d).num_q_heads = (num_q_heads_);                                                              \
        (d).num_kv_heads = (num_kv_heads_);                                                            \
        (d).head_size = (head_size_);                                                                  \
        (d).softmax_scale = (head_size_) > 0 ? 1.0f / sqrtf((float)(head_size_)) : 1.0f;               \
        (d).q_token_stride = (d).o_token_stride = (int64_t)(num_q_heads_) * (head_size_);              \
        (d).q_head_stride = (d).o_head_stride = (head_size_);                                          \
    } while (0)

/* Fills the first `size` bytes of *desc (today's size or 0.1.0's: the fields of that release). */
static void fill_paged_desc(r35a_paged_attention_desc *desc, size_t size, r35a_dtype dtype, int32_t num_seqs,
                            int32_t num_tokens, int32_t max_query_len, int32_t max_seq_len, int32_t num_q_heads,
                            int32_t num_kv_heads, int32_t head_size, int32_t page_size, int32_t num_pages)
{
    r35a_paged_attention_desc d;
    FILL_SHAPE(d, size, dtype, num_tokens, num_q_heads, num_kv_heads, head_size);
    d.num_seqs = num_seqs;
    d.max_query_len = max_query_len;
    d.max_seq_len = max_seq_len;
    d.page_size = page_size;
    d.num_pages = num_pages;
    d.block_table_stride = page_size > 0 ? (int32_t)(((int64_t)max_seq_len + page_size - 1) / page_size) : 0;
    d.k_slot_stride = d.v_slot_stride = head_size;
    d.k_head_stride = d.v_head_stride = (int64_t)page_size * head_size;
    d.k_page_stride = d.v_page_stride = (int64_t)num_kv_heads * page_size * head_size;
    /* the 0.2 fields' defaults are the zeros: no sinks, kv_dtype = dtype, per-tensor scales; 0.3's:
     * no LSE, contiguous [num_tokens][num_q_heads] LSE strides for a caller that turns it on */
    d.lse_token_stride = num_q_heads;
    d.lse_head_stride = 1;
    /* 0.4's: per-tensor scales (kv_scale_per_head 0), contiguous per-token-head scale strides
     * [num_pages][page_size][num_kv_heads] for a caller that picks that granularity */
    d.k_scale_page_stride = d.v_scale_page_stride = (int64_t)page_size * num_kv_heads;
    d.k_scale_slot_stride = d.v_scale_slot_stride = num_kv_heads;
    d.k_scale_head_stride = d.v_scale_head_stride = 1;
    memcpy(desc, &d, size);
}

static void fill_varlen_desc(r35a_varlen_attention_desc *desc, size_t size, r35a_dtype dtype, int32_t num_segments,
                             int32_t num_tokens, int32_t max_seqlen, int32_t num_q_heads, int32_t num_kv_heads,
                             int32_t head_size)
{
    r35a_varlen_attention_desc d;
    FILL_SHAPE(d, size, dtype, num_tokens, num_q_heads, num_kv_heads, head_size);
    d.num_segments = num_segments;
    d.max_seqlen = max_seqlen;
    d.k_token_stride = d.v_token_stride = (int64_t)num_kv_heads * head_size;
    d.k_head_stride = d.v_head_stride = head_size;
    d.lse_token_stride = num_q_heads;
    d.lse_head_stride = 1;
    memcpy(desc, &d, size);
}

void PAGED_DESC_INIT(r35a_paged_attention_desc *desc, r35a_dtype dtype, int32_t num_seqs, int32_t num_tokens,
                     int32_t max_query_len, int32_t max_seq_len, int32_t num_q_heads, int32_t num_kv_heads,
                     int32_t head_size, int32_t page_size, int32_t num_pages)
{
    if (desc)
        fill_paged_desc(desc, sizeof *desc, dtype, num_seqs, num_tokens, max_query_len, max_seq_len, num_q_heads,
                        num_kv_heads, head_size, page_size, num_pages);
}

void VARLEN_DESC_INIT(r35a_varlen_attention_desc *desc, r35a_dtype dtype, int32_t num_segments, int32_t num_tokens,
                      int32_t max_seqlen, int32_t num_q_heads, int32_t num_kv_heads, int32_t head_size)
{
    if (desc)
        fill_varlen_desc(desc, sizeof *desc, dtype, num_segments, num_tokens, max_seqlen, num_q_heads, num_kv_heads,
                         head_size);
}

#if defined(__ELF__)
#define DEFINE_OLD_INITS(v, paged_size, varlen_size)                                                                 \
    void r35a_paged_attention_desc_init_##v(r35a_paged_attention_desc *desc, r35a_dtype dtype, int32_t num_seqs,      \
                                            int32_t num_tokens, int32_t max_query_len, int32_t max_seq_len,           \
                                            int32_t num_q_heads, int32_t num_kv_heads, int32_t head_size,             \
                                            int32_t page_size, int32_t num_pages)                                     \
    {                                                                                                                 \
        if (desc)                                                                                                     \
            fill_paged_desc(desc, paged_size, dtype, num_seqs, num_tokens, max_query_len, max_seq_len, num_q_heads,   \
                            num_kv_heads, head_size, page_size, num_pages);                                           \
    }                                                                                                                 \
    void r35a_varlen_attention_desc_init_##v(r35a_varlen_attention_desc *desc, r35a_dtype dtype,                      \
                                             int32_t num_segments, int32_t num_tokens, int32_t max_seqlen,            \
                                             int32_t num_q_heads, int32_t num_kv_heads, int32_t head_size)            \
    {                                                                                                                 \
        if (desc)                                                                                                     \
            fill_varlen_desc(desc, varlen_size, dtype, num_segments, num_tokens, max_seqlen, num_q_heads,             \
                             num_kv_heads, head_size);                                                                \
    }
DEFINE_OLD_INITS(v0_1, R35A_PAGED_DESC_SIZE_0_1, R35A_VARLEN_DESC_SIZE_0_1)
DEFINE_OLD_INITS(v0_2, R35A_PAGED_DESC_SIZE_0_2, R35A_VARLEN_DESC_SIZE_0_2)
void r35a_paged_attention_desc_init_v0_3(r35a_paged_attention_desc *desc, r35a_dtype dtype, int32_t num_seqs,
                                         int32_t num_tokens, int32_t max_query_len, int32_t max_seq_len,
                                         int32_t num_q_heads, int32_t num_kv_heads, int32_t head_size,
                                         int32_t page_size, int32_t num_pages)
{
    if (desc)
        fill_paged_desc(desc, R35A_PAGED_DESC_SIZE_0_3, dtype, num_seqs, num_tokens, max_query_len, max_seq_len,
                        num_q_heads, num_kv_heads, head_size, page_size, num_pages);
}
#endif

void r35a_merge_states_desc_init(r35a_merge_states_desc *desc, r35a_dtype dtype, int32_t num_parts,
                                 int32_t num_tokens, int32_t num_heads, int32_t head_size)
{
    if (!desc)
        return;
    memset(desc, 0, sizeof *desc);
    desc->struct_size = sizeof *desc;
    desc->dtype = dtype;
    desc->num_parts = num_parts;
    desc->num_tokens = num_tokens;
    desc->num_heads = num_heads;
    desc->head_size = head_size;
    desc->o_head_stride = desc->part_head_stride = head_size;
    desc->o_token_stride = desc->part_token_stride = (int64_t)num_heads * head_size;
    desc->part_stride = (int64_t)num_tokens * num_heads * head_size;
    desc->lse_head_stride = desc->out_lse_head_stride = 1;
    desc->lse_token_stride = desc->out_lse_token_stride = num_heads;
    desc->lse_part_stride = (int64_t)num_tokens * num_heads;
}
