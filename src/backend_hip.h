/* backend_hip.h - the HIP backend: the gfx11 code objects run through a dlopen'ed HIP runtime.
 *
 * Nothing here needs a HIP header or a ROCm install to build: the runtime (libamdhip64.so.7, .so.6
 * or .so) is loaded at context creation, and only the entry points below are looked up in it. */
#ifndef R35A_BACKEND_HIP_H
#define R35A_BACKEND_HIP_H

#include "internal.h"

/* Tries to make ctx a HIP context on GPU ordinal device_index: loads the runtime (once per
 * process), checks the device's arch against the embedded code objects, loads them on the device
 * and resolves every kernel. On success fills ctx->gpu and ctx->info (backend GPU, "hip", arch)
 * and returns true. Otherwise leaves ctx untouched and writes why into reason, e.g.
 * "no HIP runtime: dlopen libamdhip64.so.7/.6 failed (...)". Never prints unless R35A_LOG=1. */
bool r35a_hip_context_init(r35a_context *ctx, int device_index, char *reason, size_t reason_len);

#endif
