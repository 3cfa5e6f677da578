/* plan_decode.c - the decode variants' planner (see planner.h): a variant, its row groups and
 * split count, grid and workspace from host-known values only; mixed batches as decode + the
 * portable kernel; the decode kernels' argument struct.
 *
 * The variants of the desc's dtype, K/V element format and head size compete (softcap, ALiBi,
 * sinks and the LSE output are run-time arguments of every decode kernel); the one that needs the
 * fewest row groups (each row group reads the KV once) wins, the smaller R on a tie (fewer padded
 * rows). The split count then fills the device (decode_args.h: r35a_decode_num_splits; each
 * sequence then uses as many of them as its own length needs, on the device). Everything the choice
 * reads is in the descriptor, so a plan is graph-capture safe. */
#include "planner.h"

#include "env.h"

#include <stdio.h>
#include <string.h>

/* ---- decode ---- */

/* The K/V element format a decode kernel must have for d: 0 (the Q/O dtype) or an 8-bit one. */
static r35a_dtype decode_kv_format(const r35a_paged_attention_desc *d)
{
    const r35a_dtype kv = r35a_paged_kv_dtype(d);
    return r35a_dtype_is_kv8(kv) ? kv : (r35a_dtype)0;
}

/* NVIDIA (measured on the H200 only: lab/decode_ab.py, R35A_DECODE_SPLITS=1 against the planner's count): a
 * batch whose workgroups alone give at least half the SMs one (wgs >= SMs / 2) runs one split, with no
 * records and no merge launch, when the keys a sequence reaches are at most this many. At 1K keys and batch
 * 16 one split was 0-19 % faster than the planner's 2-3 for every head size (one row 0.6 % slower); at 2K-4K
 * it still won for D 64 and 128 (4-12 %) but lost 3-18 % for D 256, D 512 and the D 64 rows-32 kernel, whose
 * workgroups keep fewer bytes in flight; batch 8 (64 workgroups) gains from splits even at 1K. A rule from
 * each kernel's bytes in flight would serve 2K-4K too (not built). The workgroups must also give the SMs 2
 * warps each: the D 256 rows-32 kernel (2 warps, 128 workgroups at batch 16) ran 1K keys 1.28-1.29x faster
 * in 2-3 splits than in one. gfx11: not measured, off. */
#define R35A_DECODE_NV_SINGLE_SPLIT_KEYS 1024

static bool nv_single_split(const r35a_paged_attention_desc *d, int64_t wgs, int32_t waves_per_wg, int num_cus)
{
    return 2 * wgs >= (int64_t)num_cus && wgs * waves_per_wg >= 2 * (int64_t)num_cus &&
           r35a_window_reach(d->max_seq_len, d->max_query_len, d->window) <= R35A_DECODE_NV_SINGLE_SPLIT_KEYS;
}

/* NVIDIA (measured on the H200 only: lab/decode_ab.py over R35A_DECODE_SPLITS): splits shorter than this
 * many tiles lose to fewer, longer ones once the workgroups fill the SMs one each. At batch 1 (8 kv heads)
 * and 2K-4K keys, 16 splits of 8-16 tiles ran 1.1-1.3x faster than the planner's 32-33 of 4-8 tiles for
 * every head size and G x M tried (each workgroup's fixed costs, its record and the merge's share, against a
 * handful of tiles); 1K keys kept 16 splits of 4 tiles (8 splits were 5 % slower) and 8K was equal at 32 and
 * 33. So a split count whose splits would be shorter is cut to one workgroup per SM, but not below splits of
 * this many tiles. gfx11: not measured, off. */
#define R35A_DECODE_NV_SHORT_SPLIT_TILES 16

static int32_t nv_short_splits(const r35a_paged_attention_desc *d, int64_t wgs, int32_t splits, int num_cus)
{
    const int64_t tiles = r35a_decode_max_tiles(d->max_seq_len, d->max_query_len, d->window);
    if (splits <= 1 || wgs <= 0 || tiles >= (int64_t)splits * R35A_DECODE_NV_SHORT_SPLIT_TILES)
        return splits;
    const int64_t one_per_sm = wgs < num_cus ? num_cus / wgs : 1;
    const int64_t floor_by_tiles = tiles / R35A_DECODE_NV_SHORT_SPLIT_TILES;
    const int64_t cut = one_per_sm > floor_by_tiles ? one_per_sm : floor_by_tiles;
    return cut < splits ? (int32_t)cut : splits;
}

/* Decode's stride rule (decode_args.h): rows read with 128-bit loads (Q, K, V) start 16 bytes apart,
 * i.e. Q strides are multiples of 8 elements and K/V strides of 16 / (bytes per KV element). */
static void check_decode_strides(const r35a_paged_attention_desc *d, char *reason, size_t cap)
{
    const int32_t kv_bytes = r35a_dtype_is_kv8(r35a_paged_kv_dtype(d)) ? 1 : 2;
    const struct {
        const char *field;
        int64_t value;
        bool kv;
    } strides[] = {
        {"q_token_stride", d->q_token_stride, false}, {"q_head_stride", d->q_head_stride, false},
        {"k_page_stride", d->k_page_stride, true},    {"k_head_stride", d->k_head_stride, true},
        {"k_slot_stride", d->k_slot_stride, true},    {"v_page_stride", d->v_page_stride, true},
        {"v_head_stride", d->v_head_stride, true},    {"v_slot_stride", d->v_slot_stride, true},
    };
    for (size_t i = 0; i < sizeof strides / sizeof *strides; ++i) {
        const bool ok = strides[i].kv ? r35a_decode_kv_stride_ok(strides[i].value, kv_bytes)
                                      : r35a_decode_stride_ok(strides[i].value);
        if (!ok) {
            r35a_text_append(reason, cap, ", ", "%s %lld is not a multiple of %d elements (16-byte aligned rows)",
                             strides[i].field, (long long)strides[i].value,
                             strides[i].kv ? (int)r35a_decode_kv_row_align(kv_bytes) : R35A_DECODE_ROW_ALIGN);
            return; /* one is enough to say why */
        }
    }
}

bool r35a_plan_decode(const r35a_paged_attention_desc *d, const char *arch, int num_cus, const char *only,
                      r35a_gpu_launch *out, char *reason, size_t cap)
{
    reason[0] = '\0';
    int forced;
    if (!r35a_registry_forced(R35A_GPU_DECODE, "decode variant", arch, only, &forced, reason, cap))
        return false;

    if (d->dtype != R35A_DTYPE_F16 && d->dtype != R35A_DTYPE_BF16)
        r35a_text_append(reason, cap, ", ", "dtype %s (the decode kernels are f16/bf16)", r35a_dtype_name(d->dtype));
    if (d->max_query_len > R35A_DECODE_MAX_QUERY_LEN)
        r35a_text_append(reason, cap, ", ", "max_query_len %d > %d (prefill or mixed batch)", (int)d->max_query_len,
                   R35A_DECODE_MAX_QUERY_LEN);
    /* softcap, ALiBi, sinks and the LSE output are run-time arguments of every decode kernel; the KV
     * format picks the kernel */
    const r35a_dtype kv = decode_kv_format(d);
    if (!r35a_decode_page_size_ok(d->page_size))
        r35a_text_append(reason, cap, ", ", "page_size %d is not a multiple of %d", (int)d->page_size,
                         R35A_DECODE_PAGE_MULTIPLE);
    /* A per-key V scale weights its key's P.V term but not the softmax denominator; the decode
     * kernels fold one V scale into the normalization (kernels/decode/README.md, "Open questions"). */
    if (d->kv_scale_per_head == R35A_KV_SCALE_PER_TOKEN_HEAD && r35a_dtype_is_kv8(r35a_paged_kv_dtype(d)))
        r35a_text_append(reason, cap, ", ",
                         "per-token-head KV scales (the decode kernels take one K and one V scale per kv head)");
    /* The LSE stores of the NVIDIA decode layers have been built, not yet run on a GPU: the portable
     * kernel writes the LSE there until tests/gpu/test_gpu_cuda.c has run decode_lse on them. */
    if (d->use_lse && r35a_tuning_is_nvidia(arch))
        r35a_text_append(reason, cap, ", ", "LSE output on the NVIDIA decode kernels (not yet run on a GPU)");
    check_decode_strides(d, reason, cap);
    if ((uint32_t)d->num_seqs > R35A_GRID_YZ_MAX)
        r35a_text_append(reason, cap, ", ", "num_seqs %d above the grid limit %u", (int)d->num_seqs, R35A_GRID_YZ_MAX);

    /* Candidates: this arch, dtype and head size (and the forced variant, if any). */
    int best = -1;
    int32_t best_groups = 0;
    for (int i = 0; i < R35A_NUM_DECODE_VARIANTS; ++i) {
        const r35a_decode_variant *v = &r35a_decode_variants[i];
        if (!r35a_same_name(v->arch, arch) || (forced >= 0 && i != forced) || v->dtype != d->dtype ||
            v->kv_dtype != kv || v->head_size != d->head_size)
            continue;
        int32_t groups = r35a_decode_num_row_groups(d->num_q_heads / d->num_kv_heads, d->max_query_len, v->rows);
        bool fewer_groups = best < 0 || groups < best_groups;
        if (fewer_groups || (groups == best_groups && v->rows < r35a_decode_variants[best].rows)) {
            best = i;
            best_groups = groups;
        }
    }
    if (best < 0 && (d->dtype == R35A_DTYPE_F16 || d->dtype == R35A_DTYPE_BF16))
        r35a_registry_explain_missing(R35A_GPU_DECODE, arch, d->dtype, kv, d->head_size, forced, only, reason, cap);
    if (best >= 0 && (uint64_t)d->num_kv_heads * (uint64_t)best_groups > R35A_GRID_YZ_MAX)
        r35a_text_append(reason, cap, ", ", "num_kv_heads x row groups %lld above the grid limit %u",
                   (long long)d->num_kv_heads * best_groups, R35A_GRID_YZ_MAX);
    if (reason[0])
        return false;

    const r35a_decode_variant *v = &r35a_decode_variants[best];
    r35a_launch_init(out, R35A_GPU_DECODE, best);
    out->max_query_len = d->max_query_len;
    out->num_row_groups = best_groups;
    /* Resident workgroups per CU from the variant's occupancy contract: the split count never asks
     * for more workgroups than the device holds at once (decode_args.h). On NVIDIA a "CU" is an SM. */
    const int32_t simds = r35a_tuning_simds_per_cu(arch);
    const int cus = num_cus > 0 ? num_cus : R35A_GFX1151_DEFAULT_CUS;
    const int forced_min_tiles = r35a_forced_decode_min_split_tiles();
    out->min_split_tiles = forced_min_tiles > 0 ? forced_min_tiles : R35A_DECODE_MIN_TILES_PER_SPLIT;
    const int32_t waves = r35a_decode_waves(v->kw, v->dw, v->rw);
    out->num_splits = r35a_decode_num_splits(d->num_seqs, d->num_kv_heads, best_groups, d->max_seq_len,
                                             d->max_query_len, d->window, cus,
                                             r35a_decode_resident_wgs_per_cu(simds, v->waves, waves), out->min_split_tiles);
    if (r35a_tuning_is_nvidia(arch)) {
        const int64_t wgs = (int64_t)d->num_seqs * d->num_kv_heads * best_groups;   /* of one split */
        if (nv_single_split(d, wgs, waves, cus))
            out->num_splits = 1;
        else
            out->num_splits = nv_short_splits(d, wgs, out->num_splits, cus);
    }
    /* measurement only (README: environment): the split count the user forces, within the kernels' limit */
    const int forced_splits = r35a_forced_decode_splits();
    if (forced_splits > 0)
        out->num_splits = forced_splits < R35A_DECODE_MAX_SPLITS ? forced_splits : R35A_DECODE_MAX_SPLITS;
    r35a_decode_grid(d->num_seqs, d->num_kv_heads, best_groups, out->num_splits, out->grid);
    out->block[0] = r35a_decode_block_threads(v->kw, v->dw, v->rw);
    out->block[1] = out->block[2] = 1;
    out->workspace_bytes = (size_t)r35a_decode_workspace_bytes(d->num_seqs, d->num_kv_heads, best_groups,
                                                               out->num_splits, v->rows, v->head_size);
    /* NVIDIA: the stages live in dynamic shared memory; the size is the kernel's own (its code
     * object's <name>_lds_bytes, read at load: gpu_runtime.h decode_shared_bytes), set by the GPU
     * entry that binds the kernel (gpu_impls.c). 0 here: static LDS only. */
    out->shared_bytes = 0;
    return true;
}

bool r35a_plan_decode_merge(const r35a_paged_attention_desc *d, const r35a_gpu_launch *decode, r35a_gpu_launch *out)
{
    if (decode->num_splits <= 1)
        return false;
    const r35a_decode_variant *v = &r35a_decode_variants[decode->kernel];
    *out = *decode;
    out->split_merge = true;
    out->programmatic = true;   /* it waits for the decode launch in the kernel */
    r35a_decode_merge_grid(d->num_seqs, d->num_kv_heads, decode->num_row_groups, v->rows,
                           d->num_q_heads / d->num_kv_heads, decode->max_query_len, v->head_size, decode->num_splits,
                           out->grid);
    out->block[0] = R35A_DECODE_MERGE_THREADS;
    out->block[1] = out->block[2] = 1;
    out->shared_bytes = 0;
    return true;
}

/* ---- mixed batches: decode for M <= 8, the encoder's paged sibling or the generic kernel for the rest ---- */

r35a_paged_attention_desc r35a_decode_part(const r35a_paged_attention_desc *d)
{
    r35a_paged_attention_desc part = *d;
    if (part.max_query_len > R35A_DECODE_MAX_QUERY_LEN)
        part.max_query_len = R35A_DECODE_MAX_QUERY_LEN;
    return part;
}

bool r35a_plan_mixed(const r35a_paged_attention_desc *d, const char *arch, int num_cus, const char *only,
                     r35a_gpu_launch *decode, r35a_gpu_launch *generic, char *reason, size_t cap)
{
    reason[0] = '\0';
    if (d->max_query_len <= R35A_DECODE_MAX_QUERY_LEN) {
        r35a_text_append(reason, cap, ", ", "max_query_len %d <= %d is not a mixed batch", (int)d->max_query_len,
                   R35A_DECODE_MAX_QUERY_LEN);
        return false;
    }
    /* One sequence: its M is num_tokens (query_start_loc[1] = num_tokens), known here. */
    if (d->num_seqs == 1 && d->num_tokens > R35A_DECODE_MAX_QUERY_LEN) {
        r35a_text_append(reason, cap, ", ", "max_query_len %d > %d (one sequence of %d query tokens: prefill)",
                   (int)d->max_query_len, R35A_DECODE_MAX_QUERY_LEN, (int)d->num_tokens);
        return false;
    }
    r35a_paged_attention_desc part = r35a_decode_part(d);
    if (!r35a_plan_decode(&part, arch, num_cus, only, decode, reason, cap)) {
        /* Declined for another reason than M > 8: report decode's reasons on the whole call. */
        (void)r35a_plan_decode(d, arch, num_cus, only, decode, reason, cap);
        return false;
    }
    char why[256] = "";
    /* the longer sequences: the encoder's paged sibling (prefill) where it serves the call */
    if (r35a_plan_prefill(d, arch, num_cus, R35A_DECODE_MAX_QUERY_LEN, generic, why, sizeof why))
        return true;
    if (!r35a_plan_generic_paged(d, arch, NULL, generic, why, sizeof why)) {
        r35a_text_append(reason, cap, ", ", "max_query_len %d > %d and no generic kernel serves the longer sequences: %s",
                   (int)d->max_query_len, R35A_DECODE_MAX_QUERY_LEN, why);
        return false;
    }
    generic->min_query_len = R35A_DECODE_MAX_QUERY_LEN;   /* the decode launch serves the others */
    return true;
}

void r35a_fill_decode_args(const r35a_paged_attention_desc *d, const r35a_paged_attention_args *a,
                           const r35a_gpu_launch *launch, void *workspace, r35a_decode_args *out)
{
    memset(out, 0, sizeof *out);
    R35A_PAGED_POINTERS(R35A_COPY_FROM_ARGS)
    R35A_PAGED_STRIDES(R35A_COPY_FROM_DESC)
    out->workspace = launch->num_splits > 1 ? workspace : NULL;
    out->num_seqs = d->num_seqs;
    out->num_kv_heads = d->num_kv_heads;
    out->group_size = d->num_q_heads / d->num_kv_heads;
    out->page_size = d->page_size;
    out->window = d->window;
    out->max_query_len = launch->max_query_len;
    out->num_row_groups = launch->num_row_groups;
    out->num_splits = launch->num_splits;
    /* the bounds of the device checks (the whole call's: a mixed batch's decode launch serves
     * M <= 8 of the descriptor's max_query_len); out->error is the context's, set at launch */
    out->num_tokens = d->num_tokens;
    out->num_pages = d->num_pages;
    out->max_seq_len = d->max_seq_len;
    out->query_len_bound = d->max_query_len;
    out->scale_log2 = r35a_scale_log2(d->softmax_scale);
    out->logit_softcap = d->logit_softcap;
    out->alibi_slopes = d->use_alibi ? a->alibi_slopes : NULL;
    out->sinks = d->use_sinks ? a->sinks : NULL;
    const r35a_dtype kv = decode_kv_format(d);   /* the kernel's own format (the plan chose it) */
    out->kv_scale_per_head = kv ? d->kv_scale_per_head : 0;
    out->k_scale = kv ? a->k_scale : NULL;
    out->v_scale = kv ? a->v_scale : NULL;
    out->rows_per_group = r35a_decode_variants[launch->kernel].rows;
    out->head_size = d->head_size;
    out->min_split_tiles = launch->min_split_tiles;
    /* the LSE output: written by the single split's workgroup or the split merge (a mixed batch's
     * generic launch writes its own rows') */
    out->lse = d->use_lse ? a->lse : NULL;
    out->lse_token_stride = d->lse_token_stride;
    out->lse_head_stride = d->lse_head_stride;
}

bool r35a_decode_pointers_aligned(const r35a_paged_attention_args *a, const void *workspace, int32_t num_splits,
                                  char *why, size_t why_len)
{
    const struct {
        const char *field;
        const void *p;
    } ptrs[] = {{"q", a->q}, {"k_cache", a->k_cache}, {"v_cache", a->v_cache},
                {"workspace", num_splits > 1 ? workspace : NULL}};
    for (size_t i = 0; i < sizeof ptrs / sizeof *ptrs; ++i)
        if (!r35a_decode_pointer_ok(ptrs[i].p)) {
            snprintf(why, why_len, "%s %p is not 16-byte aligned", ptrs[i].field, ptrs[i].p);
            return false;
        }
    return true;
}
