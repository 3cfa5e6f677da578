/*
 * host_device.h - the one macro the kernels' argument headers need to be shared by C11 host code
 * (src/, tests/) and device code (the kernels built by clang for gfx11 or by nvcc): functions
 * that both sides call, so the host's launch formulas and the kernel's reading of them cannot
 * disagree.
 */
#ifndef R35A_HOST_DEVICE_H
#define R35A_HOST_DEVICE_H

#include <stdint.h>

#if defined(__HIP__) || defined(__CUDACC__)
#define R35A_HD static inline __attribute__((host, device))
#else
#define R35A_HD static inline
#endif

/* A formula the device code also needs at compile time (a static constexpr of a kernel's layout). */
#ifdef __cplusplus
#define R35A_HD_CONSTEXPR R35A_HD constexpr
#else
#define R35A_HD_CONSTEXPR R35A_HD
#endif

/* softmax_scale * log2(e), rounded to float once: every kernel exponentiates in base 2 and gets
 * its scale from here. */
R35A_HD float r35a_scale_log2(float softmax_scale) { return (float)((double)softmax_scale * 1.4426950408889634); }

/* Launch limits every kernel family plans against: HIP (and CUDA) take at most 65535 workgroups in
 * the y and z grid dimensions, and HIP counts grid.x in threads with 32 bits. */
#define R35A_GRID_YZ_MAX 65535u
#define R35A_GRID_X_THREADS_MAX 0xffffffffu

#endif /* R35A_HOST_DEVICE_H */
