/* backend_cuda.h - the CUDA backend: the NVIDIA cubins of the same kernel sources (built when
 * R35A_NVIDIA_TARGETS is set) run through a dlopen'ed CUDA driver (libcuda.so.1).
 *
 * Nothing here needs a CUDA header or toolkit to build: the driver is loaded at context creation and
 * only the entry points the backend calls are looked up in it. It serves the same implementation
 * list as the HIP backend (tuned decode variants, alone or with the portable kernel in a mixed
 * batch; the encoder variants; the portable kernel), planned by the planners (src/plan_*.c) for the device's
 * arch ("sm_90") from its tuning rows of variants.def. Test-only knobs, read at each context creation:
 *   R35A_CUDA_FRAGMENTS=gfx11emu   load the cubins built with the gfx11-exact fragment emulation
 *   R35A_CUDA_LIBRARY=<path>       the one driver library to try */
#ifndef R35A_BACKEND_CUDA_H
#define R35A_BACKEND_CUDA_H

#include "internal.h"

/* Tries to make ctx a CUDA context on device ordinal device_index: loads the driver (once per
 * process), checks the device's compute capability against the embedded cubins, retains its primary
 * context, loads the cubins and resolves every kernel. On success fills ctx->gpu, ctx->gpu_runtime and
 * ctx->info (backend GPU, "cuda", arch "sm_90") and returns true; otherwise leaves ctx untouched and
 * writes why into reason. *built is set to false when the library has no NVIDIA cubins at all
 * (the reason is then not worth reporting next to another backend's). */
bool r35a_cuda_context_init(r35a_context *ctx, int device_index, bool *built, char *reason, size_t reason_len);

#endif
