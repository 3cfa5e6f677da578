/* validate.c - every check of caller input, in one place.
 *
 * Descriptor checks run at plan time, pointer checks at run time on every backend, and metadata
 * content checks (seq_lens, query_start_loc, block_table, cu_seqlens) at run time where that data
 * is host memory (the reference backend). Each failure names the struct and field in the detail,
 * as "<struct>.<field>: <what is wrong>", and nothing is written before all checks pass. */
#include "internal.h"

#include "common/window.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char *r35a_dtype_name(r35a_dtype dtype)
{
    switch (dtype) {
    case R35A_DTYPE_F16: return "f16";
    case R35A_DTYPE_BF16: return "bf16";
    case R35A_DTYPE_F32: return "f32";
    case R35A_DTYPE_FP8_E4M3: return "fp8_e4m3";
    case R35A_DTYPE_INT8: return "int8";
    }
    return "?";
}

size_t r35a_dtype_size(r35a_dtype dtype)
{
    switch (dtype) {
    case R35A_DTYPE_F16: return 2;
    case R35A_DTYPE_BF16: return 2;
    case R35A_DTYPE_F32: return 4;
    case R35A_DTYPE_FP8_E4M3: return 1;
    case R35A_DTYPE_INT8: return 1;
    }
    return 0;
}

/* ---- struct sizes: today's and the earlier releases' ---- */

/* Copies the caller's struct of in_size bytes (today's full_size or an earlier release's: 0.1.0's
 * size_0_1, 0.2.0's size_0_2, 0.3.0's size_0_3; 0 where the struct is newer than that release, and
 * full_size where it has not grown since) into full, zeroing the rest: every field added since has
 * 0 / NULL as its default. */
static r35a_status upgrade(const char *name, const void *in, size_t full_size, size_t size_0_1, size_t size_0_2,
                           size_t size_0_3, void *full)
{
    if (!in)
        return r35a_fail(R35A_ERR_NULL_POINTER, "%s: NULL", name);
    size_t in_size;
    memcpy(&in_size, in, sizeof in_size); /* struct_size opens every struct */
    if (in_size != full_size && (size_0_1 == 0 || in_size != size_0_1) && (size_0_2 == 0 || in_size != size_0_2) &&
        (size_0_3 == 0 || in_size != size_0_3)) {
        if (size_0_1 == 0)
            return r35a_fail(R35A_ERR_STRUCT_SIZE, "%s.struct_size: %zu is not %zu", name, in_size, full_size);
        if (size_0_3 != full_size)
            return r35a_fail(R35A_ERR_STRUCT_SIZE,
                             "%s.struct_size: %zu is neither %zu (this release), %zu (0.3.0), %zu (0.2.0) nor %zu "
                             "(0.1.0)", name, in_size, full_size, size_0_3, size_0_2, size_0_1);
        return r35a_fail(R35A_ERR_STRUCT_SIZE,
                         "%s.struct_size: %zu is neither %zu (this release and 0.3.0), %zu (0.2.0) nor %zu (0.1.0)",
                         name, in_size, full_size, size_0_2, size_0_1);
    }
    memset(full, 0, full_size);
    memcpy(full, in, in_size);
    memcpy(full, &full_size, sizeof full_size);
    return R35A_OK;
}

r35a_status r35a_upgrade_desc(r35a_op op, const void *desc, r35a_op_desc *full)
{
    switch (op) {
    case R35A_OP_PAGED: {
        r35a_status st = upgrade("paged_attention_desc", desc, sizeof full->paged, R35A_PAGED_DESC_SIZE_0_1,
                                 R35A_PAGED_DESC_SIZE_0_2, R35A_PAGED_DESC_SIZE_0_3, &full->paged);
        size_t in_size;
        memcpy(&in_size, desc ? desc : (const void *)&full->paged, sizeof in_size);
        /* per-token-head scales came with their strides in 0.4: an earlier struct has none to give */
        if (st == R35A_OK && in_size != sizeof full->paged &&
            full->paged.kv_scale_per_head == R35A_KV_SCALE_PER_TOKEN_HEAD)
            return r35a_fail(R35A_ERR_INVALID_ARGUMENT,
                             "paged_attention_desc.kv_scale_per_head: 2 (per token and kv head) needs 0.4's struct_size "
                             "%zu (its scale strides), not %zu", sizeof full->paged, in_size);
        return st;
    }
    case R35A_OP_VARLEN:
        return upgrade("varlen_attention_desc", desc, sizeof full->varlen, R35A_VARLEN_DESC_SIZE_0_1,
                       R35A_VARLEN_DESC_SIZE_0_2, sizeof full->varlen, &full->varlen);
    case R35A_OP_MERGE: break;
    }
    return upgrade("merge_states_desc", desc, sizeof full->merge, 0, 0, 0, &full->merge);
}

r35a_status r35a_upgrade_args(r35a_op op, const void *args, r35a_op_args *full)
{
    switch (op) {
    case R35A_OP_PAGED:
        return upgrade("paged_attention_args", args, sizeof full->paged, R35A_PAGED_ARGS_SIZE_0_1,
                       R35A_PAGED_ARGS_SIZE_0_2, sizeof full->paged, &full->paged);
    case R35A_OP_VARLEN:
        return upgrade("varlen_attention_args", args, sizeof full->varlen, R35A_VARLEN_ARGS_SIZE_0_1,
                       R35A_VARLEN_ARGS_SIZE_0_2, sizeof full->varlen, &full->varlen);
    case R35A_OP_MERGE: break;
    }
    return upgrade("merge_states_args", args, sizeof full->merge, 0, 0, 0, &full->merge);
}

#define PAGED "paged_attention_desc"
#define VARLEN "varlen_attention_desc"

/* Fails unless value >= lo. */
#define REQUIRE_AT_LEAST(name, field, value, lo)                                                       \
    do {                                                                                               \
        if ((long long)(value) < (long long)(lo))                                                      \
            return r35a_fail(R35A_ERR_INVALID_ARGUMENT, "%s.%s: %lld is below %lld", name, field,       \
                             (long long)(value), (long long)(lo));                                     \
    } while (0)

/* The Q/O dtype (and K/V's unless a paged call's kv_dtype says otherwise). */
static r35a_status check_common_dtype(const char *name, r35a_dtype dtype)
{
    if (r35a_dtype_size(dtype) == 0)
        return r35a_fail(R35A_ERR_UNKNOWN_DTYPE, "%s.dtype: %d is not an r35a_dtype", name, (int)dtype);
    if (r35a_dtype_is_kv8(dtype))
        return r35a_fail(R35A_ERR_INVALID_ARGUMENT,
                         "%s.dtype: %s is a KV-cache dtype (paged_attention_desc.kv_dtype); Q and O are f16, bf16 "
                         "or f32", name, r35a_dtype_name(dtype));
    return R35A_OK;
}

static r35a_status check_flag(const char *name, const char *field, int32_t value)
{
    if (value != 0 && value != 1)
        return r35a_fail(R35A_ERR_INVALID_ARGUMENT, "%s.%s: %d is not 0 or 1", name, field, (int)value);
    return R35A_OK;
}

/* kv_dtype and kv_scale_per_head (an r35a_kv_scale_granularity) of a paged descriptor whose dtype
 * is already valid. */
static r35a_status check_kv_dtype(const char *name, const r35a_paged_attention_desc *d)
{
    if (d->kv_dtype != 0) {
        if (r35a_dtype_size(d->kv_dtype) == 0)
            return r35a_fail(R35A_ERR_UNKNOWN_DTYPE, "%s.kv_dtype: %d is not an r35a_dtype", name, (int)d->kv_dtype);
        if (!r35a_dtype_is_kv8(d->kv_dtype) && d->kv_dtype != d->dtype)
            return r35a_fail(R35A_ERR_INVALID_ARGUMENT,
                             "%s.kv_dtype: %s differs from dtype %s (a 16/32-bit KV cache has the Q/O dtype; the "
                             "8-bit ones are fp8_e4m3 and int8)", name, r35a_dtype_name(d->kv_dtype),
                             r35a_dtype_name(d->dtype));
    }
    if (d->kv_scale_per_head != R35A_KV_SCALE_PER_TENSOR && d->kv_scale_per_head != R35A_KV_SCALE_PER_KV_HEAD &&
        d->kv_scale_per_head != R35A_KV_SCALE_PER_TOKEN_HEAD)
        return r35a_fail(R35A_ERR_INVALID_ARGUMENT,
                         "%s.kv_scale_per_head: %d is not an r35a_kv_scale_granularity (0 per tensor, 1 per kv head, "
                         "2 per token and kv head)", name, (int)d->kv_scale_per_head);
    if (d->kv_scale_per_head && !r35a_dtype_is_kv8(r35a_paged_kv_dtype(d)))
        return r35a_fail(R35A_ERR_INVALID_ARGUMENT, "%s.kv_scale_per_head: %d but the KV cache is %s, which has no scales",
                         name, (int)d->kv_scale_per_head, r35a_dtype_name(r35a_paged_kv_dtype(d)));
    return R35A_OK;
}

static r35a_status check_heads(const char *name, int32_t num_q_heads, int32_t num_kv_heads, int32_t head_size)
{
    REQUIRE_AT_LEAST(name, "num_q_heads", num_q_heads, 1);
    REQUIRE_AT_LEAST(name, "num_kv_heads", num_kv_heads, 1);
    if (head_size < 1 || head_size > 1024)
        return r35a_fail(R35A_ERR_INVALID_ARGUMENT, "%s.head_size: %d is outside 1..1024", name, (int)head_size);
    if (num_q_heads % num_kv_heads != 0)
        return r35a_fail(R35A_ERR_INVALID_ARGUMENT, "%s.num_kv_heads: %d does not divide num_q_heads %d", name,
                         (int)num_kv_heads, (int)num_q_heads);
    return R35A_OK;
}

static r35a_status check_scores(const char *name, float softmax_scale, float logit_softcap)
{
    if (!(softmax_scale > 0.0f) || !isfinite(softmax_scale))
        return r35a_fail(R35A_ERR_INVALID_ARGUMENT, "%s.softmax_scale: %g must be finite and > 0", name,
                         (double)softmax_scale);
    if (!(logit_softcap >= 0.0f) || !isfinite(logit_softcap))
        return r35a_fail(R35A_ERR_INVALID_ARGUMENT, "%s.logit_softcap: %g must be finite and >= 0 (0 = off)",
                         name, (double)logit_softcap);
    return R35A_OK;
}

static r35a_status check_stride(const char *name, const char *field, int64_t stride)
{
    if (stride < 0)
        return r35a_fail(R35A_ERR_INVALID_ARGUMENT, "%s.%s: %lld is negative", name, field, (long long)stride);
    return R35A_OK;
}

/* One dimension of a strided tensor: `count` positions `stride` elements apart. */
typedef struct extent_term {
    const char *field;   /* the stride's field name, for the detail */
    int64_t count;
    int64_t stride;
} extent_term;

/* Checks that the byte extent of a tensor, sum((count-1) * stride) + vector_len elements, fits in
 * int64, so every offset the kernels compute fits too. Names the first stride that overflows. */
static r35a_status check_extent(const char *name, const extent_term *terms, int n, int64_t vector_len,
                                size_t elem_size)
{
    int64_t extent = vector_len;
    for (int i = 0; i < n; ++i) {
        if (terms[i].count <= 0)
            continue;
        int64_t span;
        if (__builtin_mul_overflow(terms[i].count - 1, terms[i].stride, &span) ||
            __builtin_add_overflow(extent, span, &extent) ||
            __builtin_mul_overflow(extent, (int64_t)elem_size, &span))
            return r35a_fail(R35A_ERR_SIZE_OVERFLOW, "%s.%s: %lld x %lld elements overflows a 64-bit byte offset",
                             name, terms[i].field, (long long)terms[i].count, (long long)terms[i].stride);
    }
    return R35A_OK;
}

/* The LSE output of an attention op: its strides are >= 0 and its extent fits (checked whether or
 * not use_lse is set, so a plan never carries strides a later use would overflow on). */
static r35a_status check_lse_layout(const char *name, int32_t num_tokens, int32_t num_q_heads, int64_t token_stride,
                                    int64_t head_stride)
{
    if (token_stride < 0)
        return r35a_fail(R35A_ERR_INVALID_ARGUMENT, "%s.lse_token_stride: %lld is negative", name,
                         (long long)token_stride);
    if (head_stride < 0)
        return r35a_fail(R35A_ERR_INVALID_ARGUMENT, "%s.lse_head_stride: %lld is negative", name,
                         (long long)head_stride);
    const extent_term lse[] = {{"lse_token_stride", num_tokens, token_stride},
                               {"lse_head_stride", num_q_heads, head_stride}};
    return check_extent(name, lse, 2, 1, sizeof(float));
}

#define TRY(expr)                                                                                      \
    do {                                                                                               \
        r35a_status st_ = (expr);                                                                      \
        if (st_ != R35A_OK)                                                                            \
            return st_;                                                                                \
    } while (0)

static r35a_status validate_paged_desc(const r35a_paged_attention_desc *d)
{
    if (!d)
        return r35a_fail(R35A_ERR_NULL_POINTER, PAGED ": NULL");
    if (d->struct_size != sizeof *d) /* r35a_upgrade_desc made it so */
        return r35a_fail(R35A_ERR_INTERNAL, PAGED ".struct_size: %zu reached validation", d->struct_size);
    TRY(check_common_dtype(PAGED, d->dtype));
    TRY(check_kv_dtype(PAGED, d));
    REQUIRE_AT_LEAST(PAGED, "num_seqs", d->num_seqs, 1);
    REQUIRE_AT_LEAST(PAGED, "num_tokens", d->num_tokens, 0);
    REQUIRE_AT_LEAST(PAGED, "max_query_len", d->max_query_len, 0);
    REQUIRE_AT_LEAST(PAGED, "max_seq_len", d->max_seq_len, 0);
    TRY(check_heads(PAGED, d->num_q_heads, d->num_kv_heads, d->head_size));
    REQUIRE_AT_LEAST(PAGED, "page_size", d->page_size, 1);
    REQUIRE_AT_LEAST(PAGED, "num_pages", d->num_pages, 1);
    REQUIRE_AT_LEAST(PAGED, "window", d->window, 0);
    TRY(check_scores(PAGED, d->softmax_scale, d->logit_softcap));
    TRY(check_flag(PAGED, "use_alibi", d->use_alibi));
    TRY(check_flag(PAGED, "use_sinks", d->use_sinks));
    TRY(check_flag(PAGED, "use_lse", d->use_lse));

    int64_t pages_needed = ((int64_t)d->max_seq_len + d->page_size - 1) / d->page_size;
    if (d->block_table_stride < pages_needed)
        return r35a_fail(R35A_ERR_INVALID_ARGUMENT,
                         PAGED ".block_table_stride: %d is below ceil(max_seq_len %d / page_size %d) = %lld",
                         (int)d->block_table_stride, (int)d->max_seq_len, (int)d->page_size,
                         (long long)pages_needed);
    if ((int64_t)d->num_tokens > (int64_t)d->num_seqs * d->max_query_len)
        return r35a_fail(R35A_ERR_INVALID_ARGUMENT,
                         PAGED ".num_tokens: %d exceeds num_seqs %d x max_query_len %d", (int)d->num_tokens,
                         (int)d->num_seqs, (int)d->max_query_len);

#define CHECK_PAGED_STRIDE(field) TRY(check_stride(PAGED, #field, d->field));
    R35A_PAGED_STRIDES(CHECK_PAGED_STRIDE)
    R35A_PAGED_SCALE_STRIDES(CHECK_PAGED_STRIDE)
#undef CHECK_PAGED_STRIDE

    size_t es = r35a_dtype_size(d->dtype), kv_es = r35a_dtype_size(r35a_paged_kv_dtype(d));
    const extent_term q[] = {{"q_token_stride", d->num_tokens, d->q_token_stride},
                             {"q_head_stride", d->num_q_heads, d->q_head_stride}};
    const extent_term o[] = {{"o_token_stride", d->num_tokens, d->o_token_stride},
                             {"o_head_stride", d->num_q_heads, d->o_head_stride}};
    const extent_term k[] = {{"k_page_stride", d->num_pages, d->k_page_stride},
                             {"k_head_stride", d->num_kv_heads, d->k_head_stride},
                             {"k_slot_stride", d->page_size, d->k_slot_stride}};
    const extent_term v[] = {{"v_page_stride", d->num_pages, d->v_page_stride},
                             {"v_head_stride", d->num_kv_heads, d->v_head_stride},
                             {"v_slot_stride", d->page_size, d->v_slot_stride}};
    const extent_term bt[] = {{"block_table_stride", d->num_seqs, d->block_table_stride}};
    /* the per-token-head scale tensors: [num_pages][page_size][num_kv_heads] float32 through their
     * strides (checked whatever the granularity, like the LSE's) */
    const extent_term ks[] = {{"k_scale_page_stride", d->num_pages, d->k_scale_page_stride},
                              {"k_scale_slot_stride", d->page_size, d->k_scale_slot_stride},
                              {"k_scale_head_stride", d->num_kv_heads, d->k_scale_head_stride}};
    const extent_term vs[] = {{"v_scale_page_stride", d->num_pages, d->v_scale_page_stride},
                              {"v_scale_slot_stride", d->page_size, d->v_scale_slot_stride},
                              {"v_scale_head_stride", d->num_kv_heads, d->v_scale_head_stride}};
    TRY(check_extent(PAGED, q, 2, d->head_size, es));
    TRY(check_extent(PAGED, o, 2, d->head_size, es));
    TRY(check_extent(PAGED, k, 3, d->head_size, kv_es));
    TRY(check_extent(PAGED, v, 3, d->head_size, kv_es));
    TRY(check_extent(PAGED, bt, 1, d->block_table_stride, sizeof(int32_t)));
    TRY(check_extent(PAGED, ks, 3, 1, sizeof(float)));
    TRY(check_extent(PAGED, vs, 3, 1, sizeof(float)));
    TRY(check_lse_layout(PAGED, d->num_tokens, d->num_q_heads, d->lse_token_stride, d->lse_head_stride));
    return R35A_OK;
}

static r35a_status validate_varlen_desc(const r35a_varlen_attention_desc *d)
{
    if (!d)
        return r35a_fail(R35A_ERR_NULL_POINTER, VARLEN ": NULL");
    if (d->struct_size != sizeof *d) /* r35a_upgrade_desc made it so */
        return r35a_fail(R35A_ERR_INTERNAL, VARLEN ".struct_size: %zu reached validation", d->struct_size);
    TRY(check_common_dtype(VARLEN, d->dtype));
    REQUIRE_AT_LEAST(VARLEN, "num_segments", d->num_segments, 1);
    REQUIRE_AT_LEAST(VARLEN, "num_tokens", d->num_tokens, 0);
    REQUIRE_AT_LEAST(VARLEN, "max_seqlen", d->max_seqlen, 0);
    TRY(check_heads(VARLEN, d->num_q_heads, d->num_kv_heads, d->head_size));
    TRY(check_flag(VARLEN, "causal", d->causal));
    TRY(check_scores(VARLEN, d->softmax_scale, d->logit_softcap));
    TRY(check_flag(VARLEN, "use_sinks", d->use_sinks));
    TRY(check_flag(VARLEN, "use_lse", d->use_lse));
    if ((int64_t)d->num_tokens > (int64_t)d->num_segments * d->max_seqlen)
        return r35a_fail(R35A_ERR_INVALID_ARGUMENT,
                         VARLEN ".num_tokens: %d exceeds num_segments %d x max_seqlen %d", (int)d->num_tokens,
                         (int)d->num_segments, (int)d->max_seqlen);

#define CHECK_VARLEN_STRIDE(field) TRY(check_stride(VARLEN, #field, d->field));
    R35A_VARLEN_STRIDES(CHECK_VARLEN_STRIDE)
#undef CHECK_VARLEN_STRIDE

    size_t es = r35a_dtype_size(d->dtype);
    const extent_term q[] = {{"q_token_stride", d->num_tokens, d->q_token_stride},
                             {"q_head_stride", d->num_q_heads, d->q_head_stride}};
    const extent_term k[] = {{"k_token_stride", d->num_tokens, d->k_token_stride},
                             {"k_head_stride", d->num_kv_heads, d->k_head_stride}};
    const extent_term v[] = {{"v_token_stride", d->num_tokens, d->v_token_stride},
                             {"v_head_stride", d->num_kv_heads, d->v_head_stride}};
    const extent_term o[] = {{"o_token_stride", d->num_tokens, d->o_token_stride},
                             {"o_head_stride", d->num_q_heads, d->o_head_stride}};
    TRY(check_extent(VARLEN, q, 2, d->head_size, es));
    TRY(check_extent(VARLEN, k, 2, d->head_size, es));
    TRY(check_extent(VARLEN, v, 2, d->head_size, es));
    TRY(check_extent(VARLEN, o, 2, d->head_size, es));
    TRY(check_lse_layout(VARLEN, d->num_tokens, d->num_q_heads, d->lse_token_stride, d->lse_head_stride));
    return R35A_OK;
}

#define MERGE "merge_states_desc"

static r35a_status validate_merge_desc(const r35a_merge_states_desc *d)
{
    if (d->struct_size != sizeof *d) /* r35a_upgrade_desc made it so */
        return r35a_fail(R35A_ERR_INTERNAL, MERGE ".struct_size: %zu reached validation", d->struct_size);
    TRY(check_common_dtype(MERGE, d->dtype));
    REQUIRE_AT_LEAST(MERGE, "num_parts", d->num_parts, 1);
    REQUIRE_AT_LEAST(MERGE, "num_tokens", d->num_tokens, 0);
    REQUIRE_AT_LEAST(MERGE, "num_heads", d->num_heads, 1);
    if (d->head_size < 1 || d->head_size > 1024)
        return r35a_fail(R35A_ERR_INVALID_ARGUMENT, MERGE ".head_size: %d is outside 1..1024", (int)d->head_size);
    TRY(check_flag(MERGE, "use_out_lse", d->use_out_lse));
#define CHECK_MERGE_STRIDE(field) TRY(check_stride(MERGE, #field, d->field));
    R35A_MERGE_STRIDES(CHECK_MERGE_STRIDE)
#undef CHECK_MERGE_STRIDE
    const size_t es = r35a_dtype_size(d->dtype);
    const extent_term po[] = {{"part_stride", d->num_parts, d->part_stride},
                              {"part_token_stride", d->num_tokens, d->part_token_stride},
                              {"part_head_stride", d->num_heads, d->part_head_stride}};
    const extent_term pl[] = {{"lse_part_stride", d->num_parts, d->lse_part_stride},
                              {"lse_token_stride", d->num_tokens, d->lse_token_stride},
                              {"lse_head_stride", d->num_heads, d->lse_head_stride}};
    const extent_term o[] = {{"o_token_stride", d->num_tokens, d->o_token_stride},
                             {"o_head_stride", d->num_heads, d->o_head_stride}};
    const extent_term ol[] = {{"out_lse_token_stride", d->num_tokens, d->out_lse_token_stride},
                              {"out_lse_head_stride", d->num_heads, d->out_lse_head_stride}};
    TRY(check_extent(MERGE, po, 3, d->head_size, es));
    TRY(check_extent(MERGE, pl, 3, 1, sizeof(float)));
    TRY(check_extent(MERGE, o, 2, d->head_size, es));
    TRY(check_extent(MERGE, ol, 2, 1, sizeof(float)));
    return R35A_OK;
}

#define ARGS_PAGED "paged_attention_args"
#define ARGS_VARLEN "varlen_attention_args"

#define REQUIRE_PTR(name, field, ptr)                                                                  \
    do {                                                                                               \
        if (!(ptr))                                                                                    \
            return r35a_fail(R35A_ERR_NULL_POINTER, "%s.%s: NULL", name, field);                       \
    } while (0)

/* A pointer the descriptor asks for (wanted) or forbids: NULL when wanted is R35A_ERR_NULL_POINTER;
 * set when not wanted is R35A_ERR_INVALID_ARGUMENT, saying why it may not be (why_not). */
static r35a_status check_optional(const char *name, const char *field, const void *ptr, bool wanted,
                                  const char *why_not)
{
    if (wanted && !ptr)
        return r35a_fail(R35A_ERR_NULL_POINTER, "%s.%s: NULL", name, field);
    if (!wanted && ptr)
        return r35a_fail(R35A_ERR_INVALID_ARGUMENT, "%s.%s: set but %s", name, field, why_not);
    return R35A_OK;
}

/* One named pointer of an args struct. */
typedef struct named_ptr {
    const char *field;
    const void *ptr;
} named_ptr;

/* The checks every args struct opens with: it was upgraded, its required pointers are set. */
static r35a_status check_args_common(const char *name, size_t struct_size, size_t expected, const named_ptr *required,
                                     size_t count)
{
    if (struct_size != expected) /* r35a_upgrade_args made it so */
        return r35a_fail(R35A_ERR_INTERNAL, "%s.struct_size: %zu reached validation", name, struct_size);
    for (size_t i = 0; i < count; ++i)
        REQUIRE_PTR(name, required[i].field, required[i].ptr);
    return R35A_OK;
}

static r35a_status validate_paged_args(const r35a_paged_attention_desc *d, const r35a_paged_attention_args *a)
{
    if (!a)
        return r35a_fail(R35A_ERR_NULL_POINTER, ARGS_PAGED ": NULL");
    const named_ptr required[] = {{"q", a->q}, {"k_cache", a->k_cache}, {"v_cache", a->v_cache}, {"out", a->out},
                                  {"seq_lens", a->seq_lens}, {"query_start_loc", a->query_start_loc},
                                  {"block_table", a->block_table}};
    TRY(check_args_common(ARGS_PAGED, a->struct_size, sizeof *a, required, sizeof required / sizeof *required));
    TRY(check_optional(ARGS_PAGED, "alibi_slopes", a->alibi_slopes, d->use_alibi, PAGED ".use_alibi is 0"));
    TRY(check_optional(ARGS_PAGED, "sinks", a->sinks, d->use_sinks, PAGED ".use_sinks is 0"));
    r35a_dtype kv = r35a_paged_kv_dtype(d);
    char no_scales[64];
    snprintf(no_scales, sizeof no_scales, "the KV cache is %s, which has no scales", r35a_dtype_name(kv));
    TRY(check_optional(ARGS_PAGED, "k_scale", a->k_scale, r35a_dtype_is_kv8(kv), no_scales));
    TRY(check_optional(ARGS_PAGED, "v_scale", a->v_scale, r35a_dtype_is_kv8(kv), no_scales));
    TRY(check_optional(ARGS_PAGED, "lse", a->lse, d->use_lse, PAGED ".use_lse is 0 (the plan writes no LSE)"));
    return R35A_OK;
}

static r35a_status validate_varlen_args(const r35a_varlen_attention_desc *d, const r35a_varlen_attention_args *a)
{
    if (!a)
        return r35a_fail(R35A_ERR_NULL_POINTER, ARGS_VARLEN ": NULL");
    const named_ptr required[] = {{"q", a->q}, {"k", a->k}, {"v", a->v}, {"out", a->out}, {"cu_seqlens", a->cu_seqlens}};
    TRY(check_args_common(ARGS_VARLEN, a->struct_size, sizeof *a, required, sizeof required / sizeof *required));
    TRY(check_optional(ARGS_VARLEN, "sinks", a->sinks, d->use_sinks, VARLEN ".use_sinks is 0"));
    TRY(check_optional(ARGS_VARLEN, "lse", a->lse, d->use_lse, VARLEN ".use_lse is 0 (the plan writes no LSE)"));
    return R35A_OK;
}

#define ARGS_MERGE "merge_states_args"

static r35a_status validate_merge_args(const r35a_merge_states_desc *d, const r35a_merge_states_args *a)
{
    if (!a)
        return r35a_fail(R35A_ERR_NULL_POINTER, ARGS_MERGE ": NULL");
    const named_ptr required[] = {{"parts_o", a->parts_o}, {"parts_lse", a->parts_lse}, {"out", a->out}};
    TRY(check_args_common(ARGS_MERGE, a->struct_size, sizeof *a, required, sizeof required / sizeof *required));
    TRY(check_optional(ARGS_MERGE, "out_lse", a->out_lse, d->use_out_lse, MERGE ".use_out_lse is 0"));
    if (a->out == a->parts_o || (const void *)a->out == (const void *)a->parts_lse ||
        (a->out_lse && ((const void *)a->out_lse == a->parts_o || (const void *)a->out_lse == (const void *)a->parts_lse)))
        return r35a_fail(R35A_ERR_INVALID_ARGUMENT, ARGS_MERGE ".%s: aliases the parts (the merge is not in place)",
                         a->out == a->parts_o || (const void *)a->out == (const void *)a->parts_lse ? "out" : "out_lse");
    return R35A_OK;
}

/* The key positions the query rows of one sequence reach: [*first, L). Empty when M = 0. */
static void reachable_keys(const r35a_paged_attention_desc *d, int32_t seq_len, int32_t query_len,
                           int64_t *first, int64_t *end)
{
    *first = query_len > 0 ? r35a_window_first_key((int64_t)seq_len - query_len, d->window) : 0;
    *end = query_len > 0 ? seq_len : 0;
}

/* 8-bit KV scales: count values, each finite and > 0. */
static r35a_status check_scales(const char *field, const float *scale, int32_t count)
{
    for (int32_t g = 0; g < count; ++g)
        if (!(scale[g] > 0.0f) || !isfinite(scale[g]))
            return r35a_fail(R35A_ERR_INVALID_DATA, ARGS_PAGED ".%s[%d]: %g must be finite and > 0", field, (int)g,
                             (double)scale[g]);
    return R35A_OK;
}

/* The per-token-head scales of key j (page, slot) of sequence s, every kv head: finite and > 0. */
static r35a_status check_token_scales(const r35a_paged_attention_desc *d, const r35a_paged_attention_args *a,
                                      int32_t s, int64_t j, int64_t page, int64_t slot)
{
    for (int32_t g = 0; g < d->num_kv_heads; ++g) {
        const float k = a->k_scale[page * d->k_scale_page_stride + slot * d->k_scale_slot_stride +
                                   (int64_t)g * d->k_scale_head_stride];
        const float v = a->v_scale[page * d->v_scale_page_stride + slot * d->v_scale_slot_stride +
                                   (int64_t)g * d->v_scale_head_stride];
        const bool k_bad = !(k > 0.0f) || !isfinite(k);
        if (k_bad || !(v > 0.0f) || !isfinite(v)) {
            const char *f = k_bad ? "k_scale" : "v_scale";
            return r35a_fail(R35A_ERR_INVALID_DATA,
                             ARGS_PAGED ".%s[page %lld, slot %lld, kv head %d]: %g (key %lld of sequence %d) must "
                             "be finite and > 0", f, (long long)page, (long long)slot, (int)g,
                             (double)(k_bad ? k : v), (long long)j, (int)s);
        }
    }
    return R35A_OK;
}

static r35a_status validate_paged_data(const r35a_paged_attention_desc *d, const r35a_paged_attention_args *a)
{
    const int32_t *qsl = a->query_start_loc;
    /* query_start_loc's ends and bounds come before any page: a wrong entry changes which keys a
     * sequence's rows reach, and the detail must name the cause, not a block-table entry it exposes */
    if (qsl[0] != 0)
        return r35a_fail(R35A_ERR_INVALID_DATA, ARGS_PAGED ".query_start_loc[0]: %d is not 0", (int)qsl[0]);
    if (qsl[d->num_seqs] != d->num_tokens)
        return r35a_fail(R35A_ERR_INVALID_DATA, ARGS_PAGED ".query_start_loc[%d]: %d is not num_tokens %d",
                         (int)d->num_seqs, (int)qsl[d->num_seqs], (int)d->num_tokens);
    for (int32_t s = 0; s < d->num_seqs; ++s) {
        int32_t len = a->seq_lens[s];
        if (len < 0 || len > d->max_seq_len)
            return r35a_fail(R35A_ERR_INVALID_DATA, ARGS_PAGED ".seq_lens[%d]: %d is outside 0..max_seq_len %d",
                             (int)s, (int)len, (int)d->max_seq_len);
        if (qsl[s + 1] < qsl[s])
            return r35a_fail(R35A_ERR_INVALID_DATA, ARGS_PAGED ".query_start_loc[%d]: %d is below [%d] = %d",
                             (int)s + 1, (int)qsl[s + 1], (int)s, (int)qsl[s]);
        if (qsl[s + 1] > d->num_tokens)
            return r35a_fail(R35A_ERR_INVALID_DATA, ARGS_PAGED ".query_start_loc[%d]: %d is above num_tokens %d",
                             (int)s + 1, (int)qsl[s + 1], (int)d->num_tokens);
        int64_t m = (int64_t)qsl[s + 1] - qsl[s];
        if (m > d->max_query_len)
            return r35a_fail(R35A_ERR_INVALID_DATA,
                             ARGS_PAGED ".query_start_loc[%d]: sequence %d has %lld query tokens, above max_query_len %d",
                             (int)s + 1, (int)s, (long long)m, (int)d->max_query_len);
        if (m > len)
            return r35a_fail(R35A_ERR_INVALID_DATA,
                             ARGS_PAGED ".seq_lens[%d]: %d is shorter than the sequence's %lld query tokens", (int)s,
                             (int)len, (long long)m);
        int64_t first, end;
        reachable_keys(d, len, (int32_t)m, &first, &end);
        if (first >= end)
            continue;
        const int32_t *row = a->block_table + (int64_t)s * d->block_table_stride;
        for (int64_t p = first / d->page_size; p <= (end - 1) / d->page_size; ++p) {
            if (row[p] < 0 || row[p] >= d->num_pages)
                return r35a_fail(R35A_ERR_INVALID_DATA,
                                 ARGS_PAGED ".block_table[%d * block_table_stride + %lld]: page %d is outside 0..num_pages-1 (%d)",
                                 (int)s, (long long)p, (int)row[p], (int)d->num_pages - 1);
        }
        if (r35a_dtype_is_kv8(r35a_paged_kv_dtype(d)) && d->kv_scale_per_head == R35A_KV_SCALE_PER_TOKEN_HEAD)
            for (int64_t j = first; j < end; ++j) {
                const int64_t page = row[j / d->page_size], slot = j % d->page_size;
                TRY(check_token_scales(d, a, s, j, page, slot));
            }
    }
    if (r35a_dtype_is_kv8(r35a_paged_kv_dtype(d)) && d->kv_scale_per_head != R35A_KV_SCALE_PER_TOKEN_HEAD) {
        TRY(check_scales("k_scale", a->k_scale, d->kv_scale_per_head ? d->num_kv_heads : 1));
        TRY(check_scales("v_scale", a->v_scale, d->kv_scale_per_head ? d->num_kv_heads : 1));
    }
    return R35A_OK;
}

static r35a_status validate_varlen_data(const r35a_varlen_attention_desc *d, const r35a_varlen_attention_args *a)
{
    const int32_t *cu = a->cu_seqlens;
    if (cu[0] != 0)
        return r35a_fail(R35A_ERR_INVALID_DATA, ARGS_VARLEN ".cu_seqlens[0]: %d is not 0", (int)cu[0]);
    for (int32_t s = 0; s < d->num_segments; ++s) {
        if (cu[s + 1] < cu[s])
            return r35a_fail(R35A_ERR_INVALID_DATA, ARGS_VARLEN ".cu_seqlens[%d]: %d is below [%d] = %d",
                             (int)s + 1, (int)cu[s + 1], (int)s, (int)cu[s]);
        if ((int64_t)cu[s + 1] - cu[s] > d->max_seqlen)
            return r35a_fail(R35A_ERR_INVALID_DATA,
                             ARGS_VARLEN ".cu_seqlens[%d]: segment %d has %lld tokens, above max_seqlen %d",
                             (int)s + 1, (int)s, (long long)cu[s + 1] - cu[s], (int)d->max_seqlen);
    }
    if (cu[d->num_segments] != d->num_tokens)
        return r35a_fail(R35A_ERR_INVALID_DATA, ARGS_VARLEN ".cu_seqlens[%d]: %d is not num_tokens %d",
                         (int)d->num_segments, (int)cu[d->num_segments], (int)d->num_tokens);
    return R35A_OK;
}

r35a_status r35a_validate_desc(r35a_op op, const r35a_op_desc *desc)
{
    switch (op) {
    case R35A_OP_PAGED: return validate_paged_desc(&desc->paged);
    case R35A_OP_VARLEN: return validate_varlen_desc(&desc->varlen);
    case R35A_OP_MERGE: break;
    }
    return validate_merge_desc(&desc->merge);
}

r35a_status r35a_validate_args(r35a_op op, const r35a_op_desc *desc, const r35a_op_args *args, bool host_data)
{
    switch (op) {
    case R35A_OP_PAGED:
        TRY(validate_paged_args(&desc->paged, &args->paged));
        return host_data ? validate_paged_data(&desc->paged, &args->paged) : R35A_OK;
    case R35A_OP_VARLEN:
        TRY(validate_varlen_args(&desc->varlen, &args->varlen));
        return host_data ? validate_varlen_data(&desc->varlen, &args->varlen) : R35A_OK;
    case R35A_OP_MERGE: break;
    }
    return validate_merge_args(&desc->merge, &args->merge);   /* no metadata: LSE values are data */
}
