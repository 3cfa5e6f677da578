/* test_planner.c - the GPU planner (src/plan_gfx1151.c) called directly, on host-known descriptors.
 *
 * Expected split counts and workspace sizes are worked out by hand here from the rules stated in
 * kernels/common/kernel_args.h (2 workgroups per CU, at least 16 tiles of 16 keys per split, at
 * most 64 splits; workspace = 256-byte rounded uint32 counters + one record of 2R + R*D floats per
 * (sequence, kv head, row group, split)), not by calling those formulas, so a change to either
 * side shows up. */
#include "plan_gfx1151.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#define ARCH "gfx1151"

static r35a_paged_attention_desc paged(r35a_dtype dtype, int num_seqs, int max_query_len, int max_seq_len,
                                       int q_heads, int kv_heads, int head_size, int page_size)
{
    r35a_paged_attention_desc d;
    int pages = (max_seq_len + page_size - 1) / page_size * num_seqs + 1;
    r35a_paged_attention_desc_init(&d, dtype, num_seqs, num_seqs * max_query_len, max_query_len, max_seq_len,
                                   q_heads, kv_heads, head_size, page_size, pages);
    return d;
}

/* Plans decode and checks the chosen variant, splits, grid, block and workspace. */
static void expect_decode(const r35a_paged_attention_desc *d, int num_cus, const char *variant, int splits,
                          uint32_t gy, uint32_t gz, uint32_t block, size_t workspace)
{
    r35a_gpu_launch l;
    char why[256];
    bool ok = r35a_plan_decode(d, ARCH, num_cus, NULL, &l, why, sizeof why);
    if (!ok)
        print_error("decode declined: %s\n", why);
    assert_true(ok);
    assert_string_equal(r35a_decode_variants[l.kernel].name, variant);
    assert_int_equal(l.num_splits, splits);
    assert_int_equal(l.grid[0], (uint32_t)splits);
    assert_int_equal(l.grid[1], gy);
    assert_int_equal(l.grid[2], gz);
    assert_int_equal(l.block[0], block);
    assert_int_equal(l.block[1], 1);
    assert_int_equal(l.block[2], 1);
    assert_int_equal(l.workspace_bytes, workspace);
}

/* Plans decode, expects a decline whose reason contains `needle`. */
static void expect_decode_declines(const r35a_paged_attention_desc *d, const char *only, const char *needle)
{
    r35a_gpu_launch l;
    char why[256] = "";
    bool ok = r35a_plan_decode(d, ARCH, 40, only, &l, why, sizeof why);
    if (ok || !strstr(why, needle))
        print_error("expected a decline mentioning '%s', got %s '%s'\n", needle, ok ? "acceptance" : "decline",
                    why);
    assert_false(ok);
    assert_non_null(strstr(why, needle));
}

static void expect_generic_paged(const r35a_paged_attention_desc *d, const char *kernel)
{
    r35a_gpu_launch l;
    char why[256];
    bool ok = r35a_plan_generic_paged(d, ARCH, NULL, &l, why, sizeof why);
    if (!ok)
        print_error("generic declined: %s\n", why);
    assert_true(ok);
    assert_string_equal(r35a_generic_kernels[l.kernel].name, kernel);
    assert_int_equal(l.grid[0], (uint32_t)d->num_tokens);
    assert_int_equal(l.grid[1], (uint32_t)d->num_q_heads);
    assert_int_equal(l.grid[2], 1);
    assert_int_equal(l.block[0], R35A_GENERIC_THREADS);
    assert_int_equal(l.num_splits, 1);
    assert_int_equal(l.workspace_bytes, 0);
}

static void test_registry(void **state)
{
    (void)state;
    assert_true(R35A_NUM_DECODE_VARIANTS > 0);
    assert_true(R35A_NUM_GENERIC_KERNELS > 0);
    for (int i = 0; i < R35A_NUM_DECODE_VARIANTS; ++i) {
        const r35a_decode_variant *v = &r35a_decode_variants[i];
        assert_int_equal(r35a_find_decode_variant(v->name), i);
        assert_true(v->rows % 16 == 0 && v->kw >= 1 && v->dw >= 1 && 32 * v->kw * v->dw <= 1024);
        assert_true(v->head_size % (16 * v->dw) == 0);
    }
    for (int i = 0; i < R35A_NUM_GENERIC_KERNELS; ++i)
        assert_int_equal(r35a_find_generic_kernel(r35a_generic_kernels[i].name), i);
    assert_int_equal(r35a_find_decode_variant("decode_f16_d96_nope"), -1);
}

/* D=128, G=4, M=1, one sequence of 4096: 4 rows -> R=16; 8 workgroups want 80 -> 10 splits
 * (4096 keys = 257 tiles allow 16). Workspace: 8 counters -> 256 B, 8 x 10 records of
 * (2*16 + 16*128) floats = 665600 B. */
static void test_decode_single_sequence(void **state)
{
    (void)state;
    r35a_paged_attention_desc d = paged(R35A_DTYPE_F16, 1, 1, 4096, 32, 8, 128, 16);
    expect_decode(&d, 40, "decode_f16_d128_r16_kw2_dw2_w8", 10, 8, 1, 128, 256 + 80 * 2080 * 4);
    /* 32 CUs (Radeon 8050S): 64 workgroups wanted -> 8 splits. */
    expect_decode(&d, 32, "decode_f16_d128_r16_kw2_dw2_w8", 8, 8, 1, 128, 256 + 64 * 2080 * 4);
    /* bf16 picks the bf16 kernel of the same shape. */
    r35a_paged_attention_desc b = paged(R35A_DTYPE_BF16, 1, 1, 4096, 32, 8, 128, 16);
    expect_decode(&b, 40, "decode_bf16_d128_r16_kw2_dw2_w8", 10, 8, 1, 128, 256 + 80 * 2080 * 4);
}

/* G=8, M=4: 32 rows -> R=32 needs 1 row group, R=16 two: R=32. 2 seqs x 8 kv heads = 16 WGs ->
 * 5 splits (8192 keys = 513 tiles allow 32). Counters 16 -> 256 B; records 16 x 5 of
 * (64 + 32*128) floats. */
static void test_decode_speculative_rows(void **state)
{
    (void)state;
    r35a_paged_attention_desc d = paged(R35A_DTYPE_F16, 2, 4, 8192, 64, 8, 128, 32);
    expect_decode(&d, 40, "decode_f16_d128_r32_kw1_dw4_w8", 5, 8, 2, 128, 256 + 80 * 4160 * 4);
    /* G=8, M=8: 64 rows -> two row groups of 32 (four of 16 would read the KV twice as often). */
    r35a_paged_attention_desc e = paged(R35A_DTYPE_F16, 2, 8, 8192, 64, 8, 128, 32);
    expect_decode(&e, 40, "decode_f16_d128_r32_kw1_dw4_w8", 3, 16, 2, 128, 256 + 96 * 4160 * 4);
    /* G=2, M=8: 16 rows fit R=16 (one group either way: the smaller tile wins). */
    r35a_paged_attention_desc f = paged(R35A_DTYPE_BF16, 1, 8, 1000, 16, 8, 64, 16);
    /* 1000 keys: (1000+15)/16 + 1 = 64 tiles allow 4 splits; 8 WGs want 10. Records 8 x 4 of
     * (32 + 16*64) floats; the 256-byte counter block. */
    expect_decode(&f, 40, "decode_bf16_d64_r16_kw4_dw1_w8", 4, 8, 1, 128, 256 + 32 * 1056 * 4);
}

static void test_decode_no_split_when_busy_or_short(void **state)
{
    (void)state;
    /* 64 seqs x 8 kv heads = 512 WGs >= 80: one split, no workspace. */
    r35a_paged_attention_desc d = paged(R35A_DTYPE_BF16, 64, 1, 4096, 8, 8, 64, 16);
    expect_decode(&d, 40, "decode_bf16_d64_r16_kw4_dw1_w8", 1, 8, 64, 128, 0);
    /* 100 keys: 8 tiles, fewer than the 16 a split needs: one split. */
    r35a_paged_attention_desc s = paged(R35A_DTYPE_F16, 1, 1, 100, 8, 1, 256, 16);
    expect_decode(&s, 40, "decode_f16_d256_r16_kw1_dw4_w8", 1, 1, 1, 128, 0);
    /* D=512: the R=16 kernel has 8 waves of 64 columns. */
    r35a_paged_attention_desc big = paged(R35A_DTYPE_F16, 40, 1, 512, 8, 1, 512, 16);
    expect_decode(&big, 40, "decode_f16_d512_r16_kw1_dw8_w8", 2, 1, 40, 256, 256 + 80 * (32 + 16 * 512) * 4);
}

static void test_decode_window_limits_splits(void **state)
{
    (void)state;
    /* Window 512 over a 32768 context: the rows reach 512 keys = 33 tiles -> at most 2 splits. */
    r35a_paged_attention_desc d = paged(R35A_DTYPE_F16, 1, 1, 32768, 32, 8, 128, 16);
    d.window = 512;
    expect_decode(&d, 40, "decode_f16_d128_r16_kw2_dw2_w8", 2, 8, 1, 128, 256 + 16 * 2080 * 4);
    /* Page sizes of the hybrid models (multiples of 16) are served. */
    const int pages[] = {32, 528, 544, 784, 1056};
    for (size_t i = 0; i < sizeof pages / sizeof *pages; ++i) {
        r35a_paged_attention_desc p = paged(R35A_DTYPE_BF16, 1, 1, 4096, 32, 8, 128, pages[i]);
        expect_decode(&p, 40, "decode_bf16_d128_r16_kw2_dw2_w8", 10, 8, 1, 128, 256 + 80 * 2080 * 4);
    }
}

static void test_decode_nothing_to_launch(void **state)
{
    (void)state;
    /* max_query_len 0 (every sequence padding): no row groups, grid y = 0. */
    r35a_paged_attention_desc d = paged(R35A_DTYPE_F16, 4, 0, 64, 8, 8, 128, 16);
    r35a_gpu_launch l;
    char why[256];
    assert_true(r35a_plan_decode(&d, ARCH, 40, NULL, &l, why, sizeof why));
    assert_int_equal(l.grid[1], 0);
}

static void test_decode_declines(void **state)
{
    (void)state;
    r35a_paged_attention_desc d = paged(R35A_DTYPE_F16, 1, 1, 4096, 32, 8, 128, 16);

    r35a_paged_attention_desc softcap = d;
    softcap.logit_softcap = 30.0f;
    expect_decode_declines(&softcap, NULL, "softcap");

    r35a_paged_attention_desc alibi = d;
    alibi.use_alibi = 1;
    expect_decode_declines(&alibi, NULL, "ALiBi");

    r35a_paged_attention_desc page8 = paged(R35A_DTYPE_F16, 1, 1, 4096, 32, 8, 128, 8);
    expect_decode_declines(&page8, NULL, "page_size 8 is not a multiple of 16");

    r35a_paged_attention_desc d96 = paged(R35A_DTYPE_F16, 1, 1, 4096, 32, 8, 96, 16);
    expect_decode_declines(&d96, NULL, "head_size 96 not built (gfx1151 f16: 64, 128, 256, 512)");

    r35a_paged_attention_desc m12 = paged(R35A_DTYPE_F16, 1, 12, 4096, 32, 8, 128, 16);
    expect_decode_declines(&m12, NULL, "max_query_len 12 > 8");

    r35a_paged_attention_desc f32 = paged(R35A_DTYPE_F32, 1, 1, 4096, 32, 8, 128, 16);
    expect_decode_declines(&f32, NULL, "dtype f32");

    r35a_paged_attention_desc stride = d;
    stride.k_slot_stride = 132; /* padded rows of 264 bytes: not 16-byte aligned */
    stride.k_head_stride = 132 * 16;
    stride.k_page_stride = 132 * 16 * 8;
    expect_decode_declines(&stride, NULL, "k_slot_stride 132 is not a multiple of 8");

    r35a_paged_attention_desc qstride = d;
    qstride.q_token_stride = 32 * 128 + 4;
    expect_decode_declines(&qstride, NULL, "q_token_stride");

    r35a_paged_attention_desc many = paged(R35A_DTYPE_F16, 70000, 1, 64, 8, 8, 128, 16);
    expect_decode_declines(&many, NULL, "num_seqs 70000 above the grid limit");

    /* Several reasons are all named. */
    r35a_paged_attention_desc both = page8;
    both.logit_softcap = 50.0f;
    both.use_alibi = 1;
    expect_decode_declines(&both, NULL, "logit softcap, ALiBi, page_size 8");
}

static void test_decode_forced_variant(void **state)
{
    (void)state;
    /* 4 rows would pick R=16; forcing the R=32 kernel uses it. */
    r35a_paged_attention_desc d = paged(R35A_DTYPE_F16, 1, 1, 4096, 32, 8, 128, 16);
    r35a_gpu_launch l;
    char why[256];
    assert_true(r35a_plan_decode(&d, ARCH, 40, "decode_f16_d128_r32_kw1_dw4_w8", &l, why, sizeof why));
    assert_string_equal(r35a_decode_variants[l.kernel].name, "decode_f16_d128_r32_kw1_dw4_w8");
    expect_decode_declines(&d, "decode_bf16_d128_r32_kw1_dw4_w8", "is for bf16");
    expect_decode_declines(&d, "decode_f16_d64_r16_kw4_dw1_w8", "head_size 128 not built (gfx1151 f16: 64)");
    expect_decode_declines(&d, "decode_f16_d100", "no decode variant decode_f16_d100");
    /* Another arch has no variants here. */
    assert_false(r35a_plan_decode(&d, "gfx1100", 40, NULL, &l, why, sizeof why));
}

static void test_generic_paged(void **state)
{
    (void)state;
    r35a_paged_attention_desc d = paged(R35A_DTYPE_F16, 3, 12, 4096, 32, 8, 128, 16);
    expect_generic_paged(&d, "generic_paged_f16_dmax256");      /* M = 12 */
    r35a_paged_attention_desc d96 = paged(R35A_DTYPE_BF16, 2, 1, 100, 12, 4, 96, 8);
    d96.logit_softcap = 30.0f;
    d96.use_alibi = 1;
    expect_generic_paged(&d96, "generic_paged_bf16_dmax256");   /* D=96, page 8, softcap, ALiBi */
    r35a_paged_attention_desc d512 = paged(R35A_DTYPE_F16, 1, 1, 100, 8, 8, 512, 16);
    expect_generic_paged(&d512, "generic_paged_f16_dmax1024");
    r35a_paged_attention_desc d1024 = paged(R35A_DTYPE_BF16, 1, 1, 100, 8, 8, 1024, 16);
    expect_generic_paged(&d1024, "generic_paged_bf16_dmax1024");

    r35a_gpu_launch l;
    char why[256];
    r35a_paged_attention_desc f32 = paged(R35A_DTYPE_F32, 1, 1, 100, 8, 8, 128, 16);
    assert_false(r35a_plan_generic_paged(&f32, ARCH, NULL, &l, why, sizeof why));
    assert_non_null(strstr(why, "dtype f32"));
    /* Forcing the dmax1024 kernel for a small head size works; a varlen kernel is not a paged one. */
    assert_true(r35a_plan_generic_paged(&d, ARCH, "generic_paged_f16_dmax1024", &l, why, sizeof why));
    assert_string_equal(r35a_generic_kernels[l.kernel].name, "generic_paged_f16_dmax1024");
    assert_false(r35a_plan_generic_paged(&d, ARCH, "generic_varlen_f16_dmax256", &l, why, sizeof why));
}

static void test_generic_varlen(void **state)
{
    (void)state;
    r35a_varlen_attention_desc d;
    r35a_varlen_attention_desc_init(&d, R35A_DTYPE_BF16, 4, 1000, 400, 16, 16, 80);
    r35a_gpu_launch l;
    char why[256];
    assert_true(r35a_plan_generic_varlen(&d, ARCH, NULL, &l, why, sizeof why));
    assert_string_equal(r35a_generic_kernels[l.kernel].name, "generic_varlen_bf16_dmax256");
    assert_int_equal(l.grid[0], 1000);
    assert_int_equal(l.grid[1], 16);
    assert_int_equal(l.grid[2], 1);
    assert_int_equal(l.workspace_bytes, 0);
}

static void test_decode_args(void **state)
{
    (void)state;
    r35a_paged_attention_desc d = paged(R35A_DTYPE_F16, 2, 4, 8192, 64, 8, 128, 32);
    d.window = 1000;
    r35a_gpu_launch l;
    char why[256];
    assert_true(r35a_plan_decode(&d, ARCH, 40, NULL, &l, why, sizeof why));
    static int32_t seq_lens[2], qsl[3], table[2 * 256];
    static _Alignas(16) uint16_t q[8 * 64 * 128], o[8 * 64 * 128], kv[16];
    static _Alignas(16) unsigned char ws[64];
    r35a_paged_attention_args a = {sizeof a, q, kv, kv, o, seq_lens, qsl, table, NULL};
    r35a_decode_args ka;
    r35a_fill_decode_args(&d, &a, &l, ws, &ka);
    assert_ptr_equal(ka.q, q);
    assert_ptr_equal(ka.out, o);
    assert_ptr_equal(ka.workspace, l.num_splits > 1 ? (void *)ws : NULL);
    assert_int_equal(ka.group_size, 8);
    assert_int_equal(ka.num_row_groups, 1);
    assert_int_equal(ka.num_splits, l.num_splits);
    assert_int_equal(ka.max_query_len, 4);
    assert_int_equal(ka.window, 1000);
    assert_int_equal(ka.page_size, 32);
    assert_int_equal(ka.k_slot_stride, 128);
    assert_int_equal(ka.k_head_stride, 32 * 128);
    assert_int_equal(ka.k_page_stride, 8 * 32 * 128);
    assert_int_equal(ka.block_table_stride, 256);
    assert_true(fabs(ka.scale_log2 - (1.0 / sqrt(128.0)) * 1.4426950408889634) < 1e-6);

    assert_true(r35a_decode_pointers_aligned(&a, ws, l.num_splits, why, sizeof why));
    r35a_paged_attention_args off = a;
    off.k_cache = (const unsigned char *)kv + 2;
    assert_false(r35a_decode_pointers_aligned(&off, ws, l.num_splits, why, sizeof why));
    assert_non_null(strstr(why, "k_cache"));
    assert_false(r35a_decode_pointers_aligned(&a, ws + 8, 2, why, sizeof why));
    assert_non_null(strstr(why, "workspace"));
    assert_true(r35a_decode_pointers_aligned(&a, ws + 8, 1, why, sizeof why)); /* unused workspace */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry),
        cmocka_unit_test(test_decode_single_sequence),
        cmocka_unit_test(test_decode_speculative_rows),
        cmocka_unit_test(test_decode_no_split_when_busy_or_short),
        cmocka_unit_test(test_decode_window_limits_splits),
        cmocka_unit_test(test_decode_nothing_to_launch),
        cmocka_unit_test(test_decode_declines),
        cmocka_unit_test(test_decode_forced_variant),
        cmocka_unit_test(test_generic_paged),
        cmocka_unit_test(test_generic_varlen),
        cmocka_unit_test(test_decode_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
