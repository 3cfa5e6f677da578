/* fake_hip_device.c - the device half of a stand-in HIP runtime for the bench's HIP path: memory,
 * streams, events and graphs, on host memory. Linked with tests/hip/fake_hip.c (devices, modules,
 * recorded launches and memsets) into one module that the library and the bench both load through
 * R35A_HIP_LIBRARY, so the bench's buffers, stream and the library's launches meet in one runtime.
 *
 * Nothing executes: launches are recorded by fake_hip.c. At exit the module writes what happened to
 * the file named by FAKE_HIP_LOG (JSON): the streams created, every allocation, and for every
 * launch its kernel, grid, block, stream, whether it was captured into a graph, and each 8-byte
 * word of its argument struct that points into an allocation (as [allocation, offset]), which lets
 * bench/tests/check_bench_hip.py check that the bench's buffers reached the kernel. */
#define _POSIX_C_SOURCE 200809L

#include "fake_hip.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

/* fake_hip.c's recorders */
int fake_hip_num_launches(void);
const fake_launch *fake_hip_launch(int i);

typedef struct allocation {
    uintptr_t base;
    size_t size;
    int freed;
} allocation;

static allocation *allocations;
static int num_allocations, cap_allocations;
static uintptr_t streams[16];
static int num_streams;
static int num_events_recorded, num_graph_replays, num_copies, num_syncs;
static int capture_first = -1;   /* first launch index captured, -1 when not capturing */
static int captured_from[64], captured_to[64], num_captures;

typedef struct fake_event {
    double seconds;
} fake_event;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

EXPORT int hipMalloc(void **ptr, size_t bytes)
{
    if (!ptr || bytes == 0)
        return 1; /* hipErrorInvalidValue */
    if (num_allocations == cap_allocations) {
        int grown = cap_allocations ? 2 * cap_allocations : 256;
        allocation *p = realloc(allocations, sizeof *p * (size_t)grown);
        if (!p)
            return 2; /* hipErrorOutOfMemory */
        allocations = p;
        cap_allocations = grown;
    }
    void *mem = aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (!mem)
        return 2;
    allocations[num_allocations++] = (allocation){(uintptr_t)mem, bytes, 0};
    *ptr = mem;
    return 0;
}

static allocation *find_allocation(uintptr_t p)
{
    for (int i = num_allocations - 1; i >= 0; --i)
        if (!allocations[i].freed && p >= allocations[i].base && p < allocations[i].base + allocations[i].size)
            return &allocations[i];
    return NULL;
}

EXPORT int hipFree(void *ptr)
{
    if (!ptr)
        return 0;
    allocation *a = find_allocation((uintptr_t)ptr);
    if (!a || a->base != (uintptr_t)ptr)
        return 1;
    a->freed = 1; /* the memory stays allocated until exit: no address is reused, so the log's
                     pointers name one allocation each */
    return 0;
}

/* kind: 1 host to device, 2 device to host, 3 device to device (the device side must be allocated) */
EXPORT int hipMemcpyAsync(void *dst, const void *src, size_t bytes, int kind, void *stream)
{
    (void)stream;
    if (capture_first >= 0)
        return 900; /* hipErrorStreamCaptureUnsupported: the bench copies nothing while capturing */
    int dst_device = kind == 1 || kind == 3, src_device = kind == 2 || kind == 3;
    allocation *d = dst_device ? find_allocation((uintptr_t)dst) : NULL;
    allocation *s = src_device ? find_allocation((uintptr_t)src) : NULL;
    if ((dst_device && (!d || (uintptr_t)dst + bytes > d->base + d->size)) ||
        (src_device && (!s || (uintptr_t)src + bytes > s->base + s->size)) || kind < 1 || kind > 3)
        return 1;
    memcpy(dst, src, bytes);
    ++num_copies;
    return 0;
}

EXPORT int hipStreamCreateWithFlags(void **stream, unsigned flags)
{
    (void)flags;
    if (num_streams == (int)(sizeof streams / sizeof *streams))
        return 2;
    void *s = malloc(1);
    streams[num_streams++] = (uintptr_t)s;
    *stream = s;
    return 0;
}

EXPORT int hipStreamDestroy(void *stream)
{
    free(stream);
    return 0;
}

EXPORT int hipStreamSynchronize(void *stream)
{
    (void)stream;
    ++num_syncs;
    return 0;
}

EXPORT int hipEventCreate(void **event)
{
    fake_event *e = calloc(1, sizeof *e);
    *event = e;
    return e ? 0 : 2;
}

EXPORT int hipEventDestroy(void *event)
{
    free(event);
    return 0;
}

EXPORT int hipEventRecord(void *event, void *stream)
{
    (void)stream;
    ((fake_event *)event)->seconds = now_seconds();
    ++num_events_recorded;
    return 0;
}

EXPORT int hipEventSynchronize(void *event)
{
    (void)event;
    return 0;
}

EXPORT int hipEventElapsedTime(float *ms, void *start, void *stop)
{
    *ms = (float)(1e3 * (((fake_event *)stop)->seconds - ((fake_event *)start)->seconds));
    return 0;
}

EXPORT int hipStreamBeginCapture(void *stream, int mode)
{
    (void)stream;
    if (capture_first >= 0 || mode < 0 || mode > 2)
        return 1;
    capture_first = fake_hip_num_launches();
    return 0;
}

EXPORT int hipStreamEndCapture(void *stream, void **graph)
{
    (void)stream;
    if (capture_first < 0 || num_captures == 64)
        return 1;
    captured_from[num_captures] = capture_first;
    captured_to[num_captures] = fake_hip_num_launches();
    int *g = malloc(sizeof *g);
    *g = num_captures++;
    *graph = g;
    capture_first = -1;
    return 0;
}

EXPORT int hipGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags)
{
    (void)flags;
    int *e = malloc(sizeof *e);
    *e = *(int *)graph;
    *exec = e;
    return 0;
}

EXPORT int hipGraphLaunch(void *exec, void *stream)
{
    (void)exec;
    (void)stream;
    ++num_graph_replays;
    return 0;
}

EXPORT int hipGraphExecDestroy(void *exec)
{
    free(exec);
    return 0;
}

EXPORT int hipGraphDestroy(void *graph)
{
    free(graph);
    return 0;
}

/* ---- the log ---- */

static int allocation_index(uintptr_t p, size_t *offset)
{
    for (int i = num_allocations - 1; i >= 0; --i)
        if (p >= allocations[i].base && p < allocations[i].base + allocations[i].size) {
            *offset = p - allocations[i].base;
            return i;
        }
    return -1;
}

static int was_captured(int launch)
{
    for (int c = 0; c < num_captures; ++c)
        if (launch >= captured_from[c] && launch < captured_to[c])
            return 1;
    return 0;
}

__attribute__((destructor)) static void write_log(void)
{
    const char *path = getenv("FAKE_HIP_LOG");
    if (!path || !path[0])
        return;
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    fprintf(f, "{\"streams\": [");
    for (int i = 0; i < num_streams; ++i)
        fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)streams[i]);
    fprintf(f, "],\n \"allocations\": [");
    for (int i = 0; i < num_allocations; ++i)
        fprintf(f, "%s[%llu, %zu]", i ? ", " : "", (unsigned long long)allocations[i].base, allocations[i].size);
    int live = 0;
    for (int i = 0; i < num_allocations; ++i)
        live += !allocations[i].freed;
    fprintf(f, "],\n \"live_allocations\": %d, \"copies\": %d, \"syncs\": %d, \"events_recorded\": %d, "
               "\"graph_replays\": %d,\n \"launches\": [",
            live, num_copies, num_syncs, num_events_recorded, num_graph_replays);
    for (int i = 0; i < fake_hip_num_launches(); ++i) {
        const fake_launch *l = fake_hip_launch(i);
        fprintf(f, "%s\n  {\"kernel\": \"%s\", \"grid\": [%u, %u, %u], \"block\": [%u, %u, %u], \"stream\": %llu, "
                   "\"captured\": %s, \"args_size\": %zu, \"pointers\": [",
                i ? "," : "", l->kernel, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2],
                (unsigned long long)(uintptr_t)l->stream, was_captured(i) ? "true" : "false", l->args_size);
        int first = 1;
        for (size_t at = 0; at + 8 <= l->args_size; at += 8) {
            uint64_t word;
            memcpy(&word, l->args + at, sizeof word);
            size_t offset = 0;
            int a = word ? allocation_index((uintptr_t)word, &offset) : -1;
            if (a >= 0) {
                fprintf(f, "%s[%d, %zu]", first ? "" : ", ", a, offset);
                first = 0;
            }
        }
        fprintf(f, "]}");
    }
    fprintf(f, "]}\n");
    fclose(f);
}
