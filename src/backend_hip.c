/* backend_hip.c - the HIP backend: runtime loading, device and arch detection, code-object loading,
 * kernel lookup and launches on the caller's stream.
 *
 * The HIP runtime is dlopen'ed (libamdhip64.so.7, then .so.6, then .so), once per process under
 * pthread_once, and never closed (unloading a GPU runtime under live allocations is unsafe). Only
 * the entry points in hip_api below are looked up. No HIP header is used: the few types the calls
 * take are pointers and ints, declared here as the HIP C API documents them.
 *
 * The device's arch name comes from hipGetDevicePropertiesR0600 (exported by ROCm 6.0 and later,
 * ROCm 7 included; hipGetDeviceProperties is a macro over it in ROCm's headers): its struct puts
 * gcnArchName[256] at byte offset 1160 and is 1472 bytes long on LP64. That offset was checked two
 * ways: by laying out the documented hipDeviceProp_tR0600 field list (name[256], hipUUID, luid[8],
 * ... reserved[63], hipReserved[32], then gcnArchName) and against LLVM's offload-arch tool, which
 * reads the same field at the same offset. The buffer handed to the runtime is 4 KiB, so a runtime
 * whose struct grew at the end cannot write past it; a name that does not start with "gfx" is
 * reported as an unreadable arch rather than trusted.
 *
 * A context loads its code objects (one module per kernel family of its arch) and resolves every
 * kernel when it is created, so runs only read immutable state and need no lock; module and kernel
 * handles are per context because HIP modules are per device. */
#include "backend_hip.h"

#include "gpu_runtime.h"

#include "common/device_error.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the HIP C API, as much of it as the backend calls ---- */

typedef int hip_error;          /* hipError_t: hipSuccess = 0 */
typedef void *hip_module;       /* hipModule_t */
typedef void *hip_function;     /* hipFunction_t */
typedef void *hip_stream;       /* hipStream_t; NULL is the default stream */

#define HIP_PROPS_R0600_ARCH_OFFSET 1160
#define HIP_PROPS_R0600_CU_OFFSET 388   /* int multiProcessorCount */
#define HIP_PROPS_BUFFER_BYTES 4096

typedef struct hip_api {
    hip_error (*GetDeviceCount)(int *count);
    hip_error (*GetDevicePropertiesR0600)(void *props, int device);
    hip_error (*GetDevice)(int *device);
    hip_error (*SetDevice)(int device);
    hip_error (*ModuleLoadData)(hip_module *module, const void *image);
    hip_error (*ModuleUnload)(hip_module module);
    hip_error (*ModuleGetFunction)(hip_function *function, hip_module module, const char *name);
    hip_error (*ModuleLaunchKernel)(hip_function f, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                                    unsigned block_x, unsigned block_y, unsigned block_z,
                                    unsigned shared_bytes, hip_stream stream, void **params, void **extra);
    hip_error (*HostMalloc)(void **ptr, size_t bytes, unsigned flags);
    hip_error (*HostGetDevicePointer)(void **device_ptr, void *host_ptr, unsigned flags);
    hip_error (*HostFree)(void *ptr);
    const char *(*GetErrorString)(hip_error error);
} hip_api;

/* hipHostMalloc flags of the device error record: mapped into the device's address space, coherent
 * (the kernels' stores reach host memory without a cache flush by the host). */
#define HIP_HOST_MALLOC_MAPPED 0x2u
#define HIP_HOST_MALLOC_COHERENT 0x40000000u

static struct {
    hip_api api;
    bool ok;
    char library[64];       /* the soname that loaded */
    char why[200];          /* why not, when !ok */
} runtime;
static pthread_once_t runtime_once = PTHREAD_ONCE_INIT;

static const char *hip_error_text(hip_error e)
{
    const char *s = runtime.api.GetErrorString ? runtime.api.GetErrorString(e) : NULL;
    return s ? s : "unknown HIP error";
}

static void load_runtime(void)
{
    /* R35A_HIP_LIBRARY (test-only knob) names the one library to try, e.g. a stub runtime. */
    const char *forced = getenv("R35A_HIP_LIBRARY");
    const char *const defaults[] = {"libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so"};
    const char *const *names = defaults;
    size_t count = sizeof defaults / sizeof *defaults;
    if (forced && forced[0]) {
        names = &forced;
        count = 1;
    }
    void *lib = NULL;
    const char *last_error = "";
    for (size_t i = 0; i < count && !lib; ++i) {
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (lib) {
            snprintf(runtime.library, sizeof runtime.library, "%s", names[i]);
        } else {
            last_error = dlerror();
            r35a_log("hip: dlopen %s: %s", names[i], last_error ? last_error : "failed");
        }
    }
    if (!lib) {
        if (forced && forced[0])
            snprintf(runtime.why, sizeof runtime.why, "no HIP runtime: dlopen %s (R35A_HIP_LIBRARY) failed: %s",
                     forced, last_error ? last_error : "");
        else
            snprintf(runtime.why, sizeof runtime.why, "no HIP runtime: dlopen libamdhip64.so.7/.6 failed");
        return;
    }

    static const struct {
        const char *name;
        size_t offset;
    } symbols[] = {
#define SYM(field) {"hip" #field, offsetof(hip_api, field)}
        SYM(GetDeviceCount),    SYM(GetDevicePropertiesR0600), SYM(GetDevice),
        SYM(SetDevice),         SYM(ModuleLoadData),           SYM(ModuleUnload),
        SYM(ModuleGetFunction), SYM(ModuleLaunchKernel),
        SYM(HostMalloc),        SYM(HostGetDevicePointer),     SYM(HostFree),
        SYM(GetErrorString),
#undef SYM
    };
    hip_api api;
    memset(&api, 0, sizeof api);
    for (size_t i = 0; i < sizeof symbols / sizeof *symbols; ++i) {
        void *fn = dlsym(lib, symbols[i].name);
        if (!fn) {
            snprintf(runtime.why, sizeof runtime.why,
                     "the HIP runtime %s lacks %s (ROCm 6.0 or later is needed)", runtime.library,
                     symbols[i].name);
            r35a_log("hip: %s", runtime.why);
            return; /* the runtime stays loaded: its constructors ran, and unloading GPU runtimes is unsafe */
        }
        memcpy((char *)&api + symbols[i].offset, &fn, sizeof fn);
    }
    runtime.api = api;
    runtime.ok = true;
    r35a_log("hip: loaded %s", runtime.library);
}

/* ---- per-context state ---- */

typedef struct hip_state {
    int device;
    int reported_units;          /* multiProcessorCount: WGPs on RDNA (arch table's unit) */
    char arch[64];
    r35a_gpu_runtime runtime;    /* what the shared entries (gpu_impls.c) run through; ctx->gpu_runtime */
} hip_state;

static const hip_state *state_of(const r35a_context *ctx) { return (const hip_state *)ctx->gpu; }

/* Makes device current on this thread; *previous gets the device to restore (-1: none needed). */
static hip_error enter_device(int device, int *previous)
{
    *previous = -1;
    int current = -1;
    hip_error e = runtime.api.GetDevice(&current);
    if (e != 0 || current != device) {
        e = runtime.api.SetDevice(device);
        if (e != 0)
            return e;
        *previous = current;
    }
    return 0;
}

static void leave_device(int previous)
{
    if (previous >= 0)
        (void)runtime.api.SetDevice(previous);
}

/* "gfx1151:sramecc-:xnack-" -> "gfx1151". */
static void base_arch(const char *full, char *out, size_t cap)
{
    size_t n = strcspn(full, ":");
    if (n >= cap)
        n = cap - 1;
    memcpy(out, full, n);
    out[n] = '\0';
}

/* ---- module calls for the shared loading skeleton (gpu_runtime.c) ---- */

static r35a_gpu_loader loader_of(hip_state *st)
{
    /* the runtime's module calls take exactly the loader's C arguments */
    /* gfx11 kernels use static LDS only: no dynamic shared memory limit to raise */
    return (r35a_gpu_loader){st->arch, NULL, runtime.api.ModuleLoadData, runtime.api.ModuleGetFunction,
                             runtime.api.ModuleUnload, hip_error_text, "hipModuleLoadData", NULL, NULL, NULL, NULL};
}

static void release_state(hip_state *st)
{
    if (!st)
        return;
    int previous;
    if (runtime.ok && enter_device(st->device, &previous) == 0) {
        r35a_gpu_loader loader = loader_of(st);
        r35a_gpu_unload_kernels(&st->runtime, &loader);
        if (st->runtime.error_host)
            (void)runtime.api.HostFree(st->runtime.error_host);
        leave_device(previous);
    }
    free(st);
}

/* The device error record (gpu_runtime.h): pinned host memory mapped for the device, cleared. The
 * device must be current. */
static bool alloc_error_record(hip_state *st, char *reason, size_t reason_len)
{
    void *host = NULL, *device = NULL;
    hip_error e = runtime.api.HostMalloc(&host, R35A_DEVICE_ERROR_BYTES, HIP_HOST_MALLOC_MAPPED | HIP_HOST_MALLOC_COHERENT);
    if (e != 0 || !host) {
        snprintf(reason, reason_len, "hipHostMalloc of the %d-byte device error record failed: %s (%d)",
                 R35A_DEVICE_ERROR_BYTES, hip_error_text(e), e);
        return false;
    }
    memset(host, 0, R35A_DEVICE_ERROR_BYTES);
    e = runtime.api.HostGetDevicePointer(&device, host, 0);
    if (e != 0 || !device) {
        snprintf(reason, reason_len, "hipHostGetDevicePointer of the device error record failed: %s (%d)",
                 hip_error_text(e), e);
        (void)runtime.api.HostFree(host);
        return false;
    }
    st->runtime.error_host = host;
    st->runtime.error_device = device;
    return true;
}

/* The runtime's release hook (api.c calls it through ctx->gpu_runtime). */
static void context_release(r35a_context *ctx)
{
    release_state((hip_state *)ctx->gpu);
    ctx->gpu = NULL;
    ctx->gpu_runtime = NULL;
}

/* ---- launches (the runtime of the shared entries, gpu_impls.c) ---- */

/* Launches f with its one by-value argument struct on stream, after the stream's previous work. */
static r35a_status launch(const r35a_context *ctx, void *f, const char *name, const uint32_t grid[3],
                          const uint32_t block[3], void *arg, uint32_t shared_bytes, bool programmatic, void *stream)
{
    (void)programmatic;   /* HIP has no programmatic dependent launch: stream order as usual */
    /* hipModuleLaunchKernel takes the struct's address; its size is the kernel's */
    const hip_state *st = state_of(ctx);
    int previous;
    hip_error e = enter_device(st->device, &previous);
    if (e != 0)
        return r35a_fail(R35A_ERR_DEVICE, "hipSetDevice(%d) failed: %s (%d)", st->device, hip_error_text(e), e);
    void *params[] = {arg};
    e = runtime.api.ModuleLaunchKernel(f, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared_bytes, stream,
                                       params, NULL);
    leave_device(previous);
    if (e != 0)
        return r35a_fail(R35A_ERR_DEVICE, "hipModuleLaunchKernel(%s, grid %ux%ux%u, block %u) failed: %s (%d)",
                         name, grid[0], grid[1], grid[2], block[0], hip_error_text(e), e);
    return R35A_OK;
}

bool r35a_hip_context_init(r35a_context *ctx, int device_index, char *reason, size_t reason_len)
{
    char served[64];
    r35a_code_object_archs("gfx", served, sizeof served);
    if (!served[0]) {
        snprintf(reason, reason_len, "built without gfx11 code objects (%s)",
                 r35a_num_code_objects ? "only NVIDIA cubins" : r35a_code_objects_absent_reason);
        return false;
    }
    pthread_once(&runtime_once, load_runtime);
    if (!runtime.ok) {
        snprintf(reason, reason_len, "%s", runtime.why);
        return false;
    }

    int count = 0;
    hip_error e = runtime.api.GetDeviceCount(&count);
    if (e != 0 || count <= 0) {
        if (e != 0)
            snprintf(reason, reason_len, "no HIP device: hipGetDeviceCount failed: %s (%d)", hip_error_text(e), e);
        else
            snprintf(reason, reason_len, "no HIP device: hipGetDeviceCount found none");
        return false;
    }
    if (device_index >= count) {
        snprintf(reason, reason_len, "no HIP device %d: the runtime sees %d device%s", device_index, count,
                 count == 1 ? "" : "s");
        return false;
    }

    _Alignas(16) unsigned char props[HIP_PROPS_BUFFER_BYTES];
    memset(props, 0, sizeof props);
    e = runtime.api.GetDevicePropertiesR0600(props, device_index);
    if (e != 0) {
        snprintf(reason, reason_len, "hipGetDevicePropertiesR0600(%d) failed: %s (%d)", device_index,
                 hip_error_text(e), e);
        return false;
    }
    char full_arch[256];
    memcpy(full_arch, props + HIP_PROPS_R0600_ARCH_OFFSET, sizeof full_arch);
    full_arch[sizeof full_arch - 1] = '\0';
    char arch[64];
    base_arch(full_arch, arch, sizeof arch);
    if (strncmp(arch, "gfx", 3) != 0) {
        snprintf(reason, reason_len, "cannot read the arch of HIP device %d (hipDeviceProp_tR0600.gcnArchName "
                 "is not a gfx name; an unexpected HIP runtime?)", device_index);
        return false;
    }
    const r35a_gpu_arch *row = r35a_find_gpu_arch(arch);
    if (!row || !r35a_code_object_find(arch, "decode", NULL)) {
        snprintf(reason, reason_len, "no %s device: found %s (HIP device %d)", served, arch, device_index);
        return false;
    }
    int units = 0;
    memcpy(&units, props + HIP_PROPS_R0600_CU_OFFSET, sizeof units);

    hip_state *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(reason, reason_len, "allocation of the HIP backend state failed");
        return false;
    }
    st->device = device_index;
    st->reported_units = units;
    snprintf(st->arch, sizeof st->arch, "%s", arch);
    st->runtime.arch = row;
    /* RDNA's multiProcessorCount counts WGPs (two CUs each; the arch table says so); the split
     * planner fills CUs. */
    st->runtime.planner_cus = units > 0 && units <= 4096 ? units * row->cus_per_unit : row->default_cus;
    st->runtime.launch = launch;
    st->runtime.release = context_release;

    int previous;
    e = enter_device(device_index, &previous);
    if (e != 0) {
        snprintf(reason, reason_len, "hipSetDevice(%d) failed: %s (%d)", device_index, hip_error_text(e), e);
        free(st);
        return false;
    }
    r35a_gpu_loader loader = loader_of(st);
    bool ok = r35a_gpu_load_kernels(&st->runtime, &loader, reason, reason_len);
    if (ok && !alloc_error_record(st, reason, reason_len)) {
        r35a_gpu_unload_kernels(&st->runtime, &loader);
        ok = false;
    }
    leave_device(previous);
    if (!ok) {
        free(st);
        return false;
    }

    r35a_gpu_context_adopt(ctx, st, &st->runtime, device_index, "hip");
    char device_name[64];
    memcpy(device_name, props, sizeof device_name - 1); /* hipDeviceProp_t.name opens both layouts */
    device_name[sizeof device_name - 1] = '\0';
    /* names cut to lengths that keep the reason within its field */
    snprintf(ctx->info.reason, sizeof ctx->info.reason, "HIP device %d: %.63s, %.80s, %d %ss = %d CUs (%.32s)",
             device_index, device_name[0] ? device_name : "unnamed", full_arch, units, row->unit,
             st->runtime.planner_cus, runtime.library);
    r35a_log("hip: device %d is %s (tuning %s) with %d %ss = %d CUs; %d decode variants, %d generic kernels and %d "
             "encoder variants known", device_index, full_arch, row->tuning, units, row->unit,
             st->runtime.planner_cus, R35A_NUM_DECODE_VARIANTS, R35A_NUM_GENERIC_KERNELS, R35A_NUM_ENCODER_VARIANTS);
    return true;
}

