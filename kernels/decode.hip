/*
 * decode.hip - paged-KV decode and speculative decode on matrix fragments (gfx11 WMMA; NVIDIA
 * mma.sync through the same sources, kernels/common/fragment.h).
 *
 * One workgroup per (KV split, kv head x row group, sequence); see decode_args.h for the grid and
 * the workspace. All G x M query rows of a kv head (up to R = 16 * T of them) share one pass over
 * the KV cache, so each KV byte of a split is read once.
 *
 * The products run "transposed", with the query rows along the accumulator's n (column) axis:
 *     S^T[key][row]  = K[key][:] . Q[row][:]        A = K tile (16 keys x 16 d),
 *                                                  B = Q^T     (registers, loaded once)
 *     O^T[d][row]   += V^T[d][key] . P^T[key][row]  A = V^T     (the V tile read transposed),
 *                                                  B = P^T     (the S^T accumulator, re-packed)
 * so a query row's softmax statistics are per accumulator column and the rescale of O by the
 * running-max correction is a per-column multiply.
 *
 * KV streaming is a software pipeline of S stages (frag::kv_pipe_*, from the fragment layer): each
 * wave issues the loads of its tile i + S - 1 (and its block-table entry was loaded 32 tiles ago)
 * before it computes tile i, so S - 1 tiles stay in flight across the products. gfx11 stages tiles
 * in registers (K as operand fragments, V transposed through LDS right before use); NVIDIA in shared
 * memory by cp.async (K by ldmatrix, V by ldmatrix.trans).
 *
 * Waves: NW = KW x DW x RW. The KW key groups take 16-key tiles round-robin, each with its own online
 * softmax; the DW waves of a key group split the head dimension into DW slices of DS = D / DW
 * (each owns its slice of Q, K, V and O) and add their partial S^T tiles through LDS by
 * reduce-scatter (two LDS-only barriers per tile). The RW row waves split the R rows into RW
 * parts of T / RW row tiles on the same keys (each row wave has its own S^T exchange); where the
 * stages are in shared memory (NVIDIA) they share one pipeline (each copies its share of a tile; a
 * named barrier per tile), so a rows-32 workgroup reads its KV once with the registers of a rows-16
 * wave (two rows-16 row groups read it twice). Key groups merge through LDS at the end of the
 * split; splits write partial records to the workspace, and the merge kernel (decode_merge_<dtype>,
 * at the end of this file), launched next on the same stream, combines them, all rows and d of all
 * groups in parallel (decode_args.h "the split merge"). A sequence uses r35a_decode_seq_splits() of
 * the planned splits (fewer when it is short), each a balanced share of its tiles.
 *
 * Model features (decode_args.h): the logit transform (softcap, then ALiBi) runs in the loop only when
 * the call has one (a uniform branch per tile); attention sinks join each row's denominator once,
 * where the row is normalized (the single split's store or the split merge). The K/V element format
 * is compiled in (variants: the table's kv column): 16-bit (the Q/O dtype) or 8-bit (fp8 e4m3,
 * int8), whose tiles move half the bytes and are dequantized in registers to the Q/O dtype
 * (device.h kv8x2); the caller's scales (times the conversion's unit) join the logit scale (K) and
 * the output normalization (V). (One kernel body per format: two bodies in one kernel made clang
 * spill SGPRs in every variant.)
 *
 * Compile-time: element type, K/V element format, D, T (rows R = 16T), KW, DW, RW, WAVES (the occupancy
 * contract): they size registers and LDS, and the LDS left decides the pipeline depth.
 * Run-time: page size (any multiple of 16), strides, G, M (per sequence), window, scale, splits,
 * softcap, ALiBi, sinks, the 8-bit scales (per tensor or per kv head).
 *
 * Bad device metadata (device_error.h): one scalar check of the sequence's entries per workgroup
 * before anything is read (a bad sequence's rows are written as NaN and recorded), one compare per
 * block-table entry as it is read (a page outside the cache is never dereferenced: page 0 is
 * streamed instead and the wave's softmax state is made NaN, which every merge carries to O).
 * Non-finite values: a NaN or +inf logit makes p (hence l and O) NaN in its row and every merge
 * multiplies it in (NaN x 0 is NaN), a -inf one gives p = 0; keys no row reaches are zeroed in the
 * staged V tile, so their values never meet a product. A key that some rows of the sequence and kv
 * head see and others do not (the first and last tiles' edges) shares the products of the tile:
 * its NaN / Inf value elements reach those elements of the other rows too (p = 0 times NaN).
 */
#include "common/device.h"
#include "common/device_error.h"
#include "common/fragment.h"
#include "common/decode_args.h"

namespace r35a {

#ifndef R35A_DECODE_REG_STAGES_MAX
#define R35A_DECODE_REG_STAGES_MAX 3   /* register pipeline depth at most */
#endif
#ifndef R35A_DECODE_LDS_STAGES_MAX
#define R35A_DECODE_LDS_STAGES_MAX 4   /* shared-memory pipeline depth at most (NVIDIA), 16-bit K/V */
#endif
/* 8-bit tiles are half the bytes: as many more stages keep as many bytes in flight per wave (what
 * the memory latency asks for), where the shared memory holds them. */
#ifndef R35A_DECODE_LDS_STAGES_MAX_8BIT
#define R35A_DECODE_LDS_STAGES_MAX_8BIT 8
#endif

/* The KV pipeline of a tiling: registers (every fragment layer), or shared-memory stages filled by
 * asynchronous copies (layers that define R35A_FRAG_HAS_KV_PIPE_LDS). KV: the element format. */
template <bool LDS, int DS, int S, class E, class KV, int RW>
struct pick_pipe {
    typedef frag::kv_pipe_regs<DS, S, E, KV> type;   /* private to its wave whatever RW */
};
#if defined(R35A_FRAG_HAS_KV_PIPE_LDS)
template <int DS, int S, class E, class KV, int RW>
struct pick_pipe<true, DS, S, E, KV, RW> {
    typedef frag::kv_pipe_lds<DS, S, E, KV, RW> type;   /* shared by the RW row waves */
};
template <int DS, class E, class KV>
constexpr int lds_stages_fit(int bytes_per_wave) { return bytes_per_wave / frag::kv_pipe_lds<DS, 1, E, KV>::LDS_PER_STAGE; }
#else
template <int DS, class E, class KV>
constexpr int lds_stages_fit(int) { return 0; }
#endif

constexpr int cmax(int a, int b) { return a > b ? a : b; }
constexpr float LOG2E_F = 1.4426950408889634f;

/* Keeps the scheduler from hoisting every chunk's operand loads ahead of the products (on gfx11 it
 * would hold all V^T fragments of a tile at once: NC x 8 VGPRs). */
#ifndef R35A_DECODE_CHUNK_FENCE
#define R35A_DECODE_CHUNK_FENCE() sched_barrier()
#endif

template <class E, class KV, int D, int T, int KW, int DW, int RW, int WAVES>
struct decode_cfg {
    static constexpr int HEAD = D, KGROUPS = KW, DSLICES = DW, ROWWAVES = RW;
    static constexpr int NW = KW * DW * RW;   /* waves per workgroup */
    static constexpr int THREADS = 32 * NW;
    static constexpr int DS = D / DW;         /* head-dim slice per wave */
    static constexpr int NC = DS / 16;        /* 16-wide d chunks per wave */
    static constexpr int DC = D / 16;         /* d chunks of the whole head */
    static constexpr int R = 16 * T;          /* query rows per workgroup */
    static constexpr int TW = T / RW;         /* row tiles per wave: row wave rw has tiles rw x TW .. */
    static_assert(D % (16 * DW) == 0, "each wave needs whole 16-wide d chunks");
    static_assert(KW == 1 || KW == 2 || KW == 4 || KW == 8, "key groups merge in a binary tree");
    static_assert(T % RW == 0, "row waves: whole row tiles each");
    static_assert(NW <= 16 && (RW == 1 || KW * DW <= 15), "a workgroup of at most 16 waves; a named barrier per shared pipeline");
    /* LDS budget from the occupancy contract: WAVES waves on each of 4 SIMDs share a pool of LDS
     * (gfx11: a WGP's 128 KiB, at most 64 KiB per workgroup, static; NVIDIA: decode_args.h's
     * r35a_decode_nv_smem_bytes, dynamic shared memory the host launches with). */
    static constexpr int WGS_PER_POOL = (4 * WAVES + NW - 1) / NW;
#if defined(R35A_TARGET_AMDGCN)
    static constexpr int LDS_POOL = R35A_GFX11_LDS_PER_WGP / WGS_PER_POOL, LDS_MAX = R35A_GFX11_LDS_PER_WORKGROUP;
    static constexpr int LDS_BUDGET = LDS_POOL < LDS_MAX ? LDS_POOL : LDS_MAX;
#else
    static constexpr int LDS_BUDGET = r35a_decode_nv_smem_bytes(WAVES, NW);
#endif
    /* LDS, loop phase: each pipeline's region, the partial S^T tiles of every wave (DW > 1) and
     * one reduced S^T per key group and row wave. */
    static constexpr int PX_WAVE = DW > 1 ? TW * frag::ACC_NATIVE_FLOATS * 4 : 0;
    static constexpr int SR_BYTES = DW > 1 ? KW * RW * TW * frag::ACC_NATIVE_FLOATS * 4 : 0;
    static constexpr int EXCH_BYTES = NW * PX_WAVE + SR_BYTES;
    static constexpr int SLOPE_BYTES = R * 4;   /* each row's ALiBi slope (base 2), after everything else */
    /* Pipeline: shared-memory stages filled by asynchronous copies where the fragment layer has them
     * (NVIDIA) and at least two fit the LDS left, as many as fit up to R35A_DECODE_LDS_STAGES_MAX
     * (R35A_DECODE_LDS_STAGES_MAX_8BIT for 8-bit tiles);
     * else stages in registers (gfx11; NVIDIA's widest tilings), as many as the occupancy contract's
     * register budget leaves room for (estimate: Q^T and O^T fragments, S^T and P^T, ~32 for
     * addresses, row bounds and softmax state; a stage holds K as operand fragments and V as 16-byte
     * rows; from 2 to R35A_DECODE_REG_STAGES_MAX). The code-object checks hold the contract itself
     * (no scratch). */
    /* Q^T in LDS instead of registers for two row tiles (R = 32), whose Q^T fragments would take
     * T x NC x (8 on gfx11, 4 on NVIDIA) registers: read back per tile (gfx11: 2 ds_load_b128 per
     * fragment, no VALU; NVIDIA: one ldmatrix). NVIDIA always (the registers buy d slices of 128
     * without a partial-S^T exchange); gfx11 where the LDS budget holds it (the registers buy the
     * second KV stage of the 48-wide slices). Rows padded by 16 bytes. */
    static constexpr bool HAS_LDS_PIPE = lds_stages_fit<DS, E, KV>(1 << 30) > 0;
    /* Pipelines: one per wave, except that the RW row waves of a (key group, d slice) share one
     * where the stages are in shared memory (kv_pipe_lds: each copies its share of a tile). */
    static constexpr int PIPES = HAS_LDS_PIPE ? NW / RW : NW;
    static constexpr int QROW = DS + 8;
    static constexpr int Q_BYTES = DW * R * QROW * 2;
    static constexpr int REGION_1 = (frag::kv_pipe_regs<DS, 1, E, KV>::LDS_BYTES + 15) / 16 * 16;   /* gfx11's region */
#if defined(R35A_TARGET_AMDGCN)
    static constexpr int REG_BUDGET = (1536 / WAVES) / 24 * 24 < 256 ? (1536 / WAVES) / 24 * 24 : 256;
#else
    static constexpr int REG_BUDGET = 65536 / (128 * WAVES) < 255 ? 65536 / (128 * WAVES) : 255;
#endif
    static constexpr int AB_WORDS = (int)(sizeof(frag::ab) / 4);
    /* Register pipeline depth: as many stages as the budget holds after the estimate's base (Q^T in
     * registers or not), with a 25 % margin (what clang and ptxas use beyond the estimate, measured on
     * these tilings). A stage: K and V as the register pipeline holds them (16-bit: operand fragments
     * and 16-byte rows; 8-bit: the bytes as loaded). */
    typedef frag::kv_pipe_regs<DS, 1, E, KV> REG_PIPE_1;
    static constexpr int REG_STAGE = NC * (int)(sizeof(typename REG_PIPE_1::kraw) / 4) +
                                     REG_PIPE_1::VCH * (int)(sizeof(typename REG_PIPE_1::vraw) / 4);
    static constexpr int REG_REST = TW * NC * frag::ACC_ELEMS + TW * (frag::ACC_ELEMS + AB_WORDS / 2) + 32;
    static constexpr int REG_Q = TW * NC * AB_WORDS;   /* Q^T fragments held in registers */
    static constexpr int REG_FIT_QREG = (4 * REG_BUDGET / 5 - REG_REST - REG_Q) / REG_STAGE;
    static constexpr int REG_FIT_QLDS = (4 * REG_BUDGET / 5 - REG_REST) / REG_STAGE;
    /* ... and for one row tile on the register pipeline where two stages would not fit with Q^T in
     * registers (gfx11's 48-wide slices at 8 waves: 16-bit tiles). */
    static constexpr bool Q_LDS_WANTED = TW >= 2 || (!HAS_LDS_PIPE && REG_FIT_QREG < 2);
    static constexpr bool Q_LDS =
        Q_LDS_WANTED &&
        (HAS_LDS_PIPE ? lds_stages_fit<DS, E, KV>((LDS_BUDGET - SLOPE_BYTES - EXCH_BYTES - Q_BYTES) / PIPES) >= 2
                      : NW * (REGION_1 > PX_WAVE ? REGION_1 : PX_WAVE) + SR_BYTES + Q_BYTES + SLOPE_BYTES <= LDS_BUDGET);
    static constexpr int FREE = LDS_BUDGET - SLOPE_BYTES - EXCH_BYTES - (Q_LDS ? Q_BYTES : 0);
    static constexpr int LDS_FIT = lds_stages_fit<DS, E, KV>(FREE / PIPES);
    static constexpr bool USE_LDS = LDS_FIT >= 2;
    static_assert(USE_LDS || !HAS_LDS_PIPE || RW == 1, "shared row-wave pipelines need two shared-memory stages");
    static constexpr int REG_FIT = Q_LDS ? REG_FIT_QLDS : REG_FIT_QREG;
    static constexpr int REG_STAGES = REG_FIT < 2 ? 2 : REG_FIT > R35A_DECODE_REG_STAGES_MAX ? R35A_DECODE_REG_STAGES_MAX : REG_FIT;
    static constexpr int LDS_STAGES_MAX = kv_is_8bit<KV>::value ? R35A_DECODE_LDS_STAGES_MAX_8BIT : R35A_DECODE_LDS_STAGES_MAX;
    static constexpr int STAGES = USE_LDS ? (LDS_FIT < LDS_STAGES_MAX ? LDS_FIT : LDS_STAGES_MAX) : REG_STAGES;
    static_assert(STAGES >= 2, "the KV pipeline needs two stages");
    typedef typename pick_pipe<USE_LDS, DS, STAGES, E, KV, RW>::type pipe;
    static constexpr int PIPE_WAVE = (pipe::LDS_BYTES + 15) / 16 * 16;
    /* A register pipeline's LDS (the V^T tile) is busy only between prepare_v and release, after
     * the key group has read the wave's partial S^T: the two share the wave's region. Shared-memory
     * stages hold loads in flight at all times: the partial S^T goes after them, in the wave's region
     * (a private pipeline) or in an array of every wave's after the regions (a shared one). */
    static constexpr bool SHARED_PIPES = PIPES < NW;
    static constexpr bool PX_OVERLAY = !USE_LDS;
    static constexpr int PX_OFF = PX_OVERLAY ? 0 : PIPE_WAVE;
    static constexpr int WAVE_REGION = PX_OVERLAY     ? (PIPE_WAVE > PX_WAVE ? PIPE_WAVE : PX_WAVE)
                                       : SHARED_PIPES ? PIPE_WAVE
                                                      : PIPE_WAVE + PX_WAVE;
    static constexpr int PX_BASE = SHARED_PIPES ? PIPES * WAVE_REGION : PX_OFF;   /* wave w's partial S^T: */
    static constexpr int PX_STRIDE = SHARED_PIPES ? PX_WAVE : WAVE_REGION;        /* PX_BASE + w x PX_STRIDE */
    static constexpr int SR_OFF = PIPES * WAVE_REGION + (SHARED_PIPES ? NW * PX_WAVE : 0);
    static constexpr int Q_OFF = SR_OFF + SR_BYTES;   /* Q^T tiles: [DW][R][QROW] u16 */
    static constexpr int SLOPE_OFF = Q_OFF + (Q_LDS ? Q_BYTES : 0);   /* ALiBi: R floats */
    static constexpr int LOOP_BYTES = SLOPE_OFF + SLOPE_BYTES;
    /* Floats of the key group's S^T tiles (of one row wave) each wave reduces (reduce-scatter). */
    static constexpr int SLICE = TW * frag::ACC_NATIVE_FLOATS / DW;
    /* LDS, merge phase (reuses the loop's): KW/2 slots of a key group's accumulators and stats. */
    static constexpr int MSLOT_ACC = DW * T * NC * frag::ACC_NATIVE_FLOATS;   /* floats */
    static constexpr int MSLOT_FLOATS = MSLOT_ACC + 2 * R;
    static constexpr int MERGE_BYTES = KW > 1 ? (KW / 2) * MSLOT_FLOATS * 4 : 0;
    static constexpr int LDS_BYTES = LOOP_BYTES > MERGE_BYTES ? LOOP_BYTES : MERGE_BYTES;
    static_assert(LDS_BYTES <= LDS_BUDGET, "LDS use breaks the variant's occupancy contract (waves)");
};

/* Online-softmax state of one row tile of a wave: running max m (base 2), running sum share l,
 * and the O^T accumulators of the wave's d slice. */
template <int NC>
struct row_state {
    frag::colv m, l;
    frag::acc o[NC];
};

/* Merging two partial softmax states of one row whose base-2 maxima are ma and mb: returns the
 * merged max and sets the factors 2^(ma - mu), 2^(mb - mu) that rescale each side (mu: the max, or 0
 * where neither saw a key, so never -inf - -inf). A NaN state stays NaN. The key-group merge and
 * the split merge's cross-lane combine both use it. */
R35A_DEV float merge_scales(float ma, float mb, float &ca, float &cb) {
    const float mx = fmax(ma, mb), mu = mx == neg_inf() ? 0.f : mx;
    ca = exp2_fast(ma - mu);
    cb = exp2_fast(mb - mu);
    return mx;
}

/* Merges state b into a: both are partial softmaxes of disjoint key sets. */
template <int NC>
R35A_DEV void merge_state(row_state<NC> &a, const frag::colv &mb, const frag::colv &lb, const frag::acc *ob) {
    for (int c = 0; c < frag::NCOL; ++c) {
        float ca, cb;
        const float mx = merge_scales(a.m.v[c], mb.v[c], ca, cb);
        a.l.v[c] = a.l.v[c] * ca + lb.v[c] * cb;
        a.m.v[c] = mx;
        for (int k = 0; k < NC; ++k)
            for (int e = 0; e < frag::ACC_ELEMS; ++e)
                if (frag::acc_slot(e) == c) a.o[k].v[e] = a.o[k].v[e] * ca + ob[k].v[e] * cb;
    }
}

/* A wave's KV pipeline on its LDS region: a shared one (kv_pipe_lds with SHARERS > 1) also takes the
 * wave's share of each tile (its row wave) and the sharers' named barrier. */
template <class P>
R35A_DEV P make_pipe(unsigned char *region, int sharer, int barrier) {
    if constexpr (P::SHARERS > 1) {
        return P(region, sharer, barrier);
    } else {
        (void)sharer;
        (void)barrier;
        return P(region);
    }
}

/* The tiles one wave of a workgroup streams: split `split` of the sequence's whole tiles (split evenly
 * over the splits it uses, decode_args.h), every KW-th from the key group's kg: for the kernel body
 * and its table guess (the merge counts its records with the same decode_args.h rules). */
struct wave_tiles {
    int nsplit, t_begin, t_end, mine;   /* splits the sequence uses, the split's [t_begin, t_end), the wave's count */
};
R35A_DEV wave_tiles split_wave_tiles(int L, int M, int W, int planned, int min_tiles, int split, int kg, int kw) {
    wave_tiles r;
    const int tile_lo = r35a_decode_seq_tile_lo(L, M, W), ntiles = r35a_decode_seq_ntiles(L, M, W);
    r.nsplit = r35a_decode_seq_splits(planned, ntiles, min_tiles);
    r.t_begin = tile_lo + r35a_decode_split_first_tile(split, r.nsplit, ntiles);
    r.t_end = tile_lo + r35a_decode_split_first_tile(split + 1, r.nsplit, ntiles);
    r.mine = r.t_end - r.t_begin > kg ? (r.t_end - r.t_begin - kg + kw - 1) / kw : 0;
    return r;
}
/* Tile of a wave's step i, clamped to its last one (to t_begin for a wave without tiles). */
R35A_DEV int wave_tile(const wave_tiles &r, int i, int kg, int kw) {
    return r.mine > 0 ? r.t_begin + imin(i, r.mine - 1) * kw + kg : r.t_begin;
}

/* The first block of a wave's block-table entries, read before the sequence's metadata arrives:
 * the entries of the tiles the wave would take if the sequence had max_seq_len keys and one query
 * (a decode step at batch 1, as plans are made). tile_feed::start keeps them when the real tiles
 * turn out the same for every lane, so the first KV loads wait for one round trip (the metadata
 * and the table together) instead of two. Reads stay in bounds: the host checked that a row of the
 * table holds ceil(max_seq_len / page_size) entries. idx -1: no guess (the workgroup would have no
 * tiles). */
struct table_guess {
    int idx, entry;
};
R35A_DEV table_guess guess_table_block(const r35a_decode_args &a, int s, int split, int kg, int kw) {
    table_guess g;
    g.idx = -1;
    g.entry = 0;
    const wave_tiles r = split_wave_tiles(a.max_seq_len, 1, a.window, a.num_splits, a.min_split_tiles, split, kg, kw);
    if (split >= r.nsplit || r.mine <= 0) return g;   /* uniform */
    g.idx = wave_tile(r, lane_id(), kg, kw) * 16 / a.page_size;
    g.entry = load_i32(a.block_table + (i64)s * a.block_table_stride + g.idx);
    return g;
}

/* Where a wave's tiles come from: its tile i is tile t_begin + i * KW + kg of the sequence. The
 * block-table entries are read 32 tiles at a time, one per lane (page and slot of tile 32b + lane),
 * a block ahead of use, so issuing a tile never waits for its table entry; issue() picks the
 * entry with a lane read and starts the tile's loads. The one place KV addresses are formed (and
 * where a check of the entries against the cache's page count would go).
 * Pipelines that count their loads in order (gfx11's vmcnt: registers, P::ISSUE_ALWAYS) issue a
 * load every step: a step past the wave's last tile reloads that tile (a cache hit, never used), so
 * every path through the loop issues the same loads and the compiler's waits stay exact (a load
 * issued on one path only makes it wait for everything, the next tile's loads included). */
struct tile_feed {
    const int32_t *bt;
    const char *k_base, *v_base;   /* this kv head's d slice in page 0 slot 0 */
    i64 k_page, v_page, k_slot, v_slot;   /* bytes */
    int B, L, lo, kw, kg, num_pages;
    wave_tiles r;                 /* the wave's tiles */
    int page_cur, slot_cur, page_next, slot_next;
    bool bad;                     /* this lane read a block-table entry outside 0..num_pages-1 */

    R35A_MEMBER int tile_of(int i) const { return wave_tile(r, i, kg, kw); }
    /* block b's table index of this lane (its tile 32 b + lane) and the tile's first slot in the page */
    R35A_MEMBER int table_index(int b, int &slot) const {
        const int key = tile_of(32 * b + lane_id()) * 16, idx = key / B;
        slot = key - idx * B;
        return idx;
    }
    R35A_MEMBER int checked_page(int entry) {
        const bool ok = r35a_page_index_ok(entry, num_pages);   /* one compare per page entry */
        bad |= !ok;
        return ok ? entry : 0;
    }
    R35A_MEMBER void table_block(int b, int &page, int &slot) { page = checked_page(load_i32(bt + table_index(b, slot))); }
    /* block 0 from the guess where every lane's index agrees (uniform), else read now */
    R35A_MEMBER void start(const table_guess &guess) {
        const int idx = table_index(0, slot_cur);
        int entry = guess.entry;
        if (wave_any(idx != guess.idx)) entry = load_i32(bt + idx);
        page_cur = checked_page(entry);
        if (r.mine > 32) table_block(1, page_next, slot_next);
    }
    template <class P>
    R35A_MEMBER void issue(P &pipe, int slot, int i) {
        const int mine = r.mine;
        if (!P::ISSUE_ALWAYS && i >= mine) {   /* uniform: this wave has no tile i */
            pipe.skip(slot);
            return;
        }
        if (i > 0 && (i & 31) == 0 && i < mine) {   /* the next block of table entries; load the one after */
            page_cur = page_next;
            slot_cur = slot_next;
            if (mine > i + 32) table_block((i >> 5) + 1, page_next, slot_next);
        }
        const int tile = tile_of(i), lane = (i < mine ? i : imax(mine - 1, 0)) & 31;
        const i64 page = read_lane(page_cur, lane);
        const i64 slot_in_page = read_lane(slot_cur, lane);
        pipe.issue(slot, k_base + page * k_page + slot_in_page * k_slot, v_base + page * v_page + slot_in_page * v_slot,
                   k_slot, v_slot, imin(16, L - 16 * tile), imax(lo - 16 * tile, 0));
    }
};

/* Writes one accumulator fragment of O (row tile t, 16-wide d chunk ch of the head) scaled by inv,
 * only the rows that exist. O^T row m of the fragment is element P::v_d_of_m(m) of the chunk (the
 * pipeline's V^T operands may come with their d permuted). */
template <class E, class P>
R35A_DEV void store_o(const r35a_decode_args &a, const frag::acc &o, const frag::colv &inv, int t, int ch, int rg,
                      int R, int q0, int M, int g, const bool (&ok)[frag::NCOL]) {
    u16 *orow[frag::NCOL];
#pragma unroll
    for (int c = 0; c < frag::NCOL; ++c) {
        const int row = rg * R + t * 16 + frag::acc_n_of_slot(c);
        const int hl = ok[c] ? row / M : 0, i = row - hl * M;
        orow[c] = (u16 *)a.out + (i64)(q0 + i) * a.o_token_stride + (i64)(g * a.group_size + hl) * a.o_head_stride + 16 * ch;
    }
#pragma unroll
    for (int e = 0; e < frag::ACC_ELEMS; ++e) {
        const int sl = frag::acc_slot(e);
        if (ok[sl]) store_u16(orow[sl] + P::v_d_of_m(frag::acc_m(e)), E::from_f32(o.v[e] * inv.v[sl]));
    }
}

/* Softcap in base 2: s -> cap x tanh(s_nat / cap) x log2(e) for a raw dot s (s_nat = s x sl2 / log2 e),
 * with tanh|x| = (1 - e^-2|x|) / (1 + e^-2|x|) (device.h tanh_fast) and the constants folded:
 * 5 VALU and 2 transcendentals per logit. */
struct softcap_rule {
    float kneg, cap2;   /* -2 log2(e) / cap x (the natural scale), cap x log2(e) */
    R35A_DEV softcap_rule make(float cap, float sl2) {
        softcap_rule r;
        r.cap2 = cap * LOG2E_F;
        r.kneg = cap > 0.f ? -2.f * sl2 / cap : 0.f;   /* -2.885 x (s_nat / cap) = -2 x s x sl2 / cap */
        return r;
    }
    R35A_MEMBER float operator()(float s) const {
        const float t = exp2_fast(kneg * __builtin_fabsf(s));
        return __builtin_copysignf(__builtin_fmaf(-cap2, t, cap2) * rcp_fast(1.f + t), s);
    }
};

/* The one place a row is normalized: 1 / (its softmax denominator), the sink joining the denominator
 * here, once (m, l: the row's base-2 running max and sum over all its keys; sink2: its sink logit in
 * base 2, -inf for none). A row that saw no key (m = -inf) gives 0 whatever the sink; a NaN or +inf
 * sink gives NaN (the row's whole output). */
R35A_DEV float row_inv(float m, float l, float sink2) {
    if (m == neg_inf()) return 0.f;
    const float mu = fmax(m, sink2), cm = exp2_fast(m - mu);
    return cm * rcp_fast(l * cm + exp2_fast(sink2 - mu));
}

/* A query row's sink logit in base 2 (-inf without sinks). */
R35A_DEV float sink_base2(const r35a_decode_args &a, int h) { return a.sinks ? load_f32(a.sinks + h) * LOG2E_F : neg_inf(); }

/* Where a sequence's query rows and keys are: the one place its metadata is read. */
struct seq_meta {
    int q0, M, L;
};
R35A_DEV seq_meta read_seq(const r35a_decode_args &a, int s) {
    seq_meta m;
    m.q0 = a.query_start_loc[s];
    m.M = a.query_start_loc[s + 1] - m.q0;
    m.L = a.seq_lens[s];
    return m;
}

/* R35A_DECODE_TIMING=1 (a measurement build, NVIDIA only, never the default): thread 0 of each
 * workgroup that has tiles writes 16 u64 to the workspace past the planned bytes (the caller
 * allocates 128 bytes per workgroup of both launches): globaltimer ns at entry, loop end and exit
 * (the single-split path: before its O store), SM | kind << 32 (kind 0: a decode workgroup, 1: a
 * merge workgroup, whose slots follow the decode grid's and whose loop end is its exit). Read by
 * tools/decode_timeline.py (NOTES_h200 version 8). */
#if defined(R35A_DECODE_TIMING) && R35A_DECODE_TIMING && defined(R35A_TARGET_CUDA)
struct decode_timing {
    unsigned long long t0, t1;
    R35A_MEMBER static unsigned long long now() {
        unsigned long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        return t;
    }
    R35A_MEMBER void mark() { t1 = now(); }
    /* id: the workgroup's slot (decode: its grid index; merge: the decode grid's size + its index) */
    R35A_MEMBER void done(const r35a_decode_args &a, int rows_per_group, int head, bool merge) {
        if (threadIdx.x != 0 || !a.workspace) return;   /* a single-split plan passes no workspace */
        unsigned sm;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        const long long base = r35a_decode_workspace_bytes(a.num_seqs, a.num_kv_heads, a.num_row_groups, a.num_splits,
                                                           rows_per_group, head);
        long long id = ((long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
        if (merge) id += (long long)a.num_splits * gridDim.y * gridDim.z;
        unsigned long long *rec = (unsigned long long *)((char *)a.workspace + base) + 16 * id;
        rec[0] = t0;
        rec[1] = merge ? now() : t1;
        rec[2] = now();
        rec[3] = sm | ((unsigned long long)merge << 32);
    }
};
#define R35A_TIMING(...) __VA_ARGS__
#else
#define R35A_TIMING(...)
#endif

/* Writes one accumulator fragment of a split's partial O (row tile t, 16-wide d chunk ch of the head)
 * into its record's accumulator (decode_args.h: R x D f32, row-major, natural d order), times v_fac
 * (the V scale of an 8-bit cache, else 1), only the rows that exist. */
template <class P>
R35A_DEV void store_record(float *acc_rows, const frag::acc &o, float v_fac, int t, int ch, int D,
                           const bool (&ok)[frag::NCOL]) {
#pragma unroll
    for (int e = 0; e < frag::ACC_ELEMS; ++e) {
        const int sl = frag::acc_slot(e);
        const int row = t * 16 + frag::acc_n_of_slot(sl);
        if (ok[sl]) store_f32(acc_rows + (i64)row * D + 16 * ch + P::v_d_of_m(frag::acc_m(e)), o.v[e] * v_fac);
    }
}

/* The online merge of two partial softmax states of one row (disjoint records): (m, l, o) takes (mb,
 * lb, ob) in (merge_scales). Two states that saw no key stay (-inf, 0, 0). */
R35A_DEV void merge_partial(float &m, float &l, float (&o)[4], float mb, float lb, const float (&ob)[4]) {
    float ca, cb;
    const float mx = merge_scales(m, mb, ca, cb);
    l = l * ca + lb * cb;
#pragma unroll
    for (int j = 0; j < 4; ++j) o[j] = o[j] * ca + ob[j] * cb;
    m = mx;
}

/* One lane's share of the split merge: the online merge over records part, part + P, ... of the
 * sequence's nsplit (row n, elements d..d+3), RB records' loads in flight per round trip. */
template <int RB, int P>
R35A_DEV void merge_records(const float *grec, i64 rec_floats, int R, int D, int n, int d, int part, int nsplit,
                            float &m_run, float &l_run, float (&o)[4]) {
    for (int k0 = 0; k0 < nsplit; k0 += RB * P) {
        float mk[RB], lk[RB];
        u32x4 ak[RB];
#pragma unroll
        for (int r = 0; r < RB; ++r) {   /* records past nsplit re-read the last one (never weighed) */
            const float *rec = grec + imin(k0 + r * P + part, nsplit - 1) * rec_floats;
            mk[r] = load_f32(rec + n);
            lk[r] = load_f32(rec + R + n);
            ak[r] = load_b128(rec + 2 * R + (i64)n * D + d);
        }
        /* branch-free (a record past nsplit weighs 0), so no load is sunk to its use: all RB records'
         * loads are in flight together */
        float mb = m_run;
#pragma unroll
        for (int r = 0; r < RB; ++r) mb = k0 + r * P + part < nsplit ? fmax(mb, mk[r]) : mb;
        const float mu = mb == neg_inf() ? 0.f : mb;
        const float c = exp2_fast(m_run - mu);   /* 0 while no record had a key; NaN state stays NaN */
        l_run *= c;
#pragma unroll
        for (int j = 0; j < 4; ++j) o[j] *= c;
#pragma unroll
        for (int r = 0; r < RB; ++r) {
            const float w = k0 + r * P + part < nsplit ? exp2_fast(mk[r] - mu) : 0.f;
            l_run = __builtin_fmaf(w, lk[r], l_run);
            const u32x4 x = ak[r];
#pragma unroll
            for (int j = 0; j < 4; ++j) {   /* (clang-19 for gfx11 read element 0 for every j of
                                             * __builtin_bit_cast(float, ak[r][j]): the element is copied first) */
                const u32 bits = x[j];
                o[j] = __builtin_fmaf(w, __builtin_bit_cast(float, bits), o[j]);
            }
        }
        m_run = mb;
    }
}

/* The split merge (decode_args.h "the split merge"): P = r35a_decode_merge_lanes(planned splits)
 * adjacent lanes share one item, a row n of the row group and its 4 consecutive d values
 * 4 (item % (D / 4)). With P = 4 lane `part` runs an online merge over the records part, part + 4,
 * ... (merge_records: 4 or 16 records' loads in flight at a time, as the sequence's split count needs;
 * up to 64 records in one round trip), the lanes combine their partial states (two cross-lane steps),
 * normalize with the row's sink (row_inv) and each writes one of the 4 outputs; with P = 1 (at most 8
 * splits) one lane merges all records in one round trip and writes the 4. No LDS, no barrier; lanes
 * whose item has no row compute on row 0 and write nothing (the cross-lane steps need every lane of
 * the wave). */
template <class E>
R35A_DEV void decode_merge(const r35a_decode_args &a) {
    R35A_TIMING(decode_timing tm; tm.t0 = decode_timing::now();)
    /* Everything up to the records' loads reads only the call's inputs, so it runs before
     * grid_dependency_wait (on NVIDIA the workgroups are resident during the decode launch's tail):
     * the metadata's round trip is off the critical path. */
    const int s = block_z(), y = block_y();
    const int g = y / a.num_row_groups, rg = y - g * a.num_row_groups;
    const seq_meta sq = read_seq(a, s);
    const int q0 = sq.q0, M = sq.M, L = sq.L;
    /* the decode launch wrote these rows (NaN for bad metadata, directly for one split) or skips them:
     * every exit here is uniform over the workgroup */
    if (r35a_paged_sequence_error(s, a.num_seqs, q0, q0 + M, L, a.num_tokens, a.query_len_bound, a.max_seq_len) !=
        R35A_DEVICE_ERROR_NONE)
        return;
    if (M <= 0 || M > a.max_query_len) return;
    const int nsplit = r35a_decode_seq_splits(a.num_splits, r35a_decode_seq_ntiles(L, M, a.window), a.min_split_tiles);
    if (nsplit <= 1) return;
    const int R = a.rows_per_group, D = a.head_size, G = a.group_size, rows = G * M;
    if (rg * R >= rows) return;
    const int P = r35a_decode_merge_lanes(a.num_splits);   /* 1 or 4, uniform */
    const int t = block_x() * R35A_DECODE_MERGE_THREADS + thread_x();
    const int item = P == 4 ? t >> 2 : t, part = t - item * P;
    const int n_item = item / (D / 4), d = 4 * (item - n_item * (D / 4));
    const bool live = n_item < R && rg * R + n_item < rows;
    const int n = live ? n_item : 0;   /* row 0 of the group exists (rg * R < rows) */
    if (!wave_any(live)) return;       /* a whole wave without a row (uniform) */

    const int row = rg * R + n, hl = row / M, i = row - hl * M;
    const float sink2 = sink_base2(a, g * G + hl);
    const i64 rec_floats = r35a_decode_record_floats(R, D);
    grid_dependency_wait();   /* the decode launch's records (programmatic dependent launch on NVIDIA) */
    const float *const grec = (const float *)a.workspace + (((i64)s * a.num_kv_heads + g) * a.num_row_groups + rg) *
                                                               a.num_splits * rec_floats;
    float m_run = neg_inf(), l_run = 0.f, o[4] = {0.f, 0.f, 0.f, 0.f};
    /* as many loads per lane and round trip as its records need (uniform: the sequence's nsplit) */
    if (P == 1) {   /* at most R35A_DECODE_MERGE_FEW_SPLITS records */
        if (nsplit <= 4)
            merge_records<4, 1>(grec, rec_floats, R, D, n, d, 0, nsplit, m_run, l_run, o);
        else
            merge_records<8, 1>(grec, rec_floats, R, D, n, d, 0, nsplit, m_run, l_run, o);
    } else {
        const int per_lane = (nsplit + 3) / 4;
        if (per_lane <= 4)
            merge_records<4, 4>(grec, rec_floats, R, D, n, d, part, nsplit, m_run, l_run, o);
        else
            merge_records<16, 4>(grec, rec_floats, R, D, n, d, part, nsplit, m_run, l_run, o);
    }
    /* the 4 lanes of an item combine their states: after the two steps every one holds the whole */
    if (P == 4) {
        float ob[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) ob[j] = lane_xor_row<1>(o[j]);
        merge_partial(m_run, l_run, o, lane_xor_row<1>(m_run), lane_xor_row<1>(l_run), ob);
#pragma unroll
        for (int j = 0; j < 4; ++j) ob[j] = lane_xor_row<2>(o[j]);
        merge_partial(m_run, l_run, o, lane_xor_row<2>(m_run), lane_xor_row<2>(l_run), ob);
    }
    /* l_run > 0 whenever a record saw a key (its max contributes 1); row_inv gives 0 for a row that
     * saw none and joins the sink */
    const float inv = row_inv(m_run, l_run, sink2);
    u16 *const out = (u16 *)a.out + (i64)(q0 + i) * a.o_token_stride + (i64)(g * G + hl) * a.o_head_stride + d;
    if (P == 4) {
        float mine = o[0];   /* lane `part` writes element d + part (a select, no indexed register) */
#pragma unroll
        for (int j = 1; j < 4; ++j) mine = part == j ? o[j] : mine;
        if (live) store_u16(out + part, E::from_f32(mine * inv));
    } else if (live) {
        /* Four adjacent elements, stored one by one: a row may start at any even byte (O strides are
         * free, e.g. odd), and clang merges four adjacent u16 stores into one global_store_b64 that
         * relies on the driver's unaligned-access mode (the gfx11 emulator, like a strict mode, drops
         * the low address bits: the row landed 2 bytes early, found by the emulator fuzz). The opaque
         * offsets keep the stores apart; the merge writes a few bytes per item, so nothing is lost. */
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            int at = j;
            opaque(at);
            store_u16(out + at, E::from_f32(o[j] * inv));
        }
    }
    R35A_TIMING(tm.done(a, R, D, true);)
}

/* A sequence whose metadata fails its check: its rows of kv head g become NaN (all M tokens, every
 * one of the G query heads, whatever the row groups and splits cover) when its query_start_loc
 * range is sound, and thread 0 of kv head 0 records it. Called by the workgroup of split 0 and row
 * group 0 of each kv head; the error path only. */
template <class E, int D, int THREADS>
R35A_DEV void bad_sequence(const r35a_decode_args &a, u32 code, int s, int g, int q0, int q1) {
    if (code != R35A_DEVICE_ERROR_QUERY_START_LOC) {
        const int M = q1 - q0, G = a.group_size;
        const u16 nan = E::from_f32(quiet_nan());
        for (i64 idx = thread_x(); idx < (i64)M * G * D; idx += THREADS) {
            const int d = (int)(idx % D), row = (int)(idx / D), hl = row % G, i = row / G;
            store_u16((u16 *)a.out + (i64)(q0 + i) * a.o_token_stride + (i64)(g * G + hl) * a.o_head_stride + d, nan);
        }
    }
    if (g == 0 && thread_x() == 0) report_bad_data(a.error, code, (u32)s);
}

/* The kernel body (C: decode_cfg<E, KV, ...>); smem: the kernel's LDS (C::LDS_BYTES). */
template <class C, class E, class KV>
R35A_DEV void decode_body(const r35a_decode_args &a, unsigned char *smem) {
    constexpr int NC = C::NC, DS = C::DS, R = C::R, S = C::STAGES, KW = C::KGROUPS, DW = C::DSLICES,
                  D = C::HEAD, T = C::R / 16, RW = C::ROWWAVES, TW = C::TW;
    constexpr bool B8 = kv_is_8bit<KV>::value;
    constexpr int EB = B8 ? 1 : 2;   /* bytes per K/V element */
    typedef typename C::pipe P;

    /* wave w: row wave rw (row tiles t0 .. t0 + TW - 1 of the R rows), key group kg, d slice dg */
    const int w = wave_id();
    const int rw = RW > 1 ? w / (KW * DW) : 0, kg = RW > 1 ? (w / DW) % KW : w / DW, dg = w % DW;
    const int t0 = rw * TW;
    const int split = block_x(), y = block_y(), s = block_z();
    R35A_TIMING(decode_timing tm; tm.t0 = decode_timing::now();)
    const int g = y / a.num_row_groups, rg = y - g * a.num_row_groups;

    /* the first table entries are in flight with the metadata (guess_table_block) */
    const table_guess guess = guess_table_block(a, s, split, kg, KW);
    const seq_meta sq = read_seq(a, s);
    const int q0 = sq.q0, M = sq.M, L = sq.L;
    /* metadata the host never saw: checked before anything that depends on it is read (the guess
     * depends on host-checked values only) */
    const u32 bad = r35a_paged_sequence_error(s, a.num_seqs, q0, q0 + M, L, a.num_tokens, a.query_len_bound,
                                              a.max_seq_len);
    if (bad != R35A_DEVICE_ERROR_NONE) {
        if (split == 0 && rg == 0) bad_sequence<E, D, C::THREADS>(a, bad, s, g, q0, q0 + M);
        return;
    }
    if (M <= 0 || M > a.max_query_len) return;            /* no rows, or the generic kernel's */
    const int G = a.group_size;
    const int rows = G * M;
    if (rg * R >= rows) return;

    /* Keys the rows reach: [lo, L); whole tiles [tile_lo, tile_hi) split evenly over the splits
     * this sequence uses (the planned count or fewer: decode_args.h). */
    const int W = a.window;
    const int lo = (int)r35a_window_first_key(L - M, W);
    const wave_tiles wt = split_wave_tiles(L, M, W, a.num_splits, a.min_split_tiles, split, kg, KW);
    const int nsplit = wt.nsplit;
    if (split >= nsplit) return;                          /* the merge kernel reads nsplit records */
    const int t_begin = wt.t_begin, t_end = wt.t_end;
    const int niter = t_end > t_begin ? (t_end - t_begin + KW - 1) / KW : 0;
    /* Tiles inside [full_lo, full_hi] are visible to every row: no mask needed. */
    const int full_lo = (int)r35a_window_first_key(L - 1, W), full_hi = L - M;

    /* ---- per-row (accumulator column) information ---- */
    int row_hi[TW][frag::NCOL];   /* the row's query position p (its last key); -1: padding, sees nothing */
    bool row_ok[TW][frag::NCOL];   /* [t]: the wave's row tile t0 + t */
    /* the logit transform: softcap (cap x tanh(s / cap)) then ALiBi (slope x (j - p)), in base 2 */
    const bool capped = a.logit_softcap > 0.f, alibi = a.alibi_slopes != nullptr;
    /* each row's ALiBi slope (base 2) in LDS: read per tile only by calls with ALiBi, no register
     * held across the loop */
    float *const slopes = (float *)(smem + C::SLOPE_OFF);
    if (alibi) {
        for (int r = thread_x(); r < R; r += C::THREADS)
            slopes[r] = load_f32(a.alibi_slopes + g * G + imin(rg * R + r, rows - 1) / M) * LOG2E_F;
        block_sync();
    }
#pragma unroll
    for (int t = 0; t < TW; ++t)
#pragma unroll
        for (int c = 0; c < frag::NCOL; ++c) {
            const int row = rg * R + (t0 + t) * 16 + frag::acc_n_of_slot(c);
            const bool ok = row < rows;
            const int i = ok ? row % M : 0;
            const int p = L - M + i;
            row_ok[t][c] = ok;
            row_hi[t][c] = ok ? p : -1;                          /* a padding row sees nothing */
        }
    /* Scales: a raw dot of the products times sl2 is the base-2 logit. 8-bit caches: the kv head's K
     * scale and the conversion's unit join it, its V scale (v_fac) the output normalization. Without
     * a transform the scale rides in the exponent (xs = sl2); with one, the transform produces base-2
     * logits and xs = 1. */
    float sl2 = a.scale_log2, v_fac = 1.f;
    if constexpr (B8) {
        const int si = a.kv_scale_per_head ? g : 0;
        sl2 *= load_f32(a.k_scale + si) * kv8_unit<KV>();
        v_fac = load_f32(a.v_scale + si) * kv8_unit<KV>();
    }
    const float xs = capped || alibi ? 1.f : sl2;
    const softcap_rule cap = softcap_rule::make(a.logit_softcap, sl2);

    /* ---- the KV pipeline starts first: its table entries and first tiles are in flight while Q loads ---- */
    /* a shared pipeline: the region of the (key group, d slice), this wave's share of each tile,
     * named barrier 1 + its index */
    const int pipe_index = C::SHARED_PIPES ? kg * DW + dg : w;
    P pipe = make_pipe<P>(smem + pipe_index * C::WAVE_REGION, rw, 1 + pipe_index);
    tile_feed feed;
    feed.bt = a.block_table + (i64)s * a.block_table_stride;
    feed.k_base = (const char *)a.k_cache + ((i64)g * a.k_head_stride + dg * DS) * EB;
    feed.v_base = (const char *)a.v_cache + ((i64)g * a.v_head_stride + dg * DS) * EB;
    feed.k_page = a.k_page_stride * EB;
    feed.v_page = a.v_page_stride * EB;
    feed.k_slot = a.k_slot_stride * EB;
    feed.v_slot = a.v_slot_stride * EB;
    feed.B = a.page_size;
    feed.L = L;
    feed.lo = lo;
    feed.num_pages = a.num_pages;
    feed.bad = false;
    feed.r = wt;
    feed.kw = KW;
    feed.kg = kg;
    if (niter > 0) {
        feed.start(guess);
#pragma unroll
        for (int p = 0; p < S - 1; ++p) feed.issue(pipe, p, p);
    }

    /* ---- Q^T fragments of this wave's d slice (B operand: vector = query row) ---- */
    frag::ab qf[C::Q_LDS ? 1 : TW][NC];
    u16 *const qs = (u16 *)(smem + C::Q_OFF) + dg * R * C::QROW;   /* Q_LDS: this d slice's R rows */
    if constexpr (C::Q_LDS) {
        /* R rows x DS of each d slice, 16 bytes per thread and step; padding rows are zeros */
        constexpr int CPR = DS / 8, CHUNKS = DW * R * CPR;
        for (int idx = thread_x(); idx < CHUNKS; idx += C::THREADS) {
            const int sl = idx / (R * CPR), rem = idx - sl * R * CPR, r = rem / CPR, d8 = rem - r * CPR;
            const int row = rg * R + r;
            const int rr = imin(row, rows - 1), hl = rr / M, i = rr - hl * M;
            u32x4 x = load_b128((const u16 *)a.q + (i64)(q0 + i) * a.q_token_stride +
                                (i64)(g * G + hl) * a.q_head_stride + sl * DS + 8 * d8);
            if (row >= rows) x = u32x4{0u, 0u, 0u, 0u};
            u16 *const dst = (u16 *)(smem + C::Q_OFF) + (sl * R + r) * C::QROW;
            if constexpr (!P::K_PERM) {
                *(u32x4 *)(dst + 8 * d8) = x;
            } else {   /* the k order of the pipeline's K operands: words moved within their 16-element chunk */
                u32 *const chunk = (u32 *)(dst + 16 * (d8 >> 1));
#pragma unroll
                for (int q = 0; q < 4; ++q) chunk[frag::k8_q_word_pos(4 * (d8 & 1) + q)] = x[q];
            }
        }
        block_sync();
    } else {
#pragma unroll
        for (int t = 0; t < TW; ++t)
#pragma unroll
            for (int c = 0; c < NC; ++c)
                qf[t][c] = frag::load_vec16_global_u16<P::K_PERM>(
                    [&](int n) -> const void * {
                        const int row = imin(rg * R + (t0 + t) * 16 + n, rows - 1);   /* padding rows: a real row */
                        const int hl = row / M, i = row - hl * M;
                        const i64 off = (i64)(q0 + i) * a.q_token_stride + (i64)(g * G + hl) * a.q_head_stride + dg * DS + 16 * c;
                        return (const u16 *)a.q + off;
                    },
                    [&](int n) { return rg * R + (t0 + t) * 16 + n < rows; });
    }
    /* Q^T fragment (the wave's row tile t, d chunk c) of this wave's slice */
    auto q_frag = [&](int t, int c) -> frag::ab {
        if constexpr (C::Q_LDS) return frag::load_vec16_lds(qs + (t0 + t) * 16 * C::QROW + 16 * c, C::QROW);
        else return qf[t][c];
    };

    row_state<NC> st[TW];
#pragma unroll
    for (int t = 0; t < TW; ++t) {
        st[t].m = frag::colv_fill(neg_inf());
        st[t].l = frag::colv_fill(0.f);
#pragma unroll
        for (int c = 0; c < NC; ++c) st[t].o[c] = frag::acc_zero();
    }

    float *const px = (float *)(smem + C::PX_BASE + w * C::PX_STRIDE);   /* this wave's partial S^T */
    /* the reduced S^T of this wave's (row wave, key group) */
    float *const sr = (float *)(smem + C::SR_OFF) + (rw * KW + kg) * TW * frag::ACC_NATIVE_FLOATS;

    for (int it0 = 0; it0 < niter; it0 += S) {
#pragma unroll
        for (int u = 0; u < S; ++u) {   /* stage u holds the wave's tile it0 + u */
            const int it = it0 + u;
            if (it >= niter) break;
            /* The loads of tile it + S - 1 start before this tile is waited for: S tiles in flight
             * at this point, S - 1 during the products (a shared pipeline waits first: its barrier
             * frees the slot the issue refills; S - 1 in flight either way). */
            if constexpr (!P::WAIT_FIRST) feed.issue(pipe, (u + S - 1) % S, it + S - 1);
            pipe.wait(u);
            if constexpr (P::WAIT_FIRST) feed.issue(pipe, (u + S - 1) % S, it + S - 1);
            const int tile = t_begin + it * KW + kg;
            const bool active = tile < t_end;                 /* uniform per wave */
            const int j0 = tile * 16;

            frag::acc sacc[TW];
            if (active) {
                const frag::ab k0 = pipe.k_operand(u, 0);
#pragma unroll
                for (int t = 0; t < TW; ++t) sacc[t] = frag::mma<E>(k0, q_frag(t, 0), frag::acc_zero());
#pragma unroll
                for (int c = 1; c < NC; ++c) {
                    const frag::ab kf = pipe.k_operand(u, c);
#pragma unroll
                    for (int t = 0; t < TW; ++t) sacc[t] = frag::mma<E>(kf, q_frag(t, c), sacc[t]);
                }
            }
            if constexpr (DW > 1) {
                /* Add the DW partial S^T tiles of the key group: reduce-scatter (each wave sums a
                 * 1/DW slice over the DW partials) then every wave reads the whole sum, so all DW
                 * waves hold bit-identical scores and make identical softmax decisions. */
                if (active)
#pragma unroll
                    for (int t = 0; t < TW; ++t) frag::acc_store_lds(px + t * frag::ACC_NATIVE_FLOATS, sacc[t]);
                block_sync_lds();
                if (active) {
                    /* the partial S^T of the DW waves of this (row wave, key group) */
                    const float *grp = (const float *)(smem + C::PX_BASE + (rw * KW + kg) * DW * C::PX_STRIDE);
#pragma unroll
                    for (int kk = 0; kk < (C::SLICE + 31) / 32; ++kk) {
                        /* (a slice narrower than the wave: the spare lanes redo its last element) */
                        const int f = dg * C::SLICE + imin(lane_id() + 32 * kk, C::SLICE - 1);
                        float sum = grp[f];
#pragma unroll
                        for (int d = 1; d < DW; ++d) sum += grp[d * (C::PX_STRIDE / 4) + f];
                        sr[f] = sum;
                    }
                }
                block_sync_lds();
                if (active)
#pragma unroll
                    for (int t = 0; t < TW; ++t) sacc[t] = frag::acc_load_lds(sr + t * frag::ACC_NATIVE_FLOATS);
            }
            if (!active) continue;

            /* Logits: the transform (only in calls that have one: uniform branches), then the masks
             * (a select: keys past the end may be NaN). Without a transform the scale is folded into
             * the exponent below. */
            if (capped) {
#pragma unroll
                for (int t = 0; t < TW; ++t)
#pragma unroll
                    for (int e = 0; e < frag::ACC_ELEMS; ++e) sacc[t].v[e] = cap(sacc[t].v[e]);
            } else if (alibi) {
#pragma unroll
                for (int t = 0; t < TW; ++t)
#pragma unroll
                    for (int e = 0; e < frag::ACC_ELEMS; ++e) sacc[t].v[e] *= sl2;
            }
            if (alibi) {
#pragma unroll
                for (int t = 0; t < TW; ++t) {
                    /* slope x (j - p): j - p of element e is the column's j0 + m(0) - p plus a constant */
                    float sb[frag::NCOL], sl[frag::NCOL];
#pragma unroll
                    for (int c = 0; c < frag::NCOL; ++c) {
                        sl[c] = slopes[(t0 + t) * 16 + frag::acc_n_of_slot(c)];
                        sb[c] = sl[c] * (float)(j0 + frag::acc_m(0) - row_hi[t][c]);
                    }
#pragma unroll
                    for (int e = 0; e < frag::ACC_ELEMS; ++e) {
                        const int c = frag::acc_slot(e);
                        sacc[t].v[e] = __builtin_fmaf(sl[c], (float)(frag::acc_m(e) - frag::acc_m(0)), sacc[t].v[e] + sb[c]);
                    }
                }
            }
            const bool need_mask = !(j0 >= full_lo && j0 + 15 <= full_hi);
            frag::ab pf[TW];
#pragma unroll
            for (int t = 0; t < TW; ++t) {
                frag::acc &sc = sacc[t];
                if (need_mask)
#pragma unroll
                    for (int e = 0; e < frag::ACC_ELEMS; ++e) {
                        const int j = j0 + frag::acc_m(e), c = frag::acc_slot(e);
                        if (j > row_hi[t][c] || j < (int)r35a_window_first_key(row_hi[t][c], W)) sc.v[e] = neg_inf();
                    }
                const frag::colv mx = frag::col_max(sc);
                frag::colv corr, mu;
                bool moved = false;
#pragma unroll
                for (int c = 0; c < frag::NCOL; ++c) {
                    const float mn = fmax(st[t].m.v[c], mx.v[c] * xs);
                    mu.v[c] = mn == neg_inf() ? 0.f : mn;
                    corr.v[c] = exp2_fast(st[t].m.v[c] - mu.v[c]);
                    moved |= mn != st[t].m.v[c];
                    st[t].m.v[c] = mn;
                }
#pragma unroll
                for (int e = 0; e < frag::ACC_ELEMS; ++e)
                    sc.v[e] = exp2_fast(__builtin_fmaf(sc.v[e], xs, -mu.v[frag::acc_slot(e)]));
                const frag::colv ps = frag::col_sum_share(sc);
#pragma unroll
                for (int c = 0; c < frag::NCOL; ++c) st[t].l.v[c] = st[t].l.v[c] * corr.v[c] + ps.v[c];
                /* O is rescaled only when a row's max moved (rare after the first tiles; exact either
                 * way: an unmoved max gives corr = 1). */
                if (wave_any(moved))
#pragma unroll
                    for (int k = 0; k < NC; ++k)
#pragma unroll
                        for (int e = 0; e < frag::ACC_ELEMS; ++e) st[t].o[k].v[e] *= corr.v[frag::acc_slot(e)];
                pf[t] = frag::b_from_acc<E>(sc);
            }
            pipe.prepare_v(u);
#pragma unroll
            for (int c = 0; c < NC; ++c) {
                const frag::ab vf = pipe.v_operand(u, c);
#pragma unroll
                for (int t = 0; t < TW; ++t) st[t].o[c] = frag::mma<E>(vf, pf[t], st[t].o[c]);
                R35A_DECODE_CHUNK_FENCE();
            }
            pipe.release(u);
        }
    }
    pipe.drain();
    /* the split merge launched after this kernel may get its workgroups resident once every workgroup
     * is past its loop (they wait for this kernel's end in grid_dependency_wait): its launch overlaps
     * this kernel's tail (measured on the H200: triggered at the kernel's entry instead, its waiting
     * workgroups slowed long contexts by 2-5 %) */
    grid_launch_dependents();
#pragma unroll
    for (int t = 0; t < TW; ++t) st[t].l = frag::col_sum_finish(st[t].l);
    /* A block-table entry outside the cache: page 0 was streamed in its place; NaN state makes the
     * rows of every merge NaN (NaN x 0 stays NaN). Uniform per wave; the error path only. */
    if (wave_any(feed.bad)) {
#pragma unroll
        for (int t = 0; t < TW; ++t) {
            st[t].l = frag::colv_fill(quiet_nan());
#pragma unroll
            for (int c = 0; c < NC; ++c)
#pragma unroll
                for (int e = 0; e < frag::ACC_ELEMS; ++e) st[t].o[c].v[e] = quiet_nan();
        }
        if (lane_id() == 0) report_bad_data(a.error, R35A_DEVICE_ERROR_PAGE_INDEX, (u32)s);
    }

    /* ---- merge the key groups of the workgroup (binary tree through LDS) ---- */
    if constexpr (KW > 1) {
        float *const mb = (float *)smem;
        for (int step = 1; step < KW; step *= 2) {
            block_sync();   /* previous users of this LDS (the loop, the previous round) are done */
            if (kg % (2 * step) == step) {
                float *slot = mb + (kg / (2 * step)) * C::MSLOT_FLOATS;
                for (int t = 0; t < TW; ++t)
                    for (int c = 0; c < NC; ++c)
                        frag::acc_store_lds(slot + ((dg * T + t0 + t) * NC + c) * frag::ACC_NATIVE_FLOATS, st[t].o[c]);
                if (dg == 0)
                    for (int t = 0; t < TW; ++t) {
                        frag::colv_store(slot + C::MSLOT_ACC + (t0 + t) * 16, st[t].m, false);
                        frag::colv_store(slot + C::MSLOT_ACC + R + (t0 + t) * 16, st[t].l, false);
                    }
            }
            block_sync();
            if (kg % (2 * step) == 0) {
                const float *slot = mb + (kg / (2 * step)) * C::MSLOT_FLOATS;
                for (int t = 0; t < TW; ++t) {
                    frag::acc ob[NC];
                    for (int c = 0; c < NC; ++c)
                        ob[c] = frag::acc_load_lds(slot + ((dg * T + t0 + t) * NC + c) * frag::ACC_NATIVE_FLOATS);
                    merge_state<NC>(st[t], frag::colv_load(slot + C::MSLOT_ACC + (t0 + t) * 16, false),
                                    frag::colv_load(slot + C::MSLOT_ACC + R + (t0 + t) * 16, false), ob);
                }
            }
        }
    }

    R35A_TIMING(tm.mark();)
    /* ---- splits: publish the partial record; the merge kernel, launched next, combines them ---- */
    if (nsplit > 1) {
        if (kg == 0) {
            const i64 group = ((i64)s * a.num_kv_heads + g) * a.num_row_groups + rg;
            const i64 rec_floats = r35a_decode_record_floats(R, D);
            float *const rec = (float *)a.workspace + (group * a.num_splits + split) * rec_floats;
            /* unrolled, no break: st[] indexed by a run-time t would go to local memory (NVIDIA) */
#pragma unroll
            for (int t = 0; t < TW; ++t) {
                if (rg * R + (t0 + t) * 16 >= rows) continue;       /* a row tile of padding only */
                if (dg == 0) {
                    frag::colv_store(rec + (t0 + t) * 16, st[t].m, true);
                    frag::colv_store(rec + R + (t0 + t) * 16, st[t].l, true);
                }
#pragma unroll
                for (int c = 0; c < NC; ++c)
                    store_record<P>(rec + 2 * R, st[t].o[c], v_fac, t0 + t, dg * NC + c, D, row_ok[t]);
            }
        }
        R35A_TIMING(tm.done(a, R, D, false);)
        return;
    }
    R35A_TIMING(tm.done(a, R, D, false);)
    if (kg != 0) return;

    /* ---- one split: O = O^T / (l + the sink's share), zeros for rows that saw no key ---- */
#pragma unroll
    for (int t = 0; t < TW; ++t) {
        frag::colv inv;
#pragma unroll
        for (int c = 0; c < frag::NCOL; ++c) {
            const int row = imin(rg * R + (t0 + t) * 16 + frag::acc_n_of_slot(c), rows - 1);
            inv.v[c] = row_inv(st[t].m.v[c], st[t].l.v[c], sink_base2(a, g * G + row / M)) * v_fac;
        }
#pragma unroll
        for (int c = 0; c < NC; ++c) store_o<E, P>(a, st[t].o[c], inv, t0 + t, dg * NC + c, rg, R, q0, M, g, row_ok[t]);
    }
}

/* The element format of a variant's K and V: kv16 (the Q/O dtype E), fp8, int8 (device.h). */
struct kv_kv16_t {};
template <class E, class K>
struct kv_type {
    typedef K type;
};
template <class E>
struct kv_type<E, kv_kv16_t> {
    typedef E type;
};

/* The kernel of one variant: one body, its LDS declared here.
 * NVIDIA: dynamic shared memory, launched with exactly C::LDS_BYTES (<name>_lds_bytes below; at most
 * r35a_decode_nv_smem_bytes(), the contract's share; the static 48 KiB would cap the cp.async stages). */
template <class E, class KV, int D, int T, int KW, int DW, int RW, int WAVES>
R35A_DEV void decode_kernel(const r35a_decode_args &a) {
    typedef decode_cfg<E, KV, D, T, KW, DW, RW, WAVES> C;
#if defined(R35A_TARGET_CUDA)
    extern __shared__ __align__(16) unsigned char smem_dynamic[];
    unsigned char *const smem = smem_dynamic;
#else
    __shared__ __attribute__((aligned(16))) unsigned char smem[C::LDS_BYTES];
#endif
    decode_body<C, E, KV>(a, smem);
}

} /* namespace r35a */

/* NVIDIA: the dynamic shared memory a variant is launched with is exactly what its layout uses,
 * published as the device global <name>_lds_bytes, which the host reads at module load
 * (src/gpu_runtime.c): the one place the size is decided is decode_cfg. (A launch with the whole
 * budget of the occupancy contract instead would let fewer workgroups share an SM than fit.) */
#if defined(R35A_TARGET_CUDA)
#define R35A_DECODE_LDS_SYMBOL(name, E, KV, D, T, KW, DW, RW, WAVES)                                        \
    extern "C" __device__ const int name##_lds_bytes = r35a::decode_cfg<E, KV, D, T, KW, DW, RW, WAVES>::LDS_BYTES;
#else
#define R35A_DECODE_LDS_SYMBOL(name, E, KV, D, T, KW, DW, RW, WAVES)
#endif
#define R35A_DECODE_KV_TYPE(dtype, kv) r35a::kv_type<r35a::dtype##_t, r35a::kv_##kv##_t>::type

/* One extern "C" kernel per variant; the symbol is the variant name. */
#define R35A_DECODE_VARIANT(arch, name, dtype, kv, D, R, KW, DW, RW, WAVES)                                \
    R35A_DECODE_LDS_SYMBOL(name, r35a::dtype##_t, R35A_DECODE_KV_TYPE(dtype, kv), D, (R) / 16, KW, DW, RW, WAVES) \
    R35A_KERNEL R35A_KERNEL_BOUNDS(32 * (KW) * (DW) * (RW), WAVES) void name(r35a_decode_args a) {         \
        r35a::decode_kernel<r35a::dtype##_t, R35A_DECODE_KV_TYPE(dtype, kv), D, (R) / 16, KW, DW, RW, WAVES>(a); \
    }
/* A tool may point R35A_DECODE_VARIANT_LIST at its own list of R35A_DECODE_VARIANT(...) lines
 * (tools/tune_variants.py compiles candidate tilings this way). */
#ifdef R35A_DECODE_VARIANT_LIST
#include R35A_DECODE_VARIANT_LIST
#else
#include "../variants/variants.def"
#endif
#undef R35A_DECODE_VARIANT
#undef R35A_DECODE_KV_TYPE
#undef R35A_DECODE_LDS_SYMBOL

/* The split merge of every variant of a Q/O dtype (decode_args.h "the split merge"): launched after a
 * decode kernel whose plan has more than one split, with the same argument struct. No LDS; 4 waves
 * per SIMD at least: 16 records' loads in flight take ~100 registers (at 8 waves, NVIDIA's 64
 * registers spilled 392 bytes). */
R35A_KERNEL R35A_KERNEL_BOUNDS(R35A_DECODE_MERGE_THREADS, 4) void decode_merge_f16(r35a_decode_args a) {
    r35a::decode_merge<r35a::f16_t>(a);
}
R35A_KERNEL R35A_KERNEL_BOUNDS(R35A_DECODE_MERGE_THREADS, 4) void decode_merge_bf16(r35a_decode_args a) {
    r35a::decode_merge<r35a::bf16_t>(a);
}
