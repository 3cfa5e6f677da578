/* presets.c - the named sweeps of --preset. Each one is a product of shape lists; the flags it does
 * not set (dtype, window, contexts or segments where free, backend, measurement) still apply. */
#include "bench.h"

#include <stdlib.h>
#include <string.h>

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static int h200_decode(const bench_options *opt, bench_shape **shapes, int *count, int *cap);
static int gfx1151_decode(const bench_options *opt, bench_shape **shapes, int *count, int *cap);
static int encoder(const bench_options *opt, bench_shape **shapes, int *count, int *cap);
static int prefill(const bench_options *opt, bench_shape **shapes, int *count, int *cap);

const bench_preset bench_presets[] = {
    {"h200-decode",
     "lab/bench_gpu.py's decode sweep, 192 rows: D 64..512 x G 4,8 (8 kv heads)\n"
     "x M 1,4 x batch 1,16 x contexts 1K..32K, page 16",
     BENCH_OP_PAGED,
     BENCH_SETS_OP | BENCH_SETS_HEAD_SIZE | BENCH_SETS_HEADS | BENCH_SETS_PAGE_SIZE | BENCH_SETS_BATCH |
         BENCH_SETS_M | BENCH_SETS_CONTEXTS,
     0, NULL, h200_decode},
    {"gfx1151-decode",
     "the gfx1151 decode design, 192 rows per context: D 64..512 x page 16, 32,\n"
     "528, 544, 784, 1056 x M 1..8; 32/8 heads, context 4096 unless --contexts",
     BENCH_OP_PAGED, BENCH_SETS_OP | BENCH_SETS_HEAD_SIZE | BENCH_SETS_PAGE_SIZE | BENCH_SETS_M, 4096, NULL,
     gfx1151_decode},
    {"encoder",
     "docs/DESIGN.md section 2's 21 encoder shapes (D, heads), one call each of\n"
     "segments 577,577,577,577 unless --segments",
     BENCH_OP_ENCODER, BENCH_SETS_OP | BENCH_SETS_HEAD_SIZE | BENCH_SETS_HEADS, 0, "577,577,577,577",
     encoder},
    {"prefill",
     "prefill chunks and long speculative drafts, 24 rows: D 64, 128 x chunk 512..4096\n"
     "over prefixes 0..16K (batch 1), and M 16, 64 over 16 sequences at 8K; 32/8 heads, page 16",
     BENCH_OP_PAGED,
     BENCH_SETS_OP | BENCH_SETS_HEAD_SIZE | BENCH_SETS_HEADS | BENCH_SETS_PAGE_SIZE | BENCH_SETS_BATCH |
         BENCH_SETS_M | BENCH_SETS_CONTEXTS,
     0, NULL, prefill},
};
const int bench_num_presets = COUNT(bench_presets);

const bench_preset *bench_find_preset(const char *name)
{
    for (int i = 0; i < bench_num_presets; i++) {
        if (strcmp(bench_presets[i].name, name) == 0)
            return &bench_presets[i];
    }
    return NULL;
}

static int push(bench_shape **shapes, int *count, int *cap, const bench_shape *shape)
{
    if (*count == *cap) {
        int grown = *cap ? 2 * *cap : 256;
        bench_shape *p = realloc(*shapes, sizeof(bench_shape) * (size_t)grown);
        if (p == NULL)
            return -1;
        *shapes = p;
        *cap = grown;
    }
    (*shapes)[(*count)++] = *shape;
    return 0;
}

static bench_shape paged_base(const bench_options *opt)
{
    bench_shape s;
    memset(&s, 0, sizeof(s));
    s.op = BENCH_OP_PAGED;
    s.dtype = opt->dtype;
    s.head_size = opt->head_size;
    s.num_q_heads = opt->num_q_heads;
    s.num_kv_heads = opt->num_kv_heads;
    s.page_size = opt->page_size;
    s.batch = opt->batch;
    s.query_len = opt->query_len;
    s.window = opt->window;
    s.kv_dtype = opt->kv_dtype;
    s.kv_scales = opt->kv_scales;
    s.alibi = opt->alibi;
    s.sinks = opt->sinks;
    s.lse = opt->lse;
    s.softcap = opt->softcap;
    return s;
}

/* lab/bench_gpu.py's decode sweep, in its loop order (D, G, M, batch, context): 8 kv heads,
 * G query heads per kv head, page 16. */
static int h200_decode(const bench_options *opt, bench_shape **shapes, int *count, int *cap)
{
    static const int32_t heads[] = {64, 128, 256, 512}, groups[] = {4, 8}, ms[] = {1, 4}, batches[] = {1, 16};
    static const int32_t contexts[] = {1024, 2048, 4096, 8192, 16384, 32768};
    bench_shape s = paged_base(opt);
    s.page_size = 16;
    s.num_kv_heads = 8;
    for (int d = 0; d < COUNT(heads); d++)
        for (int g = 0; g < COUNT(groups); g++)
            for (int m = 0; m < COUNT(ms); m++)
                for (int b = 0; b < COUNT(batches); b++)
                    for (int c = 0; c < COUNT(contexts); c++) {
                        s.head_size = heads[d];
                        s.num_q_heads = 8 * groups[g];
                        s.query_len = ms[m];
                        s.batch = batches[b];
                        s.context = contexts[c];
                        if (push(shapes, count, cap, &s) != 0)
                            return -1;
                    }
    return 0;
}

/* docs/DESIGN.md section 1: head sizes, the page sizes of gemma-4 and the hybrid Qwen models, M 1..8;
 * heads, batch, window and contexts from the flags (default 32/8 heads, batch 1, context 4096). */
static int gfx1151_decode(const bench_options *opt, bench_shape **shapes, int *count, int *cap)
{
    static const int32_t heads[] = {64, 128, 256, 512}, pages[] = {16, 32, 528, 544, 784, 1056};
    bench_shape s = paged_base(opt);
    for (int d = 0; d < COUNT(heads); d++)
        for (int p = 0; p < COUNT(pages); p++)
            for (int32_t m = 1; m <= 8; m++)
                for (int c = 0; c < opt->num_contexts; c++) {
                    s.head_size = heads[d];
                    s.page_size = pages[p];
                    s.query_len = m;
                    s.context = opt->contexts[c];
                    if (push(shapes, count, cap, &s) != 0)
                        return -1;
                }
    return 0;
}

/* docs/DESIGN.md section 2's shapes to serve well, D: q heads (= kv heads), 21 in all. */
static int encoder(const bench_options *opt, bench_shape **shapes, int *count, int *cap)
{
    static const struct {
        int32_t head_size, heads;
    } list[] = {
        {32, 4},   {32, 8},   {32, 16},  {32, 32},  {48, 32},  {64, 4},   {64, 6},
        {64, 8},   {64, 12},  {64, 14},  {64, 16},  {64, 20},  {64, 24},  {64, 64},
        {72, 16},  {80, 16},  {128, 4},  {128, 8},  {128, 12}, {128, 16}, {128, 24},
    };
    bench_shape s;
    memset(&s, 0, sizeof(s));
    s.op = BENCH_OP_ENCODER;
    s.dtype = opt->dtype;
    s.causal = opt->causal;
    s.sinks = opt->sinks;
    s.lse = opt->lse;
    s.softcap = opt->softcap;
    for (int i = 0; i < COUNT(list); i++)
        for (int r = 0; r < opt->num_segment_rows; r++) {
            s.head_size = list[i].head_size;
            s.num_q_heads = s.num_kv_heads = list[i].heads;
            s.segment_first = opt->segment_row_start[r];
            s.num_segments = opt->segment_row_start[r + 1] - opt->segment_row_start[r];
            if (push(shapes, count, cap, &s) != 0)
                return -1;
        }
    return 0;
}

/* Prefill (a chunk of M query tokens over a prefix of cached keys: context = prefix + M) and
 * speculative decode with long drafts: 32 query heads on 8 kv heads, page 16. */
static int prefill(const bench_options *opt, bench_shape **shapes, int *count, int *cap)
{
    static const int32_t heads[] = {64, 128};
    static const struct {
        int32_t m, prefix, batch;
    } calls[] = {
        {512, 0, 1},     {1024, 0, 1},     {2048, 0, 1},  {4096, 0, 1},  {512, 4096, 1}, {1024, 8192, 1},
        {2048, 16384, 1}, {4096, 16384, 1}, {512, 16384, 1}, {2048, 4096, 1}, {16, 8192 - 16, 16}, {64, 8192 - 64, 16},
    };
    bench_shape s = paged_base(opt);
    s.page_size = 16;
    s.num_q_heads = 32;
    s.num_kv_heads = 8;
    for (int d = 0; d < COUNT(heads); d++)
        for (int c = 0; c < COUNT(calls); c++) {
            s.head_size = heads[d];
            s.query_len = calls[c].m;
            s.batch = calls[c].batch;
            s.context = calls[c].prefix + calls[c].m;
            if (push(shapes, count, cap, &s) != 0)
                return -1;
        }
    return 0;
}
