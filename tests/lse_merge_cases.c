/*
 * lse_merge_cases.c - the GPU cases of the LSE output and the merge op, shared by the programs that
 * run them on a device: tests/hip/test_emulator_merge.c (gfx1151 code objects on the gfx11 ISA
 * emulator) and tests/gpu/test_gpu_merge.c (an NVIDIA GPU through the CUDA backend).
 *
 *   lse     paged calls asking for the LSE (sinks, softcap + ALiBi, a window, GQA, f16 and bf16, a
 *           padded LSE buffer whose gaps must stay poisoned) and a varlen one: the plan must be a
 *           decode kernel where one serves the call (cases 0 and 1), else the portable kernel (a
 *           page size of 7, a head size no decode variant has), O and LSE against the float64
 *           oracle (tests/harness.c's checks, the same as the reference suites').
 *   merge   merge_states_f16 / _bf16: strided parts, -inf parts whose O holds NaN (not read), a row
 *           whose parts are all -inf (O = 0, LSE = -inf), a NaN LSE part (row NaN), against a
 *           float64 merge; the plan's kernel.
 */
#include "lse_merge_cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static r35a_context *g_lm_ctx;
static const tu_mem *g_lm_mem;
static int g_lm_failures;

static void *lm_upload(const void *host, size_t bytes) { return g_lm_mem->upload(g_lm_mem->user, host, bytes); }
static void lm_download(void *host, const void *buffer, size_t bytes)
{
    g_lm_mem->download(g_lm_mem->user, host, buffer, bytes);
}
static void lm_release(void *buffer, const void *host) { g_lm_mem->release(g_lm_mem->user, buffer, host); }

/* ---- LSE on the decode and portable kernels ---- */

/* Whether the context is an NVIDIA one: there the planner keeps the LSE of the decode and encoder
 * kernels on the portable kernel until those builds have run on a GPU (src/plan_decode.c,
 * src/plan_encoder.c). */
static bool lm_nvidia(void)
{
    r35a_context_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    return r35a_context_get_info(g_lm_ctx, &info) == R35A_OK && strncmp(info.arch, "sm_", 3) == 0;
}

static void expect_plan(const r35a_plan *plan, const char *prefix, const char *reason, const char *label)
{
    r35a_plan_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (r35a_plan_get_info(plan, &info) != R35A_OK || strncmp(info.implementation, prefix, strlen(prefix)) != 0 ||
        (reason && !strstr(info.fallback_reason, reason))) {
        printf("FAIL %s: plan \"%s\" (fallback \"%s\"), expected %s... with \"%s\" in the fallback reason\n", label,
               info.implementation, info.fallback_reason, prefix, reason ? reason : "");
        ++g_lm_failures;
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
        ++g_lm_failures;
        return;
    }
    r35a_plan *plan = NULL;
    if (r35a_paged_attention_plan(g_lm_ctx, &p.desc, &plan) != R35A_OK) {
        printf("FAIL %s: plan: %s\n", label, r35a_last_error_detail());
        ++g_lm_failures;
    } else {
        expect_plan(plan, index < 2 && !lm_nvidia() ? "decode_" : "generic_paged_", index == 2 ? "page_size 7" : NULL,
                    label);
        if (!paged_problem_check(g_lm_ctx, &p, plan, g_lm_mem, label)) {
            char desc[2048];
            paged_spec_describe(&s, desc, sizeof desc);
            printf("  %s\n", desc);
            ++g_lm_failures;
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
        ++g_lm_failures;
        return;
    }
    r35a_plan *plan = NULL;
    if (r35a_varlen_attention_plan(g_lm_ctx, &p.desc, &plan) != R35A_OK) {
        printf("FAIL lse:varlen: plan: %s\n", r35a_last_error_detail());
        ++g_lm_failures;
    } else {
        expect_plan(plan, lm_nvidia() ? "generic_varlen_" : "encoder_", NULL, "lse:varlen");
        if (!varlen_problem_check(g_lm_ctx, &p, plan, g_lm_mem, "lse:varlen"))
            ++g_lm_failures;
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
    void *dparts = lm_upload(parts, parts_elems * es), *dlse = lm_upload(lse, sizeof(float) * lse_elems);
    void *dout = lm_upload(out, out_elems * es), *dout_lse = lm_upload(out_lse, sizeof(float) * rows);
    r35a_plan *plan = NULL;
    r35a_status st = r35a_merge_states_plan(g_lm_ctx, &d, &plan);
    if (st == R35A_OK) {
        char want[32];
        snprintf(want, sizeof want, "merge_states_%s", tu_dtype_name(dt));
        expect_plan(plan, want, NULL, label);
        r35a_merge_states_args a = {sizeof a, dparts, dlse, dout, dout_lse};
        st = r35a_merge_states_run(g_lm_ctx, plan, &a, NULL, 0, g_lm_mem->stream);
    }
    if (st != R35A_OK) {
        printf("FAIL %s: %s \"%s\"\n", label, r35a_status_string(st), r35a_last_error_detail());
        ++g_lm_failures;
    } else if (g_lm_mem->sync(g_lm_mem->user, g_lm_mem->stream) != 0) {
        printf("FAIL %s: the launch failed on the emulator\n", label);
        ++g_lm_failures;
    } else {
        lm_download(out, dout, out_elems * es);
        lm_download(out_lse, dout_lse, sizeof(float) * rows);
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
            ++g_lm_failures;
        }
    }
    r35a_plan_destroy(plan);
    lm_release(dparts, NULL);
    lm_release(dlse, NULL);
    lm_release(dout, NULL);
    lm_release(dout_lse, NULL);
    tu_free(parts);
    tu_free(out);
    tu_free(lse);
    tu_free(out_lse);
}

int lse_merge_cases(r35a_context *ctx, const tu_mem *mem)
{
    g_lm_ctx = ctx;
    g_lm_mem = mem;
    g_lm_failures = 0;
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
    printf("[lse_merge_cases] 5 LSE cases (decode and portable kernels) and 4 merge_states cases on %s: %d failed\n", mem->name,
           g_lm_failures);
    return g_lm_failures;
}
