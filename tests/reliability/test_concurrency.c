/*
 * test_concurrency.c - the library used from many threads at once.
 *
 * Phases (8 threads each):
 *   0. cold start: the process's very first library calls are 8 concurrent context creations
 *      (GPU, AUTO, then reference), plans and runs: the once-guarded environment knobs and HIP
 *      runtime probe race here;
 *   A. 8 threads share one context, running a mix of paged decode / speculative decode / chunked
 *      prefill and varlen encoder / causal calls, with plans made once by the main thread and
 *      shared, and plans each thread makes (and destroys) itself;
 *   B. 8 contexts in one process, one per thread, created and destroyed concurrently;
 * plus, in every phase, failing calls interleaved with good ones: each thread's error detail must
 * be its own (thread-local) and a success must leave an empty detail.
 *
 * Every output must be bit-identical to the single-threaded run of the same problem (itself checked
 * against the float64 oracle first). Run it under ThreadSanitizer with tools/test_reliability.sh.
 * R35A_TEST_SCALE scales the iterations; --quick runs a few per thread.
 */
#define _POSIX_C_SOURCE 200809L

#include "harness.h"
#include "rdna35attn.h"
#include "test_util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NTHREADS 8
#define NPAGED 6
#define NVARLEN 4
#define NJOBS (NPAGED + NVARLEN)

static paged_problem g_paged[NPAGED];
static varlen_problem g_varlen[NVARLEN];
static uint8_t *g_baseline[NJOBS];   /* single-threaded output allocations, guards included */
static size_t g_out_bytes[NJOBS];

static size_t job_out_bytes(int j)
{
    return j < NPAGED ? g_paged[j].out_alloc_bytes : g_varlen[j - NPAGED].out_alloc_bytes;
}

/* ---- the problems ---- */

static int build_problems(uint64_t seed)
{
    tu_rng rng;
    tu_rng_init(&rng, seed);
    paged_spec ps[NPAGED];
    /* 0: batched decode, GQA 4, f16, page 16 */
    paged_spec_init(&ps[0], R35A_DTYPE_F16, 8, 2, 64, 16);
    paged_spec_add_seq(&ps[0], 97, 1);
    paged_spec_add_seq(&ps[0], 0, 0); /* padding slot */
    paged_spec_add_seq(&ps[0], 33, 1);
    paged_spec_add_seq(&ps[0], 128, 1);
    /* 1: speculative decode M = 4 and 8, bf16, page 32, window */
    paged_spec_init(&ps[1], R35A_DTYPE_BF16, 8, 1, 128, 32);
    paged_spec_add_seq(&ps[1], 80, 4);
    paged_spec_add_seq(&ps[1], 8, 8);
    ps[1].window = 24;
    ps[1].shuffle_pages = true;
    ps[1].garbage_unreached = true;
    /* 2: mixed batch with a chunked prefill (M = 24), ALiBi, softcap, NHD K layout */
    paged_spec_init(&ps[2], R35A_DTYPE_F16, 4, 4, 64, 16);
    paged_spec_add_seq(&ps[2], 60, 24);
    paged_spec_add_seq(&ps[2], 41, 2);
    ps[2].use_alibi = 1;
    ps[2].logit_softcap = 30.0f;
    ps[2].k_layout.nhd = true;
    /* 3: f32, odd head size, page 7, padded strides */
    paged_spec_init(&ps[3], R35A_DTYPE_F32, 6, 3, 40, 7);
    paged_spec_add_seq(&ps[3], 50, 3);
    paged_spec_add_seq(&ps[3], 3, 3);
    ps[3].q_head_pad = 8;
    ps[3].o_token_pad = 5;
    ps[3].bt_pad = 2;
    /* 4: many short sequences */
    paged_spec_init(&ps[4], R35A_DTYPE_F16, 2, 1, 32, 16);
    for (int i = 0; i < 12; ++i)
        paged_spec_add_seq(&ps[4], 1 + 7 * i, 1 + i % 3);
    /* 5: window of 1, bf16 */
    paged_spec_init(&ps[5], R35A_DTYPE_BF16, 4, 2, 64, 16);
    paged_spec_add_seq(&ps[5], 70, 5);
    ps[5].window = 1;
    for (int i = 0; i < NPAGED; ++i)
        if (paged_problem_init(&g_paged[i], &ps[i], &rng) != 0) {
            printf("FAIL: cannot build paged problem %d\n", i);
            return -1;
        }

    varlen_spec vs[NVARLEN];
    /* 0: ViT-like encoder, separate buffers */
    varlen_spec_init(&vs[0], R35A_DTYPE_F16, 4, 4, 64);
    varlen_spec_add_segment(&vs[0], 40);
    varlen_spec_add_segment(&vs[0], 0);
    varlen_spec_add_segment(&vs[0], 17);
    /* 1: fused qkv, bf16, D = 80 */
    varlen_spec_init(&vs[1], R35A_DTYPE_BF16, 2, 2, 80);
    varlen_spec_add_segment(&vs[1], 33);
    varlen_spec_add_segment(&vs[1], 9);
    vs[1].layout = VARLEN_FUSED;
    /* 2: causal with GQA */
    varlen_spec_init(&vs[2], R35A_DTYPE_F16, 4, 2, 32);
    varlen_spec_add_segment(&vs[2], 50);
    vs[2].causal = 1;
    /* 3: f32, D = 72, padded */
    varlen_spec_init(&vs[3], R35A_DTYPE_F32, 2, 1, 72);
    varlen_spec_add_segment(&vs[3], 21);
    varlen_spec_add_segment(&vs[3], 12);
    vs[3].head_pad[0] = 3;
    vs[3].token_pad[3] = 4;
    for (int i = 0; i < NVARLEN; ++i)
        if (varlen_problem_init(&g_varlen[i], &vs[i], &rng) != 0) {
            printf("FAIL: cannot build varlen problem %d\n", i);
            return -1;
        }
    for (int j = 0; j < NJOBS; ++j)
        g_out_bytes[j] = job_out_bytes(j);
    return 0;
}

static r35a_status make_plan(r35a_context *ctx, int j, r35a_plan **plan)
{
    if (j < NPAGED)
        return r35a_paged_attention_plan(ctx, &g_paged[j].desc, plan);
    return r35a_varlen_attention_plan(ctx, &g_varlen[j - NPAGED].desc, plan);
}

/* Runs job j into out_alloc (guards included). seq_lens_override replaces seq_lens / cu_seqlens. */
static r35a_status run_job(r35a_context *ctx, const r35a_plan *plan, int j, uint8_t *out_alloc,
                           const int32_t *meta_override)
{
    if (j < NPAGED) {
        paged_problem *p = &g_paged[j];
        r35a_paged_attention_args a;
        memset(&a, 0, sizeof a);
        a.struct_size = sizeof a;
        a.q = p->q;
        a.k_cache = p->k;
        a.v_cache = p->v;
        a.out = out_alloc + p->out_guard_bytes;
        a.seq_lens = meta_override ? meta_override : p->seq_lens;
        a.query_start_loc = p->query_start_loc;
        a.block_table = p->block_table;
        a.alibi_slopes = p->alibi;
        return r35a_paged_attention_run(ctx, plan, &a, NULL, 0, NULL);
    }
    varlen_problem *p = &g_varlen[j - NPAGED];
    r35a_varlen_attention_args a;
    memset(&a, 0, sizeof a);
    a.struct_size = sizeof a;
    a.q = p->q;
    a.k = p->k;
    a.v = p->v;
    a.out = out_alloc + p->out_guard_bytes;
    a.cu_seqlens = meta_override ? meta_override : p->cu_seqlens;
    return r35a_varlen_attention_run(ctx, plan, &a, NULL, 0, NULL);
}

/* ---- the workers ---- */

typedef enum phase { PHASE_COLD, PHASE_SHARED_CONTEXT, PHASE_OWN_CONTEXT } phase;

typedef struct worker {
    int id;
    phase ph;
    int iterations;
    r35a_context *shared_ctx;        /* PHASE_SHARED_CONTEXT */
    r35a_plan *const *shared_plans;  /* [NJOBS], of shared_ctx */
    pthread_barrier_t *barrier;
    /* results */
    long calls, mismatches, failures;
    char first_failure[512];
    /* PHASE_COLD: outputs kept for comparison once the baselines exist */
    uint8_t *cold_out[NJOBS];
} worker;

static void worker_fail(worker *w, const char *fmt, const char *a, const char *b)
{
    w->failures++;
    if (w->first_failure[0] == '\0')
        snprintf(w->first_failure, sizeof w->first_failure, fmt, a, b);
}

/* A call that must fail with a detail only this thread can produce. */
static void bad_call(worker *w, r35a_context *ctx, const r35a_plan *plan, int j, uint8_t *out)
{
    size_t entries = j < NPAGED ? (size_t)g_paged[j].desc.num_seqs : (size_t)g_varlen[j - NPAGED].desc.num_segments + 1;
    int32_t *meta = malloc(sizeof(int32_t) * entries);
    memcpy(meta, j < NPAGED ? g_paged[j].seq_lens : g_varlen[j - NPAGED].cu_seqlens, sizeof(int32_t) * entries);
    meta[0] = -1000 - w->id; /* seq_lens[0] < 0, or cu_seqlens[0] != 0 */
    char want[64];
    snprintf(want, sizeof want, "%s[0]: %d ", j < NPAGED ? "seq_lens" : "cu_seqlens", -1000 - w->id);
    memset(out, 0xFF, g_out_bytes[j]);
    r35a_status st = run_job(w->ph == PHASE_SHARED_CONTEXT ? w->shared_ctx : ctx, plan, j, out, meta);
    const char *detail = r35a_last_error_detail();
    if (st != R35A_ERR_INVALID_DATA || !strstr(detail, want))
        worker_fail(w, "bad call: wanted INVALID_DATA with \"%s\", got \"%s\"", want, detail);
    if (tu_first_unpoisoned(out, g_out_bytes[j]) != (size_t)-1)
        worker_fail(w, "bad call wrote its output%s%s", "", "");
    free(meta);
    w->calls++;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    tu_rng rng;
    tu_rng_init(&rng, 0xC0FFEEull + (uint64_t)w->id * 7919u);
    size_t max_out = 0;
    for (int j = 0; j < NJOBS; ++j)
        max_out = g_out_bytes[j] > max_out ? g_out_bytes[j] : max_out;
    uint8_t *out = malloc(max_out);

    pthread_barrier_wait(w->barrier); /* all threads start their first call together */
    r35a_context *ctx = w->shared_ctx;
    if (w->ph == PHASE_COLD) {
        /* the first calls of the process: GPU and AUTO requests race through the once-guarded
         * runtime probe (dlopen of the HIP runtime) and the environment knobs */
        r35a_context_options opt;
        r35a_context_options_init(&opt);
        opt.backend = w->id % 2 ? R35A_BACKEND_GPU : R35A_BACKEND_AUTO;
        r35a_context *probe = NULL;
        r35a_status st = r35a_context_create(&opt, &probe);
        if (st != R35A_OK && !(opt.backend == R35A_BACKEND_GPU && st == R35A_ERR_BACKEND_UNAVAILABLE))
            worker_fail(w, "context creation: %s: %s", r35a_status_string(st), r35a_last_error_detail());
        if (st != R35A_OK && r35a_last_error_detail()[0] == '\0')
            worker_fail(w, "context creation failed without a detail%s%s", "", "");
        r35a_context_destroy(probe);
    }
    if (w->ph != PHASE_SHARED_CONTEXT) {
        r35a_context_options opt;
        r35a_context_options_init(&opt);
        opt.backend = R35A_BACKEND_REFERENCE; /* host pointers below */
        if (r35a_context_create(&opt, &ctx) != R35A_OK) {
            worker_fail(w, "context creation failed: %s%s", r35a_last_error_detail(), "");
            free(out);
            return NULL;
        }
        r35a_context_info info;
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        if (r35a_context_get_info(ctx, &info) != R35A_OK || strcmp(info.backend_name, "reference") != 0)
            worker_fail(w, "context info wrong: %s%s", info.backend_name, "");
    }
    r35a_plan *own_plans[NJOBS] = {0};

    for (int it = 0; it < w->iterations; ++it) {
        int j = w->ph == PHASE_COLD ? it % NJOBS : (int)tu_below(&rng, NJOBS);
        /* plan: the shared one, this thread's cached one, or a fresh one destroyed right after */
        const r35a_plan *plan = NULL;
        r35a_plan *fresh = NULL;
        uint32_t how = tu_below(&rng, 3);
        if (w->ph == PHASE_SHARED_CONTEXT && how == 0) {
            plan = w->shared_plans[j];
        } else if (how == 1) {
            if (!own_plans[j] && make_plan(ctx, j, &own_plans[j]) != R35A_OK)
                worker_fail(w, "plan failed: %s%s", r35a_last_error_detail(), "");
            plan = own_plans[j];
        } else {
            if (make_plan(ctx, j, &fresh) != R35A_OK)
                worker_fail(w, "plan failed: %s%s", r35a_last_error_detail(), "");
            plan = fresh;
        }
        if (!plan)
            continue;
        if (tu_below(&rng, 4) == 0)
            bad_call(w, ctx, plan, j, out);

        memset(out, 0xFF, g_out_bytes[j]);
        r35a_status st = run_job(ctx, plan, j, out, NULL);
        w->calls++;
        if (st != R35A_OK) {
            worker_fail(w, "run failed: %s: %s", r35a_status_string(st), r35a_last_error_detail());
        } else if (r35a_last_error_detail()[0] != '\0') {
            worker_fail(w, "a successful run left the detail \"%s\"%s", r35a_last_error_detail(), "");
        } else if (w->ph == PHASE_COLD) {
            if (!w->cold_out[j]) {
                w->cold_out[j] = malloc(g_out_bytes[j]);
                memcpy(w->cold_out[j], out, g_out_bytes[j]);
            }
        } else if (memcmp(out, g_baseline[j], g_out_bytes[j]) != 0) {
            w->mismatches++;
        }
        if (w->ph == PHASE_OWN_CONTEXT && w->shared_plans && tu_below(&rng, 8) == 0) {
            /* another context's plan must be refused, and write nothing */
            memset(out, 0xFF, g_out_bytes[j]);
            st = run_job(ctx, w->shared_plans[j], j, out, NULL);
            if (st != R35A_ERR_PLAN_MISMATCH || tu_first_unpoisoned(out, g_out_bytes[j]) != (size_t)-1)
                worker_fail(w, "another context's plan: got %s \"%s\"", r35a_status_string(st),
                            r35a_last_error_detail());
            w->calls++;
        }
        r35a_plan_destroy(fresh);
    }
    for (int j = 0; j < NJOBS; ++j)
        r35a_plan_destroy(own_plans[j]);
    if (w->ph != PHASE_SHARED_CONTEXT)
        r35a_context_destroy(ctx);
    free(out);
    return NULL;
}

static int run_phase(phase ph, const char *name, int iterations, r35a_context *shared_ctx,
                     r35a_plan *const *shared_plans, worker *workers)
{
    pthread_t threads[NTHREADS];
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, NTHREADS);
    for (int t = 0; t < NTHREADS; ++t) {
        memset(&workers[t], 0, sizeof workers[t]);
        workers[t].id = t;
        workers[t].ph = ph;
        workers[t].iterations = iterations;
        workers[t].shared_ctx = shared_ctx;
        workers[t].shared_plans = shared_plans;
        workers[t].barrier = &barrier;
        if (pthread_create(&threads[t], NULL, worker_main, &workers[t]) != 0) {
            printf("FAIL: pthread_create\n");
            exit(1);
        }
    }
    for (int t = 0; t < NTHREADS; ++t)
        pthread_join(threads[t], NULL);
    pthread_barrier_destroy(&barrier);

    long calls = 0, mismatches = 0, failures = 0;
    for (int t = 0; t < NTHREADS; ++t) {
        calls += workers[t].calls;
        mismatches += workers[t].mismatches;
        failures += workers[t].failures;
        if (workers[t].first_failure[0])
            printf("  thread %d: %s\n", t, workers[t].first_failure);
    }
    printf("[test_concurrency] phase %s: %d threads, %ld calls, %ld outputs differing from the "
           "single-threaded run, %ld failed checks\n",
           name, NTHREADS, calls, mismatches, failures);
    return mismatches == 0 && failures == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    tu_begin("test_concurrency");
    if (build_problems(tu_case_seed("concurrency", 0)) != 0)
        return 1;
    int iterations = quick ? 6 : tu_scaled(40);
    int rc = 0;
    static worker workers[NTHREADS];

    /* Phase 0 first: nothing has called the library yet. */
    rc |= run_phase(PHASE_COLD, "0 (cold start, 8 new contexts)", NJOBS, NULL, NULL, workers);

    /* Baselines, single-threaded, each checked against the oracle. */
    r35a_context *ctx = tu_context_create();
    if (!ctx)
        return 1;
    r35a_plan *shared[NJOBS];
    for (int j = 0; j < NJOBS; ++j) {
        char label[64];
        snprintf(label, sizeof label, "baseline:%d", j);
        bool ok = j < NPAGED ? paged_problem_check(ctx, &g_paged[j], NULL, tu_mem_host(), label)
                             : varlen_problem_check(ctx, &g_varlen[j - NPAGED], NULL, tu_mem_host(), label);
        if (!ok)
            rc = 1;
        if (make_plan(ctx, j, &shared[j]) != R35A_OK) {
            printf("FAIL: plan %d: %s\n", j, r35a_last_error_detail());
            return 1;
        }
        g_baseline[j] = malloc(g_out_bytes[j]);
        memset(g_baseline[j], 0xFF, g_out_bytes[j]);
        if (run_job(ctx, shared[j], j, g_baseline[j], NULL) != R35A_OK) {
            printf("FAIL: baseline %d: %s\n", j, r35a_last_error_detail());
            return 1;
        }
        /* the same plan run again single-threaded is bit-identical too */
        uint8_t *again = malloc(g_out_bytes[j]);
        memset(again, 0xFF, g_out_bytes[j]);
        if (run_job(ctx, shared[j], j, again, NULL) != R35A_OK || memcmp(again, g_baseline[j], g_out_bytes[j]) != 0) {
            printf("FAIL: job %d: a repeated single-threaded run differs\n", j);
            rc = 1;
        }
        free(again);
    }
    long cold_mismatch = 0;
    for (int t = 0; t < NTHREADS; ++t)
        for (int j = 0; j < NJOBS; ++j) {
            if (workers[t].cold_out[j] && memcmp(workers[t].cold_out[j], g_baseline[j], g_out_bytes[j]) != 0)
                cold_mismatch++;
            free(workers[t].cold_out[j]);
        }
    if (cold_mismatch) {
        printf("FAIL: %ld cold-start outputs differ from the single-threaded run\n", cold_mismatch);
        rc = 1;
    }

    rc |= run_phase(PHASE_SHARED_CONTEXT, "A (one shared context)", iterations, ctx, shared, workers);
    rc |= run_phase(PHASE_OWN_CONTEXT, "B (8 contexts)", iterations, NULL, shared, workers);

    for (int j = 0; j < NJOBS; ++j) {
        r35a_plan_destroy(shared[j]);
        free(g_baseline[j]);
    }
    r35a_context_destroy(ctx);
    for (int i = 0; i < NPAGED; ++i)
        paged_problem_free(&g_paged[i]);
    for (int i = 0; i < NVARLEN; ++i)
        varlen_problem_free(&g_varlen[i]);
    printf("[test_concurrency] %s\n", rc ? "FAILED" : "passed");
    return rc;
}
