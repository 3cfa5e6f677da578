/*
 * decode/config.h - decode_cfg, the layout of one decode variant on a fragment layer: its waves, row
 * tiles, KV pipeline and LDS, for the policies its table row names, with static_asserts on the
 * budgets. A template over the layer (Frag: a layer.h struct).
 */
#ifndef R35A_DECODE_CONFIG_H
#define R35A_DECODE_CONFIG_H

#include "decode/policy.h"
#include "decode/layer.h"

namespace r35a {

/* The KV pipeline a row names (variants/<arch>.tsv pipe): stages in registers, private to the wave
 * (every fragment layer), or shared-memory stages filled by asynchronous copies (layers that define
 * R35A_FRAG_HAS_KV_PIPE_LDS), private to the wave or shared by the RW row waves of a key group and
 * d slice. KV: the element format. */
template <class Frag, int PIPE, int DS, int S, class E, class KV, int RW>
struct pick_pipe {
    typedef typename Frag::template kv_pipe_regs<DS, S, E, KV> type;
};
#if defined(R35A_FRAG_HAS_KV_PIPE_LDS)
template <class Frag, int DS, int S, class E, class KV, int RW>
struct pick_pipe<Frag, DECODE_PIPE_lds, DS, S, E, KV, RW> {
    typedef typename Frag::template kv_pipe_lds<DS, S, E, KV, 1> type;
};
template <class Frag, int DS, int S, class E, class KV, int RW>
struct pick_pipe<Frag, DECODE_PIPE_lds_shared, DS, S, E, KV, RW> {
    typedef typename Frag::template kv_pipe_lds<DS, S, E, KV, RW> type;
};
#define R35A_DECODE_HAS_PIPE_LDS true
#else
#define R35A_DECODE_HAS_PIPE_LDS false
#endif

/* The layout of one variant: its waves, row tiles and LDS, for the policies its table row names
 * (PIPE: a DECODE_PIPE_* kind with STAGES stages; QPLACE: a DECODE_Q_* place of Q^T). It chooses
 * nothing: the static_asserts check that the row fits the target's budgets (the LDS its occupancy
 * contract leaves a workgroup); the code-object checks hold the register contract (no scratch). */
template <class Frag_, class E, class KV, int D, int ROWS, int KW, int DW, int RW, int WAVES, int PIPE, int STAGES_, int QPLACE>
struct decode_cfg {
    typedef Frag_ Frag;   /* the fragment layer (layer.h) */
    static constexpr int HEAD = D, KGROUPS = KW, DSLICES = DW, ROWWAVES = RW;
    static constexpr int NW = KW * DW * RW;   /* waves per workgroup */
    static constexpr int THREADS = 32 * NW;
    static constexpr int DS = D / DW;         /* head-dim slice per wave */
    static constexpr int NC = DS / 16;        /* 16-wide d chunks per wave */
    static constexpr int DC = D / 16;         /* d chunks of the whole head */
    static constexpr int R = ROWS;            /* query rows per workgroup */
    static constexpr int TR = Frag::TILE_ROWS;   /* query rows per row tile (the products' n) */
    static constexpr int T = (R + TR - 1) / TR;  /* row tiles */
    static constexpr int RT = T * TR;            /* the row tiles' rows (> R: padding rows) */
    static constexpr int TW = T / RW;         /* row tiles per wave: row wave rw has tiles rw x TW .. */
    static_assert(D % (16 * DW) == 0, "each wave needs whole 16-wide d chunks");
    static_assert(KW == 1 || KW == 2 || KW == 4 || KW == 8, "key groups merge in a binary tree");
    static_assert(T % RW == 0, "row waves: whole row tiles each");
    static_assert(NW <= 16 && (RW == 1 || KW * DW <= 15), "a workgroup of at most 16 waves; a named barrier per shared pipeline");

    /* The policies. Pipeline: STAGES tiles, S - 1 of them in flight during a tile's products. */
    static constexpr int STAGES = STAGES_;
    static constexpr bool USE_LDS = PIPE != DECODE_PIPE_regs;        /* shared-memory stages */
    static constexpr bool SHARED_PIPES = PIPE == DECODE_PIPE_lds_shared;   /* ... shared by the RW row waves */
    static constexpr bool Q_LDS = QPLACE == DECODE_Q_lds;            /* Q^T read from LDS per tile */
    static constexpr bool Q_STAGED = QPLACE != DECODE_Q_regs;        /* Q^T written to LDS once */
    static_assert(STAGES >= 2, "the KV pipeline needs two stages");
    static_assert(!USE_LDS || R35A_DECODE_HAS_PIPE_LDS, "pipe lds / lds_shared: this fragment layer has no shared-memory stages");
    static_assert(PIPE != DECODE_PIPE_lds_shared || RW > 1, "pipe lds_shared: shared by the row waves, rw > 1");
    static_assert(PIPE != DECODE_PIPE_lds || RW == 1, "pipe lds: private shared-memory stages are built for rw 1 only");
    static_assert(PIPE != DECODE_PIPE_regs || RW == 1 || !R35A_DECODE_HAS_PIPE_LDS,
                  "row waves on a layer with shared-memory stages share them (pipe lds_shared)");

    /* LDS budget from the occupancy contract: WAVES waves on each of 4 SIMDs share a pool of LDS
     * (gfx11: a WGP's 128 KiB, at most 64 KiB per workgroup, static; NVIDIA: decode_args.h's
     * r35a_nv_smem_bytes, dynamic shared memory the host launches with). */
    static constexpr int WGS_PER_POOL = (4 * WAVES + NW - 1) / NW;
#if defined(R35A_TARGET_AMDGCN)
    static constexpr int LDS_POOL = R35A_GFX11_LDS_PER_WGP / WGS_PER_POOL, LDS_MAX = R35A_GFX11_LDS_PER_WORKGROUP;
    static constexpr int LDS_BUDGET = LDS_POOL < LDS_MAX ? LDS_POOL : LDS_MAX;
#else
    static constexpr int LDS_BUDGET = r35a_nv_smem_bytes(WAVES, NW);
#endif
    /* LDS, loop phase: each pipeline's region, the partial S^T tiles of every wave (DW > 1) and
     * one reduced S^T per key group and row wave. */
    static constexpr int PX_WAVE = DW > 1 ? TW * Frag::ACC_NATIVE_FLOATS * 4 : 0;
    static constexpr int SR_BYTES = DW > 1 ? KW * RW * TW * Frag::ACC_NATIVE_FLOATS * 4 : 0;
    static constexpr int SLOPE_BYTES = RT * 4;   /* each row's ALiBi slope (base 2), after everything else */
    /* bf16 queries on f16 products (device.h qk_elem): each row's power-of-two scale, after the slopes
     * (read once, before the loop) */
    static constexpr bool Q_RESCALE = kv8_f16_products<E, KV>::value;
    static constexpr int QSC_BYTES = Q_RESCALE ? RT * 4 : 0;
    /* Pipelines: one per wave, except that the RW row waves of a (key group, d slice) share one
     * (kv_pipe_lds: each copies its share of a tile). */
    static constexpr int PIPES = SHARED_PIPES ? NW / RW : NW;
    /* Q^T in LDS (staged, or read back per tile: gfx11 2 ds_load_b128 per fragment, NVIDIA one
     * ldmatrix): [DW][RT][QROW] u16, rows padded by 16 bytes. */
    static constexpr int QROW = DS + 8;
    static constexpr int Q_BYTES = DW * RT * QROW * 2;
    static constexpr int BOP_WORDS = (int)(sizeof(typename Frag::bop) / 4);   /* a B operand (Q^T, P^T) */
    typedef typename pick_pipe<Frag, PIPE, DS, STAGES, E, KV, RW>::type pipe;
    static constexpr int PIPE_WAVE = (pipe::LDS_BYTES + 15) / 16 * 16;
    /* A register pipeline's LDS (the V^T tile) is busy only between prepare_v and release, after
     * the key group has read the wave's partial S^T: the two share the wave's region. Shared-memory
     * stages hold loads in flight at all times: the partial S^T goes after them, in the wave's region
     * (a private pipeline) or in an array of every wave's after the regions (a shared one). */
    static constexpr bool PX_OVERLAY = !USE_LDS;
    static constexpr int PX_OFF = PX_OVERLAY ? 0 : PIPE_WAVE;
    static constexpr int WAVE_REGION = PX_OVERLAY     ? (PIPE_WAVE > PX_WAVE ? PIPE_WAVE : PX_WAVE)
                                       : SHARED_PIPES ? PIPE_WAVE
                                                      : PIPE_WAVE + PX_WAVE;
    static constexpr int PX_BASE = SHARED_PIPES ? PIPES * WAVE_REGION : PX_OFF;   /* wave w's partial S^T: */
    static constexpr int PX_STRIDE = SHARED_PIPES ? PX_WAVE : WAVE_REGION;        /* PX_BASE + w x PX_STRIDE */
    static constexpr int SR_OFF = PIPES * WAVE_REGION + (SHARED_PIPES ? NW * PX_WAVE : 0);
    static constexpr int Q_OFF = SR_OFF + SR_BYTES;   /* Q^T tiles: [DW][R][QROW] u16 */
    static constexpr int SLOPE_OFF = Q_OFF + (Q_STAGED ? Q_BYTES : 0);   /* ALiBi: R floats */
    static constexpr int QSC_OFF = SLOPE_OFF + SLOPE_BYTES;            /* Q_RESCALE: RT floats */
    static constexpr int LOOP_BYTES = QSC_OFF + QSC_BYTES;
    /* Floats of the key group's S^T tiles (of one row wave) each wave reduces (reduce-scatter). */
    static constexpr int SLICE = TW * Frag::ACC_NATIVE_FLOATS / DW;
    /* LDS, merge phase (reuses the loop's): KW/2 slots of a key group's accumulators and stats. */
    static constexpr int MSLOT_ACC = DW * T * NC * Frag::ACC_NATIVE_FLOATS;   /* floats */
    static constexpr int MSLOT_FLOATS = MSLOT_ACC + 2 * RT;
    static constexpr int MERGE_BYTES = KW > 1 ? (KW / 2) * MSLOT_FLOATS * 4 : 0;
    static constexpr int LDS_BYTES = LOOP_BYTES > MERGE_BYTES ? LOOP_BYTES : MERGE_BYTES;
    static_assert(LDS_BYTES <= LDS_BUDGET,
                  "LDS budget: the row's KV stages, Q^T placement and exchange buffers need more LDS than its "
                  "occupancy contract (waves) leaves a workgroup (fewer stages, q regs, or fewer waves)");
};

} /* namespace r35a */

#endif /* R35A_DECODE_CONFIG_H */
