/* read_args.h - the one by-value argument of the read-stream kernels (bench/gpu/read_bw.hip), shared
 * by the kernel source (clang for gfx11, nvcc for sm_*), bench/roofline.c and lab/bench_gpu.py
 * (ctypes mirror of this layout: five 8-byte fields). */
#ifndef R35A_BENCH_READ_ARGS_H
#define R35A_BENCH_READ_ARGS_H

typedef struct bench_read_args {
    const void *src;                 /* 16-byte aligned, n16 * 16 bytes */
    unsigned long long n16;          /* 16-byte elements to read */
    unsigned long long block_threads; /* threads per block of the launch */
    unsigned long long grid_threads; /* blocks x threads per block: the grid stride */
    unsigned int *out;               /* one word per block; written only when a thread's xor of its
                                        data equals `never` (so the loads cannot be dropped) */
} bench_read_args;

/* The value `out` compares against: a thread writes out[block] only when its xor equals this, which
 * the benchmark's fill (bytes 0x5a) never produces. */
#define BENCH_READ_NEVER 0xffffffffu

/* Kernels: read_u<U>_<mode>, U = 16-byte loads in flight per thread (4, 8, 16); mode "plain" (an
 * ordinary load) or "stream" (gfx11: non-temporal; sm_*: ld.global.nc.L1::no_allocate). */
#define BENCH_READ_UNROLLS {4, 8, 16}
#define BENCH_READ_MODES {"plain", "stream"}

#endif
