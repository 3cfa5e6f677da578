/*
 * test_util.h - seeds, PRNG, f16/bf16 coding, poisoning and output comparison for the tests.
 *
 * Nothing here shares code with src/: the tests must be able to catch a bug in the library's own
 * element coding or indexing, so they carry their own.
 */
#ifndef R35A_TEST_UTIL_H
#define R35A_TEST_UTIL_H

#include "rdna35attn.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- tolerances: error metric max|out - ref| / max(max|ref|, TU_TINY) per case ----
 * f16 output rounding alone is 2^-11 relative (4.9e-4); bf16's is 2^-8 (3.9e-3); fp32 outputs
 * see only fp32 accumulation and softmax error. */
#define TU_TOL_F16 2e-3
#define TU_TOL_BF16 1e-2
#define TU_TOL_F32 1e-5
#define TU_TINY 1e-6

double tu_tolerance(r35a_dtype dtype);
const char *tu_dtype_name(r35a_dtype dtype);
size_t tu_dtype_size(r35a_dtype dtype);

/* ---- seeds ----
 * The program seed comes from R35A_TEST_SEED (decimal or 0x hex) to replay a run, otherwise from
 * time and pid. tu_begin() prints it with the tolerances; every case derives its own seed from it
 * and the case's group and index, so one case can be replayed alone with
 * R35A_TEST_SEED=<seed> R35A_TEST_CASE=<group>:<index>. */
void tu_begin(const char *program);
uint64_t tu_seed(void);
uint64_t tu_case_seed(const char *group, int index);
/* False when R35A_TEST_CASE (a comma-separated list of <group>:<index> and <group>) names other cases. */
bool tu_case_selected(const char *group, int index);
/* R35A_TEST_SCALE (default 1.0) multiplies the number of random cases of the sweeps. */
int tu_scaled(int count);
/* Wall-clock seconds (CLOCK_MONOTONIC) from an arbitrary origin: for time limits of a run. */
double tu_wall_seconds(void);

/* ---- PRNG (splitmix64 seeding, xoshiro256** stream) ---- */
typedef struct tu_rng {
    uint64_t s[4];
} tu_rng;

void tu_rng_init(tu_rng *rng, uint64_t seed);
uint64_t tu_next(tu_rng *rng);
/* Uniform in [0, n), n > 0. */
uint32_t tu_below(tu_rng *rng, uint32_t n);
/* Uniform in [lo, hi], inclusive. */
int32_t tu_range(tu_rng *rng, int32_t lo, int32_t hi);
/* Uniform double in [0, 1). */
double tu_unit(tu_rng *rng);
/* Uniform double in [-1, 1). */
double tu_sym(tu_rng *rng);
bool tu_chance(tu_rng *rng, double p);
int32_t tu_pick(tu_rng *rng, const int32_t *values, int count);
void tu_shuffle_i32(tu_rng *rng, int32_t *values, int count);

/* ---- element coding (round to nearest even) ---- */
uint16_t tu_f16_from_double(double x);
double tu_f16_to_double(uint16_t bits);
uint16_t tu_bf16_from_double(double x);
double tu_bf16_to_double(uint16_t bits);

/* OCP float8_e4m3fn (round to nearest even, saturating at +-448, NaN kept) and int8 (nearest,
 * clamped to -128..127): the stored values of an 8-bit KV cache. */
uint8_t tu_fp8_e4m3_from_double(double x);
double tu_fp8_e4m3_to_double(uint8_t bits);
int8_t tu_int8_from_double(double x);

/* Element index i of a dtype buffer (8-bit KV dtypes: the stored value, before any scale). */
void tu_store(r35a_dtype dtype, void *base, size_t i, double value);
double tu_load(r35a_dtype dtype, const void *base, size_t i);
/* Elements first .. first+n-1 := offset + amp * U(-1, 1), coded to dtype. */
void tu_fill_uniform(r35a_dtype dtype, void *base, size_t first, size_t n, double amp,
                     double offset, tu_rng *rng);
/* Stores a quiet NaN whose bits differ from the poison pattern (inputs that must not be read);
 * int8 has no NaN and gets -128, the value farthest from the fills. */
void tu_store_nan(r35a_dtype dtype, void *base, size_t i);

/* ---- poison: every byte 0xFF, a NaN in f16, bf16 and f32 lanes alike ---- */
#define TU_POISON_BYTE 0xFFu
void tu_poison(void *p, size_t bytes);
bool tu_elem_is_poison(r35a_dtype dtype, const void *base, size_t i);
/* Offset of the first byte that is not TU_POISON_BYTE, or (size_t)-1 if all are. */
size_t tu_first_unpoisoned(const void *p, size_t bytes);

/* 64-byte aligned, zero-size safe allocation; aborts on failure (a test cannot go on). */
void *tu_alloc(size_t bytes);
void tu_free(void *p);
uint64_t tu_hash(const void *p, size_t bytes);

/* ---- comparison of one case's output against the oracle ----
 * Usage: tu_check_begin with max|ref| over the rows the call must write; tu_check_elem for every
 * element of those rows; tu_check_untouched for the bytes it must not write; tu_check_end. */
#define TU_CHECK_FIRST 6

typedef struct tu_mismatch {
    int32_t coord[4];      /* e.g. token, head, element, sequence */
    double out, ref;
    int kind;              /* 0 error above tolerance, 1 NaN/Inf, 2 left poisoned, 3 written outside */
} tu_mismatch;

typedef struct tu_check {
    r35a_dtype dtype;
    double tol;
    double ref_max;        /* max |ref| over the rows that must be written */
    double err_max;        /* max |out - ref| */
    size_t checked;
    size_t mismatches;     /* |out - ref| > tol * max(ref_max, TU_TINY) */
    size_t nonfinite;      /* NaN/Inf where the oracle is finite */
    size_t unwritten;      /* elements still holding the poison pattern */
    size_t outside;        /* bytes written outside the rows the call owns */
    int nfirst;
    tu_mismatch first[TU_CHECK_FIRST];
    const char *coord_names;  /* e.g. "t,h,e,s" for the report */
} tu_check;

void tu_check_begin(tu_check *c, r35a_dtype dtype, double ref_max, const char *coord_names);
void tu_check_elem(tu_check *c, const void *out, size_t i, double ref, int32_t c0, int32_t c1,
                   int32_t c2, int32_t c3);
/* mask[b] != 0 marks bytes the call owns; every other byte of out must still be poison. */
void tu_check_untouched(tu_check *c, const uint8_t *out, const uint8_t *mask, size_t bytes);
/* Relative error of the case: err_max / max(ref_max, TU_TINY). */
double tu_check_error(const tu_check *c);
bool tu_check_passed(const tu_check *c);
/* Prints a failure report (counts and first mismatches) prefixed by label. */
void tu_check_report(const tu_check *c, const char *label);

/* ---- per-program statistics ---- */
void tu_stats_record(r35a_dtype dtype, double error, bool passed, const char *label);
int tu_stats_cases(void);
int tu_stats_failures(void);
/* Error of the case recorded last. */
double tu_last_error(void);
/* R35A_TEST_VERBOSE=1: print every case with its error and parameters. */
bool tu_verbose(void);
/* Prints cases, failures, worst error per dtype and the tolerances. */
void tu_stats_print(const char *program);

/* ---- backend under test: R35A_TEST_BACKEND = reference (default) | auto | gpu ---- */
r35a_backend tu_backend_from_env(void);
/* Creates the context under test and prints its info; NULL (with a message) on failure. */
r35a_context *tu_context_create(void);

#endif
