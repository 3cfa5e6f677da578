/*
 * encoder_frag.h - the target's fragment layer (kernels/target/fragment.h) and the encoder's own
 * operations on it, one header per layer.
 */
#ifndef R35A_ENCODER_FRAG_H
#define R35A_ENCODER_FRAG_H

#include "target/fragment.h"

/* The encoder's own functions (the paths' operations, kv_stage_*.h): inline like the lambdas of the
 * kernel body, left to the inliner's choice as those are, so that naming them as functions changes
 * no machine code. */
#define R35A_ENC_FN __device__ inline

#if defined(R35A_TARGET_AMDGCN)
#include "encoder/frag_gfx11.h"
#elif defined(R35A_FRAGMENT_EMULATE_GFX11) && R35A_FRAGMENT_EMULATE_GFX11
#include "encoder/frag_nv_gfx11emu.h"
#else
#include "encoder/frag_nv_mma.h"
#endif

#endif /* R35A_ENCODER_FRAG_H */
