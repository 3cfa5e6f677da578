/*
 * decode/kv_pipe_regs.h - decode's KV tile pipeline with its stages in registers (frag::kv_pipe_regs).
 * Every fragment layer includes it after its own definitions: it is written with the layer's names
 * only (ab, load_vec16_global, and the V-tile primitives VT_BYTES / store_v_rows_lds / load_vt_lds
 * that say how V reaches the transposed operand). gfx11 (and its emulation on NVIDIA) always use
 * it; fragment_nv_mma.h also has a shared-memory pipeline (cp.async), and a variant runs this one
 * where its table row names pipe regs<S> (variants/<arch>.tsv).
 *
 * A tile is 16 rows (keys) x DS elements of K and of V, rows `ks` / `vs` BYTES apart in memory;
 * KV is the element format: the Q/O dtype E itself, or an 8-bit one (device.h), held in registers
 * as loaded (half the registers) and converted when used (kv8x2).
 *   K: the operand fragments of S^T = K Q^T straight from memory (load_vec16_global; on gfx11 both
 *      half-waves load the same rows, as WMMA's replication rule wants: the same cache lines, one
 *      instruction); 8-bit: the K8 policy's load / operand (k8_rows: the layer's load_k8_rows /
 *      k8_operand; frag_d4's k8_split: each half-wave loads and converts half of a row).
 *   V: its rows as loaded (lane l: row l % 16, 8-element chunks 2u + l / 16: 16-byte loads, 8-byte
 *      ones for 8-bit elements, converted to E right before the store below); the
 *      products reduce over keys, so prepare_v() writes the tile into the wave's LDS region in the
 *      layer's form (store_v_rows_lds: gfx11 transposes with 16-bit stores, NVIDIA stores rows for
 *      ldmatrix.trans) and v_operand() reads V^T fragments from it. Rows >= valid_rows and rows
 *      < first_row are zeroed there (keys no query reaches: the K/V slots past a sequence's end and
 *      keys before the window may hold NaN/Inf, and 0 * NaN would reach O).
 *
 * issue() writes registers: the loads stay in flight until the first use of the slot (the
 * compiler's wait counts them), so a caller that issues tile i + S - 1 before computing tile i keeps
 * S - 1 tiles of loads in flight across the products. Slots must be compile-time constants after
 * unrolling (register arrays).
 */
#ifndef R35A_FRAGMENT_KV_REGS_H
#define R35A_FRAGMENT_KV_REGS_H

namespace r35a {
namespace frag {

/* How a pipeline holds and converts 8-bit K: the layer's load_k8_rows / k8_operand (its K8_PERM k
 * order). A second fragment layer may bring its own (frag_d4::k8_split). */
struct k8_rows {
    typedef k8_raw raw;
    static constexpr bool PERM = K8_PERM;
    R35A_MEMBER static raw load(const void *base, u32 row_bytes) { return load_k8_rows(base, row_bytes); }
    template <class E, class KV>
    R35A_MEMBER static ab operand(const raw &x) { return k8_operand<E, KV>(x); }
};

template <int DS, int S, class E, class KV, class K8 = k8_rows>
struct kv_pipe_regs {
    static constexpr bool B8 = kv_is_8bit<KV>::value;
    static constexpr int EB = B8 ? 1 : 2;    /* bytes per element */
    typedef typename pv_elem<E, KV>::type VE;   /* V's element type once converted (device.h pv_elem) */
    /* (K's: device.h qk_elem, in k_operand) */
    static constexpr int NC = DS / 16;       /* 16-wide d chunks of a tile */
    static constexpr int VCH = DS / 16;      /* 8-element V pieces per lane (16 bytes, 8 for 8-bit) */
    static constexpr bool ISSUE_ALWAYS = true;   /* see tile_feed (decode.hip) */
    static constexpr int SHARERS = 1;            /* a wave's own stages (registers): never shared */
    static constexpr bool WAIT_FIRST = false;    /* issue tile i + S - 1, then wait for tile i */
    static constexpr bool K_PERM = B8 && K8::PERM, V_DPERM = false;
    static constexpr int LDS_PER_STAGE = 0;
    static constexpr int LDS_FIXED = VT_BYTES<DS>::value;
    static constexpr int LDS_BYTES = LDS_FIXED;
    static_assert(VCH * 32 * 8 == 16 * DS, "a V tile must split evenly over the lanes");
    /* registers per stage: K as operands (16-bit) or as the bytes of the layer's 8-bit form; V rows */
    typedef typename pick_type<B8, typename K8::raw, ab>::type kraw;
    typedef typename pick_type<B8, u32x2, u32x4>::type vraw;
    kraw k[S][NC];
    vraw v[S][VCH];
    int valid[S], first[S];
    u16 *vt;

    R35A_MEMBER explicit kv_pipe_regs(void *lds) : vt((u16 *)lds) {}
    /* k0, v0: the tile's first row (wave-uniform); rows ks / vs BYTES apart. */
    R35A_MEMBER void issue(int slot, const char *k0, const char *v0, i64 ks, i64 vs, int valid_rows, int first_row) {
#pragma unroll
        for (int c = 0; c < NC; ++c) {
            if constexpr (B8) k[slot][c] = K8::load(k0 + 16 * c, (u32)ks);
            else k[slot][c] = load_vec16_global_rows(k0 + 32 * c, (u32)ks);
        }
        /* lane l: row l % 16, pieces 2u + l / 16 of 8 elements */
        const u32 voff = (u32)((lane_id() & 15) * vs) + 8 * EB * (lane_id() >> 4);
#pragma unroll
        for (int u = 0; u < VCH; ++u) {
            if constexpr (B8) v[slot][u] = load_b64_off(v0, voff + 16 * u);
            else v[slot][u] = load_b128_off(v0, voff + 32 * u);
        }
        valid[slot] = valid_rows;
        first[slot] = first_row;
    }
    R35A_MEMBER void skip(int slot) {
        valid[slot] = 0;
        first[slot] = 0;
    }
    R35A_MEMBER void wait(int slot) { (void)slot; }
    R35A_MEMBER ab k_operand(int slot, int c) const {
        if constexpr (B8) return K8::template operand<typename qk_elem<E, KV>::type, KV>(k[slot][c]);
        else return k[slot][c];
    }
    R35A_MEMBER void prepare_v(int slot) {
        if constexpr (B8) {
            u32x4 rows[VCH];
            bool fast = false;   /* the fast conversion where the format has one (device.h kv8x2_fast) */
            if constexpr (kv8_fast_path<VE, KV>::value) {
                u32 codes = 0u;   /* an fp8 NaN code anywhere in the wave's V tile: every lane converts exactly */
#pragma unroll
                for (int u = 0; u < VCH; ++u) codes |= kv8_nan_codes(v[slot][u][0]) | kv8_nan_codes(v[slot][u][1]);
                fast = kv8_wave_fast(codes);
            }
            if (fast) {
#pragma unroll
                for (int u = 0; u < VCH; ++u) rows[u] = kv8x8_fast<VE, KV>(v[slot][u]);
            } else {
#pragma unroll
                for (int u = 0; u < VCH; ++u) rows[u] = kv8x8<VE, KV>(v[slot][u]);
            }
            store_v_rows_lds<DS>(vt, rows);
        } else {
            store_v_rows_lds<DS>(vt, v[slot]);
        }
        if (valid[slot] < 16 || first[slot] > 0) {   /* uniform: a sequence's first or last tile only.
                                                        Stores, so no select on full tiles */
            if ((lane_id() & 15) >= valid[slot] || (lane_id() & 15) < first[slot]) {
                u32x4 zero[VCH];
#pragma unroll
                for (int u = 0; u < VCH; ++u) zero[u] = u32x4{0u, 0u, 0u, 0u};
                store_v_rows_lds<DS>(vt, zero);   /* the same lane's own rows: ordered after the first store */
            }
        }
        wave_sync();   /* the wave's lanes read each other's stores */
    }
    R35A_MEMBER ab v_operand(int slot, int c) const {
        (void)slot;
        return load_vt_lds<DS>(vt, c);
    }
    /* The head element of O^T row m of a chunk: in order (V^T goes through the layer's own transpose). */
    R35A_MEMBER static int v_d_of_m(int m) { return m; }
    R35A_MEMBER void release(int slot) {
        (void)slot;
        wave_sync();   /* V read before the next prepare_v() writes the region */
    }
    R35A_MEMBER void drain() {}
};

} /* namespace frag */
} /* namespace r35a */

#endif /* R35A_FRAGMENT_KV_REGS_H */
