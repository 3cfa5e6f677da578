/*
 * frag_gfx11.h - the encoder's operations on the fragment_gfx11.h layer (kernels/target/fragment_gfx11.h): its
 * tiling constants and the products and stores it needs beyond the layer's common names.
 * Included by encoder_frag.h after the layer.
 */
#ifndef R35A_ENCODER_FRAG_GFX11_H
#define R35A_ENCODER_FRAG_GFX11_H

/* The occupancy contract (minimum waves per SIMD) an encoder kernel is built with: the table's. */
#define R35A_FRAG_ENC_WAVES(waves) (waves)
namespace r35a {
namespace frag {

/* b_from_acc_keys<P>(c): the accumulator as the B operand of the next product, like b_from_acc,
 * with the k order permuted so that no interleave is needed: k-slot p holds accumulator row
 * row_of_kslot(p) (even rows in slots 0-7, odd rows in slots 8-15: VGPR j of the operand is
 * half-wave 0's packed pair j, VGPR 4 + j half-wave 1's), and the A operand that meets it must hold
 * its k elements in that order (kslot_of_row). P::pack2 packs two f32 into the operand's type.
 * Per packed word: one v_permlanex16 and two selects (instead of b_from_acc's copy, swap and two
 * v_perm_b32). */
R35A_DEV int kslot_of_row(int m) { return (m >> 1) + 8 * (m & 1); }
R35A_DEV int row_of_kslot(int p) { return p < 8 ? 2 * p : 2 * p - 15; }
template <class P>
R35A_DEV ab b_from_acc_keys(const acc &c) {
    const bool h = half_wave() != 0;
    ab b;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const u32 w = P::pack2(c.v[2 * j], c.v[2 * j + 1]);   /* half 0: rows 4j, 4j+2; half 1: 4j+1, 4j+3 */
        /* the other half-wave's word. All lanes are active, so the instruction's "old" operand
         * (its destination's previous value) is never used; the builtin ties it to an input and
         * costs a copy per word, the asm leaves the destination free */
        u32 x;
        __asm__ volatile("v_permlanex16_b32 %0, %1, %2, 0xfedcba98" : "=v"(x) : "v"(w), "s"(0x76543210u));
        b.v[j] = h ? x : w;
        b.v[4 + j] = h ? w : x;
    }
    return b;
}

/* The encoder's output store (fragment_nv_mma.h permutes columns there): store_vec16_global. */
template <class F>
R35A_DEV void store_vec16_global_pv(const ab &a, int n, F ptr_of) { store_vec16_global(a, n, ptr_of); }

/* The encoder's product: mma (fragment_nv_gfx11emu.h emulates it with fewer live registers). */
template <class E>
R35A_DEV acc mma_enc(ab a, ab b, acc c) { return mma<E>(a, b, c); }

/* mma(a, b, acc_zero()) (fragment_nv_mma.h saves the zeroed registers there). */
template <class E>
R35A_DEV acc mma_zero(ab a, ab b) { return mma_enc<E>(a, b, acc_zero()); }

} /* namespace frag */
} /* namespace r35a */

#include "encoder/kv_stage_regs.h"

namespace r35a {
/* The encoder's paths on this layer (kernels/encoder/encoder.hip). */
struct encoder_paths {
    /* K/V through registers, V stored transposed; block b + 1 loaded while block b is computed */
    typedef kv_stage_regs<true> kv_stage;
    /* row tiles carried through one pass over the keys (their Q, O and score registers) */
    static constexpr int TILES_PER_PASS = 2;
    /* blocks exponentiated speculatively against the running max (softmax_step.h) */
    static constexpr bool SPECULATE = true;
};
} /* namespace r35a */

#endif /* R35A_ENCODER_FRAG_GFX11_H */
