/*
 * test_merge.c - the merge of partial (O, LSE) states and the LSE that feeds it, on the reference:
 *   - r35a_merge_states against a float64 merge written here from the header's formula (strided
 *     parts, -inf parts whose O holds NaN and must not be read, rows whose parts are all -inf,
 *     gaps between output rows that must stay poisoned);
 *   - NaN propagation: a NaN or +inf part LSE makes the row NaN, a NaN in a weighted O element
 *     makes that element NaN;
 *   - sharded vs unsharded paged attention: one sequence's keys split at page boundaries into
 *     R = 2..4 shards, each a paged call with use_lse (decode, and M > 1 with the earlier shards
 *     as one M = 1 sequence per query token), merged, against the unsharded call; with sinks on
 *     one shard, softcap, ALiBi (the earlier shards' LSE corrected by slope x (p + 1 - b)) and a
 *     window whose edge falls on a shard boundary (header "Merging partial states");
 *   - bad input: every descriptor and args check of the merge and of the LSE fields names its field.
 * Fresh random inputs each run (seed printed by tu_begin; replay with R35A_TEST_SEED).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static r35a_context *g_ctx;

static const r35a_dtype k_dtypes[] = {R35A_DTYPE_F16, R35A_DTYPE_BF16, R35A_DTYPE_F32};

static double tol_of(r35a_dtype dt)
{
    return dt == R35A_DTYPE_F32 ? 1e-5 : dt == R35A_DTYPE_F16 ? 2e-3 : 1e-2;
}

/* ------------------------------------------------------------------------------------------ */
/* merge against a float64 merge                                                                */

typedef struct merge_case {
    r35a_merge_states_desc d;
    void *parts;
    float *parts_lse;
    uint8_t *out;       /* poisoned, with gaps */
    float *out_lse;
    size_t parts_elems, lse_elems, out_elems, out_lse_elems;
} merge_case;

static void merge_case_free(merge_case *c)
{
    free(c->parts);
    free(c->parts_lse);
    free(c->out);
    free(c->out_lse);
}

/* A random merge problem: strides padded at random, LSEs in [-8, 24] with some -inf parts (their
 * O is NaN: it must not be read) and some rows whose every part is -inf. */
static void merge_case_init(merge_case *c, r35a_dtype dt, tu_rng *rng)
{
    memset(c, 0, sizeof *c);
    const int32_t N = tu_range(rng, 1, 8), T = tu_range(rng, 0, 9), H = tu_range(rng, 1, 6);
    const int32_t D = tu_chance(rng, 0.2) ? tu_range(rng, 1, 300) : 64 * tu_range(rng, 1, 4);
    r35a_merge_states_desc_init(&c->d, dt, N, T, H, D);
    r35a_merge_states_desc *d = &c->d;
    d->use_out_lse = tu_chance(rng, 0.8);
    if (tu_chance(rng, 0.5)) { /* padded and reordered strides */
        d->part_head_stride = D + tu_range(rng, 0, 5);
        d->part_token_stride = H * d->part_head_stride + tu_range(rng, 0, 7);
        d->part_stride = T * d->part_token_stride + tu_range(rng, 0, 9);
        d->lse_part_stride = 1;              /* token-major LSE: [T][H][N] */
        d->lse_head_stride = N;
        d->lse_token_stride = (int64_t)H * N;
        d->o_head_stride = D + tu_range(rng, 1, 4);
        d->o_token_stride = H * d->o_head_stride + tu_range(rng, 0, 3);
        d->out_lse_head_stride = 2;
        d->out_lse_token_stride = 2 * H + 1;
    }
    const size_t es = tu_dtype_size(dt);
    c->parts_elems = (size_t)(N - 1) * d->part_stride + (size_t)(T > 0 ? T - 1 : 0) * d->part_token_stride +
                     (size_t)(H - 1) * d->part_head_stride + D;
    c->lse_elems = (size_t)(N - 1) * d->lse_part_stride + (size_t)(T > 0 ? T - 1 : 0) * d->lse_token_stride +
                   (size_t)(H - 1) * d->lse_head_stride + 1;
    c->out_elems = (size_t)(T > 0 ? T - 1 : 0) * d->o_token_stride + (size_t)(H - 1) * d->o_head_stride + D;
    c->out_lse_elems = (size_t)(T > 0 ? T - 1 : 0) * d->out_lse_token_stride + (size_t)(H - 1) * d->out_lse_head_stride + 1;
    c->parts = malloc(c->parts_elems * es);
    c->parts_lse = malloc(c->lse_elems * sizeof(float));
    c->out = malloc(c->out_elems * es);
    c->out_lse = malloc(c->out_lse_elems * sizeof(float));
    for (size_t i = 0; i < c->parts_elems; ++i)
        tu_store_nan(dt, c->parts, i);   /* gaps and -inf parts: NaN, never read */
    for (size_t i = 0; i < c->lse_elems; ++i)
        c->parts_lse[i] = NAN;
    for (int32_t t = 0; t < T; ++t)
        for (int32_t h = 0; h < H; ++h) {
            const bool all_neg_inf = tu_chance(rng, 0.1);
            for (int32_t i = 0; i < N; ++i) {
                const size_t li = (size_t)i * d->lse_part_stride + (size_t)t * d->lse_token_stride +
                                  (size_t)h * d->lse_head_stride;
                const bool neg_inf = all_neg_inf || tu_chance(rng, 0.15);
                c->parts_lse[li] = neg_inf ? -INFINITY : (float)(-8.0 + 32.0 * tu_unit(rng));
                if (neg_inf)
                    continue;
                const size_t base = (size_t)i * d->part_stride + (size_t)t * d->part_token_stride +
                                    (size_t)h * d->part_head_stride;
                for (int32_t e = 0; e < D; ++e)
                    tu_store(dt, c->parts, base + e, 2.0 * tu_sym(rng));
            }
        }
    tu_poison(c->out, c->out_elems * es);
    tu_poison(c->out_lse, c->out_lse_elems * sizeof(float));
}

/* The float64 merge of row (t, h): out[D] and the LSE (-inf when every part is -inf). */
static double merge_row_ref(const merge_case *c, int32_t t, int32_t h, double *out)
{
    const r35a_merge_states_desc *d = &c->d;
    double m = -INFINITY;
    for (int32_t i = 0; i < d->num_parts; ++i) {
        const double l = c->parts_lse[(size_t)i * d->lse_part_stride + (size_t)t * d->lse_token_stride +
                                      (size_t)h * d->lse_head_stride];
        m = l > m ? l : m;
    }
    for (int32_t e = 0; e < d->head_size; ++e)
        out[e] = 0.0;
    if (m == -INFINITY)
        return -INFINITY;
    double sum = 0.0;
    for (int32_t i = 0; i < d->num_parts; ++i)
        sum += exp(c->parts_lse[(size_t)i * d->lse_part_stride + (size_t)t * d->lse_token_stride +
                                (size_t)h * d->lse_head_stride] - m);
    const double lse = m + log(sum);
    for (int32_t i = 0; i < d->num_parts; ++i) {
        const double l = c->parts_lse[(size_t)i * d->lse_part_stride + (size_t)t * d->lse_token_stride +
                                      (size_t)h * d->lse_head_stride];
        if (l == -INFINITY)
            continue;
        const double w = exp(l - lse);
        const size_t base = (size_t)i * d->part_stride + (size_t)t * d->part_token_stride + (size_t)h * d->part_head_stride;
        for (int32_t e = 0; e < d->head_size; ++e)
            out[e] += w * tu_load(d->dtype, c->parts, base + e);
    }
    return lse;
}

static r35a_status run_merge(const r35a_merge_states_desc *d, const r35a_merge_states_args *a)
{
    r35a_plan *plan = NULL;
    r35a_status st = r35a_merge_states_plan(g_ctx, d, &plan);
    if (st != R35A_OK)
        return st;
    st = r35a_merge_states_run(g_ctx, plan, a, NULL, 0, NULL);
    r35a_plan_destroy(plan);
    return st;
}

/* Checks c's outputs against merge_row_ref; gaps between rows must still be poisoned. */
static void check_merge_case(const merge_case *c, const char *label)
{
    const r35a_merge_states_desc *d = &c->d;
    const size_t es = tu_dtype_size(d->dtype);
    uint8_t *owned = calloc(c->out_elems, 1), *owned_lse = calloc(c->out_lse_elems, 1);
    double *ref = malloc(sizeof(double) * (size_t)d->head_size);
    const double tol = tol_of(d->dtype);
    int bad = 0;
    for (int32_t t = 0; t < d->num_tokens; ++t)
        for (int32_t h = 0; h < d->num_heads; ++h) {
            const double lse = merge_row_ref(c, t, h, ref);
            const size_t ob = (size_t)t * d->o_token_stride + (size_t)h * d->o_head_stride;
            for (int32_t e = 0; e < d->head_size; ++e) {
                owned[ob + e] = 1;
                const double got = tu_load(d->dtype, c->out, ob + e);
                if (!(fabs(got - ref[e]) <= tol * 2.0) && bad++ < 5) /* |O| <= 2 */
                    printf("FAIL %s: O (token %d, head %d, elem %d) got %.9g want %.9g\n", label, (int)t, (int)h,
                           (int)e, got, ref[e]);
            }
            if (d->use_out_lse) {
                const size_t li = (size_t)t * d->out_lse_token_stride + (size_t)h * d->out_lse_head_stride;
                owned_lse[li] = 1;
                const double got = c->out_lse[li];
                const bool ok = lse == -INFINITY ? got == -INFINITY : fabs(got - lse) <= 1e-6 * fmax(1.0, fabs(lse));
                if (!ok && bad++ < 5)
                    printf("FAIL %s: LSE (token %d, head %d) got %.9g want %.9g\n", label, (int)t, (int)h, got, lse);
            }
        }
    for (size_t i = 0; i < c->out_elems; ++i)
        if (!owned[i] && !tu_elem_is_poison(d->dtype, c->out, i) && bad++ < 5)
            printf("FAIL %s: output gap element %zu was written\n", label, i);
    for (size_t i = 0; i < c->out_lse_elems; ++i)
        if (!owned_lse[i] && tu_first_unpoisoned(c->out_lse + i, sizeof(float)) != (size_t)-1 && bad++ < 5)
            printf("FAIL %s: out_lse element %zu was written (use_out_lse %d)\n", label, i, (int)d->use_out_lse);
    (void)es;
    free(owned);
    free(owned_lse);
    free(ref);
    if (bad)
        printf("  %s: N=%d T=%d H=%d D=%d %s (seed 0x%016llx)\n", label, (int)d->num_parts, (int)d->num_tokens,
               (int)d->num_heads, (int)d->head_size, tu_dtype_name(d->dtype), (unsigned long long)tu_seed());
    assert_int_equal(bad, 0);
}

static void test_merge_random(void **state)
{
    (void)state;
    const int cases = tu_scaled(60);
    for (int k = 0; k < cases; ++k) {
        if (!tu_case_selected("merge_random", k))
            continue;
        tu_rng rng;
        tu_rng_init(&rng, tu_case_seed("merge_random", k));
        merge_case c;
        merge_case_init(&c, k_dtypes[k % 3], &rng);
        r35a_merge_states_args a = {sizeof a, c.parts, c.parts_lse, c.out, c.d.use_out_lse ? c.out_lse : NULL};
        r35a_status st = run_merge(&c.d, &a);
        if (st != R35A_OK)
            printf("FAIL merge_random:%d: %s \"%s\"\n", k, r35a_status_string(st), r35a_last_error_detail());
        assert_int_equal(st, R35A_OK);
        char label[64];
        snprintf(label, sizeof label, "merge_random:%d", k);
        check_merge_case(&c, label);
        merge_case_free(&c);
    }
    printf("[test_merge] %d random merges (N 1..8, strided, -inf parts with NaN O, all -inf rows) match float64\n",
           cases);
}

/* NaN and +inf LSEs poison the row; a NaN in a weighted O element poisons that element only. */
static void test_merge_nan(void **state)
{
    (void)state;
    for (int di = 0; di < 3; ++di) {
        const r35a_dtype dt = k_dtypes[di];
        const int32_t N = 3, D = 8;
        r35a_merge_states_desc d;
        r35a_merge_states_desc_init(&d, dt, N, 4, 1, D);
        d.use_out_lse = 1;
        const size_t es = tu_dtype_size(dt);
        uint8_t *parts = malloc((size_t)N * 4 * D * es), *out = malloc((size_t)4 * D * es);
        float lse[3 * 4], out_lse[4];
        for (size_t i = 0; i < (size_t)N * 4 * D; ++i)
            tu_store(dt, parts, i, 0.5);
        for (int i = 0; i < N * 4; ++i)
            lse[i] = 1.0f;
        lse[0 * 4 + 0] = NAN;            /* token 0: part 0's LSE NaN */
        lse[1 * 4 + 1] = INFINITY;       /* token 1: part 1's LSE +inf */
        tu_store_nan(dt, parts, (size_t)(2 * 4 + 2) * D + 3); /* token 2: part 2, element 3 NaN */
        lse[0 * 4 + 3] = -INFINITY;      /* token 3: part 0 -inf with a NaN O: not read */
        tu_store_nan(dt, parts, (size_t)(0 * 4 + 3) * D + 5);
        tu_poison(out, (size_t)4 * D * es);
        r35a_merge_states_args a = {sizeof a, parts, lse, out, out_lse};
        assert_int_equal(run_merge(&d, &a), R35A_OK);
        for (int e = 0; e < D; ++e) {
            assert_true(isnan(tu_load(dt, out, (size_t)0 * D + e)));
            assert_true(isnan(tu_load(dt, out, (size_t)1 * D + e)));
            const double v2 = tu_load(dt, out, (size_t)2 * D + e);
            assert_true(e == 3 ? isnan(v2) : fabs(v2 - 0.5) <= tol_of(dt));
            assert_true(fabs(tu_load(dt, out, (size_t)3 * D + e) - 0.5) <= tol_of(dt));
        }
        assert_true(isnan(out_lse[0]));
        assert_true(isnan(out_lse[1]));
        assert_true(fabs(out_lse[2] - (1.0 + log(3.0))) <= 1e-6);
        assert_true(fabs(out_lse[3] - (1.0 + log(2.0))) <= 1e-6);
        free(parts);
        free(out);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* sharded vs unsharded paged attention                                                         */

typedef struct shard_case {
    r35a_dtype dt;
    int32_t hq, hkv, D, B, L, M, R, window;
    bool sinks, alibi;
    float softcap;
} shard_case;

/* Runs one paged call on the reference: `seqs` sequences of seq_len each with M_each query tokens,
 * every one reading block-table row `row` (pages_in_row entries), Q rows q (tokens = seqs x
 * M_each), into out [tokens][hq][D] and lse [tokens][hq]. */
static void paged_call(const shard_case *sc, int32_t seqs, int32_t seq_len, int32_t M_each, const int32_t *row,
                       int32_t pages_in_row, int32_t num_pages, int32_t window, bool with_sinks, const void *q,
                       const void *kc, const void *vc, const float *sinks, const float *slopes, void *out, float *lse)
{
    const int32_t tokens = seqs * M_each;
    r35a_paged_attention_desc d;
    r35a_paged_attention_desc_init(&d, sc->dt, seqs, tokens, M_each, seq_len, sc->hq, sc->hkv, sc->D, sc->B,
                                   num_pages);
    d.block_table_stride = pages_in_row;
    d.window = window;
    d.logit_softcap = sc->softcap;
    d.use_alibi = sc->alibi;
    d.use_sinks = with_sinks;
    d.use_lse = 1;
    int32_t *seq_lens = malloc(sizeof(int32_t) * (size_t)seqs), *qsl = malloc(sizeof(int32_t) * ((size_t)seqs + 1));
    int32_t *table = malloc(sizeof(int32_t) * (size_t)seqs * (size_t)pages_in_row);
    for (int32_t s = 0; s < seqs; ++s) {
        seq_lens[s] = seq_len;
        qsl[s] = s * M_each;
        memcpy(table + (size_t)s * pages_in_row, row, sizeof(int32_t) * (size_t)pages_in_row);
    }
    qsl[seqs] = tokens;
    r35a_paged_attention_args a;
    memset(&a, 0, sizeof a);
    a.struct_size = sizeof a;
    a.q = q;
    a.k_cache = kc;
    a.v_cache = vc;
    a.out = out;
    a.seq_lens = seq_lens;
    a.query_start_loc = qsl;
    a.block_table = table;
    a.alibi_slopes = sc->alibi ? slopes : NULL;
    a.sinks = with_sinks ? sinks : NULL;
    a.lse = lse;
    r35a_plan *plan = NULL;
    r35a_status st = r35a_paged_attention_plan(g_ctx, &d, &plan);
    if (st == R35A_OK)
        st = r35a_paged_attention_run(g_ctx, plan, &a, NULL, 0, NULL);
    if (st != R35A_OK)
        printf("FAIL paged call: %s \"%s\"\n", r35a_status_string(st), r35a_last_error_detail());
    assert_int_equal(st, R35A_OK);
    r35a_plan_destroy(plan);
    free(seq_lens);
    free(qsl);
    free(table);
}

/* One case: the unsharded call, then R shards at page boundaries merged; returns the errors. */
static void run_shard_case(const shard_case *sc, tu_rng *rng, double *o_err, double *lse_err)
{
    const int32_t hq = sc->hq, D = sc->D, B = sc->B, L = sc->L, M = sc->M, R = sc->R;
    const int32_t P = (L + B - 1) / B, num_pages = P + 3;
    const size_t es = tu_dtype_size(sc->dt), cache_elems = (size_t)num_pages * sc->hkv * B * D;
    void *kc = malloc(cache_elems * es), *vc = malloc(cache_elems * es), *q = malloc((size_t)M * hq * D * es);
    for (size_t i = 0; i < cache_elems; ++i) {
        tu_store(sc->dt, kc, i, tu_sym(rng));
        tu_store(sc->dt, vc, i, tu_sym(rng) + 0.3);
    }
    for (size_t i = 0; i < (size_t)M * hq * D; ++i)
        tu_store(sc->dt, q, i, 2.0 * tu_sym(rng));
    float *sinks = malloc(sizeof(float) * (size_t)hq), *slopes = malloc(sizeof(float) * (size_t)hq);
    for (int32_t h = 0; h < hq; ++h) {
        sinks[h] = (float)(3.0 * tu_sym(rng));
        slopes[h] = (float)(0.05 * tu_unit(rng));
    }
    int32_t *row = malloc(sizeof(int32_t) * (size_t)P);
    for (int32_t i = 0; i < P; ++i) /* shuffled physical pages */
        row[i] = i;
    for (int32_t i = P - 1; i > 0; --i) {
        int32_t j = tu_range(rng, 0, i), t = row[i];
        row[i] = row[j];
        row[j] = t;
    }
    /* the cuts: R-1 distinct page boundaries in 1..(L-M)/B (the last shard holds the M query
     * positions; L >= R x B + M makes room), sorted */
    const int32_t max_cut = (L - M) / B < P - 1 ? (L - M) / B : P - 1;
    int32_t cut[5];
    cut[0] = 0;
    cut[R] = P;
    for (int32_t r = 1; r < R; ++r) {
        for (;;) {
            int32_t c = tu_range(rng, 1, max_cut), dup = 0;
            for (int32_t x = 1; x < r; ++x)
                dup |= cut[x] == c;
            if (!dup) {
                cut[r] = c;
                break;
            }
        }
    }
    for (int32_t r = 1; r < R; ++r) /* insertion sort */
        for (int32_t x = r; x > 1 && cut[x - 1] > cut[x]; --x) {
            int32_t t = cut[x];
            cut[x] = cut[x - 1];
            cut[x - 1] = t;
        }
    /* a window whose edge is a shard boundary: the shards before it are left out */
    int32_t first_shard = 0, window = 0;
    if (sc->window) {
        first_shard = tu_range(rng, 0, R - 1);
        window = L - cut[first_shard] * B;
    }

    const size_t rows = (size_t)M * hq;
    void *ref = malloc(rows * D * es);
    float *ref_lse = malloc(sizeof(float) * rows);
    paged_call(sc, 1, L, M, row, P, num_pages, window, sc->sinks, q, kc, vc, sinks, slopes, ref, ref_lse);

    const int32_t used = R - first_shard;
    void *parts = malloc((size_t)used * rows * D * es);
    float *parts_lse = malloc(sizeof(float) * (size_t)used * rows);
    tu_poison(parts, (size_t)used * rows * D * es);
    for (int32_t r = first_shard; r < R; ++r) {
        const int32_t a = cut[r] * B, b = r == R - 1 ? L : cut[r + 1] * B, k = r - first_shard;
        /* sinks on one shard: with ALiBi the last one (an earlier shard's LSE is corrected for the
         * ALiBi shift below, which a raw sink logit does not have); else any, here the first used */
        const bool last = r == R - 1;
        const bool with_sinks = sc->sinks && (sc->alibi ? last : r == first_shard);
        void *out = (uint8_t *)parts + (size_t)k * rows * D * es;
        float *lse = parts_lse + (size_t)k * rows;
        /* the last shard keeps the query tokens at its end (its window: the call's); an earlier
         * one is seen whole by every row: one M = 1 sequence per query token, no window */
        if (last)
            paged_call(sc, 1, b - a, M, row + cut[r], cut[R] - cut[r], num_pages, window ? window : 0,
                       with_sinks, q, kc, vc, sinks, slopes, out, lse);
        else
            paged_call(sc, M, b - a, 1, row + cut[r], cut[r + 1] - cut[r], num_pages, 0, with_sinks, q, kc, vc, sinks,
                       slopes, out, lse);
        if (sc->alibi && !last) /* ALiBi: the shard's logits are higher by slope x (p + 1 - b) */
            for (int32_t i = 0; i < M; ++i)
                for (int32_t h = 0; h < hq; ++h)
                    lse[(size_t)i * hq + h] -= slopes[h] * (float)((L - M + i) + 1 - b);
    }
    void *merged = malloc(rows * D * es);
    float *merged_lse = malloc(sizeof(float) * rows);
    tu_poison(merged, rows * D * es);
    r35a_merge_states_desc md;
    r35a_merge_states_desc_init(&md, sc->dt, used, M, hq, D);
    md.use_out_lse = 1;
    r35a_merge_states_args ma = {sizeof ma, parts, parts_lse, merged, merged_lse};
    assert_int_equal(run_merge(&md, &ma), R35A_OK);

    double omax = 1e-30, oe = 0.0, le = 0.0;
    for (size_t i = 0; i < rows * D; ++i) {
        const double r = tu_load(sc->dt, ref, i), g = tu_load(sc->dt, merged, i);
        omax = fmax(omax, fabs(r));
        oe = isnan(g) ? INFINITY : fmax(oe, fabs(g - r));
    }
    for (size_t i = 0; i < rows; ++i)
        le = isnan(merged_lse[i]) ? INFINITY
                                  : fmax(le, fabs((double)merged_lse[i] - ref_lse[i]) / fmax(1.0, fabs(ref_lse[i])));
    *o_err = oe / omax;
    *lse_err = le;
    free(kc);
    free(vc);
    free(q);
    free(sinks);
    free(slopes);
    free(row);
    free(ref);
    free(ref_lse);
    free(parts);
    free(parts_lse);
    free(merged);
    free(merged_lse);
}

static void test_sharded_vs_unsharded(void **state)
{
    (void)state;
    const int cases = tu_scaled(48);
    double worst_o[3] = {0}, worst_l[3] = {0};
    for (int k = 0; k < cases; ++k) {
        if (!tu_case_selected("sharded", k))
            continue;
        tu_rng rng;
        tu_rng_init(&rng, tu_case_seed("sharded", k));
        shard_case sc;
        memset(&sc, 0, sizeof sc);
        sc.dt = k_dtypes[k % 3];
        sc.hkv = tu_range(&rng, 1, 3);
        sc.hq = sc.hkv * tu_range(&rng, 1, 4);
        sc.D = tu_chance(&rng, 0.3) ? tu_range(&rng, 1, 150) : 64;
        sc.B = tu_chance(&rng, 0.5) ? 16 : tu_range(&rng, 1, 40);
        sc.R = tu_range(&rng, 2, 4);
        sc.M = (k / 3) % 2 ? tu_range(&rng, 2, 5) : 1;
        sc.L = tu_range(&rng, sc.R * sc.B + sc.M, sc.R * sc.B + sc.M + 400);
        sc.sinks = tu_chance(&rng, 0.4);
        sc.alibi = tu_chance(&rng, 0.3);
        sc.softcap = tu_chance(&rng, 0.3) ? 5.0f : 0.0f;
        sc.window = sc.M == 1 && tu_chance(&rng, 0.4);   /* a window edge on a boundary for every row: M = 1 */
        double oe, le;
        run_shard_case(&sc, &rng, &oe, &le);
        const int di = k % 3;
        worst_o[di] = fmax(worst_o[di], oe);
        worst_l[di] = fmax(worst_l[di], le);
        /* the parts are rounded to the dtype before the merge and the merge rounds again: twice the
         * dtype's tolerance against the unsharded call's one rounding */
        const double otol = 2.0 * tol_of(sc.dt);
        if (!(oe <= otol) || !(le <= (sc.dt == R35A_DTYPE_F32 ? 1e-5 : 1e-4)))
            printf("FAIL sharded:%d %s hq=%d hkv=%d D=%d B=%d L=%d M=%d R=%d sinks=%d alibi=%d softcap=%g window=%d: "
                   "O error %.3g, LSE error %.3g (seed 0x%016llx)\n", k, tu_dtype_name(sc.dt), (int)sc.hq, (int)sc.hkv,
                   (int)sc.D, (int)sc.B, (int)sc.L, (int)sc.M, (int)sc.R, (int)sc.sinks, (int)sc.alibi,
                   (double)sc.softcap, (int)sc.window, oe, le, (unsigned long long)tu_seed());
        assert_true(oe <= otol);
        assert_true(le <= (sc.dt == R35A_DTYPE_F32 ? 1e-5 : 1e-4));
    }
    printf("[test_merge] %d sharded calls (R 2..4, decode and M 2..5, sinks/ALiBi/softcap/window) merged = "
           "unsharded: worst O error f16 %.2g bf16 %.2g f32 %.2g, LSE %.2g %.2g %.2g\n",
           cases, worst_o[0], worst_o[1], worst_o[2], worst_l[0], worst_l[1], worst_l[2]);
}

/* ------------------------------------------------------------------------------------------ */
/* bad input                                                                                    */

static void expect(r35a_status got, r35a_status want, const char *field)
{
    const char *detail = r35a_last_error_detail();
    if (got != want || strstr(detail, field) == NULL)
        printf("FAIL bad input %s: got %s \"%s\", want %s naming it\n", field, r35a_status_string(got), detail,
               r35a_status_string(want));
    assert_int_equal(got, want);
    assert_non_null(strstr(detail, field));
}

static void test_merge_bad_input(void **state)
{
    (void)state;
    r35a_merge_states_desc good;
    r35a_merge_states_desc_init(&good, R35A_DTYPE_F16, 2, 3, 2, 16);
    r35a_plan *plan = NULL;
    expect(r35a_merge_states_plan(g_ctx, NULL, &plan), R35A_ERR_NULL_POINTER, "merge_states_desc");
    assert_null(plan);
#define BAD_DESC(mutate, status, field)                                                                \
    do {                                                                                               \
        r35a_merge_states_desc d = good;                                                               \
        mutate;                                                                                        \
        expect(r35a_merge_states_plan(g_ctx, &d, &plan), status, field);                               \
        assert_null(plan);                                                                             \
    } while (0)
    BAD_DESC(d.struct_size = sizeof d - 8, R35A_ERR_STRUCT_SIZE, "merge_states_desc.struct_size");
    BAD_DESC(d.dtype = (r35a_dtype)99, R35A_ERR_UNKNOWN_DTYPE, "merge_states_desc.dtype");
    BAD_DESC(d.dtype = R35A_DTYPE_FP8_E4M3, R35A_ERR_INVALID_ARGUMENT, "merge_states_desc.dtype");
    BAD_DESC(d.num_parts = 0, R35A_ERR_INVALID_ARGUMENT, "merge_states_desc.num_parts");
    BAD_DESC(d.num_tokens = -1, R35A_ERR_INVALID_ARGUMENT, "merge_states_desc.num_tokens");
    BAD_DESC(d.num_heads = 0, R35A_ERR_INVALID_ARGUMENT, "merge_states_desc.num_heads");
    BAD_DESC(d.head_size = 0, R35A_ERR_INVALID_ARGUMENT, "merge_states_desc.head_size");
    BAD_DESC(d.head_size = 1025, R35A_ERR_INVALID_ARGUMENT, "merge_states_desc.head_size");
    BAD_DESC(d.use_out_lse = 2, R35A_ERR_INVALID_ARGUMENT, "merge_states_desc.use_out_lse");
    BAD_DESC(d.part_stride = -1, R35A_ERR_INVALID_ARGUMENT, "merge_states_desc.part_stride");
    BAD_DESC(d.lse_head_stride = -3, R35A_ERR_INVALID_ARGUMENT, "merge_states_desc.lse_head_stride");
    BAD_DESC(d.out_lse_token_stride = -1, R35A_ERR_INVALID_ARGUMENT, "merge_states_desc.out_lse_token_stride");
    BAD_DESC(d.part_stride = INT64_MAX / 2, R35A_ERR_SIZE_OVERFLOW, "merge_states_desc.part_stride");
    BAD_DESC(d.o_token_stride = INT64_MAX / 2, R35A_ERR_SIZE_OVERFLOW, "merge_states_desc.o_token_stride");
#undef BAD_DESC

    /* args: each failing run writes nothing */
    good.use_out_lse = 1;
    assert_int_equal(r35a_merge_states_plan(g_ctx, &good, &plan), R35A_OK);
    uint16_t parts[2 * 3 * 2 * 16], out[3 * 2 * 16];
    float lse[2 * 3 * 2], out_lse[3 * 2];
    memset(parts, 0, sizeof parts);
    memset(lse, 0, sizeof lse);
#define BAD_ARGS(mutate, status, field)                                                                \
    do {                                                                                               \
        r35a_merge_states_args a = {sizeof a, parts, lse, out, out_lse};                               \
        mutate;                                                                                        \
        tu_poison(out, sizeof out);                                                                    \
        tu_poison(out_lse, sizeof out_lse);                                                            \
        expect(r35a_merge_states_run(g_ctx, plan, &a, NULL, 0, NULL), status, field);                  \
        assert_int_equal(tu_first_unpoisoned(out, sizeof out), (size_t)-1);                            \
        assert_int_equal(tu_first_unpoisoned(out_lse, sizeof out_lse), (size_t)-1);                    \
    } while (0)
    expect(r35a_merge_states_run(g_ctx, plan, NULL, NULL, 0, NULL), R35A_ERR_NULL_POINTER, "merge_states_args");
    BAD_ARGS(a.struct_size = 8, R35A_ERR_STRUCT_SIZE, "merge_states_args.struct_size");
    BAD_ARGS(a.parts_o = NULL, R35A_ERR_NULL_POINTER, "merge_states_args.parts_o");
    BAD_ARGS(a.parts_lse = NULL, R35A_ERR_NULL_POINTER, "merge_states_args.parts_lse");
    BAD_ARGS(a.out = NULL, R35A_ERR_NULL_POINTER, "merge_states_args.out");
    BAD_ARGS(a.out_lse = NULL, R35A_ERR_NULL_POINTER, "merge_states_args.out_lse");
    BAD_ARGS(a.out = (void *)a.parts_o, R35A_ERR_INVALID_ARGUMENT, "merge_states_args.out");
    BAD_ARGS(a.out_lse = (float *)a.parts_lse, R35A_ERR_INVALID_ARGUMENT, "merge_states_args.out_lse");
#undef BAD_ARGS
    r35a_merge_states_args a = {sizeof a, parts, lse, out, out_lse};
    assert_int_equal(r35a_merge_states_run(g_ctx, plan, &a, NULL, 0, NULL), R35A_OK);
    /* a merge plan is not a paged plan, and the other way round */
    r35a_paged_attention_args pa;
    memset(&pa, 0, sizeof pa);
    pa.struct_size = sizeof pa;
    expect(r35a_paged_attention_run(g_ctx, plan, &pa, NULL, 0, NULL), R35A_ERR_PLAN_MISMATCH, "plan");
    r35a_plan_destroy(plan);

    /* use_out_lse 0: out_lse must be NULL */
    good.use_out_lse = 0;
    assert_int_equal(r35a_merge_states_plan(g_ctx, &good, &plan), R35A_OK);
    expect(r35a_merge_states_run(g_ctx, plan, &a, NULL, 0, NULL), R35A_ERR_INVALID_ARGUMENT,
           "merge_states_args.out_lse");
    a.out_lse = NULL;
    assert_int_equal(r35a_merge_states_run(g_ctx, plan, &a, NULL, 0, NULL), R35A_OK);
    r35a_plan_destroy(plan);
}

/* The LSE fields of both attention ops: flag, strides, and the args pointer against the plan's
 * flag; 0.2.0-sized structs (no LSE fields) still plan and run. */
static void test_lse_bad_input(void **state)
{
    (void)state;
    r35a_paged_attention_desc pd;
    r35a_paged_attention_desc_init(&pd, R35A_DTYPE_F32, 1, 1, 1, 4, 2, 1, 8, 4, 1);
    assert_int_equal(pd.lse_token_stride, 2);
    assert_int_equal(pd.lse_head_stride, 1);
    r35a_plan *plan = NULL;
    r35a_paged_attention_desc d = pd;
    d.use_lse = 2;
    expect(r35a_paged_attention_plan(g_ctx, &d, &plan), R35A_ERR_INVALID_ARGUMENT, "paged_attention_desc.use_lse");
    d = pd;
    d.lse_token_stride = -1;
    expect(r35a_paged_attention_plan(g_ctx, &d, &plan), R35A_ERR_INVALID_ARGUMENT,
           "paged_attention_desc.lse_token_stride");
    d = pd;
    d.lse_head_stride = INT64_MAX;
    expect(r35a_paged_attention_plan(g_ctx, &d, &plan), R35A_ERR_SIZE_OVERFLOW, "paged_attention_desc.lse_head_stride");

    float q[16], kv[4 * 8], out[16], lse[2];
    for (int i = 0; i < 16; ++i)
        q[i] = 0.1f * (float)i;
    for (int i = 0; i < 32; ++i)
        kv[i] = 0.05f * (float)(i % 7);
    int32_t seq_lens[1] = {4}, qsl[2] = {0, 1}, table[1] = {0};
    r35a_paged_attention_args a;
    memset(&a, 0, sizeof a);
    a.struct_size = sizeof a;
    a.q = q;
    a.k_cache = kv;
    a.v_cache = kv;
    a.out = out;
    a.seq_lens = seq_lens;
    a.query_start_loc = qsl;
    a.block_table = table;
    /* without use_lse, an lse pointer is refused (the plan writes none) */
    assert_int_equal(r35a_paged_attention_plan(g_ctx, &pd, &plan), R35A_OK);
    a.lse = lse;
    expect(r35a_paged_attention_run(g_ctx, plan, &a, NULL, 0, NULL), R35A_ERR_INVALID_ARGUMENT,
           "paged_attention_args.lse");
    /* a 0.2.0-sized args struct: no lse field, runs */
    a.struct_size = offsetof(r35a_paged_attention_args, lse);
    assert_int_equal(r35a_paged_attention_run(g_ctx, plan, &a, NULL, 0, NULL), R35A_OK);
    r35a_plan_destroy(plan);
    /* a 0.2.0-sized descriptor (its tail padding holding garbage) plans without LSE */
    d = pd;
    memset((uint8_t *)&d + offsetof(r35a_paged_attention_desc, kv_scale_per_head) + sizeof(int32_t), 0x5A,
           offsetof(r35a_paged_attention_desc, lse_token_stride) - offsetof(r35a_paged_attention_desc, kv_scale_per_head) -
               sizeof(int32_t));
    d.struct_size = offsetof(r35a_paged_attention_desc, lse_token_stride);
    assert_int_equal(r35a_paged_attention_plan(g_ctx, &d, &plan), R35A_OK);
    r35a_plan_destroy(plan);
    /* with use_lse the pointer is required, and the LSE of the row comes out */
    d = pd;
    d.use_lse = 1;
    assert_int_equal(r35a_paged_attention_plan(g_ctx, &d, &plan), R35A_OK);
    a.struct_size = sizeof a;
    a.lse = NULL;
    expect(r35a_paged_attention_run(g_ctx, plan, &a, NULL, 0, NULL), R35A_ERR_NULL_POINTER, "paged_attention_args.lse");
    a.lse = lse;
    lse[0] = lse[1] = NAN;
    assert_int_equal(r35a_paged_attention_run(g_ctx, plan, &a, NULL, 0, NULL), R35A_OK);
    assert_true(isfinite(lse[0]) && isfinite(lse[1]));
    r35a_plan_destroy(plan);

    r35a_varlen_attention_desc vd;
    r35a_varlen_attention_desc_init(&vd, R35A_DTYPE_F32, 1, 2, 2, 1, 1, 8);
    r35a_varlen_attention_desc v = vd;
    v.use_lse = 3;
    expect(r35a_varlen_attention_plan(g_ctx, &v, &plan), R35A_ERR_INVALID_ARGUMENT, "varlen_attention_desc.use_lse");
    v = vd;
    v.lse_head_stride = -2;
    expect(r35a_varlen_attention_plan(g_ctx, &v, &plan), R35A_ERR_INVALID_ARGUMENT,
           "varlen_attention_desc.lse_head_stride");
    v = vd;
    v.use_lse = 1;
    assert_int_equal(r35a_varlen_attention_plan(g_ctx, &v, &plan), R35A_OK);
    int32_t cu[2] = {0, 2};
    r35a_varlen_attention_args va = {sizeof va, q, kv, kv, out, cu, NULL, NULL};
    expect(r35a_varlen_attention_run(g_ctx, plan, &va, NULL, 0, NULL), R35A_ERR_NULL_POINTER,
           "varlen_attention_args.lse");
    va.lse = lse;
    assert_int_equal(r35a_varlen_attention_run(g_ctx, plan, &va, NULL, 0, NULL), R35A_OK);
    /* token 0 sees key 0 only (causal off: both keys); either way a finite LSE */
    assert_true(isfinite(lse[0]) && isfinite(lse[1]));
    r35a_plan_destroy(plan);
}

static int group_setup(void **state)
{
    (void)state;
    r35a_context_options opt;
    r35a_context_options_init(&opt);
    opt.backend = R35A_BACKEND_REFERENCE;
    return r35a_context_create(&opt, &g_ctx) == R35A_OK ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    r35a_context_destroy(g_ctx);
    g_ctx = NULL;
    return 0;
}

int main(void)
{
    tu_begin("test_merge");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge_random),         cmocka_unit_test(test_merge_nan),
        cmocka_unit_test(test_sharded_vs_unsharded), cmocka_unit_test(test_merge_bad_input),
        cmocka_unit_test(test_lse_bad_input),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
