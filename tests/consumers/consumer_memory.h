/* consumer_memory.h - where the consumer programs put their buffers (header-only, C and C++).
 *
 * A reference context works on host memory, so plain malloc'd buffers are fine. A GPU context wants
 * device memory; the consumers get it from the GPU runtime the context names (HIP for "hip", the
 * CUDA runtime for "cuda"), looked up with dlopen so that the programs need no HIP or CUDA header
 * and build on machines without a GPU toolkit. Both runtimes have the same five entry points
 * (<prefix>SetDevice, Malloc, Free, Memcpy, DeviceSynchronize) returning 0 on success, and the same
 * memcpy kinds (1 host-to-device, 2 device-to-host).
 */
#ifndef R35A_CONSUMER_MEMORY_H
#define R35A_CONSUMER_MEMORY_H

#include <rdna35attn.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct consumer_memory {
    int on_device;                       /* 0: host memory (reference context) */
    void *runtime;                       /* dlopen handle of the GPU runtime */
    int (*set_device)(int);
    int (*device_malloc)(void **, size_t);
    int (*device_free)(void *);
    int (*device_memcpy)(void *, const void *, size_t, int);
    int (*device_synchronize)(void);
} consumer_memory;

enum { CONSUMER_COPY_TO_DEVICE = 1, CONSUMER_COPY_TO_HOST = 2 };

static inline void *consumer_symbol(void *runtime, const char *prefix, const char *name)
{
    char full[64];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    return dlsym(runtime, full);
}

/* Stores a dlsym result into a function pointer. Copying the bits is the conversion POSIX
 * guarantees for dlsym, and neither C nor C++ -Wpedantic objects to it. */
#define consumer_bind(fn_ptr, symbol)                                                              \
    do {                                                                                           \
        void *symbol_ = (symbol);                                                                  \
        memcpy((fn_ptr), &symbol_, sizeof symbol_);                                                \
    } while (0)

/* Chooses the memory for a context. Returns 0, or -1 after printing why to stderr. */
static inline int consumer_memory_open(consumer_memory *mem, const r35a_context_info *info)
{
    static const char *const hip_names[] = {"libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6",
                                            "libamdhip64.so.5", NULL};
    static const char *const cuda_names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                                             "libcudart.so.11.0", NULL};
    memset(mem, 0, sizeof *mem);
    if (info->backend == R35A_BACKEND_REFERENCE)
        return 0;

    const char *const *names;
    const char *prefix;
    if (strncmp(info->backend_name, "hip", 3) == 0) {
        names = hip_names;
        prefix = "hip";
    } else if (strncmp(info->backend_name, "cuda", 4) == 0) {
        names = cuda_names;
        prefix = "cuda";
    } else {
        fprintf(stderr, "consumer: GPU backend \"%s\" has no known runtime to allocate device memory\n",
                info->backend_name);
        return -1;
    }
    /* The library's own override of the HIP runtime's path, so both use the same runtime. */
    const char *hip_override = getenv("R35A_HIP_LIBRARY");
    if (prefix[0] == 'h' && hip_override && hip_override[0])
        mem->runtime = dlopen(hip_override, RTLD_NOW | RTLD_LOCAL);
    for (int i = 0; names[i] && !mem->runtime; ++i)
        mem->runtime = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!mem->runtime) {
        fprintf(stderr, "consumer: backend \"%s\" is active but its runtime (%s) cannot be loaded\n",
                info->backend_name, names[0]);
        return -1;
    }
    consumer_bind(&mem->set_device, consumer_symbol(mem->runtime, prefix, "SetDevice"));
    consumer_bind(&mem->device_malloc, consumer_symbol(mem->runtime, prefix, "Malloc"));
    consumer_bind(&mem->device_free, consumer_symbol(mem->runtime, prefix, "Free"));
    consumer_bind(&mem->device_memcpy, consumer_symbol(mem->runtime, prefix, "Memcpy"));
    consumer_bind(&mem->device_synchronize, consumer_symbol(mem->runtime, prefix, "DeviceSynchronize"));
    if (!mem->set_device || !mem->device_malloc || !mem->device_free || !mem->device_memcpy ||
        !mem->device_synchronize) {
        fprintf(stderr, "consumer: the %s runtime lacks an entry point this program uses\n", prefix);
        dlclose(mem->runtime);
        mem->runtime = NULL;
        return -1;
    }
    if (mem->set_device(info->device_index) != 0) {
        fprintf(stderr, "consumer: %sSetDevice(%d) failed\n", prefix, (int)info->device_index);
        return -1;
    }
    mem->on_device = 1;
    return 0;
}

/* A buffer of `bytes` holding a copy of host (or uninitialised when host is NULL); NULL on failure. */
static inline void *consumer_memory_upload(const consumer_memory *mem, const void *host, size_t bytes)
{
    void *ptr = NULL;
    if (bytes == 0)
        bytes = 1;
    if (!mem->on_device) {
        ptr = malloc(bytes);
        if (ptr && host)
            memcpy(ptr, host, bytes);
        return ptr;
    }
    if (mem->device_malloc(&ptr, bytes) != 0)
        return NULL;
    if (host && mem->device_memcpy(ptr, host, bytes, CONSUMER_COPY_TO_DEVICE) != 0) {
        mem->device_free(ptr);
        return NULL;
    }
    return ptr;
}

/* Waits for the work queued on the default stream and copies `bytes` back. Returns 0 or -1. */
static inline int consumer_memory_download(const consumer_memory *mem, void *host, const void *src, size_t bytes)
{
    if (!mem->on_device) {
        memcpy(host, src, bytes);
        return 0;
    }
    if (mem->device_synchronize() != 0)
        return -1;
    return mem->device_memcpy(host, src, bytes, CONSUMER_COPY_TO_HOST) == 0 ? 0 : -1;
}

static inline void consumer_memory_free(const consumer_memory *mem, void *ptr)
{
    if (!ptr)
        return;
    if (mem->on_device)
        mem->device_free(ptr);
    else
        free(ptr);
}

static inline void consumer_memory_close(consumer_memory *mem)
{
    /* The runtime stays loaded: unloading a GPU runtime while the library holds its state is unsafe. */
    mem->runtime = NULL;
}

#endif
