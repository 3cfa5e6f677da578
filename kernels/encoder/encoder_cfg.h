/*
 * encoder_cfg.h - the compile-time layout of an encoder kernel (kernels/encoder/encoder.hip): the
 * tiling a variant names (element type, D, T row tiles per wave, KB keys per block, NW waves, the
 * occupancy contract WAVES, the group mode MAXLEN, KG key groups of a tail half) and what follows
 * from it and from the target's paths (encoder_paths in frag_*.h): registers per thread, the LDS
 * layout of the Q staging and the K/V stages, checked against the occupancy contract's budget.
 */
#ifndef R35A_ENCODER_CFG_H
#define R35A_ENCODER_CFG_H

#include "common/device.h"
#include "encoder/encoder_frag.h"
#include "encoder/encoder_args.h"

/* The register count above which the asynchronous staging keeps the Q tile in shared memory
 * (encoder_cfg::Q_SMEM): 208. A lab build may set R35A_LAB_ENC_Q_REGS_MAX (lab/tune_encoder.py builds
 * a tiling both ways; 0: Q always in shared memory). */
#if !(defined(R35A_LAB) && R35A_LAB && defined(R35A_LAB_ENC_Q_REGS_MAX))
#undef R35A_LAB_ENC_Q_REGS_MAX
#define R35A_LAB_ENC_Q_REGS_MAX 208
#endif

namespace r35a {

/* Packing of the probabilities P (finite, >= 0) into the PV product's operand: bf16 with the
 * target's cheapest round-to-nearest (device.h), f16 with the usual conversion. */
struct bf16_prob_t {
    R35A_DEV u32 pack2(float lo, float hi) { return pack_prob_bf16x2(lo, hi); }
};
template <class E>
struct prob_pack { typedef E type; };
template <>
struct prob_pack<bf16_t> { typedef bf16_prob_t type; };

template <int A, int B>
struct cdiv { static constexpr int value = (A + B - 1) / B; };
template <int A, int B>
struct imax_t { static constexpr int value = A > B ? A : B; };

/* Shared memory a kernel may use on the target, given how many of its workgroups the occupancy
 * contract puts on one LDS (gfx11: static LDS, a WGP's 128 KiB shared by 4 SIMDs; NVIDIA: dynamic
 * shared memory, an SM's 228 KiB split by the contract, encoder_args.h r35a_encoder_nv_smem_bytes). */
template <int NW, int WAVES>
struct lds_budget {
#if defined(R35A_TARGET_CUDA)
    static constexpr int value = r35a_encoder_nv_smem_bytes(WAVES, NW);
#else
    static constexpr int WGS = (4 * WAVES + NW - 1) / NW;
    static constexpr int value = R35A_GFX11_LDS_PER_WGP / WGS < R35A_GFX11_LDS_PER_WORKGROUP
                                     ? R35A_GFX11_LDS_PER_WGP / WGS
                                     : R35A_GFX11_LDS_PER_WORKGROUP;
#endif
};

template <class E, int D, int T, int KB, int NW, int WAVES, int MAXLEN, int KG = 1>
struct encoder_cfg {
    static constexpr int DP = (D + 15) / 16 * 16;   /* head size padded to whole 16-wide chunks */
    static constexpr int DC = DP / 16;              /* d chunks */
    static constexpr int D8 = D / 8;                /* 16-byte chunks of a row in memory */
    static constexpr int KBC = KB / KG;             /* keys of a block one wave computes (its key group's share) */
    static constexpr int NS = KBC / 16;             /* ... in 16-key sub-tiles */
    static constexpr bool SHORT = MAXLEN > 0;       /* small-problem tiling: one wave per group */
    static constexpr int GW = SHORT ? 1 : NW;       /* waves per group (one K/V stream, one barrier domain) */
    static constexpr int NG = NW / GW;              /* groups per workgroup */
    static constexpr int GT = 32 * GW;              /* threads per group */
    /* Key groups (a tail half, encoder_args.h tail_items): the group's waves split into KG key groups
     * of RW row waves; all serve the same R rows, key group k computing keys [k KBC, (k + 1) KBC) of
     * every staged block, and key group 1's (m, l, O) joins key group 0's through LDS at the end. */
    static constexpr int RW = GW / KG;              /* row waves per key group */
    static constexpr int R = 16 * T * RW;           /* query rows per group */
    /* Row tiles a wave carries through one pass over the keys: all T, or fewer where the fragment
     * layer's registers do not hold T tiles' Q, O and scores at once (the gfx11 emulation on
     * NVIDIA: gfx11's replicated operands take twice the registers); the passes then stream the
     * segment's keys again. */
    static constexpr int TE = encoder_paths::TILES_PER_PASS < T ? encoder_paths::TILES_PER_PASS : T;
    static constexpr int PASSES = T / TE;
    /* K/V staging: the target's policy (kv_stage_regs.h, kv_stage_async.h); ASYNC: K and V rows land
     * as they are in memory (V^T operands read transposed), else V is stored as V^T */
    typedef typename encoder_paths::kv_stage KV;
    static constexpr bool ASYNC = KV::ASYNC;
    static constexpr int KEYS_PER_BLOCK = KB;
    static_assert(D % 8 == 0 && D <= 256, "rows are loaded in 16-byte chunks");
    static_assert(KB % 16 == 0 && KB >= 16, "blocks are whole 16-key sub-tiles");
    static_assert(T == 1 || T == 2, "one or two row tiles per wave");
    static_assert(KG == 1 || (KG == 2 && !SHORT && GW % 2 == 0 && KB % 32 == 0),
                  "key groups: 1, or 2 halves of a workgroup-wide group's waves and of each block");
    static_assert(R <= 128 && KB <= 128,
                  "per-thread row offsets are 32-bit byte offsets: rows * token stride (< 2^24) * 2 < 2^32");
    /* LDS row strides in elements. The +8 (16 bytes) staggers rows across banks for the 16-row
     * operand reads; rows stay 16-byte aligned. */
    static constexpr int KLD = DP + 8;              /* K block, Q staging (and V rows when ASYNC): [row][d] */
    static constexpr int VLD = ASYNC ? KLD : KB + 8;/* V rows [key][d] (ASYNC) or V^T rows [d][key] */
    static constexpr int K_ELEMS = KB * KLD;
    static constexpr int V_ELEMS = ASYNC ? KB * KLD : DP * VLD;
    static constexpr int STAGE = K_ELEMS + V_ELEMS;
    static constexpr int Q_ELEMS = R * KLD;
    static constexpr int BUDGET = lds_budget<NW, WAVES>::value;
    /* Q^T operands in shared memory instead of registers (asynchronous streaming only: NVIDIA).
     * Registers held across a block: Q^T 4 and O^T 8 per 16-row tile and 16-wide d chunk, the scores
     * 8 per tile and 16-key sub-tile. Up to Q_REGS_MAX of them the Q^T operands stay in registers,
     * read once per pass (D = 128, 32 rows per warp, 16 keys per block: 208, 255 registers in all,
     * no spill; 32 keys per block: 224, spilled). Above it the Q tile stays in shared memory for the
     * whole pass (beside the K/V stages) and each d chunk's Q^T operands are read once per block
     * (one ldmatrix per 16-row tile, shared by the block's NS K operand reads): 4 TE DC registers
     * free for larger key blocks, as FlashAttention keeps Q. */
    static constexpr int Q_REGS_MAX = R35A_LAB_ENC_Q_REGS_MAX;
    static constexpr bool Q_SMEM = ASYNC && !SHORT && TE * DC * (4 + 8) + TE * NS * 8 > Q_REGS_MAX;
    /* Asynchronous streaming: three stages when they fit, and Q staged beside stage 0 (whose copies
     * are then already in flight) when that fits. Otherwise the Q staging overlays everything. With
     * Q_SMEM the Q tile comes first and the stages after it, never overlaid. */
    static constexpr int Q_HELD = Q_SMEM ? Q_ELEMS : 0;   /* elements before the stages */
    static constexpr int NSTAGE =
        SHORT ? 1
        : !ASYNC ? 2
        : Q_SMEM ? (NG * 2 * (Q_ELEMS + 3 * STAGE) <= BUDGET ? 3 : 2)
                 : (NG * 2 * imax_t<3 * STAGE, Q_ELEMS>::value <= BUDGET ? 3 : 2);
    static constexpr bool Q_BESIDE =
        ASYNC && !SHORT && !Q_SMEM && NG * 2 * (STAGE + imax_t<(NSTAGE - 1) * STAGE, Q_ELEMS>::value) <= BUDGET;
    /* stage 0's copies may be issued before Q is staged: they do not land on it */
    static constexpr bool ISSUE_BEFORE_Q = Q_BESIDE || Q_SMEM;
    static constexpr int Q_OFFSET = Q_BESIDE ? STAGE : 0;
    /* The key groups' merge (KG > 1), after the last block: each wave of key group 1 leaves its m and
     * l (NCOL each per row tile) and O^T (ACC_ELEMS per tile and d chunk) in the group's LDS, lane
     * fastest. */
    static constexpr int MERGE_FLOATS_PER_LANE = TE * (2 * frag::NCOL + DC * frag::ACC_ELEMS);
    static constexpr int MERGE_ELEMS = KG > 1 ? (KG - 1) * RW * 32 * MERGE_FLOATS_PER_LANE * 2 : 0;
    static constexpr int GROUP_ELEMS = imax_t<MERGE_ELEMS,
        Q_SMEM     ? Q_ELEMS + NSTAGE * STAGE
        : Q_BESIDE ? STAGE + imax_t<(NSTAGE - 1) * STAGE, Q_ELEMS>::value
                   : imax_t<NSTAGE * STAGE, Q_ELEMS>::value>::value;
    static constexpr int LDS_BYTES = NG * GROUP_ELEMS * 2;
    static_assert(LDS_BYTES <= BUDGET, "LDS use breaks the variant's occupancy contract (waves) or the target's limit");
    /* Register staging: K and Q in 16-byte chunks (row-major, d fastest); V in units of two keys x
     * one chunk, so the transposing LDS store writes key pairs as 32-bit words. */
    static constexpr int K_CHUNKS = KB * D8;
    static constexpr int K_PER_THREAD = cdiv<K_CHUNKS, GT>::value;
    static constexpr int V_UNITS = (KB / 2) * D8;
    static constexpr int V_PER_THREAD = cdiv<V_UNITS, GT>::value;
    static constexpr int Q_CHUNKS = R * D8;
    static constexpr int Q_PER_THREAD = cdiv<Q_CHUNKS, GT>::value;

};

} /* namespace r35a */

#endif /* R35A_ENCODER_CFG_H */
