/* consumer.c - a C11 program that uses an installed librdna35attn the way an inference engine would.
 *
 * One small f16 paged decode (three sequences of different lengths, one query token each, GQA 8:2,
 * head size 64, shuffled 16-token pages) on the best available backend, checked against a float64
 * attention computed here. tests/consumers/run.sh builds it twice against the installed library:
 * through find_package(rdna35attn) and through pkg-config. Exit status 0 when the output matches.
 */
#include <rdna35attn.h>

#include "consumer_memory.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    NUM_SEQS = 3,
    NUM_Q_HEADS = 8,
    NUM_KV_HEADS = 2,
    HEAD_SIZE = 64,
    PAGE_SIZE = 16,
    MAX_SEQ_LEN = 80,
    NUM_PAGES = 12,
    PAGES_PER_SEQ = (MAX_SEQ_LEN + PAGE_SIZE - 1) / PAGE_SIZE
};

static const int32_t kSeqLens[NUM_SEQS] = {1, 37, 70};

/* ---- f16 by hand, so that the program needs no compiler support for half precision ---- */

/* The values used are k/1024 with |k| <= 1024: exact in f16 (11 significant bits, exponent >= -10). */
static uint16_t f16_from_exact(float value)
{
    if (value == 0.0f)
        return 0;
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    uint32_t sign = (bits >> 16) & 0x8000u;
    int32_t exponent = (int32_t)((bits >> 23) & 0xffu) - 127 + 15;
    uint32_t mantissa = (bits >> 13) & 0x3ffu;
    return (uint16_t)(sign | ((uint32_t)exponent << 10) | mantissa);
}

static double f16_to_double(uint16_t h)
{
    int exponent = (h >> 10) & 0x1f;
    int mantissa = h & 0x3ff;
    double magnitude;
    if (exponent == 0)
        magnitude = ldexp(mantissa, -24);
    else if (exponent == 31)
        magnitude = mantissa ? NAN : INFINITY;
    else
        magnitude = ldexp(mantissa + 1024, exponent - 25);
    return (h & 0x8000) ? -magnitude : magnitude;
}

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint32_t next_random(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}

static uint16_t random_f16(void) { return f16_from_exact((float)((int)(next_random() % 2049) - 1024) / 1024.0f); }

/* ---- the float64 attention this program trusts ---- */

/* out[t][h][d] for token t = sequence s (one query token at position L-1, seeing keys 0..L-1). */
static void expected_output(const uint16_t *q, const uint16_t *k_cache, const uint16_t *v_cache,
                            const int32_t *block_table, const r35a_paged_attention_desc *desc, double *out)
{
    const int group = NUM_Q_HEADS / NUM_KV_HEADS;
    double scores[MAX_SEQ_LEN];
    for (int s = 0; s < NUM_SEQS; ++s) {
        const int32_t len = kSeqLens[s];
        for (int h = 0; h < NUM_Q_HEADS; ++h) {
            const int g = h / group;
            const uint16_t *q_row = q + (int64_t)s * desc->q_token_stride + (int64_t)h * desc->q_head_stride;
            double max_score = -INFINITY;
            for (int j = 0; j < len; ++j) {
                int64_t page = block_table[s * PAGES_PER_SEQ + j / PAGE_SIZE];
                const uint16_t *k = k_cache + page * desc->k_page_stride + g * desc->k_head_stride +
                                    (j % PAGE_SIZE) * desc->k_slot_stride;
                double dot = 0.0;
                for (int d = 0; d < HEAD_SIZE; ++d)
                    dot += f16_to_double(q_row[d]) * f16_to_double(k[d]);
                scores[j] = dot / sqrt((double)HEAD_SIZE);
                if (scores[j] > max_score)
                    max_score = scores[j];
            }
            double total = 0.0;
            for (int j = 0; j < len; ++j) {
                scores[j] = exp(scores[j] - max_score);
                total += scores[j];
            }
            double *o = out + ((int64_t)s * NUM_Q_HEADS + h) * HEAD_SIZE;
            for (int d = 0; d < HEAD_SIZE; ++d)
                o[d] = 0.0;
            for (int j = 0; j < len; ++j) {
                int64_t page = block_table[s * PAGES_PER_SEQ + j / PAGE_SIZE];
                const uint16_t *v = v_cache + page * desc->v_page_stride + g * desc->v_head_stride +
                                    (j % PAGE_SIZE) * desc->v_slot_stride;
                for (int d = 0; d < HEAD_SIZE; ++d)
                    o[d] += scores[j] / total * f16_to_double(v[d]);
            }
        }
    }
}

/* Prints the library's status and detail for a failed call and returns 1. */
static int report_failure(const char *call, r35a_status status)
{
    fprintf(stderr, "consumer_c: %s failed: %s: %s\n", call, r35a_status_string(status), r35a_last_error_detail());
    return 1;
}

int main(void)
{
    if (r35a_version_number() != R35A_VERSION_NUMBER) {
        fprintf(stderr, "consumer_c: header is version %d but the library is %s\n", R35A_VERSION_NUMBER,
                r35a_version_string());
        return 1;
    }

    r35a_context *ctx = NULL;
    r35a_status st = r35a_context_create(NULL, &ctx); /* NULL options: R35A_BACKEND_AUTO */
    if (st != R35A_OK)
        return report_failure("r35a_context_create", st);
    r35a_context_info ctx_info = {.struct_size = sizeof ctx_info};
    if ((st = r35a_context_get_info(ctx, &ctx_info)) != R35A_OK)
        return report_failure("r35a_context_get_info", st);
    consumer_memory mem;
    if (consumer_memory_open(&mem, &ctx_info) != 0)
        return 1;

    r35a_paged_attention_desc desc;
    r35a_paged_attention_desc_init(&desc, R35A_DTYPE_F16, NUM_SEQS, NUM_SEQS, 1, MAX_SEQ_LEN, NUM_Q_HEADS,
                                   NUM_KV_HEADS, HEAD_SIZE, PAGE_SIZE, NUM_PAGES);
    r35a_plan *plan = NULL;
    if ((st = r35a_paged_attention_plan(ctx, &desc, &plan)) != R35A_OK)
        return report_failure("r35a_paged_attention_plan", st);
    r35a_plan_info plan_info = {.struct_size = sizeof plan_info};
    if ((st = r35a_plan_get_info(plan, &plan_info)) != R35A_OK)
        return report_failure("r35a_plan_get_info", st);

    /* Host inputs; pages handed out in a shuffled order, as a cache allocator would. */
    const size_t q_count = (size_t)NUM_SEQS * NUM_Q_HEADS * HEAD_SIZE;
    const size_t cache_count = (size_t)NUM_PAGES * NUM_KV_HEADS * PAGE_SIZE * HEAD_SIZE;
    uint16_t *q = malloc(q_count * sizeof *q);
    uint16_t *k_cache = malloc(cache_count * sizeof *k_cache);
    uint16_t *v_cache = malloc(cache_count * sizeof *v_cache);
    uint16_t *out = malloc(q_count * sizeof *out);
    double *expected = malloc(q_count * sizeof *expected);
    if (!q || !k_cache || !v_cache || !out || !expected) {
        fprintf(stderr, "consumer_c: out of host memory\n");
        return 1;
    }
    for (size_t i = 0; i < q_count; ++i)
        q[i] = random_f16();
    for (size_t i = 0; i < cache_count; ++i) {
        k_cache[i] = random_f16();
        v_cache[i] = random_f16();
    }
    int32_t pages[NUM_PAGES];
    for (int i = 0; i < NUM_PAGES; ++i)
        pages[i] = i;
    for (int i = NUM_PAGES - 1; i > 0; --i) {
        int j = (int)(next_random() % (uint32_t)(i + 1));
        int32_t t = pages[i];
        pages[i] = pages[j];
        pages[j] = t;
    }
    /* Each sequence gets the pages its length needs; the entries past them are never read. */
    int32_t block_table[NUM_SEQS * PAGES_PER_SEQ];
    int next_page = 0;
    for (int s = 0; s < NUM_SEQS; ++s)
        for (int p = 0; p < PAGES_PER_SEQ; ++p)
            block_table[s * PAGES_PER_SEQ + p] = p * PAGE_SIZE < kSeqLens[s] ? pages[next_page++] : -1;
    int32_t query_start_loc[NUM_SEQS + 1];
    for (int s = 0; s <= NUM_SEQS; ++s)
        query_start_loc[s] = s;
    for (size_t i = 0; i < q_count; ++i)
        out[i] = 0x7e00; /* NaN: a row the library forgets to write cannot pass */

    /* Buffers where the context wants them: host memory (reference) or device memory (GPU). */
    r35a_paged_attention_args args = {
        .struct_size = sizeof args,
        .q = consumer_memory_upload(&mem, q, q_count * sizeof *q),
        .k_cache = consumer_memory_upload(&mem, k_cache, cache_count * sizeof *k_cache),
        .v_cache = consumer_memory_upload(&mem, v_cache, cache_count * sizeof *v_cache),
        .out = consumer_memory_upload(&mem, out, q_count * sizeof *out),
        .seq_lens = consumer_memory_upload(&mem, kSeqLens, sizeof kSeqLens),
        .query_start_loc = consumer_memory_upload(&mem, query_start_loc, sizeof query_start_loc),
        .block_table = consumer_memory_upload(&mem, block_table, sizeof block_table),
        .alibi_slopes = NULL,
    };
    void *workspace = plan_info.workspace_bytes ? consumer_memory_upload(&mem, NULL, plan_info.workspace_bytes) : NULL;
    if (!args.q || !args.k_cache || !args.v_cache || !args.out || !args.seq_lens || !args.query_start_loc ||
        !args.block_table || (plan_info.workspace_bytes && !workspace)) {
        fprintf(stderr, "consumer_c: buffer allocation failed\n");
        return 1;
    }

    if ((st = r35a_paged_attention_run(ctx, plan, &args, workspace, plan_info.workspace_bytes, NULL)) != R35A_OK)
        return report_failure("r35a_paged_attention_run", st);
    if (consumer_memory_download(&mem, out, args.out, q_count * sizeof *out) != 0) {
        fprintf(stderr, "consumer_c: copying the output back failed\n");
        return 1;
    }

    expected_output(q, k_cache, v_cache, block_table, &desc, expected);
    const double tolerance = 2e-3; /* |out| <= 1: f16 rounding of the output is at most 2^-12 */
    double max_error = 0.0;
    size_t bad = 0;
    for (size_t i = 0; i < q_count; ++i) {
        double error = fabs(f16_to_double(out[i]) - expected[i]);
        if (!(error <= tolerance)) { /* NaN counts as bad */
            if (bad < 5)
                fprintf(stderr, "consumer_c: out[token %zu][head %zu][%zu] = %g, expected %g\n",
                        i / (NUM_Q_HEADS * HEAD_SIZE), i / HEAD_SIZE % NUM_Q_HEADS, i % HEAD_SIZE,
                        f16_to_double(out[i]), expected[i]);
            ++bad;
        }
        if (error > max_error)
            max_error = error;
    }
    printf("consumer_c: librdna35attn %s, backend %s (%s), implementation %s: max abs error %.3g over %zu "
           "outputs, %zu above %.0e\n",
           r35a_version_string(), ctx_info.backend_name, ctx_info.reason, plan_info.implementation, max_error,
           q_count, bad, tolerance);

    consumer_memory_free(&mem, (void *)args.q);
    consumer_memory_free(&mem, (void *)args.k_cache);
    consumer_memory_free(&mem, (void *)args.v_cache);
    consumer_memory_free(&mem, args.out);
    consumer_memory_free(&mem, (void *)args.seq_lens);
    consumer_memory_free(&mem, (void *)args.query_start_loc);
    consumer_memory_free(&mem, (void *)args.block_table);
    consumer_memory_free(&mem, workspace);
    consumer_memory_close(&mem);
    r35a_plan_destroy(plan);
    r35a_context_destroy(ctx);
    free(q);
    free(k_cache);
    free(v_cache);
    free(out);
    free(expected);
    return bad == 0 ? 0 : 1;
}
