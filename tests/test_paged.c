/*
 * test_paged.c - paged attention against the float64 oracle: randomized sweeps over head sizes,
 * GQA ratios, query lengths (decode, speculative decode, causal spans), page sizes, partial
 * pages, sliding windows with garbage in unreached block-table entries, padding sequences,
 * mixed batches, dtypes, softcap, ALiBi, attention sinks, 8-bit KV caches (fp8 e4m3, int8, scales
 * per tensor or per kv head) and their combinations, padded and NHD strides, 0.1.0 struct sizes,
 * and plan reuse. 8-bit caches are compared with the oracle on the same stored bytes (it decodes
 * and scales them itself), so the tolerance is the Q/O dtype's as for 16-bit caches.
 *
 * Runs on a reference context by default; R35A_TEST_BACKEND=auto|gpu selects another backend
 * (host pointers only for now: a backend that needs device memory is skipped).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "test_util.h"

static r35a_context *g_ctx;

/* ------------------------------------------------------------------------------------------ */
/* case generation helpers                                                                      */

static const int32_t k_page_sizes[] = {1, 16, 32, 528, 544, 784, 1056};

static r35a_dtype random_dtype(tu_rng *rng)
{
    uint32_t r = tu_below(rng, 20);
    return r < 9 ? R35A_DTYPE_F16 : r < 16 ? R35A_DTYPE_BF16 : R35A_DTYPE_F32;
}

static int32_t random_page_size(tu_rng *rng)
{
    if (tu_chance(rng, 0.2)) {
        return tu_range(rng, 2, 1200);
    }
    return tu_pick(rng, k_page_sizes, (int)(sizeof k_page_sizes / sizeof k_page_sizes[0]));
}

static int32_t random_head_size(tu_rng *rng)
{
    static const int32_t sizes[] = {32, 64, 64, 72, 80, 96, 128, 128, 128, 256, 256, 512};
    if (tu_chance(rng, 0.1)) {
        return tu_range(rng, 1, 200);
    }
    return tu_pick(rng, sizes, (int)(sizeof sizes / sizeof sizes[0]));
}

static void random_kv_layout(kv_layout *l, tu_rng *rng)
{
    l->nhd = tu_chance(rng, 0.35);
    if (tu_chance(rng, 0.3)) {
        l->pad[0] = tu_range(rng, 0, 9);
        l->pad[1] = tu_range(rng, 0, 33);
        l->pad[2] = tu_range(rng, 0, 100);
    }
}

/* Layout, strides, block table and value distributions at random. */
static void random_extras(paged_spec *s, tu_rng *rng)
{
    /* the LSE output (0.3) on a share of every group's cases: the oracle's LSE, gaps poisoned */
    if (tu_chance(rng, 0.35)) {
        s->use_lse = true;
        s->lse_pad = tu_chance(rng, 0.5) ? tu_range(rng, 1, 3) : 0;
    }
    random_kv_layout(&s->k_layout, rng);
    if (tu_chance(rng, 0.7)) {
        s->v_layout = s->k_layout;
    } else {
        random_kv_layout(&s->v_layout, rng);
    }
    if (tu_chance(rng, 0.3)) {
        s->q_head_pad = tu_range(rng, 1, 9);
        s->q_token_pad = tu_range(rng, 0, 17);
    }
    if (tu_chance(rng, 0.3)) {
        s->o_head_pad = tu_range(rng, 1, 9);
        s->o_token_pad = tu_range(rng, 0, 17);
    }
    if (tu_chance(rng, 0.3)) {
        s->bt_pad = tu_range(rng, 1, 5);
    }
    if (tu_chance(rng, 0.3)) {
        s->extra_pages = tu_range(rng, 1, 6);
    }
    s->shuffle_pages = tu_chance(rng, 0.7);
    s->garbage_unreached = tu_chance(rng, 0.7);
    if (tu_chance(rng, 0.2)) {
        s->max_query_len_slack = tu_range(rng, 1, 5);
        s->max_seq_len_slack = tu_range(rng, 1, 100);
    }
    static const int32_t amps[] = {1, 1, 2, 4, 8};
    s->q_amp = tu_pick(rng, amps, 5);
    if (tu_chance(rng, 0.3)) {
        s->v_offset = 2.0 * tu_sym(rng);
    }
    if (tu_chance(rng, 0.15)) {
        s->softmax_scale = (float)(0.02 + tu_unit(rng));
    }
}

/* Sequence with context length in [min_L, max_L] and M queries (M <= L). */
static void add_seq(paged_spec *s, tu_rng *rng, int32_t M, int32_t min_L, int32_t max_L)
{
    int32_t lo = min_L > M ? min_L : M;
    int32_t hi = max_L > lo ? max_L : lo;
    paged_spec_add_seq(s, tu_range(rng, lo, hi), M);
}

/* num_kv_heads in {1, 2, 4, 8}, group size 1..16, at most 64 query heads. */
static void random_gqa(tu_rng *rng, int32_t *hq, int32_t *hkv)
{
    static const int32_t kv[] = {1, 1, 2, 4, 8};
    const int32_t G = tu_range(rng, 1, 16);
    *hkv = tu_pick(rng, kv, 5);
    while (*hkv > 1 && *hkv * G > 64) {
        *hkv /= 2;
    }
    *hq = *hkv * G;
}

typedef void (*paged_gen)(paged_spec *s, tu_rng *rng, int index);

/* Keeps a case within the suite's time and memory budget (fewer heads first) and an f32 case
 * within the logit range where TU_TOL_F32 holds (fp32 logits of magnitude x carry ~x * 2^-24
 * absolute error, which the softmax turns into relative output error). */
static void fit_case(paged_spec *s)
{
    while (paged_spec_cache_elems(s) > 6e6 || paged_spec_cost(s) > 1.5e8) {
        int32_t G = s->num_q_heads / s->num_kv_heads;
        if (s->num_kv_heads > 1) {
            s->num_kv_heads /= 2;
        } else if (G > 1) {
            G /= 2;
        } else {
            break;
        }
        s->num_q_heads = s->num_kv_heads * G;
    }
    if (s->dtype == R35A_DTYPE_F32) {
        const double sd = paged_spec_logit_std(s);
        if (sd > 2.0) {
            s->q_amp *= 2.0 / sd;
        }
    }
}

/* Runs count cases of a group; each case draws its parameters and values from its own seed. */
static int run_group(const char *group, int count, paged_gen gen)
{
    if (!g_ctx) {
        skip();
    }
    int failures = 0, ran = 0;
    const clock_t t0 = clock();
    for (int i = 0; i < count; ++i) {
        if (!tu_case_selected(group, i)) {
            continue;
        }
        tu_rng rng;
        tu_rng_init(&rng, tu_case_seed(group, i));
        paged_spec s;
        gen(&s, &rng, i);
        fit_case(&s);
        if (!paged_run_case(g_ctx, &s, &rng, group, i)) {
            failures++;
        }
        ran++;
    }
    printf("[test_paged] %-12s %4d cases, %d failed (%.2f s cpu)\n", group, ran, failures,
           (double)(clock() - t0) / CLOCKS_PER_SEC);
    return failures;
}

/* Sinks around the logits' scale (|s| is a few units here): below, inside and above them, so the
 * sink takes anything from nothing to most of a row's weight; a third of the heads -inf sometimes.
 * Never so far above that a row's output falls below the f16 normal range (the relative metric
 * would then measure f16 subnormal rounding). */
static void random_sinks(paged_spec *s, tu_rng *rng)
{
    static const int32_t centers[] = {-20, -3, 0, 0, 2, 5};
    s->use_sinks = 1;
    s->sink_center = tu_pick(rng, centers, 6);
    s->sink_amp = tu_chance(rng, 0.2) ? 0.0 : 3.0;
    s->sink_some_neg_inf = tu_chance(rng, 0.3);
}

/* Per-token-head scales: padded scale tensors, and sometimes keys whose real K and V span
 * decades (their scales with them). */
static void random_token_scales(paged_spec *s, tu_rng *rng)
{
    s->kv_scale_per_head = R35A_KV_SCALE_PER_TOKEN_HEAD;
    s->scale_pad = (int32_t)tu_below(rng, 4);
    s->scale_decades = tu_chance(rng, 0.4) ? (tu_chance(rng, 0.5) ? 3.0 : 1.0) : 0.0;
}

/* fp8 or int8, per tensor, per kv head or per token and kv head. */
static void random_kv8(paged_spec *s, tu_rng *rng)
{
    s->kv_dtype = tu_chance(rng, 0.5) ? R35A_DTYPE_FP8_E4M3 : R35A_DTYPE_INT8;
    s->kv_scale_per_head = (int32_t)tu_below(rng, 3);
    if (s->kv_scale_per_head == R35A_KV_SCALE_PER_TOKEN_HEAD)
        random_token_scales(s, rng);
}

/* ------------------------------------------------------------------------------------------ */
/* groups                                                                                       */

static const int32_t k_head_sizes[] = {1, 3, 8, 32, 33, 64, 72, 80, 96, 100, 128, 160, 256, 512, 1024};
#define N_HEAD_SIZES ((int)(sizeof k_head_sizes / sizeof k_head_sizes[0]))

static void gen_head_size(paged_spec *s, tu_rng *rng, int index)
{
    const r35a_dtype dtypes[] = {R35A_DTYPE_F16, R35A_DTYPE_BF16, R35A_DTYPE_F32};
    const int32_t D = k_head_sizes[index / 3];
    const int32_t hkv = tu_range(rng, 1, 2), hq = hkv * (int32_t)(1u << tu_below(rng, 3));
    static const int32_t pages[] = {1, 7, 16, 32, 528};
    paged_spec_init(s, dtypes[index % 3], hq, hkv, D, tu_pick(rng, pages, 5));
    random_extras(s, rng);
    const int32_t max_L = D >= 512 ? 300 : 700;
    for (int32_t n = tu_range(rng, 1, 3); n > 0; --n) {
        add_seq(s, rng, tu_range(rng, 1, 4), 1, max_L);
    }
}

static void test_head_sizes(void **state)
{
    (void)state;
    assert_int_equal(run_group("head_size", N_HEAD_SIZES * 3, gen_head_size), 0);
}

/* GQA group sizes 1..16 for 1..3 kv heads; M 1..8 (all query rows of a kv head in one tile). */
static void gen_gqa(paged_spec *s, tu_rng *rng, int index)
{
    const int32_t G = index % 16 + 1;
    const int32_t hkv = index < 16 ? 1 : tu_range(rng, 2, 3);
    const int32_t D = tu_chance(rng, 0.5) ? 64 : 128;
    paged_spec_init(s, random_dtype(rng), hkv * G, hkv, D, random_page_size(rng));
    random_extras(s, rng);
    for (int32_t n = tu_range(rng, 1, 2); n > 0; --n) {
        add_seq(s, rng, tu_range(rng, 1, 8), 1, 600);
    }
}

static void test_gqa(void **state)
{
    (void)state;
    assert_int_equal(run_group("gqa", 32, gen_gqa), 0);
}

/* Query lengths: decode, speculative decode (2..8), longer causal spans; L = M (pure prefill) on
 * even indices. */
static void gen_query_len(paged_spec *s, tu_rng *rng, int index)
{
    static const int32_t Ms[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 31, 40, 64};
    const int32_t M = Ms[(index / 2) % 15];
    int32_t hq, hkv;
    random_gqa(rng, &hq, &hkv);
    if (M > 16 && hq > 16) {
        hq = hkv = tu_range(rng, 1, 4);
    }
    static const int32_t Ds[] = {64, 128, 80};
    paged_spec_init(s, random_dtype(rng), hq, hkv, tu_pick(rng, Ds, 3), random_page_size(rng));
    random_extras(s, rng);
    if (index % 2 == 0) {
        paged_spec_add_seq(s, M, M);
    } else {
        add_seq(s, rng, M, M + 1, M + 900);
    }
    if (tu_chance(rng, 0.5)) {
        add_seq(s, rng, tu_range(rng, 1, M), 1, 500);
    }
}

static void test_query_lens(void **state)
{
    (void)state;
    assert_int_equal(run_group("query_len", 30, gen_query_len), 0);
}

/* Page sizes, each with L just below, at, above a page boundary, at two pages, a partial third
 * page and a random length. */
static void gen_page_size(paged_spec *s, tu_rng *rng, int index)
{
    static const int32_t Bs[] = {1, 16, 32, 528, 544, 784, 1056, 0 /* random */, 15, 17, 48};
    int32_t B = Bs[index / 6];
    if (B == 0) {
        B = tu_range(rng, 2, 1500);
    }
    int32_t L;
    switch (index % 6) {
    case 0: L = B > 1 ? B - 1 : 1; break;
    case 1: L = B; break;
    case 2: L = B + 1; break;
    case 3: L = 2 * B; break;
    case 4: L = 3 * B - tu_range(rng, 1, B > 1 ? B - 1 : 1); break;
    default: L = tu_range(rng, 1, 4096); break;
    }
    if (B == 1 && L > 600) {
        L = tu_range(rng, 1, 600);
    }
    int32_t hq, hkv;
    random_gqa(rng, &hq, &hkv);
    static const int32_t Ds[] = {64, 128, 256};
    paged_spec_init(s, random_dtype(rng), hq, hkv, tu_pick(rng, Ds, 3), B);
    random_extras(s, rng);
    int32_t M = tu_range(rng, 1, L < 8 ? L : 8);
    paged_spec_add_seq(s, L, M);
    if (tu_chance(rng, 0.5)) {
        add_seq(s, rng, tu_range(rng, 1, 4), 1, 3 * B + 3);
    }
}

static void test_page_sizes(void **state)
{
    (void)state;
    assert_int_equal(run_group("page_size", 11 * 6, gen_page_size), 0);
}

/* Sliding windows: 1, 2, below, at and above L, huge; the entries before the window's first page
 * hold invalid page ids (never read), as do those past the last page. */
static void gen_window(paged_spec *s, tu_rng *rng, int index)
{
    static const int32_t Bs[] = {16, 1, 32, 528, 0};
    int32_t B = Bs[(index / 7) % 5];
    if (B == 0) {
        B = tu_range(rng, 2, 100);
    }
    int32_t L = tu_range(rng, 1, B == 1 ? 500 : 3000);
    int32_t M = tu_range(rng, 1, L < 8 ? L : 8);
    if (tu_chance(rng, 0.2) && L >= 17) {
        M = 17;
    }
    int32_t W;
    switch (index % 7) {
    case 0: W = 1; break;
    case 1: W = 2; break;
    case 2: W = tu_range(rng, 1, L); break;
    case 3: W = L > 1 ? L - 1 : 1; break;
    case 4: W = L; break;
    case 5: W = L + tu_range(rng, 1, 50); break;
    default: W = 1 << 30; break;
    }
    int32_t hq, hkv;
    random_gqa(rng, &hq, &hkv);
    static const int32_t Ds[] = {64, 128, 256};
    paged_spec_init(s, random_dtype(rng), hq, hkv, tu_pick(rng, Ds, 3), B);
    random_extras(s, rng);
    s->window = W;
    s->garbage_unreached = true;
    paged_spec_add_seq(s, L, M);
    for (int32_t n = tu_range(rng, 0, 3); n > 0; --n) {
        add_seq(s, rng, tu_range(rng, 1, 8), 1, 2000);
    }
}

static void test_windows(void **state)
{
    (void)state;
    assert_int_equal(run_group("window", 7 * 5 * 2, gen_window), 0);
}

/* Padding sequences (L = 0, M = 0) first, last, between, alone; sequences with no queries. */
static void gen_padding(paged_spec *s, tu_rng *rng, int index)
{
    int32_t hq, hkv;
    random_gqa(rng, &hq, &hkv);
    paged_spec_init(s, random_dtype(rng), hq, hkv, tu_chance(rng, 0.5) ? 64 : 128,
                    random_page_size(rng));
    random_extras(s, rng);
    switch (index % 6) {
    case 0: /* padding first */
        paged_spec_add_seq(s, 0, 0);
        add_seq(s, rng, tu_range(rng, 1, 4), 1, 800);
        break;
    case 1: /* padding last, twice */
        add_seq(s, rng, tu_range(rng, 1, 8), 1, 800);
        paged_spec_add_seq(s, 0, 0);
        paged_spec_add_seq(s, 0, 0);
        break;
    case 2: /* alternating */
        for (int k = 0; k < 6; ++k) {
            if (k % 2) {
                paged_spec_add_seq(s, 0, 0);
            } else {
                add_seq(s, rng, tu_range(rng, 1, 4), 1, 500);
            }
        }
        break;
    case 3: /* only padding: no query rows at all */
        for (int32_t k = tu_range(rng, 1, 4); k > 0; --k) {
            paged_spec_add_seq(s, 0, 0);
        }
        break;
    case 4: /* context but no queries this step */
        add_seq(s, rng, 0, 1, 600);
        add_seq(s, rng, tu_range(rng, 1, 4), 1, 600);
        add_seq(s, rng, 0, 1, 600);
        break;
    default: /* one padding slot among many decodes */
        for (int32_t k = tu_range(rng, 3, 12); k > 0; --k) {
            if (tu_chance(rng, 0.25)) {
                paged_spec_add_seq(s, 0, 0);
            } else {
                add_seq(s, rng, 1, 1, 400);
            }
        }
        break;
    }
}

static void test_padding(void **state)
{
    (void)state;
    assert_int_equal(run_group("padding", 24, gen_padding), 0);
}

/* Mixed batches: M = 1, 4, 0 (L = 0) and 30 in one call (fast kernel and the portable path in
 * one call on GPU backends), then random mixes of up to 40 sequences. */
static void gen_mixed(paged_spec *s, tu_rng *rng, int index)
{
    int32_t hq, hkv;
    random_gqa(rng, &hq, &hkv);
    if (hq > 16) {
        hq = hkv * (16 / hkv);
    }
    static const int32_t Ds[] = {64, 128, 256, 96};
    paged_spec_init(s, random_dtype(rng), hq, hkv, tu_pick(rng, Ds, 4), random_page_size(rng));
    random_extras(s, rng);
    if (tu_chance(rng, 0.3)) {
        s->window = tu_range(rng, 1, 700);
    }
    if (index < 8) {
        int32_t order[4] = {1, 4, 0, 30};
        tu_shuffle_i32(rng, order, 4);
        for (int k = 0; k < 4; ++k) {
            if (order[k] == 0) {
                paged_spec_add_seq(s, 0, 0);
            } else {
                add_seq(s, rng, order[k], 1, 1200);
            }
        }
    } else {
        static const int32_t Ms[] = {0, 1, 1, 1, 2, 4, 8, 9, 30};
        for (int32_t n = tu_range(rng, 2, 40); n > 0; --n) {
            int32_t M = tu_pick(rng, Ms, 9);
            if (M == 0 && tu_chance(rng, 0.5)) {
                paged_spec_add_seq(s, 0, 0);
            } else {
                add_seq(s, rng, M, 1, 700);
            }
        }
    }
}

static void test_mixed_batches(void **state)
{
    (void)state;
    assert_int_equal(run_group("mixed", 24, gen_mixed), 0);
}

/* dtype x softcap x ALiBi x window. */
static void gen_features(paged_spec *s, tu_rng *rng, int index)
{
    const r35a_dtype dtypes[] = {R35A_DTYPE_F16, R35A_DTYPE_BF16, R35A_DTYPE_F32};
    static const float caps[] = {0.0f, 0.7f, 5.0f, 30.0f};
    int32_t hq, hkv;
    random_gqa(rng, &hq, &hkv);
    paged_spec_init(s, dtypes[index % 3], hq, hkv, random_head_size(rng), random_page_size(rng));
    random_extras(s, rng);
    s->logit_softcap = caps[(index / 3) % 4];
    s->use_alibi = (index / 12) % 2;
    if ((index / 24) % 2) {
        s->window = tu_range(rng, 1, 600);
        s->garbage_unreached = true;
    }
    if (s->logit_softcap > 0.0f) {
        s->q_amp = 8.0; /* logits large enough for the cap to bend them */
    }
    for (int32_t n = tu_range(rng, 1, 4); n > 0; --n) {
        add_seq(s, rng, tu_range(rng, 1, 8), 1, 1500);
    }
}

static void test_features(void **state)
{
    (void)state;
    assert_int_equal(run_group("features", 48, gen_features), 0);
}

/* Attention sinks: with windows (a window of 1 included: the sink then meets one key), GQA, M 1-8
 * and longer causal spans, partial pages, padding and mixed batches; every dtype. */
static void gen_sinks(paged_spec *s, tu_rng *rng, int index)
{
    const r35a_dtype dtypes[] = {R35A_DTYPE_F16, R35A_DTYPE_BF16, R35A_DTYPE_F32};
    int32_t hq, hkv;
    random_gqa(rng, &hq, &hkv);
    static const int32_t Ds[] = {64, 128, 80, 256, 33};
    paged_spec_init(s, dtypes[index % 3], hq, hkv, tu_pick(rng, Ds, 5), random_page_size(rng));
    random_extras(s, rng);
    random_sinks(s, rng);
    switch ((index / 3) % 4) {
    case 0: break;
    case 1: /* gpt-oss: a 128-key window */
        s->window = tu_chance(rng, 0.7) ? 128 : tu_range(rng, 1, 4);
        s->garbage_unreached = true;
        break;
    case 2: s->logit_softcap = 30.0f; s->use_alibi = tu_chance(rng, 0.5); break;
    default: s->window = tu_range(rng, 1, 700); s->garbage_unreached = true; break;
    }
    static const int32_t Ms[] = {0, 1, 1, 2, 4, 8, 9, 17};
    for (int32_t n = tu_range(rng, 1, 6); n > 0; --n) {
        int32_t M = tu_pick(rng, Ms, 8);
        if (M == 0) {
            paged_spec_add_seq(s, 0, 0);
        } else {
            add_seq(s, rng, M, 1, 1300);
        }
    }
}

static void test_sinks(void **state)
{
    (void)state;
    assert_int_equal(run_group("sinks", 36, gen_sinks), 0);
}

/* 8-bit KV caches: fp8 / int8 x per tensor / per head / per token and head x Q dtype, over head
 * sizes, GQA, M 1-8 and longer, page sizes with partial last pages, windows, NHD and padded strides,
 * mixed batches. */
static void gen_kv8(paged_spec *s, tu_rng *rng, int index)
{
    const r35a_dtype dtypes[] = {R35A_DTYPE_F16, R35A_DTYPE_BF16, R35A_DTYPE_F32};
    int32_t hq, hkv;
    random_gqa(rng, &hq, &hkv);
    paged_spec_init(s, dtypes[(index / 6) % 3], hq, hkv, random_head_size(rng), random_page_size(rng));
    random_extras(s, rng);
    s->kv_dtype = index % 2 ? R35A_DTYPE_INT8 : R35A_DTYPE_FP8_E4M3;
    s->kv_scale_per_head = (index / 2) % 3;
    if (s->kv_scale_per_head == R35A_KV_SCALE_PER_TOKEN_HEAD)
        random_token_scales(s, rng);
    if (tu_chance(rng, 0.3)) {
        s->window = tu_range(rng, 1, 600);
        s->garbage_unreached = true;
    }
    if (tu_chance(rng, 0.3)) {
        s->k_amp = tu_chance(rng, 0.5) ? 0.05 : 6.0; /* scales far from 1 either way */
    }
    static const int32_t Ms[] = {0, 1, 1, 1, 2, 3, 5, 8, 12, 30};
    for (int32_t n = tu_range(rng, 1, 8); n > 0; --n) {
        int32_t M = tu_pick(rng, Ms, 10);
        if (M == 0) {
            paged_spec_add_seq(s, 0, 0);
        } else {
            add_seq(s, rng, M, 1, 1500);
        }
    }
}

static void test_kv8(void **state)
{
    (void)state;
    assert_int_equal(run_group("kv8", 72, gen_kv8), 0);
}

/* Every stored code of both 8-bit dtypes through the library and through the oracle, against a
 * third derivation (fp8: the code's magnitude bits in an f16's place are value / 2^8; int8: two's
 * complement): one sequence of one key (its softmax weight is exactly 1), V holding all 256 codes,
 * f32 output, so out[e] = decode(e) x v_scale exactly; the fp8 NaN codes must come out NaN. The
 * scale 0.75 keeps every product exact in f32. */
static void test_kv8_codes_exhaustive(void **state)
{
    (void)state;
    if (!g_ctx) {
        skip();
    }
    const r35a_dtype kv_dtypes[2] = {R35A_DTYPE_FP8_E4M3, R35A_DTYPE_INT8};
    const float v_scales[2] = {1.0f, 0.75f};
    for (int kd = 0; kd < 2; ++kd) {
        for (int sc = 0; sc < 2; ++sc) {
            r35a_paged_attention_desc d;
            r35a_paged_attention_desc_init(&d, R35A_DTYPE_F32, 1, 1, 1, 1, 1, 1, 256, 1, 1);
            d.kv_dtype = kv_dtypes[kd];
            uint8_t k[256] = {0}, v[256];
            for (int c = 0; c < 256; ++c) {
                v[c] = (uint8_t)c;
            }
            float q[256] = {0}, out[256], k_scale = 2.0f, v_scale = v_scales[sc];
            int32_t seq_lens[1] = {1}, qsl[2] = {0, 1}, bt[1] = {0};
            memset(out, 0xFF, sizeof out);
            r35a_plan *plan = NULL;
            assert_int_equal(r35a_paged_attention_plan(g_ctx, &d, &plan), R35A_OK);
            r35a_paged_attention_args a;
            memset(&a, 0, sizeof a);
            a.struct_size = sizeof a;
            a.q = q;
            a.k_cache = k;
            a.v_cache = v;
            a.out = out;
            a.seq_lens = seq_lens;
            a.query_start_loc = qsl;
            a.block_table = bt;
            a.k_scale = &k_scale;
            a.v_scale = &v_scale;
            assert_int_equal(r35a_paged_attention_run(g_ctx, plan, &a, NULL, 0, NULL), R35A_OK);
            r35a_plan_destroy(plan);

            oracle_paged o;
            memset(&o, 0, sizeof o);
            o.dtype = R35A_DTYPE_F32;
            o.kv_dtype = d.kv_dtype;
            o.k_scale = &k_scale;
            o.v_scale = &v_scale;
            o.num_seqs = o.num_tokens = o.num_q_heads = o.num_kv_heads = 1;
            o.head_size = 256;
            o.page_size = o.num_pages = o.block_table_stride = 1;
            o.softmax_scale = 1.0;
            o.q = q;
            o.k = k;
            o.v = v;
            o.q_token_stride = o.q_head_stride = 256;
            o.k_page_stride = o.k_head_stride = o.k_slot_stride = 256;
            o.v_page_stride = o.v_head_stride = o.v_slot_stride = 256;
            o.seq_lens = seq_lens;
            o.query_start_loc = qsl;
            o.block_table = bt;
            double ref[256];
            /* the oracle refuses non-finite V (a harness guard): give it the NaN codes as 0 */
            if (kd == 0) {
                v[0x7F] = v[0xFF] = 0;
            }
            assert_int_equal(oracle_paged_attention(&o, ref), 0);
            int bad = 0;
            for (int c = 0; c < 256; ++c) {
                double want;
                if (kd == 0) {
                    want = tu_f16_to_double((uint16_t)((c & 0x7F) << 7)) * 256.0 * (c & 0x80 ? -1.0 : 1.0);
                    if ((c & 0x7F) == 0x7F) {
                        want = NAN;
                    }
                } else {
                    want = c < 128 ? c : c - 256;
                }
                want *= (double)v_scale;
                bool lib_ok = isnan(want) ? isnan(out[c]) : (double)out[c] == want;
                bool oracle_ok = isnan(want) ? ref[c] == 0.0 : ref[c] == want;
                if (!lib_ok || !oracle_ok) {
                    if (bad++ < 6) {
                        printf("FAIL kv8 code 0x%02x (%s, v_scale %g): library %.9g oracle %.9g want %.9g\n", c,
                               tu_dtype_name(d.kv_dtype), (double)v_scale, (double)out[c], ref[c], want);
                    }
                }
            }
            assert_int_equal(bad, 0);
        }
    }
    printf("[test_paged] kv8 codes: all 256 fp8 e4m3 and int8 codes decode exactly (library and oracle)\n");
}

/* Everything together: sinks, an 8-bit cache, softcap, ALiBi, windows, GQA, mixed batches. */
static void gen_model_features(paged_spec *s, tu_rng *rng, int index)
{
    (void)index;
    int32_t hq, hkv;
    random_gqa(rng, &hq, &hkv);
    paged_spec_init(s, random_dtype(rng), hq, hkv, random_head_size(rng), random_page_size(rng));
    random_extras(s, rng);
    if (tu_chance(rng, 0.7)) {
        random_sinks(s, rng);
    }
    if (tu_chance(rng, 0.7)) {
        random_kv8(s, rng);
    }
    if (tu_chance(rng, 0.5)) {
        s->logit_softcap = (float)(1.0 + 49.0 * tu_unit(rng));
    }
    s->use_alibi = tu_chance(rng, 0.4);
    if (tu_chance(rng, 0.5)) {
        s->window = tu_chance(rng, 0.5) ? 128 : tu_range(rng, 1, 900);
        s->garbage_unreached = true;
    }
    static const int32_t Ms[] = {0, 1, 1, 2, 4, 7, 8, 9, 20};
    for (int32_t n = tu_range(rng, 1, 10); n > 0; --n) {
        int32_t M = tu_pick(rng, Ms, 9);
        if (M == 0) {
            paged_spec_add_seq(s, 0, 0);
        } else {
            add_seq(s, rng, M, 1, 1200);
        }
    }
}

static void test_model_features(void **state)
{
    (void)state;
    assert_int_equal(run_group("model_feat", 40, gen_model_features), 0);
}

/* 0.1.0 struct sizes for the descriptor and the args: the 0.2 fields take their defaults (the
 * harness leaves them zero here; test_bad_input checks that garbage there is not read). */
static void gen_struct_sizes_0_1(paged_spec *s, tu_rng *rng, int index)
{
    (void)index;
    int32_t hq, hkv;
    random_gqa(rng, &hq, &hkv);
    paged_spec_init(s, random_dtype(rng), hq, hkv, random_head_size(rng), random_page_size(rng));
    random_extras(s, rng);
    s->struct_sizes_0_1 = true;
    if (tu_chance(rng, 0.4)) {
        s->window = tu_range(rng, 1, 600);
    }
    for (int32_t n = tu_range(rng, 1, 5); n > 0; --n) {
        add_seq(s, rng, tu_range(rng, 1, 12), 1, 900);
    }
}

static void test_struct_sizes_0_1(void **state)
{
    (void)state;
    assert_int_equal(run_group("sizes_0_1", 8, gen_struct_sizes_0_1), 0);
}

/* Strides: HND / NHD for K and V independently, padded at every level, padded Q/O token and head
 * strides, padded block tables and bounds above the actual maxima. */
static void gen_strides(paged_spec *s, tu_rng *rng, int index)
{
    int32_t hq, hkv;
    random_gqa(rng, &hq, &hkv);
    paged_spec_init(s, random_dtype(rng), hq, hkv, random_head_size(rng), random_page_size(rng));
    random_extras(s, rng);
    s->k_layout.nhd = index & 1;
    s->v_layout.nhd = (index >> 1) & 1;
    if (index & 4) {
        for (int k = 0; k < 3; ++k) {
            s->k_layout.pad[k] = tu_range(rng, 1, 40);
            s->v_layout.pad[k] = tu_range(rng, 1, 40);
        }
        s->q_head_pad = tu_range(rng, 1, 40);
        s->q_token_pad = tu_range(rng, 1, 40);
        s->o_head_pad = tu_range(rng, 1, 40);
        s->o_token_pad = tu_range(rng, 1, 40);
    } else {
        s->k_layout.pad[0] = s->k_layout.pad[1] = s->k_layout.pad[2] = 0;
        s->v_layout.pad[0] = s->v_layout.pad[1] = s->v_layout.pad[2] = 0;
    }
    s->bt_pad = tu_range(rng, 0, 9);
    s->max_seq_len_slack = tu_range(rng, 0, 300);
    s->max_query_len_slack = tu_range(rng, 0, 4);
    for (int32_t n = tu_range(rng, 1, 4); n > 0; --n) {
        add_seq(s, rng, tu_range(rng, 1, 8), 1, 1200);
    }
}

static void test_strides(void **state)
{
    (void)state;
    assert_int_equal(run_group("strides", 32, gen_strides), 0);
}

/* Long contexts, a few: decode over 8K-33K keys with small heads. */
static void gen_long(paged_spec *s, tu_rng *rng, int index)
{
    static const int32_t Bs[] = {16, 528, 1056, 32};
    paged_spec_init(s, random_dtype(rng), 4, 1, 128, Bs[index % 4]);
    random_extras(s, rng);
    if (index % 2) {
        s->window = tu_range(rng, 500, 4096);
        s->garbage_unreached = true;
    }
    add_seq(s, rng, tu_range(rng, 1, 4), 8192, 33000);
}

static void test_long_contexts(void **state)
{
    (void)state;
    assert_int_equal(run_group("long", 4, gen_long), 0);
}

/* Everything at random, with a cost cap so the sweep stays fast. */
static void gen_random_once(paged_spec *s, tu_rng *rng)
{
    int32_t hq, hkv;
    random_gqa(rng, &hq, &hkv);
    paged_spec_init(s, random_dtype(rng), hq, hkv, random_head_size(rng), random_page_size(rng));
    random_extras(s, rng);
    if (tu_chance(rng, 0.3)) {
        s->window = tu_range(rng, 1, 2000);
    }
    if (tu_chance(rng, 0.25)) {
        s->logit_softcap = (float)(0.5 + 50.0 * tu_unit(rng));
    }
    s->use_alibi = tu_chance(rng, 0.2);
    if (tu_chance(rng, 0.2)) {
        random_sinks(s, rng);
    }
    if (tu_chance(rng, 0.2)) {
        random_kv8(s, rng);
    }
    static const int32_t Ms[] = {0, 1, 1, 1, 2, 3, 4, 5, 6, 7, 8, 12, 17, 40};
    for (int32_t n = tu_range(rng, 1, 12); n > 0; --n) {
        int32_t M = tu_pick(rng, Ms, 14);
        if (M == 0 && tu_chance(rng, 0.5)) {
            paged_spec_add_seq(s, 0, 0);
        } else {
            add_seq(s, rng, M, 1, tu_chance(rng, 0.8) ? 1000 : 4096);
        }
    }
}

static void gen_random(paged_spec *s, tu_rng *rng, int index)
{
    (void)index;
    for (int attempt = 0; attempt < 50; ++attempt) {
        gen_random_once(s, rng);
        if (paged_spec_cost(s) <= 2e7 && paged_spec_cache_elems(s) <= 4e6) {
            return;
        }
    }
}

static void test_random_sweep(void **state)
{
    (void)state;
    assert_int_equal(run_group("random", tu_scaled(300), gen_random), 0);
}

/* One plan, many runs: the plan fixes only host-known bounds, so runs with other lengths, block
 * tables and values under the same bounds must all be right. */
static void test_plan_reuse(void **state)
{
    (void)state;
    if (!g_ctx) {
        skip();
    }
    int failures = 0;
    for (int i = 0; i < 6; ++i) {
        if (!tu_case_selected("plan_reuse", i)) {
            continue;
        }
        tu_rng rng;
        tu_rng_init(&rng, tu_case_seed("plan_reuse", i));
        int32_t hq, hkv;
        random_gqa(&rng, &hq, &hkv);
        const r35a_dtype dt = random_dtype(&rng);
        const int32_t D = random_head_size(&rng), B = random_page_size(&rng);
        const int32_t nseq = tu_range(&rng, 1, 6), bound_L = tu_range(&rng, 64, 2000);
        int32_t M[8];
        for (int k = 0; k < nseq; ++k) {
            M[k] = tu_range(&rng, 0, 8);
        }
        const int32_t window = tu_chance(&rng, 0.4) ? tu_range(&rng, 1, 500) : 0;
        r35a_plan *plan = NULL;
        r35a_paged_attention_desc first;
        for (int run = 0; run < 3; ++run) {
            char label[64];
            snprintf(label, sizeof label, "plan_reuse:%d/run%d", i, run);
            paged_spec s;
            paged_spec_init(&s, dt, hq, hkv, D, B);
            s.window = window;
            s.garbage_unreached = true;
            s.shuffle_pages = true;
            s.force_num_pages = nseq * ((bound_L + B - 1) / B) + 1;
            int32_t maxL = 0, maxM = 0;
            for (int k = 0; k < nseq; ++k) {
                int32_t L = tu_range(&rng, M[k], bound_L);
                paged_spec_add_seq(&s, L, M[k]);
                maxL = L > maxL ? L : maxL;
                maxM = M[k] > maxM ? M[k] : maxM;
            }
            s.max_seq_len_slack = bound_L - maxL;
            s.max_query_len_slack = 8 - maxM;
            paged_problem p;
            assert_int_equal(paged_problem_init(&p, &s, &rng), 0);
            if (run == 0) {
                first = p.desc;
                assert_int_equal(r35a_paged_attention_plan(g_ctx, &p.desc, &plan), R35A_OK);
            } else {
                assert_memory_equal(&first, &p.desc, sizeof first);
            }
            if (!paged_problem_check(g_ctx, &p, plan, tu_mem_host(), label)) {
                char desc[8192];
                paged_spec_describe(&s, desc, sizeof desc);
                printf("  case: %s\n  replay: R35A_TEST_SEED=0x%016llx R35A_TEST_CASE=plan_reuse:%d\n",
                       desc, (unsigned long long)tu_seed(), i);
                failures++;
            }
            paged_problem_free(&p);
        }
        r35a_plan_destroy(plan);
    }
    assert_int_equal(failures, 0);
}

/* ------------------------------------------------------------------------------------------ */

static int group_setup(void **state)
{
    (void)state;
    g_ctx = tu_context_create();
    if (!g_ctx) {
        return -1;
    }
    r35a_context_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (r35a_context_get_info(g_ctx, &info) == R35A_OK && info.backend != R35A_BACKEND_REFERENCE) {
        printf("[test_paged] backend %s needs device buffers, which this suite does not provide yet; "
               "skipping\n", info.backend_name);
        r35a_context_destroy(g_ctx);
        g_ctx = NULL;
    }
    return 0;
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
    tu_begin("test_paged");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_head_sizes),   cmocka_unit_test(test_gqa),
        cmocka_unit_test(test_query_lens),   cmocka_unit_test(test_page_sizes),
        cmocka_unit_test(test_windows),      cmocka_unit_test(test_padding),
        cmocka_unit_test(test_mixed_batches), cmocka_unit_test(test_features),
        cmocka_unit_test(test_sinks),        cmocka_unit_test(test_kv8),
        cmocka_unit_test(test_kv8_codes_exhaustive),
        cmocka_unit_test(test_model_features), cmocka_unit_test(test_struct_sizes_0_1),
        cmocka_unit_test(test_strides),      cmocka_unit_test(test_long_contexts),
        cmocka_unit_test(test_plan_reuse),   cmocka_unit_test(test_random_sweep),
    };
    int rc = cmocka_run_group_tests(tests, group_setup, group_teardown);
    tu_stats_print("test_paged");
    harness_print_timing("test_paged");
    return rc;
}
