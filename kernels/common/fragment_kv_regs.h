/*
 * fragment_kv_regs.h - decode's KV tile pipeline with its stages in registers (frag::kv_pipe_regs).
 * Every fragment layer includes it after its own definitions: it is written with the layer's names
 * only (ab, load_vec16_global, and the V-tile primitives VT_BYTES / store_v_rows_lds / load_vt_lds
 * that say how V reaches the transposed operand). gfx11 (and its emulation on NVIDIA) always use
 * it; fragment_nv_mma.h also has a shared-memory pipeline (cp.async) and uses this one only where
 * that does not fit (kernels/decode.hip decides).
 *
 * A tile is 16 rows (keys) x DS elements of K and of V, rows `ks` / `vs` elements apart in memory.
 *   K: the operand fragments of S^T = K Q^T straight from memory (load_vec16_global; on gfx11 both
 *      half-waves load the same rows, as WMMA's replication rule wants: the same cache lines, one
 *      instruction).
 *   V: its rows as loaded (lane l: row l % 16, 8-element chunks 2u + l / 16: 16-byte loads); the
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

template <int DS, int S>
struct kv_pipe_regs {
    static constexpr int NC = DS / 16;       /* 16-wide d chunks of a tile */
    static constexpr int VCH = DS / 16;      /* 16-byte V chunks per lane */
    static constexpr bool ISSUE_ALWAYS = true;   /* see tile_feed (decode.hip) */
    static constexpr int LDS_PER_STAGE = 0;
    static constexpr int LDS_FIXED = VT_BYTES<DS>::value;
    static constexpr int LDS_BYTES = LDS_FIXED;
    static_assert(VCH * 32 * 8 == 16 * DS, "a V tile must split evenly over the lanes");
    ab k[S][NC];
    u32x4 v[S][VCH];
    int valid[S], first[S];
    u16 *vt;

    R35A_MEMBER explicit kv_pipe_regs(void *lds) : vt((u16 *)lds) {}
    /* k0, v0: the tile's first row (wave-uniform); rows ks / vs elements apart. */
    R35A_MEMBER void issue(int slot, const u16 *k0, const u16 *v0, i64 ks, i64 vs, int valid_rows, int first_row) {
#pragma unroll
        for (int c = 0; c < NC; ++c) k[slot][c] = load_vec16_global_rows(k0 + 16 * c, (u32)(2 * ks));
        const u32 voff = (u32)((lane_id() & 15) * 2 * vs) + 16 * (lane_id() >> 4);
#pragma unroll
        for (int u = 0; u < VCH; ++u) v[slot][u] = load_b128_off(v0, voff + 32 * u);
        valid[slot] = valid_rows;
        first[slot] = first_row;
    }
    R35A_MEMBER void skip(int slot) {
        valid[slot] = 0;
        first[slot] = 0;
    }
    R35A_MEMBER void wait(int slot) { (void)slot; }
    R35A_MEMBER ab k_operand(int slot, int c) const { return k[slot][c]; }
    R35A_MEMBER void prepare_v(int slot) {
        store_v_rows_lds<DS>(vt, v[slot]);
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
    R35A_MEMBER void release(int slot) {
        (void)slot;
        wave_sync();   /* V read before the next prepare_v() writes the region */
    }
    R35A_MEMBER void drain() {}
};

} /* namespace frag */
} /* namespace r35a */

#endif /* R35A_FRAGMENT_KV_REGS_H */
