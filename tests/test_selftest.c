/*
 * test_selftest.c - tests the tests: element coding, the PRNG, the comparison and the float64
 * oracle on cases small enough to work out by hand. A wrong oracle would make every other suite
 * meaningless, so it is checked first and without the library.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "oracle.h"
#include "test_util.h"

static void test_f16_known_values(void **state)
{
    (void)state;
    assert_true(tu_f16_to_double(0x3C00) == 1.0);
    assert_true(tu_f16_to_double(0xC000) == -2.0);
    assert_true(tu_f16_to_double(0x7BFF) == 65504.0);
    assert_true(tu_f16_to_double(0x0001) == ldexp(1.0, -24));
    assert_true(tu_f16_to_double(0x0400) == ldexp(1.0, -14));
    assert_true(tu_f16_to_double(0x3555) == 0.333251953125);
    assert_true(isinf(tu_f16_to_double(0x7C00)));
    assert_true(isnan(tu_f16_to_double(0xFFFF)));
    /* round to nearest even */
    assert_int_equal(tu_f16_from_double(1.0 + ldexp(1.0, -11)), 0x3C00);
    assert_int_equal(tu_f16_from_double(1.0 + 3.0 * ldexp(1.0, -11)), 0x3C02);
    assert_int_equal(tu_f16_from_double(1.0 + ldexp(1.0, -11) + ldexp(1.0, -30)), 0x3C01);
    assert_int_equal(tu_f16_from_double(65519.0), 0x7BFF);
    assert_int_equal(tu_f16_from_double(65520.0), 0x7C00);
    assert_int_equal(tu_f16_from_double(-1e9), 0xFC00);
    assert_int_equal(tu_f16_from_double(ldexp(1.0, -25)), 0x0000);
    assert_int_equal(tu_f16_from_double(1.5 * ldexp(1.0, -25)), 0x0001);
    assert_int_equal(tu_f16_from_double(ldexp(1023.5, -24)), 0x0400);
    assert_int_equal(tu_f16_from_double(-0.0), 0x8000);
    assert_int_equal(tu_f16_from_double(1.0 / 3.0), 0x3555);
}

static void test_bf16_known_values(void **state)
{
    (void)state;
    assert_true(tu_bf16_to_double(0x3F80) == 1.0);
    assert_true(tu_bf16_to_double(0x4049) == 3.140625);
    assert_true(tu_bf16_to_double(0x0001) == ldexp(1.0, -133));
    assert_true(tu_bf16_to_double(0x7F7F) == ldexp(255.0, 120));
    assert_true(isnan(tu_bf16_to_double(0xFFFF)));
    assert_int_equal(tu_bf16_from_double(1.0 + ldexp(1.0, -8)), 0x3F80);
    assert_int_equal(tu_bf16_from_double(1.0 + 3.0 * ldexp(1.0, -8)), 0x3F82);
    assert_int_equal(tu_bf16_from_double(3.14159265), 0x4049);
    assert_int_equal(tu_bf16_from_double(-2.0), 0xC000);
    assert_int_equal(tu_bf16_from_double(1e39), 0x7F80);
}

static void test_coding_round_trip(void **state)
{
    (void)state;
    for (uint32_t b = 0; b < 65536u; ++b) {
        double f = tu_f16_to_double((uint16_t)b);
        double g = tu_bf16_to_double((uint16_t)b);
        if (!isnan(f)) {
            assert_int_equal(tu_f16_from_double(f), b);
        }
        if (!isnan(g)) {
            assert_int_equal(tu_bf16_from_double(g), b);
        }
    }
    /* bf16 agrees with truncation of the fp32 bits where no rounding happens */
    float x = 1.5f;
    uint32_t bits;
    memcpy(&bits, &x, 4);
    assert_int_equal(tu_bf16_from_double(x), bits >> 16);
    /* the NaN used to fill unread inputs is not the poison pattern */
    uint16_t h[1];
    tu_store_nan(R35A_DTYPE_F16, h, 0);
    assert_false(tu_elem_is_poison(R35A_DTYPE_F16, h, 0));
    assert_true(isnan(tu_load(R35A_DTYPE_F16, h, 0)));
}

static void test_rng(void **state)
{
    (void)state;
    tu_rng a, b;
    tu_rng_init(&a, 42);
    tu_rng_init(&b, 42);
    for (int i = 0; i < 1000; ++i) {
        assert_true(tu_next(&a) == tu_next(&b));
    }
    int hits[7] = {0};
    for (int i = 0; i < 7000; ++i) {
        int32_t r = tu_range(&a, -3, 3);
        assert_true(r >= -3 && r <= 3);
        hits[r + 3]++;
        double u = tu_unit(&a);
        assert_true(u >= 0.0 && u < 1.0);
    }
    for (int k = 0; k < 7; ++k) {
        assert_true(hits[k] > 700 && hits[k] < 1300);
    }
    assert_true(tu_case_seed("x", 1) == tu_case_seed("x", 1));
    assert_true(tu_case_seed("x", 1) != tu_case_seed("x", 2));
    assert_true(tu_case_seed("x", 1) != tu_case_seed("y", 1));
}

static void test_check_detects(void **state)
{
    (void)state;
    uint16_t out[8];
    uint8_t mask[16];
    tu_check c;
    /* exact values pass */
    for (int i = 0; i < 4; ++i) {
        out[i] = tu_f16_from_double(0.5);
    }
    tu_check_begin(&c, R35A_DTYPE_F16, 0.5, NULL);
    for (int i = 0; i < 4; ++i) {
        tu_check_elem(&c, out, (size_t)i, 0.5, i, 0, 0, 0);
    }
    assert_true(tu_check_passed(&c));
    /* a value off by more than the tolerance fails */
    out[2] = tu_f16_from_double(0.502);
    tu_check_begin(&c, R35A_DTYPE_F16, 0.5, NULL);
    for (int i = 0; i < 4; ++i) {
        tu_check_elem(&c, out, (size_t)i, 0.5, i, 0, 0, 0);
    }
    assert_false(tu_check_passed(&c));
    assert_int_equal(c.mismatches, 1);
    /* NaN and poison fail */
    out[2] = 0x7E00;
    out[3] = 0xFFFF;
    tu_check_begin(&c, R35A_DTYPE_F16, 0.5, NULL);
    for (int i = 0; i < 4; ++i) {
        tu_check_elem(&c, out, (size_t)i, 0.5, i, 0, 0, 0);
    }
    assert_false(tu_check_passed(&c));
    assert_int_equal(c.nonfinite, 1);
    assert_int_equal(c.unwritten, 1);
    /* a byte written outside the owned range fails */
    memset(mask, 0, sizeof mask);
    memset(mask, 1, 8);
    tu_poison(out, sizeof out);
    for (int i = 0; i < 4; ++i) {
        out[i] = 0;
    }
    tu_check_begin(&c, R35A_DTYPE_F16, 0.0, NULL);
    tu_check_untouched(&c, (const uint8_t *)out, mask, sizeof out);
    assert_true(tu_check_passed(&c));
    ((uint8_t *)out)[12] = 0x12;
    tu_check_untouched(&c, (const uint8_t *)out, mask, sizeof out);
    assert_false(tu_check_passed(&c));
    assert_int_equal(c.outside, 1);
}

/* ---- the oracle on hand-computed cases (f32 values that are exact) ---- */

typedef struct tiny_paged {
    float q[4][2][2];            /* [token][head][D=2] */
    float k[4][1][4][2];         /* [page][kv head][slot][D], B <= 4 */
    float v[4][1][4][2];
    int32_t seq_lens[2], qsl[3], bt[8];
    float slopes[2];
    oracle_paged o;
    double out[4 * 2 * 2];
} tiny_paged;

/* One kv head, D = 2, page size B, pages of 4 slots in memory. */
static void tiny_init(tiny_paged *t, int32_t B, int32_t hq)
{
    memset(t, 0, sizeof *t);
    oracle_paged *o = &t->o;
    o->dtype = R35A_DTYPE_F32;
    o->num_seqs = 1;
    o->num_q_heads = hq;
    o->num_kv_heads = 1;
    o->head_size = 2;
    o->page_size = B;
    o->num_pages = 4;
    o->block_table_stride = 8;
    o->softmax_scale = 1.0;
    o->q = t->q;
    o->q_token_stride = 4;
    o->q_head_stride = 2;
    o->k = t->k;
    o->k_page_stride = 8;
    o->k_head_stride = 8;
    o->k_slot_stride = 2;
    o->v = t->v;
    o->v_page_stride = 8;
    o->v_head_stride = 8;
    o->v_slot_stride = 2;
    o->seq_lens = t->seq_lens;
    o->query_start_loc = t->qsl;
    o->block_table = t->bt;
}

/* Sets V of key position j (page = bt[j / B]). */
static void tiny_set_kv(tiny_paged *t, int32_t j, float k0, float k1, float v0, float v1)
{
    int32_t B = t->o.page_size;
    int32_t page = t->bt[j / B], slot = j % B;
    t->k[page][0][slot][0] = k0;
    t->k[page][0][slot][1] = k1;
    t->v[page][0][slot][0] = v0;
    t->v[page][0][slot][1] = v1;
}

static void tiny_seq(tiny_paged *t, int32_t L, int32_t M)
{
    t->seq_lens[0] = L;
    t->qsl[0] = 0;
    t->qsl[1] = M;
    t->o.num_tokens = M;
}

#define NEAR(a, b) assert_true(fabs((a) - (b)) < 1e-12)

static void test_oracle_paged_hand(void **state)
{
    (void)state;
    tiny_paged t;

    /* one key: the output is its V */
    tiny_init(&t, 4, 1);
    tiny_seq(&t, 1, 1);
    t.bt[0] = 2;
    tiny_set_kv(&t, 0, 1, 2, 3, -4);
    t.q[0][0][0] = 0.5f;
    assert_int_equal(oracle_paged_attention(&t.o, t.out), 0);
    NEAR(t.out[0], 3.0);
    NEAR(t.out[1], -4.0);

    /* q = 0: equal logits, the mean of the visible V; page size 1 with shuffled pages */
    tiny_init(&t, 1, 1);
    tiny_seq(&t, 3, 1);
    t.bt[0] = 3;
    t.bt[1] = 0;
    t.bt[2] = 2;
    tiny_set_kv(&t, 0, 1, 1, 1, 0);
    tiny_set_kv(&t, 1, 1, 1, 2, 0);
    tiny_set_kv(&t, 2, 1, 1, 6, 3);
    assert_int_equal(oracle_paged_attention(&t.o, t.out), 0);
    NEAR(t.out[0], 3.0);
    NEAR(t.out[1], 1.0);

    /* logits ln2 and 0 through the scale: weights 2/3 and 1/3 */
    t.q[0][0][0] = 1.0f;
    t.o.softmax_scale = log(2.0);
    tiny_set_kv(&t, 0, 0, 0, 0, 0);  /* logit 0 */
    tiny_set_kv(&t, 1, 0, 0, 0, 0);  /* logit 0 */
    tiny_set_kv(&t, 2, 1, 0, 3, 0);  /* logit ln 2 */
    assert_int_equal(oracle_paged_attention(&t.o, t.out), 0);
    NEAR(t.out[0], 3.0 * 2.0 / 4.0);

    /* window 1: every row sees only its own key; M = 2 of L = 3 at positions 1 and 2 */
    tiny_init(&t, 2, 1);
    tiny_seq(&t, 3, 2);
    t.o.window = 1;
    t.bt[0] = 1;
    t.bt[1] = 0;
    tiny_set_kv(&t, 0, 0, 0, 100, 100);
    tiny_set_kv(&t, 1, 0, 0, 7, 8);
    tiny_set_kv(&t, 2, 0, 0, -1, -2);
    assert_int_equal(oracle_paged_attention(&t.o, t.out), 0);
    NEAR(t.out[0], 7.0);
    NEAR(t.out[1], 8.0);
    NEAR(t.out[2 * 1 + 0], -1.0);
    NEAR(t.out[2 * 1 + 1], -2.0);

    /* window 2 with L = 4, M = 1, B = 2: page 0 unreached, its entry may be garbage */
    tiny_init(&t, 2, 1);
    tiny_seq(&t, 4, 1);
    t.o.window = 2;
    t.bt[1] = 3;
    tiny_set_kv(&t, 2, 0, 0, 2, 0);
    tiny_set_kv(&t, 3, 0, 0, 4, 0);
    t.bt[0] = -1;
    assert_int_equal(oracle_paged_attention(&t.o, t.out), 0);
    NEAR(t.out[0], 3.0);

    /* ALiBi: q = 0, slope ln 2, keys at distance 0 and 1: weights 1 and 1/2 */
    tiny_init(&t, 4, 2);
    tiny_seq(&t, 2, 1);
    t.bt[0] = 0;
    tiny_set_kv(&t, 0, 0, 0, 3, 0);
    tiny_set_kv(&t, 1, 0, 0, 0, 3);
    t.slopes[0] = (float)log(2.0);
    t.slopes[1] = 0.0f;
    t.o.alibi_slopes = t.slopes;
    assert_int_equal(oracle_paged_attention(&t.o, t.out), 0);
    /* head 0: key 1 (current) weight 1, key 0 weight 1/2 */
    double w0 = exp(-(double)t.slopes[0]);
    NEAR(t.out[0], 3.0 * w0 / (1.0 + w0));
    NEAR(t.out[1], 3.0 / (1.0 + w0));
    /* head 1 (GQA: same kv head, slope 0): plain mean */
    NEAR(t.out[2], 1.5);
    NEAR(t.out[3], 1.5);

    /* softcap: scaled logits 100 and 0 become cap*tanh(100/cap) = ~1 and 0 with cap 1 */
    tiny_init(&t, 4, 1);
    tiny_seq(&t, 2, 1);
    t.bt[0] = 0;
    t.q[0][0][0] = 10.0f;
    tiny_set_kv(&t, 0, 10, 0, 1, 0);
    tiny_set_kv(&t, 1, 0, 0, 0, 0);
    t.o.logit_softcap = 1.0;
    assert_int_equal(oracle_paged_attention(&t.o, t.out), 0);
    double l = tanh(100.0);
    NEAR(t.out[0], exp(l) / (exp(l) + 1.0));

    /* M = L = 2 (prefill): row 0 sees key 0 only (causal), row 1 both */
    tiny_init(&t, 4, 1);
    tiny_seq(&t, 2, 2);
    t.bt[0] = 1;
    tiny_set_kv(&t, 0, 0, 0, 5, 0);
    tiny_set_kv(&t, 1, 0, 0, 1, 0);
    assert_int_equal(oracle_paged_attention(&t.o, t.out), 0);
    NEAR(t.out[0], 5.0);
    NEAR(t.out[2], 3.0);

    /* sinks: q = 0 (logits 0), V 2 and 4, sink ln 2 (weight 2): o = (2 + 4) / (1 + 1 + 2) */
    tiny_init(&t, 4, 2);
    tiny_seq(&t, 2, 1);
    t.bt[0] = 0;
    tiny_set_kv(&t, 0, 0, 0, 2, 0);
    tiny_set_kv(&t, 1, 0, 0, 4, 0);
    float sinks[2] = {(float)log(2.0), -INFINITY};
    t.o.sinks = sinks;
    assert_int_equal(oracle_paged_attention(&t.o, t.out), 0);
    NEAR(t.out[0], 6.0 / (2.0 + exp((double)sinks[0]))); /* (float)ln 2: weight ~2 */
    NEAR(t.out[2], 3.0); /* head 1: a -inf sink is no sink */
    /* a sink far above the logits takes (nearly) all the weight: o -> 0, never NaN */
    sinks[0] = 800.0f;
    assert_int_equal(oracle_paged_attention(&t.o, t.out), 0);
    NEAR(t.out[0], 0.0);
    t.o.sinks = NULL;

    /* a reached entry out of range is a harness error */
    printf("(an \"oracle: ... reaches block-table entry\" message is expected next)\n");
    t.bt[0] = 4;
    assert_int_equal(oracle_paged_attention(&t.o, t.out), -1);
}

/* The oracle's 8-bit KV: it decodes the stored bytes itself and scales them (per kv head). */
static void test_oracle_kv8_hand(void **state)
{
    (void)state;
    /* one sequence L = 2, M = 1, 2 q heads over 2 kv heads, D = 2, page 2, q = 0 (equal weights) */
    uint8_t k[2 * 2 * 2] = {0}, v[2 * 2 * 2];
    /* kv head 0: V rows {0x38 = 1.0, 0xB8 = -1.0}, {0x40 = 2.0, 0x01 = 2^-9}; kv head 1 likewise */
    const uint8_t rows[4] = {0x38, 0xB8, 0x40, 0x01};
    for (int g = 0; g < 2; ++g) {
        memcpy(v + g * 4, rows, 4);
    }
    float q[2][2] = {{0, 0}, {0, 0}}, k_scale[2] = {1.0f, 1.0f}, v_scale[2] = {0.5f, 4.0f};
    int32_t seq_lens[1] = {2}, qsl[2] = {0, 1}, bt[1] = {0};
    double out[4];
    oracle_paged o;
    memset(&o, 0, sizeof o);
    o.dtype = R35A_DTYPE_F32;
    o.kv_dtype = R35A_DTYPE_FP8_E4M3;
    o.k_scale = k_scale;
    o.v_scale = v_scale;
    o.kv_scale_per_head = 1;
    o.num_seqs = 1;
    o.num_tokens = 1;
    o.num_q_heads = o.num_kv_heads = 2;
    o.head_size = 2;
    o.page_size = 2;
    o.num_pages = 1;
    o.block_table_stride = 1;
    o.softmax_scale = 1.0;
    o.q = q;
    o.q_token_stride = 4;
    o.q_head_stride = 2;
    o.k = k;
    o.v = v;
    o.k_page_stride = o.v_page_stride = 8;
    o.k_head_stride = o.v_head_stride = 4;
    o.k_slot_stride = o.v_slot_stride = 2;
    o.seq_lens = seq_lens;
    o.query_start_loc = qsl;
    o.block_table = bt;
    assert_int_equal(oracle_paged_attention(&o, out), 0);
    NEAR(out[0], 0.5 * (1.0 + 2.0) / 2);
    NEAR(out[1], 0.5 * (-1.0 + ldexp(1.0, -9)) / 2);
    NEAR(out[2], 4.0 * (1.0 + 2.0) / 2);
    NEAR(out[3], 4.0 * (-1.0 + ldexp(1.0, -9)) / 2);
    /* int8, per tensor: 0x38 = 56, 0xB8 = -72, 0x40 = 64, 0x01 = 1 */
    o.kv_dtype = R35A_DTYPE_INT8;
    o.kv_scale_per_head = 0;
    assert_int_equal(oracle_paged_attention(&o, out), 0);
    NEAR(out[0], 0.5 * (56.0 + 64.0) / 2);
    NEAR(out[1], 0.5 * (-72.0 + 1.0) / 2);
    NEAR(out[2], 0.5 * (56.0 + 64.0) / 2);
}

/* The tests' fp8 e4m3 coding against a derivation through f16: an e4m3fn code's magnitude bits
 * shifted into an f16's place (exponent bias 15 instead of 7) are its value / 2^8, subnormals
 * included; S.1111.111 is NaN. Every code decodes, and every non-NaN code encodes back. */
static void test_fp8_coding_exhaustive(void **state)
{
    (void)state;
    for (int c = 0; c < 256; ++c) {
        double via_f16 = tu_f16_to_double((uint16_t)((c & 0x7F) << 7)) * 256.0;
        if (c & 0x80) {
            via_f16 = -via_f16;
        }
        double got = tu_fp8_e4m3_to_double((uint8_t)c);
        if ((c & 0x7F) == 0x7F) {
            assert_true(isnan(got));
            assert_int_equal(tu_fp8_e4m3_from_double(got) & 0x7F, 0x7F);
            continue;
        }
        assert_true(got == via_f16 && signbit(got) == signbit(via_f16));
        assert_int_equal(tu_fp8_e4m3_from_double(got), c);
    }
    assert_true(tu_fp8_e4m3_to_double(0x7E) == 448.0);
    assert_true(tu_fp8_e4m3_to_double(0x01) == ldexp(1.0, -9));
    /* rounding: halfway between 1 and 1.125 goes to even (1); saturation at 448 */
    assert_int_equal(tu_fp8_e4m3_from_double(1.0625), 0x38);
    assert_int_equal(tu_fp8_e4m3_from_double(1.0626), 0x39);
    assert_int_equal(tu_fp8_e4m3_from_double(1e6), 0x7E);
    assert_int_equal(tu_fp8_e4m3_from_double(-500.0), 0xFE);
    assert_int_equal(tu_fp8_e4m3_from_double(ldexp(1.0, -10)), 0x00); /* tie to even 0 */
    assert_int_equal(tu_fp8_e4m3_from_double(ldexp(3.0, -10)), 0x02);
    assert_int_equal(tu_int8_from_double(-200.0), -128);
    assert_int_equal(tu_int8_from_double(2.5), 2);
}

static void test_oracle_varlen_hand(void **state)
{
    (void)state;
    /* two segments [0,2) and [2,5), H = 1, D = 1, q = 0 everywhere */
    float q[5] = {0}, k[5] = {0}, v[5] = {1, 3, 2, 4, 9};
    int32_t cu[3] = {0, 2, 5};
    double out[5];
    oracle_varlen o;
    memset(&o, 0, sizeof o);
    o.dtype = R35A_DTYPE_F32;
    o.num_segments = 2;
    o.num_tokens = 5;
    o.num_q_heads = o.num_kv_heads = o.head_size = 1;
    o.softmax_scale = 1.0;
    o.q = q;
    o.k = k;
    o.v = v;
    o.q_token_stride = o.k_token_stride = o.v_token_stride = 1;
    o.q_head_stride = o.k_head_stride = o.v_head_stride = 1;
    o.cu_seqlens = cu;
    assert_int_equal(oracle_varlen_attention(&o, out), 0);
    NEAR(out[0], 2.0);
    NEAR(out[1], 2.0);
    NEAR(out[2], 5.0);
    NEAR(out[4], 5.0);
    o.causal = 1;
    assert_int_equal(oracle_varlen_attention(&o, out), 0);
    NEAR(out[0], 1.0);
    NEAR(out[1], 2.0);
    NEAR(out[2], 2.0);
    NEAR(out[3], 3.0);
    NEAR(out[4], 5.0);
    /* an empty segment in the middle changes nothing */
    int32_t cu2[4] = {0, 2, 2, 5};
    o.num_segments = 3;
    o.cu_seqlens = cu2;
    o.causal = 0;
    assert_int_equal(oracle_varlen_attention(&o, out), 0);
    NEAR(out[0], 2.0);
    NEAR(out[3], 5.0);
}

/* The harness builds what its spec says: padded strides, NaN gaps the oracle never reads, and
 * garbage block-table entries only where no query reaches. */
static void test_harness_build(void **state)
{
    (void)state;
    tu_rng rng;
    tu_rng_init(&rng, tu_case_seed("selftest", 0));
    paged_spec s;
    paged_spec_init(&s, R35A_DTYPE_BF16, 4, 2, 24, 4);
    s.window = 5;
    s.garbage_unreached = true;
    s.shuffle_pages = true;
    s.bt_pad = 3;
    s.extra_pages = 2;
    s.k_layout.nhd = true;
    s.k_layout.pad[0] = 3;
    s.v_layout.pad[1] = 5;
    s.q_head_pad = 2;
    s.o_token_pad = 7;
    paged_spec_add_seq(&s, 30, 3);
    paged_spec_add_seq(&s, 0, 0);
    paged_spec_add_seq(&s, 9, 9);
    paged_problem p;
    assert_int_equal(paged_problem_init(&p, &s, &rng), 0);
    assert_int_equal(p.num_tokens, 12);
    assert_int_equal(p.bt_stride, 8 + 3);
    /* seq 0: queries at 27..29, window 5 reaches keys 23..29: pages 5..7 */
    for (int lp = 0; lp < 5; ++lp) {
        int32_t e = p.block_table[lp];
        assert_true(e < 0 || e >= p.num_pages);
    }
    for (int lp = 5; lp < 8; ++lp) {
        int32_t e = p.block_table[lp];
        assert_true(e >= 0 && e < p.num_pages);
    }
    assert_int_equal(p.num_pages, 3 + 3 + 2);
    assert_true(p.ref_max > 0.0);
    /* gaps of Q are NaN, rows finite */
    assert_true(isnan(tu_load(R35A_DTYPE_BF16, p.q, 24)));
    assert_false(isnan(tu_load(R35A_DTYPE_BF16, p.q, 23)));
    paged_problem_free(&p);

    varlen_spec v;
    varlen_spec_init(&v, R35A_DTYPE_F16, 2, 1, 8);
    v.layout = VARLEN_FUSED;
    varlen_spec_add_segment(&v, 3);
    varlen_spec_add_segment(&v, 0);
    varlen_spec_add_segment(&v, 5);
    varlen_problem vp;
    assert_int_equal(varlen_problem_init(&vp, &v, &rng), 0);
    assert_int_equal(vp.desc.q_token_stride, 4 * 8);
    assert_true((uint8_t *)vp.k - (uint8_t *)vp.q == 2 * 8 * 2);
    assert_true((uint8_t *)vp.v - (uint8_t *)vp.q == 3 * 8 * 2);
    varlen_problem_free(&vp);
}

int main(void)
{
    tu_begin("test_selftest");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_known_values),   cmocka_unit_test(test_bf16_known_values),
        cmocka_unit_test(test_coding_round_trip),  cmocka_unit_test(test_rng),
        cmocka_unit_test(test_check_detects),      cmocka_unit_test(test_oracle_paged_hand),
        cmocka_unit_test(test_oracle_varlen_hand), cmocka_unit_test(test_harness_build),
        cmocka_unit_test(test_oracle_kv8_hand),    cmocka_unit_test(test_fp8_coding_exhaustive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
