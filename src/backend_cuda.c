/* backend_cuda.c - the CUDA backend: driver loading, device and arch detection, cubin loading,
 * kernel lookup and launches on the caller's stream (see backend_cuda.h).
 *
 * The driver (libcuda.so.1) is dlopen'ed once per process under pthread_once and never closed. Only
 * the entry points in cuda_api below are looked up, with the signatures the CUDA driver API
 * documents; no CUDA header is used. A context retains the device's primary context (the one the
 * CUDA runtime, PyTorch and most engines use, so their streams are valid here), loads the cubins of
 * the device's arch on it and resolves every kernel at creation: runs then only read immutable state.
 * Every driver call is made with the primary context pushed on the calling thread and popped after,
 * so the caller's current context is left as it was.
 *
 * The implementation entries are gpu_impls.c's, shared with backend_hip.c (same planners, same
 * kernel arguments); this file gives them the kernel handles and the launch. */
#include "backend_cuda.h"

#include "gpu_runtime.h"

#include "decode/decode_args.h"
#include "common/device_error.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the CUDA driver API, as much of it as the backend calls ---- */

typedef int cu_result;                  /* CUresult: CUDA_SUCCESS = 0 */
typedef int cu_device;                  /* CUdevice */
typedef void *cu_context;               /* CUcontext */
typedef void *cu_module;                /* CUmodule */
typedef void *cu_function;              /* CUfunction */
typedef void *cu_stream;                /* CUstream; NULL is the default stream */
typedef unsigned long long cu_deviceptr; /* CUdeviceptr */

/* cuLaunchKernelEx's configuration (cuda.h CUlaunchConfig, CUlaunchAttribute: a 4-byte id, 4 bytes of
 * padding, a 64-byte value union), for the one attribute the backend sets. */
#define CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION 6
typedef struct cu_launch_attribute {
    int id;
    char pad[4];
    union {
        char bytes[64];
        int programmatic_stream_serialization_allowed;
        unsigned long long align;
    } value;
} cu_launch_attribute;
typedef struct cu_launch_config {
    unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
    cu_stream stream;
    cu_launch_attribute *attrs;
    unsigned num_attrs;
} cu_launch_config;
_Static_assert(sizeof(cu_launch_attribute) == 72 && sizeof(cu_launch_config) == 56,
               "cuLaunchKernelEx's structs as cuda.h lays them out (64-bit)");

#define CU_ATTR_MULTIPROCESSOR_COUNT 16
#define CU_ATTR_COMPUTE_CAPABILITY_MAJOR 75
#define CU_ATTR_COMPUTE_CAPABILITY_MINOR 76

typedef struct cuda_api {
    cu_result (*Init)(unsigned flags);
    cu_result (*DriverGetVersion)(int *version);
    cu_result (*DeviceGetCount)(int *count);
    cu_result (*DeviceGet)(cu_device *device, int ordinal);
    cu_result (*DeviceGetAttribute)(int *value, int attribute, cu_device device);
    cu_result (*DeviceGetName)(char *name, int len, cu_device device);
    cu_result (*DevicePrimaryCtxRetain)(cu_context *ctx, cu_device device);
    cu_result (*DevicePrimaryCtxRelease)(cu_device device);
    cu_result (*CtxPushCurrent)(cu_context ctx);
    cu_result (*CtxPopCurrent)(cu_context *ctx);
    cu_result (*ModuleLoadData)(cu_module *module, const void *image);
    cu_result (*ModuleUnload)(cu_module module);
    cu_result (*ModuleGetFunction)(cu_function *function, cu_module module, const char *name);
    cu_result (*ModuleGetGlobal)(cu_deviceptr *dptr, size_t *bytes, cu_module module, const char *name);
    cu_result (*MemcpyDtoH)(void *dst, cu_deviceptr src, size_t bytes);
    cu_result (*LaunchKernel)(cu_function f, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,
                              unsigned block_y, unsigned block_z, unsigned shared_bytes, cu_stream stream,
                              void **params, void **extra);
    cu_result (*FuncSetAttribute)(cu_function f, int attribute, int value);
    /* optional (NULL when the driver lacks it: every launch is then a plain cuLaunchKernel) */
    cu_result (*LaunchKernelEx)(const cu_launch_config *config, cu_function f, void **params, void **extra);
    cu_result (*MemHostAlloc)(void **ptr, size_t bytes, unsigned flags);
    cu_result (*MemHostGetDevicePointer)(cu_deviceptr *device_ptr, void *host_ptr, unsigned flags);
    cu_result (*MemFreeHost)(void *ptr);
    cu_result (*GetErrorString)(cu_result error, const char **text);
} cuda_api;

/* cuMemHostAlloc flags of the device error record: mapped into the device's address space, and
 * portable (pinned for every context, whichever is current when a kernel of ours runs). */
#define CU_MEMHOSTALLOC_PORTABLE 0x1u
#define CU_MEMHOSTALLOC_DEVICEMAP 0x2u

static struct {
    cuda_api api;
    bool ok;
    int driver_version;
    char library[160];
    char why[200];
} driver;
static pthread_once_t driver_once = PTHREAD_ONCE_INIT;

static const char *cu_error_text(cu_result e)
{
    const char *s = NULL;
    if (driver.api.GetErrorString == NULL || driver.api.GetErrorString(e, &s) != 0 || s == NULL)
        return "unknown CUDA error";
    return s;
}

static void load_driver(void)
{
    const char *forced = getenv("R35A_CUDA_LIBRARY");
    const char *name = forced && forced[0] ? forced : "libcuda.so.1";
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        r35a_log("cuda: dlopen %s: %s", name, e ? e : "failed");
        snprintf(driver.why, sizeof driver.why, "no CUDA driver: dlopen %s failed", name);
        return;
    }
    snprintf(driver.library, sizeof driver.library, "%s", name);
    static const struct {
        const char *name;
        size_t offset;
    } symbols[] = {
#define SYM(field, symbol) {symbol, offsetof(cuda_api, field)}
        SYM(Init, "cuInit"),
        SYM(DriverGetVersion, "cuDriverGetVersion"),
        SYM(DeviceGetCount, "cuDeviceGetCount"),
        SYM(DeviceGet, "cuDeviceGet"),
        SYM(DeviceGetAttribute, "cuDeviceGetAttribute"),
        SYM(DeviceGetName, "cuDeviceGetName"),
        SYM(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
        SYM(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
        SYM(CtxPushCurrent, "cuCtxPushCurrent_v2"),
        SYM(CtxPopCurrent, "cuCtxPopCurrent_v2"),
        SYM(ModuleLoadData, "cuModuleLoadData"),
        SYM(ModuleUnload, "cuModuleUnload"),
        SYM(ModuleGetFunction, "cuModuleGetFunction"),
        SYM(ModuleGetGlobal, "cuModuleGetGlobal_v2"),
        SYM(MemcpyDtoH, "cuMemcpyDtoH_v2"),
        SYM(LaunchKernel, "cuLaunchKernel"),
        SYM(FuncSetAttribute, "cuFuncSetAttribute"),
        SYM(MemHostAlloc, "cuMemHostAlloc"),
        SYM(MemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2"),
        SYM(MemFreeHost, "cuMemFreeHost"),
        SYM(GetErrorString, "cuGetErrorString"),
#undef SYM
    };
    cuda_api api;
    memset(&api, 0, sizeof api);
    for (size_t i = 0; i < sizeof symbols / sizeof *symbols; ++i) {
        void *fn = dlsym(lib, symbols[i].name);
        if (!fn) {
            snprintf(driver.why, sizeof driver.why, "the CUDA driver %s lacks %s", name, symbols[i].name);
            r35a_log("cuda: %s", driver.why);
            return;
        }
        memcpy((char *)&api + symbols[i].offset, &fn, sizeof fn);
    }
    api.LaunchKernelEx = (cu_result(*)(const cu_launch_config *, cu_function, void **, void **))dlsym(lib, "cuLaunchKernelEx");
    cu_result e = api.Init(0);
    if (e != 0) {
        driver.api.GetErrorString = api.GetErrorString;
        snprintf(driver.why, sizeof driver.why, "no CUDA device: cuInit failed: %s (%d)", cu_error_text(e), e);
        r35a_log("cuda: %s", driver.why);
        return;
    }
    (void)api.DriverGetVersion(&driver.driver_version);
    driver.api = api;
    driver.ok = true;
    r35a_log("cuda: loaded %s (driver API %d)", name, driver.driver_version);
}

/* ---- per-context state ---- */

/* The family suffix of the cubins built with the gfx11-exact fragment emulation (the generic family has
 * none: it uses no fragments). */
#define EMU_SUFFIX ".gfx11emu"

typedef struct cuda_state {
    cu_device device;
    cu_context primary;
    int num_sms;
    bool programmatic_launch;    /* programmatic dependent launches (sm_90+, cuLaunchKernelEx) */
    bool emulate_gfx11;
    char arch[32];
    r35a_gpu_runtime runtime;    /* what the shared entries (gpu_impls.c) run through; ctx->gpu_runtime */
} cuda_state;

static const cuda_state *state_of(const r35a_context *ctx) { return (const cuda_state *)ctx->gpu; }

static cu_result enter(const cuda_state *st) { return driver.api.CtxPushCurrent(st->primary); }

static void leave(void)
{
    cu_context popped;
    (void)driver.api.CtxPopCurrent(&popped);
}

/* ---- module calls for the shared loading skeleton (gpu_runtime.c) ---- */

#define CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES 8

/* The decode and encoder kernels' shared memory is dynamic, above the default 48 KiB limit. */
static int set_max_dynamic_shared(void *function, int bytes)
{
    return driver.api.FuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
}

#define CUDA_ERROR_INVALID_VALUE 1

/* An int device global of a loaded module (a decode or encoder kernel's <name>_lds_bytes), read synchronously
 * at load (the context is current). */
static int read_int_global(void *module, const char *symbol, int *value)
{
    cu_deviceptr p = 0;
    size_t bytes = 0;
    cu_result e = driver.api.ModuleGetGlobal(&p, &bytes, module, symbol);
    if (e != 0)
        return e;
    if (bytes != sizeof *value)
        return CUDA_ERROR_INVALID_VALUE;
    return driver.api.MemcpyDtoH(value, p, sizeof *value);
}

static r35a_gpu_loader loader_of(cuda_state *st)
{
    /* the runtime's module calls take exactly the loader's C arguments */
    return (r35a_gpu_loader){st->arch,
                             st->emulate_gfx11 ? EMU_SUFFIX : NULL,
                             driver.api.ModuleLoadData,
                             driver.api.ModuleGetFunction,
                             driver.api.ModuleUnload,
                             cu_error_text,
                             "cuModuleLoadData",
                             read_int_global,
                             set_max_dynamic_shared,
                             "cuModuleGetGlobal",
                             "cuFuncSetAttribute"};
}

static void release_state(cuda_state *st)
{
    if (!st)
        return;
    if (driver.ok && st->primary) {
        if (enter(st) == 0) {
            r35a_gpu_loader loader = loader_of(st);
            r35a_gpu_unload_kernels(&st->runtime, &loader);
            if (st->runtime.error_host)
                (void)driver.api.MemFreeHost(st->runtime.error_host);
            leave();
        }
        (void)driver.api.DevicePrimaryCtxRelease(st->device);
    }
    free(st);
}

/* The device error record (gpu_runtime.h): pinned host memory mapped for the device, cleared. The
 * primary context must be current. */
static bool alloc_error_record(cuda_state *st, char *reason, size_t reason_len)
{
    void *host = NULL;
    cu_deviceptr device = 0;
    cu_result e = driver.api.MemHostAlloc(&host, R35A_DEVICE_ERROR_BYTES, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
    if (e != 0 || !host) {
        snprintf(reason, reason_len, "cuMemHostAlloc of the %d-byte device error record failed: %s (%d)",
                 R35A_DEVICE_ERROR_BYTES, cu_error_text(e), e);
        return false;
    }
    memset(host, 0, R35A_DEVICE_ERROR_BYTES);
    e = driver.api.MemHostGetDevicePointer(&device, host, 0);
    if (e != 0 || !device) {
        snprintf(reason, reason_len, "cuMemHostGetDevicePointer of the device error record failed: %s (%d)",
                 cu_error_text(e), e);
        (void)driver.api.MemFreeHost(host);
        return false;
    }
    st->runtime.error_host = host;
    st->runtime.error_device = (uint32_t *)(uintptr_t)device;
    return true;
}

/* The runtime's release hook (api.c calls it through ctx->gpu_runtime). */
static void context_release(r35a_context *ctx)
{
    release_state((cuda_state *)ctx->gpu);
    ctx->gpu = NULL;
    ctx->gpu_runtime = NULL;
}

/* ---- launches (the runtime of the shared entries, gpu_impls.c) ---- */

/* programmatic: the kernel may start while the previous launch on the stream is still running
 * (programmatic dependent launch, sm_90 and later): it waits for that launch's completion and memory
 * itself (device.h grid_dependency_wait), so its own launch latency overlaps the previous kernel's
 * tail. Where the driver has no cuLaunchKernelEx, or the device is older, an ordinary launch. */
static r35a_status launch(const r35a_context *ctx, void *f, const char *name, const uint32_t grid[3],
                          const uint32_t block[3], void *arg, uint32_t shared_bytes, bool programmatic, void *stream)
{
    /* cuLaunchKernel takes the struct's address; its size is the kernel's */
    const cuda_state *st = state_of(ctx);
    cu_result e = enter(st);
    if (e != 0)
        return r35a_fail(R35A_ERR_DEVICE, "cuCtxPushCurrent failed: %s (%d)", cu_error_text(e), e);
    void *params[] = {arg};
    if (programmatic && st->programmatic_launch) {
        cu_launch_attribute attr;
        memset(&attr, 0, sizeof attr);
        attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmatic_stream_serialization_allowed = 1;
        const cu_launch_config config = {grid[0], grid[1], grid[2], block[0], block[1], block[2], shared_bytes,
                                         stream, &attr, 1};
        e = driver.api.LaunchKernelEx(&config, f, params, NULL);
    } else {
        e = driver.api.LaunchKernel(f, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared_bytes, stream,
                                    params, NULL);
    }
    leave();
    if (e != 0)
        return r35a_fail(R35A_ERR_DEVICE, "cuLaunchKernel(%s, grid %ux%ux%u, block %u, %u B shared) failed: %s (%d)",
                         name, grid[0], grid[1], grid[2], block[0], shared_bytes, cu_error_text(e), e);
    return R35A_OK;
}

bool r35a_cuda_context_init(r35a_context *ctx, int device_index, bool *built, char *reason, size_t reason_len)
{
    char served[64];
    r35a_code_object_archs("sm_", served, sizeof served);
    *built = served[0] != '\0';
    if (!*built) {
        snprintf(reason, reason_len, "built without NVIDIA cubins (R35A_NVIDIA_TARGETS)");
        return false;
    }
    pthread_once(&driver_once, load_driver);
    if (!driver.ok) {
        snprintf(reason, reason_len, "%s", driver.why);
        return false;
    }
    int count = 0;
    cu_result e = driver.api.DeviceGetCount(&count);
    if (e != 0 || count <= 0) {
        snprintf(reason, reason_len, "no CUDA device: cuDeviceGetCount %s", e != 0 ? cu_error_text(e) : "found none");
        return false;
    }
    if (device_index >= count) {
        snprintf(reason, reason_len, "no CUDA device %d: the driver sees %d device%s", device_index, count,
                 count == 1 ? "" : "s");
        return false;
    }
    cu_device dev = 0;
    int major = 0, minor = 0, sms = 0;
    char name[128] = "";
    if ((e = driver.api.DeviceGet(&dev, device_index)) != 0 ||
        (e = driver.api.DeviceGetAttribute(&major, CU_ATTR_COMPUTE_CAPABILITY_MAJOR, dev)) != 0 ||
        (e = driver.api.DeviceGetAttribute(&minor, CU_ATTR_COMPUTE_CAPABILITY_MINOR, dev)) != 0 ||
        (e = driver.api.DeviceGetAttribute(&sms, CU_ATTR_MULTIPROCESSOR_COUNT, dev)) != 0 ||
        (e = driver.api.DeviceGetName(name, (int)sizeof name, dev)) != 0) {
        snprintf(reason, reason_len, "cannot query CUDA device %d: %s (%d)", device_index, cu_error_text(e), e);
        return false;
    }
    name[sizeof name - 1] = '\0';
    char arch[32];
    snprintf(arch, sizeof arch, "sm_%d%d", major, minor);
    const r35a_gpu_arch *row = r35a_find_gpu_arch(arch);
    if (!row || !r35a_code_object_find(arch, "decode", NULL)) {
        snprintf(reason, reason_len, "no %s device: found %s (%s, CUDA device %d)", served, arch, name, device_index);
        return false;
    }

    cuda_state *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(reason, reason_len, "allocation of the CUDA backend state failed");
        return false;
    }
    st->device = dev;
    st->num_sms = sms > 0 ? sms * row->cus_per_unit : row->default_cus;
    st->runtime.arch = row;
    /* An SM is the planner's compute unit; how many blocks of a variant it holds at once follows from
     * the variant's occupancy contract and the arch table's simds_per_cu (plan_decode.c). */
    st->runtime.planner_cus = st->num_sms;
    st->runtime.launch = launch;
    st->runtime.release = context_release;
    const char *frag = getenv("R35A_CUDA_FRAGMENTS");
    st->emulate_gfx11 = frag && strcmp(frag, "gfx11emu") == 0;
    st->programmatic_launch = major >= 9 && driver.api.LaunchKernelEx;
#if defined(R35A_LAB) && R35A_LAB
    /* a lab build's measurement knob: R35A_LAB_PROGRAMMATIC_LAUNCH=0 launches the split merge the ordinary way */
    const char *pdl = getenv("R35A_LAB_PROGRAMMATIC_LAUNCH");
    st->programmatic_launch = st->programmatic_launch && !(pdl && strcmp(pdl, "0") == 0);
#endif
    snprintf(st->arch, sizeof st->arch, "%s", arch);
    if ((e = driver.api.DevicePrimaryCtxRetain(&st->primary, dev)) != 0) {
        snprintf(reason, reason_len, "cuDevicePrimaryCtxRetain(%d) failed: %s (%d)", device_index, cu_error_text(e), e);
        free(st);
        return false;
    }
    if ((e = enter(st)) != 0) {
        snprintf(reason, reason_len, "cuCtxPushCurrent failed: %s (%d)", cu_error_text(e), e);
        release_state(st);
        return false;
    }
    if (st->emulate_gfx11 && !r35a_code_object_find(arch, "decode" EMU_SUFFIX, NULL)) {
        /* the emulation cubins are a test artifact (the rdna35attn_gputest library): without them the
         * request would run the native layer under the emulation's name */
        snprintf(reason, reason_len, "R35A_CUDA_FRAGMENTS=gfx11emu: this library has no gfx11-emulation cubins for "
                                     "%s (they are in the test library rdna35attn_gputest)", arch);
        leave();
        release_state(st);
        return false;
    }
    r35a_gpu_loader loader = loader_of(st);
    bool ok = r35a_gpu_load_kernels(&st->runtime, &loader, reason, reason_len) &&
              alloc_error_record(st, reason, reason_len);
    leave();
    if (!ok) {
        release_state(st);
        return false;
    }

    r35a_gpu_context_adopt(ctx, st, &st->runtime, device_index, "cuda");
    /* name, arch and library are cut to lengths that keep the reason within its field (at most 240 of
     * its 256 bytes) */
    snprintf(ctx->info.reason, sizeof ctx->info.reason, "CUDA device %d: %.60s, %.16s, %d SMs, fragments %s (%.64s, driver API %d)",
             device_index, name, arch, st->num_sms, st->emulate_gfx11 ? "gfx11 emulation" : "mma.sync",
             driver.library, driver.driver_version);
    r35a_log("cuda: device %d is %s (%s, %d SMs, planner CUs %d); fragments %s", device_index, name, arch,
             st->num_sms, st->runtime.planner_cus, st->emulate_gfx11 ? "gfx11emu" : "native");
    return true;
}

