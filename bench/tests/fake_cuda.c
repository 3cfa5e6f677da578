/* fake_cuda.c - a stand-in CUDA driver (libcuda.so.1's entry points the library's CUDA backend and
 * the bench's gpu_device.c call), so the bench's CUDA path runs on a machine without an NVIDIA GPU.
 * Loaded through R35A_CUDA_LIBRARY by both. It reports one sm_90 device with 132 SMs and a 50 MiB
 * L2; memory is host memory; cuModuleLoadData accepts only CUDA ELF images (EM_CUDA) and
 * cuModuleGetFunction only names in the image's symbol table; launches and memsets are counted,
 * nothing executes; events read the host clock; graphs replay nothing. The calls check what a real
 * driver would refuse: a current context for every call after cuInit, device pointers inside
 * allocations, no copies while capturing. At exit FAKE_CUDA_LOG (if set) gets a JSON summary. */
#define _POSIX_C_SOURCE 200809L

#include <elf.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

enum {
    OK = 0,
    INVALID_VALUE = 1,
    OUT_OF_MEMORY = 2,
    NOT_INITIALIZED = 3,
    INVALID_IMAGE = 200,
    INVALID_CONTEXT = 201,
    NOT_FOUND = 500,
    CAPTURE_UNSUPPORTED = 900
};

typedef struct allocation {
    uintptr_t base;
    size_t size;
    unsigned host_flags;     /* cuMemHostAlloc's flags; 0 for cuMemAlloc (device memory) */
} allocation;

static int initialized;
static int primary_refs;
static char primary_ctx;          /* the primary context's handle is its address */
static void *current;             /* the calling thread's current context (one thread in the tests) */
static void *saved[16];           /* the contexts cuCtxPushCurrent replaced, for cuCtxPopCurrent */
static int pushed;
static allocation allocations[8192];
static int num_allocations;
static int capturing;
static int launches, captured_launches, memsets, graph_replays, modules_loaded, functions_found;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int context_ok(void) { return !initialized ? NOT_INITIALIZED : (current == &primary_ctx ? OK : INVALID_CONTEXT); }

static int inside(unsigned long long p, size_t bytes)
{
    for (int i = 0; i < num_allocations; ++i)
        if (p >= allocations[i].base && p + bytes <= allocations[i].base + allocations[i].size)
            return 1;
    return 0;
}

EXPORT int cuInit(unsigned flags) { initialized = flags == 0; return flags == 0 ? OK : INVALID_VALUE; }
EXPORT int cuDriverGetVersion(int *v) { *v = 13000; return OK; }
EXPORT int cuDeviceGetCount(int *n) { *n = initialized ? 1 : 0; return initialized ? OK : NOT_INITIALIZED; }
EXPORT int cuDeviceGet(int *dev, int ordinal) { *dev = ordinal; return ordinal == 0 ? OK : INVALID_VALUE; }

EXPORT int cuDeviceGetAttribute(int *value, int attribute, int dev)
{
    if (dev != 0)
        return INVALID_VALUE;
    switch (attribute) {
    case 16: *value = 132; return OK;            /* multiprocessors */
    case 38: *value = 50 << 20; return OK;       /* L2 bytes */
    case 75: *value = 9; return OK;              /* compute capability */
    case 76: *value = 0; return OK;
    }
    return INVALID_VALUE;
}

EXPORT int cuDeviceGetName(char *name, int len, int dev)
{
    static const char fake_name[] = "Fake H200";
    if (dev != 0 || len < (int)sizeof fake_name)
        return INVALID_VALUE;
    memcpy(name, fake_name, sizeof fake_name);
    return OK;
}

EXPORT int cuDevicePrimaryCtxRetain(void **ctx, int dev)
{
    if (!initialized || dev != 0)
        return INVALID_VALUE;
    ++primary_refs;
    *ctx = &primary_ctx;
    return OK;
}

EXPORT int cuDevicePrimaryCtxRelease_v2(int dev)
{
    if (dev != 0 || primary_refs == 0)
        return INVALID_VALUE;
    --primary_refs;
    return OK;
}

EXPORT int cuCtxSetCurrent(void *ctx) { current = ctx; return ctx == &primary_ctx || !ctx ? OK : INVALID_CONTEXT; }
EXPORT int cuCtxPushCurrent_v2(void *ctx)
{
    if (ctx != &primary_ctx || pushed == (int)(sizeof saved / sizeof *saved))
        return INVALID_CONTEXT;
    saved[pushed++] = current;
    current = ctx;
    return OK;
}

EXPORT int cuCtxPopCurrent_v2(void **ctx)
{
    if (pushed == 0)
        return INVALID_CONTEXT;
    if (ctx)
        *ctx = current;
    current = saved[--pushed];
    return OK;
}

EXPORT int cuMemAlloc_v2(unsigned long long *p, size_t bytes)
{
    int e = context_ok();
    if (e)
        return e;
    if (bytes == 0 || num_allocations == (int)(sizeof allocations / sizeof *allocations))
        return OUT_OF_MEMORY;
    void *m = aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (!m)
        return OUT_OF_MEMORY;
    allocations[num_allocations++] = (allocation){(uintptr_t)m, bytes, 0};
    *p = (uintptr_t)m;
    return OK;
}

/* Frees the allocation at p if it is of the given kind (host: pinned host memory). */
static int free_allocation(uintptr_t p, int host)
{
    int e = context_ok();
    if (e)
        return e;
    for (int i = 0; i < num_allocations; ++i)
        if (allocations[i].base == p && (allocations[i].host_flags != 0) == host) {
            free((void *)p);
            allocations[i] = allocations[--num_allocations];
            return OK;
        }
    return INVALID_VALUE;
}

EXPORT int cuMemFree_v2(unsigned long long p) { return free_allocation((uintptr_t)p, 0); }

/* Pinned host memory (the library's device error record): host memory like everything here, its
 * device address the same (unified addressing); counted among the live allocations. */
#define HOSTALLOC_PORTABLE 0x1u
#define HOSTALLOC_DEVICEMAP 0x2u
#define HOSTALLOC_WRITECOMBINED 0x4u
EXPORT int cuMemHostAlloc(void **p, size_t bytes, unsigned flags)
{
    int e = context_ok();
    if (e)
        return e;
    if (bytes == 0 || (flags & ~(HOSTALLOC_PORTABLE | HOSTALLOC_DEVICEMAP | HOSTALLOC_WRITECOMBINED)) ||
        num_allocations == (int)(sizeof allocations / sizeof *allocations))
        return bytes == 0 || flags > 7 ? INVALID_VALUE : OUT_OF_MEMORY;
    void *m = aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (!m)
        return OUT_OF_MEMORY;
    allocations[num_allocations++] = (allocation){(uintptr_t)m, bytes, flags | 0x100u};
    *p = m;
    return OK;
}

EXPORT int cuMemHostGetDevicePointer_v2(unsigned long long *dp, void *p, unsigned flags)
{
    int e = context_ok();
    if (e)
        return e;
    for (int i = 0; i < num_allocations; ++i)
        if (allocations[i].base == (uintptr_t)p && (allocations[i].host_flags & HOSTALLOC_DEVICEMAP) && flags == 0) {
            *dp = (uintptr_t)p;
            return OK;
        }
    return INVALID_VALUE;
}

EXPORT int cuMemFreeHost(void *p) { return free_allocation((uintptr_t)p, 1); }

static int copy_checks(unsigned long long dev_a, size_t bytes_a, unsigned long long dev_b, size_t bytes_b)
{
    int e = context_ok();
    if (e)
        return e;
    if (capturing)
        return CAPTURE_UNSUPPORTED;
    if ((dev_a && !inside(dev_a, bytes_a)) || (dev_b && !inside(dev_b, bytes_b)))
        return INVALID_VALUE;
    return OK;
}

EXPORT int cuMemcpyHtoDAsync_v2(unsigned long long dst, const void *src, size_t n, void *s)
{
    (void)s;
    int e = copy_checks(dst, n, 0, 0);
    if (!e)
        memcpy((void *)(uintptr_t)dst, src, n);
    return e;
}

EXPORT int cuMemcpyDtoHAsync_v2(void *dst, unsigned long long src, size_t n, void *s)
{
    (void)s;
    int e = copy_checks(src, n, 0, 0);
    if (!e)
        memcpy(dst, (void *)(uintptr_t)src, n);
    return e;
}

EXPORT int cuMemcpyDtoDAsync_v2(unsigned long long dst, unsigned long long src, size_t n, void *s)
{
    (void)s;
    int e = copy_checks(dst, n, src, n);
    if (!e)
        memcpy((void *)(uintptr_t)dst, (void *)(uintptr_t)src, n);
    return e;
}

EXPORT int cuMemsetD8Async(unsigned long long dst, unsigned char v, size_t n, void *s)
{
    (void)s;
    int e = context_ok();
    if (e)
        return e;
    if (!inside(dst, n))
        return INVALID_VALUE;
    if (!capturing)
        memset((void *)(uintptr_t)dst, v, n);
    ++memsets;
    return OK;
}

EXPORT int cuStreamCreate(void **s, unsigned flags) { (void)flags; *s = malloc(1); return context_ok(); }
EXPORT int cuStreamDestroy_v2(void *s) { free(s); return OK; }
EXPORT int cuStreamSynchronize(void *s) { (void)s; return capturing ? CAPTURE_UNSUPPORTED : context_ok(); }

EXPORT int cuEventCreate(void **e, unsigned flags)
{
    if (flags != 0)
        return INVALID_VALUE;
    *e = calloc(1, sizeof(double));
    return context_ok();
}

EXPORT int cuEventDestroy_v2(void *e) { free(e); return OK; }

EXPORT int cuEventRecord(void *e, void *s)
{
    (void)s;
    *(double *)e = now_seconds();
    return capturing ? CAPTURE_UNSUPPORTED : context_ok();
}

EXPORT int cuEventSynchronize(void *e) { (void)e; return context_ok(); }

EXPORT int cuEventElapsedTime(float *ms, void *start, void *stop)
{
    /* at least a microsecond, like a real timer's resolution: the bench divides by it */
    double t = *(double *)stop - *(double *)start;
    *ms = (float)(1e3 * (t > 1e-6 ? t : 1e-6));
    return context_ok();
}

EXPORT int cuStreamBeginCapture_v2(void *s, int mode)
{
    (void)s;
    if (capturing || mode < 0 || mode > 2)
        return INVALID_VALUE;
    capturing = 1;
    return context_ok();
}

EXPORT int cuStreamEndCapture(void *s, void **graph)
{
    (void)s;
    if (!capturing)
        return INVALID_VALUE;
    capturing = 0;
    *graph = malloc(1);
    return OK;
}

EXPORT int cuGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags)
{
    (void)graph;
    (void)flags;
    *exec = malloc(1);
    return context_ok();
}

EXPORT int cuGraphLaunch(void *exec, void *s) { (void)exec; (void)s; ++graph_replays; return context_ok(); }
EXPORT int cuGraphExecDestroy(void *exec) { free(exec); return OK; }
EXPORT int cuGraphDestroy(void *graph) { free(graph); return OK; }

EXPORT int cuModuleLoadData(void **module, const void *image)
{
    int e = context_ok();
    if (e)
        return e;
    const Elf64_Ehdr *eh = image;
    if (!image || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_machine != 190 /* EM_CUDA */)
        return INVALID_IMAGE;
    *module = (void *)image;
    ++modules_loaded;
    return OK;
}

EXPORT int cuModuleUnload(void *module) { (void)module; return context_ok(); }

/* Whether the cubin defines function `name` (a FUNC symbol of its .symtab). */
static int has_function(const unsigned char *image, const char *name)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)image;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(image + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum; ++i) {
        if (sh[i].sh_type != SHT_SYMTAB)
            continue;
        const Elf64_Sym *syms = (const Elf64_Sym *)(image + sh[i].sh_offset);
        const char *strtab = (const char *)(image + sh[sh[i].sh_link].sh_offset);
        for (size_t k = 0; k < sh[i].sh_size / sizeof(Elf64_Sym); ++k)
            if (ELF64_ST_TYPE(syms[k].st_info) == STT_FUNC && strcmp(strtab + syms[k].st_name, name) == 0)
                return 1;
    }
    return 0;
}

EXPORT int cuModuleGetFunction(void **f, void *module, const char *name)
{
    int e = context_ok();
    if (e)
        return e;
    if (!has_function(module, name))
        return NOT_FOUND;
    ++functions_found;
    *f = strdup(name);   /* leaked on purpose: a handle lives as long as the module */
    return OK;
}

/* A module's device global `name` (an OBJECT symbol of its .symtab: e.g. a decode kernel's
 * <name>_lds_bytes): its "device address" is its initial bytes in the image, which
 * cuMemcpyDtoH_v2 reads (the globals handed out are remembered for that check). */
static struct {
    const unsigned char *p;
    size_t bytes;
} globals[4096];
static int num_globals;

EXPORT int cuModuleGetGlobal_v2(unsigned long long *dptr, size_t *bytes, void *module, const char *name)
{
    int e = context_ok();
    if (e)
        return e;
    const unsigned char *image = module;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)image;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(image + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum; ++i) {
        if (sh[i].sh_type != SHT_SYMTAB)
            continue;
        const Elf64_Sym *syms = (const Elf64_Sym *)(image + sh[i].sh_offset);
        const char *strtab = (const char *)(image + sh[sh[i].sh_link].sh_offset);
        for (size_t k = 0; k < sh[i].sh_size / sizeof(Elf64_Sym); ++k) {
            const Elf64_Sym *sym = &syms[k];
            if (ELF64_ST_TYPE(sym->st_info) != STT_OBJECT || strcmp(strtab + sym->st_name, name) != 0 ||
                sym->st_shndx == SHN_UNDEF || sym->st_shndx >= eh->e_shnum ||
                sh[sym->st_shndx].sh_type != SHT_PROGBITS)
                continue;
            const unsigned char *p = image + sh[sym->st_shndx].sh_offset + sym->st_value;
            if (num_globals == (int)(sizeof globals / sizeof *globals))
                return INVALID_VALUE;
            globals[num_globals].p = p;
            globals[num_globals++].bytes = sym->st_size;
            *dptr = (unsigned long long)(uintptr_t)p;
            *bytes = sym->st_size;
            return OK;
        }
    }
    return NOT_FOUND;
}

EXPORT int cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t n)
{
    int e = context_ok();
    if (e)
        return e;
    if (capturing)
        return CAPTURE_UNSUPPORTED;
    for (int i = 0; i < num_globals; ++i)
        if ((uintptr_t)src >= (uintptr_t)globals[i].p && (uintptr_t)src + n <= (uintptr_t)globals[i].p + globals[i].bytes) {
            memcpy(dst, (const void *)(uintptr_t)src, n);
            return OK;
        }
    e = copy_checks(src, n, 0, 0);
    if (!e)
        memcpy(dst, (void *)(uintptr_t)src, n);
    return e;
}

/* Each function's dynamic shared memory limit (cuFuncSetAttribute MAX_DYNAMIC_SHARED_SIZE_BYTES = 8):
 * as on the real driver, a launch above 48 KiB needs it raised first, and at most 227 KiB. */
static struct {
    const void *f;
    int max_dynamic_shared;
} func_attrs[4096];
static int num_func_attrs;

static bool dynamic_shared_limit_raised(const void *f)
{
    for (int i = 0; i < num_func_attrs; ++i)
        if (func_attrs[i].f == f)
            return true;
    return false;
}

static int dynamic_shared_limit(const void *f)
{
    for (int i = 0; i < num_func_attrs; ++i)
        if (func_attrs[i].f == f)
            return func_attrs[i].max_dynamic_shared;
    return 48 * 1024;
}

EXPORT int cuFuncSetAttribute(void *f, int attribute, int value)
{
    int e = context_ok();
    if (e)
        return e;
    if (!f || attribute != 8 || value < 0 || value > 232448)
        return INVALID_VALUE;
    for (int i = 0; i < num_func_attrs; ++i)
        if (func_attrs[i].f == f) {
            func_attrs[i].max_dynamic_shared = value;
            return OK;
        }
    if (num_func_attrs == (int)(sizeof func_attrs / sizeof *func_attrs))
        return INVALID_VALUE;
    func_attrs[num_func_attrs].f = f;
    func_attrs[num_func_attrs++].max_dynamic_shared = value;
    return OK;
}

EXPORT int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                          unsigned shared, void *s, void **params, void **extra)
{
    (void)s;
    int e = context_ok();
    if (e)
        return e;
    if (!f || !params || !params[0] || extra || !gx || !gy || !gz || !bx || !by || !bz || bx * by * bz > 1024 ||
        shared > (unsigned)dynamic_shared_limit(f))
        return INVALID_VALUE;
    /* The library raises a kernel's limit to exactly the dynamic shared memory its layout uses
     * (<name>_lds_bytes, src/gpu_runtime.c) and launches it with that: other bytes (0 would run the
     * kernel without its shared memory, which a real driver does not notice) are its bug. */
    if (shared != (unsigned)dynamic_shared_limit(f) && dynamic_shared_limit_raised(f))
        return INVALID_VALUE;
    ++launches;
    captured_launches += capturing;
    return OK;
}

EXPORT int cuGetErrorString(int error, const char **text)
{
    *text = error == OK ? "CUDA_SUCCESS" : "fake CUDA error";
    return OK;
}

__attribute__((destructor)) static void write_log(void)
{
    const char *path = getenv("FAKE_CUDA_LOG");
    FILE *f = path && path[0] ? fopen(path, "w") : NULL;
    if (!f)
        return;
    fprintf(f, "{\"launches\": %d, \"captured_launches\": %d, \"memsets\": %d, \"graph_replays\": %d, "
               "\"modules_loaded\": %d, \"functions_found\": %d, \"live_allocations\": %d, \"primary_refs\": %d, "
               "\"pushed\": %d}\n",
            launches, captured_launches, memsets, graph_replays, modules_loaded, functions_found, num_allocations,
            primary_refs, pushed);
    fclose(f);
}
