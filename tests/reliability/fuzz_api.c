/*
 * fuzz_api.c - a libFuzzer target over the public API, on reference contexts.
 *
 * Each input is decoded into one call sequence:
 *   - a paged or varlen descriptor, every field from the input: mostly small valid values, with a
 *     byte escape to hostile ones (INT32_MIN/MAX, -1, huge or zero strides, NaN/Inf/negative
 *     scales, unknown dtypes, wrong struct sizes);
 *   - metadata (seq_lens, query_start_loc, block_table / cu_seqlens), valid or with one fault;
 *   - call faults (NULL context/plan/args/pointers, a plan of another context or op, ALiBi, sink
 *     and 8-bit KV scale mismatches, invalid scale values, odd workspaces);
 *   - the 0.2 fields: sinks (paged and varlen), 8-bit KV caches (fp8 e4m3, int8; scales per tensor
 *     or per kv head), and 0.1.0's struct sizes, whose calls mean the later fields' defaults;
 * then plan + run. Every buffer is allocated exactly as large as the descriptor claims, so any
 * out-of-bounds access trips AddressSanitizer, and everything no call may read holds NaN.
 *
 * What is checked (rel_common.h has the independent reading of the documented ranges):
 *   - a call succeeds exactly when the input violates no documented check; a rejection returns a
 *     documented status of a violated check and a detail that starts with "<struct>.<field>" of
 *     that check; a success leaves an empty detail; a failed plan leaves *plan NULL;
 *   - on a rejection the output (poisoned with 0xFF) and the workspace (with guards) are untouched;
 *     inputs are never modified;
 *   - an accepted run matches the float64 oracle (tests/oracle.c) within the dtype's tolerance plus
 *     fp32 logit rounding, never NaN, writes every owned element and nothing else; a repeated
 *     run is bit-identical.
 * Sizes are bounded so one execution stays around a millisecond: a valid call whose buffers or work
 * exceed the bounds is planned but not run.
 *
 * Built two ways: with -fsanitize=fuzzer for libFuzzer (tools/test_reliability.sh), and with
 * fuzz_replay.c's main() so ctest replays tests/reliability/corpus in the ordinary suite.
 */
#include "rel_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Bounds of one execution. */
enum {
    MAX_TENSOR_ELEMS = 1 << 15,   /* Q, K, V, O each */
    MAX_META_ENTRIES = 1 << 16,   /* block-table entries, sequences */
    MAX_DECODED_SEQS = 16,        /* sequences whose lengths come from the input; the rest are empty */
    MAX_ORACLE_SEQ_LEN = 1 << 16, /* longer contexts (short windows) run without the oracle */
};
static const double MAX_WORK = 6e4; /* multiply-adds of one library run */

/* ------------------------------------------------------------------------------------------ */
/* state shared by all executions                                                               */

static r35a_context *g_ctx;        /* the context under test */
static r35a_context *g_other_ctx;  /* for "plan of another context" */
static r35a_plan *g_paged_plan;    /* a valid paged plan of g_ctx, for op mismatches */
static r35a_plan *g_varlen_plan;   /* a valid varlen plan of g_ctx */
static char g_case[1024];          /* what the current execution does, for failure reports */
/* Set by fuzz_replay.c to the file or random input being replayed. */
const char *rel_fuzz_input_label;
static const float g_unread_slope = 1.0f;
/* What the executions did, for fuzz_replay's summary. */
long rel_fuzz_counts[7];
enum { C_PLAN_REJECTED, C_PLAN_OK, C_TOO_BIG, C_RUN_REJECTED, C_RUN_COMPARED, C_MISC, C_RUN_UNCHECKED };

static void fail(const char *what, const char *why) __attribute__((noreturn));

static void fail(const char *what, const char *why)
{
    fprintf(stderr, "\nFUZZ FAILURE in %s: %s\n  case: %s\n  input: %s\n", what, why, g_case,
            rel_fuzz_input_label ? rel_fuzz_input_label : "(libFuzzer writes it as crash-*)");
    fflush(stderr);
    abort();
}

static void check_status(const char *what, const rel_expect *e, r35a_status st)
{
    char why[1024];
    if (!rel_expect_explains(e, st, r35a_last_error_detail(), why, sizeof why))
        fail(what, why);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    r35a_context_options opt;
    r35a_context_options_init(&opt);
    opt.backend = R35A_BACKEND_REFERENCE;
    if (r35a_context_create(&opt, &g_ctx) != R35A_OK || r35a_context_create(&opt, &g_other_ctx) != R35A_OK) {
        fprintf(stderr, "fuzz: cannot create reference contexts: %s\n", r35a_last_error_detail());
        abort();
    }
    r35a_paged_attention_desc pd;
    r35a_paged_attention_desc_init(&pd, R35A_DTYPE_F16, 1, 1, 1, 16, 2, 1, 64, 16, 1);
    r35a_varlen_attention_desc vd;
    r35a_varlen_attention_desc_init(&vd, R35A_DTYPE_F16, 1, 4, 4, 2, 2, 64);
    if (r35a_paged_attention_plan(g_ctx, &pd, &g_paged_plan) != R35A_OK ||
        r35a_varlen_attention_plan(g_ctx, &vd, &g_varlen_plan) != R35A_OK) {
        fprintf(stderr, "fuzz: cannot make the fixed plans: %s\n", r35a_last_error_detail());
        abort();
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* input decoding                                                                               */

typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader;

static uint8_t u8(reader *r)
{
    if (r->n == 0)
        return 0; /* an exhausted input decodes as the most ordinary values */
    r->n--;
    return *r->p++;
}

static uint32_t u32(reader *r)
{
    uint32_t x = 0;
    for (int i = 0; i < 4; ++i)
        x |= (uint32_t)u8(r) << (8 * i);
    return x;
}

static uint64_t u64(reader *r)
{
    uint64_t lo = u32(r);
    return lo | (uint64_t)u32(r) << 32;
}

static int32_t wrap32(int64_t x)
{
    return (int32_t)(uint32_t)(uint64_t)x;
}

/* Wrapping arithmetic for "natural" strides of hostile shapes: the result is just another
 * hostile value, never undefined behaviour in the harness. */
static int64_t wmul(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a * (uint64_t)b);
}

static int64_t wadd(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}

/* Bytes >= 0xE0 pick a hostile value; the last one reads 4 raw bytes. */
static int32_t special_i32(reader *r, uint8_t b)
{
    static const int32_t table[31] = {
        0,         -1,        1,       2,       -2,      INT32_MIN, INT32_MAX, INT32_MAX - 1,
        INT32_MIN + 1, 1 << 16, 1 << 20, 1 << 24, 1 << 30, 1023, 1024, 1025,
        65535,     65536,     46341,   3,       5,       7,         17,        33,
        0x7FFF,    -65536,    INT32_MIN / 2, 100000, 2047, 4097, 12345679};
    int k = b - 0xE0;
    return k < 31 ? table[k] : (int32_t)u32(r);
}

/* A count-like field: lo .. hi mostly, hostile on an escape byte. */
static int32_t f_range(reader *r, int32_t lo, int32_t hi)
{
    uint8_t b = u8(r);
    if (b >= 0xE0)
        return special_i32(r, b);
    return lo + (int32_t)(b % (uint32_t)(hi - lo + 1));
}

static int32_t f_pick(reader *r, const int32_t *values, int count)
{
    uint8_t b = u8(r);
    if (b >= 0xE0)
        return special_i32(r, b);
    return values[b % count];
}

/* base + 0..span-1 mostly. */
static int32_t f_offset(reader *r, int64_t base, int32_t span)
{
    uint8_t b = u8(r);
    if (b >= 0xE0)
        return special_i32(r, b);
    return wrap32(base + b % span);
}

static int64_t f_stride(reader *r, int64_t natural)
{
    static const int64_t table[15] = {0,
                                      -1,
                                      1,
                                      INT64_MAX,
                                      INT64_MIN,
                                      INT64_MAX / 2,
                                      (int64_t)1 << 31,
                                      (int64_t)1 << 32,
                                      (int64_t)1 << 40,
                                      (int64_t)1 << 62,
                                      ((int64_t)1 << 62) + 1,
                                      -((int64_t)1 << 62),
                                      INT32_MAX,
                                      (int64_t)INT32_MAX + 1,
                                      ((int64_t)1 << 32) + 3};
    uint8_t b = u8(r);
    if (b < 0xB0)
        return natural;
    if (b < 0xD0)
        return wadd(natural, b - 0xB0); /* padding */
    if (b < 0xE0)
        return b - 0xD0;             /* short strides: overlapping or broadcast (0) rows */
    int k = b - 0xE0;
    return k < 15 ? table[k] : (int64_t)u64(r);
}

static float float_from_bits(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static float special_float(reader *r, uint8_t b)
{
    static const uint32_t table[15] = {0x00000000u, 0x80000000u, 0xBF800000u, 0x7FC00000u, 0x7F800000u,
                                       0xFF800000u, 0x00800000u, 0x00000001u, 0x7F7FFFFFu, 0x7149F2CAu,
                                       0x0DA24260u, 0xFFC00001u, 0x7F800001u, 0x3F800001u, 0x477FE000u};
    int k = (b - 0xF0) % 16;
    return k < 15 ? float_from_bits(table[k]) : float_from_bits(u32(r));
}

static float f_scale(reader *r, float natural)
{
    static const float normal[8] = {0.01f, 0.1f, 0.5f, 1.0f, 2.0f, 4.0f, 10.0f, 0.0625f};
    uint8_t b = u8(r);
    if (b < 0x90)
        return natural;
    if (b < 0xF0)
        return natural * normal[b % 8];
    return special_float(r, b);
}

static float f_softcap(reader *r)
{
    static const float normal[8] = {1.0f, 5.0f, 30.0f, 50.0f, 0.5f, 100.0f, 0.01f, 2.0f};
    uint8_t b = u8(r);
    if (b < 0xA0)
        return 0.0f;
    if (b < 0xF0)
        return normal[b % 8];
    return special_float(r, b);
}

static r35a_dtype f_dtype(reader *r)
{
    uint8_t b = u8(r);
    if (b < 0xE8)
        return (r35a_dtype)(1 + b % 3);
    return (r35a_dtype)special_i32(r, (uint8_t)(b - 8));
}

/* natural: today's size; old: 0.1.0's (also valid). */
static size_t f_struct_size(reader *r, size_t natural, size_t old)
{
    uint8_t b = u8(r);
    if (b < 0xF0)
        return natural;
    if (b < 0xF4)
        return old;
    switch (b - 0xF4) {
    case 0: return 0;
    case 1: return natural - 8;
    case 2: return natural + 8;
    case 3: return natural - 1;
    case 4: return SIZE_MAX;
    case 5: return 1;
    case 6: return natural * 2;
    case 7: return natural + 4;
    case 8: return sizeof(size_t);
    case 9: return natural / 2;
    case 10: return 4096;
    case 11: return old - 8;
    default: return (size_t)u64(r);
    }
}

/* Element values: finite, from a PRNG seeded by the input (the values steer no control flow of
 * the reference, so spending input bytes on each would only slow the search). */
typedef struct rng {
    uint64_t s;
} rng;

static uint64_t next(rng *g)
{
    uint64_t z = (g->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double sym(rng *g)
{
    return (double)(next(g) >> 11) * 0x1.0p-52 - 1.0;
}

/* Value modes: magnitudes of Q and K and the natural softmax scale that keeps logits O(D). */
typedef struct value_mode {
    double qk_amp;
    double v_offset;
    float natural_scale_factor; /* times 1/sqrt(D) */
} value_mode;

static value_mode f_value_mode(reader *r, r35a_dtype dt)
{
    value_mode m = {1.0, 0.0, 1.0f};
    uint8_t b = u8(r);
    switch (b % 6) {
    case 0:
    case 1: break;
    case 2: /* near the top of the dtype's range, scale shrunk to match */
        m.qk_amp = dt == R35A_DTYPE_F16 ? 60000.0 : 1e17;
        m.natural_scale_factor = (float)(1.0 / (m.qk_amp * m.qk_amp));
        break;
    case 3: /* tiny (f16 subnormal) values, scale grown to match */
        m.qk_amp = dt == R35A_DTYPE_F16 ? 3e-5 : 1e-20;
        m.natural_scale_factor = (float)(1.0 / (m.qk_amp * m.qk_amp));
        break;
    case 4: m.v_offset = 2.0; break;
    default: m.qk_amp = 4.0; break;
    }
    return m;
}

/* ------------------------------------------------------------------------------------------ */
/* buffers                                                                                      */

/* Exactly `bytes` (ASan sees one past the end); never NULL, so a NULL is always a chosen fault. */
static void *alloc_exact(size_t bytes)
{
    void *p = malloc(bytes);
    if (!p)
        p = malloc(1);
    if (!p)
        abort();
    return p;
}

static bool small_extent(__int128 elems)
{
    return elems >= 0 && elems <= MAX_TENSOR_ELEMS;
}

static void mark_vector(uint8_t *reached, int64_t offset, int32_t n)
{
    memset(reached + offset, 1, (size_t)n);
}

typedef struct guarded_ws {
    rel_guarded g;
    bool null;
    size_t bytes_arg;
} guarded_ws;

static void workspace_decode(reader *r, guarded_ws *w)
{
    uint8_t b = u8(r);
    rel_guarded_alloc(&w->g, b % 64, 0x5Au);
    w->null = (b & 0xC0) == 0xC0;
    w->bytes_arg = (b & 0xF0) == 0xB0 ? SIZE_MAX : w->g.bytes;
}

static void workspace_check(const guarded_ws *w, size_t may_write, const char *what)
{
    if (!rel_guards_intact(&w->g))
        fail(what, "the guard bytes around the workspace were overwritten");
    for (size_t i = may_write; i < w->g.bytes; ++i)
        if (w->g.payload[i] != 0x5Au)
            fail(what, "workspace bytes beyond the plan's workspace_bytes were written");
}

/* Run-time faults shared by both ops. */
typedef enum run_fault {
    RF_NONE,
    RF_NULL_CONTEXT,
    RF_NULL_PLAN,
    RF_OTHER_CONTEXT,
    RF_OTHER_OP,
    RF_NULL_ARGS,
    RF_ARGS_STRUCT_SIZE,
    RF_NULL_POINTER,
    RF_ALIBI_TOGGLE,
    RF_SINKS_TOGGLE,
    RF_SCALES_TOGGLE,
} run_fault;

static run_fault f_run_fault(reader *r, uint8_t *which)
{
    uint8_t b = u8(r);
    *which = u8(r);
    if (b < 0xC0)
        return RF_NONE;
    return (run_fault)(1 + (b - 0xC0) % 10);
}

/* A non-NULL pointer for a "set but not wanted" fault: the library must reject the call before
 * reading it. */
static const float g_unread_floats[1] = {1.0f};

/* Sink logits: moderate values that sometimes dominate a row's softmax, and -inf (no sink). */
static float *make_sinks(rng *g, int32_t count)
{
    float *sinks = malloc(sizeof(float) * (size_t)(count > 0 ? count : 1));
    if (!sinks)
        abort();
    for (int32_t h = 0; h < count; ++h)
        sinks[h] = (next(g) & 7) == 0 ? -INFINITY : (float)(4.0 * sym(g));
    return sinks;
}

static void check_plan_info(const r35a_plan *plan, const char *what)
{
    r35a_plan_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (r35a_plan_get_info(plan, &info) != R35A_OK)
        fail(what, "r35a_plan_get_info failed on a valid plan");
    if (strcmp(info.implementation, "reference") != 0)
        fail(what, "a reference context's plan names another implementation");
    if (info.workspace_bytes != 0 || info.grid[0] || info.grid[1] || info.grid[2] || info.block[0] ||
        info.block[1] || info.block[2] || info.num_splits != 1)
        fail(what, "a reference plan has a workspace, a grid or splits");
}

static void check_untouched(const void *buf, size_t bytes, uint8_t fill, const char *what)
{
    const uint8_t *b = buf;
    for (size_t i = 0; i < bytes; ++i)
        if (b[i] != fill)
            fail(what, "the output was written by a call that failed");
}

/* ------------------------------------------------------------------------------------------ */
/* paged                                                                                        */

static void describe_paged(const r35a_paged_attention_desc *d)
{
    snprintf(g_case, sizeof g_case,
             "paged ss=%zu dt=%d seqs=%d tok=%d maxM=%d maxL=%d hq=%d hkv=%d D=%d B=%d pages=%d bts=%d "
             "win=%d scale=%a cap=%a alibi=%d sinks=%d kvdt=%d perhead=%d q=%lld/%lld o=%lld/%lld "
             "k=%lld/%lld/%lld v=%lld/%lld/%lld",
             d->struct_size, (int)d->dtype, (int)d->num_seqs, (int)d->num_tokens, (int)d->max_query_len,
             (int)d->max_seq_len, (int)d->num_q_heads, (int)d->num_kv_heads, (int)d->head_size,
             (int)d->page_size, (int)d->num_pages, (int)d->block_table_stride, (int)d->window,
             (double)d->softmax_scale, (double)d->logit_softcap, (int)d->use_alibi, (int)d->use_sinks,
             (int)d->kv_dtype, (int)d->kv_scale_per_head,
             (long long)d->q_token_stride, (long long)d->q_head_stride, (long long)d->o_token_stride,
             (long long)d->o_head_stride, (long long)d->k_page_stride, (long long)d->k_head_stride,
             (long long)d->k_slot_stride, (long long)d->v_page_stride, (long long)d->v_head_stride,
             (long long)d->v_slot_stride);
}

static void append_case(const char *fmt, long long a, long long b)
{
    char item[64]; /* the longest item, " meta-fault=" and two long longs, takes 54 bytes */
    snprintf(item, sizeof item, fmt, a, b);
    rel_append(g_case, sizeof g_case, item);
}

/* Keys the rows of sequence s reach: [lo, L) (empty when M = 0). */
static void paged_reach(const r35a_paged_attention_desc *d, int32_t L, int32_t M, int64_t *lo, int64_t *hi)
{
    *lo = 0;
    *hi = M > 0 ? L : 0;
    if (M > 0 && d->window > 0) {
        int64_t x = (int64_t)L - M - d->window + 1;
        *lo = x > 0 ? x : 0;
    }
}

static int32_t max_seq_len_used(const r35a_paged_attention_desc *d, const int32_t *seq_lens)
{
    int32_t m = 0;
    for (int32_t s = 0; s < d->num_seqs; ++s)
        m = seq_lens[s] > m ? seq_lens[s] : m;
    return m;
}

static double paged_work(const r35a_paged_attention_desc *d, const int32_t *seq_lens, const int32_t *qsl,
                         int64_t *max_keys)
{
    double work = 0.0;
    *max_keys = 0;
    for (int32_t s = 0; s < d->num_seqs; ++s) {
        int64_t L = seq_lens[s], M = (int64_t)qsl[s + 1] - qsl[s];
        for (int64_t i = 0; i < M; ++i) {
            int64_t p = L - M + i;
            int64_t keys = d->window > 0 && d->window < p + 1 ? d->window : p + 1;
            if (keys > *max_keys)
                *max_keys = keys;
            work += (double)keys * d->num_q_heads * (double)d->head_size * 2.0;
            if (work > MAX_WORK)
                return work; /* enough to know it is too much */
        }
    }
    return work;
}

static void fuzz_paged(reader *r, rng *g)
{
    static const int32_t head_sizes[] = {1, 2, 3, 4, 5, 8, 15, 16, 17, 32, 48, 64, 72, 80, 96, 128, 256, 512, 1024};
    static const int32_t page_sizes[] = {1, 2, 3, 4, 5, 7, 8, 16, 32, 33};
    r35a_paged_attention_desc d;
    memset(&d, 0, sizeof d);
    d.struct_size = f_struct_size(r, sizeof d, REL_PAGED_DESC_SIZE_0_1);
    d.dtype = f_dtype(r);
    r35a_dtype vdt = rel_dtype_size(d.dtype) ? d.dtype : R35A_DTYPE_F16;
    value_mode vm = f_value_mode(r, vdt);
    d.num_seqs = f_range(r, 1, 5);
    d.max_query_len = f_range(r, 0, 10);
    d.max_seq_len = f_range(r, 0, 48);
    d.num_kv_heads = f_range(r, 1, 3);
    int32_t group = f_range(r, 1, 4);
    d.num_q_heads = wrap32((int64_t)group * d.num_kv_heads);
    d.head_size = f_pick(r, head_sizes, (int)(sizeof head_sizes / sizeof *head_sizes));
    d.page_size = f_pick(r, page_sizes, (int)(sizeof page_sizes / sizeof *page_sizes));
    int64_t pages_needed =
        d.page_size > 0 && d.max_seq_len > 0 ? ((int64_t)d.max_seq_len + d.page_size - 1) / d.page_size : 0;
    d.block_table_stride = f_offset(r, pages_needed, 3);
    d.num_pages = f_range(r, 1, 24);
    uint8_t wb = u8(r);
    d.window = wb < 0x90 ? 0 : wb < 0xE0 ? 1 + wb % 12 : special_i32(r, wb);
    float natural = d.head_size > 0 ? vm.natural_scale_factor / sqrtf((float)d.head_size) : 1.0f;
    d.softmax_scale = f_scale(r, natural);
    d.logit_softcap = f_softcap(r);
    uint8_t ab = u8(r);
    d.use_alibi = ab < 0xB0 ? 0 : ab < 0xE0 ? 1 : special_i32(r, ab);
    /* 0.2 fields (with a 0.1.0 struct_size they hold values the library must not read) */
    uint8_t sb = u8(r);
    d.use_sinks = sb < 0xA0 ? 0 : sb < 0xE0 ? 1 : special_i32(r, sb);
    uint8_t kb = u8(r);
    d.kv_dtype = kb < 0x70 ? (r35a_dtype)0
                 : kb < 0x80 ? d.dtype
                 : kb < 0xB0 ? R35A_DTYPE_FP8_E4M3
                 : kb < 0xE0 ? R35A_DTYPE_INT8
                             : (r35a_dtype)special_i32(r, kb);
    bool kv8_asked = rel_dtype_is_8bit(d.kv_dtype);
    uint8_t hb = u8(r);
    d.kv_scale_per_head = hb < 0xD0 ? (kv8_asked ? hb % 3 : 0) : hb < 0xE0 ? 1 + (hb & 1) : special_i32(r, hb);

    /* strides: contiguous HND (or NHD) caches and [token][head][D] rows, then perturbed */
    int64_t D = d.head_size, hq = d.num_q_heads, hkv = d.num_kv_heads, B = d.page_size;
    bool k_nhd = u8(r) & 1, v_nhd = u8(r) & 1;
    d.q_head_stride = f_stride(r, D);
    d.q_token_stride = f_stride(r, wmul(hq, D));
    d.o_head_stride = f_stride(r, D);
    d.o_token_stride = f_stride(r, wmul(hq, D));
    d.k_slot_stride = f_stride(r, k_nhd ? wmul(hkv, D) : D);
    d.k_head_stride = f_stride(r, k_nhd ? D : wmul(B, D));
    d.k_page_stride = f_stride(r, wmul(wmul(hkv, B), D));
    d.v_slot_stride = f_stride(r, v_nhd ? wmul(hkv, D) : D);
    d.v_head_stride = f_stride(r, v_nhd ? D : wmul(B, D));
    d.v_page_stride = f_stride(r, wmul(wmul(hkv, B), D));
    /* 0.4: per-token-head scale tensors [num_pages][page_size][num_kv_heads] (K) and
     * [num_pages][num_kv_heads][page_size] (V), then perturbed */
    d.k_scale_head_stride = f_stride(r, 1);
    d.k_scale_slot_stride = f_stride(r, hkv);
    d.k_scale_page_stride = f_stride(r, wmul(B, hkv));
    d.v_scale_slot_stride = f_stride(r, 1);
    d.v_scale_head_stride = f_stride(r, B);
    d.v_scale_page_stride = f_stride(r, wmul(B, hkv));

    /* per-sequence lengths (decoded before num_tokens, which is normally their sum) */
    int32_t nseq_meta = d.num_seqs >= 1 && d.num_seqs <= MAX_META_ENTRIES ? d.num_seqs : 0;
    int32_t Ms[MAX_DECODED_SEQS] = {0}, Ls[MAX_DECODED_SEQS] = {0};
    int64_t total_m = 0;
    for (int32_t s = 0; s < nseq_meta && s < MAX_DECODED_SEQS; ++s) {
        uint8_t bm = u8(r), bl = u8(r);
        int32_t maxm = d.max_query_len < 0 ? 0 : d.max_query_len > 16 ? 16 : d.max_query_len;
        int32_t m = bm % (maxm + 1);
        if (d.max_seq_len >= 0 && m > d.max_seq_len)
            m = d.max_seq_len;
        int64_t hi = d.max_seq_len < (int64_t)m + 48 ? d.max_seq_len : (int64_t)m + 48;
        Ms[s] = m;
        Ls[s] = hi >= m ? m + (int32_t)(bl % (hi - m + 1)) : m;
        total_m += m;
    }
    uint8_t tb = u8(r);
    d.num_tokens = tb < 0xE0 ? wrap32(total_m) : special_i32(r, tb);
    describe_paged(&d);

    /* ---- plan ---- */
    uint8_t pf = u8(r);
    r35a_context *plan_ctx = pf == 0xFF ? NULL : g_ctx;
    const r35a_paged_attention_desc *plan_desc = pf == 0xFE ? NULL : &d;
    bool null_out = pf == 0xFD;
    rel_expect e;
    rel_expect_init(&e);
    if (null_out)
        rel_expect_add(&e, R35A_ERR_NULL_POINTER, "plan", NULL, NULL);
    if (!plan_ctx)
        rel_expect_add(&e, R35A_ERR_NULL_POINTER, "context", NULL, NULL);
    rel_expect_paged_desc(plan_desc, &e);
    r35a_plan *plan = (r35a_plan *)(uintptr_t)0x1; /* must become NULL on failure */
    r35a_status st = r35a_paged_attention_plan(plan_ctx, plan_desc, null_out ? NULL : &plan);
    check_status("r35a_paged_attention_plan", &e, st);
    rel_fuzz_counts[st == R35A_OK ? C_PLAN_OK : C_PLAN_REJECTED]++;
    if (st != R35A_OK) {
        if (!null_out && plan != NULL)
            fail("r35a_paged_attention_plan", "*plan is not NULL after a failure");
        return;
    }
    check_plan_info(plan, "r35a_plan_get_info (paged)");
    /* What the accepted descriptor means (0.1.0's size: the later fields at their defaults). */
    r35a_paged_attention_desc meant_tmp;
    const r35a_paged_attention_desc *dm = rel_paged_desc_meant(&d, &meant_tmp);
    const r35a_dtype kvdt = rel_kv_dtype(dm);
    const bool kv8 = rel_dtype_is_8bit(kvdt);
    const bool sinks_on = dm->use_sinks == 1;

    /* ---- buffers, sized exactly as the descriptor claims ---- */
    rel_paged_extents x;
    rel_paged_extents_of(&d, &x);
    size_t es = rel_dtype_size(d.dtype), kv_es = rel_dtype_size(kvdt);
    if (!small_extent(x.q) || !small_extent(x.o) || !small_extent(x.k) || !small_extent(x.v) ||
        (dm->kv_scale_per_head == 2 && kv8 && (!small_extent(x.k_scale) || !small_extent(x.v_scale))) ||
        x.block_table > MAX_META_ENTRIES || nseq_meta == 0 || d.num_q_heads > MAX_META_ENTRIES) {
        r35a_plan_destroy(plan);
        rel_fuzz_counts[C_TOO_BIG]++;
        return; /* valid but too big to run here */
    }
    size_t nq = (size_t)x.q, no = (size_t)x.o, nk = (size_t)x.k, nv = (size_t)x.v, nbt = (size_t)x.block_table;
    int32_t *seq_lens = alloc_exact(sizeof(int32_t) * (size_t)d.num_seqs);
    int32_t *qsl = alloc_exact(sizeof(int32_t) * ((size_t)d.num_seqs + 1));
    int32_t *bt = alloc_exact(sizeof(int32_t) * nbt);
    qsl[0] = 0;
    for (int32_t s = 0; s < d.num_seqs; ++s) {
        seq_lens[s] = s < MAX_DECODED_SEQS ? Ls[s] : 0;
        qsl[s + 1] = wrap32((int64_t)qsl[s] + (s < MAX_DECODED_SEQS ? Ms[s] : 0));
    }
    for (size_t i = 0; i < nbt; ++i) {
        uint8_t b = u8(r);
        bt[i] = b < 0xF0 ? (int32_t)(b % (uint32_t)d.num_pages)
                         : (b & 3) == 0 ? -1 : (b & 3) == 1 ? d.num_pages : (b & 3) == 2 ? INT32_MAX : INT32_MIN;
    }
    /* one metadata fault */
    uint8_t mf = u8(r), mk = u8(r);
    int32_t fs = mk % d.num_seqs;
    if (mf >= 0xD0) {
        switch ((mf - 0xD0) % 12) {
        case 0: qsl[0] = 1; break;
        case 1: qsl[fs + 1] = qsl[fs] - 1; break;
        case 2: seq_lens[fs] = -1; break;
        case 3: seq_lens[fs] = wrap32((int64_t)d.max_seq_len + 1); break;
        case 4: seq_lens[fs] = INT32_MIN; break;
        case 5: seq_lens[fs] = INT32_MAX; break;
        case 6: seq_lens[fs] = wrap32((int64_t)qsl[fs + 1] - qsl[fs] - 1); break;
        case 7: qsl[d.num_seqs] = wrap32((int64_t)qsl[d.num_seqs] + 1); break;
        case 8: qsl[fs + 1] = wrap32((int64_t)qsl[fs] + d.max_query_len + 1); break;
        case 9: qsl[fs + 1] = INT32_MAX; break;
        case 10: seq_lens[fs] = d.max_seq_len; break; /* valid but long */
        default: seq_lens[fs] = 0; break;
        }
        append_case(" meta-fault=%lld@%lld", (mf - 0xD0) % 12, fs);
    }
    float *alibi = NULL;
    if (d.use_alibi == 1 || (u8(r) & 0x80)) { /* sometimes given without use_alibi (a fault) */
        alibi = alloc_exact(sizeof(float) * (size_t)d.num_q_heads);
        for (int32_t h = 0; h < d.num_q_heads; ++h)
            alibi[h] = (float)(0.5 + 0.5 * sym(g));
    }
    float *sinks = sinks_on ? make_sinks(g, d.num_q_heads) : NULL;
    /* 8-bit KV: stored values up to stored_amp, scales that bring K to vm.qk_amp and V to
     * v_offset + U(-1, 1) at most, so the tolerance below holds as for 16-bit caches */
    const double stored_amp = kvdt == R35A_DTYPE_FP8_E4M3 ? 8.0 : 40.0;
    float *k_scale = NULL, *v_scale = NULL;
    const bool per_token = dm->kv_scale_per_head == 2;
    size_t n_scales = dm->kv_scale_per_head == 1 ? (size_t)d.num_kv_heads : 1;
    size_t n_k_scales = per_token ? (size_t)x.k_scale : n_scales, n_v_scales = per_token ? (size_t)x.v_scale : n_scales;
    if (kv8) {
        k_scale = alloc_exact(sizeof(float) * n_k_scales);
        v_scale = alloc_exact(sizeof(float) * n_v_scales);
        for (size_t i = 0; i < n_k_scales; ++i)
            k_scale[i] = (float)(vm.qk_amp / stored_amp * (0.75 + 0.25 * sym(g)));
        for (size_t i = 0; i < n_v_scales; ++i)
            v_scale[i] = (float)(3.0 / stored_amp * (0.75 + 0.25 * sym(g)));
        uint8_t sf = u8(r); /* an invalid scale value (R35A_ERR_INVALID_DATA on the reference) */
        if (sf >= 0xE8 && !per_token) {
            static const float bad_scales[6] = {0.0f, -1.0f, -0.0f, NAN, INFINITY, -INFINITY};
            float *target = sf & 1 ? v_scale : k_scale;
            target[(size_t)u8(r) % n_scales] = bad_scales[(sf >> 1) % 6];
            append_case(" scale-fault=%lld/%lld", sf & 1, (sf >> 1) % 6);
        }
    }

    r35a_paged_attention_args a;
    memset(&a, 0, sizeof a);
    a.struct_size = sizeof a;
    void *q = alloc_exact(nq * es), *k = alloc_exact(nk * kv_es), *v = alloc_exact(nv * kv_es);
    void *out = alloc_exact(no * es);
    a.q = q;
    a.k_cache = k;
    a.v_cache = v;
    a.out = out;
    a.seq_lens = seq_lens;
    a.query_start_loc = qsl;
    a.block_table = bt;
    a.alibi_slopes = alibi;
    a.sinks = sinks;
    a.k_scale = k_scale;
    a.v_scale = v_scale;

    /* ---- run-time faults and the expected outcome ---- */
    uint8_t which;
    run_fault rf = f_run_fault(r, &which);
    r35a_context *run_ctx = g_ctx;
    const r35a_plan *run_plan = plan;
    const r35a_paged_attention_args *run_args = &a;
    r35a_paged_attention_args bad = a;
    rel_expect_init(&e);
    switch (rf) {
    case RF_NONE: break;
    case RF_NULL_CONTEXT:
        run_ctx = NULL;
        rel_expect_add(&e, R35A_ERR_NULL_POINTER, "context", NULL, NULL);
        break;
    case RF_NULL_PLAN:
        run_plan = NULL;
        rel_expect_add(&e, R35A_ERR_NULL_POINTER, "plan", NULL, NULL);
        break;
    case RF_OTHER_CONTEXT:
        run_ctx = g_other_ctx;
        rel_expect_add(&e, R35A_ERR_PLAN_MISMATCH, "plan", NULL, NULL);
        break;
    case RF_OTHER_OP:
        run_plan = g_varlen_plan;
        rel_expect_add(&e, R35A_ERR_PLAN_MISMATCH, "plan", NULL, NULL);
        break;
    case RF_NULL_ARGS: run_args = NULL; break;
    case RF_ARGS_STRUCT_SIZE: /* 0.1.0's size is valid: then sinks and scales are NULL by default */
        bad.struct_size = f_struct_size(r, sizeof bad, REL_PAGED_ARGS_SIZE_0_1);
        if (bad.struct_size == sizeof bad)
            bad.struct_size = sizeof bad - 8;
        run_args = &bad;
        break;
    case RF_NULL_POINTER: {
        const void **slots[11] = {&bad.q, &bad.k_cache, &bad.v_cache, (const void **)&bad.out,
                                  (const void **)&bad.seq_lens, (const void **)&bad.query_start_loc,
                                  (const void **)&bad.block_table, (const void **)&bad.alibi_slopes,
                                  (const void **)&bad.sinks, (const void **)&bad.k_scale,
                                  (const void **)&bad.v_scale};
        *slots[which % 11] = NULL;
        run_args = &bad;
        break;
    }
    case RF_ALIBI_TOGGLE:
        bad.alibi_slopes = bad.alibi_slopes ? NULL : &g_unread_slope; /* non-NULL, never to be read */
        run_args = &bad;
        break;
    case RF_SINKS_TOGGLE:
        bad.sinks = bad.sinks ? NULL : g_unread_floats;
        run_args = &bad;
        break;
    case RF_SCALES_TOGGLE:
        if (which & 1)
            bad.k_scale = bad.k_scale ? NULL : g_unread_floats;
        else
            bad.v_scale = bad.v_scale ? NULL : g_unread_floats;
        run_args = &bad;
        break;
    }
    if (rf != RF_NONE)
        append_case(" run-fault=%lld/%lld", rf, which);
    rel_expect_paged_args(&d, run_args, &e);
    r35a_paged_attention_args run_meant_tmp;
    const r35a_paged_attention_args *run_meant = rel_paged_args_meant(run_args, &run_meant_tmp);
    bool meta_readable = run_meant && run_meant->seq_lens && run_meant->query_start_loc &&
                         run_meant->block_table && (!kv8 || (run_meant->k_scale == k_scale &&
                                                             run_meant->v_scale == v_scale && k_scale));
    if (meta_readable)
        rel_expect_paged_data(&d, &a, &e);

    /* ---- contents: reached elements get values, everything else NaN ---- */
    bool data_valid = e.count == 0;
    int64_t max_keys = 0;
    if (data_valid && paged_work(&d, seq_lens, qsl, &max_keys) > MAX_WORK) {
        r35a_plan_destroy(plan);
        rel_fuzz_counts[C_TOO_BIG]++;
        goto done; /* valid but too much work for one execution */
    }
    {
        uint8_t *reached = calloc(nq > nk ? (nq > nv ? nq : nv) : (nk > nv ? nk : nv), 1);
        int64_t tokens = d.num_tokens;
        memset(reached, 0, nq);
        for (int64_t t = 0; data_valid && t < tokens; ++t)
            for (int64_t h = 0; h < hq; ++h)
                mark_vector(reached, t * d.q_token_stride + h * d.q_head_stride, d.head_size);
        if (!data_valid)
            memset(reached, 1, nq);
        rel_fill_tensor(d.dtype, q, nq, reached, vm.qk_amp, 0.0, &g->s);
        /* K and V: stored values; 8-bit caches scale them to vm.qk_amp and 3 (see the scales) */
        const double k_amp = kv8 ? stored_amp : vm.qk_amp;
        const double v_amp = kv8 ? stored_amp / 3.0 : 1.0, v_off = kv8 ? vm.v_offset * stored_amp / 3.0 : vm.v_offset;
        for (int pass = 0; pass < 2; ++pass) {
            size_t n = pass ? nv : nk;
            int64_t ps = pass ? d.v_page_stride : d.k_page_stride, hs = pass ? d.v_head_stride : d.k_head_stride;
            int64_t ss = pass ? d.v_slot_stride : d.k_slot_stride;
            memset(reached, data_valid ? 0 : 1, n);
            for (int32_t s = 0; data_valid && s < d.num_seqs; ++s) {
                int64_t lo, hi;
                paged_reach(&d, seq_lens[s], qsl[s + 1] - qsl[s], &lo, &hi);
                const int32_t *row = bt + (int64_t)s * d.block_table_stride;
                for (int64_t j = lo; j < hi; ++j)
                    for (int64_t gk = 0; gk < hkv; ++gk)
                        mark_vector(reached, row[j / B] * ps + gk * hs + (j % B) * ss, d.head_size);
            }
            rel_fill_tensor(kvdt, pass ? v : k, n, reached, pass ? v_amp : k_amp, pass ? v_off : 0.0, &g->s);
        }
        free(reached);
    }

    /* ---- run ---- */
    guarded_ws ws;
    workspace_decode(r, &ws);
    memset(out, 0xFF, no * es);
    uint64_t in_hash = rel_hash(q, nq * es, 1);
    in_hash = rel_hash(k, nk * kv_es, in_hash);
    in_hash = rel_hash(v, nv * kv_es, in_hash);
    if (sinks)
        in_hash = rel_hash(sinks, sizeof(float) * (size_t)d.num_q_heads, in_hash);
    if (kv8) {
        in_hash = rel_hash(k_scale, sizeof(float) * n_k_scales, in_hash);
        in_hash = rel_hash(v_scale, sizeof(float) * n_v_scales, in_hash);
    }
    in_hash = rel_hash(seq_lens, sizeof(int32_t) * (size_t)d.num_seqs, in_hash);
    in_hash = rel_hash(qsl, sizeof(int32_t) * ((size_t)d.num_seqs + 1), in_hash);
    in_hash = rel_hash(bt, sizeof(int32_t) * nbt, in_hash);
    st = r35a_paged_attention_run(run_ctx, run_plan, run_args, ws.null ? NULL : ws.g.payload, ws.bytes_arg, NULL);
    check_status("r35a_paged_attention_run", &e, st);
    uint64_t in_hash_after = rel_hash(q, nq * es, 1);
    in_hash_after = rel_hash(k, nk * kv_es, in_hash_after);
    in_hash_after = rel_hash(v, nv * kv_es, in_hash_after);
    if (sinks)
        in_hash_after = rel_hash(sinks, sizeof(float) * (size_t)d.num_q_heads, in_hash_after);
    if (kv8) {
        in_hash_after = rel_hash(k_scale, sizeof(float) * n_k_scales, in_hash_after);
        in_hash_after = rel_hash(v_scale, sizeof(float) * n_v_scales, in_hash_after);
    }
    in_hash_after = rel_hash(seq_lens, sizeof(int32_t) * (size_t)d.num_seqs, in_hash_after);
    in_hash_after = rel_hash(qsl, sizeof(int32_t) * ((size_t)d.num_seqs + 1), in_hash_after);
    in_hash_after = rel_hash(bt, sizeof(int32_t) * nbt, in_hash_after);
    if (in_hash != in_hash_after)
        fail("r35a_paged_attention_run", "an input buffer was modified");
    workspace_check(&ws, 0, "r35a_paged_attention_run");
    rel_fuzz_counts[st == R35A_OK ? C_RUN_COMPARED : C_RUN_REJECTED]++;
    if (st != R35A_OK) {
        check_untouched(out, no * es, 0xFF, "r35a_paged_attention_run");
    } else if (max_seq_len_used(&d, seq_lens) > MAX_ORACLE_SEQ_LEN) {
        /* a long context with a short window: cheap for the library, not for the oracle (it walks
         * every position); the run itself is what the sanitizers check here */
        rel_fuzz_counts[C_RUN_COMPARED]--;
        rel_fuzz_counts[C_RUN_UNCHECKED]++;
    } else {
        size_t nref = (size_t)d.num_tokens * (size_t)d.num_q_heads * (size_t)d.head_size;
        double *ref = malloc(sizeof(double) * (nref ? nref : 1));
        if (rel_oracle_paged(&d, &a, ref) != 0)
            fail("oracle", "the oracle rejects a call the library accepted");
        double qmax = rel_max_abs_rows(d.dtype, q, d.num_tokens, d.num_q_heads, d.head_size, d.q_token_stride,
                                       d.q_head_stride);
        double kmax = vm.qk_amp, vmax = 1.0 + fabs(vm.v_offset);
        double bound = (double)d.softmax_scale * d.head_size * qmax * kmax;
        if (d.logit_softcap > 0.0f && bound > d.logit_softcap)
            bound = d.logit_softcap;
        if (d.use_alibi)
            bound += (double)d.max_seq_len; /* slopes <= 1 */
        double extra = rel_extra_abs_tolerance(d.head_size, bound, max_keys + (sinks ? 1 : 0), vmax);
        rel_compare c;
        if (!rel_compare_rows(d.dtype, out, no * es, d.num_tokens, d.num_q_heads, d.head_size, d.o_token_stride,
                              d.o_head_stride, ref, rel_tolerance(d.dtype), extra, &c)) {
            char why[1024];
            snprintf(why, sizeof why,
                     "output differs from the oracle: err %.3e tol %.3e max|ref| %.3e; %zu above tol, %zu "
                     "NaN/Inf, %zu unwritten, %zu bytes outside; %s",
                     c.err_max, c.tol_abs, c.ref_max, c.bad, c.nonfinite, c.unwritten, c.outside, c.first);
            fail("r35a_paged_attention_run", why);
        }
        if (which & 0x40) { /* determinism: a second run is bit-identical */
            void *again = alloc_exact(no * es);
            memcpy(again, out, no * es);
            memset(out, 0xFF, no * es);
            if (r35a_paged_attention_run(run_ctx, run_plan, run_args, NULL, 0, NULL) != R35A_OK ||
                memcmp(again, out, no * es) != 0)
                fail("r35a_paged_attention_run", "a repeated run is not bit-identical");
            free(again);
        }
        free(ref);
    }
    rel_guarded_free(&ws.g);
    r35a_plan_destroy(plan);
done:
    free(q);
    free(k);
    free(v);
    free(out);
    free(seq_lens);
    free(qsl);
    free(bt);
    free(alibi);
    free(sinks);
    free(k_scale);
    free(v_scale);
}

/* ------------------------------------------------------------------------------------------ */
/* varlen                                                                                       */

static void describe_varlen(const r35a_varlen_attention_desc *d, bool fused)
{
    snprintf(g_case, sizeof g_case,
             "varlen ss=%zu dt=%d segs=%d tok=%d maxlen=%d hq=%d hkv=%d D=%d causal=%d scale=%a cap=%a "
             "sinks=%d fused=%d q=%lld/%lld k=%lld/%lld v=%lld/%lld o=%lld/%lld",
             d->struct_size, (int)d->dtype, (int)d->num_segments, (int)d->num_tokens, (int)d->max_seqlen,
             (int)d->num_q_heads, (int)d->num_kv_heads, (int)d->head_size, (int)d->causal,
             (double)d->softmax_scale, (double)d->logit_softcap, (int)d->use_sinks, (int)fused, (long long)d->q_token_stride,
             (long long)d->q_head_stride, (long long)d->k_token_stride, (long long)d->k_head_stride,
             (long long)d->v_token_stride, (long long)d->v_head_stride, (long long)d->o_token_stride,
             (long long)d->o_head_stride);
}

static double varlen_work(const r35a_varlen_attention_desc *d, const int32_t *cu, int64_t *max_keys)
{
    /* the oracle walks every (segment, kv head) pair, empty segments included */
    double work = (double)d->num_segments * d->num_kv_heads;
    *max_keys = 0;
    for (int32_t s = 0; s < d->num_segments; ++s) {
        int64_t n = (int64_t)cu[s + 1] - cu[s];
        work += d->causal ? (double)n * (n + 1) / 2 : (double)n * n;
        if (n > *max_keys)
            *max_keys = n;
    }
    return work * d->num_q_heads * (double)d->head_size * 2.0;
}

static void fuzz_varlen(reader *r, rng *g)
{
    static const int32_t head_sizes[] = {1, 2, 3, 8, 16, 32, 48, 64, 72, 80, 128, 5, 256};
    r35a_varlen_attention_desc d;
    memset(&d, 0, sizeof d);
    d.struct_size = f_struct_size(r, sizeof d, REL_VARLEN_DESC_SIZE_0_1);
    d.dtype = f_dtype(r);
    r35a_dtype vdt = rel_dtype_size(d.dtype) ? d.dtype : R35A_DTYPE_F16;
    value_mode vm = f_value_mode(r, vdt);
    d.num_segments = f_range(r, 1, 5);
    d.max_seqlen = f_range(r, 0, 24);
    d.num_kv_heads = f_range(r, 1, 3);
    int32_t group = f_range(r, 1, 3);
    d.num_q_heads = wrap32((int64_t)group * d.num_kv_heads);
    d.head_size = f_pick(r, head_sizes, (int)(sizeof head_sizes / sizeof *head_sizes));
    uint8_t cb = u8(r);
    d.causal = cb < 0xE0 ? cb & 1 : special_i32(r, cb);
    float natural = d.head_size > 0 ? vm.natural_scale_factor / sqrtf((float)d.head_size) : 1.0f;
    d.softmax_scale = f_scale(r, natural);
    d.logit_softcap = f_softcap(r);
    uint8_t sb = u8(r);
    d.use_sinks = sb < 0xA0 ? 0 : sb < 0xE0 ? 1 : special_i32(r, sb);

    int64_t D = d.head_size, hq = d.num_q_heads, hkv = d.num_kv_heads;
    bool fused = u8(r) & 1;
    int64_t fused_row = wmul(hq + 2 * hkv, D);
    d.q_head_stride = f_stride(r, D);
    d.q_token_stride = f_stride(r, fused ? fused_row : wmul(hq, D));
    d.k_head_stride = f_stride(r, D);
    d.k_token_stride = f_stride(r, fused ? fused_row : wmul(hkv, D));
    d.v_head_stride = f_stride(r, D);
    d.v_token_stride = f_stride(r, fused ? fused_row : wmul(hkv, D));
    d.o_head_stride = f_stride(r, D);
    d.o_token_stride = f_stride(r, wmul(hq, D));

    int32_t nseg_meta = d.num_segments >= 1 && d.num_segments <= MAX_META_ENTRIES ? d.num_segments : 0;
    int32_t lens[MAX_DECODED_SEQS] = {0};
    int64_t total = 0;
    for (int32_t s = 0; s < nseg_meta && s < MAX_DECODED_SEQS; ++s) {
        int32_t maxl = d.max_seqlen < 0 ? 0 : d.max_seqlen > 24 ? 24 : d.max_seqlen;
        lens[s] = u8(r) % (maxl + 1);
        total += lens[s];
    }
    uint8_t tb = u8(r);
    d.num_tokens = tb < 0xE0 ? wrap32(total) : special_i32(r, tb);
    describe_varlen(&d, fused);

    uint8_t pf = u8(r);
    r35a_context *plan_ctx = pf == 0xFF ? NULL : g_ctx;
    const r35a_varlen_attention_desc *plan_desc = pf == 0xFE ? NULL : &d;
    bool null_out = pf == 0xFD;
    rel_expect e;
    rel_expect_init(&e);
    if (null_out)
        rel_expect_add(&e, R35A_ERR_NULL_POINTER, "plan", NULL, NULL);
    if (!plan_ctx)
        rel_expect_add(&e, R35A_ERR_NULL_POINTER, "context", NULL, NULL);
    rel_expect_varlen_desc(plan_desc, &e);
    r35a_plan *plan = (r35a_plan *)(uintptr_t)0x1;
    r35a_status st = r35a_varlen_attention_plan(plan_ctx, plan_desc, null_out ? NULL : &plan);
    check_status("r35a_varlen_attention_plan", &e, st);
    rel_fuzz_counts[st == R35A_OK ? C_PLAN_OK : C_PLAN_REJECTED]++;
    if (st != R35A_OK) {
        if (!null_out && plan != NULL)
            fail("r35a_varlen_attention_plan", "*plan is not NULL after a failure");
        return;
    }
    check_plan_info(plan, "r35a_plan_get_info (varlen)");
    r35a_varlen_attention_desc meant_tmp;
    const bool sinks_on = rel_varlen_desc_meant(&d, &meant_tmp)->use_sinks == 1;

    rel_varlen_extents x;
    rel_varlen_extents_of(&d, &x);
    size_t es = rel_dtype_size(d.dtype);
    /* fused: one buffer holds Q at 0, K at hq*D and V at (hq+hkv)*D */
    __int128 k_off = fused ? (__int128)hq * D : 0, v_off = fused ? (__int128)(hq + hkv) * D : 0;
    __int128 qkv = x.q;
    if (fused) {
        if (x.k + k_off > qkv)
            qkv = x.k + k_off;
        if (x.v + v_off > qkv)
            qkv = x.v + v_off;
    }
    if (!small_extent(qkv) || !small_extent(x.k) || !small_extent(x.v) || !small_extent(x.o) || nseg_meta == 0 ||
        d.num_q_heads > MAX_META_ENTRIES) {   /* as the paged case: the sinks array is num_q_heads long */
        r35a_plan_destroy(plan);
        rel_fuzz_counts[C_TOO_BIG]++;
        return;
    }
    size_t nq = (size_t)x.q, nk = (size_t)x.k, nv = (size_t)x.v, no = (size_t)x.o, nqkv = (size_t)qkv;
    int32_t *cu = alloc_exact(sizeof(int32_t) * ((size_t)d.num_segments + 1));
    cu[0] = 0;
    for (int32_t s = 0; s < d.num_segments; ++s)
        cu[s + 1] = wrap32((int64_t)cu[s] + (s < MAX_DECODED_SEQS ? lens[s] : 0));
    uint8_t mf = u8(r), mk = u8(r);
    int32_t fs = mk % d.num_segments;
    if (mf >= 0xD8) {
        switch ((mf - 0xD8) % 6) {
        case 0: cu[0] = -1; break;
        case 1: cu[fs + 1] = cu[fs] - 1; break;
        case 2: cu[fs + 1] = wrap32((int64_t)cu[fs] + d.max_seqlen + 1); break;
        case 3: cu[d.num_segments] = wrap32((int64_t)cu[d.num_segments] + 1); break;
        case 4: cu[fs + 1] = INT32_MIN; break;
        default: cu[0] = 1; break;
        }
        append_case(" meta-fault=%lld@%lld", (mf - 0xD8) % 6, fs);
    }

    void *qbuf = alloc_exact((fused ? nqkv : nq) * es);
    void *kbuf = fused ? NULL : alloc_exact(nk * es), *vbuf = fused ? NULL : alloc_exact(nv * es);
    void *out = alloc_exact(no * es);
    r35a_varlen_attention_args a;
    memset(&a, 0, sizeof a);
    a.struct_size = sizeof a;
    a.q = qbuf;
    a.k = fused ? (const uint8_t *)qbuf + (size_t)k_off * es : kbuf;
    a.v = fused ? (const uint8_t *)qbuf + (size_t)v_off * es : vbuf;
    a.out = out;
    a.cu_seqlens = cu;
    float *sinks = sinks_on ? make_sinks(g, d.num_q_heads) : NULL;
    a.sinks = sinks;

    uint8_t which;
    run_fault rf = f_run_fault(r, &which);
    r35a_context *run_ctx = g_ctx;
    const r35a_plan *run_plan = plan;
    const r35a_varlen_attention_args *run_args = &a;
    r35a_varlen_attention_args bad = a;
    rel_expect_init(&e);
    switch (rf) {
    case RF_NONE: break;
    case RF_NULL_CONTEXT:
        run_ctx = NULL;
        rel_expect_add(&e, R35A_ERR_NULL_POINTER, "context", NULL, NULL);
        break;
    case RF_NULL_PLAN:
        run_plan = NULL;
        rel_expect_add(&e, R35A_ERR_NULL_POINTER, "plan", NULL, NULL);
        break;
    case RF_OTHER_CONTEXT:
        run_ctx = g_other_ctx;
        rel_expect_add(&e, R35A_ERR_PLAN_MISMATCH, "plan", NULL, NULL);
        break;
    case RF_OTHER_OP:
        run_plan = g_paged_plan;
        rel_expect_add(&e, R35A_ERR_PLAN_MISMATCH, "plan", NULL, NULL);
        break;
    case RF_NULL_ARGS: run_args = NULL; break;
    case RF_ARGS_STRUCT_SIZE: /* 0.1.0's size is valid: then sinks is NULL by default */
        bad.struct_size = f_struct_size(r, sizeof bad, REL_VARLEN_ARGS_SIZE_0_1);
        if (bad.struct_size == sizeof bad)
            bad.struct_size = sizeof bad + 8;
        run_args = &bad;
        break;
    case RF_SINKS_TOGGLE:
    case RF_SCALES_TOGGLE:
        bad.sinks = bad.sinks ? NULL : g_unread_floats;
        run_args = &bad;
        break;
    case RF_NULL_POINTER:
    case RF_ALIBI_TOGGLE: {
        const void **slots[6] = {&bad.q, &bad.k, &bad.v, (const void **)&bad.out, (const void **)&bad.cu_seqlens,
                                 (const void **)&bad.sinks};
        *slots[which % 6] = NULL;
        run_args = &bad;
        break;
    }
    }
    if (rf != RF_NONE)
        append_case(" run-fault=%lld/%lld", rf, which);
    rel_expect_varlen_args(&d, run_args, &e);
    r35a_varlen_attention_args run_meant_tmp;
    const r35a_varlen_attention_args *run_meant = rel_varlen_args_meant(run_args, &run_meant_tmp);
    if (run_meant && run_meant->cu_seqlens)
        rel_expect_varlen_data(&d, &a, &e);

    bool data_valid = e.count == 0;
    int64_t max_keys = 0;
    if (data_valid && varlen_work(&d, cu, &max_keys) > MAX_WORK) {
        r35a_plan_destroy(plan);
        rel_fuzz_counts[C_TOO_BIG]++;
        goto done;
    }
    {
        size_t nbig = fused ? nqkv : (nq > nk ? (nq > nv ? nq : nv) : (nk > nv ? nk : nv));
        uint8_t *reached = calloc(nbig ? nbig : 1, 1);
        /* fused: one pass marks Q, K and V rows of the one buffer (K and V get Q's amplitude) */
        struct {
            void *buf;
            size_t n;
            int64_t base, ts, hs, heads;
            double amp, off;
        } t[3] = {{qbuf, fused ? nqkv : nq, 0, d.q_token_stride, d.q_head_stride, hq, vm.qk_amp, 0.0},
                  {kbuf, nk, (int64_t)k_off, d.k_token_stride, d.k_head_stride, hkv, vm.qk_amp, 0.0},
                  {vbuf, nv, (int64_t)v_off, d.v_token_stride, d.v_head_stride, hkv, 1.0, vm.v_offset}};
        if (fused) {
            memset(reached, data_valid ? 0 : 1, nqkv);
            for (int i = 0; data_valid && i < 3; ++i)
                for (int64_t tok = 0; tok < d.num_tokens; ++tok)
                    for (int64_t h = 0; h < t[i].heads; ++h)
                        mark_vector(reached, t[i].base + tok * t[i].ts + h * t[i].hs, d.head_size);
            rel_fill_tensor(d.dtype, qbuf, nqkv, reached, vm.qk_amp, 0.0, &g->s);
        } else {
            for (int i = 0; i < 3; ++i) {
                memset(reached, data_valid ? 0 : 1, t[i].n);
                for (int64_t tok = 0; data_valid && tok < d.num_tokens; ++tok)
                    for (int64_t h = 0; h < t[i].heads; ++h)
                        mark_vector(reached, tok * t[i].ts + h * t[i].hs, d.head_size);
                rel_fill_tensor(d.dtype, t[i].buf, t[i].n, reached, t[i].amp, t[i].off, &g->s);
            }
        }
        free(reached);
    }

    guarded_ws ws;
    workspace_decode(r, &ws);
    memset(out, 0xFF, no * es);
    size_t in_bytes_q = (fused ? nqkv : nq) * es;
    uint64_t in_hash = rel_hash(qbuf, in_bytes_q, 1);
    if (!fused) {
        in_hash = rel_hash(kbuf, nk * es, in_hash);
        in_hash = rel_hash(vbuf, nv * es, in_hash);
    }
    in_hash = rel_hash(cu, sizeof(int32_t) * ((size_t)d.num_segments + 1), in_hash);
    st = r35a_varlen_attention_run(run_ctx, run_plan, run_args, ws.null ? NULL : ws.g.payload, ws.bytes_arg, NULL);
    check_status("r35a_varlen_attention_run", &e, st);
    uint64_t in_hash_after = rel_hash(qbuf, in_bytes_q, 1);
    if (!fused) {
        in_hash_after = rel_hash(kbuf, nk * es, in_hash_after);
        in_hash_after = rel_hash(vbuf, nv * es, in_hash_after);
    }
    in_hash_after = rel_hash(cu, sizeof(int32_t) * ((size_t)d.num_segments + 1), in_hash_after);
    if (in_hash != in_hash_after)
        fail("r35a_varlen_attention_run", "an input buffer was modified");
    workspace_check(&ws, 0, "r35a_varlen_attention_run");
    rel_fuzz_counts[st == R35A_OK ? C_RUN_COMPARED : C_RUN_REJECTED]++;
    if (st != R35A_OK) {
        check_untouched(out, no * es, 0xFF, "r35a_varlen_attention_run");
    } else {
        size_t nref = (size_t)d.num_tokens * (size_t)d.num_q_heads * (size_t)d.head_size;
        double *ref = malloc(sizeof(double) * (nref ? nref : 1));
        if (rel_oracle_varlen(&d, &a, ref) != 0)
            fail("oracle", "the oracle rejects a call the library accepted");
        double qmax = rel_max_abs_rows(d.dtype, a.q, d.num_tokens, d.num_q_heads, d.head_size, d.q_token_stride,
                                       d.q_head_stride);
        double bound = (double)d.softmax_scale * d.head_size * qmax * vm.qk_amp;
        if (d.logit_softcap > 0.0f && bound > d.logit_softcap)
            bound = d.logit_softcap;
        double extra = rel_extra_abs_tolerance(d.head_size, bound, max_keys + (sinks ? 1 : 0), 1.0 + fabs(vm.v_offset));
        rel_compare c;
        if (!rel_compare_rows(d.dtype, out, no * es, d.num_tokens, d.num_q_heads, d.head_size, d.o_token_stride,
                              d.o_head_stride, ref, rel_tolerance(d.dtype), extra, &c)) {
            char why[1024];
            snprintf(why, sizeof why,
                     "output differs from the oracle: err %.3e tol %.3e max|ref| %.3e; %zu above tol, %zu "
                     "NaN/Inf, %zu unwritten, %zu bytes outside; %s",
                     c.err_max, c.tol_abs, c.ref_max, c.bad, c.nonfinite, c.unwritten, c.outside, c.first);
            fail("r35a_varlen_attention_run", why);
        }
        if (which & 0x40) {
            void *again = alloc_exact(no * es);
            memcpy(again, out, no * es);
            memset(out, 0xFF, no * es);
            if (r35a_varlen_attention_run(run_ctx, run_plan, run_args, NULL, 0, NULL) != R35A_OK ||
                memcmp(again, out, no * es) != 0)
                fail("r35a_varlen_attention_run", "a repeated run is not bit-identical");
            free(again);
        }
        free(ref);
    }
    rel_guarded_free(&ws.g);
    r35a_plan_destroy(plan);
done:
    free(qbuf);
    free(kbuf);
    free(vbuf);
    free(out);
    free(cu);
    free(sinks);
}

/* ------------------------------------------------------------------------------------------ */
/* the rest of the API surface: contexts, infos, status strings                                 */

static void fuzz_misc(reader *r)
{
    snprintf(g_case, sizeof g_case, "misc");
    rel_fuzz_counts[C_MISC]++;
    r35a_context_options opt;
    r35a_context_options_init(&opt);
    opt.struct_size = f_struct_size(r, sizeof opt, sizeof opt);
    uint8_t bb = u8(r);
    opt.backend = bb < 0xE0 ? (r35a_backend)(bb % 3) : (r35a_backend)special_i32(r, bb);
    opt.device_index = f_range(r, 0, 2);
    uint8_t flags = u8(r);
    snprintf(g_case, sizeof g_case, "misc options ss=%zu backend=%d device=%d flags=%d", opt.struct_size,
             (int)opt.backend, (int)opt.device_index, (int)flags);

    rel_expect e;
    rel_expect_init(&e);
    const r35a_context_options *popt = (flags & 1) ? NULL : &opt;
    if (!popt) {
        /* NULL options mean the defaults: AUTO, device 0 */
    } else if (opt.struct_size != sizeof opt) {
        rel_expect_add(&e, R35A_ERR_STRUCT_SIZE, "context_options.struct_size", NULL, NULL);
    } else {
        if (opt.backend != R35A_BACKEND_AUTO && opt.backend != R35A_BACKEND_GPU && opt.backend != R35A_BACKEND_REFERENCE)
            rel_expect_add(&e, R35A_ERR_INVALID_ARGUMENT, "context_options.backend", NULL, NULL);
        if (opt.device_index < 0)
            rel_expect_add(&e, R35A_ERR_INVALID_ARGUMENT, "context_options.device_index", NULL, NULL);
    }
    r35a_context *ctx = (r35a_context *)(uintptr_t)0x1;
    r35a_status st = r35a_context_create(popt, (flags & 2) ? NULL : &ctx);
    if (flags & 2) {
        if (st != R35A_ERR_NULL_POINTER || strncmp(r35a_last_error_detail(), "context", 7) != 0)
            fail("r35a_context_create", "a NULL output pointer is not R35A_ERR_NULL_POINTER naming context");
        return;
    }
    bool gpu_asked = popt && e.count == 0 && opt.backend == R35A_BACKEND_GPU;
    if (gpu_asked && st != R35A_OK) {
        /* no GPU on this machine: the one other documented answer */
        if (st != R35A_ERR_BACKEND_UNAVAILABLE || r35a_last_error_detail()[0] == '\0')
            fail("r35a_context_create", "a GPU request failed with something other than BACKEND_UNAVAILABLE");
    } else {
        check_status("r35a_context_create", &e, st);
    }
    if (st != R35A_OK) {
        if (ctx != NULL)
            fail("r35a_context_create", "*context is not NULL after a failure");
        return;
    }
    r35a_context_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = f_struct_size(r, sizeof info, sizeof info);
    st = r35a_context_get_info((flags & 4) ? NULL : ctx, &info);
    bool info_ok = !(flags & 4) && info.struct_size == sizeof info;
    if ((st == R35A_OK) != info_ok || (st != R35A_OK && r35a_last_error_detail()[0] == '\0'))
        fail("r35a_context_get_info", "wrong status");
    if (st == R35A_OK && (info.backend_name[sizeof info.backend_name - 1] != '\0' ||
                          info.arch[sizeof info.arch - 1] != '\0' || info.reason[sizeof info.reason - 1] != '\0'))
        fail("r35a_context_get_info", "an info string is not terminated");

    r35a_plan_info pinfo;
    memset(&pinfo, 0, sizeof pinfo);
    pinfo.struct_size = f_struct_size(r, sizeof pinfo, sizeof pinfo);
    st = r35a_plan_get_info((flags & 8) ? NULL : g_paged_plan, &pinfo);
    bool pinfo_ok = !(flags & 8) && pinfo.struct_size == sizeof pinfo;
    if ((st == R35A_OK) != pinfo_ok || (st != R35A_OK && r35a_last_error_detail()[0] == '\0'))
        fail("r35a_plan_get_info", "wrong status");

    if (flags & 16) {
        if (r35a_context_get_info(ctx, NULL) != R35A_ERR_NULL_POINTER ||
            strncmp(r35a_last_error_detail(), "info", 4) != 0)
            fail("r35a_context_get_info", "a NULL info is not R35A_ERR_NULL_POINTER naming info");
        if (r35a_plan_get_info(g_varlen_plan, NULL) != R35A_ERR_NULL_POINTER ||
            strncmp(r35a_last_error_detail(), "info", 4) != 0)
            fail("r35a_plan_get_info", "a NULL info is not R35A_ERR_NULL_POINTER naming info");
    }
    if (r35a_version_number() != R35A_VERSION_NUMBER || !r35a_version_string() ||
        strchr(r35a_version_string(), '.') == NULL)
        fail("r35a_version", "the run-time version disagrees with the header");

    int32_t code = f_range(r, 0, 13);
    const char *name = r35a_status_string((r35a_status)code);
    if (!name || strncmp(name, "R35A_", 5) != 0)
        fail("r35a_status_string", "no name");
    if (code >= 0 && code <= 13 && strcmp(name, "R35A_ERR_UNKNOWN_STATUS") == 0)
        fail("r35a_status_string", "a pinned status has no name");
    r35a_context_destroy(ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_ctx)
        LLVMFuzzerInitialize(NULL, NULL);
    reader r = {data, size};
    uint8_t op = u8(&r);
    rng g = {u32(&r)};
    switch (op % 8) {
    case 0:
    case 1:
    case 2:
    case 3: fuzz_paged(&r, &g); break;
    case 4:
    case 5:
    case 6: fuzz_varlen(&r, &g); break;
    default: fuzz_misc(&r); break;
    }
    return 0;
}
