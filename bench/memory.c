/* memory.c - where the bench's buffers live, the peak-bandwidth measurement, the clock. */
#define _POSIX_C_SOURCE 200809L

#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    HOST_ALIGN = 4096,
    PEAK_COPY_MIB = 256,
    PEAK_RUNS = 7
};

/* ---- host memory: what a reference context works on ----------------------------------------- */

static void *host_alloc(void *self, size_t bytes)
{
    (void)self;
    if (bytes > SIZE_MAX - HOST_ALIGN)
        return NULL;
    size_t rounded = (bytes + HOST_ALIGN - 1) / HOST_ALIGN * HOST_ALIGN;
    return aligned_alloc(HOST_ALIGN, rounded == 0 ? HOST_ALIGN : rounded);
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

static int host_synchronize(void *self, void *stream)
{
    (void)self;
    (void)stream;
    return 0;
}

static const bench_memory host_memory = {
    .name = "host",
    .self = NULL,
    .stream = NULL,
    .alloc = host_alloc,
    .release = host_release,
    .upload = host_copy,
    .download = host_copy,
    .copy = host_copy,
    .fill = host_fill,
    .synchronize = host_synchronize,
};

bool bench_memory_for_context(const r35a_context_info *info, bench_memory *mem, char *why, size_t why_len)
{
    if (info->backend == R35A_BACKEND_REFERENCE) {
        *mem = host_memory;
        return true;
    }
    /* A GPU context runs on device pointers and is asynchronous. Its table goes here: hipMalloc,
     * hipFree, hipMemcpy (H2D, D2H, D2D), hipMemset and hipStreamSynchronize looked up in
     * libamdhip64.so with dlopen (the CUDA runtime's twins for the portability build), with a
     * stream of its own. The bench does not have it yet. */
    snprintf(why, why_len,
             "the bench has no device-memory path yet, so it cannot benchmark a %s context (%s)",
             info->backend_name, info->arch);
    return false;
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

/* ---- peak bandwidth -------------------------------------------------------------------------- */

static int time_copies(const bench_memory *mem, void *dst, const void *src, size_t bytes, double *median_s)
{
    double samples[PEAK_RUNS];
    if (mem->copy(mem->self, dst, src, bytes) != 0 || mem->synchronize(mem->self, mem->stream) != 0)
        return -1;
    for (int i = 0; i < PEAK_RUNS; i++) {
        double t0 = bench_now_seconds();
        if (mem->copy(mem->self, dst, src, bytes) != 0 || mem->synchronize(mem->self, mem->stream) != 0)
            return -1;
        samples[i] = bench_now_seconds() - t0;
    }
    *median_s = bench_median(samples, PEAK_RUNS);
    return 0;
}

int bench_measure_peak(const bench_memory *mem, double *gbs, char *method, size_t method_len,
                       char *why, size_t why_len)
{
    const size_t bytes = (size_t)PEAK_COPY_MIB << 20;
    void *src = mem->alloc(mem->self, bytes);
    void *dst = mem->alloc(mem->self, bytes);
    int rc = -1;
    double median_s = 0.0;
    if (src == NULL || dst == NULL) {
        snprintf(why, why_len, "cannot allocate 2 x %d MiB of %s memory for the peak measurement "
                 "(give --peak-gbs)", PEAK_COPY_MIB, mem->name);
    } else if (mem->fill(mem->self, src, 1, bytes) != 0 || mem->fill(mem->self, dst, 2, bytes) != 0 ||
               time_copies(mem, dst, src, bytes, &median_s) != 0) {
        snprintf(why, why_len, "a %s memory copy failed during the peak measurement", mem->name);
    } else {
        /* A copy reads every byte once and writes every byte once. */
        *gbs = 2.0 * (double)bytes / median_s / 1e9;
        snprintf(method, method_len, "%s memcpy of %d MiB, median of %d, bytes read + written",
                 mem->name, PEAK_COPY_MIB, PEAK_RUNS);
        rc = 0;
    }
    if (src != NULL)
        mem->release(mem->self, src);
    if (dst != NULL)
        mem->release(mem->self, dst);
    return rc;
}
