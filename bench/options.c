/* options.c - r35a_bench command line: flags, then the list of rows (bench_shape) they describe. */
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

enum { NUM_SETS_BITS = 7 };   /* BENCH_SETS_* */

/* What parsing tracks beyond the options themselves. */
typedef struct parse_state {
    bench_options *opt;
    const char *paged_flag;      /* first paged-only flag seen, for the --op check */
    const char *encoder_flag;
    const char *set_by[NUM_SETS_BITS]; /* per BENCH_SETS_* bit: the flag given for it, for the preset check */
    bool kv_heads_given;
    bool help;
} parse_state;

typedef int (*flag_handler)(parse_state *st, const char *flag, const char *value);

typedef struct flag_spec {
    const char *name;
    bool takes_value;
    flag_scope scope;
    unsigned sets;               /* the BENCH_SETS_* field it gives (a preset that sets it refuses it) */
    flag_handler handle;
} flag_spec;

static void append_usage(char *buf, size_t cap, const char *text)
{
    size_t used = strlen(buf), n = strlen(text);
    if (used + n < cap)
        memcpy(buf + used, text, n + 1);
}

static void print_usage(FILE *f)
{
    /* each preset: its name, then its summary's lines indented under it */
    char presets[1024] = "";
    for (int i = 0; i < bench_num_presets; i++) {
        char line[128];
        snprintf(line, sizeof line, "    %s\n", bench_presets[i].name);
        append_usage(presets, sizeof presets, line);
        for (const char *p = bench_presets[i].summary; *p != '\0';) {
            size_t n = strcspn(p, "\n");
            snprintf(line, sizeof line, "        %.*s\n", (int)(n < 100 ? n : 100), p);
            append_usage(presets, sizeof presets, line);
            p += n + (p[n] == '\n');
        }
    }
    fprintf(f,
        "usage: r35a_bench [options]\n"
        "\n"
        "Times librdna35attn calls and prints, per row: size, median time, GB/s, %% of the memory\n"
        "roofline, the max error against the reference backend, the KV splits and launch grid, and\n"
        "the implementation the plan chose. On a GPU context the buffers live in device memory.\n"
        "Without options: paged decode, f16, D=128, 32 q heads / 8 kv heads, page 16, batch 1,\n"
        "M=1, contexts 128,256,...,32768, best available backend (a GPU when one is served).\n"
        "\n"
        "sweeps:\n"
        "  --preset NAME            a named sweep of rows (the flags it does not set still apply):\n"
        "%s"
        "  --list                   print the rows the flags describe, one per line, and exit\n"
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
        "  --kv-dtype fp8|int8|same KV cache dtype (default same as --dtype; fp8 = e4m3fn; bytes\n"
        "                           moved count the 8-bit elements)\n"
        "  --kv-scales tensor|kv-head|token-head  an 8-bit cache's scales (default tensor): one each,\n"
        "                           one per kv head, or one per (token, kv head) in [pages][page][kv heads]\n"
        "                           float32 tensors (their bytes are counted as moved)\n"
        "  --alibi                  ALiBi slopes 2^(-8(h+1)/q_heads)\n"
        "encoder only:\n"
        "  --segments A,B,...       segment lengths of one call = one row; repeat for more rows\n"
        "                           (default rows: %s | %s | %s | %s)\n"
        "  --causal                 causal instead of non-causal\n"
        "both:\n"
        "  --sinks                  attention sinks (random logits in [-2, 2), one per q head)\n"
        "  --lse                    also write each row's softmax LSE (float32; paged: the decode kernels\n"
        "                           write it, varlen: the portable kernel serves it)\n"
        "  --softcap X              logit softcap (default 0 = off)\n"
        "measurement:\n"
        "  --backend auto|gpu|reference   context backend (default auto: GPU if served, else reference)\n"
        "  --min-working-set-mb N   rotate through enough independent copies of all buffers (KV cache\n"
        "                           included) that they exceed N MiB, so caches (32 MiB MALL on\n"
        "                           gfx1151, 50 MiB L2 on H200) do not flatter small rows (default:\n"
        "                           GPU max(512, 4 x the last-level cache the runtime reports);\n"
        "                           reference 0 = one copy, it is compute-bound)\n"
        "  --iters N                timed iterations per row (default: adapt to ~0.5 s on the host,\n"
        "                           ~0.25 s on a GPU, at least 3)\n"
        "  --graph                  GPU: also capture one call per copy in a HIP/CUDA graph and time\n"
        "                           its replays; GB/s then comes from the graph time (no launch cost)\n"
        "  --peak-gbs X             roofline peak in GB/s (default: measured: host 256 MiB memcpy;\n"
        "                           GPU the best read stream of the embedded read kernel)\n"
        "  --peak-tflops X          the dense matrix peak in TFLOP/s (e.g. the card's bf16 mma rate):\n"
        "                           adds a '%% mma' column, GFLOP/s against it\n"
        "  --no-check               skip the comparison with the reference backend\n"
        "  --seed N                 replay the random inputs of an earlier run (decimal or 0x hex)\n"
        "output:\n"
        "  --json                   one JSON object (problem, machine, peak, rows) on stdout\n"
        "  --csv                    CSV rows on stdout\n"
        "  --help                   this text\n"
        "\n"
        "Timing: reference: CLOCK_MONOTONIC around each call; GPU: events on the bench's stream\n"
        "around each call, waited for before the next (so a call's launch cost is in its time), and\n"
        "with --graph events around each replay of the captured calls, divided by the calls.\n"
        "1 warm-up, median of the iterations. GB/s = bytes moved / median time, where bytes moved\n"
        "is what a call must move at least:\n"
        "  paged:   " BENCH_BYTES_MODEL_PAGED ".\n"
        "  encoder: " BENCH_BYTES_MODEL_ENCODER ".\n"
        "Error: max|out - ref| / max|ref| over all output elements of the call on copy 0 (copied back\n"
        "from the device), ref from a context created with R35A_BACKEND_REFERENCE on host copies of\n"
        "the same inputs. NaN, or more than 4 ulp of the output type (f16 3.9e-3, bf16 3.1e-2; f32\n"
        "1e-4), fails the row. When the measured backend is the reference itself, this compares it\n"
        "with itself (0 unless it is nondeterministic) and is marked 'self'.\n"
        "Exit status: 0 ok, 1 library or system error, 2 usage error, 3 a row failed its check.\n",
        presets, default_segment_rows[0], default_segment_rows[1], default_segment_rows[2],
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
    return parse_i32_list(flag, v, 1, LIMIT_TOKENS, st->opt->contexts, BENCH_MAX_CONTEXTS,
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

static int on_kv_scales(parse_state *st, const char *flag, const char *v)
{
    if (strcmp(v, "tensor") == 0)
        st->opt->kv_scales = R35A_KV_SCALE_PER_TENSOR;
    else if (strcmp(v, "kv-head") == 0)
        st->opt->kv_scales = R35A_KV_SCALE_PER_KV_HEAD;
    else if (strcmp(v, "token-head") == 0)
        st->opt->kv_scales = R35A_KV_SCALE_PER_TOKEN_HEAD;
    else
        return usage_error("%s: expected tensor, kv-head or token-head, got '%s'", flag, v);
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

static int on_lse(parse_state *st, const char *flag, const char *v)
{
    (void)flag;
    (void)v;
    st->opt->lse = true;
    return BENCH_EXIT_OK;
}

static int on_softcap(parse_state *st, const char *flag, const char *v)
{
    return parse_double(flag, v, 0.0, 1e30, &st->opt->softcap);
}

static int on_segments(parse_state *st, const char *flag, const char *v)
{
    bench_options *o = st->opt;
    if (o->num_segment_rows == BENCH_MAX_SEGMENT_ROWS)
        return usage_error("%s: more than %d rows", flag, BENCH_MAX_SEGMENT_ROWS);
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

static int on_graph(parse_state *st, const char *flag, const char *v)
{
    (void)flag;
    (void)v;
    st->opt->graph = true;
    return BENCH_EXIT_OK;
}

static int on_preset(parse_state *st, const char *flag, const char *v)
{
    const bench_preset *preset = bench_find_preset(v);
    if (preset == NULL) {
        char names[256] = "";
        for (int i = 0; i < bench_num_presets; i++) {
            if (strlen(names) + strlen(bench_presets[i].name) + 3 >= sizeof names)
                break;
            if (i > 0)
                strcat(names, ", ");
            strcat(names, bench_presets[i].name);
        }
        return usage_error("%s: no preset '%s' (presets: %s)", flag, v, names);
    }
    st->opt->preset = preset->name;
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

static int on_peak_tflops(parse_state *st, const char *flag, const char *v)
{
    int rc = parse_double(flag, v, 0.0, 1e6, &st->opt->peak_tflops);
    if (rc == BENCH_EXIT_OK && st->opt->peak_tflops <= 0.0)
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

static int on_list(parse_state *st, const char *flag, const char *v)
{
    (void)flag;
    (void)v;
    st->opt->list = true;
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
    {"--preset", true, SCOPE_ANY, 0, on_preset},
    {"--op", true, SCOPE_ANY, BENCH_SETS_OP, on_op},
    {"--dtype", true, SCOPE_ANY, 0, on_dtype},
    {"--head-size", true, SCOPE_ANY, BENCH_SETS_HEAD_SIZE, on_head_size},
    {"--q-heads", true, SCOPE_ANY, BENCH_SETS_HEADS, on_q_heads},
    {"--kv-heads", true, SCOPE_ANY, BENCH_SETS_HEADS, on_kv_heads},
    {"--page-size", true, SCOPE_PAGED, BENCH_SETS_PAGE_SIZE, on_page_size},
    {"--contexts", true, SCOPE_PAGED, BENCH_SETS_CONTEXTS, on_contexts},
    {"--batch", true, SCOPE_PAGED, BENCH_SETS_BATCH, on_batch},
    {"--m", true, SCOPE_PAGED, BENCH_SETS_M, on_m},
    {"--window", true, SCOPE_PAGED, 0, on_window},
    {"--kv-dtype", true, SCOPE_PAGED, 0, on_kv_dtype},
    {"--kv-scales", true, SCOPE_PAGED, 0, on_kv_scales},
    {"--alibi", false, SCOPE_PAGED, 0, on_alibi},
    {"--sinks", false, SCOPE_ANY, 0, on_sinks},
    {"--lse", false, SCOPE_ANY, 0, on_lse},
    {"--softcap", true, SCOPE_ANY, 0, on_softcap},
    {"--segments", true, SCOPE_ENCODER, 0, on_segments},
    {"--causal", false, SCOPE_ENCODER, 0, on_causal},
    {"--backend", true, SCOPE_ANY, 0, on_backend},
    {"--min-working-set-mb", true, SCOPE_ANY, 0, on_min_working_set},
    {"--iters", true, SCOPE_ANY, 0, on_iters},
    {"--graph", false, SCOPE_ANY, 0, on_graph},
    {"--peak-gbs", true, SCOPE_ANY, 0, on_peak},
    {"--peak-tflops", true, SCOPE_ANY, 0, on_peak_tflops},
    {"--no-check", false, SCOPE_ANY, 0, on_no_check},
    {"--seed", true, SCOPE_ANY, 0, on_seed},
    {"--json", false, SCOPE_ANY, 0, on_json},
    {"--csv", false, SCOPE_ANY, 0, on_csv},
    {"--list", false, SCOPE_ANY, 0, on_list},
    {"--help", false, SCOPE_ANY, 0, on_help},
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
    o->min_working_set_mb = -1.0;
    o->format = BENCH_FORMAT_TABLE;
}

static void fill_segments(bench_options *o, const char *const *rows, size_t count)
{
    parse_state st = {.opt = o};
    for (size_t i = 0; i < count; i++)
        (void)on_segments(&st, "--segments", rows[i]);
}

/* Shape defaults that depend on --op, --preset and on each other. */
static void resolve_defaults(parse_state *st)
{
    bench_options *o = st->opt;
    const bench_preset *preset = o->preset ? bench_find_preset(o->preset) : NULL;
    if (preset != NULL && st->set_by[0] == NULL)   /* BENCH_SETS_OP: a conflicting --op is refused later */
        o->op = preset->op;
    bool paged = o->op == BENCH_OP_PAGED;
    if (o->head_size == 0)
        o->head_size = paged ? 128 : 64;
    if (o->num_q_heads == 0)
        o->num_q_heads = paged ? 32 : 16;
    if (!st->kv_heads_given)
        o->num_kv_heads = (paged && o->num_q_heads % 8 == 0) ? 8 : o->num_q_heads;
    if (paged && o->num_contexts == 0) {
        if (preset != NULL && preset->default_context > 0) {
            o->contexts[0] = preset->default_context;
            o->num_contexts = 1;
        } else {
            o->num_contexts = (int)(sizeof(default_contexts) / sizeof(default_contexts[0]));
            memcpy(o->contexts, default_contexts, sizeof(default_contexts));
        }
    }
    if (!paged && o->num_segment_rows == 0) {
        if (preset != NULL && preset->default_segments != NULL)
            fill_segments(o, &preset->default_segments, 1);
        else
            fill_segments(o, default_segment_rows, sizeof(default_segment_rows) / sizeof(default_segment_rows[0]));
    }
}

static int check_combination(const parse_state *st)
{
    const bench_options *o = st->opt;
    if (o->preset != NULL) {
        const bench_preset *preset = bench_find_preset(o->preset);
        for (int bit = 0; bit < NUM_SETS_BITS; bit++) {
            if ((preset->sets & (1u << bit)) && st->set_by[bit] != NULL)
                return usage_error("%s: --preset %s sets it (use the flags without --preset for one shape)",
                                   st->set_by[bit], o->preset);
        }
    }
    if (o->op == BENCH_OP_PAGED && st->encoder_flag != NULL)
        return usage_error("%s applies to --op encoder only", st->encoder_flag);
    if (o->op == BENCH_OP_ENCODER && st->paged_flag != NULL)
        return usage_error("%s applies to --op paged only", st->paged_flag);
    return BENCH_EXIT_OK;
}

/* ---- rows ------------------------------------------------------------------------------------ */

static int push_shape(bench_shape **shapes, int *count, int *cap, const bench_shape *shape)
{
    if (*count == *cap) {
        int grown = *cap ? 2 * *cap : 64;
        bench_shape *p = realloc(*shapes, sizeof(bench_shape) * (size_t)grown);
        if (p == NULL)
            return -1;
        *shapes = p;
        *cap = grown;
    }
    (*shapes)[(*count)++] = *shape;
    return 0;
}

/* The flags' own rows: one per context (paged) or per --segments row (encoder). */
static int flag_shapes(const bench_options *o, bench_shape **shapes, int *count, int *cap)
{
    bench_shape base;
    memset(&base, 0, sizeof(base));
    base.op = o->op;
    base.dtype = o->dtype;
    base.head_size = o->head_size;
    base.num_q_heads = o->num_q_heads;
    base.num_kv_heads = o->num_kv_heads;
    base.sinks = o->sinks;
    base.lse = o->lse;
    base.softcap = o->softcap;
    if (o->op == BENCH_OP_PAGED) {
        base.kv_dtype = o->kv_dtype;
        base.kv_scales = o->kv_scales;
        base.alibi = o->alibi;
        base.page_size = o->page_size;
        base.batch = o->batch;
        base.query_len = o->query_len;
        base.window = o->window;
        for (int i = 0; i < o->num_contexts; i++) {
            base.context = o->contexts[i];
            if (push_shape(shapes, count, cap, &base) != 0)
                return -1;
        }
        return 0;
    }
    base.causal = o->causal;
    for (int r = 0; r < o->num_segment_rows; r++) {
        base.segment_first = o->segment_row_start[r];
        base.num_segments = o->segment_row_start[r + 1] - o->segment_row_start[r];
        if (push_shape(shapes, count, cap, &base) != 0)
            return -1;
    }
    return 0;
}

static bool same_segments(const bench_options *o, const bench_shape *a, const bench_shape *b)
{
    return a->num_segments == b->num_segments &&
           memcmp(o->segment_lens + a->segment_first, o->segment_lens + b->segment_first,
                  sizeof(int32_t) * (size_t)a->num_segments) == 0;
}

static unsigned differing_fields(const bench_options *o, const bench_shape *a, const bench_shape *b)
{
    unsigned bits = 0;
    bits |= a->dtype != b->dtype ? BENCH_FIELD_DTYPE : 0u;
    bits |= a->head_size != b->head_size ? BENCH_FIELD_HEAD_SIZE : 0u;
    bits |= a->num_q_heads != b->num_q_heads ? BENCH_FIELD_Q_HEADS : 0u;
    bits |= a->num_kv_heads != b->num_kv_heads ? BENCH_FIELD_KV_HEADS : 0u;
    bits |= a->page_size != b->page_size ? BENCH_FIELD_PAGE_SIZE : 0u;
    bits |= a->batch != b->batch ? BENCH_FIELD_BATCH : 0u;
    bits |= a->query_len != b->query_len ? BENCH_FIELD_QUERY_LEN : 0u;
    bits |= a->window != b->window ? BENCH_FIELD_WINDOW : 0u;
    bits |= a->context != b->context ? BENCH_FIELD_CONTEXT : 0u;
    bits |= !same_segments(o, a, b) ? BENCH_FIELD_SEGMENTS : 0u;
    bits |= a->causal != b->causal ? BENCH_FIELD_CAUSAL : 0u;
    return bits;
}

static int build_shapes(bench_options *o)
{
    int cap = 0, rc;
    o->num_shapes = 0;
    if (o->preset != NULL)
        rc = bench_find_preset(o->preset)->build(o, &o->shapes, &o->num_shapes, &cap);
    else
        rc = flag_shapes(o, &o->shapes, &o->num_shapes, &cap);
    if (rc != 0) {
        fprintf(stderr, "r35a_bench: out of memory for the list of rows\n");
        return BENCH_EXIT_ERROR;
    }
    o->varying = 0;
    for (int i = 1; i < o->num_shapes; i++)
        o->varying |= differing_fields(o, &o->shapes[0], &o->shapes[i]);
    for (int i = 0; i < o->num_shapes; i++) {
        const bench_shape *sh = &o->shapes[i];
        if (sh->op == BENCH_OP_PAGED && sh->context < sh->query_len)
            return usage_error("context %d is shorter than M = %d (the query tokens are part of the context)",
                               (int)sh->context, (int)sh->query_len);
    }
    return BENCH_EXIT_OK;
}

void bench_options_free(bench_options *opt)
{
    free(opt->shapes);
    opt->shapes = NULL;
    opt->num_shapes = 0;
}

/* Appends " <text>" (no space first) if it fits whole. */
static void label_append(char *buf, size_t len, const char *text)
{
    size_t used = strlen(buf), n = strlen(text), space = used ? 1 : 0;
    if (used + space + n >= len)
        return;
    if (space)
        buf[used++] = ' ';
    memcpy(buf + used, text, n + 1);
}

void bench_shape_label(const bench_options *opt, const bench_shape *sh, char *buf, size_t len)
{
    /* the paged-only fields mean nothing for an encoder row */
    const unsigned v = opt->varying & (sh->op == BENCH_OP_PAGED ? ~0u
                                                                : ~(unsigned)(BENCH_FIELD_PAGE_SIZE | BENCH_FIELD_BATCH |
                                                                              BENCH_FIELD_QUERY_LEN | BENCH_FIELD_WINDOW));
    char item[32];
    buf[0] = '\0';
    if (len == 0)
        return;
    if (v & BENCH_FIELD_DTYPE)
        label_append(buf, len, bench_dtype_name(sh->dtype));
    static const struct {
        unsigned bit;
        const char *fmt;
        size_t offset;
    } fields[] = {
        {BENCH_FIELD_HEAD_SIZE, "D%d", offsetof(bench_shape, head_size)},
        {BENCH_FIELD_Q_HEADS, "Hq%d", offsetof(bench_shape, num_q_heads)},
        {BENCH_FIELD_KV_HEADS, "Hkv%d", offsetof(bench_shape, num_kv_heads)},
        {BENCH_FIELD_PAGE_SIZE, "p%d", offsetof(bench_shape, page_size)},
        {BENCH_FIELD_BATCH, "B%d", offsetof(bench_shape, batch)},
        {BENCH_FIELD_QUERY_LEN, "M%d", offsetof(bench_shape, query_len)},
        {BENCH_FIELD_WINDOW, "W%d", offsetof(bench_shape, window)},
    };
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        if (!(v & fields[i].bit))
            continue;
        int32_t value;
        memcpy(&value, (const char *)sh + fields[i].offset, sizeof(value));
        snprintf(item, sizeof item, fields[i].fmt, (int)value);
        label_append(buf, len, item);
    }
    if ((v & BENCH_FIELD_CAUSAL) && sh->causal)
        label_append(buf, len, "causal");
    if (sh->op == BENCH_OP_PAGED) {
        /* the context always: alone it is the whole label (a plain context sweep) */
        snprintf(item, sizeof item, buf[0] ? "L%d" : "%d", (int)sh->context);
        label_append(buf, len, item);
        return;
    }
    char segments[96];
    bench_segments_label(opt, sh, segments, sizeof segments);
    label_append(buf, len, segments);
}

void bench_segments_label(const bench_options *opt, const bench_shape *sh, char *buf, size_t len)
{
    char item[16];
    size_t used = 0;
    if (len == 0)
        return;
    buf[0] = '\0';
    for (int i = 0; i < sh->num_segments; i++) {
        snprintf(item, sizeof item, "%s%d", i ? "," : "", (int)opt->segment_lens[sh->segment_first + i]);
        size_t n = strlen(item);
        if (used + n + 4 >= len) {
            if (used + 4 < len)
                memcpy(buf + used, ",...", 5);
            return;
        }
        memcpy(buf + used, item, n + 1);
        used += n;
    }
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
    for (int bit = 0; bit < NUM_SETS_BITS; bit++) {
        if ((spec->sets & (1u << bit)) && st->set_by[bit] == NULL)
            st->set_by[bit] = spec->name;
    }
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
    int rc = check_combination(&st);
    return rc != BENCH_EXIT_OK ? rc : build_shapes(opt);
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
