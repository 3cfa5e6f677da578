/* registry.c - the GPU kernel tables, generated from variants/variants.def (see registry.h). */
#include "registry.h"

#include "common/kv_format.h"

#include <stdio.h>
#include <string.h>

#define R35A_VDTYPE_f16 R35A_DTYPE_F16
#define R35A_VDTYPE_bf16 R35A_DTYPE_BF16
#define R35A_VOP_paged R35A_OP_PAGED
#define R35A_VOP_varlen R35A_OP_VARLEN

/* The kernels' K/V element formats (kernels/common/kv_format.h, which cannot include the public
 * header) are the public r35a_dtype values. */
_Static_assert(R35A_KV_AS_Q == 0 && R35A_KV_FP8_E4M3 == R35A_DTYPE_FP8_E4M3 && R35A_KV_INT8 == R35A_DTYPE_INT8,
               "kv_format.h's K/V element formats are rdna35attn.h's r35a_dtype values");

/* variants.def's kv tokens: the K/V element format of a decode kernel */
#define R35A_VKV_kv16 ((r35a_dtype)R35A_KV_AS_Q)
#define R35A_VKV_fp8 ((r35a_dtype)R35A_KV_FP8_E4M3)
#define R35A_VKV_int8 ((r35a_dtype)R35A_KV_INT8)

const r35a_decode_variant r35a_decode_variants[] = {
#define R35A_DECODE_VARIANT(arch, name, dtype, kv, head_size, rows, kw, dw, rw, waves, layer, pipe, stages, q) \
    {#arch, #name, R35A_VDTYPE_##dtype, R35A_VKV_##kv, head_size, rows, kw, dw, rw, waves},
#include "variants.def"
#undef R35A_DECODE_VARIANT
    {NULL, NULL, R35A_DTYPE_F16, (r35a_dtype)0, 0, 0, 0, 0, 0, 0},
};

const r35a_generic_kernel r35a_generic_kernels[] = {
#define R35A_GENERIC_KERNEL(arch, name, op, dtype, dmax) {#arch, #name, R35A_VOP_##op, R35A_VDTYPE_##dtype, dmax},
#define R35A_GENERIC_MERGE_KERNEL(arch, name, dtype) {#arch, #name, R35A_OP_MERGE, R35A_VDTYPE_##dtype, 1024},
#include "variants.def"
#undef R35A_GENERIC_KERNEL
#undef R35A_GENERIC_MERGE_KERNEL
    {NULL, NULL, R35A_OP_PAGED, R35A_DTYPE_F16, 0},
};

const r35a_encoder_variant r35a_encoder_variants[] = {
#define R35A_ENCODER_VARIANT(arch, name, dtype, head_size, rows, kb, nw, waves, maxlen) \
    {#arch, #name, R35A_VDTYPE_##dtype, head_size, rows, kb, nw, waves, maxlen},
#include "variants.def"
#undef R35A_ENCODER_VARIANT
    {NULL, NULL, R35A_DTYPE_F16, 0, 0, 0, 0, 0, 0},
};

/* The compile unit of each kernel (tools/gen_variants.py unit_group: decode <dtype>_<kv>, encoder
 * <dtype>, generic "all"; NVIDIA tables add _d<head> to decode's and the encoder's): its code object
 * is (arch, family, unit). */
static const struct {
    const char *unit, *unit_nvidia;
} decode_units[] = {
#define R35A_DECODE_VARIANT(arch, name, dtype, kv, head_size, ...) {#dtype "_" #kv, #dtype "_" #kv "_d" #head_size},
#include "variants.def"
#undef R35A_DECODE_VARIANT
    {NULL, NULL},
}, encoder_units[] = {
#define R35A_ENCODER_VARIANT(arch, name, dtype, head_size, ...) {#dtype, #dtype "_d" #head_size},
#include "variants.def"
#undef R35A_ENCODER_VARIANT
    {NULL, NULL},
};

const char *r35a_registry_unit(r35a_gpu_family family, int index)
{
    const bool nvidia = r35a_tuning_is_nvidia(r35a_registry_tuning(family, index));
    switch (family) {
    case R35A_GPU_DECODE: return nvidia ? decode_units[index].unit_nvidia : decode_units[index].unit;
    case R35A_GPU_ENCODER: return nvidia ? encoder_units[index].unit_nvidia : encoder_units[index].unit;
    case R35A_GPU_GENERIC: return "all";
    case R35A_GPU_NUM_FAMILIES: break;
    }
    return NULL;
}

static const struct {
    const char *arch, *name, *variant;
} encoder_tails[] = {
#define R35A_ENCODER_TAIL(arch, name, variant, dtype, head_size, rows, kb, nw, waves) {#arch, #name, #variant},
#include "variants.def"
#undef R35A_ENCODER_TAIL
    {NULL, NULL, NULL},
};

const char *r35a_encoder_tail_name(int variant)
{
    if (variant < 0 || variant >= R35A_NUM_ENCODER_VARIANTS)
        return NULL;
    const r35a_encoder_variant *v = &r35a_encoder_variants[variant];
    for (int i = 0; encoder_tails[i].name; ++i)
        if (strcmp(encoder_tails[i].arch, v->arch) == 0 && strcmp(encoder_tails[i].variant, v->name) == 0)
            return encoder_tails[i].name;
    return NULL;
}

static const struct {
    const char *arch, *name, *variant;
} encoder_pageds[] = {
#define R35A_ENCODER_PAGED(arch, name, variant, dtype, head_size, rows, kb, nw, waves) {#arch, #name, #variant},
#include "variants.def"
#undef R35A_ENCODER_PAGED
    {NULL, NULL, NULL},
};

const char *r35a_encoder_paged_name(int variant)
{
    if (variant < 0 || variant >= R35A_NUM_ENCODER_VARIANTS)
        return NULL;
    const r35a_encoder_variant *v = &r35a_encoder_variants[variant];
    for (int i = 0; encoder_pageds[i].name; ++i)
        if (strcmp(encoder_pageds[i].arch, v->arch) == 0 && strcmp(encoder_pageds[i].variant, v->name) == 0)
            return encoder_pageds[i].name;
    return NULL;
}

const r35a_gpu_arch r35a_gpu_archs[] = {
#define R35A_GPU_ARCH(arch, tuning, unit, cus_per_unit, default_cus, vgprs, simds_per_cu) \
    {#arch, #tuning, #unit, cus_per_unit, default_cus, simds_per_cu},
#include "variants.def"
#undef R35A_GPU_ARCH
    {NULL, NULL, NULL, 0, 0, 0},
};

int32_t r35a_tuning_simds_per_cu(const char *tuning)
{
    for (const r35a_gpu_arch *a = r35a_gpu_archs; a->arch; ++a)
        if (strcmp(a->tuning, tuning) == 0)
            return a->simds_per_cu;
    return 2;
}

bool r35a_tuning_is_nvidia(const char *tuning)
{
    for (const r35a_gpu_arch *a = r35a_gpu_archs; a->arch; ++a)
        if (strcmp(a->tuning, tuning) == 0)
            return strcmp(a->unit, "sm") == 0;
    return false;
}

const r35a_gpu_arch *r35a_find_gpu_arch(const char *arch)
{
    for (const r35a_gpu_arch *a = r35a_gpu_archs; a->arch; ++a)
        if (strcmp(a->arch, arch) == 0)
            return a;
    return NULL;
}

int r35a_decode_merge_index(r35a_dtype dtype) { return dtype == R35A_DTYPE_BF16 ? 1 : 0; }

const char *r35a_decode_merge_name(r35a_dtype dtype)
{
    static const char *const names[R35A_NUM_DECODE_MERGE_KERNELS] = {"decode_merge_f16", "decode_merge_bf16"};
    return names[r35a_decode_merge_index(dtype)];
}

int r35a_registry_count(r35a_gpu_family family)
{
    switch (family) {
    case R35A_GPU_DECODE: return R35A_NUM_DECODE_VARIANTS;
    case R35A_GPU_GENERIC: return R35A_NUM_GENERIC_KERNELS;
    case R35A_GPU_ENCODER: return R35A_NUM_ENCODER_VARIANTS;
    case R35A_GPU_NUM_FAMILIES: break;
    }
    return 0;
}

const char *r35a_registry_name(r35a_gpu_family family, int index)
{
    switch (family) {
    case R35A_GPU_DECODE: return r35a_decode_variants[index].name;
    case R35A_GPU_GENERIC: return r35a_generic_kernels[index].name;
    case R35A_GPU_ENCODER: return r35a_encoder_variants[index].name;
    case R35A_GPU_NUM_FAMILIES: break;
    }
    return NULL;
}

const char *r35a_registry_tuning(r35a_gpu_family family, int index)
{
    switch (family) {
    case R35A_GPU_DECODE: return r35a_decode_variants[index].arch;
    case R35A_GPU_GENERIC: return r35a_generic_kernels[index].arch;
    case R35A_GPU_ENCODER: return r35a_encoder_variants[index].arch;
    case R35A_GPU_NUM_FAMILIES: break;
    }
    return NULL;
}

const char *r35a_family_name(r35a_gpu_family family)
{
    static const char *const names[R35A_GPU_NUM_FAMILIES] = {"decode", "generic", "encoder"};
    return (unsigned)family < R35A_GPU_NUM_FAMILIES ? names[family] : "?";
}

int r35a_registry_find(r35a_gpu_family family, const char *tuning, const char *name)
{
    const int n = r35a_registry_count(family);
    for (int i = 0; i < n; ++i)
        if (r35a_same_name(r35a_registry_tuning(family, i), tuning) && r35a_same_name(r35a_registry_name(family, i), name))
            return i;
    return -1;
}

bool r35a_registry_forced(r35a_gpu_family family, const char *what, const char *tuning, const char *only,
                          int *forced, char *reason, size_t cap)
{
    *forced = only ? r35a_registry_find(family, tuning, only) : -1;
    if (only && *forced < 0) {
        snprintf(reason, cap, "no %s %s for %s", what, only, tuning);
        return false;
    }
    return true;
}

static r35a_dtype row_dtype(r35a_gpu_family family, int i)
{
    return family == R35A_GPU_DECODE ? r35a_decode_variants[i].dtype : r35a_encoder_variants[i].dtype;
}

static r35a_dtype row_kv_dtype(r35a_gpu_family family, int i)
{
    return family == R35A_GPU_DECODE ? r35a_decode_variants[i].kv_dtype : (r35a_dtype)0;
}

static int32_t row_head_size(r35a_gpu_family family, int i)
{
    return family == R35A_GPU_DECODE ? r35a_decode_variants[i].head_size : r35a_encoder_variants[i].head_size;
}

void r35a_registry_explain_missing(r35a_gpu_family family, const char *tuning, r35a_dtype dtype, r35a_dtype kv_dtype,
                                   int32_t head_size, int forced, const char *only, char *reason, size_t cap)
{
    char kv[32] = "";
    if (kv_dtype)
        snprintf(kv, sizeof kv, ", %s KV", r35a_dtype_name(kv_dtype));
    if (forced >= 0 && (row_dtype(family, forced) != dtype || row_kv_dtype(family, forced) != kv_dtype)) {
        const r35a_dtype fkv = row_kv_dtype(family, forced);
        r35a_text_append(reason, cap, ", ", "%s is for %s%s%s", only, r35a_dtype_name(row_dtype(family, forced)),
                         fkv ? ", KV " : "", fkv ? r35a_dtype_name(fkv) : "");
        return;
    }
    char built[128] = "";
    int32_t last = -1;
    for (int i = 0; i < r35a_registry_count(family); ++i) {
        if (!r35a_same_name(r35a_registry_tuning(family, i), tuning) || row_dtype(family, i) != dtype ||
            row_kv_dtype(family, i) != kv_dtype || (forced >= 0 && i != forced) || row_head_size(family, i) == last)
            continue;   /* (the tables list a head size's rows together) */
        last = row_head_size(family, i);
        r35a_text_append(built, sizeof built, ", ", "%d", (int)last);
    }
    r35a_text_append(reason, cap, ", ", "head_size %d not built (%s %s%s: %s)", (int)head_size, tuning,
                     r35a_dtype_name(dtype), kv, built[0] ? built : "none");
}
