/*
 * fragment_gfx11.h - the 16x16x16 matrix-fragment layer for gfx11 wave32 WMMA
 * (v_wmma_f32_16x16x16_f16 / _bf16, f32 accumulation).
 *
 * ALL knowledge of which lane holds which matrix element lives here. Kernels describe data by
 * matrix coordinates only (vector index, (m, n) of an accumulator element, per-column statistics),
 * so another target supplies its own header with the same names (e.g. NVIDIA mma.sync, or a
 * gfx11-exact emulation mode for checking these layouts on other hardware).
 *
 * The product is C[16x16] += A[16x16 (m x k)] * B[16x16 (k x n)].
 *   - An operand fragment (frag::ab) holds 16 "vectors" of 16 elements along k: the rows of A or
 *     the columns of B. Loads take, per vector index i (0..15), where its 16 contiguous k elements
 *     live.
 *   - An accumulator (frag::acc) holds C. acc_m(e) / acc_n(e) give the coordinates of this lane's
 *     element e (0 .. ACC_ELEMS-1).
 *   - Column statistics (frag::colv): one float per accumulator column this lane touches
 *     (NCOL of them, slot acc_slot(e) for element e). Column reductions (over m) deliver the
 *     result to every lane that holds part of the column.
 *
 * gfx11 wave32 layout (RDNA3 ISA guide, 7.9; checked by the gfx11emu WMMA check):
 *   - A/B: lane l holds vector l % 16, its 16 k elements in 8 VGPRs, element pairs (2v, 2v+1) in
 *     VGPR v (low half first). Lanes 16-31 MUST hold the same operands as lanes 0-15: the hardware
 *     reads both half-waves.
 *   - C (f32): lane l holds column n = l % 16 and rows m = 2e + l / 16, e = 0..7.
 *   So a column lives in lanes n and n + 16; NCOL = 1.
 */
#ifndef R35A_FRAGMENT_GFX11_H
#define R35A_FRAGMENT_GFX11_H

#include "common/device.h"

namespace r35a {
namespace frag {

typedef _Float16 v16h __attribute__((ext_vector_type(16)));
typedef short v16s __attribute__((ext_vector_type(16)));
typedef float v8f __attribute__((ext_vector_type(8)));
typedef u32 v8u __attribute__((ext_vector_type(8)));

enum { ACC_ELEMS = 8, NCOL = 1, TILE_ROWS = 16 };   /* TILE_ROWS: query rows per row tile (an accumulator's n) */

/* Operand fragment: 16 x 16-bit elements per lane. */
struct ab {
    v8u v;
};
/* Accumulator fragment: 8 f32 per lane. */
struct acc {
    v8f v;
};
/* Per-lane column statistics (one value per column slot). */
struct colv {
    float v[NCOL];
};

R35A_DEV acc acc_zero() {
    acc c;
    c.v = (v8f){0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    return c;
}
R35A_DEV ab ab_zero() {
    ab a;
    a.v = (v8u){0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u};
    return a;
}
R35A_DEV colv colv_fill(float x) {
    colv c;
    for (int i = 0; i < NCOL; ++i) c.v[i] = x;
    return c;
}

/* ---- coordinates ----------------------------------------------------------------------------- */
R35A_DEV int half_wave() { return lane_id() >> 4; }
/* Row m of element e of this lane's accumulator. */
R35A_DEV int acc_m(int e) { return 2 * e + half_wave(); }
/* Column slot of element e (into colv) and the column a slot stands for. */
R35A_DEV int acc_slot(int e) { (void)e; return 0; }
R35A_DEV int acc_n_of_slot(int slot) { (void)slot; return lane_id() & 15; }
R35A_DEV int acc_n(int e) { return acc_n_of_slot(acc_slot(e)); }
/* The query row (vector) word j of a B operand (Q^T) belongs to: the lane's own, every word. */
R35A_DEV int bop_row_of_word(int j) { (void)j; return lane_id() & 15; }
/* Whether this lane is the one that stores column slot `slot` when one value per column is written
 * (column statistics): lanes 0-15. */
R35A_DEV bool col_owner(int slot) { (void)slot; return lane_id() < 16; }

/* ---- operand loads ---------------------------------------------------------------------------- */
/* Vector i (0..15) is 16 contiguous 16-bit elements at ptr_of(i), 16-byte aligned global memory.
 * Two global_load_b128 per lane; both half-waves load vector l % 16. */
template <class F>
R35A_DEV ab load_vec16_global(F ptr_of) {
    const void *p = ptr_of(lane_id() & 15);
    u32x4 x = load_b128(p);
    u32x4 y = load_b128(byte_offset(p, 16));
    ab a;
    a.v = (v8u){x.x, x.y, x.z, x.w, y.x, y.y, y.z, y.w};
    return a;
}
/* Vector i (0..15) is 16 contiguous 16-bit elements at base + i * row_bytes (base wave-uniform,
 * 16-byte aligned; i * row_bytes < 4 GiB): load_vec16_global with the base in SGPRs and a 32-bit
 * per-lane offset. */
R35A_DEV ab load_vec16_global_rows(const void *base, u32 row_bytes) {
    const u32 off = (u32)(lane_id() & 15) * row_bytes;
    const u32x4 x = load_b128_off(base, off), y = load_b128_off(base, off + 16);
    ab a;
    a.v = (v8u){x.x, x.y, x.z, x.w, y.x, y.y, y.z, y.w};
    return a;
}
/* Vector i is loaded from where ptr_of(i) points by plain 16-bit loads (no alignment needed);
 * vectors with ok(i) false read as zeros. ptr_of must return a readable address for every i (give
 * a valid stand-in for the not-ok ones): loads are not branched around, they are selected away.
 * Used once per kernel, for query rows. */
template <bool K8_ORDER = false, class F, class OK>
R35A_DEV ab load_vec16_global_u16(F ptr_of, OK ok) {
    (void)K8_ORDER;   /* 8-bit K operands keep the natural k order here (K8_PERM below) */
    const int i = lane_id() & 15;
    const u16 *p = (const u16 *)ptr_of(i);
    const bool keep = ok(i);
    ab a;
    for (int v = 0; v < 8; ++v) {
        const u32 x = (u32)load_u16(p + 2 * v) | ((u32)load_u16(p + 2 * v + 1) << 16);
        a.v[v] = keep ? x : 0u;
    }
    return a;
}
/* Vector i is 16 contiguous 16-bit elements at lds + i * ld (ld in elements, 8-element aligned):
 * two ds_load_b128 per lane. */
R35A_DEV ab load_vec16_lds(const u16 *lds, int ld) {
    const u32x4 *p = (const u32x4 *)(lds + (lane_id() & 15) * ld);
    u32x4 x = p[0], y = p[1];
    ab a;
    a.v = (v8u){x.x, x.y, x.z, x.w, y.x, y.y, y.z, y.w};
    return a;
}

/* ---- 8-bit K operands (decode's 8-bit KV caches) ----------------------------------------------
 * One 16 x 16 chunk of a K tile as stored (16 keys, 16 one-byte elements each, rows row_bytes apart):
 * lane l loads its vector's 16 bytes (one global_load_b128; both half-waves the same key, as for
 * 16-bit K), and k8_operand() converts them in registers (device.h kv8x2: 8 pairs) into an operand
 * of the Q/O dtype in the natural k order, so Q needs no reordering (K8_PERM = 0). */
enum { K8_PERM = 0 };
typedef u32x4 k8_raw;
R35A_DEV k8_raw load_k8_rows(const void *base, u32 row_bytes) {
    return load_b128_off(base, (u32)(lane_id() & 15) * row_bytes);
}
template <class E, class KV>
R35A_DEV ab k8_operand(const k8_raw &x) {
    ab a;
    if constexpr (kv8_fast_path<E, KV>::value) {
        /* no NaN code in the operand anywhere in the wave (uniform): the fast conversion (device.h) */
        if (kv8_wave_fast(kv8_nan_codes(x.x) | kv8_nan_codes(x.y) | kv8_nan_codes(x.z) | kv8_nan_codes(x.w))) {
            a.v = (v8u){kv8x2_fast<E, KV, 0, 1>(x.x), kv8x2_fast<E, KV, 2, 3>(x.x), kv8x2_fast<E, KV, 0, 1>(x.y),
                        kv8x2_fast<E, KV, 2, 3>(x.y), kv8x2_fast<E, KV, 0, 1>(x.z), kv8x2_fast<E, KV, 2, 3>(x.z),
                        kv8x2_fast<E, KV, 0, 1>(x.w), kv8x2_fast<E, KV, 2, 3>(x.w)};
            return a;
        }
    }
    a.v = (v8u){kv8x2<E, KV, 0, 1>(x.x), kv8x2<E, KV, 2, 3>(x.x), kv8x2<E, KV, 0, 1>(x.y), kv8x2<E, KV, 2, 3>(x.y),
                kv8x2<E, KV, 0, 1>(x.z), kv8x2<E, KV, 2, 3>(x.z), kv8x2<E, KV, 0, 1>(x.w), kv8x2<E, KV, 2, 3>(x.w)};
    return a;
}
/* Where word w (elements 2w, 2w + 1) of a 16-element Q chunk is staged so that load_vec16_lds
 * delivers the k order of 8-bit K operands: in place. */
R35A_DEV int k8_q_word_pos(int w) { return w; }

/* Vector i (0..15) of operand fragment `a` goes to the 16 contiguous 16-bit elements at ptr_of(i)
 * (16-byte aligned global memory), the inverse of load_vec16_global; only its first n elements are
 * written (n = 8 or 16); a null pointer writes nothing. Lane l holds vector l % 16 whole (both
 * half-waves alike), so half-wave h stores elements 8h .. 8h+7: one global_store_b128 per lane. */
template <class F>
R35A_DEV void store_vec16_global(const ab &a, int n, F ptr_of) {
    const int h = half_wave();
    u16 *p = (u16 *)ptr_of(lane_id() & 15);
    if (p && 8 * h < n) {
        const u32x4 x = h ? a.v.s4567 : a.v.s0123;
        store_b128(p + 8 * h, x);
    }
}
/* Pins a fragment's registers at this point of the program in every lane. clang 19's machine sinking
 * moves v_permlanex16_b32 (b_from_acc's half-wave swap) into the branch of a divergent store that
 * follows (the instruction lacks its convergent flag in LLVM 19; upstream fix: llvm-project PR #142962),
 * where it reads the other half-wave's lanes while they are switched off. A fragment that is stored
 * under a per-lane condition must be pinned first. */
__attribute__((unused)) R35A_DEV void pin(ab &a) {
#pragma unroll
    for (int i = 0; i < 8; ++i) __asm__ volatile("" : "+v"(a.v[i]));
}

/* ---- the product ------------------------------------------------------------------------------ */
template <class E>
R35A_DEV acc mma(ab a, ab b, acc c);
template <>
__device__ inline __attribute__((always_inline)) acc mma<f16_t>(ab a, ab b, acc c) {
    c.v = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(__builtin_bit_cast(v16h, a.v), __builtin_bit_cast(v16h, b.v), c.v);
    return c;
}
template <>
__device__ inline __attribute__((always_inline)) acc mma<bf16_t>(ab a, ab b, acc c) {
    c.v = __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32(__builtin_bit_cast(v16s, a.v), __builtin_bit_cast(v16s, b.v), c.v);
    return c;
}

/* ---- column reductions on the accumulator (over m, for each column n) ------------------------- */
R35A_DEV colv col_max(const acc &c) {
    float x = fmax(fmax(fmax(c.v[0], c.v[1]), fmax(c.v[2], c.v[3])), fmax(fmax(c.v[4], c.v[5]), fmax(c.v[6], c.v[7])));
    colv r;
    r.v[0] = fmax(x, lane_xor16(x));
    return r;
}
/* This lane's share of the column sum; col_sum_finish() adds the shares of a column together.
 * Keeping shares lets a running sum skip the cross-lane step until the end. */
R35A_DEV colv col_sum_share(const acc &c) {
    colv r;
    r.v[0] = ((c.v[0] + c.v[1]) + (c.v[2] + c.v[3])) + ((c.v[4] + c.v[5]) + (c.v[6] + c.v[7]));
    return r;
}
R35A_DEV colv col_sum_finish(colv share) {
    colv r;
    r.v[0] = share.v[0] + lane_xor16(share.v[0]);
    return r;
}

/* ---- accumulator as the B operand of the next product ------------------------------------------
 * Reinterprets C[m][n] as B[k = m][n], rounded to E (P^T of attention feeding O^T += V^T P^T).
 * Lane l holds C[2e + l/16][n]; B needs C[0..15][n] in both half-waves: pack own pairs, swap
 * half-waves (4 x v_permlanex16), interleave (8 x v_perm_b32). */
template <class E>
R35A_DEV ab b_from_acc(const acc &c) {
    const bool h = half_wave() != 0;
    const u32 sel_lo = h ? 0x01000504u : 0x05040100u;
    const u32 sel_hi = h ? 0x03020706u : 0x07060302u;
    ab b;
    for (int j = 0; j < 4; ++j) {
        u32 w = E::pack2(c.v[2 * j], c.v[2 * j + 1]);   /* half 0: C[4j], C[4j+2]; half 1: C[4j+1], C[4j+3] */
        u32 o = lane_xor16_u32(w);
        b.v[2 * j] = byte_perm(o, w, sel_lo);
        b.v[2 * j + 1] = byte_perm(o, w, sel_hi);
    }
    return b;
}

/* ---- accumulator storage in the native layout ---------------------------------------------------
 * A fragment occupies ACC_NATIVE_FLOATS floats (1 KiB), lane l's elements at [8l, 8l+8): two b128
 * accesses per lane, whole waves move contiguous 512-byte blocks. The layout is private to this
 * header; writer and reader must use the same fragment header. */
enum { ACC_NATIVE_FLOATS = 256 };
R35A_DEV void acc_store_global(float *p, const acc &c) {
    float *q = p + 8 * lane_id();
    v8u u = __builtin_bit_cast(v8u, c.v);
    store_b128(q, u.s0123);
    store_b128(q + 4, u.s4567);
}
R35A_DEV acc acc_load_global(const float *p) {
    const float *q = p + 8 * lane_id();
    u32x4 x = load_b128(q), y = load_b128(q + 4);
    acc c;
    c.v = __builtin_bit_cast(v8f, (v8u){x.x, x.y, x.z, x.w, y.x, y.y, y.z, y.w});
    return c;
}
R35A_DEV void acc_store_lds(float *lds, const acc &c) {
    u32x4 *q = (u32x4 *)(lds + 8 * lane_id());
    v8u u = __builtin_bit_cast(v8u, c.v);
    q[0] = u.s0123;
    q[1] = u.s4567;
}
R35A_DEV acc acc_load_lds(const float *lds) {
    const u32x4 *q = (const u32x4 *)(lds + 8 * lane_id());
    u32x4 x = q[0], y = q[1];
    acc c;
    c.v = __builtin_bit_cast(v8f, (v8u){x.x, x.y, x.z, x.w, y.x, y.y, y.z, y.w});
    return c;
}
/* The same for the columns marked ok[slot] only (others are not written, and read as zeros): partial
 * results of padding query rows never reach memory. Column 0 must be ok. */
R35A_DEV void acc_store_global_if(float *p, const acc &c, const bool (&ok)[NCOL]) {
    if (ok[0]) acc_store_global(p, c);
}
R35A_DEV acc acc_load_global_if(const float *p, const bool (&ok)[NCOL]) {
    /* Not-ok lanes read their half-wave's first lane's (always-ok column 0) elements instead of
     * branching: the same cache line, and no lane ever holds an unreadable address. */
    const float *q = p + 8 * (ok[0] ? lane_id() : (lane_id() & 16));
    u32x4 x = load_b128(q), y = load_b128(q + 4);
    acc c;
    c.v = __builtin_bit_cast(v8f, (v8u){x.x, x.y, x.z, x.w, y.x, y.y, y.z, y.w});
    if (!ok[0]) c = acc_zero();
    return c;
}
/* Column statistics, one float per column at p[n]: the owner lane of each column writes. */
R35A_DEV void colv_store(float *p, colv c, bool global) {
    if (col_owner(0)) {
        if (global) store_f32(p + acc_n_of_slot(0), c.v[0]);
        else p[acc_n_of_slot(0)] = c.v[0];
    }
}
R35A_DEV colv colv_load(const float *p, bool global) {
    colv c;
    c.v[0] = global ? load_f32(p + acc_n_of_slot(0)) : p[acc_n_of_slot(0)];
    return c;
}


/* ---- V tile -> V^T operands through LDS (decode's register pipeline, decode/kv_pipe_regs.h) ----------
 * Lane l holds row l % 16 of a 16 x DS tile in 16-byte chunks 2u + l / 16. The products reduce over
 * the rows (keys), so the tile is stored transposed, V^T[d][key] with 32-byte rows (8 ds_store_b16
 * per chunk), and each 16 x 16 block is read back as an A fragment (2 ds_load_b128). Kept over an
 * in-register transpose (pair exchange by DPP + v_perm_b32, then b32 stores) because LDS stores cost
 * no VALU cycles, which is what the cost model charges (kernels/README.md). */
template <int DS>
struct VT_BYTES {
    static constexpr int value = DS * 16 * 2;
};
template <int DS>
R35A_DEV void store_v_rows_lds(u16 *vt, const u32x4 (&v)[DS / 16]) {
    const int row = lane_id() & 15, half = lane_id() >> 4;
#pragma unroll
    for (int u = 0; u < DS / 16; ++u) {
        const u32x4 x = v[u];
        const int d0 = 8 * (2 * u + half);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            vt[(d0 + 2 * e) * 16 + row] = (u16)x[e];
            vt[(d0 + 2 * e + 1) * 16 + row] = (u16)(x[e] >> 16);
        }
    }
}
template <int DS>
R35A_DEV ab load_vt_lds(const u16 *vt, int c) { return load_vec16_lds(vt + 16 * c * 16, 16); }

} /* namespace frag */
} /* namespace r35a */

#endif /* R35A_FRAGMENT_GFX11_H */
