/*
 * fragment.h - picks the matrix-fragment layer of the target. Kernels include this header and use
 * the names every fragment header defines (namespace r35a::frag): operand fragments `ab`, the
 * accumulator `acc`, column statistics `colv`, loads, `mma<E>`, coordinates, column reductions,
 * `b_from_acc`, native-layout accumulator storage, `store_vec16_global` and `pin`.
 *
 *   AMDGPU (gfx11 wave32)                        fragment_gfx11.h       v_wmma_f32_16x16x16_*
 *   NVIDIA, default                              fragment_nv_mma.h      mma.sync.m16n8k16
 *   NVIDIA, R35A_FRAGMENT_EMULATE_GFX11=1        fragment_nv_gfx11emu.h the gfx11 lane layouts,
 *                                                                       exactly, with warp shuffles
 *
 * Decode's second layers, for variants with few rows (namespaces of their own; decode/layer.h makes
 * each layer a type its body is instantiated on): decode/rows4_gfx11.h (gfx11, rows 4: v_dot2
 * products) and decode/rows8_nv.h (NVIDIA native, rows 8: the rows as mma's n = 8).
 *
 * The emulation runs the kernels with gfx11's data layouts on NVIDIA hardware: real concurrency for
 * the code that was written against fragment_gfx11.h, and a check of its half-wave replication.
 */
#ifndef R35A_FRAGMENT_H
#define R35A_FRAGMENT_H

#include "common/device.h"

#if defined(R35A_TARGET_AMDGCN)
#if !defined(__GFX11__)
#error "fragment_gfx11.h: the WMMA fragments are gfx11's (RDNA 3/3.5, wave32); other AMD archs need their own layer"
#endif
#include "fragment_gfx11.h"
#elif defined(R35A_TARGET_CUDA)
#if defined(R35A_FRAGMENT_EMULATE_GFX11) && R35A_FRAGMENT_EMULATE_GFX11
#include "fragment_nv_gfx11emu.h"
#else
#include "fragment_nv_mma.h"
#endif
#else
#error "fragment.h: no fragment layer for this target (AMDGPU gfx11 or NVIDIA)"
#endif

namespace r35a {
namespace frag {
/* The B operand of a product (decode's Q^T and P^T) and its loads: an operand fragment `ab` on every
 * target layer; a second layer may hold B operands its own way (frag_d4::bop). */
typedef ab bop;
template <bool K8_ORDER = false, class F, class OK>
R35A_DEV bop load_bop_global_u16(F ptr_of, OK ok) { return load_vec16_global_u16<K8_ORDER>(ptr_of, ok); }
template <bool K8_ORDER = false>   /* (Q^T is staged in LDS in the K operands' order: k8_q_word_pos) */
R35A_DEV bop load_bop_lds(const u16 *lds, int ld) { return load_vec16_lds(lds, ld); }
} /* namespace frag */
} /* namespace r35a */


#endif /* R35A_FRAGMENT_H */
