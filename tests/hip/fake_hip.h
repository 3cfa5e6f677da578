/* fake_hip.h - what the stand-in HIP runtime (fake_hip.c) records, for the tests that read it. */
#ifndef R35A_FAKE_HIP_H
#define R35A_FAKE_HIP_H

#include <stddef.h>

#define MAX_RECORDS 64

typedef struct fake_launch {
    char kernel[128];
    unsigned grid[3], block[3];
    unsigned shared_bytes;
    void *stream;
    unsigned char args[512];
    size_t args_size;
} fake_launch;

typedef struct fake_memset {
    void *dst;
    int value;
    size_t bytes;
    void *stream;
} fake_memset;

/* One hipHostMalloc allocation: the host view, the device address the runtime hands out for it. */
typedef struct fake_host_allocation {
    void *host, *device;
    size_t bytes;
    unsigned flags;
    int freed;
} fake_host_allocation;

/* Readers, looked up with dlsym in the loaded fake runtime. */
typedef int (*fake_hip_count_fn)(void);
typedef const fake_launch *(*fake_hip_launch_fn)(int i);
typedef const fake_memset *(*fake_hip_memset_fn)(int i);
typedef const char *(*fake_hip_order_fn)(void);
typedef void (*fake_hip_reset_fn)(void);
typedef const fake_host_allocation *(*fake_hip_host_allocation_fn)(int i);

#endif
