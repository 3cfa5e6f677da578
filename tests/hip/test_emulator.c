/*
 * test_emulator.c - the library's own gfx1151 path, executed: public API -> dispatch -> planner ->
 * src/gpu_impls.c -> src/backend_hip.c -> hipModuleLaunchKernel, with the embedded gfx1151 code
 * objects run on the gfx11 ISA emulator by the executing stand-in HIP runtime (r35a_emu_hip:
 * tests/hip/fake_hip.c + emu_exec.c + emu_runtime.py, loaded through R35A_HIP_LIBRARY).
 *
 * The cases run through the GPU case driver test_gpu_cuda shares (tests/gpu_cases.c); this program
 * adds the emulator's memory (exact allocations, misaligned and sparse uploads, a kept workspace),
 * the plan checks against the formulas and the launch-record checks, as the driver's hooks.
 * Every problem comes from tests/harness (fresh random inputs, NaN in every input element a kernel
 * must not read, invalid page ids in block-table entries no query reaches, poisoned outputs inside
 * guard bytes) and is compared with the float64 oracle (tests/oracle.c). Buffers are exactly sized
 * hipMalloc allocations, and every launch runs with gfx11emu's check_bounds: a read or write outside
 * them fails the launch, the stream's synchronization and so the case. The workspace starts as
 * garbage, as a caller's scratch would: 0xFF bytes, NaN as f32, so a split record read that no
 * split wrote reaches the output even with a weight of 0.
 *
 * Beyond the output, each case checks what the library did: the plan's implementation (the planner
 * must choose the variant the case is sized for), its grid, block, split count and workspace against
 * the formulas of kernels/common for the device's real CU count (the stand-in reports WGPs, as ROCm
 * does on RDNA: 20 on a 40-CU Radeon 8060S), and the launches the stand-in recorded (no memset at
 * all): a split launch followed by its split merge (decode_merge_<dtype>, its grid by the formula),
 * the generic launch of a mixed batch, the portable kernel alone for misaligned pointers. At the end
 * every gfx1151 kernel of variants.def of the families run, and both split merges, must have been
 * executed at least once.
 *
 *   decode   per 16-bit decode variant: partial last pages with L = 0 and L = 1 sequences, a window
 *            over garbage block-table entries with padded strides and sinks, split-KV with the
 *            workspace reused (two problems of one plan on one workspace: the second run finds the
 *            first's records), the same with softcap + ALiBi + sinks (decode_features), two
 *            row groups (R = 32), L == M, a mixed batch (not on rows 4: a mixed batch's decode
 *            launch is planned for M = 8); M 1-8 over the variants (1-4 on the rows-4 variants, the
 *            G x M <= 4 calls they serve); misaligned K for some; pages beyond 2^32
 *            elements for D = 128; split counts that differ between the two reported CU counts
 *            for two variants. The stand-in reports 20 (a Radeon 8060S's WGPs) and then 40 units:
 *            under the second every case is planned and checked, and those split cases run again.
 *            decode_lse (under 20 units): the LSE output on decode plans (gpu_cases.c
 *            gc_decode_lse_cases: one split and several, the few-row, 16- and 32-row layers, sinks,
 *            softcap + ALiBi, a window, a mixed batch, 8-bit caches); decode_lse_bad: the LSE of
 *            rows the device checks poison (a bad seq_len, a page outside the cache) is NaN;
 *            kv_token_scales: per-token-head scales (gc_kv_token_scale_cases), which the decode
 *            kernels decline: the plan must be the portable kernel's and say why.
 *   decode8  per 8-bit (fp8 e4m3, int8) decode variant: the partial case with per-tensor scales,
 *            the window case (per-kv-head scales, slots padded by 16 elements) and the features case;
 *            every stored code through the D = 256 variants of rows 4 and 16 (decode8_codes).
 *   generic  the portable kernel (all 8): softcap, ALiBi, odd page sizes, windows over garbage,
 *            prefill and mixed batches, head sizes up to dmax, sinks, fp8/int8 KV caches (every
 *            code), pages beyond 2^32 elements, varlen causal / GQA / fused, a misaligned K.
 *   encoder  every encoder variant, sized from its tiling (small-problem variants: segments up to
 *            their maxlen): mixed segment lengths with 0 and 1, fused qkv with an empty segment,
 *            growing keys over long or many segments for half, misaligned pointers for some.

 *
 * Options: --only decode|decode8|generic|encoder (a comma list; decode: the 16-bit K/V variants,
 * decode8: the 8-bit ones). Exit 0 all passed, 1 any failure; never
 * "skipped": a missing emulator or a context that is not the HIP one is a failure.
 * Budget: R35A_EMULATOR_BUDGET_S (default 300; 0: none). The emulator runs a case in seconds on an
 * idle core and several times that on a busy one, so the whole list may not fit a ctest timeout:
 * after the budget no case starts that would only execute kernels already executed, and the run
 * passes on the cases it ran ("ran N of M cases ..., every variant once"). Each variant's first case
 * runs before any variant's second, and a case whose plan names a kernel not yet executed always
 * runs: every kernel runs at least once whatever the budget.
 * Replay: R35A_TEST_SEED=<seed> (printed first), one case: R35A_TEST_CASE=<group>:<index>.
 */
#define _POSIX_C_SOURCE 200809L
#include "fake_hip.h"
#include "gpu_cases.h"
#include "harness.h"
#include "test_util.h"

#include "encoder/encoder_args.h"
#include "encoder/prefill_args.h"
#include "decode/decode_args.h"
#include "generic/generic_args.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ROCm reports hipDeviceAttributeMultiprocessorCount (hipDeviceProp_t.multiProcessorCount) in WGPs
 * on RDNA; each WGP has 2 CUs, and the planner's formula counts CUs. A gfx11 CU has 2 SIMD32s.
 * (Facts about the hardware, stated here independently of the library's arch table.) */
#define CUS_PER_REPORTED_UNIT 2
#define SIMDS_PER_CU 2

/* ---- the stand-in runtime's entry points ---- */

typedef struct stand_in {
    int (*Malloc)(void **ptr, size_t bytes);
    int (*Free)(void *ptr);
    int (*Memcpy)(void *dst, const void *src, size_t bytes, int kind);
    int (*Memset)(void *dst, int value, size_t bytes);
    int (*StreamCreateWithFlags)(void **stream, unsigned flags);
    int (*StreamSynchronize)(void *stream);
    int (*StreamDestroy)(void *stream);
    int (*emulator_errors)(void);
    const char *(*emulator_last_error)(void);
    void (*emulator_stats)(long *launches, double *seconds);
    int (*emulator_pending)(void);
    fake_hip_count_fn num_launches, num_memsets;
    fake_hip_launch_fn launch;
    fake_hip_memset_fn memset;
    fake_hip_order_fn call_order;
    fake_hip_reset_fn reset_records;
} stand_in;

static stand_in hip;
static void *g_stream;
static int g_device_failures;

static bool load_stand_in(void)
{
    const char *path = getenv("R35A_HIP_LIBRARY");
    if (!path || !path[0]) {
        printf("FAIL: R35A_HIP_LIBRARY does not name the executing stand-in runtime (r35a_emu_hip)\n");
        return false;
    }
    /* The same object the library dlopens (one copy of the runtime's state). */
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        printf("FAIL: dlopen %s: %s\n", path, dlerror());
        return false;
    }
    struct {
        const char *name;
        void **slot;
    } syms[] = {
#define SYM(field, name) {name, (void **)&hip.field}
        SYM(Malloc, "hipMalloc"), SYM(Free, "hipFree"), SYM(Memcpy, "hipMemcpy"), SYM(Memset, "hipMemset"),
        SYM(StreamCreateWithFlags, "hipStreamCreateWithFlags"), SYM(StreamSynchronize, "hipStreamSynchronize"),
        SYM(StreamDestroy, "hipStreamDestroy"), SYM(emulator_errors, "fake_hip_emulator_errors"),
        SYM(emulator_last_error, "fake_hip_emulator_last_error"), SYM(emulator_stats, "fake_hip_emulator_stats"),
        SYM(emulator_pending, "fake_hip_emulator_pending"), SYM(num_launches, "fake_hip_num_launches"),
        SYM(num_memsets, "fake_hip_num_memsets"), SYM(launch, "fake_hip_launch"), SYM(memset, "fake_hip_memset"),
        SYM(call_order, "fake_hip_call_order"), SYM(reset_records, "fake_hip_reset_records"),
#undef SYM
    };
    for (size_t i = 0; i < sizeof syms / sizeof *syms; ++i) {
        void *fn = dlsym(lib, syms[i].name);
        if (!fn) {
            printf("FAIL: %s lacks %s: not the executing stand-in (r35a_emu_hip)\n", path, syms[i].name);
            return false;
        }
        memcpy(syms[i].slot, &fn, sizeof fn);
    }
    return true;
}

static void check_hip(int e, const char *what)
{
    if (e != 0) {
        printf("FAIL %s: hip error %d\n", what, e);
        ++g_device_failures;
    }
}

/* ---- device memory for the harness ----
 * Exactly sized allocations. Two test-only twists, both set around one case:
 *   g_misalign_host: the upload of that host buffer returns a pointer `g_misalign_bytes` past a
 *     16-byte boundary (the allocation is that much larger, the tail is what the kernel may use);
 *   g_keep_workspace: the workspace outlives the run, and the
 *     next run of the same size gets it back as the previous run left it (a plan reused on one
 *     workspace). */

static const void *g_misalign_host;
static size_t g_misalign_bytes;
static bool g_keep_workspace;
static void *g_workspace;          /* the last workspace handed out */
static size_t g_workspace_bytes;
static void *g_kept_workspace;
static size_t g_kept_workspace_bytes;

/* Big offsets: K and V uploaded `g_big.pages` pages up in a sparse allocation (so page offsets pass
 * 2^32 elements) and the block table's valid entries shifted by as much; nothing else moves. */
static struct {
    int32_t pages, valid_pages;
    const void *k_host, *v_host, *table_host;
    size_t k_shift_bytes, v_shift_bytes;
} g_big;

#define MAX_OFFSET_BUFFERS 8
static struct {
    void *user, *base;
} g_offset_buffers[MAX_OFFSET_BUFFERS];

static void *upload_shifted(const void *host, size_t bytes, size_t shift)
{
    void *base = NULL;
    check_hip(hip.Malloc(&base, shift + bytes), "hipMalloc (sparse)");
    if (base)
        check_hip(hip.Memcpy((unsigned char *)base + shift, host, bytes, 1 /* hipMemcpyHostToDevice */),
                  "hipMemcpy H2D");
    return base;
}

static void *upload_shifted_table(const int32_t *host, size_t bytes)
{
    int32_t *copy = malloc(bytes);
    if (!copy)
        return NULL;
    for (size_t i = 0; i < bytes / sizeof *copy; ++i)
        copy[i] = host[i] >= 0 && host[i] < g_big.valid_pages ? host[i] + g_big.pages : host[i];
    void *p = NULL;
    check_hip(hip.Malloc(&p, bytes), "hipMalloc");
    if (p)
        check_hip(hip.Memcpy(p, copy, bytes, 1 /* hipMemcpyHostToDevice */), "hipMemcpy H2D");
    free(copy);
    return p;
}

static void *dev_upload(void *user, const void *host, size_t bytes)
{
    (void)user;
    if (g_big.pages && host == g_big.k_host)
        return upload_shifted(host, bytes, g_big.k_shift_bytes);
    if (g_big.pages && host == g_big.v_host)
        return upload_shifted(host, bytes, g_big.v_shift_bytes);
    if (g_big.pages && host == g_big.table_host)
        return upload_shifted_table(host, bytes);
    size_t offset = host == g_misalign_host ? g_misalign_bytes : 0;
    void *base = NULL;
    check_hip(hip.Malloc(&base, (bytes ? bytes : 16) + offset), "hipMalloc");
    if (!base)
        return NULL;
    void *p = (unsigned char *)base + offset;
    if (bytes)
        check_hip(hip.Memcpy(p, host, bytes, 1 /* hipMemcpyHostToDevice */), "hipMemcpy H2D");
    if (offset) {
        for (int i = 0; i < MAX_OFFSET_BUFFERS; ++i)
            if (!g_offset_buffers[i].user) {
                g_offset_buffers[i].user = p;
                g_offset_buffers[i].base = base;
                break;
            }
    }
    return p;
}

static void dev_download(void *user, void *host, const void *buffer, size_t bytes)
{
    (void)user;
    check_hip(hip.Memcpy(host, buffer, bytes, 2 /* hipMemcpyDeviceToHost */), "hipMemcpy D2H");
}

static void *dev_alloc(void *user, size_t bytes)
{
    (void)user;
    if (g_keep_workspace && g_kept_workspace && g_kept_workspace_bytes == bytes) {
        g_workspace = g_kept_workspace;
        return g_workspace;
    }
    void *p = NULL;
    check_hip(hip.Malloc(&p, bytes), "hipMalloc workspace");
    if (p)
        check_hip(hip.Memset(p, 0xFF, bytes), "hipMemset workspace");   /* NaN as f32: a record read
                                                                             * that no split wrote shows */
    if (g_keep_workspace) {
        g_kept_workspace = p;
        g_kept_workspace_bytes = bytes;
    }
    g_workspace = p;
    g_workspace_bytes = bytes;
    return p;
}

static void dev_release(void *user, void *buffer, const void *host)
{
    (void)user;
    (void)host;
    if (!buffer || buffer == g_kept_workspace)
        return;
    for (int i = 0; i < MAX_OFFSET_BUFFERS; ++i)
        if (g_offset_buffers[i].user == buffer) {
            buffer = g_offset_buffers[i].base;
            g_offset_buffers[i].user = g_offset_buffers[i].base = NULL;
        }
    check_hip(hip.Free(buffer), "hipFree");
}

static int dev_sync(void *user, void *stream)
{
    (void)user;
    int e = hip.StreamSynchronize(stream);
    if (e != 0)
        printf("  hipStreamSynchronize: error %d: %s\n", e, hip.emulator_last_error());
    return e != 0;
}

static tu_mem g_mem = {"gfx11emu", dev_upload, dev_download, dev_alloc, dev_release, dev_sync, NULL, NULL};

static void release_kept_workspace(void)
{
    void *p = g_kept_workspace;
    g_kept_workspace = NULL;
    g_keep_workspace = false;
    if (p)
        check_hip(hip.Free(p), "hipFree workspace");
}

/* ---- the kernels of gfx1151 (the registry: gpu_cases.h) ---- */

/* the split merges (kernels/decode/decode.hip): every decode code object has both */
static const char *const k_merge[] = {"decode_merge_f16", "decode_merge_bf16"};

#define ARCH "gfx1151"

/* R35A_EMULATOR_BUDGET_S's default: the floor (every kernel once) plus as many cases as fit; the
 * ctest TIMEOUT (tests/CMakeLists.txt) leaves room for the floor on a busy core after it. */
#define EMU_DEFAULT_BUDGET_S 300.0

/* ---- what the plan must be, from kernels/common's formulas ---- */

static int g_reported_cus; /* what the stand-in reports for the context under test */

static bool same_launch_shape(const char *label, const char *what, const uint32_t got_grid[3],
                              const uint32_t want_grid[3], uint32_t got_block, uint32_t want_block)
{
    if (memcmp(got_grid, want_grid, 3 * sizeof(uint32_t)) == 0 && got_block == want_block)
        return true;
    printf("FAIL %s: %s grid %ux%ux%u block %u, the formula gives grid %ux%ux%u block %u\n", label, what,
           got_grid[0], got_grid[1], got_grid[2], got_block, want_grid[0], want_grid[1], want_grid[2], want_block);
    return false;
}

/* Row groups of the decode launch of desc with R = rows: the decode part of a mixed batch has M
 * capped at R35A_DECODE_MAX_QUERY_LEN (the sequences above it run on the portable kernel). */
static int32_t decode_row_groups(const r35a_paged_attention_desc *d, int32_t rows)
{
    const int32_t m = d->max_query_len < R35A_DECODE_MAX_QUERY_LEN ? d->max_query_len : R35A_DECODE_MAX_QUERY_LEN;
    return r35a_decode_num_row_groups(d->num_q_heads / d->num_kv_heads, m, rows);
}

/* The decode launch of a paged plan ("decode_..." or "decode_...+generic_paged_..."). */
static bool check_decode_plan(const char *label, const r35a_plan_info *info, const r35a_paged_attention_desc *d)
{
    const char *plus = strchr(info->implementation, '+');
    size_t len = plus ? (size_t)(plus - info->implementation) : strlen(info->implementation);
    const gc_decode_variant *v = gc_decode_named(info->implementation, len);
    if (!v) {
        printf("FAIL %s: plan names %s, not a decode variant of the registry\n", label, info->implementation);
        return false;
    }
    const int32_t real_cus = g_reported_cus * CUS_PER_REPORTED_UNIT;
    const int32_t mql = d->max_query_len < R35A_DECODE_MAX_QUERY_LEN ? d->max_query_len : R35A_DECODE_MAX_QUERY_LEN;
    const int32_t row_groups = decode_row_groups(d, v->rows);
    const int32_t splits = r35a_decode_num_splits(d->num_seqs, d->num_kv_heads, row_groups, d->max_seq_len, mql,
                                                  d->window, real_cus,
                                                  r35a_decode_resident_wgs_per_cu(SIMDS_PER_CU, v->waves, r35a_decode_waves(v->kw, v->dw, v->rw)),
                                                  R35A_DECODE_MIN_TILES_PER_SPLIT);
    uint32_t grid[3];
    r35a_decode_grid(d->num_seqs, d->num_kv_heads, row_groups, splits, grid);
    const int64_t ws = r35a_decode_workspace_bytes(d->num_seqs, d->num_kv_heads, row_groups, splits, v->rows,
                                                   v->head);
    bool ok = same_launch_shape(label, "decode plan", info->grid, grid, info->block[0],
                                r35a_decode_block_threads(v->kw, v->dw, v->rw));
    if (info->num_splits != splits || (int64_t)info->workspace_bytes != ws) {
        printf("FAIL %s: plan has %d splits and %zu workspace bytes; for %d CUs (the stand-in reports %d WGPs) the "
               "formula gives %d splits and %lld bytes\n", label, info->num_splits, info->workspace_bytes, real_cus,
               g_reported_cus, splits, (long long)ws);
        ok = false;
    }
    return ok;
}

static bool check_generic_plan(const char *label, const r35a_plan_info *info, int32_t num_tokens, int32_t hq)
{
    uint32_t grid[3];
    r35a_generic_grid(num_tokens, hq, grid);
    bool ok = same_launch_shape(label, "generic plan", info->grid, grid, info->block[0], R35A_GENERIC_THREADS);
    if (info->num_splits != 1 || info->workspace_bytes != 0) {
        printf("FAIL %s: a generic plan with %d splits and %zu workspace bytes\n", label, info->num_splits,
               info->workspace_bytes);
        ok = false;
    }
    return ok;
}

static bool check_encoder_plan(const char *label, const r35a_plan_info *info, const r35a_varlen_attention_desc *d)
{
    const gc_encoder_variant *v = gc_encoder_named(info->implementation);
    if (!v) {
        printf("FAIL %s: plan names %s, not an encoder variant of the registry\n", label, info->implementation);
        return false;
    }
    uint32_t grid[3];
    r35a_encoder_variant_grid(v->rows, v->nw, v->maxlen, d->num_segments, d->max_seqlen, d->num_q_heads, grid);
    return same_launch_shape(label, "encoder plan", info->grid, grid, info->block[0],
                             r35a_encoder_block_threads(v->nw));
}

/* An encoder variant's paged sibling ("encoder_..._paged", prefill_args.h): its grid from num_seqs,
 * max_query_len and Hq, no workspace. */
static bool check_prefill_plan(const char *label, const r35a_plan_info *info, const r35a_paged_attention_desc *d)
{
    char base[128];
    const char *impl = info->implementation;
    const size_t n = strlen(impl);
    const gc_encoder_variant *v = NULL;
    if (n > 6 && n - 6 < sizeof base && strcmp(impl + n - 6, "_paged") == 0) {
        memcpy(base, impl, n - 6);
        base[n - 6] = '\0';
        v = gc_encoder_named(base);
    }
    if (!v || v->maxlen != 0) {
        printf("FAIL %s: plan names %s, not the paged sibling of a workgroup-wide encoder variant\n", label, impl);
        return false;
    }
    /* items are (sequence, kv head), the kv head's query heads packed: M x G rows each */
    const int64_t rows = (int64_t)d->max_query_len * (d->num_q_heads / d->num_kv_heads), r = v->rows * v->nw;
    const uint32_t grid[3] = {(uint32_t)(d->num_seqs * ((rows + r - 1) / r)), (uint32_t)d->num_kv_heads, 1u};
    bool ok = same_launch_shape(label, "prefill plan", info->grid, grid, info->block[0], r35a_encoder_block_threads(v->nw));
    if (info->num_splits != 1 || info->workspace_bytes != 0) {
        printf("FAIL %s: a prefill plan with %d splits and %zu workspace bytes\n", label, info->num_splits,
               info->workspace_bytes);
        ok = false;
    }
    return ok;
}

/* ---- what the library launched ---- */

/* The recorded calls must be `order` ("M" memset, "L" launch: the library issues no memset) with
 * launch i of kernel prefix kernels[i], all on the test's stream; the first launch's grid and block
 * are the plan's unless it is a fallback, a decode split merge's are its formula's (merge_grid).
 * Marks the kernels as executed. */
static bool check_records(const char *label, const char *order, const char *const kernels[3],
                          const r35a_plan_info *info, bool fallback, const uint32_t merge_grid[3])
{
    bool ok = strcmp(hip.call_order(), order) == 0;
    if (!ok)
        printf("FAIL %s: the library called \"%s\" (M memset, L launch), the case expects \"%s\"\n", label,
               hip.call_order(), order);
    for (int i = 0; ok && i < hip.num_launches(); ++i) {
        const fake_launch *l = hip.launch(i);
        if (strncmp(l->kernel, kernels[i], strlen(kernels[i])) != 0 || l->stream != g_stream) {
            printf("FAIL %s: launch %d is %s on stream %p, the case expects %s... on %p\n", label, i, l->kernel,
                   l->stream, kernels[i], g_stream);
            ok = false;
        }
        if (ok && i == 0 && !fallback) {
            const uint32_t grid[3] = {l->grid[0], l->grid[1], l->grid[2]};
            ok = same_launch_shape(label, "launch", grid, info->grid, l->block[0], info->block[0]);
        }
        if (ok && strncmp(l->kernel, "decode_merge_", 13) == 0) {
            const uint32_t grid[3] = {l->grid[0], l->grid[1], l->grid[2]};
            ok = same_launch_shape(label, "split merge launch", grid, merge_grid, l->block[0], R35A_DECODE_MERGE_THREADS);
        }
        if (ok)
            gc_note_executed(l->kernel);
    }
    return ok;
}

/* ---- running one case ---- */

/* Moves p's pages up past 2^32 elements of K and V: num_pages grows, the uploads shift (g_big). */
static void set_big_offsets(paged_problem *p)
{
    const int64_t stride = p->desc.k_page_stride > p->desc.v_page_stride ? p->desc.v_page_stride
                                                                          : p->desc.k_page_stride;
    const int64_t pages = (((int64_t)1 << 32) + stride - 1) / stride + 1;
    const size_t es = tu_dtype_size(p->spec.dtype);
    g_big.pages = (int32_t)pages;
    g_big.valid_pages = p->num_pages;
    g_big.k_host = p->k;
    g_big.v_host = p->v;
    g_big.table_host = p->block_table;
    g_big.k_shift_bytes = (size_t)pages * (size_t)p->desc.k_page_stride * es;
    g_big.v_shift_bytes = (size_t)pages * (size_t)p->desc.v_page_stride * es;
    p->desc.num_pages += (int32_t)pages;
}

static int g_reported_cus; /* what the stand-in reports for the context under test */

/* The records a paged run must leave, from its plan and the case: a decode plan launches its
 * variant, then its split merge (decode_merge_<dtype>, exactly when it has more than one split),
 * then the generic kernel or the encoder's paged sibling of a mixed batch (implementation
 * "decode_...[+decode_merge_...][+generic_... | +encoder_..._paged]"); a prefill plan is one launch;
 * merge_grid gets the split merge's grid by decode_args.h's formula. */
static void expected_paged_records(const r35a_plan_info *info, const r35a_paged_attention_desc *d, bool fallback,
                                   char order[8], const char *kernels[3], char fallback_name[64],
                                   uint32_t merge_grid[3])
{
    order[0] = '\0';
    memset(merge_grid, 0, 3 * sizeof(uint32_t));
    static char names[3][128];
    if (fallback) {
        snprintf(fallback_name, 64, "generic_paged_%s_", d->dtype == R35A_DTYPE_BF16 ? "bf16" : "f16");
        kernels[0] = fallback_name;
        strcat(order, d->num_tokens > 0 ? "L" : "");
        return;
    }
    int nn = 0;
    for (const char *p = info->implementation; nn < 3 && *p;) {
        const char *plus = strchr(p, '+');
        size_t len = plus ? (size_t)(plus - p) : strlen(p);
        const size_t keep = len < sizeof names[0] - 1 ? len : sizeof names[0] - 1;
        memcpy(names[nn], p, keep);
        names[nn++][keep] = '\0';
        p += len + (plus ? 1 : 0);
    }
    if (strncmp(names[0], "decode_", 7) != 0) { /* a generic plan: one launch */
        kernels[0] = names[0];
        strcat(order, info->grid[0] ? "L" : "");
        return;
    }
    /* the decode plan's launches: the variant, its merge with splits, the generic kernel last */
    static char expected[3][128];
    /* the launch of a mixed batch's longer sequences: the generic kernel or an encoder paged sibling */
    const bool merge = info->num_splits > 1,
               generic = nn > 1 && (strncmp(names[nn - 1], "generic_", 8) == 0 || strncmp(names[nn - 1], "encoder_", 8) == 0);
    snprintf(expected[0], sizeof expected[0], "%s", names[0]);
    snprintf(expected[1], sizeof expected[1], "%s", d->dtype == R35A_DTYPE_BF16 ? "decode_merge_bf16" : "decode_merge_f16");
    snprintf(expected[2], sizeof expected[2], "%s", generic ? names[nn - 1] : "");
    const gc_decode_variant *v = gc_decode_named(names[0], strlen(names[0]));
    if (merge && v) {
        const int32_t mql = d->max_query_len < R35A_DECODE_MAX_QUERY_LEN ? d->max_query_len : R35A_DECODE_MAX_QUERY_LEN;
        r35a_decode_merge_grid(d->num_seqs, d->num_kv_heads, decode_row_groups(d, v->rows), v->rows,
                               d->num_q_heads / d->num_kv_heads, mql, v->head, info->num_splits, merge_grid);
    }
    int n = 0;
    if (info->grid[0] && info->grid[1] && info->grid[2] && d->num_tokens > 0) {
        strcat(order, merge ? "LL" : "L");
        kernels[n++] = expected[0];
        if (merge)
            kernels[n++] = expected[1];
    }
    if (generic) {
        strcat(order, "L");
        kernels[n++] = expected[2];
    }
}

/* The plan's implementation names its launches: the decode variant, then decode_merge_<dtype>
 * exactly when it has more than one split, then the generic kernel of a mixed batch. */
static bool check_decode_implementation(const char *label, const r35a_plan_info *info, const r35a_paged_attention_desc *d,
                                        bool mixed)
{
    char want[sizeof info->implementation + 64] = "";
    const char *plus = strchr(info->implementation, '+');
    const size_t len = plus ? (size_t)(plus - info->implementation) : strlen(info->implementation);
    const char *last = strrchr(info->implementation, '+');
    memcpy(want, info->implementation, len);
    want[len] = '\0';
    if (info->num_splits > 1)
        strcat(want, d->dtype == R35A_DTYPE_BF16 ? "+decode_merge_bf16" : "+decode_merge_f16");
    if (mixed && last)
        strcat(want, last);
    if (strcmp(want, info->implementation) == 0)
        return true;
    printf("FAIL %s: the plan's implementation is %s, with %d splits%s it should be %s\n", label, info->implementation,
           info->num_splits, mixed ? " in a mixed batch" : "", want);
    return false;
}

/* ---- the driver's hooks: what the emulator adds to every case ----
 * prepare: big offsets move the pages up (the uploads shift, g_big); check_plan: the plan's grid,
 * block, splits and workspace against the formulas; before_run: the misaligned upload, the kept
 * workspace, a fresh launch record; after_run: the launches the stand-in recorded; after_case: no
 * emulator error and nothing left queued. */

static int g_errors_before;
static bool g_case_launched;

static void emu_prepare(gc_case *c)
{
    if (c->paged && c->opts->big_offsets)
        set_big_offsets(c->paged);
}

static bool emu_check_plan(gc_case *c)
{
    const r35a_plan_info *info = &c->info;
    if (c->paged) {
        const r35a_paged_attention_desc *d = &c->paged->desc;
        return strncmp(info->implementation, "decode_", 7) == 0
                   ? check_decode_plan(c->label, info, d) &&
                         check_decode_implementation(c->label, info, d, d->max_query_len > R35A_DECODE_MAX_QUERY_LEN)
               : strncmp(info->implementation, "encoder_", 8) == 0
                   ? check_prefill_plan(c->label, info, d)
                   : check_generic_plan(c->label, info, d->num_tokens, d->num_q_heads);
    }
    const r35a_varlen_attention_desc *d = &c->varlen->desc;
    return strncmp(info->implementation, "encoder_", 8) == 0 ? check_encoder_plan(c->label, info, d)
                                                             : check_generic_plan(c->label, info, d->num_tokens,
                                                                                  d->num_q_heads);
}

static void emu_before_run(gc_case *c)
{
    if (c->run == 0) {
        g_errors_before = hip.emulator_errors();
        g_case_launched = true;
        g_keep_workspace = true; /* for a second run's reuse (the records it finds are the first run's) */
    }
    if (c->paged)
        g_misalign_host = c->opts->misalign_k ? c->paged->k : NULL;
    else /* fused qkv: misaligning the one buffer moves q, k and v together */
        g_misalign_host = c->opts->misalign_k ? (c->varlen->qkv ? c->varlen->qkv : c->varlen->k) : NULL;
    g_misalign_bytes = c->opts->misalign_k ? 2 : 0;
    g_workspace = NULL;
    hip.reset_records();
}

static bool emu_after_run(gc_case *c)
{
    g_misalign_host = NULL;
    const bool fallback = c->opts->misalign_k;
    if (c->paged) {
        char order[8], fallback_name[64];
        const char *kernels[3] = {"", "", ""};
        uint32_t merge_grid[3];
        expected_paged_records(&c->info, &c->paged->desc, fallback, order, kernels, fallback_name, merge_grid);
        return check_records(c->label, order, kernels, &c->info, fallback, merge_grid);
    }
    char fallback_name[64];
    snprintf(fallback_name, sizeof fallback_name, "generic_varlen_%s_",
             c->varlen->spec.dtype == R35A_DTYPE_BF16 ? "bf16" : "f16");
    const char *kernels[3] = {fallback ? fallback_name : c->info.implementation, "", ""};
    const bool launches = fallback ? c->varlen->num_tokens > 0 : c->info.grid[0] > 0;
    const uint32_t no_merge[3] = {0, 0, 0};
    return check_records(c->label, launches ? "L" : "", kernels, &c->info, fallback, no_merge);
}

static bool emu_after_case(gc_case *c)
{
    const int32_t big_pages = g_big.pages;
    release_kept_workspace();
    memset(&g_big, 0, sizeof g_big);
    bool ok = true;
    if (g_case_launched && (hip.emulator_errors() != g_errors_before || hip.emulator_pending() != 0)) {
        printf("FAIL %s: %d emulator errors, %d operations left queued (last error: %s)\n", c->label,
               hip.emulator_errors() - g_errors_before, hip.emulator_pending(), hip.emulator_last_error());
        ok = false;
    }
    g_case_launched = false;
    if ((!ok || !c->ok) && big_pages)
        printf("  (big offsets: every page moved up by %d pages)\n", (int)big_pages);
    return ok;
}


/* ---- decode ---- */

/* Split-KV with the workspace reused: sequences of very different lengths under a larger
 * max_seq_len, two problems on one plan. 19 splits are planned (1200 keys, 4 workgroups wanting 80),
 * so the split merge runs 4 lanes per item; each sequence uses what its own length allows
 * (decode_args.h r35a_decode_seq_splits, 4 tiles a split): 1000 keys ~15, 520 keys ~8 (fewer
 * records than planned), 33 keys 1 (written directly, no record), an empty sequence none. The
 * merge's one-lane form (<= 8 planned splits) runs in decode_cu_splits (5 splits for 40 CUs) and the
 * mixed batches. */
static void decode_split_case(const gc_decode_variant *v, int m, int index, bool features)
{
    paged_spec s;
    const int hkv = 1;
    paged_spec_init(&s, v->dtype, gc_group_for(v, m) * hkv, hkv, v->head, 16);
    s.kv_dtype = v->kv;
    s.kv_scale_per_head = v->kv != 0;
    if (features) { /* the model features on the same splits: sinks join a row once (row_inv with one
                     * split, the merge's pass 2 otherwise), softcap and ALiBi in the key loop */
        s.logit_softcap = 8.f;
        s.use_alibi = 1;
        s.use_sinks = 1;
        s.sink_amp = 3.0;
        s.sink_some_neg_inf = true;
    }
    paged_spec_add_seq(&s, 1000, m);
    paged_spec_add_seq(&s, 520, m);
    paged_spec_add_seq(&s, 0, 0);
    paged_spec_add_seq(&s, 33, m);
    s.max_seq_len_slack = 200;
    s.shuffle_pages = true;
    const char *group = !features ? "decode_split_reuse" : v->kv ? "decode8_features" : "decode_features";
    gc_run_paged(&s, group, index, &(gc_case_opts){.expect = v->name, .mode = GC_RUN_REUSED_WORKSPACE});
}

/* A split count the CU count decides: 16 (sequence, kv head) workgroups want 80 / 16 = 5 splits on
 * 40 CUs and 10 on 80, and 1600 keys allow 25 (4 tiles a split): 5 splits merge with one lane per
 * item, 10 with four (decode_args.h r35a_decode_merge_lanes). O rows padded by odd element counts,
 * so they start at any even byte: the one-lane merge writes 4 adjacent elements, which clang once
 * merged into one 8-byte store that needs an aligned address (the emulator fuzz found a row written
 * 2 bytes early). */
static void decode_cu_split_case(const gc_decode_variant *v, int index)
{
    paged_spec s;
    const int hkv = 4;
    paged_spec_init(&s, v->dtype, gc_group_for(v, 1) * hkv, hkv, v->head, 32);
    for (int i = 0; i < 4; ++i)
        paged_spec_add_seq(&s, 1600 - 97 * i, 1);
    s.shuffle_pages = true;
    s.o_head_pad = 1;
    s.o_token_pad = 3;
    gc_run_paged(&s, "decode_cu_splits", index, &(gc_case_opts){.expect = v->name});
}

/* The LSE of rows the device checks poison (decode_args.h "Bad device metadata"): sequence 0's
 * seq_len above max_seq_len (its rows written NaN by bad_sequence) and a block-table entry of
 * sequence 1 outside the cache (its state NaN: with one split written directly, with several through
 * the split merge; index 2: the prefill sibling, its bad_item and its NaN l); sequence 2's LSE stays finite, the run reports R35A_ERR_INVALID_DATA at the next
 * check. Run outside the case driver: the output is not the oracle's. */
static void decode_lse_bad_case(int index)
{
    const char *group = "decode_lse_bad";
    if (!tu_case_selected(group, index))
        return;
    char label[64];
    snprintf(label, sizeof label, "%dwgp/%s:%d", g_reported_cus, group, index);
    paged_spec s;
    paged_spec_init(&s, R35A_DTYPE_F16, 8, 2, 64, 16);
    s.num_seqs = 0;
    /* index 2: every sequence longer than 8 query tokens (the decode launch of the mixed plan skips
     * them); index 3: one such sequence, the prefill sibling alone */
    const bool prefill = index >= 2;
    paged_spec_add_seq(&s, 60, prefill ? 20 : 1);
    if (index < 3) {
        paged_spec_add_seq(&s, index ? 300 : 40, prefill ? 40 : 4);
        paged_spec_add_seq(&s, 50, prefill ? 12 : 2);
    }
    s.use_lse = true;
    s.defer_oracle = true;
    tu_rng rng;
    tu_rng_init(&rng, tu_case_seed(group, index));
    paged_problem p;
    bool ok = paged_problem_init(&p, &s, &rng) == 0;
    if (!ok) {
        printf("FAIL %s: problem setup\n", label);
        gc_record(group, false, 0.0);
        return;
    }
    p.seq_lens[0] = p.desc.max_seq_len + 1;
    if (s.num_seqs > 1)
        p.block_table[(size_t)p.bt_stride + 1] = p.num_pages + 7;   /* sequence 1's second page */
    r35a_plan *plan = NULL;
    r35a_plan_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (r35a_paged_attention_plan(gc.ctx, &p.desc, &plan) != R35A_OK || r35a_plan_get_info(plan, &info) != R35A_OK ||
        (index == 3 ? strncmp(info.implementation, "encoder_", 8) != 0 : strncmp(info.implementation, "decode_", 7) != 0) ||
        (prefill ? !strstr(info.implementation, "_paged") : (index > 0) != (info.num_splits > 1))) {
        printf("FAIL %s: plan \"%s\" with %d splits (%s)\n", label, info.implementation, info.num_splits,
               r35a_last_error_detail());
        ok = false;
    }
    const size_t lse_bytes = sizeof(float) * p.lse.elems;
    for (size_t i = 0; i < p.lse.elems; ++i)   /* finite: poison bytes (0xFF) would read as NaN */
        p.lse.buf[i] = 1234.5f;
    g_keep_workspace = false;
    g_misalign_host = NULL;
    void *dq = g_mem.upload(NULL, p.q, p.q_bytes), *dk = g_mem.upload(NULL, p.k, p.k_bytes);
    void *dv = g_mem.upload(NULL, p.v, p.v_bytes), *dout = g_mem.upload(NULL, p.out_alloc, p.out_alloc_bytes);
    void *dsl = g_mem.upload(NULL, p.seq_lens, sizeof(int32_t) * (size_t)s.num_seqs);
    void *dqsl = g_mem.upload(NULL, p.query_start_loc, sizeof(int32_t) * ((size_t)s.num_seqs + 1));
    void *dbt = g_mem.upload(NULL, p.block_table, sizeof(int32_t) * p.bt_entries);
    void *dlse = g_mem.upload(NULL, p.lse.buf, lse_bytes);
    void *ws = info.workspace_bytes ? g_mem.alloc(NULL, info.workspace_bytes) : NULL;
    if (ok) {
        r35a_paged_attention_args a;
        memset(&a, 0, sizeof a);
        a.struct_size = sizeof a;
        a.q = dq;
        a.k_cache = dk;
        a.v_cache = dv;
        a.out = (uint8_t *)dout + p.out_guard_bytes;
        a.seq_lens = dsl;
        a.query_start_loc = dqsl;
        a.block_table = dbt;
        a.lse = dlse;
        hip.reset_records();
        if (r35a_paged_attention_run(gc.ctx, plan, &a, ws, info.workspace_bytes, g_stream) != R35A_OK ||
            g_mem.sync(NULL, g_stream) != 0) {
            printf("FAIL %s: run: %s\n", label, r35a_last_error_detail());
            ok = false;
        }
    }
    if (ok) {
        g_mem.download(NULL, p.lse.buf, dlse, lse_bytes);
        int bad = 0;
        for (int32_t q = 0; q < s.num_seqs; ++q)
            for (int32_t t = p.query_start_loc[q]; t < p.query_start_loc[q + 1]; ++t)
                for (int32_t h = 0; h < s.num_q_heads; ++h) {
                    const float got = p.lse.buf[(size_t)t * (size_t)p.lse.token_stride + (size_t)h];
                    if ((q < 2 ? !isnan(got) : !isfinite(got) || got == 1234.5f) && bad++ < 5)
                        printf("FAIL %s: LSE of sequence %d (token %d, head %d) is %g, expected %s\n", label, (int)q,
                               (int)t, (int)h, (double)got, q < 2 ? "NaN" : "finite (written)");
                }
        ok = bad == 0;
        const r35a_status st = r35a_context_check_device(gc.ctx);
        if (st != R35A_ERR_INVALID_DATA) {
            printf("FAIL %s: the device check reported %s\n", label, r35a_status_string(st));
            ok = false;
        }
    }
    (void)r35a_context_check_device(gc.ctx);   /* leave no record to the next case */
    r35a_plan_destroy(plan);
    g_mem.release(NULL, dq, p.q);
    g_mem.release(NULL, dk, p.k);
    g_mem.release(NULL, dv, p.v);
    g_mem.release(NULL, dout, p.out_alloc);
    g_mem.release(NULL, dsl, p.seq_lens);
    g_mem.release(NULL, dqsl, p.query_start_loc);
    g_mem.release(NULL, dbt, p.block_table);
    g_mem.release(NULL, dlse, p.lse.buf);
    if (ws)
        g_mem.release(NULL, ws, NULL);
    paged_problem_free(&p);
    gc_record(group, ok, 0.0);
    ++gc.cases_ran;
}

/* second_count: the context reports the second CU count, which changes split counts only: every
 * case is planned and its plan checked, and only the cases whose split count differs between the
 * two counts run. */
static bool family_selected(const char *only, const char *family);

/* The family a decode variant's cases run under: "decode" (16-bit K/V) or "decode8" (8-bit). */
static const char *decode_family(const gc_decode_variant *v)
{
    return v->kv ? "decode8" : "decode";
}

static void decode_cases(bool second_count, const char *only)
{
    int vi = 0;
    for (size_t i = 0; i < gc_num_decode; ++i) {
        const gc_decode_variant *v = &gc_decode[i];
        if (strcmp(v->arch, ARCH) != 0)
            continue;
        gc_begin_variant();
        if (!family_selected(only, decode_family(v))) {
            ++vi; /* case indices stay those of a whole run */
            continue;
        }
        const int m = gc_m_for(v, 1 + vi % 8); /* M = 1..8 over the variants (1..4 on rows 4) */
        const int m8 = gc_m_for(v, 8);          /* the largest M the variant serves, up to 8 */
        const int hkv = 2;
        const bool kv8 = v->kv != 0; /* an 8-bit variant: the cases that reach its own code (the
                                      * K/V loads and conversions, the scales); the rest of the
                                      * kernel is the 16-bit variants' */
        paged_spec s;
        gc.plan_only = second_count;
        /* (first: the variant's case of the floor under a spent budget, the cheapest) */
        /* partial last pages (page 32), an L = 0 padding sequence and an L = 1 one, shuffled pages */
        paged_spec_init(&s, v->dtype, gc_group_for(v, m) * hkv, hkv, v->head, 32);
        paged_spec_add_seq(&s, 37 + 11 * m, m);
        paged_spec_add_seq(&s, 0, 0);
        paged_spec_add_seq(&s, 1, 1);
        paged_spec_add_seq(&s, 100 + m, m);
        paged_spec_add_seq(&s, 69, m > 5 ? 5 : m);
        s.shuffle_pages = true;
        s.extra_pages = 3;
        s.kv_dtype = v->kv; /* an 8-bit cache's scales per tensor here */
        gc_run_paged(&s, kv8 ? "decode8_partial" : "decode_partial", vi, &(gc_case_opts){.expect = v->name});

        gc.plan_only = false;
        if (!kv8 && ((v->dtype == R35A_DTYPE_F16 && v->head == 128 && v->rows == 16) ||
                     (v->dtype == R35A_DTYPE_BF16 && v->head == 64 && v->rows == 32)))
            decode_cu_split_case(v, vi);
        gc.plan_only = second_count;
        if (!kv8)
            decode_split_case(v, m, vi, false);
        decode_split_case(v, gc_m_for(v, 1 + (vi + 5) % 8), vi, true);

        /* a window of 70 keys over garbage table entries, page 528, padded Q/O/K/V strides (8-bit
         * K/V rows padded by 16 elements: their strides must stay 16-byte multiples), with sinks
         * (gpt-oss: sinks on windowed layers; some heads -inf) */
        const int mw = gc_m_for(v, 1 + (vi + 3) % 8);
        paged_spec_init(&s, v->dtype, gc_group_for(v, mw) * hkv, hkv, v->head, 528);
        paged_spec_add_seq(&s, 1700, mw);
        paged_spec_add_seq(&s, 60, mw);
        s.window = 70;
        s.garbage_unreached = true;
        s.q_head_pad = 8;
        s.q_token_pad = 16;
        s.o_head_pad = 3;
        s.o_token_pad = 5;
        s.k_layout.pad[0] = kv8 ? 16 : 8;
        s.v_layout.pad[1] = 16;
        s.kv_dtype = v->kv;
        s.kv_scale_per_head = kv8;
        s.use_sinks = 1;
        s.sink_amp = 2.0;
        s.sink_some_neg_inf = true;
        gc_run_paged(&s, kv8 ? "decode8_window" : "decode_window", vi, &(gc_case_opts){.expect = v->name});
        /* bf16 queries with an 8-bit cache run f16 products (device.h qk_elem): query rows from 2^20
         * (above f16's range) down to 2^-20 (below its normals), elements within a row down to 2^-16
         * of the others, which f16 holds only through each row's own power-of-two scale; K at 2^-20
         * keeps the largest rows' logits near 1 */
        if (kv8 && v->dtype == R35A_DTYPE_BF16) {
            const int mq = gc_m_for(v, 1 + (vi + 1) % 8);
            paged_spec_init(&s, v->dtype, gc_group_for(v, mq) * hkv, hkv, v->head, 16);
            paged_spec_add_seq(&s, 300, mq);
            paged_spec_add_seq(&s, 45, mq);
            s.kv_dtype = v->kv;
            s.q_amp = ldexp(1.0, 20);
            s.k_amp = ldexp(1.0, -20);
            s.q_row_exp_drop = 40;
            s.q_elem_exp_drop = 16;
            gc_run_paged(&s, "decode8_qrange", vi, &(gc_case_opts){.expect = v->name});
        }
        if (kv8) {
            gc.plan_only = false;
            ++vi;
            continue;
        }

        /* two row groups (R = 32: G x M = 64), NHD cache */
        if (v->rows == 32) {
            paged_spec_init(&s, v->dtype, 8 * hkv, hkv, v->head, 16);
            paged_spec_add_seq(&s, 250, 8);
            paged_spec_add_seq(&s, 100, 8);
            s.k_layout.nhd = s.v_layout.nhd = true;
            gc_run_paged(&s, "decode_row_groups", vi, &(gc_case_opts){.expect = v->name});
        }

        /* mixed batch: the M = 9 sequence runs on the portable kernel in a second launch (kept
         * short: that kernel reads KV once per query row). The decode launch is planned for M = 8
         * (the host does not read which sequences are short): never a rows-4 variant. */
        if (v->rows >= 8) {
            paged_spec_init(&s, v->dtype, gc_group_for(v, 8) * hkv, hkv, v->head, 16);
            paged_spec_add_seq(&s, 200, 1);
            paged_spec_add_seq(&s, 12, 9);
            paged_spec_add_seq(&s, 0, 0);
            paged_spec_add_seq(&s, 133, 8);
            gc_run_paged(&s, "decode_mixed", vi, &(gc_case_opts){.expect = v->name});
        }

        /* L == M = 8 (4 on rows 4): every key is one of the new tokens (causal among them), page 784 */
        paged_spec_init(&s, v->dtype, gc_group_for(v, m8) * hkv, hkv, v->head, 784);
        paged_spec_add_seq(&s, m8, m8);
        paged_spec_add_seq(&s, m8 + 1, m8);
        gc_run_paged(&s, "decode_l_eq_m", vi, &(gc_case_opts){.expect = v->name});

        /* pages beyond 2^32 elements of K and V (page 544): 64-bit page offsets */
        if (v->head == 128 && v->rows == 16) {
            paged_spec_init(&s, v->dtype, gc_group_for(v, 2) * hkv, hkv, v->head, 544);
            paged_spec_add_seq(&s, 1200, 2);
            paged_spec_add_seq(&s, 45, 2);
            s.shuffle_pages = true;
            gc_run_paged(&s, "decode_big_offsets", vi, &(gc_case_opts){.expect = v->name, .big_offsets = true});
        }

        /* K 2 bytes off a 16-byte boundary: the portable kernel runs instead, whole (D = 64: the
         * portable kernel is slow on the emulator) */
        if (v->head == 64) {
            paged_spec_init(&s, v->dtype, gc_group_for(v, m) * hkv, hkv, v->head, 16);
            paged_spec_add_seq(&s, 81, m);
            paged_spec_add_seq(&s, 1, 1);
            gc_run_paged(&s, "decode_misaligned", vi, &(gc_case_opts){.expect = v->name, .misalign_k = true});
        }
        gc.plan_only = false;
        ++vi;
    }
}

/* ---- the portable kernel ---- */

static void generic_cases(void)
{
    int index = 0;
    const r35a_dtype dts[2] = {R35A_DTYPE_F16, R35A_DTYPE_BF16};
    for (int di = 0; di < 2; ++di) {
        const r35a_dtype dt = dts[di];
        paged_spec s;
        /* softcap decode: a partial last page, L = 0 and L = 1 sequences (page 24: not a multiple of
         * 16, so the decode kernels, which take softcap too, decline it) */
        paged_spec_init(&s, dt, 8, 2, 128, 24);
        paged_spec_add_seq(&s, 313, 1);
        paged_spec_add_seq(&s, 0, 0);
        paged_spec_add_seq(&s, 1, 1);
        paged_spec_add_seq(&s, 40, 1);
        s.logit_softcap = 30.f;
        gc_run_paged(&s, "generic_paged", index++, &(gc_case_opts){.expect = "generic_paged_"});
        /* ALiBi, chunked prefill, odd page size, shuffled pages; again with K misaligned */
        paged_spec_init(&s, dt, 6, 3, 64, 7);
        paged_spec_add_seq(&s, 50, 12);
        paged_spec_add_seq(&s, 23, 23);
        s.use_alibi = 1;
        s.shuffle_pages = true;
        gc_run_paged(&s, "generic_paged", index++, &(gc_case_opts){.expect = "generic_paged_"});
        gc_run_paged(&s, "generic_paged", index++, &(gc_case_opts){.expect = "generic_paged_", .misalign_k = true});
        /* a head size no variant has, page 5, window over garbage entries + softcap + ALiBi, padding */
        paged_spec_init(&s, dt, 4, 2, 96, 5);
        paged_spec_add_seq(&s, 300, 3);
        paged_spec_add_seq(&s, 0, 0);
        paged_spec_add_seq(&s, 41, 12);
        s.window = 17;
        s.logit_softcap = 20.f;
        s.use_alibi = 1;
        s.garbage_unreached = true;
        s.q_token_pad = 3;
        s.o_head_pad = 1;
        gc_run_paged(&s, "generic_paged", index++, &(gc_case_opts){.expect = "generic_paged_"});
        /* a mixed batch with softcap on page 24: the portable kernel serves it whole, one launch */
        paged_spec_init(&s, dt, 4, 2, 64, 24);
        paged_spec_add_seq(&s, 120, 1);
        paged_spec_add_seq(&s, 30, 9);
        paged_spec_add_seq(&s, 77, 4);
        s.logit_softcap = 15.f;
        gc_run_paged(&s, "generic_paged", index++, &(gc_case_opts){.expect = "generic_paged_"});
        /* the wide kernel: D = 512 on page 13 (decode declines the page size), D = 1000 (f16) or
         * its dmax 1024 (bf16) */
        paged_spec_init(&s, dt, 4, 1, 512, 13);
        paged_spec_add_seq(&s, 90, 2);
        gc_run_paged(&s, "generic_paged", index++, &(gc_case_opts){.expect = "generic_paged_"});
        paged_spec_init(&s, dt, 2, 1, dt == R35A_DTYPE_F16 ? 1000 : 1024, 16);
        paged_spec_add_seq(&s, 40, 1);
        gc_run_paged(&s, "generic_paged", index++, &(gc_case_opts){.expect = "generic_paged_"});
        /* pages beyond 2^32 elements of K and V: 64-bit page offsets; page 40 keeps decode out */
        paged_spec_init(&s, dt, 4, 2, 64, 40);
        paged_spec_add_seq(&s, 100, 1);
        paged_spec_add_seq(&s, 37, 3);
        s.logit_softcap = 10.f;
        s.shuffle_pages = true;
        gc_run_paged(&s, "generic_paged_big_offsets", index++, &(gc_case_opts){.expect = "generic_paged_", .big_offsets = true});

        /* attention sinks (some heads without: -inf) with a window, M 1 .. 17, an empty sequence;
         * page 24 (a mixed batch on page 16 would go to decode and the portable kernel) */
        paged_spec_init(&s, dt, 6, 2, 64, 24);
        paged_spec_add_seq(&s, 130, 1);
        paged_spec_add_seq(&s, 40, 8);
        paged_spec_add_seq(&s, 0, 0);
        paged_spec_add_seq(&s, 29, 17);
        s.window = 128;
        s.use_sinks = 1;
        s.sink_amp = 2.0;
        s.sink_some_neg_inf = true;
        gc_run_paged(&s, "generic_paged_sinks_kv8", index++, &(gc_case_opts){.expect = "generic_paged_"});
        /* 8-bit KV caches (the kernel's run-time KV dtype), on each kernel's dmax or near it:
         * fp8 per tensor; int8 per kv head with sinks, softcap, a window and padded slots over an odd
         * page; fp8 per kv head with sinks and ALiBi (pages 24 and 40 keep the decode kernels out) */
        paged_spec_init(&s, dt, 4, 2, dt == R35A_DTYPE_F16 ? 256 : 1024, 24);
        paged_spec_add_seq(&s, 37, 1);
        paged_spec_add_seq(&s, 70, 4);
        paged_spec_add_seq(&s, 0, 0);
        s.kv_dtype = R35A_DTYPE_FP8_E4M3;
        gc_run_paged(&s, "generic_paged_sinks_kv8", index++, &(gc_case_opts){.expect = "generic_paged_"});
        paged_spec_init(&s, dt, 6, 3, dt == R35A_DTYPE_F16 ? 64 : 600, 7);
        paged_spec_add_seq(&s, 45, 2);
        paged_spec_add_seq(&s, 18, 18);
        paged_spec_add_seq(&s, 9, 1);
        s.window = 20;
        s.kv_dtype = R35A_DTYPE_INT8;
        s.kv_scale_per_head = 1;
        s.use_sinks = 1;
        s.sink_amp = 1.0;
        s.logit_softcap = 10.f;
        s.k_layout.pad[1] = 5;
        s.v_layout.pad[1] = 5;
        gc_run_paged(&s, "generic_paged_sinks_kv8", index++, &(gc_case_opts){.expect = "generic_paged_"});
        paged_spec_init(&s, dt, 8, 2, 64, 40);
        paged_spec_add_seq(&s, 100, 8);
        paged_spec_add_seq(&s, 33, 3);
        s.kv_dtype = R35A_DTYPE_FP8_E4M3;
        s.kv_scale_per_head = 1;
        s.use_sinks = 1;
        s.sink_amp = 1.0;
        s.use_alibi = 1;
        gc_run_paged(&s, "generic_paged_sinks_kv8", index++, &(gc_case_opts){.expect = "generic_paged_"});

        varlen_spec v;
        /* the portable kernel's varlen features, on head sizes no encoder variant has (the encoder
         * serves sinks and softcap on its own): causal GQA with sinks */
        varlen_spec_init(&v, dt, 6, 2, 56);
        varlen_spec_add_segment(&v, 30);
        varlen_spec_add_segment(&v, 0);
        varlen_spec_add_segment(&v, 9);
        v.causal = 1;
        v.use_sinks = 1;
        v.sink_amp = 2.0;
        gc_run_varlen(&v, "generic_varlen", index++, &(gc_case_opts){.expect = "generic_varlen_"});
        /* non-causal with sinks, an empty segment */
        varlen_spec_init(&v, dt, 4, 4, 96);
        varlen_spec_add_segment(&v, 25);
        varlen_spec_add_segment(&v, 0);
        varlen_spec_add_segment(&v, 40);
        v.use_sinks = 1;
        v.sink_amp = 2.0;
        gc_run_varlen(&v, "generic_varlen", index++, &(gc_case_opts){.expect = "generic_varlen_"});
        /* causal GQA with softcap, an empty and a one-token segment */
        varlen_spec_init(&v, dt, 8, 2, 112);
        varlen_spec_add_segment(&v, 40);
        varlen_spec_add_segment(&v, 0);
        varlen_spec_add_segment(&v, 1);
        varlen_spec_add_segment(&v, 17);
        v.causal = 1;
        v.logit_softcap = 25.f;
        gc_run_varlen(&v, "generic_varlen", index++, &(gc_case_opts){.expect = "generic_varlen_"});
        /* non-causal GQA (head size 40: no encoder variant), fused qkv, odd head size */
        varlen_spec_init(&v, dt, 6, 2, 40);
        varlen_spec_add_segment(&v, 33);
        varlen_spec_add_segment(&v, 1);
        v.layout = VARLEN_FUSED;
        v.token_pad[0] = 5;
        gc_run_varlen(&v, "generic_varlen", index++, &(gc_case_opts){.expect = "generic_varlen_"});
        /* head sizes above every encoder variant: dmax 256 itself, and the wide varlen kernel */
        varlen_spec_init(&v, dt, 2, 2, 256);
        varlen_spec_add_segment(&v, 19);
        gc_run_varlen(&v, "generic_varlen", index++, &(gc_case_opts){.expect = "generic_varlen_"});
        varlen_spec_init(&v, dt, 2, 2, 300);
        varlen_spec_add_segment(&v, 20);
        varlen_spec_add_segment(&v, 0);
        gc_run_varlen(&v, "generic_varlen", index++, &(gc_case_opts){.expect = "generic_varlen_"});
    }
}

/* Every stored code of both 8-bit KV dtypes through the portable kernel (page 8) and through the
 * D = 256 decode variants of its format (page 16): one sequence of one key (its softmax weight is
 * exactly 1), V holding the 256 codes, v_scale 1 and an f16 output, which holds every e4m3 and int8
 * value exactly: out[e] must be the code's value (fp8 e4m3: the code's magnitude bits in an f16's
 * place are value / 2^8; int8: two's complement), NaN for S.1111.111. Cases 2 and 3 are fp8 again
 * with the two NaN codes replaced by +-0, so the gfx11 decode kernel converts V on its fast path
 * (device.h kv8x2_fast: taken where a wave's operand holds no NaN code): every other code must still
 * be exact; case 3 also puts the NaN code 0xff in the key (element 5), so K takes the exact path and
 * every output must be NaN; case 4 is case 2 with bf16 queries and output (the bf16 variant's fast
 * path; bf16 holds every e4m3 value exactly too). The decode cases run twice: with one query head
 * (G = 1: the rows-4 variants, whose 8-bit K is loaded and converted a half-wave at a time,
 * decode/rows4_gfx11.h k8_split) and with 8 (cases 5-9: the rows-16 variants, frag::k8_operand). */
enum { KV8_CODES_MAX_G = 8 };
static void kv8_codes_cases(bool decode)
{
    const r35a_dtype kv_dtypes[5] = {R35A_DTYPE_FP8_E4M3, R35A_DTYPE_INT8, R35A_DTYPE_FP8_E4M3, R35A_DTYPE_FP8_E4M3,
                                     R35A_DTYPE_FP8_E4M3};
    for (int kd = 0; kd < (decode ? 10 : 5); ++kd) {
        const int kc = kd % 5, G = kd < 5 ? 1 : KV8_CODES_MAX_G;
        const bool fp8 = kc != 1, v_nan_codes = kc == 0, k_nan_code = kc == 3, bf16 = kc == 4;
        const char *group = decode ? "decode8_codes" : "generic_kv8_codes";
        char expect[64];
        if (decode)
            snprintf(expect, sizeof expect, "decode_%s_%s_d256_r%d_", bf16 ? "bf16" : "f16", fp8 ? "fp8" : "int8",
                     G == 1 ? 4 : 16);
        else
            snprintf(expect, sizeof expect, "%s", bf16 ? "generic_paged_bf16_" : "generic_paged_f16_");
        if (!tu_case_selected(group, kd))
            continue;
        char label[64];
        snprintf(label, sizeof label, "%dwgp/%s:%d", g_reported_cus, group, kd);
        r35a_paged_attention_desc d;
        r35a_paged_attention_desc_init(&d, bf16 ? R35A_DTYPE_BF16 : R35A_DTYPE_F16, 1, 1, 1, 1, G, 1, 256, decode ? 16 : 8, 1);
        d.kv_dtype = kv_dtypes[kc];
        uint8_t k[16 * 256] = {0}, v[16 * 256] = {0};
        for (int c = 0; c < 256; ++c)
            v[c] = (uint8_t)(fp8 && !v_nan_codes && (c & 0x7F) == 0x7F ? c & 0x80 : c);
        if (k_nan_code)
            k[5] = 0xFF;
        uint16_t q[KV8_CODES_MAX_G * 256] = {0}, out[KV8_CODES_MAX_G * 256];
        memset(out, 0xFF, sizeof out);
        const float k_scale = 2.0f, v_scale = 1.0f;
        const int32_t seq_lens[1] = {1}, qsl[2] = {0, 1}, bt[1] = {0};
        r35a_plan *plan = NULL;
        r35a_plan_info info;
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        bool ok = r35a_paged_attention_plan(gc.ctx, &d, &plan) == R35A_OK && r35a_plan_get_info(plan, &info) == R35A_OK;
        if (!ok || strncmp(info.implementation, expect, strlen(expect)) != 0) {
            printf("FAIL %s: plan %s (%s)\n", label, info.implementation, r35a_last_error_detail());
            ok = false;
        }
        if (ok && gc_budget_skips(info.implementation)) {
            r35a_plan_destroy(plan);
            continue;
        }
        const int errors_before = hip.emulator_errors();
        void *dq = NULL, *dk = NULL, *dv = NULL, *dout = NULL, *dsl = NULL, *dqsl = NULL, *dbt = NULL, *dks = NULL,
             *dvs = NULL;
        if (ok) {
            dq = dev_upload(NULL, q, sizeof q);
            dk = dev_upload(NULL, k, sizeof k);
            dv = dev_upload(NULL, v, sizeof v);
            dout = dev_upload(NULL, out, sizeof out);
            dsl = dev_upload(NULL, seq_lens, sizeof seq_lens);
            dqsl = dev_upload(NULL, qsl, sizeof qsl);
            dbt = dev_upload(NULL, bt, sizeof bt);
            dks = dev_upload(NULL, &k_scale, sizeof k_scale);
            dvs = dev_upload(NULL, &v_scale, sizeof v_scale);
            r35a_paged_attention_args a;
            memset(&a, 0, sizeof a);
            a.struct_size = sizeof a;
            a.q = dq;
            a.k_cache = dk;
            a.v_cache = dv;
            a.out = dout;
            a.seq_lens = dsl;
            a.query_start_loc = dqsl;
            a.block_table = dbt;
            a.k_scale = dks;
            a.v_scale = dvs;
            ok = r35a_paged_attention_run(gc.ctx, plan, &a, NULL, 0, g_stream) == R35A_OK && dev_sync(NULL, g_stream) == 0;
            if (ok)
                dev_download(NULL, out, dout, sizeof out);
            else
                printf("FAIL %s: run: %s\n", label, r35a_last_error_detail());
        }
        int bad = 0;
        for (int e = 0; ok && e < G * 256; ++e) {   /* every query head: the same single key */
            const int c = e % 256, code = v[c];
            double want = fp8 ? tu_f16_to_double((uint16_t)((code & 0x7F) << 7)) * 256.0 * (code & 0x80 ? -1.0 : 1.0)
                              : (double)(code < 128 ? code : code - 256);
            const bool nan_code = k_nan_code || (fp8 && (code & 0x7F) == 0x7F);
            const double got = bf16 ? tu_bf16_to_double(out[e]) : tu_f16_to_double(out[e]);
            if (nan_code ? !isnan(got) : got != want) {
                if (bad++ < 6)
                    printf("FAIL %s: head %d code 0x%02x: library %.9g, want %.9g\n", label, e / 256, c, got,
                           nan_code ? NAN : want);
            }
        }
        ok = ok && bad == 0 && hip.emulator_errors() == errors_before;
        void *bufs[] = {dq, dk, dv, dout, dsl, dqsl, dbt, dks, dvs};
        for (size_t i = 0; i < sizeof bufs / sizeof *bufs; ++i)
            dev_release(NULL, bufs[i], NULL);
        r35a_plan_destroy(plan);
        if (ok)
            gc_note_executed(info.implementation);
        else
            printf("  replay: R35A_TEST_SEED=0x%016llx R35A_TEST_CASE=%s:%d\n", (unsigned long long)tu_seed(), group, kd);
        if (ok && tu_verbose())
            printf("  ok %s [%s]: all 256 %s codes exact\n", label, info.implementation,
                   !fp8 ? "int8" : k_nan_code ? "fp8 e4m3 (NaN key)" : v_nan_codes ? "fp8 e4m3"
                   : bf16 ? "fp8 e4m3 (no NaN code, bf16)" : "fp8 e4m3 (no NaN code)");
        gc_record(group, ok, 0.0);
    }
}

/* ---- encoder ---- */

/* Sizes from each variant's tiling: a small-problem variant (maxlen > 0) serves calls with
 * max_seqlen <= maxlen, and the planner prefers it there; a workgroup-wide one gets longer segments. */
static void encoder_cases(void)
{
    int index = 0;
    for (size_t i = 0; i < gc_num_encoder; ++i) {
        const gc_encoder_variant *e = &gc_encoder[i];
        if (strcmp(e->arch, ARCH) != 0)
            continue;
        gc_begin_variant();
        const int32_t L = e->maxlen; /* 0: no bound */
        varlen_spec v;
        /* mixed lengths: 1, not multiples of 16, an empty one, several in one call (small-problem
         * variants: the longest is maxlen itself) */
        varlen_spec_init(&v, e->dtype, 3, 3, e->head);
        varlen_spec_add_segment(&v, 1);
        varlen_spec_add_segment(&v, 37);
        varlen_spec_add_segment(&v, 0);
        varlen_spec_add_segment(&v, L ? L : 100);
        varlen_spec_add_segment(&v, 16);
        gc_run_varlen(&v, "encoder_mixed", index, &(gc_case_opts){.expect = e->name});
        /* fused qkv read in place with an empty segment, padded O, max_seqlen above every segment */
        varlen_spec_init(&v, e->dtype, 2, 2, e->head);
        varlen_spec_add_segment(&v, L ? L - 3 : 70);
        varlen_spec_add_segment(&v, 0);
        varlen_spec_add_segment(&v, L ? 17 : 129);
        v.layout = VARLEN_FUSED;
        v.token_pad[0] = 8;
        v.token_pad[3] = 8;
        v.head_pad[3] = 8;
        v.max_seqlen_slack = L ? 3 : 40;
        gc_run_varlen(&v, "encoder_fused", index, &(gc_case_opts){.expect = e->name});
        /* long: several row and key blocks, a partial last block, keys growing along the segment
         * (the lazy rescale); small-problem variants: 13 segments of 1 .. maxlen tokens (several
         * groups per workgroup, a partial last workgroup) */
        if (index % 4 == 2 || (L && index % 4 == 3)) {
            varlen_spec_init(&v, e->dtype, 2, 2, e->head);
            if (L) {
                for (int k = 0; k < 13; ++k)
                    varlen_spec_add_segment(&v, 1 + (k * (L - 1)) / 12);
            } else {
                varlen_spec_add_segment(&v, 300);
            }
            v.q_amp = v.k_amp = 1.7320508; /* unit variance: logits of standard deviation ~1, */
            v.k_growth = 6.0; /* ~7 at the end of a segment: the running max rises by far more than the
                                 kernel's lazy-rescale threshold, again and again */
            gc_run_varlen(&v, "encoder_long", index, &(gc_case_opts){.expect = e->name});
        }
        /* causal and GQA, run-time arguments of every variant: causal with 2 query heads per kv head
         * over segments of 1, a partial block, an empty one, the variant's longest (several key
         * blocks: the skipped and the masked diagonal blocks) and 2 x rows + 3; every other variant
         * also GQA 4:1 without the mask */
        varlen_spec_init(&v, e->dtype, 4, 2, e->head);
        v.causal = 1;
        varlen_spec_add_segment(&v, 1);
        varlen_spec_add_segment(&v, 37);
        varlen_spec_add_segment(&v, 0);
        varlen_spec_add_segment(&v, L ? L : 200);
        varlen_spec_add_segment(&v, 2 * e->rows + 3);
        gc_run_varlen(&v, "encoder_causal_gqa", index, &(gc_case_opts){.expect = e->name});
        if (index % 2 == 0) {
            varlen_spec_init(&v, e->dtype, 4, 1, e->head);
            varlen_spec_add_segment(&v, L ? L : 150);
            varlen_spec_add_segment(&v, 19);
            gc_run_varlen(&v, "encoder_gqa", index, &(gc_case_opts){.expect = e->name});
        }
        /* softcap, sinks and the LSE output (run-time arguments of every variant), in rotation, causal
         * or not, 6 query heads on 2 kv heads, a fused qkv buffer every fourth variant */
        varlen_spec_init(&v, e->dtype, 6, 2, e->head);
        varlen_spec_add_segment(&v, L ? L : 170);
        varlen_spec_add_segment(&v, 0);
        varlen_spec_add_segment(&v, 23);
        v.causal = index % 2;
        v.layout = index % 4 == 3 ? VARLEN_FUSED : VARLEN_SEPARATE;
        if (index % 3 != 1) {
            v.use_sinks = 1;
            v.sink_amp = 3.0;
        }
        if (index % 3 != 2)
            v.logit_softcap = index % 2 ? 15.f : 40.f;
        v.use_lse = index % 3 != 0;
        v.lse_pad = index % 2;
        gc_run_varlen(&v, "encoder_features", index, &(gc_case_opts){.expect = e->name});
        /* misaligned K: the portable kernel serves the call */
        if (index % 6 == 1 || index % 12 == 4) {
            varlen_spec_init(&v, e->dtype, 2, 2, e->head);
            varlen_spec_add_segment(&v, L ? 20 : 70);
            varlen_spec_add_segment(&v, 1);
            gc_run_varlen(&v, "encoder_misaligned", index, &(gc_case_opts){.expect = e->name, .misalign_k = true});
        }
        ++index;
    }
}

/* ---- prefill: the encoder variants' paged siblings ---- */

/* A block-table entry outside the cache in a page a chunk reaches (prefill_args.h): the sibling never
 * dereferences it (the emulator's bounds checks), the rows that reach it are NaN (the others of its
 * sequence NaN or right), the other sequence's rows are right, nothing outside the output rows is
 * written, and the context reports R35A_ERR_INVALID_DATA naming block_table and the sequence. */
static void prefill_bad_page_case(const gc_encoder_variant *e, const char *paged_name, int index)
{
    const char *group = "prefill_bad_page";
    if (!gc_case_in_pass() || !tu_case_selected(group, index))
        return;
    char label[160];
    snprintf(label, sizeof label, "%s/%s:%d", gc.prefix, group, index);
    paged_spec s;
    paged_spec_init(&s, e->dtype, 2, 1, e->head, 16);
    paged_spec_add_seq(&s, 40, 10);
    paged_spec_add_seq(&s, 200, 150);   /* rows i >= 30 (positions >= 80) reach keys 80..95, page entry 5 */
    const int32_t bad_entry = 5, bad_first_pos = 80;
    tu_rng rng;
    tu_rng_init(&rng, tu_case_seed(group, index));
    paged_problem p;
    bool ok = paged_problem_init(&p, &s, &rng) == 0;
    if (!ok) {
        printf("FAIL %s: the harness could not build the problem\n", label);
        gc_record(group, false, 0.0);
        return;
    }
    r35a_plan *plan = NULL;
    r35a_plan_info info = {.struct_size = sizeof info};
    if (r35a_paged_attention_plan(gc.ctx, &p.desc, &plan) != R35A_OK || r35a_plan_get_info(plan, &info) != R35A_OK) {
        printf("FAIL %s: plan: %s\n", label, r35a_last_error_detail());
        ok = false;
    }
    const char *last = ok ? strrchr(info.implementation, '+') : NULL;
    if (ok && strcmp(last ? last + 1 : info.implementation, paged_name) != 0) {
        printf("FAIL %s: the plan is %s, the case is for %s\n", label, info.implementation, paged_name);
        ok = false;
    }
    if (ok && gc_budget_skips(info.implementation)) {
        r35a_plan_destroy(plan);
        paged_problem_free(&p);
        return;
    }
    if (ok) {
        const tu_mem *m = gc.mem;
        p.block_table[(size_t)p.bt_stride + (size_t)bad_entry] = p.desc.num_pages + 7;
        tu_poison(p.out_alloc, p.out_alloc_bytes);
        const int errors_before = hip.emulator_errors();
        hip.reset_records();
        void *dq = m->upload(m->user, p.q, p.q_bytes), *dk = m->upload(m->user, p.k, p.k_bytes);
        void *dv = m->upload(m->user, p.v, p.v_bytes), *dout = m->upload(m->user, p.out_alloc, p.out_alloc_bytes);
        void *dsl = m->upload(m->user, p.seq_lens, sizeof(int32_t) * (size_t)s.num_seqs);
        void *dqsl = m->upload(m->user, p.query_start_loc, sizeof(int32_t) * ((size_t)s.num_seqs + 1));
        void *dbt = m->upload(m->user, p.block_table, sizeof(int32_t) * p.bt_entries);
        void *ws = info.workspace_bytes ? m->alloc(m->user, info.workspace_bytes) : NULL;
        r35a_paged_attention_args a = {.struct_size = sizeof a, .q = dq, .k_cache = dk, .v_cache = dv,
                                       .out = (uint8_t *)dout + p.out_guard_bytes, .seq_lens = dsl,
                                       .query_start_loc = dqsl, .block_table = dbt};
        if (r35a_paged_attention_run(gc.ctx, plan, &a, ws, info.workspace_bytes, m->stream) != R35A_OK ||
            m->sync(m->user, m->stream) != 0) {
            printf("FAIL %s: run: %s\n", label, r35a_last_error_detail());
            ok = false;
        }
        m->download(m->user, p.out_alloc, dout, p.out_alloc_bytes);
        for (int i = 0; i < hip.num_launches(); ++i)
            gc_note_executed(hip.launch(i)->kernel);
        m->release(m->user, dq, p.q);
        m->release(m->user, dk, p.k);
        m->release(m->user, dv, p.v);
        m->release(m->user, dout, p.out_alloc);
        m->release(m->user, dsl, p.seq_lens);
        m->release(m->user, dqsl, p.query_start_loc);
        m->release(m->user, dbt, p.block_table);
        if (ws)
            m->release(m->user, ws, NULL);
        if (hip.emulator_errors() != errors_before) {
            printf("FAIL %s: %d emulator errors (last: %s)\n", label, hip.emulator_errors() - errors_before,
                   hip.emulator_last_error());
            ok = false;
        }
        /* the rows */
        const r35a_dtype dt = s.dtype;
        const size_t es = tu_dtype_size(dt), guard = p.out_guard_bytes / es;
        const double tol = tu_tolerance(dt) * (p.ref_max > 1e-6 ? p.ref_max : 1e-6);
        int bad_rows = 0;
        for (int32_t q = 0; q < s.num_seqs; ++q)
            for (int32_t i = 0; i < s.q_len[q]; ++i) {
                const int32_t t = p.query_start_loc[q] + i, pos = s.seq_len[q] - s.q_len[q] + i;
                for (int32_t h = 0; h < s.num_q_heads; ++h) {
                    const size_t base = guard + (size_t)(t * p.desc.o_token_stride + h * p.desc.o_head_stride);
                    const double *ref = p.ref + ((size_t)t * (size_t)s.num_q_heads + (size_t)h) * (size_t)s.head_size;
                    bool all_nan = true, all_right = true;
                    for (int32_t el = 0; el < s.head_size; ++el) {
                        const double x = tu_load(dt, p.out_alloc, base + (size_t)el);
                        const bool poison = tu_elem_is_poison(dt, p.out_alloc, base + (size_t)el);
                        all_nan = all_nan && !poison && isnan(x);
                        all_right = all_right && !poison && isfinite(x) && fabs(x - ref[el]) <= tol;
                    }
                    const bool want_nan = q == 1 && pos >= bad_first_pos;
                    const bool row_ok = want_nan ? all_nan : q == 1 ? all_nan || all_right : all_right;
                    if (!row_ok && bad_rows++ < 4)
                        printf("FAIL %s: row (token %d, head %d) of sequence %d is %s\n", label, (int)t, (int)h,
                               (int)q, want_nan ? "not all NaN" : "wrong");
                }
            }
        for (size_t b = 0; b < p.out_alloc_bytes; ++b)
            if (!p.out_mask[b] && p.out_alloc[b] != TU_POISON_BYTE) {
                printf("FAIL %s: output byte %zu outside the rows was written\n", label, b);
                ++bad_rows;
                break;
            }
        ok = ok && bad_rows == 0;
        const r35a_status st = r35a_context_check_device(gc.ctx);
        if (st != R35A_ERR_INVALID_DATA ||
            !strstr(r35a_last_error_detail(), "paged_attention_args.block_table: sequence 1 ")) {
            printf("FAIL %s: the context reports %s (%s), not the bad page of sequence 1\n", label,
                   r35a_status_string(st), r35a_last_error_detail());
            ok = false;
        }
        (void)r35a_context_check_device(gc.ctx);   /* cleared */
    }
    if (!ok)
        printf("  replay: R35A_TEST_SEED=0x%016llx R35A_TEST_CASE=%s:%d\n", (unsigned long long)tu_seed(), group, index);
    else if (tu_verbose())
        printf("  ok %s [%s]: NaN rows, INVALID_DATA\n", label, info.implementation);
    gc_record(group, ok, 0.0);
    r35a_plan_destroy(plan);
    paged_problem_free(&p);
}

/* Per workgroup-wide encoder variant, its paged sibling (prefill_args.h): causal chunks over the
 * paged cache with chunk lengths that are not multiples of the tile (9, 16, 64, 77, 150: one and two
 * row blocks), prefixes 0 and > 0 (L > M), pages of 16, 48 and 272 keys (a 32-key block spans two
 * 16-key pages; 48 and 272 put page ends inside blocks), GQA 4:1, 3:1 and 1:1 (the packed rows); a batch with short rows
 * (M <= 8: the decode launch where a decode variant of the head size exists, else the sibling serves
 * them too), an empty sequence, M = L, padded Q / O and NHD strides; the model features (window,
 * sinks, softcap, ALiBi, LSE) in rotation; pages beyond 2^32 elements and a
 * misaligned K (the portable kernel serves the run) once per dtype; a bad page index for a few. */
static void prefill_cases(void)
{
    int pi = 0;
    for (size_t i = 0; i < gc_num_encoder; ++i) {
        const gc_encoder_variant *e = &gc_encoder[i];
        if (strcmp(e->arch, ARCH) != 0 || e->maxlen != 0)
            continue;
        gc_begin_variant();
        char paged_name[160];
        snprintf(paged_name, sizeof paged_name, "%s_paged", e->name);
        /* a batch of several sequences plans the decode launch beside the sibling where a decode
         * variant of the head size exists (D 64 and 128) */
        const bool decode_too = e->head == 64 || e->head == 128;
        static const int pages[3] = {16, 48, 272};
        static const int ms[5] = {77, 9, 16, 64, 150}, prefixes[5] = {0, 150, 35, 300, 20};
        const int page = pages[pi % 3], m = ms[pi % 5], prefix = prefixes[pi % 5];
        const bool gqa = pi % 2 == 0;
        paged_spec s;
        /* one sequence: the sibling alone; 4 query heads on 1 kv head, 2 on 2, or 6 on 2 (packed rows of
         * 3 heads: a group that is not a power of two) */
        static const int hq[3] = {4, 2, 6}, hkv[3] = {1, 2, 2};
        paged_spec_init(&s, e->dtype, hq[pi % 3], hkv[pi % 3], e->head, page);
        paged_spec_add_seq(&s, prefix + m, m);
        s.shuffle_pages = true;
        s.garbage_unreached = true;
        gc_run_paged(&s, "prefill_chunk", pi, &(gc_case_opts){.expect = paged_name});
        /* a batch: decode rows beside the chunks */
        paged_spec_init(&s, e->dtype, gqa ? 2 : 4, gqa ? 2 : 1, e->head, pages[(pi + 1) % 3]);
        paged_spec_add_seq(&s, 121, 1);
        paged_spec_add_seq(&s, 100 + 64, 64);
        paged_spec_add_seq(&s, 0, 0);
        paged_spec_add_seq(&s, 16, 16);
        paged_spec_add_seq(&s, 45, 9);
        paged_spec_add_seq(&s, 7, 3);
        s.shuffle_pages = true;
        s.q_token_pad = 8;
        s.o_token_pad = 16;
        s.k_layout.nhd = s.v_layout.nhd = pi % 3 == 1;
        s.use_lse = pi % 3 == 2;   /* both launches write it */
        gc_run_paged(&s, "prefill_batch", pi, &(gc_case_opts){.expect = decode_too ? "decode_" : paged_name,
                                                              .expect_last = paged_name});
        /* pages beyond 2^32 elements of K and V: 64-bit page offsets */
        if (e->head == 128) {
            paged_spec_init(&s, e->dtype, 2, 1, e->head, 544);
            paged_spec_add_seq(&s, 700, 40);
            s.shuffle_pages = true;
            gc_run_paged(&s, "prefill_big_offsets", pi, &(gc_case_opts){.expect = paged_name, .big_offsets = true});
        }
        /* the model features on the sibling (prefill_args.h): a window shorter than the chunk over a
         * prefix (pages before it hold invalid entries: never looked up), sinks, softcap, ALiBi and
         * the LSE output, rotated per variant; 6 query heads on 2 kv heads (packed rows of 3) */
        paged_spec_init(&s, e->dtype, 6, 2, e->head, pages[(pi + 2) % 3]);
        paged_spec_add_seq(&s, 200 + m, m);
        paged_spec_add_seq(&s, 40, 25);
        s.shuffle_pages = true;
        s.garbage_unreached = true;
        switch (pi % 4) {
        case 0:
            s.window = 40;
            s.use_sinks = 1;
            s.sink_amp = 3.0;
            s.sink_some_neg_inf = true;
            break;
        case 1:
            s.logit_softcap = 20.f;
            s.use_alibi = 1;
            s.use_lse = true;
            s.lse_pad = 1;
            break;
        case 2:
            s.window = 100;
            s.use_lse = true;
            s.use_sinks = 1;
            s.sink_center = 1.0;
            s.sink_amp = 2.0;
            s.use_alibi = 1;
            break;
        default:
            s.window = 7;
            s.logit_softcap = 10.f;
            s.use_sinks = 1;
            s.sink_amp = 2.0;
            s.use_lse = true;
            break;
        }
        gc_run_paged(&s, "prefill_features", pi, &(gc_case_opts){.expect = decode_too ? "decode_" : paged_name,
                                                                 .expect_last = paged_name});
        /* a page index outside the cache */
        if (pi % 4 == 1)
            prefill_bad_page_case(e, paged_name, pi);
        /* K 2 bytes off a 16-byte boundary: the portable kernel runs instead */
        if (e->head == 64) {
            paged_spec_init(&s, e->dtype, 2, 2, e->head, 16);
            paged_spec_add_seq(&s, 40, 20);
            gc_run_paged(&s, "prefill_misaligned", pi, &(gc_case_opts){.expect = paged_name, .misalign_k = true});
        }
        ++pi;
    }
}

/* ---- main ---- */

/* Where the stand-in, the emulator and its cache are: the build's paths (CMake) unless the
 * environment names others. tinygrad compiles each emulated instruction with $CC, which must be a
 * clang (a CC=gcc in the caller's environment would not do): always the build's. */
static void default_environment(void)
{
    const struct {
        const char *name, *value;
    } defaults[] = {{"R35A_HIP_LIBRARY", EMU_HIP_LIBRARY}, {"FAKE_HIP_GFX11EMU_DIR", EMU_GFX11EMU_DIR},
                    {"FAKE_HIP_PY_DIR", EMU_PY_DIR}, {"CACHEDB", EMU_CACHEDB}, {"FAKE_HIP_PYCACHE", EMU_PYCACHE},
                    {"FAKE_HIP_ARCH", "gfx1151"}};
    for (size_t i = 0; i < sizeof defaults / sizeof *defaults; ++i)
        if (!getenv(defaults[i].name) || !getenv(defaults[i].name)[0])
            setenv(defaults[i].name, defaults[i].value, 1);
    setenv("CC", EMU_CC, 1);
}


static r35a_context *make_context(int reported_cus)
{
    char value[16];
    snprintf(value, sizeof value, "%d", reported_cus);
    setenv("FAKE_HIP_CUS", value, 1); /* read by the stand-in when the context asks for the device's properties */
    g_reported_cus = reported_cus;
    snprintf(gc.prefix, sizeof gc.prefix, "%dwgp", reported_cus);
    r35a_context_options o;
    r35a_context_options_init(&o);
    o.backend = R35A_BACKEND_GPU;
    r35a_context *ctx = NULL;
    if (r35a_context_create(&o, &ctx) != R35A_OK) {
        printf("FAIL: no GPU context on the executing stand-in: %s\n", r35a_last_error_detail());
        return NULL;
    }
    r35a_context_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    r35a_context_get_info(ctx, &info);
    printf("[test_emulator] context: %s %s: %s\n", info.backend_name, info.arch, info.reason);
    if (strcmp(info.backend_name, "hip") != 0 || strcmp(info.arch, ARCH) != 0) {
        printf("FAIL: the GPU context is %s %s, not hip %s\n", info.backend_name, info.arch, ARCH);
        r35a_context_destroy(ctx);
        return NULL;
    }
    return ctx;
}

static bool family_selected(const char *only, const char *family)
{
    if (!only)
        return true;
    size_t n = strlen(family);
    for (const char *p = only; (p = strstr(p, family)) != NULL; p += n)
        if ((p == only || p[-1] == ',') && (p[n] == '\0' || p[n] == ','))
            return true;
    return false;
}

static int check_coverage(const char *only)
{
    int missing = 0;
    for (size_t i = 0; i < gc_num_decode; ++i)
        if (family_selected(only, decode_family(&gc_decode[i])) && strcmp(gc_decode[i].arch, ARCH) == 0 &&
            !gc_was_executed(gc_decode[i].name)) {
            printf("FAIL: decode variant %s was never executed\n", gc_decode[i].name);
            ++missing;
        }
    for (size_t i = 0; i < sizeof k_merge / sizeof *k_merge; ++i)
        if ((family_selected(only, "decode") || family_selected(only, "decode8")) && !gc_was_executed(k_merge[i])) {
            printf("FAIL: split merge %s was never executed\n", k_merge[i]);
            ++missing;
        }
    for (size_t i = 0; i < gc_num_generic; ++i)
        if (family_selected(only, "generic") && strcmp(gc_generic[i].arch, ARCH) == 0 &&
            !gc_was_executed(gc_generic[i].name)) {
            printf("FAIL: generic kernel %s was never executed\n", gc_generic[i].name);
            ++missing;
        }
    for (size_t i = 0; i < gc_num_encoder; ++i)
        if (family_selected(only, "encoder") && strcmp(gc_encoder[i].arch, ARCH) == 0 &&
            !gc_was_executed(gc_encoder[i].name)) {
            printf("FAIL: encoder variant %s was never executed\n", gc_encoder[i].name);
            ++missing;
        }
    for (size_t i = 0; i < gc_num_encoder; ++i) {
        char paged[160];
        snprintf(paged, sizeof paged, "%s_paged", gc_encoder[i].name);
        if (family_selected(only, "encoder") && strcmp(gc_encoder[i].arch, ARCH) == 0 && gc_encoder[i].maxlen == 0 &&
            !gc_was_executed(paged)) {
            printf("FAIL: encoder paged sibling %s was never executed\n", paged);
            ++missing;
        }
    }
    return missing;
}

int main(int argc, char **argv)
{
    const char *only = NULL;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else {
            fprintf(stderr, "usage: %s [--only decode,decode8,generic,encoder]\n", argv[0]);
            return 2;
        }
    }
    default_environment();
    tu_begin("test_emulator");
    const double t0 = gc_seconds();
    gc_init("test_emulator", &g_mem);
    if (!gc_budget_from_env("R35A_EMULATOR_BUDGET_S", EMU_DEFAULT_BUDGET_S)) {
        fprintf(stderr, "test_emulator: R35A_EMULATOR_BUDGET_S=%s is not a number of seconds\n",
                getenv("R35A_EMULATOR_BUDGET_S"));
        return 2;
    }
    if (gc.budget_s > 0)
        printf("[test_emulator] budget: no case that only repeats executed kernels starts after %.0f s "
               "(R35A_EMULATOR_BUDGET_S; 0: none)\n", gc.budget_s);
    else
        printf("[test_emulator] budget: none (R35A_EMULATOR_BUDGET_S=0): every case runs\n");
    gc.hooks = (gc_hooks){emu_prepare, emu_check_plan, emu_before_run, emu_after_run, emu_after_case};
    if (!load_stand_in())
        return 1;
    check_hip(hip.StreamCreateWithFlags(&g_stream, 1 /* hipStreamNonBlocking */), "hipStreamCreateWithFlags");
    g_mem.stream = g_stream;

    /* 20 WGPs is what ROCm reports for the Radeon 8060S (40 CUs); 40 stands for a part twice as big. */
    const int reported[2] = {20, 40};
    bool any_context = false;
    for (int c = 0; c < 2; ++c) {
        gc.ctx = make_context(reported[c]);
        if (!gc.ctx) {
            ++g_device_failures;
            continue;
        }
        any_context = true;
        /* (first: under a spent budget they would be left out, their kernels all executed) */
        if (c == 0 && family_selected(only, "decode")) {
            gc_decode_lse_cases("decode_");
            /* the decode kernels decline per-token-head scales (src/plan_decode.c) */
            gc_kv_token_scale_cases("generic_", "per-token-head KV scales");
            decode_lse_bad_case(0);
            decode_lse_bad_case(1);
            decode_lse_bad_case(2);   /* the prefill sibling's bad page, beside the decode launch */
            decode_lse_bad_case(3);   /* the prefill sibling alone: its bad sequence */
        }
        if (family_selected(only, "decode") || family_selected(only, "decode8"))
            for (gc.pass = 0; gc.pass < 2; ++gc.pass)
                decode_cases(c > 0, only);
        gc.pass = -1;
        if (c == 0 && family_selected(only, "decode8"))
            kv8_codes_cases(true);
        if (c == 0 && family_selected(only, "generic")) {
            generic_cases();
            kv8_codes_cases(false);
        }
        if (c == 0 && family_selected(only, "encoder"))
            for (gc.pass = 0; gc.pass < 2; ++gc.pass) {
                encoder_cases();
                prefill_cases();
            }
        gc.pass = -1;
        r35a_context_destroy(gc.ctx);
        gc.ctx = NULL;
    }
    check_hip(hip.StreamDestroy(g_stream), "hipStreamDestroy");

    const int cases = gc_print_tallies();
    printf("[test_emulator] %d cases, %d failed (each: plan, launches and memsets, output against the oracle)\n",
           cases, gc.failures);
    int failed = gc.failures + g_device_failures;
    int missing = 0;
    if (any_context && !getenv("R35A_TEST_CASE"))
        missing = check_coverage(only);
    failed += missing;
    gc_print_budget_line(!missing && !getenv("R35A_TEST_CASE"));
    long launches = 0;
    double seconds = 0.0;
    hip.emulator_stats(&launches, &seconds);
    printf("[test_emulator] %d kernels executed, %ld launches on the emulator in %.1f s (%.1f s in all); %d "
           "emulator errors\n", gc_num_executed(), launches, seconds,
           gc_seconds() - t0, hip.emulator_errors());
    tu_stats_print("test_emulator");
    printf("[test_emulator] %s\n", failed ? "FAILED" : "PASSED");
    return failed ? 1 : 0;
}
