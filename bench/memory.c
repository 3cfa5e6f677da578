/* memory.c - where the bench's buffers live (host memory for a reference context, device memory
 * through gpu_device.c for a HIP or CUDA context), the clock, the median. */
#define _POSIX_C_SOURCE 200809L

#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { HOST_ALIGN = 4096 };

/* ---- host memory: what a reference context works on ----------------------------------------- */

static int host_alloc(void *self, void **ptr, size_t bytes)
{
    (void)self;
    *ptr = NULL;
    if (bytes > SIZE_MAX - HOST_ALIGN)
        return -1;
    size_t rounded = (bytes + HOST_ALIGN - 1) / HOST_ALIGN * HOST_ALIGN;
    *ptr = aligned_alloc(HOST_ALIGN, rounded == 0 ? HOST_ALIGN : rounded);
    return *ptr != NULL ? 0 : -1;
}

static void host_release(void *self, void *ptr)
{
    (void)self;
    free(ptr);
}

static int host_copy(void *self, void *dst, const void *src, size_t bytes)
{
    (void)self;
    memcpy(dst, src, bytes);
    return 0;
}

static int host_fill(void *self, void *dst, int byte, size_t bytes)
{
    (void)self;
    memset(dst, byte, bytes);
    return 0;
}

static int host_synchronize(void *self)
{
    (void)self;
    return 0;
}

static const char *host_error(void *self)
{
    (void)self;
    return "out of host memory";
}

static const bench_memory host_memory = {
    .name = "host",
    .gpu = NULL,
    .self = NULL,
    .stream = NULL,
    .alloc = host_alloc,
    .release = host_release,
    .upload = host_copy,
    .download = host_copy,
    .copy = host_copy,
    .fill = host_fill,
    .synchronize = host_synchronize,
    .error = host_error,
};

/* ---- device memory: what a GPU context works on ------------------------------------------------ */

static int device_alloc(void *self, void **ptr, size_t bytes) { return gpu_alloc(self, ptr, bytes); }

static void device_release(void *self, void *ptr)
{
    if (gpu_free(self, ptr) != 0) /* a failed free is worth a line, not the run */
        fprintf(stderr, "r35a_bench: %s\n", gpu_device_error(self));
}

static int device_upload(void *self, void *dst, const void *src, size_t bytes) { return gpu_upload(self, dst, src, bytes); }
static int device_download(void *self, void *dst, const void *src, size_t bytes) { return gpu_download(self, dst, src, bytes); }
static int device_copy(void *self, void *dst, const void *src, size_t bytes) { return gpu_copy(self, dst, src, bytes); }
static int device_fill(void *self, void *dst, int byte, size_t bytes) { return gpu_fill(self, dst, byte, bytes); }
static int device_synchronize(void *self) { return gpu_synchronize(self); }
static const char *device_error(void *self) { return gpu_device_error(self); }

bool bench_memory_open(const r35a_context_info *info, bench_memory *mem, char *why, size_t why_len)
{
    if (info->backend == R35A_BACKEND_REFERENCE) {
        *mem = host_memory;
        return true;
    }
    gpu_api api;
    if (strcmp(info->backend_name, "hip") == 0) {
        api = GPU_API_HIP;
        mem->name = "hip device";
    } else if (strcmp(info->backend_name, "cuda") == 0) {
        api = GPU_API_CUDA;
        mem->name = "cuda device";
    } else {
        snprintf(why, why_len, "the bench has no device memory for a '%s' context", info->backend_name);
        return false;
    }
    char runtime_why[256];
    gpu_device *rt = NULL;
    if (gpu_device_open(api, info->device_index, &rt, runtime_why, sizeof runtime_why) != 0) {
        snprintf(why, why_len, "the %s context is served, but the bench cannot open its device memory: %s",
                 info->backend_name, runtime_why);
        return false;
    }
    mem->gpu = rt;
    mem->self = rt;
    mem->stream = gpu_device_stream(rt);
    mem->alloc = device_alloc;
    mem->release = device_release;
    mem->upload = device_upload;
    mem->download = device_download;
    mem->copy = device_copy;
    mem->fill = device_fill;
    mem->synchronize = device_synchronize;
    mem->error = device_error;
    return true;
}

void bench_memory_close(bench_memory *mem)
{
    gpu_device_close(mem->gpu);
    mem->gpu = NULL;
}

/* ---- clock and statistics -------------------------------------------------------------------- */

double bench_now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *values, int count)
{
    qsort(values, (size_t)count, sizeof(double), compare_doubles);
    if (count % 2 == 1)
        return values[count / 2];
    return 0.5 * (values[count / 2 - 1] + values[count / 2]);
}
