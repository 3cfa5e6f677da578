/*
 * kv_stage_regs.h - K/V staging through registers (the gfx11 layers): every thread of a group loads
 * its share of a K/V block with 128-bit loads of whole rows and stores it into LDS, K row-major and V
 * transposed to V^T (key pairs packed into 32-bit words), so that both products read their first
 * operand with load_vec16_lds.
 *
 * PREFETCH: a workgroup-wide group loads block b + 1 into registers before the products of block b
 * and stores it after them into the other half of a double buffer. Without it (and always in a
 * one-wave group, which carries a whole block alone) a block is loaded and stored K first, then V,
 * before its products: half the registers at a time.
 *
 * The policy names its operations for the kernel body (kernels/encoder/encoder.hip):
 *     before_q()         work to start before the Q tile is staged (the first block's loads)
 *     stream(n, step)    runs step(b, st) on block b staged in stage st, for b = 0 .. n - 1
 *     drain()            waits for copies still in flight (none here)
 *     tiles<C>: kstage(st), vstage(st), k_operand(kl, j, c), v_operand(vl, j, c), v_at_key(vl, key)
 * Included by the target's encoder layer (frag_gfx11.h, frag_nv_gfx11emu.h), which selects it.
 */
#ifndef R35A_ENCODER_KV_STAGE_REGS_H
#define R35A_ENCODER_KV_STAGE_REGS_H

#include "common/device.h"
#include "encoder/encoder_args.h"
#include "encoder/group_sync.h"

namespace r35a {
namespace {   /* internal linkage, as the kernel body's lambdas have */

template <bool PREFETCH>
struct kv_stage_regs {
    /* K/V rows do not land as they are in memory: V is stored as V^T rows [d][key] */
    static constexpr bool ASYNC = false;

    /* The K/V block a thread carries from global memory to LDS (a local of the kernel body). */
    template <class C>
    struct carry {
        u32x4 k[C::K_PER_THREAD];
        u32x4 v[C::V_PER_THREAD][2];
    };

    /* The staged tiles in LDS: where stage st's K and V blocks are and their products' operands.
     * (One pointer: the block step captures it, not the stream's registers.) */
    template <class C>
    struct tiles {
        static constexpr int KLD = C::KLD, VLD = C::VLD;
        u16 *const &lds;
        R35A_ENC_FN u16 *kstage(int st) const { return lds + st * C::STAGE; }
        R35A_ENC_FN u16 *vstage(int st) const { return lds + st * C::STAGE + C::K_ELEMS; }
        /* the V^T operands of keys from `key` of a block on (V^T rows are [d][key]) */
        R35A_ENC_FN const u16 *v_at_key(const u16 *vl, int key) const { return vl + key; }
        R35A_ENC_FN frag::ab k_operand(const u16 *kl, int j, int c) const {
            return frag::load_vec16_lds(kl + 16 * j * KLD + 16 * c, KLD);
        }
        R35A_ENC_FN frag::ab v_operand(const u16 *vl, int j, int c) const {
            return frag::load_vec16_lds(vl + 16 * c * VLD + 16 * j, VLD);
        }
    };

    /* S: the K/V source (kv_source.h), which gives each key row's address */
    template <class C, class S>
    struct stage {
        static constexpr int KB = C::KEYS_PER_BLOCK, KLD = C::KLD, VLD = C::VLD, D8 = C::D8, GT = C::GT;
        static constexpr int KPT = C::K_PER_THREAD, VPT = C::V_PER_THREAD;
        S &src;
        u16 *const &lds;
        const int &gtid;
        const tiles<C> &lt;
        carry<C> &kv;



        /* Chunk i of this thread: K chunk (key, d8) and V unit (key pair kp, d8). A group of one wave
         * (SHORT) carries a whole block alone, so its chunks go key-fastest: the thread keeps one key
         * (or key pair) and its chunks are a fixed distance apart, every address a base plus an
         * immediate (no per-chunk registers). Wider groups go d-fastest: a wave reads whole rows. */
        static constexpr bool KEY_FAST = C::SHORT && GT % KB == 0 && GT % (KB / 2) == 0;
        R35A_ENC_FN bool k_chunk(int i, int &key, int &d8) const {
            if constexpr (KEY_FAST) {
                key = gtid % KB;
                d8 = gtid / KB + i * (GT / KB);
            } else {
                const int idx = gtid + i * GT;
                key = idx / D8;
                d8 = idx - key * D8;
            }
            return KEY_FAST ? d8 < D8 : (C::K_CHUNKS % GT == 0 || gtid + i * GT < C::K_CHUNKS);
        }
        /* V units: the key pair that shares a 32-bit word of V^T is the fragment layer's (the B
         * operand of P^T holds key row_of_kslot(p) in k-slot p). */
        R35A_ENC_FN bool v_chunk(int i, int &kp, int &d8) const {
            if constexpr (KEY_FAST) {
                kp = gtid % (KB / 2);
                d8 = gtid / (KB / 2) + i * (GT / (KB / 2));
            } else {
                const int idx = gtid + i * GT;
                d8 = idx / (KB / 2);
                kp = idx - d8 * (KB / 2);
            }
            return KEY_FAST ? d8 < D8 : (C::V_UNITS % GT == 0 || gtid + i * GT < C::V_UNITS);
        }
        R35A_ENC_FN int v_key_of(int kp, int hi) const { return 16 * (kp >> 3) + frag::row_of_kslot(2 * (kp & 7) + hi); }
        /* keys >= len are neither read nor kept (zeros); parts: 1 K, 2 V, 3 both */
        R35A_ENC_FN void load(int blk, carry<C> &r, int parts) {
            const u32x4 zero4 = {0u, 0u, 0u, 0u};
            const int key0 = blk * KB;
            const typename S::template block<C> rows = src.template at<C>(key0);
            const int nk = src.klen - key0;                        /* keys left; >= KB: a full block */
            const int lo = rows.first();                           /* keys below: not read (zeros) */
            const bool full = nk >= KB && lo == 0;
#pragma unroll
            for (int i = 0; i < KPT; ++i) {
                int key, d8;
                const bool in = k_chunk(i, key, d8);
                if ((parts & 1) && in) {
                    r.k[i] = full || (key < nk && key >= lo) ? load_b128(rows.k_at(key, 16u * d8)) : zero4;
                }
            }
#pragma unroll
            for (int i = 0; i < VPT; ++i) {
                int kp, d8;
                const bool in = v_chunk(i, kp, d8);
                if ((parts & 2) && in) {
#pragma unroll
                    for (int hi = 0; hi < 2; ++hi) {
                        const int key = v_key_of(kp, hi);
                        r.v[i][hi] = full || (key < nk && key >= lo) ? load_b128(rows.v_at(key, 16u * d8)) : zero4;
                    }
                }
            }
        }
        R35A_ENC_FN void store(int st, const carry<C> &r, int parts) {
            u16 *const kl = lt.kstage(st);
            u16 *const vl = lt.vstage(st);
#pragma unroll
            for (int i = 0; i < KPT; ++i) {
                int key, d8;
                if (k_chunk(i, key, d8) && (parts & 1)) *(u32x4 *)(kl + key * KLD + 8 * d8) = r.k[i];
            }
#pragma unroll
            for (int i = 0; i < VPT; ++i) {
                int kp, d8;
                if (v_chunk(i, kp, d8) && (parts & 2)) {
                    /* V[key_lo][d], V[key_hi][d] -> one word of V^T row d at key slots 2kp, 2kp+1 */
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const u32 x = r.v[i][0][e], y = r.v[i][1][e];
                        *(u32 *)(vl + (8 * d8 + 2 * e) * VLD + 2 * kp) = byte_perm(y, x, 0x05040100u);
                        *(u32 *)(vl + (8 * d8 + 2 * e + 1) * VLD + 2 * kp) = byte_perm(y, x, 0x07060302u);
                    }
                }
            }
        }

        static constexpr bool PREFETCHING = !C::SHORT && PREFETCH;
        int first = 0;                                               /* the first block streamed */
        R35A_MEMBER void before_q() {
            if constexpr (PREFETCHING)
                load(first, kv, 3);                                  /* in flight during the Q staging */
        }
        /* step(b, st) for blocks b = first .. nblk - 1 */
        template <class F>
        R35A_MEMBER void stream(int nblk, F &&step) {
            if constexpr (!PREFETCHING) {
                for (int b = first; b < nblk; ++b) {
                    /* K, then V, then the products: half the registers at a time */
                    load(b, kv, 1);
                    store(0, kv, 1);
                    load(b, kv, 2);
                    store(0, kv, 2);
                    group_sync<C::GW>();
                    step(b, 0);
                    group_sync<C::GW>();                             /* the stage is refilled next */
                }
            } else {
                store(0, kv, 3);
                group_sync<C::GW>();
                for (int b = first; b < nblk; ++b) {
                    const bool more = b + 1 < nblk;
                    if (more) load(b + 1, kv, 3);                    /* in flight during the products */
                    step(b, (b - first) & 1);
                    if (more) store((b + 1 - first) & 1, kv, 3);
                    group_sync<C::GW>();
                }
            }
        }
        R35A_MEMBER void drain() {}
    };
};

} /* namespace */
} /* namespace r35a */

#endif /* R35A_ENCODER_KV_STAGE_REGS_H */
