/*
 * gpu_cases.c - the GPU case driver shared by test_emulator and test_gpu_cuda (gpu_cases.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "gpu_cases.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the registry ---- */

#define R35A_VT_f16 R35A_DTYPE_F16
#define R35A_VT_bf16 R35A_DTYPE_BF16
#define R35A_VKV_kv16 ((r35a_dtype)0)
#define R35A_VKV_fp8 R35A_DTYPE_FP8_E4M3
#define R35A_VKV_int8 R35A_DTYPE_INT8

const gc_decode_variant gc_decode[] = {
#define R35A_DECODE_VARIANT(arch, name, dtype, kv, head_size, rows, kw, dw, rw, waves, layer, pipe, stages, q) \
    {#arch, #name, R35A_VT_##dtype, R35A_VKV_##kv, head_size, rows, kw, dw, rw, waves},
#include "variants.def"
#undef R35A_DECODE_VARIANT
};
const size_t gc_num_decode = sizeof gc_decode / sizeof *gc_decode;

const gc_encoder_variant gc_encoder[] = {
#define R35A_ENCODER_VARIANT(arch, name, dtype, head_size, rows, kb, nw, waves, maxlen) \
    {#arch, #name, R35A_VT_##dtype, head_size, rows, kb, nw, waves, maxlen},
#include "variants.def"
#undef R35A_ENCODER_VARIANT
};
const size_t gc_num_encoder = sizeof gc_encoder / sizeof *gc_encoder;

const gc_kernel gc_generic[] = {
#define R35A_GENERIC_KERNEL(arch, name, op, dtype, dmax) {#arch, #name},
#include "variants.def"
#undef R35A_GENERIC_KERNEL
};
const size_t gc_num_generic = sizeof gc_generic / sizeof *gc_generic;

static const struct {
    const char *arch, *variant;
} k_encoder_tail[] = {
#define R35A_ENCODER_TAIL(arch, name, variant, dtype, head_size, rows, kb, nw, waves) {#arch, #variant},
#include "variants.def"
#undef R35A_ENCODER_TAIL
    {NULL, NULL},
};

const gc_decode_variant *gc_decode_named(const char *name, size_t len)
{
    for (size_t i = 0; i < gc_num_decode; ++i)
        if (strlen(gc_decode[i].name) == len && strncmp(gc_decode[i].name, name, len) == 0)
            return &gc_decode[i];
    return NULL;
}

const gc_encoder_variant *gc_encoder_named(const char *name)
{
    for (size_t i = 0; i < gc_num_encoder; ++i)
        if (strcmp(gc_encoder[i].name, name) == 0)
            return &gc_encoder[i];
    return NULL;
}

bool gc_has_tail_kernel(const char *arch, const char *variant)
{
    for (size_t i = 0; k_encoder_tail[i].arch; ++i)
        if (strcmp(k_encoder_tail[i].arch, arch) == 0 && strcmp(k_encoder_tail[i].variant, variant) == 0)
            return true;
    return false;
}

int gc_rows_below(const gc_decode_variant *v)
{
    int below = 0;
    for (size_t i = 0; i < gc_num_decode; ++i) {
        const gc_decode_variant *u = &gc_decode[i];
        if (strcmp(u->arch, v->arch) == 0 && u->dtype == v->dtype && u->kv == v->kv && u->head == v->head &&
            u->rows < v->rows && u->rows > below)
            below = u->rows;
    }
    return below;
}

int32_t gc_group_for(const gc_decode_variant *v, int m)
{
    const int below = gc_rows_below(v);
    int32_t g = v->rows / m;
    if (g * m <= below)
        g = below / m + 1;
    return g < 1 ? 1 : g;
}

int gc_m_for(const gc_decode_variant *v, int m)
{
    return m <= v->rows ? m : v->rows;
}

/* ---- the driver's state ---- */

gc_driver gc = {.pass = -1};

double gc_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void gc_init(const char *program, tu_mem *mem)
{
    gc.program = program;
    gc.mem = mem;
    gc.pass = -1;
    gc.start = gc_seconds();
}

bool gc_budget_from_env(const char *variable, double default_s)
{
    gc.budget_s = default_s;
    const char *text = getenv(variable);
    if (!text || !text[0])
        return true;
    char *end = NULL;
    const double b = strtod(text, &end);
    if (end == text || *end != '\0' || !(b >= 0))
        return false;
    gc.budget_s = b;
    return true;
}

void gc_begin_variant(void)
{
    gc.case_in_variant = 0;
}

bool gc_case_in_pass(void)
{
    if (gc.pass < 0)
        return true;
    const int k = gc.case_in_variant++;
    return gc.pass == 0 ? k == 0 : k > 0;
}

/* ---- kernels executed ---- */

#define MAX_EXECUTED 1024
static char *g_executed[MAX_EXECUTED];
static int g_num_executed;

void gc_note_executed(const char *name)
{
    if (gc_was_executed(name) || g_num_executed == MAX_EXECUTED)
        return;
    const size_t n = strlen(name) + 1;
    char *copy = malloc(n);
    if (!copy)
        return;
    memcpy(copy, name, n);
    g_executed[g_num_executed++] = copy;
}

bool gc_was_executed(const char *name)
{
    for (int i = 0; i < g_num_executed; ++i)
        if (strcmp(g_executed[i], name) == 0)
            return true;
    return false;
}

bool gc_implementation_executed(const char *implementation)
{
    char name[128];
    for (const char *p = implementation; *p;) {
        const char *plus = strchr(p, '+');
        const size_t len = plus ? (size_t)(plus - p) : strlen(p);
        if (len == 0 || len >= sizeof name)
            return false;
        memcpy(name, p, len);
        name[len] = '\0';
        if (!gc_was_executed(name))
            return false;
        p += len + (plus ? 1 : 0);
    }
    return implementation[0] != '\0';
}

int gc_num_executed(void)
{
    return g_num_executed;
}

bool gc_budget_skips(const char *implementation)
{
    if (gc.budget_s > 0 && gc_seconds() - gc.start > gc.budget_s && gc_implementation_executed(implementation)) {
        ++gc.cases_skipped;
        return true;
    }
    ++gc.cases_ran;
    return false;
}

/* ---- tallies ---- */

#define MAX_TALLIES 256
static struct {
    char name[64];
    int cases, failed;
    double worst;
} g_tally[MAX_TALLIES];
static int g_ntally;

void gc_record(const char *group, bool ok, double err)
{
    char key[64];
    if (gc.tally_prefixed)
        snprintf(key, sizeof key, "%s/%s", gc.prefix, group);
    else
        snprintf(key, sizeof key, "%s", group);
    int i = 0;
    while (i < g_ntally && strcmp(g_tally[i].name, key) != 0)
        ++i;
    if (i == g_ntally && g_ntally < MAX_TALLIES)
        snprintf(g_tally[g_ntally++].name, sizeof g_tally[0].name, "%s", key);
    if (i < MAX_TALLIES) {
        g_tally[i].cases++;
        g_tally[i].failed += !ok;
        if (ok && err > g_tally[i].worst)
            g_tally[i].worst = err;
    }
    gc.failures += !ok;
}

int gc_print_tallies(void)
{
    printf("\n%-34s %7s %7s %12s\n", gc.tally_prefixed ? "prefix/group" : "group", "cases", "failed", "worst err");
    int cases = 0;
    for (int i = 0; i < g_ntally; ++i) {
        printf("%-34s %7d %7d %12.3e\n", g_tally[i].name, g_tally[i].cases, g_tally[i].failed, g_tally[i].worst);
        cases += g_tally[i].cases;
    }
    return cases;
}

void gc_print_budget_line(bool every_variant_once)
{
    char budget[400];
    if (gc.budget_s > 0)
        snprintf(budget, sizeof budget, "the %.0f s budget was spent", gc.budget_s);
    else
        snprintf(budget, sizeof budget, "no budget");
    printf("[%s] ran %d of %d cases that launch, %d not started (%s)%s\n", gc.program, gc.cases_ran,
           gc.cases_ran + gc.cases_skipped, gc.cases_skipped, budget, every_variant_once ? ", every variant once" : "");
}

/* ---- one case ---- */

static void print_failure_context(const gc_case *c, const char *desc)
{
    printf("  %s [%s]: %s\n  replay: R35A_TEST_SEED=0x%016llx R35A_TEST_CASE=%s:%d\n", c->label, c->info.implementation,
           desc, (unsigned long long)tu_seed(), c->group, c->index);
}

static void case_begin(gc_case *c, char *label, size_t label_len, const char *group, int index,
                       const gc_case_opts *o)
{
    memset(c, 0, sizeof *c);
    snprintf(label, label_len, "%s%s%s:%d", gc.prefix, gc.prefix[0] ? "/" : "", group, index);
    c->group = group;
    c->index = index;
    c->label = label;
    c->opts = o;
    c->info.struct_size = sizeof c->info;
    c->runs = o->mode == GC_RUN_REUSED_WORKSPACE ? 2 : 1;
    c->ok = true;
}

/* After planning: the implementation the case is sized for, and the program's plan checks. */
static void check_planned(gc_case *c)
{
    const char *expect = c->opts->expect;
    if (c->ok && expect && strncmp(c->info.implementation, expect, strlen(expect)) != 0) {
        printf("FAIL %s: the planner chose %s, the case is for %s\n", c->label, c->info.implementation, expect);
        c->ok = false;
    }
    const char *reason = c->opts->expect_reason;
    if (c->ok && reason && !strstr(c->info.fallback_reason, reason)) {
        printf("FAIL %s: the plan's fallback_reason \"%s\" does not say \"%s\"\n", c->label, c->info.fallback_reason,
               reason);
        c->ok = false;
    }
    const char *last = c->opts->expect_last;
    if (c->ok && last) {
        const char *plus = strrchr(c->info.implementation, '+');
        const char *tail = plus ? plus + 1 : c->info.implementation;
        if (strncmp(tail, last, strlen(last)) != 0) {
            printf("FAIL %s: the plan's last launch is %s (%s), the case is for %s\n", c->label, tail,
                   c->info.implementation, last);
            c->ok = false;
        }
    }
}

/* A case not run: plan-only mode (recorded as "<group> (plan only)") or one the emulator's time budget
 * skips. Then the case has no runs and its after_case hook is told so; true: the caller returns. */
static bool left_out(gc_case *c, const char *group, const char *desc, bool runnable)
{
    if (gc.plan_only) {
        char plan_group[64];
        snprintf(plan_group, sizeof plan_group, "%s (plan only)", group);
        if (!c->ok)
            print_failure_context(c, desc);
        gc_record(plan_group, c->ok, 0.0);
    } else if (!(runnable && gc_budget_skips(c->info.implementation))) {
        return false;
    }
    c->runs = 0;
    if (gc.hooks.after_case)
        gc.hooks.after_case(c);
    return true;
}

bool gc_run_paged(const paged_spec *spec, const char *group, int index, const gc_case_opts *o)
{
    if (!gc_case_in_pass() || !tu_case_selected(group, index))
        return true;
    const double t_start = gc_seconds();
    char label[160];
    gc_case c;
    case_begin(&c, label, sizeof label, group, index, o);
    tu_rng rng;
    tu_rng_init(&rng, tu_case_seed(group, index));
    paged_problem p[2];
    int built = 0;
    for (; built < c.runs && c.ok; ++built)
        c.ok = paged_problem_init(&p[built], spec, &rng) == 0; /* same shape, fresh values */
    char desc[4096];
    paged_spec_describe(spec, desc, sizeof desc);
    if (!c.ok)
        printf("FAIL %s: the harness could not build the problem\n", label);
    c.paged = &p[0];
    if (c.ok && gc.hooks.prepare)
        gc.hooks.prepare(&c);

    r35a_plan *plan = NULL;
    if (c.ok && (r35a_paged_attention_plan(gc.ctx, &p[0].desc, &plan) != R35A_OK ||
                 r35a_plan_get_info(plan, &c.info) != R35A_OK)) {
        printf("FAIL %s: plan: %s\n", label, r35a_last_error_detail());
        c.ok = false;
    }
    check_planned(&c);
    /* A plan the program's checks reject fails the case but still runs: what it does (out-of-bounds
     * accesses, wrong results) is reported too. */
    const bool runnable = c.ok;
    if (c.ok && gc.hooks.check_plan)
        c.ok = gc.hooks.check_plan(&c);

    if (left_out(&c, group, desc, runnable)) {
        r35a_plan_destroy(plan);
        for (int i = 0; i < built; ++i)
            paged_problem_free(&p[i]);
        return c.ok;
    }

    double worst = 0.0;
    for (int r = 0; runnable && r < c.runs; ++r) {
        char run_label[176];
        snprintf(run_label, sizeof run_label, "%s%s", label, c.runs > 1 ? (r ? " (run 2)" : " (run 1)") : "");
        c.label = run_label;
        c.run = r;
        c.paged = &p[r];
        if (gc.hooks.before_run)
            gc.hooks.before_run(&c);
        c.ok = paged_problem_check(gc.ctx, &p[r], plan, gc.mem, run_label) && c.ok;
        if (tu_last_error() > worst)
            worst = tu_last_error();
        if (gc.hooks.after_run)
            c.ok = gc.hooks.after_run(&c) && c.ok;
        c.label = label;
    }
    c.paged = &p[0];
    if (gc.hooks.after_case)
        c.ok = gc.hooks.after_case(&c) && c.ok;
    if (!c.ok)
        print_failure_context(&c, desc);
    else if (tu_verbose())
        printf("  ok %s [%s, %d splits] err %.3e, %.2f s\n", label, c.info.implementation, c.info.num_splits, worst,
               gc_seconds() - t_start);
    gc_record(group, c.ok, worst);
    r35a_plan_destroy(plan);
    for (int i = 0; i < built; ++i)
        paged_problem_free(&p[i]);
    return c.ok;
}

bool gc_run_varlen(const varlen_spec *spec, const char *group, int index, const gc_case_opts *o)
{
    if (!gc_case_in_pass() || !tu_case_selected(group, index))
        return true;
    const double t_start = gc_seconds();
    char label[160];
    gc_case c;
    case_begin(&c, label, sizeof label, group, index, o);
    c.runs = 1; /* a varlen plan keeps no workspace */
    tu_rng rng;
    tu_rng_init(&rng, tu_case_seed(group, index));
    varlen_problem p;
    c.ok = varlen_problem_init(&p, spec, &rng) == 0;
    char desc[4096];
    varlen_spec_describe(spec, desc, sizeof desc);
    if (!c.ok)
        printf("FAIL %s: the harness could not build the problem\n", label);
    c.varlen = &p;
    if (c.ok && gc.hooks.prepare)
        gc.hooks.prepare(&c);
    r35a_plan *plan = NULL;
    if (c.ok && (r35a_varlen_attention_plan(gc.ctx, &p.desc, &plan) != R35A_OK ||
                 r35a_plan_get_info(plan, &c.info) != R35A_OK)) {
        printf("FAIL %s: plan: %s\n", label, r35a_last_error_detail());
        c.ok = false;
    }
    check_planned(&c);
    const bool runnable = c.ok; /* as in gc_run_paged: a plan the checks reject still runs */
    if (c.ok && gc.hooks.check_plan)
        c.ok = gc.hooks.check_plan(&c);
    if (left_out(&c, group, desc, runnable)) {
        r35a_plan_destroy(plan);
        varlen_problem_free(&p);
        return c.ok;
    }
    if (runnable) {
        if (gc.hooks.before_run)
            gc.hooks.before_run(&c);
        c.ok = varlen_problem_check(gc.ctx, &p, plan, gc.mem, label) && c.ok;
        if (gc.hooks.after_run)
            c.ok = gc.hooks.after_run(&c) && c.ok;
    }
    if (gc.hooks.after_case)
        c.ok = gc.hooks.after_case(&c) && c.ok;
    if (!c.ok)
        print_failure_context(&c, desc);
    else if (tu_verbose())
        printf("  ok %s [%s] err %.3e, %.2f s\n", label, c.info.implementation, tu_last_error(),
               gc_seconds() - t_start);
    gc_record(group, c.ok, tu_last_error());
    r35a_plan_destroy(plan);
    varlen_problem_free(&p);
    return c.ok;
}

/* ---- the LSE output on the decode kernels ---- */

void gc_decode_lse_cases(const char *expect)
{
    static const struct {
        r35a_dtype dt, kv;
        int32_t hq, hkv, d, page;
    } shape[] = {
        {R35A_DTYPE_F16, 0, 8, 2, 64, 16},                   /* G 4, M 1: few-row layers, one split */
        {R35A_DTYPE_BF16, 0, 8, 2, 64, 32},                  /* G 4, M 4: 16 rows, splits and one */
        {R35A_DTYPE_F16, R35A_DTYPE_FP8_E4M3, 4, 2, 128, 16}, /* fp8, G 2, M 4: a window with sinks */
        {R35A_DTYPE_BF16, 0, 8, 1, 128, 16},                 /* G 8, M 4: 32 rows, 11 splits (4 merge lanes) */
        {R35A_DTYPE_F16, 0, 2, 1, 64, 16},                   /* a mixed batch: decode + the portable kernel */
        {R35A_DTYPE_BF16, R35A_DTYPE_INT8, 4, 4, 64, 16},    /* int8, G 1, M 2, per-head scales, splits */
    };
    for (int i = 0; i < (int)(sizeof shape / sizeof *shape); ++i) {
        paged_spec s;
        paged_spec_init(&s, shape[i].dt, shape[i].hq, shape[i].hkv, shape[i].d, shape[i].page);
        s.num_seqs = 0;
        s.kv_dtype = shape[i].kv;
        s.kv_scale_per_head = i == 5;
        s.use_lse = true;
        s.lse_pad = i % 2;
        s.shuffle_pages = true;
        switch (i) {
        case 0:
            paged_spec_add_seq(&s, 23, 1);
            paged_spec_add_seq(&s, 0, 0);
            paged_spec_add_seq(&s, 50, 1);
            s.use_sinks = 1;
            s.sink_amp = 3.0;
            s.sink_some_neg_inf = true;
            break;
        case 1: /* 200 keys: 3 splits of 4-5 tiles; 41 keys: one split, written directly */
            paged_spec_add_seq(&s, 200, 4);
            paged_spec_add_seq(&s, 0, 0);
            paged_spec_add_seq(&s, 41, 3);
            s.logit_softcap = 10.f;
            s.use_alibi = 1;
            s.use_sinks = 1;
            s.sink_amp = 2.0;
            break;
        case 2:
            paged_spec_add_seq(&s, 200, 4);
            paged_spec_add_seq(&s, 25, 2);
            s.window = 40;
            s.garbage_unreached = true;
            s.use_sinks = 1;
            s.sink_center = 1.0;
            s.sink_amp = 2.0;
            break;
        case 3:
            paged_spec_add_seq(&s, 700, 4);
            s.use_sinks = 1;
            s.sink_amp = 2.0;
            s.max_seq_len_slack = 20;
            break;
        case 4: /* the M = 9 sequence on the portable kernel, the others on decode */
            paged_spec_add_seq(&s, 60, 1);
            paged_spec_add_seq(&s, 12, 9);
            paged_spec_add_seq(&s, 0, 0);
            paged_spec_add_seq(&s, 40, 8);
            s.use_sinks = 1;
            s.sink_amp = 2.0;
            break;
        default:
            paged_spec_add_seq(&s, 150, 2);
            paged_spec_add_seq(&s, 9, 1);
            s.logit_softcap = 20.f;
            s.use_alibi = 1;
            break;
        }
        gc_run_paged(&s, "decode_lse", i, &(gc_case_opts){.expect = expect});
    }
}

/* ---- per-token-head 8-bit KV scales ---- */

void gc_kv_token_scale_cases(const char *expect, const char *reason)
{
    static const struct {
        r35a_dtype dt, kv;
        int32_t page;
        int32_t m;           /* query tokens of the sequences that have some */
        double decades;      /* scale_decades */
    } shape[] = {
        {R35A_DTYPE_F16, R35A_DTYPE_FP8_E4M3, 16, 1, 0.0},
        {R35A_DTYPE_BF16, R35A_DTYPE_INT8, 32, 1, 3.0},
        {R35A_DTYPE_F16, R35A_DTYPE_INT8, 16, 4, 3.0},
        {R35A_DTYPE_BF16, R35A_DTYPE_FP8_E4M3, 32, 4, 1.0},
        {R35A_DTYPE_F16, R35A_DTYPE_FP8_E4M3, 32, 1, 3.0},   /* a window, sinks */
        {R35A_DTYPE_BF16, R35A_DTYPE_INT8, 16, 4, 0.0},      /* a mixed batch */
    };
    for (int i = 0; i < (int)(sizeof shape / sizeof *shape); ++i) {
        paged_spec s;
        paged_spec_init(&s, shape[i].dt, 8, 2, i % 2 ? 64 : 128, shape[i].page);   /* G 4 */
        s.num_seqs = 0;
        s.kv_dtype = shape[i].kv;
        s.kv_scale_per_head = R35A_KV_SCALE_PER_TOKEN_HEAD;
        s.scale_pad = i % 3;
        s.scale_decades = shape[i].decades;
        s.shuffle_pages = true;
        const int32_t m = shape[i].m;
        switch (i) {
        case 4:
            paged_spec_add_seq(&s, 300, m);
            paged_spec_add_seq(&s, 45, m);
            s.window = 70;
            s.garbage_unreached = true;
            s.use_sinks = 1;
            s.sink_amp = 2.0;
            break;
        case 5: /* the M = 9 sequence is a mixed batch's longer one */
            paged_spec_add_seq(&s, 120, m);
            paged_spec_add_seq(&s, 30, 9);
            paged_spec_add_seq(&s, 0, 0);
            break;
        default: /* 700 keys: several splits on a decode kernel; 37: one */
            paged_spec_add_seq(&s, i < 2 ? 700 : 37, m);
            paged_spec_add_seq(&s, 0, 0);
            paged_spec_add_seq(&s, i < 2 ? 37 : 700, m);
            break;
        }
        gc_run_paged(&s, "kv_token_scales", i, &(gc_case_opts){.expect = expect, .expect_reason = reason});
    }
}
