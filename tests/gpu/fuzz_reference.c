/*
 * fuzz_reference.c - the bad-data fuzzer's cases (fuzz_core.c) on a reference context with host
 * memory, as a CPU test: the same generator as the GPU fuzzer (tests/gpu/fuzz_gpu.c), where every
 * bad-data case must be refused by the library's host checks (R35A_ERR_INVALID_DATA naming the
 * field the generator expects, nothing written), every bad descriptor refused as
 * tests/reliability/rel_common.c expects, and every valid and non-finite case must match the
 * float64 oracle. It holds the generator's fault classes to the library's own reading of the
 * header, so the GPU fuzzer's expectations are the reference's.
 *
 *   fuzz_reference [--cases N]     (default 300; R35A_TEST_SEED replays, R35A_TEST_CASE=fuzz:<i> one case)
 */
#define _POSIX_C_SOURCE 200809L
#include "fuzz_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Host memory the library gets copies of (the harness's tu_mem_host hands over the buffers
 * themselves, which a changed input could not be told from). */
static void *copy_upload(void *user, const void *host, size_t bytes)
{
    (void)user;
    void *p = tu_alloc(bytes ? bytes : 1);
    if (bytes)
        memcpy(p, host, bytes);
    return p;
}

static void copy_download(void *user, void *host, const void *buffer, size_t bytes)
{
    (void)user;
    memcpy(host, buffer, bytes);
}

static void *copy_alloc(void *user, size_t bytes)
{
    (void)user;
    void *p = tu_alloc(bytes ? bytes : 1);
    memset(p, 0xA5, bytes);
    return p;
}

static void copy_release(void *user, void *buffer, const void *host)
{
    (void)user;
    (void)host;
    tu_free(buffer);
}

static int copy_sync(void *user, void *stream)
{
    (void)user;
    (void)stream;
    return 0;
}

static const tu_mem g_copies = {"host copies", copy_upload, copy_download, copy_alloc, copy_release, copy_sync,
                                NULL, NULL};

int main(int argc, char **argv)
{
    int cases = 300;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--cases") == 0 && i + 1 < argc)
            cases = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--cases N]\n", argv[0]);
            return 2;
        }
    }
    tu_begin("fuzz_reference");
    r35a_context_options o;
    r35a_context_options_init(&o);
    o.backend = R35A_BACKEND_REFERENCE;
    r35a_context *ctx = NULL;
    if (r35a_context_create(&o, &ctx) != R35A_OK) {
        printf("FAIL: reference context: %s\n", r35a_last_error_detail());
        return 1;
    }
    const fuzz_env env = {.mem = &g_copies, .device_checks = false, .oracle_every = 1, .max_cost = 4000000};
    fuzz_totals t;
    memset(&t, 0, sizeof t);
    for (int i = 0; i < tu_scaled(cases); ++i)
        if (tu_case_selected("fuzz", i))
            fuzz_run_case(ctx, &env, i, &t);
    r35a_context_destroy(ctx);
    fuzz_finish();
    fuzz_print_totals(&t, "fuzz_reference");
    printf("[fuzz_reference] %s\n", t.failed || !t.cases ? "FAILED" : "PASSED");
    return t.failed || !t.cases ? 1 : 0;
}
