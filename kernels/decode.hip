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
 * Waves: NW = KW x DW. The KW key groups take 16-key tiles round-robin, each with its own online
 * softmax; the DW waves of a key group split the head dimension into DW slices of DS = D / DW
 * (each owns its slice of Q, K, V and O) and add their partial S^T tiles through LDS by
 * reduce-scatter (two LDS-only barriers per tile). Key groups merge through LDS at the end of the
 * split; splits merge through the workspace, done by the last workgroup of the (sequence, kv head,
 * row group) to arrive (wrapping atomic counter, device-scope release/acquire fences). A sequence
 * uses r35a_decode_seq_splits() of the planned splits (fewer when it is short).
 *
 * Compile-time: element type, D, T (rows R = 16T), KW, DW, WAVES (the occupancy contract): they
 * size registers and LDS, and the LDS left decides the pipeline depth.
 * Run-time: page size (any multiple of 16), strides, G, M (per sequence), window, scale, splits.
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
#define R35A_DECODE_LDS_STAGES_MAX 4   /* shared-memory pipeline depth at most (NVIDIA) */
#endif

/* The KV pipeline of a tiling: registers (every fragment layer), or shared-memory stages filled by
 * asynchronous copies (layers that define R35A_FRAG_HAS_KV_PIPE_LDS). */
template <bool LDS, int DS, int S>
struct pick_pipe {
    typedef frag::kv_pipe_regs<DS, S> type;
};
#if defined(R35A_FRAG_HAS_KV_PIPE_LDS)
template <int DS, int S>
struct pick_pipe<true, DS, S> {
    typedef frag::kv_pipe_lds<DS, S> type;
};
template <int DS>
constexpr int lds_stages_fit(int bytes_per_wave) { return bytes_per_wave / frag::kv_pipe_lds<DS, 1>::LDS_PER_STAGE; }
#else
template <int DS>
constexpr int lds_stages_fit(int) { return 0; }
#endif

/* Keeps the scheduler from hoisting every chunk's operand loads ahead of the products (on gfx11 it
 * would hold all V^T fragments of a tile at once: NC x 8 VGPRs). */
#ifndef R35A_DECODE_CHUNK_FENCE
#define R35A_DECODE_CHUNK_FENCE() sched_barrier()
#endif

template <class E, int D, int T, int KW, int DW, int WAVES>
struct decode_cfg {
    static constexpr int NW = KW * DW;        /* waves per workgroup */
    static constexpr int THREADS = 32 * NW;
    static constexpr int DS = D / DW;         /* head-dim slice per wave */
    static constexpr int NC = DS / 16;        /* 16-wide d chunks per wave */
    static constexpr int DC = D / 16;         /* d chunks of the whole head */
    static constexpr int R = 16 * T;          /* query rows per workgroup */
    static_assert(D % (16 * DW) == 0, "each wave needs whole 16-wide d chunks");
    static_assert(KW == 1 || KW == 2 || KW == 4 || KW == 8, "key groups merge in a binary tree");
    /* LDS budget from the occupancy contract: WAVES waves on each of 4 SIMDs share a pool of LDS
     * (gfx11: a WGP's 128 KiB, at most 64 KiB per workgroup; NVIDIA: an SM's 228 KiB less 1 KiB per
     * block, at most 48 KiB of static shared memory per block). */
    static constexpr int WGS_PER_POOL = (4 * WAVES + NW - 1) / NW;
#if defined(R35A_TARGET_AMDGCN)
    static constexpr int LDS_POOL = 131072 / WGS_PER_POOL, LDS_MAX = 65536;
#else
    static constexpr int LDS_POOL = 233472 / WGS_PER_POOL - 1024, LDS_MAX = 49152;
#endif
    static constexpr int LDS_BUDGET = LDS_POOL < LDS_MAX ? LDS_POOL : LDS_MAX;
    /* LDS, loop phase: each wave's pipeline region, the partial S^T tile of every wave (DW > 1) and
     * one reduced S^T per key group. */
    static constexpr int PX_WAVE = DW > 1 ? T * frag::ACC_NATIVE_FLOATS * 4 : 0;
    static constexpr int SR_BYTES = DW > 1 ? KW * T * frag::ACC_NATIVE_FLOATS * 4 : 0;
    static constexpr int EXCH_BYTES = NW * PX_WAVE + SR_BYTES;
    static constexpr int FLAG_BYTES = 16;
    /* Pipeline: shared-memory stages filled by asynchronous copies where the fragment layer has them
     * (NVIDIA) and at least two fit the LDS left, as many as fit up to R35A_DECODE_LDS_STAGES_MAX;
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
    static constexpr bool HAS_LDS_PIPE = lds_stages_fit<DS>(1 << 30) > 0;
    static constexpr int QROW = DS + 8;
    static constexpr int Q_BYTES = DW * R * QROW * 2;
    static constexpr int REGION_1 = (frag::kv_pipe_regs<DS, 1>::LDS_BYTES + 15) / 16 * 16;   /* gfx11's region */
    static constexpr bool Q_LDS =
        T >= 2 && (HAS_LDS_PIPE ? lds_stages_fit<DS>((LDS_BUDGET - FLAG_BYTES - EXCH_BYTES - Q_BYTES) / NW) >= 2
                                : NW * (REGION_1 > PX_WAVE ? REGION_1 : PX_WAVE) + SR_BYTES + Q_BYTES + FLAG_BYTES <= LDS_BUDGET);
    static constexpr bool Q_LDS_WANTED = Q_LDS;
    static constexpr int FREE = LDS_BUDGET - FLAG_BYTES - EXCH_BYTES - (Q_LDS ? Q_BYTES : 0);
    static constexpr int LDS_FIT = lds_stages_fit<DS>(FREE / NW);
    static constexpr bool USE_LDS = LDS_FIT >= 2;
#if defined(R35A_TARGET_AMDGCN)
    static constexpr int REG_BUDGET = (1536 / WAVES) / 24 * 24 < 256 ? (1536 / WAVES) / 24 * 24 : 256;
#else
    static constexpr int REG_BUDGET = 65536 / (128 * WAVES) < 255 ? 65536 / (128 * WAVES) : 255;
#endif
    static constexpr int AB_WORDS = (int)(sizeof(frag::ab) / 4);
    static constexpr int REG_BASE = T * NC * ((Q_LDS_WANTED ? 0 : AB_WORDS) + frag::ACC_ELEMS) +
                                    T * (frag::ACC_ELEMS + AB_WORDS / 2) + 32;
    /* 25 % margin over the estimate (what clang and ptxas use beyond it, measured on these tilings). */
    static constexpr int REG_STAGE = NC * (AB_WORDS + 4);
    static constexpr int REG_FIT = (4 * REG_BUDGET / 5 - REG_BASE) / REG_STAGE;
    static constexpr int REG_STAGES = REG_FIT < 2 ? 2 : REG_FIT > R35A_DECODE_REG_STAGES_MAX ? R35A_DECODE_REG_STAGES_MAX : REG_FIT;
    static constexpr int STAGES = USE_LDS ? (LDS_FIT < R35A_DECODE_LDS_STAGES_MAX ? LDS_FIT : R35A_DECODE_LDS_STAGES_MAX)
                                          : REG_STAGES;
    static_assert(STAGES >= 2, "the KV pipeline needs two stages");
    typedef typename pick_pipe<USE_LDS, DS, STAGES>::type pipe;
    static constexpr int PIPE_WAVE = (pipe::LDS_BYTES + 15) / 16 * 16;
    /* A register pipeline's LDS (the V^T tile) is busy only between prepare_v and release, after
     * the key group has read the wave's partial S^T: the two share the wave's region. Shared-memory
     * stages hold loads in flight at all times: the partial S^T goes after them. */
    static constexpr bool PX_OVERLAY = !USE_LDS;
    static constexpr int PX_OFF = PX_OVERLAY ? 0 : PIPE_WAVE;
    static constexpr int WAVE_REGION = PX_OVERLAY ? (PIPE_WAVE > PX_WAVE ? PIPE_WAVE : PX_WAVE) : PIPE_WAVE + PX_WAVE;
    static constexpr int Q_OFF = NW * WAVE_REGION + SR_BYTES;   /* Q^T tiles: [DW][R][QROW] u16 */
    static constexpr int LOOP_BYTES = NW * WAVE_REGION + SR_BYTES + (Q_LDS ? Q_BYTES : 0);
    /* Floats of the key group's S^T tiles each wave reduces (reduce-scatter). */
    static constexpr int SLICE = T * frag::ACC_NATIVE_FLOATS / DW;
    /* LDS, merge phase (reuses the loop's): KW/2 slots of a key group's accumulators and stats. */
    static constexpr int MSLOT_ACC = DW * T * NC * frag::ACC_NATIVE_FLOATS;   /* floats */
    static constexpr int MSLOT_FLOATS = MSLOT_ACC + 2 * R;
    static constexpr int MERGE_BYTES = KW > 1 ? (KW / 2) * MSLOT_FLOATS * 4 : 0;
    /* LDS, split merge (reuses everything): a weight per record and row. */
    static constexpr int SPLIT_BYTES = R35A_DECODE_MAX_SPLITS * R * 4;
    static constexpr int PHASE_BYTES = LOOP_BYTES > MERGE_BYTES ? LOOP_BYTES : MERGE_BYTES;
    static constexpr int LDS_BYTES = (PHASE_BYTES > SPLIT_BYTES ? PHASE_BYTES : SPLIT_BYTES) + FLAG_BYTES;
    static_assert(LDS_BYTES <= LDS_BUDGET, "LDS use breaks the variant's occupancy contract (waves)");
};

/* Online-softmax state of one row tile of a wave: running max m (base 2), running sum share l,
 * and the O^T accumulators of the wave's d slice. */
template <int NC>
struct row_state {
    frag::colv m, l;
    frag::acc o[NC];
};

/* Merges state b into a: both are partial softmaxes of disjoint key sets. */
template <int NC>
R35A_DEV void merge_state(row_state<NC> &a, const frag::colv &mb, const frag::colv &lb, const frag::acc *ob) {
    for (int c = 0; c < frag::NCOL; ++c) {
        float mx = fmax(a.m.v[c], mb.v[c]);
        float mu = mx == neg_inf() ? 0.f : mx;
        float ca = exp2_fast(a.m.v[c] - mu), cb = exp2_fast(mb.v[c] - mu);
        a.l.v[c] = a.l.v[c] * ca + lb.v[c] * cb;
        a.m.v[c] = mx;
        for (int k = 0; k < NC; ++k)
            for (int e = 0; e < frag::ACC_ELEMS; ++e)
                if (frag::acc_slot(e) == c) a.o[k].v[e] = a.o[k].v[e] * ca + ob[k].v[e] * cb;
    }
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
    const u16 *k_base, *v_base;   /* this kv head's d slice in page 0 slot 0 */
    i64 k_page, v_page, k_slot, v_slot;
    int B, L, lo, t_begin, t_end, kw, kg, mine, num_pages;
    int page_cur, slot_cur, page_next, slot_next;
    bool bad;                     /* this lane read a block-table entry outside 0..num_pages-1 */

    /* Tile of the wave's step i, clamped to its last one (to t_begin for a wave without tiles). */
    R35A_MEMBER int tile_of(int i) const { return mine > 0 ? t_begin + imin(i, mine - 1) * kw + kg : t_begin; }
    R35A_MEMBER void table_block(int b, int &page, int &slot) {
        const int key = tile_of(32 * b + lane_id()) * 16;
        const int idx = key / B;
        slot = key - idx * B;
        const int entry = load_i32(bt + idx);
        const bool ok = r35a_page_index_ok(entry, num_pages);   /* one compare per page entry */
        bad |= !ok;
        page = ok ? entry : 0;
    }
    R35A_MEMBER void start() {
        table_block(0, page_cur, slot_cur);
        if (mine > 32) table_block(1, page_next, slot_next);
    }
    template <class P>
    R35A_MEMBER void issue(P &pipe, int slot, int i) {
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
 * only the rows that exist. */
template <class E>
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
        if (ok[sl]) store_u16(orow[sl] + frag::acc_m(e), E::from_f32(o.v[e] * inv.v[sl]));
    }
}

/* The last workgroup of a (sequence, kv head, row group) merges the splits' records, with all its
 * waves and no serial chain of loads: (1) every thread loads some of the records' running maxima
 * into LDS (independent loads, unrolled), (2) one thread per row turns them into weights
 * 2^(m_k - max_k m_k), (3) the waves take the accumulator fragments (row tile x d chunk) in turn and
 * sum w_k x acc_k and w_k x l_k over the records, several records' loads of all of a wave's
 * fragments in flight at a time. */
template <class C, class E>
R35A_DEV void merge_splits(const r35a_decode_args &a, const float *grec, i64 rec_floats, int nsplit, int rows, int rg,
                           int q0, int M, int g, float *wts) {
    constexpr int R = C::R, T = R / 16;
    const int tv = imin(T, (rows - rg * R + 15) / 16);     /* row tiles with a real row (the others have no record) */
    const int nv = 16 * tv;
    block_sync();   /* the LDS of the loop and of the key-group merge is free */
#pragma unroll 4
    for (int idx = thread_x(); idx < nsplit * nv; idx += C::THREADS) {
        const int k = idx / nv, n = idx - k * nv;
        wts[k * R + n] = load_f32(grec + k * rec_floats + n);
    }
    block_sync();
    for (int n = thread_x(); n < nv; n += C::THREADS) {
        float mx = neg_inf();
        for (int k = 0; k < nsplit; ++k) mx = fmax(mx, wts[k * R + n]);
        const float mu = mx == neg_inf() ? 0.f : mx;
        for (int k = 0; k < nsplit; ++k) wts[k * R + n] = exp2_fast(wts[k * R + n] - mu);
    }
    block_sync();
    /* Pass 3: wave w owns fragments w, w + NW, ... (FPW of them); RB records' loads of all of them
     * are issued before any is used (as many as half the register budget holds), so the records
     * cost nsplit / RB round trips, not nsplit x FPW. Records past nsplit re-read the last one (a
     * valid address; their weight is not applied). */
    constexpr int NF = T * C::DC, FPW = (NF + C::NW - 1) / C::NW;
    constexpr int RB_FIT = (C::REG_BUDGET / 2) / (FPW * (frag::ACC_ELEMS + 2));
    constexpr int RB = RB_FIT < 1 ? 1 : RB_FIT > 8 ? 8 : RB_FIT;
    const int nf = tv * C::DC;
    frag::acc o[FPW];
    frag::colv l[FPW];
    bool ok[FPW][frag::NCOL];   /* the rows that exist, per fragment and column slot */
    int tj[FPW];
#pragma unroll
    for (int j = 0; j < FPW; ++j) {
        const int f = imin(wave_id() + j * C::NW, NF - 1);
        tj[j] = f / C::DC;
        o[j] = frag::acc_zero();
        l[j] = frag::colv_fill(0.f);
#pragma unroll
        for (int c = 0; c < frag::NCOL; ++c) ok[j][c] = rg * R + tj[j] * 16 + frag::acc_n_of_slot(c) < rows;
    }
    for (int k0 = 0; k0 < nsplit; k0 += RB) {
        frag::acc ak[RB][FPW];
        frag::colv lk[RB][FPW];
#pragma unroll
        for (int r = 0; r < RB; ++r)
#pragma unroll
            for (int j = 0; j < FPW; ++j) {
                const int f = imin(wave_id() + j * C::NW, NF - 1);
                const float *rec = grec + imin(k0 + r, nsplit - 1) * rec_floats;
                ak[r][j] = frag::acc_load_global_if(rec + 2 * R + f * frag::ACC_NATIVE_FLOATS, ok[j]);
                lk[r][j] = frag::colv_load(rec + R + tj[j] * 16, true);
            }
#pragma unroll
        for (int r = 0; r < RB; ++r) {
            if (k0 + r >= nsplit) break;   /* uniform */
#pragma unroll
            for (int j = 0; j < FPW; ++j) {
                const frag::colv wk = frag::colv_load(wts + (k0 + r) * R + tj[j] * 16, false);
#pragma unroll
                for (int c = 0; c < frag::NCOL; ++c) l[j].v[c] += lk[r][j].v[c] * wk.v[c];
#pragma unroll
                for (int e = 0; e < frag::ACC_ELEMS; ++e) o[j].v[e] += ak[r][j].v[e] * wk.v[frag::acc_slot(e)];
            }
        }
    }
#pragma unroll
    for (int j = 0; j < FPW; ++j) {
        const int f = wave_id() + j * C::NW;
        if (f >= nf) break;   /* uniform */
        frag::colv inv;
#pragma unroll
        for (int c = 0; c < frag::NCOL; ++c) inv.v[c] = l[j].v[c] > 0.f ? rcp_fast(l[j].v[c]) : 0.f;
        store_o<E>(a, o[j], inv, tj[j], f - tj[j] * C::DC, rg, R, q0, M, g, ok[j]);
    }
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

template <class E, int D, int T, int KW, int DW, int WAVES>
R35A_DEV void decode_kernel(const r35a_decode_args &a) {
    typedef decode_cfg<E, D, T, KW, DW, WAVES> C;
    constexpr int NC = C::NC, DS = C::DS, R = C::R, S = C::STAGES;
    __shared__ __attribute__((aligned(16))) unsigned char smem[C::LDS_BYTES];
    int *const last_flag = (int *)(smem + C::LDS_BYTES - C::FLAG_BYTES);

    const int w = wave_id();
    const int kg = w / DW, dg = w % DW;
    const int split = block_x(), y = block_y(), s = block_z();
    const int g = y / a.num_row_groups, rg = y - g * a.num_row_groups;

    const int q0 = a.query_start_loc[s], q1 = a.query_start_loc[s + 1];
    const int L = a.seq_lens[s];
    /* metadata the host never saw: checked before anything else is read */
    const u32 bad = r35a_paged_sequence_error(s, a.num_seqs, q0, q1, L, a.num_tokens, a.query_len_bound, a.max_seq_len);
    if (bad != R35A_DEVICE_ERROR_NONE) {
        if (split == 0 && rg == 0) bad_sequence<E, D, C::THREADS>(a, bad, s, g, q0, q1);
        return;
    }
    const int M = q1 - q0;
    if (M <= 0 || M > a.max_query_len) return;            /* no rows, or the generic kernel's */
    const int G = a.group_size;
    const int rows = G * M;
    if (rg * R >= rows) return;

    /* Keys the rows reach: [lo, L); whole tiles [tile_lo, tile_hi) split evenly over the splits
     * this sequence uses (the planned count or fewer: decode_args.h). */
    const int W = a.window;
    const int lo = (int)r35a_window_first_key(L - M, W);
    const int tile_lo = lo >> 4, tile_hi = (imax(L, 0) + 15) >> 4;
    const int ntiles = imax(tile_hi - tile_lo, 0);
    const int nsplit = r35a_decode_seq_splits(a.num_splits, ntiles);
    if (split >= nsplit) return;                          /* before the arrival counter: not counted */
    const int per = (ntiles + nsplit - 1) / nsplit;
    const int t_begin = tile_lo + split * per;
    const int t_end = imin(t_begin + per, tile_hi);
    const int niter = t_end > t_begin ? (t_end - t_begin + KW - 1) / KW : 0;
    /* Tiles inside [full_lo, full_hi] are visible to every row: no mask needed. */
    const int full_lo = (int)r35a_window_first_key(L - 1, W), full_hi = L - M;

    /* ---- per-row (accumulator column) information ---- */
    int row_hi[T][frag::NCOL], row_lo[T][frag::NCOL];
    bool row_ok[T][frag::NCOL];
#pragma unroll
    for (int t = 0; t < T; ++t)
#pragma unroll
        for (int c = 0; c < frag::NCOL; ++c) {
            const int row = rg * R + t * 16 + frag::acc_n_of_slot(c);
            const bool ok = row < rows;
            const int i = ok ? row % M : 0;
            const int p = L - M + i;
            row_ok[t][c] = ok;
            row_hi[t][c] = ok ? p : -1;                          /* a padding row sees nothing */
            row_lo[t][c] = (int)r35a_window_first_key(p, W);
        }

    /* ---- the KV pipeline starts first: its table entries and first tiles are in flight while Q loads ---- */
    typename C::pipe pipe(smem + w * C::WAVE_REGION);
    tile_feed feed;
    feed.bt = a.block_table + (i64)s * a.block_table_stride;
    feed.k_base = (const u16 *)a.k_cache + (i64)g * a.k_head_stride + dg * DS;
    feed.v_base = (const u16 *)a.v_cache + (i64)g * a.v_head_stride + dg * DS;
    feed.k_page = a.k_page_stride;
    feed.v_page = a.v_page_stride;
    feed.k_slot = a.k_slot_stride;
    feed.v_slot = a.v_slot_stride;
    feed.B = a.page_size;
    feed.L = L;
    feed.lo = lo;
    feed.num_pages = a.num_pages;
    feed.bad = false;
    feed.t_begin = t_begin;
    feed.t_end = t_end;
    feed.kw = KW;
    feed.kg = kg;
    feed.mine = t_end - t_begin > kg ? (t_end - t_begin - kg + KW - 1) / KW : 0;
    if (niter > 0) {
        feed.start();
#pragma unroll
        for (int p = 0; p < S - 1; ++p) feed.issue(pipe, p, p);
    }

    /* ---- Q^T fragments of this wave's d slice (B operand: vector = query row) ---- */
    frag::ab qf[C::Q_LDS ? 1 : T][NC];
    u16 *const qs = (u16 *)(smem + C::Q_OFF) + dg * R * C::QROW;   /* Q_LDS: this d slice's R rows */
    if constexpr (C::Q_LDS) {
        /* R rows x DS of each d slice, 16 bytes per thread and step; padding rows are zeros */
        constexpr int CPR = DS / 8, CHUNKS = DW * R * CPR;
        for (int idx = thread_x(); idx < CHUNKS; idx += C::THREADS) {
            const int sl = idx / (R * CPR), rem = idx - sl * R * CPR, r = rem / CPR, d8 = rem - r * CPR;
            const int row = rg * R + r;
            const int rr = imin(row, rows - 1), hl = rr / M, i = rr - hl * M;
            const u32x4 x = load_b128((const u16 *)a.q + (i64)(q0 + i) * a.q_token_stride +
                                      (i64)(g * G + hl) * a.q_head_stride + sl * DS + 8 * d8);
            *(u32x4 *)((u16 *)(smem + C::Q_OFF) + (sl * R + r) * C::QROW + 8 * d8) =
                row < rows ? x : u32x4{0u, 0u, 0u, 0u};
        }
        block_sync();
    } else {
#pragma unroll
        for (int t = 0; t < T; ++t)
#pragma unroll
            for (int c = 0; c < NC; ++c)
                qf[t][c] = frag::load_vec16_global_u16(
                    [&](int n) -> const void * {
                        const int row = imin(rg * R + t * 16 + n, rows - 1);   /* padding rows: a real row */
                        const int hl = row / M, i = row - hl * M;
                        const i64 off = (i64)(q0 + i) * a.q_token_stride + (i64)(g * G + hl) * a.q_head_stride + dg * DS + 16 * c;
                        return (const u16 *)a.q + off;
                    },
                    [&](int n) { return rg * R + t * 16 + n < rows; });
    }
    /* Q^T fragment (row tile t, d chunk c) of this wave's slice */
    auto q_frag = [&](int t, int c) -> frag::ab {
        if constexpr (C::Q_LDS) return frag::load_vec16_lds(qs + t * 16 * C::QROW + 16 * c, C::QROW);
        else return qf[t][c];
    };

    row_state<NC> st[T];
#pragma unroll
    for (int t = 0; t < T; ++t) {
        st[t].m = frag::colv_fill(neg_inf());
        st[t].l = frag::colv_fill(0.f);
#pragma unroll
        for (int c = 0; c < NC; ++c) st[t].o[c] = frag::acc_zero();
    }

    float *const px = (float *)(smem + w * C::WAVE_REGION + C::PX_OFF);   /* this wave's partial S^T */
    float *const sr = (float *)(smem + C::NW * C::WAVE_REGION) + kg * T * frag::ACC_NATIVE_FLOATS;

    for (int it0 = 0; it0 < niter; it0 += S) {
#pragma unroll
        for (int u = 0; u < S; ++u) {   /* stage u holds the wave's tile it0 + u */
            const int it = it0 + u;
            if (it >= niter) break;
            /* The loads of tile it + S - 1 start before this tile is waited for: S tiles in flight
             * at this point, S - 1 during the products. */
            feed.issue(pipe, (u + S - 1) % S, it + S - 1);
            pipe.wait(u);
            const int tile = t_begin + it * KW + kg;
            const bool active = tile < t_end;                 /* uniform per wave */
            const int j0 = tile * 16;

            frag::acc sacc[T];
            if (active) {
                const frag::ab k0 = pipe.k_operand(u, 0);
#pragma unroll
                for (int t = 0; t < T; ++t) sacc[t] = frag::mma<E>(k0, q_frag(t, 0), frag::acc_zero());
#pragma unroll
                for (int c = 1; c < NC; ++c) {
                    const frag::ab kf = pipe.k_operand(u, c);
#pragma unroll
                    for (int t = 0; t < T; ++t) sacc[t] = frag::mma<E>(kf, q_frag(t, c), sacc[t]);
                }
            }
            if constexpr (DW > 1) {
                /* Add the DW partial S^T tiles of the key group: reduce-scatter (each wave sums a
                 * 1/DW slice over the DW partials) then every wave reads the whole sum, so all DW
                 * waves hold bit-identical scores and make identical softmax decisions. */
                if (active)
#pragma unroll
                    for (int t = 0; t < T; ++t) frag::acc_store_lds(px + t * frag::ACC_NATIVE_FLOATS, sacc[t]);
                block_sync_lds();
                if (active) {
                    const float *grp = (const float *)(smem + kg * DW * C::WAVE_REGION + C::PX_OFF);
#pragma unroll
                    for (int kk = 0; kk < (C::SLICE + 31) / 32; ++kk) {
                        /* (a slice narrower than the wave: the spare lanes redo its last element) */
                        const int f = dg * C::SLICE + imin(lane_id() + 32 * kk, C::SLICE - 1);
                        float sum = grp[f];
#pragma unroll
                        for (int d = 1; d < DW; ++d) sum += grp[d * (C::WAVE_REGION / 4) + f];
                        sr[f] = sum;
                    }
                }
                block_sync_lds();
                if (active)
#pragma unroll
                    for (int t = 0; t < T; ++t) sacc[t] = frag::acc_load_lds(sr + t * frag::ACC_NATIVE_FLOATS);
            }
            if (!active) continue;

            /* Logits: masks here (the one place a logit transform such as softcap or ALiBi would go;
             * the scale is folded into the exponent below). */
            const bool need_mask = !(j0 >= full_lo && j0 + 15 <= full_hi);
            frag::ab pf[T];
#pragma unroll
            for (int t = 0; t < T; ++t) {
                frag::acc &sc = sacc[t];
                if (need_mask)
#pragma unroll
                    for (int e = 0; e < frag::ACC_ELEMS; ++e) {
                        const int j = j0 + frag::acc_m(e), c = frag::acc_slot(e);
                        if (j > row_hi[t][c] || j < row_lo[t][c]) sc.v[e] = neg_inf();
                    }
                const frag::colv mx = frag::col_max(sc);
                frag::colv corr, mu;
                bool moved = false;
#pragma unroll
                for (int c = 0; c < frag::NCOL; ++c) {
                    const float mn = fmax(st[t].m.v[c], mx.v[c] * a.scale_log2);
                    mu.v[c] = mn == neg_inf() ? 0.f : mn;
                    corr.v[c] = exp2_fast(st[t].m.v[c] - mu.v[c]);
                    moved |= mn != st[t].m.v[c];
                    st[t].m.v[c] = mn;
                }
#pragma unroll
                for (int e = 0; e < frag::ACC_ELEMS; ++e)
                    sc.v[e] = exp2_fast(__builtin_fmaf(sc.v[e], a.scale_log2, -mu.v[frag::acc_slot(e)]));
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
                for (int t = 0; t < T; ++t) st[t].o[c] = frag::mma<E>(vf, pf[t], st[t].o[c]);
                R35A_DECODE_CHUNK_FENCE();
            }
            pipe.release(u);
        }
    }
    pipe.drain();
#pragma unroll
    for (int t = 0; t < T; ++t) st[t].l = frag::col_sum_finish(st[t].l);
    /* A block-table entry outside the cache: page 0 was streamed in its place; NaN state makes the
     * rows of every merge NaN (NaN x 0 stays NaN). Uniform per wave; the error path only. */
    if (wave_any(feed.bad)) {
#pragma unroll
        for (int t = 0; t < T; ++t) {
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
                for (int t = 0; t < T; ++t)
                    for (int c = 0; c < NC; ++c)
                        frag::acc_store_lds(slot + ((dg * T + t) * NC + c) * frag::ACC_NATIVE_FLOATS, st[t].o[c]);
                if (dg == 0)
                    for (int t = 0; t < T; ++t) {
                        frag::colv_store(slot + C::MSLOT_ACC + t * 16, st[t].m, false);
                        frag::colv_store(slot + C::MSLOT_ACC + R + t * 16, st[t].l, false);
                    }
            }
            block_sync();
            if (kg % (2 * step) == 0) {
                const float *slot = mb + (kg / (2 * step)) * C::MSLOT_FLOATS;
                for (int t = 0; t < T; ++t) {
                    frag::acc ob[NC];
                    for (int c = 0; c < NC; ++c)
                        ob[c] = frag::acc_load_lds(slot + ((dg * T + t) * NC + c) * frag::ACC_NATIVE_FLOATS);
                    merge_state<NC>(st[t], frag::colv_load(slot + C::MSLOT_ACC + t * 16, false),
                                    frag::colv_load(slot + C::MSLOT_ACC + R + t * 16, false), ob);
                }
            }
        }
    }

    /* ---- splits: publish the partial, the last workgroup to arrive merges them all ---- */
    const i64 group = ((i64)s * a.num_kv_heads + g) * a.num_row_groups + rg;
    if (nsplit > 1) {
        float *const recs = (float *)((char *)a.workspace + r35a_decode_counters_bytes(a.num_seqs, a.num_kv_heads, a.num_row_groups));
        const i64 rec_floats = r35a_decode_record_floats(R, D);
        float *const grec = recs + group * a.num_splits * rec_floats;   /* planned stride; this sequence uses nsplit of them */
        if (kg == 0) {
            float *rec = grec + split * rec_floats;
            for (int t = 0; t < T; ++t) {
                if (rg * R + t * 16 >= rows) break;          /* a row tile of padding only */
                if (dg == 0) {
                    frag::colv_store(rec + t * 16, st[t].m, true);
                    frag::colv_store(rec + R + t * 16, st[t].l, true);
                }
                for (int c = 0; c < NC; ++c)
                    frag::acc_store_global_if(rec + 2 * R + (t * C::DC + dg * NC + c) * frag::ACC_NATIVE_FLOATS, st[t].o[c], row_ok[t]);
            }
        }
        fence_release_device();
        block_sync();
        if (thread_x() == 0) {
            u32 *counter = (u32 *)a.workspace + group;
            *last_flag = atomic_inc_wrap(counter, (u32)(nsplit - 1)) == (u32)(nsplit - 1);
        }
        block_sync();
        if (!*last_flag) return;
        fence_acquire_device();
        merge_splits<C, E>(a, grec, rec_floats, nsplit, rows, rg, q0, M, g, (float *)smem);
        return;
    }
    if (kg != 0) return;

    /* ---- one split: O = O^T / l, zeros for rows that saw no key ---- */
#pragma unroll
    for (int t = 0; t < T; ++t) {
        frag::colv inv;
#pragma unroll
        for (int c = 0; c < frag::NCOL; ++c) inv.v[c] = st[t].l.v[c] > 0.f ? rcp_fast(st[t].l.v[c]) : 0.f;
#pragma unroll
        for (int c = 0; c < NC; ++c) store_o<E>(a, st[t].o[c], inv, t, dg * NC + c, rg, R, q0, M, g, row_ok[t]);
    }
}

} /* namespace r35a */

/* One extern "C" kernel per variant; the symbol is the variant name. */
#define R35A_DECODE_VARIANT(arch, name, dtype, D, R, KW, DW, WAVES)                                   \
    R35A_KERNEL R35A_KERNEL_BOUNDS(32 * (KW) * (DW), WAVES) void name(r35a_decode_args a) {            \
        r35a::decode_kernel<r35a::dtype##_t, D, (R) / 16, KW, DW, WAVES>(a);                                  \
    }
/* A tool may point R35A_DECODE_VARIANT_LIST at its own list of R35A_DECODE_VARIANT(...) lines
 * (tools/tune_variants.py compiles candidate tilings this way). */
#ifdef R35A_DECODE_VARIANT_LIST
#include R35A_DECODE_VARIANT_LIST
#else
#include "../variants/variants.def"
#endif
#undef R35A_DECODE_VARIANT
