/* problem.c - one bench row's problem: random inputs, shuffled block tables, the bytes-moved
 * model, and the calls into the library. */
#define _POSIX_C_SOURCE 200809L

#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PAGED_Q, PAGED_K, PAGED_V, PAGED_OUT, PAGED_SEQ_LENS, PAGED_QUERY_START, PAGED_BLOCK_TABLE,
       PAGED_ALIBI, PAGED_SINKS, PAGED_K_SCALE, PAGED_V_SCALE, PAGED_LSE, PAGED_NUM_BUFFERS };
enum { VARLEN_Q, VARLEN_K, VARLEN_V, VARLEN_OUT, VARLEN_CU_SEQLENS, VARLEN_SINKS, VARLEN_LSE, VARLEN_NUM_BUFFERS };
/* The optional buffers (ALiBi, sinks, scales, the LSE output) are 0 bytes when the problem has no
 * such feature. */

/* Buffers start on this boundary inside a slab (the fast paths want 16-byte aligned rows; 256
 * keeps every buffer on its own cache lines). */
enum { SLAB_ALIGN = 256 };

/* ---- random numbers (splitmix64: tiny, and any seed gives a good stream) --------------------- */

static uint64_t rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static float rng_uniform(uint64_t *state)
{
    return (float)(rng_next(state) >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

/* Uniform in [0, n) for n < 2^32. */
static uint32_t rng_below(uint64_t *state, uint32_t n)
{
    return (uint32_t)(((rng_next(state) >> 32) * (uint64_t)n) >> 32);
}

/* ---- element types --------------------------------------------------------------------------- */

static size_t dtype_size(r35a_dtype dtype)
{
    return dtype == R35A_DTYPE_F32 ? 4 : dtype == R35A_DTYPE_FP8_E4M3 || dtype == R35A_DTYPE_INT8 ? 1 : 2;
}

static uint32_t float_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    return x;
}

static float bits_float(uint32_t x)
{
    float f;
    memcpy(&f, &x, sizeof(f));
    return f;
}

/* Rounds mantissa bits away below `shift`, to nearest even. */
static uint32_t round_shift_even(uint32_t value, uint32_t shift)
{
    uint32_t kept = value >> shift;
    uint32_t rest = value & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    return kept + (rest > half || (rest == half && (kept & 1u)));
}

static uint16_t f32_to_f16(float f)
{
    uint32_t x = float_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t exp = (x >> 23) & 0xffu;
    uint32_t mant = x & 0x7fffffu;
    if (exp == 0xffu)
        return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0u));
    int32_t e = (int32_t)exp - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {   /* binary16 subnormal or zero */
        if (e < -10)
            return (uint16_t)sign;
        return (uint16_t)(sign | round_shift_even(mant | 0x800000u, (uint32_t)(14 - e)));
    }
    /* A carry out of the mantissa correctly bumps the exponent (up to infinity). */
    return (uint16_t)(sign | round_shift_even(((uint32_t)e << 23) | mant, 13));
}

static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1fu)
        return bits_float(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
        float v = (float)mant * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

static uint16_t f32_to_bf16(float f)
{
    uint32_t x = float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static float bf16_to_f32(uint16_t h)
{
    return bits_float((uint32_t)h << 16);
}

static float load_element(const void *base, size_t i, r35a_dtype dtype)
{
    if (dtype == R35A_DTYPE_F32)
        return ((const float *)base)[i];
    uint16_t h = ((const uint16_t *)base)[i];
    return dtype == R35A_DTYPE_BF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

static void fill_random(void *dst, size_t count, r35a_dtype dtype, uint64_t *state)
{
    if (dtype == R35A_DTYPE_F32) {
        float *p = dst;
        for (size_t i = 0; i < count; i++)
            p[i] = rng_uniform(state);
        return;
    }
    uint16_t *p = dst;
    uint16_t (*convert)(float) = dtype == R35A_DTYPE_BF16 ? f32_to_bf16 : f32_to_f16;
    for (size_t i = 0; i < count; i++)
        p[i] = convert(rng_uniform(state));
}

/* ---- slab layout ----------------------------------------------------------------------------- */

/* out = a * b * c * d, false on size_t overflow. */
static bool mul4(size_t a, size_t b, size_t c, size_t d, size_t *out)
{
    size_t r = a;
    const size_t f[3] = {b, c, d};
    for (int i = 0; i < 3; i++) {
        if (f[i] != 0 && r > SIZE_MAX / f[i])
            return false;
        r *= f[i];
    }
    *out = r;
    return true;
}

/* Lays the buffers of p->size[] out in one slab and allocates its host copy. */
static int allocate_slab(bench_problem *p, char *why, size_t why_len)
{
    size_t at = 0;
    for (int i = 0; i < p->num_buffers; i++) {
        if (at > SIZE_MAX - p->size[i] - 2 * SLAB_ALIGN) {
            snprintf(why, why_len, "the problem's buffers do not fit in memory");
            return -1;
        }
        p->offset[i] = at;
        at = (at + p->size[i] + SLAB_ALIGN - 1) / SLAB_ALIGN * SLAB_ALIGN;
    }
    p->slab_bytes = at;
    p->host = malloc(at == 0 ? 1 : at);
    if (p->host == NULL) {
        snprintf(why, why_len, "cannot allocate %.1f MiB of host memory for the problem",
                 (double)at / (1 << 20));
        return -1;
    }
    return 0;
}

static void *host_buffer(const bench_problem *p, int index)
{
    return p->host + p->offset[index];
}

/* The output starts poisoned (all-ones bytes are NaN in f16, bf16 and f32), so a path that skips
 * a row shows up as a NaN error instead of a lucky match. */
static void poison_output(bench_problem *p)
{
    memset(host_buffer(p, p->out_buffer), 0xff, p->size[p->out_buffer]);
}

/* 8-bit KV elements: fp8 e4m3fn codes of magnitudes 2^-3 .. 30 (no NaN codes), or any int8. */
static void fill_random_kv8(void *dst, size_t count, r35a_dtype dtype, uint64_t *state)
{
    unsigned char *p = dst;
    for (size_t i = 0; i < count; i++) {
        uint32_t r = (uint32_t)rng_next(state);
        p[i] = dtype == R35A_DTYPE_INT8 ? (unsigned char)r
                                        : (unsigned char)((r & 0x80u) | ((4u + (r >> 8) % 7u) << 3) | (r & 7u));
    }
}

static void fill_floats(float *p, size_t count, float lo, float hi, uint64_t *state)
{
    for (size_t i = 0; i < count; i++)
        p[i] = lo + (hi - lo) * 0.5f * (rng_uniform(state) + 1.0f);
}

/* ---- paged decode ---------------------------------------------------------------------------- */

/* Bytes a paged call must move at least; every sequence has L = context and M query tokens.
 * Query rows i = 0..M-1 sit at p = L-M+i and see keys (p-W, p] (or [0, p] without a window), so
 * the keys reached are max(0, L-M-W+1) .. L-1; their pages' block-table entries are read. */
static void paged_traffic(const r35a_paged_attention_desc *d, int32_t context, double *bytes, double *flops)
{
    const double es = (double)dtype_size(d->dtype);
    const double kv_es = (double)dtype_size(d->kv_dtype ? d->kv_dtype : d->dtype);
    const int64_t L = context, M = d->max_query_len, B = d->page_size, W = d->window;
    int64_t first_key = 0;
    if (W > 0 && L - M - W + 1 > 0)
        first_key = L - M - W + 1;
    const int64_t keys = L - first_key;
    const int64_t pages = (L - 1) / B - first_key / B + 1;
    double kv = 2.0 * (double)keys * d->num_kv_heads * d->head_size * kv_es;
    double q_and_o = 2.0 * (double)M * d->num_q_heads * d->head_size * es;
    double metadata = 4.0 /* seq_lens[s] */ + 4.0 * (double)pages;
    if (d->kv_dtype && d->kv_scale_per_head == R35A_KV_SCALE_PER_TOKEN_HEAD)
        kv += 2.0 * (double)keys * d->num_kv_heads * sizeof(float);   /* each key's K and V scale */
    *bytes = d->num_seqs * (kv + q_and_o + metadata) + 4.0 * (d->num_seqs + 1) /* query_start_loc */;

    double pairs = 0.0;   /* (query row, key) pairs per sequence and head */
    for (int64_t i = 0; i < M; i++) {
        int64_t seen = L - M + i + 1;
        pairs += (double)(W > 0 && seen > W ? W : seen);
    }
    *flops = 4.0 * d->head_size * (double)d->num_q_heads * pairs * d->num_seqs;
}

/* Pages of all sequences in one shuffled order: sequence s gets perm[s*pps .. s*pps+pps-1]. */
static void fill_block_table(int32_t *table, int32_t num_pages, uint64_t *state)
{
    for (int32_t i = 0; i < num_pages; i++)
        table[i] = i;
    for (int32_t i = num_pages - 1; i > 0; i--) {
        int32_t j = (int32_t)rng_below(state, (uint32_t)i + 1u);
        int32_t t = table[i];
        table[i] = table[j];
        table[j] = t;
    }
}

static int paged_sizes(const bench_shape *sh, int32_t context, bench_problem *p, char *why, size_t why_len)
{
    const int64_t pages_per_seq = ((int64_t)context + sh->page_size - 1) / sh->page_size;
    const int64_t num_pages = pages_per_seq * sh->batch;
    const int64_t num_tokens = (int64_t)sh->batch * sh->query_len;
    const size_t es = dtype_size(sh->dtype), kv_es = dtype_size(sh->kv_dtype ? sh->kv_dtype : sh->dtype);
    if (sh->kv_scales != R35A_KV_SCALE_PER_TENSOR && !sh->kv_dtype) {
        snprintf(why, why_len, "--kv-scales other than tensor needs an 8-bit --kv-dtype");
        return -1;
    }
    if (num_pages > INT32_MAX || num_tokens > INT32_MAX) {
        snprintf(why, why_len, "context %d x batch %d needs more than 2^31 pages or tokens",
                 (int)context, (int)sh->batch);
        return -1;
    }
    r35a_paged_attention_desc *d = &p->desc.paged;
    r35a_paged_attention_desc_init(d, sh->dtype, sh->batch, (int32_t)num_tokens, sh->query_len,
                                   context, sh->num_q_heads, sh->num_kv_heads, sh->head_size,
                                   sh->page_size, (int32_t)num_pages);
    d->window = sh->window;
    d->kv_dtype = sh->kv_dtype;
    d->kv_scale_per_head = sh->kv_scales;   /* per token: desc_init's contiguous scale strides */
    d->use_alibi = sh->alibi;
    d->use_sinks = sh->sinks;
    d->use_lse = sh->lse;
    d->logit_softcap = (float)sh->softcap;
    p->num_buffers = PAGED_NUM_BUFFERS;
    p->out_buffer = PAGED_OUT;
    bool ok = mul4((size_t)num_tokens, (size_t)sh->num_q_heads, (size_t)sh->head_size, es, &p->size[PAGED_Q]) &&
              mul4((size_t)num_pages, (size_t)sh->num_kv_heads, (size_t)sh->page_size,
                   (size_t)sh->head_size * kv_es, &p->size[PAGED_K]);
    if (!ok) {
        snprintf(why, why_len, "the problem's buffers do not fit in memory");
        return -1;
    }
    p->size[PAGED_V] = p->size[PAGED_K];
    p->size[PAGED_OUT] = p->size[PAGED_Q];
    p->size[PAGED_SEQ_LENS] = sizeof(int32_t) * (size_t)sh->batch;
    p->size[PAGED_QUERY_START] = sizeof(int32_t) * ((size_t)sh->batch + 1);
    p->size[PAGED_BLOCK_TABLE] = sizeof(int32_t) * (size_t)num_pages;
    p->size[PAGED_ALIBI] = sh->alibi ? sizeof(float) * (size_t)sh->num_q_heads : 0;
    p->size[PAGED_SINKS] = sh->sinks ? sizeof(float) * (size_t)sh->num_q_heads : 0;
    size_t scales = sh->kv_scales == R35A_KV_SCALE_PER_TOKEN_HEAD ? (size_t)num_pages * (size_t)sh->page_size *
                                                                        (size_t)sh->num_kv_heads
                    : sh->kv_scales == R35A_KV_SCALE_PER_KV_HEAD ? (size_t)sh->num_kv_heads : 1;
    p->size[PAGED_K_SCALE] = p->size[PAGED_V_SCALE] = sh->kv_dtype ? sizeof(float) * scales : 0;
    p->size[PAGED_LSE] = sh->lse ? sizeof(float) * (size_t)num_tokens * (size_t)sh->num_q_heads : 0;
    return 0;
}

static void paged_fill(const bench_shape *sh, int32_t context, bench_problem *p, uint64_t *rng)
{
    const r35a_paged_attention_desc *d = &p->desc.paged;
    const size_t es = dtype_size(d->dtype);
    fill_random(host_buffer(p, PAGED_Q), p->size[PAGED_Q] / es, d->dtype, rng);
    if (d->kv_dtype) {   /* 8-bit: stored values of a few units, scaled back to about [-1, 1] */
        fill_random_kv8(host_buffer(p, PAGED_K), p->size[PAGED_K], d->kv_dtype, rng);
        fill_random_kv8(host_buffer(p, PAGED_V), p->size[PAGED_V], d->kv_dtype, rng);
        /* every scale near the per-tensor one (within 2x), so all granularities do the same work */
        const float scale = d->kv_dtype == R35A_DTYPE_INT8 ? 1.0f / 128.0f : 0.125f;
        const size_t n = p->size[PAGED_K_SCALE] / sizeof(float);
        fill_floats(host_buffer(p, PAGED_K_SCALE), n, 0.5f * scale, 2.0f * scale, rng);
        fill_floats(host_buffer(p, PAGED_V_SCALE), n, 0.5f * scale, 2.0f * scale, rng);
    } else {
        fill_random(host_buffer(p, PAGED_K), p->size[PAGED_K] / es, d->dtype, rng);
        fill_random(host_buffer(p, PAGED_V), p->size[PAGED_V] / es, d->dtype, rng);
    }
    float *slopes = host_buffer(p, PAGED_ALIBI);
    for (int32_t h = 0; d->use_alibi && h < d->num_q_heads; h++)
        slopes[h] = powf(2.0f, -8.0f * (float)(h + 1) / (float)d->num_q_heads);
    if (d->use_sinks)
        fill_floats(host_buffer(p, PAGED_SINKS), (size_t)d->num_q_heads, -2.0f, 2.0f, rng);
    int32_t *seq_lens = host_buffer(p, PAGED_SEQ_LENS);
    int32_t *query_start = host_buffer(p, PAGED_QUERY_START);
    for (int32_t s = 0; s < sh->batch; s++) {
        seq_lens[s] = context;
        query_start[s] = s * sh->query_len;
    }
    query_start[sh->batch] = d->num_tokens;
    /* block_table_stride == pages per sequence, so the whole table is one permutation. */
    fill_block_table(host_buffer(p, PAGED_BLOCK_TABLE), d->num_pages, rng);
    poison_output(p);
}

static int build_paged(const bench_shape *shape, uint64_t *rng, bench_problem *p, char *why, size_t why_len)
{
    const int32_t context = shape->context;
    p->op = BENCH_OP_PAGED;
    p->dtype = shape->dtype;
    if (paged_sizes(shape, context, p, why, why_len) != 0 || allocate_slab(p, why, why_len) != 0)
        return -1;
    paged_fill(shape, context, p, rng);
    paged_traffic(&p->desc.paged, context, &p->bytes_moved, &p->flops);
    p->bytes_moved += (double)p->size[PAGED_LSE];   /* the LSE written */
    return 0;
}

/* ---- varlen encoder -------------------------------------------------------------------------- */

static void varlen_traffic(const r35a_varlen_attention_desc *d, const int32_t *lens, double *bytes,
                           double *flops)
{
    const double es = (double)dtype_size(d->dtype);
    const double row_bytes = (2.0 * d->num_q_heads + 2.0 * d->num_kv_heads) * d->head_size * es;
    *bytes = (double)d->num_tokens * row_bytes + 4.0 * (d->num_segments + 1);
    double pairs = 0.0;
    for (int32_t s = 0; s < d->num_segments; s++) {
        double n = lens[s];
        pairs += d->causal ? n * (n + 1.0) / 2.0 : n * n;
    }
    *flops = 4.0 * d->head_size * (double)d->num_q_heads * pairs;
}

static int varlen_sizes(const bench_shape *sh, const int32_t *lens, int count, bench_problem *p,
                        char *why, size_t why_len)
{
    int32_t tokens = 0, max_len = 0;
    for (int i = 0; i < count; i++) {
        tokens += lens[i];   /* options.c bounds a row's tokens */
        max_len = lens[i] > max_len ? lens[i] : max_len;
    }
    r35a_varlen_attention_desc *d = &p->desc.varlen;
    r35a_varlen_attention_desc_init(d, sh->dtype, count, tokens, max_len, sh->num_q_heads,
                                    sh->num_kv_heads, sh->head_size);
    d->causal = sh->causal ? 1 : 0;
    d->use_sinks = sh->sinks;
    d->use_lse = sh->lse;
    d->logit_softcap = (float)sh->softcap;
    const size_t es = dtype_size(sh->dtype);
    p->num_buffers = VARLEN_NUM_BUFFERS;
    p->out_buffer = VARLEN_OUT;
    p->tokens = tokens;
    bool ok = mul4((size_t)tokens, (size_t)sh->num_q_heads, (size_t)sh->head_size, es, &p->size[VARLEN_Q]) &&
              mul4((size_t)tokens, (size_t)sh->num_kv_heads, (size_t)sh->head_size, es, &p->size[VARLEN_K]);
    if (!ok) {
        snprintf(why, why_len, "the problem's buffers do not fit in memory");
        return -1;
    }
    p->size[VARLEN_V] = p->size[VARLEN_K];
    p->size[VARLEN_OUT] = p->size[VARLEN_Q];
    p->size[VARLEN_CU_SEQLENS] = sizeof(int32_t) * ((size_t)count + 1);
    p->size[VARLEN_SINKS] = sh->sinks ? sizeof(float) * (size_t)sh->num_q_heads : 0;
    p->size[VARLEN_LSE] = sh->lse ? sizeof(float) * (size_t)tokens * (size_t)sh->num_q_heads : 0;
    return 0;
}

static void varlen_fill(const int32_t *lens, int count, bench_problem *p, uint64_t *rng)
{
    const r35a_varlen_attention_desc *d = &p->desc.varlen;
    const size_t es = dtype_size(d->dtype);
    fill_random(host_buffer(p, VARLEN_Q), p->size[VARLEN_Q] / es, d->dtype, rng);
    fill_random(host_buffer(p, VARLEN_K), p->size[VARLEN_K] / es, d->dtype, rng);
    fill_random(host_buffer(p, VARLEN_V), p->size[VARLEN_V] / es, d->dtype, rng);
    int32_t *cu = host_buffer(p, VARLEN_CU_SEQLENS);
    cu[0] = 0;
    for (int i = 0; i < count; i++)
        cu[i + 1] = cu[i] + lens[i];
    if (d->use_sinks)
        fill_floats(host_buffer(p, VARLEN_SINKS), (size_t)d->num_q_heads, -2.0f, 2.0f, rng);
    poison_output(p);
}

static int build_varlen(const bench_options *opt, const bench_shape *shape, uint64_t *rng, bench_problem *p,
                        char *why, size_t why_len)
{
    const int32_t *lens = opt->segment_lens + shape->segment_first;
    const int count = shape->num_segments;
    p->op = BENCH_OP_ENCODER;
    p->dtype = shape->dtype;
    if (varlen_sizes(shape, lens, count, p, why, why_len) != 0 || allocate_slab(p, why, why_len) != 0)
        return -1;
    varlen_fill(lens, count, p, rng);
    varlen_traffic(&p->desc.varlen, lens, &p->bytes_moved, &p->flops);
    p->bytes_moved += (double)p->size[VARLEN_LSE];
    return 0;
}

/* ---- public to the bench --------------------------------------------------------------------- */

int bench_problem_build(const bench_options *opt, const bench_shape *shape, uint64_t seed, bench_problem *problem,
                        char *why, size_t why_len)
{
    memset(problem, 0, sizeof(*problem));
    uint64_t rng = seed;
    if (shape->op == BENCH_OP_PAGED)
        return build_paged(shape, &rng, problem, why, why_len);
    return build_varlen(opt, shape, &rng, problem, why, why_len);
}

void bench_problem_free(bench_problem *problem)
{
    free(problem->host);
    problem->host = NULL;
}

r35a_status bench_problem_plan(r35a_context *context, const bench_problem *problem, r35a_plan **plan)
{
    if (problem->op == BENCH_OP_PAGED)
        return r35a_paged_attention_plan(context, &problem->desc.paged, plan);
    return r35a_varlen_attention_plan(context, &problem->desc.varlen, plan);
}

r35a_status bench_problem_run(r35a_context *context, const r35a_plan *plan,
                              const bench_problem *problem, void *slab, void *out, void *workspace,
                              size_t workspace_bytes, void *stream)
{
    unsigned char *base = slab;
    const size_t *at = problem->offset;
    if (out == NULL)
        out = base + at[problem->out_buffer];
    if (problem->op == BENCH_OP_PAGED) {
        r35a_paged_attention_args a;
        memset(&a, 0, sizeof(a));
        a.struct_size = sizeof(a);
        a.q = base + at[PAGED_Q];
        a.k_cache = base + at[PAGED_K];
        a.v_cache = base + at[PAGED_V];
        a.out = out;
        a.seq_lens = (const int32_t *)(const void *)(base + at[PAGED_SEQ_LENS]);
        a.query_start_loc = (const int32_t *)(const void *)(base + at[PAGED_QUERY_START]);
        a.block_table = (const int32_t *)(const void *)(base + at[PAGED_BLOCK_TABLE]);
        const r35a_paged_attention_desc *d = &problem->desc.paged;
        if (d->use_alibi)
            a.alibi_slopes = (const float *)(const void *)(base + at[PAGED_ALIBI]);
        if (d->use_sinks)
            a.sinks = (const float *)(const void *)(base + at[PAGED_SINKS]);
        if (d->kv_dtype) {
            a.k_scale = (const float *)(const void *)(base + at[PAGED_K_SCALE]);
            a.v_scale = (const float *)(const void *)(base + at[PAGED_V_SCALE]);
        }
        if (d->use_lse)
            a.lse = (float *)(void *)(base + at[PAGED_LSE]);
        return r35a_paged_attention_run(context, plan, &a, workspace, workspace_bytes, stream);
    }
    r35a_varlen_attention_args a;
    memset(&a, 0, sizeof(a));
    a.struct_size = sizeof(a);
    a.q = base + at[VARLEN_Q];
    a.k = base + at[VARLEN_K];
    a.v = base + at[VARLEN_V];
    a.out = out;
    a.cu_seqlens = (const int32_t *)(const void *)(base + at[VARLEN_CU_SEQLENS]);
    if (problem->desc.varlen.use_sinks)
        a.sinks = (const float *)(const void *)(base + at[VARLEN_SINKS]);
    if (problem->desc.varlen.use_lse)
        a.lse = (float *)(void *)(base + at[VARLEN_LSE]);
    return r35a_varlen_attention_run(context, plan, &a, workspace, workspace_bytes, stream);
}

double bench_max_rel_error(const bench_problem *problem, const void *out, const void *ref)
{
    const r35a_dtype dtype = problem->dtype;
    const size_t count = problem->size[problem->out_buffer] / dtype_size(dtype);
    double max_diff = 0.0, max_ref = 0.0;
    for (size_t i = 0; i < count; i++) {
        double o = load_element(out, i, dtype), r = load_element(ref, i, dtype);
        if (isnan(o) || isnan(r))
            return NAN;
        max_diff = fmax(max_diff, fabs(o - r));
        max_ref = fmax(max_ref, fabs(r));
    }
    return max_ref > 0.0 ? max_diff / max_ref : max_diff;
}

double bench_error_tolerance(r35a_dtype dtype)
{
    switch (dtype) {
    case R35A_DTYPE_F16: return 4.0 / 1024.0;   /* 4 ulp at 1.0: 10 mantissa bits */
    case R35A_DTYPE_BF16: return 4.0 / 128.0;   /* 7 mantissa bits */
    case R35A_DTYPE_F32: return 1e-4;
    case R35A_DTYPE_FP8_E4M3: return 4.0 / 8.0;   /* 3 mantissa bits (KV only: never an output here) */
    case R35A_DTYPE_INT8: return 4.0 / 127.0;
    }
    return 0.0;
}
