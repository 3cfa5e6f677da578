/*
 * test_gpu_merge.c - the LSE output of the decode and portable kernels and the merge_states kernels
 * on an NVIDIA GPU through the CUDA backend: tests/lse_merge_cases.c's cases (the ones
 * test_emulator_merge runs on the gfx11 emulator), with exactly sized device buffers, against
 * float64. Built everywhere
 * (plain C, the driver is dlopen'ed); exits 77 = skipped without a CUDA GPU or without cubins for
 * it (R35A_NVIDIA_TARGETS), 0 passed, 1 failed. Replay: R35A_TEST_SEED (printed first).
 */
#include "cuda_dl.h"
#include "lse_merge_cases.h"
#include "test_util.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static cuda_dl g_cu;
static int g_failures;

static void check_cu(cuda_dl_result e, const char *what)
{
    if (e != 0) {
        printf("FAIL %s: %s (%d)\n", what, cuda_dl_error(&g_cu, e), e);
        ++g_failures;
    }
}

static void *dev_upload(void *user, const void *host, size_t bytes)
{
    (void)user;
    cuda_dl_ptr p = 0;
    check_cu(g_cu.MemAlloc(&p, bytes ? bytes : 16), "cuMemAlloc");
    if (p && bytes)
        check_cu(g_cu.MemcpyHtoD(p, host, bytes), "cuMemcpyHtoD");
    check_cu(g_cu.CtxSynchronize(), "cuCtxSynchronize");   /* the library runs on a non-blocking stream */
    return (void *)(uintptr_t)p;
}

static void dev_download(void *user, void *host, const void *buffer, size_t bytes)
{
    (void)user;
    check_cu(g_cu.MemcpyDtoH(host, (cuda_dl_ptr)(uintptr_t)buffer, bytes), "cuMemcpyDtoH");
}

static void *dev_alloc(void *user, size_t bytes)
{
    (void)user;
    cuda_dl_ptr p = 0;
    check_cu(g_cu.MemAlloc(&p, bytes ? bytes : 16), "cuMemAlloc");
    if (p)
        check_cu(g_cu.MemsetD8(p, 0xFF, bytes ? bytes : 16), "cuMemsetD8");
    check_cu(g_cu.CtxSynchronize(), "cuCtxSynchronize");
    return (void *)(uintptr_t)p;
}

static void dev_release(void *user, void *buffer, const void *host)
{
    (void)user;
    (void)host;
    if (buffer)
        check_cu(g_cu.MemFree((cuda_dl_ptr)(uintptr_t)buffer), "cuMemFree");
}

static int dev_sync(void *user, void *stream)
{
    (void)user;
    cuda_dl_result e = g_cu.StreamSynchronize(stream);
    if (e != 0)
        printf("  cuStreamSynchronize: %s (%d)\n", cuda_dl_error(&g_cu, e), e);
    return e != 0;
}

static tu_mem g_mem = {"cuda", dev_upload, dev_download, dev_alloc, dev_release, dev_sync, NULL, NULL};

int main(void)
{
    tu_begin("test_gpu_merge");
    char why[256];
    if (cuda_dl_open(&g_cu, 0, why, sizeof why) != 0) {
        printf("SKIP: %s\n", why);
        return 77;
    }
    void *stream = NULL;
    if (g_cu.StreamCreate(&stream, 1 /* non-blocking */) != 0) {
        printf("FAIL cuStreamCreate\n");
        return 1;
    }
    g_mem.stream = stream;
    r35a_context_options o;
    r35a_context_options_init(&o);
    o.backend = R35A_BACKEND_GPU;
    r35a_context *ctx = NULL;
    if (r35a_context_create(&o, &ctx) != R35A_OK) {
        printf("SKIP: no GPU context: %s\n", r35a_last_error_detail());
        return 77;
    }
    r35a_context_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    r35a_context_get_info(ctx, &info);
    printf("[test_gpu_merge] context: %s %s\n", info.backend_name, info.arch);
    g_failures += lse_merge_cases(ctx, &g_mem);
    r35a_context_destroy(ctx);
    check_cu(g_cu.StreamDestroy(stream), "cuStreamDestroy");
    printf("[test_gpu_merge] %s\n", g_failures ? "FAILED" : "PASSED");
    return g_failures ? 1 : 0;
}
