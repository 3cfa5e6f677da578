/*
 * decode_layers.h - the target's fragment layer (kernels/target/fragment.h) and decode's own layers
 * on it: the KV tile pipelines (registers on every layer; shared-memory stages on NVIDIA's native
 * layer) and the few-row fragment layers (gfx11's rows-4 v_dot2 layer, NVIDIA's rows-8 mma layer),
 * which decode.hip compiles its body on once more each.
 */
#ifndef R35A_DECODE_LAYERS_H
#define R35A_DECODE_LAYERS_H

#include "target/fragment.h"

#if defined(R35A_TARGET_CUDA) && !(defined(R35A_FRAGMENT_EMULATE_GFX11) && R35A_FRAGMENT_EMULATE_GFX11)
#include "decode/kv_pipe_lds_nv.h"   /* shared-memory stages (cp.async) */
#endif
#include "decode/kv_pipe_regs.h"     /* register stages */
#if defined(R35A_TARGET_AMDGCN)
#include "decode/rows4_gfx11.h"      /* rows 4: v_dot2 products (frag_d4) */
#elif defined(R35A_TARGET_CUDA) && !(defined(R35A_FRAGMENT_EMULATE_GFX11) && R35A_FRAGMENT_EMULATE_GFX11)
#include "decode/rows8_nv.h"         /* rows 8: mma's n = 8 (frag_n8) */
#endif

#endif /* R35A_DECODE_LAYERS_H */
