/*
 * test_extreme.c - extreme values and shapes on the reference backend, against the float64 oracle.
 *
 *   - logits near the top of the fp32 range, from f16 / bf16 inputs near their range ends and large
 *     softmax scales: the online softmax must not overflow;
 *   - NaN and Inf inputs: what propagates where (printed as a table), and that rows which cannot
 *     see the bad element are bit-identical to a clean run;
 *   - rows with nothing to attend to (padding sequences, empty segments, empty calls) and rows
 *     whose every logit is -inf;
 *   - windows of 1, contexts of 1 and of 1M tokens (page size 1024), M = 8 with seq_len = 8;
 *   - page indices near the top of caches with more than 2^31 elements (sparse mappings), and
 *     sequence positions near INT32_MAX.
 *
 * A finding the library does not meet is reported as a "KNOWN ISSUE" line and fails the test;
 * R35A_REL_STRICT=0 turns those failures into reports only, for triage.
 */
#define _GNU_SOURCE

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
#include <sys/mman.h>

#include <cmocka.h>

static r35a_context *g_ctx;
static int g_known_issues;

/* A finding the library must meet: fails unless R35A_REL_STRICT=0 (an escape hatch for triage). */
static void known_issue(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void known_issue(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    printf("KNOWN ISSUE: %s\n", msg);
    g_known_issues++;
    const char *strict = getenv("R35A_REL_STRICT");
    if (!(strict && strcmp(strict, "0") == 0))
        fail_msg("strict mode: %s", msg);
}

/* ------------------------------------------------------------------------------------------ */
/* a directly built paged problem (for shapes the harness does not make)                        */

typedef struct direct {
    r35a_paged_attention_desc d;
    r35a_paged_attention_args a;
    void *q, *k, *v, *out;
    size_t q_bytes, k_bytes, v_bytes, out_bytes;
    bool sparse;                  /* k and v are mmap'd, not malloc'd */
    int32_t *seq_lens, *qsl, *bt;
    double *ref;
} direct;

static void *sparse_map(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Fast random f16/bf16/f32 values in +-[0.5, 2) (or [0.5, 2) when positive): the 1M-token cases
 * fill tens of millions of elements. */
static void put_random(r35a_dtype dt, void *buf, size_t i, tu_rng *rng, bool positive)
{
    uint32_t r = (uint32_t)tu_next(rng);
    uint32_t sign = positive ? 0u : (r >> 31);
    if (dt == R35A_DTYPE_F16) {
        uint16_t h = (uint16_t)(sign << 15 | (14u + ((r >> 10) & 1u)) << 10 | (r & 0x3FFu));
        memcpy((uint8_t *)buf + 2 * i, &h, 2);
    } else if (dt == R35A_DTYPE_BF16) {
        uint16_t h = (uint16_t)(sign << 15 | (126u + ((r >> 7) & 1u)) << 7 | (r & 0x7Fu));
        memcpy((uint8_t *)buf + 2 * i, &h, 2);
    } else {
        float f = (float)((0.5 + 1.5 * ((r & 0xFFFFFF) / 16777216.0)) * (sign ? -1.0 : 1.0));
        memcpy((uint8_t *)buf + 4 * i, &f, 4);
    }
}

static void put_vector(r35a_dtype dt, void *buf, int64_t off, int32_t n, tu_rng *rng, bool positive)
{
    for (int32_t e = 0; e < n; ++e)
        put_random(dt, buf, (size_t)(off + e), rng, positive);
}

/* Builds the problem for desc d (contiguous Q/O), sequences (L, M), and block_table rows from
 * pages (entries per sequence, bt_stride each). K/V vectors of reached keys get values; if the
 * caches are sparse nothing else is touched, otherwise everything else is NaN. */
static void direct_build(direct *p, const r35a_paged_attention_desc *d, const int32_t *L, const int32_t *M,
                         const int32_t *pages, bool sparse, tu_rng *rng)
{
    memset(p, 0, sizeof *p);
    p->d = *d;
    p->sparse = sparse;
    size_t es = tu_dtype_size(d->dtype);
    rel_paged_extents x;
    rel_paged_extents_of(d, &x);
    p->q_bytes = (size_t)x.q * es;
    p->out_bytes = (size_t)x.o * es;
    p->k_bytes = (size_t)x.k * es;
    p->v_bytes = (size_t)x.v * es;
    p->q = tu_alloc(p->q_bytes);
    p->out = tu_alloc(p->out_bytes);
    if (sparse) {
        p->k = sparse_map(p->k_bytes);
        p->v = sparse_map(p->v_bytes);
    } else {
        p->k = tu_alloc(p->k_bytes);
        p->v = tu_alloc(p->v_bytes);
        for (size_t i = 0; i < (size_t)x.k; ++i)
            tu_store_nan(d->dtype, p->k, i);
        for (size_t i = 0; i < (size_t)x.v; ++i)
            tu_store_nan(d->dtype, p->v, i);
    }
    p->seq_lens = tu_alloc(sizeof(int32_t) * (size_t)d->num_seqs);
    p->qsl = tu_alloc(sizeof(int32_t) * ((size_t)d->num_seqs + 1));
    p->bt = tu_alloc(sizeof(int32_t) * (size_t)x.block_table);
    memcpy(p->bt, pages, sizeof(int32_t) * (size_t)x.block_table);
    p->qsl[0] = 0;
    for (int32_t s = 0; s < d->num_seqs; ++s) {
        p->seq_lens[s] = L[s];
        p->qsl[s + 1] = p->qsl[s] + M[s];
    }
    for (size_t i = 0; i < (size_t)x.q; ++i)
        put_random(d->dtype, p->q, i, rng, false);
    if (p->k && p->v) {
        for (int32_t s = 0; s < d->num_seqs; ++s) {
            if (M[s] == 0)
                continue;
            int64_t lo = d->window > 0 ? (int64_t)L[s] - M[s] - d->window + 1 : 0;
            lo = lo < 0 ? 0 : lo;
            for (int64_t j = lo; j < L[s]; ++j) {
                int64_t page = p->bt[(int64_t)s * d->block_table_stride + j / d->page_size];
                for (int32_t g = 0; g < d->num_kv_heads; ++g) {
                    put_vector(d->dtype, p->k,
                               page * d->k_page_stride + g * d->k_head_stride + (j % d->page_size) * d->k_slot_stride,
                               d->head_size, rng, false);
                    put_vector(d->dtype, p->v,
                               page * d->v_page_stride + g * d->v_head_stride + (j % d->page_size) * d->v_slot_stride,
                               d->head_size, rng, true);
                }
            }
        }
    }
    memset(&p->a, 0, sizeof p->a);
    p->a.struct_size = sizeof p->a;
    p->a.q = p->q;
    p->a.k_cache = p->k;
    p->a.v_cache = p->v;
    p->a.out = p->out;
    p->a.seq_lens = p->seq_lens;
    p->a.query_start_loc = p->qsl;
    p->a.block_table = p->bt;
}

static void direct_free(direct *p)
{
    tu_free(p->q);
    tu_free(p->out);
    if (p->sparse) {
        if (p->k)
            munmap(p->k, p->k_bytes);
        if (p->v)
            munmap(p->v, p->v_bytes);
    } else {
        tu_free(p->k);
        tu_free(p->v);
    }
    tu_free(p->seq_lens);
    tu_free(p->qsl);
    tu_free(p->bt);
    free(p->ref);
}

/* Plans, runs (output poisoned first) and returns the status. */
static r35a_status direct_run(direct *p)
{
    r35a_plan *plan = NULL;
    r35a_status st = r35a_paged_attention_plan(g_ctx, &p->d, &plan);
    if (st != R35A_OK)
        return st;
    memset(p->out, 0xFF, p->out_bytes);
    st = r35a_paged_attention_run(g_ctx, plan, &p->a, NULL, 0, NULL);
    r35a_plan_destroy(plan);
    return st;
}

/* Runs and compares with the oracle; tol_rel as given, extra absolute error allowed. */
static double direct_check(direct *p, const char *label, double tol_rel, double extra_abs)
{
    r35a_status st = direct_run(p);
    if (st != R35A_OK)
        fail_msg("%s: %s: %s", label, r35a_status_string(st), r35a_last_error_detail());
    size_t nref = (size_t)p->d.num_tokens * (size_t)p->d.num_q_heads * (size_t)p->d.head_size;
    p->ref = realloc(p->ref, sizeof(double) * (nref ? nref : 1));
    assert_int_equal(rel_oracle_paged(&p->d, &p->a, p->ref), 0);
    rel_compare c;
    bool ok = rel_compare_rows(p->d.dtype, p->out, p->out_bytes, p->d.num_tokens, p->d.num_q_heads,
                               p->d.head_size, p->d.o_token_stride, p->d.o_head_stride, p->ref, tol_rel,
                               extra_abs, &c);
    double rel = c.err_max / (c.ref_max > 1e-6 ? c.ref_max : 1e-6);
    printf("  %-58s error %.3e (max|ref| %.3e, tol %.1e)%s\n", label, rel, c.ref_max, c.tol_abs,
           ok ? "" : " FAIL");
    if (!ok)
        fail_msg("%s: %zu above tol, %zu NaN/Inf, %zu unwritten, %zu outside: %s", label, c.bad, c.nonfinite,
                 c.unwritten, c.outside, c.first);
    return rel;
}

static void contiguous_desc(r35a_paged_attention_desc *d, r35a_dtype dt, int32_t num_seqs, int32_t tokens,
                            int32_t max_m, int32_t max_l, int32_t hq, int32_t hkv, int32_t D, int32_t B,
                            int32_t num_pages)
{
    r35a_paged_attention_desc_init(d, dt, num_seqs, tokens, max_m, max_l, hq, hkv, D, B, num_pages);
}

/* ------------------------------------------------------------------------------------------ */
/* 1. logits near the top of the range                                                          */

/* Q and K near the dtype's range end, the scale chosen so that the largest |logit| is `target`.
 * Logits that large make the softmax (nearly) one-hot; the online softmax must rescale without
 * overflow when the maximum arrives in a later key block. */
static void large_logits_case(r35a_dtype dt, double amp, double target, const char *label)
{
    paged_spec s;
    paged_spec_init(&s, dt, 4, 2, 64, 16);
    paged_spec_add_seq(&s, 150, 3);   /* several 32-key blocks: the max moves between blocks */
    paged_spec_add_seq(&s, 5, 1);
    s.q_amp = amp;
    s.k_amp = amp;
    tu_rng rng;
    tu_rng_init(&rng, tu_case_seed(label, 0));
    paged_problem p;
    assert_int_equal(paged_problem_init(&p, &s, &rng), 0);
    /* the largest |dot| of the problem, in float64, sets the scale */
    double qmax = rel_max_abs_rows(dt, p.q, p.num_tokens, 4, 64, p.desc.q_token_stride, p.desc.q_head_stride);
    double scale = target / (qmax * amp * 64.0 * 0.5);
    assert_true(scale > 0.0 && scale < 3.4e38);
    p.desc.softmax_scale = (float)scale;
    /* the harness's oracle ran with its scale: run it again with ours */
    direct dp;
    memset(&dp, 0, sizeof dp);
    dp.d = p.desc;
    dp.q = p.q;
    dp.k = p.k;
    dp.v = p.v;
    dp.out_bytes = p.out_alloc_bytes - 2 * p.out_guard_bytes;
    dp.out = p.out_alloc + p.out_guard_bytes;
    dp.a.struct_size = sizeof dp.a;
    dp.a.q = p.q;
    dp.a.k_cache = p.k;
    dp.a.v_cache = p.v;
    dp.a.out = dp.out;
    dp.a.seq_lens = p.seq_lens;
    dp.a.query_start_loc = p.query_start_loc;
    dp.a.block_table = p.block_table;
    /* Logits this large are rounded in fp32 by ~|logit| * D * 2^-24 absolute, which can decide
     * near-ties; the tolerance allows for it the same way the fuzz target does. */
    double extra = rel_extra_abs_tolerance(64, target, 150, 1.0);
    char full[160];
    snprintf(full, sizeof full, "%s (|logit| up to %.1e, scale %.2e)", label, target, scale);
    if (extra > 0.5) {
        /* one-hot regime: compare only that the output is finite and a convex combination of V */
        r35a_status st = direct_run(&dp);
        assert_int_equal(st, R35A_OK);
        size_t n = (size_t)p.num_tokens * 4 * 64;
        size_t bad = 0;
        for (size_t i = 0; i < n; ++i) {
            double o = tu_load(dt, dp.out, i);
            if (!isfinite(o) || fabs(o) > 1.0 + 1e-2)
                bad++;
        }
        printf("  %-58s %zu non-finite or out-of-range outputs\n", full, bad);
        if (bad)
            fail_msg("%s: %zu outputs NaN/Inf or outside the range of V", full, bad);
    } else {
        dp.ref = NULL;
        direct_check(&dp, full, rel_tolerance(dt), extra);
        free(dp.ref);
    }
    paged_problem_free(&p);
}

static void test_large_logits(void **state)
{
    (void)state;
    /* f16 inputs near 65504; logits from ordinary to just below FLT_MAX */
    large_logits_case(R35A_DTYPE_F16, 60000.0, 30.0, "f16 |q|,|k| ~ 6e4");
    large_logits_case(R35A_DTYPE_F16, 60000.0, 1e4, "f16 |q|,|k| ~ 6e4");
    large_logits_case(R35A_DTYPE_F16, 60000.0, 1e30, "f16 |q|,|k| ~ 6e4");
    large_logits_case(R35A_DTYPE_F16, 60000.0, 3e38, "f16 |q|,|k| ~ 6e4");
    large_logits_case(R35A_DTYPE_F16, 1e-4, 30.0, "f16 |q|,|k| ~ 1e-4 (subnormal products)");
    /* bf16 inputs whose fp32 dot stays finite (|q||k|D < FLT_MAX) */
    large_logits_case(R35A_DTYPE_BF16, 1e18, 30.0, "bf16 |q|,|k| ~ 1e18");
    large_logits_case(R35A_DTYPE_BF16, 1e18, 3e38, "bf16 |q|,|k| ~ 1e18");
    large_logits_case(R35A_DTYPE_BF16, 1e-18, 30.0, "bf16 |q|,|k| ~ 1e-18");
    large_logits_case(R35A_DTYPE_F32, 1e18, 1e37, "f32 |q|,|k| ~ 1e18");
}

/* bf16 inputs near their range end: q.k overflows fp32 although scale * q.k is representable. */
static void test_bf16_dot_overflow(void **state)
{
    (void)state;
    r35a_paged_attention_desc d;
    contiguous_desc(&d, R35A_DTYPE_BF16, 1, 1, 1, 4, 1, 1, 8, 4, 1);
    d.softmax_scale = 1e-37f;
    int32_t L = 4, M = 1, pages[1] = {0};
    tu_rng rng;
    tu_rng_init(&rng, tu_case_seed("bf16_overflow", 0));
    direct p;
    direct_build(&p, &d, &L, &M, pages, false, &rng);
    /* q = k_j = 1e30 in every element: q.k = 8e60 (fp32 inf), scaled: 8e22 for every key */
    for (int e = 0; e < 8; ++e)
        tu_store(R35A_DTYPE_BF16, p.q, (size_t)e, 1e30);
    for (int j = 0; j < 4; ++j)
        for (int e = 0; e < 8; ++e)
            tu_store(R35A_DTYPE_BF16, p.k, (size_t)(j * 8 + e), 1e30);
    assert_int_equal(direct_run(&p), R35A_OK);
    double ref[8];
    assert_int_equal(rel_oracle_paged(&p.d, &p.a, ref), 0);
    int zeros = 0, nans = 0, close = 0;
    for (int e = 0; e < 8; ++e) {
        double o = tu_load(R35A_DTYPE_BF16, p.out, (size_t)e);
        zeros += o == 0.0;
        nans += isnan(o);
        close += fabs(o - ref[e]) <= 1e-2 * fabs(ref[e]) + 1e-3;
    }
    printf("  bf16 q.k = 8e60 (fp32 overflow), scale 1e-37: %d/8 match the oracle, %d zeros, %d NaN\n", close,
           zeros, nans);
    if (close != 8)
        known_issue("bf16 dot product overflows fp32 before the softmax scale is applied: q = k = 1e30 (D = 8), "
                    "scale 1e-37 gives logits 8e23 for every key (oracle: the mean of V), the library "
                    "writes %d zeros and %d NaN of 8 (src/reference.c applies the scale after the fp32 "
                    "dot; pre-scaling q, as fast kernels do, keeps it finite)",
                    zeros, nans);
    direct_free(&p);
}

/* ------------------------------------------------------------------------------------------ */
/* 2. NaN and Inf inputs                                                                        */

typedef enum poison_site { IN_K, IN_V, IN_Q, IN_SLOPE, IN_SINK } poison_site;

/* One sequence L = 40, M = 4, window 16, so the first query row (pos 36) sees keys 21..36 and key
 * 37 is seen by rows 1..3 only; key 10 is seen by nobody. */
static void nan_inf_case(poison_site site, double value, int32_t key, int32_t elem, const char *label,
                         char *summary, size_t summary_len)
{
    enum { D = 16, HQ = 2, L = 40, M = 4 };
    r35a_paged_attention_desc d;
    contiguous_desc(&d, R35A_DTYPE_F16, 1, M, M, L, HQ, 1, D, 16, 3);
    d.window = 16;
    d.use_alibi = site == IN_SLOPE;
    d.use_sinks = site == IN_SINK;
    int32_t Ls = L, Ms = M, pages[3] = {2, 0, 1};
    tu_rng rng;
    tu_rng_init(&rng, tu_case_seed("nan_inf", 0));
    direct clean, bad;
    direct_build(&clean, &d, &Ls, &Ms, pages, false, &rng);
    tu_rng_init(&rng, tu_case_seed("nan_inf", 0));
    direct_build(&bad, &d, &Ls, &Ms, pages, false, &rng);
    float slopes[HQ] = {0.25f, 0.5f}, bad_slopes[HQ] = {0.25f, 0.5f};
    if (site == IN_SLOPE) {
        clean.a.alibi_slopes = slopes;
        bad.a.alibi_slopes = bad_slopes;
        bad_slopes[0] = (float)value;
    }
    float sinks[HQ] = {0.25f, 0.5f}, bad_sinks[HQ] = {0.25f, 0.5f};
    if (site == IN_SINK) {
        clean.a.sinks = sinks;
        bad.a.sinks = bad_sinks;
        bad_sinks[0] = (float)value;
    }
    int64_t page = pages[key / 16], slot = key % 16;
    size_t at = site == IN_Q ? (size_t)(key * d.q_token_stride + elem) /* key = token here */
                             : (size_t)(page * d.k_page_stride + slot * d.k_slot_stride + elem);
    if (site == IN_K)
        tu_store(R35A_DTYPE_F16, bad.k, at, value);
    if (site == IN_V)
        tu_store(R35A_DTYPE_F16, bad.v, at, value);
    if (site == IN_Q)
        tu_store(R35A_DTYPE_F16, bad.q, at, value);
    assert_int_equal(direct_run(&clean), R35A_OK);
    assert_int_equal(direct_run(&bad), R35A_OK);

    /* classify each output row */
    char rows[M * HQ + 1];
    int affected_rows = 0;
    for (int32_t t = 0; t < M; ++t)
        for (int32_t h = 0; h < HQ; ++h) {
            int32_t pos = L - M + t;
            bool sees;
            if (site == IN_Q)
                sees = t == key && h == 0;
            else if (site == IN_SLOPE || site == IN_SINK)
                sees = h == 0;
            else
                sees = key <= pos && pos - key < d.window;
            size_t base = (size_t)(t * d.o_token_stride + h * d.o_head_stride);
            bool same = memcmp((uint8_t *)clean.out + 2 * base, (uint8_t *)bad.out + 2 * base, 2 * D) == 0;
            int n_nan = 0, n_inf = 0, n_zero = 0;
            for (int e = 0; e < D; ++e) {
                double o = tu_load(R35A_DTYPE_F16, bad.out, base + (size_t)e);
                n_nan += isnan(o);
                n_inf += isinf(o);
                n_zero += o == 0.0;
            }
            char cls = same ? '=' : n_nan == D ? 'N' : n_nan ? 'n' : n_inf ? 'I' : n_zero == D ? '0' : '~';
            rows[t * HQ + h] = cls;
            if (!sees && !same)
                fail_msg("%s: row (t%d,h%d) cannot see the bad element but its output changed", label, (int)t,
                         (int)h);
            if (sees)
                affected_rows++;
        }
    rows[M * HQ] = '\0';
    snprintf(summary, summary_len, "%s", rows);
    printf("  %-44s rows (t0h0 t0h1 ... t3h1): %s   [= unchanged, N all NaN, n some NaN, I Inf, 0 all zeros, ~ other]\n",
           label, rows);
    (void)affected_rows;
    direct_free(&clean);
    direct_free(&bad);
}

static void test_nan_inf(void **state)
{
    (void)state;
    char r[64];
    /* keys: 37 is seen by rows t1..t3 (window 16 from pos 37..39), 10 by nobody */
    nan_inf_case(IN_K, NAN, 10, 3, "NaN in K of an unreachable key (key 10)", r, sizeof r);
    nan_inf_case(IN_V, NAN, 10, 3, "NaN in V of an unreachable key (key 10)", r, sizeof r);
    nan_inf_case(IN_V, NAN, 37, 3, "NaN in V[3] of key 37", r, sizeof r);
    for (int t = 1; t < 4; ++t)
        for (int h = 0; h < 2; ++h)
            if (r[t * 2 + h] != 'n')
                fail_msg("NaN in V[3] of key 37 must make element 3 (only) of the rows that see key 37 NaN: %s", r);
    nan_inf_case(IN_V, INFINITY, 37, 3, "+Inf in V[3] of key 37", r, sizeof r);
    for (int t = 1; t < 4; ++t)
        if (r[t * 2] == '=' || r[t * 2] == '0')
            fail_msg("+Inf in V must reach the rows that see the key: %s", r);
    nan_inf_case(IN_K, NAN, 37, 3, "NaN in K[3] of key 37", r, sizeof r);
    if (strchr(r, '0'))
        known_issue("a NaN in one key's K makes the rows that see that key all zeros instead of NaN (%s): "
                    "src/reference.c row_consume_block drops the NaN logit from the max (fmaxf) and "
                    "row_store writes zeros when the running sum is NaN (sum > 0 is false), so a corrupt "
                    "cache reads as a valid-looking zero output",
                    r);
    nan_inf_case(IN_K, INFINITY, 37, 3, "+Inf in K[3] of key 37", r, sizeof r);
    if (strchr(r, '0'))
        known_issue("+Inf in K (a +/-Inf logit, or NaN from Inf - Inf) gives all-zero rows (%s), same cause", r);
    nan_inf_case(IN_Q, NAN, 2, 0, "NaN in Q[0] of token 2", r, sizeof r);
    if (strchr(r, '0'))
        known_issue("a NaN in a query row gives that row all zeros instead of NaN (%s), same cause", r);
    nan_inf_case(IN_Q, INFINITY, 2, 0, "+Inf in Q[0] of token 2", r, sizeof r);
    if (strchr(r, '0'))
        known_issue("+Inf in a query row (Inf or NaN logits) gives that row all zeros (%s), same cause", r);
    nan_inf_case(IN_SLOPE, NAN, 0, 0, "NaN ALiBi slope of head 0", r, sizeof r);
    if (strchr(r, '0'))
        known_issue("a NaN ALiBi slope gives its head's rows all zeros instead of NaN (%s)", r);
    /* sinks: a NaN or +inf sink is a non-finite logit (its head's rows all NaN); a huge finite one
     * takes all the weight (zeros, not NaN); -inf is no sink (test_sink_neg_inf_is_no_sink) */
    nan_inf_case(IN_SINK, NAN, 0, 0, "NaN sink of head 0", r, sizeof r);
    for (int t = 0; t < 4; ++t)
        if (r[t * 2] != 'N' || r[t * 2 + 1] != '=')
            fail_msg("a NaN sink must make its head's rows (only) all NaN: %s", r);
    nan_inf_case(IN_SINK, INFINITY, 0, 0, "+Inf sink of head 0", r, sizeof r);
    for (int t = 0; t < 4; ++t)
        if (r[t * 2] != 'N')
            fail_msg("a +Inf sink must make its head's rows all NaN: %s", r);
    nan_inf_case(IN_SINK, 3e38, 0, 0, "sink 3e38 (finite) on head 0", r, sizeof r);
    for (int t = 0; t < 4; ++t)
        if (r[t * 2] != '0')
            fail_msg("a sink far above every logit takes all the weight: zeros, never NaN: %s", r);
}

/* A sink of -inf is no sink: bit-identical to the same call without sinks. */
static void test_sink_neg_inf_is_no_sink(void **state)
{
    (void)state;
    enum { D = 40, HQ = 4, L = 70, M = 3 };
    r35a_paged_attention_desc d;
    contiguous_desc(&d, R35A_DTYPE_BF16, 1, M, M, L, HQ, 2, D, 16, 5);
    int32_t Ls = L, Ms = M, pages[5] = {4, 1, 3, 0, 2};
    tu_rng rng;
    tu_rng_init(&rng, tu_case_seed("sink_neg_inf", 0));
    direct plain, with;
    direct_build(&plain, &d, &Ls, &Ms, pages, false, &rng);
    tu_rng_init(&rng, tu_case_seed("sink_neg_inf", 0));
    d.use_sinks = 1;
    direct_build(&with, &d, &Ls, &Ms, pages, false, &rng);
    const float sinks[HQ] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    with.a.sinks = sinks;
    assert_int_equal(direct_run(&plain), R35A_OK);
    assert_int_equal(direct_run(&with), R35A_OK);
    assert_memory_equal(plain.out, with.out, plain.out_bytes);
    printf("  %-58s bit-identical to no sinks\n", "sinks of -inf");
    direct_free(&plain);
    direct_free(&with);
}

/* ------------------------------------------------------------------------------------------ */
/* 3. rows with nothing to attend to                                                           */

static void test_empty_rows(void **state)
{
    (void)state;
    tu_rng rng;
    tu_rng_init(&rng, tu_case_seed("empty", 0));
    /* padding sequences (L = 0, M = 0) between real ones: they own no row */
    paged_spec s;
    paged_spec_init(&s, R35A_DTYPE_F16, 4, 1, 32, 16);
    paged_spec_add_seq(&s, 0, 0);
    paged_spec_add_seq(&s, 20, 2);
    paged_spec_add_seq(&s, 0, 0);
    paged_spec_add_seq(&s, 1, 1);
    paged_spec_add_seq(&s, 0, 0);
    assert_true(paged_run_case(g_ctx, &s, &rng, "empty_padding", 0));
    /* a call with only padding: num_tokens = 0, nothing to write, OK */
    paged_spec_init(&s, R35A_DTYPE_BF16, 4, 2, 64, 16);
    paged_spec_add_seq(&s, 0, 0);
    paged_spec_add_seq(&s, 0, 0);
    s.max_query_len_slack = 4;
    s.max_seq_len_slack = 100;
    assert_true(paged_run_case(g_ctx, &s, &rng, "empty_all_padding", 0));
    /* sequences with context but no query this step (M = 0, L > 0) */
    paged_spec_init(&s, R35A_DTYPE_F16, 2, 2, 16, 16);
    paged_spec_add_seq(&s, 50, 0);
    paged_spec_add_seq(&s, 3, 3);
    assert_true(paged_run_case(g_ctx, &s, &rng, "empty_no_query", 0));
    /* varlen: empty segments, and an all-empty call */
    varlen_spec v;
    varlen_spec_init(&v, R35A_DTYPE_F16, 2, 2, 32);
    varlen_spec_add_segment(&v, 0);
    varlen_spec_add_segment(&v, 7);
    varlen_spec_add_segment(&v, 0);
    assert_true(varlen_run_case(g_ctx, &v, &rng, "empty_segments", 0));
    varlen_spec_init(&v, R35A_DTYPE_BF16, 2, 1, 64);
    varlen_spec_add_segment(&v, 0);
    v.max_seqlen_slack = 9;
    v.causal = 1;
    assert_true(varlen_run_case(g_ctx, &v, &rng, "empty_call", 0));

    /* logits of -6.9e40, all equal: -inf once rounded to fp32. The exact answer is the mean of V
     * (every weight equal); an implementation that keeps logits in fp32 has no right answer (0/0)
     * and must then write the documented zero row (or NaN), never another finite value. */
    r35a_paged_attention_desc d;
    contiguous_desc(&d, R35A_DTYPE_F16, 1, 1, 1, 8, 1, 1, 16, 8, 1);
    d.softmax_scale = 1e30f;
    int32_t L = 8, M = 1, pages[1] = {0};
    direct p;
    direct_build(&p, &d, &L, &M, pages, false, &rng);
    for (int e = 0; e < 16; ++e)
        tu_store(R35A_DTYPE_F16, p.q, (size_t)e, 65504.0);
    for (int j = 0; j < 8; ++j)
        for (int e = 0; e < 16; ++e)
            tu_store(R35A_DTYPE_F16, p.k, (size_t)(j * 16 + e), -65504.0);
    assert_int_equal(direct_run(&p), R35A_OK);
    int zeros = 0, nans = 0, means = 0;
    for (int e = 0; e < 16; ++e) {
        double o = tu_load(R35A_DTYPE_F16, p.out, (size_t)e);
        double mean = 0.0;
        for (int j = 0; j < 8; ++j)
            mean += tu_load(R35A_DTYPE_F16, p.v, (size_t)(j * 16 + e)) / 8.0;
        zeros += o == 0.0;
        nans += isnan(o);
        means += fabs(o - mean) <= 4e-3 * (fabs(mean) + 1.0);
    }
    printf("  all logits -6.9e40 (-inf in fp32): %d means of V, %d zeros, %d NaN of 16\n", means, zeros, nans);
    if (means != 16 && zeros + nans != 16)
        fail_msg("a row whose logits are all -inf in fp32 wrote neither the mean of V nor the zero row");
    direct_free(&p);
}

/* ------------------------------------------------------------------------------------------ */
/* 4. windows of 1, contexts of 1, M = 8 with seq_len = 8                                      */

/* With one visible key the softmax weight is exactly 1: the output row is that key's V, bit for bit. */
static void expect_rows_equal_v(direct *p, const int32_t *L, const int32_t *M)
{
    size_t es = tu_dtype_size(p->d.dtype);
    int32_t group = p->d.num_q_heads / p->d.num_kv_heads;
    for (int32_t s = 0; s < p->d.num_seqs; ++s)
        for (int32_t i = 0; i < M[s]; ++i) {
            int64_t pos = (int64_t)L[s] - M[s] + i, t = p->qsl[s] + i;
            int64_t page = p->bt[(int64_t)s * p->d.block_table_stride + pos / p->d.page_size];
            for (int32_t h = 0; h < p->d.num_q_heads; ++h) {
                const uint8_t *o = (const uint8_t *)p->out + (size_t)(t * p->d.o_token_stride + h * p->d.o_head_stride) * es;
                const uint8_t *v = (const uint8_t *)p->v + (size_t)(page * p->d.v_page_stride + (h / group) * p->d.v_head_stride +
                                                                   (pos % p->d.page_size) * p->d.v_slot_stride) * es;
                if (memcmp(o, v, (size_t)p->d.head_size * es) != 0)
                    fail_msg("seq %d row %d head %d: a single visible key must give exactly its V", (int)s, (int)i, (int)h);
            }
        }
}

static void test_window_one_and_context_one(void **state)
{
    (void)state;
    tu_rng rng;
    tu_rng_init(&rng, tu_case_seed("window1", 0));
    const r35a_dtype dts[3] = {R35A_DTYPE_F16, R35A_DTYPE_BF16, R35A_DTYPE_F32};
    for (int k = 0; k < 3; ++k) {
        /* window 1: every row sees only itself, across page boundaries, with GQA and M up to 8 */
        int32_t L[4] = {1, 17, 64, 8}, M[4] = {1, 8, 3, 8};
        r35a_paged_attention_desc d;
        contiguous_desc(&d, dts[k], 4, 20, 8, 64, 8, 2, 64, 16, 8);
        d.window = 1;
        int32_t pages[4 * 4];
        for (int i = 0; i < 16; ++i)
            pages[i] = (i * 5 + 3) % 8;
        /* give every reached page of a sequence a distinct physical page where it matters */
        int32_t rows[4][4] = {{0, -1, -1, -1}, {1, 2, -1, -1}, {-1, -1, -1, 3}, {4, -1, -1, -1}};
        for (int s = 0; s < 4; ++s)
            for (int pg = 0; pg < 4; ++pg)
                if (rows[s][pg] >= 0)
                    pages[s * 4 + pg] = rows[s][pg];
        direct p;
        direct_build(&p, &d, L, M, pages, false, &rng);
        char label[80];
        snprintf(label, sizeof label, "%s window 1, L/M 1/1 17/8 64/3 8/8", tu_dtype_name(dts[k]));
        direct_check(&p, label, rel_tolerance(dts[k]), 0.0);
        expect_rows_equal_v(&p, L, M);
        direct_free(&p);

        /* context of 1: L = 1, M = 1, no window */
        int32_t L1 = 1, M1 = 1, pg1[1] = {0};
        contiguous_desc(&d, dts[k], 1, 1, 1, 1, 4, 1, 128, 16, 1);
        direct_build(&p, &d, &L1, &M1, pg1, false, &rng);
        snprintf(label, sizeof label, "%s context of 1", tu_dtype_name(dts[k]));
        direct_check(&p, label, rel_tolerance(dts[k]), 0.0);
        expect_rows_equal_v(&p, &L1, &M1);
        direct_free(&p);
    }
}

static void test_m8_seq8(void **state)
{
    (void)state;
    tu_rng rng;
    tu_rng_init(&rng, tu_case_seed("m8", 0));
    const r35a_dtype dts[3] = {R35A_DTYPE_F16, R35A_DTYPE_BF16, R35A_DTYPE_F32};
    for (int k = 0; k < 3; ++k)
        for (int variant = 0; variant < 4; ++variant) {
            paged_spec s;
            paged_spec_init(&s, dts[k], variant == 3 ? 8 : 16, variant == 3 ? 8 : 2, variant == 2 ? 256 : 128,
                            variant == 1 ? 8 : 16);
            paged_spec_add_seq(&s, 8, 8);
            paged_spec_add_seq(&s, 8, 8);
            if (variant == 1)
                s.window = 3;
            if (variant == 2)
                s.use_alibi = 1;
            if (variant == 3)
                s.logit_softcap = 10.0f;
            s.shuffle_pages = true;
            assert_true(paged_run_case(g_ctx, &s, &rng, "m8_seq8", k * 4 + variant));
        }
    printf("  M = 8, seq_len = 8: f16/bf16/f32 x {GQA 8, window 3 / page 8, ALiBi / D 256, softcap / MHA}: passed\n");
}

/* ------------------------------------------------------------------------------------------ */
/* 5. a context of 1M tokens                                                                    */

static void million_case(r35a_dtype dt, int32_t window, int32_t hq, int32_t hkv, int32_t D)
{
    const int32_t L = 1 << 20, B = 1024, pages_per_seq = L / B;
    r35a_paged_attention_desc d;
    contiguous_desc(&d, dt, 1, 1, 1, L, hq, hkv, D, B, pages_per_seq);
    d.window = window;
    int32_t *pages = malloc(sizeof(int32_t) * (size_t)pages_per_seq);
    for (int32_t i = 0; i < pages_per_seq; ++i)
        pages[i] = (int32_t)(((int64_t)i * 389) % pages_per_seq); /* a permutation (389 is prime) */
    tu_rng rng;
    tu_rng_init(&rng, tu_case_seed("million", window));
    int32_t M = 1;
    direct p;
    direct_build(&p, &d, &L, &M, pages, false, &rng);
    char label[96];
    snprintf(label, sizeof label, "%s L = 1M, page 1024, D %d, hq/hkv %d/%d, window %d", tu_dtype_name(dt), (int)D,
             (int)hq, (int)hkv, (int)window);
    /* fp32 accumulation over 1M keys: the bound on rounding grows with the key count; report the
     * measured error against the dtype's tolerance alone */
    direct_check(&p, label, rel_tolerance(dt) > 1e-4 ? rel_tolerance(dt) : 1e-4, 0.0);
    direct_free(&p);
    free(pages);
}

static void test_million_tokens(void **state)
{
    (void)state;
    /* R35A_TEST_SCALE < 1 (valgrind) keeps the first case only */
    int cases = tu_scaled(4);
    million_case(R35A_DTYPE_F16, 0, 2, 1, 16);
    if (cases > 1)
        million_case(R35A_DTYPE_BF16, 0, 1, 1, 16);
    if (cases > 2)
        million_case(R35A_DTYPE_F16, 4096, 4, 1, 16);
    if (cases > 3)
        million_case(R35A_DTYPE_F32, 1, 1, 1, 8);
}

/* ------------------------------------------------------------------------------------------ */
/* 6. page indices near the top of caches with more than 2^31 elements                          */

static void huge_cache_case(int32_t num_pages, int32_t B, int32_t hkv, int32_t D, const char *label)
{
    enum { NSEQ = 3 };
    int32_t L[NSEQ] = {8, 5 * 8 + 3, 2 * 8}, M[NSEQ] = {8, 4, 1};
    int32_t max_l = 0;
    for (int s = 0; s < NSEQ; ++s)
        max_l = L[s] > max_l ? L[s] : max_l;
    r35a_paged_attention_desc d;
    contiguous_desc(&d, R35A_DTYPE_F16, NSEQ, 13, 8, max_l, 2 * hkv, hkv, D, B, num_pages);
    int32_t bts = d.block_table_stride;
    int32_t *pages = calloc((size_t)NSEQ * (size_t)bts, sizeof(int32_t));
    /* pages counted down from the top, so the highest offsets of the cache are used */
    int32_t next = num_pages - 1;
    for (int s = 0; s < NSEQ; ++s)
        for (int32_t pg = 0; pg < bts; ++pg)
            pages[s * bts + pg] = pg * B < L[s] ? next-- : INT32_MIN; /* unreached: garbage */
    rel_paged_extents x;
    rel_paged_extents_of(&d, &x);
    printf("  %s: %lld elements per cache (%.1f GiB), pages %d..%d\n", label, (long long)x.k,
           (double)x.k * 2 / (1 << 30), (int)next + 1, (int)num_pages - 1);
    assert_true(x.k > ((__int128)1 << 31));
    tu_rng rng;
    tu_rng_init(&rng, tu_case_seed(label, 0));
    direct p;
    direct_build(&p, &d, L, M, pages, true, &rng);
    if (!p.k || !p.v) {
        printf("  %s: skipped, a %.1f GiB sparse mapping was refused here (valgrind, or overcommit off)\n", label,
               (double)p.k_bytes / (1 << 30));
        direct_free(&p);
        free(pages);
        return;
    }
    /* NaN just outside the used vectors: the slot after each sequence's last key and the vector
     * before each used page, where an off-by-one or a truncated offset would land */
    for (int s = 0; s < NSEQ; ++s) {
        int64_t last = L[s] - 1;
        int64_t page = pages[s * bts + last / B];
        if ((last % B) + 1 < B)
            for (int32_t g = 0; g < hkv; ++g)
                for (int32_t e = 0; e < D; ++e) {
                    int64_t off = page * d.k_page_stride + g * d.k_head_stride + ((last % B) + 1) * d.k_slot_stride + e;
                    tu_store_nan(R35A_DTYPE_F16, p.k, (size_t)off);
                    tu_store_nan(R35A_DTYPE_F16, p.v, (size_t)off);
                }
    }
    direct_check(&p, label, rel_tolerance(R35A_DTYPE_F16), 0.0);
    direct_free(&p);
    free(pages);
}

static void test_huge_cache(void **state)
{
    (void)state;
    /* 2^21 + 3 pages of 2 heads x 16 slots x 64: 4.3e9 elements, 8 GiB per cache */
    huge_cache_case((1 << 21) + 3, 16, 2, 64, "f16 cache of 2^21+3 pages x 2048 elements");
    /* the largest num_pages: INT32_MAX pages of 1 slot x 8 elements (34 GiB per cache) */
    huge_cache_case(INT32_MAX, 1, 1, 8, "f16 cache of INT32_MAX pages x 8 elements");
}

/* Positions near INT32_MAX: L = INT32_MAX with a short window. Valid input (max_seq_len is an
 * int32), and cheap: only the window's keys are read. */
static void test_positions_near_int32_max(void **state)
{
    (void)state;
    const int32_t B = 1 << 20, D = 8;
    int32_t window = 8, L = INT32_MAX, M = 2;
    r35a_paged_attention_desc d;
    contiguous_desc(&d, R35A_DTYPE_F16, 1, M, M, L, 1, 1, D, B, 2);
    d.window = window;
    int32_t bts = d.block_table_stride; /* 2048 */
    int32_t *pages = malloc(sizeof(int32_t) * (size_t)bts);
    for (int32_t i = 0; i < bts; ++i)
        pages[i] = -1; /* unreached: anything */
    pages[bts - 1] = 1;
    tu_rng rng;
    tu_rng_init(&rng, tu_case_seed("int32max", 0));
    direct p;
    direct_build(&p, &d, &L, &M, pages, true, &rng);
    if (!p.k || !p.v) {
        printf("  positions near INT32_MAX: skipped (sparse mapping refused)\n");
        direct_free(&p);
        free(pages);
        return;
    }
    /* Regression: the reference's key loop once stepped an int32 past INT32_MAX here. */
    const char *strict = getenv("R35A_REL_STRICT");
    if (strict && strcmp(strict, "0") == 0) {
        printf("  positions near INT32_MAX: skipped (R35A_REL_STRICT=0)\n");
    } else {
        /* the oracle walks every position up to L: too slow here, so the window is computed inline */
        r35a_status st = direct_run(&p);
        if (st != R35A_OK)
            fail_msg("L = INT32_MAX: %s: %s", r35a_status_string(st), r35a_last_error_detail());
        for (int32_t i = 0; i < M; ++i) {
            int64_t pos = (int64_t)L - M + i;
            double logits[8], mx = -INFINITY, sum = 0.0, out[D];
            for (int64_t j = pos - window + 1, x = 0; j <= pos; ++j, ++x) {
                int64_t off = 1 * d.k_page_stride + (j % B) * d.k_slot_stride;
                double dot = 0.0;
                for (int e = 0; e < D; ++e)
                    dot += tu_load(d.dtype, p.q, (size_t)(i * d.q_token_stride + e)) * tu_load(d.dtype, p.k, (size_t)(off + e));
                logits[x] = dot * (double)d.softmax_scale;
                mx = logits[x] > mx ? logits[x] : mx;
            }
            memset(out, 0, sizeof out);
            for (int64_t j = pos - window + 1, x = 0; j <= pos; ++j, ++x) {
                double w = exp(logits[x] - mx);
                sum += w;
                int64_t off = 1 * d.v_page_stride + (j % B) * d.v_slot_stride;
                for (int e = 0; e < D; ++e)
                    out[e] += w * tu_load(d.dtype, p.v, (size_t)(off + e));
            }
            for (int e = 0; e < D; ++e) {
                double o = tu_load(d.dtype, p.out, (size_t)(i * d.o_token_stride + e));
                if (!(fabs(o - out[e] / sum) <= 4e-3))
                    fail_msg("L = INT32_MAX row %d elem %d: out %g, expected %g", (int)i, e, o, out[e] / sum);
            }
        }
        printf("  f16 L = INT32_MAX, window 8, page 2^20: matches\n");
    }
    direct_free(&p);
    free(pages);
}

static int setup(void **state)
{
    (void)state;
    g_ctx = tu_context_create();
    return g_ctx ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    r35a_context_destroy(g_ctx);
    printf("[test_extreme] %d known issue(s) reported (they fail unless R35A_REL_STRICT=0)\n", g_known_issues);
    return 0;
}

int main(void)
{
    tu_begin("test_extreme");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_large_logits),
        cmocka_unit_test(test_bf16_dot_overflow),
        cmocka_unit_test(test_nan_inf),
        cmocka_unit_test(test_sink_neg_inf_is_no_sink),
        cmocka_unit_test(test_empty_rows),
        cmocka_unit_test(test_window_one_and_context_one),
        cmocka_unit_test(test_m8_seq8),
        cmocka_unit_test(test_million_tokens),
        cmocka_unit_test(test_huge_cache),
        cmocka_unit_test(test_positions_near_int32_max),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
