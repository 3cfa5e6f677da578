/* oracle.c - see oracle.h. */
#include "oracle.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The oracle's own element decoding (deliberately not test_util's, so the two check each other).
 * f16 and bf16 go through 65536-entry tables so the oracle stays fast enough for big sweeps. */
static double decode_f16(uint16_t h)
{
    int exponent = (h >> 10) & 0x1F;
    int mantissa = h & 0x3FF;
    double magnitude;
    if (exponent == 0) {
        magnitude = ldexp((double)mantissa, -24);
    } else if (exponent == 31) {
        magnitude = mantissa ? NAN : INFINITY;
    } else {
        magnitude = ldexp(1.0 + mantissa / 1024.0, exponent - 15);
    }
    return (h & 0x8000) ? -magnitude : magnitude;
}

static double decode_bf16(uint16_t h)
{
    /* bf16 is the top half of an fp32 */
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return (double)f;
}

/* OCP float8_e4m3fn from its definition: (-1)^S x 2^(E-7) x 1.MMM, subnormals 2^-6 x 0.MMM, the
 * all-ones pattern S.1111.111 NaN, no infinities. */
static double decode_fp8_e4m3(uint8_t b)
{
    const int sign = b >> 7, exponent = (b >> 3) & 0xF, mantissa = b & 7;
    double magnitude;
    if (exponent == 0xF && mantissa == 7) {
        magnitude = NAN;
    } else if (exponent == 0) {
        magnitude = pow(2.0, -6.0) * (mantissa / 8.0);
    } else {
        magnitude = pow(2.0, exponent - 7.0) * (1.0 + mantissa / 8.0);
    }
    return sign ? -magnitude : magnitude;
}

static double g_f16_table[65536];
static double g_bf16_table[65536];
static double g_fp8_table[256];
static int g_tables_ready;

static void init_tables(void)
{
    if (g_tables_ready) {
        return;
    }
    for (uint32_t b = 0; b < 65536u; ++b) {
        g_f16_table[b] = decode_f16((uint16_t)b);
        g_bf16_table[b] = decode_bf16((uint16_t)b);
    }
    for (uint32_t b = 0; b < 256u; ++b) {
        g_fp8_table[b] = decode_fp8_e4m3((uint8_t)b);
    }
    g_tables_ready = 1;
}

static double element(r35a_dtype dtype, const void *base, int64_t index)
{
    switch (dtype) {
    case R35A_DTYPE_F16: return g_f16_table[((const uint16_t *)base)[index]];
    case R35A_DTYPE_BF16: return g_bf16_table[((const uint16_t *)base)[index]];
    case R35A_DTYPE_F32: return (double)((const float *)base)[index];
    case R35A_DTYPE_FP8_E4M3: return g_fp8_table[((const uint8_t *)base)[index]];
    case R35A_DTYPE_INT8: return (double)((const int8_t *)base)[index];
    }
    return NAN;
}

/* Decodes n contiguous elements, each times scale; returns 0, or -1 if one is not finite. */
static int load_scaled(r35a_dtype dtype, const void *base, int64_t offset, int32_t n, double scale, double *dst)
{
    int rc = 0;
    for (int32_t e = 0; e < n; ++e) {
        dst[e] = element(dtype, base, offset + e) * scale;
        if (!isfinite(dst[e])) {
            rc = -1;
        }
    }
    return rc;
}

/* Four partial sums so the compiler can keep several multiply-adds in flight (float64 either
 * way; the order only moves the last bits of a double). */
static int load_vector(r35a_dtype dtype, const void *base, int64_t offset, int32_t n, double *dst)
{
    return load_scaled(dtype, base, offset, n, 1.0, dst);
}

static double dot(const double *a, const double *b, int32_t n)
{
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    int32_t e = 0;
    for (; e + 4 <= n; e += 4) {
        s0 += a[e] * b[e];
        s1 += a[e + 1] * b[e + 1];
        s2 += a[e + 2] * b[e + 2];
        s3 += a[e + 3] * b[e + 3];
    }
    for (; e < n; ++e) {
        s0 += a[e] * b[e];
    }
    return (s0 + s1) + (s2 + s3);
}

/* One query row q against the keys kd[x], vd[x] (x = 0 .. n-1, each head_size doubles), the
 * materialized way: all logits and the sink, their max, exp, sum, then the weighted sum of V (the
 * sink has no value). The key of x is at position first_key + x; the query at position query_pos
 * (for ALiBi). sink is NULL without sinks. n = 0 gives zeros. Returns the row's LSE, log(sum of
 * exp(logit)) with the sink's term; -inf when n = 0 (the sink is not counted then). */
static double attend_row(const double *q, const double *kd, const double *vd, int32_t n,
                       int32_t head_size, double scale, double softcap, const double *alibi_slope,
                       const double *sink, int32_t first_key, int32_t query_pos, double *logits,
                       double *out)
{
    for (int32_t e = 0; e < head_size; ++e) {
        out[e] = 0.0;
    }
    if (n == 0) {
        return -INFINITY;
    }
    double max_logit = -INFINITY;
    for (int32_t x = 0; x < n; ++x) {
        double s = scale * dot(q, kd + (size_t)x * (size_t)head_size, head_size);
        if (softcap > 0.0) {
            s = softcap * tanh(s / softcap);
        }
        if (alibi_slope) {
            s += *alibi_slope * (double)(first_key + x - query_pos);
        }
        logits[x] = s;
        max_logit = s > max_logit ? s : max_logit;
    }
    if (sink) {
        max_logit = *sink > max_logit ? *sink : max_logit;
    }
    double sum = sink ? exp(*sink - max_logit) : 0.0;
    for (int32_t x = 0; x < n; ++x) {
        logits[x] = exp(logits[x] - max_logit);
        sum += logits[x];
    }
    for (int32_t x = 0; x < n; ++x) {
        const double w = logits[x] / sum;
        const double *v = vd + (size_t)x * (size_t)head_size;
        for (int32_t e = 0; e < head_size; ++e) {
            out[e] += w * v[e];
        }
    }
    return max_logit + log(sum);
}

/* Scratch: decoded K and V of up to max_keys keys, their logits, one query vector. */
typedef struct scratch {
    double *kd, *vd, *logits, *q;
} scratch;

static int scratch_alloc(scratch *w, int32_t max_keys, int32_t head_size)
{
    const size_t n = (size_t)(max_keys > 0 ? max_keys : 1);
    w->kd = malloc(sizeof(double) * n * (size_t)head_size);
    w->vd = malloc(sizeof(double) * n * (size_t)head_size);
    w->logits = malloc(sizeof(double) * n);
    w->q = malloc(sizeof(double) * (size_t)head_size);
    return w->kd && w->vd && w->logits && w->q ? 0 : -1;
}

static void scratch_free(scratch *w)
{
    free(w->kd);
    free(w->vd);
    free(w->logits);
    free(w->q);
}

/* ------------------------------------------------------------------------------------------ */
/* paged                                                                                        */

int oracle_paged_attention(const oracle_paged *p, double *out)
{
    init_tables();
    const int32_t group = p->num_q_heads / p->num_kv_heads;
    const int32_t D = p->head_size;
    if (group * p->num_kv_heads != p->num_q_heads || p->query_start_loc[0] != 0 ||
        p->query_start_loc[p->num_seqs] != p->num_tokens) {
        fprintf(stderr, "oracle: malformed paged problem\n");
        return -1;
    }
    int32_t max_len = 1;
    for (int32_t s = 0; s < p->num_seqs; ++s) {
        max_len = p->seq_lens[s] > max_len ? p->seq_lens[s] : max_len;
    }
    scratch w;
    if (scratch_alloc(&w, max_len, D) != 0) {
        scratch_free(&w);
        return -1;
    }
    int rc = 0;
    for (int32_t s = 0; s < p->num_seqs && rc == 0; ++s) {
        const int32_t L = p->seq_lens[s];
        const int32_t first_row = p->query_start_loc[s];
        const int32_t M = p->query_start_loc[s + 1] - first_row;
        if (M < 0 || M > L) {
            fprintf(stderr, "oracle: sequence %d has M=%d, L=%d\n", (int)s, (int)M, (int)L);
            rc = -1;
            break;
        }
        if (M == 0) {
            continue;
        }
        /* The rows see key positions lo(p) .. p, lo(p) = max(0, p - window + 1) with a window;
           the first row has the lowest lo. Decode every key from there to L-1 once per kv head. */
        int32_t first_key = p->window > 0 ? L - M - p->window + 1 : 0;
        first_key = first_key < 0 ? 0 : first_key;
        const int32_t nkeys = L - first_key;
        const int32_t *table = p->block_table + (int64_t)s * p->block_table_stride;
        for (int32_t g = 0; g < p->num_kv_heads && rc == 0; ++g) {
            const r35a_dtype kv_dtype = p->kv_dtype ? p->kv_dtype : p->dtype;
            const int eight_bit = kv_dtype == R35A_DTYPE_FP8_E4M3 || kv_dtype == R35A_DTYPE_INT8;
            const int32_t si = p->kv_scale_per_head == 1 ? g : 0;
            const int per_token = eight_bit && p->kv_scale_per_head == 2;
            double k_scale = eight_bit && !per_token ? (double)p->k_scale[si] : 1.0;
            double v_scale = eight_bit && !per_token ? (double)p->v_scale[si] : 1.0;
            for (int32_t x = 0; x < nkeys; ++x) {
                const int32_t j = first_key + x;
                const int32_t page = table[j / p->page_size];
                const int32_t slot = j % p->page_size;
                if (page < 0 || page >= p->num_pages) {
                    fprintf(stderr, "oracle: seq %d key %d reaches block-table entry %d = %d\n",
                            (int)s, (int)j, (int)(j / p->page_size), (int)page);
                    rc = -1;
                    break;
                }
                if (per_token) {
                    k_scale = p->k_scale[(int64_t)page * p->ks_page + (int64_t)slot * p->ks_slot +
                                         (int64_t)g * p->ks_head];
                    v_scale = p->v_scale[(int64_t)page * p->vs_page + (int64_t)slot * p->vs_slot +
                                         (int64_t)g * p->vs_head];
                }
                const int64_t k_off = (int64_t)page * p->k_page_stride +
                                      (int64_t)g * p->k_head_stride + (int64_t)slot * p->k_slot_stride;
                const int64_t v_off = (int64_t)page * p->v_page_stride +
                                      (int64_t)g * p->v_head_stride + (int64_t)slot * p->v_slot_stride;
                if (load_scaled(kv_dtype, p->k, k_off, D, k_scale, w.kd + (size_t)x * (size_t)D) != 0 ||
                    load_scaled(kv_dtype, p->v, v_off, D, v_scale, w.vd + (size_t)x * (size_t)D) != 0) {
                    fprintf(stderr, "oracle: seq %d key %d kv head %d: K or V not finite\n", (int)s,
                            (int)j, (int)g);
                    rc = -1;
                    break;
                }
            }
            for (int32_t i = 0; i < M && rc == 0; ++i) {
                const int32_t pos = L - M + i;
                const int32_t t = first_row + i;
                int32_t lo = p->window > 0 ? pos - p->window + 1 : 0;
                lo = lo < 0 ? 0 : lo;
                const size_t x0 = (size_t)(lo - first_key);
                for (int32_t h = g * group; h < (g + 1) * group && rc == 0; ++h) {
                    const int64_t q_off = (int64_t)t * p->q_token_stride + (int64_t)h * p->q_head_stride;
                    if (load_vector(p->dtype, p->q, q_off, D, w.q) != 0) {
                        fprintf(stderr, "oracle: Q row (token %d, head %d) not finite\n", (int)t, (int)h);
                        rc = -1;
                        break;
                    }
                    double slope = p->alibi_slopes ? (double)p->alibi_slopes[h] : 0.0;
                    double sink = p->sinks ? (double)p->sinks[h] : 0.0;
                    const double lse =
                        attend_row(w.q, w.kd + x0 * (size_t)D, w.vd + x0 * (size_t)D, pos - lo + 1, D,
                                   p->softmax_scale, p->logit_softcap, p->alibi_slopes ? &slope : NULL,
                                   p->sinks ? &sink : NULL, lo, pos, w.logits,
                                   out + ((int64_t)t * p->num_q_heads + h) * D);
                    if (p->lse) {
                        p->lse[(int64_t)t * p->num_q_heads + h] = lse;
                    }
                }
            }
        }
    }
    scratch_free(&w);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* varlen                                                                                       */

int oracle_varlen_attention(const oracle_varlen *p, double *out)
{
    init_tables();
    const int32_t group = p->num_q_heads / p->num_kv_heads;
    const int32_t D = p->head_size;
    if (group * p->num_kv_heads != p->num_q_heads || p->cu_seqlens[0] != 0 ||
        p->cu_seqlens[p->num_segments] != p->num_tokens) {
        fprintf(stderr, "oracle: malformed varlen problem\n");
        return -1;
    }
    int32_t max_len = 1;
    for (int32_t s = 0; s < p->num_segments; ++s) {
        const int32_t n = p->cu_seqlens[s + 1] - p->cu_seqlens[s];
        if (n < 0) {
            fprintf(stderr, "oracle: cu_seqlens decreases at %d\n", (int)s);
            return -1;
        }
        max_len = n > max_len ? n : max_len;
    }
    scratch w;
    if (scratch_alloc(&w, max_len, D) != 0) {
        scratch_free(&w);
        return -1;
    }
    int rc = 0;
    for (int32_t s = 0; s < p->num_segments && rc == 0; ++s) {
        const int32_t start = p->cu_seqlens[s];
        const int32_t len = p->cu_seqlens[s + 1] - start;
        for (int32_t g = 0; g < p->num_kv_heads && rc == 0; ++g) {
            /* the segment's keys and values for kv head g, decoded once */
            for (int32_t x = 0; x < len; ++x) {
                const int64_t k_off = (int64_t)(start + x) * p->k_token_stride + (int64_t)g * p->k_head_stride;
                const int64_t v_off = (int64_t)(start + x) * p->v_token_stride + (int64_t)g * p->v_head_stride;
                if (load_vector(p->dtype, p->k, k_off, D, w.kd + (size_t)x * (size_t)D) != 0 ||
                    load_vector(p->dtype, p->v, v_off, D, w.vd + (size_t)x * (size_t)D) != 0) {
                    fprintf(stderr, "oracle: segment %d token %d kv head %d: K or V not finite\n",
                            (int)s, (int)x, (int)g);
                    rc = -1;
                    break;
                }
            }
            for (int32_t i = 0; i < len && rc == 0; ++i) {
                const int32_t t = start + i;
                const int32_t n = p->causal ? i + 1 : len; /* keys 0 .. n-1 of the segment */
                for (int32_t h = g * group; h < (g + 1) * group && rc == 0; ++h) {
                    const int64_t q_off = (int64_t)t * p->q_token_stride + (int64_t)h * p->q_head_stride;
                    if (load_vector(p->dtype, p->q, q_off, D, w.q) != 0) {
                        fprintf(stderr, "oracle: Q row (token %d, head %d) not finite\n", (int)t, (int)h);
                        rc = -1;
                        break;
                    }
                    double sink = p->sinks ? (double)p->sinks[h] : 0.0;
                    const double lse = attend_row(w.q, w.kd, w.vd, n, D, p->softmax_scale, p->logit_softcap, NULL,
                                                  p->sinks ? &sink : NULL, 0, i, w.logits,
                                                  out + ((int64_t)t * p->num_q_heads + h) * D);
                    if (p->lse) {
                        p->lse[(int64_t)t * p->num_q_heads + h] = lse;
                    }
                }
            }
        }
    }
    scratch_free(&w);
    return rc;
}
