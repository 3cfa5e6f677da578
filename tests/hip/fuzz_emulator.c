/*
 * fuzz_emulator.c - the bad-data fuzzer (tests/gpu/fuzz_core.c, the generator and checks of
 * tests/gpu/fuzz_gpu.c) on the library's gfx1151 path executed by the gfx11 ISA emulator: public API
 * -> planner -> src/backend_hip.c -> the executing stand-in HIP runtime (r35a_emu_hip: fake_hip.c +
 * emu_exec.c) with check_bounds on every launch, every input an exactly sized allocation. A read or
 * write outside the buffers fails the launch, the stream and so the case; bad metadata must come
 * back as R35A_ERR_INVALID_DATA with the field and sequence, the bad rows NaN, the others right.
 *
 *   fuzz_emulator [--cases N] [--max-seconds S] [--oracle-every K]
 *                                          (default 200 cases, no time limit, oracle on every case)
 * Problems are kept small (the emulator runs a few thousand workgroups a second; fuzz_core.c's
 * generator draws within a cost cap, else the cheapest of 50 draws). The time a run takes still
 * depends on its seed. Before the generator took the cheapest draw (it took the last), 120 cases took
 * 53-602 s (0x36c7e6f524f5041b: 602 s) and once 1109 s (0x27a8a8cde6f72d4d) on the 2-core CI
 * machine; since, those two take 60 s and 83 s, three other seeds 50-57 s. --max-seconds starts no
 * case after S seconds (a case already started runs to its end): the run passes or fails on the
 * cases it ran and says how many of N those were (CI's ctest: 120 cases within 300 s).
 * R35A_TEST_SEED replays a run, R35A_TEST_CASE=fuzz:<i> one case. Exit 0 passed, 1 failed.
 */
#define _POSIX_C_SOURCE 200809L
#include "fuzz_core.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
    int (*Malloc)(void **ptr, size_t bytes);
    int (*Free)(void *ptr);
    int (*Memcpy)(void *dst, const void *src, size_t bytes, int kind);
    int (*Memset)(void *dst, int value, size_t bytes);
    int (*StreamCreateWithFlags)(void **stream, unsigned flags);
    int (*StreamSynchronize)(void *stream);
    int (*StreamDestroy)(void *stream);
    const char *(*emulator_last_error)(void);
    void (*reset_records)(void); /* the stand-in records at most MAX_RECORDS launches and memsets */
} hip;
static int g_device_failures;

static void check_hip(int e, const char *what)
{
    if (e != 0) {
        printf("FAIL %s: hip error %d (%s)\n", what, e, hip.emulator_last_error());
        ++g_device_failures;
    }
}

static void *dev_upload(void *user, const void *host, size_t bytes)
{
    (void)user;
    void *p = NULL;
    check_hip(hip.Malloc(&p, bytes ? bytes : 16), "hipMalloc");
    if (p && bytes)
        check_hip(hip.Memcpy(p, host, bytes, 1 /* hipMemcpyHostToDevice */), "hipMemcpy");
    return p;
}

static void dev_download(void *user, void *host, const void *buffer, size_t bytes)
{
    (void)user;
    check_hip(hip.Memcpy(host, buffer, bytes, 2 /* hipMemcpyDeviceToHost */), "hipMemcpy");
}

static void *dev_alloc(void *user, size_t bytes)
{
    (void)user;
    void *p = NULL;
    check_hip(hip.Malloc(&p, bytes ? bytes : 16), "hipMalloc");
    if (p)
        check_hip(hip.Memset(p, 0xA5, bytes ? bytes : 16), "hipMemset");
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
    const int e = hip.StreamSynchronize(stream);
    if (e != 0)
        printf("  hipStreamSynchronize: error %d: %s\n", e, hip.emulator_last_error());
    return e != 0;
}

static tu_mem g_mem = {"gfx11emu", dev_upload, dev_download, dev_alloc, dev_release, dev_sync, NULL, NULL};

/* The build's stand-in, emulator and cache unless the environment names others (as test_emulator). */
static void default_environment(void)
{
    const struct {
        const char *name, *value;
    } defaults[] = {{"R35A_HIP_LIBRARY", EMU_HIP_LIBRARY}, {"FAKE_HIP_GFX11EMU_DIR", EMU_GFX11EMU_DIR},
                    {"FAKE_HIP_PY_DIR", EMU_PY_DIR}, {"CACHEDB", EMU_CACHEDB}, {"FAKE_HIP_PYCACHE", EMU_PYCACHE},
                    {"FAKE_HIP_ARCH", "gfx1151"}};
    for (size_t i = 0; i < sizeof defaults / sizeof *defaults; ++i)
        if (!getenv(defaults[i].name) || !getenv(defaults[i].name)[0])
            setenv(defaults[i].name, defaults[i].value, 1);
    setenv("CC", EMU_CC, 1);
}

static bool load_stand_in(void)
{
    const char *path = getenv("R35A_HIP_LIBRARY");
    void *lib = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!lib) {
        printf("FAIL: cannot load the executing stand-in %s: %s\n", path ? path : "(unset)", dlerror());
        return false;
    }
    const struct {
        const char *name;
        void **slot;
    } syms[] = {
        {"hipMalloc", (void **)&hip.Malloc}, {"hipFree", (void **)&hip.Free}, {"hipMemcpy", (void **)&hip.Memcpy},
        {"hipMemset", (void **)&hip.Memset}, {"hipStreamCreateWithFlags", (void **)&hip.StreamCreateWithFlags},
        {"hipStreamSynchronize", (void **)&hip.StreamSynchronize}, {"hipStreamDestroy", (void **)&hip.StreamDestroy},
        {"fake_hip_emulator_last_error", (void **)&hip.emulator_last_error},
        {"fake_hip_reset_records", (void **)&hip.reset_records},
    };
    for (size_t i = 0; i < sizeof syms / sizeof *syms; ++i) {
        void *fn = dlsym(lib, syms[i].name);
        if (!fn) {
            printf("FAIL: %s lacks %s: not the executing stand-in\n", path, syms[i].name);
            return false;
        }
        memcpy(syms[i].slot, &fn, sizeof fn);
    }
    return true;
}

int main(int argc, char **argv)
{
    int cases = 200, oracle_every = 1;
    double max_seconds = 0.0;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--cases") == 0 && i + 1 < argc)
            cases = atoi(argv[++i]);
        else if (strcmp(argv[i], "--max-seconds") == 0 && i + 1 < argc)
            max_seconds = atof(argv[++i]);
        else if (strcmp(argv[i], "--oracle-every") == 0 && i + 1 < argc)
            oracle_every = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--cases N] [--max-seconds S] [--oracle-every K]\n", argv[0]);
            return 2;
        }
    }
    default_environment();
    tu_begin("fuzz_emulator");
    if (!load_stand_in())
        return 1;
    void *stream = NULL;
    check_hip(hip.StreamCreateWithFlags(&stream, 1 /* hipStreamNonBlocking */), "hipStreamCreateWithFlags");
    g_mem.stream = stream;
    r35a_context_options o;
    r35a_context_options_init(&o);
    o.backend = R35A_BACKEND_GPU;
    r35a_context *ctx = NULL;
    if (r35a_context_create(&o, &ctx) != R35A_OK) {
        printf("FAIL: no GPU context on the executing stand-in: %s\n", r35a_last_error_detail());
        return 1;
    }
    const fuzz_env env = {.mem = &g_mem, .device_checks = true, .oracle_every = oracle_every, .max_cost = 300000};
    fuzz_totals t;
    memset(&t, 0, sizeof t);
    const double t0 = tu_wall_seconds();
    const int asked = tu_scaled(cases);
    int stopped_at = -1;   /* the first case not started for --max-seconds */
    for (int i = 0; i < asked; ++i)
        if (tu_case_selected("fuzz", i)) {
            if (max_seconds > 0 && tu_wall_seconds() - t0 > max_seconds) {
                stopped_at = i;
                break;
            }
            hip.reset_records(); /* else launches fail once the stand-in's record table is full */
            fuzz_run_case(ctx, &env, i, &t);
        }
    const double secs = tu_wall_seconds() - t0;
    if (stopped_at >= 0)
        printf("[fuzz_emulator] --max-seconds %.0f reached: cases fuzz:%d .. fuzz:%d not started (%d of %d run)\n",
               max_seconds, stopped_at, asked - 1, t.cases, asked);
    r35a_context_destroy(ctx);
    fuzz_finish();
    check_hip(hip.StreamDestroy(stream), "hipStreamDestroy");
    fuzz_print_totals(&t, "fuzz_emulator");
    const bool failed = t.failed || g_device_failures || !t.cases;
    printf("[fuzz_emulator] fuzz: %d cases in %.0f s, %d failed: %s\n", t.cases, secs, t.failed,
           failed ? "FAILED" : "PASSED");
    return failed ? 1 : 0;
}
