/*
 * kv_stage_async.h - K/V staging by asynchronous copies (the NVIDIA mma layer: cp.async): block
 * b + NSTAGE - 1 is copied straight into a ring of NSTAGE shared-memory stages while the warps compute
 * on block b, no registers held. K and V rows land as they are in memory (16-byte chunks, rows padded
 * by 16 bytes against bank conflicts); K operands are load_vec16_lds_b (ldmatrix.x4), V^T operands
 * load_vec16_lds_trans_b (ldmatrix.x4.trans) of the V rows.
 *
 * The policy names the same operations as kv_stage_regs.h (before_q, stream, drain, kstage, vstage,
 * k_operand, v_operand, v_at_key). Included by the target's encoder layer (frag_nv_mma.h), which
 * selects it.
 */
#ifndef R35A_ENCODER_KV_STAGE_ASYNC_H
#define R35A_ENCODER_KV_STAGE_ASYNC_H

#include "common/device.h"
#include "encoder/encoder_args.h"
#include "encoder/group_sync.h"

namespace r35a {
namespace {   /* internal linkage, as the kernel body's lambdas have */

/* the smallest power of two >= X (X >= 1) */
template <int X>
struct pow2_at_least { static constexpr int value = X <= 1 ? 1 : 2 * pow2_at_least<(X + 1) / 2>::value; };
template <>
struct pow2_at_least<1> { static constexpr int value = 1; };

/* Asynchronous copy of rows [0, ROWS) of a block into a tile (row r at tile + r * ld, 16-byte chunks
 * in place). Row r is read at src + r * stride bytes, UPR chunks of 16 bytes; rows >= nvalid are not
 * read and land as zeros.
 *
 * The group's GT threads take "slots" of rows (a power of two, or a multiple of 32, chunks wide) so
 * that a warp reads whole rows (coalesced) and a thread keeps its chunk u and its row r0 modulo the
 * rows per pass RS across passes: every destination is a base register plus an immediate, every
 * source one multiply-add of the (opaque, hence not hoisted out of the block loop) row stride. */
template <int ROWS, int UPR, int GT>
R35A_DEV void copy_rows_async(u16 *tile, int ld, const char *src, u32 stride, int nvalid, int gtid) {
    constexpr int SPR = UPR <= 32 ? pow2_at_least<UPR>::value : (UPR + 31) / 32 * 32;   /* slots per row */
    constexpr int RS = SPR <= GT ? GT / SPR : 1;                                          /* rows per pass */
    constexpr int UPT = SPR <= GT ? 1 : SPR / GT;                                         /* slots per thread and row */
    constexpr int PASSES = (ROWS + RS - 1) / RS;
    const int r0 = SPR <= GT ? gtid / SPR : 0;
    const int u0 = SPR <= GT ? gtid % SPR : gtid;
    opaque(stride);
    const char *const src0 = src + r0 * stride;               /* r0 * stride < 2^32 (encoder_args.h) */
    u16 *const dst0 = tile + r0 * ld;
    const bool full = nvalid >= ROWS;
#pragma unroll
    for (int k = 0; k < UPT; ++k) {
        const int u = u0 + k * GT;
        if (UPR % SPR != 0 && u >= UPR)
            continue;
        const int col = 8 * u;                                /* elements */
#pragma unroll
        for (int p = 0; p < PASSES; ++p) {
            const int pr = p * RS;                            /* compile-time */
            if (ROWS % RS != 0 && r0 + pr >= ROWS)
                continue;
            u16 *const d = dst0 + pr * ld + col;
            const char *sp;
            bool fill = true;
            if (full) {
                sp = src0 + (u64)(u32)pr * stride + 16 * u;
            } else {                                           /* rows past nvalid: row 0 stands in, zeros land */
                fill = r0 + pr < nvalid;
                sp = src + (u64)(u32)(fill ? r0 + pr : 0) * stride + 16 * u;
            }
            async_copy_16(d, sp, fill);
        }
    }
}

/* The same slots for rows whose addresses a K/V source block gives (kv_source.h, a paged block: row
 * r in 16-key sub-tile r / 16 at rows.k_row / v_row, which reads the sub-tile's table entry); rows >=
 * nvalid are not read and land as zeros. The passes are not unrolled: one row's address at a time is
 * live beside the products' registers (unrolled, the D = 128 kernels spilled 8-20 bytes). */
template <int ROWS, int UPR, int GT, bool V, class B>
R35A_DEV void copy_rows_async_at(u16 *tile, int ld, const B &rows, int nvalid, int gtid) {
    constexpr int SPR = UPR <= 32 ? pow2_at_least<UPR>::value : (UPR + 31) / 32 * 32;
    constexpr int RS = SPR <= GT ? GT / SPR : 1;
    constexpr int UPT = SPR <= GT ? 1 : SPR / GT;
    constexpr int PASSES = (ROWS + RS - 1) / RS;
    const int r0 = SPR <= GT ? gtid / SPR : 0;
    const int u0 = SPR <= GT ? gtid % SPR : gtid;
    u16 *const dst0 = tile + r0 * ld;
#pragma unroll
    for (int k = 0; k < UPT; ++k) {
        const int u = u0 + k * GT;
        if (UPR % SPR != 0 && u >= UPR)
            continue;
#pragma unroll 1
        for (int p = 0; p < PASSES; ++p) {
            const int pr = p * RS;
            if (ROWS % RS != 0 && r0 + pr >= ROWS)
                continue;
            /* rows past nvalid or before the block's first read key: a read row stands in, zeros land */
            const bool fill = r0 + pr < nvalid && r0 + pr >= rows.first();
            const int row = fill ? r0 + pr : rows.first();
            /* the row's 16-key sub-tile: pr / 16 (constant once unrolled), or, where a pass's RS rows
             * can cross a sub-tile boundary (RS not a divisor of 16; r0 < RS), the next one */
            constexpr bool CROSS = !(RS <= 16 && 16 % RS == 0);
            const int jc = pr / 16;
            const bool next = CROSS && fill && r0 + pr % 16 >= 16;
            const char *const sp = V ? rows.v_row(jc, next, row, 16u * u) : rows.k_row(jc, next, row, 16u * u);
            async_copy_16(dst0 + pr * ld + 8 * u, sp, fill);
        }
    }
}

struct kv_stage_async {
    /* K/V rows land as they are in memory: V rows [key][d] */
    static constexpr bool ASYNC = true;

    /* The staged tiles in LDS: where stage st's K and V blocks are and their products' operands.
     * (One pointer: the block step captures it, not the stream's registers.) */
    template <class C>
    struct tiles {
        static constexpr int KLD = C::KLD;
        u16 *const &lds;
        R35A_ENC_FN u16 *kstage(int st) const { return lds + C::Q_HELD + st * C::STAGE; }
        R35A_ENC_FN u16 *vstage(int st) const { return lds + C::Q_HELD + st * C::STAGE + C::K_ELEMS; }
        /* the V rows of keys from `key` of a block on */
        R35A_ENC_FN const u16 *v_at_key(const u16 *vl, int key) const { return vl + key * KLD; }
        /* K and V^T are the products' first operands (the hardware's B on NVIDIA): the _b loads bind
         * the ldmatrix results in the register pairs the product reads, so no moves form them (with
         * the plain loads 991 of the D = 128 kernel's 4096 SASS instructions were moves, 321 with
         * these; cuobjdump, kernels/encoder/README.md) */
        R35A_ENC_FN frag::ab k_operand(const u16 *kl, int j, int c) const {
            return frag::load_vec16_lds_b(kl + 16 * j * KLD + 16 * c, KLD);
        }
        R35A_ENC_FN frag::ab v_operand(const u16 *vl, int j, int c) const {
            return frag::load_vec16_lds_trans_b(vl + 16 * j * KLD + 16 * c, KLD);
        }
    };

    /* nothing is carried in registers */
    template <class C>
    struct carry {};

    /* S: the K/V source (kv_source.h), which gives each key row's address */
    template <class C, class S>
    struct stage {
        static constexpr int KB = C::KEYS_PER_BLOCK, KLD = C::KLD, D8 = C::D8, GT = C::GT;
        S &src;
        u16 *const &lds;
        const int &gtid;
        const tiles<C> &lt;
        carry<C> &kv;
        int first = 0;                                           /* the first block streamed */

        /* block blk into stage st */
        R35A_ENC_FN void issue(int blk, int st) {
            const int key0 = blk * KB;
            const typename S::template block<C> rows = src.template at<C>(key0);
            if constexpr (S::template block<C>::CONTIGUOUS) {   /* rows a stride apart: one multiply-add each */
                copy_rows_async<KB, D8, GT>(lt.kstage(st), KLD, rows.k_base, rows.k_stride(), src.klen - key0, gtid);
                copy_rows_async<KB, D8, GT>(lt.vstage(st), KLD, rows.v_base, rows.v_stride(), src.klen - key0, gtid);
            } else {
                copy_rows_async_at<KB, D8, GT, false>(lt.kstage(st), KLD, rows, src.klen - key0, gtid);
                copy_rows_async_at<KB, D8, GT, true>(lt.vstage(st), KLD, rows, src.klen - key0, gtid);
            }
        }

        R35A_MEMBER void before_q() {
            if constexpr (C::ISSUE_BEFORE_Q) {
                issue(first, 0);                                 /* lands beside the Q staging */
                async_commit();
            }
        }
        /* step(b, st) for blocks b = first .. nblk - 1 */
        template <class F>
        R35A_MEMBER void stream(int nblk, F &&step) {
            if constexpr (C::SHORT) {
                for (int b = first; b < nblk; ++b) {
                    issue(b, 0);
                    async_commit();
                    async_wait<0>();
                    group_sync<C::GW>();
                    step(b, 0);
                    group_sync<C::GW>();                             /* the stage is refilled next */
                }
            } else {
                constexpr int NST = C::NSTAGE;
                if constexpr (!C::ISSUE_BEFORE_Q) {
                    issue(first, 0);
                    async_commit();
                }
#pragma unroll
                for (int st = 1; st < NST - 1; ++st) {
                    if (first + st < nblk) issue(first + st, st);
                    async_commit();                              /* possibly empty: keeps the group count uniform */
                }
                int st = 0;
                for (int b = first; b < nblk; ++b) {
                    async_wait<NST - 2>();                       /* this thread's copies of block b have landed */
                    group_sync<C::GW>();                             /* everyone's have; block b - 1's stage is free */
                    const int nb = b + NST - 1;
                    if (nb < nblk) issue(nb, st == 0 ? NST - 1 : st - 1);
                    async_commit();
                    step(b, st);
                    st = st + 1 == NST ? 0 : st + 1;
                }
            }
        }
        /* copies still in flight (after the stream only empty groups can be left) */
        R35A_MEMBER void drain() { async_wait<0>(); }
    };
};

} /* namespace */
} /* namespace r35a */

#endif /* R35A_ENCODER_KV_STAGE_ASYNC_H */
