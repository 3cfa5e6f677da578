/* bench.c - r35a_bench: times librdna35attn calls, one row per problem shape.
 *
 * Per row: build the problem on the host (random inputs, shuffled block table), plan it on the
 * measured context, upload it into enough independent copies to cover the working set (device
 * memory on a GPU context), run one warm-up and then N timed calls rotating through the copies,
 * optionally the same calls captured in a HIP/CUDA graph and replayed, and compare the output of
 * copy 0 with a reference context's on the host inputs. `r35a_bench --help` states the bytes-moved
 * model (also in bench.h) and the timing.
 */
#define _POSIX_C_SOURCE 200809L

#include "bench.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Adaptive iteration counts: enough timed calls (or graph replays) to fill about this long, within
 * the bounds. A GPU call is timed with its own synchronization, so its count is capped lower. */
static const double HOST_ROW_SECONDS = 0.5;
static const double GPU_ROW_SECONDS = 0.25;
enum {
    MIN_ITERS = 3,
    MAX_HOST_ITERS = 100000,
    MAX_GPU_ITERS = 2000,
    MIN_GRAPH_CALLS = 16,        /* calls per graph, at least: amortizes the graph launch */
    MIN_GRAPH_REPLAYS = 5,
    MAX_GRAPH_REPLAYS = 200,
    MAX_COPIES = 4096            /* the rotation's copies (and the calls one graph captures) */
};

typedef struct bench_session {
    r35a_context *context;       /* the context measured */
    r35a_context *reference;     /* the one errors are taken against; NULL with --no-check */
    bench_memory mem;            /* the memory `context` works on */
    bool mem_open;
    void *event_start, *event_stop; /* GPU: the per-call timer */
    bench_machine machine;
    bench_row *rows;
    int num_rows;
    bool any_check_failed;
} bench_session;

/* Everything one row allocates, released by release_row(). */
typedef struct row_state {
    bench_problem problem;
    r35a_plan *plan;
    void *workspace;             /* in mem */
    size_t workspace_bytes;
    void **copies;               /* num_copies slabs in mem, laid out like problem.host */
    int num_copies;
    double *samples;
} row_state;

/* ---- errors ---------------------------------------------------------------------------------- */

/* Reports a failed library call; must run before any other library call clears the detail. */
static int library_error(const char *call, r35a_status status)
{
    fprintf(stderr, "r35a_bench: %s failed: %s: %s\n", call, r35a_status_string(status),
            r35a_last_error_detail());
    return BENCH_EXIT_ERROR;
}

static int bench_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int bench_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("r35a_bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return BENCH_EXIT_ERROR;
}

static int memory_error(const bench_session *s, const char *what)
{
    return bench_error("%s in %s memory failed: %s", what, s->mem.name, s->mem.error(s->mem.self));
}

static const char *plan_call(const bench_problem *p)
{
    return p->op == BENCH_OP_PAGED ? "r35a_paged_attention_plan" : "r35a_varlen_attention_plan";
}

static const char *run_call(const bench_problem *p)
{
    return p->op == BENCH_OP_PAGED ? "r35a_paged_attention_run" : "r35a_varlen_attention_run";
}

/* ---- seeds ----------------------------------------------------------------------------------- */

static uint64_t fresh_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    x ^= (uint64_t)getpid() << 40;
    x *= 0xd1b54a32d192ed03ull;
    return x ^ (x >> 29);
}

/* Each row's inputs depend only on the printed seed and the row's index, so --seed replays them. */
static uint64_t row_seed(uint64_t seed, int row)
{
    return seed ^ ((uint64_t)(row + 1) * 0xa0761d6478bd642full);
}

/* ---- session: contexts, memory, machine, peak ------------------------------------------------ */

static int create_context(r35a_backend backend, r35a_context **context)
{
    r35a_context_options options;
    r35a_context_options_init(&options);
    options.backend = backend;
    r35a_status st = r35a_context_create(&options, context);
    if (st == R35A_OK)
        return BENCH_EXIT_OK;
    if (st == R35A_ERR_BACKEND_UNAVAILABLE && backend == R35A_BACKEND_GPU)
        fprintf(stderr, "r35a_bench: no GPU backend is available (this build or machine has none); "
                        "--backend reference or auto runs the CPU reference\n");
    return library_error("r35a_context_create", st);
}

static int describe_context(const bench_options *opt, bench_session *s)
{
    bench_machine *m = &s->machine;
    m->context.struct_size = sizeof(m->context);
    r35a_status st = r35a_context_get_info(s->context, &m->context);
    if (st != R35A_OK)
        return library_error("r35a_context_get_info", st);
    if (opt->graph && m->context.backend == R35A_BACKEND_REFERENCE) {
        fprintf(stderr, "r35a_bench: --graph needs a GPU context; this run's is the reference (%s)\n",
                m->context.reason);
        return BENCH_EXIT_USAGE;
    }
    char why[512];
    if (!bench_memory_open(&m->context, &s->mem, why, sizeof(why)))
        return bench_error("%s", why);
    s->mem_open = true;
    snprintf(m->memory, sizeof(m->memory), "host memory");
    if (s->mem.gpu != NULL) {
        snprintf(m->device, sizeof(m->device), "%s", gpu_device_name(s->mem.gpu));
        snprintf(m->memory, sizeof(m->memory), "%s memory through %.100s, on the bench's own stream", s->mem.name,
                 gpu_device_library(s->mem.gpu));
        if (gpu_event_create(s->mem.gpu, &s->event_start) != 0 || gpu_event_create(s->mem.gpu, &s->event_stop) != 0)
            return memory_error(s, "creating the timing events");
    }
    return BENCH_EXIT_OK;
}

/* --min-working-set-mb, or the default of the memory: GPU max(512 MiB, 4 x the reported last-level
 * cache), host 0 (one copy: the reference runs far below the memory bandwidth). */
static void resolve_working_set(const bench_options *opt, bench_session *s)
{
    bench_machine *m = &s->machine;
    if (opt->min_working_set_mb >= 0.0) {
        m->working_set_mb = opt->min_working_set_mb;
        snprintf(m->working_set_why, sizeof(m->working_set_why), "--min-working-set-mb");
    } else if (s->mem.gpu != NULL) {
        const double llc_mb = (double)gpu_device_llc_bytes(s->mem.gpu) / 1048576.0;
        m->working_set_mb = fmax(BENCH_GPU_MIN_WORKING_SET_MB, 4.0 * llc_mb);
        if (llc_mb > 0.0)
            snprintf(m->working_set_why, sizeof(m->working_set_why), "GPU default: max(%lld MiB, 4 x %lld MiB L2)",
                     (long long)BENCH_GPU_MIN_WORKING_SET_MB, (long long)llc_mb);
        else
            snprintf(m->working_set_why, sizeof(m->working_set_why),
                     "GPU default: %lld MiB (> 4 x any gfx11 MALL; the runtime reports no last-level cache)",
                     (long long)BENCH_GPU_MIN_WORKING_SET_MB);
    } else {
        m->working_set_mb = 0.0;
        snprintf(m->working_set_why, sizeof(m->working_set_why),
                 "reference default: the CPU reference is compute-bound");
    }
}

static int find_peak(const bench_options *opt, bench_session *s)
{
    bench_machine *m = &s->machine;
    if (opt->peak_gbs > 0.0) {
        m->peak_gbs = opt->peak_gbs;
        snprintf(m->peak_method, sizeof(m->peak_method), "--peak-gbs");
        return BENCH_EXIT_OK;
    }
    char why[512];
    if (bench_measure_peak(&s->mem, m->context.arch, &m->peak_gbs, m->peak_method, sizeof(m->peak_method), why,
                           sizeof(why)) != 0)
        return bench_error("%s", why);
    m->peak_measured = true;
    return BENCH_EXIT_OK;
}

static int open_session(const bench_options *opt, bench_session *s)
{
    s->rows = calloc((size_t)(opt->num_shapes > 0 ? opt->num_shapes : 1), sizeof(bench_row));
    if (s->rows == NULL)
        return bench_error("cannot allocate %d result rows", opt->num_shapes);
    int rc = create_context(opt->backend, &s->context);
    if (rc == BENCH_EXIT_OK)
        rc = describe_context(opt, s);
    if (rc == BENCH_EXIT_OK && opt->check)
        rc = create_context(R35A_BACKEND_REFERENCE, &s->reference);
    if (rc != BENCH_EXIT_OK)
        return rc;
    bench_read_cpu_model(s->machine.cpu, sizeof(s->machine.cpu));
    s->machine.cpus = sysconf(_SC_NPROCESSORS_ONLN);
    s->machine.timing = s->mem.gpu == NULL
                            ? "CLOCK_MONOTONIC around each call"
                            : (opt->graph ? "events around each call on the bench's stream, each waited for "
                                            "(launch cost included); graph: events around each replay / calls"
                                          : "events around each call on the bench's stream, each waited for "
                                            "(launch cost included)");
    resolve_working_set(opt, s);
    return find_peak(opt, s);
}

static void close_session(bench_session *s)
{
    if (s->mem.gpu != NULL) {
        (void)gpu_event_destroy(s->mem.gpu, s->event_start);
        (void)gpu_event_destroy(s->mem.gpu, s->event_stop);
    }
    if (s->mem_open)
        bench_memory_close(&s->mem);
    r35a_context_destroy(s->reference);
    r35a_context_destroy(s->context);
    free(s->rows);
}

/* ---- one row: setup -------------------------------------------------------------------------- */

static int plan_row(bench_session *s, row_state *rs, bench_row *row)
{
    r35a_status st = bench_problem_plan(s->context, &rs->problem, &rs->plan);
    if (st != R35A_OK)
        return library_error(plan_call(&rs->problem), st);
    r35a_plan_info info;
    memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    st = r35a_plan_get_info(rs->plan, &info);
    if (st != R35A_OK)
        return library_error("r35a_plan_get_info", st);
    memcpy(row->implementation, info.implementation, sizeof(row->implementation));
    memcpy(row->fallback_reason, info.fallback_reason, sizeof(row->fallback_reason));
    row->implementation[sizeof(row->implementation) - 1] = '\0';
    row->fallback_reason[sizeof(row->fallback_reason) - 1] = '\0';
    memcpy(row->grid, info.grid, sizeof(row->grid));
    memcpy(row->block, info.block, sizeof(row->block));
    row->splits = info.num_splits;
    row->workspace_bytes = info.workspace_bytes;
    rs->workspace_bytes = info.workspace_bytes;
    if (rs->workspace_bytes > 0 && s->mem.alloc(s->mem.self, &rs->workspace, rs->workspace_bytes) != 0)
        return bench_error("cannot allocate the %zu-byte workspace in %s memory: %s", rs->workspace_bytes,
                           s->mem.name, s->mem.error(s->mem.self));
    return BENCH_EXIT_OK;
}

static int copies_needed(double working_set_mb, size_t slab_bytes)
{
    double n = ceil(working_set_mb * 1048576.0 / (double)(slab_bytes ? slab_bytes : 1));
    return n < 1.0 ? 1 : (n > MAX_COPIES ? MAX_COPIES : (int)n);
}

/* Copy 0 is uploaded from the host slab, the others are copies of copy 0 in the same memory. */
static int upload_copies(bench_session *s, row_state *rs)
{
    const bench_memory *mem = &s->mem;
    const size_t bytes = rs->problem.slab_bytes;
    int n = copies_needed(s->machine.working_set_mb, bytes);
    rs->copies = calloc((size_t)n, sizeof(void *));
    if (rs->copies == NULL)
        return bench_error("cannot allocate the list of %d buffer copies", n);
    for (int i = 0; i < n; i++) {
        if (mem->alloc(mem->self, &rs->copies[i], bytes) != 0)
            return bench_error("cannot allocate buffer copy %d of %d (%.1f MiB each) in %s memory: %s", i + 1, n,
                               (double)bytes / 1048576.0, mem->name, mem->error(mem->self));
        rs->num_copies = i + 1;
        int failed = i == 0 ? mem->upload(mem->self, rs->copies[0], rs->problem.host, bytes)
                            : mem->copy(mem->self, rs->copies[i], rs->copies[0], bytes);
        if (failed)
            return memory_error(s, "copying the problem");
    }
    if (mem->synchronize(mem->self) != 0)
        return memory_error(s, "waiting for the copies");
    return BENCH_EXIT_OK;
}

/* ---- one row: timing ------------------------------------------------------------------------- */

static int run_on_copy(bench_session *s, row_state *rs, int copy)
{
    r35a_status st = bench_problem_run(s->context, rs->plan, &rs->problem, rs->copies[copy], NULL, rs->workspace,
                                       rs->workspace_bytes, s->mem.stream);
    return st == R35A_OK ? BENCH_EXIT_OK : library_error(run_call(&rs->problem), st);
}

/* One call on `copy`, timed: host by the clock, GPU by events on the bench's stream; either way the
 * call has finished on return. */
static int time_call(bench_session *s, row_state *rs, int copy, double *seconds)
{
    if (s->mem.gpu == NULL) {
        const double t0 = bench_now_seconds();
        int rc = run_on_copy(s, rs, copy);
        *seconds = bench_now_seconds() - t0;
        return rc;
    }
    if (gpu_event_record(s->mem.gpu, s->event_start) != 0)
        return memory_error(s, "recording the start event");
    int rc = run_on_copy(s, rs, copy);
    if (rc != BENCH_EXIT_OK)
        return rc;
    if (gpu_event_record(s->mem.gpu, s->event_stop) != 0 ||
        gpu_event_elapsed(s->mem.gpu, s->event_start, s->event_stop, seconds) != 0)
        return memory_error(s, "timing the call");
    return BENCH_EXIT_OK;
}

static int adaptive_count(double target_s, double one_s, int lo, int hi)
{
    double n = ceil(target_s / fmax(one_s, 1e-7));
    return n < lo ? lo : (n > hi ? hi : (int)n);
}

/* One warm-up on copy 0, then timed calls on copies 1, 2, ... (cyclically), so with several
 * copies every timed call starts on buffers the previous calls did not touch. */
static int time_row(const bench_options *opt, bench_session *s, row_state *rs, bench_row *row)
{
    double warmup_s = 0.0;
    int rc = time_call(s, rs, 0, &warmup_s);
    if (rc != BENCH_EXIT_OK)
        return rc;
    const bool gpu = s->mem.gpu != NULL;
    row->iters = opt->iters > 0 ? opt->iters
                                : adaptive_count(gpu ? GPU_ROW_SECONDS : HOST_ROW_SECONDS, warmup_s, MIN_ITERS,
                                                 gpu ? MAX_GPU_ITERS : MAX_HOST_ITERS);
    rs->samples = malloc(sizeof(double) * (size_t)row->iters);
    if (rs->samples == NULL)
        return bench_error("cannot allocate %d timing samples", row->iters);
    for (int i = 0; i < row->iters; i++) {
        rc = time_call(s, rs, (i + 1) % rs->num_copies, &rs->samples[i]);
        if (rc != BENCH_EXIT_OK)
            return rc;
    }
    row->median_s = bench_median(rs->samples, row->iters);
    row->min_s = rs->samples[0];   /* sorted by bench_median */
    return BENCH_EXIT_OK;
}

/* Captures `calls` calls (rotating through the copies) into one graph. */
static int capture_calls(bench_session *s, row_state *rs, int calls, void **exec)
{
    gpu_device *rt = s->mem.gpu;
    if (gpu_capture_begin(rt) != 0)
        return memory_error(s, "beginning the graph capture");
    int rc = BENCH_EXIT_OK;
    for (int c = 0; c < calls && rc == BENCH_EXIT_OK; c++)
        rc = run_on_copy(s, rs, (c + 1) % rs->num_copies);
    if (gpu_capture_end(rt, rc == BENCH_EXIT_OK, exec) != 0 && rc == BENCH_EXIT_OK)
        rc = memory_error(s, "ending the graph capture");
    return rc;
}

/* --graph: one call per copy (at least MIN_GRAPH_CALLS) captured in a graph; one warm-up replay,
 * then replays timed with events; a sample is a replay's time / its calls. */
static int time_graph(const bench_options *opt, bench_session *s, row_state *rs, bench_row *row)
{
    gpu_device *rt = s->mem.gpu;
    const int calls = rs->num_copies > MIN_GRAPH_CALLS ? rs->num_copies : MIN_GRAPH_CALLS;
    void *exec = NULL;
    double *samples = NULL;
    double first_s = 0.0;
    int rc = capture_calls(s, rs, calls, &exec);
    if (rc == BENCH_EXIT_OK &&
        (gpu_graph_launch(rt, exec) != 0 || gpu_synchronize(rt) != 0 || gpu_event_record(rt, s->event_start) != 0 ||
         gpu_graph_launch(rt, exec) != 0 || gpu_event_record(rt, s->event_stop) != 0 ||
         gpu_event_elapsed(rt, s->event_start, s->event_stop, &first_s) != 0))
        rc = memory_error(s, "replaying the graph");
    int replays = 0;
    if (rc == BENCH_EXIT_OK) {
        replays = opt->iters > 0 ? (opt->iters > MIN_ITERS ? opt->iters : MIN_ITERS)
                                 : adaptive_count(GPU_ROW_SECONDS, first_s, MIN_GRAPH_REPLAYS, MAX_GRAPH_REPLAYS);
        samples = malloc(sizeof(double) * (size_t)replays);
        if (samples == NULL)
            rc = bench_error("cannot allocate %d timing samples", replays);
    }
    for (int r = 0; r < replays && rc == BENCH_EXIT_OK; r++) {
        double t = 0.0;
        if (gpu_event_record(rt, s->event_start) != 0 || gpu_graph_launch(rt, exec) != 0 ||
            gpu_event_record(rt, s->event_stop) != 0 || gpu_event_elapsed(rt, s->event_start, s->event_stop, &t) != 0)
            rc = memory_error(s, "replaying the graph");
        samples[r] = t / calls;
    }
    if (rc == BENCH_EXIT_OK) {
        row->graph_timed = true;
        row->graph_calls = calls;
        row->graph_replays = replays;
        row->graph_median_s = bench_median(samples, replays);
    }
    free(samples);
    if (exec != NULL && gpu_graph_destroy(rt, exec) != 0 && rc == BENCH_EXIT_OK)
        rc = memory_error(s, "destroying the graph");
    return rc;
}

/* ---- one row: error against the reference ---------------------------------------------------- */

/* Runs the problem on the reference context from the host slab into ref_out. */
static int run_reference(bench_session *s, const bench_problem *p, void *ref_out)
{
    r35a_plan *plan = NULL;
    void *workspace = NULL;
    r35a_plan_info info;
    memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    r35a_status st = bench_problem_plan(s->reference, p, &plan);
    int rc = st != R35A_OK ? library_error(plan_call(p), st) : BENCH_EXIT_OK;
    if (rc == BENCH_EXIT_OK && (st = r35a_plan_get_info(plan, &info)) != R35A_OK)
        rc = library_error("r35a_plan_get_info", st);
    if (rc == BENCH_EXIT_OK && info.workspace_bytes > 0 && (workspace = malloc(info.workspace_bytes)) == NULL)
        rc = bench_error("cannot allocate the reference's %zu-byte workspace", info.workspace_bytes);
    if (rc == BENCH_EXIT_OK) {
        memset(ref_out, 0xff, p->size[p->out_buffer]);   /* poisoned, like the measured output */
        st = bench_problem_run(s->reference, plan, p, p->host, ref_out, workspace,
                               info.workspace_bytes, NULL);
        if (st != R35A_OK)
            rc = library_error(run_call(p), st);
    }
    free(workspace);
    r35a_plan_destroy(plan);
    return rc;
}

static int check_row(bench_session *s, row_state *rs, bench_row *row)
{
    const bench_problem *p = &rs->problem;
    const size_t out_bytes = p->size[p->out_buffer];
    unsigned char *out = malloc(out_bytes ? out_bytes : 1);
    unsigned char *ref = malloc(out_bytes ? out_bytes : 1);
    int rc = BENCH_EXIT_OK;
    if (out == NULL || ref == NULL)
        rc = bench_error("cannot allocate 2 x %zu bytes for the error check", out_bytes);
    if (rc == BENCH_EXIT_OK &&
        s->mem.download(s->mem.self, out, (unsigned char *)rs->copies[0] + p->offset[p->out_buffer],
                        out_bytes) != 0)
        rc = memory_error(s, "downloading the output");
    if (rc == BENCH_EXIT_OK)
        rc = run_reference(s, p, ref);
    if (rc == BENCH_EXIT_OK) {
        row->max_error = bench_max_rel_error(p, out, ref);
        row->error_checked = true;
        row->error_vs_self = s->machine.context.backend == R35A_BACKEND_REFERENCE;
        row->check_failed = isnan(row->max_error) || row->max_error > bench_error_tolerance(p->dtype);
    }
    free(out);
    free(ref);
    return rc;
}

/* ---- one row: all of it ---------------------------------------------------------------------- */

static void release_row(bench_session *s, row_state *rs)
{
    for (int i = 0; i < rs->num_copies; i++)
        s->mem.release(s->mem.self, rs->copies[i]);
    free(rs->copies);
    if (rs->workspace != NULL)
        s->mem.release(s->mem.self, rs->workspace);
    r35a_plan_destroy(rs->plan);
    free(rs->samples);
    bench_problem_free(&rs->problem);
}

static void derive_rates(const bench_session *s, const bench_problem *p, bench_row *row)
{
    const double seconds = row->graph_timed ? row->graph_median_s : row->median_s;
    row->tokens = p->tokens;
    row->bytes_moved = p->bytes_moved;
    row->flops = p->flops;
    row->working_set_mb = (double)row->copies * (double)p->slab_bytes / 1048576.0;
    row->gbs = p->bytes_moved / seconds / 1e9;
    row->gflops = p->flops / seconds / 1e9;
    row->roofline_pct = 100.0 * row->gbs / s->machine.peak_gbs;
}

static int measure_row(const bench_options *opt, bench_session *s, int index, bench_row *row)
{
    row_state rs;
    memset(&rs, 0, sizeof(rs));
    memset(row, 0, sizeof(*row));
    row->shape = &opt->shapes[index];
    bench_shape_label(opt, row->shape, row->label, sizeof(row->label));
    char why[256];
    int rc = BENCH_EXIT_OK;
    if (bench_problem_build(opt, row->shape, row_seed(opt->seed, index), &rs.problem, why, sizeof(why)) != 0)
        rc = bench_error("row %d (%s): %s", index, row->label, why);
    if (rc == BENCH_EXIT_OK)
        rc = plan_row(s, &rs, row);
    if (rc == BENCH_EXIT_OK)
        rc = upload_copies(s, &rs);
    if (rc == BENCH_EXIT_OK)
        rc = time_row(opt, s, &rs, row);
    if (rc == BENCH_EXIT_OK && opt->graph)
        rc = time_graph(opt, s, &rs, row);
    if (rc == BENCH_EXIT_OK && s->reference != NULL && rs.problem.flops <= BENCH_CHECK_MAX_FLOPS)
        rc = check_row(s, &rs, row);
    if (rc == BENCH_EXIT_OK) {
        row->copies = rs.num_copies;
        derive_rates(s, &rs.problem, row);
    }
    release_row(s, &rs);
    return rc;
}

/* A progress line on stderr for long sweeps, rewritten in place; only on a terminal, so logs,
 * --json and --csv pipes stay clean. */
static void show_progress(int index, int total, double elapsed_s)
{
    if (!isatty(STDERR_FILENO))
        return;
    if (index < total)
        fprintf(stderr, "\r[r35a_bench] row %d/%d, %.1f s elapsed ", index + 1, total, elapsed_s);
    else
        fprintf(stderr, "\r%60s\r", "");
    fflush(stderr);
}

static int run_rows(const bench_options *opt, bench_session *s, double t0)
{
    bench_report_begin(opt, &s->machine);
    int total = opt->num_shapes;
    for (int i = 0; i < total; i++) {
        show_progress(i, total, bench_now_seconds() - t0);
        int rc = measure_row(opt, s, i, &s->rows[i]);
        show_progress(total, total, 0.0);
        if (rc != BENCH_EXIT_OK)
            return rc;
        s->num_rows = i + 1;
        s->any_check_failed = s->any_check_failed || s->rows[i].check_failed;
        bench_report_row(opt, &s->machine, &s->rows[i], i > 0 ? &s->rows[i - 1] : NULL);
    }
    return BENCH_EXIT_OK;
}

int main(int argc, char **argv)
{
    bench_options opt;
    bench_session session;
    memset(&session, 0, sizeof(session));
    bool help = false;
    int rc = bench_parse_options(argc, argv, &opt, &help);
    if (rc != BENCH_EXIT_OK || help) {
        bench_options_free(&opt);
        return rc;
    }
    if (opt.list) {
        /* every field of every row, in the order they would run */
        const unsigned varying = opt.varying;
        opt.varying = ~0u;
        for (int i = 0; i < opt.num_shapes; i++) {
            char label[96];
            bench_shape_label(&opt, &opt.shapes[i], label, sizeof label);
            printf("%s %s\n", opt.shapes[i].op == BENCH_OP_PAGED ? "paged" : "encoder", label);
        }
        opt.varying = varying;
        bench_options_free(&opt);
        return BENCH_EXIT_OK;
    }
    if (!opt.seed_given)
        opt.seed = fresh_seed();
    const double t0 = bench_now_seconds();
    rc = open_session(&opt, &session);
    if (rc == BENCH_EXIT_OK)
        rc = run_rows(&opt, &session, t0);
    if (rc == BENCH_EXIT_OK) {
        bench_report_end(&opt, &session.machine, session.rows, session.num_rows, bench_now_seconds() - t0);
        if (session.any_check_failed) {
            fprintf(stderr, "r35a_bench: a row failed its check against the reference (NaN, or above the "
                            "tolerance; see the max err column)\n");
            rc = BENCH_EXIT_CHECK_FAILED;
        }
    }
    close_session(&session);
    bench_options_free(&opt);
    return rc;
}
