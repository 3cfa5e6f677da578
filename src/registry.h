/* registry.h - the GPU kernels this build knows, one table per kernel family, generated from
 * variants/variants.def (the one list that also feeds the kernels, the tests and the bench). Pure
 * host data: no runtime, no planning. */
#ifndef R35A_REGISTRY_H
#define R35A_REGISTRY_H

#include "internal.h"

#include <string.h>

/* Both names are set and equal (arch and kernel names). */
static inline bool r35a_same_name(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

typedef struct r35a_decode_variant {
    const char *arch;
    const char *name;            /* the kernel symbol, log label and bench label */
    r35a_dtype dtype;
    int32_t head_size;
    int32_t rows;                /* R: query rows per workgroup */
    int32_t kw, dw;              /* key groups and head-dim waves: block = 32 * kw * dw threads */
    int32_t waves;               /* minimum waves per SIMD the kernel's VGPR budget allows */
} r35a_decode_variant;

typedef struct r35a_generic_kernel {
    const char *arch;
    const char *name;
    r35a_op op;                  /* R35A_OP_PAGED or R35A_OP_VARLEN */
    r35a_dtype dtype;
    int32_t dmax;                /* largest head size served */
} r35a_generic_kernel;

enum {
#define R35A_DECODE_VARIANT(arch, name, dtype, head_size, rows, kw, dw, waves) r35a_decode_index_##name,
#include "variants.def"
#undef R35A_DECODE_VARIANT
    R35A_NUM_DECODE_VARIANTS
};
enum {
#define R35A_GENERIC_KERNEL(arch, name, op, dtype, dmax) r35a_generic_index_##name,
#include "variants.def"
#undef R35A_GENERIC_KERNEL
    R35A_NUM_GENERIC_KERNELS
};

typedef struct r35a_encoder_variant {
    const char *arch;
    const char *name;            /* the kernel symbol, log label and bench label */
    r35a_dtype dtype;
    int32_t head_size;           /* D (72 runs padded to 80 inside the kernel) */
    int32_t rows;                /* query rows per wave (16 or 32) */
    int32_t kb, nw;              /* keys per K/V block; waves per workgroup: block = 32 * nw threads */
    int32_t waves;               /* minimum waves per SIMD (occupancy contract) */
} r35a_encoder_variant;

enum {
#define R35A_ENCODER_VARIANT(arch, name, dtype, head_size, rows, kb, nw, waves) r35a_encoder_index_##name,
#include "variants.def"
#undef R35A_ENCODER_VARIANT
    R35A_NUM_ENCODER_VARIANTS
};

extern const r35a_decode_variant r35a_decode_variants[];
extern const r35a_generic_kernel r35a_generic_kernels[];
extern const r35a_encoder_variant r35a_encoder_variants[];

/* Index of the decode variant / generic kernel / encoder variant named name, or -1. */
int r35a_find_decode_variant(const char *name);
int r35a_find_generic_kernel(const char *name);
int r35a_find_encoder_variant(const char *name);

#endif
