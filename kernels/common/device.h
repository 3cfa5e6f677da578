/*
 * device.h - the small portability layer every kernel of librdna35attn is written against.
 *
 * It names what a kernel needs from the machine: thread and block indices, barriers and fences,
 * wave-wide cross-lane exchanges, f16/bf16 <-> f32 conversions, exp2/rcp and 128-bit global loads.
 * The AMDGPU implementation below uses clang builtins only (no
 * HIP headers, no ROCm device library), so Debian's clang-19 builds it with
 *     clang-19 -x hip --offload-arch=gfx1151 -nogpuinc -nogpulib --cuda-device-only
 * and a ROCm hipcc builds it too (the HIP keywords are only defined when nobody else did).
 *
 * The NVIDIA implementation (nvcc, sm_90 and later; R35A_TARGET_CUDA) follows the AMDGPU one and
 * gives the same names the same meaning: kernels never call a builtin directly, only this header
 * and the fragment layer (fragment.h picks fragment_gfx11.h on AMDGPU, fragment_nv_mma.h or the
 * gfx11-exact emulation fragment_nv_gfx11emu.h on NVIDIA), which holds all lane-layout knowledge.
 *
 * Conventions: a "wave" is the hardware SIMD group (32 lanes on gfx11 wave32, a warp on NVIDIA);
 * kernels are written for R35A_WAVE = 32.
 */
#ifndef R35A_DEVICE_H
#define R35A_DEVICE_H

#if defined(__AMDGCN__) || defined(__AMDGPU__)
#define R35A_TARGET_AMDGCN 1
#elif defined(__CUDACC__)
#define R35A_TARGET_CUDA 1
#endif

#define R35A_WAVE 32
/* gfx11's local data share: a WGP's 128 KiB, shared by the workgroups resident on it, of which one
 * workgroup may use at most 64 KiB (the kernels' LDS budgets from their occupancy contracts;
 * tools/check_code_objects.py checks the same numbers). */
#define R35A_GFX11_LDS_PER_WGP 131072
#define R35A_GFX11_LDS_PER_WORKGROUP 65536

#if defined(R35A_TARGET_AMDGCN)

/* ---- HIP keywords, when no HIP header defined them (-nogpuinc builds) ---------------------- */
#ifndef __global__
#define __global__ __attribute__((global))
#endif
#ifndef __device__
#define __device__ __attribute__((device))
#endif
#ifndef __host__
#define __host__ __attribute__((host))
#endif
#ifndef __shared__
#define __shared__ __attribute__((shared))
#endif
#ifndef __launch_bounds__
#define __launch_bounds__(n) __attribute__((amdgpu_flat_work_group_size(1, n)))
#endif

#define R35A_DEV __device__ static inline __attribute__((always_inline))
/* The same for member functions (no `static`). */
#define R35A_MEMBER __device__ inline __attribute__((always_inline))
#define R35A_KERNEL extern "C" __global__
/* VGPRs per SIMD lane in wave32 (variants/archs.tsv `vgprs`): the larger file of gfx1100, gfx1101
 * and gfx1151, 1024 on the other gfx11 chips. */
#if defined(__gfx1102__) || defined(__gfx1103__) || defined(__gfx1150__) || defined(__gfx1152__)
#define R35A_VGPR_FILE 1024
#else
#define R35A_VGPR_FILE 1536
#endif
/* Occupancy contract of a kernel: at most `threads` per workgroup, at least `waves` waves per SIMD
 * on a 1536-entry VGPR file (caps the VGPRs the register allocator may use: 192 for 8 waves on
 * gfx1151). A tuning row states waves for that file; on a smaller file the same VGPR budget per
 * wave is kept (2/3 of the waves), so one table serves every gfx11 chip without spills. */
#define R35A_KERNEL_BOUNDS(threads, waves) \
    __attribute__((amdgpu_flat_work_group_size(1, threads), \
                   amdgpu_waves_per_eu((waves) * R35A_VGPR_FILE / 1536 > 0 ? (waves) * R35A_VGPR_FILE / 1536 : 1)))

/* Pointers the kernels read and write are global memory; saying so lets clang pick global_load /
 * global_store (and s_load for uniform reads) instead of flat accesses. */
#define R35A_GLOBAL __attribute__((address_space(1)))

#define R35A_NO_UNROLL _Pragma("clang loop unroll(disable)")
/* A kernel's bounds when it states a VGPR cap instead of an occupancy contract. */
#define R35A_KERNEL_BOUNDS_VGPRS(threads, vgprs) \
    __attribute__((amdgpu_flat_work_group_size(1, threads), amdgpu_num_vgpr(vgprs)))

namespace r35a {

typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;
typedef u32 u32x4 __attribute__((ext_vector_type(4)));
typedef u32 u32x2 __attribute__((ext_vector_type(2)));

/* ---- indices ------------------------------------------------------------------------------- */
R35A_DEV int thread_x() { return (int)__builtin_amdgcn_workitem_id_x(); }
R35A_DEV int block_x() { return (int)__builtin_amdgcn_workgroup_id_x(); }
R35A_DEV int block_y() { return (int)__builtin_amdgcn_workgroup_id_y(); }
R35A_DEV int block_z() { return (int)__builtin_amdgcn_workgroup_id_z(); }
/* Lane within the wave, 0..31. */
R35A_DEV int lane_id() { return (int)__builtin_amdgcn_mbcnt_lo(~0u, 0u); }
/* Wave index within the workgroup, known uniform to the compiler (scalar registers). */
R35A_DEV int wave_id() { return __builtin_amdgcn_readfirstlane(thread_x() / R35A_WAVE); }
/* Makes a value the compiler cannot prove uniform live in a scalar register. Only for values that
 * ARE uniform across the wave. */
R35A_DEV int uniform(int v) { return __builtin_amdgcn_readfirstlane(v); }

/* ---- barriers and fences --------------------------------------------------------------------- */
/* __syncthreads(): every wave of the workgroup arrives; LDS (and global) writes before it are
 * visible to the workgroup after it. */
R35A_DEV void block_sync() {
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
    __builtin_amdgcn_s_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
/* A barrier that orders LDS only: waits for this wave's LDS (and scalar) accesses, then meets the
 * other waves. Global loads stay in flight across it. (clang's own barrier lowering on gfx11
 * drains every counter first, vmcnt included, so a tile's outstanding KV loads would stall every
 * exchange; the "memory" clobber keeps the compiler from moving memory accesses across.) */
R35A_DEV void block_sync_lds() { __asm__ volatile("s_waitcnt lgkmcnt(0)\n\ts_barrier" ::: "memory"); }

/* ---- cross-lane ------------------------------------------------------------------------------ */
/* Value of lane (l ^ 16): swaps the two half-waves (v_permlanex16_b32, identity lane selects). */
R35A_DEV u32 lane_xor16_u32(u32 v) {
    return (u32)__builtin_amdgcn_permlanex16((int)v, (int)v, 0x76543210u, 0xfedcba98u, false, false);
}
R35A_DEV float lane_xor16(float v) { return __builtin_bit_cast(float, lane_xor16_u32(__builtin_bit_cast(u32, v))); }

/* Value of lane (l ^ m) for m in 1, 2, 4, 8 (DPP row_xmask: within each row of 16 lanes). */
template <int M>
R35A_DEV float lane_xor_row(float v) {
    static_assert(M == 1 || M == 2 || M == 4 || M == 8, "row_xmask takes 1, 2, 4 or 8");
    return __builtin_bit_cast(float, __builtin_amdgcn_update_dpp(0, __builtin_bit_cast(int, v), 0x160 + M, 0xf, 0xf, false));
}
/* Sum / max over all 32 lanes; every lane gets the result. */
R35A_DEV float wave_sum(float v) {
    v += lane_xor_row<1>(v);
    v += lane_xor_row<2>(v);
    v += lane_xor_row<4>(v);
    v += lane_xor_row<8>(v);
    return v + lane_xor16(v);
}
R35A_DEV float wave_max(float v) {
    v = __builtin_fmaxf(v, lane_xor_row<1>(v));
    v = __builtin_fmaxf(v, lane_xor_row<2>(v));
    v = __builtin_fmaxf(v, lane_xor_row<4>(v));
    v = __builtin_fmaxf(v, lane_xor_row<8>(v));
    return __builtin_fmaxf(v, lane_xor16(v));
}
/* Byte permute of two dwords (v_perm_b32): result byte i = byte sel[i] of the 8-byte value
 * {hi = a, lo = b}; selector bytes 0-3 pick b, 4-7 pick a. */
R35A_DEV u32 byte_perm(u32 a, u32 b, u32 sel) { return __builtin_amdgcn_perm(a, b, sel); }
/* True in every lane when p holds in any active lane (a wave vote; branches on it are uniform). */
R35A_DEV bool wave_any(bool p) { return __builtin_amdgcn_ballot_w32(p) != 0u; }
/* Lane `lane`'s value of v, in every lane; `lane` must be wave-uniform (v_readlane_b32 into an SGPR). */
R35A_DEV int read_lane(int v, int lane) { return __builtin_amdgcn_readlane(v, lane); }

/* ---- code generation ------------------------------------------------------------------------ */
/* Makes x opaque to the optimizer at this point (an empty asm on its register): the value is neither
 * rematerialized nor its computation moved across. */
template <class T>
R35A_DEV void opaque(T &x) { __asm__ volatile("" : "+v"(x)); }
/* Stops the scheduler from moving instructions across this point (keeps fenced load chunks). */
R35A_DEV void sched_barrier() { __builtin_amdgcn_sched_barrier(0); }
/* Orders the wave's own LDS accesses between its lanes (a lane reading what another lane of the same
 * wave wrote). A gfx11 wave issues its LDS instructions in order: nothing to do. */
R35A_DEV void wave_sync() {}
/* Programmatic dependent launch (NVIDIA sm_90 and later; gfx11 has none: no-ops): the next kernel of
 * the stream, launched programmatically, may start once every workgroup of this one has called
 * grid_launch_dependents (or exited); it must call grid_dependency_wait before reading anything this
 * kernel wrote (that waits for this kernel's completion and its memory). */
R35A_DEV void grid_launch_dependents() {}
R35A_DEV void grid_dependency_wait() {}

/* ---- math ------------------------------------------------------------------------------------ */
/* 2^x in one transcendental instruction; exp2(-inf) = 0. Inputs below -126 flush to 0. */
R35A_DEV float exp2_fast(float x) { return __builtin_amdgcn_exp2f(x); }
/* 1/x, about 1 ulp. */
R35A_DEV float rcp_fast(float x) { return __builtin_amdgcn_rcpf(x); }
R35A_DEV float fmax(float a, float b) { return __builtin_fmaxf(a, b); }
/* max of two floats that are never NaN (scores: matrix results, -inf for masked keys), without the
 * NaN-quieting v_max_f32 x, x that __builtin_fmaxf costs per operand in IEEE mode:
 * median(a, b, +inf) = max(a, b), one v_med3_f32. */
R35A_DEV float fmax_nonan(float a, float b) { return __builtin_amdgcn_fmed3f(a, b, __builtin_inff()); }
R35A_DEV int imin(int a, int b) { return a < b ? a : b; }
R35A_DEV int imax(int a, int b) { return a > b ? a : b; }
R35A_DEV float neg_inf() { return -__builtin_inff(); }
R35A_DEV float quiet_nan() { return __builtin_bit_cast(float, 0x7fc00000u); }
/* tanh from exp2 (no libm on the device): tanh|x| = (1 - e^-2|x|) / (1 + e^-2|x|), abs error ~1e-7. */
R35A_DEV float tanh_fast(float x) {
    float t = exp2_fast(-2.8853900817779268f * __builtin_fabsf(x)); /* e^(-2|x|) */
    float r = (1.0f - t) * rcp_fast(1.0f + t);
    return __builtin_copysignf(r, x);
}

/* ---- element types: 16-bit storage, f32 arithmetic ------------------------------------------ */
R35A_DEV float f16_to_f32(u16 h) { return (float)__builtin_bit_cast(_Float16, h); }
R35A_DEV u16 f32_to_f16(float f) { return __builtin_bit_cast(u16, (_Float16)f); }
R35A_DEV float bf16_to_f32(u16 h) { return __builtin_bit_cast(float, (u32)h << 16); }
/* Round to nearest even; NaN stays NaN (quiet). Branch-free (a select). */
R35A_DEV u16 f32_to_bf16(float f) {
    const u32 u = __builtin_bit_cast(u32, f);
    const u32 rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const u32 quiet = (u >> 16) | 0x40u;
    return (u16)((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}
/* Two f32 (softmax probabilities) packed to bf16x2, round to nearest even: lo in bits 0-15. The
 * rounding add keeps gfx11's computed NaN (0x7fc00000: no carry) a NaN; a NaN whose mantissa's top
 * bits are all ones (0x7fff8000 and up) would carry into the sign bit and read back as -0 / +0.
 * gfx11 does not produce those from arithmetic; a payload kept from an input could (NVIDIA's
 * canonical NaN 0x7fffffff is one: there the hardware conversion is used). A select per value here
 * made the bf16 R = 32 decode variants spill (SGPRs for the compare masks), so it is not done. */
R35A_DEV u32 pack_bf16x2_rne(float lo, float hi) {
    u32 a = __builtin_bit_cast(u32, lo), b = __builtin_bit_cast(u32, hi);
    a += 0x7fffu + ((a >> 16) & 1u);
    b += 0x7fffu + ((b >> 16) & 1u);
    return byte_perm(b, a, 0x07060302u);
}
R35A_DEV u32 pack_f16x2(float lo, float hi) {
    typedef _Float16 h2 __attribute__((ext_vector_type(2)));
    h2 v = {(_Float16)lo, (_Float16)hi};
    return __builtin_bit_cast(u32, v);
}

struct f16_t {   /* IEEE binary16 */
    R35A_DEV float to_f32(u16 h) { return f16_to_f32(h); }
    R35A_DEV u16 from_f32(float f) { return f32_to_f16(f); }
    R35A_DEV u32 pack2(float lo, float hi) { return pack_f16x2(lo, hi); }
};
struct bf16_t {  /* bfloat16 */
    R35A_DEV float to_f32(u16 h) { return bf16_to_f32(h); }
    R35A_DEV u16 from_f32(float f) { return f32_to_bf16(f); }
    R35A_DEV u32 pack2(float lo, float hi) { return pack_bf16x2_rne(lo, hi); }
};

/* ---- memory ---------------------------------------------------------------------------------- */
/* 16 bytes from a 16-byte aligned global address (global_load_b128). */
R35A_DEV u32x4 load_b128(const void *p) { return *(const R35A_GLOBAL u32x4 *)p; }
R35A_DEV void store_b128(void *p, u32x4 v) { *(R35A_GLOBAL u32x4 *)p = v; }
R35A_DEV u16 load_u16(const void *p) { return *(const R35A_GLOBAL u16 *)p; }
/* 16 bits at a wave-uniform base plus a per-lane 32-bit byte offset: one global_load with the base
 * in SGPRs (saddr) and only the 32-bit offset in a VGPR. */
R35A_DEV u16 load_u16_off(const void *uniform_base, u32 byte_offset) {
    return *(const R35A_GLOBAL u16 *)((const char *)uniform_base + byte_offset);
}
/* 8 bits (an 8-bit KV element), zero-extended, addressed like load_u16_off. */
R35A_DEV u32 load_u8_off(const void *uniform_base, u32 byte_offset) {
    return *(const R35A_GLOBAL unsigned char *)((const char *)uniform_base + byte_offset);
}
/* 16 bytes at a wave-uniform base plus a per-lane 32-bit byte offset (global_load_b128 with the base
 * in SGPRs: no per-lane 64-bit address arithmetic). */
R35A_DEV u32x4 load_b128_off(const void *uniform_base, u32 byte_offset) {
    return *(const R35A_GLOBAL u32x4 *)((const char *)uniform_base + byte_offset);
}
/* 8 and 4 bytes (8-bit KV rows), addressed like load_b128_off; 8- / 4-byte aligned. */
R35A_DEV u32x2 load_b64_off(const void *uniform_base, u32 byte_offset) {
    return *(const R35A_GLOBAL u32x2 *)((const char *)uniform_base + byte_offset);
}
R35A_DEV u32 load_b32_off(const void *uniform_base, u32 byte_offset) {
    return *(const R35A_GLOBAL u32 *)((const char *)uniform_base + byte_offset);
}
R35A_DEV void store_u16(void *p, u16 v) { *(R35A_GLOBAL u16 *)p = v; }
R35A_DEV float load_f32(const void *p) { return *(const R35A_GLOBAL float *)p; }
R35A_DEV void store_f32(void *p, float v) { *(R35A_GLOBAL float *)p = v; }
R35A_DEV int load_i32(const void *p) { return *(const R35A_GLOBAL int *)p; }
/* A wave-uniform read of memory nothing writes while the kernel runs (metadata such as block
 * tables): through the constant address space, i.e. a scalar load into an SGPR. */
R35A_DEV int load_i32_uniform(const void *p) { return *(const __attribute__((address_space(4))) int *)p; }

/* Byte address arithmetic with 64-bit offsets (KV caches can exceed 2^31 elements). */
template <class P>
R35A_DEV P *byte_offset(P *p, i64 bytes) { return (P *)((char *)p + bytes); }
template <class P>
R35A_DEV const P *byte_offset(const P *p, i64 bytes) { return (const P *)((const char *)p + bytes); }

} /* namespace r35a */

#elif defined(R35A_TARGET_CUDA)
/* ============================================================================================
 * NVIDIA (nvcc, sm_90 and later). The same names with the same meaning; the wave is a warp of 32.
 * Cross-lane operations are full-warp shuffles: like DPP and permlanex16 on gfx11 they need the
 * whole wave converged, which every call site is (its branches are uniform per wave).
 * ============================================================================================ */
#include <cuda_fp16.h>

#define R35A_DEV __device__ static __forceinline__
#define R35A_MEMBER __device__ __forceinline__
#define R35A_KERNEL extern "C" __global__
/* Occupancy contract: at most `threads` per block and at least `waves` warps per SM sub-partition
 * (4 per SM), i.e. ceil(4 * 32 * waves / threads) resident blocks per SM: this caps the registers
 * as amdgpu_waves_per_eu does on gfx11 (sm_90: 64K registers per SM; 4 waves = 64 registers). */
#define R35A_KERNEL_BOUNDS(threads, waves) \
    __launch_bounds__((threads), ((128 * (waves) + (threads) - 1) / (threads)))
#define R35A_KERNEL_BOUNDS_VGPRS(threads, vgprs) __launch_bounds__(threads)
#define R35A_GLOBAL
#define R35A_NO_UNROLL _Pragma("unroll 1")

namespace r35a {

typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

/* clang's ext_vector_type has no nvcc counterpart: a 16-byte aligned aggregate with the same
 * spelling at the kernels' call sites ({a, b, c, d} initializers, v[i] with constant i after
 * unrolling, .x .y .z .w). 16-byte alignment makes its loads and stores 128-bit (LDG.E.128). */
struct __align__(16) u32x4 {
    u32 x, y, z, w;
    __device__ __forceinline__ u32 &operator[](int i) { return i == 0 ? x : i == 1 ? y : i == 2 ? z : w; }
    __device__ __forceinline__ u32 operator[](int i) const { return i == 0 ? x : i == 1 ? y : i == 2 ? z : w; }
};
struct __align__(8) u32x2 {
    u32 x, y;
    __device__ __forceinline__ u32 &operator[](int i) { return i == 0 ? x : y; }
    __device__ __forceinline__ u32 operator[](int i) const { return i == 0 ? x : y; }
};

/* ---- indices ------------------------------------------------------------------------------- */
R35A_DEV int thread_x() { return (int)threadIdx.x; }
R35A_DEV int block_x() { return (int)blockIdx.x; }
R35A_DEV int block_y() { return (int)blockIdx.y; }
R35A_DEV int block_z() { return (int)blockIdx.z; }
R35A_DEV int lane_id() { return (int)(threadIdx.x & 31u); }
R35A_DEV int wave_id() { return (int)(threadIdx.x >> 5); }
/* Uniformity is a hint for the AMDGPU compiler only. */
R35A_DEV int uniform(int v) { return v; }

/* ---- barriers and fences --------------------------------------------------------------------- */
R35A_DEV void block_sync() { __syncthreads(); }
/* bar.sync orders shared memory and does not wait for outstanding global loads (they are
 * scoreboarded at their first use), which is all block_sync_lds promises. */
R35A_DEV void block_sync_lds() { __syncthreads(); }

/* ---- cross-lane ------------------------------------------------------------------------------ */
R35A_DEV u32 lane_xor16_u32(u32 v) { return __shfl_xor_sync(0xffffffffu, v, 16); }
R35A_DEV float lane_xor16(float v) { return __shfl_xor_sync(0xffffffffu, v, 16); }
template <int M>
R35A_DEV float lane_xor_row(float v) {
    static_assert(M == 1 || M == 2 || M == 4 || M == 8, "row_xmask takes 1, 2, 4 or 8");
    return __shfl_xor_sync(0xffffffffu, v, M);
}
R35A_DEV float wave_sum(float v) {
    v += lane_xor_row<1>(v);
    v += lane_xor_row<2>(v);
    v += lane_xor_row<4>(v);
    v += lane_xor_row<8>(v);
    return v + lane_xor16(v);
}
R35A_DEV float wave_max(float v) {
    v = fmaxf(v, lane_xor_row<1>(v));
    v = fmaxf(v, lane_xor_row<2>(v));
    v = fmaxf(v, lane_xor_row<4>(v));
    v = fmaxf(v, lane_xor_row<8>(v));
    return fmaxf(v, lane_xor16(v));
}
/* v_perm_b32's meaning (result byte i = byte sel[i] of {hi = a, lo = b}, selectors 0-7) through
 * prmt: its inputs are {b, a} with one selector nibble per result byte. */
R35A_DEV u32 byte_perm(u32 a, u32 b, u32 sel) {
    const u32 s = (sel & 7u) | ((sel >> 4) & 0x70u) | ((sel >> 8) & 0x700u) | ((sel >> 12) & 0x7000u);
    return __byte_perm(b, a, s);
}
R35A_DEV bool wave_any(bool p) { return __any_sync(0xffffffffu, p) != 0; }
R35A_DEV int read_lane(int v, int lane) { return __shfl_sync(0xffffffffu, v, lane); }

/* ---- code generation ------------------------------------------------------------------------ */
template <class T>
R35A_DEV void opaque(T &x) { asm volatile("" : "+r"(x)); }
R35A_DEV void sched_barrier() {}
/* The CUDA memory model orders shared-memory accesses between lanes of a warp only through a
 * barrier (independent thread scheduling): __syncwarp. */
R35A_DEV void wave_sync() { __syncwarp(); }
/* Programmatic dependent launch (see the AMDGPU branch): griddepcontrol on sm_90 and later, no-ops
 * before (a launch there is never programmatic: src/backend_cuda.c). */
R35A_DEV void grid_launch_dependents() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
R35A_DEV void grid_dependency_wait() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* ---- math ------------------------------------------------------------------------------------ */
/* 2^x in one MUFU.EX2; exp2(-inf) = 0, inputs below -126 flush to 0 (as on gfx11). */
R35A_DEV float exp2_fast(float x) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}
R35A_DEV float rcp_fast(float x) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}
R35A_DEV float fmax(float a, float b) { return fmaxf(a, b); }
R35A_DEV float fmax_nonan(float a, float b) { return fmaxf(a, b); }
R35A_DEV int imin(int a, int b) { return a < b ? a : b; }
R35A_DEV int imax(int a, int b) { return a > b ? a : b; }
R35A_DEV float neg_inf() { return __int_as_float((int)0xff800000u); }
R35A_DEV float quiet_nan() { return __int_as_float(0x7fc00000); }
R35A_DEV float tanh_fast(float x) {
    float t = exp2_fast(-2.8853900817779268f * fabsf(x)); /* e^(-2|x|) */
    float r = (1.0f - t) * rcp_fast(1.0f + t);
    return copysignf(r, x);
}

/* ---- element types ----------------------------------------------------------------------------- */
R35A_DEV float f16_to_f32(u16 h) { return __half2float(__ushort_as_half(h)); }
R35A_DEV u16 f32_to_f16(float f) { return __half_as_ushort(__float2half_rn(f)); }
R35A_DEV float bf16_to_f32(u16 h) { return __uint_as_float((u32)h << 16); }
R35A_DEV u16 f32_to_bf16(float f) {
    const u32 u = __float_as_uint(f);
    const u32 rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const u32 quiet = (u >> 16) | 0x40u;
    return (u16)((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}
/* Round to nearest even, NaN kept (the hardware conversion: one instruction). An integer rounding
 * add here turned NaN probabilities (0x7fffffff, NVIDIA's canonical NaN) into -0 / +0: the fuzzer's
 * non-finite bf16 cases on the H200. */
R35A_DEV u32 pack_bf16x2_rne(float lo, float hi) {
    u32 r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));   /* first source -> bits 16-31 */
    return r;
}
R35A_DEV u32 pack_f16x2(float lo, float hi) {
    u32 r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));   /* first source -> bits 16-31 */
    return r;
}

struct f16_t {
    R35A_DEV float to_f32(u16 h) { return f16_to_f32(h); }
    R35A_DEV u16 from_f32(float f) { return f32_to_f16(f); }
    R35A_DEV u32 pack2(float lo, float hi) { return pack_f16x2(lo, hi); }
};
struct bf16_t {
    R35A_DEV float to_f32(u16 h) { return bf16_to_f32(h); }
    R35A_DEV u16 from_f32(float f) { return f32_to_bf16(f); }
    R35A_DEV u32 pack2(float lo, float hi) { return pack_bf16x2_rne(lo, hi); }
};

/* ---- memory ---------------------------------------------------------------------------------- */
R35A_DEV u32x4 load_b128(const void *p) { return *(const u32x4 *)p; }
R35A_DEV void store_b128(void *p, u32x4 v) { *(u32x4 *)p = v; }
R35A_DEV u16 load_u16(const void *p) { return *(const u16 *)p; }
R35A_DEV u16 load_u16_off(const void *uniform_base, u32 byte_offset) {
    return *(const u16 *)((const char *)uniform_base + byte_offset);
}
R35A_DEV u32 load_u8_off(const void *uniform_base, u32 byte_offset) {
    return *(const unsigned char *)((const char *)uniform_base + byte_offset);
}
R35A_DEV u32x4 load_b128_off(const void *uniform_base, u32 byte_offset) {
    return *(const u32x4 *)((const char *)uniform_base + byte_offset);
}
R35A_DEV u32x2 load_b64_off(const void *uniform_base, u32 byte_offset) {
    return *(const u32x2 *)((const char *)uniform_base + byte_offset);
}
R35A_DEV u32 load_b32_off(const void *uniform_base, u32 byte_offset) {
    return *(const u32 *)((const char *)uniform_base + byte_offset);
}
R35A_DEV void store_u16(void *p, u16 v) { *(u16 *)p = v; }
R35A_DEV float load_f32(const void *p) { return *(const float *)p; }
R35A_DEV void store_f32(void *p, float v) { *(float *)p = v; }
R35A_DEV int load_i32(const void *p) { return *(const int *)p; }
/* Metadata nothing writes during the kernel: the read-only (non-coherent) path. */
R35A_DEV int load_i32_uniform(const void *p) { return __ldg((const int *)p); }

/* Asynchronous 16-byte copies global -> shared memory (cp.async, L2 only: the data is streamed once).
 * With fill false the 16 bytes are zeroed and global memory is not read. Copies issued between two
 * async_commit() form a group; async_wait<N>() returns once at most N of this thread's groups are
 * still in flight; other threads' copies need a barrier (wave_sync / block_sync) after that. */
R35A_DEV void async_copy_16(void *smem, const void *gmem, bool fill) {
    const u32 s = (u32)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(gmem), "r"(fill ? 16 : 0) : "memory");
}
R35A_DEV void async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
R35A_DEV void async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

template <class P>
R35A_DEV P *byte_offset(P *p, i64 bytes) { return (P *)((char *)p + bytes); }
template <class P>
R35A_DEV const P *byte_offset(const P *p, i64 bytes) { return (const P *)((const char *)p + bytes); }

} /* namespace r35a */
#else
#error "device.h: compile kernels with a HIP (AMDGPU) or CUDA device compiler"
#endif

/* ---- 8-bit KV elements (both targets) -------------------------------------------------------
 * gfx11 has no fp8 hardware (nor int8 conversions into f16), so these are register arithmetic on
 * the bits, written once on top of the layer above. A cache's real value is element x scale; the
 * scale is the caller's (one multiply per row, or folded into the softmax scale for K and into the
 * output normalization for V, as the portable kernel does). */
namespace r35a {

/* An OCP float8_e4m3fn byte as the f16 bits of its value / 2^8: e4m3's exponent (bias 7) and
 * mantissa drop into f16's fields (bias 15) one bit lower, which divides the value by 2^(15-7);
 * fp8 subnormals land on f16 subnormals, exactly. The all-ones S.1111.111 (NaN) comes out as the
 * finite 480 / 2^8: a caller that must keep NaN (the non-finite contract) checks the byte, as
 * fp8_e4m3_to_f32 does. */
R35A_DEV u32 fp8_e4m3_to_f16_bits_div256(u32 b) { return ((b & 0x80u) << 8) | ((b & 0x7fu) << 7); }

/* Bytes 0 and 1 of x at once, as an f16x2 (byte 0 in bits 0-15) of value / 2^8: the same rule on a
 * pair, 5 bit operations per 2 elements, no conversion instruction. (A b128 load holds 16 elements:
 * bytes 2-3 are (x >> 16).) */
R35A_DEV u32 fp8_e4m3x2_to_f16x2_div256(u32 x) {
    const u32 t = ((x & 0xffu) << 8) | ((x & 0xff00u) << 16); /* byte 0 at bits 8-15, byte 1 at 24-31 */
    return (t & 0x80008000u) | ((t & 0x7f007f00u) >> 1);
}

/* The exact value of an e4m3fn byte; NaN for S.1111.111. */
R35A_DEV float fp8_e4m3_to_f32(u32 b) {
    const float v = f16_to_f32((u16)fp8_e4m3_to_f16_bits_div256(b)) * 256.0f;
    return (b & 0x7fu) == 0x7fu ? quiet_nan() : v;
}

/* A two's-complement int8 byte (bits 0-7 of b) as its value. */
R35A_DEV float int8_to_f32(u32 b) { return (float)((int)(b << 24) >> 24); }

/* ---- 8-bit KV elements as matrix operands (the decode kernel) --------------------------------
 * The decode kernel feeds K and V to the products in the Q/O dtype E (f16 or bf16), converted in
 * registers two at a time: kv8x2<E, KV, B0, B1>(x) is bytes B0 and B1 of x (compile-time indices)
 * as a packed E pair (byte B0 in bits 0-15), holding value / kv8_unit<KV>(): every value an 8-bit
 * cache holds is exact in f16 and bf16 in those units, so the only rounding is the products'
 * (the kernel multiplies the unit and the caller's scale into the logit scale for K and into the
 * output normalization for V). Instruction counts per pair: gfx11 fp8 -> f16 6 (v_perm_b32,
 * v_pk_ashrrev_i16 and the NaN flag: and, add, shift, v_bfi_b32), or 3 on the fast path plus ~1.25
 * for the operand's NaN-code test (kv8x2_fast below; bf16 likewise, 3 more each), int8 -> f16 2.5 (the byte-flip is shared by two pairs, v_perm_b32,
 * v_pk_add_f16); -> bf16 by way of f32 (exact: at most 8 significant bits) 5-6. NVIDIA: fp8 -> f16
 * one cvt.rn.f16x2.e4m3x2 (sm_89+), int8 -> f16 2, -> bf16 3-4.
 * fp8 NaN codes (S.1111.111) come out NaN on both (the reference's rule; the emulator's
 * decode8_codes case checks every code). */
struct kv_fp8_t {};   /* OCP float8_e4m3fn */
struct kv_int8_t {};       /* two's-complement int8 */

template <class A, class B>
struct same_type {
    static constexpr bool value = false;
};
template <class A>
struct same_type<A, A> {
    static constexpr bool value = true;
};
/* pick_type<C, A, B>::type is A when C holds, else B. */
template <bool C, class A, class B>
struct pick_type {
    typedef A type;
};
template <class A, class B>
struct pick_type<false, A, B> {
    typedef B type;
};
/* Whether KV names an 8-bit element format (else K and V are in the Q/O dtype itself). */
template <class KV>
struct kv_is_8bit {
    static constexpr bool value = same_type<KV, kv_fp8_t>::value || same_type<KV, kv_int8_t>::value;
};

#if defined(R35A_TARGET_AMDGCN)
/* gfx11: an fp8 byte's magnitude bits drop into f16's fields one bit lower (value / 2^8, exact,
 * subnormals included: fp8_e4m3_to_f16_bits_div256), the NaN code flagged into a NaN; int8 by the f16 magic number 1024 + u. */
template <class KV>
R35A_DEV constexpr float kv8_unit() { return same_type<KV, kv_fp8_t>::value ? 256.0f : 1.0f; }

template <class E, class KV, int B0, int B1>
R35A_DEV u32 kv8x2(u32 x) {
    static_assert(B0 >= 0 && B0 < 4 && B1 >= 0 && B1 < 4, "byte indices of one dword");
    typedef short s16x2 __attribute__((ext_vector_type(2)));
    typedef _Float16 h16x2 __attribute__((ext_vector_type(2)));
    if constexpr (same_type<KV, kv_fp8_t>::value) {
        /* [0, b0, 0, b1]: each byte at the top of its 16-bit half; an arithmetic shift by one puts
         * the magnitude at bits 13-7 and copies the sign into bits 15 and 14. Bit 14 becomes the
         * NaN flag: magnitude 0x7f (S.1111.111) + 1 carries into bit 15 of its half (never across:
         * the low byte is 0), shifted to bit 14 it makes the exponent all ones over a non-zero
         * mantissa, an f16 NaN; every other code keeps bit 14 clear (its finite value). */
        const u32 t = byte_perm(0u, x, ((u32)B1 << 24) | (4u << 16) | ((u32)B0 << 8) | 4u);
        const u32 shifted = __builtin_bit_cast(u32, __builtin_bit_cast(s16x2, t) >> (s16x2){1, 1});
        const u32 nan_bit14 = ((t & 0x7f007f00u) + 0x01000100u) >> 1;
        const u32 h = (shifted & 0xbfffbfffu) | (nan_bit14 & 0x40004000u);
        if constexpr (same_type<E, f16_t>::value) {
            return h;
        } else {
            const float lo = f16_to_f32((u16)h), hi = f16_to_f32((u16)(h >> 16));
            return byte_perm(__builtin_bit_cast(u32, hi), __builtin_bit_cast(u32, lo), 0x07060302u);
        }
    } else {
        static_assert(same_type<KV, kv_int8_t>::value, "8-bit KV formats: fp8 e4m3, int8");
        if constexpr (same_type<E, f16_t>::value) {
            /* u = byte ^ 0x80 (the value + 128) under the exponent byte 0x64: f16 1024 + u, exact */
            const u32 t = byte_perm(0x64646464u, x ^ 0x80808080u, (4u << 24) | ((u32)B1 << 16) | (4u << 8) | (u32)B0);
            return __builtin_bit_cast(u32, __builtin_bit_cast(h16x2, t) - (h16x2){(_Float16)1152.0f, (_Float16)1152.0f});
        } else {
            const float lo = (float)((int)(x << (24 - 8 * B0)) >> 24), hi = (float)((int)(x << (24 - 8 * B1)) >> 24);
            return byte_perm(__builtin_bit_cast(u32, hi), __builtin_bit_cast(u32, lo), 0x07060302u);
        }
    }
}
#else
/* NVIDIA (sm_89 and later): fp8 by the hardware conversion (exact values, NaN kept). */
template <class KV>
R35A_DEV constexpr float kv8_unit() { return 1.0f; }

template <class E, class KV, int B0, int B1>
R35A_DEV u32 kv8x2(u32 x) {
    static_assert(B0 >= 0 && B0 < 4 && B1 >= 0 && B1 < 4, "byte indices of one dword");
    if constexpr (same_type<KV, kv_fp8_t>::value) {
        const unsigned short pair = (unsigned short)(B0 == 0 && B1 == 1 ? x : B0 == 2 && B1 == 3 ? x >> 16
                                                     : __byte_perm(x, 0u, (u32)B0 | ((u32)B1 << 4)));
        u32 h;
        asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h) : "h"(pair));
        if constexpr (same_type<E, f16_t>::value) {
            return h;
        } else {
            const float lo = f16_to_f32((u16)h), hi = f16_to_f32((u16)(h >> 16));
            u32 r;
            asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
            return r;
        }
    } else {
        static_assert(same_type<KV, kv_int8_t>::value, "8-bit KV formats: fp8 e4m3, int8");
        if constexpr (same_type<E, f16_t>::value) {
            const u32 t = __byte_perm(x ^ 0x80808080u, 0x64646464u, (u32)B0 | (4u << 4) | ((u32)B1 << 8) | (4u << 12));
            const __half2 v = __hsub2(*reinterpret_cast<const __half2 *>(&t), __float2half2_rn(1152.0f));
            return *reinterpret_cast<const u32 *>(&v);
        } else {
            const float lo = (float)((int)(x << (24 - 8 * B0)) >> 24), hi = (float)((int)(x << (24 - 8 * B1)) >> 24);
            u32 r;
            asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
            return r;
        }
    }
}
#endif

/* Eight 8-bit elements (bytes 0-7 of x) as four packed E pairs, in order (a 16-byte row chunk of the
 * 16-bit layout). */
template <class E, class KV>
R35A_DEV u32x4 kv8x8(u32x2 x) {
    return u32x4{kv8x2<E, KV, 0, 1>(x[0]), kv8x2<E, KV, 2, 3>(x[0]), kv8x2<E, KV, 0, 1>(x[1]), kv8x2<E, KV, 2, 3>(x[1])};
}
/* The fp8 fast path (gfx11): kv8x2 without the NaN flag, 3 instructions per pair instead of 6
 * (v_perm_b32, v_pk_ashrrev_i16, v_and_b32; bf16 then by way of f32 as kv8x2, 3 more). Exact for every
 * code but S.1111.111, which it would turn into the finite 480 / 2^8, so it is taken only for operands
 * whose bytes hold no NaN code anywhere in the wave (kv8_wave_fast): a wave with a NaN code in the
 * operand converts all of it with kv8x2. NVIDIA's conversion is one instruction: no fast path there,
 * and kv8x2_fast is kv8x2 for every other format too. */
template <class E, class KV>
struct kv8_fast_path {
#if defined(R35A_TARGET_AMDGCN)
    static constexpr bool value = same_type<KV, kv_fp8_t>::value;
#else
    static constexpr bool value = false;
#endif
};
template <class E, class KV, int B0, int B1>
R35A_DEV u32 kv8x2_fast(u32 x) {
#if defined(R35A_TARGET_AMDGCN)
    if constexpr (kv8_fast_path<E, KV>::value) {
        typedef short s16x2 __attribute__((ext_vector_type(2)));
        const u32 t = byte_perm(0u, x, ((u32)B1 << 24) | (4u << 16) | ((u32)B0 << 8) | 4u);
        const u32 h = __builtin_bit_cast(u32, __builtin_bit_cast(s16x2, t) >> (s16x2){1, 1}) & 0xbfffbfffu;
        if constexpr (same_type<E, f16_t>::value) {
            return h;
        } else {
            const float lo = f16_to_f32((u16)h), hi = f16_to_f32((u16)(h >> 16));
            return byte_perm(__builtin_bit_cast(u32, hi), __builtin_bit_cast(u32, lo), 0x07060302u);
        }
    }
#endif
    return kv8x2<E, KV, B0, B1>(x);
}
/* Whether decode's products run in f16 although the queries are bf16: gfx11 with an 8-bit cache. An
 * 8-bit element converts to f16 in half the instructions it takes to reach bf16 (by way of f32, above)
 * and every e4m3 / int8 value (times the conversion's unit) is exact in both; f16 dot products pair
 * into dual-issue VOPD, bf16's do not. NVIDIA's conversion is one instruction either way: never there. */
template <class E, class KV>
struct kv8_f16_products {
#if defined(R35A_TARGET_AMDGCN)
    static constexpr bool value = same_type<E, bf16_t>::value && kv_is_8bit<KV>::value;
#else
    static constexpr bool value = false;
#endif
};
/* The element type of decode's P.V products (V^T and P^T operands): the Q/O dtype E, or f16 (above).
 * P in [0, 1] keeps more bits in f16 than in bf16 (terms below 2^-24 of the row's largest weight
 * become f16 subnormals). */
template <class E, class KV>
struct pv_elem {
    typedef typename pick_type<kv8_f16_products<E, KV>::value, f16_t, E>::type type;
};
/* The element type of decode's Q.K products (Q^T and K operands): pv_elem's, by the same rule (above).
 * In f16 each query row is first multiplied by a power of two that puts its largest |element| in
 * [2^14, 2^15) (q_row_scale): bf16's 8 significant bits fit f16's 11, so every element of at least
 * 2^-28 of the row's largest is exact, smaller ones round to f16 subnormals (below 2^-38: zero); the
 * row's dot products are multiplied back by the inverse power (exact) before anything else sees them. */
template <class E, class KV>
struct qk_elem : pv_elem<E, KV> {};
/* The power of two q_row_scale multiplies a query row by, from the largest |element| of the row
 * (amax, a float): 2^k with k = 14 - floor(log2 amax), clamped to [-113, 126] so that both 2^k and
 * 2^-k are normal floats (a row whose largest element is below 2^-112 keeps it below 2^14). A row
 * of zeros or one holding an infinity keeps its values (k = 0): an infinity stays one and the row is
 * non-finite as the reference's is; NaN elements do not reach amax (fmax) and stay NaN. */
R35A_DEV float q_row_scale(float amax) {
    const int e = (int)((__builtin_bit_cast(u32, amax) >> 23) & 0xffu);   /* biased exponent; amax >= 0 */
    int k = e == 0xff || amax == 0.f ? 0 : 141 - e;
    k = k < -113 ? -113 : k > 126 ? 126 : k;
    return __builtin_bit_cast(float, (u32)(k + 127) << 23);
}
/* 1 / q_row_scale(amax), exact. */
R35A_DEV float q_row_unscale(float scale) {
    return __builtin_bit_cast(float, (u32)(254 - (int)(__builtin_bit_cast(u32, scale) >> 23)) << 23);
}
/* Two bf16 (lo in bits 0-15) times a power of two as an f16 pair: exact where the product is an f16
 * normal (bf16 has 8 significant bits); f16 subnormals round toward zero. */
R35A_DEV u32 bf16x2_to_f16x2_scaled(u32 x, float scale) {
    const float lo = __builtin_bit_cast(float, x << 16) * scale, hi = __builtin_bit_cast(float, x & 0xffff0000u) * scale;
#if defined(R35A_TARGET_AMDGCN)
    return __builtin_bit_cast(u32, __builtin_amdgcn_cvt_pkrtz(lo, hi));
#else
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const u32 *>(&h);
#endif
}
/* Bit 7 of byte i is set where byte i of x is an fp8 NaN code (magnitude 0x7f; (b & 0x7f) + 1
 * carries into bit 7): or the words of an operand together and pass them to kv8_wave_fast. */
R35A_DEV u32 kv8_nan_codes(u32 x) { return (x & 0x7f7f7f7fu) + 0x01010101u; }
/* Whether the wave takes the fast path for an operand: no lane's kv8_nan_codes (or-ed) flags a code. */
R35A_DEV bool kv8_wave_fast(u32 codes) { return !wave_any((codes & 0x80808080u) != 0u); }
/* Eight elements as kv8x8 by kv8x2_fast: only for bytes that hold no fp8 NaN code (see there). */
template <class E, class KV>
R35A_DEV u32x4 kv8x8_fast(u32x2 x) {
    return u32x4{kv8x2_fast<E, KV, 0, 1>(x[0]), kv8x2_fast<E, KV, 2, 3>(x[0]), kv8x2_fast<E, KV, 0, 1>(x[1]),
                 kv8x2_fast<E, KV, 2, 3>(x[1])};
}

} /* namespace r35a */

/* ============================================================================================
 * Encoder section (kernels/encoder/encoder.hip): probability packing, one wave's LDS ordering. Appended so the
 * other families' edits above merge without touching it; nothing above depends on it.
 * ============================================================================================ */
#if defined(R35A_TARGET_AMDGCN)
namespace r35a {
/* Two finite non-negative f32 (softmax probabilities) to bf16x2, lo in bits 0-15, rounded half
 * away from zero: one integer add per value instead of round-to-nearest-even's three. The two
 * roundings differ only on exact ties (low 16 bits 0x8000, one value in 2^16). */
R35A_DEV u32 pack_prob_bf16x2(float lo, float hi) {
    return byte_perm(__builtin_bit_cast(u32, hi) + 0x8000u, __builtin_bit_cast(u32, lo) + 0x8000u, 0x07060302u);
}
/* Orders the LDS accesses of one wave's lanes (a lane reading what another lane of the same wave
 * wrote) where the wave alone shares a region: gfx11 executes a wave's LDS instructions in order,
 * so only the compiler must not move accesses across (the "memory" clobber). */
R35A_DEV void wave_lds_sync() { __asm__ volatile("" ::: "memory"); }
} /* namespace r35a */
#elif defined(R35A_TARGET_CUDA)
namespace r35a {
/* Two finite non-negative f32 to bf16x2 (lo in bits 0-15), round to nearest even: one cvt. */
R35A_DEV u32 pack_prob_bf16x2(float lo, float hi) {
    u32 r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));   /* first source -> bits 16-31 */
    return r;
}
/* Lanes of one warp share a shared-memory region: __syncwarp orders their accesses. */
R35A_DEV void wave_lds_sync() { __syncwarp(); }
/* (cp.async: async_copy_16, async_commit, async_wait above.) */
} /* namespace r35a */
#endif

#endif /* R35A_DEVICE_H */
