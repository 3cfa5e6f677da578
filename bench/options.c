/* options.c - r35a_bench command line. */
#define _POSIX_C_SOURCE 200809L

#include "bench.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int32_t default_contexts[] = {128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768};
/* Encoder rows sized so that the CPU reference finishes them in seconds. */
static const char *const default_segment_rows[] = {"256,256,256,256", "577,577", "1024", "64,1024,577,33"};

enum { LIMIT_TOKENS = 1 << 24 };

typedef enum flag_scope { SCOPE_ANY, SCOPE_PAGED, SCOPE_ENCODER } flag_scope;

/* What parsing tracks beyond the options themselves. */
typedef struct parse_state {
    bench_options *opt;
    const char *paged_flag;      /* first paged-only flag seen, for the --op check */
    const char *encoder_flag;
    bool kv_heads_given;
    bool help;
} parse_state;

typedef int (*flag_handler)(parse_state *st, const char *flag, const char *value);

typedef struct flag_spec {
    const char *name;
    bool takes_value;
    flag_scope scope;
    flag_handler handle;
} flag_spec;

static void print_usage(FILE *f)
{
    fprintf(f,
        "usage: r35a_bench [options]\n"
        "\n"
        "Times librdna35attn calls and prints, per row: implementation, size, median time, GB/s,\n"
        "%% of the memory roofline and the max error against the reference backend.\n"
        "Without options: paged decode, f16, D=128, 32 q heads / 8 kv heads, page 16, batch 1,\n"
        "M=1, contexts 128,256,...,32768, best available backend.\n"
        "\n"
        "problem:\n"
        "  --op paged|encoder       paged-KV decode (default) or varlen encoder attention\n"
        "  --dtype f16|bf16|f32     element type (default f16; f32 is reference-only)\n"
        "  --head-size N            D (default 128 paged, 64 encoder)\n"
        "  --q-heads N              query heads (default 32 paged, 16 encoder)\n"
        "  --kv-heads N             kv heads (default: 8 when it divides --q-heads, else = q heads;\n"
        "                           encoder: = q heads)\n"
        "paged only:\n"
        "  --page-size N            tokens per KV page (default 16)\n"
        "  --contexts A,B,...       one row per context length L (default 128,...,32768)\n"
        "  --batch N                sequences per call, all of length L (default 1)\n"
        "  --m N                    query tokens per sequence (default 1; speculative decode: 2..8)\n"
        "  --window N               sliding window in keys (default 0 = none)\n"
        "  --kv-dtype fp8|int8|same KV cache dtype (default same as --dtype; fp8 = e4m3fn; scales\n"
        "                           per tensor; bytes moved count the 8-bit elements)\n"
        "  --alibi                  ALiBi slopes 2^(-8(h+1)/q_heads)\n"
        "encoder only:\n"
        "  --segments A,B,...       segment lengths of one call = one row; repeat for more rows\n"
        "                           (default rows: %s | %s | %s | %s)\n"
        "  --causal                 causal instead of non-causal\n"
        "both:\n"
        "  --sinks                  attention sinks (random logits in [-2, 2), one per q head)\n"
        "  --softcap X              logit softcap (default 0 = off)\n"
        "measurement:\n"
        "  --backend auto|gpu|reference   context backend (default auto: GPU if served, else reference)\n"
        "  --min-working-set-mb N   rotate through enough independent copies of all buffers (KV cache\n"
        "                           included) that they exceed N MiB, so caches (32 MiB MALL on\n"
        "                           gfx1151) do not flatter small rows (default 0 = one copy)\n"
        "  --iters N                timed iterations per row (default: adapt to ~0.5 s, at least 3)\n"
        "  --peak-gbs X             roofline peak in GB/s (default: measured, 256 MiB copy)\n"
        "  --no-check               skip the comparison with the reference backend\n"
        "  --seed N                 replay the random inputs of an earlier run (decimal or 0x hex)\n"
        "output:\n"
        "  --json                   one JSON object (problem, machine, peak, rows) on stdout\n"
        "  --csv                    CSV rows on stdout\n"
        "  --help                   this text\n"
        "\n"
        "Timing: CLOCK_MONOTONIC around each call (plus a stream synchronize on GPU contexts),\n"
        "1 warm-up, median of the iterations. GB/s = bytes moved / median time, where bytes moved\n"
        "is what a call must move at least:\n"
        "  paged:   " BENCH_BYTES_MODEL_PAGED ".\n"
        "  encoder: " BENCH_BYTES_MODEL_ENCODER ".\n"
        "Error: max|out - ref| / max|ref| over all output elements, ref from a context created with\n"
        "R35A_BACKEND_REFERENCE. When the measured backend is the reference itself, this compares it\n"
        "with itself (0 unless it is nondeterministic) and is marked 'self'.\n"
        "Exit status: 0 ok, 1 library or system error, 2 usage error.\n",
        default_segment_rows[0], default_segment_rows[1], default_segment_rows[2],
        default_segment_rows[3]);
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("r35a_bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs("\nTry 'r35a_bench --help'.\n", stderr);
    va_end(ap);
    return BENCH_EXIT_USAGE;
}

/* ---- value parsers --------------------------------------------------------------------------- */

static int parse_i32(const char *flag, const char *s, int32_t lo, int32_t hi, int32_t *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end != '\0' || errno != 0 || v < lo || v > hi)
        return usage_error("%s: expected an integer in [%d, %d], got '%s'", flag, (int)lo, (int)hi, s);
    *out = (int32_t)v;
    return BENCH_EXIT_OK;
}

static int parse_double(const char *flag, const char *s, double lo, double hi, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || errno != 0 || !isfinite(v) || v < lo || v > hi)
        return usage_error("%s: expected a number in [%g, %g], got '%s'", flag, lo, hi, s);
    *out = v;
    return BENCH_EXIT_OK;
}

/* Parses "A,B,C" into out[0..*count-1]; at most max items, each in [lo, hi]. */
static int parse_i32_list(const char *flag, const char *s, int32_t lo, int32_t hi, int32_t *out,
                          int max, int *count)
{
    int n = 0;
    const char *p = s;
    for (;;) {
        char item[32];
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof(item))
            return usage_error("%s: expected a comma-separated list of integers, got '%s'", flag, s);
        if (n == max)
            return usage_error("%s: more than %d items in total", flag, max);
        memcpy(item, p, len);
        item[len] = '\0';
        int rc = parse_i32(flag, item, lo, hi, &out[n]);
        if (rc != BENCH_EXIT_OK)
            return rc;
        n++;
        if (p[len] == '\0')
            break;
        p += len + 1;
    }
    *count = n;
    return BENCH_EXIT_OK;
}

/* ---- flag handlers --------------------------------------------------------------------------- */

static int on_op(parse_state *st, const char *flag, const char *v)
{
    if (strcmp(v, "paged") == 0)
        st->opt->op = BENCH_OP_PAGED;
    else if (strcmp(v, "encoder") == 0)
        st->opt->op = BENCH_OP_ENCODER;
    else
        return usage_error("%s: expected paged or encoder, got '%s'", flag, v);
    return BENCH_EXIT_OK;
}

static int on_dtype(parse_state *st, const char *flag, const char *v)
{
    if (strcmp(v, "f16") == 0)
        st->opt->dtype = R35A_DTYPE_F16;
    else if (strcmp(v, "bf16") == 0)
        st->opt->dtype = R35A_DTYPE_BF16;
    else if (strcmp(v, "f32") == 0)
        st->opt->dtype = R35A_DTYPE_F32;
    else
        return usage_error("%s: expected f16, bf16 or f32, got '%s'", flag, v);
    return BENCH_EXIT_OK;
}

static int on_backend(parse_state *st, const char *flag, const char *v)
{
    if (strcmp(v, "auto") == 0)
        st->opt->backend = R35A_BACKEND_AUTO;
    else if (strcmp(v, "gpu") == 0)
        st->opt->backend = R35A_BACKEND_GPU;
    else if (strcmp(v, "reference") == 0)
        st->opt->backend = R35A_BACKEND_REFERENCE;
    else
        return usage_error("%s: expected auto, gpu or reference, got '%s'", flag, v);
    return BENCH_EXIT_OK;
}

static int on_head_size(parse_state *st, const char *flag, const char *v)
{
    return parse_i32(flag, v, 1, 1024, &st->opt->head_size);
}

static int on_q_heads(parse_state *st, const char *flag, const char *v)
{
    return parse_i32(flag, v, 1, 1024, &st->opt->num_q_heads);
}

static int on_kv_heads(parse_state *st, const char *flag, const char *v)
{
    st->kv_heads_given = true;
    return parse_i32(flag, v, 1, 1024, &st->opt->num_kv_heads);
}

static int on_page_size(parse_state *st, const char *flag, const char *v)
{
    return parse_i32(flag, v, 1, 1 << 20, &st->opt->page_size);
}

static int on_contexts(parse_state *st, const char *flag, const char *v)
{
    return parse_i32_list(flag, v, 1, LIMIT_TOKENS, st->opt->contexts, BENCH_MAX_ROWS,
                          &st->opt->num_contexts);
}

static int on_batch(parse_state *st, const char *flag, const char *v)
{
    return parse_i32(flag, v, 1, 1 << 16, &st->opt->batch);
}

static int on_m(parse_state *st, const char *flag, const char *v)
{
    return parse_i32(flag, v, 1, 1 << 16, &st->opt->query_len);
}

static int on_window(parse_state *st, const char *flag, const char *v)
{
    return parse_i32(flag, v, 0, INT32_MAX, &st->opt->window);
}

static int on_kv_dtype(parse_state *st, const char *flag, const char *v)
{
    if (strcmp(v, "fp8") == 0 || strcmp(v, "fp8_e4m3") == 0)
        st->opt->kv_dtype = R35A_DTYPE_FP8_E4M3;
    else if (strcmp(v, "int8") == 0)
        st->opt->kv_dtype = R35A_DTYPE_INT8;
    else if (strcmp(v, "same") == 0)
        st->opt->kv_dtype = (r35a_dtype)0;
    else
        return usage_error("%s: expected fp8, int8 or same, got '%s'", flag, v);
    return BENCH_EXIT_OK;
}

static int on_alibi(parse_state *st, const char *flag, const char *v)
{
    (void)flag;
    (void)v;
    st->opt->alibi = true;
    return BENCH_EXIT_OK;
}

static int on_sinks(parse_state *st, const char *flag, const char *v)
{
    (void)flag;
    (void)v;
    st->opt->sinks = true;
    return BENCH_EXIT_OK;
}

static int on_softcap(parse_state *st, const char *flag, const char *v)
{
    return parse_double(flag, v, 0.0, 1e30, &st->opt->softcap);
}

static int on_segments(parse_state *st, const char *flag, const char *v)
{
    bench_options *o = st->opt;
    if (o->num_segment_rows == BENCH_MAX_ROWS)
        return usage_error("%s: more than %d rows", flag, BENCH_MAX_ROWS);
    int start = o->segment_row_start[o->num_segment_rows];
    int count = 0;
    int rc = parse_i32_list(flag, v, 0, LIMIT_TOKENS, o->segment_lens + start,
                            BENCH_MAX_SEGMENTS - start, &count);
    if (rc != BENCH_EXIT_OK)
        return rc;
    int64_t tokens = 0;
    for (int i = 0; i < count; i++)
        tokens += o->segment_lens[start + i];
    if (tokens > LIMIT_TOKENS)
        return usage_error("%s: %lld tokens in one row, at most %d", flag, (long long)tokens, LIMIT_TOKENS);
    o->num_segment_rows++;
    o->segment_row_start[o->num_segment_rows] = start + count;
    return BENCH_EXIT_OK;
}

static int on_causal(parse_state *st, const char *flag, const char *v)
{
    (void)flag;
    (void)v;
    st->opt->causal = true;
    return BENCH_EXIT_OK;
}

static int on_min_working_set(parse_state *st, const char *flag, const char *v)
{
    return parse_double(flag, v, 0.0, 1e7, &st->opt->min_working_set_mb);
}

static int on_iters(parse_state *st, const char *flag, const char *v)
{
    return parse_i32(flag, v, 1, 10000000, &st->opt->iters);
}

static int on_peak(parse_state *st, const char *flag, const char *v)
{
    int rc = parse_double(flag, v, 0.0, 1e7, &st->opt->peak_gbs);
    if (rc == BENCH_EXIT_OK && st->opt->peak_gbs <= 0.0)
        return usage_error("%s: expected a positive number, got '%s'", flag, v);
    return rc;
}

static int on_no_check(parse_state *st, const char *flag, const char *v)
{
    (void)flag;
    (void)v;
    st->opt->check = false;
    return BENCH_EXIT_OK;
}

static int on_seed(parse_state *st, const char *flag, const char *v)
{
    char *end = NULL;
    errno = 0;
    unsigned long long seed = strtoull(v, &end, 0);
    if (end == v || *end != '\0' || errno != 0 || v[0] == '-')
        return usage_error("%s: expected an unsigned 64-bit integer, got '%s'", flag, v);
    st->opt->seed = (uint64_t)seed;
    st->opt->seed_given = true;
    return BENCH_EXIT_OK;
}

static int on_json(parse_state *st, const char *flag, const char *v)
{
    (void)flag;
    (void)v;
    st->opt->format = BENCH_FORMAT_JSON;
    return BENCH_EXIT_OK;
}

static int on_csv(parse_state *st, const char *flag, const char *v)
{
    (void)flag;
    (void)v;
    st->opt->format = BENCH_FORMAT_CSV;
    return BENCH_EXIT_OK;
}

static int on_help(parse_state *st, const char *flag, const char *v)
{
    (void)flag;
    (void)v;
    st->help = true;
    return BENCH_EXIT_OK;
}

static const flag_spec flags[] = {
    {"--op", true, SCOPE_ANY, on_op},
    {"--dtype", true, SCOPE_ANY, on_dtype},
    {"--head-size", true, SCOPE_ANY, on_head_size},
    {"--q-heads", true, SCOPE_ANY, on_q_heads},
    {"--kv-heads", true, SCOPE_ANY, on_kv_heads},
    {"--page-size", true, SCOPE_PAGED, on_page_size},
    {"--contexts", true, SCOPE_PAGED, on_contexts},
    {"--batch", true, SCOPE_PAGED, on_batch},
    {"--m", true, SCOPE_PAGED, on_m},
    {"--window", true, SCOPE_PAGED, on_window},
    {"--kv-dtype", true, SCOPE_PAGED, on_kv_dtype},
    {"--alibi", false, SCOPE_PAGED, on_alibi},
    {"--sinks", false, SCOPE_ANY, on_sinks},
    {"--softcap", true, SCOPE_ANY, on_softcap},
    {"--segments", true, SCOPE_ENCODER, on_segments},
    {"--causal", false, SCOPE_ENCODER, on_causal},
    {"--backend", true, SCOPE_ANY, on_backend},
    {"--min-working-set-mb", true, SCOPE_ANY, on_min_working_set},
    {"--iters", true, SCOPE_ANY, on_iters},
    {"--peak-gbs", true, SCOPE_ANY, on_peak},
    {"--no-check", false, SCOPE_ANY, on_no_check},
    {"--seed", true, SCOPE_ANY, on_seed},
    {"--json", false, SCOPE_ANY, on_json},
    {"--csv", false, SCOPE_ANY, on_csv},
    {"--help", false, SCOPE_ANY, on_help},
};

static const flag_spec *find_flag(const char *name, size_t name_len)
{
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
        if (strlen(flags[i].name) == name_len && strncmp(flags[i].name, name, name_len) == 0)
            return &flags[i];
    }
    return NULL;
}

/* ---- defaults and cross-flag checks ---------------------------------------------------------- */

static void set_defaults(bench_options *o)
{
    memset(o, 0, sizeof(*o));
    o->op = BENCH_OP_PAGED;
    o->dtype = R35A_DTYPE_F16;
    o->page_size = 16;
    o->batch = 1;
    o->query_len = 1;
    o->backend = R35A_BACKEND_AUTO;
    o->check = true;
    o->format = BENCH_FORMAT_TABLE;
}

static void fill_default_segments(bench_options *o)
{
    parse_state st = {.opt = o};
    for (size_t i = 0; i < sizeof(default_segment_rows) / sizeof(default_segment_rows[0]); i++)
        (void)on_segments(&st, "--segments", default_segment_rows[i]);
}

/* Shape defaults that depend on --op and on each other. */
static void resolve_defaults(parse_state *st)
{
    bench_options *o = st->opt;
    bool paged = o->op == BENCH_OP_PAGED;
    if (o->head_size == 0)
        o->head_size = paged ? 128 : 64;
    if (o->num_q_heads == 0)
        o->num_q_heads = paged ? 32 : 16;
    if (!st->kv_heads_given)
        o->num_kv_heads = (paged && o->num_q_heads % 8 == 0) ? 8 : o->num_q_heads;
    if (paged && o->num_contexts == 0) {
        o->num_contexts = (int)(sizeof(default_contexts) / sizeof(default_contexts[0]));
        memcpy(o->contexts, default_contexts, sizeof(default_contexts));
    }
    if (!paged && o->num_segment_rows == 0)
        fill_default_segments(o);
}

static int check_combination(const parse_state *st)
{
    const bench_options *o = st->opt;
    if (o->op == BENCH_OP_PAGED && st->encoder_flag != NULL)
        return usage_error("%s applies to --op encoder only", st->encoder_flag);
    if (o->op == BENCH_OP_ENCODER && st->paged_flag != NULL)
        return usage_error("%s applies to --op paged only", st->paged_flag);
    if (o->op == BENCH_OP_PAGED) {
        for (int i = 0; i < o->num_contexts; i++) {
            if (o->contexts[i] < o->query_len)
                return usage_error("--contexts: %d is shorter than --m %d (the query tokens are part of "
                                   "the context)", (int)o->contexts[i], (int)o->query_len);
        }
    }
    return BENCH_EXIT_OK;
}

/* ---- the parser ------------------------------------------------------------------------------ */

static int parse_one(parse_state *st, int argc, char **argv, int *i)
{
    const char *arg = argv[*i];
    if (strncmp(arg, "--", 2) != 0)
        return usage_error("unexpected argument '%s'", arg);
    const char *eq = strchr(arg, '=');
    size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
    const flag_spec *spec = find_flag(arg, name_len);
    if (spec == NULL)
        return usage_error("unknown option '%.*s'", (int)name_len, arg);
    const char *value = NULL;
    if (spec->takes_value) {
        if (eq != NULL) {
            value = eq + 1;
        } else if (*i + 1 < argc) {
            value = argv[++*i];
        } else {
            return usage_error("%s needs a value", spec->name);
        }
    } else if (eq != NULL) {
        return usage_error("%s takes no value", spec->name);
    }
    if (spec->scope == SCOPE_PAGED && st->paged_flag == NULL)
        st->paged_flag = spec->name;
    if (spec->scope == SCOPE_ENCODER && st->encoder_flag == NULL)
        st->encoder_flag = spec->name;
    return spec->handle(st, spec->name, value);
}

int bench_parse_options(int argc, char **argv, bench_options *opt, bool *help_shown)
{
    parse_state st = {.opt = opt};
    set_defaults(opt);
    *help_shown = false;
    for (int i = 1; i < argc; i++) {
        int rc = parse_one(&st, argc, argv, &i);
        if (rc != BENCH_EXIT_OK)
            return rc;
        if (st.help) {
            print_usage(stdout);
            *help_shown = true;
            return BENCH_EXIT_OK;
        }
    }
    resolve_defaults(&st);
    return check_combination(&st);
}

int bench_num_rows(const bench_options *opt)
{
    return opt->op == BENCH_OP_PAGED ? opt->num_contexts : opt->num_segment_rows;
}

const char *bench_dtype_name(r35a_dtype dtype)
{
    switch (dtype) {
    case R35A_DTYPE_F16: return "f16";
    case R35A_DTYPE_BF16: return "bf16";
    case R35A_DTYPE_F32: return "f32";
    case R35A_DTYPE_FP8_E4M3: return "fp8_e4m3";
    case R35A_DTYPE_INT8: return "int8";
    }
    return "unknown";
}

const char *bench_backend_name(r35a_backend backend)
{
    switch (backend) {
    case R35A_BACKEND_AUTO: return "auto";
    case R35A_BACKEND_GPU: return "gpu";
    case R35A_BACKEND_REFERENCE: return "reference";
    }
    return "unknown";
}
