/*
 * fragment_nv_mma.h - the 16x16x16 fragment layer on NVIDIA mma.sync.m16n8k16 (f16/bf16 inputs,
 * f32 accumulation, sm_80 and later): two m16n8k16 products per 16x16x16 step. Operands come from
 * shared memory by ldmatrix (ldmatrix.trans for a tile stored the other way round), and decode's
 * KV tiles are staged in shared memory by cp.async (kv_pipe below).
 *
 * Layout. Lane l is (g, t) = (l / 4, l % 4) as in the PTX fragment tables, with no permutation:
 *
 *   operand fragment `ab` (4 words): vector g in words 0 and 2, vector g + 8 in words 1 and 3;
 *     words 0/1 hold k = 2t, 2t+1, words 2/3 k = 2t+8, 2t+9 (low half first). This is what
 *     ldmatrix.x4 delivers from four 8x8 blocks (vectors 0-7 / 8-15 x k 0-7 / 8-15).
 *   accumulator `acc` (8 floats): element e is C[m][n] with
 *     m = 2t + e % 2 + 8 (e / 4),  n = g + 8 ((e / 2) % 2)   -> column slots: NCOL = 2
 *
 * The accumulator is held transposed: mma(a, b, c) runs the hardware product with A_hw = b and
 * B_hw = a, so C_hw[n][m] = C[m][n]. A column n of C (one query row: its softmax statistics) is
 * then a hardware ROW: it lives in the 4 lanes of one quad, 4 elements each (reduced with 2
 * shuffles, xor 1 and xor 2), and the accumulator reinterpreted as the B operand of the next
 * product (b_from_acc: P^T feeding O^T += V^T P^T) is already in place in every lane: 4 packs, no
 * shuffle (the hardware C layout of a row matches its A-operand layout).
 */
#ifndef R35A_FRAGMENT_NV_MMA_H
#define R35A_FRAGMENT_NV_MMA_H

#include "common/device.h"

namespace r35a {
namespace frag {

enum { ACC_ELEMS = 8, NCOL = 2, TILE_ROWS = 16 };   /* TILE_ROWS: query rows per row tile (an accumulator's n) */

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
R35A_DEV int acc_m(int e) { return 2 * quad_t() + (e & 1) + 8 * (e >> 2); }
R35A_DEV int acc_slot(int e) { return (e >> 1) & 1; }
R35A_DEV int acc_n_of_slot(int slot) { return quad_g() + 8 * slot; }
R35A_DEV int acc_n(int e) { return acc_n_of_slot(acc_slot(e)); }
R35A_DEV bool col_owner(int slot) { (void)slot; return quad_t() == 0; }

/* ---- operand loads ---- */
/* Vector i is 16 contiguous elements at ptr_of(i): 4-byte loads (word w of vector h: k = 2t + 8 (w / 2)). */
template <class F>
R35A_DEV ab load_vec16_global(F ptr_of) {
    const int g = quad_g(), t = quad_t();
    ab a;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const u32 *p = (const u32 *)ptr_of(g + 8 * h);
        a.v[h] = p[t];
        a.v[2 + h] = p[4 + t];
    }
    return a;
}
R35A_DEV ab load_vec16_global_rows(const void *base, u32 row_bytes) {
    return load_vec16_global([&](int i) -> const void * { return (const char *)base + (u32)i * row_bytes; });
}
/* K8_ORDER: the k order of 8-bit K operands (K8_PERM below): words 0/1 hold k 4t, 4t+1 and words 2/3
 * k 4t+2, 4t+3. */
template <bool K8_ORDER = false, class F, class OK>
R35A_DEV ab load_vec16_global_u16(F ptr_of, OK ok) {
    const int g = quad_g(), t = quad_t();
    ab a;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int i = g + 8 * h;
        const u16 *p = (const u16 *)ptr_of(i) + (K8_ORDER ? 4 : 2) * t;
        const bool keep = ok(i);
        const u32 lo = (u32)load_u16(p) | ((u32)load_u16(p + 1) << 16);
        const u32 hi = (u32)load_u16(p + (K8_ORDER ? 2 : 8)) | ((u32)load_u16(p + (K8_ORDER ? 3 : 9)) << 16);
        a.v[h] = keep ? lo : 0u;
        a.v[2 + h] = keep ? hi : 0u;
    }
    return a;
}
/* Vector i is 16 contiguous elements at lds + i * ld (a row-major 16 x 16 tile; ld in elements, rows
 * 16-byte aligned): one ldmatrix.x4. Lane l addresses row l % 8 of block l / 8 (blocks: vectors 0-7
 * / 8-15 for bit 0, k 0-7 / 8-15 for bit 1). */
R35A_DEV ab load_vec16_lds(const u16 *lds, int ld) {
    const int l = lane_id(), blk = l >> 3;
    const u16 *p = lds + ((l & 7) + 8 * (blk & 1)) * ld + 8 * (blk >> 1);
    const u32 s = (u32)__cvta_generic_to_shared(p);
    ab a;
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(a.v[0]), "=r"(a.v[1]), "=r"(a.v[2]), "=r"(a.v[3])
                 : "r"(s)
                 : "memory");
    return a;
}
/* Vector i is COLUMN i of a row-major 16 x 16 tile at lds (row k at lds + k * ld, 16-byte aligned):
 * one ldmatrix.x4.trans (blocks: vectors 0-7 / 8-15 for bit 0, k 0-7 / 8-15 for bit 1). */
R35A_DEV ab load_vec16_lds_trans(const u16 *lds, int ld) {
    const int l = lane_id(), blk = l >> 3;
    const u16 *p = lds + ((l & 7) + 8 * (blk >> 1)) * ld + 8 * (blk & 1);
    const u32 s = (u32)__cvta_generic_to_shared(p);
    ab a;
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(a.v[0]), "=r"(a.v[1]), "=r"(a.v[2]), "=r"(a.v[3])
                 : "r"(s)
                 : "memory");
    return a;
}
/* The same two loads for a fragment that is the product's FIRST operand (`a` of mma(), the
 * hardware's B: decode's K and V^T operands). mma() hands the hardware two register pairs of it,
 * {v[0], v[2]} and {v[1], v[3]}; ldmatrix.x4 writes four consecutive registers in the order of its
 * 8 x 8 blocks, so these address the blocks in that pair order (block bit 0: k 0-7 / 8-15, bit 1:
 * vectors 0-7 / 8-15) and bind the results to v[0], v[2], v[1], v[3]. Same values as
 * load_vec16_lds / load_vec16_lds_trans; without this, ptxas moved 4 registers per load to form the
 * pairs (56 moves per 16-key tile of the D = 128 decode kernel, sm_90 SASS). A fragment used as the
 * second operand (the hardware's A: all four registers in order) keeps the functions above. */
R35A_DEV ab load_vec16_lds_b(const u16 *lds, int ld) {
    const int l = lane_id(), blk = l >> 3;
    const u16 *p = lds + ((l & 7) + 8 * (blk >> 1)) * ld + 8 * (blk & 1);
    const u32 s = (u32)__cvta_generic_to_shared(p);
    ab a;
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(a.v[0]), "=r"(a.v[2]), "=r"(a.v[1]), "=r"(a.v[3])
                 : "r"(s)
                 : "memory");
    return a;
}
R35A_DEV ab load_vec16_lds_trans_b(const u16 *lds, int ld) {
    const int l = lane_id(), blk = l >> 3;
    const u16 *p = lds + ((l & 7) + 8 * (blk & 1)) * ld + 8 * (blk >> 1);
    const u32 s = (u32)__cvta_generic_to_shared(p);
    ab a;
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(a.v[0]), "=r"(a.v[2]), "=r"(a.v[1]), "=r"(a.v[3])
                 : "r"(s)
                 : "memory");
    return a;
}
/* Two 8 x 8 blocks of 16-bit elements (16-byte rows) at once: lanes 0-7 address the rows of block 0,
 * lanes 8-15 those of block 1 (the others' addresses are not used); block b lands in r[b] with
 * lane (g, t) holding row g, elements 2t and 2t + 1 (.trans: rows 2t and 2t + 1 of column g). */
template <bool TRANS>
R35A_DEV void ldmatrix_x2(const void *row_of_lane, u32 (&r)[2]) {
    const u32 s = (u32)__cvta_generic_to_shared(row_of_lane);
    if (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(s) : "memory");
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(s) : "memory");
}

/* cp.async.cg of 16 bytes to the shared-window address s (zero-filled, global memory not read, when
 * fill is false): device.h's async_copy_16 without the generic-to-shared conversion per copy. */
R35A_DEV void async_copy_16_u32(u32 s, const void *gmem, bool fill) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(gmem), "r"(fill ? 16 : 0) : "memory");
}

/* ---- 8-bit K operands (decode's 8-bit KV caches) ----------------------------------------------
 * A lane reads 4 consecutive bytes of its two keys g and g + 8 (16-byte rows read by ldmatrix as b16
 * pairs deliver exactly these), so the k order of an 8-bit K operand is permuted (K8_PERM):
 * k = 2t + e holds d = 4t + e and k = 2t + 8 + e holds d = 4t + 2 + e. A product only needs K and Q
 * in the same order: Q^T is loaded in it (load_vec16_global_u16<true>, k8_q_word_pos). */
enum { K8_PERM = 1 };
struct k8_raw {
    u32 r[2];   /* bytes 4t .. 4t+3 of keys g and g + 8 */
};
R35A_DEV k8_raw load_k8_rows(const void *base, u32 row_bytes) {
    const u32 off = (u32)quad_g() * row_bytes + 4u * (u32)quad_t();
    k8_raw x;
    x.r[0] = load_b32_off(base, off);
    x.r[1] = load_b32_off(base, off + 8u * row_bytes);
    return x;
}
template <class E, class KV>
R35A_DEV ab k8_operand(const k8_raw &x) {
    ab a;
    a.v[0] = kv8x2<E, KV, 0, 1>(x.r[0]);
    a.v[1] = kv8x2<E, KV, 0, 1>(x.r[1]);
    a.v[2] = kv8x2<E, KV, 2, 3>(x.r[0]);
    a.v[3] = kv8x2<E, KV, 2, 3>(x.r[1]);
    return a;
}
/* Where word w (elements 2w, 2w + 1) of a 16-element Q chunk is staged so that load_vec16_lds (one
 * ldmatrix: word t = stored elements 2t, 2t+1, word 4 + t = 2t+8, 2t+9) delivers that k order. */
R35A_DEV int k8_q_word_pos(int w) { return (w & 1) ? 4 + (w >> 1) : w >> 1; }

/* Vector i goes to the 16-bit elements at ptr_of(i); only its first n (8 or 16) are written; a null
 * pointer writes nothing: 4-byte stores. */
template <class F>
R35A_DEV void store_vec16_global(const ab &a, int n, F ptr_of) {
    const int g = quad_g(), t = quad_t();
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        u32 *p = (u32 *)ptr_of(g + 8 * h);
        if (p) {
            p[t] = a.v[h];
            if (n > 8) p[4 + t] = a.v[2 + h];
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

/* ---- V tile -> V^T operands through shared memory (the register pipeline, decode/kv_pipe_regs.h) ----
 * Lane l holds row l % 16 of a 16 x DS tile in 16-byte chunks 2u + l / 16: stored as rows (16-byte
 * stores, rows padded by 16 bytes against bank conflicts), read back transposed by ldmatrix.trans. */
template <int DS>
struct VT_BYTES {
    static constexpr int value = 16 * (DS + 8) * 2;
};
template <int DS>
R35A_DEV void store_v_rows_lds(u16 *vt, const u32x4 (&v)[DS / 16]) {
    const int row = lane_id() & 15, half = lane_id() >> 4;
#pragma unroll
    for (int u = 0; u < DS / 16; ++u) *(u32x4 *)(vt + row * (DS + 8) + 8 * (2 * u + half)) = v[u];
}
template <int DS>
R35A_DEV ab load_vt_lds(const u16 *vt, int c) { return load_vec16_lds_trans(vt + 16 * c, DS + 8); }

} /* namespace frag */
} /* namespace r35a */

#endif /* R35A_FRAGMENT_NV_MMA_H */
