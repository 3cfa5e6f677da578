/* registry.c - the GPU kernel tables, generated from variants/variants.def (see registry.h). */
#include "registry.h"

#include <string.h>

#define R35A_VDTYPE_f16 R35A_DTYPE_F16
#define R35A_VDTYPE_bf16 R35A_DTYPE_BF16
#define R35A_VOP_paged R35A_OP_PAGED
#define R35A_VOP_varlen R35A_OP_VARLEN

const r35a_decode_variant r35a_decode_variants[] = {
#define R35A_DECODE_VARIANT(arch, name, dtype, head_size, rows, kw, dw, waves) \
    {#arch, #name, R35A_VDTYPE_##dtype, head_size, rows, kw, dw, waves},
#include "variants.def"
#undef R35A_DECODE_VARIANT
    {NULL, NULL, R35A_DTYPE_F16, 0, 0, 0, 0, 0},
};

const r35a_generic_kernel r35a_generic_kernels[] = {
#define R35A_GENERIC_KERNEL(arch, name, op, dtype, dmax) {#arch, #name, R35A_VOP_##op, R35A_VDTYPE_##dtype, dmax},
#include "variants.def"
#undef R35A_GENERIC_KERNEL
    {NULL, NULL, R35A_OP_PAGED, R35A_DTYPE_F16, 0},
};

const r35a_encoder_variant r35a_encoder_variants[] = {
#define R35A_ENCODER_VARIANT(arch, name, dtype, head_size, rows, kb, nw, waves) \
    {#arch, #name, R35A_VDTYPE_##dtype, head_size, rows, kb, nw, waves},
#include "variants.def"
#undef R35A_ENCODER_VARIANT
    {NULL, NULL, R35A_DTYPE_F16, 0, 0, 0, 0, 0},
};

int r35a_find_decode_variant(const char *name)
{
    for (int i = 0; i < R35A_NUM_DECODE_VARIANTS; ++i)
        if (strcmp(r35a_decode_variants[i].name, name) == 0)
            return i;
    return -1;
}

int r35a_find_generic_kernel(const char *name)
{
    for (int i = 0; i < R35A_NUM_GENERIC_KERNELS; ++i)
        if (strcmp(r35a_generic_kernels[i].name, name) == 0)
            return i;
    return -1;
}

int r35a_find_encoder_variant(const char *name)
{
    for (int i = 0; i < R35A_NUM_ENCODER_VARIANTS; ++i)
        if (strcmp(r35a_encoder_variants[i].name, name) == 0)
            return i;
    return -1;
}

