/*
 * cuda_dl.h - the CUDA driver entry points the GPU tests and the bench use, looked up with dlopen so
 * their programs build without a CUDA toolkit and run (to a clean "skipped") on machines without
 * a driver. Header-only: each program that includes it gets its own static table.
 */
#ifndef R35A_CUDA_DL_H
#define R35A_CUDA_DL_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef int cuda_dl_result;
typedef unsigned long long cuda_dl_ptr;

typedef struct cuda_dl {
    void *lib;
    void *ctx;
    int device;
    cuda_dl_result (*Init)(unsigned);
    cuda_dl_result (*DeviceGet)(int *, int);
    cuda_dl_result (*DeviceGetCount)(int *);
    cuda_dl_result (*DeviceGetName)(char *, int, int);
    cuda_dl_result (*PrimaryCtxRetain)(void **, int);
    cuda_dl_result (*CtxSetCurrent)(void *);
    cuda_dl_result (*CtxSynchronize)(void);
    cuda_dl_result (*MemAlloc)(cuda_dl_ptr *, size_t);
    cuda_dl_result (*MemFree)(cuda_dl_ptr);
    cuda_dl_result (*MemcpyHtoD)(cuda_dl_ptr, const void *, size_t);
    cuda_dl_result (*MemcpyDtoH)(void *, cuda_dl_ptr, size_t);
    cuda_dl_result (*MemcpyDtoD)(cuda_dl_ptr, cuda_dl_ptr, size_t);
    cuda_dl_result (*MemsetD8)(cuda_dl_ptr, unsigned char, size_t);
    cuda_dl_result (*MemGetInfo)(size_t *free_bytes, size_t *total_bytes);
    cuda_dl_result (*StreamCreate)(void **, unsigned);
    cuda_dl_result (*StreamDestroy)(void *);
    cuda_dl_result (*StreamSynchronize)(void *);
    cuda_dl_result (*StreamBeginCapture)(void *, int);
    cuda_dl_result (*StreamEndCapture)(void *, void **);
    cuda_dl_result (*GraphInstantiate)(void **, void *, unsigned long long);
    cuda_dl_result (*GraphLaunch)(void *, void *);
    cuda_dl_result (*GraphExecDestroy)(void *);
    cuda_dl_result (*GraphDestroy)(void *);
    cuda_dl_result (*EventCreate)(void **, unsigned);
    cuda_dl_result (*EventRecord)(void *, void *);
    cuda_dl_result (*EventSynchronize)(void *);
    cuda_dl_result (*EventElapsedTime)(float *, void *, void *);
    cuda_dl_result (*EventDestroy)(void *);
    cuda_dl_result (*GetErrorString)(cuda_dl_result, const char **);
} cuda_dl;

static inline const char *cuda_dl_error(const cuda_dl *c, cuda_dl_result e)
{
    const char *s = NULL;
    if (!c->GetErrorString || c->GetErrorString(e, &s) != 0 || !s)
        return "unknown CUDA error";
    return s;
}

/* Loads the driver, picks device `device` and makes its primary context current on this thread.
 * 0 on success; otherwise writes why (no driver, no device) and returns -1. */
static inline int cuda_dl_open(cuda_dl *c, int device, char *why, size_t why_len)
{
    memset(c, 0, sizeof *c);
    c->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!c->lib) {
        snprintf(why, why_len, "no CUDA driver (dlopen libcuda.so.1 failed)");
        return -1;
    }
    static const struct {
        const char *name;
        size_t off;
    } syms[] = {
#define S(f, n) {n, offsetof(cuda_dl, f)}
        S(Init, "cuInit"), S(DeviceGet, "cuDeviceGet"), S(DeviceGetCount, "cuDeviceGetCount"),
        S(DeviceGetName, "cuDeviceGetName"), S(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
        S(CtxSetCurrent, "cuCtxSetCurrent"), S(CtxSynchronize, "cuCtxSynchronize"), S(MemAlloc, "cuMemAlloc_v2"),
        S(MemFree, "cuMemFree_v2"), S(MemcpyHtoD, "cuMemcpyHtoD_v2"), S(MemcpyDtoH, "cuMemcpyDtoH_v2"),
        S(MemcpyDtoD, "cuMemcpyDtoD_v2"), S(MemsetD8, "cuMemsetD8_v2"), S(MemGetInfo, "cuMemGetInfo_v2"), S(StreamCreate, "cuStreamCreate"),
        S(StreamDestroy, "cuStreamDestroy_v2"), S(StreamSynchronize, "cuStreamSynchronize"),
        S(StreamBeginCapture, "cuStreamBeginCapture_v2"), S(StreamEndCapture, "cuStreamEndCapture"),
        S(GraphInstantiate, "cuGraphInstantiateWithFlags"), S(GraphLaunch, "cuGraphLaunch"),
        S(GraphExecDestroy, "cuGraphExecDestroy"), S(GraphDestroy, "cuGraphDestroy"),
        S(EventCreate, "cuEventCreate"), S(EventRecord, "cuEventRecord"), S(EventSynchronize, "cuEventSynchronize"),
        S(EventElapsedTime, "cuEventElapsedTime"), S(EventDestroy, "cuEventDestroy_v2"),
        S(GetErrorString, "cuGetErrorString"),
#undef S
    };
    for (size_t i = 0; i < sizeof syms / sizeof *syms; ++i) {
        void *f = dlsym(c->lib, syms[i].name);
        if (!f) {
            snprintf(why, why_len, "the CUDA driver lacks %s", syms[i].name);
            return -1;
        }
        memcpy((char *)c + syms[i].off, &f, sizeof f);
    }
    int n = 0;
    cuda_dl_result e = c->Init(0);
    if (e == 0)
        e = c->DeviceGetCount(&n);
    if (e != 0 || n <= device) {
        snprintf(why, why_len, "no CUDA device %d (cuInit/cuDeviceGetCount: %s, %d devices)", device,
                 e ? cuda_dl_error(c, e) : "ok", n);
        return -1;
    }
    if ((e = c->DeviceGet(&c->device, device)) != 0 || (e = c->PrimaryCtxRetain(&c->ctx, c->device)) != 0 ||
        (e = c->CtxSetCurrent(c->ctx)) != 0) {
        snprintf(why, why_len, "CUDA device %d: %s", device, cuda_dl_error(c, e));
        return -1;
    }
    return 0;
}

#endif
