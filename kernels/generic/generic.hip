/*
 * generic.hip - the portable attention kernel: plain HIP, no matrix instructions, correct before
 * fast. It serves everything the tuned decode variants do not:
 *   - paged attention with any head size up to the kernel's dmax, any page size >= 1, logit
 *     softcap, ALiBi, attention sinks, sliding windows, 8-bit KV caches (fp8 e4m3 / int8 with
 *     scales per tensor, per kv head or per token and kv head) and any query length M (causal
 *     among the M query tokens: chunked prefill), skipping sequences a decode kernel of the same
 *     call serves (M <= min_query_len);
 *   - varlen attention over packed segments, causal or not, GQA, sinks, arbitrary token/head
 *     strides (a fused qkv buffer is read in place);
 *   - both with the row's softmax LSE as an optional output (natural log, sink included; -inf for
 *     a row that sees no key, NaN for a NaN row), written by the merge at the end of the row;
 *   - merge_states_<dtype>: N partial (O, LSE) states of the same rows -> (O, LSE), one workgroup
 *     per row like the attention kernels.
 *
 * One workgroup of 4 waves per (query token, query head) row. The waves take keys round-robin,
 * each with its own online softmax (base 2); a key's logit is a dot product over the head split
 * across the 32 lanes (lane l holds d = l, l + 32, ...), reduced with DPP / permlanex16. The four
 * partial softmaxes merge through LDS at the end, where the row's sink joins the denominator.
 * Rows that see no key are written as zeros. Lanes past the head size read element D-1 again and
 * discard it (no divergent branches around loads, and every lane's address is a real one).
 *
 * The KV element type is a run-time argument of the paged kernel: a uniform switch picks one of
 * three instantiations of the same row loop (the Q/O dtype, fp8 e4m3, int8), which share the LDS
 * of the merge. 8-bit elements are dequantized in registers (device.h); a per-tensor or per-kv-head
 * K scale is folded into the softmax scale and the V scale into the output normalization, so the
 * loop does no per-element multiply for them. Per-token-head scales are two wave-uniform loads per
 * key from the key's page and slot: the K scale multiplies the key's dot product, the V scale its
 * softmax weight in the value accumulation only (the denominator l sums the unscaled weights), all
 * in fp32.
 *
 * Non-finite inputs follow the reference (rdna35attn.h): the running maxima propagate NaN (a
 * hardware max drops it), so a NaN or +inf logit makes the row NaN, and a -inf logit weighs
 * nothing (the first keys' rescale never computes -inf - -inf).
 *
 * Bad device metadata (device_error.h): a row whose sequence (segment) fails its checks, or that
 * reaches a block_table entry outside 0..num_pages-1, is written as NaN and recorded; an out-of-range
 * page is never read (the walk reads page 0 in its place and the row's result is discarded).
 */
#include "common/device.h"
#include "common/device_error.h"
#include "common/row_norm.h"
#include "generic/generic_args.h"

namespace r35a {

constexpr int GEN_WAVES = R35A_GENERIC_THREADS / R35A_WAVE;

/* max(a, b) that is NaN when either is (the reference's rule; v_max_f32 / fmaxf return the other
 * operand). */
R35A_DEV float max_keep_nan(float a, float b) { return (a > b || a != a) ? a : b; }

/* Writes the row (D elements) as NaN: the output of a row whose metadata is bad. Every thread of the
 * workgroup takes part (the decision is uniform). */
template <class E>
R35A_DEV void store_nan_row(u16 *orow, float *lse, int D) {
    for (int d = thread_x(); d < D; d += R35A_GENERIC_THREADS) store_u16(orow + d, E::from_f32(quiet_nan()));
    if (lse && thread_x() == 0) store_f32(lse, quiet_nan());
}

/* Where row (t, h)'s LSE goes: NULL when the call writes none. */
R35A_DEV float *lse_slot(float *lse, i64 token_stride, i64 head_stride, int t, int h) {
    return lse ? lse + (i64)t * token_stride + (i64)h * head_stride : nullptr;
}

/* Logit post-processing shared by both ops: softcap then ALiBi, then base 2. The sink (base 2,
 * -inf without one) joins at the merge. */
struct logit_rule {
    float scale, softcap, alibi_slope;
    float sink2;   /* the row's sink logit x log2(e); -inf: no sink */
    int pos;       /* the query's position: ALiBi adds slope * (j - pos) */
    __device__ inline float base2(float dot, int j) const {
        float s = dot * scale;
        if (softcap > 0.f) s = softcap * tanh_fast(s * rcp_fast(softcap));
        s += alibi_slope * (float)(j - pos);
        return s * LOG2E_F;
    }
};

/* How one element of a K or V row is read, before its scale. Rows are addressed in bytes. */
template <class E>
struct kv_as_q {        /* K and V in the Q/O dtype */
    static constexpr u32 bytes = 2;
    R35A_DEV float load(const void *row, u32 element) { return E::to_f32(load_u16_off(row, 2u * element)); }
};
struct kv_fp8_e4m3 {
    static constexpr u32 bytes = 1;
    R35A_DEV float load(const void *row, u32 element) { return fp8_e4m3_to_f32(load_u8_off(row, element)); }
};
struct kv_int8 {
    static constexpr u32 bytes = 1;
    R35A_DEV float load(const void *row, u32 element) { return int8_to_f32(load_u8_off(row, element)); }
};

/* The four waves' partial softmaxes, merged at the end of a row: declared once per kernel so every
 * KV element path shares it. */
template <int DPL>
struct merge_lds {
    float m[GEN_WAVES], l[GEN_WAVES];
    int bad[GEN_WAVES];
    float acc[GEN_WAVES][DPL * R35A_WAVE];
};

/* Online softmax of one row over keys [lo, hi] given by key_at(j) -> (K row, V row) byte
 * addresses and the key's own (K, V) scale factors (1 without per-key scales), and the normalized
 * result (times v_scale) written to orow, its LSE to *lse when lse is set. DPL = elements per lane =
 * dmax / 32. key_at returns false for a key whose page is not in the cache (it then gives
 * addresses inside the cache, page 0): the row is then written as NaN and attend_row returns true
 * in wave 0 (the caller records it). */
template <class E, class KV, int DPL, class KeyAt>
R35A_DEV bool attend_row(merge_lds<DPL> &lds, const u16 *qrow, u16 *orow, float *lse, int D, int lo, int hi,
                         const logit_rule &rule, float v_scale, KeyAt key_at) {
    const int lane = lane_id(), w = wave_id();
    constexpr int CH = DPL > 16 ? 8 : DPL;

    /* Index of the lane's i-th element within a row; lanes past D read element D-1 (32-bit, shared
     * by Q, K and V rows, whose bases are wave-uniform). */
    u32 eidx[DPL];
    for (int i = 0; i < DPL; ++i) eidx[i] = (u32)imin(lane + R35A_WAVE * i, D - 1);
    /* q stays in its 16-bit storage format (no precision lost), two elements per register, 0 past D. */
    u32 q2[(DPL + 1) / 2];
    float acc[DPL];
    for (int i = 0; i < DPL; ++i) {
        const int d = lane + R35A_WAVE * i;
        const u32 x = load_u16_off(qrow, 2u * eidx[i]);
        const u32 h = d < D ? x : 0u;
        if (i & 1) q2[i >> 1] |= h << 16;
        else q2[i >> 1] = h;
        acc[i] = 0.f;
    }
    float m = neg_inf(), l = 0.f;
    bool bad_page = false;
    for (int j = lo + w; j <= hi; j += GEN_WAVES) {
        const void *krow, *vrow;
        float kf, vf;   /* the key's scales: its logit's factor, its value's */
        bad_page |= !key_at(j, krow, vrow, kf, vf);
        /* Wide heads (dmax > 512) must fit 128 VGPRs without spilling: the loads go out in chunks of
         * CH fenced by scheduling barriers, q stays packed (an empty asm makes it opaque, so its
         * conversion is not hoisted out of the loop as 32 floats) and the element indices are
         * recomputed per key instead of held. More round trips per key: fine for this fallback. */
        constexpr bool WIDE = CH < DPL;
        int lane_o = lane;
        if constexpr (WIDE) {
            for (int i = 0; i < (DPL + 1) / 2; ++i) opaque(q2[i]);
            opaque(lane_o);
        }
        auto idx = [&](int i) -> u32 { return WIDE ? (u32)imin(lane_o + R35A_WAVE * i, D - 1) : eidx[i]; };
        float dot = 0.f;
        for (int c0 = 0; c0 < DPL; c0 += CH) {
            for (int i = c0; i < c0 + CH && i < DPL; ++i) {
                const float qi = E::to_f32((u16)(i & 1 ? q2[i >> 1] >> 16 : q2[i >> 1]));
                /* past D the load is clamped to element D-1 and q is 0: the element must be
                 * dropped, not multiplied by 0 (an Inf there would make 0 x Inf = NaN) */
                const float ki = KV::load(krow, idx(i));
                dot = __builtin_fmaf(qi, lane_o + R35A_WAVE * i < D ? ki : 0.f, dot);
            }
            if constexpr (WIDE) sched_barrier();
        }
        const float s = rule.base2(wave_sum(dot) * kf, j);
        const float mn = max_keep_nan(m, s);
        /* while every logit so far is -inf, rescale against 0: exp2(-inf - -inf) would be NaN */
        const float base = mn == neg_inf() ? 0.f : mn;
        const float corr = exp2_fast(m - base), p = exp2_fast(s - base);
        l = l * corr + p;
        const float pv = p * vf;   /* the value's weight; the denominator takes p */
        for (int c0 = 0; c0 < DPL; c0 += CH) {
            /* past D this accumulates a copy of element D-1 that is never stored */
            for (int i = c0; i < c0 + CH && i < DPL; ++i)
                acc[i] = __builtin_fmaf(pv, KV::load(vrow, idx(i)), acc[i] * corr);
            if constexpr (WIDE) sched_barrier();
        }
        m = mn;
    }

    /* Merge the waves' partial softmaxes, and the sink (one more logit, no value). */
    if (lane == 0) {
        lds.m[w] = m;
        lds.l[w] = l;
        lds.bad[w] = bad_page;
    }
    for (int i = 0; i < DPL; ++i) lds.acc[w][lane + R35A_WAVE * i] = acc[i];
    block_sync();
    if (w != 0) return false;
    float mx = neg_inf();
    bool poisoned = false;
    for (int k = 0; k < GEN_WAVES; ++k) {
        mx = max_keep_nan(mx, lds.m[k]);
        poisoned |= lds.bad[k] != 0;
    }
    const bool seen = mx != neg_inf();              /* else no key: zeros, whatever the sink */
    const float mu = seen ? max_keep_nan(mx, rule.sink2) : 0.f;
    float lsum = exp2_fast(rule.sink2 - mu), wk[GEN_WAVES];   /* 0 without a sink; NaN sink: NaN */
    for (int k = 0; k < GEN_WAVES; ++k) {
        wk[k] = exp2_fast(lds.m[k] - mu);
        lsum += lds.l[k] * wk[k];
    }
    /* lsum >= 1 when seen: the largest logit (or the sink above it) contributes exp2(0); a NaN
     * anywhere (non-finite logits, a poisoned row) makes it NaN */
    const float inv = poisoned ? quiet_nan() : seen ? rcp_fast(lsum) * v_scale : 0.f;
    /* the LSE in natural-log logit units: (mu + log2 lsum) / log2(e); NaN when mu or lsum is */
    if (lse && lane == 0)
        store_f32(lse, poisoned ? quiet_nan() : seen ? (mu + log2_fast(lsum)) * LN2_F : neg_inf());
    /* (kept rolled: unrolled, the wide kernel would read all 4 x DPL partials into registers) */
R35A_NO_UNROLL
    for (int i = 0; i < DPL; ++i) {
        if (R35A_WAVE * i >= D) break;                       /* uniform */
        /* Lanes past D hold an exact copy of element D-1 (their loads were clamped to it) and store
         * that same value to the same place: no divergent branch around the LDS reads. */
        const int d = lane + R35A_WAVE * i;
        float o = 0.f;
        for (int k = 0; k < GEN_WAVES; ++k) o += lds.acc[k][d] * wk[k];
        store_u16(orow + imin(d, D - 1), E::from_f32(o * inv));
    }
    return poisoned;
}

/* Largest s in [0, n) with starts[s] <= t (starts non-decreasing, starts[0] = 0 <= t): the
 * sequence or segment holding token t, skipping empty ones. */
R35A_DEV int find_owner(const int32_t *starts, int n, int t) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (load_i32(starts + mid) <= t) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* The row's sink logit in base 2, -inf without sinks. */
R35A_DEV float sink_base2(const float *sinks, int h) { return sinks ? load_f32(sinks + h) * LOG2E_F : neg_inf(); }

/* The workgroup of row (t, h) also checks its share of every sequence's metadata (sequences
 * t * H + h, + T * H, ...: each one by some workgroup, usually none or one per workgroup), so bad
 * entries of sequences no row of this call reaches are recorded too. */
R35A_DEV void check_paged_share(const r35a_generic_paged_args &a, int t, int h) {
    const i64 count = (i64)a.num_tokens * a.num_q_heads;
    for (i64 s = (i64)t * a.num_q_heads + h; s < a.num_seqs; s += count) {
        const u32 code = r35a_paged_sequence_error((int)s, a.num_seqs, load_i32(a.query_start_loc + s),
                                                   load_i32(a.query_start_loc + s + 1), load_i32(a.seq_lens + s),
                                                   a.num_tokens, a.max_query_len, a.max_seq_len);
        if (code != R35A_DEVICE_ERROR_NONE && thread_x() == 0) report_bad_data(a.error, code, (u32)s);
    }
}

template <class E, int DMAX>
R35A_DEV void generic_paged(const r35a_generic_paged_args &a) {
    constexpr int DPL = DMAX / R35A_WAVE;
    __shared__ merge_lds<DPL> lds;
    const int t = block_x(), h = block_y();
    check_paged_share(a, t, h);
    const int s = find_owner(a.query_start_loc, a.num_seqs, t);
    const int q0 = a.query_start_loc[s], q1 = a.query_start_loc[s + 1];
    const int L = a.seq_lens[s];
    u16 *orow = (u16 *)a.out + (i64)t * a.o_token_stride + (i64)h * a.o_head_stride;
    float *lse = lse_slot(a.lse, a.lse_token_stride, a.lse_head_stride, t, h);
    /* the row must lie in its sequence's range (a query_start_loc that is not non-decreasing can
     * give a token no owner) and the sequence's metadata must hold: else NaN, recorded */
    u32 code = r35a_paged_sequence_error(s, a.num_seqs, q0, q1, L, a.num_tokens, a.max_query_len, a.max_seq_len);
    if (code == R35A_DEVICE_ERROR_NONE && !(q0 <= t && t < q1)) code = R35A_DEVICE_ERROR_QUERY_START_LOC;
    if (code != R35A_DEVICE_ERROR_NONE) {
        store_nan_row<E>(orow, lse, a.head_size);
        if (thread_x() == 0 && h == 0) report_bad_data(a.error, code, (u32)s);
        return;
    }
    const int M = q1 - q0;
    if (M <= a.min_query_len) return;                 /* served by the decode kernel */
    const int i = t - q0, p = L - M + i;
    const int hi = imin(p, L - 1);
    const int lo = (int)r35a_window_first_key(p, a.window);
    const int G = a.num_q_heads / a.num_kv_heads, g = h / G;
    /* 8-bit KV: real = stored x scale. One scale per tensor or kv head: K's joins the softmax
     * scale, V's the normalization. Per token and kv head: each key's, read beside its row. */
    const bool scaled = a.kv_dtype != R35A_KV_AS_Q;
    const bool per_token = scaled && a.kv_scale_per_head == 2;
    const int si = a.kv_scale_per_head == 1 ? g : 0;
    const float k_scale = scaled && !per_token ? load_f32(a.k_scale + si) : 1.f;
    const float v_scale = scaled && !per_token ? load_f32(a.v_scale + si) : 1.f;
    const float *const ksh = per_token ? a.k_scale + (i64)g * a.k_scale_head_stride : nullptr;
    const float *const vsh = per_token ? a.v_scale + (i64)g * a.v_scale_head_stride : nullptr;
    logit_rule rule;
    rule.scale = a.softmax_scale * k_scale;
    rule.softcap = a.logit_softcap;
    rule.alibi_slope = a.alibi_slopes ? load_f32(a.alibi_slopes + h) : 0.f;
    rule.sink2 = sink_base2(a.sinks, h);
    rule.pos = p;
    const u16 *qrow = (const u16 *)a.q + (i64)t * a.q_token_stride + (i64)h * a.q_head_stride;
    const int32_t *bt = a.block_table + (i64)s * a.block_table_stride;
    const int B = a.page_size;
    auto run = [&](auto kv) {
        using KV = decltype(kv);
        const char *kh = (const char *)a.k_cache + (i64)g * a.k_head_stride * KV::bytes;
        const char *vh = (const char *)a.v_cache + (i64)g * a.v_head_stride * KV::bytes;
        return attend_row<E, KV>(lds, qrow, orow, lse, a.head_size, lo, hi, rule, v_scale,
                                 [&](int j, const void *&kr, const void *&vr, float &kf, float &vf) {
            const int pi = j / B, slot = j - pi * B;
            const i64 entry = load_i32_uniform(bt + pi);   /* pi < ceil(L / B) <= block_table_stride */
            const bool ok = r35a_page_index_ok(entry, a.num_pages);
            const i64 page = ok ? entry : 0;               /* one compare and select per key */
            kr = kh + (page * a.k_page_stride + (i64)slot * a.k_slot_stride) * KV::bytes;
            vr = vh + (page * a.v_page_stride + (i64)slot * a.v_slot_stride) * KV::bytes;
            kf = vf = 1.f;
            if (per_token) {                               /* uniform */
                kf = load_f32(ksh + page * a.k_scale_page_stride + (i64)slot * a.k_scale_slot_stride);
                vf = load_f32(vsh + page * a.v_scale_page_stride + (i64)slot * a.v_scale_slot_stride);
            }
            return ok;
        });
    };
    bool bad_page;
    if (a.kv_dtype == R35A_KV_FP8_E4M3) bad_page = run(kv_fp8_e4m3{});   /* uniform branches */
    else if (a.kv_dtype == R35A_KV_INT8) bad_page = run(kv_int8{});
    else bad_page = run(kv_as_q<E>{});
    if (bad_page && thread_x() == 0 && h == 0) report_bad_data(a.error, R35A_DEVICE_ERROR_PAGE_INDEX, (u32)s);
}

/* The varlen twin of check_paged_share: this workgroup's share of every segment's entries. */
R35A_DEV void check_varlen_share(const r35a_generic_varlen_args &a, int t, int h) {
    const i64 count = (i64)a.num_tokens * a.num_q_heads;
    for (i64 s = (i64)t * a.num_q_heads + h; s < a.num_segments; s += count) {
        const u32 code = r35a_varlen_segment_error((int)s, a.num_segments, load_i32(a.cu_seqlens + s),
                                                   load_i32(a.cu_seqlens + s + 1), a.num_tokens, a.max_seqlen);
        if (code != R35A_DEVICE_ERROR_NONE && thread_x() == 0) report_bad_data(a.error, code, (u32)s);
    }
}

template <class E, int DMAX>
R35A_DEV void generic_varlen(const r35a_generic_varlen_args &a) {
    __shared__ merge_lds<DMAX / R35A_WAVE> lds;
    const int t = block_x(), h = block_y();
    check_varlen_share(a, t, h);
    const int s = find_owner(a.cu_seqlens, a.num_segments, t);
    const int t0 = a.cu_seqlens[s], t1 = a.cu_seqlens[s + 1];
    u16 *orow = (u16 *)a.out + (i64)t * a.o_token_stride + (i64)h * a.o_head_stride;
    float *lse = lse_slot(a.lse, a.lse_token_stride, a.lse_head_stride, t, h);
    /* keys are read at tokens t0 .. t1-1: the segment must lie in 0..num_tokens and hold the row */
    u32 code = r35a_varlen_segment_error(s, a.num_segments, t0, t1, a.num_tokens, a.max_seqlen);
    if (code == R35A_DEVICE_ERROR_NONE && !(t0 <= t && t < t1)) code = R35A_DEVICE_ERROR_CU_SEQLENS;
    if (code != R35A_DEVICE_ERROR_NONE) {
        store_nan_row<E>(orow, lse, a.head_size);
        if (thread_x() == 0 && h == 0) report_bad_data(a.error, code, (u32)s);
        return;
    }
    const int len = t1 - t0;
    const int i = t - t0;
    const int hi = a.causal ? i : len - 1;
    const int G = a.num_q_heads / a.num_kv_heads, g = h / G;
    logit_rule rule;
    rule.scale = a.softmax_scale;
    rule.softcap = a.logit_softcap;
    rule.alibi_slope = 0.f;
    rule.sink2 = sink_base2(a.sinks, h);
    rule.pos = i;
    const u16 *qrow = (const u16 *)a.q + (i64)t * a.q_token_stride + (i64)h * a.q_head_stride;
    const u16 *kh = (const u16 *)a.k + (i64)t0 * a.k_token_stride + (i64)g * a.k_head_stride;
    const u16 *vh = (const u16 *)a.v + (i64)t0 * a.v_token_stride + (i64)g * a.v_head_stride;
    attend_row<E, kv_as_q<E>>(lds, qrow, orow, lse, a.head_size, 0, hi, rule, 1.f,
                              [&](int j, const void *&kr, const void *&vr, float &kf, float &vf) {
        kr = kh + (i64)j * a.k_token_stride;
        vr = vh + (i64)j * a.v_token_stride;
        kf = vf = 1.f;
        return true;
    });
}

/* merge_states: row (t, h) of N partial states. Every thread computes the row's max m and sum
 * sum_i exp(LSE_i - m) from the N LSEs (the same addresses: one cached load each), then its share
 * of the D elements. A -inf part is skipped uniformly (its O never read); NaN in m, in the sum or
 * in a read O element carries through to the output. */
template <class E>
R35A_DEV void merge_states(const r35a_generic_merge_args &a) {
    const int t = block_x(), h = block_y();
    const float *lse = a.parts_lse + (i64)t * a.lse_token_stride + (i64)h * a.lse_head_stride;
    const u16 *part = (const u16 *)a.parts_o + (i64)t * a.part_token_stride + (i64)h * a.part_head_stride;
    u16 *orow = (u16 *)a.out + (i64)t * a.o_token_stride + (i64)h * a.o_head_stride;
    float m = neg_inf();
    for (int i = 0; i < a.num_parts; ++i) m = max_keep_nan(m, load_f32(lse + (i64)i * a.lse_part_stride));
    const bool any = m != neg_inf();
    float sum = 0.f;
    if (any)
        for (int i = 0; i < a.num_parts; ++i) sum += exp2_fast((load_f32(lse + (i64)i * a.lse_part_stride) - m) * LOG2E_F);
    /* sum >= 1 when any part counts (the largest contributes exp(0)) */
    const float inv = any ? rcp_fast(sum) : 0.f;
    if (a.out_lse && thread_x() == 0)
        store_f32(a.out_lse + (i64)t * a.out_lse_token_stride + (i64)h * a.out_lse_head_stride,
                  any ? m + log2_fast(sum) * LN2_F : neg_inf());
    for (int d = thread_x(); d < a.head_size; d += R35A_GENERIC_THREADS) {
        float o = 0.f;
        if (any) {
R35A_NO_UNROLL
            for (int i = 0; i < a.num_parts; ++i) {
                const float li = load_f32(lse + (i64)i * a.lse_part_stride);
                if (li == neg_inf()) continue;                      /* uniform: weighs nothing */
                const float w = exp2_fast((li - m) * LOG2E_F) * inv;
                o = __builtin_fmaf(w, E::to_f32(load_u16(part + (i64)i * a.part_stride + d)), o);
            }
        }
        store_u16(orow + d, E::from_f32(o));
    }
}

} /* namespace r35a */

/* One extern "C" kernel per entry of variants.def; the symbol is the entry's name. At most 128
 * VGPRs (the static checks' default for kernels without an occupancy column): the paged dmax 256
 * kernels use 61 (16 waves per SIMD), dmax 1024 126 (its 16 KiB of LDS allow 7 waves per SIMD). */
#define R35A_GENERIC_KERNEL(arch, name, op, dtype, dmax)                                               \
    R35A_KERNEL R35A_KERNEL_BOUNDS_VGPRS(R35A_GENERIC_THREADS, 128)                                 \
    void name(r35a_generic_##op##_args a) {                                                            \
        r35a::generic_##op<r35a::dtype##_t, dmax>(a);                                                  \
    }
#define R35A_GENERIC_MERGE_KERNEL(arch, name, dtype)                                                   \
    R35A_KERNEL R35A_KERNEL_BOUNDS_VGPRS(R35A_GENERIC_THREADS, 128)                                 \
    void name(r35a_generic_merge_args a) { r35a::merge_states<r35a::dtype##_t>(a); }
/* R35A_GENERIC_KERNEL_LIST: a compile unit's list of entries instead of variants/variants.def. */
#ifdef R35A_GENERIC_KERNEL_LIST
#include R35A_GENERIC_KERNEL_LIST
#else
#include "variants.def"
#endif
#undef R35A_GENERIC_KERNEL
#undef R35A_GENERIC_MERGE_KERNEL
