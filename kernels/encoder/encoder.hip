/*
 * encoder.hip - varlen (encoder / ViT / fresh prompt) attention on matrix fragments (gfx11 wave32 WMMA;
 * the same source on NVIDIA mma.sync through the fragment layer): non-causal or causal, GQA; and its
 * paged siblings: causal prefill over the paged KV cache.
 *
 * A GROUP of waves serves one block of query rows of one (segment, head); see encoder_args.h for the
 * grid. Normally a group is the whole workgroup (R = 16 T NW rows); in the small-problem tiling
 * (maxlen > 0) every wave is its own group (16 T rows, no workgroup barrier), so a workgroup of NW
 * waves serves NW short segments at once. Without causal every query row sees every key of its
 * segment, so there is no mask except at the segment's end; with causal, the blocks on a wave's
 * diagonal are masked.
 *
 * The products run "transposed" (as in decode.hip), query rows along the accumulator's n axis:
 *     S^T[key][row]  = K[key][:] . Q[row][:]       A = K sub-tile (16 keys x 16 d, from LDS)
 *                                                 B = Q^T (registers, staged once through LDS;
 *                                                     NVIDIA, large tiles: read from the staged
 *                                                     tile per block, encoder_cfg Q_SMEM)
 *     O^T[d][row]   += V^T[d][key] . P^T[key][row] A = V^T (from LDS)
 *                                                 B = P^T (the S^T accumulator, re-packed in
 *                                                     registers by b_from_acc_keys)
 * so a query row's softmax statistics are per accumulator column and the rescale of O by the
 * running-max correction is a per-column multiply.
 *
 * K/V staging: the group streams the segment's keys in blocks of KB, staged in LDS, one barrier per
 * block; every K and V^T operand read serves the wave's T row tiles. Two policies, chosen by the
 * target's encoder layer (encoder_paths in frag_*.h):
 *   - kv_stage_regs.h, through registers (gfx11): every thread loads its share of block b+1 (128-bit loads of whole
 *     rows) before the products of block b and stores it after them into the other half of a double
 *     buffer: K row-major, V transposed to V^T (key pairs packed into 32-bit words);
 *   - kv_stage_async.h, asynchronous copies (NVIDIA: cp.async): block b + NSTAGE - 1 is copied straight into a ring of
 *     NSTAGE stages while the warps compute on block b, no registers held; K and V rows land as
 *     they are in memory and the V^T operands come from ldmatrix.trans of the V rows.
 * Keys past the segment's end are never read (zeros in LDS); the scores of the block holding the
 * segment's end are masked to -inf past it.
 *
 * Softmax: fp32, base 2 (scale_log2 = softmax_scale * log2 e folded on the host), lazy rescale: a
 * row's running max m moves only when its probabilities in a block would exceed 2^8. Every block is
 * exponentiated speculatively against the current m; when a column's share of the block's sum
 * exceeds 2^8 (then and only then can one probability exceed it, or overflow), a rare wave-uniform
 * branch recomputes the tile's scores, takes their max, rescales O and l and exponentiates again.
 * The first block always takes that branch. So no per-block max is computed at all, and
 * probabilities stay <= 2^8 before the final division (fine for f32 sums and f16/bf16 operands).
 *
 * Output (epilogue.h): O^T / l is re-packed by b_from_acc into B-operand layout (lane = query row,
 * 16 contiguous d values) and each lane writes 16 bytes of its row: whole-row 128-bit stores.
 *
 * Tail halves (encoder_args.h "Tail split"; the NVIDIA tables): a workgroup-wide variant's tail kernel
 * serves an item (R rows) as two workgroups of R / 2 rows. Its waves form two key groups of NW / 2 row
 * waves (KG = 2): both stage every K/V block as the variant does, key group k computes keys
 * [k KB / 2, (k + 1) KB / 2) of each, and at the end key group 1 leaves m, l and O^T in LDS for key
 * group 0, which joins them (key_group_merge.h) and writes the rows. Half the
 * rows and half the chain of blocks per wave: shorter workgroups for a part-empty last round.
 *
 * Compile-time: element type, D (and its padding DP to a multiple of 16), T, KB, NW, the group mode:
 * they size registers and LDS (gfx11: static LDS; NVIDIA: dynamic shared memory of exactly the
 * layout's size, published as <name>_lds_bytes for the host). Run-time: segments (cu_seqlens), head count, strides, scale. Head
 * size 72 runs as 80: K and Q columns 72..79 are zeros in LDS; O^T rows 72..79 are computed from
 * whatever V^T rows 72..79 hold and never stored. kernels/encoder/README.md has the budgets and the
 * model.
 *
 * Paged siblings (prefill_args.h, <variant>_paged of every workgroup-wide variant): the same body over
 * a paged sequence and kv head: its G query heads' M query tokens packed as M x G rows (row r: token
 * r / G, head r % G of the kv head's), L keys read through the block table once for all of them,
 * causal with offset L - M (row r sees keys 0 .. L - M + r / G); and the model features (a window,
 * softcap, ALiBi, sinks, the LSE; softcap, sinks and the LSE on varlen too). The body takes its item
 * from a SOURCE (kv_source.h: varlen_source, paged_source): query and key counts, each row's
 * position, the metadata check, and each key row's address for the staging policies.
 *
 * Files: encoder_cfg.h (the layout), kv_source.h (where rows come from), kv_stage_regs.h /
 * kv_stage_async.h (the staging policies, chosen by encoder_paths in the target's frag_*.h),
 * key_group_merge.h (the tail split's join), epilogue.h (the stores); this file composes them: Q
 * staging, the per-block step (scores, softmax, PV) and the kernels of the variant table.
 */
#include "common/device.h"
#include "common/device_error.h"
#include "encoder/encoder_cfg.h"
#include "encoder/kv_source.h"
#include "encoder/key_group_merge.h"
#include "encoder/epilogue.h"
#include "common/row_norm.h"

namespace r35a {



/* Lazy-rescale threshold: a row's running max moves only when a block's probabilities against it
 * could exceed 2^8 (some column's share of the block's sum does). Probabilities then stay <= 2^8
 * before normalization: exact enough in f32, no overflow in f16/bf16. */
#define R35A_ENC_RESCALE_LIMIT 256.0f

/* The running max of a row that has seen no key: the most negative finite float, not -inf, so that
 * exp2(s - m) of a -inf logit is 0 (never -inf - -inf = NaN) and a row whose every logit is -inf
 * (the first causal row over an infinite K element) keeps l = 0 and O = 0, written as zeros
 * (epilogue.h). A finite logit against it exponentiates to +inf, which sends the block the exact
 * way; the first key's correction exp2(m - max) is 0, as from -inf. */
#define R35A_ENC_NO_KEY (-3.402823466e38f)

/* Group g of the workgroup serves item (segment or sequence s, row block xb, head h): the R rows of the
 * KG = 1 tiling, all of them, or with KG = 2 (a tail half) half `half` of them. S is the item's source
 * (kv_source.h): a varlen segment, or a paged sequence (query and key counts apart, causal offset). */
template <class E, int D, int T, int KB, int NW, int WAVES, int MAXLEN, int KG, class S>
R35A_DEV void encoder_body(S &src, unsigned char *smem, int g, int s, int xb, int h, int half) {
    typedef encoder_cfg<E, D, T, KB, NW, WAVES, MAXLEN, KG> C;
    typedef typename prob_pack<E>::type P;
    constexpr int DC = C::DC, D8 = C::D8, NS = C::NS, KLD = C::KLD, GT = C::GT, KBC = C::KBC;
    const typename S::args &a = src.a;

    const int tid = thread_x(), w = wave_id();
    const int gw = w - g * C::GW;                            /* the wave within its group */
    const int kgi = gw / C::RW;                              /* its key group */
    const int rw = gw - kgi * C::RW;                         /* its row wave within the key group */
    /* the thread within its group (a one-wave group: the lane, whose range the compiler knows) */
    const int gtid = C::GW == 1 ? lane_id() : tid - g * GT;
    u16 *const lds = (u16 *)smem + g * C::GROUP_ELEMS;

    /* the item's metadata, checked before anything else is read (group-uniform exits) */
    if (!src.template open<E, D, GT>(s, xb, h, half, gtid))
        return;
    const int qlen = src.qlen, klen = src.klen;
    const int row0 = xb * C::R * KG + (half > 0 ? C::R : 0);
    if (row0 >= qlen)
        return;

    /* Uniform bases (scalar registers); per-thread offsets below are 32-bit byte offsets from them
     * (token strides < 2^24 elements, see encoder_args.h), so loads use the SGPR + VGPR form. */
    src.bind(h, gtid);                                       /* K/V: GQA, query head h reads kv head h / kv_group */
    const u32x4 zero4 = {0u, 0u, 0u, 0u};
    /* causal: the blocks up to the group's last row (the planner runs no tail split then, KG = 1) */
    const bool causal = src.causal();                        /* uniform */
    const int nblk = ((causal ? imin(klen, src.pos(row0 + C::R - 1) + 1) : klen) + KB - 1) / KB;

    /* ---- K/V staging: the target's policy (encoder_paths in frag_*.h), rows from the source ---- */
    const typename C::KV::template tiles<C> kt{lds};           /* the staged tiles and their operands */
    typename C::KV::template carry<C> held;                  /* what a thread carries between blocks */
    typename C::KV::template stage<C, S> kv{src, lds, gtid, kt, held};
    if constexpr (S::WINDOW_ALIBI) {
        /* a sliding window: the group's keys start at its first row's window (keys below it, and
         * their pages, are never read) */
        if (a.window > 0) {
            src.klo = imax(0, src.pos(row0) - a.window + 1);
            kv.first = src.klo / KB;
        }
    }

    const float sl2 = a.scale_log2;
    for (int pass = 0; pass < C::PASSES; ++pass) {
        constexpr int TE = C::TE;
        /* ---- Q: stage the group's rows through LDS (zeros past the segment and in the padding
         * columns), then each wave takes this pass's TE of its T tiles as B operands ---- */
        kv.before_q();                                           /* the first block's copies or loads */
        {
            constexpr int QPT = C::Q_PER_THREAD;
            u16 *const ql = lds + C::Q_OFFSET;
            u32x4 qr[QPT];
#pragma unroll
            for (int i = 0; i < QPT; ++i) {
                const int idx = gtid + i * GT;
                const int r = idx / D8, d8 = idx - r * D8;
                const bool ok = (C::Q_CHUNKS % GT == 0 || idx < C::Q_CHUNKS) && row0 + r < qlen;
                if constexpr (S::PACKED) {                   /* each row its own (token, head) */
                    qr[i] = ok ? load_b128(src.q_row(row0 + r) + 16u * d8) : zero4;
                } else {
                    const char *const qb = src.q_rows(h) + 2 * (i64)row0 * a.q_token_stride;
                    qr[i] = ok ? load_b128(qb + ((u32)(2 * r * a.q_token_stride) + 16u * d8)) : zero4;
                }
            }
#pragma unroll
            for (int i = 0; i < QPT; ++i) {
                const int idx = gtid + i * GT;
                const int r = idx / D8, d8 = idx - r * D8;
                if (C::Q_CHUNKS % GT == 0 || idx < C::Q_CHUNKS) *(u32x4 *)(ql + r * KLD + 8 * d8) = qr[i];
            }
            if constexpr (C::DP != D) {
                for (int r = gtid; r < C::R; r += GT)
                    for (int d = D; d < C::DP; d += 8) *(u32x4 *)(ql + r * KLD + d) = zero4;
            }
        }
        group_sync<C::GW>();
        const int wrow0 = row0 + rw * 16 * T + 16 * TE * pass;   /* first row of this wave in this pass */
        const bool wave_has_rows = wrow0 < qlen;                 /* uniform per wave */
        const int wpos0 = src.pos(wrow0);                        /* its first row's position (causal: the last key it sees) */
        const int wposn = src.pos(wrow0 + 16 * TE - 1);          /* and its last row's */
        /* Q^T operand of this pass's tile t, d chunk c, from the staged rows */
        auto q_operand = [&](int t, int c) {
            return frag::load_vec16_lds(lds + C::Q_OFFSET + (rw * 16 * T + 16 * (TE * pass + t)) * KLD + 16 * c, KLD);
        };
        /* Q^T in registers for the pass (Q_SMEM: read per block from the staged rows, see encoder_cfg) */
        [[maybe_unused]] frag::ab qf[C::Q_SMEM ? 1 : TE][C::Q_SMEM ? 1 : DC];
        if constexpr (!C::Q_SMEM) {   /* (not through q_operand: the gfx11 code object stays as it was) */
#pragma unroll
            for (int t = 0; t < TE; ++t)
#pragma unroll
                for (int c = 0; c < DC; ++c)
                    qf[t][c] = frag::load_vec16_lds(lds + C::Q_OFFSET + (rw * 16 * T + 16 * (TE * pass + t)) * KLD + 16 * c,
                                                    KLD);
            group_sync<C::GW>();                                        /* Q staging is free again */
        }
        if constexpr (C::DP != D) {                              /* K padding columns: zeros, once per stage */
            for (int r = gtid; r < C::NSTAGE * KB; r += GT)
                for (int d = D; d < C::DP; d += 8) *(u32x4 *)(kt.kstage(r / KB) + (r % KB) * KLD + d) = zero4;
        }

        /* ---- online softmax over the key blocks ---- */
        frag::colv m[TE], l[TE];
        frag::acc o[TE][DC];
#pragma unroll
        for (int t = 0; t < TE; ++t) {
            m[t] = frag::colv_fill(R35A_ENC_NO_KEY);
            l[t] = frag::colv_fill(0.f);
#pragma unroll
            for (int c = 0; c < DC; ++c) o[t][c] = frag::acc_zero();
        }

        /* One block on stage st (this wave's key group's KBC keys of it): S^T = K Q^T, the softmax
         * update, O^T += V^T P^T. */
        auto compute = [&](int b, int st) {
            const int key0 = b * KB + kgi * KBC;
            if (!wave_has_rows || (KG > 1 && key0 >= klen))  /* uniform */
                return;
            /* causal: a block wholly above this wave's rows is skipped, one on their diagonal masked */
            if (causal && key0 > wposn)                        /* uniform */
                return;
            const bool diag = causal && key0 + KBC - 1 > wpos0;
            /* a window: a block wholly below this wave's first row's window is skipped, one reaching
             * below its last row's masked */
            bool below = false;
            if constexpr (S::WINDOW_ALIBI) {
                if (a.window > 0) {
                    if (key0 + KBC - 1 < wpos0 - a.window + 1) /* uniform */
                        return;
                    below = key0 < wposn - a.window + 1;
                }
            }
            const u16 *const kl = kt.kstage(st) + (KG > 1 ? kgi * KBC * KLD : 0);
            const u16 *const vl = KG > 1 ? kt.v_at_key(kt.vstage(st), kgi * KBC) : kt.vstage(st);
            const bool partial = key0 + KBC > klen;
            const bool masked = partial || diag || below;      /* scores set to -inf: the exact way */
            frag::acc sc[TE][NS];
            frag::ab pf[TE][NS];

            /* S^T of tile tsel (or of all T tiles: tsel < 0); in a partial block (computed once, with
             * tsel < 0) the scores past the segment's end are set to -inf */
            auto scores = [&](int tsel) {
                if constexpr (C::Q_SMEM) {
                    /* d chunk outermost: its TE Q^T operands serve the block's NS K operands */
#pragma unroll
                    for (int c = 0; c < DC; ++c) {
                        frag::ab qc[TE];
#pragma unroll
                        for (int t = 0; t < TE; ++t)
                            if (tsel < 0 || t == tsel) qc[t] = q_operand(t, c);
#pragma unroll
                        for (int j = 0; j < NS; ++j) {
                            const frag::ab kf = kt.k_operand(kl, j, c);
#pragma unroll
                            for (int t = 0; t < TE; ++t)
                                if (tsel < 0 || t == tsel)
                                    sc[t][j] = c == 0 ? frag::mma_zero<E>(kf, qc[t])
                                                      : frag::mma_enc<E>(kf, qc[t], sc[t][j]);
                        }
                    }
                } else {
#pragma unroll
                    for (int j = 0; j < NS; ++j) {
#pragma unroll
                        for (int c = 0; c < DC; ++c) {
                            const frag::ab kf = kt.k_operand(kl, j, c);
#pragma unroll
                            for (int t = 0; t < TE; ++t)
                                if (tsel < 0 || t == tsel)
                                    sc[t][j] = c == 0 ? frag::mma_zero<E>(kf, qf[t][c])
                                                      : frag::mma_enc<E>(kf, qf[t][c], sc[t][j]);
                        }
                    }
                }
            };
            /* the model features on the scores of tile tsel (all: tsel < 0), in score units (the
             * exponent takes them times scale_log2): softcap, then ALiBi's bias slope (j - p) */
            [[maybe_unused]] auto features = [&](int tsel) {
                if constexpr (S::FEATURES) {
                    if (a.softcap > 0.f) {
#pragma unroll
                        for (int t = 0; t < TE; ++t)
                            if (tsel < 0 || t == tsel)
#pragma unroll
                                for (int j = 0; j < NS; ++j)
#pragma unroll
                                    for (int e = 0; e < frag::ACC_ELEMS; ++e)
                                        sc[t][j].v[e] = a.softcap_out * tanh_fast(sc[t][j].v[e] * a.softcap_in);
                    }
                    if constexpr (S::WINDOW_ALIBI) {
                        if (a.alibi_slopes) {
#pragma unroll
                            for (int t = 0; t < TE; ++t) {
                                if (!(tsel < 0 || t == tsel))
                                    continue;
                                /* per column: the slope and the bias at this lane's first key, formed here
                                 * per block (not hoisted out of the key loop: registers) */
                                float sl[frag::NCOL], b0[frag::NCOL];
#pragma unroll
                                for (int c = 0; c < frag::NCOL; ++c) {
                                    int row = wrow0 + 16 * t + frag::acc_n_of_slot(c);
                                    opaque(row);
                                    sl[c] = load_f32(a.alibi_slopes + src.row_head(row)) * a.inv_scale;
                                    b0[c] = sl[c] * (float)(key0 + frag::acc_m(0) - src.pos(row));
                                }
                                /* element e's key is acc_m(0) + a constant: the factors are immediates */
#pragma unroll
                                for (int j = 0; j < NS; ++j)
#pragma unroll
                                    for (int e = 0; e < frag::ACC_ELEMS; ++e) {
                                        const int c = frag::acc_slot(e);
                                        const float dk = (float)(16 * j + (frag::acc_m(e) - frag::acc_m(0)));
                                        sc[t][j].v[e] += __builtin_fmaf(sl[c], dk, b0[c]);
                                    }
                            }
                        }
                    }
                }
            };
            scores(-1);
            if constexpr (S::FEATURES)
                features(-1);
            if (partial) {
#pragma unroll
                for (int j = 0; j < NS; ++j)
                    if (key0 + 16 * j + 16 > klen) {                 /* the sub-tile holding the end, or past it */
#pragma unroll
                        for (int e = 0; e < frag::ACC_ELEMS; ++e)
                            if (key0 + 16 * j + frag::acc_m(e) >= klen)
#pragma unroll
                                for (int t = 0; t < TE; ++t) sc[t][j].v[e] = neg_inf();
                    }
            }
            if (diag) {                                      /* key > pos(row): -inf (key 0 of block 0 stays) */
#pragma unroll
                for (int j = 0; j < NS; ++j)
#pragma unroll
                    for (int e = 0; e < frag::ACC_ELEMS; ++e)
#pragma unroll
                        for (int t = 0; t < TE; ++t)
                            if (key0 + 16 * j + frag::acc_m(e) > src.pos(wrow0 + 16 * t + frag::acc_n(e)))
                                sc[t][j].v[e] = neg_inf();
            }
            if constexpr (S::WINDOW_ALIBI) {
                if (below) {                                 /* key < pos(row) - window + 1: -inf */
#pragma unroll
                    for (int j = 0; j < NS; ++j)
#pragma unroll
                        for (int e = 0; e < frag::ACC_ELEMS; ++e)
#pragma unroll
                            for (int t = 0; t < TE; ++t)
                                if (key0 + 16 * j + frag::acc_m(e) < src.pos(wrow0 + 16 * t + frag::acc_n(e)) - a.window + 1)
                                    sc[t][j].v[e] = neg_inf();
                }
            }
            /* P^T = exp2(S^T * scale_log2 - m) in place; returns this lane's share of the block's
             * column sums */
            auto exponentiate = [&](int t) {
                frag::colv bs = frag::colv_fill(0.f);
#pragma unroll
                for (int j = 0; j < NS; ++j) {
#pragma unroll
                    for (int e = 0; e < frag::ACC_ELEMS; ++e)
                        sc[t][j].v[e] = exp2_fast(__builtin_fmaf(sc[t][j].v[e], sl2, -m[t].v[frag::acc_slot(e)]));
                    const frag::colv ps = frag::col_sum_share(sc[t][j]);
#pragma unroll
                    for (int c = 0; c < frag::NCOL; ++c) bs.v[c] += ps.v[c];
                }
                return bs;
            };

#pragma unroll
            for (int t = 0; t < TE; ++t) {
                /* Speculatively against the running max; once more, exactly, when the block moves it
                 * (rare, wave-uniform). The first block (which sets the max) and a partial last block
                 * (its masked scores are not recomputed) go the exact way at once. One copy of each
                 * path: the branches do not double the live registers. */
                bool exact = !encoder_paths::SPECULATE || b == 0 || masked;
                frag::colv bs;
                for (;;) {
                    if (exact) {
                        /* redo: the exponentiation overwrote them */
                        if (encoder_paths::SPECULATE && !(b == 0 || masked)) {
                            /* a memory clobber: the compiler must not hoist this rare recomputation's
                             * K operand reads out of the loop into registers held for the whole block */
                            wave_lds_sync();
                            scores(t);
                            if constexpr (S::FEATURES)
                                features(t);
                        }
                        frag::acc mx = sc[t][0];
#pragma unroll
                        for (int j = 1; j < NS; ++j)
#pragma unroll
                            for (int e = 0; e < frag::ACC_ELEMS; ++e) mx.v[e] = fmax_nonan(mx.v[e], sc[t][j].v[e]);
                        /* -inf where every logit of the column is -inf (masked, or -inf logits):
                         * then m stays R35A_ENC_NO_KEY and the column's l and O stay 0 */
                        const frag::colv cm = frag::col_max(mx);
                        frag::colv corr;
#pragma unroll
                        for (int c = 0; c < frag::NCOL; ++c) {
                            const float mn = fmax(m[t].v[c], cm.v[c] * sl2);
                            corr.v[c] = exp2_fast(m[t].v[c] - mn);   /* 0 on the first block */
                            m[t].v[c] = mn;
                            l[t].v[c] *= corr.v[c];
                        }
                        if (b > 0)                               /* O is still zero in the first block */
#pragma unroll
                            for (int c = 0; c < DC; ++c)
#pragma unroll
                                for (int e = 0; e < frag::ACC_ELEMS; ++e) o[t][c].v[e] *= corr.v[frag::acc_slot(e)];
                    }
                    bs = exponentiate(t);
                    if (exact)
                        break;
                    bool big = false;
#pragma unroll
                    for (int c = 0; c < frag::NCOL; ++c) big |= bs.v[c] > R35A_ENC_RESCALE_LIMIT;   /* also +inf */
                    if (!wave_any(big))
                        break;
                    exact = true;
                }
#pragma unroll
                for (int c = 0; c < frag::NCOL; ++c) l[t].v[c] += bs.v[c];
#pragma unroll
                for (int j = 0; j < NS; ++j) pf[t][j] = frag::b_from_acc_keys<P>(sc[t][j]);
            }

            /* O^T += V^T P^T */
#pragma unroll
            for (int j = 0; j < NS; ++j) {
#pragma unroll
                for (int c = 0; c < DC; ++c) {
                    const frag::ab vf = kt.v_operand(vl, j, c);
#pragma unroll
                    for (int t = 0; t < TE; ++t) o[t][c] = frag::mma_enc<E>(vf, pf[t][j], o[t][c]);
                }
            }
        };

        kv.stream(nblk, compute);

        /* ---- the tail split: key group 1's m, l and O^T joined into key group 0's ---- */
        if constexpr (KG > 1) {
            kv.drain();
            merge_key_groups<C>(lds, rw, kgi, wave_has_rows, m, l, o);
        }

        /* ---- a block-table entry outside the cache (paged): page 0 was read in its place; the
         * group's rows become NaN (l = NaN) and the sequence is recorded. Uniform; the error path only. */
        if constexpr (S::PAGED) {
            src.scan_pages(nblk * KB);
            if (src.bad) {
#pragma unroll
                for (int t = 0; t < TE; ++t) l[t] = frag::colv_fill(quiet_nan());
                if (src.reporter) report_bad_data(a.error, R35A_DEVICE_ERROR_PAGE_INDEX, (u32)src.seq);
            }
        }

        /* ---- O = O^T / l (with a sink: row_inv), written as whole rows, and the LSE ---- */
        if (wave_has_rows && kgi == 0) {                         /* key group 0 stores the joined rows */
            frag::colv inv[TE];
#pragma unroll
            for (int t = 0; t < TE; ++t) {
                const frag::colv lt = frag::col_sum_finish(l[t]);
#pragma unroll
                /* l >= 1 once a row saw a key (its max counts 1); l = 0: it saw none, zeros; NaN stays NaN */
                for (int c = 0; c < frag::NCOL; ++c) inv[t].v[c] = lt.v[c] == 0.f ? 0.f : rcp_fast(lt.v[c]);
                if constexpr (S::FEATURES) {
                    if (a.sinks || a.lse) {                      /* uniform */
#pragma unroll
                        for (int c = 0; c < frag::NCOL; ++c) {
                            const int row = wrow0 + 16 * t + frag::acc_n_of_slot(c);
                            const int hq = src.row_head(row);
                            const float mm = lt.v[c] == 0.f ? neg_inf() : m[t].v[c];   /* no key: -inf */
                            const float sink2 = a.sinks ? load_f32(a.sinks + hq) * LOG2E_F : neg_inf();
                            inv[t].v[c] = row_inv(mm, lt.v[c], sink2);
                            if (a.lse && row < qlen && frag::col_owner(c))
                                store_f32(a.lse + (i64)src.row_token(row) * a.lse_token_stride +
                                              (i64)hq * a.lse_head_stride,
                                          row_lse(mm, lt.v[c], sink2));
                        }
                    }
                }
            }
            if constexpr (S::PACKED) {
                store_rows<C, E, D>(wrow0, inv, o, [&](int row) -> u16 * { return row < qlen ? src.o_row(row) : nullptr; });
            } else {
                u16 *const og = src.o_rows(h);
                store_rows<C, E, D>(wrow0, inv, o, [&](int row) -> u16 * {
                    return row < qlen ? og + (i64)row * a.o_token_stride : nullptr;
                });
            }
        }
        if constexpr (C::PASSES > 1) {                           /* the next pass restages Q and K/V */
            kv.drain();
            group_sync<C::GW>();
        }
    } /* pass */
}

/* The kernel of a variant: a normal launch (grid { workgroups of items, heads }, encoder_args.h), or,
 * for a workgroup-wide tiling with args.tail_items > 0, a one-dimensional grid over the items before
 * the tail (items in head-major order), whose last tail_items items the variant's tail kernel below
 * serves. */
template <class E, int D, int T, int KB, int NW, int WAVES, int MAXLEN>
R35A_DEV void encoder_kernel(const r35a_encoder_args &a) {
    typedef encoder_cfg<E, D, T, KB, NW, WAVES, MAXLEN, 1> C;
#if defined(R35A_TARGET_CUDA)
    /* launched with exactly C::LDS_BYTES (<name>_lds_bytes below), within the contract's budget */
    extern __shared__ __align__(16) unsigned char smem[];
#else
    __shared__ __attribute__((aligned(16))) unsigned char smem[C::LDS_BYTES];
#endif
    const int g = wave_id() / C::GW;                         /* this wave's group (uniform) */
    int s, xb, h;
    if (!C::SHORT && a.tail_items > 0) {                     /* uniform */
        grid_launch_dependents();                            /* the tail kernel may start on free slots */
        const i64 nrb = ((i64)a.max_seqlen + C::R - 1) / C::R, per_head = nrb * a.num_segments;
        const i64 item = block_x();
        h = (int)(item / per_head);
        const i64 rem = item - h * per_head;
        s = (int)(rem / nrb);
        xb = (int)(rem - s * nrb);
    } else {
        const int nrb = (a.max_seqlen + C::R - 1) / C::R;   /* row blocks per segment */
        const int item = block_x() * C::NG + g;
        s = item / nrb;
        xb = item - s * nrb;
        h = block_y();
    }
    varlen_source src{a};
    encoder_body<E, D, T, KB, NW, WAVES, MAXLEN, 1>(src, smem, g, s, xb, h, -1);
}

/* The tail kernel of a workgroup-wide variant: the last args.tail_items items (head-major order), each
 * as two workgroups of half its rows whose waves split every block's keys into two key groups (KG =
 * 2): shorter workgroups for the last, part-empty round of the device's workgroup slots. Grid
 * { 2 tail_items, 1, 1 }. */
template <class E, int D, int T, int KB, int NW, int WAVES>
R35A_DEV void encoder_tail_kernel(const r35a_encoder_args &a) {
    typedef encoder_cfg<E, D, T, KB, NW, WAVES, 0, 2> C;
#if defined(R35A_TARGET_CUDA)
    extern __shared__ __align__(16) unsigned char smem[];
#else
    __shared__ __attribute__((aligned(16))) unsigned char smem[C::LDS_BYTES];
#endif
    const i64 nrb = ((i64)a.max_seqlen + 2 * C::R - 1) / (2 * C::R), per_head = nrb * a.num_segments;
    const i64 item = per_head * a.num_heads - a.tail_items + block_x() / 2;
    const int h = (int)(item / per_head);
    const i64 rem = item - h * per_head;
    const int s = (int)(rem / nrb), xb = (int)(rem - s * nrb);
    varlen_source src{a};
    encoder_body<E, D, T, KB, NW, WAVES, 0, 2>(src, smem, 0, s, xb, h, (int)(block_x() & 1));
    /* Launched programmatically after the variant's launch (NVIDIA): it reads nothing that launch
     * writes, but it must not end before it, so that the stream's later work sees both. */
    grid_dependency_wait();
}

/* The paged sibling of a workgroup-wide variant (prefill_args.h): causal prefill over the paged KV
 * cache with the variant's tiling and body, K/V rows read through the block table (paged_source), the
 * G = kv_group query heads of a kv head packed into one item of M x G rows (each K/V block staged
 * once for all of them). Grid { num_seqs * nrb, num_kv_heads, 1 }, nrb = ceil(max_query_len G / R):
 * workgroup (x, y) serves row block x % nrb of sequence x / nrb and kv head y. */
template <class E, int D, int T, int KB, int NW, int WAVES>
R35A_DEV void encoder_paged_kernel(const r35a_prefill_args &a) {
    typedef encoder_cfg<E, D, T, KB, NW, WAVES, 0, 1> C;
#if defined(R35A_TARGET_CUDA)
    extern __shared__ __align__(16) unsigned char smem[];
#else
    __shared__ __attribute__((aligned(16))) unsigned char smem[C::LDS_BYTES];
#endif
    /* row blocks per sequence (> 0: the host launches nothing for max_query_len 0; max_query_len x G
     * <= R35A_PREFILL_MAX_ROWS, the planner's bound) */
    const int nrb = (a.max_query_len * a.kv_group + C::R - 1) / C::R;
    if (nrb <= 0)
        return;
    const int item = block_x();
    const int s = item / nrb, xb = item - s * nrb;
    paged_source src{a};
    encoder_body<E, D, T, KB, NW, WAVES, 0, 1>(src, smem, 0, s, xb, block_y(), -1);   /* h: the kv head */
}

} /* namespace r35a */

/* NVIDIA: a variant is launched with exactly the dynamic shared memory its layout uses, published as
 * the device global <name>_lds_bytes, which the host reads at module load (src/gpu_runtime.c), as
 * for decode: the one place the size is decided is encoder_cfg. gfx11: static LDS, no symbol. */
#if defined(R35A_TARGET_CUDA)
#define R35A_ENCODER_LDS_SYMBOL(name, dtype, D, rows, KB, NW, WAVES, MAXLEN, KG)                          \
    extern "C" __device__ const int name##_lds_bytes =                                                     \
        r35a::encoder_cfg<r35a::dtype##_t, D, (rows) / 16, KB, NW, WAVES, MAXLEN, KG>::LDS_BYTES;
#else
#define R35A_ENCODER_LDS_SYMBOL(name, dtype, D, rows, KB, NW, WAVES, MAXLEN, KG)
#endif

/* One extern "C" kernel per variant; the symbol is the variant name. rows = 16 * T. Each
 * workgroup-wide variant (maxlen 0) also has its tail kernel, listed in variants.def on its own line. */
#define R35A_ENCODER_VARIANT(arch, name, dtype, D, rows, KB, NW, WAVES, MAXLEN)                        \
    R35A_ENCODER_LDS_SYMBOL(name, dtype, D, rows, KB, NW, WAVES, MAXLEN, 1)                               \
    R35A_KERNEL R35A_KERNEL_BOUNDS(32 * (NW), R35A_FRAG_ENC_WAVES(WAVES)) void name(r35a_encoder_args a) { \
        r35a::encoder_kernel<r35a::dtype##_t, D, (rows) / 16, KB, NW, WAVES, MAXLEN>(a);                  \
    }
#define R35A_ENCODER_TAIL(arch, name, variant, dtype, D, rows, KB, NW, WAVES)                              \
    R35A_ENCODER_LDS_SYMBOL(name, dtype, D, rows, KB, NW, WAVES, 0, 2)                                    \
    R35A_KERNEL R35A_KERNEL_BOUNDS(32 * (NW), R35A_FRAG_ENC_WAVES(WAVES)) void name(r35a_encoder_args a) { \
        r35a::encoder_tail_kernel<r35a::dtype##_t, D, (rows) / 16, KB, NW, WAVES>(a);                     \
    }
/* The paged sibling (<variant>_paged) of a workgroup-wide variant: its tiling, prefill_args.h's argument. */
#define R35A_ENCODER_PAGED(arch, name, variant, dtype, D, rows, KB, NW, WAVES)                             \
    R35A_ENCODER_LDS_SYMBOL(name, dtype, D, rows, KB, NW, WAVES, 0, 1)                                    \
    R35A_KERNEL R35A_KERNEL_BOUNDS(32 * (NW), R35A_FRAG_ENC_WAVES(WAVES)) void name(r35a_prefill_args a) { \
        r35a::encoder_paged_kernel<r35a::dtype##_t, D, (rows) / 16, KB, NW, WAVES>(a);                    \
    }
/* R35A_ENCODER_VARIANT_LIST names a list of R35A_ENCODER_VARIANT(...) / R35A_ENCODER_TAIL(...) lines to
 * instantiate instead of variants/variants.def: a compile unit's (tools/gen_variants.py --units), or
 * a tuner's candidates. */
#ifdef R35A_ENCODER_VARIANT_LIST
#include R35A_ENCODER_VARIANT_LIST
#else
#include "variants.def"
#endif
#undef R35A_ENCODER_VARIANT
#undef R35A_ENCODER_TAIL
#undef R35A_ENCODER_PAGED
#undef R35A_ENCODER_LDS_SYMBOL
