/*
 * frag_nv_gfx11emu.h - the encoder's operations on the fragment_nv_gfx11emu.h layer (kernels/target/fragment_nv_gfx11emu.h): its
 * tiling constants and the products and stores it needs beyond the layer's common names.
 * Included by encoder_frag.h after the layer.
 */
#ifndef R35A_ENCODER_FRAG_NV_GFX11EMU_H
#define R35A_ENCODER_FRAG_NV_GFX11EMU_H

/* fragment_gfx11.h's encoder operations with gfx11's layouts, exactly (see there).
 *
 * The occupancy contract an encoder kernel is built with: none. The emulation is a correctness mode
 * whose replicated operands take about twice the native registers; its kernels keep the table's
 * tiling (launch shape, LDS) but may use every register a warp can have. */
#define R35A_FRAG_ENC_WAVES(waves) 1
namespace r35a {
namespace frag {

R35A_DEV int kslot_of_row(int m) { return (m >> 1) + 8 * (m & 1); }
R35A_DEV int row_of_kslot(int p) { return p < 8 ? 2 * p : 2 * p - 15; }
template <class P>
R35A_DEV ab b_from_acc_keys(const acc &c) {
    const bool h = half_wave() != 0;
    ab b;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const u32 w = P::pack2(c.v[2 * j], c.v[2 * j + 1]);
        const u32 x = lane_xor16_u32(w);
        b.v[j] = h ? x : w;
        b.v[4 + j] = h ? w : x;
    }
    return b;
}

/* The encoder's output store (fragment_nv_mma.h permutes columns there): store_vec16_global. */
template <class F>
R35A_DEV void store_vec16_global_pv(const ab &a, int n, F ptr_of) { store_vec16_global(a, n, ptr_of); }

/* The encoder's product, emulated k-pair by k-pair: lane (n, h) adds A[2e + h][2w, 2w + 1] .
 * B[2w, 2w + 1][n] into its 8 accumulators for w = 0..7, A's row read from its own half-wave as in
 * mma(). mma() sums each output's 16 products first and then adds them to the accumulator; this
 * order keeps only the accumulators and one shuffled word live (the encoder's kernels hold Q, O and
 * scores in the emulated, twice-as-wide operands), and rounds differently in the last bits. */
template <class E>
R35A_DEV acc mma_enc(ab a, ab b, acc c) {
    const int h = half_wave();
#pragma unroll
    for (int w = 0; w < 8; ++w) {
        const float b_lo = E::to_f32((u16)b.v[w]), b_hi = E::to_f32((u16)(b.v[w] >> 16));
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const u32 x = __shfl_sync(0xffffffffu, a.v[w], 2 * e + h + 16 * h);
            c.v[e] = fmaf(E::to_f32((u16)x), b_lo, c.v[e]);
            c.v[e] = fmaf(E::to_f32((u16)(x >> 16)), b_hi, c.v[e]);
        }
    }
    return c;
}

/* mma(a, b, acc_zero()) (fragment_nv_mma.h saves the zeroed registers there). */
template <class E>
R35A_DEV acc mma_zero(ab a, ab b) { return mma_enc<E>(a, b, acc_zero()); }

} /* namespace frag */
} /* namespace r35a */

#include "encoder/kv_stage_regs.h"

namespace r35a {
/* The encoder's paths on this layer (kernels/encoder/encoder.hip): gfx11's, with less register use,
 * since the emulated operands (replicated across half-waves, as gfx11 requires) take twice the
 * native registers. */
struct encoder_paths {
    /* K/V through registers, V stored transposed; a block is loaded only after the products of the
     * previous one (the prefetched block's registers do not fit next to the emulated operands) */
    typedef kv_stage_regs<false> kv_stage;
    /* one row tile per pass over the keys */
    static constexpr int TILES_PER_PASS = 1;
    /* no speculative exponentiation: its rare recomputation of a tile's scores does not fit the
     * registers on top of the emulated operands; the emulation checks the same lane layouts on the
     * exact path */
    static constexpr bool SPECULATE = false;
};
} /* namespace r35a */

#endif /* R35A_ENCODER_FRAG_NV_GFX11EMU_H */
