/* gpu_impls.h - the GPU implementation entries shared by the HIP and CUDA backends.
 *
 * The entries (tuned decode variants, alone or with the portable kernel in a mixed batch; the
 * portable paged and varlen kernel; the encoder variants) plan with plan_gfx1151.c and fill the
 * kernels' argument structs the same way on both backends. Only the runtime differs: a backend
 * reaches the entries through the r35a_gpu_runtime its context points at (ctx->gpu_runtime),
 * which names the device's arch, the planner's CU count, the kernel handles and the launch. */
#ifndef R35A_GPU_IMPLS_H
#define R35A_GPU_IMPLS_H

#include "internal.h"

/* The kernel families a handle is looked up in, indexed like r35a_decode_variants /
 * r35a_generic_kernels / r35a_encoder_variants. */
typedef enum r35a_gpu_family { R35A_GPU_DECODE = 0, R35A_GPU_GENERIC = 1, R35A_GPU_ENCODER = 2 } r35a_gpu_family;

struct r35a_gpu_runtime {
    const char *arch;            /* the device's arch, "gfx1151" or "sm_90" */
    int planner_cus;             /* the CU count the decode split planner is given */
    /* The kernel handles of each family: kernels[family][index] (NULL for a kernel of another arch). */
    void *const *kernels[3];
    /* On stream: zeroes memset_bytes at memset_ptr first when memset_bytes > 0, then launches
     * kernel (named name in messages) with its one by-value argument struct args (args_size
     * bytes). Returns R35A_OK, or the failure through r35a_fail. */
    r35a_status (*launch)(const r35a_context *ctx, void *kernel, const char *name, const uint32_t grid[3],
                          const uint32_t block[3], void *args, size_t args_size, void *memset_ptr,
                          size_t memset_bytes, void *stream);
};

/* The GPU entries of the ordered implementation lists (dispatch.c), most specialized first; they
 * serve a context of either GPU backend. */
extern const r35a_impl r35a_gpu_paged_tuned;     /* the decode variants (variants.def), alone or with
                                                    the generic kernel in a mixed batch */
extern const r35a_impl r35a_gpu_paged_generic;   /* the portable kernel (kernels/generic.hip) */
extern const r35a_impl r35a_gpu_varlen_encoder;  /* the encoder variants (non-causal varlen) */
extern const r35a_impl r35a_gpu_varlen_generic;

#endif
