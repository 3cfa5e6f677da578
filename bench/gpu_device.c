/* gpu_device.c - see gpu_device.h. One table of entry points per runtime, looked up with dlsym;
 * each public function is a switch over the two, so the HIP and CUDA paths of one operation sit next
 * to each other. Numeric constants are the documented values of the HIP / CUDA enums they stand for. */
#define _POSIX_C_SOURCE 200809L

#include "gpu_device.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* HIP */
enum {
    HIP_MEMCPY_HOST_TO_DEVICE = 1,     /* hipMemcpyHostToDevice */
    HIP_MEMCPY_DEVICE_TO_HOST = 2,     /* hipMemcpyDeviceToHost */
    HIP_MEMCPY_DEVICE_TO_DEVICE = 3,   /* hipMemcpyDeviceToDevice */
    HIP_STREAM_NON_BLOCKING = 1,       /* hipStreamNonBlocking */
    HIP_CAPTURE_MODE_RELAXED = 2,      /* hipStreamCaptureModeRelaxed */
    HIP_PROPS_BYTES = 4096,            /* > sizeof(hipDeviceProp_tR0600) = 1472 */
    HIP_PROPS_UNITS_OFFSET = 388       /* hipDeviceProp_tR0600.multiProcessorCount (src/backend_hip.c) */
};
/* CUDA driver */
enum {
    CU_STREAM_NON_BLOCKING = 1,        /* CU_STREAM_NON_BLOCKING */
    CU_CAPTURE_MODE_RELAXED = 2,       /* CU_STREAM_CAPTURE_MODE_RELAXED */
    CU_ATTR_MULTIPROCESSOR_COUNT = 16, /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */
    CU_ATTR_L2_CACHE_SIZE = 38         /* CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE */
};

typedef unsigned long long cu_ptr; /* CUdeviceptr */

typedef struct hip_api {
    int (*GetDeviceCount)(int *);
    int (*SetDevice)(int);
    int (*Malloc)(void **, size_t);
    int (*Free)(void *);
    int (*MemcpyAsync)(void *, const void *, size_t, int, void *);
    int (*MemsetAsync)(void *, int, size_t, void *);
    int (*StreamCreateWithFlags)(void **, unsigned);
    int (*StreamDestroy)(void *);
    int (*StreamSynchronize)(void *);
    int (*EventCreate)(void **);
    int (*EventDestroy)(void *);
    int (*EventRecord)(void *, void *);
    int (*EventSynchronize)(void *);
    int (*EventElapsedTime)(float *, void *, void *);
    int (*StreamBeginCapture)(void *, int);
    int (*StreamEndCapture)(void *, void **);
    int (*GraphInstantiateWithFlags)(void **, void *, unsigned long long);
    int (*GraphLaunch)(void *, void *);
    int (*GraphExecDestroy)(void *);
    int (*GraphDestroy)(void *);
    int (*ModuleLoadData)(void **, const void *);
    int (*ModuleUnload)(void *);
    int (*ModuleGetFunction)(void **, void *, const char *);
    int (*ModuleLaunchKernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
                              void **, void **);
    const char *(*GetErrorString)(int);
    int (*GetDevicePropertiesR0600)(void *, int); /* optional: name and compute units */
} hip_api;

typedef struct cuda_api {
    int (*Init)(unsigned);
    int (*DeviceGetCount)(int *);
    int (*DeviceGet)(int *, int);
    int (*DeviceGetName)(char *, int, int);
    int (*DeviceGetAttribute)(int *, int, int);
    int (*PrimaryCtxRetain)(void **, int);
    int (*PrimaryCtxRelease)(int);
    int (*CtxSetCurrent)(void *);
    int (*MemAlloc)(cu_ptr *, size_t);
    int (*MemFree)(cu_ptr);
    int (*MemcpyHtoDAsync)(cu_ptr, const void *, size_t, void *);
    int (*MemcpyDtoHAsync)(void *, cu_ptr, size_t, void *);
    int (*MemcpyDtoDAsync)(cu_ptr, cu_ptr, size_t, void *);
    int (*MemsetD8Async)(cu_ptr, unsigned char, size_t, void *);
    int (*StreamCreate)(void **, unsigned);
    int (*StreamDestroy)(void *);
    int (*StreamSynchronize)(void *);
    int (*EventCreate)(void **, unsigned);
    int (*EventDestroy)(void *);
    int (*EventRecord)(void *, void *);
    int (*EventSynchronize)(void *);
    int (*EventElapsedTime)(float *, void *, void *);
    int (*StreamBeginCapture)(void *, int);
    int (*StreamEndCapture)(void *, void **);
    int (*GraphInstantiateWithFlags)(void **, void *, unsigned long long);
    int (*GraphLaunch)(void *, void *);
    int (*GraphExecDestroy)(void *);
    int (*GraphDestroy)(void *);
    int (*ModuleLoadData)(void **, const void *);
    int (*ModuleUnload)(void *);
    int (*ModuleGetFunction)(void **, void *, const char *);
    int (*LaunchKernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **,
                        void **);
    int (*GetErrorString)(int, const char **);
} cuda_api;

struct gpu_device {
    gpu_api api;
    hip_api hip;
    cuda_api cu;
    int device;          /* the ordinal (HIP, and CUDA's cuDeviceGet result) */
    void *primary;       /* CUDA: the retained primary context */
    void *stream;
    int units;
    size_t llc_bytes;
    char library[128];
    char device_name[128];
    char error[400];
};

typedef struct symbol {
    const char *name;
    size_t offset;
    bool optional;
} symbol;

#define HIP_SYM(field) {"hip" #field, offsetof(hip_api, field), false}
static const symbol hip_symbols[] = {
    HIP_SYM(GetDeviceCount),        HIP_SYM(SetDevice),          HIP_SYM(Malloc),
    HIP_SYM(Free),                  HIP_SYM(MemcpyAsync),        HIP_SYM(MemsetAsync),
    HIP_SYM(StreamCreateWithFlags), HIP_SYM(StreamDestroy),      HIP_SYM(StreamSynchronize),
    HIP_SYM(EventCreate),           HIP_SYM(EventDestroy),       HIP_SYM(EventRecord),
    HIP_SYM(EventSynchronize),      HIP_SYM(EventElapsedTime),   HIP_SYM(StreamBeginCapture),
    HIP_SYM(StreamEndCapture),      HIP_SYM(GraphInstantiateWithFlags), HIP_SYM(GraphLaunch),
    HIP_SYM(GraphExecDestroy),      HIP_SYM(GraphDestroy),       HIP_SYM(ModuleLoadData),
    HIP_SYM(ModuleUnload),          HIP_SYM(ModuleGetFunction),  HIP_SYM(ModuleLaunchKernel),
    HIP_SYM(GetErrorString),
    {"hipGetDevicePropertiesR0600", offsetof(hip_api, GetDevicePropertiesR0600), true},
};
#undef HIP_SYM

#define CU_SYM(field, name) {name, offsetof(cuda_api, field), false}
static const symbol cuda_symbols[] = {
    CU_SYM(Init, "cuInit"),
    CU_SYM(DeviceGetCount, "cuDeviceGetCount"),
    CU_SYM(DeviceGet, "cuDeviceGet"),
    CU_SYM(DeviceGetName, "cuDeviceGetName"),
    CU_SYM(DeviceGetAttribute, "cuDeviceGetAttribute"),
    CU_SYM(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
    CU_SYM(PrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
    CU_SYM(CtxSetCurrent, "cuCtxSetCurrent"),
    CU_SYM(MemAlloc, "cuMemAlloc_v2"),
    CU_SYM(MemFree, "cuMemFree_v2"),
    CU_SYM(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
    CU_SYM(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
    CU_SYM(MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"),
    CU_SYM(MemsetD8Async, "cuMemsetD8Async"),
    CU_SYM(StreamCreate, "cuStreamCreate"),
    CU_SYM(StreamDestroy, "cuStreamDestroy_v2"),
    CU_SYM(StreamSynchronize, "cuStreamSynchronize"),
    CU_SYM(EventCreate, "cuEventCreate"),
    CU_SYM(EventDestroy, "cuEventDestroy_v2"),
    CU_SYM(EventRecord, "cuEventRecord"),
    CU_SYM(EventSynchronize, "cuEventSynchronize"),
    CU_SYM(EventElapsedTime, "cuEventElapsedTime"),
    CU_SYM(StreamBeginCapture, "cuStreamBeginCapture_v2"),
    CU_SYM(StreamEndCapture, "cuStreamEndCapture"),
    CU_SYM(GraphInstantiateWithFlags, "cuGraphInstantiateWithFlags"),
    CU_SYM(GraphLaunch, "cuGraphLaunch"),
    CU_SYM(GraphExecDestroy, "cuGraphExecDestroy"),
    CU_SYM(GraphDestroy, "cuGraphDestroy"),
    CU_SYM(ModuleLoadData, "cuModuleLoadData"),
    CU_SYM(ModuleUnload, "cuModuleUnload"),
    CU_SYM(ModuleGetFunction, "cuModuleGetFunction"),
    CU_SYM(LaunchKernel, "cuLaunchKernel"),
    CU_SYM(GetErrorString, "cuGetErrorString"),
};
#undef CU_SYM

/* ---- errors ---------------------------------------------------------------------------------- */

static const char *error_text(const gpu_device *rt, int code)
{
    const char *text = NULL;
    if (rt->api == GPU_API_HIP && rt->hip.GetErrorString != NULL)
        text = rt->hip.GetErrorString(code);
    else if (rt->api == GPU_API_CUDA && rt->cu.GetErrorString != NULL && rt->cu.GetErrorString(code, &text) != 0)
        text = NULL;
    return text != NULL ? text : "unknown error";
}

/* Records "<call> failed: <text> (<code>)" and returns -1; call is printf-style. */
static int fail(gpu_device *rt, int code, const char *call_fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(gpu_device *rt, int code, const char *call_fmt, ...)
{
    char call[200];
    va_list ap;
    va_start(ap, call_fmt);
    vsnprintf(call, sizeof call, call_fmt, ap);
    va_end(ap);
    snprintf(rt->error, sizeof rt->error, "%s failed: %.150s (%d)", call, error_text(rt, code), code);
    return -1;
}

/* 0 when code is success, else fail(). */
#define CHECK(rt, code, ...) ((code) == 0 ? 0 : fail((rt), (code), __VA_ARGS__))

/* ---- loading --------------------------------------------------------------------------------- */

/* dlopen's the first library of names that loads; never closed (unloading a GPU runtime under live
 * allocations is unsafe, and the library keeps its own handle anyway). */
static void *open_first(const char *const *names, size_t count, char *loaded, size_t loaded_len)
{
    for (size_t i = 0; i < count; i++) {
        void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (lib != NULL) {
            snprintf(loaded, loaded_len, "%.100s", names[i]);
            return lib;
        }
    }
    return NULL;
}

static int resolve(void *lib, const symbol *symbols, size_t count, void *table, const char *library, char *why,
                   size_t why_len)
{
    for (size_t i = 0; i < count; i++) {
        void *fn = dlsym(lib, symbols[i].name);
        if (fn == NULL && !symbols[i].optional) {
            snprintf(why, why_len, "the runtime %s lacks %s", library, symbols[i].name);
            return -1;
        }
        memcpy((char *)table + symbols[i].offset, &fn, sizeof fn);
    }
    return 0;
}

static int open_hip(gpu_device *rt, int device, char *why, size_t why_len)
{
    const char *forced = getenv("R35A_HIP_LIBRARY");
    static const char *const defaults[] = {"libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so"};
    const char *const *names = defaults;
    size_t count = sizeof defaults / sizeof defaults[0];
    if (forced != NULL && forced[0] != '\0') {
        names = &forced;
        count = 1;
    }
    void *lib = open_first(names, count, rt->library, sizeof rt->library);
    if (lib == NULL) {
        snprintf(why, why_len, "no HIP runtime: dlopen %s failed", count == 1 ? names[0] : "libamdhip64.so.7/.6");
        return -1;
    }
    if (resolve(lib, hip_symbols, sizeof hip_symbols / sizeof hip_symbols[0], &rt->hip, rt->library, why,
                why_len) != 0)
        return -1;
    int n = 0;
    int e = rt->hip.GetDeviceCount(&n);
    if (e != 0 || device >= n) {
        snprintf(why, why_len, "no HIP device %d (hipGetDeviceCount: %s, %d devices)", device,
                 e != 0 ? error_text(rt, e) : "ok", n);
        return -1;
    }
    if ((e = rt->hip.SetDevice(device)) != 0) {
        snprintf(why, why_len, "hipSetDevice(%d) failed: %s (%d)", device, error_text(rt, e), e);
        return -1;
    }
    rt->device = device;
    if (rt->hip.GetDevicePropertiesR0600 != NULL) {
        unsigned char *props = calloc(1, HIP_PROPS_BYTES);
        if (props != NULL && rt->hip.GetDevicePropertiesR0600(props, device) == 0) {
            memcpy(rt->device_name, props, sizeof rt->device_name - 1); /* hipDeviceProp_t.name opens it */
            memcpy(&rt->units, props + HIP_PROPS_UNITS_OFFSET, sizeof rt->units);
            if (rt->units < 0 || rt->units > 65536)
                rt->units = 0;
        }
        free(props);
    }
    if ((e = rt->hip.StreamCreateWithFlags(&rt->stream, HIP_STREAM_NON_BLOCKING)) != 0) {
        snprintf(why, why_len, "hipStreamCreateWithFlags failed: %s (%d)", error_text(rt, e), e);
        rt->stream = NULL;
        return -1;
    }
    return 0;
}

static int open_cuda(gpu_device *rt, int device, char *why, size_t why_len)
{
    const char *forced = getenv("R35A_CUDA_LIBRARY");
    const char *name = forced != NULL && forced[0] != '\0' ? forced : "libcuda.so.1";
    void *lib = open_first(&name, 1, rt->library, sizeof rt->library);
    if (lib == NULL) {
        snprintf(why, why_len, "no CUDA driver: dlopen %s failed", name);
        return -1;
    }
    if (resolve(lib, cuda_symbols, sizeof cuda_symbols / sizeof cuda_symbols[0], &rt->cu, rt->library, why,
                why_len) != 0)
        return -1;
    int n = 0;
    int e = rt->cu.Init(0);
    if (e == 0)
        e = rt->cu.DeviceGetCount(&n);
    if (e != 0 || device >= n) {
        snprintf(why, why_len, "no CUDA device %d (cuInit/cuDeviceGetCount: %s, %d devices)", device,
                 e != 0 ? error_text(rt, e) : "ok", n);
        return -1;
    }
    if ((e = rt->cu.DeviceGet(&rt->device, device)) != 0) {
        snprintf(why, why_len, "cuDeviceGet(%d) failed: %s (%d)", device, error_text(rt, e), e);
        return -1;
    }
    if ((e = rt->cu.PrimaryCtxRetain(&rt->primary, rt->device)) != 0) {
        snprintf(why, why_len, "cuDevicePrimaryCtxRetain(%d) failed: %s (%d)", device, error_text(rt, e), e);
        rt->primary = NULL;
        return -1;
    }
    if ((e = rt->cu.CtxSetCurrent(rt->primary)) != 0) {
        snprintf(why, why_len, "cuCtxSetCurrent(primary context of device %d) failed: %s (%d)", device,
                 error_text(rt, e), e);
        return -1;
    }
    int units = 0, l2 = 0;
    if (rt->cu.DeviceGetAttribute(&units, CU_ATTR_MULTIPROCESSOR_COUNT, rt->device) == 0 && units > 0)
        rt->units = units;
    if (rt->cu.DeviceGetAttribute(&l2, CU_ATTR_L2_CACHE_SIZE, rt->device) == 0 && l2 > 0)
        rt->llc_bytes = (size_t)l2;
    if (rt->cu.DeviceGetName(rt->device_name, (int)sizeof rt->device_name, rt->device) != 0)
        rt->device_name[0] = '\0';
    rt->device_name[sizeof rt->device_name - 1] = '\0';
    if ((e = rt->cu.StreamCreate(&rt->stream, CU_STREAM_NON_BLOCKING)) != 0) {
        snprintf(why, why_len, "cuStreamCreate failed: %s (%d)", error_text(rt, e), e);
        rt->stream = NULL;
        return -1;
    }
    return 0;
}

int gpu_device_open(gpu_api api, int device, gpu_device **out, char *why, size_t why_len)
{
    *out = NULL;
    if (device < 0) {
        snprintf(why, why_len, "device %d is negative", device);
        return -1;
    }
    gpu_device *rt = calloc(1, sizeof *rt);
    if (rt == NULL) {
        snprintf(why, why_len, "cannot allocate the GPU runtime state");
        return -1;
    }
    rt->api = api;
    int rc = -1;
    if (api == GPU_API_HIP)
        rc = open_hip(rt, device, why, why_len);
    else if (api == GPU_API_CUDA)
        rc = open_cuda(rt, device, why, why_len);
    else
        snprintf(why, why_len, "unknown GPU API %d", (int)api);
    if (rc != 0) {
        gpu_device_close(rt);
        return -1;
    }
    *out = rt;
    return 0;
}

void gpu_device_close(gpu_device *rt)
{
    if (rt == NULL)
        return;
    if (rt->api == GPU_API_HIP && rt->stream != NULL)
        (void)rt->hip.StreamDestroy(rt->stream);
    if (rt->api == GPU_API_CUDA) {
        if (rt->stream != NULL)
            (void)rt->cu.StreamDestroy(rt->stream);
        if (rt->primary != NULL)
            (void)rt->cu.PrimaryCtxRelease(rt->device);
    }
    free(rt);
}

const char *gpu_device_error(const gpu_device *rt) { return rt->error; }
const char *gpu_device_api_name(const gpu_device *rt) { return rt->api == GPU_API_HIP ? "hip" : "cuda"; }
const char *gpu_device_library(const gpu_device *rt) { return rt->library; }
const char *gpu_device_name(const gpu_device *rt) { return rt->device_name; }
int gpu_device_units(const gpu_device *rt) { return rt->units; }
size_t gpu_device_llc_bytes(const gpu_device *rt) { return rt->llc_bytes; }
void *gpu_device_stream(const gpu_device *rt) { return rt->stream; }

/* ---- memory ---------------------------------------------------------------------------------- */

static cu_ptr dptr(const void *p) { return (cu_ptr)(uintptr_t)p; }

int gpu_alloc(gpu_device *rt, void **ptr, size_t bytes)
{
    *ptr = NULL;
    size_t n = bytes ? bytes : 1;
    if (rt->api == GPU_API_HIP)
        return CHECK(rt, rt->hip.Malloc(ptr, n), "hipMalloc(%zu bytes)", n);
    cu_ptr p = 0;
    int e = rt->cu.MemAlloc(&p, n);
    *ptr = e == 0 ? (void *)(uintptr_t)p : NULL;
    return CHECK(rt, e, "cuMemAlloc_v2(%zu bytes)", n);
}

int gpu_free(gpu_device *rt, void *ptr)
{
    if (ptr == NULL)
        return 0;
    if (rt->api == GPU_API_HIP)
        return CHECK(rt, rt->hip.Free(ptr), "hipFree(%p)", ptr);
    return CHECK(rt, rt->cu.MemFree(dptr(ptr)), "cuMemFree_v2(%p)", ptr);
}

int gpu_synchronize(gpu_device *rt)
{
    if (rt->api == GPU_API_HIP)
        return CHECK(rt, rt->hip.StreamSynchronize(rt->stream), "hipStreamSynchronize");
    return CHECK(rt, rt->cu.StreamSynchronize(rt->stream), "cuStreamSynchronize");
}

int gpu_upload(gpu_device *rt, void *dst, const void *host_src, size_t bytes)
{
    int rc;
    if (rt->api == GPU_API_HIP)
        rc = CHECK(rt, rt->hip.MemcpyAsync(dst, host_src, bytes, HIP_MEMCPY_HOST_TO_DEVICE, rt->stream),
                   "hipMemcpyAsync(host to device, %zu bytes)", bytes);
    else
        rc = CHECK(rt, rt->cu.MemcpyHtoDAsync(dptr(dst), host_src, bytes, rt->stream),
                   "cuMemcpyHtoDAsync_v2(%zu bytes)", bytes);
    return rc != 0 ? rc : gpu_synchronize(rt);
}

int gpu_download(gpu_device *rt, void *host_dst, const void *src, size_t bytes)
{
    int rc;
    if (rt->api == GPU_API_HIP)
        rc = CHECK(rt, rt->hip.MemcpyAsync(host_dst, src, bytes, HIP_MEMCPY_DEVICE_TO_HOST, rt->stream),
                   "hipMemcpyAsync(device to host, %zu bytes)", bytes);
    else
        rc = CHECK(rt, rt->cu.MemcpyDtoHAsync(host_dst, dptr(src), bytes, rt->stream),
                   "cuMemcpyDtoHAsync_v2(%zu bytes)", bytes);
    return rc != 0 ? rc : gpu_synchronize(rt);
}

int gpu_copy(gpu_device *rt, void *dst, const void *src, size_t bytes)
{
    if (rt->api == GPU_API_HIP)
        return CHECK(rt, rt->hip.MemcpyAsync(dst, src, bytes, HIP_MEMCPY_DEVICE_TO_DEVICE, rt->stream),
                     "hipMemcpyAsync(device to device, %zu bytes)", bytes);
    return CHECK(rt, rt->cu.MemcpyDtoDAsync(dptr(dst), dptr(src), bytes, rt->stream),
                 "cuMemcpyDtoDAsync_v2(%zu bytes)", bytes);
}

int gpu_fill(gpu_device *rt, void *dst, int byte, size_t bytes)
{
    if (rt->api == GPU_API_HIP)
        return CHECK(rt, rt->hip.MemsetAsync(dst, byte, bytes, rt->stream), "hipMemsetAsync(%zu bytes)", bytes);
    return CHECK(rt, rt->cu.MemsetD8Async(dptr(dst), (unsigned char)byte, bytes, rt->stream),
                 "cuMemsetD8Async(%zu bytes)", bytes);
}

/* ---- events ---------------------------------------------------------------------------------- */

int gpu_event_create(gpu_device *rt, void **event)
{
    *event = NULL;
    if (rt->api == GPU_API_HIP)
        return CHECK(rt, rt->hip.EventCreate(event), "hipEventCreate");
    return CHECK(rt, rt->cu.EventCreate(event, 0 /* CU_EVENT_DEFAULT: timing enabled */), "cuEventCreate");
}

int gpu_event_destroy(gpu_device *rt, void *event)
{
    if (event == NULL)
        return 0;
    if (rt->api == GPU_API_HIP)
        return CHECK(rt, rt->hip.EventDestroy(event), "hipEventDestroy");
    return CHECK(rt, rt->cu.EventDestroy(event), "cuEventDestroy_v2");
}

int gpu_event_record(gpu_device *rt, void *event)
{
    if (rt->api == GPU_API_HIP)
        return CHECK(rt, rt->hip.EventRecord(event, rt->stream), "hipEventRecord");
    return CHECK(rt, rt->cu.EventRecord(event, rt->stream), "cuEventRecord");
}

int gpu_event_elapsed(gpu_device *rt, void *start, void *stop, double *seconds)
{
    float ms = 0.0f;
    int rc;
    if (rt->api == GPU_API_HIP)
        rc = CHECK(rt, rt->hip.EventSynchronize(stop), "hipEventSynchronize");
    else
        rc = CHECK(rt, rt->cu.EventSynchronize(stop), "cuEventSynchronize");
    if (rc == 0 && rt->api == GPU_API_HIP)
        rc = CHECK(rt, rt->hip.EventElapsedTime(&ms, start, stop), "hipEventElapsedTime");
    else if (rc == 0)
        rc = CHECK(rt, rt->cu.EventElapsedTime(&ms, start, stop), "cuEventElapsedTime");
    *seconds = 1e-3 * (double)ms;
    return rc;
}

/* ---- graphs ---------------------------------------------------------------------------------- */

int gpu_capture_begin(gpu_device *rt)
{
    /* relaxed: the library's launch path may call context or device queries while capturing */
    if (rt->api == GPU_API_HIP)
        return CHECK(rt, rt->hip.StreamBeginCapture(rt->stream, HIP_CAPTURE_MODE_RELAXED), "hipStreamBeginCapture");
    return CHECK(rt, rt->cu.StreamBeginCapture(rt->stream, CU_CAPTURE_MODE_RELAXED), "cuStreamBeginCapture_v2");
}

int gpu_capture_end(gpu_device *rt, int keep, void **exec)
{
    void *graph = NULL;
    *exec = NULL;
    int rc;
    if (rt->api == GPU_API_HIP)
        rc = CHECK(rt, rt->hip.StreamEndCapture(rt->stream, &graph), "hipStreamEndCapture");
    else
        rc = CHECK(rt, rt->cu.StreamEndCapture(rt->stream, &graph), "cuStreamEndCapture");
    if (rc == 0 && keep && graph != NULL) {
        if (rt->api == GPU_API_HIP)
            rc = CHECK(rt, rt->hip.GraphInstantiateWithFlags(exec, graph, 0), "hipGraphInstantiateWithFlags");
        else
            rc = CHECK(rt, rt->cu.GraphInstantiateWithFlags(exec, graph, 0), "cuGraphInstantiateWithFlags");
        if (rc != 0)
            *exec = NULL;
    } else if (rc == 0 && keep) {
        snprintf(rt->error, sizeof rt->error, "stream capture ended without a graph");
        rc = -1;
    }
    if (graph != NULL) /* the instantiated graph does not need its template */
        (void)(rt->api == GPU_API_HIP ? rt->hip.GraphDestroy(graph) : rt->cu.GraphDestroy(graph));
    return rc;
}

int gpu_graph_launch(gpu_device *rt, void *exec)
{
    if (rt->api == GPU_API_HIP)
        return CHECK(rt, rt->hip.GraphLaunch(exec, rt->stream), "hipGraphLaunch");
    return CHECK(rt, rt->cu.GraphLaunch(exec, rt->stream), "cuGraphLaunch");
}

int gpu_graph_destroy(gpu_device *rt, void *exec)
{
    if (exec == NULL)
        return 0;
    if (rt->api == GPU_API_HIP)
        return CHECK(rt, rt->hip.GraphExecDestroy(exec), "hipGraphExecDestroy");
    return CHECK(rt, rt->cu.GraphExecDestroy(exec), "cuGraphExecDestroy");
}

/* ---- modules and launches -------------------------------------------------------------------- */

int gpu_module_load(gpu_device *rt, const void *image, void **module)
{
    *module = NULL;
    if (rt->api == GPU_API_HIP)
        return CHECK(rt, rt->hip.ModuleLoadData(module, image), "hipModuleLoadData");
    return CHECK(rt, rt->cu.ModuleLoadData(module, image), "cuModuleLoadData");
}

int gpu_module_unload(gpu_device *rt, void *module)
{
    if (module == NULL)
        return 0;
    if (rt->api == GPU_API_HIP)
        return CHECK(rt, rt->hip.ModuleUnload(module), "hipModuleUnload");
    return CHECK(rt, rt->cu.ModuleUnload(module), "cuModuleUnload");
}

int gpu_module_function(gpu_device *rt, void *module, const char *name, void **function)
{
    *function = NULL;
    if (rt->api == GPU_API_HIP)
        return CHECK(rt, rt->hip.ModuleGetFunction(function, module, name), "hipModuleGetFunction(%.100s)", name);
    return CHECK(rt, rt->cu.ModuleGetFunction(function, module, name), "cuModuleGetFunction(%.100s)", name);
}

int gpu_launch(gpu_device *rt, void *function, uint32_t grid, uint32_t block, void *args)
{
    void *params[] = {args};
    if (rt->api == GPU_API_HIP)
        return CHECK(rt, rt->hip.ModuleLaunchKernel(function, grid, 1, 1, block, 1, 1, 0, rt->stream, params, NULL),
                     "hipModuleLaunchKernel(grid %u, block %u)", (unsigned)grid, (unsigned)block);
    return CHECK(rt, rt->cu.LaunchKernel(function, grid, 1, 1, block, 1, 1, 0, rt->stream, params, NULL),
                 "cuLaunchKernel(grid %u, block %u)", (unsigned)grid, (unsigned)block);
}
