/*
 * test_emulator_merge.c - the LSE output of the portable kernel and the merge_states kernels,
 * executed: public API -> dispatch -> planner -> src/gpu_impls.c -> src/backend_hip.c, with the
 * embedded gfx1151 code objects run on the gfx11 ISA emulator by the executing stand-in HIP runtime
 * (r35a_emu_hip, as tests/hip/test_emulator.c; kept separate from it so each can change alone).
 *
 *   lse     paged calls asking for the LSE (sinks, softcap + ALiBi, a window, GQA, f16 and bf16, a
 *           padded LSE buffer whose gaps must stay poisoned) and a varlen one: the plan must be the
 *           portable kernel with "LSE output" in its fallback reason, O and LSE against the float64
 *           oracle (tests/harness.c's checks, the same as the reference suites').
 *   merge   merge_states_f16 / _bf16: strided parts, -inf parts whose O holds NaN (not read), a row
 *           whose parts are all -inf (O = 0, LSE = -inf), a NaN LSE part (row NaN), against a
 *           float64 merge; the plan's kernel and grid.
 * Exactly sized hipMalloc buffers and gfx11emu's bounds checks: a read or write outside them fails.
 * Fresh random inputs (seed printed; replay with R35A_TEST_SEED). Exit 0 passed, 1 failed.
 */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"
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

/* ---- LSE on the portable kernel ---- */

static void expect_plan(const r35a_plan *plan, const char *prefix, const char *reason, const char *label)
{
    r35a_plan_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (r35a_plan_get_info(plan, &info) != R35A_OK || strncmp(info.implementation, prefix, strlen(prefix)) != 0 ||
        (reason && !strstr(info.fallback_reason, reason))) {
        printf("FAIL %s: plan \"%s\" (fallback \"%s\"), expected %s... with \"%s\" in the fallback reason\n", label,
               info.implementation, info.fallback_reason, prefix, reason ? reason : "");
        ++g_failures;
    }
}

static void paged_lse_case(int index, r35a_dtype dt, int32_t hq, int32_t hkv, int32_t d, int32_t page, tu_rng *rng)
{
    paged_spec s;
    paged_spec_init(&s, dt, hq, hkv, d, page);
    s.num_seqs = 0;
    paged_spec_add_seq(&s, tu_range(rng, 1, 40), 1);
    paged_spec_add_seq(&s, tu_range(rng, 20, 60), tu_range(rng, 1, 3));
    s.use_lse = true;
    s.lse_pad = index % 2;
    s.nan_fill = true;
    s.shuffle_pages = true;
    s.garbage_unreached = true;
    switch (index % 4) {
    case 0: s.use_sinks = 1; s.sink_center = 1.0; s.sink_amp = 2.0; s.sink_some_neg_inf = true; break;
    case 1: s.logit_softcap = 10.0f; s.use_alibi = 1; break;
    case 2: s.window = tu_range(rng, 1, 12); s.use_sinks = 1; s.sink_center = -2.0; s.sink_amp = 3.0; break;
    default: break;
    }
    paged_problem p;
    char label[64];
    snprintf(label, sizeof label, "lse:paged:%d", index);
    if (paged_problem_init(&p, &s, rng) != 0) {
        printf("FAIL %s: problem setup\n", label);
        ++g_failures;
        return;
    }
    r35a_plan *plan = NULL;
    if (r35a_paged_attention_plan(g_ctx, &p.desc, &plan) != R35A_OK) {
        printf("FAIL %s: plan: %s\n", label, r35a_last_error_detail());
        ++g_failures;
    } else {
        expect_plan(plan, "generic_paged_", "LSE output", label);
        if (!paged_problem_check(g_ctx, &p, plan, &g_mem, label)) {
            char desc[2048];
            paged_spec_describe(&s, desc, sizeof desc);
            printf("  %s\n", desc);
            ++g_failures;
        }
    }
    r35a_plan_destroy(plan);
    paged_problem_free(&p);
}

static void varlen_lse_case(tu_rng *rng)
{
    varlen_spec s;
    varlen_spec_init(&s, R35A_DTYPE_BF16, 4, 2, 64);
    s.num_segments = 0;
    varlen_spec_add_segment(&s, tu_range(rng, 1, 9));
    varlen_spec_add_segment(&s, tu_range(rng, 1, 9));
    s.causal = 1;
    s.use_sinks = 1;
    s.sink_center = 0.5;
    s.sink_amp = 2.0;
    s.use_lse = true;
    s.lse_pad = 2;
    varlen_problem p;
    if (varlen_problem_init(&p, &s, rng) != 0) {
        printf("FAIL lse:varlen: problem setup\n");
        ++g_failures;
        return;
    }
    r35a_plan *plan = NULL;
    if (r35a_varlen_attention_plan(g_ctx, &p.desc, &plan) != R35A_OK) {
        printf("FAIL lse:varlen: plan: %s\n", r35a_last_error_detail());
        ++g_failures;
    } else {
        expect_plan(plan, "generic_varlen_", NULL, "lse:varlen");
        if (!varlen_problem_check(g_ctx, &p, plan, &g_mem, "lse:varlen"))
            ++g_failures;
    }
    r35a_plan_destroy(plan);
    varlen_problem_free(&p);
}

/* ---- merge_states ---- */

static void merge_case(int index, r35a_dtype dt, tu_rng *rng)
{
    char label[64];
    snprintf(label, sizeof label, "merge:%d", index);
    const int32_t N = tu_range(rng, 2, 5), T = tu_range(rng, 1, 3), H = tu_range(rng, 1, 3);
    const int32_t D = index % 2 ? tu_range(rng, 1, 200) : 128;
    r35a_merge_states_desc d;
    r35a_merge_states_desc_init(&d, dt, N, T, H, D);
    d.use_out_lse = 1;
    d.part_head_stride = D + 3;   /* strided parts and a padded output */
    d.part_token_stride = H * d.part_head_stride;
    d.part_stride = T * d.part_token_stride + 5;
    d.o_head_stride = D + 1;
    d.o_token_stride = H * d.o_head_stride;
    const size_t es = tu_dtype_size(dt);
    const size_t parts_elems = (size_t)N * d.part_stride, lse_elems = (size_t)N * T * H;
    const size_t out_elems = (size_t)T * d.o_token_stride, rows = (size_t)T * H;
    void *parts = tu_alloc(parts_elems * es), *out = tu_alloc(out_elems * es);
    float *lse = tu_alloc(sizeof(float) * lse_elems), *out_lse = tu_alloc(sizeof(float) * rows);
    for (size_t i = 0; i < parts_elems; ++i)
        tu_store_nan(dt, parts, i);
    for (int32_t i = 0; i < N; ++i)
        for (size_t r = 0; r < rows; ++r) {
            const size_t li = (size_t)i * rows + r;
            const bool all_neg_inf = r == 1, nan_row = r == 2 && index == 0;
            lse[li] = all_neg_inf || tu_chance(rng, 0.2) ? -INFINITY : (float)(-5.0 + 25.0 * tu_unit(rng));
            if (nan_row && i == 1)
                lse[li] = NAN;
            if (lse[li] == -INFINITY)
                continue;   /* its O stays NaN: a kernel that reads it fails */
            const size_t base = (size_t)i * d.part_stride + (r / H) * d.part_token_stride + (r % H) * d.part_head_stride;
            for (int32_t e = 0; e < D; ++e)
                tu_store(dt, parts, base + e, 2.0 * tu_sym(rng));
        }
    tu_poison(out, out_elems * es);
    tu_poison(out_lse, sizeof(float) * rows);
    void *dparts = dev_upload(NULL, parts, parts_elems * es), *dlse = dev_upload(NULL, lse, sizeof(float) * lse_elems);
    void *dout = dev_upload(NULL, out, out_elems * es), *dout_lse = dev_upload(NULL, out_lse, sizeof(float) * rows);
    r35a_plan *plan = NULL;
    r35a_status st = r35a_merge_states_plan(g_ctx, &d, &plan);
    if (st == R35A_OK) {
        char want[32];
        snprintf(want, sizeof want, "merge_states_%s", tu_dtype_name(dt));
        expect_plan(plan, want, NULL, label);
        r35a_merge_states_args a = {sizeof a, dparts, dlse, dout, dout_lse};
        st = r35a_merge_states_run(g_ctx, plan, &a, NULL, 0, g_mem.stream);
    }
    if (st != R35A_OK) {
        printf("FAIL %s: %s \"%s\"\n", label, r35a_status_string(st), r35a_last_error_detail());
        ++g_failures;
    } else if (dev_sync(NULL, g_mem.stream) != 0) {
        printf("FAIL %s: the launch failed on the emulator\n", label);
        ++g_failures;
    } else {
        dev_download(NULL, out, dout, out_elems * es);
        dev_download(NULL, out_lse, dout_lse, sizeof(float) * rows);
        const double tol = dt == R35A_DTYPE_F16 ? 4e-3 : 2e-2;   /* |O| <= 2: 2x the relative tolerance */
        int bad = 0;
        for (size_t r = 0; r < rows; ++r) {
            double m = -INFINITY;
            bool nan = false;
            for (int32_t i = 0; i < N; ++i) {
                const double l = lse[(size_t)i * rows + r];
                nan |= isnan(l);
                m = l > m ? l : m;
            }
            double sum = 0.0;
            for (int32_t i = 0; i < N && m != -INFINITY; ++i)
                sum += exp(lse[(size_t)i * rows + r] - m);
            const double want_lse = nan ? NAN : m == -INFINITY ? -INFINITY : m + log(sum);
            const double got_lse = out_lse[r];
            if (!(nan ? isnan(got_lse) : want_lse == -INFINITY ? got_lse == -INFINITY
                                                                : fabs(got_lse - want_lse) <= 1e-4 * fmax(1.0, fabs(want_lse))) &&
                bad++ < 5)
                printf("FAIL %s: row %zu LSE got %.9g want %.9g\n", label, r, got_lse, want_lse);
            for (int32_t e = 0; e < D; ++e) {
                double want = 0.0;
                for (int32_t i = 0; i < N && !nan && m != -INFINITY; ++i) {
                    const double l = lse[(size_t)i * rows + r];
                    if (l == -INFINITY)
                        continue;
                    want += exp(l - want_lse) * tu_load(dt, parts, (size_t)i * d.part_stride + (r / H) * d.part_token_stride +
                                                                   (r % H) * d.part_head_stride + e);
                }
                const double got = tu_load(dt, out, (r / H) * d.o_token_stride + (r % H) * d.o_head_stride + e);
                if (!(nan ? isnan(got) : fabs(got - want) <= tol) && bad++ < 5)
                    printf("FAIL %s: row %zu elem %d got %.6g want %.6g\n", label, r, (int)e, got, want);
            }
            /* the gap after each output row stays poisoned */
            if (!tu_elem_is_poison(dt, out, (r / H) * d.o_token_stride + (r % H) * d.o_head_stride + D) && bad++ < 5)
                printf("FAIL %s: row %zu: the output gap was written\n", label, r);
        }
        if (bad) {
            printf("  %s: %s N=%d T=%d H=%d D=%d (seed 0x%016llx)\n", label, tu_dtype_name(dt), (int)N, (int)T, (int)H,
                   (int)D, (unsigned long long)tu_seed());
            ++g_failures;
        }
    }
    r35a_plan_destroy(plan);
    dev_release(NULL, dparts, NULL);
    dev_release(NULL, dlse, NULL);
    dev_release(NULL, dout, NULL);
    dev_release(NULL, dout_lse, NULL);
    tu_free(parts);
    tu_free(out);
    tu_free(lse);
    tu_free(out_lse);
}

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
    static const struct {
        r35a_dtype dt;
        int32_t hq, hkv, d, page;
    } paged[] = {{R35A_DTYPE_F16, 4, 2, 64, 16}, {R35A_DTYPE_BF16, 2, 2, 128, 16}, {R35A_DTYPE_F16, 4, 1, 80, 7},
                 {R35A_DTYPE_BF16, 3, 3, 32, 32}};
    for (int i = 0; i < 4; ++i) {
        if (!tu_case_selected("lse", i))
            continue;
        tu_rng rng;
        tu_rng_init(&rng, tu_case_seed("lse", i));
        paged_lse_case(i, paged[i].dt, paged[i].hq, paged[i].hkv, paged[i].d, paged[i].page, &rng);
    }
    if (tu_case_selected("lse", 4)) {
        tu_rng rng;
        tu_rng_init(&rng, tu_case_seed("lse", 4));
        varlen_lse_case(&rng);
    }
    for (int i = 0; i < 4; ++i) {
        if (!tu_case_selected("merge", i))
            continue;
        tu_rng rng;
        tu_rng_init(&rng, tu_case_seed("merge", i));
        merge_case(i, i % 2 ? R35A_DTYPE_BF16 : R35A_DTYPE_F16, &rng);
    }
    r35a_context_destroy(g_ctx);
    check_hip(hip.StreamDestroy(stream), "hipStreamDestroy");
    const int emu_errors = hip.emulator_errors();
    printf("[test_emulator_merge] 5 LSE cases (portable kernel) and 4 merge_states cases; %d failed, %d emulator "
           "errors: %s\n", g_failures, emu_errors, g_failures || emu_errors ? "FAILED" : "PASSED");
    return g_failures || emu_errors ? 1 : 0;
}
