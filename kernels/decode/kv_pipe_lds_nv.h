/*
 * kv_pipe_lds_nv.h - decode's KV tile pipeline in shared memory (NVIDIA native layer: cp.async
 * stages, ldmatrix reads). Included by decode.hip after kernels/target/fragment_nv_mma.h.
 */
#ifndef R35A_DECODE_KV_PIPE_LDS_NV_H
#define R35A_DECODE_KV_PIPE_LDS_NV_H

namespace r35a {
namespace frag {

/* ---- decode's KV tile pipeline: S shared-memory stages filled by cp.async ------------------------
 * A tile is 16 rows (keys) x DS elements of K and of V (KV: the Q/O dtype E, or an 8-bit format of
 * device.h), rows `ks` / `vs` BYTES apart in memory. issue() starts the copies of one tile into stage
 * `slot` (rows >= valid_rows and rows < first_row are zero-filled and not read: keys no query
 * reaches, the K/V slots past a sequence's end and keys before the window, may hold NaN/Inf, and
 * 0 * NaN would reach O), one commit group per issue; wait() makes the tile of `slot` visible to the
 * whole wave (at most S - 1 younger groups stay in flight: the caller issues tile i + S - 1 before
 * waiting for tile i). Slots are chosen by the caller (compile-time after unrolling); a stage is
 * private to its wave.
 * 16-bit: K operands by ldmatrix, V operands (V^T: the products reduce over keys) by ldmatrix.trans,
 * straight from the row-major staged tile; rows padded by 16 bytes, so the 8 rows of an ldmatrix
 * block fall in 8 different bank groups.
 * 8-bit: the same copies move half the bytes; ldmatrix.x2 reads byte pairs as 16-bit elements and
 * kv8x2 converts in registers. K comes in the permuted k order of K8_PERM. V^T by ldmatrix.x2.trans
 * gives lane (g, t) the bytes of d = 2g and 2g + 1 of keys 2t, 2t + 1 (and + 8): its vectors are d
 * in the order of v8_d_of_m (V_DPERM: O^T row m holds d = v_d_of_m(m) of each 16-wide chunk). Rows
 * padded to an odd number of 16-byte bank groups.
 * Shared stages (RW > 1, the row waves of decode.hip): RW waves that compute different query rows on
 * the same keys use one set of stages. Each copies 1 / RW of every tile (its own rows of the tile:
 * `sharer`), and wait() meets the other sharers at a named barrier (`barrier`: 1..15, 32 x RW
 * threads) after its own copies land, so the tile is whole and every sharer is done with the
 * previous tile. The caller therefore waits before it issues (WAIT_FIRST): the slot a step refills
 * is the one all sharers read in the step before; S - 1 tiles are in flight during the products,
 * as in the private form. Halves (RW = 2) the copies and the L2 reads of two row groups. */
#define R35A_FRAG_HAS_KV_PIPE_LDS 1

/* O^T row m of a chunk holds element d = v8_d_of_m(m) when V^T comes from an 8-bit staged tile. */
R35A_DEV int v8_d_of_m(int m) { return m < 8 ? 2 * m : 2 * (m - 8) + 1; }

template <int DS, int S, class E, class KV, int RW = 1>
struct kv_pipe_lds {
    static constexpr int SHARERS = RW;
    static constexpr bool WAIT_FIRST = RW > 1;   /* see above: wait for tile i, then issue i + S - 1 */
    static constexpr bool B8 = kv_is_8bit<KV>::value;
    static constexpr int EB = B8 ? 1 : 2;                   /* bytes per element */
    static constexpr int RB = DS * EB;                      /* bytes of one row */
    static constexpr int ROW = (RB / 16) % 2 == 0 ? RB + 16 : RB + 32;   /* staged row pitch, bytes */
    static constexpr int TILE = 16 * ROW;                   /* bytes of one staged K or V tile */
    static constexpr bool ISSUE_ALWAYS = false;   /* see tile_feed (decode.hip) */
    static constexpr bool K_PERM = B8 && K8_PERM, V_DPERM = B8;
    static constexpr int LDS_PER_STAGE = 2 * TILE;
    static constexpr int LDS_FIXED = 0;
    static constexpr int LDS_BYTES = S * LDS_PER_STAGE;
    static constexpr int CPR = RB / 16;                     /* 16-byte chunks per row */
    static_assert(RB % 16 == 0, "whole 16-byte chunks per row");
    /* Which chunks a lane copies. Copy j of a lane is row row_of_copy(j) + row_lane(), chunk
     * chunk_of_copy(j) + chunk_lane() of the tile: the lane's part is fixed, the copy's part a
     * compile-time multiple of the row stride (global) and an immediate offset (shared), so a copy
     * costs one 64-bit add, not the row/chunk arithmetic and 64-bit multiplies of a per-copy formula
     * (those were ~180 of the D = 128 kernel's ~450 instructions per 16-key tile, sm_90 SASS). Rows of
     * at most 32 chunks: RPJ = 32 / CPR whole rows per copy (lanes past RPJ * CPR idle when CPR does
     * not divide 32); wider rows: JPR = CPR / 32 copies per row. */
    static_assert(CPR <= 32 || CPR % 32 == 0, "a row is at most 32 chunks or a multiple of 32");
    static constexpr int RPJ = CPR <= 32 ? 32 / CPR : 1;     /* rows per copy */
    static constexpr int JPR = CPR <= 32 ? 1 : CPR / 32;     /* copies per row */
    static constexpr int ACTIVE = CPR <= 32 ? RPJ * CPR : 32;   /* lanes with a chunk */
    static constexpr int CP_TILE = CPR <= 32 ? (16 + RPJ - 1) / RPJ : 16 * JPR;   /* copies per lane and tile */
    static constexpr int CP = CP_TILE / RW;   /* ... of one sharer: copies CP x sharer .. CP x sharer + CP - 1 */
    static_assert(CP_TILE % RW == 0 && (CPR <= 32 || CP % JPR == 0), "a tile's copies split evenly over the sharers");
    /* a sharer's first row: its copies are the tile's, CP x sharer on, as whole rows */
    static constexpr int ROWS_PER_SHARER = CPR <= 32 ? RPJ * CP : CP / JPR;
    static constexpr bool ALL_LANES = ACTIVE == 32 && 16 % RPJ == 0;   /* every copy of every lane is a chunk */
    unsigned char *base;
    int row0, barrier;   /* this sharer's first row of a tile; its named barrier (RW > 1) */

    R35A_MEMBER explicit kv_pipe_lds(void *lds, int sharer = 0, int barrier_id = 0)
        : base((unsigned char *)lds), row0(sharer * ROWS_PER_SHARER), barrier(barrier_id) {}
    R35A_MEMBER int row_lane() const { return (CPR <= 32 ? lane_id() / CPR : 0) + row0; }
    R35A_MEMBER static int chunk_lane() { return CPR <= 32 ? lane_id() % CPR : lane_id(); }
    R35A_MEMBER static constexpr int row_of_copy(int j) { return CPR <= 32 ? RPJ * j : j / JPR; }
    R35A_MEMBER static constexpr int chunk_of_copy(int j) { return CPR <= 32 ? 0 : 32 * (j % JPR); }
    /* Copy j of the lane's K and V chunks (sk: the lane's chunk of the stage's K tile; kl, vl: its
     * chunk of the tile's first row in memory). A lane without a chunk in copy j (ALL_LANES false:
     * rows past the tile, lanes past ACTIVE) issues nothing: a zero-filling copy there would land on
     * another lane's chunk. fill false: the chunk is zero-filled and memory not read (src-size 0);
     * ALWAYS: every chunk of every lane is read (the plain form, no src-size operand). */
    R35A_MEMBER static bool lane_has(int j, int rl) { return ALL_LANES || ((ACTIVE == 32 || lane_id() < ACTIVE) && row_of_copy(j) + rl < 16); }
    template <bool ALWAYS>
    R35A_MEMBER static void copy_pair(u32 sk, const char *kl, const char *vl, i64 ks, i64 vs, int j, bool fill) {
        const int soff = row_of_copy(j) * ROW + 16 * chunk_of_copy(j);
        const char *kg = kl + (i64)row_of_copy(j) * ks + 16 * chunk_of_copy(j);
        const char *vg = vl + (i64)row_of_copy(j) * vs + 16 * chunk_of_copy(j);
        if constexpr (ALWAYS) {
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sk + soff), "l"(kg) : "memory");
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sk + TILE + soff), "l"(vg) : "memory");
        } else {
            async_copy_16_u32(sk + soff, kg, fill);
            async_copy_16_u32(sk + TILE + soff, vg, fill);
        }
    }
    R35A_MEMBER void issue(int slot, const char *k0, const char *v0, i64 ks, i64 vs, int valid_rows, int first_row) {
        wave_sync();   /* every lane's reads of this slot (its tile, S steps back) are done (RW > 1: the
                        * other sharers' too, at the barrier of wait()) */
        const int rl = row_lane(), cl = chunk_lane();
        const char *kl = k0 + rl * ks + 16 * cl, *vl = v0 + rl * vs + 16 * cl;
        const u32 sk = (u32)__cvta_generic_to_shared(base + slot * 2 * TILE + rl * ROW + 16 * cl);
        /* Rows past the sequence end and before the window are zero-filled, not read; full tiles
         * (uniform: every tile but a sequence's first and last) skip the row tests. */
        if (valid_rows >= 16 && first_row <= 0) {
#pragma unroll
            for (int j = 0; j < CP; ++j)
                if (lane_has(j, rl)) copy_pair<ALL_LANES>(sk, kl, vl, ks, vs, j, true);
        } else {
#pragma unroll
            for (int j = 0; j < CP; ++j) {
                const int row = row_of_copy(j) + rl;
                if (lane_has(j, rl)) copy_pair<false>(sk, kl, vl, ks, vs, j, row < valid_rows && row >= first_row);
            }
        }
        async_commit();
    }
    /* No tile for this step: an empty group keeps wait()'s count. */
    R35A_MEMBER void skip(int slot) { (void)slot; async_commit(); }
    R35A_MEMBER void wait(int slot) {
        (void)slot;
        if constexpr (RW == 1) {
            async_wait<S - 1>();
            wave_sync();   /* the other lanes' copies are visible too */
        } else {
            async_wait<S - 2>();   /* issued so far: tiles up to i + S - 2 (WAIT_FIRST) */
            /* the other sharers' copies are visible, and they are done with the previous tile */
            asm volatile("bar.sync %0, %1;" ::"r"(barrier), "r"(32 * RW) : "memory");
        }
    }
    R35A_MEMBER ab k_operand(int slot, int c) const {
        const unsigned char *kd = base + slot * 2 * TILE;
        if constexpr (!B8) {
            return load_vec16_lds_b((const u16 *)(kd + 32 * c), ROW / 2);
        } else {
            u32 r[2];
            ldmatrix_x2<false>(kd + (lane_id() & 15) * ROW + 16 * c, r);
            k8_raw x;
            x.r[0] = r[0];
            x.r[1] = r[1];
            return k8_operand<E, KV>(x);
        }
    }
    R35A_MEMBER void prepare_v(int slot) { (void)slot; }
    /* The head element of O^T row m of a chunk (the products' output order). */
    R35A_MEMBER static int v_d_of_m(int m) { return V_DPERM ? v8_d_of_m(m) : m; }
    R35A_MEMBER ab v_operand(int slot, int c) const {
        const unsigned char *vd = base + slot * 2 * TILE + TILE;
        if constexpr (!B8) {
            return load_vec16_lds_trans_b((const u16 *)(vd + 32 * c), ROW / 2);
        } else {
            u32 r[2];   /* keys 0-7 and 8-15; bytes: d 2g, 2g+1 of key 2t, then of key 2t + 1 */
            ldmatrix_x2<true>(vd + (lane_id() & 15) * ROW + 16 * c, r);
            ab a;
            a.v[0] = kv8x2<E, KV, 0, 2>(r[0]);
            a.v[1] = kv8x2<E, KV, 1, 3>(r[0]);
            a.v[2] = kv8x2<E, KV, 0, 2>(r[1]);
            a.v[3] = kv8x2<E, KV, 1, 3>(r[1]);
            return a;
        }
    }
    R35A_MEMBER void release(int slot) { (void)slot; }
    /* Nothing in flight any more (before the stages' memory is reused). */
    R35A_MEMBER void drain() { async_wait<0>(); }
};


} /* namespace frag */
} /* namespace r35a */

#endif /* R35A_DECODE_KV_PIPE_LDS_NV_H */
