/* report.c - r35a_bench output: human table (default), CSV or one JSON object. */
#define _POSIX_C_SOURCE 200809L

#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void bench_read_cpu_model(char *buf, size_t len)
{
    static const char *const keys[] = {"model name", "Hardware", "cpu model", "Processor"};
    snprintf(buf, len, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL)
        return;
    char line[512];
    while (fgets(line, sizeof(line), f) != NULL) {
        for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
            const char *colon = strchr(line, ':');
            if (strncmp(line, keys[k], strlen(keys[k])) != 0 || colon == NULL)
                continue;
            const char *v = colon + 1 + strspn(colon + 1, " \t");
            size_t n = strcspn(v, "\n");   /* the value, cut to the buffer */
            n = n < len - 1 ? n : len - 1;
            memcpy(buf, v, n);
            buf[n] = '\0';
            fclose(f);
            return;
        }
    }
    fclose(f);
}

static const char *op_name(const bench_options *opt)
{
    return opt->op == BENCH_OP_PAGED ? "paged" : "encoder";
}

static const char *bytes_model(const bench_options *opt)
{
    return opt->op == BENCH_OP_PAGED ? BENCH_BYTES_MODEL_PAGED : BENCH_BYTES_MODEL_ENCODER;
}

/* The shape every row has in a field that does not vary (the first row's). */
static const bench_shape *first_shape(const bench_options *o)
{
    return &o->shapes[0];
}

static bool varies(const bench_options *o, unsigned field)
{
    return (o->varying & field) != 0;
}

static const char *check_text(const bench_row *r)
{
    if (!r->error_checked)
        return "none";
    return r->check_failed ? "fail" : "pass";
}

static void format_grid(const uint32_t grid[3], char *buf, size_t len)
{
    snprintf(buf, len, "%ux%ux%u", (unsigned)grid[0], (unsigned)grid[1], (unsigned)grid[2]);
}

/* ---- human table ----------------------------------------------------------------------------- */

/* printf width of the size column: a plain context sweep right-aligned as before, labels with
 * several fields left-aligned to the longest. */
static int size_width(const bench_options *o)
{
    if (o->op == BENCH_OP_PAGED && o->varying == BENCH_FIELD_CONTEXT)
        return 8;
    if (o->op == BENCH_OP_PAGED && o->varying == 0)
        return 8;
    int width = 8;
    for (int i = 0; i < o->num_shapes; i++) {
        char label[96];
        bench_shape_label(o, &o->shapes[i], label, sizeof label);
        int n = (int)strlen(label);
        width = n > width ? n : width;
    }
    return -width;
}

static const char *size_title(const bench_options *o)
{
    if (o->op == BENCH_OP_PAGED)
        return (o->varying & ~(unsigned)BENCH_FIELD_CONTEXT) ? "shape" : "context";
    return "segments";
}

static void table_shape_line(const bench_options *o)
{
    const bench_shape *sh = first_shape(o);
    printf("r35a_bench (librdna35attn %s)  op %s", r35a_version_string(), op_name(o));
    if (o->preset != NULL)
        printf("  preset %s (%d rows)", o->preset, o->num_shapes);
    if (!varies(o, BENCH_FIELD_DTYPE))
        printf("  dtype %s", bench_dtype_name(sh->dtype));
    if (!varies(o, BENCH_FIELD_HEAD_SIZE))
        printf("  D %d", (int)sh->head_size);
    if (!varies(o, BENCH_FIELD_Q_HEADS))
        printf("  q heads %d", (int)sh->num_q_heads);
    if (!varies(o, BENCH_FIELD_KV_HEADS))
        printf("  kv heads %d", (int)sh->num_kv_heads);
    if (o->op == BENCH_OP_PAGED) {
        if (!varies(o, BENCH_FIELD_PAGE_SIZE))
            printf("  page %d", (int)sh->page_size);
        if (!varies(o, BENCH_FIELD_BATCH))
            printf("  batch %d", (int)sh->batch);
        if (!varies(o, BENCH_FIELD_QUERY_LEN))
            printf("  M %d", (int)sh->query_len);
        if (!varies(o, BENCH_FIELD_WINDOW))
            printf("  window %d", (int)sh->window);
        printf("  kv %s%s%s", sh->kv_dtype ? bench_dtype_name(sh->kv_dtype) : "same",
               !sh->kv_dtype ? "" : sh->kv_scales == R35A_KV_SCALE_PER_TOKEN_HEAD ? "/token-head-scales"
               : sh->kv_scales == R35A_KV_SCALE_PER_KV_HEAD ? "/kv-head-scales" : "",
               sh->alibi ? "  alibi" : "");
    } else if (!varies(o, BENCH_FIELD_CAUSAL)) {
        printf("  %s", sh->causal ? "causal" : "non-causal");
    }
    printf("%s%s", sh->sinks ? "  sinks" : "", sh->lse ? "  lse" : "");
    if (sh->softcap > 0.0)
        printf("  softcap %g", sh->softcap);
    printf("\n");
}

/* The GFLOP/s column: encoder calls, and paged calls with a row of more than 8 query tokens per
 * sequence (prefill, long drafts), where the matrix rate is what counts. */
static bool shows_flops(const bench_options *o)
{
    if (o->op == BENCH_OP_ENCODER || o->peak_tflops > 0.0)
        return true;
    for (int i = 0; i < o->num_shapes; i++)
        if (o->shapes[i].query_len > 8)
            return true;
    return false;
}

static void table_begin(const bench_options *o, const bench_machine *m)
{
    table_shape_line(o);
    printf("backend %s (asked: %s): %s\n", m->context.backend_name, bench_backend_name(o->backend),
           m->context.reason[0] ? m->context.reason : "-");
    printf("memory: %s\n", m->memory);
    printf("seed 0x%016llx  ", (unsigned long long)o->seed);
    if (m->working_set_mb > 0.0)
        printf("working set >= %g MiB per row, rotating copies (%s)", m->working_set_mb, m->working_set_why);
    else
        printf("working set: one copy per row (%s)", m->working_set_why);
    printf("  iterations %s\n", o->iters ? "fixed" : "adaptive");
    printf("timing: %s\n", m->timing);
    printf("bytes moved = %s\n\n", bytes_model(o));
    printf("%*s %6s %7s %12s", size_width(o), size_title(o), "copies", "iters", "median us");
    if (o->graph)
        printf(" %12s", "graph us");
    printf(" %9s %7s", "GB/s", "% peak");
    if (shows_flops(o))
        printf(" %9s", "GFLOP/s");
    if (o->peak_tflops > 0.0)
        printf(" %6s", "% mma");
    printf(" %14s %6s %-14s %s\n", "max err", "splits", "grid", "implementation");
    fflush(stdout);
}

static void format_error(const bench_row *r, char *buf, size_t len)
{
    if (!r->error_checked)
        snprintf(buf, len, "-");
    else if (isnan(r->max_error))
        snprintf(buf, len, "nan FAIL");
    else
        snprintf(buf, len, "%.2e%s", r->max_error, r->error_vs_self ? " self" : (r->check_failed ? " FAIL" : ""));
}

static void table_row(const bench_options *o, const bench_row *r, const bench_row *previous)
{
    char err[32], grid[40];
    format_error(r, err, sizeof(err));
    format_grid(r->grid, grid, sizeof(grid));
    printf("%*s %6d %7d %12.2f", size_width(o), r->label, r->copies, r->iters, r->median_s * 1e6);
    if (o->graph)
        printf(" %12.2f", r->graph_median_s * 1e6);
    printf(" %9.2f %7.1f", r->gbs, r->roofline_pct);
    if (shows_flops(o))
        printf(" %9.2f", r->gflops);
    if (o->peak_tflops > 0.0)
        printf(" %6.1f", r->gflops / (10.0 * o->peak_tflops));
    printf(" %14s %6d %-14s %s\n", err, (int)r->splits, grid, r->implementation);
    bool new_reason = previous == NULL || strcmp(previous->fallback_reason, r->fallback_reason) != 0;
    if (r->fallback_reason[0] != '\0' && new_reason)
        printf("  fallback: %s\n", r->fallback_reason);
    fflush(stdout);
}

static void table_end(const bench_options *o, const bench_machine *m, const bench_row *rows,
                      int num_rows, double elapsed_s)
{
    bool any_self = false;
    int failed = 0;
    for (int i = 0; i < num_rows; i++) {
        any_self = any_self || (rows[i].error_checked && rows[i].error_vs_self);
        failed += rows[i].check_failed ? 1 : 0;
    }
    printf("\nmax err = max|out - ref| / max|ref| against a reference context on the same inputs%s; "
           "NaN or > 4 ulp of the output type fails\n",
           o->check ? "" : " (skipped: --no-check)");
    if (failed > 0)
        printf("  %d row%s FAILED the check\n", failed, failed == 1 ? "" : "s");
    int unchecked = 0;
    for (int i = 0; i < num_rows; i++)
        unchecked += o->check && !rows[i].error_checked ? 1 : 0;
    if (unchecked > 0)
        printf("  '-': %d row%s above %.0e flops, not checked (the reference would take minutes on the host; "
               "the tests check those kernels)\n", unchecked, unchecked == 1 ? "" : "s", BENCH_CHECK_MAX_FLOPS);
    if (any_self)
        printf("  'self': the measured backend is the reference, so it is compared with itself "
               "(0 by construction)\n");
    printf("GB/s and %% peak from the %s median%s\n", o->graph ? "graph" : "call",
           o->graph ? "; 'median us' includes each call's launch, 'graph us' is a replay's time per call" : "");
    printf("machine: %s (%ld cpus); backend %s, arch %s%s%s; peak %.2f GB/s %s (%s); %.1f s\n", m->cpu, m->cpus,
           m->context.backend_name, m->context.arch, m->device[0] ? ", " : "", m->device, m->peak_gbs,
           m->peak_measured ? "measured" : "given", m->peak_method, elapsed_s);
}

/* ---- CSV --------------------------------------------------------------------------------------- */

static void csv_begin(void)
{
    printf("op,size,implementation,copies,iters,median_us,min_us,bytes,gbs,roofline_pct,gflops,"
           "max_error,error_vs,backend,peak_gbs,dtype,head_size,num_q_heads,num_kv_heads,page_size,batch,"
           "query_len,window,context,tokens,splits,grid,graph_median_us,graph_calls,working_set_mb,check\n");
}

static void csv_row(const bench_options *o, const bench_machine *m, const bench_row *r)
{
    char err[32], graph_us[32], grid[40];
    const bench_shape *sh = r->shape;
    if (r->error_checked && !isnan(r->max_error))
        snprintf(err, sizeof(err), "%.3e", r->max_error);
    else
        snprintf(err, sizeof(err), "%s", r->error_checked ? "nan" : "");
    if (r->graph_timed)
        snprintf(graph_us, sizeof(graph_us), "%.9g", r->graph_median_s * 1e6);
    else
        graph_us[0] = '\0';
    format_grid(r->grid, grid, sizeof(grid));
    printf("%s,\"%s\",%s,%d,%d,%.3f,%.3f,%.0f,%.3f,%.2f,%.3f,%s,%s,%s,%.3f,", op_name(o), r->label,
           r->implementation, r->copies, r->iters, r->median_s * 1e6, r->min_s * 1e6, r->bytes_moved,
           r->gbs, r->roofline_pct, r->gflops, err,
           r->error_checked ? (r->error_vs_self ? "self" : "reference") : "none",
           m->context.backend_name, m->peak_gbs);
    printf("%s,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%s,%s,%d,%.1f,%s\n", bench_dtype_name(sh->dtype), (int)sh->head_size,
           (int)sh->num_q_heads, (int)sh->num_kv_heads, (int)sh->page_size, (int)sh->batch, (int)sh->query_len,
           (int)sh->window, (int)sh->context, (int)r->tokens, (int)r->splits, grid, graph_us, r->graph_calls,
           r->working_set_mb, check_text(r));
    fflush(stdout);
}

/* ---- JSON -------------------------------------------------------------------------------------- */

static void json_string(const char *s)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if (*p < 0x20)
            printf("\\u%04x", *p);
        else
            putchar(*p);
    }
    putchar('"');
}

static void json_number(double v)
{
    if (!isfinite(v))
        printf("null");
    else if (v == floor(v) && fabs(v) < 9007199254740992.0)   /* exact integers (byte counts) */
        printf("%.0f", v);
    else
        printf("%.9g", v);
}

static void json_key_string(const char *key, const char *value, const char *after)
{
    printf("\"%s\": ", key);
    json_string(value);
    fputs(after, stdout);
}

static void json_key_number(const char *key, double value, const char *after)
{
    printf("\"%s\": ", key);
    json_number(value);
    fputs(after, stdout);
}

static void json_segment_list(const bench_options *o, const bench_shape *sh)
{
    printf("[");
    for (int i = 0; i < sh->num_segments; i++)
        printf("%s%d", i ? ", " : "", (int)o->segment_lens[sh->segment_first + i]);
    printf("]");
}

static void json_segments(const bench_options *o)
{
    printf("\"segments\": [");
    for (int r = 0; r < o->num_shapes; r++) {
        printf("%s", r ? ", " : "");
        json_segment_list(o, &o->shapes[r]);
    }
    printf("], \"causal\": %s", first_shape(o)->causal ? "true" : "false");
}

static void json_varying(const bench_options *o)
{
    static const struct {
        unsigned bit;
        const char *name;
    } fields[] = {
        {BENCH_FIELD_DTYPE, "dtype"},         {BENCH_FIELD_HEAD_SIZE, "head_size"},
        {BENCH_FIELD_Q_HEADS, "num_q_heads"}, {BENCH_FIELD_KV_HEADS, "num_kv_heads"},
        {BENCH_FIELD_PAGE_SIZE, "page_size"}, {BENCH_FIELD_BATCH, "batch"},
        {BENCH_FIELD_QUERY_LEN, "query_len"}, {BENCH_FIELD_WINDOW, "window"},
        {BENCH_FIELD_CONTEXT, "context"},     {BENCH_FIELD_SEGMENTS, "segments"},
        {BENCH_FIELD_CAUSAL, "causal"},
    };
    printf("\"varying\": [");
    bool first = true;
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        if (o->varying & fields[i].bit) {
            printf("%s\"%s\"", first ? "" : ", ", fields[i].name);
            first = false;
        }
    }
    printf("]");
}

/* The run's problem: the first row's shape (every field not in "varying" is every row's). */
static void json_problem(const bench_options *o)
{
    const bench_shape *sh = first_shape(o);
    printf("  \"problem\": {");
    json_key_string("op", op_name(o), ", ");
    if (o->preset != NULL)
        json_key_string("preset", o->preset, ", ");
    else
        printf("\"preset\": null, ");
    json_key_string("dtype", bench_dtype_name(sh->dtype), ", ");
    printf("\"head_size\": %d, \"num_q_heads\": %d, \"num_kv_heads\": %d, ", (int)sh->head_size,
           (int)sh->num_q_heads, (int)sh->num_kv_heads);
    if (o->op == BENCH_OP_PAGED)
        printf("\"page_size\": %d, \"batch\": %d, \"query_len\": %d, \"window\": %d, \"kv_dtype\": \"%s\", "
               "\"kv_scales\": \"%s\", \"alibi\": %s",
               (int)sh->page_size, (int)sh->batch, (int)sh->query_len, (int)sh->window,
               bench_dtype_name(sh->kv_dtype ? sh->kv_dtype : sh->dtype),
               sh->kv_scales == R35A_KV_SCALE_PER_TOKEN_HEAD ? "token_head"
               : sh->kv_scales == R35A_KV_SCALE_PER_KV_HEAD ? "kv_head" : "tensor",
               sh->alibi ? "true" : "false");
    else
        json_segments(o);
    printf(", \"sinks\": %s, \"lse\": %s, ", sh->sinks ? "true" : "false", sh->lse ? "true" : "false");
    json_key_number("softcap", sh->softcap, ", ");
    json_varying(o);
    printf(", \"seed\": \"0x%016llx\", ", (unsigned long long)o->seed);
    json_key_number("min_working_set_mb", o->min_working_set_mb >= 0.0 ? o->min_working_set_mb : NAN, ", ");
    printf("\"graph\": %s, ", o->graph ? "true" : "false");
    json_key_string("bytes_model", bytes_model(o), "},\n");
}

static void json_machine(const bench_options *o, const bench_machine *m)
{
    printf("  \"machine\": {");
    json_key_string("cpu", m->cpu, ", ");
    printf("\"cpus\": %ld, ", m->cpus);
    json_key_string("backend_asked", bench_backend_name(o->backend), ", ");
    json_key_string("backend", m->context.backend_name, ", ");
    json_key_string("arch", m->context.arch, ", ");
    json_key_string("device", m->device, ", ");
    json_key_string("memory", m->memory, ", ");
    json_key_string("reason", m->context.reason, ", ");
    json_key_number("working_set_mb", m->working_set_mb, ", ");
    json_key_string("working_set_rule", m->working_set_why, ", ");
    json_key_string("timing", m->timing, ", ");
    json_key_string("library_version", r35a_version_string(), "},\n");
    printf("  \"peak\": {");
    json_key_number("gbs", m->peak_gbs, ", ");
    json_key_string("source", m->peak_measured ? "measured" : "given", ", ");
    json_key_string("method", m->peak_method, "},\n");
}

static void json_row(const bench_options *o, const bench_row *r, bool last)
{
    const bench_shape *sh = r->shape;
    printf("    {");
    json_key_string("implementation", r->implementation, ", ");
    json_key_string("fallback_reason", r->fallback_reason, ", ");
    json_key_string("label", r->label, ", ");
    json_key_string("dtype", bench_dtype_name(sh->dtype), ", ");
    printf("\"head_size\": %d, \"num_q_heads\": %d, \"num_kv_heads\": %d, ", (int)sh->head_size,
           (int)sh->num_q_heads, (int)sh->num_kv_heads);
    if (o->op == BENCH_OP_PAGED) {
        printf("\"page_size\": %d, \"batch\": %d, \"query_len\": %d, \"window\": %d, \"context\": %d, ",
               (int)sh->page_size, (int)sh->batch, (int)sh->query_len, (int)sh->window, (int)sh->context);
    } else {
        char segments[96];
        bench_segments_label(o, sh, segments, sizeof(segments));
        printf("\"segments\": \"%s\", \"segment_lens\": ", segments);
        json_segment_list(o, sh);
        printf(", \"tokens\": %d, \"causal\": %s, ", (int)r->tokens, sh->causal ? "true" : "false");
    }
    printf("\"splits\": %d, \"grid\": [%u, %u, %u], \"block\": [%u, %u, %u], ", (int)r->splits,
           (unsigned)r->grid[0], (unsigned)r->grid[1], (unsigned)r->grid[2], (unsigned)r->block[0],
           (unsigned)r->block[1], (unsigned)r->block[2]);
    json_key_number("workspace_bytes", (double)r->workspace_bytes, ", ");
    printf("\"copies\": %d, ", r->copies);
    json_key_number("working_set_mb", r->working_set_mb, ", ");
    printf("\"iters\": %d, ", r->iters);
    json_key_number("median_us", r->median_s * 1e6, ", ");
    json_key_number("min_us", r->min_s * 1e6, ", ");
    if (r->graph_timed) {
        json_key_number("graph_median_us", r->graph_median_s * 1e6, ", ");
        printf("\"graph_calls\": %d, \"graph_replays\": %d, ", r->graph_calls, r->graph_replays);
    } else {
        printf("\"graph_median_us\": null, ");
    }
    json_key_number("bytes", r->bytes_moved, ", ");
    json_key_number("gbs", r->gbs, ", ");
    json_key_number("roofline_pct", r->roofline_pct, ", ");
    json_key_number("flops", r->flops, ", ");
    json_key_number("gflops", r->gflops, ", ");
    if (r->error_checked)
        json_key_number("max_error", r->max_error, ", ");
    else
        printf("\"max_error\": null, ");
    json_key_number("tolerance", bench_error_tolerance(sh->dtype), ", ");
    json_key_string("check", check_text(r), ", ");
    json_key_string("error_vs", r->error_checked ? (r->error_vs_self ? "self" : "reference") : "none",
                    last ? "}\n" : "},\n");
}

static void json_all(const bench_options *o, const bench_machine *m, const bench_row *rows,
                     int num_rows, double elapsed_s)
{
    printf("{\n");
    json_problem(o);
    json_machine(o, m);
    printf("  ");
    json_key_number("elapsed_s", elapsed_s, ",\n");
    printf("  \"rows\": [\n");
    for (int i = 0; i < num_rows; i++)
        json_row(o, &rows[i], i == num_rows - 1);
    printf("  ]\n}\n");
}

/* ---- dispatch on the format -------------------------------------------------------------------- */

void bench_report_begin(const bench_options *opt, const bench_machine *machine)
{
    if (opt->format == BENCH_FORMAT_TABLE)
        table_begin(opt, machine);
    else if (opt->format == BENCH_FORMAT_CSV)
        csv_begin();
}

void bench_report_row(const bench_options *opt, const bench_machine *machine, const bench_row *row,
                      const bench_row *previous)
{
    if (opt->format == BENCH_FORMAT_TABLE)
        table_row(opt, row, previous);
    else if (opt->format == BENCH_FORMAT_CSV)
        csv_row(opt, machine, row);
}

void bench_report_end(const bench_options *opt, const bench_machine *machine, const bench_row *rows,
                      int num_rows, double elapsed_s)
{
    if (opt->format == BENCH_FORMAT_TABLE)
        table_end(opt, machine, rows, num_rows, elapsed_s);
    else if (opt->format == BENCH_FORMAT_JSON)
        json_all(opt, machine, rows, num_rows, elapsed_s);
}
