/* plan_gfx1151.c - the GPU kernel registry and the planner (see plan_gfx1151.h).
 *
 * Decode: the variants of the desc's dtype and head size compete; the one that needs the fewest
 * row groups (each row group reads the KV once) wins, the smaller R on a tie (fewer padded rows).
 * The split count then fills the device (kernel_args.h: r35a_decode_num_splits). Everything the
 * choice reads is in the descriptor, so a plan is graph-capture safe. */
#include "plan_gfx1151.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define R35A_VDTYPE_f16 R35A_DTYPE_F16
#define R35A_VDTYPE_bf16 R35A_DTYPE_BF16
#define R35A_VOP_paged R35A_OP_PAGED
#define R35A_VOP_varlen R35A_OP_VARLEN

const r35a_decode_variant r35a_decode_variants[] = {
#define R35A_DECODE_VARIANT(arch, name, dtype, head_size, rows, kw, dw, waves) \
    {#arch, #name, R35A_VDTYPE_##dtype, head_size, rows, kw, dw, waves},
#include "variants.def"
#undef R35A_DECODE_VARIANT
    {NULL, NULL, R35A_DTYPE_F16, 0, 0, 0, 0, 0},
};

const r35a_generic_kernel r35a_generic_kernels[] = {
#define R35A_GENERIC_KERNEL(arch, name, op, dtype, dmax) {#arch, #name, R35A_VOP_##op, R35A_VDTYPE_##dtype, dmax},
#include "variants.def"
#undef R35A_GENERIC_KERNEL
    {NULL, NULL, R35A_OP_PAGED, R35A_DTYPE_F16, 0},
};

const r35a_encoder_variant r35a_encoder_variants[] = {
#define R35A_ENCODER_VARIANT(arch, name, dtype, head_size, rows, kb, nw, waves) \
    {#arch, #name, R35A_VDTYPE_##dtype, head_size, rows, kb, nw, waves},
#include "variants.def"
#undef R35A_ENCODER_VARIANT
    {NULL, NULL, R35A_DTYPE_F16, 0, 0, 0, 0, 0},
};

int r35a_find_decode_variant(const char *name)
{
    for (int i = 0; i < R35A_NUM_DECODE_VARIANTS; ++i)
        if (strcmp(r35a_decode_variants[i].name, name) == 0)
            return i;
    return -1;
}

int r35a_find_generic_kernel(const char *name)
{
    for (int i = 0; i < R35A_NUM_GENERIC_KERNELS; ++i)
        if (strcmp(r35a_generic_kernels[i].name, name) == 0)
            return i;
    return -1;
}

int r35a_find_encoder_variant(const char *name)
{
    for (int i = 0; i < R35A_NUM_ENCODER_VARIANTS; ++i)
        if (strcmp(r35a_encoder_variants[i].name, name) == 0)
            return i;
    return -1;
}

static const char *dtype_name(r35a_dtype dtype)
{
    switch (dtype) {
    case R35A_DTYPE_F16: return "f16";
    case R35A_DTYPE_BF16: return "bf16";
    case R35A_DTYPE_F32: return "f32";
    }
    return "?";
}

/* Appends ", <text>" (or "<text>" first) to a reason buffer. */
static void add_reason(char *reason, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add_reason(char *reason, size_t cap, const char *fmt, ...)
{
    size_t used = strlen(reason);
    if (used + 3 >= cap)
        return;
    if (used) {
        memcpy(reason + used, ", ", 3);
        used += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason + used, cap - used, fmt, ap);
    va_end(ap);
}

static bool same(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

/* ---- decode ---- */

/* Decode's stride rule: rows read with 128-bit loads (Q, K, V) start 16 bytes apart. */
static void check_decode_strides(const r35a_paged_attention_desc *d, char *reason, size_t cap)
{
    const struct {
        const char *field;
        int64_t value;
    } strides[] = {
        {"q_token_stride", d->q_token_stride}, {"q_head_stride", d->q_head_stride},
        {"k_page_stride", d->k_page_stride},   {"k_head_stride", d->k_head_stride},
        {"k_slot_stride", d->k_slot_stride},   {"v_page_stride", d->v_page_stride},
        {"v_head_stride", d->v_head_stride},   {"v_slot_stride", d->v_slot_stride},
    };
    for (size_t i = 0; i < sizeof strides / sizeof *strides; ++i)
        if (strides[i].value % 8 != 0) {
            add_reason(reason, cap, "%s %lld is not a multiple of 8 elements (16-byte aligned rows)",
                       strides[i].field, (long long)strides[i].value);
            return; /* one is enough to say why */
        }
}

bool r35a_plan_decode(const r35a_paged_attention_desc *d, const char *arch, int num_cus, const char *only,
                      r35a_gpu_launch *out, char *reason, size_t cap)
{
    reason[0] = '\0';
    int forced = -1;
    if (only) {
        forced = r35a_find_decode_variant(only);
        if (forced < 0 || !same(r35a_decode_variants[forced].arch, arch)) {
            add_reason(reason, cap, "no decode variant %s for %s", only, arch);
            return false;
        }
    }

    if (d->dtype != R35A_DTYPE_F16 && d->dtype != R35A_DTYPE_BF16)
        add_reason(reason, cap, "dtype %s (the decode kernels are f16/bf16)", dtype_name(d->dtype));
    if (d->max_query_len > R35A_DECODE_MAX_QUERY_LEN)
        add_reason(reason, cap, "max_query_len %d > %d (prefill or mixed batch)", (int)d->max_query_len,
                   R35A_DECODE_MAX_QUERY_LEN);
    if (d->logit_softcap > 0.0f)
        add_reason(reason, cap, "logit softcap");
    if (d->use_alibi)
        add_reason(reason, cap, "ALiBi");
    if (d->page_size % 16 != 0)
        add_reason(reason, cap, "page_size %d is not a multiple of 16", (int)d->page_size);
    check_decode_strides(d, reason, cap);
    if ((uint32_t)d->num_seqs > R35A_GRID_YZ_MAX)
        add_reason(reason, cap, "num_seqs %d above the grid limit %u", (int)d->num_seqs, R35A_GRID_YZ_MAX);

    /* Candidates: this arch, dtype and head size (and the forced variant, if any). */
    int best = -1;
    int32_t best_groups = 0;
    char built[96] = "";   /* head sizes built for this dtype, for the reason */
    int32_t last_listed = -1;
    for (int i = 0; i < R35A_NUM_DECODE_VARIANTS; ++i) {
        const r35a_decode_variant *v = &r35a_decode_variants[i];
        if (!same(v->arch, arch) || (forced >= 0 && i != forced) || v->dtype != d->dtype)
            continue;
        if (v->head_size != last_listed) { /* the table lists a head size's variants together */
            size_t used = strlen(built);
            snprintf(built + used, sizeof built - used, "%s%d", used ? ", " : "", (int)v->head_size);
            last_listed = v->head_size;
        }
        if (v->head_size != d->head_size)
            continue;
        int32_t groups = r35a_decode_num_row_groups(d->num_q_heads / d->num_kv_heads, d->max_query_len, v->rows);
        bool fewer_groups = best < 0 || groups < best_groups;
        if (fewer_groups || (groups == best_groups && v->rows < r35a_decode_variants[best].rows)) {
            best = i;
            best_groups = groups;
        }
    }
    if (best < 0 && (d->dtype == R35A_DTYPE_F16 || d->dtype == R35A_DTYPE_BF16)) {
        if (forced >= 0 && r35a_decode_variants[forced].dtype != d->dtype)
            add_reason(reason, cap, "%s is for %s", only, dtype_name(r35a_decode_variants[forced].dtype));
        else
            add_reason(reason, cap, "head_size %d not built (%s %s: %s)", (int)d->head_size, arch,
                       dtype_name(d->dtype), built[0] ? built : "none");
    }
    if (best >= 0 && (uint64_t)d->num_kv_heads * (uint64_t)best_groups > R35A_GRID_YZ_MAX)
        add_reason(reason, cap, "num_kv_heads x row groups %lld above the grid limit %u",
                   (long long)d->num_kv_heads * best_groups, R35A_GRID_YZ_MAX);
    if (reason[0])
        return false;

    const r35a_decode_variant *v = &r35a_decode_variants[best];
    memset(out, 0, sizeof *out);
    out->kernel = best;
    out->num_row_groups = best_groups;
    out->num_splits = r35a_decode_num_splits(d->num_seqs, d->num_kv_heads, best_groups, d->max_seq_len,
                                             d->max_query_len, d->window,
                                             num_cus > 0 ? num_cus : R35A_GFX1151_DEFAULT_CUS);
    r35a_decode_grid(d->num_seqs, d->num_kv_heads, best_groups, out->num_splits, out->grid);
    out->block[0] = r35a_decode_block_threads(v->kw, v->dw);
    out->block[1] = out->block[2] = 1;
    out->workspace_bytes = (size_t)r35a_decode_workspace_bytes(d->num_seqs, d->num_kv_heads, best_groups,
                                                               out->num_splits, v->rows, v->head_size);
    return true;
}

/* ---- mixed batches: decode for M <= 8, the generic kernel for the rest ---- */

r35a_paged_attention_desc r35a_decode_part(const r35a_paged_attention_desc *d)
{
    r35a_paged_attention_desc part = *d;
    if (part.max_query_len > R35A_DECODE_MAX_QUERY_LEN)
        part.max_query_len = R35A_DECODE_MAX_QUERY_LEN;
    return part;
}

bool r35a_plan_mixed(const r35a_paged_attention_desc *d, const char *arch, int num_cus, const char *only,
                     r35a_gpu_launch *decode, r35a_gpu_launch *generic, char *reason, size_t cap)
{
    reason[0] = '\0';
    if (d->max_query_len <= R35A_DECODE_MAX_QUERY_LEN) {
        add_reason(reason, cap, "max_query_len %d <= %d is not a mixed batch", (int)d->max_query_len,
                   R35A_DECODE_MAX_QUERY_LEN);
        return false;
    }
    /* One sequence: its M is num_tokens (query_start_loc[1] = num_tokens), known here. */
    if (d->num_seqs == 1 && d->num_tokens > R35A_DECODE_MAX_QUERY_LEN) {
        add_reason(reason, cap, "max_query_len %d > %d (one sequence of %d query tokens: prefill)",
                   (int)d->max_query_len, R35A_DECODE_MAX_QUERY_LEN, (int)d->num_tokens);
        return false;
    }
    r35a_paged_attention_desc part = r35a_decode_part(d);
    if (!r35a_plan_decode(&part, arch, num_cus, only, decode, reason, cap)) {
        /* Declined for another reason than M > 8: report decode's reasons on the whole call. */
        (void)r35a_plan_decode(d, arch, num_cus, only, decode, reason, cap);
        return false;
    }
    char why[256] = "";
    if (!r35a_plan_generic_paged(d, arch, NULL, generic, why, sizeof why)) {
        add_reason(reason, cap, "max_query_len %d > %d and no generic kernel serves the longer sequences: %s",
                   (int)d->max_query_len, R35A_DECODE_MAX_QUERY_LEN, why);
        return false;
    }
    return true;
}

/* ---- the portable kernel ---- */

static bool plan_generic(r35a_op op, r35a_dtype dtype, int32_t head_size, int32_t num_tokens, int32_t num_q_heads,
                         const char *arch, const char *only, r35a_gpu_launch *out, char *reason, size_t cap)
{
    reason[0] = '\0';
    int forced = -1;
    if (only) {
        forced = r35a_find_generic_kernel(only);
        if (forced < 0 || !same(r35a_generic_kernels[forced].arch, arch) ||
            r35a_generic_kernels[forced].op != op) {
            add_reason(reason, cap, "no %s generic kernel %s for %s", op == R35A_OP_PAGED ? "paged" : "varlen",
                       only, arch);
            return false;
        }
    }
    if (dtype != R35A_DTYPE_F16 && dtype != R35A_DTYPE_BF16) {
        add_reason(reason, cap, "dtype %s (the GPU kernels are f16/bf16)", dtype_name(dtype));
        return false;
    }
    int best = -1;
    int32_t largest = 0;
    for (int i = 0; i < R35A_NUM_GENERIC_KERNELS; ++i) {
        const r35a_generic_kernel *k = &r35a_generic_kernels[i];
        if (!same(k->arch, arch) || k->op != op || k->dtype != dtype || (forced >= 0 && i != forced))
            continue;
        if (k->dmax > largest)
            largest = k->dmax;
        if (k->dmax >= head_size && (best < 0 || k->dmax < r35a_generic_kernels[best].dmax))
            best = i;
    }
    if (best < 0) {
        if (largest > 0)
            add_reason(reason, cap, "head_size %d above the largest built, %d", (int)head_size, (int)largest);
        else
            add_reason(reason, cap, "no %s %s kernel built for %s", op == R35A_OP_PAGED ? "paged" : "varlen",
                       dtype_name(dtype), arch);
        return false;
    }
    if ((uint64_t)num_tokens * R35A_GENERIC_THREADS > UINT32_MAX) { /* HIP's grid counts threads in 32 bits */
        add_reason(reason, cap, "num_tokens %d above the grid limit %u", (int)num_tokens,
                   (unsigned)(UINT32_MAX / R35A_GENERIC_THREADS));
        return false;
    }
    if ((uint32_t)num_q_heads > R35A_GRID_YZ_MAX) {
        add_reason(reason, cap, "num_q_heads %d above the grid limit %u", (int)num_q_heads, R35A_GRID_YZ_MAX);
        return false;
    }
    memset(out, 0, sizeof *out);
    out->kernel = best;
    out->num_splits = 1;
    r35a_generic_grid(num_tokens, num_q_heads, out->grid);
    out->block[0] = R35A_GENERIC_THREADS;
    out->block[1] = out->block[2] = 1;
    out->workspace_bytes = 0;
    return true;
}

bool r35a_plan_generic_paged(const r35a_paged_attention_desc *d, const char *arch, const char *only,
                             r35a_gpu_launch *out, char *reason, size_t cap)
{
    return plan_generic(R35A_OP_PAGED, d->dtype, d->head_size, d->num_tokens, d->num_q_heads, arch, only, out,
                        reason, cap);
}

bool r35a_plan_generic_varlen(const r35a_varlen_attention_desc *d, const char *arch, const char *only,
                              r35a_gpu_launch *out, char *reason, size_t cap)
{
    return plan_generic(R35A_OP_VARLEN, d->dtype, d->head_size, d->num_tokens, d->num_q_heads, arch, only, out,
                        reason, cap);
}

/* ---- encoder (non-causal varlen on WMMA) ---- */

/* The encoder's layout rule (encoder_args.h): 16-byte rows, 32-bit per-thread row offsets. */
static void check_encoder_strides(const r35a_varlen_attention_desc *d, char *reason, size_t cap)
{
    const struct {
        const char *field;
        int64_t value;
        bool token;      /* bounded by R35A_ENCODER_MAX_TOKEN_STRIDE */
    } strides[] = {
        {"q_token_stride", d->q_token_stride, true},  {"q_head_stride", d->q_head_stride, false},
        {"k_token_stride", d->k_token_stride, true},  {"k_head_stride", d->k_head_stride, false},
        {"v_token_stride", d->v_token_stride, true},  {"v_head_stride", d->v_head_stride, false},
        {"o_token_stride", d->o_token_stride, false}, {"o_head_stride", d->o_head_stride, false},
    };
    for (size_t i = 0; i < sizeof strides / sizeof *strides; ++i) {
        if (strides[i].value % 8 != 0) {
            add_reason(reason, cap, "%s %lld is not a multiple of 8 elements (16-byte aligned rows)",
                       strides[i].field, (long long)strides[i].value);
            return; /* one is enough to say why */
        }
        if (strides[i].token && strides[i].value >= R35A_ENCODER_MAX_TOKEN_STRIDE) {
            add_reason(reason, cap, "%s %lld >= 2^24 elements (the encoder's 32-bit row offsets)",
                       strides[i].field, (long long)strides[i].value);
            return;
        }
    }
}

/* Among the variants of the desc's dtype and head size, the first of the table serves (one tiling
 * per (dtype, D) today; the head count is a run-time value). */
bool r35a_plan_encoder(const r35a_varlen_attention_desc *d, const char *arch, const char *only,
                       r35a_gpu_launch *out, char *reason, size_t cap)
{
    reason[0] = '\0';
    int forced = -1;
    if (only) {
        forced = r35a_find_encoder_variant(only);
        if (forced < 0 || !same(r35a_encoder_variants[forced].arch, arch)) {
            add_reason(reason, cap, "no encoder variant %s for %s", only, arch);
            return false;
        }
    }

    const bool half = d->dtype == R35A_DTYPE_F16 || d->dtype == R35A_DTYPE_BF16;
    if (!half)
        add_reason(reason, cap, "dtype %s (the encoder kernels are f16/bf16)", dtype_name(d->dtype));
    if (d->causal)
        add_reason(reason, cap, "causal (the encoder kernels are non-causal)");
    if (d->num_q_heads != d->num_kv_heads)
        add_reason(reason, cap, "GQA in the encoder (num_q_heads %d != num_kv_heads %d)", (int)d->num_q_heads,
                   (int)d->num_kv_heads);
    if (d->logit_softcap > 0.0f)
        add_reason(reason, cap, "logit softcap");
    check_encoder_strides(d, reason, cap);
    if ((uint32_t)d->num_q_heads > R35A_GRID_YZ_MAX)
        add_reason(reason, cap, "num_q_heads %d above the grid limit %u", (int)d->num_q_heads, R35A_GRID_YZ_MAX);

    int best = -1;
    char built[96] = "";   /* head sizes built for this dtype, for the reason */
    for (int i = 0; i < R35A_NUM_ENCODER_VARIANTS; ++i) {
        const r35a_encoder_variant *v = &r35a_encoder_variants[i];
        if (!same(v->arch, arch) || (forced >= 0 && i != forced) || v->dtype != d->dtype)
            continue;
        size_t used = strlen(built);
        snprintf(built + used, sizeof built - used, "%s%d", used ? ", " : "", (int)v->head_size);
        if (v->head_size == d->head_size && best < 0)
            best = i;
    }
    if (best < 0 && half) {
        if (forced >= 0 && r35a_encoder_variants[forced].dtype != d->dtype)
            add_reason(reason, cap, "%s is for %s", only, dtype_name(r35a_encoder_variants[forced].dtype));
        else
            add_reason(reason, cap, "head_size %d not built (%s %s: %s)", (int)d->head_size, arch,
                       dtype_name(d->dtype), built[0] ? built : "none");
    }
    int32_t rows_per_wg = 0;
    if (best >= 0) {
        rows_per_wg = r35a_encoder_rows_per_workgroup(r35a_encoder_variants[best].rows, r35a_encoder_variants[best].nw);
        int64_t blocks = r35a_encoder_row_blocks(d->max_seqlen, rows_per_wg) * d->num_segments;
        if (blocks > 0x7fffffff)
            add_reason(reason, cap, "%lld row blocks (max_seqlen %d x num_segments %d) above the grid limit 2^31-1",
                       (long long)blocks, (int)d->max_seqlen, (int)d->num_segments);
    }
    if (!reason[0]) { /* the kernel author's rule must agree with the checks above */
        r35a_encoder_args probe;
        r35a_fill_encoder_args(d, NULL, &probe);
        if (!r35a_encoder_strides_ok(&probe))
            add_reason(reason, cap, "strides the encoder kernels do not serve");
    }
    if (reason[0])
        return false;

    const r35a_encoder_variant *v = &r35a_encoder_variants[best];
    memset(out, 0, sizeof *out);
    out->kernel = best;
    out->num_splits = 1;
    /* 0 (a zero grid[0]) only when max_seqlen is 0: nothing to launch; the overflow is ruled out above. */
    (void)r35a_encoder_grid(d->num_segments, d->max_seqlen, d->num_q_heads, rows_per_wg, out->grid);
    out->block[0] = r35a_encoder_block_threads(v->nw);
    out->block[1] = out->block[2] = 1;
    out->workspace_bytes = 0;
    return true;
}

/* ---- kernel arguments ---- */

#define R35A_LOG2E 1.4426950408889634

void r35a_fill_decode_args(const r35a_paged_attention_desc *d, const r35a_paged_attention_args *a,
                           const r35a_gpu_launch *launch, void *workspace, r35a_decode_args *out)
{
    memset(out, 0, sizeof *out);
    out->q = a->q;
    out->k_cache = a->k_cache;
    out->v_cache = a->v_cache;
    out->out = a->out;
    out->seq_lens = a->seq_lens;
    out->query_start_loc = a->query_start_loc;
    out->block_table = a->block_table;
    out->workspace = launch->num_splits > 1 ? workspace : NULL;
    out->q_token_stride = d->q_token_stride;
    out->q_head_stride = d->q_head_stride;
    out->o_token_stride = d->o_token_stride;
    out->o_head_stride = d->o_head_stride;
    out->k_page_stride = d->k_page_stride;
    out->k_head_stride = d->k_head_stride;
    out->k_slot_stride = d->k_slot_stride;
    out->v_page_stride = d->v_page_stride;
    out->v_head_stride = d->v_head_stride;
    out->v_slot_stride = d->v_slot_stride;
    out->block_table_stride = d->block_table_stride;
    out->num_seqs = d->num_seqs;
    out->num_kv_heads = d->num_kv_heads;
    out->group_size = d->num_q_heads / d->num_kv_heads;
    out->page_size = d->page_size;
    out->window = d->window;
    out->max_query_len = d->max_query_len;
    out->num_row_groups = launch->num_row_groups;
    out->num_splits = launch->num_splits;
    out->scale_log2 = (float)((double)d->softmax_scale * R35A_LOG2E);
}

void r35a_fill_generic_paged_args(const r35a_paged_attention_desc *d, const r35a_paged_attention_args *a,
                                  int32_t min_query_len, r35a_generic_paged_args *out)
{
    memset(out, 0, sizeof *out);
    out->q = a->q;
    out->k_cache = a->k_cache;
    out->v_cache = a->v_cache;
    out->out = a->out;
    out->seq_lens = a->seq_lens;
    out->query_start_loc = a->query_start_loc;
    out->block_table = a->block_table;
    out->alibi_slopes = d->use_alibi ? a->alibi_slopes : NULL;
    out->q_token_stride = d->q_token_stride;
    out->q_head_stride = d->q_head_stride;
    out->o_token_stride = d->o_token_stride;
    out->o_head_stride = d->o_head_stride;
    out->k_page_stride = d->k_page_stride;
    out->k_head_stride = d->k_head_stride;
    out->k_slot_stride = d->k_slot_stride;
    out->v_page_stride = d->v_page_stride;
    out->v_head_stride = d->v_head_stride;
    out->v_slot_stride = d->v_slot_stride;
    out->block_table_stride = d->block_table_stride;
    out->num_seqs = d->num_seqs;
    out->num_tokens = d->num_tokens;
    out->num_q_heads = d->num_q_heads;
    out->num_kv_heads = d->num_kv_heads;
    out->head_size = d->head_size;
    out->page_size = d->page_size;
    out->window = d->window;
    out->min_query_len = min_query_len;
    out->softmax_scale = d->softmax_scale;
    out->logit_softcap = d->logit_softcap;
}

void r35a_fill_generic_varlen_args(const r35a_varlen_attention_desc *d, const r35a_varlen_attention_args *a,
                                   r35a_generic_varlen_args *out)
{
    memset(out, 0, sizeof *out);
    out->q = a->q;
    out->k = a->k;
    out->v = a->v;
    out->out = a->out;
    out->cu_seqlens = a->cu_seqlens;
    out->q_token_stride = d->q_token_stride;
    out->q_head_stride = d->q_head_stride;
    out->k_token_stride = d->k_token_stride;
    out->k_head_stride = d->k_head_stride;
    out->v_token_stride = d->v_token_stride;
    out->v_head_stride = d->v_head_stride;
    out->o_token_stride = d->o_token_stride;
    out->o_head_stride = d->o_head_stride;
    out->num_segments = d->num_segments;
    out->num_tokens = d->num_tokens;
    out->num_q_heads = d->num_q_heads;
    out->num_kv_heads = d->num_kv_heads;
    out->head_size = d->head_size;
    out->causal = d->causal;
    out->softmax_scale = d->softmax_scale;
    out->logit_softcap = d->logit_softcap;
}

void r35a_fill_encoder_args(const r35a_varlen_attention_desc *d, const r35a_varlen_attention_args *a,
                            r35a_encoder_args *out)
{
    memset(out, 0, sizeof *out);
    if (a) {
        out->q = a->q;
        out->k = a->k;
        out->v = a->v;
        out->out = a->out;
        out->cu_seqlens = a->cu_seqlens;
    }
    out->q_token_stride = d->q_token_stride;
    out->q_head_stride = d->q_head_stride;
    out->k_token_stride = d->k_token_stride;
    out->k_head_stride = d->k_head_stride;
    out->v_token_stride = d->v_token_stride;
    out->v_head_stride = d->v_head_stride;
    out->o_token_stride = d->o_token_stride;
    out->o_head_stride = d->o_head_stride;
    out->num_segments = d->num_segments;
    out->num_heads = d->num_q_heads;
    out->max_seqlen = d->max_seqlen;
    out->scale_log2 = r35a_encoder_scale_log2(d->softmax_scale);
}

bool r35a_encoder_pointers_aligned(const r35a_varlen_attention_args *a, char *why, size_t why_len)
{
    const struct {
        const char *field;
        const void *p;
    } ptrs[] = {{"q", a->q}, {"k", a->k}, {"v", a->v}, {"out", a->out}};
    for (size_t i = 0; i < sizeof ptrs / sizeof *ptrs; ++i)
        if ((uintptr_t)ptrs[i].p % 16 != 0) {
            snprintf(why, why_len, "%s %p is not 16-byte aligned", ptrs[i].field, ptrs[i].p);
            return false;
        }
    return true;
}

bool r35a_decode_pointers_aligned(const r35a_paged_attention_args *a, const void *workspace, int32_t num_splits,
                                  char *why, size_t why_len)
{
    const struct {
        const char *field;
        const void *p;
    } ptrs[] = {{"q", a->q}, {"k_cache", a->k_cache}, {"v_cache", a->v_cache},
                {"workspace", num_splits > 1 ? workspace : NULL}};
    for (size_t i = 0; i < sizeof ptrs / sizeof *ptrs; ++i)
        if ((uintptr_t)ptrs[i].p % 16 != 0) {
            snprintf(why, why_len, "%s %p is not 16-byte aligned", ptrs[i].field, ptrs[i].p);
            return false;
        }
    return true;
}
