/*
 * test_varlen.c - varlen (encoder / causal) attention against the float64 oracle: segment lengths
 * 1..2000 (non multiples of 16, many segments, empty segments), head counts 1..64 with Hq == Hkv
 * and GQA, the head sizes of the ViT shapes and odd ones, causal and non-causal, softcap, fused qkv
 * read in place and separate buffers with padded strides, and plan reuse.
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

static r35a_dtype random_dtype(tu_rng *rng)
{
    uint32_t r = tu_below(rng, 20);
    return r < 9 ? R35A_DTYPE_F16 : r < 16 ? R35A_DTYPE_BF16 : R35A_DTYPE_F32;
}

/* Layout, strides and value distributions at random (fused only where set by the caller). */
static void random_extras(varlen_spec *s, tu_rng *rng)
{
    /* the LSE output (0.3) on a share of every group's cases: the oracle's LSE, gaps poisoned */
    if (tu_chance(rng, 0.35)) {
        s->use_lse = true;
        s->lse_pad = tu_chance(rng, 0.5) ? tu_range(rng, 1, 3) : 0;
    }
    if (tu_chance(rng, 0.35)) {
        for (int k = 0; k < 4; ++k) {
            s->token_pad[k] = tu_range(rng, 0, 20);
            s->head_pad[k] = tu_range(rng, 0, 9);
        }
    }
    if (tu_chance(rng, 0.2)) {
        s->max_seqlen_slack = tu_range(rng, 1, 64);
    }
    static const int32_t amps[] = {1, 1, 2, 4, 8};
    s->q_amp = tu_pick(rng, amps, 5);
    if (tu_chance(rng, 0.3)) {
        s->v_offset = 2.0 * tu_sym(rng);
    }
    if (tu_chance(rng, 0.15)) {
        s->softmax_scale = (float)(0.02 + tu_unit(rng));
    }
    s->causal = tu_chance(rng, 0.4);
    if (tu_chance(rng, 0.2)) {
        s->logit_softcap = (float)(0.5 + 50.0 * tu_unit(rng));
    }
}

/* Appends up to max_count random segments (10 % empty) of at most max_len tokens while the cost
 * stays under cap; a segment is shortened to fit the budget that is left (at least 1 token). */
static void add_segments(varlen_spec *s, tu_rng *rng, int32_t max_len, int32_t max_count, double cap)
{
    const double per_key = (double)s->num_q_heads * 2.0 * s->head_size;
    for (int32_t n = 0; n < max_count; ++n) {
        const double left = cap - varlen_spec_cost(s);
        int32_t fit = (int32_t)sqrt(left > 0 ? left / per_key : 0.0);
        if (fit < 1) {
            if (s->num_segments > 0) {
                break;
            }
            fit = 1;
        }
        const int32_t hi = max_len < fit ? max_len : fit;
        varlen_spec_add_segment(s, tu_chance(rng, 0.1) ? 0 : tu_range(rng, 1, hi));
    }
}

typedef void (*varlen_gen)(varlen_spec *s, tu_rng *rng, int index);

/* An f32 case stays within the logit range where TU_TOL_F32 holds (see test_paged.c). */
static void fit_case(varlen_spec *s)
{
    if (s->dtype == R35A_DTYPE_F32) {
        const double sd = varlen_spec_logit_std(s);
        if (sd > 2.0) {
            s->q_amp *= 2.0 / sd;
        }
    }
}

static int run_group(const char *group, int count, varlen_gen gen)
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
        varlen_spec s;
        gen(&s, &rng, i);
        fit_case(&s);
        if (!varlen_run_case(g_ctx, &s, &rng, group, i)) {
            failures++;
        }
        ran++;
    }
    printf("[test_varlen] %-12s %4d cases, %d failed (%.2f s cpu)\n", group, ran, failures,
           (double)(clock() - t0) / CLOCKS_PER_SEC);
    return failures;
}

/* ------------------------------------------------------------------------------------------ */

/* Single segments of lengths around the 16-row tiles and long ones, causal on odd indices. */
static void gen_seg_len(varlen_spec *s, tu_rng *rng, int index)
{
    static const int32_t lens[] = {1, 2, 15, 16, 17, 31, 33, 100, 127, 129, 500, 1000, 2000};
    const int32_t len = lens[index / 2];
    int32_t H = len >= 500 ? 1 : tu_range(rng, 1, 8);
    const int32_t D = len >= 1000 ? 32 : (tu_chance(rng, 0.5) ? 64 : 80);
    varlen_spec_init(s, random_dtype(rng), H, H, D);
    random_extras(s, rng);
    s->causal = index % 2;
    varlen_spec_add_segment(s, len);
    if (len < 500 && tu_chance(rng, 0.5)) {
        varlen_spec_add_segment(s, tu_range(rng, 0, 40));
    }
}

static void test_segment_lengths(void **state)
{
    (void)state;
    assert_int_equal(run_group("seg_len", 26, gen_seg_len), 0);
}

/* Many segments per call, with empty ones. */
static void gen_many(varlen_spec *s, tu_rng *rng, int index)
{
    (void)index;
    int32_t H = tu_range(rng, 1, 16);
    static const int32_t Ds[] = {32, 48, 64, 72, 80, 128};
    varlen_spec_init(s, random_dtype(rng), H, H, tu_pick(rng, Ds, 6));
    random_extras(s, rng);
    for (int32_t n = tu_range(rng, 20, 300); n > 0; --n) {
        varlen_spec_add_segment(s, tu_chance(rng, 0.2) ? 0 : tu_range(rng, 1, 40));
        if (varlen_spec_cost(s) > 3e7) {
            break;
        }
    }
}

static void test_many_segments(void **state)
{
    (void)state;
    assert_int_equal(run_group("many", 10, gen_many), 0);
}

static const int32_t k_head_sizes[] = {32, 48, 64, 72, 80, 128, 1, 3, 17, 100, 256, 512};
#define N_HEAD_SIZES ((int)(sizeof k_head_sizes / sizeof k_head_sizes[0]))

static void gen_head_size(varlen_spec *s, tu_rng *rng, int index)
{
    const r35a_dtype dtypes[] = {R35A_DTYPE_F16, R35A_DTYPE_BF16, R35A_DTYPE_F32};
    const int32_t D = k_head_sizes[index / 3];
    const int32_t H = tu_range(rng, 1, 4);
    varlen_spec_init(s, dtypes[index % 3], H, H, D);
    random_extras(s, rng);
    add_segments(s, rng, 150, 3, 2e7);
}

static void test_head_sizes(void **state)
{
    (void)state;
    assert_int_equal(run_group("head_size", N_HEAD_SIZES * 3, gen_head_size), 0);
}

/* Hq == Hkv for 1..16 heads, then GQA groups 2..8. */
static void gen_heads(varlen_spec *s, tu_rng *rng, int index)
{
    int32_t hq, hkv;
    if (index < 16) {
        hq = hkv = index + 1;
    } else {
        static const int32_t kv[] = {1, 2, 4};
        hkv = tu_pick(rng, kv, 3);
        hq = hkv * tu_range(rng, 2, 8);
    }
    static const int32_t Ds[] = {32, 64, 80, 128};
    varlen_spec_init(s, random_dtype(rng), hq, hkv, tu_pick(rng, Ds, 4));
    random_extras(s, rng);
    add_segments(s, rng, 120, 4, 2e7);
}

static void test_heads(void **state)
{
    (void)state;
    assert_int_equal(run_group("heads", 28, gen_heads), 0);
}

/* causal x softcap x dtype. */
static void gen_causal_softcap(varlen_spec *s, tu_rng *rng, int index)
{
    const r35a_dtype dtypes[] = {R35A_DTYPE_F16, R35A_DTYPE_BF16, R35A_DTYPE_F32};
    static const float caps[] = {0.0f, 0.7f, 5.0f, 30.0f};
    const int32_t H = tu_range(rng, 1, 8);
    static const int32_t Ds[] = {32, 48, 64, 72, 80, 128};
    varlen_spec_init(s, dtypes[index % 3], H, H, tu_pick(rng, Ds, 6));
    random_extras(s, rng);
    s->logit_softcap = caps[(index / 3) % 4];
    s->causal = (index / 12) % 2;
    if (s->logit_softcap > 0.0f) {
        s->q_amp = 8.0;
    }
    add_segments(s, rng, 300, 4, 2e7);
}

static void test_causal_softcap(void **state)
{
    (void)state;
    assert_int_equal(run_group("causal_cap", 24, gen_causal_softcap), 0);
}

/* Attention sinks: causal or not, GQA or not, softcap, fused or separate buffers, empty segments,
 * every dtype; some calls in 0.1.0's struct sizes (without sinks: their default). */
static void gen_sinks(varlen_spec *s, tu_rng *rng, int index)
{
    const r35a_dtype dtypes[] = {R35A_DTYPE_F16, R35A_DTYPE_BF16, R35A_DTYPE_F32};
    int32_t hq, hkv;
    if (index % 2) {
        hkv = tu_range(rng, 1, 4);
        hq = hkv * tu_range(rng, 2, 6);
    } else {
        hq = hkv = tu_range(rng, 1, 12);
    }
    static const int32_t Ds[] = {32, 48, 64, 72, 80, 128, 7};
    varlen_spec_init(s, dtypes[(index / 2) % 3], hq, hkv, tu_pick(rng, Ds, 7));
    random_extras(s, rng);
    s->causal = (index / 6) % 2;
    if (index % 8 == 7) {
        s->struct_sizes_0_1 = true;
    } else {
        static const int32_t centers[] = {-20, -3, 0, 2, 5};
        s->use_sinks = 1;
        s->sink_center = tu_pick(rng, centers, 5);
        s->sink_amp = 3.0;
    }
    if (tu_chance(rng, 0.3)) {
        s->logit_softcap = 20.0f;
    }
    if (tu_chance(rng, 0.3)) {
        s->layout = VARLEN_FUSED;
    }
    add_segments(s, rng, 300, 6, 2e7);
    if (tu_chance(rng, 0.5)) {
        varlen_spec_add_segment(s, 0);
    }
}

static void test_sinks(void **state)
{
    (void)state;
    assert_int_equal(run_group("sinks", 32, gen_sinks), 0);
}

/* A fused [tokens][hq + 2*hkv][D] buffer read in place: exact token stride 3*H*D, padded token
 * stride, and the GQA form [tokens][hq + 2*hkv][D]. */
static void gen_fused(varlen_spec *s, tu_rng *rng, int index)
{
    int32_t hq, hkv;
    if (index % 4 == 3) {
        hkv = tu_range(rng, 1, 4);
        hq = hkv * tu_range(rng, 2, 4);
    } else {
        hq = hkv = tu_range(rng, 1, 16);
    }
    static const int32_t Ds[] = {32, 48, 64, 72, 80, 128};
    varlen_spec_init(s, random_dtype(rng), hq, hkv, tu_pick(rng, Ds, 6));
    random_extras(s, rng);
    s->layout = VARLEN_FUSED;
    s->token_pad[0] = index % 4 == 1 ? tu_range(rng, 1, 24) : 0;
    s->head_pad[3] = tu_chance(rng, 0.3) ? tu_range(rng, 1, 8) : 0;
    add_segments(s, rng, 200, 6, 2e7);
}

static void test_fused_qkv(void **state)
{
    (void)state;
    assert_int_equal(run_group("fused", 16, gen_fused), 0);
}

/* Separate Q, K, V, O with padded token and head strides (NaN in every gap). */
static void gen_strides(varlen_spec *s, tu_rng *rng, int index)
{
    (void)index;
    int32_t hkv = tu_range(rng, 1, 6), hq = hkv * (tu_chance(rng, 0.5) ? 1 : tu_range(rng, 2, 3));
    static const int32_t Ds[] = {32, 48, 64, 72, 80, 128};
    varlen_spec_init(s, random_dtype(rng), hq, hkv, tu_pick(rng, Ds, 6));
    random_extras(s, rng);
    for (int k = 0; k < 4; ++k) {
        s->token_pad[k] = tu_range(rng, 1, 50);
        s->head_pad[k] = tu_range(rng, 0, 16);
    }
    add_segments(s, rng, 200, 5, 2e7);
}

static void test_strides(void **state)
{
    (void)state;
    assert_int_equal(run_group("strides", 16, gen_strides), 0);
}

/* Empty segments only (no rows at all), and empty segments around one token. */
static void gen_empty(varlen_spec *s, tu_rng *rng, int index)
{
    varlen_spec_init(s, random_dtype(rng), 2, 2, 64);
    random_extras(s, rng);
    switch (index) {
    case 0: varlen_spec_add_segment(s, 0); break;
    case 1:
        for (int k = 0; k < 5; ++k) {
            varlen_spec_add_segment(s, 0);
        }
        break;
    case 2:
        varlen_spec_add_segment(s, 0);
        varlen_spec_add_segment(s, 1);
        varlen_spec_add_segment(s, 0);
        break;
    default:
        varlen_spec_add_segment(s, 1);
        varlen_spec_add_segment(s, 0);
        break;
    }
}

static void test_empty_segments(void **state)
{
    (void)state;
    assert_int_equal(run_group("empty", 4, gen_empty), 0);
}

/* The ViT shapes of the design (D: heads), with a few segments each. */
static void gen_design_shape(varlen_spec *s, tu_rng *rng, int index)
{
    static const int32_t shapes[][2] = {{32, 4},  {32, 8},  {32, 16}, {32, 32}, {48, 32}, {64, 4},
                                        {64, 6},  {64, 8},  {64, 12}, {64, 14}, {64, 16}, {64, 20},
                                        {64, 24}, {64, 64}, {72, 16}, {80, 16}, {128, 4}, {128, 8},
                                        {128, 12}, {128, 16}, {128, 24}};
    const int32_t D = shapes[index][0], H = shapes[index][1];
    varlen_spec_init(s, index % 2 ? R35A_DTYPE_BF16 : R35A_DTYPE_F16, H, H, D);
    random_extras(s, rng);
    s->causal = 0;
    s->layout = tu_chance(rng, 0.5) ? VARLEN_FUSED : VARLEN_SEPARATE;
    add_segments(s, rng, 260, 4, 3e7);
}

static void test_design_shapes(void **state)
{
    (void)state;
    assert_int_equal(run_group("vit_shape", 21, gen_design_shape), 0);
}

static void gen_random(varlen_spec *s, tu_rng *rng, int index)
{
    (void)index;
    int32_t hkv = tu_range(rng, 1, 16), hq = hkv;
    if (tu_chance(rng, 0.3)) {
        hkv = tu_range(rng, 1, 4);
        hq = hkv * tu_range(rng, 2, 8);
    }
    static const int32_t Ds[] = {32, 48, 64, 72, 80, 128, 0};
    int32_t D = tu_pick(rng, Ds, 7);
    if (D == 0) {
        D = tu_range(rng, 1, 300);
    }
    varlen_spec_init(s, random_dtype(rng), hq, hkv, D);
    random_extras(s, rng);
    if (tu_chance(rng, 0.3)) {
        s->layout = VARLEN_FUSED;
        s->token_pad[0] = tu_chance(rng, 0.5) ? 0 : tu_range(rng, 1, 16);
    }
    if (tu_chance(rng, 0.2)) {
        s->use_sinks = 1;
        s->sink_center = 4.0 * tu_sym(rng);
        s->sink_amp = 3.0;
    }
    add_segments(s, rng, tu_chance(rng, 0.8) ? 200 : 1200, tu_range(rng, 1, 20), 8e6);
}

static void test_random_sweep(void **state)
{
    (void)state;
    assert_int_equal(run_group("random", tu_scaled(150), gen_random), 0);
}

/* One plan, several runs with other segmentations under the same bounds. */
static void test_plan_reuse(void **state)
{
    (void)state;
    if (!g_ctx) {
        skip();
    }
    int failures = 0;
    for (int i = 0; i < 4; ++i) {
        if (!tu_case_selected("plan_reuse", i)) {
            continue;
        }
        tu_rng rng;
        tu_rng_init(&rng, tu_case_seed("plan_reuse", i));
        const int32_t H = tu_range(&rng, 1, 8), D = tu_chance(&rng, 0.5) ? 64 : 80;
        const r35a_dtype dt = random_dtype(&rng);
        const int32_t causal = i % 2, tokens = tu_range(&rng, 50, 400), bound = tokens;
        const int32_t nseg = tu_range(&rng, 1, 8);
        r35a_plan *plan = NULL;
        r35a_varlen_attention_desc first;
        for (int run = 0; run < 3; ++run) {
            char label[64];
            snprintf(label, sizeof label, "plan_reuse:%d/run%d", i, run);
            varlen_spec s;
            varlen_spec_init(&s, dt, H, H, D);
            s.causal = causal;
            /* nseg segments summing to tokens: cut points at random */
            int32_t cuts[9];
            cuts[0] = 0;
            cuts[nseg] = tokens;
            for (int k = 1; k < nseg; ++k) {
                cuts[k] = tu_range(&rng, 0, tokens);
            }
            for (int a = 1; a < nseg; ++a) { /* insertion sort of the inner cuts */
                for (int b = a; b > 1 && cuts[b] < cuts[b - 1]; --b) {
                    int32_t t = cuts[b];
                    cuts[b] = cuts[b - 1];
                    cuts[b - 1] = t;
                }
            }
            int32_t longest = 0;
            for (int k = 0; k < nseg; ++k) {
                varlen_spec_add_segment(&s, cuts[k + 1] - cuts[k]);
                longest = cuts[k + 1] - cuts[k] > longest ? cuts[k + 1] - cuts[k] : longest;
            }
            s.max_seqlen_slack = bound - longest;
            varlen_problem p;
            assert_int_equal(varlen_problem_init(&p, &s, &rng), 0);
            if (run == 0) {
                first = p.desc;
                assert_int_equal(r35a_varlen_attention_plan(g_ctx, &p.desc, &plan), R35A_OK);
            } else {
                assert_memory_equal(&first, &p.desc, sizeof first);
            }
            if (!varlen_problem_check(g_ctx, &p, plan, tu_mem_host(), label)) {
                char desc[8192];
                varlen_spec_describe(&s, desc, sizeof desc);
                printf("  case: %s\n  replay: R35A_TEST_SEED=0x%016llx R35A_TEST_CASE=plan_reuse:%d\n",
                       desc, (unsigned long long)tu_seed(), i);
                failures++;
            }
            varlen_problem_free(&p);
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
        printf("[test_varlen] backend %s needs device buffers, which this suite does not provide "
               "yet; skipping\n", info.backend_name);
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
    tu_begin("test_varlen");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_segment_lengths), cmocka_unit_test(test_many_segments),
        cmocka_unit_test(test_head_sizes),      cmocka_unit_test(test_heads),
        cmocka_unit_test(test_causal_softcap),  cmocka_unit_test(test_fused_qkv),
        cmocka_unit_test(test_sinks),
        cmocka_unit_test(test_strides),         cmocka_unit_test(test_empty_segments),
        cmocka_unit_test(test_design_shapes),   cmocka_unit_test(test_plan_reuse),
        cmocka_unit_test(test_random_sweep),
    };
    int rc = cmocka_run_group_tests(tests, group_setup, group_teardown);
    tu_stats_print("test_varlen");
    harness_print_timing("test_varlen");
    return rc;
}
