/*
 * decode/rows4_gfx11.h - decode's second gfx11 fragment layer, for row groups of at most 4 query rows
 * (variants with rows 4): namespace r35a::frag_d4, the names of namespace frag with 4-row tiles whose
 * products are v_dot2_f32_f16 / v_dot2_f32_bf16 instead of WMMA. Included by fragment.h on gfx11;
 * decode.hip instantiates its body on this layer too (layer_d4, decode/layer.h).
 *
 * Why. A 16 x 16 x 16 WMMA costs the SIMD 32 cycles (the emulator's cost model; 60 % of the 16-bit
 * decode kernel's cycles). A kv head with G x M <= 4 rows (G 4 M 1: most GQA models' decode) fills 4
 * of its 16 columns: three quarters of every product, exponent and accumulator are padding. Here the
 * same products on the 4 live columns are 16 v_dot2 per 16 x 16 operand (half the cycles), and the
 * softmax works on 2 accumulator elements per lane instead of 8. The operands and the KV pipeline
 * (loads, 8-bit conversion, V^T through LDS) are namespace frag's, unchanged.
 *
 * Layout. Lane l is (m, h) = (l % 16, l / 16).
 *   A operand `ab` (K, V^T): namespace frag's, vector m in lanes m and m + 16 (8 words of pairs).
 *   B operand `bop` (Q^T, P^T: vector = query row 0-3): lane (m, h) holds vectors 2h and 2h + 1 whole,
 *     vector 2h + i in words 8i .. 8i + 7 (16 words; every lane of a half-wave alike).
 *   accumulator `acc` (2 floats): element i is C[m][2h + i]. NCOL = 2 column slots (rows 2h, 2h + 1),
 *     a column spread over the 16 lanes of its half-wave (reduced with 4 DPP row_xmask steps).
 *   product: C[m][2h + i] += sum over the 8 words of A's vector m . B's vector 2h + i: 2 x 8 dot2.
 *   P^T as the B operand of the next product (b_from_acc): lane (m, h) holds P[key m][rows 2h, 2h + 1]
 *     and needs keys 0-15 of both rows: pairs packed with the neighbour key (row_xmask 1), then
 *     broadcast from lane 2j of the half-wave (DPP row_share) for key pair j: 2 + 2 + 16 instructions.
 *   native storage: lane l's 2 floats at [2l, 2l + 2).
 * Products accumulate in f32 like WMMA's; their summation order differs (8 dot2 in sequence).
 *
 * Everything not defined here (A operand loads, 8-bit conversions, kv_pipe_regs, pin) is namespace
 * frag's, reached through the using-directive.
 */
#ifndef R35A_FRAGMENT_GFX11_D4_H
#define R35A_FRAGMENT_GFX11_D4_H

#define R35A_FRAG_HAS_D4 1

namespace r35a {
namespace frag_d4 {
using namespace frag;

enum { ACC_ELEMS = 2, NCOL = 2, TILE_ROWS = 4, ACC_NATIVE_FLOATS = 64 };

struct acc {
    float v[ACC_ELEMS];
};
struct colv {
    float v[NCOL];
};
/* B operand: vectors 2h and 2h + 1 of this lane's half-wave */
struct bop {
    u32 v[16];
};

R35A_DEV acc acc_zero() {
    acc c;
    c.v[0] = c.v[1] = 0.f;
    return c;
}
R35A_DEV colv colv_fill(float x) {
    colv c;
    c.v[0] = c.v[1] = x;
    return c;
}

/* ---- coordinates ---- */
R35A_DEV int acc_m(int e) { (void)e; return lane_id() & 15; }
R35A_DEV int acc_slot(int e) { return e; }
R35A_DEV int acc_n_of_slot(int slot) { return 2 * half_wave() + slot; }
R35A_DEV int acc_n(int e) { return acc_n_of_slot(acc_slot(e)); }
/* The query row (vector) word j of a B operand (bop) belongs to: words 8i .. 8i + 7 hold row 2h + i. */
R35A_DEV int bop_row_of_word(int j) { return 2 * half_wave() + (j >> 3); }
/* one lane per half-wave stores its two columns */
R35A_DEV bool col_owner(int slot) { (void)slot; return (lane_id() & 15) == 0; }

/* ---- B operand loads (Q^T): namespace frag's loads, for this lane's two vectors. K8_ORDER: the k
 * order of k8_split's 8-bit K operands (half-wave 1: elements 8-15 in words 0-3, 0-7 in words 4-7). ---- */
template <bool K8_ORDER = false>
R35A_DEV int bop_source_word(int v) { return K8_ORDER && half_wave() ? (v + 4) & 7 : v; }
template <bool K8_ORDER = false, class F, class OK>
R35A_DEV bop load_bop_global_u16(F ptr_of, OK ok) {
    bop b;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int n = 2 * half_wave() + i;
        const u16 *p = (const u16 *)ptr_of(n);
        const bool keep = ok(n);
#pragma unroll
        for (int v = 0; v < 8; ++v) {
            const int w = bop_source_word<K8_ORDER>(v);
            const u32 x = (u32)load_u16(p + 2 * w) | ((u32)load_u16(p + 2 * w + 1) << 16);
            b.v[8 * i + v] = keep ? x : 0u;
        }
    }
    return b;
}
/* Vector n at lds + n * ld (ld in elements, 8-element aligned, staged in the natural k order):
 * four ds_load_b128 per lane. */
template <bool K8_ORDER = false>
R35A_DEV bop load_bop_lds(const u16 *lds, int ld) {
    const int first = K8_ORDER ? half_wave() : 0;   /* the 16-byte half of a vector loaded into words 0-3 */
    bop b;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const u32x4 *p = (const u32x4 *)(lds + (2 * half_wave() + i) * ld);
        const u32x4 x = p[first], y = p[first ^ 1];
        b.v[8 * i + 0] = x.x, b.v[8 * i + 1] = x.y, b.v[8 * i + 2] = x.z, b.v[8 * i + 3] = x.w;
        b.v[8 * i + 4] = y.x, b.v[8 * i + 5] = y.y, b.v[8 * i + 6] = y.z, b.v[8 * i + 7] = y.w;
    }
    return b;
}

/* ---- 8-bit K: each half-wave loads and converts half of its key's 16 bytes ----
 * namespace frag's k8_rows has both half-waves load and convert the same 16 bytes (WMMA reads its
 * operands from both). The products here read each lane's own registers only, so half-wave h loads
 * bytes 8h .. 8h + 7 (one global_load_b64), converts those 4 pairs and takes the other 4 from lane
 * l ^ 16 (v_permlanex16): half the conversions, half the registers per stage. The operand's k order
 * is then the lane's own elements first (PERM: Q^T's words follow it, bop_source_word). */
struct k8_split {
    typedef u32x2 raw;
    static constexpr bool PERM = true;
    R35A_MEMBER static raw load(const void *base, u32 row_bytes) {
        return load_b64_off(base, (u32)(lane_id() & 15) * row_bytes + 8u * (u32)half_wave());
    }
    template <class E, class KV>
    R35A_MEMBER static ab operand(const raw &x) {
        u32x4 own;
        if constexpr (kv8_fast_path<E, KV>::value) {
            /* no NaN code anywhere in the wave's chunk (uniform): the fast conversion (device.h) */
            if (kv8_wave_fast(kv8_nan_codes(x[0]) | kv8_nan_codes(x[1]))) own = kv8x8_fast<E, KV>(x);
            else own = kv8x8<E, KV>(x);
        } else {
            own = kv8x8<E, KV>(x);
        }
        ab a;
        a.v = (v8u){own.x, own.y, own.z, own.w, lane_xor16_u32(own.x), lane_xor16_u32(own.y), lane_xor16_u32(own.z),
                    lane_xor16_u32(own.w)};
        return a;
    }
};
/* decode's register pipeline (namespace frag's) with the split 8-bit K */
template <int DS, int S, class E, class KV>
using kv_pipe_regs = frag::kv_pipe_regs<DS, S, E, KV, k8_split>;

/* ---- the product ---- */
template <class E>
R35A_DEV float dot2(u32 a, u32 b, float c);
template <>
__device__ inline __attribute__((always_inline)) float dot2<f16_t>(u32 a, u32 b, float c) {
    typedef _Float16 h2 __attribute__((ext_vector_type(2)));
    return __builtin_amdgcn_fdot2(__builtin_bit_cast(h2, b), __builtin_bit_cast(h2, a), c, false);
}
template <>
__device__ inline __attribute__((always_inline)) float dot2<bf16_t>(u32 a, u32 b, float c) {
    typedef short s2 __attribute__((ext_vector_type(2)));
    return __builtin_amdgcn_fdot2_f32_bf16(__builtin_bit_cast(s2, b), __builtin_bit_cast(s2, a), c, false);
}
template <class E>
R35A_DEV acc mma(const ab &a, const bop &b, acc c) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        float x = c.v[i];
#pragma unroll
        for (int v = 0; v < 8; ++v) x = dot2<E>(a.v[v], b.v[8 * i + v], x);
        c.v[i] = x;
    }
    return c;
}

/* ---- column reductions: a column is one slot of the 16 lanes of a half-wave ---- */
R35A_DEV float row16_max(float x) {
    x = fmax(x, lane_xor_row<1>(x));
    x = fmax(x, lane_xor_row<2>(x));
    x = fmax(x, lane_xor_row<4>(x));
    return fmax(x, lane_xor_row<8>(x));
}
R35A_DEV float row16_sum(float x) {
    x += lane_xor_row<1>(x);
    x += lane_xor_row<2>(x);
    x += lane_xor_row<4>(x);
    return x + lane_xor_row<8>(x);
}
R35A_DEV colv col_max(const acc &c) {
    colv r;
    r.v[0] = row16_max(c.v[0]);
    r.v[1] = row16_max(c.v[1]);
    return r;
}
/* a lane's share of its column sums is its own element; col_sum_finish adds a half-wave's shares */
R35A_DEV colv col_sum_share(const acc &c) {
    colv r;
    r.v[0] = c.v[0];
    r.v[1] = c.v[1];
    return r;
}
R35A_DEV colv col_sum_finish(colv share) {
    colv r;
    r.v[0] = row16_sum(share.v[0]);
    r.v[1] = row16_sum(share.v[1]);
    return r;
}

/* ---- accumulator as the B operand: C[m][n] -> B[k = m][n] (see the layout above) ---- */
/* Lane `j` (0-15) of this lane's half-wave's value of x (DPP row_share: a broadcast within each row of 16). */
template <int J>
R35A_DEV u32 row_share(u32 x) {
    return (u32)__builtin_amdgcn_update_dpp(0, (int)x, 0x150 + J, 0xf, 0xf, false);
}
template <int J>
R35A_DEV void b_share_pairs(bop &b, const u32 (&x)[2]) {   /* key pair J (and the next ones) of both rows */
    b.v[J] = row_share<2 * J>(x[0]);
    b.v[8 + J] = row_share<2 * J>(x[1]);
    if constexpr (J + 1 < 8) b_share_pairs<J + 1>(b, x);
}
template <class E>
R35A_DEV bop b_from_acc(const acc &c) {
    /* even lanes m: keys m, m + 1 of rows 2h, 2h + 1 (odd lanes: pairs nobody reads) */
    u32 x[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) x[i] = E::pack2(c.v[i], lane_xor_row<1>(c.v[i]));
    bop b;
    b_share_pairs<0>(b, x);
    return b;
}

/* ---- native-layout storage (writer and reader use this layer) ---- */
R35A_DEV void acc_store_lds(float *lds, const acc &c) {
    float *q = lds + 2 * lane_id();
    q[0] = c.v[0];
    q[1] = c.v[1];
}
R35A_DEV acc acc_load_lds(const float *lds) {
    const float *q = lds + 2 * lane_id();
    acc c;
    c.v[0] = q[0];
    c.v[1] = q[1];
    return c;
}
/* Column statistics, one float per column at p[n]: lane 0 of each half-wave writes its two. */
R35A_DEV void colv_store(float *p, colv c, bool global) {
    if (col_owner(0)) {
#pragma unroll
        for (int s = 0; s < NCOL; ++s) {
            if (global) store_f32(p + acc_n_of_slot(s), c.v[s]);
            else p[acc_n_of_slot(s)] = c.v[s];
        }
    }
}
R35A_DEV colv colv_load(const float *p, bool global) {
    colv c;
#pragma unroll
    for (int s = 0; s < NCOL; ++s) c.v[s] = global ? load_f32(p + acc_n_of_slot(s)) : p[acc_n_of_slot(s)];
    return c;
}

} /* namespace frag_d4 */
} /* namespace r35a */

#endif /* R35A_FRAGMENT_GFX11_D4_H */
