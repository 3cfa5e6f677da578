/*
 * occupancy.h - the shared memory (LDS) a workgroup may use on NVIDIA, from its occupancy contract.
 * Shared by every kernel family whose NVIDIA build takes dynamic shared memory (decode, encoder) and
 * by the host code that launches them, so the budget a kernel lays itself out in and the one the
 * host raises the function's limit to cannot disagree.
 */
#ifndef R35A_OCCUPANCY_H
#define R35A_OCCUPANCY_H

#include "common/host_device.h"

/* `waves` warps per SM sub-partition of blocks of waves_per_wg warps share an SM's 228 KiB (less 1 KiB
 * reserved per block), at most 227 KiB per block. NVIDIA kernels take DYNAMIC shared memory: a kernel
 * lays out its stages within this budget and publishes the bytes its layout uses as <name>_lds_bytes;
 * the host reads that at load, raises the function's limit (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
 * above the default 48 KiB) and launches with exactly it, so workgroups that use less than the budget
 * share an SM with more of their kind. (gfx11: static LDS, 64 KiB per workgroup at most; no dynamic
 * size.) */
#define R35A_NV_SMEM_PER_SM 233472
#define R35A_NV_SMEM_PER_BLOCK_MAX 232448
R35A_HD_CONSTEXPR int32_t r35a_nv_smem_bytes(int32_t waves, int32_t waves_per_wg) {
    const int32_t blocks = waves_per_wg > 0 ? (4 * waves + waves_per_wg - 1) / waves_per_wg : 1;
    const int32_t pool = R35A_NV_SMEM_PER_SM / (blocks > 0 ? blocks : 1) - 1024;
    return pool < R35A_NV_SMEM_PER_BLOCK_MAX ? pool : R35A_NV_SMEM_PER_BLOCK_MAX;
}

#endif /* R35A_OCCUPANCY_H */
