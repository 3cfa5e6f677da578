/*
 * fuzz_core.h - the bad-data fuzzer's generator and checker (bad device data: seq_lens, block tables,
 * query_start_loc the host never reads), independent of where the
 * memory lives: the same cases run on a CUDA GPU (tests/gpu/fuzz_gpu.c), on the gfx11 emulator
 * through the executing stand-in HIP runtime, and on a reference context with host memory (the
 * CPU self-test, tests/gpu/fuzz_reference.c, which holds the generator's fault classes to the
 * library's own host checks).
 *
 * A case is a random problem from tests/harness (fresh inputs, NaN in every element no call may
 * read, garbage in block-table entries no query reaches, poisoned outputs inside guard bytes) and
 * one of:
 *   valid        run, then: status OK, no device error, every row right (against the float64 oracle
 *                on a sample of cases, finite and written on the others);
 *   non-finite   valid metadata, one NaN / +-Inf in a reached element of Q, K, V or a sink: the
 *                rows must be non-finite exactly where the oracle's are (the reference's rules),
 *                right elsewhere;
 *   bad data     one metadata entry broken after the oracle ran (a reached block-table entry past
 *                num_pages or negative, a seq_len above max_seq_len or negative or below its M, more
 *                query tokens than max_query_len, query_start_loc / cu_seqlens out of order or range,
 *                a segment above max_seqlen): on a GPU context the run is accepted, and then
 *                INVALID_DATA names the field (and, for one-sequence faults, the sequence) exactly
 *                once, the rows of the bad sequence are NaN (a bad page: at least the rows that reach
 *                it), the other rows right; on a reference context the run itself returns
 *                INVALID_DATA naming the field and writes nothing;
 *   bad desc     one descriptor field or argument mutated into something the header forbids: plan or
 *                run fails with one of the statuses and fields tests/reliability/rel_common.c
 *                expects, nothing is written.
 * Always: nothing outside the output rows is written (guard bytes, gaps between rows), inputs are
 * never modified (checked on the oracle sample), and the record is clear before the next case.
 */
#ifndef R35A_FUZZ_CORE_H
#define R35A_FUZZ_CORE_H

#include "harness.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct fuzz_env {
    /* The memory the library is given (device or host). upload must return a copy (the case keeps
     * its host buffers to compare with) and release(buffer, NULL) free it. */
    const tu_mem *mem;
    bool device_checks;         /* a GPU context: bad metadata is found by the kernels */
    /* Called after the case's buffers are uploaded and before the run (e.g. cuCtxSynchronize: a
     * copy from pageable memory may still be in flight); may be NULL. */
    void (*before_run)(void *user);
    int oracle_every;           /* the oracle checks every Nth case (1: all) */
    int64_t max_cost;           /* multiply-adds of one oracle evaluation a case may cost */
    bool paged_only, varlen_only;
} fuzz_env;

enum { FUZZ_VALID, FUZZ_NONFINITE, FUZZ_BAD_DATA, FUZZ_BAD_DESC, FUZZ_KINDS };

typedef struct fuzz_totals {
    int cases, failed;
    int by_kind[FUZZ_KINDS];
    int oracle_checked;          /* cases compared with the oracle */
    int nan_rows;                /* rows checked to be NaN */
    int by_fault[16];            /* bad-data cases per fault class (fuzz_fault_name) */
    double worst_error;          /* worst oracle error of a passing case (relative to max|ref|) */
    double plan_seconds, run_seconds;   /* host time spent in the library's plan and run calls */
    int64_t plan_calls, run_calls;
    int over_cost;               /* cases whose draws all cost more than max_cost (the cheapest was run) */
} fuzz_totals;

/* Runs case `index` (its seed: tu_case_seed("fuzz", index)); true when it passed. Prints a
 * failure report with the case's description and its replay line. */
bool fuzz_run_case(r35a_context *ctx, const fuzz_env *env, int index, fuzz_totals *totals);

/* Releases what the cases keep between them (the reference context of the non-finite cases). */
void fuzz_finish(void);

/* One line per kind and fault class with counts. */
void fuzz_print_totals(const fuzz_totals *t, const char *program);
const char *fuzz_fault_name(int fault);

#endif
