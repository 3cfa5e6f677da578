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

/* ---- human table ----------------------------------------------------------------------------- */

/* printf width of the size column: contexts right-aligned, segment lists left-aligned. */
static int size_width(const bench_options *o)
{
    return o->op == BENCH_OP_PAGED ? 8 : -24;
}

static void table_begin(const bench_options *o, const bench_machine *m)
{
    printf("r35a_bench (librdna35attn %s)  op %s  dtype %s  D %d  q heads %d  kv heads %d",
           r35a_version_string(), op_name(o), bench_dtype_name(o->dtype),
           (int)o->head_size, (int)o->num_q_heads, (int)o->num_kv_heads);
    if (o->op == BENCH_OP_PAGED)
        printf("  page %d  batch %d  M %d  window %d  kv %s%s", (int)o->page_size, (int)o->batch,
               (int)o->query_len, (int)o->window, o->kv_dtype ? bench_dtype_name(o->kv_dtype) : "same",
               o->alibi ? "  alibi" : "");
    else
        printf("  %s", o->causal ? "causal" : "non-causal");
    printf("%s", o->sinks ? "  sinks" : "");
    if (o->softcap > 0.0)
        printf("  softcap %g", o->softcap);
    printf("\n");
    printf("backend %s (asked: %s): %s\n", m->context.backend_name, bench_backend_name(o->backend),
           m->context.reason[0] ? m->context.reason : "-");
    printf("seed 0x%016llx  ", (unsigned long long)o->seed);
    if (o->min_working_set_mb > 0.0)
        printf("working set >= %g MiB per row (rotating copies)", o->min_working_set_mb);
    else
        printf("working set: one copy per row (caches may flatter small rows)");
    printf("  iterations %s\n", o->iters ? "fixed" : "adaptive (~0.5 s per row, >= 3)");
    printf("bytes moved = %s\n\n", bytes_model(o));
    printf("%*s %6s %7s %12s %9s %7s", size_width(o), o->op == BENCH_OP_PAGED ? "context" : "segments",
           "copies", "iters", "median us", "GB/s", "% peak");
    if (o->op == BENCH_OP_ENCODER)
        printf(" %9s", "GFLOP/s");
    printf(" %14s  %s\n", "max err", "implementation");
    fflush(stdout);
}

static void format_error(const bench_row *r, char *buf, size_t len)
{
    if (!r->error_checked)
        snprintf(buf, len, "-");
    else if (isnan(r->max_error))
        snprintf(buf, len, "nan");
    else
        snprintf(buf, len, "%.2e%s", r->max_error, r->error_vs_self ? " self" : "");
}

static void table_row(const bench_options *o, const bench_row *r, const bench_row *previous)
{
    char err[32];
    format_error(r, err, sizeof(err));
    printf("%*s %6d %7d %12.2f %9.2f %7.1f", size_width(o), r->label, r->copies, r->iters, r->median_s * 1e6,
           r->gbs, r->roofline_pct);
    if (o->op == BENCH_OP_ENCODER)
        printf(" %9.2f", r->gflops);
    printf(" %14s  %s\n", err, r->implementation);
    bool new_reason = previous == NULL || strcmp(previous->fallback_reason, r->fallback_reason) != 0;
    if (r->fallback_reason[0] != '\0' && new_reason)
        printf("  fallback: %s\n", r->fallback_reason);
    fflush(stdout);
}

static void table_end(const bench_options *o, const bench_machine *m, const bench_row *rows,
                      int num_rows, double elapsed_s)
{
    bool any_self = false;
    for (int i = 0; i < num_rows; i++)
        any_self = any_self || (rows[i].error_checked && rows[i].error_vs_self);
    printf("\nmax err = max|out - ref| / max|ref| against a reference context%s\n",
           o->check ? "" : " (skipped: --no-check)");
    if (any_self)
        printf("  'self': the measured backend is the reference, so it is compared with itself "
               "(0 by construction)\n");
    printf("machine: %s (%ld cpus); backend %s, arch %s; peak %.2f GB/s %s (%s); %.1f s\n", m->cpu,
           m->cpus, m->context.backend_name, m->context.arch, m->peak_gbs,
           m->peak_measured ? "measured" : "given", m->peak_method, elapsed_s);
}

/* ---- CSV --------------------------------------------------------------------------------------- */

static void csv_begin(void)
{
    printf("op,size,implementation,copies,iters,median_us,min_us,bytes,gbs,roofline_pct,gflops,"
           "max_error,error_vs,backend,peak_gbs\n");
}

static void csv_row(const bench_options *o, const bench_machine *m, const bench_row *r)
{
    char err[32];
    if (r->error_checked && !isnan(r->max_error))
        snprintf(err, sizeof(err), "%.3e", r->max_error);
    else
        snprintf(err, sizeof(err), "%s", r->error_checked ? "nan" : "");
    printf("%s,\"%s\",%s,%d,%d,%.3f,%.3f,%.0f,%.3f,%.2f,%.3f,%s,%s,%s,%.3f\n", op_name(o), r->label,
           r->implementation, r->copies, r->iters, r->median_s * 1e6, r->min_s * 1e6, r->bytes_moved,
           r->gbs, r->roofline_pct, r->gflops, err,
           r->error_checked ? (r->error_vs_self ? "self" : "reference") : "none",
           m->context.backend_name, m->peak_gbs);
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

static void json_segments(const bench_options *o)
{
    printf("\"segments\": [");
    for (int r = 0; r < o->num_segment_rows; r++) {
        printf("%s[", r ? ", " : "");
        for (int i = o->segment_row_start[r]; i < o->segment_row_start[r + 1]; i++)
            printf("%s%d", i > o->segment_row_start[r] ? ", " : "", (int)o->segment_lens[i]);
        printf("]");
    }
    printf("], \"causal\": %s", o->causal ? "true" : "false");
}

static void json_problem(const bench_options *o)
{
    printf("  \"problem\": {");
    json_key_string("op", op_name(o), ", ");
    json_key_string("dtype", bench_dtype_name(o->dtype), ", ");
    printf("\"head_size\": %d, \"num_q_heads\": %d, \"num_kv_heads\": %d, ", (int)o->head_size,
           (int)o->num_q_heads, (int)o->num_kv_heads);
    if (o->op == BENCH_OP_PAGED)
        printf("\"page_size\": %d, \"batch\": %d, \"query_len\": %d, \"window\": %d, \"kv_dtype\": \"%s\", "
               "\"alibi\": %s",
               (int)o->page_size, (int)o->batch, (int)o->query_len, (int)o->window,
               o->kv_dtype ? bench_dtype_name(o->kv_dtype) : bench_dtype_name(o->dtype), o->alibi ? "true" : "false");
    else
        json_segments(o);
    printf(", \"sinks\": %s, ", o->sinks ? "true" : "false");
    json_key_number("softcap", o->softcap, "");
    printf(", \"seed\": \"0x%016llx\", ", (unsigned long long)o->seed);
    json_key_number("min_working_set_mb", o->min_working_set_mb, ", ");
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
    json_key_string("reason", m->context.reason, ", ");
    json_key_string("library_version", r35a_version_string(), "},\n");
    printf("  \"peak\": {");
    json_key_number("gbs", m->peak_gbs, ", ");
    json_key_string("source", m->peak_measured ? "measured" : "given", ", ");
    json_key_string("method", m->peak_method, "},\n");
}

static void json_row(const bench_options *o, const bench_row *r, bool last)
{
    printf("    {");
    json_key_string("implementation", r->implementation, ", ");
    json_key_string("fallback_reason", r->fallback_reason, ", ");
    if (o->op == BENCH_OP_PAGED)
        printf("\"context\": %d, ", (int)r->context);
    else
        printf("\"segments\": \"%s\", \"tokens\": %d, ", r->label, (int)r->context);
    printf("\"copies\": %d, \"iters\": %d, ", r->copies, r->iters);
    json_key_number("median_us", r->median_s * 1e6, ", ");
    json_key_number("min_us", r->min_s * 1e6, ", ");
    json_key_number("bytes", r->bytes_moved, ", ");
    json_key_number("gbs", r->gbs, ", ");
    json_key_number("roofline_pct", r->roofline_pct, ", ");
    json_key_number("flops", r->flops, ", ");
    json_key_number("gflops", r->gflops, ", ");
    if (r->error_checked)
        json_key_number("max_error", r->max_error, ", ");
    else
        printf("\"max_error\": null, ");
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
