/*
 * test_guard.c - determinism and no-write guarantees.
 *
 *   - Repeated runs are bit-identical: the same plan again, a new plan, a new context, another
 *     output allocation; and a sequence's rows do not depend on the rest of its batch.
 *   - On every run-time error (each NULL, each struct_size, plan/context/op mismatches, ALiBi
 *     mismatches, every kind of bad metadata, including a fault in the last sequence only) the
 *     call returns the documented status with a detail naming the field, and the output buffer,
 *     its guard bytes, the workspace and its guards are untouched; inputs are never modified.
 *   - A failed plan leaves *plan NULL; a success after a failure clears the detail.
 *   - On success nothing is written outside the owned rows (gaps and guards stay poisoned) and
 *     nothing at all into a workspace the plan did not ask for.
 */
#include "harness.h"
#include "rel_common.h"
#include "test_util.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static r35a_context *g_ctx, *g_other_ctx;

/* ------------------------------------------------------------------------------------------ */
/* problems                                                                                     */

static void paged_specs(paged_spec *s, int *count)
{
    int n = 0;
    paged_spec_init(&s[n], R35A_DTYPE_F16, 8, 2, 64, 16); /* batched decode with padding */
    paged_spec_add_seq(&s[n], 100, 1);
    paged_spec_add_seq(&s[n], 0, 0);
    paged_spec_add_seq(&s[n], 17, 1);
    n++;
    paged_spec_init(&s[n], R35A_DTYPE_BF16, 4, 1, 128, 32); /* speculative decode, window */
    paged_spec_add_seq(&s[n], 70, 8);
    paged_spec_add_seq(&s[n], 9, 4);
    s[n].window = 20;
    s[n].garbage_unreached = true;
    n++;
    paged_spec_init(&s[n], R35A_DTYPE_F16, 4, 4, 64, 16); /* chunked prefill, ALiBi, softcap, padding */
    paged_spec_add_seq(&s[n], 45, 30);
    paged_spec_add_seq(&s[n], 12, 2);
    s[n].use_alibi = 1;
    s[n].logit_softcap = 20.0f;
    s[n].o_head_pad = 5;
    s[n].o_token_pad = 3;
    s[n].q_token_pad = 7;
    s[n].k_layout.nhd = true;
    s[n].k_layout.pad[0] = 2;
    s[n].shuffle_pages = true;
    n++;
    paged_spec_init(&s[n], R35A_DTYPE_F32, 3, 1, 24, 5); /* f32, odd sizes */
    paged_spec_add_seq(&s[n], 23, 3);
    n++;
    *count = n;
}

static void varlen_specs(varlen_spec *s, int *count)
{
    int n = 0;
    varlen_spec_init(&s[n], R35A_DTYPE_F16, 4, 4, 64);
    varlen_spec_add_segment(&s[n], 30);
    varlen_spec_add_segment(&s[n], 0);
    varlen_spec_add_segment(&s[n], 9);
    s[n].head_pad[3] = 4;
    n++;
    varlen_spec_init(&s[n], R35A_DTYPE_BF16, 2, 2, 80);
    varlen_spec_add_segment(&s[n], 21);
    s[n].layout = VARLEN_FUSED;
    s[n].token_pad[0] = 8;
    n++;
    varlen_spec_init(&s[n], R35A_DTYPE_F32, 4, 2, 32);
    varlen_spec_add_segment(&s[n], 19);
    varlen_spec_add_segment(&s[n], 6);
    s[n].causal = 1;
    n++;
    *count = n;
}

static void paged_args_of(const paged_problem *p, uint8_t *out_alloc, r35a_paged_attention_args *a)
{
    memset(a, 0, sizeof *a);
    a->struct_size = sizeof *a;
    a->q = p->q;
    a->k_cache = p->k;
    a->v_cache = p->v;
    a->out = out_alloc + p->out_guard_bytes;
    a->seq_lens = p->seq_lens;
    a->query_start_loc = p->query_start_loc;
    a->block_table = p->block_table;
    a->alibi_slopes = p->alibi;
}

static void varlen_args_of(const varlen_problem *p, uint8_t *out_alloc, r35a_varlen_attention_args *a)
{
    memset(a, 0, sizeof *a);
    a->struct_size = sizeof *a;
    a->q = p->q;
    a->k = p->k;
    a->v = p->v;
    a->out = out_alloc + p->out_guard_bytes;
    a->cu_seqlens = p->cu_seqlens;
}

static uint64_t paged_inputs_hash(const paged_problem *p)
{
    uint64_t h = rel_hash(p->q, p->q_bytes, 1);
    h = rel_hash(p->k, p->k_bytes, h);
    h = rel_hash(p->v, p->v_bytes, h);
    h = rel_hash(p->seq_lens, sizeof(int32_t) * (size_t)p->desc.num_seqs, h);
    h = rel_hash(p->query_start_loc, sizeof(int32_t) * ((size_t)p->desc.num_seqs + 1), h);
    h = rel_hash(p->block_table, sizeof(int32_t) * p->bt_entries, h);
    if (p->alibi)
        h = rel_hash(p->alibi, sizeof(float) * (size_t)p->desc.num_q_heads, h);
    return h;
}

static uint64_t varlen_inputs_hash(const varlen_problem *p)
{
    uint64_t h = p->qkv ? rel_hash(p->qkv, p->qkv_bytes, 1) : rel_hash(p->q, p->q_bytes, 1);
    if (!p->qkv) {
        h = rel_hash(p->k, p->k_bytes, h);
        h = rel_hash(p->v, p->v_bytes, h);
    }
    return rel_hash(p->cu_seqlens, sizeof(int32_t) * ((size_t)p->desc.num_segments + 1), h);
}

/* ------------------------------------------------------------------------------------------ */
/* 1. determinism                                                                               */

static void test_repeat_bit_identical(void **state)
{
    (void)state;
    tu_rng rng;
    tu_rng_init(&rng, tu_case_seed("determinism", 0));
    paged_spec ps[8];
    int np;
    paged_specs(ps, &np);
    for (int i = 0; i < np; ++i) {
        paged_problem p;
        assert_int_equal(paged_problem_init(&p, &ps[i], &rng), 0);
        char label[64];
        snprintf(label, sizeof label, "determinism paged %d", i);
        assert_true(paged_problem_check(g_ctx, &p, NULL, tu_mem_host(), label)); /* right, first */
        uint8_t *first = malloc(p.out_alloc_bytes);
        memcpy(first, p.out_alloc, p.out_alloc_bytes);
        uint8_t *other = malloc(p.out_alloc_bytes + 64);
        r35a_plan *plan;
        assert_int_equal(r35a_paged_attention_plan(g_ctx, &p.desc, &plan), R35A_OK);
        r35a_paged_attention_args a;
        for (int rep = 0; rep < 4; ++rep) {
            /* rep 0, 1: this plan; 2: another context's plan; 3: another output allocation, shifted */
            r35a_context *ctx = rep == 2 ? g_other_ctx : g_ctx;
            r35a_plan *use = plan, *fresh = NULL;
            if (rep == 2) {
                assert_int_equal(r35a_paged_attention_plan(ctx, &p.desc, &fresh), R35A_OK);
                use = fresh;
            }
            uint8_t *out = rep == 3 ? other + 16 : p.out_alloc;
            memset(out, 0xFF, p.out_alloc_bytes);
            paged_args_of(&p, out, &a);
            assert_int_equal(r35a_paged_attention_run(ctx, use, &a, NULL, 0, NULL), R35A_OK);
            if (memcmp(out, first, p.out_alloc_bytes) != 0)
                fail_msg("%s: repetition %d is not bit-identical to the first run", label, rep);
            r35a_plan_destroy(fresh);
        }
        r35a_plan_destroy(plan);
        free(first);
        free(other);
        paged_problem_free(&p);
    }
    varlen_spec vs[4];
    int nv;
    varlen_specs(vs, &nv);
    for (int i = 0; i < nv; ++i) {
        varlen_problem p;
        assert_int_equal(varlen_problem_init(&p, &vs[i], &rng), 0);
        char label[64];
        snprintf(label, sizeof label, "determinism varlen %d", i);
        assert_true(varlen_problem_check(g_ctx, &p, NULL, tu_mem_host(), label));
        uint8_t *first = malloc(p.out_alloc_bytes);
        memcpy(first, p.out_alloc, p.out_alloc_bytes);
        r35a_plan *plan;
        r35a_varlen_attention_args a;
        for (int rep = 0; rep < 3; ++rep) {
            r35a_context *ctx = rep == 2 ? g_other_ctx : g_ctx;
            assert_int_equal(r35a_varlen_attention_plan(ctx, &p.desc, &plan), R35A_OK);
            memset(p.out_alloc, 0xFF, p.out_alloc_bytes);
            varlen_args_of(&p, p.out_alloc, &a);
            assert_int_equal(r35a_varlen_attention_run(ctx, plan, &a, NULL, 0, NULL), R35A_OK);
            if (memcmp(p.out_alloc, first, p.out_alloc_bytes) != 0)
                fail_msg("%s: repetition %d is not bit-identical to the first run", label, rep);
            r35a_plan_destroy(plan);
        }
        free(first);
        varlen_problem_free(&p);
    }
}

/* A sequence's rows alone and inside a batch: the same bytes (batch invariance). */
static void test_batch_invariance(void **state)
{
    (void)state;
    tu_rng rng;
    tu_rng_init(&rng, tu_case_seed("batch_invariance", 0));
    paged_spec batch;
    paged_spec_init(&batch, R35A_DTYPE_F16, 8, 2, 64, 16);
    const int32_t L[5] = {90, 1, 33, 64, 7}, M[5] = {1, 1, 4, 8, 7};
    for (int i = 0; i < 5; ++i)
        paged_spec_add_seq(&batch, L[i], M[i]);
    batch.nan_fill = true;
    paged_problem p;
    assert_int_equal(paged_problem_init(&p, &batch, &rng), 0);
    assert_true(paged_problem_check(g_ctx, &p, NULL, tu_mem_host(), "batch_invariance"));
    /* each sequence alone: the same desc with num_seqs = 1, its own metadata row */
    for (int s = 0; s < 5; ++s) {
        r35a_paged_attention_desc d = p.desc;
        d.num_seqs = 1;
        d.num_tokens = M[s];
        int32_t qsl[2] = {0, M[s]};
        r35a_plan *plan;
        assert_int_equal(r35a_paged_attention_plan(g_ctx, &d, &plan), R35A_OK);
        size_t es = tu_dtype_size(d.dtype);
        size_t row_bytes = (size_t)d.o_token_stride * es;
        uint8_t *out = malloc(row_bytes * (size_t)M[s] + 1);
        memset(out, 0xFF, row_bytes * (size_t)M[s] + 1);
        r35a_paged_attention_args a;
        paged_args_of(&p, p.out_alloc, &a);
        a.q = (const uint8_t *)p.q + (size_t)p.query_start_loc[s] * (size_t)d.q_token_stride * es;
        a.out = out;
        a.seq_lens = &p.seq_lens[s];
        a.query_start_loc = qsl;
        a.block_table = p.block_table + (size_t)s * (size_t)d.block_table_stride;
        assert_int_equal(r35a_paged_attention_run(g_ctx, plan, &a, NULL, 0, NULL), R35A_OK);
        const uint8_t *in_batch = p.out_alloc + p.out_guard_bytes + (size_t)p.query_start_loc[s] * row_bytes;
        if (memcmp(out, in_batch, row_bytes * (size_t)M[s]) != 0)
            fail_msg("sequence %d alone differs from the same sequence inside the batch", s);
        r35a_plan_destroy(plan);
        free(out);
    }
    paged_problem_free(&p);
}

/* ------------------------------------------------------------------------------------------ */
/* 2. nothing written on errors                                                                 */

typedef struct guard_env {
    rel_guarded ws;               /* a workspace the caller offers */
    uint64_t ws_hash;
} guard_env;

/* Checks one failing call's aftermath. */
static void expect_failure(const char *label, r35a_status got, r35a_status want, const char *prefix,
                           const uint8_t *out_alloc, size_t out_alloc_bytes, const guard_env *g,
                           uint64_t inputs_before, uint64_t inputs_after)
{
    const char *detail = r35a_last_error_detail();
    if (got != want)
        fail_msg("%s: got %s (\"%s\"), want %s", label, r35a_status_string(got), detail, r35a_status_string(want));
    if (strncmp(detail, prefix, strlen(prefix)) != 0)
        fail_msg("%s: detail \"%s\" does not start with \"%s\"", label, detail, prefix);
    size_t at = tu_first_unpoisoned(out_alloc, out_alloc_bytes);
    if (at != (size_t)-1)
        fail_msg("%s: byte %zu of the output allocation (guards included) was written", label, at);
    if (rel_guarded_hash(&g->ws) != g->ws_hash || !rel_guards_intact(&g->ws))
        fail_msg("%s: the workspace or its guards were written", label);
    if (inputs_before != inputs_after)
        fail_msg("%s: an input was modified", label);
}

typedef enum paged_fault {
    PF_NULL_CONTEXT,
    PF_NULL_PLAN,
    PF_OTHER_CONTEXT,
    PF_OTHER_OP,
    PF_NULL_ARGS,
    PF_SIZE_ZERO,
    PF_SIZE_SMALL,
    PF_SIZE_BIG,
    PF_NULL_Q,
    PF_NULL_K,
    PF_NULL_V,
    PF_NULL_OUT,
    PF_NULL_SEQ_LENS,
    PF_NULL_QSL,
    PF_NULL_BT,
    PF_ALIBI_MISMATCH,
    PF_QSL0,
    PF_QSL_DECREASES,
    PF_M_ABOVE_MAX,
    PF_M_ABOVE_L,
    PF_L_NEGATIVE,
    PF_L_ABOVE_MAX,
    PF_QSL_LAST,
    PF_BT_FIRST_REACHED,
    PF_BT_LAST_REACHED,
    PF_BT_NUM_PAGES,
    PF_BT_LAST_SEQ,
    PF_COUNT
} paged_fault;

static const char *const paged_fault_names[PF_COUNT] = {
    "NULL context",         "NULL plan",         "another context's plan", "a varlen plan",
    "NULL args",            "struct_size 0",     "struct_size - 4",        "struct_size + 8",
    "NULL q",               "NULL k_cache",      "NULL v_cache",           "NULL out",
    "NULL seq_lens",        "NULL query_start_loc", "NULL block_table",    "ALiBi pointer mismatch",
    "query_start_loc[0] = 1", "query_start_loc decreases", "M > max_query_len", "M > L",
    "seq_lens < 0",         "seq_lens > max_seq_len", "query_start_loc[n] != num_tokens",
    "block_table: first reached page -1", "block_table: last reached page INT32_MAX",
    "block_table: page = num_pages", "block_table: fault in the last sequence only"};

static void test_paged_errors_write_nothing(void **state)
{
    (void)state;
    tu_rng rng;
    tu_rng_init(&rng, tu_case_seed("paged_errors", 0));
    paged_spec ps[8];
    int np;
    paged_specs(ps, &np);
    r35a_varlen_attention_desc vd;
    r35a_varlen_attention_desc_init(&vd, R35A_DTYPE_F16, 1, 1, 1, 1, 1, 16);
    r35a_plan *varlen_plan;
    assert_int_equal(r35a_varlen_attention_plan(g_ctx, &vd, &varlen_plan), R35A_OK);
    int calls = 0;
    for (int i = 0; i < np; ++i) {
        paged_problem p;
        assert_int_equal(paged_problem_init(&p, &ps[i], &rng), 0);
        const r35a_paged_attention_desc *d = &p.desc;
        r35a_plan *plan, *other_plan;
        assert_int_equal(r35a_paged_attention_plan(g_ctx, d, &plan), R35A_OK);
        assert_int_equal(r35a_paged_attention_plan(g_other_ctx, d, &other_plan), R35A_OK);
        guard_env g;
        rel_guarded_alloc(&g.ws, 4096, 0x5Au);
        g.ws_hash = rel_guarded_hash(&g.ws);
        /* a good run first: its output is the reference for the runs after each failure */
        r35a_paged_attention_args a;
        paged_args_of(&p, p.out_alloc, &a);
        tu_poison(p.out_alloc, p.out_alloc_bytes);
        assert_int_equal(r35a_paged_attention_run(g_ctx, plan, &a, g.ws.payload, g.ws.bytes, NULL), R35A_OK);
        uint8_t *good = malloc(p.out_alloc_bytes);
        memcpy(good, p.out_alloc, p.out_alloc_bytes);
        if (rel_guarded_hash(&g.ws) != g.ws_hash)
            fail_msg("paged %d: a plan with workspace_bytes 0 wrote the offered workspace", i);

        /* metadata copies the faults edit */
        int32_t ns = d->num_seqs;
        int32_t *sl = malloc(sizeof(int32_t) * (size_t)ns), *qsl = malloc(sizeof(int32_t) * ((size_t)ns + 1));
        int32_t *bt = malloc(sizeof(int32_t) * p.bt_entries);
        uint64_t before = paged_inputs_hash(&p);
        for (int f = 0; f < PF_COUNT; ++f) {
            memcpy(sl, p.seq_lens, sizeof(int32_t) * (size_t)ns);
            memcpy(qsl, p.query_start_loc, sizeof(int32_t) * ((size_t)ns + 1));
            memcpy(bt, p.block_table, sizeof(int32_t) * p.bt_entries);
            paged_args_of(&p, p.out_alloc, &a);
            a.seq_lens = sl;
            a.query_start_loc = qsl;
            a.block_table = bt;
            r35a_context *ctx = g_ctx;
            const r35a_plan *use = plan;
            const r35a_paged_attention_args *pa = &a;
            r35a_status want = R35A_ERR_INVALID_DATA;
            const char *prefix = "paged_attention_args.";
            /* the sequence the metadata faults hit: the first with a query (last one for BT_LAST_SEQ) */
            int32_t s = 0;
            while (s < ns - 1 && qsl[s + 1] == qsl[s])
                s++;
            int32_t last = ns - 1;
            while (last > 0 && qsl[last + 1] == qsl[last])
                last--;
            int32_t Ls = sl[s], Ms = qsl[s + 1] - qsl[s], B = d->page_size;
            int64_t lo = d->window > 0 ? (int64_t)Ls - Ms - d->window + 1 : 0;
            lo = lo < 0 ? 0 : lo;
            switch ((paged_fault)f) {
            case PF_NULL_CONTEXT: ctx = NULL; want = R35A_ERR_NULL_POINTER; prefix = "context"; break;
            case PF_NULL_PLAN: use = NULL; want = R35A_ERR_NULL_POINTER; prefix = "plan"; break;
            case PF_OTHER_CONTEXT: use = other_plan; want = R35A_ERR_PLAN_MISMATCH; prefix = "plan"; break;
            case PF_OTHER_OP: use = varlen_plan; want = R35A_ERR_PLAN_MISMATCH; prefix = "plan"; break;
            case PF_NULL_ARGS: pa = NULL; want = R35A_ERR_NULL_POINTER; prefix = "paged_attention_args"; break;
            case PF_SIZE_ZERO: a.struct_size = 0; want = R35A_ERR_STRUCT_SIZE; prefix = "paged_attention_args.struct_size"; break;
            case PF_SIZE_SMALL: a.struct_size -= 4; want = R35A_ERR_STRUCT_SIZE; prefix = "paged_attention_args.struct_size"; break;
            case PF_SIZE_BIG: a.struct_size += 8; want = R35A_ERR_STRUCT_SIZE; prefix = "paged_attention_args.struct_size"; break;
            case PF_NULL_Q: a.q = NULL; want = R35A_ERR_NULL_POINTER; prefix = "paged_attention_args.q"; break;
            case PF_NULL_K: a.k_cache = NULL; want = R35A_ERR_NULL_POINTER; prefix = "paged_attention_args.k_cache"; break;
            case PF_NULL_V: a.v_cache = NULL; want = R35A_ERR_NULL_POINTER; prefix = "paged_attention_args.v_cache"; break;
            case PF_NULL_OUT: a.out = NULL; want = R35A_ERR_NULL_POINTER; prefix = "paged_attention_args.out"; break;
            case PF_NULL_SEQ_LENS: a.seq_lens = NULL; want = R35A_ERR_NULL_POINTER; prefix = "paged_attention_args.seq_lens"; break;
            case PF_NULL_QSL: a.query_start_loc = NULL; want = R35A_ERR_NULL_POINTER; prefix = "paged_attention_args.query_start_loc"; break;
            case PF_NULL_BT: a.block_table = NULL; want = R35A_ERR_NULL_POINTER; prefix = "paged_attention_args.block_table"; break;
            case PF_ALIBI_MISMATCH:
                prefix = "paged_attention_args.alibi_slopes";
                if (d->use_alibi) {
                    a.alibi_slopes = NULL;
                    want = R35A_ERR_NULL_POINTER;
                } else {
                    static const float slopes[64] = {0.5f};
                    a.alibi_slopes = slopes;
                    want = R35A_ERR_INVALID_ARGUMENT;
                }
                break;
            case PF_QSL0: qsl[0] = 1; prefix = "paged_attention_args.query_start_loc"; break;
            case PF_QSL_DECREASES: qsl[s + 1] = qsl[s] - 1; prefix = "paged_attention_args.query_start_loc"; break;
            case PF_M_ABOVE_MAX:
                for (int32_t k = s + 1; k <= ns; ++k)
                    qsl[k] += d->max_query_len + 1 - Ms;
                prefix = "paged_attention_args.query_start_loc";
                break;
            case PF_M_ABOVE_L: sl[s] = Ms - 1; prefix = "paged_attention_args.seq_lens"; break;
            case PF_L_NEGATIVE: sl[s] = -5; prefix = "paged_attention_args.seq_lens"; break;
            case PF_L_ABOVE_MAX: sl[s] = d->max_seq_len + 1; prefix = "paged_attention_args.seq_lens"; break;
            case PF_QSL_LAST: qsl[ns] += 1; prefix = "paged_attention_args.query_start_loc"; break;
            case PF_BT_FIRST_REACHED: bt[(size_t)s * (size_t)d->block_table_stride + (size_t)(lo / B)] = -1; prefix = "paged_attention_args.block_table"; break;
            case PF_BT_LAST_REACHED: bt[(size_t)s * (size_t)d->block_table_stride + (size_t)((Ls - 1) / B)] = INT32_MAX; prefix = "paged_attention_args.block_table"; break;
            case PF_BT_NUM_PAGES: bt[(size_t)s * (size_t)d->block_table_stride + (size_t)((Ls - 1) / B)] = d->num_pages; prefix = "paged_attention_args.block_table"; break;
            case PF_BT_LAST_SEQ: bt[(size_t)last * (size_t)d->block_table_stride + (size_t)((sl[last] - 1) / B)] = -7; prefix = "paged_attention_args.block_table"; break;
            case PF_COUNT: break;
            }
            char label[160];
            snprintf(label, sizeof label, "paged problem %d, %s", i, paged_fault_names[f]);
            tu_poison(p.out_alloc, p.out_alloc_bytes);
            r35a_status st = r35a_paged_attention_run(ctx, use, pa, g.ws.payload, g.ws.bytes, NULL);
            expect_failure(label, st, want, prefix, p.out_alloc, p.out_alloc_bytes, &g, before, paged_inputs_hash(&p));
            calls++;
            /* the next good call succeeds, clears the detail and gives the same bytes */
            paged_args_of(&p, p.out_alloc, &a);
            tu_poison(p.out_alloc, p.out_alloc_bytes);
            assert_int_equal(r35a_paged_attention_run(g_ctx, plan, &a, NULL, 0, NULL), R35A_OK);
            assert_string_equal(r35a_last_error_detail(), "");
            if (memcmp(p.out_alloc, good, p.out_alloc_bytes) != 0)
                fail_msg("%s: the good run after it differs", label);
        }
        free(sl);
        free(qsl);
        free(bt);
        free(good);
        rel_guarded_free(&g.ws);
        r35a_plan_destroy(plan);
        r35a_plan_destroy(other_plan);
        paged_problem_free(&p);
    }
    r35a_plan_destroy(varlen_plan);
    printf("  paged: %d failing calls, each wrote nothing (output, guards, workspace) and named its field\n", calls);
}

static void test_varlen_errors_write_nothing(void **state)
{
    (void)state;
    tu_rng rng;
    tu_rng_init(&rng, tu_case_seed("varlen_errors", 0));
    varlen_spec vs[4];
    int nv;
    varlen_specs(vs, &nv);
    r35a_paged_attention_desc pd;
    r35a_paged_attention_desc_init(&pd, R35A_DTYPE_F16, 1, 1, 1, 1, 1, 1, 16, 16, 1);
    r35a_plan *paged_plan;
    assert_int_equal(r35a_paged_attention_plan(g_ctx, &pd, &paged_plan), R35A_OK);
    int calls = 0;
    enum { F_CTX, F_PLAN, F_OTHER_CTX, F_OTHER_OP, F_ARGS, F_SIZE, F_Q, F_K, F_V, F_OUT, F_CU, F_CU0, F_CU_DEC,
           F_CU_LONG, F_CU_LAST, F_CU_LAST_ONLY, F_N };
    for (int i = 0; i < nv; ++i) {
        varlen_problem p;
        assert_int_equal(varlen_problem_init(&p, &vs[i], &rng), 0);
        const r35a_varlen_attention_desc *d = &p.desc;
        r35a_plan *plan, *other_plan;
        assert_int_equal(r35a_varlen_attention_plan(g_ctx, d, &plan), R35A_OK);
        assert_int_equal(r35a_varlen_attention_plan(g_other_ctx, d, &other_plan), R35A_OK);
        guard_env g;
        rel_guarded_alloc(&g.ws, 1024, 0x5Au);
        g.ws_hash = rel_guarded_hash(&g.ws);
        int32_t n = d->num_segments;
        int32_t *cu = malloc(sizeof(int32_t) * ((size_t)n + 1));
        uint64_t before = varlen_inputs_hash(&p);
        for (int f = 0; f < F_N; ++f) {
            memcpy(cu, p.cu_seqlens, sizeof(int32_t) * ((size_t)n + 1));
            r35a_varlen_attention_args a;
            varlen_args_of(&p, p.out_alloc, &a);
            a.cu_seqlens = cu;
            r35a_context *ctx = g_ctx;
            const r35a_plan *use = plan;
            const r35a_varlen_attention_args *pa = &a;
            r35a_status want = R35A_ERR_NULL_POINTER;
            const char *prefix = "varlen_attention_args.cu_seqlens";
            switch (f) {
            case F_CTX: ctx = NULL; prefix = "context"; break;
            case F_PLAN: use = NULL; prefix = "plan"; break;
            case F_OTHER_CTX: use = other_plan; want = R35A_ERR_PLAN_MISMATCH; prefix = "plan"; break;
            case F_OTHER_OP: use = paged_plan; want = R35A_ERR_PLAN_MISMATCH; prefix = "plan"; break;
            case F_ARGS: pa = NULL; prefix = "varlen_attention_args"; break;
            case F_SIZE: a.struct_size = sizeof a + 16; want = R35A_ERR_STRUCT_SIZE; prefix = "varlen_attention_args.struct_size"; break;
            case F_Q: a.q = NULL; prefix = "varlen_attention_args.q"; break;
            case F_K: a.k = NULL; prefix = "varlen_attention_args.k"; break;
            case F_V: a.v = NULL; prefix = "varlen_attention_args.v"; break;
            case F_OUT: a.out = NULL; prefix = "varlen_attention_args.out"; break;
            case F_CU: a.cu_seqlens = NULL; break;
            case F_CU0: cu[0] = 2; want = R35A_ERR_INVALID_DATA; break;
            case F_CU_DEC: cu[1] = cu[0] - 1; want = R35A_ERR_INVALID_DATA; break;
            case F_CU_LONG:
                for (int32_t k = 1; k <= n; ++k)
                    cu[k] += d->max_seqlen + 1;
                want = R35A_ERR_INVALID_DATA;
                break;
            case F_CU_LAST: cu[n] = d->num_tokens + 1; want = R35A_ERR_INVALID_DATA; break;
            case F_CU_LAST_ONLY: cu[n] = d->num_tokens - 1; want = R35A_ERR_INVALID_DATA; break;
            }
            char label[96];
            snprintf(label, sizeof label, "varlen problem %d, fault %d", i, f);
            tu_poison(p.out_alloc, p.out_alloc_bytes);
            r35a_status st = r35a_varlen_attention_run(ctx, use, pa, g.ws.payload, g.ws.bytes, NULL);
            expect_failure(label, st, want, prefix, p.out_alloc, p.out_alloc_bytes, &g, before, varlen_inputs_hash(&p));
            calls++;
        }
        free(cu);
        rel_guarded_free(&g.ws);
        r35a_plan_destroy(plan);
        r35a_plan_destroy(other_plan);
        varlen_problem_free(&p);
    }
    r35a_plan_destroy(paged_plan);
    printf("  varlen: %d failing calls, each wrote nothing (output, guards, workspace) and named its field\n", calls);
}

/* A failed plan leaves *plan NULL (and a stale pointer in *plan is not trusted). */
static void test_failed_plans(void **state)
{
    (void)state;
    r35a_paged_attention_desc good;
    r35a_paged_attention_desc_init(&good, R35A_DTYPE_F16, 2, 2, 1, 64, 8, 2, 64, 16, 8);
    int n = 0;
    for (int f = 0; f < 12; ++f) {
        r35a_paged_attention_desc d = good;
        const char *prefix = "paged_attention_desc.";
        switch (f) {
        case 0: d.struct_size = 0; break;
        case 1: d.dtype = (r35a_dtype)0; break;
        case 2: d.num_kv_heads = 3; break;
        case 3: d.head_size = 0; break;
        case 4: d.page_size = 0; break;
        case 5: d.softmax_scale = NAN; break;
        case 6: d.logit_softcap = -1.0f; break;
        case 7: d.block_table_stride = 3; break;
        case 8: d.q_token_stride = -1; break;
        case 9: d.k_page_stride = INT64_MAX / 2; break;
        case 10: d.use_alibi = 2; break;
        default: d.window = -1; break;
        }
        r35a_plan *plan = (r35a_plan *)(uintptr_t)0x10;
        r35a_status st = r35a_paged_attention_plan(g_ctx, &d, &plan);
        if (st == R35A_OK || plan != NULL)
            fail_msg("bad descriptor %d: status %s, plan %p", f, r35a_status_string(st), (void *)plan);
        if (strncmp(r35a_last_error_detail(), prefix, strlen(prefix)) != 0)
            fail_msg("bad descriptor %d: detail \"%s\"", f, r35a_last_error_detail());
        n++;
    }
    printf("  %d failed plans: *plan NULL, detail names the descriptor field\n", n);
}

/* On success: rows only (gaps, guards untouched), and an offered workspace the plan did not ask
 * for stays untouched. */
static void test_success_writes_rows_only(void **state)
{
    (void)state;
    tu_rng rng;
    tu_rng_init(&rng, tu_case_seed("rows_only", 0));
    paged_spec s;
    paged_spec_init(&s, R35A_DTYPE_F16, 6, 2, 48, 16);
    paged_spec_add_seq(&s, 40, 3);
    paged_spec_add_seq(&s, 5, 5);
    s.o_head_pad = 40;
    s.o_token_pad = 17;
    s.q_head_pad = 9;
    s.k_layout.pad[0] = 3;
    s.k_layout.pad[1] = 5;
    s.v_layout.nhd = true;
    s.v_layout.pad[2] = 11;
    s.extra_pages = 3;
    s.bt_pad = 4;
    s.garbage_unreached = true;
    assert_true(paged_run_case(g_ctx, &s, &rng, "rows_only", 0));
    varlen_spec v;
    varlen_spec_init(&v, R35A_DTYPE_BF16, 4, 2, 72);
    varlen_spec_add_segment(&v, 13);
    varlen_spec_add_segment(&v, 4);
    v.head_pad[3] = 24;
    v.token_pad[3] = 9;
    v.head_pad[1] = 6;
    assert_true(varlen_run_case(g_ctx, &v, &rng, "rows_only", 1));
}

static int setup(void **state)
{
    (void)state;
    g_ctx = tu_context_create();
    r35a_context_options opt;
    r35a_context_options_init(&opt);
    opt.backend = R35A_BACKEND_REFERENCE;
    if (!g_ctx || r35a_context_create(&opt, &g_other_ctx) != R35A_OK)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    r35a_context_destroy(g_other_ctx);
    r35a_context_destroy(g_ctx);
    return 0;
}

int main(void)
{
    tu_begin("test_guard");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_repeat_bit_identical),      cmocka_unit_test(test_batch_invariance),
        cmocka_unit_test(test_paged_errors_write_nothing), cmocka_unit_test(test_varlen_errors_write_nothing),
        cmocka_unit_test(test_failed_plans),              cmocka_unit_test(test_success_writes_rows_only),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
