/* test_hip_backend.c - the HIP backend through the public API, on a machine without a GPU.
 *
 * One mode per process (the library reads its environment knobs once), chosen by argv[1]:
 *   absent        the real loader path: no HIP runtime on this machine -> AUTO falls back to the
 *                 reference with the reason, GPU fails with R35A_ERR_BACKEND_UNAVAILABLE;
 *   wrong_arch    a stand-in runtime (tests/hip/fake_hip.c through R35A_HIP_LIBRARY) reporting a
 *                 gfx90a (not a gfx11 arch) -> not served, the reason names the arch;
 *   no_device     the stand-in reports no device;
 *   gpu           the stand-in reports a gfx1151: plans choose the tuned variants or the generic
 *                 kernel with their reasons, runs launch the planned kernel with the planned grid on
 *                 the caller's stream, with the split counters cleared first;
 *   force_variant R35A_FORCE=<a decode variant>: that variant serves, alone or in a mixed batch;
 *   force_generic R35A_FORCE=generic: the generic kernel serves a decode shape, a mixed batch and
 *                 an encoder shape;
 *   force_encoder R35A_FORCE=<an encoder variant>: that variant serves its shapes, others are refused.
 * In `gpu`, a mixed batch (max_query_len > 8) runs as two launches on one stream (decode for M <= 8,
 * generic with min_query_len 8), and non-causal varlen runs one encoder launch for all segments.
 * The stand-in checks that each kernel the backend asks for is in the embedded code object's
 * symbol table, so `gpu` also proves every kernel of variants.def made it into the library. */
#define _POSIX_C_SOURCE 200809L
#include "rdna35attn.h"

#include "fake_hip.h"
#include "encoder/encoder_args.h"
#include "encoder/prefill_args.h"
#include "decode/decode_args.h"
#include "common/device_error.h"
#include "generic/generic_args.h"

#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static const char *mode;

/* ---- helpers ---- */

static r35a_context *create(r35a_backend backend, r35a_status expect)
{
    r35a_context_options o;
    r35a_context_options_init(&o);
    o.backend = backend;
    r35a_context *ctx = (r35a_context *)1;
    r35a_status st = r35a_context_create(&o, &ctx);
    if (st != expect)
        print_error("context_create: %s (%s), expected %s\n", r35a_status_string(st), r35a_last_error_detail(),
                    r35a_status_string(expect));
    assert_int_equal(st, expect);
    if (st != R35A_OK)
        assert_null(ctx);
    return ctx;
}

static r35a_context_info info_of(const r35a_context *ctx)
{
    r35a_context_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    assert_int_equal(r35a_context_get_info(ctx, &info), R35A_OK);
    return info;
}

static r35a_plan_info plan_info_of(const r35a_plan *plan)
{
    r35a_plan_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    assert_int_equal(r35a_plan_get_info(plan, &info), R35A_OK);
    return info;
}

static void expect_contains(const char *text, const char *needle)
{
    if (!strstr(text, needle))
        print_error("'%s' does not contain '%s'\n", text, needle);
    assert_non_null(strstr(text, needle));
}

/* ---- modes without a usable GPU ---- */

static void test_absent(void **state)
{
    (void)state;
    void *real = dlopen("libamdhip64.so.7", RTLD_NOW | RTLD_LOCAL);
    if (!real)
        real = dlopen("libamdhip64.so.6", RTLD_NOW | RTLD_LOCAL);
    if (real) {
        dlclose(real);
        skip(); /* a HIP runtime is installed here: the no-runtime path cannot be observed */
    }
    r35a_context *ctx = create(R35A_BACKEND_AUTO, R35A_OK);
    r35a_context_info info = info_of(ctx);
    assert_int_equal(info.backend, R35A_BACKEND_REFERENCE);
    assert_string_equal(info.backend_name, "reference");
    assert_int_equal(info.device_index, -1);
#ifdef R35A_HAVE_CODE_OBJECTS
    /* (a build with NVIDIA cubins appends the CUDA backend's reason) */
    expect_contains(info.reason, "auto: no HIP runtime: dlopen libamdhip64.so.7/.6 failed");
#else
    expect_contains(info.reason, "auto: built without gfx11 code objects");
#endif
    /* The reference context plans on the reference. */
    r35a_paged_attention_desc d;
    r35a_paged_attention_desc_init(&d, R35A_DTYPE_F16, 1, 1, 1, 64, 8, 2, 128, 16, 4);
    r35a_plan *plan = NULL;
    assert_int_equal(r35a_paged_attention_plan(ctx, &d, &plan), R35A_OK);
    assert_string_equal(plan_info_of(plan).implementation, "reference");
    r35a_plan_destroy(plan);
    /* No device error record on the reference: its data is checked before each run. */
    assert_int_equal(r35a_context_check_device(ctx), R35A_OK);
    assert_string_equal(r35a_last_error_detail(), "");
    assert_int_equal(r35a_context_check_device(NULL), R35A_ERR_NULL_POINTER);
    assert_string_equal(r35a_last_error_detail(), "context: NULL");
    r35a_context_destroy(ctx);

    create(R35A_BACKEND_GPU, R35A_ERR_BACKEND_UNAVAILABLE);
#ifdef R35A_HAVE_CODE_OBJECTS
    expect_contains(r35a_last_error_detail(),
                    "context_options.backend: GPU requested but no HIP runtime: dlopen libamdhip64.so.7/.6 failed");
#else
    expect_contains(r35a_last_error_detail(), "built without gfx11 code objects");
#endif
}

static void test_wrong_arch(void **state)
{
    (void)state;
    r35a_context *ctx = create(R35A_BACKEND_AUTO, R35A_OK);
    r35a_context_info info = info_of(ctx);
    assert_int_equal(info.backend, R35A_BACKEND_REFERENCE);
    expect_contains(info.reason, "device: found gfx90a (HIP device 0)");
    r35a_context_destroy(ctx);
    create(R35A_BACKEND_GPU, R35A_ERR_BACKEND_UNAVAILABLE);
    expect_contains(r35a_last_error_detail(), "device: found gfx90a");
}

static void test_no_device(void **state)
{
    (void)state;
    r35a_context *ctx = create(R35A_BACKEND_AUTO, R35A_OK);
    expect_contains(info_of(ctx).reason, "auto: no HIP device");
    r35a_context_destroy(ctx);
    create(R35A_BACKEND_GPU, R35A_ERR_BACKEND_UNAVAILABLE);
    expect_contains(r35a_last_error_detail(), "no HIP device");
}

/* ---- the stand-in gfx1151 ---- */

static struct {
    void *lib;
    fake_hip_count_fn num_launches, num_memsets, num_modules, num_unloaded;
    fake_hip_launch_fn launch;
    fake_hip_memset_fn memset;
    fake_hip_order_fn order;
    fake_hip_reset_fn reset;
    fake_hip_count_fn num_host_allocations, num_host_frees;
    fake_hip_host_allocation_fn host_allocation;
} fake;

static void open_fake(void)
{
    const char *path = getenv("R35A_HIP_LIBRARY");
    assert_non_null(path);
    fake.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(fake.lib);
#define GET(field, symbol) *(void **)&fake.field = dlsym(fake.lib, symbol), assert_non_null(fake.field)
    GET(num_launches, "fake_hip_num_launches");
    GET(num_memsets, "fake_hip_num_memsets");
    GET(num_modules, "fake_hip_num_modules");
    GET(num_unloaded, "fake_hip_num_unloaded");
    GET(launch, "fake_hip_launch");
    GET(memset, "fake_hip_memset");
    GET(order, "fake_hip_call_order");
    GET(reset, "fake_hip_reset_records");
    GET(num_host_allocations, "fake_hip_num_host_allocations");
    GET(num_host_frees, "fake_hip_num_host_frees");
    GET(host_allocation, "fake_hip_host_allocation");
#undef GET
}

/* Buffers standing in for device memory: the GPU path never reads them on the host. */
static _Alignas(256) unsigned char q_buf[1 << 20], o_buf[1 << 20], kv_buf[1 << 16], ws_buf[1 << 22];
static int32_t meta[4096];
static char stream_token;

static r35a_paged_attention_args paged_args(void)
{
    r35a_paged_attention_args a;
    memset(&a, 0, sizeof a);
    a.struct_size = sizeof a;
    a.q = q_buf;
    a.k_cache = kv_buf;
    a.v_cache = kv_buf;
    a.out = o_buf;
    a.seq_lens = meta;
    a.query_start_loc = meta + 1024;
    a.block_table = meta + 2048;
    return a;
}

static r35a_plan *plan_paged(r35a_context *ctx, const r35a_paged_attention_desc *d, r35a_status expect)
{
    r35a_plan *plan = NULL;
    r35a_status st = r35a_paged_attention_plan(ctx, d, &plan);
    if (st != expect)
        print_error("plan: %s (%s)\n", r35a_status_string(st), r35a_last_error_detail());
    assert_int_equal(st, expect);
    return plan;
}

static void test_gpu_context(void **state)
{
    (void)state;
    open_fake();
    r35a_context *ctx = create(R35A_BACKEND_AUTO, R35A_OK);
    r35a_context_info info = info_of(ctx);
    assert_int_equal(info.backend, R35A_BACKEND_GPU);
    assert_string_equal(info.backend_name, "hip");
    assert_string_equal(info.arch, "gfx1151");
    assert_int_equal(info.device_index, 0);
    expect_contains(info.reason, "HIP device 0: Fake Radeon, gfx1151, 20 wgps = 40 CUs (");
    int modules = fake.num_modules();
    assert_true(modules >= 2); /* decode and generic */
    r35a_context_destroy(ctx);
    assert_int_equal(fake.num_unloaded(), modules);

    /* A device the runtime does not have. */
    r35a_context_options o;
    r35a_context_options_init(&o);
    o.backend = R35A_BACKEND_GPU;
    o.device_index = 3;
    r35a_context *none = NULL;
    assert_int_equal(r35a_context_create(&o, &none), R35A_ERR_BACKEND_UNAVAILABLE);
    expect_contains(r35a_last_error_detail(), "no HIP device 3: the runtime sees 1 device");
}

static void test_gpu_decode_plan_and_run(void **state)
{
    (void)state;
    open_fake();
    r35a_context *ctx = create(R35A_BACKEND_GPU, R35A_OK);
    /* D=128, G=4, M=1, one sequence of 4096 tokens: the rows-4 variant (see test_planner.c for the numbers). */
    r35a_paged_attention_desc d;
    r35a_paged_attention_desc_init(&d, R35A_DTYPE_F16, 1, 1, 1, 4096, 32, 8, 128, 16, 256);
    r35a_plan *plan = plan_paged(ctx, &d, R35A_OK);
    r35a_plan_info pi = plan_info_of(plan);
    assert_string_equal(pi.implementation, "decode_f16_d128_r4_kw2_dw2_w8_dot4_pregs2_qlds+decode_merge_f16");
    assert_string_equal(pi.fallback_reason, "");
    assert_int_equal(pi.num_splits, 10);
    assert_int_equal(pi.grid[0], 10);
    assert_int_equal(pi.grid[1], 8);
    assert_int_equal(pi.grid[2], 1);
    assert_int_equal(pi.block[0], 128);
    assert_int_equal(pi.workspace_bytes, 80 * 520 * 4);

    /* Too small a workspace is refused before anything is launched. */
    fake.reset();
    r35a_paged_attention_args a = paged_args();
    assert_int_equal(r35a_paged_attention_run(ctx, plan, &a, ws_buf, pi.workspace_bytes - 1, &stream_token),
                     R35A_ERR_WORKSPACE_TOO_SMALL);
    assert_int_equal(fake.num_launches(), 0);

    assert_int_equal(r35a_paged_attention_run(ctx, plan, &a, ws_buf, sizeof ws_buf, &stream_token), R35A_OK);
    assert_string_equal(fake.order(), "LL"); /* the kernel, then its split merge, on one stream; no memset */
    const fake_launch *l = fake.launch(0);
    assert_string_equal(l->kernel, "decode_f16_d128_r4_kw2_dw2_w8_dot4_pregs2_qlds");
    assert_memory_equal(l->grid, pi.grid, sizeof pi.grid);
    assert_memory_equal(l->block, pi.block, sizeof pi.block);
    assert_ptr_equal(l->stream, &stream_token);
    assert_int_equal(l->args_size, sizeof(r35a_decode_args));
    r35a_decode_args ka;
    memcpy(&ka, l->args, sizeof ka);
    assert_ptr_equal(ka.q, q_buf);
    assert_ptr_equal(ka.out, o_buf);
    assert_ptr_equal(ka.workspace, ws_buf);
    assert_ptr_equal(ka.block_table, meta + 2048);
    assert_int_equal(ka.num_splits, 10);
    assert_int_equal(ka.group_size, 4);
    assert_int_equal(ka.num_row_groups, 1);
    assert_int_equal(ka.page_size, 16);
    assert_int_equal(ka.rows_per_group, 4);
    assert_int_equal(ka.head_size, 128);
    assert_int_equal(ka.min_split_tiles, 4);
    /* the merge: the same argument struct, 4 rows x 128 d / 4 x 4 lanes = 512 threads per kv head */
    const fake_launch *merge = fake.launch(1);
    assert_string_equal(merge->kernel, "decode_merge_f16");
    assert_int_equal(merge->grid[0], 4);
    assert_int_equal(merge->grid[1], 8);
    assert_int_equal(merge->grid[2], 1);
    assert_int_equal(merge->block[0], 128);
    assert_int_equal(merge->shared_bytes, 0);
    assert_ptr_equal(merge->stream, &stream_token);
    assert_int_equal(merge->args_size, sizeof(r35a_decode_args));
    assert_memory_equal(merge->args, l->args, sizeof(r35a_decode_args));

    /* A Q pointer off 16-byte alignment: the generic kernel serves this run, no workspace used. */
    fake.reset();
    a.q = q_buf + 2;
    assert_int_equal(r35a_paged_attention_run(ctx, plan, &a, ws_buf, sizeof ws_buf, &stream_token), R35A_OK);
    assert_string_equal(fake.order(), "L");
    assert_string_equal(fake.launch(0)->kernel, "generic_paged_f16_dmax256");
    assert_int_equal(fake.launch(0)->grid[0], 1);
    assert_int_equal(fake.launch(0)->grid[1], 32);
    r35a_plan_destroy(plan);

    /* Enough sequences to fill the GPU: one split, no workspace, no memset. */
    r35a_paged_attention_desc busy;
    r35a_paged_attention_desc_init(&busy, R35A_DTYPE_BF16, 64, 64, 1, 4096, 8, 8, 64, 16, 64 * 256);
    plan = plan_paged(ctx, &busy, R35A_OK);
    pi = plan_info_of(plan);
    assert_string_equal(pi.implementation, "decode_bf16_d64_r4_kw4_dw1_w8_dot4_pregs2_qlds");
    assert_int_equal(pi.workspace_bytes, 0);
    fake.reset();
    a = paged_args();
    assert_int_equal(r35a_paged_attention_run(ctx, plan, &a, NULL, 0, NULL), R35A_OK);
    assert_string_equal(fake.order(), "L");
    memcpy(&ka, fake.launch(0)->args, sizeof ka);
    assert_null(ka.workspace);
    assert_null(fake.launch(0)->stream);
    r35a_plan_destroy(plan);

    /* Only padding sequences (max_query_len 0): nothing to launch. */
    r35a_paged_attention_desc pad;
    r35a_paged_attention_desc_init(&pad, R35A_DTYPE_F16, 4, 0, 0, 64, 8, 8, 128, 16, 16);
    plan = plan_paged(ctx, &pad, R35A_OK);
    fake.reset();
    assert_int_equal(r35a_paged_attention_run(ctx, plan, &a, ws_buf, sizeof ws_buf, NULL), R35A_OK);
    assert_int_equal(fake.num_launches(), 0);
    r35a_plan_destroy(plan);
    r35a_context_destroy(ctx);
}

/* Softcap, ALiBi, sinks and 8-bit caches run on the decode kernels: the plan names the format's
 * kernel, the launch carries the feature pointers and values only when the desc asks for them. */
static void expect_decode_features(r35a_context *ctx, const r35a_paged_attention_desc *d, const char *kernel)
{
    r35a_plan *plan = plan_paged(ctx, d, R35A_OK);
    r35a_plan_info pi = plan_info_of(plan);
    char implementation[160];
    snprintf(implementation, sizeof implementation, "%s+decode_merge_%s", kernel,
             d->dtype == R35A_DTYPE_BF16 ? "bf16" : "f16");
    assert_string_equal(pi.implementation, implementation);
    assert_string_equal(pi.fallback_reason, "");
    fake.reset();
    r35a_paged_attention_args a = paged_args();
    float slopes[64], sinks[64], scales[2][64];
    a.alibi_slopes = d->use_alibi ? slopes : NULL;
    a.sinks = d->use_sinks ? sinks : NULL;
    const int kv8 = d->kv_dtype == R35A_DTYPE_FP8_E4M3 || d->kv_dtype == R35A_DTYPE_INT8;
    if (kv8) {
        a.k_scale = scales[0];
        a.v_scale = scales[1];
    }
    assert_int_equal(r35a_paged_attention_run(ctx, plan, &a, ws_buf, sizeof ws_buf, &stream_token), R35A_OK);
    const fake_launch *l = fake.launch(0);   /* then its split merge (2 x 8 workgroups want splits) */
    assert_string_equal(l->kernel, kernel);
    assert_int_equal(fake.num_launches(), 2);
    assert_string_equal(fake.launch(1)->kernel, d->dtype == R35A_DTYPE_BF16 ? "decode_merge_bf16" : "decode_merge_f16");
    r35a_decode_args ka;
    memcpy(&ka, l->args, sizeof ka);
    assert_true(ka.logit_softcap == d->logit_softcap);
    assert_ptr_equal(ka.alibi_slopes, d->use_alibi ? slopes : NULL);
    assert_ptr_equal(ka.sinks, d->use_sinks ? sinks : NULL);
    assert_ptr_equal(ka.k_scale, kv8 ? scales[0] : NULL);
    assert_ptr_equal(ka.v_scale, kv8 ? scales[1] : NULL);
    assert_int_equal(ka.kv_scale_per_head, kv8 ? d->kv_scale_per_head : 0);
    r35a_plan_destroy(plan);
}

static void test_gpu_decode_features(void **state)
{
    (void)state;
    open_fake();
    r35a_context *ctx = create(R35A_BACKEND_GPU, R35A_OK);
    r35a_paged_attention_desc d;
    r35a_paged_attention_desc_init(&d, R35A_DTYPE_F16, 2, 2, 1, 4096, 32, 8, 128, 16, 512);
    r35a_paged_attention_desc f = d;
    f.logit_softcap = 30.0f;
    expect_decode_features(ctx, &f, "decode_f16_d128_r4_kw2_dw2_w8_dot4_pregs2_qlds");
    f.use_alibi = 1;
    f.use_sinks = 1;
    expect_decode_features(ctx, &f, "decode_f16_d128_r4_kw2_dw2_w8_dot4_pregs2_qlds");
    r35a_paged_attention_desc fp8 = d;
    fp8.kv_dtype = R35A_DTYPE_FP8_E4M3;
    fp8.kv_scale_per_head = 1;
    fp8.use_sinks = 1;
    expect_decode_features(ctx, &fp8, "decode_f16_fp8_d128_r4_kw1_dw2_w6_dot4_pregs3_qstg");
    r35a_paged_attention_desc int8 = d;
    int8.kv_dtype = R35A_DTYPE_INT8;
    int8.dtype = R35A_DTYPE_BF16;
    expect_decode_features(ctx, &int8, "decode_bf16_int8_d128_r4_kw4_dw1_w6_dot4_pregs3_qlds");
    /* a mixed batch: the format's decode kernel, then the portable kernel */
    r35a_paged_attention_desc mixed;
    r35a_paged_attention_desc_init(&mixed, R35A_DTYPE_F16, 2, 13, 12, 4096, 32, 8, 128, 16, 512);
    mixed.kv_dtype = R35A_DTYPE_FP8_E4M3;
    mixed.use_sinks = 1;
    r35a_plan *plan = plan_paged(ctx, &mixed, R35A_OK);
    assert_string_equal(plan_info_of(plan).implementation,
                        "decode_f16_fp8_d128_r32_kw1_dw4_w8_wmma16_pregs2_qregs+decode_merge_f16+generic_paged_f16_dmax256");
    r35a_plan_destroy(plan);
    r35a_context_destroy(ctx);
}

static void expect_generic(r35a_context *ctx, const r35a_paged_attention_desc *d, const char *kernel,
                           const char *reason)
{
    r35a_plan *plan = plan_paged(ctx, d, R35A_OK);
    r35a_plan_info pi = plan_info_of(plan);
    assert_string_equal(pi.implementation, kernel);
    expect_contains(pi.fallback_reason, reason);
    assert_int_equal(pi.workspace_bytes, 0);
    assert_int_equal(pi.grid[0], (uint32_t)d->num_tokens);
    assert_int_equal(pi.grid[1], (uint32_t)d->num_q_heads);
    fake.reset();
    r35a_paged_attention_args a = paged_args();
    float slopes[64], sinks[64], scales[2][64];
    if (d->use_alibi)
        a.alibi_slopes = slopes;
    if (d->use_sinks)
        a.sinks = sinks;
    const int kv8 = d->kv_dtype == R35A_DTYPE_FP8_E4M3 || d->kv_dtype == R35A_DTYPE_INT8;
    if (kv8) {
        a.k_scale = scales[0];
        a.v_scale = scales[1];
    }
    assert_int_equal(r35a_paged_attention_run(ctx, plan, &a, NULL, 0, &stream_token), R35A_OK);
    assert_int_equal(fake.num_launches(), 1);
    const fake_launch *l = fake.launch(0);
    assert_string_equal(l->kernel, kernel);
    r35a_generic_paged_args ka;
    memcpy(&ka, l->args, sizeof ka);
    assert_int_equal(ka.head_size, d->head_size);
    assert_int_equal(ka.page_size, d->page_size);
    assert_int_equal(ka.min_query_len, 0);
    assert_true(ka.logit_softcap == d->logit_softcap);
    assert_ptr_equal(ka.alibi_slopes, d->use_alibi ? slopes : NULL);
    assert_ptr_equal(ka.sinks, d->use_sinks ? sinks : NULL);
    assert_int_equal(ka.kv_dtype, kv8 ? (int32_t)d->kv_dtype : R35A_KV_AS_Q);
    assert_ptr_equal(ka.k_scale, kv8 ? scales[0] : NULL);
    assert_ptr_equal(ka.v_scale, kv8 ? scales[1] : NULL);
    assert_int_equal(ka.kv_scale_per_head, d->kv_scale_per_head);
    r35a_plan_destroy(plan);
}

static void test_gpu_fallbacks(void **state)
{
    (void)state;
    open_fake();
    r35a_context *ctx = create(R35A_BACKEND_GPU, R35A_OK);
    r35a_paged_attention_desc d;
    r35a_paged_attention_desc_init(&d, R35A_DTYPE_F16, 2, 2, 1, 4096, 32, 8, 128, 16, 512);

    /* An 8-bit cache whose rows are 8 bytes apart: the decode kernels need 16-byte rows. */
    r35a_paged_attention_desc int8 = d;
    int8.kv_dtype = R35A_DTYPE_INT8;
    int8.use_sinks = 1;
    int8.k_slot_stride = 136;
    int8.k_head_stride = 136 * 16;
    int8.k_page_stride = 136 * 16 * 8;
    expect_generic(ctx, &int8, "generic_paged_f16_dmax256", "decode: k_slot_stride 136 is not a multiple of 16 elements");

    r35a_paged_attention_desc page8;
    r35a_paged_attention_desc_init(&page8, R35A_DTYPE_BF16, 2, 2, 1, 4096, 32, 8, 128, 8, 1024);
    expect_generic(ctx, &page8, "generic_paged_bf16_dmax256", "decode: page_size 8 is not a multiple of 16");

    /* 80: a multiple of 16 no decode variant has (variants.def) */
    r35a_paged_attention_desc d80;
    r35a_paged_attention_desc_init(&d80, R35A_DTYPE_F16, 2, 2, 1, 4096, 32, 8, 80, 16, 512);
    expect_generic(ctx, &d80, "generic_paged_f16_dmax256", "decode: head_size 80 not built");

    /* A mixed batch that decode declines for another reason: all of it on the generic kernel. */
    r35a_paged_attention_desc mixed_page8;
    r35a_paged_attention_desc_init(&mixed_page8, R35A_DTYPE_F16, 2, 13, 12, 4096, 32, 8, 128, 8, 1024);
    mixed_page8.logit_softcap = 30.0f;
    expect_generic(ctx, &mixed_page8, "generic_paged_f16_dmax256",
                   "decode: max_query_len 12 > 8 (prefill or mixed batch), page_size 8 is not a multiple of 16");

    /* One sequence of 100 query tokens over a page size of 24: a prefill the prefill kernels decline. */
    r35a_paged_attention_desc prefill;
    r35a_paged_attention_desc_init(&prefill, R35A_DTYPE_F16, 1, 100, 100, 4096, 32, 8, 128, 24, 256);
    expect_generic(ctx, &prefill, "generic_paged_f16_dmax256",
                   "decode: one sequence of 100 query tokens (a prefill): page_size 24 not a multiple of 16 (prefill)");

    r35a_paged_attention_desc d1024;
    r35a_paged_attention_desc_init(&d1024, R35A_DTYPE_BF16, 1, 1, 1, 64, 4, 4, 1024, 16, 4);
    expect_generic(ctx, &d1024, "generic_paged_bf16_dmax1024", "decode: head_size 1024 not built");

    /* f32 is the reference's only: a GPU context refuses it, naming each entry's reason. */
    r35a_paged_attention_desc f32;
    r35a_paged_attention_desc_init(&f32, R35A_DTYPE_F32, 1, 1, 1, 64, 8, 8, 128, 16, 4);
    assert_null(plan_paged(ctx, &f32, R35A_ERR_UNSUPPORTED));
    expect_contains(r35a_last_error_detail(), "decode: dtype f32");
    expect_contains(r35a_last_error_detail(), "generic: dtype f32");

    /* Varlen with head size 96 (no encoder variant): the generic kernel. */
    r35a_varlen_attention_desc v;
    r35a_varlen_attention_desc_init(&v, R35A_DTYPE_BF16, 3, 600, 256, 16, 4, 96);
    r35a_plan *plan = NULL;
    assert_int_equal(r35a_varlen_attention_plan(ctx, &v, &plan), R35A_OK);
    r35a_plan_info pi = plan_info_of(plan);
    assert_string_equal(pi.implementation, "generic_varlen_bf16_dmax256");
    expect_contains(pi.fallback_reason, "encoder: head_size 96 not built");
    assert_int_equal(pi.grid[0], 600);
    assert_int_equal(pi.grid[1], 16);
    r35a_varlen_attention_args va = {sizeof va, q_buf, kv_buf, kv_buf, o_buf, meta, NULL, NULL};
    fake.reset();
    assert_int_equal(r35a_varlen_attention_run(ctx, plan, &va, NULL, 0, &stream_token), R35A_OK);
    assert_int_equal(fake.num_launches(), 1);
    assert_string_equal(fake.launch(0)->kernel, "generic_varlen_bf16_dmax256");
    r35a_generic_varlen_args vk;
    memcpy(&vk, fake.launch(0)->args, sizeof vk);
    assert_int_equal(vk.num_segments, 3);
    assert_int_equal(vk.head_size, 96);
    assert_ptr_equal(vk.cu_seqlens, meta);
    r35a_plan_destroy(plan);
    r35a_context_destroy(ctx);
}

/* One sequence of 100 query tokens: a prefill, the encoder's paged sibling alone (no decode launch),
 * min_query_len 0; the generic kernel when a run's pointers miss its alignment. */
static void test_gpu_prefill(void **state)
{
    (void)state;
    open_fake();
    r35a_context *ctx = create(R35A_BACKEND_GPU, R35A_OK);
    r35a_paged_attention_desc d;
    r35a_paged_attention_desc_init(&d, R35A_DTYPE_BF16, 1, 100, 100, 4096, 32, 8, 64, 16, 256);
    r35a_plan *plan = plan_paged(ctx, &d, R35A_OK);
    r35a_plan_info pi = plan_info_of(plan);
    assert_string_equal(pi.implementation, "encoder_bf16_d64_r32_kb32_nw4_w6_paged");
    assert_int_equal(pi.grid[0], 4);   /* ceil(100 x 4 packed heads / 128) row blocks */
    assert_int_equal(pi.grid[1], 8);   /* kv heads */
    assert_int_equal(pi.block[0], 128);
    assert_int_equal(pi.workspace_bytes, 0);
    fake.reset();
    r35a_paged_attention_args a = paged_args();
    assert_int_equal(r35a_paged_attention_run(ctx, plan, &a, NULL, 0, &stream_token), R35A_OK);
    assert_string_equal(fake.order(), "L");
    const fake_launch *l = fake.launch(0);
    assert_string_equal(l->kernel, "encoder_bf16_d64_r32_kb32_nw4_w6_paged");
    assert_int_equal(l->args_size, sizeof(r35a_prefill_args));
    r35a_prefill_args pa;
    memcpy(&pa, l->args, sizeof pa);
    assert_int_equal(pa.min_query_len, 0);
    assert_int_equal(pa.num_seqs, 1);
    assert_int_equal(pa.max_query_len, 100);
    assert_ptr_equal(pa.block_table, a.block_table);
    assert_ptr_equal(pa.seq_lens, a.seq_lens);
    fake.reset();
    a.v_cache = kv_buf + 4;
    assert_int_equal(r35a_paged_attention_run(ctx, plan, &a, NULL, 0, &stream_token), R35A_OK);
    assert_string_equal(fake.order(), "L");
    assert_string_equal(fake.launch(0)->kernel, "generic_paged_bf16_dmax256");
    r35a_plan_destroy(plan);
    /* A mixed batch of a head size no decode variant has (80): the sibling serves every sequence */
    r35a_paged_attention_desc d80;
    r35a_paged_attention_desc_init(&d80, R35A_DTYPE_F16, 3, 30, 20, 4096, 16, 16, 80, 48, 256);
    plan = plan_paged(ctx, &d80, R35A_OK);
    pi = plan_info_of(plan);
    assert_string_equal(pi.implementation, "encoder_f16_d80_r16_kb32_nw8_w6_paged");
    assert_int_equal(pi.grid[0], 3);   /* 3 sequences x ceil(20 / 128) */
    fake.reset();
    a = paged_args();
    assert_int_equal(r35a_paged_attention_run(ctx, plan, &a, NULL, 0, &stream_token), R35A_OK);
    memcpy(&pa, fake.launch(0)->args, sizeof pa);
    assert_int_equal(pa.min_query_len, 0);
    r35a_plan_destroy(plan);
    /* page 24: declined, the portable kernel */
    d80.page_size = 24;
    d80.block_table_stride = 4096 / 24 + 1;
    plan = plan_paged(ctx, &d80, R35A_OK);
    assert_string_equal(plan_info_of(plan).implementation, "generic_paged_f16_dmax256");
    r35a_plan_destroy(plan);
    r35a_context_destroy(ctx);
}

static void test_gpu_mixed_batch(void **state)
{
    (void)state;
    open_fake();
    r35a_context *ctx = create(R35A_BACKEND_GPU, R35A_OK);
    /* 2 sequences, 13 tokens, max_query_len 12, G=4, D=128: the decode part (M <= 8: 32 rows) takes
     * the R=32 variant, one row group, 5 splits (test_planner.c); the D = 128 encoder variant's paged
     * sibling the rest. */
    r35a_paged_attention_desc d;
    r35a_paged_attention_desc_init(&d, R35A_DTYPE_F16, 2, 13, 12, 4096, 32, 8, 128, 16, 512);
    r35a_plan *plan = plan_paged(ctx, &d, R35A_OK);
    r35a_plan_info pi = plan_info_of(plan);
    assert_string_equal(pi.implementation,
                        "decode_f16_d128_r32_kw1_dw4_w8_wmma16_pregs2_qregs+decode_merge_f16+encoder_f16_d128_r16_kb32_nw8_w5_paged");
    assert_string_equal(pi.fallback_reason, "decode: max_query_len 12 > 8: the sequences with M > 8 run on "
                                            "encoder_f16_d128_r16_kb32_nw8_w5_paged in a separate launch");
    assert_int_equal(pi.num_splits, 5);
    assert_int_equal(pi.grid[0], 5);
    assert_int_equal(pi.grid[1], 8);
    assert_int_equal(pi.grid[2], 2);
    assert_int_equal(pi.block[0], 128);
    assert_int_equal(pi.workspace_bytes, 80 * 4160 * 4);

    fake.reset();
    r35a_paged_attention_args a = paged_args();
    assert_int_equal(r35a_paged_attention_run(ctx, plan, &a, ws_buf, sizeof ws_buf, &stream_token), R35A_OK);
    /* Decode, its split merge, generic: one stream, nothing read back (the stand-in has no copy). */
    assert_string_equal(fake.order(), "LLL");
    assert_string_equal(fake.launch(1)->kernel, "decode_merge_f16");
    assert_ptr_equal(fake.launch(1)->stream, &stream_token);

    const fake_launch *l = fake.launch(0);
    assert_string_equal(l->kernel, "decode_f16_d128_r32_kw1_dw4_w8_wmma16_pregs2_qregs");
    assert_memory_equal(l->grid, pi.grid, sizeof pi.grid);
    assert_memory_equal(l->block, pi.block, sizeof pi.block);
    assert_ptr_equal(l->stream, &stream_token);
    assert_int_equal(l->args_size, sizeof(r35a_decode_args));
    r35a_decode_args ka;
    memcpy(&ka, l->args, sizeof ka);
    assert_int_equal(ka.max_query_len, 8); /* serves M <= 8, skips the rest */
    assert_int_equal(ka.num_row_groups, 1);
    assert_int_equal(ka.num_splits, 5);
    assert_int_equal(ka.num_seqs, 2);
    assert_int_equal(ka.group_size, 4);
    assert_ptr_equal(ka.workspace, ws_buf);
    assert_ptr_equal(ka.q, q_buf);
    assert_ptr_equal(ka.query_start_loc, meta + 1024);

    l = fake.launch(2);
    assert_string_equal(l->kernel, "encoder_f16_d128_r16_kb32_nw8_w5_paged");
    assert_int_equal(l->grid[0], 2);   /* 2 sequences x ceil(12 x 4 packed heads / 128) row blocks */
    assert_int_equal(l->grid[1], 8);   /* kv heads */
    assert_int_equal(l->grid[2], 1);
    assert_int_equal(l->block[0], 256);
    assert_ptr_equal(l->stream, &stream_token);
    assert_int_equal(l->args_size, sizeof(r35a_prefill_args));
    r35a_prefill_args pa;
    memcpy(&pa, l->args, sizeof pa);
    assert_int_equal(pa.min_query_len, 8); /* serves M > 8, skips the decode kernel's */
    assert_int_equal(pa.num_seqs, 2);
    assert_int_equal(pa.num_tokens, 13);
    assert_int_equal(pa.num_heads, 32);
    assert_int_equal(pa.kv_group, 4);
    assert_int_equal(pa.page_size, 16);
    assert_int_equal(pa.num_pages, 512);
    assert_int_equal(pa.max_query_len, 12);
    assert_int_equal(pa.max_seq_len, 4096);
    assert_ptr_equal(pa.q, q_buf);
    assert_ptr_equal(pa.out, o_buf);
    assert_ptr_equal(pa.query_start_loc, meta + 1024);
    assert_int_equal(pa.k_slot_stride, d.k_slot_stride);
    assert_int_equal(pa.block_table_stride, d.block_table_stride);
    r35a_generic_paged_args ga;

    /* A misaligned output: the generic kernel alone serves every sequence of this run (the prefill
     * kernel stores 16-byte rows) */
    fake.reset();
    a.out = o_buf + 2;
    assert_int_equal(r35a_paged_attention_run(ctx, plan, &a, ws_buf, sizeof ws_buf, &stream_token), R35A_OK);
    assert_string_equal(fake.order(), "L");
    assert_string_equal(fake.launch(0)->kernel, "generic_paged_f16_dmax256");
    a.out = o_buf;

    /* A misaligned K cache: the generic kernel alone serves every sequence of this run. */
    fake.reset();
    a.k_cache = kv_buf + 8;
    assert_int_equal(r35a_paged_attention_run(ctx, plan, &a, ws_buf, sizeof ws_buf, &stream_token), R35A_OK);
    assert_string_equal(fake.order(), "L");
    assert_string_equal(fake.launch(0)->kernel, "generic_paged_f16_dmax256");
    memcpy(&ga, fake.launch(0)->args, sizeof ga);
    assert_int_equal(ga.min_query_len, 0);
    assert_int_equal(fake.launch(0)->grid[0], 13);
    r35a_plan_destroy(plan);

    /* Many sequences fill the GPU: one split, no workspace and no memset; two launches. */
    r35a_paged_attention_desc busy;
    r35a_paged_attention_desc_init(&busy, R35A_DTYPE_BF16, 64, 200, 16, 4096, 8, 8, 64, 16, 64 * 256);
    plan = plan_paged(ctx, &busy, R35A_OK);
    pi = plan_info_of(plan);
    assert_string_equal(pi.implementation, "decode_bf16_d64_r16_kw4_dw1_w6_wmma16_pregs2_qlds+encoder_bf16_d64_r32_kb32_nw4_w6_paged");
    assert_int_equal(pi.num_splits, 1);
    assert_int_equal(pi.workspace_bytes, 0);
    fake.reset();
    a = paged_args();
    assert_int_equal(r35a_paged_attention_run(ctx, plan, &a, NULL, 0, NULL), R35A_OK);
    assert_string_equal(fake.order(), "LL");
    assert_string_equal(fake.launch(0)->kernel, "decode_bf16_d64_r16_kw4_dw1_w6_wmma16_pregs2_qlds");
    assert_int_equal(fake.launch(0)->grid[2], 64);
    memcpy(&ka, fake.launch(0)->args, sizeof ka);
    assert_null(ka.workspace);
    assert_int_equal(ka.max_query_len, 8);
    assert_string_equal(fake.launch(1)->kernel, "encoder_bf16_d64_r32_kb32_nw4_w6_paged");
    assert_int_equal(fake.launch(1)->grid[0], 64);   /* 64 sequences x ceil(16 / 128) */
    assert_int_equal(fake.launch(1)->grid[1], 8);
    memcpy(&pa, fake.launch(1)->args, sizeof pa);
    assert_int_equal(pa.min_query_len, 8);
    assert_null(fake.launch(1)->stream);
    r35a_plan_destroy(plan);
    r35a_context_destroy(ctx);
}

static r35a_plan *plan_varlen(r35a_context *ctx, const r35a_varlen_attention_desc *d, r35a_status expect);

/* The device error record: allocated pinned and mapped with the context, handed to the kernels as
 * its device address, read through its host address by every plan and run call (and
 * r35a_context_check_device), reported once with the field and sequence, freed with the context. */
static void test_gpu_device_error_record(void **state)
{
    (void)state;
    open_fake();
    const int before = fake.num_host_allocations(), frees = fake.num_host_frees();
    r35a_context *ctx = create(R35A_BACKEND_GPU, R35A_OK);
    assert_int_equal(fake.num_host_allocations(), before + 1);
    const fake_host_allocation *rec = fake.host_allocation(before);
    assert_int_equal(rec->bytes, R35A_DEVICE_ERROR_BYTES);
    assert_int_equal(rec->flags, 0x2u | 0x40000000u); /* hipHostMallocMapped | hipHostMallocCoherent */
    volatile uint64_t *word = rec->host;
    assert_true(*word == 0);
    assert_int_equal(r35a_context_check_device(ctx), R35A_OK);

    /* The portable kernel gets the record's device address (misaligned q: the generic launch). */
    r35a_paged_attention_desc d;
    r35a_paged_attention_desc_init(&d, R35A_DTYPE_F16, 2, 2, 1, 4096, 32, 8, 128, 16, 512);
    r35a_plan *plan = plan_paged(ctx, &d, R35A_OK);
    r35a_paged_attention_args a = paged_args();
    a.q = q_buf + 2;
    fake.reset();
    assert_int_equal(r35a_paged_attention_run(ctx, plan, &a, ws_buf, sizeof ws_buf, NULL), R35A_OK);
    assert_string_equal(fake.launch(0)->kernel, "generic_paged_f16_dmax256");
    r35a_generic_paged_args ga;
    memcpy(&ga, fake.launch(0)->args, sizeof ga);
    assert_ptr_equal(ga.error, rec->device);
    assert_int_equal(ga.num_pages, 512);
    assert_int_equal(ga.max_seq_len, 4096);
    assert_int_equal(ga.max_query_len, 1);

    /* The decode kernel too, with the bounds of its checks: the whole call's (a mixed batch's decode
     * launch serves M <= 8 of max_query_len 12). */
    r35a_paged_attention_desc mixed;
    r35a_paged_attention_desc_init(&mixed, R35A_DTYPE_F16, 2, 13, 12, 4096, 32, 8, 128, 16, 512);
    r35a_plan *mixed_plan = plan_paged(ctx, &mixed, R35A_OK);
    r35a_paged_attention_args aligned = paged_args();
    fake.reset();
    assert_int_equal(r35a_paged_attention_run(ctx, mixed_plan, &aligned, ws_buf, sizeof ws_buf, NULL), R35A_OK);
    assert_int_equal(fake.num_launches(), 3);   /* decode, its split merge, prefill */
    r35a_decode_args da;
    memcpy(&da, fake.launch(0)->args, sizeof da);
    assert_ptr_equal(da.error, rec->device);
    assert_int_equal(da.max_query_len, 8);
    assert_int_equal(da.query_len_bound, 12);
    assert_int_equal(da.num_tokens, 13);
    assert_int_equal(da.num_pages, 512);
    assert_int_equal(da.max_seq_len, 4096);
    r35a_prefill_args pa;
    memcpy(&pa, fake.launch(2)->args, sizeof pa);
    assert_ptr_equal(pa.error, rec->device);
    assert_int_equal(pa.max_query_len, 12);
    assert_int_equal(pa.num_tokens, 13);
    r35a_plan_destroy(mixed_plan);

    /* A kernel recorded a bad page index of sequence 3: the next run reports it, launches nothing
     * and clears the record; the run after that goes ahead. */
    *word = R35A_DEVICE_ERROR_WORD(R35A_DEVICE_ERROR_PAGE_INDEX, 3);
    fake.reset();
    assert_int_equal(r35a_paged_attention_run(ctx, plan, &a, ws_buf, sizeof ws_buf, NULL), R35A_ERR_INVALID_DATA);
    assert_string_equal(r35a_last_error_detail(),
                        "paged_attention_args.block_table: sequence 3 holds a page index outside 0..num_pages-1 "
                        "in a page its queries reach (found on the device by an earlier run)");
    assert_int_equal(fake.num_launches(), 0);
    assert_true(*word == 0);
    assert_int_equal(r35a_paged_attention_run(ctx, plan, &a, ws_buf, sizeof ws_buf, NULL), R35A_OK);
    assert_int_equal(fake.num_launches(), 1);
    r35a_plan_destroy(plan);

    /* A plan call reports it too (no plan made), then plans. */
    *word = R35A_DEVICE_ERROR_WORD(R35A_DEVICE_ERROR_SEQ_LEN, 0);
    plan = (r35a_plan *)&d;
    assert_int_equal(r35a_paged_attention_plan(ctx, &d, &plan), R35A_ERR_INVALID_DATA);
    assert_null(plan);
    assert_string_equal(r35a_last_error_detail(), "paged_attention_args.seq_lens: sequence 0 has a length outside "
                                                  "0..max_seq_len (found on the device by an earlier run)");
    r35a_varlen_attention_desc v;
    r35a_varlen_attention_desc_init(&v, R35A_DTYPE_BF16, 3, 600, 256, 16, 4, 96);   /* the generic kernel */
    plan = plan_varlen(ctx, &v, R35A_OK);
    r35a_varlen_attention_args va = {sizeof va, q_buf, kv_buf, kv_buf, o_buf, meta, NULL, NULL};
    fake.reset();
    assert_int_equal(r35a_varlen_attention_run(ctx, plan, &va, NULL, 0, NULL), R35A_OK);
    r35a_generic_varlen_args gv;
    memcpy(&gv, fake.launch(0)->args, sizeof gv);
    assert_ptr_equal(gv.error, rec->device);
    assert_int_equal(gv.max_seqlen, 256);
    r35a_plan_destroy(plan);
    /* and the encoder (non-causal, Hq == Hkv) */
    r35a_varlen_attention_desc_init(&v, R35A_DTYPE_BF16, 3, 600, 256, 16, 16, 80);
    plan = plan_varlen(ctx, &v, R35A_OK);
    fake.reset();
    assert_int_equal(r35a_varlen_attention_run(ctx, plan, &va, NULL, 0, NULL), R35A_OK);
    expect_contains(fake.launch(0)->kernel, "encoder_");
    r35a_encoder_args ea;
    memcpy(&ea, fake.launch(0)->args, sizeof ea);
    assert_ptr_equal(ea.error, rec->device);
    assert_int_equal(ea.num_tokens, 600);
    assert_int_equal(ea.max_seqlen, 256);

    /* r35a_context_check_device: every code's detail names its field and unit, once. */
    static const struct {
        uint32_t code;
        const char *start;
    } codes[] = {
#define R35A_DEVICE_ERROR_EXPECT(name, value, field, unit, what) {value, field ": " unit " 4000000000 " what},
        R35A_DEVICE_ERROR_CODES(R35A_DEVICE_ERROR_EXPECT)
#undef R35A_DEVICE_ERROR_EXPECT
    };
    for (size_t i = 0; i < sizeof codes / sizeof *codes; ++i) {
        *word = R35A_DEVICE_ERROR_WORD(codes[i].code, 4000000000u);
        assert_int_equal(r35a_context_check_device(ctx), R35A_ERR_INVALID_DATA);
        expect_contains(r35a_last_error_detail(), codes[i].start);
        expect_contains(r35a_last_error_detail(), "(found on the device by an earlier run)");
        assert_int_equal(r35a_context_check_device(ctx), R35A_OK);
    }
    *word = R35A_DEVICE_ERROR_WORD(R35A_DEVICE_ERROR_SEGMENT_LEN, 7);
    assert_int_equal(r35a_varlen_attention_run(ctx, plan, &va, NULL, 0, NULL), R35A_ERR_INVALID_DATA);
    assert_string_equal(r35a_last_error_detail(), "varlen_attention_args.cu_seqlens: segment 7 is longer than "
                                                  "max_seqlen (found on the device by an earlier run)");
    *word = R35A_DEVICE_ERROR_WORD(99, 1);
    assert_int_equal(r35a_context_check_device(ctx), R35A_ERR_INVALID_DATA);
    expect_contains(r35a_last_error_detail(), "device error record: unknown code 99 for index 1");
    r35a_plan_destroy(plan);

    r35a_context_destroy(ctx);
    assert_int_equal(fake.num_host_frees(), frees + 1);

    /* Without pinned memory there is no GPU context (its kernels could not report bad data). */
    setenv("FAKE_HIP_HOST_MALLOC_FAIL", "1", 1);
    create(R35A_BACKEND_GPU, R35A_ERR_BACKEND_UNAVAILABLE);
    expect_contains(r35a_last_error_detail(), "hipHostMalloc of the 8-byte device error record failed");
    unsetenv("FAKE_HIP_HOST_MALLOC_FAIL");
}

static r35a_plan *plan_varlen(r35a_context *ctx, const r35a_varlen_attention_desc *d, r35a_status expect)
{
    r35a_plan *plan = NULL;
    r35a_status st = r35a_varlen_attention_plan(ctx, d, &plan);
    if (st != expect)
        print_error("plan: %s (%s)\n", r35a_status_string(st), r35a_last_error_detail());
    assert_int_equal(st, expect);
    return plan;
}

/* Plans d, expects the generic varlen kernel with `reason`, runs it: one launch over all tokens. */
static void expect_varlen_generic(r35a_context *ctx, const r35a_varlen_attention_desc *d, const char *kernel,
                                  const char *reason)
{
    r35a_plan *plan = plan_varlen(ctx, d, R35A_OK);
    r35a_plan_info pi = plan_info_of(plan);
    assert_string_equal(pi.implementation, kernel);
    expect_contains(pi.fallback_reason, reason);
    static float sinks[64];
    r35a_varlen_attention_args va = {sizeof va, q_buf, kv_buf, kv_buf, o_buf, meta, d->use_sinks ? sinks : NULL, NULL};
    fake.reset();
    assert_int_equal(r35a_varlen_attention_run(ctx, plan, &va, NULL, 0, &stream_token), R35A_OK);
    assert_int_equal(fake.num_launches(), 1);
    assert_string_equal(fake.launch(0)->kernel, kernel);
    assert_int_equal(fake.launch(0)->grid[0], (uint32_t)d->num_tokens);
    assert_int_equal(fake.launch(0)->grid[1], (uint32_t)d->num_q_heads);
    r35a_generic_varlen_args vk;
    memcpy(&vk, fake.launch(0)->args, sizeof vk);
    assert_int_equal(vk.causal, d->causal);
    assert_ptr_equal(vk.sinks, d->use_sinks ? sinks : NULL);
    assert_int_equal(vk.num_kv_heads, d->num_kv_heads);
    r35a_plan_destroy(plan);
}

static void test_gpu_encoder(void **state)
{
    (void)state;
    open_fake();
    r35a_context *ctx = create(R35A_BACKEND_GPU, R35A_OK);
    /* bf16 D=80, 16 heads, 3 segments up to 256 tokens: 128 rows per workgroup -> 2 row blocks per
     * segment, grid {6, 16, 1}, 8 waves. One launch whatever the segment lengths. */
    r35a_varlen_attention_desc v;
    r35a_varlen_attention_desc_init(&v, R35A_DTYPE_BF16, 3, 600, 256, 16, 16, 80);
    r35a_plan *plan = plan_varlen(ctx, &v, R35A_OK);
    r35a_plan_info pi = plan_info_of(plan);
    assert_string_equal(pi.implementation, "encoder_bf16_d80_r16_kb32_nw8_w6");
    assert_string_equal(pi.fallback_reason, "");
    assert_int_equal(pi.grid[0], 6);
    assert_int_equal(pi.grid[1], 16);
    assert_int_equal(pi.grid[2], 1);
    assert_int_equal(pi.block[0], 256);
    assert_int_equal(pi.workspace_bytes, 0);
    assert_int_equal(pi.num_splits, 1);

    r35a_varlen_attention_args va = {sizeof va, q_buf, kv_buf, kv_buf + 4096, o_buf, meta, NULL, NULL};
    fake.reset();
    assert_int_equal(r35a_varlen_attention_run(ctx, plan, &va, NULL, 0, &stream_token), R35A_OK);
    assert_string_equal(fake.order(), "L");
    const fake_launch *l = fake.launch(0);
    assert_string_equal(l->kernel, "encoder_bf16_d80_r16_kb32_nw8_w6");
    assert_memory_equal(l->grid, pi.grid, sizeof pi.grid);
    assert_memory_equal(l->block, pi.block, sizeof pi.block);
    assert_ptr_equal(l->stream, &stream_token);
    assert_int_equal(l->args_size, sizeof(r35a_encoder_args));
    r35a_encoder_args ka;
    memcpy(&ka, l->args, sizeof ka);
    assert_ptr_equal(ka.q, q_buf);
    assert_ptr_equal(ka.k, kv_buf);
    assert_ptr_equal(ka.v, kv_buf + 4096);
    assert_ptr_equal(ka.out, o_buf);
    assert_ptr_equal(ka.cu_seqlens, meta);
    assert_int_equal(ka.num_segments, 3);
    assert_int_equal(ka.num_heads, 16);
    assert_int_equal(ka.max_seqlen, 256);
    assert_int_equal(ka.q_token_stride, 16 * 80);
    assert_int_equal(ka.k_head_stride, 80);
    assert_true(ka.scale_log2 == r35a_scale_log2(v.softmax_scale));

    /* An output pointer off 16-byte alignment: the generic kernel serves this run. */
    fake.reset();
    va.out = o_buf + 2;
    assert_int_equal(r35a_varlen_attention_run(ctx, plan, &va, NULL, 0, &stream_token), R35A_OK);
    assert_string_equal(fake.order(), "L");
    l = fake.launch(0);
    assert_string_equal(l->kernel, "generic_varlen_bf16_dmax256");
    assert_int_equal(l->grid[0], 600);
    assert_int_equal(l->grid[1], 16);
    assert_int_equal(l->block[0], R35A_GENERIC_THREADS);
    assert_ptr_equal(l->stream, &stream_token);
    r35a_generic_varlen_args vk;
    memcpy(&vk, l->args, sizeof vk);
    assert_ptr_equal(vk.out, o_buf + 2);
    assert_int_equal(vk.num_segments, 3);
    assert_int_equal(vk.causal, 0);
    r35a_plan_destroy(plan);

    /* A fused qkv buffer [tokens][3][12][64] f16 read in place. */
    r35a_varlen_attention_desc fused;
    r35a_varlen_attention_desc_init(&fused, R35A_DTYPE_F16, 2, 500, 300, 12, 12, 64);
    fused.q_token_stride = fused.k_token_stride = fused.v_token_stride = 3 * 12 * 64;
    plan = plan_varlen(ctx, &fused, R35A_OK);
    pi = plan_info_of(plan);
    assert_string_equal(pi.implementation, "encoder_f16_d64_r32_kb32_nw4_w6");
    assert_int_equal(pi.grid[0], 6);
    assert_int_equal(pi.block[0], 128);
    va = (r35a_varlen_attention_args){sizeof va, q_buf, q_buf + 12 * 64 * 2, q_buf + 2 * 12 * 64 * 2, o_buf, meta, NULL, NULL};
    fake.reset();
    assert_int_equal(r35a_varlen_attention_run(ctx, plan, &va, NULL, 0, NULL), R35A_OK);
    assert_int_equal(fake.num_launches(), 1);
    memcpy(&ka, fake.launch(0)->args, sizeof ka);
    assert_string_equal(fake.launch(0)->kernel, "encoder_f16_d64_r32_kb32_nw4_w6");
    assert_ptr_equal(ka.k, q_buf + 12 * 64 * 2);
    assert_int_equal(ka.k_token_stride, 3 * 12 * 64);
    assert_null(fake.launch(0)->stream);
    r35a_plan_destroy(plan);

    /* Every segment empty (max_seqlen 0): planned on the encoder (the small-problem tiling, as for
     * any max_seqlen up to its maxlen), nothing launched. */
    r35a_varlen_attention_desc empty;
    r35a_varlen_attention_desc_init(&empty, R35A_DTYPE_F16, 4, 0, 0, 16, 16, 64);
    plan = plan_varlen(ctx, &empty, R35A_OK);
    pi = plan_info_of(plan);
    assert_string_equal(pi.implementation, "encoder_f16_d64_r16_kb16_nw4_w6_l64");
    assert_int_equal(pi.grid[0], 0);
    fake.reset();
    va = (r35a_varlen_attention_args){sizeof va, q_buf, kv_buf, kv_buf, o_buf, meta, NULL, NULL};
    assert_int_equal(r35a_varlen_attention_run(ctx, plan, &va, NULL, 0, NULL), R35A_OK);
    assert_int_equal(fake.num_launches(), 0);
    r35a_plan_destroy(plan);

    /* Causal GQA runs on the encoder too (run-time arguments), in one launch. */
    r35a_varlen_attention_desc causal = v;
    causal.causal = 1;
    causal.num_kv_heads = 4;
    plan = plan_varlen(ctx, &causal, R35A_OK);
    assert_string_equal(plan_info_of(plan).implementation, "encoder_bf16_d80_r16_kb32_nw8_w6");
    fake.reset();
    va = (r35a_varlen_attention_args){sizeof va, q_buf, kv_buf, kv_buf + 4096, o_buf, meta, NULL, NULL};
    assert_int_equal(r35a_varlen_attention_run(ctx, plan, &va, NULL, 0, NULL), R35A_OK);
    assert_int_equal(fake.num_launches(), 1);
    memcpy(&ka, fake.launch(0)->args, sizeof ka);
    assert_int_equal(ka.causal, 1);
    assert_int_equal(ka.kv_group, 4);
    r35a_plan_destroy(plan);

    /* What the encoder declines goes to the generic kernel, with the reason. */
    r35a_varlen_attention_desc d96;
    r35a_varlen_attention_desc_init(&d96, R35A_DTYPE_F16, 3, 600, 256, 8, 8, 96);
    expect_varlen_generic(ctx, &d96, "generic_varlen_f16_dmax256",
                          "encoder: head_size 96 not built (gfx1151 f16: 32, 48, 64, 72, 80, 128)");
    r35a_varlen_attention_desc d512;
    r35a_varlen_attention_desc_init(&d512, R35A_DTYPE_BF16, 1, 10, 10, 2, 2, 512);
    expect_varlen_generic(ctx, &d512, "generic_varlen_bf16_dmax1024", "encoder: head_size 512 not built");
    r35a_varlen_attention_desc stride = v;
    stride.q_head_stride = 84;
    stride.q_token_stride = 16 * 84;
    expect_varlen_generic(ctx, &stride, "generic_varlen_bf16_dmax256",
                          "encoder: q_head_stride 84 is not a multiple of 8 elements");
    r35a_varlen_attention_desc far = v;
    far.k_token_stride = (int64_t)1 << 24;
    expect_varlen_generic(ctx, &far, "generic_varlen_bf16_dmax256", "encoder: k_token_stride 16777216 >= 2^24 elements");

    /* f32 is the reference's only: refused, each GPU entry's reason named. */
    r35a_varlen_attention_desc f32;
    r35a_varlen_attention_desc_init(&f32, R35A_DTYPE_F32, 1, 10, 10, 2, 2, 64);
    assert_null(plan_varlen(ctx, &f32, R35A_ERR_UNSUPPORTED));
    expect_contains(r35a_last_error_detail(), "encoder: dtype f32");
    expect_contains(r35a_last_error_detail(), "generic: dtype f32");
    r35a_context_destroy(ctx);
}

static void test_force_variant(void **state)
{
    (void)state;
    open_fake();
    r35a_context *ctx = create(R35A_BACKEND_GPU, R35A_OK);
    r35a_paged_attention_desc d;
    r35a_paged_attention_desc_init(&d, R35A_DTYPE_F16, 1, 1, 1, 4096, 32, 8, 128, 16, 256);
    r35a_plan *plan = plan_paged(ctx, &d, R35A_OK);
    char expected[192];
    snprintf(expected, sizeof expected, "%s+decode_merge_f16", getenv("R35A_FORCE"));   /* with splits */
    assert_string_equal(plan_info_of(plan).implementation, expected);
    r35a_plan_destroy(plan);
    /* A shape the forced variant cannot serve is refused, not sent elsewhere. */
    r35a_paged_attention_desc d64 = d;
    d64.head_size = 64;
    r35a_paged_attention_desc_init(&d64, R35A_DTYPE_F16, 1, 1, 1, 4096, 32, 8, 64, 16, 256);
    assert_null(plan_paged(ctx, &d64, R35A_ERR_UNSUPPORTED));
    expect_contains(r35a_last_error_detail(), "R35A_FORCE=");
    /* A mixed batch: the forced variant serves the sequences with M <= 8. */
    r35a_paged_attention_desc mixed;
    r35a_paged_attention_desc_init(&mixed, R35A_DTYPE_F16, 2, 13, 12, 4096, 32, 8, 128, 16, 512);
    plan = plan_paged(ctx, &mixed, R35A_OK);
    snprintf(expected, sizeof expected, "%s+decode_merge_f16+encoder_f16_d128_r16_kb32_nw8_w5_paged", getenv("R35A_FORCE"));
    assert_string_equal(plan_info_of(plan).implementation, expected);
    r35a_plan_destroy(plan);
    /* A single-sequence prefill has no decode rows: refused, not sent to the prefill kernel. */
    r35a_paged_attention_desc prefill;
    r35a_paged_attention_desc_init(&prefill, R35A_DTYPE_F16, 1, 100, 100, 4096, 32, 8, 128, 16, 512);
    assert_null(plan_paged(ctx, &prefill, R35A_ERR_UNSUPPORTED));
    expect_contains(r35a_last_error_detail(), "R35A_FORCE names a decode variant");
    r35a_context_destroy(ctx);
}

static void test_force_generic(void **state)
{
    (void)state;
    open_fake();
    r35a_context *ctx = create(R35A_BACKEND_GPU, R35A_OK);
    r35a_paged_attention_desc d;
    r35a_paged_attention_desc_init(&d, R35A_DTYPE_F16, 1, 1, 1, 4096, 32, 8, 128, 16, 256);
    r35a_plan *plan = plan_paged(ctx, &d, R35A_OK);
    assert_string_equal(plan_info_of(plan).implementation, "generic_paged_f16_dmax256");
    r35a_plan_destroy(plan);
    /* A mixed batch: the generic kernel alone, over every sequence. */
    r35a_paged_attention_desc mixed;
    r35a_paged_attention_desc_init(&mixed, R35A_DTYPE_F16, 2, 13, 12, 4096, 32, 8, 128, 16, 512);
    plan = plan_paged(ctx, &mixed, R35A_OK);
    assert_string_equal(plan_info_of(plan).implementation, "generic_paged_f16_dmax256");
    fake.reset();
    r35a_paged_attention_args a = paged_args();
    assert_int_equal(r35a_paged_attention_run(ctx, plan, &a, NULL, 0, NULL), R35A_OK);
    assert_string_equal(fake.order(), "L");
    r35a_generic_paged_args ga;
    memcpy(&ga, fake.launch(0)->args, sizeof ga);
    assert_int_equal(ga.min_query_len, 0);
    r35a_plan_destroy(plan);
    /* An encoder shape: the generic varlen kernel. */
    r35a_varlen_attention_desc v;
    r35a_varlen_attention_desc_init(&v, R35A_DTYPE_BF16, 3, 600, 256, 16, 16, 80);
    plan = NULL;
    assert_int_equal(r35a_varlen_attention_plan(ctx, &v, &plan), R35A_OK);
    assert_string_equal(plan_info_of(plan).implementation, "generic_varlen_bf16_dmax256");
    r35a_plan_destroy(plan);
    r35a_context_destroy(ctx);
}

static void test_force_encoder(void **state)
{
    (void)state;
    open_fake();
    r35a_context *ctx = create(R35A_BACKEND_GPU, R35A_OK);
    r35a_varlen_attention_desc v;
    r35a_varlen_attention_desc_init(&v, R35A_DTYPE_F16, 2, 300, 200, 8, 8, 64);
    r35a_plan *plan = plan_varlen(ctx, &v, R35A_OK);
    assert_string_equal(plan_info_of(plan).implementation, getenv("R35A_FORCE"));
    r35a_plan_destroy(plan);
    /* Another head size, or a call the encoder declines, is refused rather than sent elsewhere. */
    r35a_varlen_attention_desc d80;
    r35a_varlen_attention_desc_init(&d80, R35A_DTYPE_F16, 2, 300, 200, 8, 8, 80);
    assert_null(plan_varlen(ctx, &d80, R35A_ERR_UNSUPPORTED));
    expect_contains(r35a_last_error_detail(), "R35A_FORCE=");
    expect_contains(r35a_last_error_detail(), "head_size 80 not built");
    r35a_varlen_attention_desc d96;
    r35a_varlen_attention_desc_init(&d96, R35A_DTYPE_F16, 2, 300, 200, 8, 8, 96);
    assert_null(plan_varlen(ctx, &d96, R35A_ERR_UNSUPPORTED));
    expect_contains(r35a_last_error_detail(), "encoder: head_size 96 not built");
    /* No paged entry answers to an encoder variant's name. */
    r35a_paged_attention_desc d;
    r35a_paged_attention_desc_init(&d, R35A_DTYPE_F16, 1, 1, 1, 4096, 32, 8, 128, 16, 256);
    assert_null(plan_paged(ctx, &d, R35A_ERR_UNSUPPORTED));
    r35a_context_destroy(ctx);
}

int main(int argc, char **argv)
{
    mode = argc > 1 ? argv[1] : "absent";
    const struct {
        const char *mode;
        struct CMUnitTest tests[8];
        size_t count;
    } modes[] = {
        {"absent", {cmocka_unit_test(test_absent)}, 1},
        {"wrong_arch", {cmocka_unit_test(test_wrong_arch)}, 1},
        {"no_device", {cmocka_unit_test(test_no_device)}, 1},
        {"gpu",
         {cmocka_unit_test(test_gpu_context), cmocka_unit_test(test_gpu_decode_plan_and_run),
          cmocka_unit_test(test_gpu_decode_features), cmocka_unit_test(test_gpu_fallbacks),
          cmocka_unit_test(test_gpu_mixed_batch), cmocka_unit_test(test_gpu_prefill),
          cmocka_unit_test(test_gpu_encoder), cmocka_unit_test(test_gpu_device_error_record)},
         8},
        {"force_variant", {cmocka_unit_test(test_force_variant)}, 1},
        {"force_generic", {cmocka_unit_test(test_force_generic)}, 1},
        {"force_encoder", {cmocka_unit_test(test_force_encoder)}, 1},
    };
    for (size_t i = 0; i < sizeof modes / sizeof *modes; ++i)
        if (strcmp(mode, modes[i].mode) == 0)
            return _cmocka_run_group_tests(mode, modes[i].tests, modes[i].count, NULL, NULL);
    fprintf(stderr, "test_hip_backend: unknown mode %s\n", mode);
    return 2;
}
