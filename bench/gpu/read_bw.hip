// read_bw.hip - the read-stream kernels of the device roofline (bench/roofline.c, lab/bench_gpu.py):
// every thread reads 16-byte elements, U of them in flight per loop step, grid-strided over one large
// buffer, and keeps the xor of what it read; writes are negligible (see read_args.h). One source for
// every target: clang builds gfx11 code objects (-x hip --offload-arch=gfx11xx -nogpuinc -nogpulib
// --cuda-device-only, no ROCm needed), nvcc builds sm_* cubins (-x cu -cubin). bench/CMakeLists.txt
// embeds them in r35a_bench the way cmake/gpu_kernels.cmake embeds the attention kernels.
#include "read_args.h"

#if defined(__AMDGCN__) || defined(__AMDGPU__)
#define READ_KERNEL extern "C" __attribute__((global))
#define READ_DEV __attribute__((device)) static inline __attribute__((always_inline))
typedef unsigned int u32x4 __attribute__((ext_vector_type(4)));
typedef const __attribute__((address_space(1))) u32x4 global_u32x4;

READ_DEV unsigned thread_index() { return __builtin_amdgcn_workitem_id_x(); }
READ_DEV unsigned block_index() { return __builtin_amdgcn_workgroup_id_x(); }
template <int STREAM>
READ_DEV u32x4 load16(const void *p) {
    if (STREAM)   // non-temporal: the data is not kept in the caches (a stream read)
        return __builtin_nontemporal_load((global_u32x4 *)p);
    return *(global_u32x4 *)p;
}
READ_DEV unsigned xor4(u32x4 v) { return v.x ^ v.y ^ v.z ^ v.w; }

#elif defined(__CUDACC__)
#define READ_KERNEL extern "C" __global__
#define READ_DEV __device__ static __forceinline__

READ_DEV unsigned thread_index() { return threadIdx.x; }
READ_DEV unsigned block_index() { return blockIdx.x; }
template <int STREAM>
READ_DEV uint4 load16(const void *p) {
    if (STREAM) {   // non-coherent, no L1 allocation: a stream read
        uint4 r;
        asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                     : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
        return r;
    }
    return *(const uint4 *)p;
}
READ_DEV unsigned xor4(uint4 v) { return v.x ^ v.y ^ v.z ^ v.w; }
#endif

template <int UNROLL, int STREAM>
READ_DEV void read_stream(const bench_read_args &a) {
    const char *src = (const char *)a.src;
    const unsigned long long stride = a.grid_threads;   // from the host: no grid-size builtin needed
    unsigned long long i = (unsigned long long)block_index() * a.block_threads + thread_index();
    unsigned acc = 0;
    for (; i + (UNROLL - 1) * stride < a.n16; i += UNROLL * stride) {
        unsigned v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)   // all U loads issue before the first use
            v[u] = xor4(load16<STREAM>(src + 16 * (i + u * stride)));
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
            acc ^= v[u];
    }
    for (; i < a.n16; i += stride)
        acc ^= xor4(load16<STREAM>(src + 16 * i));
    if (acc == BENCH_READ_NEVER)
        a.out[block_index()] = acc;
}

#define READ_KERNELS(U)                                                                   \
    READ_KERNEL void read_u##U##_plain(bench_read_args a) { read_stream<U, 0>(a); }       \
    READ_KERNEL void read_u##U##_stream(bench_read_args a) { read_stream<U, 1>(a); }
READ_KERNELS(4)
READ_KERNELS(8)
READ_KERNELS(16)
