/* gpu_runtime.h - what a GPU backend (backend_hip.c, backend_cuda.c) gives the shared GPU entries
 * (gpu_impls.c): the device's arch row, the CU count the split planner fills, the kernel handles
 * and the launch; and the one skeleton both backends use to load the embedded code objects and
 * resolve every kernel of the device's tuning rows through their runtime's module calls. */
#ifndef R35A_GPU_RUNTIME_H
#define R35A_GPU_RUNTIME_H

#include "code_objects.h"
#include "registry.h"

#define R35A_HANDLES(n) ((n) > 0 ? (n) : 1)
/* Code objects one context loads at most: the compile units of its arch's families (tools/gen_variants.py
 * --units: 10 for gfx1151's tables today, 50 for sm_90's, which split by head size too). */
#define R35A_GPU_MAX_MODULES 64

struct r35a_gpu_runtime {
    const r35a_gpu_arch *arch;   /* the device's row of the arch table (its tuning rows, CU counting) */
    int planner_cus;             /* the compute units the decode split planner fills */
    /* Kernel handles, indexed like the family's registry table; NULL for rows of another tuning. */
    void *decode[R35A_HANDLES(R35A_NUM_DECODE_VARIANTS)];
    void *generic[R35A_HANDLES(R35A_NUM_GENERIC_KERNELS)];
    void *encoder[R35A_HANDLES(R35A_NUM_ENCODER_VARIANTS)];
    /* The decode variants' split merge kernels (r35a_decode_merge_index), from the decode module;
     * NULL when the device's tuning has no decode variant. */
    void *decode_merge[R35A_NUM_DECODE_MERGE_KERNELS];
    /* The workgroup-wide encoder variants' tail kernels (<name>_tail, encoder_args.h "Tail split"),
     * indexed like the variants, from the encoder module; NULL for the others. */
    void *encoder_tail[R35A_HANDLES(R35A_NUM_ENCODER_VARIANTS)];
    /* The workgroup-wide encoder variants' paged siblings (<name>_paged, prefill_args.h), likewise. */
    void *encoder_paged[R35A_HANDLES(R35A_NUM_ENCODER_VARIANTS)];
    /* The loaded modules: one per code object of the device's arch that holds a kernel of its
     * tuning (a family's compile units: code_objects.h), loaded when its first kernel resolves. */
    void *modules[R35A_GPU_MAX_MODULES];
    const r35a_code_object *module_objects[R35A_GPU_MAX_MODULES];   /* the code object of modules[i] */
    int num_modules;
    /* NVIDIA: each decode and encoder kernel's dynamic shared memory, read from its code object at
     * load (<name>_lds_bytes of kernels/decode/decode.hip, kernels/encoder/encoder.hip), indexed like the handles;
     * 0 where kernels use static LDS only (HIP, the generic family). r35a_gpu_kernel_shared_bytes
     * reads them. */
    uint32_t decode_shared_bytes[R35A_HANDLES(R35A_NUM_DECODE_VARIANTS)];
    uint32_t encoder_shared_bytes[R35A_HANDLES(R35A_NUM_ENCODER_VARIANTS)];
    uint32_t encoder_tail_shared_bytes[R35A_HANDLES(R35A_NUM_ENCODER_VARIANTS)];
    uint32_t encoder_paged_shared_bytes[R35A_HANDLES(R35A_NUM_ENCODER_VARIANTS)];
    /* The context's device error record (kernels/common/device_error.h): host-mapped pinned memory
     * the backend allocates at context creation. The host reads it through error_host (a plain
     * load: no device call, so graph capture is unaffected); every kernel gets error_device in its
     * argument struct. */
    uint64_t *error_host;
    uint32_t *error_device;
    /* On stream: launches kernel (named name in messages) with its one by-value argument struct args
     * and shared_bytes of dynamic shared memory per workgroup. programmatic: the kernel waits for the
     * stream's previous kernel itself (device.h grid_dependency_wait: before reading its outputs, or,
     * an encoder tail kernel, before it ends), so the backend may start it before that one ends (CUDA
     * programmatic dependent launch; HIP: an ordinary launch). Returns
     * R35A_OK, or the failure through r35a_fail. */
    r35a_status (*launch)(const r35a_context *ctx, void *kernel, const char *name, const uint32_t grid[3],
                          const uint32_t block[3], void *args, uint32_t shared_bytes, bool programmatic, void *stream);
    /* Unloads the modules and frees the backend state ctx->gpu (which holds this runtime). */
    void (*release)(r35a_context *ctx);
};

/* Reports and clears the device error record: R35A_OK when it is clear, else R35A_ERR_INVALID_DATA
 * with a detail naming the field and the sequence (through r35a_fail). Safe from several threads:
 * one of them reports a given record. */
r35a_status r35a_gpu_take_device_error(const r35a_gpu_runtime *rt);

/* The handle of kernel `index` of `family` (NULL if it is not one of the device's). */
void *r35a_gpu_kernel_handle(const r35a_gpu_runtime *rt, r35a_gpu_family family, int index);
/* The handle of the split merge kernel of decode variant `index` (its dtype's), or NULL. */
void *r35a_gpu_decode_merge_handle(const r35a_gpu_runtime *rt, int index);
/* The tail kernel of encoder variant `index` and its dynamic shared memory (NULL / 0: none). */
void *r35a_gpu_encoder_tail_handle(const r35a_gpu_runtime *rt, int index);
uint32_t r35a_gpu_encoder_tail_shared_bytes(const r35a_gpu_runtime *rt, int index);
/* The paged sibling of encoder variant `index` and its dynamic shared memory (NULL / 0: none). */
void *r35a_gpu_encoder_paged_handle(const r35a_gpu_runtime *rt, int index);
uint32_t r35a_gpu_encoder_paged_shared_bytes(const r35a_gpu_runtime *rt, int index);
/* The dynamic shared memory kernel `index` of `family` is launched with (0: static LDS only). */
uint32_t r35a_gpu_kernel_shared_bytes(const r35a_gpu_runtime *rt, r35a_gpu_family family, int index);

/* A backend's module entry points, for the loading skeleton. HIP's and the CUDA driver's take the
 * same C arguments and return 0 on success (hipError_t, CUresult). */
typedef struct r35a_gpu_loader {
    const char *arch;            /* the code objects of this arch are loaded */
    /* When set, a family's build with this suffix ("decode.gfx11emu": NVIDIA's gfx11-exact fragment
     * emulation) is loaded where the build has one, else its plain build. */
    const char *family_suffix;
    int (*module_load_data)(void **module, const void *image);
    int (*module_get_function)(void **function, void *module, const char *name);
    int (*module_unload)(void *module);
    const char *(*error_text)(int error);
    const char *load_call;       /* "hipModuleLoadData", "cuModuleLoadData": for messages */
    /* NVIDIA (NULL where kernels use static LDS only, HIP): reads the int device global `symbol` of
     * module (cuModuleGetGlobal + cuMemcpyDtoH: a decode or encoder kernel's <name>_lds_bytes), and
     * raises function's dynamic shared memory limit to bytes (cuFuncSetAttribute
     * MAX_DYNAMIC_SHARED_SIZE_BYTES). Both are called at load for each kernel of a family that takes
     * dynamic shared memory (gpu_runtime.c dynamic_shared_budget). */
    int (*read_int_global)(void *module, const char *symbol, int *value);
    int (*set_max_dynamic_shared)(void *function, int bytes);
    const char *read_global_call; /* "cuModuleGetGlobal": for messages */
    const char *set_shared_call;  /* "cuFuncSetAttribute": for messages */
} r35a_gpu_loader;

/* Loads the code objects that hold the registry rows of rt->arch's tuning (one module per compile
 * unit, the loader's family suffix preferred) and resolves every such row. On failure writes why ("kernel X is missing from the gfx1151 code objects", or the
 * load's reason), unloads what it loaded and returns false. The backend makes its device current
 * around the call. */
bool r35a_gpu_load_kernels(r35a_gpu_runtime *rt, const r35a_gpu_loader *loader, char *why, size_t cap);
void r35a_gpu_unload_kernels(r35a_gpu_runtime *rt, const r35a_gpu_loader *loader);

/* Makes ctx a GPU context of a backend: its state (which holds rt), the runtime, and the info
 * fields every GPU context has (backend GPU, device index, backend name, arch). */
void r35a_gpu_context_adopt(r35a_context *ctx, void *state, const r35a_gpu_runtime *rt, int device_index,
                            const char *backend_name);

/* The embedded code object of (arch, family name, unit), e.g. ("sm_90", "decode.gfx11emu", "f16_fp8"),
 * or NULL; unit NULL: any unit of the family (whether the build has the family at all). */
const r35a_code_object *r35a_code_object_find(const char *arch, const char *family, const char *unit);
/* The distinct archs of the embedded code objects whose names start with prefix ("gfx", "sm_"),
 * comma-separated, for messages ("" if none). */
void r35a_code_object_archs(const char *prefix, char *out, size_t cap);

#endif
