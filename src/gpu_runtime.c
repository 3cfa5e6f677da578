/* gpu_runtime.c - the code-object loading skeleton both GPU backends share (see gpu_runtime.h). */
#include "gpu_runtime.h"

#include "decode/decode_args.h"
#include "common/device_error.h"
#include "encoder/encoder_args.h"

#include <stdio.h>
#include <string.h>

static void **handles_of(r35a_gpu_runtime *rt, r35a_gpu_family family)
{
    switch (family) {
    case R35A_GPU_DECODE: return rt->decode;
    case R35A_GPU_GENERIC: return rt->generic;
    case R35A_GPU_ENCODER: return rt->encoder;
    case R35A_GPU_NUM_FAMILIES: break;
    }
    return NULL;
}

/* ---- the device error record ---- */

r35a_status r35a_gpu_take_device_error(const r35a_gpu_runtime *rt)
{
    /* A plain load first (the common, clean case costs one read of host memory), then an exchange,
     * so that of several threads reading the same record only one reports it. A kernel still
     * running may record after the exchange: the next call reports that. */
    if (!rt->error_host || __atomic_load_n(rt->error_host, __ATOMIC_ACQUIRE) == 0)
        return R35A_OK;
    const uint64_t record = __atomic_exchange_n(rt->error_host, 0, __ATOMIC_ACQ_REL);
    if (record == 0)
        return R35A_OK;
    const uint32_t code = (uint32_t)record, index = (uint32_t)(record >> 32);
    switch (code) {
#define R35A_DEVICE_ERROR_DETAIL(name, value, field, unit, what)                                                \
    case value:                                                                                                \
        return r35a_fail(R35A_ERR_INVALID_DATA, field ": " unit " %u " what " (found on the device by an earlier run)", \
                         index);
        R35A_DEVICE_ERROR_CODES(R35A_DEVICE_ERROR_DETAIL)
#undef R35A_DEVICE_ERROR_DETAIL
    }
    return r35a_fail(R35A_ERR_INVALID_DATA, "device error record: unknown code %u for index %u (found on the device "
                     "by an earlier run)", code, index);
}

/* NVIDIA: each kernel's dynamic shared memory, indexed like handles_of; NULL for a family whose
 * kernels use static LDS only. */
static uint32_t *shared_bytes_of(r35a_gpu_runtime *rt, r35a_gpu_family family)
{
    switch (family) {
    case R35A_GPU_DECODE: return rt->decode_shared_bytes;
    case R35A_GPU_ENCODER: return rt->encoder_shared_bytes;
    case R35A_GPU_GENERIC:
    case R35A_GPU_NUM_FAMILIES: break;
    }
    return NULL;
}

/* NVIDIA: the dynamic shared memory kernel i of family may use, its occupancy contract's share of
 * an SM (decode_args.h r35a_nv_smem_bytes, encoder_args.h r35a_encoder_nv_smem_bytes); 0 for
 * a family whose kernels use static LDS only and publish no <name>_lds_bytes (generic). */
static int32_t dynamic_shared_budget(r35a_gpu_family family, int i)
{
    switch (family) {
    case R35A_GPU_DECODE: {
        const r35a_decode_variant *v = &r35a_decode_variants[i];
        return r35a_nv_smem_bytes(v->waves, r35a_decode_waves(v->kw, v->dw, v->rw));
    }
    case R35A_GPU_ENCODER: {
        const r35a_encoder_variant *v = &r35a_encoder_variants[i];
        return r35a_encoder_nv_smem_bytes(v->waves, v->nw);
    }
    case R35A_GPU_GENERIC:
    case R35A_GPU_NUM_FAMILIES: break;
    }
    return 0;
}

void *r35a_gpu_kernel_handle(const r35a_gpu_runtime *rt, r35a_gpu_family family, int index)
{
    if (index < 0 || index >= r35a_registry_count(family))
        return NULL;
    return handles_of((r35a_gpu_runtime *)rt, family)[index];
}

void *r35a_gpu_encoder_tail_handle(const r35a_gpu_runtime *rt, int index)
{
    return index >= 0 && index < R35A_NUM_ENCODER_VARIANTS ? rt->encoder_tail[index] : NULL;
}

uint32_t r35a_gpu_encoder_tail_shared_bytes(const r35a_gpu_runtime *rt, int index)
{
    return index >= 0 && index < R35A_NUM_ENCODER_VARIANTS ? rt->encoder_tail_shared_bytes[index] : 0;
}

void *r35a_gpu_encoder_paged_handle(const r35a_gpu_runtime *rt, int index)
{
    return index >= 0 && index < R35A_NUM_ENCODER_VARIANTS ? rt->encoder_paged[index] : NULL;
}

uint32_t r35a_gpu_encoder_paged_shared_bytes(const r35a_gpu_runtime *rt, int index)
{
    return index >= 0 && index < R35A_NUM_ENCODER_VARIANTS ? rt->encoder_paged_shared_bytes[index] : 0;
}

void *r35a_gpu_decode_merge_handle(const r35a_gpu_runtime *rt, int index)
{
    if (index < 0 || index >= R35A_NUM_DECODE_VARIANTS)
        return NULL;
    return rt->decode_merge[r35a_decode_merge_index(r35a_decode_variants[index].dtype)];
}

uint32_t r35a_gpu_kernel_shared_bytes(const r35a_gpu_runtime *rt, r35a_gpu_family family, int index)
{
    const uint32_t *bytes = shared_bytes_of((r35a_gpu_runtime *)rt, family);
    if (!bytes || index < 0 || index >= r35a_registry_count(family))
        return 0;
    return bytes[index];
}

void r35a_gpu_unload_kernels(r35a_gpu_runtime *rt, const r35a_gpu_loader *loader)
{
    for (int m = 0; m < rt->num_modules; ++m) {
        if (rt->modules[m])
            (void)loader->module_unload(rt->modules[m]);
        rt->modules[m] = NULL;
        rt->module_objects[m] = NULL;
    }
    rt->num_modules = 0;
    memset(rt->decode_merge, 0, sizeof rt->decode_merge);
    memset(rt->decode_shared_bytes, 0, sizeof rt->decode_shared_bytes);
    memset(rt->encoder_shared_bytes, 0, sizeof rt->encoder_shared_bytes);
    memset(rt->encoder_tail, 0, sizeof rt->encoder_tail);
    memset(rt->encoder_tail_shared_bytes, 0, sizeof rt->encoder_tail_shared_bytes);
    memset(rt->encoder_paged, 0, sizeof rt->encoder_paged);
    memset(rt->encoder_paged_shared_bytes, 0, sizeof rt->encoder_paged_shared_bytes);
}

/* The code object of (family, unit) the loader asks for: the family's build with the loader's suffix
 * where the build has one, else its plain build; NULL when the build has neither. */
static const r35a_code_object *pick(const r35a_gpu_loader *loader, r35a_gpu_family family, const char *unit)
{
    const char *name = r35a_family_name(family);
    if (loader->family_suffix) {
        char variant[64];
        snprintf(variant, sizeof variant, "%s%s", name, loader->family_suffix);
        const r35a_code_object *co = r35a_code_object_find(loader->arch, variant, unit);
        if (co)
            return co;
    }
    return r35a_code_object_find(loader->arch, name, unit);
}

/* The module of the code object that holds (family, unit)'s kernels, loaded on first use; NULL with
 * why written when the build has no such code object or its load fails. */
static void *unit_module(r35a_gpu_runtime *rt, const r35a_gpu_loader *loader, r35a_gpu_family family,
                         const char *unit, char *why, size_t cap)
{
    const r35a_code_object *co = pick(loader, family, unit);
    if (!co) {
        snprintf(why, cap, "the %s code objects have no %s unit %s", loader->arch, r35a_family_name(family), unit);
        return NULL;
    }
    for (int m = 0; m < rt->num_modules; ++m)
        if (rt->module_objects[m] == co)
            return rt->modules[m];
    if (rt->num_modules == R35A_GPU_MAX_MODULES) {
        snprintf(why, cap, "more than %d code objects for %s (R35A_GPU_MAX_MODULES)", R35A_GPU_MAX_MODULES,
                 loader->arch);
        return NULL;
    }
    void *module = NULL;
    int e = loader->module_load_data(&module, co->data);
    if (e != 0 || !module) {
        snprintf(why, cap, "%s of the %s %s/%s code object (%zu bytes) failed: %s (%d)", loader->load_call, co->arch,
                 co->family, co->unit, co->size, loader->error_text(e), e);
        return NULL;
    }
    rt->module_objects[rt->num_modules] = co;
    rt->modules[rt->num_modules++] = module;
    return module;
}

/* The kernel `name` of module, or NULL. Looked up only in the module of its own compile unit, so no
 * lookup fails (a failing driver call would be an error to compute-sanitizer). */
static void *module_function(const r35a_gpu_loader *loader, void *module, const char *name)
{
    void *f = NULL;
    return module && loader->module_get_function(&f, module, name) == 0 ? f : NULL;
}

/* NVIDIA: kernel `name` of module takes dynamic shared memory, exactly what its layout uses (its code
 * object's <name>_lds_bytes), within its occupancy contract's share of an SM (budget); the function's
 * limit is raised to it and the launch passes it (gpu_impls.c bind). */
static bool load_shared_bytes(const r35a_gpu_loader *loader, void *module, void *handle, uint32_t *out,
                              const char *name, int32_t budget, char *why, size_t cap)
{
    char symbol[160];
    snprintf(symbol, sizeof symbol, "%s_lds_bytes", name);
    int bytes = 0;
    int e = loader->read_int_global(module, symbol, &bytes);
    if (e != 0) {
        snprintf(why, cap, "%s(%s) failed: %s (%d)", loader->read_global_call, symbol, loader->error_text(e), e);
        return false;
    }
    if (bytes <= 0 || bytes > budget) {
        snprintf(why, cap, "%s is %d bytes, outside 1..%d (the variant's occupancy contract)", symbol, bytes, budget);
        return false;
    }
    e = loader->set_max_dynamic_shared(handle, bytes);
    if (e != 0) {
        snprintf(why, cap, "%s(%s, %d bytes of dynamic shared memory) failed: %s (%d)", loader->set_shared_call, name,
                 bytes, loader->error_text(e), e);
        return false;
    }
    *out = (uint32_t)bytes;
    return true;
}

/* Resolves kernel `name` of (family, unit) into *handle, with its dynamic shared memory (budget > 0,
 * NVIDIA) into *shared_bytes. */
static bool resolve(r35a_gpu_runtime *rt, const r35a_gpu_loader *loader, r35a_gpu_family family, const char *unit,
                    const char *name, void **handle, int32_t budget, uint32_t *shared_bytes, char *why, size_t cap)
{
    void *module = unit_module(rt, loader, family, unit, why, cap);
    if (!module)
        return false;
    *handle = module_function(loader, module, name);
    if (!*handle) {
        snprintf(why, cap, "kernel %s is missing from the %s code objects", name, rt->arch->arch);
        return false;
    }
    return budget <= 0 || load_shared_bytes(loader, module, *handle, shared_bytes, name, budget, why, cap);
}

bool r35a_gpu_load_kernels(r35a_gpu_runtime *rt, const r35a_gpu_loader *loader, char *why, size_t cap)
{
    rt->num_modules = 0;
    for (int f = 0; f < R35A_GPU_NUM_FAMILIES; ++f) {
        const r35a_gpu_family family = (r35a_gpu_family)f;
        void **handles = handles_of(rt, family);
        uint32_t *shared = shared_bytes_of(rt, family);
        bool any = false;
        for (int i = 0; i < r35a_registry_count(family); ++i) {
            if (!r35a_same_name(r35a_registry_tuning(family, i), rt->arch->tuning))
                continue;
            any = true;
            const char *name = r35a_registry_name(family, i), *unit = r35a_registry_unit(family, i);
            const int32_t budget = loader->set_max_dynamic_shared ? dynamic_shared_budget(family, i) : 0;
            if (!resolve(rt, loader, family, unit, name, &handles[i], budget, shared ? &shared[i] : NULL, why, cap))
                goto fail;
            /* a workgroup-wide encoder variant's tail kernel, under the same occupancy contract */
            const char *tail = family == R35A_GPU_ENCODER ? r35a_encoder_tail_name(i) : NULL;
            if (tail && !resolve(rt, loader, family, unit, tail, &rt->encoder_tail[i], budget,
                                 &rt->encoder_tail_shared_bytes[i], why, cap))
                goto fail;
            /* its paged sibling (prefill), likewise */
            const char *paged = family == R35A_GPU_ENCODER ? r35a_encoder_paged_name(i) : NULL;
            if (paged && !resolve(rt, loader, family, unit, paged, &rt->encoder_paged[i], budget,
                                  &rt->encoder_paged_shared_bytes[i], why, cap))
                goto fail;
        }
        /* the decode variants' split merge kernels, in decode's merge unit */
        for (int k = 0; family == R35A_GPU_DECODE && any && k < R35A_NUM_DECODE_MERGE_KERNELS; ++k) {
            const char *name = r35a_decode_merge_name(k == 1 ? R35A_DTYPE_BF16 : R35A_DTYPE_F16);
            if (!resolve(rt, loader, family, R35A_DECODE_MERGE_UNIT, name, &rt->decode_merge[k], 0, NULL, why, cap))
                goto fail;
        }
    }
    return true;
fail:
    r35a_gpu_unload_kernels(rt, loader);
    return false;
}

const r35a_code_object *r35a_code_object_find(const char *arch, const char *family, const char *unit)
{
    for (size_t i = 0; i < r35a_num_code_objects; ++i)
        if (strcmp(r35a_code_objects[i].arch, arch) == 0 && strcmp(r35a_code_objects[i].family, family) == 0 &&
            (!unit || strcmp(r35a_code_objects[i].unit, unit) == 0))
            return &r35a_code_objects[i];
    return NULL;
}

void r35a_code_object_archs(const char *prefix, char *out, size_t cap)
{
    out[0] = '\0';
    for (size_t i = 0; i < r35a_num_code_objects; ++i) {
        const char *a = r35a_code_objects[i].arch;
        if (strncmp(a, prefix, strlen(prefix)) != 0)
            continue;
        bool listed = false;
        for (size_t j = 0; j < i && !listed; ++j)
            listed = strcmp(r35a_code_objects[j].arch, a) == 0;
        if (!listed)
            r35a_text_append(out, cap, ",", "%s", a);
    }
}

void r35a_gpu_context_adopt(r35a_context *ctx, void *state, const r35a_gpu_runtime *rt, int device_index,
                            const char *backend_name)
{
    ctx->gpu = state;
    ctx->gpu_runtime = rt;
    ctx->backend = R35A_BACKEND_GPU;
    ctx->info.backend = R35A_BACKEND_GPU;
    ctx->info.device_index = device_index;
    snprintf(ctx->info.backend_name, sizeof ctx->info.backend_name, "%s", backend_name);
    snprintf(ctx->info.arch, sizeof ctx->info.arch, "%s", rt->arch->arch);
}
