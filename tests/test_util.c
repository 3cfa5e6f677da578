/* test_util.c - see test_util.h. */
#define _POSIX_C_SOURCE 200809L

#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ */
/* dtypes and tolerances                                                                        */

double tu_tolerance(r35a_dtype dtype)
{
    switch (dtype) {
    case R35A_DTYPE_F16: return TU_TOL_F16;
    case R35A_DTYPE_BF16: return TU_TOL_BF16;
    case R35A_DTYPE_F32: return TU_TOL_F32;
    case R35A_DTYPE_FP8_E4M3:
    case R35A_DTYPE_INT8: break; /* KV only: the Q/O dtype's tolerance applies */
    }
    return 0.0;
}

const char *tu_dtype_name(r35a_dtype dtype)
{
    switch (dtype) {
    case R35A_DTYPE_F16: return "f16";
    case R35A_DTYPE_BF16: return "bf16";
    case R35A_DTYPE_F32: return "f32";
    case R35A_DTYPE_FP8_E4M3: return "fp8_e4m3";
    case R35A_DTYPE_INT8: return "int8";
    }
    return "?";
}

size_t tu_dtype_size(r35a_dtype dtype)
{
    switch (dtype) {
    case R35A_DTYPE_F16:
    case R35A_DTYPE_BF16: return 2;
    case R35A_DTYPE_F32: return 4;
    case R35A_DTYPE_FP8_E4M3:
    case R35A_DTYPE_INT8: return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* seeds                                                                                        */

static uint64_t g_seed;
static bool g_seed_set;

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t fresh_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t st = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^
                  ((uint64_t)getpid() << 32);
    return splitmix64(&st);
}

uint64_t tu_seed(void)
{
    if (!g_seed_set) {
        const char *env = getenv("R35A_TEST_SEED");
        if (env && *env) {
            g_seed = strtoull(env, NULL, 0);
        } else {
            g_seed = fresh_seed();
        }
        g_seed_set = true;
    }
    return g_seed;
}

double tu_wall_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void tu_begin(const char *program)
{
    /* Test output interleaves with cmocka's; keep it unbuffered so a crash shows the last case. */
    setvbuf(stdout, NULL, _IONBF, 0);
    uint64_t seed = tu_seed();
    printf("[%s] seed 0x%016llx (replay: R35A_TEST_SEED=0x%016llx)\n", program,
           (unsigned long long)seed, (unsigned long long)seed);
    printf("[%s] tolerance: max|out-ref|/max(max|ref|,%g) <= %g f16, %g bf16, %g f32; "
           "NaN/Inf, poisoned (unwritten) outputs and writes outside the owned rows fail\n",
           program, TU_TINY, TU_TOL_F16, TU_TOL_BF16, TU_TOL_F32);
    const char *only = getenv("R35A_TEST_CASE");
    if (only && *only) {
        printf("[%s] only case %s\n", program, only);
    }
}

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; ++s) {
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    }
    return h;
}

uint64_t tu_case_seed(const char *group, int index)
{
    uint64_t st = tu_seed() ^ hash_str(group) ^ ((uint64_t)(uint32_t)index * 0xD1B54A32D192ED03ull);
    return splitmix64(&st);
}

bool tu_case_selected(const char *group, int index)
{
    const char *only = getenv("R35A_TEST_CASE");
    if (!only || !*only) {
        return true;
    }
    /* a comma-separated list of <group>:<index> (one case) or <group> (all its cases) */
    char want[160];
    snprintf(want, sizeof want, "%s:%d", group, index);
    const size_t gl = strlen(group), wl = strlen(want);
    for (const char *p = only; *p;) {
        const char *e = strchr(p, ',');
        const size_t n = e ? (size_t)(e - p) : strlen(p);
        if ((n == wl && strncmp(p, want, n) == 0) || (n == gl && strncmp(p, group, n) == 0))
            return true;
        p += n + (e ? 1 : 0);
    }
    return false;
}

int tu_scaled(int count)
{
    const char *env = getenv("R35A_TEST_SCALE");
    double scale = env && *env ? atof(env) : 1.0;
    if (!(scale > 0.0)) {
        scale = 1.0;
    }
    double n = ceil(count * scale);
    return n < 1.0 ? 1 : (int)n;
}

/* ------------------------------------------------------------------------------------------ */
/* PRNG                                                                                         */

void tu_rng_init(tu_rng *rng, uint64_t seed)
{
    uint64_t st = seed;
    for (int i = 0; i < 4; ++i) {
        rng->s[i] = splitmix64(&st);
    }
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t tu_next(tu_rng *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint32_t tu_below(tu_rng *rng, uint32_t n)
{
    /* 64-bit product keeps the bias below 2^-32, irrelevant for tests. */
    return (uint32_t)(((tu_next(rng) >> 32) * (uint64_t)n) >> 32);
}

int32_t tu_range(tu_rng *rng, int32_t lo, int32_t hi)
{
    if (hi <= lo) {
        return lo;
    }
    return lo + (int32_t)tu_below(rng, (uint32_t)(hi - lo) + 1u);
}

double tu_unit(tu_rng *rng)
{
    return (double)(tu_next(rng) >> 11) * 0x1.0p-53;
}

double tu_sym(tu_rng *rng)
{
    return 2.0 * tu_unit(rng) - 1.0;
}

bool tu_chance(tu_rng *rng, double p)
{
    return tu_unit(rng) < p;
}

int32_t tu_pick(tu_rng *rng, const int32_t *values, int count)
{
    return values[tu_below(rng, (uint32_t)count)];
}

void tu_shuffle_i32(tu_rng *rng, int32_t *values, int count)
{
    for (int i = count - 1; i > 0; --i) {
        int j = (int)tu_below(rng, (uint32_t)i + 1u);
        int32_t t = values[i];
        values[i] = values[j];
        values[j] = t;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* element coding                                                                               */

/* IEEE-style binary format with mbits mantissa and ebits exponent bits, round to nearest even,
 * straight from the bits of the double (fills encode millions of values per case). */
static uint32_t encode_binary(double x, int mbits, int ebits)
{
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    const uint32_t sign = (uint32_t)(bits >> 63) << (mbits + ebits);
    const int bias = (1 << (ebits - 1)) - 1;
    const uint32_t exp_all = (1u << ebits) - 1u;
    const int dexp = (int)((bits >> 52) & 0x7FF);
    const uint64_t dmant = bits & ((1ull << 52) - 1);
    if (dexp == 0x7FF) {
        return sign | (exp_all << mbits) | (dmant ? 1u << (mbits - 1) : 0u);
    }
    if (dexp == 0) {
        return sign; /* zero or a double subnormal: far below every target's smallest subnormal */
    }
    int e = dexp - 1023;                             /* |x| = sig * 2^(e - 52) */
    const uint64_t sig = dmant | (1ull << 52);
    const bool subnormal = e < 1 - bias;
    const int shift = 52 - mbits + (subnormal ? (1 - bias) - e : 0);
    if (shift > 60) {
        return sign; /* below half the smallest subnormal */
    }
    uint64_t q = sig >> shift;
    const uint64_t rem = sig & ((1ull << shift) - 1);
    const uint64_t half = 1ull << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) {
        q++;
    }
    if (subnormal) {
        return sign | (uint32_t)q; /* q = 2^mbits is the smallest normal, correctly encoded */
    }
    if (q == (2ull << mbits)) {
        q >>= 1;
        e++;
    }
    const int field = e + bias;
    if (field >= (int)exp_all) {
        return sign | (exp_all << mbits);
    }
    return sign | ((uint32_t)field << mbits) | (uint32_t)(q - (1ull << mbits));
}

static double decode_binary(uint32_t bits, int mbits, int ebits)
{
    const int bias = (1 << (ebits - 1)) - 1;
    const uint32_t exp_all = (1u << ebits) - 1u;
    const bool neg = (bits >> (mbits + ebits)) & 1u;
    const uint32_t field = (bits >> mbits) & exp_all;
    const uint32_t mant = bits & ((1u << mbits) - 1u);
    double v;
    if (field == 0) {
        v = ldexp((double)mant, 1 - bias - mbits);
    } else if (field == exp_all) {
        v = mant ? NAN : INFINITY;
    } else {
        v = ldexp((double)(mant | (1u << mbits)), (int)field - bias - mbits);
    }
    return neg ? -v : v;
}

uint16_t tu_f16_from_double(double x)
{
    return (uint16_t)encode_binary(x, 10, 5);
}

double tu_f16_to_double(uint16_t bits)
{
    return decode_binary(bits, 10, 5);
}

uint16_t tu_bf16_from_double(double x)
{
    return (uint16_t)encode_binary(x, 7, 8);
}

double tu_bf16_to_double(uint16_t bits)
{
    return decode_binary(bits, 7, 8);
}

/* e4m3fn has no infinities and uses exponent 15 for numbers, so it is not encode_binary's
 * IEEE-style format: rounded here on its own rules (nearest even, saturating at 448). */
uint8_t tu_fp8_e4m3_from_double(double x)
{
    const uint8_t sign = signbit(x) ? 0x80u : 0x00u;
    if (isnan(x)) {
        return (uint8_t)(sign | 0x7Fu);
    }
    const double a = fabs(x);
    if (a < 0x1p-6) { /* subnormal: multiples of 2^-9; 8 * 2^-9 is the smallest normal, code 8 */
        return (uint8_t)(sign | (uint8_t)nearbyint(a * 0x1p9));
    }
    int e;
    const double m = frexp(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    e -= 1;                        /* a = (2m) * 2^e, 2m in [1, 2) */
    double q = nearbyint((2.0 * m - 1.0) * 8.0);
    if (q == 8.0) {
        q = 0.0;
        e += 1;
    }
    const int field = e + 7;
    if (field > 15 || (field == 15 && q == 7.0) || isinf(a)) {
        return (uint8_t)(sign | 0x7Eu); /* 448 */
    }
    return (uint8_t)(sign | (uint8_t)(field << 3) | (uint8_t)q);
}

double tu_fp8_e4m3_to_double(uint8_t bits)
{
    const int field = (bits >> 3) & 15, mant = bits & 7;
    double v;
    if (field == 15 && mant == 7) {
        v = NAN;
    } else if (field == 0) {
        v = ldexp((double)mant, -9);
    } else {
        v = ldexp((double)(8 + mant), field - 10);
    }
    return (bits & 0x80u) ? -v : v;
}

int8_t tu_int8_from_double(double x)
{
    const double r = nearbyint(x);
    return (int8_t)(r > 127.0 ? 127.0 : r < -128.0 ? -128.0 : r);
}

void tu_store(r35a_dtype dtype, void *base, size_t i, double value)
{
    switch (dtype) {
    case R35A_DTYPE_F16: ((uint16_t *)base)[i] = tu_f16_from_double(value); break;
    case R35A_DTYPE_BF16: ((uint16_t *)base)[i] = tu_bf16_from_double(value); break;
    case R35A_DTYPE_F32: ((float *)base)[i] = (float)value; break;
    case R35A_DTYPE_FP8_E4M3: ((uint8_t *)base)[i] = tu_fp8_e4m3_from_double(value); break;
    case R35A_DTYPE_INT8: ((int8_t *)base)[i] = tu_int8_from_double(value); break;
    }
}

double tu_load(r35a_dtype dtype, const void *base, size_t i)
{
    switch (dtype) {
    case R35A_DTYPE_F16: return tu_f16_to_double(((const uint16_t *)base)[i]);
    case R35A_DTYPE_BF16: return tu_bf16_to_double(((const uint16_t *)base)[i]);
    case R35A_DTYPE_F32: return (double)((const float *)base)[i];
    case R35A_DTYPE_FP8_E4M3: return tu_fp8_e4m3_to_double(((const uint8_t *)base)[i]);
    case R35A_DTYPE_INT8: return (double)((const int8_t *)base)[i];
    }
    return NAN;
}

void tu_fill_uniform(r35a_dtype dtype, void *base, size_t first, size_t n, double amp,
                     double offset, tu_rng *rng)
{
    /* one loop per dtype so the coding inlines: fills dominate building big caches */
    switch (dtype) {
    case R35A_DTYPE_F16:
        for (size_t i = first; i < first + n; ++i) {
            ((uint16_t *)base)[i] = (uint16_t)encode_binary(offset + amp * tu_sym(rng), 10, 5);
        }
        break;
    case R35A_DTYPE_BF16:
        for (size_t i = first; i < first + n; ++i) {
            ((uint16_t *)base)[i] = (uint16_t)encode_binary(offset + amp * tu_sym(rng), 7, 8);
        }
        break;
    case R35A_DTYPE_F32:
        for (size_t i = first; i < first + n; ++i) {
            ((float *)base)[i] = (float)(offset + amp * tu_sym(rng));
        }
        break;
    case R35A_DTYPE_FP8_E4M3:
    case R35A_DTYPE_INT8:
        for (size_t i = first; i < first + n; ++i) {
            tu_store(dtype, base, i, offset + amp * tu_sym(rng));
        }
        break;
    }
}

void tu_store_nan(r35a_dtype dtype, void *base, size_t i)
{
    switch (dtype) {
    case R35A_DTYPE_F16: ((uint16_t *)base)[i] = 0x7E01u; break;
    case R35A_DTYPE_BF16: ((uint16_t *)base)[i] = 0x7FC1u; break;
    case R35A_DTYPE_F32: {
        uint32_t bits = 0x7FC00001u;
        memcpy((float *)base + i, &bits, 4);
        break;
    }
    case R35A_DTYPE_FP8_E4M3: ((uint8_t *)base)[i] = 0x7Fu; break;
    case R35A_DTYPE_INT8: ((int8_t *)base)[i] = -128; break; /* no NaN: the largest magnitude */
    }
}

/* ------------------------------------------------------------------------------------------ */
/* poison and memory                                                                            */

void tu_poison(void *p, size_t bytes)
{
    memset(p, (int)TU_POISON_BYTE, bytes);
}

bool tu_elem_is_poison(r35a_dtype dtype, const void *base, size_t i)
{
    size_t es = tu_dtype_size(dtype);
    const uint8_t *b = (const uint8_t *)base + i * es;
    for (size_t k = 0; k < es; ++k) {
        if (b[k] != TU_POISON_BYTE) {
            return false;
        }
    }
    return true;
}

size_t tu_first_unpoisoned(const void *p, size_t bytes)
{
    const uint8_t *b = (const uint8_t *)p;
    for (size_t i = 0; i < bytes; ++i) {
        if (b[i] != TU_POISON_BYTE) {
            return i;
        }
    }
    return (size_t)-1;
}

void *tu_alloc(size_t bytes)
{
    size_t n = (bytes + 63u) & ~(size_t)63u;
    if (n == 0) {
        n = 64;
    }
    void *p = aligned_alloc(64, n);
    if (!p) {
        fprintf(stderr, "tu_alloc: out of memory (%zu bytes)\n", bytes);
        abort();
    }
    return p;
}

void tu_free(void *p)
{
    free(p);
}

uint64_t tu_hash(const void *p, size_t bytes)
{
    /* 8 bytes a step: inputs can be tens of MiB and are hashed before and after every call */
    const uint8_t *b = (const uint8_t *)p;
    uint64_t h = 1469598103934665603ull ^ (uint64_t)bytes;
    size_t i = 0;
    for (; i + 8 <= bytes; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
    }
    for (; i < bytes; ++i) {
        h = (h ^ b[i]) * 1099511628211ull;
    }
    return h;
}

/* ------------------------------------------------------------------------------------------ */
/* comparison                                                                                   */

void tu_check_begin(tu_check *c, r35a_dtype dtype, double ref_max, const char *coord_names)
{
    memset(c, 0, sizeof *c);
    c->dtype = dtype;
    c->tol = tu_tolerance(dtype);
    c->ref_max = ref_max;
    c->coord_names = coord_names ? coord_names : "c0,c1,c2,c3";
}

static void note_first(tu_check *c, int kind, double out, double ref, int32_t c0, int32_t c1,
                       int32_t c2, int32_t c3)
{
    if (c->nfirst >= TU_CHECK_FIRST) {
        return;
    }
    tu_mismatch *m = &c->first[c->nfirst++];
    m->coord[0] = c0;
    m->coord[1] = c1;
    m->coord[2] = c2;
    m->coord[3] = c3;
    m->out = out;
    m->ref = ref;
    m->kind = kind;
}

void tu_check_elem(tu_check *c, const void *out, size_t i, double ref, int32_t c0, int32_t c1,
                   int32_t c2, int32_t c3)
{
    c->checked++;
    if (tu_elem_is_poison(c->dtype, out, i)) {
        c->unwritten++;
        note_first(c, 2, NAN, ref, c0, c1, c2, c3);
        return;
    }
    double o = tu_load(c->dtype, out, i);
    if (!isfinite(o)) {
        if (isfinite(ref)) {
            c->nonfinite++;
            note_first(c, 1, o, ref, c0, c1, c2, c3);
        }
        return;
    }
    double d = fabs(o - ref);
    if (d > c->err_max) {
        c->err_max = d;
    }
    double scale = c->ref_max > TU_TINY ? c->ref_max : TU_TINY;
    if (d > c->tol * scale) {
        c->mismatches++;
        note_first(c, 0, o, ref, c0, c1, c2, c3);
    }
}

void tu_check_untouched(tu_check *c, const uint8_t *out, const uint8_t *mask, size_t bytes)
{
    for (size_t b = 0; b < bytes; ++b) {
        if (!mask[b] && out[b] != TU_POISON_BYTE) {
            if (c->outside == 0 || c->nfirst < TU_CHECK_FIRST) {
                note_first(c, 3, (double)out[b], (double)TU_POISON_BYTE, (int32_t)b, -1, -1, -1);
            }
            c->outside++;
        }
    }
}

double tu_check_error(const tu_check *c)
{
    double scale = c->ref_max > TU_TINY ? c->ref_max : TU_TINY;
    return c->err_max / scale;
}

bool tu_check_passed(const tu_check *c)
{
    return c->mismatches == 0 && c->nonfinite == 0 && c->unwritten == 0 && c->outside == 0 &&
           tu_check_error(c) <= c->tol;
}

void tu_check_report(const tu_check *c, const char *label)
{
    static const char *const kinds[] = {"above tolerance", "NaN/Inf", "left poisoned (unwritten)",
                                        "written outside the owned rows"};
    printf("FAIL %s\n", label);
    printf("  seed 0x%016llx dtype %s error %.3e (tol %.1e) max|ref| %.4e; checked %zu: "
           "%zu above tol, %zu NaN/Inf, %zu unwritten, %zu bytes written outside\n",
           (unsigned long long)tu_seed(), tu_dtype_name(c->dtype), tu_check_error(c), c->tol,
           c->ref_max, c->checked, c->mismatches, c->nonfinite, c->unwritten, c->outside);
    for (int k = 0; k < c->nfirst; ++k) {
        const tu_mismatch *m = &c->first[k];
        if (m->kind == 3) {
            printf("  out byte %d (from the allocation start) = 0x%02x, expected poison 0x%02x: %s\n",
                   m->coord[0], (unsigned)m->out, (unsigned)m->ref, kinds[3]);
        } else {
            printf("  [%s] = [%d,%d,%d,%d] out %.6g ref %.6g diff %.3e: %s\n", c->coord_names,
                   m->coord[0], m->coord[1], m->coord[2], m->coord[3], m->out, m->ref,
                   fabs(m->out - m->ref), kinds[m->kind]);
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* statistics                                                                                   */

typedef struct dtype_stats {
    int cases, failures;
    double worst;
    char worst_label[200];
} dtype_stats;

static dtype_stats g_stats[4];
static double g_last_error;

double tu_last_error(void)
{
    return g_last_error;
}

bool tu_verbose(void)
{
    const char *env = getenv("R35A_TEST_VERBOSE");
    return env && *env && strcmp(env, "0") != 0;
}

void tu_stats_record(r35a_dtype dtype, double error, bool passed, const char *label)
{
    int k = (int)dtype >= 1 && (int)dtype <= 3 ? (int)dtype : 0;
    dtype_stats *s = &g_stats[k];
    g_last_error = error;
    s->cases++;
    if (!passed) {
        s->failures++;
    }
    if (error > s->worst || s->cases == 1) {
        s->worst = error;
        snprintf(s->worst_label, sizeof s->worst_label, "%s", label ? label : "");
    }
}

int tu_stats_cases(void)
{
    int n = 0;
    for (int k = 0; k < 4; ++k) {
        n += g_stats[k].cases;
    }
    return n;
}

int tu_stats_failures(void)
{
    int n = 0;
    for (int k = 0; k < 4; ++k) {
        n += g_stats[k].failures;
    }
    return n;
}

void tu_stats_print(const char *program)
{
    printf("[%s] seed 0x%016llx: %d cases, %d failed\n", program, (unsigned long long)tu_seed(),
           tu_stats_cases(), tu_stats_failures());
    for (int k = 1; k <= 3; ++k) {
        const dtype_stats *s = &g_stats[k];
        if (s->cases == 0) {
            continue;
        }
        printf("[%s]   %-4s %5d cases, worst error %.3e (tolerance %.0e) in %s\n", program,
               tu_dtype_name((r35a_dtype)k), s->cases, s->worst, tu_tolerance((r35a_dtype)k),
               s->worst_label);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* backend                                                                                      */

r35a_backend tu_backend_from_env(void)
{
    const char *env = getenv("R35A_TEST_BACKEND");
    if (!env || !*env || strcmp(env, "reference") == 0) {
        return R35A_BACKEND_REFERENCE;
    }
    if (strcmp(env, "auto") == 0) {
        return R35A_BACKEND_AUTO;
    }
    if (strcmp(env, "gpu") == 0) {
        return R35A_BACKEND_GPU;
    }
    fprintf(stderr, "R35A_TEST_BACKEND=%s: expected reference, auto or gpu; using reference\n", env);
    return R35A_BACKEND_REFERENCE;
}

r35a_context *tu_context_create(void)
{
    r35a_context_options opt;
    r35a_context_options_init(&opt);
    opt.backend = tu_backend_from_env();
    r35a_context *ctx = NULL;
    r35a_status st = r35a_context_create(&opt, &ctx);
    if (st != R35A_OK) {
        printf("r35a_context_create(backend %d): %s: %s\n", (int)opt.backend, r35a_status_string(st),
               r35a_last_error_detail());
        return NULL;
    }
    r35a_context_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (r35a_context_get_info(ctx, &info) == R35A_OK) {
        printf("context: backend %s (%d), arch %s, device %d, reason \"%s\"\n", info.backend_name,
               (int)info.backend, info.arch, (int)info.device_index, info.reason);
    }
    return ctx;
}
