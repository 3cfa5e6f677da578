/*
 * frag_nv_mma.h - the encoder's operations on the fragment_nv_mma.h layer (kernels/target/fragment_nv_mma.h): its
 * tiling constants and the products and stores it needs beyond the layer's common names.
 * Included by encoder_frag.h after the layer.
 */
#ifndef R35A_ENCODER_FRAG_NV_MMA_H
#define R35A_ENCODER_FRAG_NV_MMA_H

/* The occupancy contract (minimum warps per sub-partition) an encoder kernel is built with: the table's. */
#define R35A_FRAG_ENC_WAVES(waves) (waves)
namespace r35a {
namespace frag {

/* P^T as the B operand in place (see b_from_acc): the k order is not permuted. */
R35A_DEV int kslot_of_row(int m) { return m; }
R35A_DEV int row_of_kslot(int p) { return p; }
template <class P>
R35A_DEV ab b_from_acc_keys(const acc &c) { return b_from_acc<P>(c); }

/* The encoder's product: mma (fragment_nv_gfx11emu.h emulates it with fewer live registers). */
template <class E>
R35A_DEV acc mma_enc(ab a, ab b, acc c) { return mma<E>(a, b, c); }
/* mma(a, b, acc_zero()) without the zeroed registers: the accumulator input is the constant 0 (ptxas
 * can read it from RZ instead of 8 moves per fragment). */
#define R35A_MMA_M16N8K16_Z(TYPE, d, A, B0, B1)                                                         \
    asm("mma.sync.aligned.m16n8k16.row.col.f32." TYPE "." TYPE ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, " \
        "{%10,%10,%10,%10};"                                                                             \
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])                                                 \
        : "r"(A.v[0]), "r"(A.v[1]), "r"(A.v[2]), "r"(A.v[3]), "r"(B0), "r"(B1), "f"(0.0f))
template <class E>
R35A_DEV acc mma_zero(ab a, ab b);
template <>
__device__ __forceinline__ acc mma_zero<f16_t>(ab a, ab b) {
    acc c;
    R35A_MMA_M16N8K16_Z("f16", c.v, b, a.v[0], a.v[2]);
    R35A_MMA_M16N8K16_Z("f16", (c.v + 4), b, a.v[1], a.v[3]);
    return c;
}
template <>
__device__ __forceinline__ acc mma_zero<bf16_t>(ab a, ab b) {
    acc c;
    R35A_MMA_M16N8K16_Z("bf16", c.v, b, a.v[0], a.v[2]);
    R35A_MMA_M16N8K16_Z("bf16", (c.v + 4), b, a.v[1], a.v[3]);
    return c;
}
#undef R35A_MMA_M16N8K16_Z

/* The encoder's output store: store_vec16_global (its V^T operands keep the column order). */
template <class F>
R35A_DEV void store_vec16_global_pv(const ab &a, int n, F ptr_of) { store_vec16_global(a, n, ptr_of); }

} /* namespace frag */
} /* namespace r35a */

#include "encoder/kv_stage_async.h"

namespace r35a {
/* The encoder's paths on this layer (kernels/encoder/encoder.hip). */
struct encoder_paths {
    /* K/V blocks copied straight into a ring of shared-memory stages (cp.async) */
    typedef kv_stage_async kv_stage;
    /* row tiles carried through one pass over the keys (their Q, O and score registers) */
    static constexpr int TILES_PER_PASS = 2;
    /* blocks exponentiated speculatively against the running max (softmax_step.h) */
    static constexpr bool SPECULATE = true;
};
} /* namespace r35a */

#endif /* R35A_ENCODER_FRAG_NV_MMA_H */
