/*
 * gpu_cases.h - the GPU case driver shared by test_emulator (tests/hip: the gfx1151 code objects on
 * the gfx11 ISA emulator) and test_gpu_cuda (tests/gpu: an NVIDIA GPU). A case is built, planned,
 * run through the public API and checked against the float64 oracle here; the two programs differ
 * in how they get their context and device memory, which variants and cases they walk, and the
 * checks they add through the hooks (the emulator checks each plan's shape against the formulas and
 * the launches its stand-in runtime recorded).
 *
 * Each case: fresh random inputs from tests/harness seeded by (run seed, group, index) (NaN in every
 * input element a kernel must not read, poisoned outputs inside guard bytes), the plan's
 * implementation checked against the kernel the case is sized for, then one run (two on one plan
 * and one workspace for GC_RUN_REUSED_WORKSPACE), the output against the oracle. A failure prints
 * the case and its replay line (R35A_TEST_SEED=... R35A_TEST_CASE=<group>:<index>).
 *
 * A wall-time budget (gc.budget_s, 0: none) and two-pass ordering bound a program's time without
 * losing coverage: after the budget no case starts whose plan names only kernels already executed,
 * and with gc.pass set (0, then 1) each variant's first case runs before any variant's second.
 */
#ifndef R35A_TESTS_GPU_CASES_H
#define R35A_TESTS_GPU_CASES_H

#include "harness.h"
#include "test_util.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- the GPU kernels, from the registry (variants/variants.def) ---- */

typedef struct gc_decode_variant {
    const char *arch, *name;
    r35a_dtype dtype;
    r35a_dtype kv; /* the K/V element format: 0 = dtype (16-bit), fp8 e4m3 or int8 */
    int head, rows, kw, dw, rw, waves;
} gc_decode_variant;

typedef struct gc_encoder_variant {
    const char *arch, *name;
    r35a_dtype dtype;
    int head, rows, kb, nw, waves, maxlen; /* maxlen > 0: the small-problem tiling, for max_seqlen <= maxlen */
} gc_encoder_variant;

typedef struct gc_kernel {
    const char *arch, *name;
} gc_kernel;

extern const gc_decode_variant gc_decode[];
extern const size_t gc_num_decode;
extern const gc_encoder_variant gc_encoder[];
extern const size_t gc_num_encoder;
extern const gc_kernel gc_generic[];
extern const size_t gc_num_generic;

const gc_decode_variant *gc_decode_named(const char *name, size_t len);
const gc_encoder_variant *gc_encoder_named(const char *name);
/* Whether the workgroup-wide encoder variant has a tail kernel (encoder_args.h "Tail split"). */
bool gc_has_tail_kernel(const char *arch, const char *variant);
/* The next smaller R among the decode variants of v's arch, dtype, head size and KV format (0: none). */
int gc_rows_below(const gc_decode_variant *v);
/* G such that G x M rows make the planner pick v (R rows): G x M in (the next smaller R, R]. */
int32_t gc_group_for(const gc_decode_variant *v, int m);
/* A case's M on v: at most its R (a rows-4 variant serves G x M <= 4). */
int gc_m_for(const gc_decode_variant *v, int m);

/* ---- running cases ---- */

typedef enum { GC_RUN_ONCE, GC_RUN_REUSED_WORKSPACE } gc_run_mode;

typedef struct gc_case_opts {
    const char *expect;        /* implementation prefix the planner must choose (NULL: any) */
    const char *expect_last;   /* prefix of the implementation's last launch ("a+b+c": c; NULL: any) */
    bool misalign_k;           /* K 2 bytes past a 16-byte boundary (the program's memory does it) */
    gc_run_mode mode;
    bool big_offsets;          /* the pages used sit beyond 2^32 elements (the program's memory does it) */
    const char *expect_reason; /* a text the plan's fallback_reason must contain (NULL: any) */
} gc_case_opts;

/* One case as the hooks see it. */
typedef struct gc_case {
    const char *group;
    int index;
    const char *label;         /* "prefix/group:index", with " (run k)" during a run of several */
    const gc_case_opts *opts;
    r35a_plan_info info;       /* the plan's (after planning) */
    paged_problem *paged;      /* the problem (of this run): NULL in a varlen case */
    varlen_problem *varlen;    /* NULL in a paged case */
    int run, runs;
    bool ok;                   /* so far */
} gc_case;

typedef struct gc_hooks {
    void (*prepare)(gc_case *c);     /* the problem is built, nothing planned yet */
    bool (*check_plan)(gc_case *c);  /* false: the case fails (and still runs) */
    void (*before_run)(gc_case *c);
    bool (*after_run)(gc_case *c);   /* the run's output has been checked; false: the run fails */
    bool (*after_case)(gc_case *c);  /* after every run (also when none ran); false: the case fails */
} gc_hooks;

typedef struct gc_driver {
    const char *program;       /* for the summary lines */
    r35a_context *ctx;
    tu_mem *mem;
    char prefix[32];           /* labels are "prefix/group:index" */
    bool tally_prefixed;       /* tally groups as "prefix/group" (else "group") */
    bool plan_only;            /* plan and check the plan, launch nothing (tallied as "group (plan only)") */
    gc_hooks hooks;
    double budget_s;           /* 0: none */
    double start;              /* wall time the budget counts from (gc_init) */
    int pass;                  /* -1: one pass; 0: each variant's first case; 1: the rest */
    int case_in_variant;       /* cases of the current variant met in this pass (gc_begin_variant) */
    int cases_ran, cases_skipped, failures;
} gc_driver;

extern gc_driver gc;

void gc_init(const char *program, tu_mem *mem);
/* gc.budget_s from the environment variable (seconds, 0: none; unset: default_s). false: not a number. */
bool gc_budget_from_env(const char *variable, double default_s);
/* Starts a variant's cases (the two-pass ordering counts its cases). */
void gc_begin_variant(void);

/* Build, plan, run and check one case; true: passed (or not run: another case selected, another
 * pass, or left out for the budget). */
bool gc_run_paged(const paged_spec *spec, const char *group, int index, const gc_case_opts *o);
bool gc_run_varlen(const varlen_spec *spec, const char *group, int index, const gc_case_opts *o);

/* The softmax LSE output on the decode kernels (group "decode_lse", gc.pass -1): one split and several
 * (the split merge with one lane and with four per item), M 1 to 8 (a mixed batch's decode and
 * portable launches), GQA on the few-row and the 16- and 32-row layers, sinks, softcap + ALiBi, a
 * window, an empty sequence, f16 and bf16, fp8 and int8 caches; O and LSE against the oracle, the
 * plan a decode_ one. Short contexts and few heads: the emulator runs them too. */
void gc_decode_lse_cases(const char *expect); /* the implementation prefix the plans must have */

/* Per-token-head 8-bit KV scales (group "kv_token_scales", gc.pass -1): fp8 and int8, f16 and bf16
 * queries, M 1 and 4 (GQA 4: 4 and 16 rows), one split and several, page sizes 16 and 32, padded
 * scale tensors whose unreached elements are NaN, keys whose scales (and real K, V) span 1e-3 ..
 * 1e3, a window over garbage table entries, sinks, a mixed batch; against the oracle, the plan's
 * implementation starting with expect and, when reason is set, its fallback_reason containing it. */
void gc_kv_token_scale_cases(const char *expect, const char *reason);

/* Whether the current pass runs the case met next: call once per case a program runs by itself. */
bool gc_case_in_pass(void);
/* Whether to leave out a case planned as `implementation` (budget spent, nothing new to execute);
 * counts the case as run or left out. */
bool gc_budget_skips(const char *implementation);

/* Kernels executed so far (the program notes them: a launch record, or a passed plan). */
void gc_note_executed(const char *name);
bool gc_was_executed(const char *name);
/* Every kernel an implementation names ("a+b+c") was executed. */
bool gc_implementation_executed(const char *implementation);
int gc_num_executed(void);

/* Per-group tallies; gc_record also counts a failure in gc.failures. */
void gc_record(const char *group, bool ok, double err);
/* Prints the tally table; returns the number of cases tallied. */
int gc_print_tallies(void);
/* "[program] ran N of M cases that launch, K not started ...", with ", every variant once" when
 * every_variant_once. */
void gc_print_budget_line(bool every_variant_once);

double gc_seconds(void);

#endif
