/* gpu_impls.h - the GPU implementation entries shared by the HIP and CUDA backends.
 *
 * Each entry's try_plan() asks its family's planner (plan_*.c) for the launches of a call and keeps
 * them in the plan (kernel handles, grids, splits, workspace, the portable fallback for misaligned
 * pointers); run() only fills each launch's argument struct and launches it through the context's
 * runtime (gpu_runtime.h). */
#ifndef R35A_GPU_IMPLS_H
#define R35A_GPU_IMPLS_H

#include "internal.h"

/* The GPU entries of the ordered implementation lists (dispatch.c), most specialized first; they
 * serve a context of either GPU backend. */
extern const r35a_impl r35a_gpu_paged_tuned;     /* the decode variants (variants.def), alone or with
                                                    the generic kernel in a mixed batch */
extern const r35a_impl r35a_gpu_paged_generic;   /* the portable kernel (kernels/generic/generic.hip) */
extern const r35a_impl r35a_gpu_varlen_encoder;  /* the encoder variants (non-causal varlen) */
extern const r35a_impl r35a_gpu_varlen_generic;
extern const r35a_impl r35a_gpu_merge_generic;   /* merge_states_<dtype> (kernels/generic/generic.hip) */

#endif
