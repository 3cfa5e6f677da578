/*
 * decode/rows8_nv.h - decode's second NVIDIA fragment layer, for row groups of at most 8 query
 * rows (variants with rows 8): namespace r35a::frag_n8, the names of namespace frag with 8-row tiles.
 * Included by decode_layers.h (native layer only); decode.hip instantiates its body on this layer too
 * (layer_n8, decode/layer.h).
 *
 * Why. fragment_nv_mma.h runs a 16 x 16 x 16 step as two m16n8k16 products with the query rows as the
 * hardware's M (16 rows): a row group of G x M <= 8 live rows (G 4 / 8 with M 1, the common decode
 * shapes) computes 8 rows of padding in every product, exponent and shuffle. Here the query rows are
 * the hardware's N = 8 instead, and the 16 keys (S^T) or head elements (O^T) its M:
 *     S^T[key][row] = K[key][:] . Q[row][:]     hardware A = the K operand, B = Q^T (8 rows)
 *     O^T[d][row]  += V^T[d][:] . P^T[:][row]   hardware A = the V^T operand, B = P^T
 * one m16n8k16 per 16 x 16 operand instead of two, 4 accumulator floats per lane instead of 8.
 *
 * Layout. Lane l is (g, t) = (l / 4, l % 4). Operand fragments `ab` are namespace frag's (4 words:
 * vector g in words 0 and 2, vector g + 8 in words 1 and 3), which is the hardware A layout in
 * register order; a B operand (Q^T, P^T: vector = query row 0-7) uses words 0 and 2 only.
 *   accumulator `acc` (4 floats): element e is C[m][n] with m = g + 8 (e / 2), n = 2t + e % 2:
 *     column slots NCOL = 2 (query rows 2t, 2t + 1), a column spread over the 8 lanes of equal t
 *     (reduced with 3 shuffles: xor 4, 8, 16).
 *   P^T as the B operand of the next product (b_from_acc): lane (g, t) holds keys g, g + 8 of rows
 *     2t, 2t + 1 and needs keys 2t, 2t + 1 (and + 8) of row g: an 8 x 8 transpose of each packed half
 *     (movmatrix.trans, one per 8 keys).
 *   native storage: lane l's 4 floats at [4l, 4l + 4), column slot 0's 2 first.
 * Served by variants/sm_90.tsv's rows-8 rows (layer mma8), checked on the H200 by test_gpu_cuda (every
 * rows-8 variant; memcheck, racecheck and synccheck clean) and tools/check_nv_rows8.sh (no spills, no
 * local memory).
 *
 * Everything not defined here (operand loads, the 8-bit conversions, colv, the pipelines' copies) is
 * namespace frag's, reached through the using-directive.
 */
#ifndef R35A_FRAGMENT_NV_MMA_N8_H
#define R35A_FRAGMENT_NV_MMA_N8_H

#define R35A_FRAG_HAS_N8 1

namespace r35a {
namespace frag_n8 {
using namespace frag;

enum { ACC_ELEMS = 4, NCOL = 2, TILE_ROWS = 8, ACC_NATIVE_FLOATS = 128 };
static_assert((int)NCOL == (int)frag::NCOL, "colv is namespace frag's");

struct acc {
    float v[4];
};

R35A_DEV acc acc_zero() {
    acc c;
#pragma unroll
    for (int i = 0; i < 4; ++i) c.v[i] = 0.f;
    return c;
}

/* ---- coordinates ---- */
R35A_DEV int acc_m(int e) { return quad_g() + 8 * (e >> 1); }
R35A_DEV int acc_slot(int e) { return e & 1; }
R35A_DEV int acc_n_of_slot(int slot) { return 2 * quad_t() + slot; }
R35A_DEV int acc_n(int e) { return acc_n_of_slot(acc_slot(e)); }
R35A_DEV bool col_owner(int slot) { (void)slot; return quad_g() == 0; }

/* ---- the product: hardware A = a (all four words in order), hardware B = words 0 and 2 of b ---- */
#define R35A_MMA_N8(TYPE, d, A, B)                                                                      \
    asm("mma.sync.aligned.m16n8k16.row.col.f32." TYPE "." TYPE ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, " \
        "{%0,%1,%2,%3};"                                                                                 \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                                 \
        : "r"(A.v[0]), "r"(A.v[1]), "r"(A.v[2]), "r"(A.v[3]), "r"(B.v[0]), "r"(B.v[2]))
template <class E>
R35A_DEV acc mma(ab a, ab b, acc c);
template <>
__device__ __forceinline__ acc mma<f16_t>(ab a, ab b, acc c) {
    R35A_MMA_N8("f16", c.v, a, b);
    return c;
}
template <>
__device__ __forceinline__ acc mma<bf16_t>(ab a, ab b, acc c) {
    R35A_MMA_N8("bf16", c.v, a, b);
    return c;
}
#undef R35A_MMA_N8

/* ---- column reductions: a column is one slot of the 8 lanes of equal t ---- */
R35A_DEV float col_reduce_max(float x) {
    x = fmax(x, __shfl_xor_sync(0xffffffffu, x, 4));
    x = fmax(x, __shfl_xor_sync(0xffffffffu, x, 8));
    return fmax(x, __shfl_xor_sync(0xffffffffu, x, 16));
}
R35A_DEV colv col_max(const acc &c) {
    colv r;
#pragma unroll
    for (int s = 0; s < 2; ++s) r.v[s] = col_reduce_max(fmax(c.v[s], c.v[2 + s]));
    return r;
}
R35A_DEV colv col_sum_share(const acc &c) {
    colv r;
#pragma unroll
    for (int s = 0; s < 2; ++s) r.v[s] = c.v[s] + c.v[2 + s];
    return r;
}
R35A_DEV colv col_sum_finish(colv share) {
    colv r;
#pragma unroll
    for (int s = 0; s < 2; ++s) {
        float x = share.v[s] + __shfl_xor_sync(0xffffffffu, share.v[s], 4);
        x += __shfl_xor_sync(0xffffffffu, x, 8);
        r.v[s] = x + __shfl_xor_sync(0xffffffffu, x, 16);
    }
    return r;
}

/* ---- accumulator as the B operand: C[m][n] -> B[k = m][n] (see the layout above) ---- */
R35A_DEV u32 transpose8x8_b16(u32 x) {
    u32 y;
    asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
    return y;
}
template <class E>
R35A_DEV ab b_from_acc(const acc &c) {
    ab b;
    b.v[0] = transpose8x8_b16(E::pack2(c.v[0], c.v[1]));   /* keys 0-7 */
    b.v[2] = transpose8x8_b16(E::pack2(c.v[2], c.v[3]));   /* keys 8-15 */
    b.v[1] = 0u;                                            /* (rows 8-15: not read) */
    b.v[3] = 0u;
    return b;
}

/* ---- native-layout storage ---- */
R35A_DEV void acc_store_lds(float *lds, const acc &c) {
    const u32x4 x = {__float_as_uint(c.v[0]), __float_as_uint(c.v[2]), __float_as_uint(c.v[1]), __float_as_uint(c.v[3])};
    *(u32x4 *)(lds + 4 * lane_id()) = x;
}
R35A_DEV acc acc_load_lds(const float *lds) {
    const u32x4 x = *(const u32x4 *)(lds + 4 * lane_id());
    acc c;
    c.v[0] = __uint_as_float(x.x);
    c.v[2] = __uint_as_float(x.y);
    c.v[1] = __uint_as_float(x.z);
    c.v[3] = __uint_as_float(x.w);
    return c;
}
/* colv_store / colv_load: namespace frag's text, restated so that col_owner and acc_n_of_slot bind to
 * this layer's coordinates (frag's bodies name frag's) */
R35A_DEV void colv_store(float *p, colv c, bool global) {
    (void)global;
    if (col_owner(0)) {
        p[acc_n_of_slot(0)] = c.v[0];
        p[acc_n_of_slot(1)] = c.v[1];
    }
}
R35A_DEV colv colv_load(const float *p, bool global) {
    (void)global;
    colv c;
    c.v[0] = p[acc_n_of_slot(0)];
    c.v[1] = p[acc_n_of_slot(1)];
    return c;
}

/* ---- decode's shared-memory pipeline: namespace frag's, its 16-bit K and V^T operands loaded for
 * the hardware A position (the four words in register order: no register moves before a product) ---- */
template <int DS, int S, class E, class KV, int RW = 1>
struct kv_pipe_lds : frag::kv_pipe_lds<DS, S, E, KV, RW> {
    typedef frag::kv_pipe_lds<DS, S, E, KV, RW> base_pipe;
    R35A_MEMBER explicit kv_pipe_lds(void *lds, int sharer = 0, int barrier_id = 0) : base_pipe(lds, sharer, barrier_id) {}
    R35A_MEMBER ab k_operand(int slot, int c) const {
        if constexpr (!base_pipe::B8)
            return load_vec16_lds((const u16 *)(this->base + slot * 2 * base_pipe::TILE + 32 * c), base_pipe::ROW / 2);
        else
            return base_pipe::k_operand(slot, c);
    }
    R35A_MEMBER ab v_operand(int slot, int c) const {
        if constexpr (!base_pipe::B8)
            return load_vec16_lds_trans((const u16 *)(this->base + slot * 2 * base_pipe::TILE + base_pipe::TILE + 32 * c),
                                        base_pipe::ROW / 2);
        else
            return base_pipe::v_operand(slot, c);
    }
};

} /* namespace frag_n8 */
} /* namespace r35a */

#endif /* R35A_FRAGMENT_NV_MMA_N8_H */
