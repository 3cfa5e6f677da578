/*
 * test_api.c - the public API surface apart from bad inputs: versions, status names, descriptor
 * and option initializers (today's and, through their symbol version R35A_0, 0.1.0's), context and
 * plan info, the thread-local error detail, and contexts created from several threads at once.
 */
#define _GNU_SOURCE /* dlvsym */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static void test_version(void **state)
{
    (void)state;
    assert_int_equal(r35a_version_number(), R35A_VERSION_NUMBER);
    assert_int_equal(R35A_VERSION_NUMBER,
                     R35A_VERSION_MAJOR * 10000 + R35A_VERSION_MINOR * 100 + R35A_VERSION_PATCH);
    char expect[32];
    snprintf(expect, sizeof expect, "%d.%d.%d", R35A_VERSION_MAJOR, R35A_VERSION_MINOR,
             R35A_VERSION_PATCH);
    assert_non_null(r35a_version_string());
    assert_string_equal(r35a_version_string(), expect);
}

static void test_status_strings(void **state)
{
    (void)state;
    static const char *const names[] = {
        "R35A_OK",
        "R35A_ERR_NULL_POINTER",
        "R35A_ERR_INVALID_ARGUMENT",
        "R35A_ERR_STRUCT_SIZE",
        "R35A_ERR_UNKNOWN_DTYPE",
        "R35A_ERR_SIZE_OVERFLOW",
        "R35A_ERR_UNSUPPORTED",
        "R35A_ERR_BACKEND_UNAVAILABLE",
        "R35A_ERR_WORKSPACE_TOO_SMALL",
        "R35A_ERR_OUT_OF_MEMORY",
        "R35A_ERR_DEVICE",
        "R35A_ERR_INVALID_DATA",
        "R35A_ERR_PLAN_MISMATCH",
        "R35A_ERR_INTERNAL",
    };
    /* the pinned values */
    assert_int_equal(R35A_ERR_INVALID_DATA, 11);
    assert_int_equal(R35A_ERR_INTERNAL, 13);
    for (int s = 0; s < (int)(sizeof names / sizeof names[0]); ++s) {
        assert_string_equal(r35a_status_string((r35a_status)s), names[s]);
    }
    assert_string_equal(r35a_status_string((r35a_status)14), "R35A_ERR_UNKNOWN_STATUS");
    assert_string_equal(r35a_status_string((r35a_status)1000), "R35A_ERR_UNKNOWN_STATUS");
    assert_string_equal(r35a_status_string((r35a_status)-1), "R35A_ERR_UNKNOWN_STATUS");
}

static void test_context_options_and_info(void **state)
{
    (void)state;
    r35a_context_options opt;
    memset(&opt, 0xAB, sizeof opt);
    r35a_context_options_init(&opt);
    assert_int_equal(opt.struct_size, sizeof opt);
    assert_int_equal(opt.backend, R35A_BACKEND_AUTO);
    assert_int_equal(opt.device_index, 0);

    /* NULL options: the defaults (AUTO); without a served GPU that is the reference */
    r35a_context *ctx = NULL;
    assert_int_equal(r35a_context_create(NULL, &ctx), R35A_OK);
    assert_non_null(ctx);
    assert_string_equal(r35a_last_error_detail(), "");
    r35a_context_info info;
    memset(&info, 0xAB, sizeof info);
    info.struct_size = sizeof info;
    assert_int_equal(r35a_context_get_info(ctx, &info), R35A_OK);
    assert_true(info.backend == R35A_BACKEND_GPU || info.backend == R35A_BACKEND_REFERENCE);
    assert_non_null(memchr(info.backend_name, 0, sizeof info.backend_name));
    assert_non_null(memchr(info.arch, 0, sizeof info.arch));
    assert_non_null(memchr(info.reason, 0, sizeof info.reason));
    assert_true(info.backend_name[0] != '\0');
    printf("AUTO context: backend %s, arch \"%s\", device %d, reason \"%s\"\n", info.backend_name,
           info.arch, (int)info.device_index, info.reason);
    if (info.backend == R35A_BACKEND_REFERENCE) {
        /* AUTO fell back: the reason says why */
        assert_true(info.reason[0] != '\0');
    }
    r35a_context_destroy(ctx);

    opt.backend = R35A_BACKEND_REFERENCE;
    assert_int_equal(r35a_context_create(&opt, &ctx), R35A_OK);
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    assert_int_equal(r35a_context_get_info(ctx, &info), R35A_OK);
    assert_int_equal(info.backend, R35A_BACKEND_REFERENCE);
    assert_int_equal(info.device_index, -1);
    assert_string_equal(info.backend_name, "reference");
    assert_true(info.arch[0] != '\0');
    r35a_context_destroy(ctx);
    r35a_context_destroy(NULL);
    r35a_plan_destroy(NULL);
}

static void test_paged_desc_init(void **state)
{
    (void)state;
    r35a_paged_attention_desc d;
    memset(&d, 0xAB, sizeof d);
    r35a_paged_attention_desc_init(&d, R35A_DTYPE_BF16, 5, 9, 4, 1000, 32, 8, 128, 528, 77);
    assert_int_equal(d.struct_size, sizeof d);
    assert_int_equal(d.dtype, R35A_DTYPE_BF16);
    assert_int_equal(d.num_seqs, 5);
    assert_int_equal(d.num_tokens, 9);
    assert_int_equal(d.max_query_len, 4);
    assert_int_equal(d.max_seq_len, 1000);
    assert_int_equal(d.num_q_heads, 32);
    assert_int_equal(d.num_kv_heads, 8);
    assert_int_equal(d.head_size, 128);
    assert_int_equal(d.page_size, 528);
    assert_int_equal(d.num_pages, 77);
    assert_int_equal(d.block_table_stride, 2); /* ceil(1000 / 528) */
    assert_int_equal(d.window, 0);
    assert_true(fabs((double)d.softmax_scale * sqrt(128.0) - 1.0) <= 0x1p-23);
    assert_true(d.logit_softcap == 0.0f);
    assert_int_equal(d.use_alibi, 0);
    assert_int_equal(d.q_token_stride, 32 * 128);
    assert_int_equal(d.q_head_stride, 128);
    assert_int_equal(d.o_token_stride, 32 * 128);
    assert_int_equal(d.o_head_stride, 128);
    assert_int_equal(d.k_page_stride, 8 * 528 * 128);
    assert_int_equal(d.k_head_stride, 528 * 128);
    assert_int_equal(d.k_slot_stride, 128);
    assert_int_equal(d.v_page_stride, 8 * 528 * 128);
    assert_int_equal(d.v_head_stride, 528 * 128);
    assert_int_equal(d.v_slot_stride, 128);
    assert_int_equal(d.use_sinks, 0);
    assert_int_equal(d.kv_dtype, 0);
    assert_int_equal(d.kv_scale_per_head, R35A_KV_SCALE_PER_TENSOR);
    /* per-token-head scale tensors [num_pages][page_size][num_kv_heads], contiguous */
    assert_int_equal(d.k_scale_page_stride, 528 * 8);
    assert_int_equal(d.k_scale_slot_stride, 8);
    assert_int_equal(d.k_scale_head_stride, 1);
    assert_int_equal(d.v_scale_page_stride, 528 * 8);
    assert_int_equal(d.v_scale_slot_stride, 8);
    assert_int_equal(d.v_scale_head_stride, 1);

    r35a_paged_attention_desc_init(&d, R35A_DTYPE_F16, 1, 1, 1, 1056, 4, 4, 72, 1056, 1);
    assert_int_equal(d.block_table_stride, 1);
    /* 1/sqrt(head_size) to within an fp32 ulp (1.0f / sqrtf(72.0f) rounds twice) */
    assert_true(fabs((double)d.softmax_scale * sqrt(72.0) - 1.0) <= 0x1p-23);
    r35a_paged_attention_desc_init(&d, R35A_DTYPE_F16, 1, 0, 0, 0, 4, 4, 64, 16, 1);
    assert_int_equal(d.block_table_stride, 0);

    /* what desc_init produces plans on the reference */
    r35a_context_options opt;
    r35a_context_options_init(&opt);
    opt.backend = R35A_BACKEND_REFERENCE;
    r35a_context *ctx = NULL;
    assert_int_equal(r35a_context_create(&opt, &ctx), R35A_OK);
    r35a_plan *plan = NULL;
    r35a_paged_attention_desc_init(&d, R35A_DTYPE_F16, 3, 6, 4, 4096, 16, 2, 256, 544, 40);
    assert_int_equal(r35a_paged_attention_plan(ctx, &d, &plan), R35A_OK);
    assert_non_null(plan);
    r35a_plan_info info;
    memset(&info, 0xAB, sizeof info);
    info.struct_size = sizeof info;
    assert_int_equal(r35a_plan_get_info(plan, &info), R35A_OK);
    assert_non_null(memchr(info.implementation, 0, sizeof info.implementation));
    assert_non_null(memchr(info.fallback_reason, 0, sizeof info.fallback_reason));
    assert_string_equal(info.implementation, "reference");
    assert_int_equal(info.workspace_bytes, 0);
    for (int k = 0; k < 3; ++k) {
        assert_int_equal(info.grid[k], 0);
        assert_int_equal(info.block[k], 0);
    }
    printf("reference plan: implementation \"%s\", fallback \"%s\", num_splits %d\n",
           info.implementation, info.fallback_reason, (int)info.num_splits);
    r35a_plan_destroy(plan);
    r35a_context_destroy(ctx);
}

/* A binary built against 0.1.0's header calls r35a_paged_attention_desc_init@R35A_0 with 0.1.0's
 * smaller struct: that version must fill exactly 0.1.0's prefix, set struct_size to it, and the
 * result must plan. (Skipped where the library has no symbol versions: non-ELF, static links.) */
typedef void (*paged_desc_init_fn)(r35a_paged_attention_desc *, r35a_dtype, int32_t, int32_t, int32_t, int32_t,
                                   int32_t, int32_t, int32_t, int32_t, int32_t);
typedef void (*varlen_desc_init_fn)(r35a_varlen_attention_desc *, r35a_dtype, int32_t, int32_t, int32_t, int32_t,
                                    int32_t, int32_t);

/* An earlier release's r35a_*_desc_init, as a binary built against it still calls them: they fill
 * that release's struct only (old_paged / old_varlen bytes), set that size, agree with today's
 * there, and what they produce plans. */
static void check_old_desc_inits(const char *version, size_t old_paged, size_t old_varlen)
{
    void *paged_sym = dlvsym(RTLD_DEFAULT, "r35a_paged_attention_desc_init", version);
    void *varlen_sym = dlvsym(RTLD_DEFAULT, "r35a_varlen_attention_desc_init", version);
    assert_non_null(paged_sym);
    assert_non_null(varlen_sym);
    paged_desc_init_fn paged_init;
    varlen_desc_init_fn varlen_init;
    memcpy(&paged_init, &paged_sym, sizeof paged_init);
    memcpy(&varlen_init, &varlen_sym, sizeof varlen_init);

    r35a_paged_attention_desc d, today;
    memset(&d, 0xAB, sizeof d);
    paged_init(&d, R35A_DTYPE_F16, 3, 6, 4, 4096, 16, 2, 256, 544, 40);
    assert_int_equal(d.struct_size, old_paged);
    const unsigned char *tail = (const unsigned char *)&d + old_paged;
    for (size_t i = 0; i < sizeof d - old_paged; ++i) {
        assert_int_equal(tail[i], 0xAB); /* nothing past the old struct written */
    }
    r35a_paged_attention_desc_init(&today, R35A_DTYPE_F16, 3, 6, 4, 4096, 16, 2, 256, 544, 40);
    assert_memory_equal((const char *)&d + sizeof d.struct_size, (const char *)&today + sizeof today.struct_size,
                        old_paged - sizeof d.struct_size);

    r35a_varlen_attention_desc v, vtoday;
    memset(&v, 0xCD, sizeof v);
    varlen_init(&v, R35A_DTYPE_BF16, 7, 1000, 300, 16, 4, 80);
    assert_int_equal(v.struct_size, old_varlen);
    tail = (const unsigned char *)&v + old_varlen;
    for (size_t i = 0; i < sizeof v - old_varlen; ++i) {
        assert_int_equal(tail[i], 0xCD);
    }
    r35a_varlen_attention_desc_init(&vtoday, R35A_DTYPE_BF16, 7, 1000, 300, 16, 4, 80);
    assert_memory_equal((const char *)&v + sizeof v.struct_size, (const char *)&vtoday + sizeof vtoday.struct_size,
                        old_varlen - sizeof v.struct_size);

    /* what they produce plans (the garbage past the old size is not read) */
    r35a_context_options opt;
    r35a_context_options_init(&opt);
    opt.backend = R35A_BACKEND_REFERENCE;
    r35a_context *ctx = NULL;
    assert_int_equal(r35a_context_create(&opt, &ctx), R35A_OK);
    r35a_plan *plan = NULL;
    assert_int_equal(r35a_paged_attention_plan(ctx, &d, &plan), R35A_OK);
    r35a_plan_destroy(plan);
    assert_int_equal(r35a_varlen_attention_plan(ctx, &v, &plan), R35A_OK);
    r35a_plan_destroy(plan);
    r35a_context_destroy(ctx);
}

static void test_desc_init_old_symbols(void **state)
{
    (void)state;
    if (!dlvsym(RTLD_DEFAULT, "r35a_paged_attention_desc_init", "R35A_0")) {
        printf("test_api: no r35a_*_desc_init@R35A_0 in this process (no symbol versions); skipped\n");
        skip();
    }
    /* the default version is today's */
    assert_ptr_equal(dlsym(RTLD_DEFAULT, "r35a_paged_attention_desc_init"),
                     dlvsym(RTLD_DEFAULT, "r35a_paged_attention_desc_init", "R35A_0.4"));
    assert_ptr_equal(dlsym(RTLD_DEFAULT, "r35a_varlen_attention_desc_init"),
                     dlvsym(RTLD_DEFAULT, "r35a_varlen_attention_desc_init", "R35A_0.3"));
    /* 0.1.0's: up to the sink fields; 0.2.0's: up to the LSE fields (0.2.0's sizeof, tail padding
     * included: the 0.3 fields open with an int64) */
    check_old_desc_inits("R35A_0", offsetof(r35a_paged_attention_desc, use_sinks),
                         offsetof(r35a_varlen_attention_desc, use_sinks));
    check_old_desc_inits("R35A_0.2", offsetof(r35a_paged_attention_desc, lse_token_stride),
                         offsetof(r35a_varlen_attention_desc, lse_token_stride));
    /* 0.3.0's paged init: up to the per-token-head scale strides (0.3.0's sizeof: they open with an
     * int64); the varlen descriptor has not grown since, so R35A_0.3 is today's */
    check_old_desc_inits("R35A_0.3", offsetof(r35a_paged_attention_desc, k_scale_page_stride),
                         sizeof(r35a_varlen_attention_desc));
}

static void test_varlen_desc_init(void **state)
{
    (void)state;
    r35a_varlen_attention_desc d;
    memset(&d, 0xAB, sizeof d);
    r35a_varlen_attention_desc_init(&d, R35A_DTYPE_F16, 7, 1000, 300, 16, 4, 80);
    assert_int_equal(d.struct_size, sizeof d);
    assert_int_equal(d.dtype, R35A_DTYPE_F16);
    assert_int_equal(d.num_segments, 7);
    assert_int_equal(d.num_tokens, 1000);
    assert_int_equal(d.max_seqlen, 300);
    assert_int_equal(d.num_q_heads, 16);
    assert_int_equal(d.num_kv_heads, 4);
    assert_int_equal(d.head_size, 80);
    assert_int_equal(d.causal, 0);
    assert_int_equal(d.use_sinks, 0);
    assert_int_equal(d.use_lse, 0);
    assert_int_equal(d.lse_token_stride, 16);
    assert_int_equal(d.lse_head_stride, 1);
    assert_true(fabs((double)d.softmax_scale * sqrt(80.0) - 1.0) <= 0x1p-23);
    assert_true(d.logit_softcap == 0.0f);
    assert_int_equal(d.q_token_stride, 16 * 80);
    assert_int_equal(d.q_head_stride, 80);
    assert_int_equal(d.k_token_stride, 4 * 80);
    assert_int_equal(d.k_head_stride, 80);
    assert_int_equal(d.v_token_stride, 4 * 80);
    assert_int_equal(d.v_head_stride, 80);
    assert_int_equal(d.o_token_stride, 16 * 80);
    assert_int_equal(d.o_head_stride, 80);

    r35a_context_options opt;
    r35a_context_options_init(&opt);
    opt.backend = R35A_BACKEND_REFERENCE;
    r35a_context *ctx = NULL;
    assert_int_equal(r35a_context_create(&opt, &ctx), R35A_OK);
    r35a_plan *plan = NULL;
    assert_int_equal(r35a_varlen_attention_plan(ctx, &d, &plan), R35A_OK);
    r35a_plan_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    assert_int_equal(r35a_plan_get_info(plan, &info), R35A_OK);
    assert_string_equal(info.implementation, "reference");
    r35a_plan_destroy(plan);
    r35a_context_destroy(ctx);
}

/* ---- the error detail is per thread, and cleared by the next successful call ---- */

typedef struct detail_probe {
    char seen_before[256];
    char seen_after[256];
    r35a_status status;
} detail_probe;

static void *probe_thread(void *arg)
{
    detail_probe *p = (detail_probe *)arg;
    snprintf(p->seen_before, sizeof p->seen_before, "%s", r35a_last_error_detail());
    r35a_context_options opt;
    r35a_context_options_init(&opt);
    opt.backend = (r35a_backend)7;
    r35a_context *ctx = NULL;
    p->status = r35a_context_create(&opt, &ctx);
    snprintf(p->seen_after, sizeof p->seen_after, "%s", r35a_last_error_detail());
    return NULL;
}

static void test_detail_thread_local(void **state)
{
    (void)state;
    r35a_context_options opt;
    r35a_context_options_init(&opt);
    opt.struct_size = 1;
    r35a_context *ctx = NULL;
    assert_int_equal(r35a_context_create(&opt, &ctx), R35A_ERR_STRUCT_SIZE);
    char mine[256];
    snprintf(mine, sizeof mine, "%s", r35a_last_error_detail());
    assert_non_null(strstr(mine, "struct_size"));

    detail_probe probe;
    memset(&probe, 0, sizeof probe);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, probe_thread, &probe), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    /* the other thread saw no detail of ours, failed on its own, and left ours alone */
    assert_string_equal(probe.seen_before, "");
    assert_int_equal(probe.status, R35A_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(probe.seen_after, "backend"));
    assert_string_equal(r35a_last_error_detail(), mine);

    /* a successful call clears it */
    r35a_context_options_init(&opt);
    opt.backend = R35A_BACKEND_REFERENCE;
    assert_int_equal(r35a_context_create(&opt, &ctx), R35A_OK);
    assert_string_equal(r35a_last_error_detail(), "");
    r35a_context_destroy(ctx);
}

/* Contexts and plans created and used from several threads at once. */
#define N_THREADS 4

static void *worker_thread(void *arg)
{
    int *ok = (int *)arg;
    *ok = 1;
    for (int it = 0; it < 20 && *ok; ++it) {
        r35a_context_options opt;
        r35a_context_options_init(&opt);
        opt.backend = R35A_BACKEND_REFERENCE;
        r35a_context *ctx = NULL;
        if (r35a_context_create(&opt, &ctx) != R35A_OK) {
            *ok = 0;
            break;
        }
        r35a_paged_attention_desc d;
        r35a_paged_attention_desc_init(&d, R35A_DTYPE_F16, 2, 2, 1, 100, 8, 2, 64, 16, 14);
        r35a_plan *plan = NULL;
        if (r35a_paged_attention_plan(ctx, &d, &plan) != R35A_OK ||
            strcmp(r35a_last_error_detail(), "") != 0) {
            *ok = 0;
        }
        r35a_plan_destroy(plan);
        r35a_context_destroy(ctx);
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    pthread_t th[N_THREADS];
    int ok[N_THREADS];
    for (int i = 0; i < N_THREADS; ++i) {
        assert_int_equal(pthread_create(&th[i], NULL, worker_thread, &ok[i]), 0);
    }
    for (int i = 0; i < N_THREADS; ++i) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(ok[i], 1);
    }
}

int main(void)
{
    tu_begin("test_api");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_status_strings),
        cmocka_unit_test(test_context_options_and_info),
        cmocka_unit_test(test_paged_desc_init),
        cmocka_unit_test(test_desc_init_old_symbols),
        cmocka_unit_test(test_varlen_desc_init),
        cmocka_unit_test(test_detail_thread_local),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
