/* rel_common.c - see rel_common.h. Written from include/rdna35attn.h alone (not from src/), so a
 * check the library forgets or invents shows up as a disagreement. */
#include "rel_common.h"

#include "oracle.h"
#include "test_util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PD "paged_attention_desc"
#define VD "varlen_attention_desc"
#define PA "paged_attention_args"
#define VA "varlen_attention_args"

/* ------------------------------------------------------------------------------------------ */
/* expectations                                                                                 */

void rel_expect_init(rel_expect *e)
{
    e->count = 0;
}

void rel_expect_add(rel_expect *e, r35a_status status, const char *p0, const char *p1, const char *p2)
{
    if (e->count >= REL_MAX_VIOLATIONS)
        return; /* already plenty of reasons to reject */
    rel_violation *v = &e->v[e->count++];
    v->status = status;
    v->nprefixes = 0;
    const char *p[REL_MAX_PREFIXES] = {p0, p1, p2};
    for (int i = 0; i < REL_MAX_PREFIXES; ++i)
        if (p[i])
            snprintf(v->prefix[v->nprefixes++], sizeof v->prefix[0], "%s", p[i]);
}

bool rel_status_documented(r35a_status status)
{
    return (int)status >= (int)R35A_OK && (int)status <= (int)R35A_ERR_INTERNAL;
}

static bool at_least(rel_expect *e, const char *field, int64_t value, int64_t lo)
{
    if (value < lo) {
        rel_expect_add(e, R35A_ERR_INVALID_ARGUMENT, field, NULL, NULL);
        return false;
    }
    return true;
}

static void expect_heads(rel_expect *e, const char *hq_name, const char *hkv_name, const char *d_name,
                         int32_t hq, int32_t hkv, int32_t d)
{
    bool ok = at_least(e, hq_name, hq, 1);
    ok = at_least(e, hkv_name, hkv, 1) && ok;
    if (d < 1 || d > 1024)
        rel_expect_add(e, R35A_ERR_INVALID_ARGUMENT, d_name, NULL, NULL);
    if (ok && hq % hkv != 0)
        rel_expect_add(e, R35A_ERR_INVALID_ARGUMENT, hkv_name, hq_name, NULL);
}

static void expect_scores(rel_expect *e, const char *scale_name, const char *cap_name, float scale, float cap)
{
    if (!(scale > 0.0f) || !isfinite(scale))
        rel_expect_add(e, R35A_ERR_INVALID_ARGUMENT, scale_name, NULL, NULL);
    if (!(cap >= 0.0f) || !isfinite(cap))
        rel_expect_add(e, R35A_ERR_INVALID_ARGUMENT, cap_name, NULL, NULL);
}

/* A tensor whose byte extent must fit in int64; the detail may name any of its strides. */
static void expect_fits(rel_expect *e, __int128 elements, size_t elem_size, const char *s0, const char *s1,
                        const char *s2)
{
    if (elements * (__int128)elem_size > (__int128)INT64_MAX)
        rel_expect_add(e, R35A_ERR_SIZE_OVERFLOW, s0, s1, s2);
}

size_t rel_dtype_size(r35a_dtype dtype)
{
    switch (dtype) {
    case R35A_DTYPE_F16:
    case R35A_DTYPE_BF16: return 2;
    case R35A_DTYPE_F32: return 4;
    case R35A_DTYPE_FP8_E4M3:
    case R35A_DTYPE_INT8: return 1;
    }
    return 0;
}

bool rel_dtype_is_8bit(r35a_dtype dtype)
{
    return dtype == R35A_DTYPE_FP8_E4M3 || dtype == R35A_DTYPE_INT8;
}

r35a_dtype rel_kv_dtype(const r35a_paged_attention_desc *d)
{
    return d->kv_dtype != 0 ? d->kv_dtype : d->dtype;
}

/* A struct of today's size is itself; an earlier release's prefix (0.1.0's, 0.2.0's or 0.3.0's;
 * size_0_3 is full_size for a struct that has not grown since) is copied over zeros (every later
 * field's default is 0 or NULL). */
static const void *meant(const void *s, size_t size, size_t full_size, size_t size_0_1, size_t size_0_2,
                         size_t size_0_3, void *tmp)
{
    if (!s)
        return NULL;
    if (size == full_size)
        return s;
    if (size != size_0_1 && size != size_0_2 && size != size_0_3)
        return NULL;
    memset(tmp, 0, full_size);
    memcpy(tmp, s, size);
    memcpy(tmp, &full_size, sizeof full_size);
    return tmp;
}

const r35a_paged_attention_desc *rel_paged_desc_meant(const r35a_paged_attention_desc *d,
                                                      r35a_paged_attention_desc *tmp)
{
    return meant(d, d ? d->struct_size : 0, sizeof *d, REL_PAGED_DESC_SIZE_0_1, REL_PAGED_DESC_SIZE_0_2,
                 REL_PAGED_DESC_SIZE_0_3, tmp);
}

const r35a_varlen_attention_desc *rel_varlen_desc_meant(const r35a_varlen_attention_desc *d,
                                                        r35a_varlen_attention_desc *tmp)
{
    return meant(d, d ? d->struct_size : 0, sizeof *d, REL_VARLEN_DESC_SIZE_0_1, REL_VARLEN_DESC_SIZE_0_2,
                 sizeof *d, tmp);
}

const r35a_paged_attention_args *rel_paged_args_meant(const r35a_paged_attention_args *a,
                                                      r35a_paged_attention_args *tmp)
{
    return meant(a, a ? a->struct_size : 0, sizeof *a, REL_PAGED_ARGS_SIZE_0_1, REL_PAGED_ARGS_SIZE_0_2,
                 sizeof *a, tmp);
}

const r35a_varlen_attention_args *rel_varlen_args_meant(const r35a_varlen_attention_args *a,
                                                        r35a_varlen_attention_args *tmp)
{
    return meant(a, a ? a->struct_size : 0, sizeof *a, REL_VARLEN_ARGS_SIZE_0_1, REL_VARLEN_ARGS_SIZE_0_2,
                 sizeof *a, tmp);
}

/* The Q/O dtype of either op: an r35a_dtype of Q/O (the 8-bit ones are KV-cache dtypes only). */
static size_t expect_qo_dtype(rel_expect *e, const char *field, r35a_dtype dtype)
{
    size_t es = rel_dtype_size(dtype);
    if (es == 0)
        rel_expect_add(e, R35A_ERR_UNKNOWN_DTYPE, field, NULL, NULL);
    else if (rel_dtype_is_8bit(dtype))
        rel_expect_add(e, R35A_ERR_INVALID_ARGUMENT, field, NULL, NULL);
    return es;
}

static void expect_flag(rel_expect *e, const char *field, int32_t value)
{
    if (value != 0 && value != 1)
        rel_expect_add(e, R35A_ERR_INVALID_ARGUMENT, field, NULL, NULL);
}

__int128 rel_extent(int64_t vector_len, int n, const int64_t *counts, const int64_t *strides)
{
    __int128 x = vector_len;
    for (int i = 0; i < n; ++i)
        if (counts[i] > 0)
            x += (__int128)(counts[i] - 1) * strides[i];
    return x;
}

void rel_paged_extents_of(const r35a_paged_attention_desc *d, rel_paged_extents *x)
{
    int64_t qc[2] = {d->num_tokens, d->num_q_heads}, qs[2] = {d->q_token_stride, d->q_head_stride};
    int64_t os[2] = {d->o_token_stride, d->o_head_stride};
    int64_t kc[3] = {d->num_pages, d->num_kv_heads, d->page_size};
    int64_t ks[3] = {d->k_page_stride, d->k_head_stride, d->k_slot_stride};
    int64_t vs[3] = {d->v_page_stride, d->v_head_stride, d->v_slot_stride};
    x->q = rel_extent(d->head_size, 2, qc, qs);
    x->o = rel_extent(d->head_size, 2, qc, os);
    x->k = rel_extent(d->head_size, 3, kc, ks);
    x->v = rel_extent(d->head_size, 3, kc, vs);
    x->block_table = (__int128)(d->num_seqs > 0 ? d->num_seqs : 0) * d->block_table_stride;
    int64_t sc[3] = {d->num_pages, d->page_size, d->num_kv_heads};
    int64_t kss[3] = {d->k_scale_page_stride, d->k_scale_slot_stride, d->k_scale_head_stride};
    int64_t vss[3] = {d->v_scale_page_stride, d->v_scale_slot_stride, d->v_scale_head_stride};
    x->k_scale = rel_extent(1, 3, sc, kss);
    x->v_scale = rel_extent(1, 3, sc, vss);
}

void rel_varlen_extents_of(const r35a_varlen_attention_desc *d, rel_varlen_extents *x)
{
    int64_t qc[2] = {d->num_tokens, d->num_q_heads}, kc[2] = {d->num_tokens, d->num_kv_heads};
    int64_t qs[2] = {d->q_token_stride, d->q_head_stride}, ks[2] = {d->k_token_stride, d->k_head_stride};
    int64_t vs[2] = {d->v_token_stride, d->v_head_stride}, os[2] = {d->o_token_stride, d->o_head_stride};
    x->q = rel_extent(d->head_size, 2, qc, qs);
    x->k = rel_extent(d->head_size, 2, kc, ks);
    x->v = rel_extent(d->head_size, 2, kc, vs);
    x->o = rel_extent(d->head_size, 2, qc, os);
}

void rel_expect_paged_desc(const r35a_paged_attention_desc *given, rel_expect *e)
{
    if (!given) {
        rel_expect_add(e, R35A_ERR_NULL_POINTER, PD, NULL, NULL);
        return;
    }
    r35a_paged_attention_desc tmp;
    const r35a_paged_attention_desc *d = rel_paged_desc_meant(given, &tmp);
    if (!d) {
        rel_expect_add(e, R35A_ERR_STRUCT_SIZE, PD ".struct_size", NULL, NULL);
        return; /* the rest of the struct is not to be read */
    }
    size_t es = expect_qo_dtype(e, PD ".dtype", d->dtype);
    /* kv_dtype: 0, dtype itself, or an 8-bit one; per-head scales only with 8-bit */
    size_t kv_es = es;
    if (d->kv_dtype != 0) {
        kv_es = rel_dtype_size(d->kv_dtype);
        if (kv_es == 0)
            rel_expect_add(e, R35A_ERR_UNKNOWN_DTYPE, PD ".kv_dtype", NULL, NULL);
        else if (!rel_dtype_is_8bit(d->kv_dtype) && d->kv_dtype != d->dtype)
            rel_expect_add(e, R35A_ERR_INVALID_ARGUMENT, PD ".kv_dtype", NULL, NULL);
    }
    /* an r35a_kv_scale_granularity (0, 1, 2); 1 and 2 only with an 8-bit cache; 2 only with 0.4's
     * struct (its strides) */
    if (d->kv_scale_per_head == 2 && given->struct_size != sizeof *d) {
        rel_expect_add(e, R35A_ERR_INVALID_ARGUMENT, PD ".kv_scale_per_head", NULL, NULL);
        return; /* rejected while the struct is read in, before anything else is checked */
    }
    if (d->kv_scale_per_head < 0 || d->kv_scale_per_head > 2)
        rel_expect_add(e, R35A_ERR_INVALID_ARGUMENT, PD ".kv_scale_per_head", NULL, NULL);
    else if (d->kv_scale_per_head != 0 && !rel_dtype_is_8bit(rel_kv_dtype(d)))
        rel_expect_add(e, R35A_ERR_INVALID_ARGUMENT, PD ".kv_scale_per_head", NULL, NULL);
    static const char *const scale_names[6] = {PD ".k_scale_page_stride", PD ".k_scale_slot_stride",
                                               PD ".k_scale_head_stride", PD ".v_scale_page_stride",
                                               PD ".v_scale_slot_stride", PD ".v_scale_head_stride"};
    const int64_t scale_strides[6] = {d->k_scale_page_stride, d->k_scale_slot_stride, d->k_scale_head_stride,
                                      d->v_scale_page_stride, d->v_scale_slot_stride, d->v_scale_head_stride};
    bool scale_strides_ok = true;
    for (int i = 0; i < 6; ++i)
        if (scale_strides[i] < 0) {
            rel_expect_add(e, R35A_ERR_INVALID_ARGUMENT, scale_names[i], NULL, NULL);
            scale_strides_ok = false;
        }
    expect_flag(e, PD ".use_sinks", d->use_sinks);
    expect_flag(e, PD ".use_lse", d->use_lse);
    if (d->lse_token_stride < 0)
        rel_expect_add(e, R35A_ERR_INVALID_ARGUMENT, PD ".lse_token_stride", NULL, NULL);
    if (d->lse_head_stride < 0)
        rel_expect_add(e, R35A_ERR_INVALID_ARGUMENT, PD ".lse_head_stride", NULL, NULL);
    bool shape_ok = at_least(e, PD ".num_seqs", d->num_seqs, 1);
    shape_ok = at_least(e, PD ".num_tokens", d->num_tokens, 0) && shape_ok;
    shape_ok = at_least(e, PD ".max_query_len", d->max_query_len, 0) && shape_ok;
    shape_ok = at_least(e, PD ".max_seq_len", d->max_seq_len, 0) && shape_ok;
    expect_heads(e, PD ".num_q_heads", PD ".num_kv_heads", PD ".head_size", d->num_q_heads, d->num_kv_heads,
                 d->head_size);
    bool page_ok = at_least(e, PD ".page_size", d->page_size, 1);
    at_least(e, PD ".num_pages", d->num_pages, 1);
    at_least(e, PD ".window", d->window, 0);
    expect_scores(e, PD ".softmax_scale", PD ".logit_softcap", d->softmax_scale, d->logit_softcap);
    if (d->use_alibi != 0 && d->use_alibi != 1)
        rel_expect_add(e, R35A_ERR_INVALID_ARGUMENT, PD ".use_alibi", NULL, NULL);
    if (page_ok) {
        int64_t needed = d->max_seq_len > 0 ? ((int64_t)d->max_seq_len + d->page_size - 1) / d->page_size : 0;
        if (d->block_table_stride < needed || d->block_table_stride < 0)
            rel_expect_add(e, R35A_ERR_INVALID_ARGUMENT, PD ".block_table_stride", NULL, NULL);
    }
    if (shape_ok && (int64_t)d->num_tokens > (int64_t)d->num_seqs * d->max_query_len)
        rel_expect_add(e, R35A_ERR_INVALID_ARGUMENT, PD ".num_tokens", PD ".max_query_len", PD ".num_seqs");

    static const char *const names[10] = {PD ".q_token_stride", PD ".q_head_stride", PD ".o_token_stride",
                                          PD ".o_head_stride",  PD ".k_page_stride", PD ".k_head_stride",
                                          PD ".k_slot_stride",  PD ".v_page_stride", PD ".v_head_stride",
                                          PD ".v_slot_stride"};
    const int64_t strides[10] = {d->q_token_stride, d->q_head_stride, d->o_token_stride, d->o_head_stride,
                                 d->k_page_stride,  d->k_head_stride, d->k_slot_stride,  d->v_page_stride,
                                 d->v_head_stride,  d->v_slot_stride};
    bool strides_ok = true;
    for (int i = 0; i < 10; ++i)
        if (strides[i] < 0) {
            rel_expect_add(e, R35A_ERR_INVALID_ARGUMENT, names[i], NULL, NULL);
            strides_ok = false;
        }
    if (strides_ok && es != 0 && kv_es != 0 && d->head_size >= 1 && d->head_size <= 1024) {
        rel_paged_extents x;
        rel_paged_extents_of(d, &x);
        expect_fits(e, x.q, es, names[0], names[1], NULL);
        expect_fits(e, x.o, es, names[2], names[3], NULL);
        expect_fits(e, x.k, kv_es, names[4], names[5], names[6]);
        expect_fits(e, x.v, kv_es, names[7], names[8], names[9]);
        if (d->block_table_stride >= 0)
            expect_fits(e, x.block_table, sizeof(int32_t), PD ".block_table_stride", NULL, NULL);
        if (scale_strides_ok) {
            expect_fits(e, x.k_scale, sizeof(float), scale_names[0], scale_names[1], scale_names[2]);
            expect_fits(e, x.v_scale, sizeof(float), scale_names[3], scale_names[4], scale_names[5]);
        }
    }
}

void rel_expect_varlen_desc(const r35a_varlen_attention_desc *given, rel_expect *e)
{
    if (!given) {
        rel_expect_add(e, R35A_ERR_NULL_POINTER, VD, NULL, NULL);
        return;
    }
    r35a_varlen_attention_desc tmp;
    const r35a_varlen_attention_desc *d = rel_varlen_desc_meant(given, &tmp);
    if (!d) {
        rel_expect_add(e, R35A_ERR_STRUCT_SIZE, VD ".struct_size", NULL, NULL);
        return;
    }
    size_t es = expect_qo_dtype(e, VD ".dtype", d->dtype);
    expect_flag(e, VD ".use_sinks", d->use_sinks);
    expect_flag(e, VD ".use_lse", d->use_lse);
    if (d->lse_token_stride < 0)
        rel_expect_add(e, R35A_ERR_INVALID_ARGUMENT, VD ".lse_token_stride", NULL, NULL);
    if (d->lse_head_stride < 0)
        rel_expect_add(e, R35A_ERR_INVALID_ARGUMENT, VD ".lse_head_stride", NULL, NULL);
    bool shape_ok = at_least(e, VD ".num_segments", d->num_segments, 1);
    shape_ok = at_least(e, VD ".num_tokens", d->num_tokens, 0) && shape_ok;
    shape_ok = at_least(e, VD ".max_seqlen", d->max_seqlen, 0) && shape_ok;
    expect_heads(e, VD ".num_q_heads", VD ".num_kv_heads", VD ".head_size", d->num_q_heads, d->num_kv_heads,
                 d->head_size);
    if (d->causal != 0 && d->causal != 1)
        rel_expect_add(e, R35A_ERR_INVALID_ARGUMENT, VD ".causal", NULL, NULL);
    expect_scores(e, VD ".softmax_scale", VD ".logit_softcap", d->softmax_scale, d->logit_softcap);
    if (shape_ok && (int64_t)d->num_tokens > (int64_t)d->num_segments * d->max_seqlen)
        rel_expect_add(e, R35A_ERR_INVALID_ARGUMENT, VD ".num_tokens", VD ".max_seqlen", VD ".num_segments");

    static const char *const names[8] = {VD ".q_token_stride", VD ".q_head_stride", VD ".k_token_stride",
                                         VD ".k_head_stride",  VD ".v_token_stride", VD ".v_head_stride",
                                         VD ".o_token_stride", VD ".o_head_stride"};
    const int64_t strides[8] = {d->q_token_stride, d->q_head_stride, d->k_token_stride, d->k_head_stride,
                                d->v_token_stride, d->v_head_stride, d->o_token_stride, d->o_head_stride};
    bool strides_ok = true;
    for (int i = 0; i < 8; ++i)
        if (strides[i] < 0) {
            rel_expect_add(e, R35A_ERR_INVALID_ARGUMENT, names[i], NULL, NULL);
            strides_ok = false;
        }
    if (strides_ok && es != 0 && d->head_size >= 1 && d->head_size <= 1024) {
        rel_varlen_extents x;
        rel_varlen_extents_of(d, &x);
        expect_fits(e, x.q, es, names[0], names[1], NULL);
        expect_fits(e, x.k, es, names[2], names[3], NULL);
        expect_fits(e, x.v, es, names[4], names[5], NULL);
        expect_fits(e, x.o, es, names[6], names[7], NULL);
    }
}

/* A pointer the descriptor asks for (NULL: R35A_ERR_NULL_POINTER) or forbids (set:
 * R35A_ERR_INVALID_ARGUMENT). */
static void expect_optional(rel_expect *e, const char *field, const void *p, bool wanted)
{
    if (wanted && !p)
        rel_expect_add(e, R35A_ERR_NULL_POINTER, field, NULL, NULL);
    if (!wanted && p)
        rel_expect_add(e, R35A_ERR_INVALID_ARGUMENT, field, NULL, NULL);
}

void rel_expect_paged_args(const r35a_paged_attention_desc *d_given, const r35a_paged_attention_args *given,
                           rel_expect *e)
{
    if (!given) {
        rel_expect_add(e, R35A_ERR_NULL_POINTER, PA, NULL, NULL);
        return;
    }
    r35a_paged_attention_args tmp;
    const r35a_paged_attention_args *a = rel_paged_args_meant(given, &tmp);
    if (!a) {
        rel_expect_add(e, R35A_ERR_STRUCT_SIZE, PA ".struct_size", NULL, NULL);
        return;
    }
    r35a_paged_attention_desc dtmp;
    const r35a_paged_attention_desc *d = rel_paged_desc_meant(d_given, &dtmp);
    const void *ptrs[7] = {a->q, a->k_cache, a->v_cache, a->out, a->seq_lens, a->query_start_loc, a->block_table};
    static const char *const names[7] = {PA ".q",        PA ".k_cache",         PA ".v_cache",    PA ".out",
                                         PA ".seq_lens", PA ".query_start_loc", PA ".block_table"};
    for (int i = 0; i < 7; ++i)
        if (!ptrs[i])
            rel_expect_add(e, R35A_ERR_NULL_POINTER, names[i], NULL, NULL);
    expect_optional(e, PA ".alibi_slopes", a->alibi_slopes, d->use_alibi != 0);
    expect_optional(e, PA ".sinks", a->sinks, d->use_sinks != 0);
    bool scaled = rel_dtype_is_8bit(rel_kv_dtype(d));
    expect_optional(e, PA ".k_scale", a->k_scale, scaled);
    expect_optional(e, PA ".v_scale", a->v_scale, scaled);
    expect_optional(e, PA ".lse", a->lse, d->use_lse != 0);
}

void rel_expect_varlen_args(const r35a_varlen_attention_desc *d_given, const r35a_varlen_attention_args *given,
                            rel_expect *e)
{
    if (!given) {
        rel_expect_add(e, R35A_ERR_NULL_POINTER, VA, NULL, NULL);
        return;
    }
    r35a_varlen_attention_args tmp;
    const r35a_varlen_attention_args *a = rel_varlen_args_meant(given, &tmp);
    if (!a) {
        rel_expect_add(e, R35A_ERR_STRUCT_SIZE, VA ".struct_size", NULL, NULL);
        return;
    }
    r35a_varlen_attention_desc dtmp;
    const r35a_varlen_attention_desc *d = rel_varlen_desc_meant(d_given, &dtmp);
    expect_optional(e, VA ".sinks", a->sinks, d->use_sinks != 0);
    expect_optional(e, VA ".lse", a->lse, d->use_lse != 0);
    const void *ptrs[5] = {a->q, a->k, a->v, a->out, a->cu_seqlens};
    static const char *const names[5] = {VA ".q", VA ".k", VA ".v", VA ".out", VA ".cu_seqlens"};
    for (int i = 0; i < 5; ++i)
        if (!ptrs[i])
            rel_expect_add(e, R35A_ERR_NULL_POINTER, names[i], NULL, NULL);
}

void rel_expect_paged_data(const r35a_paged_attention_desc *d_given, const r35a_paged_attention_args *a_given,
                           rel_expect *e)
{
    r35a_paged_attention_desc dtmp;
    r35a_paged_attention_args atmp;
    const r35a_paged_attention_desc *d = rel_paged_desc_meant(d_given, &dtmp);
    const r35a_paged_attention_args *a = rel_paged_args_meant(a_given, &atmp);
    /* per-token-head scales: the fuzzer draws only valid ones (their checks: tests/test_bad_input.c) */
    if (rel_dtype_is_8bit(rel_kv_dtype(d)) && d->kv_scale_per_head != 2) {
        int32_t n = d->kv_scale_per_head ? d->num_kv_heads : 1;
        for (int32_t g = 0; g < n; ++g) {
            if (!(a->k_scale[g] > 0.0f) || !isfinite(a->k_scale[g]))
                rel_expect_add(e, R35A_ERR_INVALID_DATA, PA ".k_scale", NULL, NULL);
            if (!(a->v_scale[g] > 0.0f) || !isfinite(a->v_scale[g]))
                rel_expect_add(e, R35A_ERR_INVALID_DATA, PA ".v_scale", NULL, NULL);
        }
    }
    const int32_t *qsl = a->query_start_loc;
    if (qsl[0] != 0)
        rel_expect_add(e, R35A_ERR_INVALID_DATA, PA ".query_start_loc", NULL, NULL);
    if (qsl[d->num_seqs] != d->num_tokens)
        rel_expect_add(e, R35A_ERR_INVALID_DATA, PA ".query_start_loc", NULL, NULL);
    for (int32_t s = 0; s < d->num_seqs; ++s) {
        int32_t L = a->seq_lens[s];
        bool ok = true;
        if (L < 0 || L > d->max_seq_len) {
            rel_expect_add(e, R35A_ERR_INVALID_DATA, PA ".seq_lens", NULL, NULL);
            ok = false;
        }
        int64_t M = (int64_t)qsl[s + 1] - qsl[s];
        if (M < 0 || M > d->max_query_len) {
            rel_expect_add(e, R35A_ERR_INVALID_DATA, PA ".query_start_loc", NULL, NULL);
            ok = false;
        }
        if (ok && M > L) {
            rel_expect_add(e, R35A_ERR_INVALID_DATA, PA ".seq_lens", PA ".query_start_loc", NULL);
            ok = false;
        }
        if (!ok || M == 0)
            continue;
        /* Keys the rows reach: [lowest, L), lowest = L - M - window + 1 for the first query row. */
        int64_t lowest = d->window > 0 ? (int64_t)L - M - d->window + 1 : 0;
        if (lowest < 0)
            lowest = 0;
        const int32_t *row = a->block_table + (int64_t)s * d->block_table_stride;
        for (int64_t p = lowest / d->page_size; p <= ((int64_t)L - 1) / d->page_size; ++p)
            if (row[p] < 0 || row[p] >= d->num_pages) {
                rel_expect_add(e, R35A_ERR_INVALID_DATA, PA ".block_table", NULL, NULL);
                break;
            }
    }
}

void rel_expect_varlen_data(const r35a_varlen_attention_desc *d, const r35a_varlen_attention_args *a,
                            rel_expect *e)
{
    const int32_t *cu = a->cu_seqlens;
    if (cu[0] != 0)
        rel_expect_add(e, R35A_ERR_INVALID_DATA, VA ".cu_seqlens", NULL, NULL);
    if (cu[d->num_segments] != d->num_tokens)
        rel_expect_add(e, R35A_ERR_INVALID_DATA, VA ".cu_seqlens", NULL, NULL);
    for (int32_t s = 0; s < d->num_segments; ++s) {
        int64_t n = (int64_t)cu[s + 1] - cu[s];
        if (n < 0 || n > d->max_seqlen)
            rel_expect_add(e, R35A_ERR_INVALID_DATA, VA ".cu_seqlens", NULL, NULL);
    }
}

static bool prefix_matches(const char *detail, const char *prefix)
{
    size_t n = strlen(prefix);
    if (strncmp(detail, prefix, n) != 0)
        return false;
    char next = detail[n];
    return next == '\0' || next == ':' || next == '[' || next == ' ';
}

bool rel_expect_explains(const rel_expect *e, r35a_status status, const char *detail, char *why, size_t why_len)
{
    if (!detail) {
        snprintf(why, why_len, "r35a_last_error_detail() returned NULL");
        return false;
    }
    if (e->count == 0) {
        if (status != R35A_OK) {
            snprintf(why, why_len, "valid input rejected with %s: \"%s\"", r35a_status_string(status), detail);
            return false;
        }
        if (detail[0] != '\0') {
            snprintf(why, why_len, "success left a detail: \"%s\"", detail);
            return false;
        }
        return true;
    }
    if (status == R35A_OK) {
        snprintf(why, why_len, "invalid input accepted; first violated check: %s %s",
                 r35a_status_string(e->v[0].status), e->v[0].prefix[0]);
        return false;
    }
    if (!rel_status_documented(status)) {
        snprintf(why, why_len, "undocumented status %d", (int)status);
        return false;
    }
    if (detail[0] == '\0') {
        snprintf(why, why_len, "%s with an empty detail", r35a_status_string(status));
        return false;
    }
    for (int i = 0; i < e->count; ++i) {
        if (e->v[i].status != status)
            continue;
        for (int k = 0; k < e->v[i].nprefixes; ++k)
            if (prefix_matches(detail, e->v[i].prefix[k]))
                return true;
    }
    snprintf(why, why_len, "%s \"%s\" matches none of the %d violated checks:", r35a_status_string(status),
             detail, e->count);
    for (int i = 0; i < e->count && i < 6; ++i) {
        rel_append(why, why_len, " [");
        rel_append(why, why_len, r35a_status_string(e->v[i].status));
        rel_append(why, why_len, " ");
        rel_append(why, why_len, e->v[i].prefix[0]);
        rel_append(why, why_len, "]");
    }
    return false;
}

/* ------------------------------------------------------------------------------------------ */
/* oracle and comparison                                                                        */

int rel_oracle_paged(const r35a_paged_attention_desc *d_given, const r35a_paged_attention_args *a_given, double *ref)
{
    r35a_paged_attention_desc dtmp;
    r35a_paged_attention_args atmp;
    const r35a_paged_attention_desc *d = rel_paged_desc_meant(d_given, &dtmp);
    const r35a_paged_attention_args *a = rel_paged_args_meant(a_given, &atmp);
    oracle_paged o;
    memset(&o, 0, sizeof o);
    o.dtype = d->dtype;
    o.kv_dtype = d->kv_dtype;
    o.kv_scale_per_head = d->kv_scale_per_head;
    o.ks_page = d->k_scale_page_stride;
    o.ks_slot = d->k_scale_slot_stride;
    o.ks_head = d->k_scale_head_stride;
    o.vs_page = d->v_scale_page_stride;
    o.vs_slot = d->v_scale_slot_stride;
    o.vs_head = d->v_scale_head_stride;
    o.k_scale = rel_dtype_is_8bit(rel_kv_dtype(d)) ? a->k_scale : NULL;
    o.v_scale = rel_dtype_is_8bit(rel_kv_dtype(d)) ? a->v_scale : NULL;
    o.sinks = d->use_sinks ? a->sinks : NULL;
    o.num_seqs = d->num_seqs;
    o.num_tokens = d->num_tokens;
    o.num_q_heads = d->num_q_heads;
    o.num_kv_heads = d->num_kv_heads;
    o.head_size = d->head_size;
    o.page_size = d->page_size;
    o.num_pages = d->num_pages;
    o.block_table_stride = d->block_table_stride;
    o.window = d->window;
    o.softmax_scale = (double)d->softmax_scale;
    o.logit_softcap = (double)d->logit_softcap;
    o.alibi_slopes = d->use_alibi ? a->alibi_slopes : NULL;
    o.q = a->q;
    o.q_token_stride = d->q_token_stride;
    o.q_head_stride = d->q_head_stride;
    o.k = a->k_cache;
    o.k_page_stride = d->k_page_stride;
    o.k_head_stride = d->k_head_stride;
    o.k_slot_stride = d->k_slot_stride;
    o.v = a->v_cache;
    o.v_page_stride = d->v_page_stride;
    o.v_head_stride = d->v_head_stride;
    o.v_slot_stride = d->v_slot_stride;
    o.seq_lens = a->seq_lens;
    o.query_start_loc = a->query_start_loc;
    o.block_table = a->block_table;
    return oracle_paged_attention(&o, ref);
}

int rel_oracle_varlen(const r35a_varlen_attention_desc *d_given, const r35a_varlen_attention_args *a_given, double *ref)
{
    r35a_varlen_attention_desc dtmp;
    r35a_varlen_attention_args atmp;
    const r35a_varlen_attention_desc *d = rel_varlen_desc_meant(d_given, &dtmp);
    const r35a_varlen_attention_args *a = rel_varlen_args_meant(a_given, &atmp);
    oracle_varlen o;
    memset(&o, 0, sizeof o);
    o.dtype = d->dtype;
    o.sinks = d->use_sinks ? a->sinks : NULL;
    o.num_segments = d->num_segments;
    o.num_tokens = d->num_tokens;
    o.num_q_heads = d->num_q_heads;
    o.num_kv_heads = d->num_kv_heads;
    o.head_size = d->head_size;
    o.causal = d->causal;
    o.softmax_scale = (double)d->softmax_scale;
    o.logit_softcap = (double)d->logit_softcap;
    o.q = a->q;
    o.q_token_stride = d->q_token_stride;
    o.q_head_stride = d->q_head_stride;
    o.k = a->k;
    o.k_token_stride = d->k_token_stride;
    o.k_head_stride = d->k_head_stride;
    o.v = a->v;
    o.v_token_stride = d->v_token_stride;
    o.v_head_stride = d->v_head_stride;
    o.cu_seqlens = a->cu_seqlens;
    return oracle_varlen_attention(&o, ref);
}

/* The tests' own element decoding would do; this one is local so the fuzz target needs nothing
 * but the oracle. */
static double load_elem(r35a_dtype dtype, const void *base, size_t i)
{
    if (dtype == R35A_DTYPE_F32) {
        float f;
        memcpy(&f, (const uint8_t *)base + 4 * i, 4);
        return (double)f;
    }
    uint16_t h;
    memcpy(&h, (const uint8_t *)base + 2 * i, 2);
    if (dtype == R35A_DTYPE_BF16) {
        uint32_t bits = (uint32_t)h << 16;
        float f;
        memcpy(&f, &bits, 4);
        return (double)f;
    }
    int exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
    double m = exponent == 0    ? ldexp((double)mantissa, -24)
               : exponent == 31 ? (mantissa ? NAN : INFINITY)
                                : ldexp(1024.0 + mantissa, exponent - 25);
    return (h & 0x8000) ? -m : m;
}

double rel_max_abs_rows(r35a_dtype dtype, const void *base, int32_t tokens, int32_t heads, int32_t head_size,
                        int64_t token_stride, int64_t head_stride)
{
    double m = 0.0;
    for (int32_t t = 0; t < tokens; ++t)
        for (int32_t h = 0; h < heads; ++h)
            for (int32_t e = 0; e < head_size; ++e) {
                double x = fabs(load_elem(dtype, base, (size_t)(t * token_stride + h * head_stride + e)));
                if (x > m)
                    m = x;
            }
    return m;
}

double rel_extra_abs_tolerance(int32_t head_size, double logit_bound, int64_t max_keys, double v_max)
{
    const double eps32 = 0x1p-24;
    return 2.0 * eps32 * v_max * ((head_size + 4.0) * (logit_bound + 1.0) + (double)max_keys + 8.0);
}

double rel_tolerance(r35a_dtype dtype)
{
    switch (dtype) {
    case R35A_DTYPE_F16: return 2e-3;
    case R35A_DTYPE_BF16: return 1e-2;
    case R35A_DTYPE_F32: return 1e-5;
    case R35A_DTYPE_FP8_E4M3:
    case R35A_DTYPE_INT8: break; /* KV only: outputs have the Q/O dtype */
    }
    return 0.0;
}

void rel_append(char *buf, size_t cap, const char *text)
{
    size_t used = strlen(buf);
    if (used + 1 >= cap)
        return;
    size_t n = strlen(text);
    if (n > cap - 1 - used)
        n = cap - 1 - used;
    memcpy(buf + used, text, n);
    buf[used + n] = '\0';
}

static void note(rel_compare *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note(rel_compare *c, const char *fmt, ...)
{
    size_t used = strlen(c->first);
    if (used + 1 >= sizeof c->first || c->bad + c->nonfinite + c->unwritten + c->outside > 6)
        return;
    va_list ap;
    va_start(ap, fmt);
    char line[160];
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (used)
        rel_append(c->first, sizeof c->first, "; ");
    rel_append(c->first, sizeof c->first, line);
}

bool rel_compare_rows(r35a_dtype dtype, const void *out, size_t out_bytes, int32_t tokens, int32_t heads,
                      int32_t head_size, int64_t token_stride, int64_t head_stride, const double *ref,
                      double tol_rel, double extra_abs, rel_compare *c)
{
    memset(c, 0, sizeof *c);
    const size_t es = rel_dtype_size(dtype);
    const size_t elems = out_bytes / es;
    const size_t nref = (size_t)tokens * (size_t)heads * (size_t)head_size;
    for (size_t i = 0; i < nref; ++i)
        if (fabs(ref[i]) > c->ref_max)
            c->ref_max = fabs(ref[i]);
    c->tol_abs = tol_rel * (c->ref_max > 1e-6 ? c->ref_max : 1e-6) + extra_abs;

    /* state per output element: 0 not owned, 1 owned and unmatched, 2 owned and matched */
    uint8_t *state = calloc(elems ? elems : 1, 1);
    double *best = malloc(sizeof(double) * (elems ? elems : 1));
    for (int32_t t = 0; t < tokens; ++t)
        for (int32_t h = 0; h < heads; ++h)
            for (int32_t e = 0; e < head_size; ++e) {
                size_t i = (size_t)(t * token_stride + h * head_stride + e);
                double r = ref[((size_t)t * (size_t)heads + (size_t)h) * (size_t)head_size + (size_t)e];
                const uint8_t *b = (const uint8_t *)out + i * es;
                bool poison = true;
                for (size_t k = 0; k < es; ++k)
                    poison = poison && b[k] == 0xFFu;
                double o = load_elem(dtype, out, i);
                double diff = fabs(o - r);
                if (state[i] == 0) {
                    state[i] = 1;
                    best[i] = INFINITY;
                    c->checked++;
                }
                if (state[i] == 2)
                    continue;
                if (poison) {
                    best[i] = NAN; /* marks "unwritten" */
                    continue;
                }
                if (!isfinite(o) && isfinite(r))
                    continue;
                if (!(diff <= c->tol_abs)) {
                    if (!(diff >= best[i]))
                        best[i] = diff;
                    continue;
                }
                state[i] = 2;
                if (diff > c->err_max)
                    c->err_max = diff;
            }
    for (int32_t t = 0; t < tokens; ++t)
        for (int32_t h = 0; h < heads; ++h)
            for (int32_t e = 0; e < head_size; ++e) {
                size_t i = (size_t)(t * token_stride + h * head_stride + e);
                if (state[i] != 1)
                    continue;
                state[i] = 3; /* report once */
                double r = ref[((size_t)t * (size_t)heads + (size_t)h) * (size_t)head_size + (size_t)e];
                double o = load_elem(dtype, out, i);
                if (isnan(best[i])) {
                    c->unwritten++;
                    note(c, "[t%d h%d e%d] left poisoned (ref %.6g)", (int)t, (int)h, (int)e, r);
                } else if (!isfinite(o)) {
                    c->nonfinite++;
                    note(c, "[t%d h%d e%d] out %.6g ref %.6g", (int)t, (int)h, (int)e, o, r);
                } else {
                    c->bad++;
                    if (fabs(o - r) > c->err_max)
                        c->err_max = fabs(o - r);
                    note(c, "[t%d h%d e%d] out %.6g ref %.6g", (int)t, (int)h, (int)e, o, r);
                }
            }
    const uint8_t *bytes = out;
    for (size_t b = 0; b < elems * es; ++b)
        if (state[b / es] == 0 && bytes[b] != 0xFFu) {
            if (c->outside == 0)
                note(c, "byte %zu outside every row written (0x%02x)", b, (unsigned)bytes[b]);
            c->outside++;
        }
    for (size_t b = elems * es; b < out_bytes; ++b)
        if (bytes[b] != 0xFFu)
            c->outside++;
    free(state);
    free(best);
    return c->bad == 0 && c->nonfinite == 0 && c->unwritten == 0 && c->outside == 0;
}

/* ------------------------------------------------------------------------------------------ */
/* guarded buffers                                                                              */

void rel_guarded_alloc(rel_guarded *g, size_t bytes, uint8_t fill)
{
    g->bytes = bytes;
    g->alloc = malloc(bytes + 2 * REL_GUARD_BYTES);
    if (!g->alloc) {
        fprintf(stderr, "rel_guarded_alloc: out of memory (%zu bytes)\n", bytes);
        abort();
    }
    g->payload = g->alloc + REL_GUARD_BYTES;
    memset(g->alloc, REL_GUARD_BYTE, REL_GUARD_BYTES);
    memset(g->payload, fill, bytes);
    memset(g->payload + bytes, REL_GUARD_BYTE, REL_GUARD_BYTES);
}

void rel_guarded_free(rel_guarded *g)
{
    free(g->alloc);
    memset(g, 0, sizeof *g);
}

bool rel_guards_intact(const rel_guarded *g)
{
    for (size_t i = 0; i < REL_GUARD_BYTES; ++i)
        if (g->alloc[i] != REL_GUARD_BYTE || g->payload[g->bytes + i] != REL_GUARD_BYTE)
            return false;
    return true;
}

uint64_t rel_hash(const void *p, size_t bytes, uint64_t h)
{
    const uint8_t *b = p;
    size_t i = 0;
    for (; i + 8 <= bytes; i += 8) { /* a word at a time: inputs are hashed on every fuzz execution */
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 1099511628211ull;
        h ^= h >> 29;
    }
    for (; i < bytes; ++i)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

uint64_t rel_guarded_hash(const rel_guarded *g)
{
    return rel_hash(g->alloc, g->bytes + 2 * REL_GUARD_BYTES, 1469598103934665603ull);
}

/* ------------------------------------------------------------------------------------------ */
/* values                                                                                       */

uint64_t rel_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void rel_fill_tensor(r35a_dtype dtype, void *buf, size_t elems, const uint8_t *reached, double amp,
                     double offset, uint64_t *state)
{
    for (size_t i = 0; i < elems; ++i) {
        if (reached[i])
            tu_store(dtype, buf, i, offset + amp * ((double)(rel_next(state) >> 11) * 0x1.0p-52 - 1.0));
        else
            tu_store_nan(dtype, buf, i);
    }
}
