/* plan_encoder.c - the encoder variants' planner (see planner.h) and their argument struct. */
#include "planner.h"

#include <stdio.h>
#include <string.h>

/* ---- encoder (non-causal varlen on WMMA) ---- */

/* The encoder's layout rule (encoder_args.h): 16-byte rows, 32-bit per-thread row offsets. */
static void check_encoder_strides(const r35a_varlen_attention_desc *d, char *reason, size_t cap)
{
    const struct {
        const char *field;
        int64_t value;
        bool token;      /* bounded by R35A_ENCODER_MAX_TOKEN_STRIDE */
    } strides[] = {
        {"q_token_stride", d->q_token_stride, true},  {"q_head_stride", d->q_head_stride, false},
        {"k_token_stride", d->k_token_stride, true},  {"k_head_stride", d->k_head_stride, false},
        {"v_token_stride", d->v_token_stride, true},  {"v_head_stride", d->v_head_stride, false},
        {"o_token_stride", d->o_token_stride, false}, {"o_head_stride", d->o_head_stride, false},
    };
    for (size_t i = 0; i < sizeof strides / sizeof *strides; ++i) {
        if (!r35a_encoder_stride_ok(strides[i].value)) {
            r35a_text_append(reason, cap, ", ", "%s %lld is not a multiple of %d elements (16-byte aligned rows)",
                             strides[i].field, (long long)strides[i].value, R35A_ENCODER_ROW_ALIGN);
            return; /* one is enough to say why */
        }
        if (strides[i].token && !r35a_encoder_token_stride_ok(strides[i].value)) {
            r35a_text_append(reason, cap, ", ", "%s %lld >= 2^24 elements (the encoder's 32-bit row offsets)",
                       strides[i].field, (long long)strides[i].value);
            return;
        }
    }
}

/* A second workgroup-wide tiling of a (dtype, head size) is taken only when it fills the device's
 * workgroup slots at least this much better than the first (fill: encoder_grid_fill). Measured on the
 * H200 only (lab/tune_encoder.py measure; 4 segments of 1024 tokens, bf16): 64-row
 * workgroups at D = 64 ran 9-12 % faster than the 128-row ones at 4, 6 and 12 heads (fill 0.48 ->
 * 0.65, 0.73 -> 0.97, 0.73 -> 0.97) and 3-10 % slower where the 128-row grid already filled the slots
 * within 0.15 (8, 14-64 heads). (At D = 128 the 64-row candidate gained 1.2 % on the shapes the rule
 * gives it, under the 3 % a table row needs: sm_90's table has one tiling there. lab/tune_encoder.py
 * table applies this rule to measured candidates.) */
#define R35A_ENCODER_FILL_MARGIN 0.15

/* How full the launch keeps the device's workgroup slots: workgroups / (rounds x slots), where slots
 * = CUs x the variant's resident workgroups per CU (its occupancy contract, as decode's splits count
 * them) and rounds = ceil(workgroups / slots). 1: every round full; a part-empty last round (or a
 * single round that does not reach every slot) lowers it. */
static int64_t encoder_slots(const r35a_encoder_variant *v, int32_t simds, int cus)
{
    return (int64_t)cus * r35a_decode_resident_wgs_per_cu(simds, v->waves, v->nw);
}
static double encoder_grid_fill(const r35a_encoder_variant *v, const r35a_varlen_attention_desc *d, int32_t simds,
                                int cus)
{
    const int64_t wgs = r35a_encoder_grid_x(d->num_segments, d->max_seqlen,
                                            r35a_encoder_rows_per_group(v->rows, v->nw, v->maxlen),
                                            r35a_encoder_groups_per_workgroup(v->nw, v->maxlen)) *
                        (int64_t)(d->num_q_heads > 0 ? d->num_q_heads : 0);
    const int64_t slots = encoder_slots(v, simds, cus);
    if (wgs <= 0 || slots <= 0)
        return 0.0;
    const int64_t rounds = (wgs + slots - 1) / slots;
    return (double)wgs / (double)(rounds * slots);
}

/* Among the variants of the desc's dtype and head size (the head count is a run-time value): the
 * small-problem tiling (maxlen > 0: one wave per group, encoder_args.h) when max_seqlen <= its
 * maxlen, the tightest such bound first; otherwise the workgroup-wide tiling (maxlen = 0): the
 * table's first, or a later one that fills the device's workgroup slots R35A_ENCODER_FILL_MARGIN
 * better (encoder_grid_fill: smaller workgroups where the first tiling's grid leaves a part-empty last
 * round); a small-problem kernel serves any length (its groups stream the keys too), so it is the last
 * resort. Only host-known values decide (max_seqlen, num_segments, num_q_heads and the CU count), so
 * one launch serves every segment and graph capture holds. */
static int choose_encoder_variant(const r35a_varlen_attention_desc *d, const char *arch, int num_cus, int forced,
                                  bool workgroup_only)
{
    const int32_t simds = r35a_tuning_simds_per_cu(arch);
    const int cus = num_cus > 0 ? num_cus : R35A_GFX1151_DEFAULT_CUS;
    int stream = -1, short_fit = -1, short_any = -1;
    double stream_fill = 0.0, first_fill = 0.0;
    for (int i = 0; i < R35A_NUM_ENCODER_VARIANTS; ++i) {
        const r35a_encoder_variant *v = &r35a_encoder_variants[i];
        if (!r35a_same_name(v->arch, arch) || (forced >= 0 && i != forced) || v->dtype != d->dtype ||
            v->head_size != d->head_size)
            continue;
        if (v->maxlen == 0) {
            const double fill = encoder_grid_fill(v, d, simds, cus);
            if (stream < 0) {
                stream = i;
                stream_fill = first_fill = fill;
            } else if (fill >= first_fill + R35A_ENCODER_FILL_MARGIN && fill > stream_fill) {
                stream = i;
                stream_fill = fill;
            }
        } else if (!workgroup_only) {
            if (short_any < 0)
                short_any = i;
            if (d->max_seqlen <= v->maxlen && (short_fit < 0 || v->maxlen < r35a_encoder_variants[short_fit].maxlen))
                short_fit = i;
        }
    }
    return short_fit >= 0 ? short_fit : stream >= 0 ? stream : short_any;
}

bool r35a_plan_encoder(const r35a_varlen_attention_desc *d, const char *arch, int num_cus, const char *only,
                       r35a_gpu_launch out[R35A_ENCODER_MAX_LAUNCHES], int *num_launches, char *reason, size_t cap)
{
    reason[0] = '\0';
    *num_launches = 0;
    int forced;
    if (!r35a_registry_forced(R35A_GPU_ENCODER, "encoder variant", arch, only, &forced, reason, cap))
        return false;

    const bool half = d->dtype == R35A_DTYPE_F16 || d->dtype == R35A_DTYPE_BF16;
    if (!half)
        r35a_text_append(reason, cap, ", ", "dtype %s (the encoder kernels are f16/bf16)", r35a_dtype_name(d->dtype));
    /* causal and GQA are run-time arguments of every encoder kernel (encoder_args.h) */
    if (d->num_kv_heads <= 0 || d->num_q_heads % d->num_kv_heads != 0)
        r35a_text_append(reason, cap, ", ", "num_q_heads %d not a multiple of num_kv_heads %d", (int)d->num_q_heads,
                   (int)d->num_kv_heads);
    /* softcap, sinks and the LSE on the NVIDIA build of the encoder kernels: built (no spill), not yet
     * run on a GPU; the portable kernel serves those calls there until test_gpu_cuda has run them */
    if (r35a_tuning_is_nvidia(arch) && (d->logit_softcap > 0.0f || d->use_sinks || d->use_lse))
        r35a_text_append(reason, cap, ", ", "softcap, sinks or the LSE on the NVIDIA encoder kernels (not yet run on a GPU)");
    check_encoder_strides(d, reason, cap);
    if ((uint32_t)d->num_q_heads > R35A_GRID_YZ_MAX)
        r35a_text_append(reason, cap, ", ", "num_q_heads %d above the grid limit %u", (int)d->num_q_heads, R35A_GRID_YZ_MAX);

    const int best = choose_encoder_variant(d, arch, num_cus, forced, false);
    if (best < 0 && half)
        r35a_registry_explain_missing(R35A_GPU_ENCODER, arch, d->dtype, (r35a_dtype)0, d->head_size, forced, only, reason, cap);
    if (best >= 0) {
        const r35a_encoder_variant *v = &r35a_encoder_variants[best];
        const int64_t x = r35a_encoder_grid_x(d->num_segments, d->max_seqlen,
                                              r35a_encoder_rows_per_group(v->rows, v->nw, v->maxlen),
                                              r35a_encoder_groups_per_workgroup(v->nw, v->maxlen));
        if (x > 0x7fffffff)
            r35a_text_append(reason, cap, ", ", "%lld workgroups (max_seqlen %d x num_segments %d) above the grid limit 2^31-1",
                       (long long)x, (int)d->max_seqlen, (int)d->num_segments);
    }
    if (reason[0])
        return false;

    const r35a_encoder_variant *v = &r35a_encoder_variants[best];
    r35a_launch_init(&out[0], R35A_GPU_ENCODER, best);
    /* 0 (a zero grid[0]) only when max_seqlen is 0: nothing to launch; the overflow is ruled out above. */
    (void)r35a_encoder_variant_grid(v->rows, v->nw, v->maxlen, d->num_segments, d->max_seqlen, d->num_q_heads,
                                    out[0].grid);
    out[0].block[0] = r35a_encoder_block_threads(v->nw);
    out[0].block[1] = out[0].block[2] = 1;
    out[0].workspace_bytes = 0;
    *num_launches = 1;
    /* The tail split (encoder_args.h): a workgroup-wide tiling whose last round of workgroup slots would
     * be part-empty runs that round's items as half workgroups in its tail kernel. Items are numbered
     * over all heads in a one-dimensional grid. */
    const int64_t items = (int64_t)out[0].grid[0] * out[0].grid[1];
    /* (no tail split for causal calls: a key group could start on a block wholly above some of its rows) */
    const int64_t tail = !d->causal && r35a_encoder_tail_name(best) && items <= 0x7fffffff
                             ? r35a_encoder_tail_items(items, encoder_slots(v, r35a_tuning_simds_per_cu(arch),
                                                                             num_cus > 0 ? num_cus
                                                                                         : R35A_GFX1151_DEFAULT_CUS))
                             : 0;
    if (tail > 0) {
        r35a_gpu_launch tail_launch = out[0];
        tail_launch.encoder_tail = true;
        tail_launch.grid[0] = (uint32_t)(2 * tail);
        tail_launch.grid[1] = 1;
        tail_launch.tail_items = (int32_t)tail;
        out[0].grid[0] = (uint32_t)(items - tail);
        out[0].grid[1] = 1;
        out[0].tail_items = (int32_t)tail;
        if (items > tail) {
            out[1] = tail_launch;
            out[1].programmatic = true;   /* it may start on the slots the first launch frees */
            *num_launches = 2;
        } else {
            out[0] = tail_launch;   /* every item in the tail: the tail kernel alone */
        }
    }
    return true;
}

void r35a_fill_encoder_args(const r35a_varlen_attention_desc *d, const r35a_varlen_attention_args *a,
                            r35a_encoder_args *out)
{
    memset(out, 0, sizeof *out);
    R35A_VARLEN_POINTERS(R35A_COPY_FROM_ARGS)
    R35A_VARLEN_STRIDES(R35A_COPY_FROM_DESC)
    out->num_segments = d->num_segments;
    out->num_heads = d->num_q_heads;
    out->max_seqlen = d->max_seqlen;
    out->scale_log2 = r35a_scale_log2(d->softmax_scale);
    out->num_tokens = d->num_tokens;   /* out->error: the context's record, set at launch */
    out->causal = d->causal ? 1 : 0;
    out->kv_group = d->num_kv_heads > 0 ? d->num_q_heads / d->num_kv_heads : 1;
    if (d->logit_softcap > 0.0f) {
        out->softcap = d->logit_softcap;
        out->softcap_in = d->softmax_scale / d->logit_softcap;
        out->softcap_out = d->logit_softcap / d->softmax_scale;
    }
    out->sinks = d->use_sinks ? a->sinks : NULL;
    if (d->use_lse) {
        out->lse = a->lse;
        out->lse_token_stride = d->lse_token_stride;
        out->lse_head_stride = d->lse_head_stride;
    }
}

bool r35a_encoder_pointers_aligned(const r35a_varlen_attention_args *a, char *why, size_t why_len)
{
    const struct {
        const char *field;
        const void *p;
    } ptrs[] = {{"q", a->q}, {"k", a->k}, {"v", a->v}, {"out", a->out}};
    for (size_t i = 0; i < sizeof ptrs / sizeof *ptrs; ++i)
        if (!r35a_encoder_pointer_ok(ptrs[i].p)) {
            snprintf(why, why_len, "%s %p is not 16-byte aligned", ptrs[i].field, ptrs[i].p);
            return false;
        }
    return true;
}


/* ---- the paged siblings: causal prefill over the paged KV cache (prefill_args.h) ---- */

bool r35a_plan_prefill(const r35a_paged_attention_desc *d, const char *arch, int num_cus, int32_t min_query_len,
                       r35a_gpu_launch *out, char *reason, size_t cap)
{
    reason[0] = '\0';
    const bool half = d->dtype == R35A_DTYPE_F16 || d->dtype == R35A_DTYPE_BF16;
    if (!half)
        r35a_text_append(reason, cap, ", ", "dtype %s (the prefill kernels are f16/bf16)", r35a_dtype_name(d->dtype));
    if (d->kv_dtype != 0 && d->kv_dtype != d->dtype)
        r35a_text_append(reason, cap, ", ", "kv_dtype %s (the prefill kernels read a 16-bit cache)",
                         r35a_dtype_name(d->kv_dtype));
    if (d->num_kv_heads <= 0 || d->num_q_heads % d->num_kv_heads != 0)
        r35a_text_append(reason, cap, ", ", "num_q_heads %d not a multiple of num_kv_heads %d", (int)d->num_q_heads,
                         (int)d->num_kv_heads);
    if (d->page_size % R35A_PREFILL_PAGE_ALIGN != 0)
        r35a_text_append(reason, cap, ", ", "page_size %d not a multiple of %d (prefill)", (int)d->page_size,
                         R35A_PREFILL_PAGE_ALIGN);
    /* The NVIDIA build of the siblings with packed GQA rows, the block's page entries read together
     * and the model features has been built (no spill), not yet run on a GPU: the portable kernel
     * serves NVIDIA prefill until tests/gpu/test_gpu_cuda.c --only prefill has run them. gfx1151's
     * run on the emulator (ctest emulator_generic_encoder). */
    if (r35a_tuning_is_nvidia(arch))
        r35a_text_append(reason, cap, ", ", "the NVIDIA prefill kernels (this build not yet run on a GPU)");
    /* 16-byte rows; 32-bit per-thread offsets: Q token strides (a block of query rows) and K/V slot
     * strides (a 16-key sub-tile) below 2^24 elements */
    const struct {
        const char *field;
        int64_t value, bound;
    } strides[] = {
        {"q_token_stride", d->q_token_stride, R35A_ENCODER_MAX_TOKEN_STRIDE}, {"q_head_stride", d->q_head_stride, 0},
        {"o_token_stride", d->o_token_stride, 0},   {"o_head_stride", d->o_head_stride, 0},
        {"k_page_stride", d->k_page_stride, 0},     {"k_head_stride", d->k_head_stride, 0},
        {"k_slot_stride", d->k_slot_stride, R35A_PREFILL_MAX_SLOT_STRIDE},
        {"v_page_stride", d->v_page_stride, 0},     {"v_head_stride", d->v_head_stride, 0},
        {"v_slot_stride", d->v_slot_stride, R35A_PREFILL_MAX_SLOT_STRIDE},
    };
    for (size_t i = 0; i < sizeof strides / sizeof *strides; ++i) {
        if (!r35a_encoder_stride_ok(strides[i].value)) {
            r35a_text_append(reason, cap, ", ", "%s %lld is not a multiple of %d elements (prefill: 16-byte rows)",
                             strides[i].field, (long long)strides[i].value, R35A_ENCODER_ROW_ALIGN);
            break;
        }
        if (strides[i].bound && strides[i].value >= strides[i].bound) {
            r35a_text_append(reason, cap, ", ", "%s %lld >= 2^24 elements (prefill: 32-bit row offsets)",
                             strides[i].field, (long long)strides[i].value);
            break;
        }
    }
    if ((uint32_t)d->num_q_heads > R35A_GRID_YZ_MAX)
        r35a_text_append(reason, cap, ", ", "num_q_heads %d above the grid limit %u", (int)d->num_q_heads, R35A_GRID_YZ_MAX);

    /* the encoder's workgroup-wide tiling of (dtype, D), by its grid-fill rule on the prefill grid */
    r35a_varlen_attention_desc shape;
    memset(&shape, 0, sizeof shape);
    shape.dtype = d->dtype;
    shape.head_size = d->head_size;
    /* the items are (sequence, kv head) with the kv head's query heads packed: M x G rows each */
    const int32_t group = d->num_kv_heads > 0 && d->num_q_heads % d->num_kv_heads == 0 ? d->num_q_heads / d->num_kv_heads : 1;
    const int64_t packed = (int64_t)d->max_query_len * group;
    shape.num_q_heads = d->num_q_heads / group;
    shape.num_segments = d->num_seqs;
    shape.max_seqlen = packed <= R35A_PREFILL_MAX_ROWS ? (int32_t)packed : (int32_t)R35A_PREFILL_MAX_ROWS;
    const int best = half ? choose_encoder_variant(&shape, arch, num_cus, -1, true) : -1;
    if (best < 0 && half)
        r35a_registry_explain_missing(R35A_GPU_ENCODER, arch, d->dtype, (r35a_dtype)0, d->head_size, -1, NULL, reason, cap);
    if (best >= 0 && !r35a_encoder_paged_name(best))
        r35a_text_append(reason, cap, ", ", "%s has no paged sibling", r35a_encoder_variants[best].name);
    uint32_t grid[3] = {0, 0, 0};
    if (best >= 0) {
        const r35a_encoder_variant *v = &r35a_encoder_variants[best];
        const int32_t rows = r35a_encoder_rows_per_workgroup(v->rows, v->nw);
        if (!r35a_prefill_grid(d->num_seqs, d->max_query_len, d->num_q_heads, group, rows, grid) && d->max_query_len > 0 &&
            d->num_seqs > 0 && d->num_q_heads > 0)
            r35a_text_append(reason, cap, ", ", "num_seqs %d x ceil(max_query_len %d x %d query heads per kv head / %d) "
                             "above the grid limit 2^31-1 (or the packed rows above 2^30)",
                             (int)d->num_seqs, (int)d->max_query_len, (int)group, (int)rows);
    }
    if (reason[0])
        return false;

    const r35a_encoder_variant *v = &r35a_encoder_variants[best];
    r35a_launch_init(out, R35A_GPU_ENCODER, best);
    out->encoder_paged = true;
    memcpy(out->grid, grid, sizeof grid);
    out->block[0] = r35a_encoder_block_threads(v->nw);
    out->block[1] = out->block[2] = 1;
    out->min_query_len = min_query_len;
    return true;
}

void r35a_fill_prefill_args(const r35a_paged_attention_desc *d, const r35a_paged_attention_args *a,
                            int32_t min_query_len, r35a_prefill_args *out)
{
    memset(out, 0, sizeof *out);
    R35A_PAGED_POINTERS(R35A_COPY_FROM_ARGS)
    R35A_PAGED_STRIDES(R35A_COPY_FROM_DESC)
    out->num_seqs = d->num_seqs;
    out->num_heads = d->num_q_heads;
    out->kv_group = d->num_kv_heads > 0 ? d->num_q_heads / d->num_kv_heads : 1;
    out->page_size = d->page_size;
    out->num_pages = d->num_pages;
    out->max_query_len = d->max_query_len;
    out->max_seq_len = d->max_seq_len;
    out->num_tokens = d->num_tokens;
    out->min_query_len = min_query_len;
    out->scale_log2 = r35a_scale_log2(d->softmax_scale);   /* out->error: the context's record, set at launch */
    out->window = d->window;
    if (d->logit_softcap > 0.0f) {
        out->softcap = d->logit_softcap;
        out->softcap_in = d->softmax_scale / d->logit_softcap;
        out->softcap_out = d->logit_softcap / d->softmax_scale;
    }
    out->inv_scale = 1.0f / d->softmax_scale;
    out->alibi_slopes = d->use_alibi ? a->alibi_slopes : NULL;
    out->sinks = d->use_sinks ? a->sinks : NULL;
    if (d->use_lse) {
        out->lse = a->lse;
        out->lse_token_stride = d->lse_token_stride;
        out->lse_head_stride = d->lse_head_stride;
    }
}

bool r35a_prefill_pointers_aligned(const r35a_paged_attention_args *a, char *why, size_t why_len)
{
    const struct {
        const char *field;
        const void *p;
    } ptrs[] = {{"q", a->q}, {"k_cache", a->k_cache}, {"v_cache", a->v_cache}, {"out", a->out}};
    for (size_t i = 0; i < sizeof ptrs / sizeof *ptrs; ++i)
        if (!r35a_encoder_pointer_ok(ptrs[i].p)) {
            snprintf(why, why_len, "%s %p is not 16-byte aligned", ptrs[i].field, ptrs[i].p);
            return false;
        }
    return true;
}
