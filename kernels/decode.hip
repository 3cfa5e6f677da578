/*
 * decode.hip - paged-KV decode and speculative decode on WMMA (gfx11 wave32).
 *
 * One workgroup per (KV split, kv head x row group, sequence); see decode_args.h for the grid and
 * the workspace. All G x M query rows of a kv head (up to R = 16 * T of them) share one pass over
 * the KV cache, so each KV byte of a split is read once.
 *
 * The products run "transposed", with the query rows along the accumulator's n (column) axis:
 *     S^T[key][row]  = K[key][:] . Q[row][:]        A = K tile (16 keys x 16 d, global b128),
 *                                                  B = Q^T     (registers, loaded once)
 *     O^T[d][row]   += V^T[d][key] . P^T[key][row]  A = V^T     (V tile transposed through LDS),
 *                                                  B = P^T     (the S^T accumulator, re-packed)
 * so a query row's softmax statistics are per accumulator column (per lane on gfx11) and the
 * rescale of O by the running-max correction is a per-column multiply.
 *
 * Waves: NW = KW x DW. The KW key groups take 16-key tiles round-robin, each with its own online
 * softmax; the DW waves of a key group split the head dimension into DW slices of DS = D / DW
 * (each owns its slice of Q, K, V and O) and add their partial S^T tiles through LDS by
 * reduce-scatter (two LDS-only barriers per tile). Key groups merge through LDS at the end of the
 * split; splits
 * merge through the workspace, done by the last workgroup of the (sequence, kv head, row group)
 * to arrive (wrapping atomic counter, device-scope release/acquire fences).
 *
 * Compile-time: element type, D, T (rows R = 16T), KW, DW, WAVES (the occupancy contract): they
 * size registers and LDS.
 * Run-time: page size (any multiple of 16), strides, G, M (per sequence), window, scale, splits.
 */
#include "common/device.h"
#include "common/fragment.h"
#include "common/decode_args.h"

namespace r35a {

template <class E, int D, int T, int KW, int DW, int WAVES>
struct decode_cfg {
    static constexpr int NW = KW * DW;        /* waves per workgroup */
    static constexpr int THREADS = 32 * NW;
    static constexpr int DS = D / DW;         /* head-dim slice per wave */
    static constexpr int NC = DS / 16;        /* 16-wide d chunks per wave */
    static constexpr int DC = D / 16;         /* d chunks of the whole head */
    static constexpr int R = 16 * T;          /* query rows per workgroup */
    /* V^T row: 16 keys (32 B, b128-aligned). Padding to 48 B would remove the 2-way bank conflict
     * of the transposing stores but costs LDS = occupancy; LDS time is ~5 % of a tile's DRAM time. */
    static constexpr int VT_LD = 16;
    static constexpr int V_CHUNKS = 16 * DS / 8 / 32;   /* b128 chunks of a V tile slice per lane */
    static_assert(D % (16 * DW) == 0, "each wave needs whole 16-wide d chunks");
    static_assert(V_CHUNKS * 32 * 8 == 16 * DS, "a V tile slice must split evenly over the lanes");
    static_assert(KW == 1 || KW == 2 || KW == 4 || KW == 8, "key groups merge in a binary tree");
    /* LDS budget from the occupancy contract: WAVES waves on each of a WGP's 4 SIMDs share its
     * 128 KiB of LDS (and one workgroup can have at most 64 KiB). */
    static constexpr int WGS_PER_WGP = (4 * WAVES + NW - 1) / NW;
    static constexpr int LDS_BUDGET = 131072 / WGS_PER_WGP < 65536 ? 131072 / WGS_PER_WGP : 65536;
    /* LDS, loop phase. Each wave owns a region holding, at different times of an iteration, its
     * partial S^T tiles (written before the first barrier, read by the key group between the two
     * barriers) and its V^T tile (written after the second barrier, read before the wave's next
     * partial write), so the two share it. Then one reduced S^T per key group. */
    static constexpr int VT_WAVE = DS * VT_LD * 2;
    static constexpr int PX_WAVE = DW > 1 ? T * frag::ACC_NATIVE_FLOATS * 4 : 0;
    static constexpr int WAVE_REGION = VT_WAVE > PX_WAVE ? VT_WAVE : PX_WAVE;
    static constexpr int SR_BYTES = DW > 1 ? KW * T * frag::ACC_NATIVE_FLOATS * 4 : 0;
    static constexpr int LOOP_BYTES = NW * WAVE_REGION + SR_BYTES;
    /* Floats of the key group's S^T tiles each wave reduces (reduce-scatter). */
    static constexpr int SLICE = T * frag::ACC_NATIVE_FLOATS / DW;
    /* LDS, merge phase (reuses the loop's): KW/2 slots of a key group's accumulators and stats. */
    static constexpr int MSLOT_ACC = DW * T * NC * frag::ACC_NATIVE_FLOATS;   /* floats */
    static constexpr int MSLOT_FLOATS = MSLOT_ACC + 2 * R;
    static constexpr int MERGE_BYTES = KW > 1 ? (KW / 2) * MSLOT_FLOATS * 4 : 0;
    static constexpr int LDS_BYTES = (LOOP_BYTES > MERGE_BYTES ? LOOP_BYTES : MERGE_BYTES) + 16;
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

template <class E, int D, int T, int KW, int DW, int WAVES>
R35A_DEV void decode_kernel(const r35a_decode_args &a) {
    typedef decode_cfg<E, D, T, KW, DW, WAVES> C;
    constexpr int NC = C::NC, DS = C::DS, R = C::R;
    __shared__ __attribute__((aligned(16))) unsigned char smem[C::LDS_BYTES];
    int *const last_flag = (int *)(smem + C::LDS_BYTES - 16);

    const int w = wave_id(), lane = lane_id();
    const int kg = w / DW, dg = w % DW;
    const int split = block_x(), y = block_y(), s = block_z();
    const int g = y / a.num_row_groups, rg = y - g * a.num_row_groups;

    const int q0 = a.query_start_loc[s];
    const int M = a.query_start_loc[s + 1] - q0;
    const int L = a.seq_lens[s];
    if (M <= 0 || M > a.max_query_len) return;            /* no rows, or the generic kernel's */
    const int G = a.group_size;
    const int rows = G * M;
    if (rg * R >= rows) return;

    /* Keys the rows reach: [lo, L); whole tiles [tile_lo, tile_hi) split evenly over the splits. */
    const int W = a.window;
    const int lo = (int)r35a_window_first_key(L - M, W);
    const int tile_lo = lo >> 4, tile_hi = (imax(L, 0) + 15) >> 4;
    const int ntiles = imax(tile_hi - tile_lo, 0);
    const int nsplit = a.num_splits;
    const int per = (ntiles + nsplit - 1) / nsplit;
    const int t_begin = tile_lo + split * per;
    const int t_end = imin(t_begin + per, tile_hi);
    const int niter = t_end > t_begin ? (t_end - t_begin + KW - 1) / KW : 0;
    /* Tiles inside [full_lo, full_hi] are visible to every row: no mask needed. */
    const int full_lo = (int)r35a_window_first_key(L - 1, W), full_hi = L - M;

    /* ---- per-row (accumulator column) information ---- */
    int row_hi[T][frag::NCOL], row_lo[T][frag::NCOL];
    bool row_ok[T][frag::NCOL];
    for (int t = 0; t < T; ++t)
        for (int c = 0; c < frag::NCOL; ++c) {
            const int row = rg * R + t * 16 + frag::acc_n_of_slot(c);
            const bool ok = row < rows;
            const int i = ok ? row % M : 0;
            const int p = L - M + i;
            row_ok[t][c] = ok;
            row_hi[t][c] = ok ? p : -1;                          /* a padding row sees nothing */
            row_lo[t][c] = (int)r35a_window_first_key(p, W);
        }

    /* ---- Q^T fragments of this wave's d slice (B operand: vector = query row) ---- */
    frag::ab qf[T][NC];
    for (int t = 0; t < T; ++t)
        for (int c = 0; c < NC; ++c)
            qf[t][c] = frag::load_vec16_global_u16(
                [&](int n) -> const void * {
                    const int row = imin(rg * R + t * 16 + n, rows - 1);   /* padding rows: a real row */
                    const int hl = row / M, i = row - hl * M;
                    const i64 off = (i64)(q0 + i) * a.q_token_stride + (i64)(g * G + hl) * a.q_head_stride + dg * DS + 16 * c;
                    return (const u16 *)a.q + off;
                },
                [&](int n) { return rg * R + t * 16 + n < rows; });

    row_state<NC> st[T];
    for (int t = 0; t < T; ++t) {
        st[t].m = frag::colv_fill(neg_inf());
        st[t].l = frag::colv_fill(0.f);
        for (int c = 0; c < NC; ++c) st[t].o[c] = frag::acc_zero();
    }

    u16 *const vt = (u16 *)(smem + w * C::WAVE_REGION);
    float *const px = (float *)(smem + w * C::WAVE_REGION);            /* this wave's partial S^T */
    float *const sr = (float *)(smem + C::NW * C::WAVE_REGION) + kg * T * frag::ACC_NATIVE_FLOATS;
    const i64 k_head = (i64)g * a.k_head_stride + dg * DS;
    const i64 v_head = (i64)g * a.v_head_stride + dg * DS;
    const int32_t *const bt = a.block_table + (i64)s * a.block_table_stride;
    const int B = a.page_size;
    /* Page index and slot of the wave's current tile, advanced by 16 * KW keys per iteration
     * (B is a multiple of 16, so a tile never straddles pages). */
    int pg_idx = 0, pg_slot = 0;
    {
        const int j = (t_begin + kg) * 16;
        pg_idx = uniform(j / B);
        pg_slot = j - pg_idx * B;
    }

    for (int it = 0; it < niter; ++it) {
        const int tile = t_begin + it * KW + kg;
        const bool active = tile < t_end;                 /* uniform per wave */
        const int j0 = tile * 16;
        if (it > 0) {
            pg_slot += 16 * KW;
            while (pg_slot >= B) {
                pg_slot -= B;
                ++pg_idx;
            }
        }
        frag::acc sacc[T];
        u32x4 vraw[C::V_CHUNKS];
        if (active) {
            const int slot = pg_slot;
            /* The table entry is uniform: read it once and keep it (and the page offsets) scalar. */
            const i64 page = load_i32_uniform(bt + pg_idx);
            const u16 *kb = (const u16 *)a.k_cache + page * a.k_page_stride + k_head + (i64)slot * a.k_slot_stride;
            const u16 *vb = (const u16 *)a.v_cache + page * a.v_page_stride + v_head + (i64)slot * a.v_slot_stride;
            frag::ab kf[NC];
            for (int c = 0; c < NC; ++c)
                kf[c] = frag::load_vec16_global([&](int key) -> const void * { return kb + key * a.k_slot_stride + 16 * c; });
            for (int u = 0; u < C::V_CHUNKS; ++u) {   /* lane: key lane % 16, d chunk 2u + lane / 16 */
                const int key = lane & 15, d8 = 2 * u + (lane >> 4);
                vraw[u] = load_b128(vb + key * a.v_slot_stride + 8 * d8);
            }
            for (int t = 0; t < T; ++t) {
                sacc[t] = frag::acc_zero();
                for (int c = 0; c < NC; ++c) sacc[t] = frag::mma<E>(kf[c], qf[t][c], sacc[t]);
            }
        }
        if constexpr (DW > 1) {
            /* Add the DW partial S^T tiles of the key group: reduce-scatter (each wave sums a
             * 1/DW slice over the DW partials) then every wave reads the whole sum, so all DW
             * waves hold bit-identical scores and make identical softmax decisions. */
            if (active)
                for (int t = 0; t < T; ++t) frag::acc_store_lds(px + t * frag::ACC_NATIVE_FLOATS, sacc[t]);
            block_sync_lds();
            if (active) {
                const float *grp = (const float *)(smem + kg * DW * C::WAVE_REGION);
                for (int kk = 0; kk < (C::SLICE + 31) / 32; ++kk) {
                    /* (a slice narrower than the wave: the spare lanes redo its last element) */
                    const int f = dg * C::SLICE + imin(lane + 32 * kk, C::SLICE - 1);
                    float sum = grp[f];
                    for (int d = 1; d < DW; ++d) sum += grp[d * (C::WAVE_REGION / 4) + f];
                    sr[f] = sum;
                }
            }
            block_sync_lds();
            if (active)
                for (int t = 0; t < T; ++t) sacc[t] = frag::acc_load_lds(sr + t * frag::ACC_NATIVE_FLOATS);
        }
        if (!active) continue;

        /* V tile slice -> LDS as V^T[d][key]; keys past the sequence end are zeroed (a partial
         * last page may hold anything there, and 0 * NaN would poison the product). */
        for (int u = 0; u < C::V_CHUNKS; ++u) {
            const int key = lane & 15, d8 = 2 * u + (lane >> 4);
            u32x4 v = j0 + key < L ? vraw[u] : (u32x4){0u, 0u, 0u, 0u};
            for (int e = 0; e < 4; ++e) {
                vt[(8 * d8 + 2 * e) * C::VT_LD + key] = (u16)v[e];
                vt[(8 * d8 + 2 * e + 1) * C::VT_LD + key] = (u16)(v[e] >> 16);
            }
        }
        wave_sync();   /* the wave's lanes read each other's V^T stores below */

        const bool need_mask = !(j0 >= full_lo && j0 + 15 <= full_hi);
        frag::ab pf[T];
        for (int t = 0; t < T; ++t) {
            frag::acc &sc = sacc[t];
            if (need_mask)
                for (int e = 0; e < frag::ACC_ELEMS; ++e) {
                    const int j = j0 + frag::acc_m(e), c = frag::acc_slot(e);
                    if (j > row_hi[t][c] || j < row_lo[t][c]) sc.v[e] = neg_inf();
                }
            const frag::colv mx = frag::col_max(sc);
            frag::colv corr, mu;
            for (int c = 0; c < frag::NCOL; ++c) {
                const float mn = fmax(st[t].m.v[c], mx.v[c] * a.scale_log2);
                mu.v[c] = mn == neg_inf() ? 0.f : mn;
                corr.v[c] = exp2_fast(st[t].m.v[c] - mu.v[c]);
                st[t].m.v[c] = mn;
            }
            for (int e = 0; e < frag::ACC_ELEMS; ++e)
                sc.v[e] = exp2_fast(__builtin_fmaf(sc.v[e], a.scale_log2, -mu.v[frag::acc_slot(e)]));
            const frag::colv ps = frag::col_sum_share(sc);
            for (int c = 0; c < frag::NCOL; ++c) st[t].l.v[c] = st[t].l.v[c] * corr.v[c] + ps.v[c];
            for (int k = 0; k < NC; ++k)
                for (int e = 0; e < frag::ACC_ELEMS; ++e) st[t].o[k].v[e] *= corr.v[frag::acc_slot(e)];
            pf[t] = frag::b_from_acc<E>(sc);
        }
        for (int c = 0; c < NC; ++c) {
            const frag::ab vf = frag::load_vec16_lds(vt + 16 * c * C::VT_LD, C::VT_LD);
            for (int t = 0; t < T; ++t) st[t].o[c] = frag::mma<E>(vf, pf[t], st[t].o[c]);
        }
        wave_sync();   /* V^T read before the wave's next writes to its region (partial S^T or V^T) */
    }
    for (int t = 0; t < T; ++t) st[t].l = frag::col_sum_finish(st[t].l);

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
        float *const grec = recs + group * nsplit * rec_floats;
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
        if (kg != 0) return;
        for (int t = 0; t < T; ++t) {
            if (rg * R + t * 16 >= rows) break;
            frag::colv mx = frag::colv_fill(neg_inf());
            for (int k = 0; k < nsplit; ++k) {
                const frag::colv mk = frag::colv_load(grec + k * rec_floats + t * 16, true);
                for (int c = 0; c < frag::NCOL; ++c) mx.v[c] = fmax(mx.v[c], mk.v[c]);
            }
            frag::colv mu, l = frag::colv_fill(0.f);
            for (int c = 0; c < frag::NCOL; ++c) mu.v[c] = mx.v[c] == neg_inf() ? 0.f : mx.v[c];
            for (int c = 0; c < NC; ++c) st[t].o[c] = frag::acc_zero();
            for (int k = 0; k < nsplit; ++k) {
                const float *rec = grec + k * rec_floats;
                const frag::colv mk = frag::colv_load(rec + t * 16, true);
                const frag::colv lk = frag::colv_load(rec + R + t * 16, true);
                frag::colv wk;
                for (int c = 0; c < frag::NCOL; ++c) {
                    wk.v[c] = exp2_fast(mk.v[c] - mu.v[c]);
                    l.v[c] += lk.v[c] * wk.v[c];
                }
                for (int c = 0; c < NC; ++c) {
                    const frag::acc ok = frag::acc_load_global_if(rec + 2 * R + (t * C::DC + dg * NC + c) * frag::ACC_NATIVE_FLOATS, row_ok[t]);
                    for (int e = 0; e < frag::ACC_ELEMS; ++e) st[t].o[c].v[e] += ok.v[e] * wk.v[frag::acc_slot(e)];
                }
            }
            st[t].l = l;
        }
    } else if (kg != 0) {
        return;
    }

    /* ---- O = O^T / l, zeros for rows that saw no key ---- */
    for (int t = 0; t < T; ++t) {
        u16 *orow[frag::NCOL];
        float inv[frag::NCOL];
        for (int c = 0; c < frag::NCOL; ++c) {
            const int row = rg * R + t * 16 + frag::acc_n_of_slot(c);
            const int hl = row_ok[t][c] ? row / M : 0, i = row - hl * M;
            orow[c] = (u16 *)a.out + (i64)(q0 + i) * a.o_token_stride + (i64)(g * G + hl) * a.o_head_stride + dg * DS;
            inv[c] = st[t].l.v[c] > 0.f ? rcp_fast(st[t].l.v[c]) : 0.f;
        }
        for (int c = 0; c < NC; ++c)
            for (int e = 0; e < frag::ACC_ELEMS; ++e) {
                const int sl = frag::acc_slot(e);
                if (row_ok[t][sl]) store_u16(orow[sl] + 16 * c + frag::acc_m(e), E::from_f32(st[t].o[c].v[e] * inv[sl]));
            }
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
