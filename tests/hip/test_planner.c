/* test_planner.c - the GPU planners (src/plan_*.c) and the registry called directly, on host-known descriptors.
 *
 * Expected split counts and workspace sizes are worked out by hand here from the rules stated in
 * kernels/decode/decode_args.h (2 workgroups per CU, at least 4 tiles of 16 keys per split, at
 * most 64 splits; workspace = one record of 2R + R*D floats per (sequence, kv head, row group,
 * split); the split merge launch: ceil(min(R, G x M) x D / 4 / 128) workgroups of 128 threads per
 * (kv head x row group, sequence)), not by calling those formulas, so a change to either side shows up. */
#include "planner.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
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

/* Checks a prefill launch (an encoder variant's paged sibling, prefill_args.h): its name, its grid
 * { num_seqs x ceil(max_query_len x G / R), Hkv, 1 } (G = Hq / Hkv query heads packed per item),
 * block, min_query_len, no workspace. */
static void expect_prefill_launch(const r35a_gpu_launch *l, const r35a_paged_attention_desc *d, const char *name,
                                  int32_t min_query_len)
{
    assert_true(l->encoder_paged);
    assert_int_equal(l->family, R35A_GPU_ENCODER);
    assert_string_equal(r35a_encoder_paged_name(l->kernel), name);
    const r35a_encoder_variant *v = &r35a_encoder_variants[l->kernel];
    const uint32_t rows = (uint32_t)(v->rows * v->nw);
    assert_int_equal(v->maxlen, 0);
    const uint32_t group = (uint32_t)(d->num_q_heads / d->num_kv_heads);   /* query heads packed per item */
    assert_int_equal(l->grid[0], (uint32_t)d->num_seqs * (((uint32_t)d->max_query_len * group + rows - 1) / rows));
    assert_int_equal(l->grid[1], (uint32_t)d->num_kv_heads);
    assert_int_equal(l->grid[2], 1);
    assert_int_equal(l->block[0], 32u * (uint32_t)v->nw);
    assert_int_equal(l->min_query_len, min_query_len);
    assert_int_equal(l->workspace_bytes, 0);
}

/* Plans a mixed batch and checks both launches: the decode part's variant, splits, grid and
 * workspace, and the launch of the longer sequences: the encoder's paged sibling `second` (a name
 * ending in _paged), or the generic launch over every token. */
static void expect_mixed(const r35a_paged_attention_desc *d, const char *only, const char *variant, int splits,
                         uint32_t gy, size_t workspace, const char *second)
{
    r35a_gpu_launch dl, gl;
    char why[256];
    bool ok = r35a_plan_mixed(d, ARCH, 40, only, &dl, &gl, why, sizeof why);
    if (!ok)
        print_error("mixed declined: %s\n", why);
    assert_true(ok);
    assert_string_equal(r35a_decode_variants[dl.kernel].name, variant);
    assert_int_equal(dl.num_splits, splits);
    assert_int_equal(dl.grid[0], (uint32_t)splits);
    assert_int_equal(dl.grid[1], gy);
    assert_int_equal(dl.grid[2], (uint32_t)d->num_seqs);
    assert_int_equal(dl.workspace_bytes, workspace);
    const size_t n = strlen(second);
    if (n > 6 && strcmp(second + n - 6, "_paged") == 0) {
        expect_prefill_launch(&gl, d, second, R35A_DECODE_MAX_QUERY_LEN);
        return;
    }
    assert_false(gl.encoder_paged);
    assert_string_equal(r35a_generic_kernels[gl.kernel].name, second);
    assert_int_equal(gl.grid[0], (uint32_t)d->num_tokens);
    assert_int_equal(gl.grid[1], (uint32_t)d->num_q_heads);
    assert_int_equal(gl.grid[2], 1);
    assert_int_equal(gl.block[0], R35A_GENERIC_THREADS);
    assert_int_equal(gl.workspace_bytes, 0);
}

static void expect_mixed_declines(const r35a_paged_attention_desc *d, const char *needle)
{
    r35a_gpu_launch dl, gl;
    char why[256] = "";
    bool ok = r35a_plan_mixed(d, ARCH, 40, NULL, &dl, &gl, why, sizeof why);
    if (ok || !strstr(why, needle))
        print_error("expected a decline mentioning '%s', got %s '%s'\n", needle, ok ? "acceptance" : "decline",
                    why);
    assert_false(ok);
    assert_non_null(strstr(why, needle));
}

static r35a_varlen_attention_desc varlen(r35a_dtype dtype, int num_segments, int num_tokens, int max_seqlen,
                                         int q_heads, int kv_heads, int head_size)
{
    r35a_varlen_attention_desc d;
    r35a_varlen_attention_desc_init(&d, dtype, num_segments, num_tokens, max_seqlen, q_heads, kv_heads, head_size);
    return d;
}

/* Checks planned encoder launches against the variant's grid of gx x heads workgroups: one launch of
 * that grid, or the tail split (encoder_args.h) of its items: the variant over the first items
 * (one-dimensional) and its tail kernel over two workgroups per tail item, or the tail kernel alone. */
static void expect_encoder_launches(const r35a_gpu_launch *l, int n, uint32_t gx, uint32_t heads, uint32_t block)
{
    assert_true(n == 1 || n == 2);
    for (int i = 0; i < n; ++i) {
        assert_int_equal(l[i].kernel, l[0].kernel);
        assert_int_equal(l[i].grid[2], 1);
        assert_int_equal(l[i].block[0], block);
        assert_int_equal(l[i].block[1], 1);
        assert_int_equal(l[i].block[2], 1);
        assert_int_equal(l[i].num_splits, 1);
        assert_int_equal(l[i].workspace_bytes, 0);
        assert_int_equal(l[i].tail_items, l[0].tail_items);
    }
    if (l[0].tail_items == 0) {
        assert_int_equal(n, 1);
        assert_false(l[0].encoder_tail);
        assert_int_equal(l[0].grid[0], gx);
        assert_int_equal(l[0].grid[1], heads);
        return;
    }
    const uint32_t tail = (uint32_t)l[0].tail_items, items = gx * heads;
    const r35a_gpu_launch *t = &l[n - 1];
    assert_true(t->encoder_tail && t->grid[0] == 2 * tail && t->grid[1] == 1);
    assert_true(t->programmatic == (n == 2));
    if (n == 2)
        assert_true(!l[0].encoder_tail && !l[0].programmatic && l[0].grid[0] == items - tail && l[0].grid[1] == 1);
    else
        assert_int_equal(tail, items);
}

/* Plans the encoder and checks the variant, grid, block; no workspace, no splits. */
static void expect_encoder(const r35a_varlen_attention_desc *d, const char *only, const char *variant, uint32_t gx,
                           uint32_t block)
{
    r35a_gpu_launch l[R35A_ENCODER_MAX_LAUNCHES];
    int n = 0;
    char why[256];
    bool ok = r35a_plan_encoder(d, ARCH, 40, only, l, &n, why, sizeof why);
    if (!ok)
        print_error("encoder declined: %s\n", why);
    assert_true(ok);
    assert_string_equal(r35a_encoder_variants[l[0].kernel].name, variant);
    expect_encoder_launches(l, n, gx, (uint32_t)d->num_q_heads, block);
}

/* Plans the varlen desc on arch (forced variant only, or NULL) and expects a decline naming needle. */
static void expect_encoder_declines_on(const r35a_varlen_attention_desc *d, const char *arch, const char *only,
                                       const char *needle)
{
    r35a_gpu_launch l[R35A_ENCODER_MAX_LAUNCHES];
    int n = 0;
    char why[256] = "";
    bool ok = r35a_plan_encoder(d, arch, 40, only, l, &n, why, sizeof why);
    if (ok || !strstr(why, needle))
        print_error("expected a decline mentioning '%s', got %s '%s'\n", needle, ok ? "acceptance" : "decline",
                    why);
    assert_false(ok);
    assert_non_null(strstr(why, needle));
}

static void expect_encoder_declines(const r35a_varlen_attention_desc *d, const char *only, const char *needle)
{
    expect_encoder_declines_on(d, ARCH, only, needle);
}

static void test_registry(void **state)
{
    (void)state;
    assert_true(R35A_NUM_DECODE_VARIANTS > 0);
    assert_true(R35A_NUM_GENERIC_KERNELS > 0);
    for (int i = 0; i < R35A_NUM_DECODE_VARIANTS; ++i) {
        const r35a_decode_variant *v = &r35a_decode_variants[i];
        assert_int_equal(r35a_registry_find(R35A_GPU_DECODE, v->arch, v->name), i);
        /* rows: whole 16-row tiles, or 8 (NVIDIA's 8-row layer) or 4 (gfx11's 4-row layer), one row wave */
        assert_true((v->rows % 16 == 0 || (v->rows == 8 && v->rw == 1 && strncmp(v->arch, "sm_", 3) == 0) ||
                     (v->rows == 4 && v->rw == 1 && strncmp(v->arch, "gfx11", 5) == 0)) &&
                    v->kw >= 1 && v->dw >= 1 && v->rw >= 1 && 32 * v->kw * v->dw * v->rw <= 1024);
        assert_true(v->head_size % (16 * v->dw) == 0);
    }
    for (int i = 0; i < R35A_NUM_GENERIC_KERNELS; ++i)
        assert_int_equal(r35a_registry_find(R35A_GPU_GENERIC, r35a_generic_kernels[i].arch, r35a_generic_kernels[i].name), i);
    /* The gfx1151 encoder variants: 6 head sizes x 2 dtypes, a workgroup-wide and a small-problem
     * tiling each. */
    int gfx1151_encoders = 0;
    for (int i = 0; i < R35A_NUM_ENCODER_VARIANTS; ++i) {
        const r35a_encoder_variant *v = &r35a_encoder_variants[i];
        gfx1151_encoders += strcmp(v->arch, ARCH) == 0;
        assert_int_equal(r35a_registry_find(R35A_GPU_ENCODER, v->arch, v->name), i);
        assert_true((v->rows == 16 || v->rows == 32) && v->kb % 16 == 0 && v->nw >= 1 && 32 * v->nw <= 1024);
        assert_true(v->dtype == R35A_DTYPE_F16 || v->dtype == R35A_DTYPE_BF16);
        assert_true(v->maxlen >= 0 && (v->maxlen > 0 || v->rows * v->nw <= 128));
    }
    assert_int_equal(gfx1151_encoders, 24);
    assert_int_equal(r35a_registry_find(R35A_GPU_ENCODER, ARCH, "encoder_f16_d96_nope"), -1);
    assert_int_equal(r35a_registry_find(R35A_GPU_DECODE, ARCH, "decode_f16_d96_nope"), -1);
    /* A kernel name is looked up within one tuning table. */
    assert_int_equal(r35a_registry_find(R35A_GPU_DECODE, "gfx1100", r35a_decode_variants[0].name), -1);
    /* Every gfx11 arch of the arch table runs gfx1151's rows and counts WGPs. */
    for (const r35a_gpu_arch *a = r35a_gpu_archs; a->arch; ++a)
        if (strncmp(a->arch, "gfx11", 5) == 0) {
            assert_string_equal(a->tuning, "gfx1151");
            assert_string_equal(a->unit, "wgp");
            assert_int_equal(a->cus_per_unit, 2);
        }
    assert_non_null(r35a_find_gpu_arch("gfx1100"));
    assert_null(r35a_find_gpu_arch("gfx1200"));
}

/* D=128, G=4, M=1, one sequence of 4096: 4 rows -> R=16; 8 workgroups want 80 -> 10 splits
 * (4096 keys = 257 tiles allow 64). Workspace: 8 x 10 records of (2*16 + 16*128) floats = 665600 B. */
static void test_decode_single_sequence(void **state)
{
    (void)state;
    /* G = 8, M = 1: 8 rows, one 16-row tile (gfx1151 has no rows-8 variant); 8 workgroups want 80 ->
     * 10 splits, records of 2 x 16 + 16 x 128 floats */
    r35a_paged_attention_desc d = paged(R35A_DTYPE_F16, 1, 1, 4096, 64, 8, 128, 16);
    expect_decode(&d, 40, "decode_f16_d128_r16_kw2_dw2_w6_wmma16_pregs2_qlds", 10, 8, 1, 128, 80 * 2080 * 4);
    /* 32 CUs (Radeon 8050S): 64 workgroups wanted -> 8 splits. */
    expect_decode(&d, 32, "decode_f16_d128_r16_kw2_dw2_w6_wmma16_pregs2_qlds", 8, 8, 1, 128, 64 * 2080 * 4);
    /* bf16 picks the bf16 kernel of the same shape. */
    r35a_paged_attention_desc b = paged(R35A_DTYPE_BF16, 1, 1, 4096, 64, 8, 128, 16);
    expect_decode(&b, 40, "decode_bf16_d128_r16_kw2_dw2_w6_wmma16_pregs2_qlds", 10, 8, 1, 128, 80 * 2080 * 4);
    /* G = 4, M = 1 (the bench's default problem): 4 rows, the rows-4 variant; records of 2 x 4 + 4 x 128 */
    r35a_paged_attention_desc r4 = paged(R35A_DTYPE_F16, 1, 1, 4096, 32, 8, 128, 16);
    expect_decode(&r4, 40, "decode_f16_d128_r4_kw2_dw2_w8_dot4_pregs2_qlds", 10, 8, 1, 128, 80 * 520 * 4);
    r4.kv_dtype = R35A_DTYPE_FP8_E4M3;
    expect_decode(&r4, 40, "decode_f16_fp8_d128_r4_kw1_dw2_w6_dot4_pregs3_qstg", 10, 8, 1, 64, 80 * 520 * 4);   /* its own tiling: 2 waves */
    /* G = 2, M = 2: 4 rows too; G = 5, M = 1 and G = 2, M = 3: 5 and 6 rows, one 16-row tile */
    r35a_paged_attention_desc m2 = paged(R35A_DTYPE_BF16, 1, 2, 4096, 16, 8, 256, 16);
    expect_decode(&m2, 40, "decode_bf16_d256_r4_kw1_dw4_w8_dot4_pregs2_qlds", 10, 8, 1, 128, 80 * (8 + 4 * 256) * 4);
    r35a_paged_attention_desc g5 = paged(R35A_DTYPE_F16, 1, 1, 4096, 40, 8, 128, 16);
    expect_decode(&g5, 40, "decode_f16_d128_r16_kw2_dw2_w6_wmma16_pregs2_qlds", 10, 8, 1, 128, 80 * 2080 * 4);
    r35a_paged_attention_desc m3 = paged(R35A_DTYPE_F16, 1, 3, 4096, 16, 8, 128, 16);
    expect_decode(&m3, 40, "decode_f16_d128_r16_kw2_dw2_w6_wmma16_pregs2_qlds", 10, 8, 1, 128, 80 * 2080 * 4);
}

/* G=8, M=4: 32 rows -> R=32 needs 1 row group, R=16 two: R=32. 2 seqs x 8 kv heads = 16 WGs ->
 * 5 splits (8192 keys = 513 tiles allow 128). Records 16 x 5 of (64 + 32*128) floats. */
static void test_decode_speculative_rows(void **state)
{
    (void)state;
    r35a_paged_attention_desc d = paged(R35A_DTYPE_F16, 2, 4, 8192, 64, 8, 128, 32);
    expect_decode(&d, 40, "decode_f16_d128_r32_kw1_dw4_w8_wmma16_pregs2_qregs", 5, 8, 2, 128, 80 * 4160 * 4);
    /* G=8, M=8: 64 rows -> two row groups of 32 (four of 16 would read the KV twice as often). */
    r35a_paged_attention_desc e = paged(R35A_DTYPE_F16, 2, 8, 8192, 64, 8, 128, 32);
    expect_decode(&e, 40, "decode_f16_d128_r32_kw1_dw4_w8_wmma16_pregs2_qregs", 3, 16, 2, 128, 96 * 4160 * 4);
    /* G=2, M=8: 16 rows fit R=16 (one group either way: the smaller tile wins). */
    r35a_paged_attention_desc f = paged(R35A_DTYPE_BF16, 1, 8, 1000, 16, 8, 64, 16);
    /* 1000 keys: (1000+15)/16 + 1 = 64 tiles allow 16 splits; 8 WGs want 10 (3 resident per CU: the cap
     * is 120). Records 8 x 10 of (32 + 16*64) floats. */
    expect_decode(&f, 40, "decode_bf16_d64_r16_kw4_dw1_w6_wmma16_pregs2_qlds", 10, 8, 1, 128, 80 * 1056 * 4);
}

static void test_decode_no_split_when_busy_or_short(void **state)
{
    (void)state;
    /* 64 seqs x 8 kv heads = 512 WGs >= 80: one split, no workspace. */
    r35a_paged_attention_desc d = paged(R35A_DTYPE_BF16, 64, 1, 4096, 8, 8, 64, 16);
    expect_decode(&d, 40, "decode_bf16_d64_r4_kw4_dw1_w8_dot4_pregs2_qlds", 1, 8, 64, 128, 0);
    /* 40 keys: (40+15)/16 + 1 = 4 tiles, one split's worth: one split. 100 keys: 8 tiles allow 2
     * splits of 4 (the one workgroup wants 80); 2 records of (32 + 16*256) floats. */
    r35a_paged_attention_desc t = paged(R35A_DTYPE_F16, 1, 1, 40, 8, 1, 256, 16);
    expect_decode(&t, 40, "decode_f16_d256_r16_kw1_dw4_w6_wmma16_pregs2_qlds", 1, 1, 1, 128, 0);
    r35a_paged_attention_desc s = paged(R35A_DTYPE_F16, 1, 1, 100, 8, 1, 256, 16);
    expect_decode(&s, 40, "decode_f16_d256_r16_kw1_dw4_w6_wmma16_pregs2_qlds", 2, 1, 1, 128, 2 * (32 + 16 * 256) * 4);
    /* D=512: the R=16 kernel has 8 waves of 64 columns. */
    r35a_paged_attention_desc big = paged(R35A_DTYPE_F16, 40, 1, 512, 8, 1, 512, 16);
    expect_decode(&big, 40, "decode_f16_d512_r16_kw1_dw8_w6_wmma16_pregs2_qlds", 2, 1, 40, 256, 80 * (32 + 16 * 512) * 4);
}

/* The split merge launch follows a decode launch with splits: decode_merge_<dtype>, 128 threads,
 * x = ceil(min(R, G x M) x D / 4 x lanes / 128) workgroups per (kv head x row group, sequence), 4
 * lanes per item above 8 planned splits, else 1. */
static void test_decode_split_merge_launch(void **state)
{
    (void)state;
    const struct {
        r35a_dtype dtype;
        int seqs, m, ctx, hq, hkv, d;
        const char *merge;
        uint32_t gx, gy;
    } cases[] = {
        {R35A_DTYPE_F16, 1, 1, 4096, 32, 8, 128, "decode_merge_f16", 4, 8},    /* 4 rows x 32 pieces x 4 */
        {R35A_DTYPE_BF16, 1, 4, 4096, 32, 8, 128, "decode_merge_bf16", 16, 8}, /* 16 rows x 32 x 4 = 2048 */
        {R35A_DTYPE_F16, 2, 4, 8192, 64, 8, 128, "decode_merge_f16", 8, 8},    /* R=32, 5 splits: 1 lane, 32 x 32 */
        {R35A_DTYPE_F16, 1, 1, 4096, 8, 1, 512, "decode_merge_f16", 32, 1},    /* 8 rows x 128 x 4 */
        {R35A_DTYPE_F16, 1, 1, 4096, 8, 8, 64, "decode_merge_f16", 1, 8},      /* 1 row x 16 x 4 = 64 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
        r35a_paged_attention_desc d = paged(cases[i].dtype, cases[i].seqs, cases[i].m, cases[i].ctx, cases[i].hq,
                                            cases[i].hkv, cases[i].d, 16);
        r35a_gpu_launch l, m;
        char why[256];
        assert_true(r35a_plan_decode(&d, ARCH, 40, NULL, &l, why, sizeof why));
        assert_true(l.num_splits > 1);
        assert_true(r35a_plan_decode_merge(&d, &l, &m));
        assert_true(m.split_merge);
        assert_int_equal(m.kernel, l.kernel);   /* the variant's dtype names the merge kernel */
        assert_string_equal(r35a_decode_merge_name(r35a_decode_variants[m.kernel].dtype), cases[i].merge);
        assert_int_equal(m.grid[0], cases[i].gx);
        assert_int_equal(m.grid[1], cases[i].gy);
        assert_int_equal(m.grid[2], (uint32_t)cases[i].seqs);
        assert_int_equal(m.block[0], 128);
        assert_int_equal(m.num_splits, l.num_splits);
        assert_int_equal(m.workspace_bytes, l.workspace_bytes);
        assert_int_equal(m.min_split_tiles, 4);
    }
}

static void test_decode_window_limits_splits(void **state)
{
    (void)state;
    /* Window 512 over a 32768 context: the rows reach 512 keys = 33 tiles -> at most 8 splits (the 8
     * workgroups want 10). */
    r35a_paged_attention_desc d = paged(R35A_DTYPE_F16, 1, 1, 32768, 64, 8, 128, 16);
    d.window = 512;
    expect_decode(&d, 40, "decode_f16_d128_r16_kw2_dw2_w6_wmma16_pregs2_qlds", 8, 8, 1, 128, 64 * 2080 * 4);
    /* Page sizes of the hybrid models (multiples of 16) are served. */
    const int pages[] = {32, 528, 544, 784, 1056};
    for (size_t i = 0; i < sizeof pages / sizeof *pages; ++i) {
        r35a_paged_attention_desc p = paged(R35A_DTYPE_BF16, 1, 1, 4096, 64, 8, 128, pages[i]);
        expect_decode(&p, 40, "decode_bf16_d128_r16_kw2_dw2_w6_wmma16_pregs2_qlds", 10, 8, 1, 128, 80 * 2080 * 4);
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

/* variants.def feeds the tests: the decode head sizes built for a dtype, as the planner lists them
 * in a reason ("64, 96, 128, ..."), and a head size (multiple of 16, so only "not built" stops it)
 * that no decode variant has. Adding a row to a tuning table needs no change here. */
static const char *built_decode_heads(r35a_dtype dtype)
{
    static char list[128];
    list[0] = '\0';
    int32_t last = -1;
    for (int i = 0; i < R35A_NUM_DECODE_VARIANTS; ++i) {
        const r35a_decode_variant *v = &r35a_decode_variants[i];
        if (strcmp(v->arch, ARCH) != 0 || v->dtype != dtype || v->kv_dtype != 0 || v->head_size == last)
            continue;
        r35a_text_append(list, sizeof list, ", ", "%d", (int)v->head_size);
        last = v->head_size;
    }
    return list;
}

static int32_t unbuilt_decode_head(r35a_dtype dtype)
{
    for (int32_t head = 16; head <= 1024; head += 16) {
        bool built = false;
        for (int i = 0; i < R35A_NUM_DECODE_VARIANTS; ++i)
            built |= strcmp(r35a_decode_variants[i].arch, ARCH) == 0 && r35a_decode_variants[i].dtype == dtype &&
                     r35a_decode_variants[i].head_size == head;
        if (!built)
            return head;
    }
    fail_msg("every head size is built");
    return 0;
}

static const char *not_built_reason(r35a_dtype dtype, int32_t head)
{
    static char text[192];
    snprintf(text, sizeof text, "head_size %d not built (%s %s: %s)", (int)head, ARCH,
             dtype == R35A_DTYPE_F16 ? "f16" : "bf16", built_decode_heads(dtype));
    return text;
}

static void test_decode_declines(void **state)
{
    (void)state;
    r35a_paged_attention_desc d = paged(R35A_DTYPE_F16, 1, 1, 4096, 32, 8, 128, 16);

    r35a_paged_attention_desc page8 = paged(R35A_DTYPE_F16, 1, 1, 4096, 32, 8, 128, 8);
    expect_decode_declines(&page8, NULL, "page_size 8 is not a multiple of 16");

    const int32_t unbuilt = unbuilt_decode_head(R35A_DTYPE_F16);
    r35a_paged_attention_desc dx = paged(R35A_DTYPE_F16, 1, 1, 4096, 32, 8, unbuilt, 16);
    expect_decode_declines(&dx, NULL, not_built_reason(R35A_DTYPE_F16, unbuilt));

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
    both.q_token_stride = 32 * 128 + 4;
    expect_decode_declines(&both, NULL, "page_size 8 is not a multiple of 16, q_token_stride");

    /* An 8-bit cache's K/V rows are 16-byte aligned at strides of 16 elements (its bytes): 136
     * serves a 16-bit cache, not an 8-bit one. */
    r35a_paged_attention_desc kv8_stride = d;
    kv8_stride.kv_dtype = R35A_DTYPE_INT8;
    kv8_stride.v_slot_stride = 136;
    kv8_stride.v_head_stride = 136 * 16;
    kv8_stride.v_page_stride = 136 * 16 * 8;
    expect_decode_declines(&kv8_stride, NULL, "v_slot_stride 136 is not a multiple of 16 elements");
    r35a_paged_attention_desc kv16_stride = kv8_stride;
    kv16_stride.kv_dtype = 0;
    r35a_gpu_launch l;
    char why[256];
    assert_true(r35a_plan_decode(&kv16_stride, ARCH, 40, NULL, &l, why, sizeof why));

    /* A head size built for 16-bit caches only (a tuning table's row may leave an 8-bit format out)
     * is named with the KV format; a forced kernel of another format says which it is for. */
    r35a_paged_attention_desc fp8x = dx;
    fp8x.kv_dtype = R35A_DTYPE_FP8_E4M3;
    expect_decode_declines(&fp8x, NULL, "f16, fp8_e4m3 KV:");
    r35a_paged_attention_desc fp8 = d;
    fp8.kv_dtype = R35A_DTYPE_FP8_E4M3;
    expect_decode_declines(&fp8, "decode_f16_int8_d128_r16_kw2_dw2_w6_wmma16_pregs3_qregs", "is for f16, KV int8");

    /* Per-token-head scales: declined on every arch (gfx11 and sm_90 tables), forced or not; the
     * portable kernel takes them, in a mixed batch too. */
    r35a_paged_attention_desc tok = d;
    tok.kv_dtype = R35A_DTYPE_INT8;
    tok.kv_scale_per_head = R35A_KV_SCALE_PER_TOKEN_HEAD;
    expect_decode_declines(&tok, NULL, "per-token-head KV scales");
    expect_decode_declines(&tok, "decode_f16_int8_d128_r16_kw2_dw2_w6_wmma16_pregs3_qregs", "per-token-head KV scales");
    r35a_paged_attention_desc tok_nv = tok;
    tok_nv.kv_dtype = R35A_DTYPE_FP8_E4M3;
    why[0] = '\0';
    assert_false(r35a_plan_decode(&tok_nv, "sm_90", 132, NULL, &l, why, sizeof why));
    assert_non_null(strstr(why, "per-token-head KV scales"));
    expect_generic_paged(&tok, "generic_paged_f16_dmax256");
    r35a_paged_attention_desc tok_mixed = paged(R35A_DTYPE_F16, 2, 12, 4096, 32, 8, 128, 16);
    tok_mixed.kv_dtype = R35A_DTYPE_FP8_E4M3;
    tok_mixed.kv_scale_per_head = R35A_KV_SCALE_PER_TOKEN_HEAD;
    r35a_gpu_launch gl;
    why[0] = '\0';
    assert_false(r35a_plan_mixed(&tok_mixed, ARCH, 40, NULL, &l, &gl, why, sizeof why));
    assert_non_null(strstr(why, "per-token-head KV scales"));
}

/* Softcap, ALiBi and sinks are run-time arguments of every decode variant: the same kernel as the
 * plain call. An 8-bit cache picks its format's kernel (same tiling, same splits and workspace). */
static void test_decode_model_features(void **state)
{
    (void)state;
    r35a_paged_attention_desc d = paged(R35A_DTYPE_F16, 1, 1, 4096, 64, 8, 128, 16);   /* G = 8: rows 16 */
    const size_t ws = 8 * 10 * (2 * 16 + 16 * 128) * 4;
    expect_decode(&d, 40, "decode_f16_d128_r16_kw2_dw2_w6_wmma16_pregs2_qlds", 10, 8, 1, 128, ws);
    r35a_paged_attention_desc f = d;
    f.logit_softcap = 30.0f;
    f.use_alibi = 1;
    f.use_sinks = 1;
    expect_decode(&f, 40, "decode_f16_d128_r16_kw2_dw2_w6_wmma16_pregs2_qlds", 10, 8, 1, 128, ws);
    f.kv_dtype = R35A_DTYPE_FP8_E4M3;
    expect_decode(&f, 40, "decode_f16_fp8_d128_r16_kw2_dw2_w6_wmma16_pregs3_qregs", 10, 8, 1, 128, ws);
    f.kv_dtype = R35A_DTYPE_INT8;
    f.kv_scale_per_head = 1;
    expect_decode(&f, 40, "decode_f16_int8_d128_r16_kw2_dw2_w6_wmma16_pregs3_qregs", 10, 8, 1, 128, ws);
    r35a_paged_attention_desc same = d; /* kv_dtype naming the Q/O dtype is the default */
    same.kv_dtype = R35A_DTYPE_F16;
    expect_decode(&same, 40, "decode_f16_d128_r16_kw2_dw2_w6_wmma16_pregs2_qlds", 10, 8, 1, 128, ws);
    /* bf16 with fp8, 8 rows of G = 8: R = 16 (one row group) */
    r35a_paged_attention_desc b = paged(R35A_DTYPE_BF16, 16, 1, 8192, 64, 8, 64, 16);
    b.kv_dtype = R35A_DTYPE_FP8_E4M3;
    b.k_slot_stride = b.v_slot_stride = 64;
    r35a_gpu_launch l;
    char why[256];
    assert_true(r35a_plan_decode(&b, ARCH, 40, NULL, &l, why, sizeof why));
    assert_string_equal(r35a_decode_variants[l.kernel].name, "decode_bf16_fp8_d64_r16_kw4_dw1_w6_wmma16_pregs3_qstg");
    assert_int_equal(r35a_decode_variants[l.kernel].kv_dtype, R35A_DTYPE_FP8_E4M3);
    assert_int_equal(l.shared_bytes, 0);   /* gfx11: static LDS */
}

/* NVIDIA: the decode kernels run on dynamic shared memory. Each layout is sized within its occupancy
 * contract's share of an SM's 228 KiB (less 1 KiB per block, at most 227 KiB: sm_90's D = 128 R = 16
 * row, kw2 dw2 with 3 warps per sub-partition, 3 blocks of 4 warps per SM, may use 233472 / 3 - 1024
 * = 76800 bytes), and launched with exactly what it uses, which the GPU entry reads from the code
 * object at load (gpu_runtime.h decode_shared_bytes): the planner leaves the size at 0. */
static void test_decode_dynamic_shared(void **state)
{
    (void)state;
    r35a_paged_attention_desc d = paged(R35A_DTYPE_F16, 1, 1, 4096, 32, 8, 128, 16);
    r35a_gpu_launch l;
    char why[256];
    assert_true(r35a_plan_decode(&d, "sm_90", 132, NULL, &l, why, sizeof why));
    const r35a_decode_variant *v = &r35a_decode_variants[l.kernel];
    assert_string_equal(v->arch, "sm_90");
    assert_int_equal(l.shared_bytes, 0);
    assert_int_equal(r35a_nv_smem_bytes(3, 4), 76800);
    assert_int_equal(r35a_nv_smem_bytes(1, 4), 232448);   /* one block of 4 warps per SM: the 227 KiB cap */
    assert_int_equal(r35a_nv_smem_bytes(1, 1), 233472 / 4 - 1024);
}

/* NVIDIA: a batch whose workgroups give half the SMs one runs a single split up to 1K reached keys
 * (plan_decode.c's measured rule); fewer sequences, longer contexts, or gfx11 keep the planner's splits. */
static void test_decode_nv_single_split(void **state)
{
    (void)state;
    r35a_gpu_launch l;
    char why[256];
    const struct {
        const char *arch;
        int seqs, ctx, window, splits_one;
    } cases[] = {
        {"sm_90", 16, 1024, 0, 1},  {"sm_90", 12, 1024, 0, 1},   {"sm_90", 16, 1025, 0, 0},
        {"sm_90", 16, 4096, 0, 0},  {"sm_90", 16, 32768, 0, 0},  {"sm_90", 8, 1024, 0, 0},
        {"sm_90", 16, 32768, 1024, 1},   /* the window bounds the reached keys */
        {ARCH, 16, 1024, 0, 0},     /* gfx11: the rule is off */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
        r35a_paged_attention_desc d = paged(R35A_DTYPE_F16, cases[i].seqs, 1, cases[i].ctx, 32, 8, 128, 16);
        d.window = cases[i].window;
        assert_true(r35a_plan_decode(&d, cases[i].arch, 132, NULL, &l, why, sizeof why));
        if (cases[i].splits_one) {
            assert_int_equal(l.num_splits, 1);
            assert_int_equal(l.workspace_bytes, 0);   /* no records, no merge launch */
            r35a_gpu_launch m;
            assert_false(r35a_plan_decode_merge(&d, &l, &m));
        } else {
            assert_true(l.num_splits > 1);
        }
    }
}

/* NVIDIA: a single split also needs 2 warps per SM (plan_decode.c): the D 256 rows-32 kernel has 2 warps,
 * so 16 sequences of G x M = 32 rows (128 workgroups, 256 warps on 132 SMs) at 1K keys keep the
 * planner's 3 splits (ceil(264 / 128); 64 tiles give 21 each). */
static void test_decode_nv_single_split_warps(void **state)
{
    (void)state;
    r35a_gpu_launch l;
    char why[256];
    r35a_paged_attention_desc d = paged(R35A_DTYPE_F16, 16, 4, 1024, 64, 8, 256, 16);
    assert_true(r35a_plan_decode(&d, "sm_90", 132, NULL, &l, why, sizeof why));
    const r35a_decode_variant *v = &r35a_decode_variants[l.kernel];
    assert_int_equal(v->rows, 32);
    assert_int_equal(r35a_decode_waves(v->kw, v->dw, v->rw), 2);
    assert_int_equal(l.num_splits, 3);
    assert_int_equal(l.block[0], 64);
}

/* NVIDIA: splits shorter than 16 tiles are cut to one workgroup per SM, not below 16-tile splits
 * (plan_decode.c). One sequence, 8 kv heads (8 workgroups: 132 / 8 = 16 per SM row),
 * G x M = 32 at D 128 (the rows-32 kernel: 4 warps, 2 resident per SM, so the planner's aim is
 * ceil(264 / 8) = 33 splits, at most tiles / 4): 2K keys (128 tiles: 32 splits of 4) -> 16; 4K (256:
 * 33 of 7-8) -> 16; 8K (512: 33 of 15-16) -> 32 (512 / 16); 16K (1024: 33 of 31) stays 33; G x M = 4
 * at 1K (64 tiles: 16 splits of 4) stays 16 (one per SM already). gfx11 keeps the general formula. */
static void test_decode_nv_short_splits(void **state)
{
    (void)state;
    r35a_gpu_launch l;
    char why[256];
    const struct {
        const char *arch;
        int q_heads, m, ctx, splits;
    } cases[] = {
        {"sm_90", 64, 4, 2048, 16}, {"sm_90", 64, 4, 4096, 16}, {"sm_90", 64, 4, 8192, 32},
        {"sm_90", 64, 4, 16384, 33}, {"sm_90", 32, 1, 1024, 16},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
        r35a_paged_attention_desc d = paged(R35A_DTYPE_F16, 1, cases[i].m, cases[i].ctx, cases[i].q_heads, 8, 128, 16);
        assert_true(r35a_plan_decode(&d, cases[i].arch, 132, NULL, &l, why, sizeof why));
        assert_int_equal(l.num_splits, cases[i].splits);
    }
    /* gfx11: the general formula (40 CUs, the variant's residency), no cut */
    r35a_paged_attention_desc d = paged(R35A_DTYPE_F16, 1, 4, 2048, 64, 8, 128, 16);
    assert_true(r35a_plan_decode(&d, ARCH, 40, NULL, &l, why, sizeof why));
    const r35a_decode_variant *v = &r35a_decode_variants[l.kernel];
    const int32_t resident = r35a_decode_resident_wgs_per_cu(r35a_tuning_simds_per_cu(ARCH), v->waves,
                                                             r35a_decode_waves(v->kw, v->dw, v->rw));
    assert_int_equal(l.num_splits, r35a_decode_num_splits(1, 8, l.num_row_groups, 2048, 4, 0, 40, resident,
                                                          R35A_DECODE_MIN_TILES_PER_SPLIT));
}

/* The rows a kv head's G x M rows run with: the fewest row groups, then the smallest R (one row
 * group whenever a variant of the arch, dtype, K/V format and head size has R >= G x M). NVIDIA's
 * tables may list rows 8 (the 8-row fragment layer, decode/rows8_nv.h); gfx1151's have 16 and 32. */
static int32_t smallest_rows_for(const char *arch, r35a_dtype dtype, r35a_dtype kv, int32_t head, int32_t rows)
{
    int32_t best = 0;
    for (int i = 0; i < R35A_NUM_DECODE_VARIANTS; ++i) {
        const r35a_decode_variant *v = &r35a_decode_variants[i];
        const r35a_dtype v_kv = v->kv_dtype ? v->kv_dtype : v->dtype;
        if (strcmp(v->arch, arch) == 0 && v->dtype == dtype && v_kv == kv && v->head_size == head && v->rows >= rows &&
            (!best || v->rows < best))
            best = v->rows;
    }
    return best;
}

static void test_decode_rows_choice(void **state)
{
    (void)state;
    r35a_gpu_launch l;
    char why[256];
    const struct {
        const char *arch;
        int q_heads, m, head;
    } cases[] = {
        {"sm_90", 32, 1, 128}, {"sm_90", 32, 2, 128}, {"sm_90", 64, 1, 64},  {"sm_90", 8, 8, 256},
        {"sm_90", 32, 3, 128}, {"sm_90", 64, 2, 64},  {"sm_90", 64, 4, 128}, {"sm_90", 32, 1, 512},
        {ARCH, 32, 1, 128},    {ARCH, 64, 1, 64},     {ARCH, 64, 4, 128},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
        for (int kv8 = 0; kv8 < 2; ++kv8) {
            r35a_paged_attention_desc d = paged(R35A_DTYPE_F16, 4, cases[i].m, 4096, cases[i].q_heads, 8, cases[i].head, 16);
            if (kv8)
                d.kv_dtype = R35A_DTYPE_FP8_E4M3;
            assert_true(r35a_plan_decode(&d, cases[i].arch, 132, NULL, &l, why, sizeof why));
            const r35a_decode_variant *v = &r35a_decode_variants[l.kernel];
            const int32_t want = smallest_rows_for(cases[i].arch, R35A_DTYPE_F16, kv8 ? R35A_DTYPE_FP8_E4M3 : R35A_DTYPE_F16,
                                                   cases[i].head, cases[i].q_heads / 8 * cases[i].m);
            assert_true(want > 0);
            assert_int_equal(v->rows, want);
            assert_int_equal(l.num_row_groups, 1);
        }
    }
}

static void test_decode_forced_variant(void **state)
{
    (void)state;
    /* 4 rows would pick R=16; forcing the R=32 kernel uses it. */
    r35a_paged_attention_desc d = paged(R35A_DTYPE_F16, 1, 1, 4096, 32, 8, 128, 16);
    r35a_gpu_launch l;
    char why[256];
    assert_true(r35a_plan_decode(&d, ARCH, 40, "decode_f16_d128_r32_kw1_dw4_w8_wmma16_pregs2_qregs", &l, why, sizeof why));
    assert_string_equal(r35a_decode_variants[l.kernel].name, "decode_f16_d128_r32_kw1_dw4_w8_wmma16_pregs2_qregs");
    expect_decode_declines(&d, "decode_bf16_d128_r32_kw1_dw4_w8_wmma16_pregs2_qregs", "is for bf16");
    expect_decode_declines(&d, "decode_f16_d64_r16_kw4_dw1_w6_wmma16_pregs2_qlds", "head_size 128 not built (gfx1151 f16: 64)");
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

    /* Sinks and every KV dtype on the same kernels (the KV dtype is a run-time argument). */
    r35a_paged_attention_desc kv8 = d;
    kv8.use_sinks = 1;
    kv8.kv_dtype = R35A_DTYPE_INT8;
    kv8.kv_scale_per_head = 1;
    expect_generic_paged(&kv8, "generic_paged_f16_dmax256");
    r35a_paged_attention_desc f32_fp8 = f32;   /* f32 Q/O stays a reference-only dtype */
    f32_fp8.kv_dtype = R35A_DTYPE_FP8_E4M3;
    assert_false(r35a_plan_generic_paged(&f32_fp8, ARCH, NULL, &l, why, sizeof why));
    assert_non_null(strstr(why, "dtype f32"));
}

/* The portable kernel's arguments carry sinks, the KV dtype code and the scales, and only when the
 * descriptor asks for them. */
static void test_generic_args_features(void **state)
{
    (void)state;
    static int32_t seq_lens[2], qsl[3], table[2 * 256];
    static uint16_t q[64], o[64];
    static uint8_t kv[64];
    static float sinks[32], k_scale[8], v_scale[8];
    r35a_paged_attention_desc d = paged(R35A_DTYPE_BF16, 2, 2, 4096, 32, 8, 128, 16);
    r35a_paged_attention_args a = {sizeof a, q, kv, kv, o, seq_lens, qsl, table, NULL, NULL, NULL, NULL, NULL};
    r35a_generic_paged_args ka;
    r35a_fill_generic_paged_args(&d, &a, 0, &ka);
    assert_int_equal(ka.kv_dtype, R35A_KV_AS_Q);
    assert_null(ka.sinks);
    assert_null(ka.k_scale);
    /* the bounds the kernel checks the device metadata against (device_error.h) */
    assert_int_equal(ka.num_pages, d.num_pages);
    assert_int_equal(ka.max_seq_len, d.max_seq_len);
    assert_int_equal(ka.max_query_len, d.max_query_len);
    assert_null(ka.error); /* the context's record, set at launch */

    d.use_sinks = 1;
    d.kv_dtype = R35A_DTYPE_FP8_E4M3;
    d.kv_scale_per_head = 1;
    a.sinks = sinks;
    a.k_scale = k_scale;
    a.v_scale = v_scale;
    r35a_fill_generic_paged_args(&d, &a, 8, &ka);
    assert_int_equal(ka.kv_dtype, R35A_KV_FP8_E4M3);
    assert_int_equal(ka.kv_scale_per_head, 1);
    assert_ptr_equal(ka.sinks, sinks);
    assert_ptr_equal(ka.k_scale, k_scale);
    assert_ptr_equal(ka.v_scale, v_scale);
    assert_int_equal(ka.min_query_len, 8);
    d.kv_dtype = R35A_DTYPE_INT8;
    r35a_fill_generic_paged_args(&d, &a, 0, &ka);
    assert_int_equal(ka.kv_dtype, R35A_KV_INT8);
    /* per token and kv head: the scale strides travel with the granularity */
    d.kv_scale_per_head = R35A_KV_SCALE_PER_TOKEN_HEAD;
    d.k_scale_page_stride = 1000;
    d.k_scale_slot_stride = 9;
    d.k_scale_head_stride = 1;
    d.v_scale_page_stride = 2000;
    d.v_scale_slot_stride = 1;
    d.v_scale_head_stride = 17;
    r35a_fill_generic_paged_args(&d, &a, 0, &ka);
    assert_int_equal(ka.kv_scale_per_head, 2);
    assert_int_equal(ka.k_scale_page_stride, 1000);
    assert_int_equal(ka.k_scale_slot_stride, 9);
    assert_int_equal(ka.k_scale_head_stride, 1);
    assert_int_equal(ka.v_scale_page_stride, 2000);
    assert_int_equal(ka.v_scale_slot_stride, 1);
    assert_int_equal(ka.v_scale_head_stride, 17);
    assert_ptr_equal(ka.k_scale, k_scale);
    d.kv_dtype = R35A_DTYPE_BF16; /* the Q/O dtype named explicitly: no scales */
    d.kv_scale_per_head = 0;
    r35a_fill_generic_paged_args(&d, &a, 0, &ka);
    assert_int_equal(ka.kv_dtype, R35A_KV_AS_Q);
    assert_null(ka.k_scale);

    r35a_varlen_attention_desc v = varlen(R35A_DTYPE_F16, 1, 4, 4, 32, 32, 64);
    r35a_varlen_attention_args va = {sizeof va, q, q, q, o, qsl, sinks, NULL};
    v.use_sinks = 1;
    r35a_generic_varlen_args kva;
    r35a_fill_generic_varlen_args(&v, &va, &kva);
    assert_ptr_equal(kva.sinks, sinks);
    assert_int_equal(kva.max_seqlen, v.max_seqlen);
    v.use_sinks = 0;
    r35a_fill_generic_varlen_args(&v, &va, &kva);
    assert_null(kva.sinks);
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

/* Mixed batches: the decode part is planned with max_query_len capped at 8. */
static void test_mixed_batch(void **state)
{
    (void)state;
    /* 2 seqs, max_query_len 12, G=4, D=128: the decode part has 4 x 8 = 32 rows -> R=32, one row
     * group; 16 WGs want 5 splits (4096 keys = 257 tiles allow 64); 16 x 5 records of (2*32 + 32*128)
     * floats. The longer sequences: the D = 128 encoder variant's paged sibling, one 128-row block
     * per sequence. */
    r35a_paged_attention_desc d = paged(R35A_DTYPE_F16, 2, 12, 4096, 32, 8, 128, 16);
    expect_mixed(&d, NULL, "decode_f16_d128_r32_kw1_dw4_w8_wmma16_pregs2_qregs", 5, 8, 80 * 4160 * 4,
                 "encoder_f16_d128_r16_kb32_nw8_w5_paged");
    /* bf16 D=256 (no encoder variant) picks the kernels of its dtype and the generic kernel that covers D. */
    r35a_paged_attention_desc b = paged(R35A_DTYPE_BF16, 3, 40, 1000, 8, 8, 256, 32);
    /* G=1, M<=8: 8 rows -> R=16; 3 x 8 = 24 WGs want 4 splits; 1000 keys: 64 tiles allow 16;
     * 24 x 4 records of (32 + 16*256) floats. */
    expect_mixed(&b, NULL, "decode_bf16_d256_r16_kw1_dw4_w6_wmma16_pregs2_qlds", 4, 8, 96 * 4128 * 4, "generic_paged_bf16_dmax256");
    /* G=8: capped M=8 gives 64 rows, two row groups of 32 (M=12 would need three). 4 x 8 x 2 = 64
     * WGs want 2 splits (2048 keys: 129 tiles allow 32); 128 records. */
    r35a_paged_attention_desc g8 = paged(R35A_DTYPE_F16, 4, 12, 2048, 64, 8, 128, 16);
    expect_mixed(&g8, NULL, "decode_f16_d128_r32_kw1_dw4_w8_wmma16_pregs2_qregs", 2, 16, 128 * 4160 * 4,
                 "encoder_f16_d128_r16_kb32_nw8_w5_paged");
    /* Window 80 with max_query_len 40: the decode part's rows reach 80 + 8 - 1 = 87 keys = 7 tiles
     * -> one split, no workspace (M=40 would reach 119 keys = 9 tiles -> 2); the longer sequences on
     * the paged sibling, which serves windows too. */
    r35a_paged_attention_desc w = paged(R35A_DTYPE_F16, 2, 40, 4096, 32, 8, 128, 16);
    w.window = 80;
    expect_mixed(&w, NULL, "decode_f16_d128_r32_kw1_dw4_w8_wmma16_pregs2_qregs", 1, 8, 0, "encoder_f16_d128_r16_kb32_nw8_w5_paged");
    /* A forced decode variant serves the decode part: R=16 needs two row groups for 32 rows; 32 WGs
     * want 3 splits; 96 records of (32 + 16*128) floats. */
    expect_mixed(&d, "decode_f16_d128_r16_kw2_dw2_w6_wmma16_pregs2_qlds", "decode_f16_d128_r16_kw2_dw2_w6_wmma16_pregs2_qlds", 3, 16,
                 96 * 2080 * 4, "encoder_f16_d128_r16_kb32_nw8_w5_paged");
    /* One sequence whose M = num_tokens is known to be <= 8: decode serves it, the prefill launch
     * skips it. */
    r35a_paged_attention_desc one_short = paged(R35A_DTYPE_F16, 1, 12, 4096, 32, 8, 128, 16);
    one_short.num_tokens = 5;
    expect_mixed(&one_short, NULL, "decode_f16_d128_r32_kw1_dw4_w8_wmma16_pregs2_qregs", 10, 8, 80 * 4160 * 4,
                 "encoder_f16_d128_r16_kb32_nw8_w5_paged");
    /* What the prefill kernels decline (here an 8-bit cache) goes to the generic kernel beside decode */
    r35a_paged_attention_desc capped = d;
    capped.kv_dtype = R35A_DTYPE_FP8_E4M3;
    expect_mixed(&capped, NULL, "decode_f16_fp8_d128_r32_kw1_dw4_w8_wmma16_pregs2_qregs", 5, 8, 80 * 4160 * 4,
                 "generic_paged_f16_dmax256");
}

static void expect_prefill_declines(const r35a_paged_attention_desc *d, const char *needle)
{
    r35a_gpu_launch l;
    char why[512] = "";
    bool ok = r35a_plan_prefill(d, ARCH, 40, 0, &l, why, sizeof why);
    if (ok || !strstr(why, needle))
        print_error("expected a prefill decline mentioning '%s', got %s '%s'\n", needle, ok ? "acceptance" : "decline",
                    why);
    assert_false(ok);
    assert_non_null(strstr(why, needle));
}

/* Prefill on the encoder's paged siblings: the workgroup-wide tiling of (dtype, D), its grid from
 * num_seqs and max_query_len; what it declines, with the reason. */
static void test_prefill(void **state)
{
    (void)state;
    r35a_gpu_launch l;
    char why[512] = "";
    r35a_paged_attention_desc d = paged(R35A_DTYPE_F16, 1, 300, 4096, 32, 8, 128, 16);
    assert_true(r35a_plan_prefill(&d, ARCH, 40, 0, &l, why, sizeof why));
    expect_prefill_launch(&l, &d, "encoder_f16_d128_r16_kb32_nw8_w5_paged", 0);
    r35a_paged_attention_desc b = paged(R35A_DTYPE_BF16, 3, 64, 1000, 8, 2, 64, 272);
    assert_true(r35a_plan_prefill(&b, ARCH, 40, 8, &l, why, sizeof why));
    expect_prefill_launch(&l, &b, "encoder_bf16_d64_r32_kb32_nw4_w6_paged", 8);
    r35a_paged_attention_desc x = d;
    x.page_size = 24;
    expect_prefill_declines(&x, "page_size 24 not a multiple of 16");
    /* the model features run on the sibling */
    x = d;
    x.window = 128;
    x.logit_softcap = 10.f;
    x.use_alibi = 1;
    x.use_sinks = 1;
    x.use_lse = 1;
    assert_true(r35a_plan_prefill(&x, ARCH, 40, 0, &l, why, sizeof why));
    expect_prefill_launch(&l, &x, "encoder_f16_d128_r16_kb32_nw8_w5_paged", 0);
    x = d;
    x.kv_dtype = R35A_DTYPE_FP8_E4M3;
    expect_prefill_declines(&x, "kv_dtype fp8");
    x = paged(R35A_DTYPE_F32, 1, 300, 4096, 32, 8, 128, 16);
    expect_prefill_declines(&x, "dtype f32");
    x = paged(R35A_DTYPE_F16, 1, 300, 4096, 32, 8, 256, 16);
    expect_prefill_declines(&x, "head_size 256 not built");
    x = d;
    x.k_slot_stride = 132;
    expect_prefill_declines(&x, "k_slot_stride 132 is not a multiple of 8");
    x = d;
    x.v_slot_stride = (int64_t)1 << 24;
    x.v_page_stride = x.v_slot_stride * 16;
    expect_prefill_declines(&x, "v_slot_stride 16777216 >= 2^24");
}

static void test_mixed_batch_declines(void **state)
{
    (void)state;
    r35a_paged_attention_desc d = paged(R35A_DTYPE_F16, 2, 12, 4096, 32, 8, 128, 16);
    /* Not a mixed batch. */
    r35a_paged_attention_desc m8 = paged(R35A_DTYPE_F16, 2, 8, 4096, 32, 8, 128, 16);
    expect_mixed_declines(&m8, "max_query_len 8 <= 8 is not a mixed batch");
    /* One sequence of more than 8 tokens: a prefill, planned alone (src/gpu_impls.c), not as a mixed batch. */
    r35a_paged_attention_desc prefill = paged(R35A_DTYPE_F16, 1, 100, 4096, 32, 8, 128, 16);
    expect_mixed_declines(&prefill, "max_query_len 100 > 8 (one sequence of 100 query tokens: prefill)");
    /* What decode declines for other reasons goes to generic whole, with every reason named. */
    r35a_paged_attention_desc page8 = paged(R35A_DTYPE_F16, 2, 12, 4096, 32, 8, 128, 8);
    expect_mixed_declines(&page8, "page_size 8 is not a multiple of 16");
    const int32_t unbuilt = unbuilt_decode_head(R35A_DTYPE_BF16);
    r35a_paged_attention_desc dx = paged(R35A_DTYPE_BF16, 2, 12, 4096, 32, 8, unbuilt, 16);
    expect_mixed_declines(&dx, not_built_reason(R35A_DTYPE_BF16, unbuilt));
    r35a_paged_attention_desc f32 = paged(R35A_DTYPE_F32, 2, 12, 4096, 32, 8, 128, 16);
    expect_mixed_declines(&f32, "dtype f32");
    r35a_paged_attention_desc stride = d;
    stride.q_token_stride = 32 * 128 + 4;
    expect_mixed_declines(&stride, "max_query_len 12 > 8 (prefill or mixed batch), q_token_stride");
    r35a_paged_attention_desc kv8 = d;   /* an 8-bit cache whose rows are not 16-byte aligned */
    kv8.kv_dtype = R35A_DTYPE_INT8;
    kv8.k_slot_stride = 136;
    kv8.k_head_stride = 136 * 16;
    kv8.k_page_stride = 136 * 16 * 8;
    expect_mixed_declines(&kv8, "k_slot_stride 136 is not a multiple of 16 elements");
}

/* A mixed batch with the model features and an 8-bit cache: the decode part on the format's kernel
 * (softcap, ALiBi, sinks at run time), the longer sequences on the portable kernel. */
static void test_mixed_batch_features(void **state)
{
    (void)state;
    r35a_paged_attention_desc d = paged(R35A_DTYPE_F16, 2, 12, 4096, 32, 8, 128, 16);
    d.logit_softcap = 30.0f;
    d.use_alibi = 1;
    d.use_sinks = 1;
    d.kv_dtype = R35A_DTYPE_FP8_E4M3;
    r35a_gpu_launch dl, gl;
    char why[256];
    assert_true(r35a_plan_mixed(&d, ARCH, 40, NULL, &dl, &gl, why, sizeof why));
    assert_string_equal(r35a_decode_variants[dl.kernel].name, "decode_f16_fp8_d128_r32_kw1_dw4_w8_wmma16_pregs2_qregs");
    assert_string_equal(r35a_generic_kernels[gl.kernel].name, "generic_paged_f16_dmax256");
}

/* The encoder. Workgroup-wide variants (maxlen 0): rows per workgroup = rows x nw = 128 for every
 * one of the table, so grid.x = ceil(max_seqlen / 128) x num_segments. Small-problem variants
 * (maxlen 64, planned when max_seqlen <= 64): 16 rows per wave-group, 4 groups per workgroup, so
 * grid.x = ceil(ceil(max_seqlen / 16) x num_segments / 4). */
static void test_encoder_plan(void **state)
{
    (void)state;
    /* bf16 D=80, 4 segments up to 400 tokens: 4 row blocks each -> 16; 16 heads; 8 waves. */
    r35a_varlen_attention_desc d = varlen(R35A_DTYPE_BF16, 4, 1000, 400, 16, 16, 80);
    expect_encoder(&d, NULL, "encoder_bf16_d80_r16_kb32_nw8_w6", 16, 256);
    /* The encoder's reference problem: one 1024-token segment, D=64, 16 heads: 8 row blocks, 4 waves. */
    r35a_varlen_attention_desc ref = varlen(R35A_DTYPE_F16, 1, 1024, 1024, 16, 16, 64);
    expect_encoder(&ref, NULL, "encoder_f16_d64_r32_kb32_nw4_w6", 8, 128);
    /* Every served head size, both dtypes; D=72 has its own kernel (padded to 80 inside). */
    const struct {
        r35a_dtype dtype;
        int d, heads;
        const char *name;
        uint32_t block;
    } served[] = {
        {R35A_DTYPE_F16, 32, 4, "encoder_f16_d32_r32_kb32_nw4_w6", 128},
        {R35A_DTYPE_BF16, 48, 32, "encoder_bf16_d48_r32_kb32_nw4_w6", 128},
        {R35A_DTYPE_F16, 72, 16, "encoder_f16_d72_r16_kb32_nw8_w6", 256},
        {R35A_DTYPE_BF16, 128, 24, "encoder_bf16_d128_r16_kb32_nw8_w5", 256},
        {R35A_DTYPE_F16, 128, 4, "encoder_f16_d128_r16_kb32_nw8_w5", 256},
    };
    for (size_t i = 0; i < sizeof served / sizeof *served; ++i) {
        /* 7 segments up to 129 tokens: 2 row blocks each. */
        r35a_varlen_attention_desc s = varlen(served[i].dtype, 7, 700, 129, served[i].heads, served[i].heads,
                                              served[i].d);
        expect_encoder(&s, NULL, served[i].name, 14, served[i].block);
    }
    /* A fused qkv buffer [tokens][3][heads][D] read in place: token strides 3*H*D. */
    r35a_varlen_attention_desc fused = varlen(R35A_DTYPE_F16, 2, 500, 300, 12, 12, 64);
    fused.q_token_stride = fused.k_token_stride = fused.v_token_stride = 3 * 12 * 64;
    expect_encoder(&fused, NULL, "encoder_f16_d64_r32_kb32_nw4_w6", 6, 128);
    /* max_seqlen 0 (every segment empty): accepted (the small-problem tiling), nothing to launch. */
    r35a_varlen_attention_desc empty = varlen(R35A_DTYPE_F16, 3, 0, 0, 16, 16, 64);
    expect_encoder(&empty, NULL, "encoder_f16_d64_r16_kb16_nw4_w6_l64", 0, 128);
    /* Short segments: 4096 segments of 16 tokens -> 4096 wave-groups, 1024 workgroups; 100 segments
     * up to 48 tokens -> 3 row blocks each, 300 groups, 75 workgroups; up to 64 (the bound) still;
     * 65 goes workgroup-wide (1 row block of 128 per segment). */
    r35a_varlen_attention_desc s16 = varlen(R35A_DTYPE_BF16, 4096, 4096 * 16, 16, 16, 16, 64);
    expect_encoder(&s16, NULL, "encoder_bf16_d64_r16_kb16_nw4_w6_l64", 1024, 128);
    r35a_varlen_attention_desc s48 = varlen(R35A_DTYPE_F16, 100, 3000, 48, 8, 8, 128);
    expect_encoder(&s48, NULL, "encoder_f16_d128_r16_kb16_nw4_w3_l64", 75, 128);
    r35a_varlen_attention_desc s64 = varlen(R35A_DTYPE_F16, 7, 300, 64, 4, 4, 72);
    expect_encoder(&s64, NULL, "encoder_f16_d72_r16_kb16_nw4_w4_l64", 7, 128);
    r35a_varlen_attention_desc s65 = s64;
    s65.max_seqlen = 65;
    expect_encoder(&s65, NULL, "encoder_f16_d72_r16_kb32_nw8_w6", 7, 256);
    /* A small-problem variant forced on a long segment streams its keys like the others. */
    expect_encoder(&ref, "encoder_f16_d64_r16_kb16_nw4_w6_l64", "encoder_f16_d64_r16_kb16_nw4_w6_l64", 16, 128);
    /* Forcing a variant. */
    expect_encoder(&d, "encoder_bf16_d80_r16_kb32_nw8_w6", "encoder_bf16_d80_r16_kb32_nw8_w6", 16, 256);
    expect_encoder_declines(&d, "encoder_f16_d80_r16_kb32_nw8_w6", "is for f16");
    expect_encoder_declines(&d, "encoder_bf16_d64_r32_kb32_nw4_w6", "head_size 80 not built (gfx1151 bf16: 64)");
    expect_encoder_declines(&d, "encoder_bf16_d99", "no encoder variant encoder_bf16_d99 for gfx1151");
    r35a_gpu_launch l[R35A_ENCODER_MAX_LAUNCHES];
    int n = 0;
    char why[256];
    assert_false(r35a_plan_encoder(&d, "gfx1100", 40, NULL, l, &n, why, sizeof why));
}

/* The encoder variant planned for d on arch with num_cus CUs (NULL when declined). */
static const char *encoder_variant_on(const r35a_varlen_attention_desc *d, const char *arch, int num_cus, const char *only)
{
    r35a_gpu_launch l[R35A_ENCODER_MAX_LAUNCHES];
    int n = 0;
    char why[256];
    if (!r35a_plan_encoder(d, arch, num_cus, only, l, &n, why, sizeof why)) {
        print_error("encoder declined: %s\n", why);
        return NULL;
    }
    return r35a_encoder_variants[l[0].kernel].name;
}

/* The tail split (encoder_args.h, plan_encoder.c): the items of a part-empty last round of workgroup
 * slots run as half workgroups in the variant's tail kernel when the halves fit in one round. sm_90,
 * D = 128 (128-row workgroups, 2 per SM: 264 slots on 132 SMs), 4 segments of 1024 tokens: 12 heads
 * are 384 items, 120 in a second round: the variant over 264, the tail kernel over 240; 16 heads
 * (512: 248 left, 496 halves) and 8 (256 in one round: 512 halves) stay one launch; 4 heads (128
 * items, one part-empty round) run in the tail kernel alone (256 halves). The rule itself, and the
 * small-problem tilings and gfx1151's table (no tail kernels). */
static void test_encoder_tail_split(void **state)
{
    (void)state;
    assert_int_equal(r35a_encoder_tail_items(384, 264), 120);
    assert_int_equal(r35a_encoder_tail_items(512, 264), 0);
    assert_int_equal(r35a_encoder_tail_items(256, 264), 0);
    assert_int_equal(r35a_encoder_tail_items(128, 264), 128);
    assert_int_equal(r35a_encoder_tail_items(528, 264), 0);
    assert_int_equal(r35a_encoder_tail_items(0, 264), 0);
    assert_int_equal(r35a_encoder_tail_items(100, 0), 0);
    const struct {
        int heads;
        uint32_t first, second;   /* grid.x of the launches (second 0: one launch) */
        bool tail_first;          /* the first launch is the tail kernel */
    } cases[] = {{12, 264, 240, false}, {16, 32, 0, false}, {8, 32, 0, false}, {4, 256, 0, true}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
        r35a_varlen_attention_desc d = varlen(R35A_DTYPE_BF16, 4, 4096, 1024, cases[i].heads, cases[i].heads, 128);
        r35a_gpu_launch l[R35A_ENCODER_MAX_LAUNCHES];
        int n = 0;
        char why[256];
        assert_true(r35a_plan_encoder(&d, "sm_90", 132, NULL, l, &n, why, sizeof why));
        assert_string_equal(r35a_encoder_variants[l[0].kernel].name, "encoder_bf16_d128_r32_kb64_nw4_w2");
        if (n != (cases[i].second ? 2 : 1) || l[0].grid[0] != cases[i].first || l[0].encoder_tail != cases[i].tail_first)
            print_error("%d heads: %d launches, first grid.x %u%s\n", cases[i].heads, n, l[0].grid[0],
                        l[0].encoder_tail ? " (tail kernel)" : "");
        assert_int_equal(n, cases[i].second ? 2 : 1);
        assert_int_equal(l[0].grid[0], cases[i].first);
        assert_int_equal(l[0].encoder_tail, cases[i].tail_first);
        if (cases[i].second)
            assert_int_equal(l[1].grid[0], cases[i].second);
        expect_encoder_launches(l, n, 32, (uint32_t)cases[i].heads, 128);
        assert_string_equal(r35a_encoder_tail_name(l[0].kernel), "encoder_bf16_d128_r32_kb64_nw4_w2_tail");
    }
    /* gfx1151's table has no tail kernels yet (tools/gen_variants.py has_tail): one launch. */
    r35a_varlen_attention_desc g = varlen(R35A_DTYPE_F16, 2, 400, 200, 8, 8, 64);
    r35a_gpu_launch lg[R35A_ENCODER_MAX_LAUNCHES];
    int ng = 0;
    char whyg[256];
    assert_true(r35a_plan_encoder(&g, ARCH, 40, NULL, lg, &ng, whyg, sizeof whyg));
    assert_null(r35a_encoder_tail_name(lg[0].kernel));
    assert_int_equal(ng, 1);
    assert_int_equal(lg[0].tail_items, 0);
    /* A small-problem tiling (maxlen > 0) has no tail kernel: one launch whatever its grid. */
    r35a_varlen_attention_desc s = varlen(R35A_DTYPE_BF16, 300, 300 * 16, 16, 16, 16, 128);
    r35a_gpu_launch l[R35A_ENCODER_MAX_LAUNCHES];
    int n = 0;
    char why[256];
    assert_true(r35a_plan_encoder(&s, "sm_90", 132, NULL, l, &n, why, sizeof why));
    assert_true(r35a_encoder_variants[l[0].kernel].maxlen > 0);
    assert_null(r35a_encoder_tail_name(l[0].kernel));
    assert_int_equal(n, 1);
    assert_int_equal(l[0].tail_items, 0);
}

/* Two workgroup-wide tilings of one head size (sm_90's table at D = 64: 128-row workgroups, 2 per SM,
 * and 64-row ones, 3 per SM): the second is planned only where it fills the workgroup slots >= 0.15
 * better (plan_encoder.c). 4 segments of 1024 tokens on 132 SMs: 4 heads 128 workgroups on 264 slots
 * (fill 0.48) against 256 on 396 (0.65); 6 heads 0.73 against 0.97; 8 heads 0.97 (kept); 12 heads 384
 * in two rounds of 264 (0.73) against 768 in two of 396 (0.97); 14 heads 0.85 against 0.75 (kept); 20
 * heads 0.81 both (kept). D = 128 has one tiling (its 64-row candidate gained under 3 %). On fewer SMs
 * the same heads fill the first tiling (kept); a forced variant is never swapped; gfx1151's table has
 * one workgroup-wide tiling per head size. */
static void test_encoder_grid_fill(void **state)
{
    (void)state;
    const struct {
        int d, heads, cus;
        const char *name;
    } cases[] = {
        {64, 4, 132, "encoder_bf16_d64_r16_kb64_nw4_w3"},   {64, 6, 132, "encoder_bf16_d64_r16_kb64_nw4_w3"},
        {64, 8, 132, "encoder_bf16_d64_r32_kb64_nw4_w2"},   {64, 12, 132, "encoder_bf16_d64_r16_kb64_nw4_w3"},
        {64, 14, 132, "encoder_bf16_d64_r32_kb64_nw4_w2"},  {64, 16, 132, "encoder_bf16_d64_r32_kb64_nw4_w2"},
        {64, 20, 132, "encoder_bf16_d64_r32_kb64_nw4_w2"},  {64, 64, 132, "encoder_bf16_d64_r32_kb64_nw4_w2"},
        {128, 4, 132, "encoder_bf16_d128_r32_kb64_nw4_w2"}, {128, 12, 132, "encoder_bf16_d128_r32_kb64_nw4_w2"},
        {64, 4, 64, "encoder_bf16_d64_r32_kb64_nw4_w2"},     {64, 12, 64, "encoder_bf16_d64_r32_kb64_nw4_w2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
        r35a_varlen_attention_desc d = varlen(R35A_DTYPE_BF16, 4, 4096, 1024, cases[i].heads, cases[i].heads, cases[i].d);
        const char *got = encoder_variant_on(&d, "sm_90", cases[i].cus, NULL);
        if (!got || strcmp(got, cases[i].name) != 0)
            print_error("D %d, %d heads, %d SMs: expected %s, got %s\n", cases[i].d, cases[i].heads, cases[i].cus,
                        cases[i].name, got ? got : "a decline");
        assert_non_null(got);
        assert_string_equal(got, cases[i].name);
    }
    /* 8 segments of 577 tokens, 12 heads, D = 64: 480 workgroups on 528 slots (0.91) against 960 on
     * 1188 (0.81): kept. */
    r35a_varlen_attention_desc vit = varlen(R35A_DTYPE_F16, 8, 8 * 577, 577, 12, 12, 64);
    assert_string_equal(encoder_variant_on(&vit, "sm_90", 132, NULL), "encoder_f16_d64_r32_kb64_nw4_w2");
    /* A forced variant is planned as forced. */
    r35a_varlen_attention_desc h16 = varlen(R35A_DTYPE_BF16, 4, 4096, 1024, 16, 16, 64);
    assert_string_equal(encoder_variant_on(&h16, "sm_90", 132, "encoder_bf16_d64_r16_kb64_nw4_w3"),
                        "encoder_bf16_d64_r16_kb64_nw4_w3");
    r35a_varlen_attention_desc h4 = varlen(R35A_DTYPE_BF16, 4, 4096, 1024, 4, 4, 64);
    assert_string_equal(encoder_variant_on(&h4, "sm_90", 132, "encoder_bf16_d64_r32_kb64_nw4_w2"),
                        "encoder_bf16_d64_r32_kb64_nw4_w2");
    /* gfx1151, any CU count: its one workgroup-wide tiling. */
    r35a_varlen_attention_desc g = varlen(R35A_DTYPE_F16, 4, 4096, 1024, 4, 4, 64);
    assert_string_equal(encoder_variant_on(&g, ARCH, 40, NULL), "encoder_f16_d64_r32_kb32_nw4_w6");
    assert_string_equal(encoder_variant_on(&g, ARCH, 80, NULL), "encoder_f16_d64_r32_kb32_nw4_w6");
}

/* The LSE output (0.3): the decode planner serves it (the same plan as without it) and its
 * arguments carry it, as the portable kernel's do (a mixed batch's two launches both write their
 * rows'); the encoder planner declines it with a reason naming it (so it runs on the portable kernel,
 * never silently without LSE); the merge planner picks merge_states_<dtype> with the portable grid,
 * and its arguments copy every stride. */
static void test_lse_and_merge(void **state)
{
    (void)state;
    r35a_paged_attention_desc d = paged(R35A_DTYPE_F16, 4, 1, 4096, 32, 8, 128, 16);
    d.use_lse = 1;
    d.lse_token_stride = 40;
    d.lse_head_stride = 1;
    r35a_paged_attention_desc no_lse = d;
    no_lse.use_lse = 0;
    r35a_gpu_launch with, without;
    char why[256] = "";
    assert_true(r35a_plan_decode(&d, ARCH, 40, NULL, &with, why, sizeof why));
    assert_true(r35a_plan_decode(&no_lse, ARCH, 40, NULL, &without, why, sizeof why));
    assert_int_equal(with.kernel, without.kernel);
    assert_int_equal(with.num_splits, without.num_splits);
    assert_int_equal(with.workspace_bytes, without.workspace_bytes);
    r35a_paged_attention_desc mixed = paged(R35A_DTYPE_F16, 4, 16, 4096, 32, 8, 128, 16);
    mixed.use_lse = 1;
    r35a_gpu_launch dl, gl;
    assert_true(r35a_plan_mixed(&mixed, ARCH, 40, NULL, &dl, &gl, why, sizeof why));
    expect_generic_paged(&d, "generic_paged_f16_dmax256");
    static float lse[64];
    r35a_paged_attention_args a;
    memset(&a, 0, sizeof a);
    a.struct_size = sizeof a;
    a.lse = lse;
    r35a_decode_args da;
    static _Alignas(16) unsigned char ws[64];
    r35a_fill_decode_args(&d, &a, &with, ws, &da);
    assert_ptr_equal(da.lse, lse);
    assert_int_equal(da.lse_token_stride, 40);
    assert_int_equal(da.lse_head_stride, 1);
    r35a_fill_decode_args(&mixed, &a, &dl, ws, &da);
    assert_ptr_equal(da.lse, lse);
    r35a_fill_decode_args(&no_lse, &a, &without, ws, &da);   /* no flag, no pointer handed on */
    assert_null(da.lse);
    r35a_generic_paged_args mg;
    r35a_fill_generic_paged_args(&mixed, &a, gl.min_query_len, &mg);
    assert_ptr_equal(mg.lse, lse);
    r35a_generic_paged_args ka;
    r35a_fill_generic_paged_args(&d, &a, 0, &ka);
    assert_ptr_equal(ka.lse, lse);
    assert_int_equal(ka.lse_token_stride, 40);
    assert_int_equal(ka.lse_head_stride, 1);
    d.use_lse = 0;   /* the flag rules: no flag, no pointer handed on */
    r35a_fill_generic_paged_args(&d, &a, 0, &ka);
    assert_null(ka.lse);

    r35a_varlen_attention_desc v = varlen(R35A_DTYPE_F16, 4, 1000, 400, 16, 16, 64);
    v.use_lse = 1;
    /* the encoder kernels write it (on gfx1151; NVIDIA declines until run there) */
    {
        r35a_gpu_launch el[R35A_ENCODER_MAX_LAUNCHES];
        int n = 0;
        char why[256] = "";
        assert_true(r35a_plan_encoder(&v, ARCH, 40, NULL, el, &n, why, sizeof why));
    }
    expect_encoder_declines_on(&v, "sm_90", NULL, "softcap, sinks or the LSE on the NVIDIA encoder kernels");
    r35a_varlen_attention_args va = {sizeof va, lse, lse, lse, lse, NULL, NULL, lse};
    r35a_generic_varlen_args kv;
    r35a_fill_generic_varlen_args(&v, &va, &kv);
    assert_ptr_equal(kv.lse, lse);
    assert_int_equal(kv.lse_token_stride, 16);
    r35a_encoder_args ea;
    r35a_fill_encoder_args(&v, &va, &ea);
    assert_ptr_equal(ea.lse, lse);
    assert_int_equal(ea.lse_token_stride, 16);
    assert_int_equal(ea.lse_head_stride, 1);
    assert_null(ea.sinks);
    v.use_lse = 0;   /* no flag, no pointer handed on */
    r35a_fill_encoder_args(&v, &va, &ea);
    assert_null(ea.lse);
    v.use_lse = 1;

    for (int k = 0; k < 2; ++k) {
        const r35a_dtype dt = k ? R35A_DTYPE_BF16 : R35A_DTYPE_F16;
        r35a_merge_states_desc m;
        r35a_merge_states_desc_init(&m, dt, 4, 300, 24, 576);
        r35a_gpu_launch l;
        char why[256] = "";
        bool ok = r35a_plan_generic_merge(&m, ARCH, NULL, &l, why, sizeof why);
        if (!ok)
            print_error("merge declined: %s\n", why);
        assert_true(ok);
        assert_string_equal(r35a_generic_kernels[l.kernel].name, k ? "merge_states_bf16" : "merge_states_f16");
        assert_int_equal(r35a_generic_kernels[l.kernel].op, R35A_OP_MERGE);
        assert_int_equal(l.grid[0], 300);
        assert_int_equal(l.grid[1], 24);
        assert_int_equal(l.grid[2], 1);
        assert_int_equal(l.block[0], R35A_GENERIC_THREADS);
        assert_int_equal(l.workspace_bytes, 0);
        m.use_out_lse = 1;
        m.lse_part_stride = 7;
        r35a_merge_states_args ma = {sizeof ma, lse, lse, lse + 1, lse + 2};
        r35a_generic_merge_args km;
        r35a_fill_generic_merge_args(&m, &ma, &km);
        assert_ptr_equal(km.out_lse, lse + 2);
        assert_int_equal(km.lse_part_stride, 7);
        assert_int_equal(km.part_stride, (int64_t)300 * 24 * 576);
        assert_int_equal(km.num_parts, 4);
        assert_int_equal(km.head_size, 576);
    }
    /* f32 is the reference's only; the paged planner never picks a merge kernel */
    r35a_merge_states_desc m32;
    r35a_merge_states_desc_init(&m32, R35A_DTYPE_F32, 2, 1, 1, 8);
    r35a_gpu_launch l;
    why[0] = '\0';
    assert_false(r35a_plan_generic_merge(&m32, ARCH, NULL, &l, why, sizeof why));
    assert_non_null(strstr(why, "dtype f32"));
    assert_false(r35a_plan_generic_paged(&d, ARCH, "merge_states_f16", &l, why, sizeof why));
}

static void test_encoder_declines(void **state)
{
    (void)state;
    r35a_varlen_attention_desc d = varlen(R35A_DTYPE_F16, 4, 1000, 400, 16, 16, 64);

    /* GQA and causal calls run on the encoder (run-time arguments); a causal call never splits its
     * last round (one launch) */
    r35a_varlen_attention_desc gqa = varlen(R35A_DTYPE_F16, 4, 1000, 400, 16, 4, 64);
    {
        r35a_gpu_launch l[R35A_ENCODER_MAX_LAUNCHES];
        int n = 0;
        char why[256];
        assert_true(r35a_plan_encoder(&gqa, ARCH, 40, NULL, l, &n, why, sizeof why));
        r35a_encoder_args ea;
        r35a_varlen_attention_args va = {0};
        r35a_fill_encoder_args(&gqa, &va, &ea);
        assert_int_equal(ea.kv_group, 4);
        assert_int_equal(ea.causal, 0);
        r35a_varlen_attention_desc causal = d;
        causal.causal = 1;
        assert_true(r35a_plan_encoder(&causal, ARCH, 40, NULL, l, &n, why, sizeof why));
        assert_int_equal(n, 1);
        assert_int_equal(l[0].tail_items, 0);
        r35a_fill_encoder_args(&causal, &va, &ea);
        assert_int_equal(ea.causal, 1);
        assert_int_equal(ea.kv_group, 1);
    }

    /* softcap and sinks run on the encoder kernels (gfx1151); NVIDIA declines them until run there */
    r35a_varlen_attention_desc softcap = d;
    softcap.logit_softcap = 50.0f;
    softcap.use_sinks = 1;
    {
        r35a_gpu_launch el[R35A_ENCODER_MAX_LAUNCHES];
        int n = 0;
        char why[256] = "";
        assert_true(r35a_plan_encoder(&softcap, ARCH, 40, NULL, el, &n, why, sizeof why));
    }
    expect_encoder_declines_on(&softcap, "sm_90", NULL, "softcap, sinks or the LSE on the NVIDIA encoder kernels");

    r35a_varlen_attention_desc d96 = varlen(R35A_DTYPE_F16, 4, 1000, 400, 16, 16, 96);
    expect_encoder_declines(&d96, NULL, "head_size 96 not built (gfx1151 f16: 32, 48, 64, 72, 80, 128)");
    r35a_varlen_attention_desc d256 = varlen(R35A_DTYPE_BF16, 4, 1000, 400, 16, 16, 256);
    expect_encoder_declines(&d256, NULL, "head_size 256 not built");

    r35a_varlen_attention_desc f32 = varlen(R35A_DTYPE_F32, 4, 1000, 400, 16, 16, 64);
    expect_encoder_declines(&f32, NULL, "dtype f32 (the encoder kernels are f16/bf16)");

    r35a_varlen_attention_desc kstride = d;
    kstride.k_head_stride = 68; /* padded heads of 136 bytes: rows not 16-byte aligned */
    expect_encoder_declines(&kstride, NULL, "k_head_stride 68 is not a multiple of 8 elements");
    r35a_varlen_attention_desc ostride = d;
    ostride.o_token_stride = 16 * 64 + 4;
    expect_encoder_declines(&ostride, NULL, "o_token_stride 1028 is not a multiple of 8");

    r35a_varlen_attention_desc far = d;
    far.v_token_stride = (int64_t)1 << 24;
    expect_encoder_declines(&far, NULL, "v_token_stride 16777216 >= 2^24 elements");
    r35a_varlen_attention_desc near = d;
    near.q_token_stride = near.k_token_stride = near.v_token_stride = ((int64_t)1 << 24) - 8;
    expect_encoder(&near, NULL, "encoder_f16_d64_r32_kb32_nw4_w6", 16, 128);
    /* The output's token stride has no such bound (64-bit row addresses). */
    r35a_varlen_attention_desc wide_o = d;
    wide_o.o_token_stride = (int64_t)1 << 30;
    expect_encoder(&wide_o, NULL, "encoder_f16_d64_r32_kb32_nw4_w6", 16, 128);

    r35a_varlen_attention_desc heads = varlen(R35A_DTYPE_F16, 1, 100, 100, 70000, 70000, 64);
    expect_encoder_declines(&heads, NULL, "num_q_heads 70000 above the grid limit");

    /* 2^30 / 128 row blocks x 300 segments > 2^31 - 1 workgroups in grid.x. */
    r35a_varlen_attention_desc huge = varlen(R35A_DTYPE_F16, 300, 1000, 1 << 30, 16, 16, 64);
    expect_encoder_declines(&huge, NULL, "2516582400 workgroups (max_seqlen 1073741824 x num_segments 300) above "
                                         "the grid limit");
    /* The small-problem tiling: 2^31 segments of <= 16 tokens would be 2^29 workgroups (fits); its
     * grid is checked the same way. */
    r35a_varlen_attention_desc many = varlen(R35A_DTYPE_F16, 0x7fffffff, 0x7fffffff, 1, 1, 1, 64);
    expect_encoder(&many, NULL, "encoder_f16_d64_r16_kb16_nw4_w6_l64", 0x20000000, 128);

    /* Several reasons are all named. */
    r35a_varlen_attention_desc all = gqa;
    all.causal = 1;
    all.num_kv_heads = 3;
    all.head_size = 96;
    expect_encoder_declines(&all, NULL, "not a multiple of num_kv_heads 3");
    expect_encoder_declines(&all, NULL, "head_size 96 not built");
}

static void test_encoder_args(void **state)
{
    (void)state;
    r35a_varlen_attention_desc d = varlen(R35A_DTYPE_BF16, 3, 600, 256, 16, 16, 80);
    d.q_token_stride = d.k_token_stride = d.v_token_stride = 3 * 16 * 80;
    d.o_head_stride = 88;
    d.o_token_stride = 16 * 88;
    d.softmax_scale = 0.125f;
    static _Alignas(16) uint16_t qkv[3 * 16 * 80 * 4], o[16 * 88 * 4];
    static int32_t cu[4];
    r35a_varlen_attention_args a = {sizeof a, qkv, qkv + 16 * 80, qkv + 2 * 16 * 80, o, cu, NULL, NULL};
    r35a_encoder_args ka;
    r35a_fill_encoder_args(&d, &a, &ka);
    assert_ptr_equal(ka.q, qkv);
    assert_ptr_equal(ka.k, qkv + 16 * 80);
    assert_ptr_equal(ka.v, qkv + 2 * 16 * 80);
    assert_ptr_equal(ka.out, o);
    assert_ptr_equal(ka.cu_seqlens, cu);
    assert_int_equal(ka.q_token_stride, 3 * 16 * 80);
    assert_int_equal(ka.k_token_stride, 3 * 16 * 80);
    assert_int_equal(ka.v_head_stride, 80);
    assert_int_equal(ka.o_token_stride, 16 * 88);
    assert_int_equal(ka.o_head_stride, 88);
    assert_int_equal(ka.num_segments, 3);
    assert_int_equal(ka.num_heads, 16);
    assert_int_equal(ka.max_seqlen, 256);
    assert_true(fabs(ka.scale_log2 - 0.125 * 1.4426950408889634) < 1e-6);
    const int64_t strides[] = {ka.q_token_stride, ka.q_head_stride, ka.k_token_stride, ka.k_head_stride,
                               ka.v_token_stride, ka.v_head_stride, ka.o_token_stride, ka.o_head_stride};
    for (size_t i = 0; i < sizeof strides / sizeof *strides; ++i)
        assert_true(r35a_encoder_stride_ok(strides[i]));
    assert_true(r35a_encoder_token_stride_ok(ka.q_token_stride));
    assert_false(r35a_encoder_token_stride_ok(R35A_ENCODER_MAX_TOKEN_STRIDE));
    assert_false(r35a_encoder_stride_ok(12));

    char why[128];
    assert_true(r35a_encoder_pointers_aligned(&a, why, sizeof why));
    r35a_varlen_attention_args off = a;
    off.out = o + 4; /* 8 bytes off */
    assert_false(r35a_encoder_pointers_aligned(&off, why, sizeof why));
    assert_non_null(strstr(why, "out"));
    off = a;
    off.k = qkv + 1;
    assert_false(r35a_encoder_pointers_aligned(&off, why, sizeof why));
    assert_non_null(strstr(why, "k "));
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
    r35a_paged_attention_args a = {sizeof a, q, kv, kv, o, seq_lens, qsl, table, NULL, NULL, NULL, NULL, NULL};
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
    assert_null(ka.sinks);
    assert_null(ka.alibi_slopes);
    assert_null(ka.k_scale);
    assert_null(ka.v_scale);
    assert_true(ka.logit_softcap == 0.0f);

    /* The model features and an 8-bit cache's scales reach the kernel only when the desc says so. */
    static float sinks[64], slopes[64], k_scale[8], v_scale[8];
    r35a_paged_attention_desc f = d;
    f.logit_softcap = 30.0f;
    f.use_alibi = 1;
    f.use_sinks = 1;
    f.kv_dtype = R35A_DTYPE_INT8;
    f.kv_scale_per_head = 1;
    r35a_gpu_launch fl;
    assert_true(r35a_plan_decode(&f, ARCH, 40, NULL, &fl, why, sizeof why));
    r35a_paged_attention_args fa = a;
    fa.sinks = sinks;
    fa.alibi_slopes = slopes;
    fa.k_scale = k_scale;
    fa.v_scale = v_scale;
    r35a_fill_decode_args(&f, &fa, &fl, ws, &ka);
    assert_ptr_equal(ka.sinks, sinks);
    assert_ptr_equal(ka.alibi_slopes, slopes);
    assert_ptr_equal(ka.k_scale, k_scale);
    assert_ptr_equal(ka.v_scale, v_scale);
    assert_int_equal(ka.kv_scale_per_head, 1);
    assert_true(ka.logit_softcap == 30.0f);
    f.kv_dtype = R35A_DTYPE_F16;   /* a 16-bit cache: no scales even if the args carry some */
    f.kv_scale_per_head = 0;
    f.use_sinks = 0;
    r35a_fill_decode_args(&f, &fa, &fl, ws, &ka);
    assert_null(ka.k_scale);
    assert_null(ka.v_scale);
    assert_null(ka.sinks);
    assert_int_equal(ka.kv_scale_per_head, 0);

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
        cmocka_unit_test(test_decode_split_merge_launch),
        cmocka_unit_test(test_decode_window_limits_splits),
        cmocka_unit_test(test_decode_nothing_to_launch),
        cmocka_unit_test(test_decode_declines),
        cmocka_unit_test(test_decode_model_features),
        cmocka_unit_test(test_decode_dynamic_shared),
        cmocka_unit_test(test_decode_nv_single_split),
        cmocka_unit_test(test_decode_nv_single_split_warps),
        cmocka_unit_test(test_decode_nv_short_splits),
        cmocka_unit_test(test_decode_rows_choice),
        cmocka_unit_test(test_decode_forced_variant),
        cmocka_unit_test(test_generic_paged),
        cmocka_unit_test(test_generic_varlen),
        cmocka_unit_test(test_generic_args_features),
        cmocka_unit_test(test_decode_args),
        cmocka_unit_test(test_mixed_batch),
        cmocka_unit_test(test_prefill),
        cmocka_unit_test(test_mixed_batch_declines),
        cmocka_unit_test(test_mixed_batch_features),
        cmocka_unit_test(test_encoder_plan),
        cmocka_unit_test(test_encoder_grid_fill),
        cmocka_unit_test(test_encoder_tail_split),
        cmocka_unit_test(test_encoder_declines),
        cmocka_unit_test(test_lse_and_merge),
        cmocka_unit_test(test_encoder_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
