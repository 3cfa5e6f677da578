/* bench.c - r35a_bench: times librdna35attn calls, one row per problem size.
 *
 * Per row: build the problem on the host (random inputs, shuffled block table), plan it on the
 * measured context, upload it into enough independent copies to cover --min-working-set-mb, run
 * one warm-up and then N timed calls rotating through the copies, and compare the output with a
 * reference context's. `r35a_bench --help` states the bytes-moved model (also in bench.h).
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

/* Adaptive iteration count: enough timed calls to fill about this long, within the bounds. */
static const double TARGET_ROW_SECONDS = 0.5;
enum { MIN_ITERS = 3, MAX_ADAPTIVE_ITERS = 100000 };

typedef struct bench_session {
    r35a_context *context;       /* the context measured */
    r35a_context *reference;     /* the one errors are taken against; NULL with --no-check */
    bench_memory mem;            /* the memory `context` works on */
    bench_machine machine;
    bench_row rows[BENCH_MAX_ROWS];
    int num_rows;
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

static int describe_context(bench_session *s)
{
    s->machine.context.struct_size = sizeof(s->machine.context);
    r35a_status st = r35a_context_get_info(s->context, &s->machine.context);
    if (st != R35A_OK)
        return library_error("r35a_context_get_info", st);
    char why[256];
    if (!bench_memory_for_context(&s->machine.context, &s->mem, why, sizeof(why)))
        return bench_error("%s", why);
    return BENCH_EXIT_OK;
}

static int find_peak(const bench_options *opt, bench_session *s)
{
    bench_machine *m = &s->machine;
    if (opt->peak_gbs > 0.0) {
        m->peak_gbs = opt->peak_gbs;
        snprintf(m->peak_method, sizeof(m->peak_method), "--peak-gbs");
        return BENCH_EXIT_OK;
    }
    char why[256];
    if (bench_measure_peak(&s->mem, &m->peak_gbs, m->peak_method, sizeof(m->peak_method), why,
                           sizeof(why)) != 0)
        return bench_error("%s", why);
    m->peak_measured = true;
    return BENCH_EXIT_OK;
}

static int open_session(const bench_options *opt, bench_session *s)
{
    int rc = create_context(opt->backend, &s->context);
    if (rc == BENCH_EXIT_OK)
        rc = describe_context(s);
    if (rc == BENCH_EXIT_OK && opt->check)
        rc = create_context(R35A_BACKEND_REFERENCE, &s->reference);
    if (rc != BENCH_EXIT_OK)
        return rc;
    bench_read_cpu_model(s->machine.cpu, sizeof(s->machine.cpu));
    s->machine.cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return find_peak(opt, s);
}

static void close_session(bench_session *s)
{
    r35a_context_destroy(s->reference);
    r35a_context_destroy(s->context);
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
    snprintf(row->implementation, sizeof(row->implementation), "%s", info.implementation);
    snprintf(row->fallback_reason, sizeof(row->fallback_reason), "%s", info.fallback_reason);
    rs->workspace_bytes = info.workspace_bytes;
    if (rs->workspace_bytes > 0) {
        rs->workspace = s->mem.alloc(s->mem.self, rs->workspace_bytes);
        if (rs->workspace == NULL)
            return bench_error("cannot allocate the %zu-byte workspace", rs->workspace_bytes);
    }
    return BENCH_EXIT_OK;
}

static int copies_needed(const bench_options *opt, size_t slab_bytes)
{
    double want = opt->min_working_set_mb * 1048576.0;
    double n = ceil(want / (double)(slab_bytes ? slab_bytes : 1));
    return n < 1.0 ? 1 : (n > 1e6 ? 1000000 : (int)n);
}

/* Copy 0 is uploaded from the host slab, the others are device-side copies of copy 0. */
static int upload_copies(const bench_options *opt, bench_session *s, row_state *rs)
{
    const bench_memory *mem = &s->mem;
    const size_t bytes = rs->problem.slab_bytes;
    int n = copies_needed(opt, bytes);
    rs->copies = calloc((size_t)n, sizeof(void *));
    if (rs->copies == NULL)
        return bench_error("cannot allocate the list of %d buffer copies", n);
    for (int i = 0; i < n; i++) {
        rs->copies[i] = mem->alloc(mem->self, bytes);
        if (rs->copies[i] == NULL)
            return bench_error("cannot allocate buffer copy %d of %d (%.1f MiB each) in %s memory",
                               i + 1, n, (double)bytes / 1048576.0, mem->name);
        rs->num_copies = i + 1;
        int failed = i == 0 ? mem->upload(mem->self, rs->copies[0], rs->problem.host, bytes)
                            : mem->copy(mem->self, rs->copies[i], rs->copies[0], bytes);
        if (failed)
            return bench_error("copying the problem into %s memory failed", mem->name);
    }
    if (mem->synchronize(mem->self, mem->stream) != 0)
        return bench_error("%s memory synchronize failed", mem->name);
    return BENCH_EXIT_OK;
}

/* ---- one row: timing ------------------------------------------------------------------------- */

static int time_call(bench_session *s, row_state *rs, int copy, double *seconds)
{
    const double t0 = bench_now_seconds();
    r35a_status st = bench_problem_run(s->context, rs->plan, &rs->problem, rs->copies[copy], NULL,
                                       rs->workspace, rs->workspace_bytes, s->mem.stream);
    if (st != R35A_OK)
        return library_error(run_call(&rs->problem), st);
    if (s->mem.synchronize(s->mem.self, s->mem.stream) != 0)
        return bench_error("%s memory synchronize failed", s->mem.name);
    *seconds = bench_now_seconds() - t0;
    return BENCH_EXIT_OK;
}

static int choose_iters(const bench_options *opt, double warmup_s)
{
    if (opt->iters > 0)
        return opt->iters;
    double n = ceil(TARGET_ROW_SECONDS / fmax(warmup_s, 1e-7));
    return n < MIN_ITERS ? MIN_ITERS : (n > MAX_ADAPTIVE_ITERS ? MAX_ADAPTIVE_ITERS : (int)n);
}

/* One warm-up on copy 0, then timed calls on copies 1, 2, ... (cyclically), so with several
 * copies every timed call starts on buffers the previous calls did not touch. */
static int time_row(const bench_options *opt, bench_session *s, row_state *rs, bench_row *row)
{
    double warmup_s = 0.0;
    int rc = time_call(s, rs, 0, &warmup_s);
    if (rc != BENCH_EXIT_OK)
        return rc;
    row->iters = choose_iters(opt, warmup_s);
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
        rc = bench_error("downloading the output from %s memory failed", s->mem.name);
    if (rc == BENCH_EXIT_OK)
        rc = run_reference(s, p, ref);
    if (rc == BENCH_EXIT_OK) {
        row->max_error = bench_max_rel_error(p, out, ref);
        row->error_checked = true;
        row->error_vs_self = s->machine.context.backend == R35A_BACKEND_REFERENCE;
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
    snprintf(row->label, sizeof(row->label), "%s", p->label);
    row->context = p->context;
    row->bytes_moved = p->bytes_moved;
    row->flops = p->flops;
    row->gbs = p->bytes_moved / row->median_s / 1e9;
    row->gflops = p->flops / row->median_s / 1e9;
    row->roofline_pct = 100.0 * row->gbs / s->machine.peak_gbs;
}

static int measure_row(const bench_options *opt, bench_session *s, int index, bench_row *row)
{
    row_state rs;
    memset(&rs, 0, sizeof(rs));
    memset(row, 0, sizeof(*row));
    char why[256];
    int rc = BENCH_EXIT_OK;
    if (bench_problem_build(opt, index, row_seed(opt->seed, index), &rs.problem, why, sizeof(why)) != 0)
        rc = bench_error("row %d: %s", index, why);
    if (rc == BENCH_EXIT_OK)
        rc = plan_row(s, &rs, row);
    if (rc == BENCH_EXIT_OK)
        rc = upload_copies(opt, s, &rs);
    if (rc == BENCH_EXIT_OK)
        rc = time_row(opt, s, &rs, row);
    if (rc == BENCH_EXIT_OK && s->reference != NULL)
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

static double seconds_since(const struct timespec *start)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - start->tv_sec) + 1e-9 * (double)(now.tv_nsec - start->tv_nsec);
}

static int run_rows(const bench_options *opt, bench_session *s)
{
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    bench_report_begin(opt, &s->machine);
    int total = bench_num_rows(opt);
    for (int i = 0; i < total; i++) {
        show_progress(i, total, seconds_since(&start));
        int rc = measure_row(opt, s, i, &s->rows[i]);
        show_progress(total, total, 0.0);
        if (rc != BENCH_EXIT_OK)
            return rc;
        s->num_rows = i + 1;
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
    if (rc != BENCH_EXIT_OK || help)
        return rc;
    if (!opt.seed_given)
        opt.seed = fresh_seed();
    const double t0 = bench_now_seconds();
    rc = open_session(&opt, &session);
    if (rc == BENCH_EXIT_OK)
        rc = run_rows(&opt, &session);
    if (rc == BENCH_EXIT_OK)
        bench_report_end(&opt, &session.machine, session.rows, session.num_rows,
                         bench_now_seconds() - t0);
    close_session(&session);
    return rc;
}
