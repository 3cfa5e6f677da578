// read_bw.cu - the read-bandwidth roofline of tools/bench_gpu.py: a pure read stream with 16-byte
// loads, several independent loads in flight per thread, one 4-byte result per block (so nothing is
// optimized away and writes are negligible). Built to a cubin (nvcc -cubin -arch=sm_90) and loaded
// by the bench through the driver API. Variants differ in the load instruction and loads in flight;
// the bench takes the best over variants and grid sizes.
#include <stdint.h>

template <int UNROLL, int MODE>
__device__ __forceinline__ uint4 load16(const uint4 *p) {
    if (MODE == 0) return *p;
    if (MODE == 1) return __ldg(p);
    uint4 r;   // non-coherent, no L1 allocation: a stream read
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
}

template <int UNROLL, int MODE>
__device__ void read_stream(const uint4 *__restrict__ src, unsigned long long n16, unsigned *out) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned acc = 0;
    for (; i + (UNROLL - 1) * stride < n16; i += UNROLL * stride) {
        uint4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) v[u] = load16<UNROLL, MODE>(src + i + u * stride);
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    for (; i < n16; i += stride) {
        uint4 v = load16<UNROLL, MODE>(src + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    acc = __reduce_xor_sync(0xffffffffu, acc);
    if ((threadIdx.x & 31) == 0) atomicXor(out + blockIdx.x, acc);
}

#define READ_KERNEL(U, M) \
    extern "C" __global__ void read_u##U##_m##M(const uint4 *src, unsigned long long n16, unsigned *out) { \
        read_stream<U, M>(src, n16, out); \
    }
READ_KERNEL(4, 0)
READ_KERNEL(8, 0)
READ_KERNEL(4, 2)
READ_KERNEL(8, 2)
READ_KERNEL(16, 2)
READ_KERNEL(8, 1)
