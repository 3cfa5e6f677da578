/*
 * fragment_nv_mma.h - the 16x16x16 fragment layer on NVIDIA mma.sync.m16n8k16 (f16/bf16 inputs,
 * f32 accumulation, sm_80 and later): two m16n8k16 products per 16x16x16 step.
 *
 * Layout. Lane l is (g, t) = (l / 4, l % 4) as in the PTX fragment tables. Two choices make the
 * layer cheap for the kernels' "transposed" products (query rows on the accumulator's n axis):
 *
 * 1. The accumulator is held transposed: mma(a, b, c) runs the hardware product with A_hw = b and
 *    B_hw = a, so C_hw[n][m] = C[m][n]. A column n of C (one query row: its softmax statistics) is
 *    then a hardware ROW: it lives in the 4 lanes of one quad, 4 elements each, and the accumulator
 *    reinterpreted as the B operand of the next product (b_from_acc: P^T feeding O^T += V^T P^T)
 *    is already in place in every lane: 4 packs, no shuffle (the hardware C layout of a row matches
 *    its A-operand layout).
 * 2. Vectors and k are permuted consistently so that each lane's share of a 16-element vector is 4
 *    CONTIGUOUS elements (one 8-byte load) instead of pairs 8 apart. Hardware position p in 0..15
 *    (a row of A_hw / column of B_hw, and likewise a k slot) is p = 2u + j + 8h (u = 0..3, j, h = 0..1)
 *    and stands for index q(p) = 4u + 2h + j. Both operands use the same k map, so the dot
 *    products are unchanged; vectors and accumulator coordinates are reported through the same map.
 *
 *   operand fragment `ab` (4 words): vector q(g) = 4(g/2) + g%2 in words 0 and 2, vector q(g + 8) =
 *     q(g) + 2 in words 1 and 3; word 0/1 hold k = 4t, 4t+1, words 2/3 k = 4t+2, 4t+3 (low half first)
 *   accumulator `acc` (8 floats): element e is C[m][n] with
 *     m = 4t + 2(e / 4) + e % 2,  n = q(g) + 2 ((e / 2) % 2)   -> column slots: NCOL = 2
 * A column (one slot of the 4 lanes of a quad) is reduced with 2 shuffles (xor 1, xor 2).
 */
#ifndef R35A_FRAGMENT_NV_MMA_H
#define R35A_FRAGMENT_NV_MMA_H

#include "device.h"

namespace r35a {
namespace frag {

enum { ACC_ELEMS = 8, NCOL = 2 };

struct ab {
    u32 v[4];
};
struct acc {
    float v[8];
};
struct colv {
    float v[NCOL];
};

R35A_DEV acc acc_zero() {
    acc c;
#pragma unroll
    for (int i = 0; i < 8; ++i) c.v[i] = 0.f;
    return c;
}
R35A_DEV ab ab_zero() {
    ab a;
#pragma unroll
    for (int i = 0; i < 4; ++i) a.v[i] = 0u;
    return a;
}
R35A_DEV colv colv_fill(float x) {
    colv c;
#pragma unroll
    for (int i = 0; i < NCOL; ++i) c.v[i] = x;
    return c;
}

/* ---- coordinates ---- */
R35A_DEV int quad_g() { return lane_id() >> 2; }
R35A_DEV int quad_t() { return lane_id() & 3; }
/* The vector (or column) index this lane's group holds at hardware rows g (h = 0) and g + 8 (h = 1). */
R35A_DEV int vec_of(int h) { const int g = quad_g(); return 4 * (g >> 1) + (g & 1) + 2 * h; }
R35A_DEV int acc_m(int e) { return 4 * quad_t() + 2 * (e >> 2) + (e & 1); }
R35A_DEV int acc_slot(int e) { return (e >> 1) & 1; }
R35A_DEV int acc_n_of_slot(int slot) { return vec_of(slot); }
R35A_DEV int acc_n(int e) { return acc_n_of_slot(acc_slot(e)); }
R35A_DEV bool col_owner(int slot) { (void)slot; return quad_t() == 0; }

/* ---- operand loads: each lane reads 4 contiguous elements (8 bytes) of each of its 2 vectors ---- */
R35A_DEV void set4(ab &a, u32x2 lo_vec, u32x2 hi_vec) {
    a.v[0] = lo_vec.x; a.v[2] = lo_vec.y;
    a.v[1] = hi_vec.x; a.v[3] = hi_vec.y;
}
template <class F>
R35A_DEV ab load_vec16_global(F ptr_of) {
    const int t = quad_t();
    const u32x2 x = *(const u32x2 *)byte_offset(ptr_of(vec_of(0)), 8 * t);
    const u32x2 y = *(const u32x2 *)byte_offset(ptr_of(vec_of(1)), 8 * t);
    ab a;
    set4(a, x, y);
    return a;
}
template <class F, class OK>
R35A_DEV ab load_vec16_global_u16(F ptr_of, OK ok) {
    const int t = quad_t();
    ab a;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int i = vec_of(h);
        const u16 *p = (const u16 *)ptr_of(i) + 4 * t;
        const bool keep = ok(i);
        const u32 lo = (u32)load_u16(p) | ((u32)load_u16(p + 1) << 16);
        const u32 hi = (u32)load_u16(p + 2) | ((u32)load_u16(p + 3) << 16);
        a.v[h] = keep ? lo : 0u;
        a.v[2 + h] = keep ? hi : 0u;
    }
    return a;
}
R35A_DEV ab load_vec16_lds(const u16 *lds, int ld) {
    const int t = quad_t();
    const u32x2 x = *(const u32x2 *)(lds + vec_of(0) * ld + 4 * t);
    const u32x2 y = *(const u32x2 *)(lds + vec_of(1) * ld + 4 * t);
    ab a;
    set4(a, x, y);
    return a;
}
/* Vector i goes to the 16-bit elements at ptr_of(i); only its first n (8 or 16) are written; a null
 * pointer writes nothing: one 8-byte store per lane and vector. */
template <class F>
R35A_DEV void store_vec16_global(const ab &a, int n, F ptr_of) {
    const int t = quad_t();
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        u16 *p = (u16 *)ptr_of(vec_of(h));
        if (p && 4 * t < n) {
            const u32x2 x = {a.v[h], a.v[2 + h]};
            *(u32x2 *)(p + 4 * t) = x;
        }
    }
}
R35A_DEV void pin(ab &a) {
#pragma unroll
    for (int i = 0; i < 4; ++i) opaque(a.v[i]);
}

/* ---- the product (see 1. above: hardware A = b, hardware B = a) ---- */
#define R35A_MMA_M16N8K16(TYPE, d, A, B0, B1)                                                           \
    asm("mma.sync.aligned.m16n8k16.row.col.f32." TYPE "." TYPE ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, " \
        "{%0,%1,%2,%3};"                                                                                 \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                                 \
        : "r"(A.v[0]), "r"(A.v[1]), "r"(A.v[2]), "r"(A.v[3]), "r"(B0), "r"(B1))
template <class E>
R35A_DEV acc mma(ab a, ab b, acc c);
template <>
__device__ __forceinline__ acc mma<f16_t>(ab a, ab b, acc c) {
    R35A_MMA_M16N8K16("f16", c.v, b, a.v[0], a.v[2]);
    R35A_MMA_M16N8K16("f16", (c.v + 4), b, a.v[1], a.v[3]);
    return c;
}
template <>
__device__ __forceinline__ acc mma<bf16_t>(ab a, ab b, acc c) {
    R35A_MMA_M16N8K16("bf16", c.v, b, a.v[0], a.v[2]);
    R35A_MMA_M16N8K16("bf16", (c.v + 4), b, a.v[1], a.v[3]);
    return c;
}
#undef R35A_MMA_M16N8K16

/* ---- column reductions: a column is one slot of the 4 lanes of a quad ---- */
R35A_DEV colv col_max(const acc &c) {
    colv r;
#pragma unroll
    for (int s = 0; s < 2; ++s) {
        float x = fmax(fmax(c.v[2 * s], c.v[2 * s + 1]), fmax(c.v[4 + 2 * s], c.v[4 + 2 * s + 1]));
        x = fmax(x, __shfl_xor_sync(0xffffffffu, x, 1));
        r.v[s] = fmax(x, __shfl_xor_sync(0xffffffffu, x, 2));
    }
    return r;
}
R35A_DEV colv col_sum_share(const acc &c) {
    colv r;
#pragma unroll
    for (int s = 0; s < 2; ++s) r.v[s] = (c.v[2 * s] + c.v[2 * s + 1]) + (c.v[4 + 2 * s] + c.v[4 + 2 * s + 1]);
    return r;
}
R35A_DEV colv col_sum_finish(colv share) {
    colv r;
#pragma unroll
    for (int s = 0; s < 2; ++s) {
        float x = share.v[s] + __shfl_xor_sync(0xffffffffu, share.v[s], 1);
        r.v[s] = x + __shfl_xor_sync(0xffffffffu, x, 2);
    }
    return r;
}

/* ---- accumulator as the B operand: C[m][n] -> B[k = m][n], in place (see 1. above) ---- */
template <class E>
R35A_DEV ab b_from_acc(const acc &c) {
    ab b;
#pragma unroll
    for (int i = 0; i < 4; ++i) b.v[i] = E::pack2(c.v[2 * i], c.v[2 * i + 1]);
    return b;
}

/* ---- native-layout storage: lane l's 8 floats at [8l, 8l + 8), column slot 0's 4 first ---- */
enum { ACC_NATIVE_FLOATS = 256 };
R35A_DEV u32x4 slot_words(const acc &c, int s) {
    const u32x4 x = {__float_as_uint(c.v[2 * s]), __float_as_uint(c.v[2 * s + 1]), __float_as_uint(c.v[4 + 2 * s]),
                     __float_as_uint(c.v[4 + 2 * s + 1])};
    return x;
}
R35A_DEV void set_slot(acc &c, int s, u32x4 x) {
    c.v[2 * s] = __uint_as_float(x.x);
    c.v[2 * s + 1] = __uint_as_float(x.y);
    c.v[4 + 2 * s] = __uint_as_float(x.z);
    c.v[4 + 2 * s + 1] = __uint_as_float(x.w);
}
R35A_DEV void acc_store_global(float *p, const acc &c) {
    float *q = p + 8 * lane_id();
    store_b128(q, slot_words(c, 0));
    store_b128(q + 4, slot_words(c, 1));
}
R35A_DEV acc acc_load_global(const float *p) {
    const float *q = p + 8 * lane_id();
    acc c;
    set_slot(c, 0, load_b128(q));
    set_slot(c, 1, load_b128(q + 4));
    return c;
}
R35A_DEV void acc_store_lds(float *lds, const acc &c) {
    u32x4 *q = (u32x4 *)(lds + 8 * lane_id());
    q[0] = slot_words(c, 0);
    q[1] = slot_words(c, 1);
}
R35A_DEV acc acc_load_lds(const float *lds) {
    const u32x4 *q = (const u32x4 *)(lds + 8 * lane_id());
    acc c;
    set_slot(c, 0, q[0]);
    set_slot(c, 1, q[1]);
    return c;
}
/* Only the columns marked ok[slot] are written; the others read as zeros and are not read. */
R35A_DEV void acc_store_global_if(float *p, const acc &c, const bool (&ok)[NCOL]) {
    float *q = p + 8 * lane_id();
    if (ok[0]) store_b128(q, slot_words(c, 0));
    if (ok[1]) store_b128(q + 4, slot_words(c, 1));
}
R35A_DEV acc acc_load_global_if(const float *p, const bool (&ok)[NCOL]) {
    const float *q = p + 8 * lane_id();
    const u32x4 zero = {0u, 0u, 0u, 0u};
    acc c;
    set_slot(c, 0, ok[0] ? load_b128(q) : zero);
    set_slot(c, 1, ok[1] ? load_b128(q + 4) : zero);
    return c;
}
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

} /* namespace frag */
} /* namespace r35a */

#endif /* R35A_FRAGMENT_NV_MMA_H */
