/*
 * fragment_nv_gfx11emu.h - the gfx11 wave32 WMMA 16x16x16 fragment layer, emulated exactly on an
 * NVIDIA warp (selected by fragment.h when R35A_FRAGMENT_EMULATE_GFX11=1).
 *
 * Same data layouts as fragment_gfx11.h, lane for lane, so kernels run on NVIDIA hardware with the
 * register contents they have on gfx11:
 *   - A/B: lane l holds vector l % 16, its 16 k elements in 8 words, pairs (2v, 2v+1) in word v,
 *     low half first. Lanes 16-31 must hold the same operands as lanes 0-15.
 *   - C (f32): lane l holds column n = l % 16 and rows m = 2e + l / 16, e = 0..7.
 * The product is computed by shuffles: a lane of half-wave h reads the A rows it needs from the
 * lanes of ITS OWN half-wave and uses its own copy of the B column, so an operand that is not
 * replicated across the half-waves (as WMMA requires) gives wrong results in the upper half's
 * outputs instead of passing unnoticed. Slow by design: a layout check under real concurrency.
 * Everything but the product is the gfx11 code with device.h's portable cross-lane operations.
 */
#ifndef R35A_FRAGMENT_NV_GFX11EMU_H
#define R35A_FRAGMENT_NV_GFX11EMU_H

#include "common/device.h"

namespace r35a {
namespace frag {

enum { ACC_ELEMS = 8, NCOL = 1, TILE_ROWS = 16 };   /* TILE_ROWS: query rows per row tile (an accumulator's n) */

struct ab {
    u32 v[8];
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
    for (int i = 0; i < 8; ++i) a.v[i] = 0u;
    return a;
}
R35A_DEV colv colv_fill(float x) {
    colv c;
    for (int i = 0; i < NCOL; ++i) c.v[i] = x;
    return c;
}

/* ---- coordinates (gfx11's) ---- */
R35A_DEV int half_wave() { return lane_id() >> 4; }
R35A_DEV int acc_m(int e) { return 2 * e + half_wave(); }
R35A_DEV int acc_slot(int e) { (void)e; return 0; }
R35A_DEV int acc_n_of_slot(int slot) { (void)slot; return lane_id() & 15; }
R35A_DEV int acc_n(int e) { return acc_n_of_slot(acc_slot(e)); }
R35A_DEV bool col_owner(int slot) { (void)slot; return lane_id() < 16; }

/* ---- operand loads ---- */
R35A_DEV void set8(ab &a, u32x4 x, u32x4 y) {
    a.v[0] = x.x; a.v[1] = x.y; a.v[2] = x.z; a.v[3] = x.w;
    a.v[4] = y.x; a.v[5] = y.y; a.v[6] = y.z; a.v[7] = y.w;
}
template <class F>
R35A_DEV ab load_vec16_global(F ptr_of) {
    const void *p = ptr_of(lane_id() & 15);
    ab a;
    set8(a, load_b128(p), load_b128(byte_offset(p, 16)));
    return a;
}
R35A_DEV ab load_vec16_global_rows(const void *base, u32 row_bytes) {
    const u32 off = (u32)(lane_id() & 15) * row_bytes;
    ab a;
    set8(a, load_b128_off(base, off), load_b128_off(base, off + 16));
    return a;
}
template <bool K8_ORDER = false, class F, class OK>
R35A_DEV ab load_vec16_global_u16(F ptr_of, OK ok) {
    (void)K8_ORDER;   /* gfx11's natural k order for 8-bit K operands too */
    const int i = lane_id() & 15;
    const u16 *p = (const u16 *)ptr_of(i);
    const bool keep = ok(i);
    ab a;
#pragma unroll
    for (int v = 0; v < 8; ++v) {
        const u32 x = (u32)load_u16(p + 2 * v) | ((u32)load_u16(p + 2 * v + 1) << 16);
        a.v[v] = keep ? x : 0u;
    }
    return a;
}
R35A_DEV ab load_vec16_lds(const u16 *lds, int ld) {
    const u32x4 *p = (const u32x4 *)(lds + (lane_id() & 15) * ld);
    ab a;
    set8(a, p[0], p[1]);
    return a;
}
/* 8-bit K operands: gfx11's (fragment_gfx11.h), lane for lane. */
enum { K8_PERM = 0 };
typedef u32x4 k8_raw;
R35A_DEV k8_raw load_k8_rows(const void *base, u32 row_bytes) {
    return load_b128_off(base, (u32)(lane_id() & 15) * row_bytes);
}
template <class E, class KV>
R35A_DEV ab k8_operand(const k8_raw &x) {
    ab a;
    a.v[0] = kv8x2<E, KV, 0, 1>(x.x); a.v[1] = kv8x2<E, KV, 2, 3>(x.x);
    a.v[2] = kv8x2<E, KV, 0, 1>(x.y); a.v[3] = kv8x2<E, KV, 2, 3>(x.y);
    a.v[4] = kv8x2<E, KV, 0, 1>(x.z); a.v[5] = kv8x2<E, KV, 2, 3>(x.z);
    a.v[6] = kv8x2<E, KV, 0, 1>(x.w); a.v[7] = kv8x2<E, KV, 2, 3>(x.w);
    return a;
}
R35A_DEV int k8_q_word_pos(int w) { return w; }
template <class F>
R35A_DEV void store_vec16_global(const ab &a, int n, F ptr_of) {
    const int h = half_wave();
    u16 *p = (u16 *)ptr_of(lane_id() & 15);
    if (p && 8 * h < n) {
        const u32x4 lo = {a.v[0], a.v[1], a.v[2], a.v[3]}, hi = {a.v[4], a.v[5], a.v[6], a.v[7]};
        store_b128(p + 8 * h, h ? hi : lo);
    }
}
R35A_DEV void pin(ab &a) {
#pragma unroll
    for (int i = 0; i < 8; ++i) opaque(a.v[i]);
}

/* ---- the product: C[m][n] += sum_k A[m][k] B[k][n], m = 2e + h, n = lane % 16 ---- */
template <class E>
R35A_DEV acc mma(ab a, ab b, acc c) {
    const int h = half_wave();
    float bf[16];
#pragma unroll
    for (int w = 0; w < 8; ++w) {               /* this lane's own copy of column n */
        bf[2 * w] = E::to_f32((u16)b.v[w]);
        bf[2 * w + 1] = E::to_f32((u16)(b.v[w] >> 16));
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        const int src = 2 * e + h + 16 * h;     /* row m = 2e + h, from this half-wave's copy */
        float s = 0.f;
#pragma unroll
        for (int w = 0; w < 8; ++w) {
            const u32 x = __shfl_sync(0xffffffffu, a.v[w], src);
            s = fmaf(E::to_f32((u16)x), bf[2 * w], s);
            s = fmaf(E::to_f32((u16)(x >> 16)), bf[2 * w + 1], s);
        }
        c.v[e] += s;
    }
    return c;
}

/* ---- column reductions ---- */
R35A_DEV colv col_max(const acc &c) {
    float x = fmax(fmax(fmax(c.v[0], c.v[1]), fmax(c.v[2], c.v[3])), fmax(fmax(c.v[4], c.v[5]), fmax(c.v[6], c.v[7])));
    colv r;
    r.v[0] = fmax(x, lane_xor16(x));
    return r;
}
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

/* ---- accumulator as the B operand of the next product (gfx11's shuffle, exactly) ---- */
template <class E>
R35A_DEV ab b_from_acc(const acc &c) {
    const bool h = half_wave() != 0;
    const u32 sel_lo = h ? 0x01000504u : 0x05040100u;
    const u32 sel_hi = h ? 0x03020706u : 0x07060302u;
    ab b;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        u32 w = E::pack2(c.v[2 * j], c.v[2 * j + 1]);
        u32 o = lane_xor16_u32(w);
        b.v[2 * j] = byte_perm(o, w, sel_lo);
        b.v[2 * j + 1] = byte_perm(o, w, sel_hi);
    }
    return b;
}

/* ---- native-layout storage: lane l's 8 elements at [8l, 8l + 8) ---- */
enum { ACC_NATIVE_FLOATS = 256 };
R35A_DEV u32x4 word4(const acc &c, int i) {
    const u32x4 x = {__float_as_uint(c.v[4 * i]), __float_as_uint(c.v[4 * i + 1]), __float_as_uint(c.v[4 * i + 2]),
                     __float_as_uint(c.v[4 * i + 3])};
    return x;
}
R35A_DEV acc from_words(u32x4 x, u32x4 y) {
    acc c;
    c.v[0] = __uint_as_float(x.x); c.v[1] = __uint_as_float(x.y); c.v[2] = __uint_as_float(x.z); c.v[3] = __uint_as_float(x.w);
    c.v[4] = __uint_as_float(y.x); c.v[5] = __uint_as_float(y.y); c.v[6] = __uint_as_float(y.z); c.v[7] = __uint_as_float(y.w);
    return c;
}
R35A_DEV void acc_store_global(float *p, const acc &c) {
    float *q = p + 8 * lane_id();
    store_b128(q, word4(c, 0));
    store_b128(q + 4, word4(c, 1));
}
R35A_DEV acc acc_load_global(const float *p) {
    const float *q = p + 8 * lane_id();
    return from_words(load_b128(q), load_b128(q + 4));
}
R35A_DEV void acc_store_lds(float *lds, const acc &c) {
    u32x4 *q = (u32x4 *)(lds + 8 * lane_id());
    q[0] = word4(c, 0);
    q[1] = word4(c, 1);
}
R35A_DEV acc acc_load_lds(const float *lds) {
    const u32x4 *q = (const u32x4 *)(lds + 8 * lane_id());
    return from_words(q[0], q[1]);
}
R35A_DEV void acc_store_global_if(float *p, const acc &c, const bool (&ok)[NCOL]) {
    if (ok[0]) acc_store_global(p, c);
}
R35A_DEV acc acc_load_global_if(const float *p, const bool (&ok)[NCOL]) {
    const float *q = p + 8 * (ok[0] ? lane_id() : (lane_id() & 16));
    acc c = from_words(load_b128(q), load_b128(q + 4));
    if (!ok[0]) c = acc_zero();
    return c;
}
R35A_DEV void colv_store(float *p, colv c, bool global) {
    (void)global;
    if (col_owner(0)) p[acc_n_of_slot(0)] = c.v[0];
}
R35A_DEV colv colv_load(const float *p, bool global) {
    (void)global;
    colv c;
    c.v[0] = p[acc_n_of_slot(0)];
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

#endif /* R35A_FRAGMENT_NV_GFX11EMU_H */
