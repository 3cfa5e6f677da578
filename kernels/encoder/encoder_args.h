/*
 * encoder_args.h - the argument of the non-causal encoder (varlen) attention kernels
 * (kernels/encoder/encoder.hip) and the host-side formulas that go with it: launch grid, workgroup size,
 * the layout conditions of the fast path.
 *
 * Included by C11 host code (src/) and by the device code: a plain C struct passed BY VALUE as the
 * kernel's single argument, and static inline functions. Units: strides in ELEMENTS of the dtype,
 * int64. Pointers are device pointers.
 *
 * Kernels: encoder_<dtype>_d<D>_r<rows>_kb<KB>_nw<NW>_w<waves>[_l<maxlen>]
 *     D      head size (32, 48, 64, 72, 80, 128; 72 is padded to 80 inside the kernel)
 *     rows   query rows per wave (16 or 32: one or two 16-row tiles sharing each K/V operand)
 *     KB     keys per K/V block staged in LDS (one barrier per block)
 *     NW     waves per workgroup
 *     waves  occupancy contract: minimum waves per SIMD (bounds VGPRs and LDS)
 *     maxlen 0 (no suffix): the NW waves of a workgroup form one GROUP that streams the keys of one
 *            (segment, head) and serves rows * NW of its query rows. > 0 (suffix _l<maxlen>): the
 *            small-problem tiling, every wave is its own group (rows query rows of one (segment,
 *            head), its own K/V stream, no workgroup barrier), NW groups per workgroup; the planner
 *            prefers it when max_seqlen <= maxlen (segments of a few dozen tokens)
 * The head count is a run-time value: one kernel per (dtype, D, tiling) serves every Hq.
 * A workgroup-wide variant (maxlen 0) also has a tail kernel, <name>_tail (see "Tail split" below), and
 * a paged sibling, <name>_paged (prefill over the paged KV cache: prefill_args.h).
 *
 * Launch (one per call, all segments; graph-capture safe: only host-known values), with
 * R = rows per group (rows * group waves), nrb = ceil(max_seqlen / R) row blocks per segment and
 * G = groups per workgroup:
 *     grid  = { ceil(nrb * num_segments / G), num_heads, 1 },  block = { 32 * NW }
 * Group g of workgroup (x, h) serves item i = x * G + g: query rows [r * R, (r + 1) * R) of segment
 * s = i / nrb and head h, r = i % nrb (row blocks of a segment are neighbours in dispatch order, so
 * they meet its K/V in L2), and exits at once when s >= num_segments or the segment is shorter than
 * its first row. Segments and row blocks share grid.x, which takes 2^31 - 1 workgroups (y and z may
 * be limited to 65535 by the runtime). Segment lengths come from cu_seqlens on the device; the host
 * never reads them, the kernel checks them (device_error.h): every group checks its segment's
 * entries before reading anything (r35a_varlen_segment_error); a bad segment is recorded and, when
 * only its length is wrong (longer than max_seqlen), the group of its row block 0 writes all its
 * rows as NaN (those past max_seqlen have no workgroup of their own).
 *
 * Tail split (maxlen = 0 variants; src/plan_encoder.c decides, r35a_encoder_tail_items): the
 * workgroups of a launch are "items" (row block r of segment s and head h, R rows), numbered
 * head-major: i = (h * num_segments + s) * nrb + r. When the last round of the device's workgroup
 * slots would be part-empty, its tail_items items run as two workgroups each, of R / 2 rows, whose
 * waves split every K/V block's keys into two key groups and merge their softmax states at the end
 * (kernels/encoder/encoder.hip, KG = 2): shorter workgroups for the last round. The call is then two launches,
 * both with args.tail_items set: the variant, grid { items - tail_items, 1, 1 } (item = workgroup;
 * skipped when empty), and <name>_tail, grid { 2 tail_items, 1, 1 } (item items - tail_items + x / 2,
 * half x % 2), launched programmatically on NVIDIA so it starts on slots the first frees.
 *
 * Fast-path layout conditions (the planner checks them; the portable kernel serves the rest):
 * every stride a multiple of 8 elements and every pointer 16-byte aligned (128-bit loads and stores
 * of whole rows), token strides below 2^24 elements (per-thread offsets within a block of rows are
 * 32-bit byte offsets), Hq a multiple of Hkv.
 *
 * Causal (args.causal): row i of a segment sees its keys 0..i (the segment's query and key spans are
 * the same tokens, so top-left and bottom-right alignment agree). A group streams only the key blocks
 * up to its last row; a wave skips the blocks wholly above its rows and masks the blocks on its
 * diagonal. GQA (args.kv_group = Hq / Hkv): query head h reads kv head h / kv_group. Both are
 * run-time values: the same kernels serve every case.
 */
#ifndef R35A_ENCODER_ARGS_H
#define R35A_ENCODER_ARGS_H

#include "common/host_device.h"
#include "common/occupancy.h"   /* r35a_nv_smem_bytes: an SM's shared memory split by the occupancy contract */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct r35a_encoder_args {
    const void *q;                   /* row (token t, head h): q + t * q_token_stride + h * q_head_stride */
    const void *k;                   /* likewise; query head h reads kv head h / kv_group */
    const void *v;
    void *out;                       /* may not alias q, k, v */
    const int32_t *cu_seqlens;       /* [num_segments + 1], non-decreasing, [0] = 0 */

    int64_t q_token_stride, q_head_stride;   /* all multiples of 8 (16-byte rows) */
    int64_t k_token_stride, k_head_stride;
    int64_t v_token_stride, v_head_stride;
    int64_t o_token_stride, o_head_stride;

    int32_t num_segments;
    int32_t num_heads;               /* Hq (grid.y of a normal launch) */
    int32_t max_seqlen;              /* host-known bound on every segment's length (checked) */
    float scale_log2;                /* softmax_scale * log2(e): scores are exponentiated in base 2 */
    /* (after the fields above, whose layout tools mirror) */
    uint32_t *error;                 /* the context's device error record (device_error.h) */
    int32_t num_tokens;              /* rows of Q, K, V and O: every segment must lie in 0..num_tokens */
    int32_t tail_items;              /* 0: the grid above; > 0 (maxlen 0 variants): the tail split above */
    int32_t causal;                  /* 0: every row sees its segment's keys; 1: row i sees keys 0..i */
    int32_t kv_group;                /* Hq / Hkv >= 1 (GQA: query head h reads kv head h / kv_group) */

    /* Softcap, sinks and the LSE output (rdna35attn.h), each off at its zero. */
    float softcap;                   /* > 0: s = softcap tanh(s / softcap) */
    float softcap_in;                /* softmax_scale / softcap: the scores' factor inside tanh */
    float softcap_out;               /* softcap / softmax_scale: tanh's factor back to score units */
    int32_t pad0;
    const float *sinks;              /* [num_heads] or NULL: raw sink logits joining the denominator */
    float *lse;                      /* NULL, or the natural-log LSE of each row at
                                        lse[t * lse_token_stride + h * lse_head_stride] */
    int64_t lse_token_stride, lse_head_stride;
} r35a_encoder_args;

#define R35A_ENCODER_ARGS_BYTES 192  /* sizeof(r35a_encoder_args) on LP64: the kernarg size checked by tools */
#ifdef __cplusplus
static_assert(sizeof(r35a_encoder_args) == R35A_ENCODER_ARGS_BYTES, "host and device must agree on the layout");
#else
_Static_assert(sizeof(r35a_encoder_args) == R35A_ENCODER_ARGS_BYTES, "host and device must agree on the layout");
#endif

/* Query rows one workgroup serves (maxlen = 0 variants: one group of all its waves). */
R35A_HD int32_t r35a_encoder_rows_per_workgroup(int32_t rows_per_wave, int32_t waves_per_workgroup) {
    return rows_per_wave * waves_per_workgroup;
}
/* Waves of one group (they share a K/V stream and its barriers): the whole workgroup, or one wave
 * in the small-problem tiling (maxlen > 0). */
R35A_HD int32_t r35a_encoder_group_waves(int32_t waves_per_workgroup, int32_t maxlen) {
    return maxlen > 0 ? 1 : waves_per_workgroup;
}
R35A_HD int32_t r35a_encoder_groups_per_workgroup(int32_t waves_per_workgroup, int32_t maxlen) {
    return waves_per_workgroup / r35a_encoder_group_waves(waves_per_workgroup, maxlen);
}
/* Query rows one group serves (R above). */
R35A_HD int32_t r35a_encoder_rows_per_group(int32_t rows_per_wave, int32_t waves_per_workgroup, int32_t maxlen) {
    return rows_per_wave * r35a_encoder_group_waves(waves_per_workgroup, maxlen);
}

R35A_HD uint32_t r35a_encoder_block_threads(int32_t waves_per_workgroup) { return 32u * (uint32_t)waves_per_workgroup; }

/* Row blocks per segment: the kernel derives the same number from args.max_seqlen. */
R35A_HD int64_t r35a_encoder_row_blocks(int32_t max_seqlen, int32_t rows_per_workgroup) {
    return max_seqlen > 0 ? ((int64_t)max_seqlen + rows_per_workgroup - 1) / rows_per_workgroup : 0;
}

/* Workgroups along grid.x: row blocks of every segment, groups_per_workgroup of them per workgroup. */
R35A_HD int64_t r35a_encoder_grid_x(int32_t num_segments, int32_t max_seqlen, int32_t rows_per_group,
                                    int32_t groups_per_workgroup) {
    const int64_t items = r35a_encoder_row_blocks(max_seqlen, rows_per_group) * (num_segments > 0 ? num_segments : 0);
    return (items + groups_per_workgroup - 1) / groups_per_workgroup;
}
/* grid[3] of a variant from host-known values only. Returns 0 when the launch must be skipped
 * (nothing to do: max_seqlen, num_segments or num_heads is 0) or does not fit grid.x (more than
 * 2^31 - 1 workgroups), else 1. */
R35A_HD int r35a_encoder_variant_grid(int32_t rows_per_wave, int32_t waves_per_workgroup, int32_t maxlen,
                                      int32_t num_segments, int32_t max_seqlen, int32_t num_heads, uint32_t grid[3]) {
    const int64_t x = r35a_encoder_grid_x(num_segments, max_seqlen,
                                          r35a_encoder_rows_per_group(rows_per_wave, waves_per_workgroup, maxlen),
                                          r35a_encoder_groups_per_workgroup(waves_per_workgroup, maxlen));
    grid[0] = x <= 0x7fffffff ? (uint32_t)x : 0u;
    grid[1] = (uint32_t)(num_heads > 0 ? num_heads : 0);
    grid[2] = 1u;
    return grid[0] > 0 && grid[1] > 0;
}
/* The same for a maxlen = 0 variant given its rows per workgroup. */
R35A_HD int r35a_encoder_grid(int32_t num_segments, int32_t max_seqlen, int32_t num_heads,
                                  int32_t rows_per_workgroup, uint32_t grid[3]) {
    return r35a_encoder_variant_grid(rows_per_workgroup, 1, 0, num_segments, max_seqlen, num_heads, grid);
}

/* The tail split's item count for a workgroup-wide launch of `items` workgroups (all heads) on `slots`
 * resident workgroup slots: the items of the last round when it is part-empty and their halves fit
 * in one round (2 x its items <= slots), else 0 (no split). A single part-empty round counts as the
 * last one. */
R35A_HD int64_t r35a_encoder_tail_items(int64_t items, int64_t slots) {
    if (items <= 0 || slots <= 0)
        return 0;
    const int64_t last = items % slots;
    return last > 0 && 2 * last <= slots ? last : 0;
}

/* NVIDIA: the DYNAMIC shared memory an encoder workgroup of waves_per_workgroup warps may use under
 * its occupancy contract (`waves` warps per SM sub-partition): the same share of an SM as a decode
 * workgroup's (decode_args.h), one formula. The kernel lays out its Q tile and K/V stages within
 * it (kernels/encoder/encoder.hip encoder_cfg), publishes the bytes its layout uses as <name>_lds_bytes,
 * and the host raises the function's limit to that and launches with it (src/gpu_runtime.c).
 * (gfx11: static LDS.) */
R35A_HD_CONSTEXPR int32_t r35a_encoder_nv_smem_bytes(int32_t waves, int32_t waves_per_workgroup) {
    return r35a_nv_smem_bytes(waves, waves_per_workgroup);
}

/* ---- the rules a call must meet (the planner falls back to the portable kernel otherwise) ----
 * Rows are moved with 128-bit loads and stores: every stride a multiple of 8 16-bit elements and
 * q, k, v, out 16-byte aligned (pointers are checked at run time: their values are host-known, no
 * device read). Per-thread offsets within a block of rows are 32-bit byte offsets: token strides of
 * Q, K and V below 2^24 elements. */
#define R35A_ENCODER_ROW_ALIGN 8
#define R35A_ENCODER_POINTER_ALIGN 16
#define R35A_ENCODER_MAX_TOKEN_STRIDE ((int64_t)1 << 24)
R35A_HD int r35a_encoder_stride_ok(int64_t stride) { return stride >= 0 && stride % R35A_ENCODER_ROW_ALIGN == 0; }
R35A_HD int r35a_encoder_token_stride_ok(int64_t stride) {
    return r35a_encoder_stride_ok(stride) && stride < R35A_ENCODER_MAX_TOKEN_STRIDE;
}
R35A_HD int r35a_encoder_pointer_ok(const void *p) { return (uintptr_t)p % R35A_ENCODER_POINTER_ALIGN == 0; }

#ifdef __cplusplus
}
#endif

#endif /* R35A_ENCODER_ARGS_H */
