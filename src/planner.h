/* planner.h - the GPU planners: each picks a kernel of its family (registry.h), its launch shape
 * and workspace from host-known values only (graph-capture safe), or says why it cannot; and fills
 * the family's kernel argument struct. The rules and launch formulas are the kernel family's own,
 * from kernels/common/<family>_args.h, which the kernels share.
 *
 * Pure host code with no runtime dependency, unit-tested on any machine (tests/hip/test_planner.c).
 * One file per family: plan_decode.c, plan_generic.c, plan_encoder.c. */
#ifndef R35A_PLANNER_H
#define R35A_PLANNER_H

#include "registry.h"

#include "decode/decode_args.h"
#include "encoder/encoder_args.h"
#include "encoder/prefill_args.h"
#include "generic/generic_args.h"

/* CU count assumed when the runtime does not report one (Radeon 8060S; the 8050S has 32). */
#define R35A_GFX1151_DEFAULT_CUS 40

/* Each planner returns true and fills *out (r35a_gpu_launch, launch.h: all but the kernel handle)
 * when one of its kernels of the registry rows `arch` (the device's tuning table, e.g. "gfx1151")
 * serves desc, else writes why into reason. `only` (NULL for any) restricts the choice to the
 * kernel of that name; num_cus is the compute-unit count the split planner fills. */
bool r35a_plan_decode(const r35a_paged_attention_desc *desc, const char *arch, int num_cus, const char *only,
                      r35a_gpu_launch *out, char *reason, size_t reason_len);
/* The split merge launch that follows decode launch `decode` (planned by r35a_plan_decode for desc)
 * when it has more than one split: true and *out filled (decode_merge_<dtype>, its grid from
 * r35a_decode_merge_grid, the decode launch's splits and workspace); false when one split needs no
 * merge. */
bool r35a_plan_decode_merge(const r35a_paged_attention_desc *desc, const r35a_gpu_launch *decode,
                            r35a_gpu_launch *out);
bool r35a_plan_generic_paged(const r35a_paged_attention_desc *desc, const char *arch, const char *only,
                             r35a_gpu_launch *out, char *reason, size_t reason_len);
bool r35a_plan_generic_varlen(const r35a_varlen_attention_desc *desc, const char *arch, const char *only,
                              r35a_gpu_launch *out, char *reason, size_t reason_len);
/* The merge of partial states on merge_states_<dtype> (f16/bf16; grid {num_tokens, num_heads, 1}). */
bool r35a_plan_generic_merge(const r35a_merge_states_desc *desc, const char *arch, const char *only,
                             r35a_gpu_launch *out, char *reason, size_t reason_len);
/* Non-causal varlen on the WMMA encoder kernels: one launch for all segments, its grid from
 * num_segments, max_seqlen and num_q_heads only (a 0 in grid: max_seqlen is 0, nothing to launch),
 * or two with the tail split (encoder_args.h: the variant and its tail kernel, or the tail kernel
 * alone); num_cus (0: the default of R35A_GFX1151_DEFAULT_CUS) chooses between workgroup-wide
 * tilings where the table has several and decides the tail split (plan_encoder.c). out gets
 * *num_launches (1 or 2) launches in stream order. Declines GQA, causal, softcap, f32, head sizes not
 * built for the dtype, strides that are not multiples of 8 elements and token strides >= 2^24
 * elements. */
#define R35A_ENCODER_MAX_LAUNCHES 2
bool r35a_plan_encoder(const r35a_varlen_attention_desc *desc, const char *arch, int num_cus, const char *only,
                       r35a_gpu_launch out[R35A_ENCODER_MAX_LAUNCHES], int *num_launches, char *reason,
                       size_t reason_len);

/* Causal prefill over the paged cache on the encoder's paged siblings (prefill_args.h): one launch for
 * every sequence with M > min_query_len, its grid { num_seqs * ceil(max_query_len * G / R), num_kv_heads, 1 }
 * (the G = Hq / Hkv query heads of a kv head packed into one item)
 * (a 0 in grid: max_query_len is 0). The variant is the encoder's workgroup-wide tiling of (dtype,
 * head size), chosen by the encoder's grid-fill rule on that grid; no tail split. Declines (with the
 * reason) dtypes other than f16/bf16, 8-bit caches, GQA that does not divide, page sizes that are not
 * multiples of 16, head sizes without a workgroup-wide
 * encoder variant, strides that are not multiples of 8 elements, Q token strides and K/V slot strides
 * >= 2^24 elements. */
bool r35a_plan_prefill(const r35a_paged_attention_desc *desc, const char *arch, int num_cus, int32_t min_query_len,
                       r35a_gpu_launch *out, char *reason, size_t reason_len);
/* Mixed batch (desc->max_query_len > R35A_DECODE_MAX_QUERY_LEN): two launches on one stream, the
 * decode variant planned on r35a_decode_part(desc) for the sequences with M <= 8 (it skips the
 * others), then, with min_query_len = 8 for the rest, the encoder's paged sibling where
 * r35a_plan_prefill accepts the call, else the generic kernel; nothing is read back.
 * `only` restricts the decode variant. *decode gets the decode launch (its grid, splits and
 * workspace are the plan's), *generic the generic one. Declines, with decode's reasons, what
 * decode would decline for another reason than M > 8, and a single sequence (its M is num_tokens,
 * known on the host: a prefill, all generic). */
bool r35a_plan_mixed(const r35a_paged_attention_desc *desc, const char *arch, int num_cus, const char *only,
                     r35a_gpu_launch *decode, r35a_gpu_launch *generic, char *reason, size_t reason_len);
/* desc with max_query_len capped at R35A_DECODE_MAX_QUERY_LEN: what the decode launch of a mixed
 * batch is planned and run with. */
r35a_paged_attention_desc r35a_decode_part(const r35a_paged_attention_desc *desc);

/* The fields kernel argument structs copy unchanged, by name, from a run's args (pointers, and
 * the descriptor's strides: R35A_*_STRIDES of internal.h), one list per op, so no fill function
 * spells them out again. Used in the fill functions as LIST(R35A_COPY_FROM_ARGS) with `out`, `a`
 * (args) and `d` (desc) in scope. */
#define R35A_PAGED_POINTERS(X) X(q) X(k_cache) X(v_cache) X(out) X(seq_lens) X(query_start_loc) X(block_table)
#define R35A_VARLEN_POINTERS(X) X(q) X(k) X(v) X(out) X(cu_seqlens)
/* The shape fields both portable-kernel argument structs take from either descriptor. */
#define R35A_GENERIC_SHAPE(X) X(num_tokens) X(num_q_heads) X(num_kv_heads) X(head_size) X(softmax_scale) X(logit_softcap)
#define R35A_COPY_FROM_ARGS(field) out->field = a->field;
#define R35A_COPY_FROM_DESC(field) out->field = d->field;

/* Kernel arguments of a planned launch from the validated desc and args. */
void r35a_fill_decode_args(const r35a_paged_attention_desc *desc, const r35a_paged_attention_args *args,
                           const r35a_gpu_launch *launch, void *workspace, r35a_decode_args *out);
void r35a_fill_generic_paged_args(const r35a_paged_attention_desc *desc, const r35a_paged_attention_args *args,
                                  int32_t min_query_len, r35a_generic_paged_args *out);
void r35a_fill_generic_varlen_args(const r35a_varlen_attention_desc *desc, const r35a_varlen_attention_args *args,
                                   r35a_generic_varlen_args *out);
void r35a_fill_generic_merge_args(const r35a_merge_states_desc *desc, const r35a_merge_states_args *args,
                                  r35a_generic_merge_args *out);
void r35a_fill_encoder_args(const r35a_varlen_attention_desc *desc, const r35a_varlen_attention_args *args,
                            r35a_encoder_args *out);
void r35a_fill_prefill_args(const r35a_paged_attention_desc *desc, const r35a_paged_attention_args *args,
                            int32_t min_query_len, r35a_prefill_args *out);

/* Whether the run-time pointers meet the decode kernels' 16-byte alignment (q, k_cache, v_cache,
 * and the workspace when splits > 1); otherwise writes which one does not. */
bool r35a_decode_pointers_aligned(const r35a_paged_attention_args *args, const void *workspace,
                                  int32_t num_splits, char *why, size_t why_len);
/* Whether q, k, v and out meet the encoder kernels' 16-byte alignment; otherwise writes which not. */
bool r35a_encoder_pointers_aligned(const r35a_varlen_attention_args *args, char *why, size_t why_len);
/* Whether q, k_cache, v_cache and out meet the prefill kernels' 16-byte alignment; otherwise which not. */
bool r35a_prefill_pointers_aligned(const r35a_paged_attention_args *args, char *why, size_t why_len);

#endif
