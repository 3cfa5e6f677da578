/* reference.c - the portable CPU reference of both attention operations.
 *
 * The reference backend runs these on host pointers, and the tests use them as the library's own
 * notion of the right answer, so they favour clarity over tricks while staying fast enough for
 * 32K-token contexts.
 *
 * Both operations share one engine. A "row" is one (query token, query head) pair; rows that read
 * the same kv head of the same sequence (the G = num_q_heads / num_kv_heads heads times the query
 * tokens) are processed together in chunks of at most ROW_CHUNK rows. For one chunk the engine walks
 * the union of the rows' visible key ranges in blocks of KEY_BLOCK keys, converts each block of K and
 * V to float once, and lets every row of the chunk consume it with an fp32 online softmax (running
 * max m, running sum l, accumulator acc). Each K/V vector is therefore loaded and converted once per
 * chunk instead of once per row.
 *
 * Attention sinks join a row's softmax after its last key (row_add_sink). The optional LSE output is
 * max + log(sum) of the same state, sink included (row_store). The merge of partial states
 * (r35a_reference_merge_states) sits at the end: it shares only the element conversions. An 8-bit KV cache is
 * dequantized while a block is converted: stored value (decoded fp8, or the int8 integer) x its
 * scale (the tensor's, the kv head's, or the key's own), in fp32, so the rest of the engine never
 * knows.
 *
 * Scratch memory is bounded by the head size alone (ROW_CHUNK and KEY_BLOCK are fixed) and is
 * allocated once per call, before anything is written, so an allocation failure leaves the output
 * untouched.
 */
#include "internal.h"

#include "common/window.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
    ROW_CHUNK = 64, /* rows whose state (q, acc, m, l) is live at once */
    KEY_BLOCK = 32  /* keys converted to float and scored together */
};

/* ---------------------------------------------------------------------------------------------
 * Element conversions. Written by hand on the bit patterns so they are exact, independent of the
 * compiler's half-precision support, and of the caller's FPU flush-to-zero mode.
 * ------------------------------------------------------------------------------------------- */

static inline float float_from_bits(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline uint32_t bits_from_float(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return bits;
}

/* Every case is computed and the result picked with bit masks: no branch and no conditional float
 * operation (which -ftrapping-math forbids speculating), so the row loops that call this vectorize. */
static inline float f16_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exponent = h & 0x7c00u;
    uint32_t mantissa = h & 0x03ffu;
    /* Normal numbers: move exponent and mantissa into place and rebias the exponent 15 -> 127. */
    uint32_t normal = ((uint32_t)(h & 0x7fffu) << 13) + ((127u - 15u) << 23);
    /* Infinity and NaN keep their mantissa (payload, quiet bit) under an all-ones exponent. */
    uint32_t special = 0x7f800000u | (mantissa << 13);
    /* Subnormals (and zero) are mantissa * 2^-24, a normal float; computed from the integer so that
     * no float subnormal is involved (a caller's denormals-are-zero mode would flush one). */
    uint32_t subnormal = bits_from_float((float)mantissa * 0x1p-24f);

    uint32_t is_special = 0u - (uint32_t)(exponent == 0x7c00u);
    uint32_t is_subnormal = 0u - (uint32_t)(exponent == 0u);
    uint32_t is_normal = ~(is_special | is_subnormal);
    return float_from_bits(sign | (normal & is_normal) | (special & is_special) |
                           (subnormal & is_subnormal));
}

static inline float bf16_to_float(uint16_t b)
{
    /* bf16 is the upper half of a binary32, so widening is exact for every value. */
    return float_from_bits((uint32_t)b << 16);
}

/* OCP float8_e4m3fn: S.EEEE.MMM, bias 7, no infinities, S.1111.111 is NaN. Branch-free like
 * f16_to_float. */
static inline float fp8_e4m3_to_float(uint8_t b)
{
    uint32_t sign = (uint32_t)(b & 0x80u) << 24;
    uint32_t magnitude = b & 0x7fu;
    uint32_t exponent = magnitude >> 3;
    /* Normal numbers: exponent and mantissa into place, exponent rebiased 7 -> 127. */
    uint32_t normal = (magnitude << 20) + ((127u - 7u) << 23);
    /* Subnormals (and zero) are mantissa * 2^-9: a normal float, computed from the integer. */
    uint32_t subnormal = bits_from_float((float)(magnitude & 7u) * 0x1p-9f);
    uint32_t nan = 0x7fc00000u;

    uint32_t is_nan = 0u - (uint32_t)(magnitude == 0x7fu);
    uint32_t is_subnormal = 0u - (uint32_t)(exponent == 0u);
    uint32_t is_normal = ~(is_nan | is_subnormal);
    return float_from_bits(sign | (normal & is_normal) | (subnormal & is_subnormal) | (nan & is_nan));
}

/* binary32 -> binary16, round to nearest even; overflow gives infinity, NaN stays a (quiet) NaN. */
static uint16_t float_to_f16(float f)
{
    uint32_t bits = bits_from_float(f);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    uint32_t magnitude = bits & 0x7fffffffu;

    if (magnitude > 0x7f800000u) /* NaN: keep the top payload bits, force the quiet bit */
        return (uint16_t)(sign | 0x7e00u | ((magnitude >> 13) & 0x03ffu));
    /* 0x477ff000 is 65520, halfway between the largest half (65504, odd mantissa) and 2^16:
     * it and everything above round to infinity. */
    if (magnitude >= 0x477ff000u)
        return (uint16_t)(sign | 0x7c00u);
    if (magnitude >= 0x38800000u) { /* at least 2^-14: a normal half */
        /* Add just under half an ulp, plus one if the kept part is odd (ties to even); a carry out
         * of the mantissa correctly bumps the exponent. Then rebias 127 -> 15. */
        uint32_t rounded = magnitude + 0x0fffu + ((magnitude >> 13) & 1u);
        return (uint16_t)(sign | ((rounded - ((127u - 15u) << 23)) >> 13));
    }
    /* Subnormal half: the value in units of 2^-24 is significand * 2^(exponent - 126). */
    uint32_t exponent = magnitude >> 23;
    uint32_t shift = 126u - exponent; /* >= 14 here */
    if (shift > 24u)                  /* below 2^-25: rounds to zero (f32 subnormals land here) */
        return sign;
    uint32_t significand = (magnitude & 0x007fffffu) | 0x00800000u;
    uint32_t kept = significand >> shift;
    uint32_t remainder = significand & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (remainder > half || (remainder == half && (kept & 1u)))
        kept += 1u; /* may carry into the smallest normal, whose encoding is the next integer */
    return (uint16_t)(sign | kept);
}

/* binary32 -> bfloat16, round to nearest even; NaN stays a (quiet) NaN. */
static uint16_t float_to_bf16(float f)
{
    uint32_t bits = bits_from_float(f);
    if ((bits & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((bits >> 16) | 0x0040u);
    /* Rounding can carry into the exponent, up to infinity: exactly what RNE wants. */
    uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(rounded >> 16);
}

static size_t element_size(r35a_dtype dtype)
{
    return r35a_dtype_size(dtype);
}

/* Loads n elements of dtype into floats. memcpy per element keeps odd addresses legal; compilers
 * turn it into plain (vector) loads. 8-bit KV elements come out as their stored values (the
 * decoded fp8 number, the integer), before the scale. */
static void load_vector(r35a_dtype dtype, const void *src, int32_t n, float *restrict dst)
{
    const unsigned char *bytes = src;
    switch (dtype) {
    case R35A_DTYPE_FP8_E4M3:
        for (int32_t d = 0; d < n; d++)
            dst[d] = fp8_e4m3_to_float(bytes[d]);
        break;
    case R35A_DTYPE_INT8:
        for (int32_t d = 0; d < n; d++)
            dst[d] = (float)(int8_t)bytes[d];
        break;
    case R35A_DTYPE_F16:
    case R35A_DTYPE_BF16:
        for (int32_t d = 0; d < n; d++) {
            uint16_t h;
            memcpy(&h, bytes + 2 * (size_t)d, sizeof h);
            dst[d] = dtype == R35A_DTYPE_F16 ? f16_to_float(h) : bf16_to_float(h);
        }
        break;
    default:
        memcpy(dst, src, (size_t)n * sizeof(float));
        break;
    }
}

static void store_vector(r35a_dtype dtype, const float *src, int32_t n, void *dst)
{
    unsigned char *bytes = dst;
    switch (dtype) {
    case R35A_DTYPE_F16:
        for (int32_t d = 0; d < n; d++) {
            uint16_t h = float_to_f16(src[d]);
            memcpy(bytes + 2 * (size_t)d, &h, sizeof h);
        }
        break;
    case R35A_DTYPE_BF16:
        for (int32_t d = 0; d < n; d++) {
            uint16_t b = float_to_bf16(src[d]);
            memcpy(bytes + 2 * (size_t)d, &b, sizeof b);
        }
        break;
    default:
        memcpy(dst, src, (size_t)n * sizeof(float));
        break;
    }
}

/* Address of the vector at element offset `offset` of a tensor whose base is `base`. */
static inline const void *element_at(const void *base, int64_t offset, size_t esize)
{
    return (const unsigned char *)base + (size_t)offset * esize;
}

/* ---------------------------------------------------------------------------------------------
 * Where the keys of one (sequence, kv head) live: a paged cache or a strided token buffer.
 * ------------------------------------------------------------------------------------------- */

typedef struct kv_source {
    const void *k, *v;           /* tensor bases */
    r35a_dtype dtype;            /* of K and V */
    size_t esize;
    /* 8-bit KV: the real value is stored x scale (this kv head's scales); 0 = no scaling. */
    float k_scale, v_scale;
    /* per-token-head scales (paged only; NULL otherwise): the scale of key (page, slot) is
     * k_scales[page * k_scale_page + slot * k_scale_slot] (this kv head's offset included) */
    const float *k_scales, *v_scales;
    int64_t k_scale_page, k_scale_slot, v_scale_page, v_scale_slot;
    const int32_t *block_row;    /* paged: this sequence's block_table row; NULL for linear */
    int32_t page_size;
    int64_t k_page_stride, v_page_stride;
    int64_t k_key_stride, v_key_stride; /* slot stride (paged) or token stride (linear) */
    int64_t k_head_offset, v_head_offset; /* kv head * head stride, plus the first token (linear) */
} kv_source;

/* Key j's vectors and, with per-token-head scales, its scales (else the source's). */
static void kv_source_locate(const kv_source *src, int32_t j, const void **key, const void **value,
                             float *k_scale, float *v_scale)
{
    int64_t k_offset = src->k_head_offset, v_offset = src->v_head_offset;
    int64_t slot = j, page = 0;
    if (src->block_row) {
        page = src->block_row[j / src->page_size];
        slot = j % src->page_size;
        k_offset += page * src->k_page_stride;
        v_offset += page * src->v_page_stride;
    }
    *key = element_at(src->k, k_offset + slot * src->k_key_stride, src->esize);
    *value = element_at(src->v, v_offset + slot * src->v_key_stride, src->esize);
    *k_scale = src->k_scale;
    *v_scale = src->v_scale;
    if (src->k_scales) {
        *k_scale = src->k_scales[page * src->k_scale_page + slot * src->k_scale_slot];
        *v_scale = src->v_scales[page * src->v_scale_page + slot * src->v_scale_slot];
    }
}

/* ---------------------------------------------------------------------------------------------
 * The shared engine.
 * ------------------------------------------------------------------------------------------- */

typedef struct score_rule {
    r35a_dtype dtype;   /* of Q and O */
    int32_t head_size;
    /* A scale <= 1 multiplies q before the dot (a dot of large q and k can overflow fp32 where the
     * scaled one fits); a larger one multiplies the dot (q * scale could overflow instead). */
    float scale;
    float softcap; /* 0 = off */
    bool alibi;
} score_rule;

typedef struct attention_row {
    const void *q;   /* query vector (dtype) */
    void *out;       /* output vector (dtype) */
    int32_t lo, hi;  /* visible key positions [lo, hi) */
    int32_t pos;     /* query position, for ALiBi */
    float slope;     /* ALiBi slope of the row's head */
    double sink;     /* the head's sink logit, -inf without sinks */
    float *lse;      /* where the row's LSE goes, NULL when the call writes none */
    double max;      /* online softmax state: running max of the logits seen so far */
    double sum;      /* running sum of exp(logit - max) */
} attention_row;

/* Float working buffers, sized for the head size once per call. */
typedef struct scratch {
    float *q;        /* [ROW_CHUNK][D] queries of the chunk */
    float *acc;      /* [ROW_CHUNK][D] unnormalized outputs of the chunk */
    float *keys_t;   /* [D][KEY_BLOCK] the key block, transposed so scoring needs no reduction */
    float *values;   /* [KEY_BLOCK][D] the value block */
    float *key_row;  /* [D] one key before transposition */
    void *block;     /* the single allocation */
} scratch;

/* Allocates s for head_size, or fails with R35A_ERR_OUT_OF_MEMORY naming op ("paged", "varlen"). */
static r35a_status scratch_alloc(scratch *s, int32_t head_size, const char *op)
{
    size_t d = (size_t)head_size;
    size_t floats = 2 * ROW_CHUNK * d + 2 * KEY_BLOCK * d + d;
    float *block = malloc(floats * sizeof(float));
    memset(s, 0, sizeof *s);
    if (!block)
        return r35a_fail(R35A_ERR_OUT_OF_MEMORY, "reference %s attention: cannot allocate scratch for head_size %d",
                         op, (int)head_size);
    s->block = block;
    s->q = block;
    s->acc = s->q + ROW_CHUNK * d;
    s->keys_t = s->acc + ROW_CHUNK * d;
    s->values = s->keys_t + KEY_BLOCK * d;
    s->key_row = s->values + KEY_BLOCK * d;
    return R35A_OK;
}

static void scale_vector(float *v, int32_t n, float factor)
{
    for (int32_t d = 0; d < n; d++)
        v[d] *= factor;
}

/* Converts keys first .. first+count-1 into s->keys_t / s->values. Columns past count are zeroed so
 * the fixed-width scoring loop never reads uninitialized memory (their scores are never used). */
static void load_key_block(const score_rule *rule, const kv_source *src, int32_t first,
                           int32_t count, scratch *s)
{
    int32_t d_count = rule->head_size;
    for (int32_t k = 0; k < count; k++) {
        const void *key, *value;
        float k_scale, v_scale;
        kv_source_locate(src, first + k, &key, &value, &k_scale, &v_scale);
        load_vector(src->dtype, key, d_count, s->key_row);
        float *value_row = s->values + (size_t)k * d_count;
        load_vector(src->dtype, value, d_count, value_row);
        if (k_scale != 0.0f) {
            scale_vector(s->key_row, d_count, k_scale);
            scale_vector(value_row, d_count, v_scale);
        }
        for (int32_t d = 0; d < d_count; d++)
            s->keys_t[(size_t)d * KEY_BLOCK + k] = s->key_row[d];
    }
    if (count < KEY_BLOCK)
        for (int32_t d = 0; d < d_count; d++)
            for (int32_t k = count; k < KEY_BLOCK; k++)
                s->keys_t[(size_t)d * KEY_BLOCK + k] = 0.0f;
}

/* dot(q, key k) for all KEY_BLOCK keys of the block. The inner loop runs across keys, so it is a
 * plain vertical multiply-add that vectorizes without reassociating any sum. */
static void score_key_block(const float *restrict q, const float *restrict keys_t,
                            int32_t head_size, float *restrict dots)
{
    float partial[KEY_BLOCK] = {0};
    for (int32_t d = 0; d < head_size; d++) {
        float qd = q[d];
        const float *column = keys_t + (size_t)d * KEY_BLOCK;
        for (int k = 0; k < KEY_BLOCK; k++)
            partial[k] += qd * column[k];
    }
    memcpy(dots, partial, sizeof partial);
}

/* acc += sum_k p[k] * values[k] over k in [k0, k1). Four keys per pass cut the loads and stores of
 * acc by four. */
static void accumulate_values(float *restrict acc, const float *restrict values, const float *p,
                              int32_t k0, int32_t k1, int32_t head_size)
{
    size_t d_count = (size_t)head_size;
    int32_t k = k0;
    for (; k + 4 <= k1; k += 4) {
        const float *v0 = values + (size_t)k * d_count;
        const float *v1 = v0 + d_count, *v2 = v1 + d_count, *v3 = v2 + d_count;
        float p0 = p[k], p1 = p[k + 1], p2 = p[k + 2], p3 = p[k + 3];
        for (size_t d = 0; d < d_count; d++)
            acc[d] += p0 * v0[d] + p1 * v1[d] + p2 * v2[d] + p3 * v3[d];
    }
    for (; k < k1; k++) {
        const float *v0 = values + (size_t)k * d_count;
        float p0 = p[k];
        for (size_t d = 0; d < d_count; d++)
            acc[d] += p0 * v0[d];
    }
}

/* max that propagates NaN (fmax drops it): a NaN logit must poison the row, not vanish. */
static inline double nan_max(double a, double b)
{
    if (isnan(a) || isnan(b))
        return a + b;
    return b > a ? b : a;
}

/* Folds the keys first .. first+count-1 (already in scratch) into one row's online softmax.
 * The dots are fp32 (the hot loop); the per-key scalars (scale, softcap, ALiBi, max, exp, sum) are
 * double, so logits that overflow fp32 only after scaling (softmax_scale up to FLT_MAX) still give
 * the right weights. A logit that is NaN or +inf still poisons the row (documented in the header). */
static void row_consume_block(const score_rule *rule, attention_row *row, const float *q,
                              float *acc, const scratch *s, int32_t first, int32_t count)
{
    int32_t k0 = row->lo > first ? row->lo - first : 0;
    int32_t k1 = row->hi - first < count ? row->hi - first : count;
    if (k0 >= k1)
        return;

    float dot[KEY_BLOCK];
    score_key_block(q, s->keys_t, rule->head_size, dot);

    double logit[KEY_BLOCK];
    double block_max = -INFINITY;
    for (int32_t k = k0; k < k1; k++) {
        double x = rule->scale <= 1.0f ? (double)dot[k] : (double)rule->scale * dot[k];
        if (rule->softcap > 0.0f)
            x = rule->softcap * tanh(x / rule->softcap);
        if (rule->alibi)
            x += (double)row->slope * (double)((int64_t)first + k - row->pos);
        logit[k] = x;
        block_max = nan_max(block_max, x);
    }

    /* All seen logits -inf (only an overflowing ALiBi term can do that): these keys weigh nothing,
     * and going on would compute -inf - -inf = NaN. */
    if (block_max == -INFINITY)
        return;

    /* Rescale what was accumulated under the old max. Every exponent below is <= 0, so nothing
     * overflows however large the logits are; the first block (max = -inf) gives factor 0. */
    double new_max = nan_max(row->max, block_max);
    double factor = exp(row->max - new_max);
    if (factor != 1.0) {
        scale_vector(acc, rule->head_size, (float)factor);
        row->sum *= factor;
    }
    row->max = new_max;

    float weight[KEY_BLOCK];
    double block_sum = 0.0;
    for (int32_t k = k0; k < k1; k++) {
        double p = exp(logit[k] - new_max);
        weight[k] = (float)p;
        block_sum += p;
    }
    row->sum += block_sum;
    accumulate_values(acc, s->values, weight, k0, k1, rule->head_size);
}

/* Adds the row's sink to its softmax: one more logit in the max and the sum, none in acc. A -inf
 * sink changes nothing; a NaN or +inf one makes the sum NaN (the non-finite contract). */
static void row_add_sink(const score_rule *rule, attention_row *row, float *acc)
{
    if (row->sink == -INFINITY)
        return;
    double new_max = nan_max(row->max, row->sink);
    double factor = exp(row->max - new_max);
    if (factor != 1.0) {
        scale_vector(acc, rule->head_size, (float)factor);
        row->sum *= factor;
    }
    row->sum += exp(row->sink - new_max);
    row->max = new_max;
}

/* Writes acc / sum, or zeros for a row that saw no key (whatever its sink). A NaN sum (a NaN or
 * infinite logit somewhere in the row) divides through, so the row comes out NaN rather than as
 * plausible zeros. */
static void row_store(const score_rule *rule, attention_row *row, float *acc)
{
    double lse = -INFINITY; /* a row that saw no key, whatever its sink */
    if (row->sum > 0.0 || isnan(row->sum)) {
        row_add_sink(rule, row, acc);
        float sum = (float)row->sum;
        for (int32_t d = 0; d < rule->head_size; d++)
            acc[d] /= sum;
        lse = row->max + log(row->sum); /* NaN stays NaN */
    } else {
        memset(acc, 0, (size_t)rule->head_size * sizeof(float));
    }
    store_vector(rule->dtype, acc, rule->head_size, row->out);
    if (row->lse)
        *row->lse = (float)lse;
}

/* Runs a chunk of rows that share one kv source, from their queries to their outputs. */
static void attend_row_chunk(const score_rule *rule, const kv_source *src, attention_row *rows,
                             int32_t row_count, scratch *s)
{
    size_t d_count = (size_t)rule->head_size;
    int32_t key_lo = INT32_MAX, key_hi = 0;
    for (int32_t r = 0; r < row_count; r++) {
        load_vector(rule->dtype, rows[r].q, rule->head_size, s->q + r * d_count);
        if (rule->scale <= 1.0f)
            scale_vector(s->q + r * d_count, rule->head_size, rule->scale);
        memset(s->acc + r * d_count, 0, d_count * sizeof(float));
        rows[r].max = -INFINITY;
        rows[r].sum = 0.0f;
        if (rows[r].lo < rows[r].hi) {
            key_lo = rows[r].lo < key_lo ? rows[r].lo : key_lo;
            key_hi = rows[r].hi > key_hi ? rows[r].hi : key_hi;
        }
    }

    /* Only keys some row sees are touched: a windowed sequence's unreached pages are never read. */
    /* 64-bit: key_hi may sit within one block of INT32_MAX. */
    for (int64_t first = key_lo; first < key_hi; first += KEY_BLOCK) {
        int32_t count = key_hi - first < KEY_BLOCK ? (int32_t)(key_hi - first) : KEY_BLOCK;
        load_key_block(rule, src, (int32_t)first, count, s);
        for (int32_t r = 0; r < row_count; r++)
            row_consume_block(rule, &rows[r], s->q + r * d_count, s->acc + r * d_count, s,
                              (int32_t)first, count);
    }

    for (int32_t r = 0; r < row_count; r++)
        row_store(rule, &rows[r], s->acc + r * d_count);
}

/* ---------------------------------------------------------------------------------------------
 * The rows of one (sequence or segment, kv head), for both ops.
 * ------------------------------------------------------------------------------------------- */

/* Where a call's query rows live and which keys each sees. Rows are token-major (all G heads of one
 * token, then the next token) so a chunk's causal key ranges stay close together. */
typedef struct row_group {
    r35a_dtype dtype;
    int32_t group;                    /* G query heads per kv head */
    const void *q;
    void *out;
    int64_t q_token_stride, q_head_stride, o_token_stride, o_head_stride;
    const float *alibi_slopes;        /* [num_q_heads] or NULL */
    const float *sinks;               /* [num_q_heads] or NULL */
    float *lse;                       /* the LSE output, or NULL */
    int64_t lse_token_stride, lse_head_stride;
    int32_t window;                   /* 0: none */
    bool causal;                      /* a row sees keys up to its own position; else the whole span */
    /* the (sequence or segment, kv head) being attended */
    int32_t first_token, tokens, kv_head;
    int32_t first_pos;                /* key position of the first token: L - M (paged), 0 (varlen) */
    int32_t keys;                     /* keys of the span (the non-causal rows see [0, keys)) */
} row_group;

static void fill_row(const row_group *g, int64_t t, attention_row *row)
{
    size_t esize = element_size(g->dtype);
    int32_t i = (int32_t)(t / g->group);
    int32_t head = g->kv_head * g->group + (int32_t)(t % g->group);
    int64_t token = (int64_t)g->first_token + i;

    row->pos = g->first_pos + i;
    row->hi = g->causal ? row->pos + 1 : g->keys;
    row->lo = (int32_t)r35a_window_first_key(row->pos, g->window);
    row->slope = g->alibi_slopes ? g->alibi_slopes[head] : 0.0f;
    row->sink = g->sinks ? (double)g->sinks[head] : -INFINITY;
    row->q = element_at(g->q, token * g->q_token_stride + head * g->q_head_stride, esize);
    row->out = (unsigned char *)g->out + (size_t)(token * g->o_token_stride + head * g->o_head_stride) * esize;
    row->lse = g->lse ? g->lse + token * g->lse_token_stride + head * g->lse_head_stride : NULL;
}

/* The score rule and the row layout from either op's desc and args (their fields share names). */
#define RULE_OF(desc, use_alibi)                                                                           \
    (score_rule) { .dtype = (desc)->dtype, .head_size = (desc)->head_size, .scale = (desc)->softmax_scale, \
                   .softcap = (desc)->logit_softcap, .alibi = (use_alibi) }
#define GROUP_OF(desc, args)                                                                               \
    (row_group) { .dtype = (desc)->dtype, .group = (desc)->num_q_heads / (desc)->num_kv_heads, .q = (args)->q, \
                  .out = (args)->out, .q_token_stride = (desc)->q_token_stride,                            \
                  .q_head_stride = (desc)->q_head_stride, .o_token_stride = (desc)->o_token_stride,        \
                  .o_head_stride = (desc)->o_head_stride, .sinks = (desc)->use_sinks ? (args)->sinks : NULL, \
                  .lse = (desc)->use_lse ? (args)->lse : NULL, .lse_token_stride = (desc)->lse_token_stride,  \
                  .lse_head_stride = (desc)->lse_head_stride }

/* Attends every row of g against src, ROW_CHUNK rows per pass over the keys. */
static void attend_group(const score_rule *rule, const kv_source *src, const row_group *g, scratch *s)
{
    attention_row rows[ROW_CHUNK];
    int64_t row_total = (int64_t)g->tokens * g->group;
    for (int64_t start = 0; start < row_total; start += ROW_CHUNK) {
        int32_t count = (int32_t)(row_total - start < ROW_CHUNK ? row_total - start : ROW_CHUNK);
        for (int32_t r = 0; r < count; r++)
            fill_row(g, start + r, &rows[r]);
        attend_row_chunk(rule, src, rows, count, s);
    }
}

/* ---------------------------------------------------------------------------------------------
 * Paged attention.
 * ------------------------------------------------------------------------------------------- */

r35a_status r35a_reference_paged_attention(const r35a_paged_attention_desc *desc,
                                           const r35a_paged_attention_args *args)
{
    scratch s;
    r35a_status st = scratch_alloc(&s, desc->head_size, "paged");
    if (st != R35A_OK)
        return st;
    const score_rule rule = RULE_OF(desc, desc->use_alibi != 0);
    row_group g = GROUP_OF(desc, args);
    g.alibi_slopes = desc->use_alibi ? args->alibi_slopes : NULL;
    g.window = desc->window;
    g.causal = true;
    const r35a_dtype kv_dtype = r35a_paged_kv_dtype(desc);
    const bool scaled = r35a_dtype_is_kv8(kv_dtype);

    for (int32_t seq = 0; seq < desc->num_seqs; seq++) {
        g.first_token = args->query_start_loc[seq];
        g.tokens = args->query_start_loc[seq + 1] - g.first_token;
        if (g.tokens <= 0)
            continue;
        g.first_pos = args->seq_lens[seq] - g.tokens;
        for (g.kv_head = 0; g.kv_head < desc->num_kv_heads; g.kv_head++) {
            const bool per_token = scaled && desc->kv_scale_per_head == R35A_KV_SCALE_PER_TOKEN_HEAD;
            int32_t scale_index = desc->kv_scale_per_head == R35A_KV_SCALE_PER_KV_HEAD ? g.kv_head : 0;
            const kv_source src = {
                .k = args->k_cache,
                .v = args->v_cache,
                .dtype = kv_dtype,
                .esize = element_size(kv_dtype),
                .k_scale = scaled && !per_token ? args->k_scale[scale_index] : 0.0f,
                .v_scale = scaled && !per_token ? args->v_scale[scale_index] : 0.0f,
                .k_scales = per_token ? args->k_scale + g.kv_head * desc->k_scale_head_stride : NULL,
                .v_scales = per_token ? args->v_scale + g.kv_head * desc->v_scale_head_stride : NULL,
                .k_scale_page = desc->k_scale_page_stride,
                .k_scale_slot = desc->k_scale_slot_stride,
                .v_scale_page = desc->v_scale_page_stride,
                .v_scale_slot = desc->v_scale_slot_stride,
                .block_row = args->block_table + (size_t)seq * (size_t)desc->block_table_stride,
                .page_size = desc->page_size,
                .k_page_stride = desc->k_page_stride,
                .v_page_stride = desc->v_page_stride,
                .k_key_stride = desc->k_slot_stride,
                .v_key_stride = desc->v_slot_stride,
                .k_head_offset = g.kv_head * desc->k_head_stride,
                .v_head_offset = g.kv_head * desc->v_head_stride,
            };
            attend_group(&rule, &src, &g, &s);
        }
    }
    free(s.block);
    return R35A_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Varlen attention.
 * ------------------------------------------------------------------------------------------- */

r35a_status r35a_reference_varlen_attention(const r35a_varlen_attention_desc *desc,
                                            const r35a_varlen_attention_args *args)
{
    scratch s;
    r35a_status st = scratch_alloc(&s, desc->head_size, "varlen");
    if (st != R35A_OK)
        return st;
    const score_rule rule = RULE_OF(desc, false);
    row_group g = GROUP_OF(desc, args);
    g.causal = desc->causal != 0;
    for (int32_t seg = 0; seg < desc->num_segments; seg++) {
        g.first_token = args->cu_seqlens[seg];
        g.tokens = g.keys = args->cu_seqlens[seg + 1] - g.first_token;
        if (g.tokens <= 0)
            continue;
        for (g.kv_head = 0; g.kv_head < desc->num_kv_heads; g.kv_head++) {
            const kv_source src = {
                .k = args->k,
                .v = args->v,
                .dtype = desc->dtype,
                .esize = element_size(desc->dtype),
                .block_row = NULL,
                .k_key_stride = desc->k_token_stride,
                .v_key_stride = desc->v_token_stride,
                .k_head_offset = g.kv_head * desc->k_head_stride + g.first_token * desc->k_token_stride,
                .v_head_offset = g.kv_head * desc->v_head_stride + g.first_token * desc->v_token_stride,
            };
            attend_group(&rule, &src, &g, &s);
        }
    }
    free(s.block);
    return R35A_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Merging partial states: O = sum_i w_i O_i, LSE = log sum_i exp(LSE_i), w_i = exp(LSE_i - LSE),
 * in double against m = max_i LSE_i. A -inf part is skipped (its O is never read); NaN propagates
 * through m (nan_max) or through a read O_i.
 * ------------------------------------------------------------------------------------------- */

r35a_status r35a_reference_merge_states(const r35a_merge_states_desc *desc, const r35a_merge_states_args *args)
{
    const size_t d_count = (size_t)desc->head_size, esize = element_size(desc->dtype);
    float *block = malloc(2 * d_count * sizeof(float) + d_count * sizeof(double));
    if (!block)
        return r35a_fail(R35A_ERR_OUT_OF_MEMORY, "reference merge states: cannot allocate scratch for head_size %d",
                         (int)desc->head_size);
    float *part = block, *out = block + d_count;
    double *acc = (double *)(void *)(block + 2 * d_count);
    for (int64_t t = 0; t < desc->num_tokens; t++) {
        for (int64_t h = 0; h < desc->num_heads; h++) {
            const float *lse = args->parts_lse + t * desc->lse_token_stride + h * desc->lse_head_stride;
            double m = -INFINITY;
            for (int64_t i = 0; i < desc->num_parts; i++)
                m = nan_max(m, (double)lse[i * desc->lse_part_stride]);
            double merged = -INFINITY;
            memset(out, 0, d_count * sizeof(float));
            if (m != -INFINITY) {
                double sum = 0.0;
                for (int64_t i = 0; i < desc->num_parts; i++)
                    sum += exp((double)lse[i * desc->lse_part_stride] - m);
                merged = m + log(sum);
                for (size_t d = 0; d < d_count; d++)
                    acc[d] = 0.0;
                for (int64_t i = 0; i < desc->num_parts; i++) {
                    double li = (double)lse[i * desc->lse_part_stride];
                    if (li == -INFINITY)
                        continue; /* weighs nothing: not read */
                    double w = exp(li - m) / sum;
                    load_vector(desc->dtype,
                                element_at(args->parts_o,
                                           i * desc->part_stride + t * desc->part_token_stride + h * desc->part_head_stride,
                                           esize),
                                desc->head_size, part);
                    for (size_t d = 0; d < d_count; d++)
                        acc[d] += w * (double)part[d];
                }
                for (size_t d = 0; d < d_count; d++)
                    out[d] = (float)acc[d];
            }
            store_vector(desc->dtype, out, desc->head_size,
                         (unsigned char *)args->out + (size_t)(t * desc->o_token_stride + h * desc->o_head_stride) * esize);
            if (args->out_lse)
                args->out_lse[t * desc->out_lse_token_stride + h * desc->out_lse_head_stride] = (float)merged;
        }
    }
    free(block);
    return R35A_OK;
}
