/*
 * test_bad_input.c - every bad input gets its exact status, a detail naming the offending field,
 * and writes nothing: outputs and workspace are poisoned first and must come back unchanged, and
 * a failing plan call leaves *plan NULL.
 *
 * Every expectation is checked and reported (a test continues after a failed one, so one run
 * lists every discrepancy), then the test fails if any did.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "test_util.h"

static r35a_context *g_ctx;
static int g_failed;    /* failed expectations in the current test */
static int g_checked;   /* all expectations, for the summary */

#define WS_BYTES 4096u
static uint8_t g_ws[WS_BYTES];

/* true if detail contains one of the '|'-separated names */
static bool contains_any(const char *detail, const char *names)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", names);
    for (char *tok = strtok(buf, "|"); tok; tok = strtok(NULL, "|")) {
        if (strstr(detail, tok)) {
            return true;
        }
    }
    return false;
}

/* Checks status and detail of the last call. fields: '|'-separated names one of which the detail
 * must contain (NULL: any non-empty detail); prefix: what the detail must start with (or NULL). */
static void expect(const char *what, r35a_status got, r35a_status want, const char *fields,
                   const char *prefix)
{
    const char *detail = r35a_last_error_detail();
    bool ok = got == want;
    if (ok && want != R35A_OK) {
        ok = detail && *detail && (!fields || contains_any(detail, fields)) &&
             (!prefix || strncmp(detail, prefix, strlen(prefix)) == 0);
    }
    if (ok && want == R35A_OK) {
        ok = detail && *detail == '\0';
    }
    g_checked++;
    if (!ok) {
        g_failed++;
        printf("FAIL %s: got %s \"%s\"; expected %s", what, r35a_status_string(got),
               detail ? detail : "(NULL)", r35a_status_string(want));
        if (fields) {
            printf(" naming %s", fields);
        }
        if (prefix) {
            printf(" starting \"%s\"", prefix);
        }
        printf("\n");
    }
}

static void expect_true(const char *what, bool cond)
{
    g_checked++;
    if (!cond) {
        g_failed++;
        printf("FAIL %s\n", what);
    }
}

static void begin_test(void)
{
    g_failed = 0;
}

static void end_test(const char *name)
{
    printf("[test_bad_input] %s: %d expectations failed\n", name, g_failed);
    assert_int_equal(g_failed, 0);
}

/* ------------------------------------------------------------------------------------------ */
/* fixtures: small valid problems built by the harness                                          */

/* 3 sequences (L/M = 40/2, 17/1, 0/0), hq 4, hkv 2, D 64, page size 16: block_table_stride 3,
 * 5 pages; seq 1 leaves its third block-table entry unreached. */
static void paged_fixture_ex(paged_problem *p, r35a_dtype dtype, int32_t window, int32_t use_alibi,
                             int32_t use_sinks, r35a_dtype kv_dtype, int32_t kv_scale_per_head)
{
    tu_rng rng;
    tu_rng_init(&rng, tu_case_seed("bad_input_paged", 0));
    paged_spec s;
    paged_spec_init(&s, dtype, 4, 2, 64, 16);
    s.window = window;
    s.use_alibi = use_alibi;
    s.use_sinks = use_sinks;
    s.kv_dtype = kv_dtype;
    s.kv_scale_per_head = kv_scale_per_head;
    paged_spec_add_seq(&s, 40, 2);
    paged_spec_add_seq(&s, 17, 1);
    paged_spec_add_seq(&s, 0, 0);
    assert_int_equal(paged_problem_init(p, &s, &rng), 0);
    assert_int_equal(p->desc.block_table_stride, 3);
}

static void paged_fixture(paged_problem *p, r35a_dtype dtype, int32_t window, int32_t use_alibi)
{
    paged_fixture_ex(p, dtype, window, use_alibi, 0, (r35a_dtype)0, 0);
}

/* segments 5, 0, 3; hq 4, hkv 2, D 32. */
static void varlen_fixture_ex(varlen_problem *p, int32_t use_sinks)
{
    tu_rng rng;
    tu_rng_init(&rng, tu_case_seed("bad_input_varlen", 0));
    varlen_spec s;
    varlen_spec_init(&s, R35A_DTYPE_F16, 4, 2, 32);
    s.use_sinks = use_sinks;
    varlen_spec_add_segment(&s, 5);
    varlen_spec_add_segment(&s, 0);
    varlen_spec_add_segment(&s, 3);
    assert_int_equal(varlen_problem_init(p, &s, &rng), 0);
}

static void varlen_fixture(varlen_problem *p)
{
    varlen_fixture_ex(p, 0);
}

static r35a_paged_attention_args paged_args(paged_problem *p)
{
    r35a_paged_attention_args a;
    memset(&a, 0, sizeof a);
    a.struct_size = sizeof a;
    a.q = p->q;
    a.k_cache = p->k;
    a.v_cache = p->v;
    a.out = p->out_alloc + p->out_guard_bytes;
    a.seq_lens = p->seq_lens;
    a.query_start_loc = p->query_start_loc;
    a.block_table = p->block_table;
    a.alibi_slopes = p->alibi;
    a.sinks = p->sinks;
    a.k_scale = p->k_scale;
    a.v_scale = p->v_scale;
    return a;
}

static r35a_varlen_attention_args varlen_args(varlen_problem *p)
{
    r35a_varlen_attention_args a;
    memset(&a, 0, sizeof a);
    a.struct_size = sizeof a;
    a.q = p->q;
    a.k = p->k;
    a.v = p->v;
    a.out = p->out_alloc + p->out_guard_bytes;
    a.cu_seqlens = p->cu_seqlens;
    a.sinks = p->sinks;
    return a;
}

static void poison_outputs(uint8_t *out, size_t out_bytes)
{
    tu_poison(out, out_bytes);
    tu_poison(g_ws, WS_BYTES);
}

static void expect_nothing_written(const char *what, const uint8_t *out, size_t out_bytes)
{
    char msg[600];
    size_t o = tu_first_unpoisoned(out, out_bytes);
    snprintf(msg, sizeof msg, "%s: output byte %zu written by a failing call", what, o);
    expect_true(msg, o == (size_t)-1);
    size_t w = tu_first_unpoisoned(g_ws, WS_BYTES);
    snprintf(msg, sizeof msg, "%s: workspace byte %zu written by a failing call", what, w);
    expect_true(msg, w == (size_t)-1);
}

/* Runs a paged plan with args on poisoned buffers and checks the expectation. */
static void paged_run_expect(const char *what, paged_problem *p, const r35a_plan *plan,
                             const r35a_paged_attention_args *args, r35a_status want,
                             const char *fields, const char *prefix)
{
    poison_outputs(p->out_alloc, p->out_alloc_bytes);
    r35a_status st = r35a_paged_attention_run(g_ctx, plan, args, g_ws, WS_BYTES, NULL);
    expect(what, st, want, fields, prefix);
    if (want != R35A_OK) {
        expect_nothing_written(what, p->out_alloc, p->out_alloc_bytes);
    }
}

static void varlen_run_expect(const char *what, varlen_problem *p, const r35a_plan *plan,
                              const r35a_varlen_attention_args *args, r35a_status want,
                              const char *fields, const char *prefix)
{
    poison_outputs(p->out_alloc, p->out_alloc_bytes);
    r35a_status st = r35a_varlen_attention_run(g_ctx, plan, args, g_ws, WS_BYTES, NULL);
    expect(what, st, want, fields, prefix);
    if (want != R35A_OK) {
        expect_nothing_written(what, p->out_alloc, p->out_alloc_bytes);
    }
}

/* Plans desc and checks the expectation; a failing plan must leave *plan NULL. */
static void paged_plan_expect(const char *what, const r35a_paged_attention_desc *desc,
                              r35a_status want, const char *fields, const char *prefix)
{
    static int sentinel;
    r35a_plan *plan = (r35a_plan *)(void *)&sentinel;
    r35a_status st = r35a_paged_attention_plan(g_ctx, desc, &plan);
    expect(what, st, want, fields, prefix);
    if (st != R35A_OK) {
        char msg[600];
        snprintf(msg, sizeof msg, "%s: *plan not set to NULL on failure", what);
        expect_true(msg, plan == NULL);
    } else {
        r35a_plan_destroy(plan);
    }
}

static void varlen_plan_expect(const char *what, const r35a_varlen_attention_desc *desc,
                               r35a_status want, const char *fields, const char *prefix)
{
    static int sentinel;
    r35a_plan *plan = (r35a_plan *)(void *)&sentinel;
    r35a_status st = r35a_varlen_attention_plan(g_ctx, desc, &plan);
    expect(what, st, want, fields, prefix);
    if (st != R35A_OK) {
        char msg[600];
        snprintf(msg, sizeof msg, "%s: *plan not set to NULL on failure", what);
        expect_true(msg, plan == NULL);
    } else {
        r35a_plan_destroy(plan);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* paged descriptor                                                                             */

typedef struct desc_case {
    const char *name;      /* the mutation, as source text */
    r35a_status want;
    const char *field;     /* field the detail must name */
    bool prefix;           /* detail must start "<desc>.<field>:" */
} desc_case;

#define CASE(n, stmt, st, fld, pre)                                                                 \
    case n:                                                                                         \
        stmt;                                                                                       \
        c->name = #stmt;                                                                            \
        c->want = st;                                                                               \
        c->field = fld;                                                                             \
        c->prefix = pre;                                                                            \
        return true;

#define INV R35A_ERR_INVALID_ARGUMENT

/* Mutation k of a valid paged descriptor (3 seqs, 3 tokens, max M 2, max L 40, hq 4, hkv 2, D 64,
 * B 16, 5 pages, block_table_stride 3); false past the last. */
static bool paged_desc_case(int k, r35a_paged_attention_desc *d, desc_case *c)
{
    switch (k) {
    CASE(0, d->struct_size = 0, R35A_ERR_STRUCT_SIZE, "struct_size", false)
    CASE(1, d->struct_size = sizeof *d - 1, R35A_ERR_STRUCT_SIZE, "struct_size", false)
    CASE(2, d->struct_size = sizeof *d + 8, R35A_ERR_STRUCT_SIZE, "struct_size", false)
    CASE(3, d->dtype = (r35a_dtype)0, R35A_ERR_UNKNOWN_DTYPE, "dtype", false)
    CASE(4, d->dtype = (r35a_dtype)6, R35A_ERR_UNKNOWN_DTYPE, "dtype", false)
    CASE(5, d->dtype = (r35a_dtype)99, R35A_ERR_UNKNOWN_DTYPE, "dtype", false)
    CASE(6, d->num_seqs = 0; d->num_tokens = 0, INV, "num_seqs", true)
    CASE(7, d->num_seqs = -1, INV, "num_seqs", true)
    CASE(8, d->num_tokens = -1, INV, "num_tokens", true)
    CASE(9, d->max_query_len = -1, INV, "max_query_len", true)
    CASE(10, d->max_seq_len = -1, INV, "max_seq_len", true)
    CASE(11, d->num_q_heads = 0, INV, "num_q_heads", true)
    CASE(12, d->num_q_heads = -4, INV, "num_q_heads", true)
    CASE(13, d->num_kv_heads = 0, INV, "num_kv_heads", true)
    CASE(14, d->num_kv_heads = -2, INV, "num_kv_heads", true)
    CASE(15, d->head_size = 0, INV, "head_size", true)
    CASE(16, d->head_size = -64, INV, "head_size", true)
    CASE(17, d->head_size = 1025, INV, "head_size", true)
    CASE(18, d->page_size = 0, INV, "page_size", true)
    CASE(19, d->page_size = -16, INV, "page_size", true)
    CASE(20, d->num_pages = 0, INV, "num_pages", true)
    CASE(21, d->num_pages = -1, INV, "num_pages", true)
    CASE(22, d->q_token_stride = -1, INV, "q_token_stride", true)
    CASE(23, d->q_head_stride = -1, INV, "q_head_stride", true)
    CASE(24, d->o_token_stride = -1, INV, "o_token_stride", true)
    CASE(25, d->o_head_stride = -1, INV, "o_head_stride", true)
    CASE(26, d->k_page_stride = -1, INV, "k_page_stride", true)
    CASE(27, d->k_head_stride = -1, INV, "k_head_stride", true)
    CASE(28, d->k_slot_stride = -1, INV, "k_slot_stride", true)
    CASE(29, d->v_page_stride = -1, INV, "v_page_stride", true)
    CASE(30, d->v_head_stride = -1, INV, "v_head_stride", true)
    CASE(31, d->v_slot_stride = -1, INV, "v_slot_stride", true)
    CASE(32, d->window = -1, INV, "window", true)
    CASE(33, d->softmax_scale = 0.0f, INV, "softmax_scale", true)
    CASE(34, d->softmax_scale = -0.125f, INV, "softmax_scale", true)
    CASE(35, d->softmax_scale = NAN, INV, "softmax_scale", true)
    CASE(36, d->softmax_scale = INFINITY, INV, "softmax_scale", true)
    CASE(37, d->logit_softcap = -1.0f, INV, "logit_softcap", true)
    CASE(38, d->logit_softcap = NAN, INV, "logit_softcap", true)
    CASE(39, d->use_alibi = 2, INV, "use_alibi", true)
    CASE(40, d->use_alibi = -1, INV, "use_alibi", true)
    CASE(41, d->num_kv_heads = 3, INV, "num_kv_heads", true)
    CASE(42, d->num_kv_heads = 8, INV, "num_kv_heads", true)
    CASE(43, d->block_table_stride = 2, INV, "block_table_stride", true)
    CASE(44, d->block_table_stride = -1, INV, "block_table_stride", true)
    CASE(45, d->num_tokens = 7, INV, "num_tokens", true)
    CASE(46, d->max_query_len = 0, INV, "num_tokens", true)
    CASE(47, d->k_page_stride = INT64_MAX / 2; d->num_pages = 4, R35A_ERR_SIZE_OVERFLOW,
         "k_page_stride", false)
    CASE(48, d->v_page_stride = INT64_MAX / 2; d->num_pages = 4, R35A_ERR_SIZE_OVERFLOW,
         "v_page_stride", false)
    CASE(49, d->q_token_stride = INT64_MAX / 2, R35A_ERR_SIZE_OVERFLOW, "q_token_stride", false)
    CASE(50, d->o_token_stride = INT64_MAX / 2, R35A_ERR_SIZE_OVERFLOW, "o_token_stride", false)
    CASE(51, d->k_slot_stride = INT64_MAX / 8, R35A_ERR_SIZE_OVERFLOW, "k_slot_stride", false)
    CASE(52, d->v_head_stride = INT64_MAX, R35A_ERR_SIZE_OVERFLOW, "v_head_stride", false)
    CASE(53, d->q_head_stride = INT64_MAX / 2, R35A_ERR_SIZE_OVERFLOW, "q_head_stride", false)
    CASE(54, d->o_head_stride = INT64_MAX / 2, R35A_ERR_SIZE_OVERFLOW, "o_head_stride", false)
    /* valid edge values are accepted */
    CASE(55, d->window = 1, R35A_OK, NULL, false)
    CASE(56, d->head_size = 1024; d->q_head_stride = 1024; d->q_token_stride = 4096;
         d->o_head_stride = 1024; d->o_token_stride = 4096; d->k_slot_stride = 1024;
         d->k_head_stride = 16 * 1024; d->k_page_stride = 32 * 1024; d->v_slot_stride = 1024;
         d->v_head_stride = 16 * 1024; d->v_page_stride = 32 * 1024, R35A_OK, NULL, false)
    CASE(57, d->block_table_stride = 100, R35A_OK, NULL, false)
    CASE(58, d->max_seq_len = 0; d->block_table_stride = 0, R35A_OK, NULL, false)
    CASE(59, d->num_tokens = 0; d->max_query_len = 0, R35A_OK, NULL, false)
    CASE(60, d->k_page_stride = 0; d->v_head_stride = 0, R35A_OK, NULL, false)
    CASE(61, d->logit_softcap = 50.0f; d->use_alibi = 1, R35A_OK, NULL, false)
    CASE(62, d->page_size = 1; d->block_table_stride = 40, R35A_OK, NULL, false)
    /* 0.2: the Q/O dtype is never an 8-bit one; kv_dtype; per-head scales; sinks */
    CASE(63, d->dtype = R35A_DTYPE_FP8_E4M3, INV, "dtype", true)
    CASE(64, d->dtype = R35A_DTYPE_INT8, INV, "dtype", true)
    CASE(65, d->kv_dtype = (r35a_dtype)6, R35A_ERR_UNKNOWN_DTYPE, "kv_dtype", false)
    CASE(66, d->kv_dtype = (r35a_dtype)-1, R35A_ERR_UNKNOWN_DTYPE, "kv_dtype", false)
    CASE(67, d->kv_dtype = R35A_DTYPE_BF16, INV, "kv_dtype", true)
    CASE(68, d->kv_dtype = R35A_DTYPE_F32, INV, "kv_dtype", true)
    CASE(69, d->kv_scale_per_head = 3; d->kv_dtype = R35A_DTYPE_INT8, INV, "kv_scale_per_head", true)
    CASE(70, d->kv_scale_per_head = 1, INV, "kv_scale_per_head", true)
    CASE(71, d->kv_scale_per_head = 1; d->kv_dtype = R35A_DTYPE_F16, INV, "kv_scale_per_head", true)
    CASE(72, d->use_sinks = 2, INV, "use_sinks", true)
    CASE(73, d->use_sinks = -1, INV, "use_sinks", true)
    /* K/V extents count bytes of the KV dtype: 4 x INT64_MAX/6 elements fit as bytes, not as f16 */
    CASE(74, d->k_page_stride = INT64_MAX / 6, R35A_ERR_SIZE_OVERFLOW, "k_page_stride", false)
    CASE(75, d->k_page_stride = INT64_MAX / 6; d->kv_dtype = R35A_DTYPE_FP8_E4M3, R35A_OK, NULL, false)
    CASE(76, d->v_slot_stride = INT64_MAX / 8; d->kv_dtype = R35A_DTYPE_INT8, R35A_ERR_SIZE_OVERFLOW,
         "v_slot_stride", false)
    CASE(77, d->kv_dtype = R35A_DTYPE_F16, R35A_OK, NULL, false)
    CASE(78, d->kv_dtype = R35A_DTYPE_FP8_E4M3; d->kv_scale_per_head = 1, R35A_OK, NULL, false)
    CASE(79, d->kv_dtype = R35A_DTYPE_INT8, R35A_OK, NULL, false)
    CASE(80, d->dtype = R35A_DTYPE_F32; d->kv_dtype = R35A_DTYPE_FP8_E4M3, R35A_OK, NULL, false)
    CASE(81, d->use_sinks = 1; d->use_alibi = 1; d->logit_softcap = 30.0f, R35A_OK, NULL, false)
    /* 0.1.0's struct size: the 0.2 fields are not read (they hold garbage here) */
    CASE(82, d->struct_size = offsetof(r35a_paged_attention_desc, use_sinks); d->use_sinks = 77;
         d->kv_dtype = (r35a_dtype)99; d->kv_scale_per_head = -5, R35A_OK, NULL, false)
    CASE(83, d->struct_size = offsetof(r35a_paged_attention_desc, use_sinks) - 8, R35A_ERR_STRUCT_SIZE,
         "struct_size", false)
    CASE(84, d->struct_size = offsetof(r35a_paged_attention_desc, use_sinks); d->num_kv_heads = 3, INV,
         "num_kv_heads", true)
    /* 0.4: per-token-head scales (granularity 2) and their strides */
    CASE(85, d->kv_scale_per_head = R35A_KV_SCALE_PER_TOKEN_HEAD, INV, "kv_scale_per_head", true)
    CASE(86, d->kv_scale_per_head = R35A_KV_SCALE_PER_TOKEN_HEAD; d->kv_dtype = R35A_DTYPE_F16, INV,
         "kv_scale_per_head", true)
    CASE(87, d->kv_scale_per_head = -1; d->kv_dtype = R35A_DTYPE_FP8_E4M3, INV, "kv_scale_per_head", true)
    CASE(88, d->kv_scale_per_head = R35A_KV_SCALE_PER_TOKEN_HEAD; d->kv_dtype = R35A_DTYPE_FP8_E4M3, R35A_OK,
         NULL, false)
    CASE(89, d->kv_scale_per_head = R35A_KV_SCALE_PER_TOKEN_HEAD; d->kv_dtype = R35A_DTYPE_INT8, R35A_OK, NULL,
         false)
    CASE(90, d->k_scale_page_stride = -1, INV, "k_scale_page_stride", true)
    CASE(91, d->k_scale_slot_stride = -1; d->kv_dtype = R35A_DTYPE_INT8; d->kv_scale_per_head = 2, INV,
         "k_scale_slot_stride", true)
    CASE(92, d->k_scale_head_stride = INT64_MIN, INV, "k_scale_head_stride", true)
    CASE(93, d->v_scale_page_stride = -4; d->kv_dtype = R35A_DTYPE_FP8_E4M3; d->kv_scale_per_head = 2, INV,
         "v_scale_page_stride", true)
    CASE(94, d->v_scale_slot_stride = -1, INV, "v_scale_slot_stride", true)
    CASE(95, d->v_scale_head_stride = -1, INV, "v_scale_head_stride", true)
    /* float32 extents: (2 kv heads - 1) x INT64_MAX / 3 elements overflow as bytes */
    CASE(96, d->v_scale_head_stride = INT64_MAX / 3; d->kv_dtype = R35A_DTYPE_INT8; d->kv_scale_per_head = 2,
         R35A_ERR_SIZE_OVERFLOW, "v_scale_head_stride", false)
    CASE(97, d->k_scale_page_stride = INT64_MAX / 8, R35A_ERR_SIZE_OVERFLOW, "k_scale_page_stride", false)
    CASE(98, d->k_scale_page_stride = 0; d->k_scale_slot_stride = 0; d->k_scale_head_stride = 0;
         d->kv_dtype = R35A_DTYPE_INT8; d->kv_scale_per_head = 2, R35A_OK, NULL, false)
    /* 0.3.0's struct size: the 0.4 fields are not read (garbage here) */
    CASE(99, d->struct_size = offsetof(r35a_paged_attention_desc, k_scale_page_stride);
         d->k_scale_page_stride = -5; d->v_scale_head_stride = INT64_MIN, R35A_OK, NULL, false)
    CASE(100, d->struct_size = offsetof(r35a_paged_attention_desc, k_scale_page_stride) + 8, R35A_ERR_STRUCT_SIZE,
         "struct_size", false)
    /* granularity 2 needs the strides only 0.4's struct has */
    CASE(101, d->struct_size = offsetof(r35a_paged_attention_desc, k_scale_page_stride);
         d->kv_scale_per_head = 2; d->kv_dtype = R35A_DTYPE_INT8, INV, "kv_scale_per_head", true)
    CASE(102, d->struct_size = offsetof(r35a_paged_attention_desc, lse_token_stride);
         d->kv_scale_per_head = 2; d->kv_dtype = R35A_DTYPE_FP8_E4M3, INV, "kv_scale_per_head", true)
    default: return false;
    }
}

static void test_paged_desc(void **state)
{
    (void)state;
    begin_test();
    paged_problem p;
    paged_fixture(&p, R35A_DTYPE_F16, 0, 0);
    int n = 0;
    for (int k = 0;; ++k) {
        r35a_paged_attention_desc d = p.desc;
        desc_case c;
        if (!paged_desc_case(k, &d, &c)) {
            break;
        }
        char what[400], prefix[100];
        snprintf(what, sizeof what, "paged desc #%d {%s}", k, c.name);
        snprintf(prefix, sizeof prefix, "paged_attention_desc.%s:", c.field ? c.field : "");
        paged_plan_expect(what, &d, c.want, c.field, c.prefix ? prefix : NULL);
        n++;
    }
    printf("[test_bad_input] %d paged descriptor cases\n", n);
    /* 0.1.0's struct in an allocation of exactly its size: nothing past it is read (ASan builds
     * catch any overread), and the plan runs like today's struct without the 0.2 fields */
    {
        const size_t old = offsetof(r35a_paged_attention_desc, use_sinks);
        r35a_paged_attention_desc prefix = p.desc;
        prefix.struct_size = old;
        void *small = malloc(old);
        assert_non_null(small);
        memcpy(small, &prefix, old);
        paged_plan_expect("paged desc in a heap block of 0.1.0's size", small, R35A_OK, NULL, NULL);
        r35a_plan *plan = NULL;
        assert_int_equal(r35a_paged_attention_plan(g_ctx, small, &plan), R35A_OK);
        const size_t old_args = offsetof(r35a_paged_attention_args, sinks);
        r35a_paged_attention_args full = paged_args(&p);
        full.struct_size = old_args;
        void *args = malloc(old_args);
        assert_non_null(args);
        memcpy(args, &full, old_args);
        paged_run_expect("paged args in a heap block of 0.1.0's size", &p, plan, args, R35A_OK, NULL, NULL);
        free(args);
        r35a_plan_destroy(plan);
        free(small);
    }
    /* NULL pointers */
    static int sentinel;
    r35a_plan *plan = (r35a_plan *)(void *)&sentinel;
    expect("paged plan, NULL context", r35a_paged_attention_plan(NULL, &p.desc, &plan),
           R35A_ERR_NULL_POINTER, NULL, NULL);
    expect_true("paged plan, NULL context: *plan not NULL", plan == NULL);
    plan = (r35a_plan *)(void *)&sentinel;
    expect("paged plan, NULL desc", r35a_paged_attention_plan(g_ctx, NULL, &plan),
           R35A_ERR_NULL_POINTER, NULL, NULL);
    expect_true("paged plan, NULL desc: *plan not NULL", plan == NULL);
    expect("paged plan, NULL plan pointer", r35a_paged_attention_plan(g_ctx, &p.desc, NULL),
           R35A_ERR_NULL_POINTER, NULL, NULL);
    paged_problem_free(&p);
    end_test("paged descriptor");
}

/* ------------------------------------------------------------------------------------------ */
/* varlen descriptor                                                                            */

/* Mutation k of a valid varlen descriptor (3 segments, 8 tokens, max 5, hq 4, hkv 2, D 32). */
static bool varlen_desc_case(int k, r35a_varlen_attention_desc *d, desc_case *c)
{
    switch (k) {
    CASE(0, d->struct_size = 0, R35A_ERR_STRUCT_SIZE, "struct_size", false)
    CASE(1, d->struct_size = sizeof *d - 1, R35A_ERR_STRUCT_SIZE, "struct_size", false)
    CASE(2, d->struct_size = sizeof *d + 8, R35A_ERR_STRUCT_SIZE, "struct_size", false)
    CASE(3, d->dtype = (r35a_dtype)0, R35A_ERR_UNKNOWN_DTYPE, "dtype", false)
    CASE(4, d->dtype = (r35a_dtype)6, R35A_ERR_UNKNOWN_DTYPE, "dtype", false)
    CASE(5, d->dtype = (r35a_dtype)99, R35A_ERR_UNKNOWN_DTYPE, "dtype", false)
    CASE(6, d->num_segments = 0, INV, "num_segments", true)
    CASE(7, d->num_segments = -1, INV, "num_segments", true)
    CASE(8, d->num_tokens = -1, INV, "num_tokens", true)
    CASE(9, d->max_seqlen = -1, INV, "max_seqlen", true)
    CASE(10, d->num_q_heads = 0, INV, "num_q_heads", true)
    CASE(11, d->num_q_heads = -1, INV, "num_q_heads", true)
    CASE(12, d->num_kv_heads = 0, INV, "num_kv_heads", true)
    CASE(13, d->num_kv_heads = 3, INV, "num_kv_heads", true)
    CASE(14, d->head_size = 0, INV, "head_size", true)
    CASE(15, d->head_size = -1, INV, "head_size", true)
    CASE(16, d->head_size = 1025, INV, "head_size", true)
    CASE(17, d->causal = 2, INV, "causal", true)
    CASE(18, d->causal = -1, INV, "causal", true)
    CASE(19, d->softmax_scale = 0.0f, INV, "softmax_scale", true)
    CASE(20, d->softmax_scale = -1.0f, INV, "softmax_scale", true)
    CASE(21, d->softmax_scale = NAN, INV, "softmax_scale", true)
    CASE(22, d->softmax_scale = INFINITY, INV, "softmax_scale", true)
    CASE(23, d->logit_softcap = -1.0f, INV, "logit_softcap", true)
    CASE(24, d->logit_softcap = NAN, INV, "logit_softcap", true)
    CASE(25, d->q_token_stride = -1, INV, "q_token_stride", true)
    CASE(26, d->q_head_stride = -1, INV, "q_head_stride", true)
    CASE(27, d->k_token_stride = -1, INV, "k_token_stride", true)
    CASE(28, d->k_head_stride = -1, INV, "k_head_stride", true)
    CASE(29, d->v_token_stride = -1, INV, "v_token_stride", true)
    CASE(30, d->v_head_stride = -1, INV, "v_head_stride", true)
    CASE(31, d->o_token_stride = -1, INV, "o_token_stride", true)
    CASE(32, d->o_head_stride = -1, INV, "o_head_stride", true)
    CASE(33, d->q_token_stride = INT64_MAX / 2, R35A_ERR_SIZE_OVERFLOW, "q_token_stride", false)
    CASE(34, d->k_token_stride = INT64_MAX / 2, R35A_ERR_SIZE_OVERFLOW, "k_token_stride", false)
    CASE(35, d->v_token_stride = INT64_MAX / 2, R35A_ERR_SIZE_OVERFLOW, "v_token_stride", false)
    CASE(36, d->o_token_stride = INT64_MAX / 2, R35A_ERR_SIZE_OVERFLOW, "o_token_stride", false)
    CASE(37, d->k_head_stride = INT64_MAX, R35A_ERR_SIZE_OVERFLOW, "k_head_stride", false)
    CASE(38, d->o_head_stride = INT64_MAX / 2, R35A_ERR_SIZE_OVERFLOW, "o_head_stride", false)
    /* valid edge values */
    CASE(39, d->causal = 1, R35A_OK, NULL, false)
    CASE(40, d->num_tokens = 0; d->max_seqlen = 0, R35A_OK, NULL, false)
    CASE(41, d->num_kv_heads = 4, R35A_OK, NULL, false)
    CASE(42, d->logit_softcap = 30.0f, R35A_OK, NULL, false)
    CASE(43, d->max_seqlen = 100000, R35A_OK, NULL, false)
    /* 0.2 */
    CASE(44, d->dtype = R35A_DTYPE_FP8_E4M3, INV, "dtype", true)
    CASE(45, d->dtype = R35A_DTYPE_INT8, INV, "dtype", true)
    CASE(46, d->use_sinks = 2, INV, "use_sinks", true)
    CASE(47, d->use_sinks = -1, INV, "use_sinks", true)
    CASE(48, d->use_sinks = 1; d->causal = 1, R35A_OK, NULL, false)
    CASE(49, d->struct_size = offsetof(r35a_varlen_attention_desc, use_sinks); d->use_sinks = 99, R35A_OK,
         NULL, false)
    CASE(50, d->struct_size = offsetof(r35a_varlen_attention_desc, use_sinks) + 4, R35A_ERR_STRUCT_SIZE,
         "struct_size", false)
    default: return false;
    }
}

static void test_varlen_desc(void **state)
{
    (void)state;
    begin_test();
    varlen_problem p;
    varlen_fixture(&p);
    int n = 0;
    for (int k = 0;; ++k) {
        r35a_varlen_attention_desc d = p.desc;
        desc_case c;
        if (!varlen_desc_case(k, &d, &c)) {
            break;
        }
        char what[400], prefix[100];
        snprintf(what, sizeof what, "varlen desc #%d {%s}", k, c.name);
        snprintf(prefix, sizeof prefix, "varlen_attention_desc.%s:", c.field ? c.field : "");
        varlen_plan_expect(what, &d, c.want, c.field, c.prefix ? prefix : NULL);
        n++;
    }
    printf("[test_bad_input] %d varlen descriptor cases\n", n);
    static int sentinel;
    r35a_plan *plan = (r35a_plan *)(void *)&sentinel;
    expect("varlen plan, NULL context", r35a_varlen_attention_plan(NULL, &p.desc, &plan),
           R35A_ERR_NULL_POINTER, NULL, NULL);
    expect_true("varlen plan, NULL context: *plan not NULL", plan == NULL);
    plan = (r35a_plan *)(void *)&sentinel;
    expect("varlen plan, NULL desc", r35a_varlen_attention_plan(g_ctx, NULL, &plan),
           R35A_ERR_NULL_POINTER, NULL, NULL);
    expect_true("varlen plan, NULL desc: *plan not NULL", plan == NULL);
    expect("varlen plan, NULL plan pointer", r35a_varlen_attention_plan(g_ctx, &p.desc, NULL),
           R35A_ERR_NULL_POINTER, NULL, NULL);
    varlen_problem_free(&p);
    end_test("varlen descriptor");
}

/* ------------------------------------------------------------------------------------------ */
/* paged args and run-time data                                                                 */

static void test_paged_args(void **state)
{
    (void)state;
    begin_test();
    paged_problem p;
    paged_fixture(&p, R35A_DTYPE_F16, 0, 0);
    r35a_plan *plan = NULL;
    assert_int_equal(r35a_paged_attention_plan(g_ctx, &p.desc, &plan), R35A_OK);
    const r35a_paged_attention_args good = paged_args(&p);
    r35a_paged_attention_args a;

#define NULL_FIELD(f)                                                                               \
    a = good;                                                                                       \
    a.f = NULL;                                                                                     \
    paged_run_expect("paged args." #f " = NULL", &p, plan, &a, R35A_ERR_NULL_POINTER, #f, NULL);
    NULL_FIELD(q)
    NULL_FIELD(k_cache)
    NULL_FIELD(v_cache)
    NULL_FIELD(out)
    NULL_FIELD(seq_lens)
    NULL_FIELD(query_start_loc)
    NULL_FIELD(block_table)
#undef NULL_FIELD

    static const float slopes[4] = {0.5f, 0.25f, 0.125f, 0.0625f};
    a = good;
    a.alibi_slopes = slopes;
    paged_run_expect("paged args.alibi_slopes set with use_alibi = 0", &p, plan, &a, INV,
                     "alibi_slopes", NULL);

    const size_t sizes[] = {0, sizeof a - 1, sizeof a + 8};
    for (int k = 0; k < 3; ++k) {
        char what[100];
        snprintf(what, sizeof what, "paged args.struct_size = %zu", sizes[k]);
        a = good;
        a.struct_size = sizes[k];
        paged_run_expect(what, &p, plan, &a, R35A_ERR_STRUCT_SIZE, "struct_size", NULL);
    }
    paged_run_expect("paged run, NULL args", &p, plan, NULL, R35A_ERR_NULL_POINTER, NULL, NULL);
    paged_run_expect("paged run, NULL plan", &p, NULL, &good, R35A_ERR_NULL_POINTER, NULL, NULL);
    poison_outputs(p.out_alloc, p.out_alloc_bytes);
    expect("paged run, NULL context",
           r35a_paged_attention_run(NULL, plan, &good, g_ws, WS_BYTES, NULL), R35A_ERR_NULL_POINTER,
           NULL, NULL);
    expect_nothing_written("paged run, NULL context", p.out_alloc, p.out_alloc_bytes);

    /* the good args work, and leave no detail behind */
    paged_run_expect("paged run, valid args", &p, plan, &good, R35A_OK, NULL, NULL);
    r35a_plan_destroy(plan);

    /* use_alibi = 1 needs slopes */
    paged_problem pa;
    paged_fixture(&pa, R35A_DTYPE_BF16, 0, 1);
    assert_int_equal(r35a_paged_attention_plan(g_ctx, &pa.desc, &plan), R35A_OK);
    a = paged_args(&pa);
    a.alibi_slopes = NULL;
    paged_run_expect("paged args.alibi_slopes = NULL with use_alibi = 1", &pa, plan, &a,
                     R35A_ERR_NULL_POINTER, "alibi_slopes", NULL);
    r35a_plan_destroy(plan);
    paged_problem_free(&pa);

    /* 0.2 args on a plan without sinks or an 8-bit cache: none may be set */
    assert_int_equal(r35a_paged_attention_plan(g_ctx, &p.desc, &plan), R35A_OK);
    static const float one[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    a = good;
    a.sinks = one;
    paged_run_expect("paged args.sinks set with use_sinks = 0", &p, plan, &a, INV, "sinks", NULL);
    a = good;
    a.k_scale = one;
    paged_run_expect("paged args.k_scale set with an f16 cache", &p, plan, &a, INV, "k_scale", NULL);
    a = good;
    a.v_scale = one;
    paged_run_expect("paged args.v_scale set with an f16 cache", &p, plan, &a, INV, "v_scale", NULL);
    /* 0.1.0's args size: sinks and scales are not read (garbage here) */
    a = good;
    a.struct_size = offsetof(r35a_paged_attention_args, sinks);
    a.sinks = (const float *)(uintptr_t)0x10;
    a.k_scale = (const float *)(uintptr_t)0x20;
    paged_run_expect("paged args 0.1.0 struct_size, garbage past it (valid)", &p, plan, &a, R35A_OK, NULL, NULL);
    a.struct_size = offsetof(r35a_paged_attention_args, sinks) + 8;
    paged_run_expect("paged args.struct_size between 0.1.0's and 0.2's", &p, plan, &a, R35A_ERR_STRUCT_SIZE,
                     "struct_size", NULL);
    r35a_plan_destroy(plan);

    /* sinks and an 8-bit cache: all three pointers needed */
    paged_problem ps;
    paged_fixture_ex(&ps, R35A_DTYPE_F16, 0, 0, 1, R35A_DTYPE_FP8_E4M3, 1);
    assert_int_equal(r35a_paged_attention_plan(g_ctx, &ps.desc, &plan), R35A_OK);
    const r35a_paged_attention_args sgood = paged_args(&ps);
    const char *needed[3] = {"sinks", "k_scale", "v_scale"};
    for (int k = 0; k < 3; ++k) {
        char what[120];
        snprintf(what, sizeof what, "paged args.%s = NULL with sinks and an fp8 cache", needed[k]);
        a = sgood;
        if (k == 0) {
            a.sinks = NULL;
        } else if (k == 1) {
            a.k_scale = NULL;
        } else {
            a.v_scale = NULL;
        }
        paged_run_expect(what, &ps, plan, &a, R35A_ERR_NULL_POINTER, needed[k], NULL);
    }
    a = sgood;
    a.struct_size = offsetof(r35a_paged_attention_args, sinks); /* 0.1.0's: sinks default to NULL */
    paged_run_expect("paged args 0.1.0 struct_size with a plan that needs sinks", &ps, plan, &a,
                     R35A_ERR_NULL_POINTER, "sinks|k_scale|v_scale", NULL);
    paged_run_expect("paged run with sinks and an fp8 cache, valid args", &ps, plan, &sgood, R35A_OK, NULL, NULL);
    r35a_plan_destroy(plan);
    paged_problem_free(&ps);
    paged_problem_free(&p);
    end_test("paged args");
}

/* 8-bit KV scales are data: checked on the reference backend, each finite and > 0. */
static void test_paged_scale_data(void **state)
{
    (void)state;
    begin_test();
    for (int per_head = 0; per_head < 2; ++per_head) {
        paged_problem p;
        paged_fixture_ex(&p, R35A_DTYPE_BF16, 0, 0, 0, R35A_DTYPE_INT8, per_head);
        r35a_plan *plan = NULL;
        assert_int_equal(r35a_paged_attention_plan(g_ctx, &p.desc, &plan), R35A_OK);
        const r35a_paged_attention_args good = paged_args(&p);
        const float bad_values[5] = {0.0f, -0.0f, -1.0f, NAN, INFINITY};
        const int32_t n = per_head ? 2 : 1;
        for (int which = 0; which < 2; ++which) {
            for (int32_t g = 0; g < n; ++g) {
                for (int b = 0; b < 5; ++b) {
                    float scales[2];
                    memcpy(scales, which ? p.v_scale : p.k_scale, sizeof(float) * (size_t)n);
                    scales[g] = bad_values[b];
                    r35a_paged_attention_args a = good;
                    if (which) {
                        a.v_scale = scales;
                    } else {
                        a.k_scale = scales;
                    }
                    char what[120], field[32];
                    snprintf(field, sizeof field, "%s_scale[%d]", which ? "v" : "k", (int)g);
                    snprintf(what, sizeof what, "%s %s = %g", per_head ? "per head" : "per tensor", field,
                             (double)bad_values[b]);
                    paged_run_expect(what, &p, plan, &a, R35A_ERR_INVALID_DATA, field, NULL);
                }
            }
        }
        /* tiny and large finite scales are valid */
        float tiny[2] = {1e-30f, 1e-30f};
        r35a_paged_attention_args a = good;
        a.v_scale = tiny;
        paged_run_expect(per_head ? "per head v_scale 1e-30 (valid)" : "per tensor v_scale 1e-30 (valid)", &p,
                         plan, &a, R35A_OK, NULL, NULL);
        r35a_plan_destroy(plan);
        paged_problem_free(&p);
    }
    end_test("paged scale data");
}

/* Per-token-head scales are data too: each reached key's K and V scale of every kv head must be
 * finite and > 0; the others (slots past L, unreached pages, the stride gaps: NaN in the fixture)
 * are never read. */
static void test_paged_token_scale_data(void **state)
{
    (void)state;
    begin_test();
    for (int fp8 = 0; fp8 < 2; ++fp8) {
        paged_problem p;
        paged_fixture_ex(&p, R35A_DTYPE_F16, 0, 0, 0, fp8 ? R35A_DTYPE_FP8_E4M3 : R35A_DTYPE_INT8,
                         R35A_KV_SCALE_PER_TOKEN_HEAD);
        r35a_plan *plan = NULL;
        assert_int_equal(r35a_paged_attention_plan(g_ctx, &p.desc, &plan), R35A_OK);
        const r35a_paged_attention_args good = paged_args(&p);
        paged_run_expect("per token-head scales, NaN where no key is reached (valid)", &p, plan, &good, R35A_OK, NULL,
                         NULL);
        const float bad_values[5] = {0.0f, -0.0f, -1.0f, NAN, INFINITY};
        /* reached: key 5 and key 39 (the last) of sequence 0, key 16 (the last) of sequence 1 */
        const int32_t keys[3][2] = {{0, 5}, {0, 39}, {1, 16}};
        for (int which = 0; which < 2; ++which) {
            const size_t elems = which ? p.v_scale_elems : p.k_scale_elems;
            const int64_t *st = which ? p.vs_strides : p.ks_strides;
            float *scales = malloc(sizeof(float) * elems);
            assert_non_null(scales);
            for (int k = 0; k < 3; ++k)
                for (int32_t g = 0; g < 2; ++g)
                    for (int b = 0; b < 5; ++b) {
                        memcpy(scales, which ? p.v_scale : p.k_scale, sizeof(float) * elems);
                        const int32_t s = keys[k][0], j = keys[k][1];
                        const int64_t page = p.block_table[s * p.bt_stride + j / 16], slot = j % 16;
                        scales[page * st[0] + slot * st[1] + g * st[2]] = bad_values[b];
                        r35a_paged_attention_args a = good;
                        if (which)
                            a.v_scale = scales;
                        else
                            a.k_scale = scales;
                        char what[160];
                        snprintf(what, sizeof what, "%s_scale of sequence %d key %d kv head %d = %g",
                                 which ? "v" : "k", (int)s, (int)j, (int)g, (double)bad_values[b]);
                        paged_run_expect(what, &p, plan, &a, R35A_ERR_INVALID_DATA, which ? "v_scale[" : "k_scale[",
                                         "paged_attention_args.");
                    }
            /* not reached: slot 17 of sequence 1's second page (past L = 17) */
            memcpy(scales, which ? p.v_scale : p.k_scale, sizeof(float) * elems);
            const int64_t page = p.block_table[1 * p.bt_stride + 1];
            scales[page * st[0] + 1 * st[1]] = -1.0f;
            r35a_paged_attention_args a = good;
            if (which)
                a.v_scale = scales;
            else
                a.k_scale = scales;
            paged_run_expect("a negative scale of a slot past L (not read)", &p, plan, &a, R35A_OK, NULL, NULL);
            free(scales);
        }
        r35a_plan_destroy(plan);
        paged_problem_free(&p);
    }
    end_test("paged per-token-head scale data");
}

static void test_paged_data(void **state)
{
    (void)state;
    begin_test();
    paged_problem p;
    paged_fixture(&p, R35A_DTYPE_F16, 0, 0);
    r35a_plan *plan = NULL;
    assert_int_equal(r35a_paged_attention_plan(g_ctx, &p.desc, &plan), R35A_OK);
    const r35a_paged_attention_args good = paged_args(&p);
    r35a_paged_attention_args a = good;
    int32_t sl[3], qsl[4], bt[9];
    const int32_t bts = p.desc.block_table_stride;

#define RESET()                                                                                     \
    memcpy(sl, p.seq_lens, sizeof sl);                                                              \
    memcpy(qsl, p.query_start_loc, sizeof qsl);                                                     \
    memcpy(bt, p.block_table, sizeof bt);                                                           \
    a = good;                                                                                       \
    a.seq_lens = sl;                                                                                \
    a.query_start_loc = qsl;                                                                        \
    a.block_table = bt;

    /* fixture: seq_lens {40, 17, 0}, query_start_loc {0, 2, 3, 3}, max_query_len 2, max_seq_len 40 */
    RESET();
    sl[1] = -1;
    paged_run_expect("seq_lens[1] = -1", &p, plan, &a, R35A_ERR_INVALID_DATA, "seq_lens[1]", NULL);
    RESET();
    sl[0] = 41;
    paged_run_expect("seq_lens[0] = 41 > max_seq_len 40", &p, plan, &a, R35A_ERR_INVALID_DATA,
                     "seq_lens[0]", NULL);
    RESET();
    sl[0] = 1;
    paged_run_expect("seq_lens[0] = 1 < M 2", &p, plan, &a, R35A_ERR_INVALID_DATA, "seq_lens", NULL);
    RESET();
    sl[2] = 3; /* L > 0 with M = 0 is fine */
    paged_run_expect("seq_lens[2] = 3 with M = 0 (valid)", &p, plan, &a, R35A_OK, NULL, NULL);
    RESET();
    qsl[0] = 1;
    paged_run_expect("query_start_loc[0] = 1", &p, plan, &a, R35A_ERR_INVALID_DATA,
                     "query_start_loc", NULL);
    RESET();
    qsl[1] = 2;
    qsl[2] = 1;
    paged_run_expect("query_start_loc decreasing {0,2,1,3}", &p, plan, &a, R35A_ERR_INVALID_DATA,
                     "query_start_loc", NULL);
    RESET();
    qsl[1] = 1;
    qsl[2] = 2;
    qsl[3] = 2;
    paged_run_expect("query_start_loc[3] = 2 != num_tokens 3", &p, plan, &a, R35A_ERR_INVALID_DATA,
                     "query_start_loc", NULL);
    RESET();
    qsl[1] = 3;
    qsl[2] = 3;
    paged_run_expect("query_start_loc {0,3,3,3}: M 3 > max_query_len 2", &p, plan, &a,
                     R35A_ERR_INVALID_DATA, "query_start_loc|max_query_len", NULL);
    RESET();
    bt[0] = -1;
    paged_run_expect("block_table[0] = -1 (reached)", &p, plan, &a, R35A_ERR_INVALID_DATA,
                     "block_table", NULL);
    RESET();
    bt[bts + 1] = p.desc.num_pages;
    paged_run_expect("block_table[seq 1, page 1] = num_pages (reached)", &p, plan, &a,
                     R35A_ERR_INVALID_DATA, "block_table", NULL);
    RESET();
    bt[2] = INT32_MIN;
    paged_run_expect("block_table[seq 0, page 2] = INT32_MIN (reached)", &p, plan, &a,
                     R35A_ERR_INVALID_DATA, "block_table", NULL);

    /* entries no query reaches may hold anything (test_paged_unreached_garbage_result checks
       the values) */
    RESET();
    bt[bts + 2] = -1;              /* seq 1 (L = 17) has two pages */
    bt[2 * bts + 0] = INT32_MAX;   /* seq 2 is padding */
    bt[2 * bts + 1] = -77;
    bt[2 * bts + 2] = p.desc.num_pages;
    paged_run_expect("invalid block_table entries only where no query reaches (valid)", &p, plan, &a,
                     R35A_OK, NULL, NULL);

    /* a wrong query_start_loc entry that would make garbage entries reachable is named itself, not
       the entry it exposes (seq 2: L = 40 and garbage pages, M 0 -> 1 by the last entry; the same
       through an entry above num_tokens in the middle of the array) */
    RESET();
    sl[2] = 40;
    bt[2 * bts + 0] = INT32_MIN;
    bt[2 * bts + 1] = -1;
    bt[2 * bts + 2] = p.desc.num_pages;
    paged_run_expect("seq 2 with garbage pages and no query (valid)", &p, plan, &a, R35A_OK, NULL, NULL);
    qsl[3] = 4;
    paged_run_expect("query_start_loc[3] = 4 > num_tokens 3, exposing garbage pages", &p, plan, &a,
                     R35A_ERR_INVALID_DATA, NULL, "paged_attention_args.query_start_loc[3]");
    qsl[3] = 3;
    qsl[2] = 4;
    paged_run_expect("query_start_loc[2] = 4 > num_tokens 3, then [3] = 3", &p, plan, &a,
                     R35A_ERR_INVALID_DATA, NULL, "paged_attention_args.query_start_loc[2]");
    r35a_plan_destroy(plan);
    plan = NULL;
    paged_problem_free(&p);

    /* a windowed sequence: entries before the window's first page are never read */
    paged_problem w;
    paged_fixture(&w, R35A_DTYPE_F16, 8, 0); /* seq 0: queries 38, 39 see keys 31..39: pages 1, 2 */
    assert_int_equal(r35a_paged_attention_plan(g_ctx, &w.desc, &plan), R35A_OK);
    const r35a_paged_attention_args wgood = paged_args(&w);
    int32_t wbt[9];
    memcpy(wbt, w.block_table, sizeof wbt);
    a = wgood;
    a.block_table = wbt;
    wbt[0] = -1;
    wbt[bts + 2] = INT32_MIN;
    wbt[2 * bts] = 12345;
    paged_run_expect("windowed: invalid entries only where no query reaches (valid)", &w, plan, &a,
                     R35A_OK, NULL, NULL);
    memcpy(wbt, w.block_table, sizeof wbt);
    wbt[1] = -1;
    paged_run_expect("windowed: block_table[seq 0, page 1] = -1 inside the window", &w, plan, &a,
                     R35A_ERR_INVALID_DATA, "block_table", NULL);
    r35a_plan_destroy(plan);
    paged_problem_free(&w);
#undef RESET
    end_test("paged data");
}

/* Unreached garbage entries: the full oracle comparison, through the harness. */
static void test_paged_unreached_garbage_result(void **state)
{
    (void)state;
    begin_test();
    tu_rng rng;
    tu_rng_init(&rng, tu_case_seed("bad_input_garbage", 0));
    paged_spec s;
    paged_spec_init(&s, R35A_DTYPE_F16, 4, 2, 64, 16);
    s.garbage_unreached = true;
    s.bt_pad = 4;
    s.window = 8;
    paged_spec_add_seq(&s, 40, 2);
    paged_spec_add_seq(&s, 17, 1);
    paged_spec_add_seq(&s, 0, 0);
    expect_true("unreached block-table garbage gives the oracle's result",
                paged_run_case(g_ctx, &s, &rng, "bad_input_garbage", 0));
    end_test("paged unreached garbage");
}

/* ------------------------------------------------------------------------------------------ */
/* varlen args and run-time data                                                                */

static void test_varlen_args_data(void **state)
{
    (void)state;
    begin_test();
    varlen_problem p;
    varlen_fixture(&p);
    r35a_plan *plan = NULL;
    assert_int_equal(r35a_varlen_attention_plan(g_ctx, &p.desc, &plan), R35A_OK);
    const r35a_varlen_attention_args good = varlen_args(&p);
    r35a_varlen_attention_args a;

#define NULL_FIELD(f)                                                                               \
    a = good;                                                                                       \
    a.f = NULL;                                                                                     \
    varlen_run_expect("varlen args." #f " = NULL", &p, plan, &a, R35A_ERR_NULL_POINTER, #f, NULL);
    NULL_FIELD(q)
    NULL_FIELD(k)
    NULL_FIELD(v)
    NULL_FIELD(out)
    NULL_FIELD(cu_seqlens)
#undef NULL_FIELD

    const size_t sizes[] = {0, sizeof a - 1, sizeof a + 8};
    for (int k = 0; k < 3; ++k) {
        char what[100];
        snprintf(what, sizeof what, "varlen args.struct_size = %zu", sizes[k]);
        a = good;
        a.struct_size = sizes[k];
        varlen_run_expect(what, &p, plan, &a, R35A_ERR_STRUCT_SIZE, "struct_size", NULL);
    }
    varlen_run_expect("varlen run, NULL args", &p, plan, NULL, R35A_ERR_NULL_POINTER, NULL, NULL);
    varlen_run_expect("varlen run, NULL plan", &p, NULL, &good, R35A_ERR_NULL_POINTER, NULL, NULL);
    poison_outputs(p.out_alloc, p.out_alloc_bytes);
    expect("varlen run, NULL context",
           r35a_varlen_attention_run(NULL, plan, &good, g_ws, WS_BYTES, NULL), R35A_ERR_NULL_POINTER,
           NULL, NULL);
    expect_nothing_written("varlen run, NULL context", p.out_alloc, p.out_alloc_bytes);

    /* fixture: cu_seqlens {0, 5, 5, 8}, max_seqlen 5 */
    int32_t cu[4];
    struct {
        int32_t v[4];
        const char *what;
        r35a_status want;
    } cases[] = {
        {{1, 5, 5, 8}, "cu_seqlens[0] = 1", R35A_ERR_INVALID_DATA},
        {{0, 5, 4, 8}, "cu_seqlens decreasing {0,5,4,8}", R35A_ERR_INVALID_DATA},
        {{0, 5, 5, 7}, "cu_seqlens[3] = 7 != num_tokens 8", R35A_ERR_INVALID_DATA},
        {{0, 5, 5, 9}, "cu_seqlens[3] = 9 != num_tokens 8", R35A_ERR_INVALID_DATA},
        {{0, 6, 6, 8}, "cu_seqlens {0,6,6,8}: segment 6 > max_seqlen 5", R35A_ERR_INVALID_DATA},
        {{0, 3, 8, 8}, "cu_seqlens {0,3,8,8}: segment 5 = max_seqlen (valid)", R35A_OK},
        {{0, 0, 3, 8}, "cu_seqlens {0,0,3,8} (valid)", R35A_OK},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
        memcpy(cu, cases[k].v, sizeof cu);
        a = good;
        a.cu_seqlens = cu;
        varlen_run_expect(cases[k].what, &p, plan, &a, cases[k].want,
                          cases[k].want == R35A_OK ? NULL : "cu_seqlens", NULL);
    }
    varlen_run_expect("varlen run, valid args", &p, plan, &good, R35A_OK, NULL, NULL);
    static const float one[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    a = good;
    a.sinks = one;
    varlen_run_expect("varlen args.sinks set with use_sinks = 0", &p, plan, &a, INV, "sinks", NULL);
    a = good;
    a.struct_size = offsetof(r35a_varlen_attention_args, sinks);
    a.sinks = (const float *)(uintptr_t)0x10; /* past 0.1.0's struct: not read */
    varlen_run_expect("varlen args 0.1.0 struct_size, garbage past it (valid)", &p, plan, &a, R35A_OK, NULL, NULL);
    r35a_plan_destroy(plan);
    varlen_problem_free(&p);

    varlen_problem ps;
    varlen_fixture_ex(&ps, 1);
    assert_int_equal(r35a_varlen_attention_plan(g_ctx, &ps.desc, &plan), R35A_OK);
    a = varlen_args(&ps);
    a.sinks = NULL;
    varlen_run_expect("varlen args.sinks = NULL with use_sinks = 1", &ps, plan, &a, R35A_ERR_NULL_POINTER, "sinks",
                      NULL);
    a = varlen_args(&ps);
    varlen_run_expect("varlen run with sinks, valid args", &ps, plan, &a, R35A_OK, NULL, NULL);
    r35a_plan_destroy(plan);
    varlen_problem_free(&ps);
    end_test("varlen args and data");
}

/* ------------------------------------------------------------------------------------------ */
/* plans, workspace, contexts                                                                   */

static void test_plan_mismatch_and_workspace(void **state)
{
    (void)state;
    begin_test();
    paged_problem pp;
    varlen_problem vp;
    paged_fixture(&pp, R35A_DTYPE_F16, 0, 0);
    varlen_fixture(&vp);
    r35a_plan *paged_plan = NULL, *varlen_plan = NULL;
    assert_int_equal(r35a_paged_attention_plan(g_ctx, &pp.desc, &paged_plan), R35A_OK);
    assert_int_equal(r35a_varlen_attention_plan(g_ctx, &vp.desc, &varlen_plan), R35A_OK);
    const r35a_paged_attention_args pa = paged_args(&pp);
    const r35a_varlen_attention_args va = varlen_args(&vp);

    varlen_run_expect("paged plan passed to varlen run", &vp, paged_plan, &va,
                      R35A_ERR_PLAN_MISMATCH, NULL, NULL);
    paged_run_expect("varlen plan passed to paged run", &pp, varlen_plan, &pa,
                     R35A_ERR_PLAN_MISMATCH, NULL, NULL);

    /* a plan made by another context */
    r35a_context_options opt;
    r35a_context_options_init(&opt);
    opt.backend = R35A_BACKEND_REFERENCE;
    r35a_context *other = NULL;
    assert_int_equal(r35a_context_create(&opt, &other), R35A_OK);
    r35a_plan *foreign = NULL;
    assert_int_equal(r35a_paged_attention_plan(other, &pp.desc, &foreign), R35A_OK);
    paged_run_expect("plan of another context", &pp, foreign, &pa, R35A_ERR_PLAN_MISMATCH, NULL, NULL);
    r35a_plan_destroy(foreign);
    r35a_context_destroy(other);

    /* workspace below the plan's size */
    r35a_plan_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    assert_int_equal(r35a_plan_get_info(paged_plan, &info), R35A_OK);
    if (info.workspace_bytes > 0) {
        uint8_t *ws = tu_alloc(info.workspace_bytes);
        tu_poison(ws, info.workspace_bytes);
        tu_poison(pp.out_alloc, pp.out_alloc_bytes);
        r35a_status st = r35a_paged_attention_run(g_ctx, paged_plan, &pa, ws, info.workspace_bytes - 1,
                                                  NULL);
        expect("workspace_bytes one below the plan's", st, R35A_ERR_WORKSPACE_TOO_SMALL, "workspace",
               NULL);
        expect_true("workspace too small: output untouched",
                    tu_first_unpoisoned(pp.out_alloc, pp.out_alloc_bytes) == (size_t)-1);
        expect_true("workspace too small: workspace untouched",
                    tu_first_unpoisoned(ws, info.workspace_bytes) == (size_t)-1);
        tu_free(ws);
    } else {
        printf("[test_bad_input] skipped R35A_ERR_WORKSPACE_TOO_SMALL: the %s plan needs no "
               "workspace (workspace_bytes 0)\n", info.implementation);
        /* NULL workspace is then fine */
        tu_poison(pp.out_alloc, pp.out_alloc_bytes);
        expect("NULL workspace with workspace_bytes 0",
               r35a_paged_attention_run(g_ctx, paged_plan, &pa, NULL, 0, NULL), R35A_OK, NULL, NULL);
    }

    /* plan info */
    expect("plan_get_info, NULL plan", r35a_plan_get_info(NULL, &info), R35A_ERR_NULL_POINTER, NULL,
           NULL);
    expect("plan_get_info, NULL info", r35a_plan_get_info(paged_plan, NULL), R35A_ERR_NULL_POINTER,
           NULL, NULL);
    const size_t sizes[] = {0, sizeof info - 1, sizeof info + 8};
    for (int k = 0; k < 3; ++k) {
        char what[100];
        snprintf(what, sizeof what, "plan_info.struct_size = %zu", sizes[k]);
        info.struct_size = sizes[k];
        expect(what, r35a_plan_get_info(paged_plan, &info), R35A_ERR_STRUCT_SIZE, "struct_size", NULL);
    }
    r35a_plan_destroy(paged_plan);
    r35a_plan_destroy(varlen_plan);
    paged_problem_free(&pp);
    varlen_problem_free(&vp);
    end_test("plan mismatch and workspace");
}

static void test_context_errors(void **state)
{
    (void)state;
    begin_test();
    static int sentinel;
    r35a_context_options opt;
    r35a_context *ctx;

    const int bad_backends[] = {5, -1, 3};
    for (int k = 0; k < 3; ++k) {
        char what[100];
        snprintf(what, sizeof what, "context_create backend = %d", bad_backends[k]);
        r35a_context_options_init(&opt);
        opt.backend = (r35a_backend)bad_backends[k];
        ctx = (r35a_context *)(void *)&sentinel;
        expect(what, r35a_context_create(&opt, &ctx), INV, "backend", NULL);
        expect_true("context_create failure sets *context NULL", ctx == NULL);
    }

    r35a_context_options_init(&opt);
    opt.backend = R35A_BACKEND_GPU;
    ctx = (r35a_context *)(void *)&sentinel;
    r35a_status st = r35a_context_create(&opt, &ctx);
    if (st == R35A_OK) {
        printf("[test_bad_input] a GPU backend is available here; R35A_ERR_BACKEND_UNAVAILABLE not "
               "tested\n");
        r35a_context_destroy(ctx);
    } else {
        expect("context_create backend = GPU without a GPU", st, R35A_ERR_BACKEND_UNAVAILABLE, NULL,
               NULL);
        printf("[test_bad_input] GPU backend unavailable: \"%s\"\n", r35a_last_error_detail());
        expect_true("GPU unavailable: *context NULL", ctx == NULL);
    }

    const size_t sizes[] = {0, sizeof opt - 1, sizeof opt + 8};
    for (int k = 0; k < 3; ++k) {
        char what[100];
        snprintf(what, sizeof what, "context_options.struct_size = %zu", sizes[k]);
        r35a_context_options_init(&opt);
        opt.struct_size = sizes[k];
        ctx = (r35a_context *)(void *)&sentinel;
        expect(what, r35a_context_create(&opt, &ctx), R35A_ERR_STRUCT_SIZE, "struct_size", NULL);
        expect_true("context_create failure sets *context NULL", ctx == NULL);
    }
    r35a_context_options_init(&opt);
    expect("context_create, NULL context pointer", r35a_context_create(&opt, NULL),
           R35A_ERR_NULL_POINTER, NULL, NULL);

    r35a_context_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    expect("context_get_info, NULL context", r35a_context_get_info(NULL, &info),
           R35A_ERR_NULL_POINTER, NULL, NULL);
    expect("context_get_info, NULL info", r35a_context_get_info(g_ctx, NULL), R35A_ERR_NULL_POINTER,
           NULL, NULL);
    const size_t isizes[] = {0, sizeof info - 1, sizeof info + 8};
    for (int k = 0; k < 3; ++k) {
        char what[100];
        snprintf(what, sizeof what, "context_info.struct_size = %zu", isizes[k]);
        info.struct_size = isizes[k];
        expect(what, r35a_context_get_info(g_ctx, &info), R35A_ERR_STRUCT_SIZE, "struct_size", NULL);
    }
    /* a successful call clears the detail */
    info.struct_size = sizeof info;
    expect("context_get_info after failures", r35a_context_get_info(g_ctx, &info), R35A_OK, NULL,
           NULL);
    end_test("context errors");
}

/* ------------------------------------------------------------------------------------------ */

static int group_setup(void **state)
{
    (void)state;
    r35a_context_options opt;
    r35a_context_options_init(&opt);
    opt.backend = R35A_BACKEND_REFERENCE; /* run-time data checks need host-visible metadata */
    return r35a_context_create(&opt, &g_ctx) == R35A_OK ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    r35a_context_destroy(g_ctx);
    return 0;
}

int main(void)
{
    tu_begin("test_bad_input");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paged_desc),
        cmocka_unit_test(test_varlen_desc),
        cmocka_unit_test(test_paged_args),
        cmocka_unit_test(test_paged_data),
        cmocka_unit_test(test_paged_scale_data),
        cmocka_unit_test(test_paged_token_scale_data),
        cmocka_unit_test(test_paged_unreached_garbage_result),
        cmocka_unit_test(test_varlen_args_data),
        cmocka_unit_test(test_plan_mismatch_and_workspace),
        cmocka_unit_test(test_context_errors),
    };
    int rc = cmocka_run_group_tests(tests, group_setup, group_teardown);
    printf("[test_bad_input] %d expectations checked\n", g_checked);
    return rc;
}
