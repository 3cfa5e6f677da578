/* launch.h - one planned GPU kernel launch, as a plan keeps it: which kernel, its launch shape, the
 * part of the call it serves and the workspace it uses. Pure data, below the planners (which fill
 * it) and the GPU entries (which launch it). */
#ifndef R35A_LAUNCH_H
#define R35A_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The kernel families: kernels/<family>.hip, one registry table each (registry.h). */
typedef enum r35a_gpu_family {
    R35A_GPU_DECODE = 0,
    R35A_GPU_GENERIC = 1,
    R35A_GPU_ENCODER = 2,
    R35A_GPU_NUM_FAMILIES = 3
} r35a_gpu_family;

typedef struct r35a_gpu_launch {
    r35a_gpu_family family;
    int kernel;                  /* index into the family's registry table */
    bool split_merge;            /* decode: the split merge of variant `kernel` (decode_merge_<its dtype>,
                                    kernels/decode/decode_args.h), not the variant itself */
    void *handle;                /* the context's handle of that kernel (set when a plan is made) */
    uint32_t grid[3], block[3];  /* a 0 in grid means there is nothing to launch */
    int32_t num_row_groups;      /* decode: row groups of R rows per kv head */
    int32_t num_splits;          /* decode: KV splits; 1 for the other families */
    int32_t min_split_tiles;     /* decode: the fewest 16-key tiles a split takes */
    int32_t max_query_len;       /* decode: the largest M it serves (capped at 8 in a mixed batch) */
    int32_t min_query_len;       /* generic paged, encoder paged: serves only sequences with M > this (0: all) */
    bool encoder_tail;           /* encoder: the tail kernel of variant `kernel` (<name>_tail), not the variant */
    bool encoder_paged;          /* encoder: the paged sibling of variant `kernel` (<name>_paged, prefill_args.h),
                                    which serves only sequences with M > min_query_len */
    bool programmatic;           /* follows a launch of the same call and orders itself after it in the kernel
                                    (the decode split merge; an encoder tail kernel: before it ends) */
    int32_t tail_items;          /* encoder: args.tail_items of both launches of a tail split (encoder_args.h) */
    size_t workspace_bytes;      /* workspace the launch uses, from offset 0 */
    uint32_t shared_bytes;       /* dynamic shared memory per workgroup (0: the kernel's static LDS only) */
} r35a_gpu_launch;

/* A launch of kernel `kernel` of family, everything else zero (one split, no workspace). */
static inline void r35a_launch_init(r35a_gpu_launch *l, r35a_gpu_family family, int kernel)
{
    *l = (r35a_gpu_launch){.family = family, .kernel = kernel, .num_splits = 1};
}

/* The GPU part of a plan: its launches in stream order (0 when the call has nothing to do), and the
 * portable launch that replaces them when a run's pointers miss the fast kernels' alignment. At most:
 * a decode variant, its split merge and the portable kernel or the encoder's paged sibling of a mixed
 * batch. */
#define R35A_MAX_LAUNCHES 3
typedef struct r35a_gpu_plan {
    int num_launches;
    r35a_gpu_launch launches[R35A_MAX_LAUNCHES];
    bool has_fallback;
    r35a_gpu_launch fallback;
} r35a_gpu_plan;

#endif
