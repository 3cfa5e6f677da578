/*
 * test_emulator_merge.c - the LSE output of the decode and portable kernels and the merge_states
 * kernels, executed: public API -> dispatch -> planner -> src/gpu_impls.c -> src/backend_hip.c,
 * with the embedded gfx1151 code objects run on the gfx11 ISA emulator by the executing stand-in
 * HIP runtime (r35a_emu_hip, as tests/hip/test_emulator.c; kept separate from it so each can change
 * alone).
 *
 * The cases are tests/lse_merge_cases.c's (shared with tests/gpu/test_gpu_merge.c): LSE on the
 * decode kernels and the portable kernel (paged and varlen) and merge_states_<dtype>, against
 * float64.
 * Exactly sized hipMalloc buffers and gfx11emu's bounds checks: a read or write outside them fails.
 * Fresh random inputs (seed printed; replay with R35A_TEST_SEED). Exit 0 passed, 1 failed.
 */
#define _POSIX_C_SOURCE 200809L
#include "lse_merge_cases.h"
#include "test_util.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
    int (*Malloc)(void **ptr, size_t bytes);
    int (*Free)(void *ptr);
    int (*Memcpy)(void *dst, const void *src, size_t bytes, int kind);
    int (*StreamCreateWithFlags)(void **stream, unsigned flags);
    int (*StreamSynchronize)(void *stream);
    int (*StreamDestroy)(void *stream);
    const char *(*emulator_last_error)(void);
    int (*emulator_errors)(void);
} hip;

static int g_failures;
static r35a_context *g_ctx;

static bool load_stand_in(void)
{
    const char *path = getenv("R35A_HIP_LIBRARY");
    void *lib = path && path[0] ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!lib) {
        printf("FAIL: cannot load the executing stand-in runtime R35A_HIP_LIBRARY=%s\n", path ? path : "(unset)");
        return false;
    }
    struct {
        const char *name;
        void **slot;
    } syms[] = {
        {"hipMalloc", (void **)&hip.Malloc}, {"hipFree", (void **)&hip.Free}, {"hipMemcpy", (void **)&hip.Memcpy},
        {"hipStreamCreateWithFlags", (void **)&hip.StreamCreateWithFlags},
        {"hipStreamSynchronize", (void **)&hip.StreamSynchronize}, {"hipStreamDestroy", (void **)&hip.StreamDestroy},
        {"fake_hip_emulator_last_error", (void **)&hip.emulator_last_error},
        {"fake_hip_emulator_errors", (void **)&hip.emulator_errors},
    };
    for (size_t i = 0; i < sizeof syms / sizeof *syms; ++i) {
        void *fn = dlsym(lib, syms[i].name);
        if (!fn) {
            printf("FAIL: %s lacks %s: not the executing stand-in (r35a_emu_hip)\n", path, syms[i].name);
            return false;
        }
        memcpy(syms[i].slot, &fn, sizeof fn);
    }
    return true;
}

static void check_hip(int e, const char *what)
{
    if (e != 0) {
        printf("FAIL %s: hip error %d: %s\n", what, e, hip.emulator_last_error());
        ++g_failures;
    }
}

/* ---- exactly sized device buffers for the harness ---- */

static void *dev_upload(void *user, const void *host, size_t bytes)
{
    (void)user;
    void *p = NULL;
    check_hip(hip.Malloc(&p, bytes ? bytes : 16), "hipMalloc");
    if (p && bytes)
        check_hip(hip.Memcpy(p, host, bytes, 1 /* hipMemcpyHostToDevice */), "hipMemcpy H2D");
    return p;
}

static void dev_download(void *user, void *host, const void *buffer, size_t bytes)
{
    (void)user;
    check_hip(hip.Memcpy(host, buffer, bytes, 2 /* hipMemcpyDeviceToHost */), "hipMemcpy D2H");
}

static void *dev_alloc(void *user, size_t bytes)
{
    (void)user;
    void *p = NULL;
    check_hip(hip.Malloc(&p, bytes), "hipMalloc workspace");
    return p;
}

static void dev_release(void *user, void *buffer, const void *host)
{
    (void)user;
    (void)host;
    if (buffer)
        check_hip(hip.Free(buffer), "hipFree");
}

static int dev_sync(void *user, void *stream)
{
    (void)user;
    int e = hip.StreamSynchronize(stream);
    if (e != 0)
        printf("  hipStreamSynchronize: error %d: %s\n", e, hip.emulator_last_error());
    return e != 0;
}

static tu_mem g_mem = {"gfx11emu", dev_upload, dev_download, dev_alloc, dev_release, dev_sync, NULL, NULL};

static void default_environment(void)
{
    const struct {
        const char *name, *value;
    } defaults[] = {{"R35A_HIP_LIBRARY", EMU_HIP_LIBRARY}, {"FAKE_HIP_GFX11EMU_DIR", EMU_GFX11EMU_DIR},
                    {"FAKE_HIP_PY_DIR", EMU_PY_DIR}, {"CACHEDB", EMU_CACHEDB}, {"FAKE_HIP_PYCACHE", EMU_PYCACHE},
                    {"FAKE_HIP_ARCH", "gfx1151"}, {"FAKE_HIP_CUS", "20"}};
    for (size_t i = 0; i < sizeof defaults / sizeof *defaults; ++i)
        if (!getenv(defaults[i].name) || !getenv(defaults[i].name)[0])
            setenv(defaults[i].name, defaults[i].value, 1);
    setenv("CC", EMU_CC, 1);
}

int main(void)
{
    default_environment();
    tu_begin("test_emulator_merge");
    if (!load_stand_in())
        return 1;
    void *stream = NULL;
    check_hip(hip.StreamCreateWithFlags(&stream, 1 /* hipStreamNonBlocking */), "hipStreamCreateWithFlags");
    g_mem.stream = stream;
    r35a_context_options o;
    r35a_context_options_init(&o);
    o.backend = R35A_BACKEND_GPU;
    if (r35a_context_create(&o, &g_ctx) != R35A_OK) {
        printf("FAIL: no GPU context on the executing stand-in: %s\n", r35a_last_error_detail());
        return 1;
    }
    r35a_context_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    r35a_context_get_info(g_ctx, &info);
    if (strcmp(info.backend_name, "hip") != 0 || strcmp(info.arch, "gfx1151") != 0) {
        printf("FAIL: the GPU context is %s %s, not hip gfx1151\n", info.backend_name, info.arch);
        return 1;
    }
    g_failures += lse_merge_cases(g_ctx, &g_mem);
    r35a_context_destroy(g_ctx);
    check_hip(hip.StreamDestroy(stream), "hipStreamDestroy");
    const int emu_errors = hip.emulator_errors();
    printf("[test_emulator_merge] %d failed, %d emulator errors: %s\n", g_failures, emu_errors,
           g_failures || emu_errors ? "FAILED" : "PASSED");
    return g_failures || emu_errors ? 1 : 0;
}
