/*
 * soak_gpu.c - the soak: a million back-to-back runs on one stream of an NVIDIA GPU,
 * reusing a few plans that cover every kernel family and the two-launch mixed batch, with
 *   - the outputs bit-identical to the first run's at every checkpoint (and that first run checked
 *     against the float64 oracle);
 *   - host memory (RSS, /proc/self/statm) and device memory (cuMemGetInfo's free bytes) sampled at
 *     every checkpoint: neither may grow after the first checkpoint;
 *   - no device error record (valid data throughout);
 *   - the host time of the library's calls: a plan call (plan + destroy, per descriptor), a run call
 *     (bursts of 200 right after a synchronize, so the launch queue never blocks the host: the
 *     library's own cost plus the driver's launch call), r35a_context_check_device, and the wall time
 *     per run over the whole soak (the GPU's rate once the queue is full).
 *
 *   soak_gpu [--runs N] [--checkpoints K]     (default 1000000 runs, 20 checkpoints)
 * Prints one "soak:" summary line last. Exit status: 0 passed, 1 failed, 77 skipped (no CUDA GPU).
 * Loader: tests/gpu/cuda_dl.h (as fuzz_gpu.c; cuMemGetInfo is in its table).
 */
#define _POSIX_C_SOURCE 200809L
#include "cuda_dl.h"
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static cuda_dl g_cu;
static int g_failures;

static void check_cu(cuda_dl_result e, const char *what)
{
    if (e != 0) {
        printf("FAIL %s: %s (%d)\n", what, cuda_dl_error(&g_cu, e), e);
        ++g_failures;
    }
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *dev_upload(const void *host, size_t bytes)
{
    cuda_dl_ptr p = 0;
    check_cu(g_cu.MemAlloc(&p, bytes ? bytes : 16), "cuMemAlloc");
    if (p && bytes)
        check_cu(g_cu.MemcpyHtoD(p, host, bytes), "cuMemcpyHtoD");
    return (void *)(uintptr_t)p;
}

static void dev_free(void *p)
{
    if (p)
        check_cu(g_cu.MemFree((cuda_dl_ptr)(uintptr_t)p), "cuMemFree");
}

static size_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

static size_t device_free_bytes(void)
{
    size_t free_bytes = 0, total = 0;
    check_cu(g_cu.MemGetInfo(&free_bytes, &total), "cuMemGetInfo");
    return free_bytes;
}

/* ---- the soak's calls: one plan each, device buffers uploaded once ---- */

typedef struct soak_call {
    const char *name;
    bool paged;
    paged_problem pp;
    varlen_problem vp;
    r35a_plan *plan;
    r35a_plan_info info;
    r35a_paged_attention_args pa;
    r35a_varlen_attention_args va;
    void *dev[12];
    int ndev;
    void *out;                   /* device output (with the harness's guard bytes) */
    uint8_t *golden;             /* the first run's output */
    size_t out_bytes;
} soak_call;

static void *keep(soak_call *c, const void *host, size_t bytes)
{
    if (!host)
        return NULL;
    return c->dev[c->ndev++] = dev_upload(host, bytes);
}

static bool setup_paged(r35a_context *ctx, soak_call *c, const char *name, const paged_spec *s, int index)
{
    memset(c, 0, sizeof *c);
    c->name = name;
    c->paged = true;
    tu_rng rng;
    tu_rng_init(&rng, tu_case_seed("soak", index));
    paged_problem *p = &c->pp;
    if (paged_problem_init(p, s, &rng) != 0 || r35a_paged_attention_plan(ctx, &p->desc, &c->plan) != R35A_OK) {
        printf("FAIL soak %s: setup: %s\n", name, r35a_last_error_detail());
        return false;
    }
    c->info.struct_size = sizeof c->info;
    r35a_plan_get_info(c->plan, &c->info);
    tu_poison(p->out_alloc, p->out_alloc_bytes);
    c->out_bytes = p->out_alloc_bytes;
    c->out = keep(c, p->out_alloc, p->out_alloc_bytes);
    c->pa = (r35a_paged_attention_args){
        .struct_size = sizeof c->pa, .q = keep(c, p->q, p->q_bytes), .k_cache = keep(c, p->k, p->k_bytes),
        .v_cache = keep(c, p->v, p->v_bytes), .out = (uint8_t *)c->out + p->out_guard_bytes,
        .seq_lens = keep(c, p->seq_lens, sizeof(int32_t) * (size_t)s->num_seqs),
        .query_start_loc = keep(c, p->query_start_loc, sizeof(int32_t) * ((size_t)s->num_seqs + 1)),
        .block_table = keep(c, p->block_table, sizeof(int32_t) * p->bt_entries),
        .alibi_slopes = keep(c, p->alibi, sizeof(float) * (size_t)s->num_q_heads),
        .sinks = keep(c, p->sinks, sizeof(float) * (size_t)s->num_q_heads)};
    if (c->info.workspace_bytes) {
        cuda_dl_ptr ws = 0;
        check_cu(g_cu.MemAlloc(&ws, c->info.workspace_bytes), "cuMemAlloc workspace");
        c->dev[c->ndev++] = (void *)(uintptr_t)ws;
    }
    return true;
}

static bool setup_varlen(r35a_context *ctx, soak_call *c, const char *name, const varlen_spec *s, int index)
{
    memset(c, 0, sizeof *c);
    c->name = name;
    tu_rng rng;
    tu_rng_init(&rng, tu_case_seed("soak", index));
    varlen_problem *p = &c->vp;
    if (varlen_problem_init(p, s, &rng) != 0 || r35a_varlen_attention_plan(ctx, &p->desc, &c->plan) != R35A_OK) {
        printf("FAIL soak %s: setup: %s\n", name, r35a_last_error_detail());
        return false;
    }
    c->info.struct_size = sizeof c->info;
    r35a_plan_get_info(c->plan, &c->info);
    tu_poison(p->out_alloc, p->out_alloc_bytes);
    c->out_bytes = p->out_alloc_bytes;
    c->out = keep(c, p->out_alloc, p->out_alloc_bytes);
    c->va = (r35a_varlen_attention_args){
        .struct_size = sizeof c->va, .q = keep(c, p->q, p->q_bytes), .k = keep(c, p->k, p->k_bytes),
        .v = keep(c, p->v, p->v_bytes), .out = (uint8_t *)c->out + p->out_guard_bytes,
        .cu_seqlens = keep(c, p->cu_seqlens, sizeof(int32_t) * ((size_t)s->num_segments + 1)),
        .sinks = keep(c, p->sinks, sizeof(float) * (size_t)s->num_q_heads)};
    return true;
}

static void *workspace_of(const soak_call *c) { return c->info.workspace_bytes ? c->dev[c->ndev - 1] : NULL; }

static r35a_status run_call(r35a_context *ctx, const soak_call *c, void *stream)
{
    return c->paged ? r35a_paged_attention_run(ctx, c->plan, &c->pa, workspace_of(c), c->info.workspace_bytes, stream)
                    : r35a_varlen_attention_run(ctx, c->plan, &c->va, workspace_of(c), c->info.workspace_bytes, stream);
}

/* The first run's output against the oracle (the golden copy every later run must equal). */
static bool check_first(soak_call *c)
{
    uint8_t *out = c->paged ? c->pp.out_alloc : c->vp.out_alloc;
    check_cu(g_cu.MemcpyDtoH(out, (cuda_dl_ptr)(uintptr_t)c->out, c->out_bytes), "cuMemcpyDtoH");
    const r35a_dtype dt = c->paged ? c->pp.spec.dtype : c->vp.spec.dtype;
    const int32_t T = c->paged ? c->pp.num_tokens : c->vp.num_tokens;
    const int32_t hq = c->paged ? c->pp.spec.num_q_heads : c->vp.spec.num_q_heads;
    const int32_t D = c->paged ? c->pp.spec.head_size : c->vp.spec.head_size;
    const int64_t ots = c->paged ? c->pp.desc.o_token_stride : c->vp.desc.o_token_stride;
    const int64_t ohs = c->paged ? c->pp.desc.o_head_stride : c->vp.desc.o_head_stride;
    const size_t guard = (c->paged ? c->pp.out_guard_bytes : c->vp.out_guard_bytes) / tu_dtype_size(dt);
    const double *ref = c->paged ? c->pp.ref : c->vp.ref;
    tu_check k;
    tu_check_begin(&k, dt, c->paged ? c->pp.ref_max : c->vp.ref_max, "t,h,e,-");
    for (int32_t t = 0; t < T; ++t)
        for (int32_t h = 0; h < hq; ++h)
            for (int32_t e = 0; e < D; ++e)
                tu_check_elem(&k, out, guard + (size_t)(t * ots + h * ohs + e),
                              ref[((size_t)t * (size_t)hq + (size_t)h) * (size_t)D + (size_t)e], t, h, e, 0);
    tu_check_untouched(&k, out, c->paged ? c->pp.out_mask : c->vp.out_mask, c->out_bytes);
    if (!tu_check_passed(&k)) {
        tu_check_report(&k, c->name);
        return false;
    }
    c->golden = malloc(c->out_bytes);
    memcpy(c->golden, out, c->out_bytes);
    printf("[soak_gpu] %-14s %-60s error %.2e against the oracle\n", c->name, c->info.implementation,
           tu_check_error(&k));
    return true;
}

static bool same_as_golden(const soak_call *c, uint8_t *scratch)
{
    check_cu(g_cu.MemcpyDtoH(scratch, (cuda_dl_ptr)(uintptr_t)c->out, c->out_bytes), "cuMemcpyDtoH");
    return memcmp(scratch, c->golden, c->out_bytes) == 0;
}

int main(int argc, char **argv)
{
    long runs = 1000000;
    int checkpoints = 20;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = atol(argv[++i]);
        else if (strcmp(argv[i], "--checkpoints") == 0 && i + 1 < argc)
            checkpoints = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--runs N] [--checkpoints K]\n", argv[0]);
            return 2;
        }
    }
    if (checkpoints < 2)
        checkpoints = 2;
    tu_begin("soak_gpu");
    char why[256];
    if (cuda_dl_open(&g_cu, 0, why, sizeof why) != 0) {
        printf("SKIP: %s\n", why);
        return 77;
    }
    void *stream = NULL;
    check_cu(g_cu.StreamCreate(&stream, 1 /* non-blocking */), "cuStreamCreate");
    r35a_context_options o;
    r35a_context_options_init(&o);
    o.backend = R35A_BACKEND_GPU;
    r35a_context *ctx = NULL;
    if (r35a_context_create(&o, &ctx) != R35A_OK) {
        printf("SKIP: no GPU context: %s\n", r35a_last_error_detail());
        return 77;
    }
    r35a_context_info info = {.struct_size = sizeof info};
    r35a_context_get_info(ctx, &info);
    printf("[soak_gpu] context: %s %s: %s\n", info.backend_name, info.arch, info.reason);

    /* the calls: a decode variant (one launch, split-KV), a mixed batch (two launches), the portable
     * kernel (softcap), an encoder variant, the portable varlen kernel (causal) */
    enum { NCALLS = 5 };
    soak_call calls[NCALLS];
    paged_spec ps;
    varlen_spec vs;
    bool ok = true;
    paged_spec_init(&ps, R35A_DTYPE_F16, 32, 8, 128, 16);
    paged_spec_add_seq(&ps, 2048, 1);
    ps.shuffle_pages = true;
    ok = setup_paged(ctx, &calls[0], "decode", &ps, 0) && ok;
    paged_spec_init(&ps, R35A_DTYPE_BF16, 16, 4, 128, 16);
    paged_spec_add_seq(&ps, 300, 1);
    paged_spec_add_seq(&ps, 90, 12);
    paged_spec_add_seq(&ps, 500, 4);
    ok = setup_paged(ctx, &calls[1], "mixed", &ps, 1) && ok;
    paged_spec_init(&ps, R35A_DTYPE_F16, 8, 2, 64, 16);
    paged_spec_add_seq(&ps, 700, 1);
    paged_spec_add_seq(&ps, 33, 2);
    ps.logit_softcap = 30.f;
    ok = setup_paged(ctx, &calls[2], "generic_paged", &ps, 2) && ok;
    varlen_spec_init(&vs, R35A_DTYPE_BF16, 8, 8, 64);
    varlen_spec_add_segment(&vs, 200);
    varlen_spec_add_segment(&vs, 57);
    ok = setup_varlen(ctx, &calls[3], "encoder", &vs, 3) && ok;
    varlen_spec_init(&vs, R35A_DTYPE_F16, 8, 2, 96);
    varlen_spec_add_segment(&vs, 64);
    vs.causal = 1;
    ok = setup_varlen(ctx, &calls[4], "generic_varlen", &vs, 4) && ok;
    if (!ok) {
        printf("[soak_gpu] FAILED (setup)\n");
        return 1;
    }
    check_cu(g_cu.CtxSynchronize(), "cuCtxSynchronize");

    /* host time of a plan call: plan + destroy of each call's descriptor, many times */
    const int plan_reps = 2000;
    double t0 = now_seconds();
    for (int r = 0; r < plan_reps; ++r)
        for (int i = 0; i < NCALLS; ++i) {
            r35a_plan *p = NULL;
            const r35a_status st = calls[i].paged ? r35a_paged_attention_plan(ctx, &calls[i].pp.desc, &p)
                                                  : r35a_varlen_attention_plan(ctx, &calls[i].vp.desc, &p);
            if (st != R35A_OK)
                ++g_failures;
            r35a_plan_destroy(p);
        }
    const double plan_us = 1e6 * (now_seconds() - t0) / (plan_reps * NCALLS);

    /* first runs: golden outputs, checked against the oracle */
    for (int i = 0; i < NCALLS; ++i)
        if (run_call(ctx, &calls[i], stream) != R35A_OK) {
            printf("FAIL soak %s: run: %s\n", calls[i].name, r35a_last_error_detail());
            ok = false;
        }
    check_cu(g_cu.StreamSynchronize(stream), "cuStreamSynchronize");
    for (int i = 0; i < NCALLS; ++i)
        ok = check_first(&calls[i]) && ok;
    if (!ok) {
        printf("[soak_gpu] FAILED (first runs)\n");
        return 1;
    }

    /* host time of a run call with the queue never full: bursts of 200 after a synchronize */
    double burst_seconds = 0.0;
    long burst_runs = 0;
    for (int b = 0; b < 50; ++b) {
        check_cu(g_cu.StreamSynchronize(stream), "cuStreamSynchronize");
        t0 = now_seconds();
        for (int r = 0; r < 200; ++r)
            if (run_call(ctx, &calls[r % NCALLS], stream) != R35A_OK)
                ++g_failures;
        burst_seconds += now_seconds() - t0;
        burst_runs += 200;
    }
    t0 = now_seconds();
    for (int r = 0; r < 100000; ++r)
        if (r35a_context_check_device(ctx) != R35A_OK)
            ++g_failures;
    const double check_ns = 1e9 * (now_seconds() - t0) / 100000;
    check_cu(g_cu.StreamSynchronize(stream), "cuStreamSynchronize");

    /* the soak: runs round-robin over the calls, checkpoints in between */
    uint8_t *scratch = NULL;
    size_t scratch_bytes = 0;
    for (int i = 0; i < NCALLS; ++i)
        scratch_bytes = calls[i].out_bytes > scratch_bytes ? calls[i].out_bytes : scratch_bytes;
    scratch = malloc(scratch_bytes);
    size_t rss0 = 0, rss_max = 0, dev0 = 0, dev_min = (size_t)-1;
    int mismatches = 0;
    printf("[soak_gpu] checkpoint      runs   rss MiB   device free MiB   identical\n");
    const double soak0 = now_seconds();
    long done = 0;
    for (int cp = 0; cp <= checkpoints; ++cp) {
        const long until = runs * cp / checkpoints;
        for (; done < until; ++done)
            if (run_call(ctx, &calls[done % NCALLS], stream) != R35A_OK) {
                printf("FAIL soak run %ld (%s): %s\n", done, calls[done % NCALLS].name, r35a_last_error_detail());
                ++g_failures;
                break;
            }
        check_cu(g_cu.StreamSynchronize(stream), "cuStreamSynchronize");
        if (r35a_context_check_device(ctx) != R35A_OK) {
            printf("FAIL soak: a device error on valid data: %s\n", r35a_last_error_detail());
            ++g_failures;
        }
        int same = 0;
        for (int i = 0; i < NCALLS; ++i)
            same += same_as_golden(&calls[i], scratch);
        mismatches += NCALLS - same;
        const size_t rss = rss_bytes(), dev = device_free_bytes();
        if (cp == 1) { /* the baseline: after the first stretch of runs (allocator and driver warm) */
            rss0 = rss_max = rss;
            dev0 = dev_min = dev;
        } else if (cp > 1) {
            rss_max = rss > rss_max ? rss : rss_max;
            dev_min = dev < dev_min ? dev : dev_min;
        }
        printf("[soak_gpu] %10d %9ld %9.2f %17.2f   %d/%d\n", cp, done, rss / 1048576.0, dev / 1048576.0, same, NCALLS);
        if (g_failures > 20)
            break;
    }
    const double soak_seconds = now_seconds() - soak0;
    free(scratch);

    const double rss_growth = ((double)rss_max - (double)rss0) / 1048576.0;
    const double dev_growth = ((double)dev0 - (double)dev_min) / 1048576.0;
    const double run_us = 1e6 * burst_seconds / (double)burst_runs;
    /* no growth: RSS within 1 MiB of the baseline (page-granular noise of stdio and the driver),
     * device memory exactly constant */
    const bool grew = rss_growth > 1.0 || dev_growth > 0.0;
    printf("[soak_gpu] host time: plan call %.2f us (plan + destroy), run call %.2f us (bursts of 200 after a "
           "synchronize; target <= 5 us), r35a_context_check_device %.0f ns; soak wall time %.2f us per run\n",
           plan_us, run_us, check_ns, 1e6 * soak_seconds / (double)(done ? done : 1));
    for (int i = 0; i < NCALLS; ++i) {
        r35a_plan_destroy(calls[i].plan);
        for (int k = 0; k < calls[i].ndev; ++k)
            dev_free(calls[i].dev[k]);
        free(calls[i].golden);
        if (calls[i].paged)
            paged_problem_free(&calls[i].pp);
        else
            varlen_problem_free(&calls[i].vp);
    }
    r35a_context_destroy(ctx);
    check_cu(g_cu.StreamDestroy(stream), "cuStreamDestroy");
    const bool failed = g_failures || mismatches || grew || done < runs;
    printf("[soak_gpu] soak: %ld runs in %.1f s, %d outputs differing from the first run, RSS growth %.2f MiB, "
           "device memory growth %.2f MiB, run call %.2f us, plan call %.2f us: %s\n",
           done, soak_seconds, mismatches, rss_growth, dev_growth, run_us, plan_us, failed ? "FAILED" : "PASSED");
    return failed ? 1 : 0;
}
