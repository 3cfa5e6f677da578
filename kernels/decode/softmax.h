/*
 * decode/softmax.h - the online softmax's scalar rules, shared by the kernel body, the key-group
 * merge and the split merge: merging two partial states (merge_scales), the softcap transform, the
 * row's normalization with its attention sink (row_inv, sink_base2) and its LSE (row_lse, store_lse).
 */
#ifndef R35A_DECODE_SOFTMAX_H
#define R35A_DECODE_SOFTMAX_H

#include "decode/policy.h"

namespace r35a {

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

/* log2(x) in one instruction (v_log_f32 / MUFU.LG2); used on sums >= 1 only (row_lse), so no
 * denormal handling is needed. */
R35A_DEV float log2_fast(float x) {
#if defined(R35A_TARGET_AMDGCN)
    return __builtin_amdgcn_logf(x);
#else
    float r;
    asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
#endif
}
constexpr float LN2_F = 0.6931471805599453f;

/* The row's softmax LSE (rdna35attn.h "Softmax LSE": natural log, logit units) from the state row_inv
 * normalizes with: (mu + log2(l x 2^(m - mu) + 2^(sink2 - mu))) x ln 2, mu = max(m, sink2), the sum
 * >= 1. A row that saw no key (m = -inf) gives -inf whatever the sink (l = 0), or NaN when its l is
 * NaN (a NaN logit, a page outside the cache: its O is NaN too); a NaN or +inf sink gives NaN, as
 * it does to O. */
R35A_DEV float row_lse(float m, float l, float sink2) {
    if (m == neg_inf()) return l == 0.f ? neg_inf() : quiet_nan();
    const float mu = fmax(m, sink2);
    return (mu + log2_fast(l * exp2_fast(m - mu) + exp2_fast(sink2 - mu))) * LN2_F;
}

/* The kernel's argument, read at this point: what a workgroup reads only after its key loop (the
 * output's pointer and strides, the sinks, the LSE output) is read there, so that it holds no
 * register across the loop. gfx11: the struct (the kernels' only argument, at the start of the
 * kernarg segment) through the segment pointer made opaque here; read at the kernel's entry
 * instead, the LSE pointer and strides stayed live across the loop in SGPRs, of which the larger
 * variants have none to spare (clang-19 spilled up to 76 of them into VGPR lanes). */
R35A_DEV const r35a_decode_args &args_here(const r35a_decode_args &a) {
#if defined(R35A_TARGET_AMDGCN)
    (void)a;
    typedef __attribute__((address_space(4))) const char *kernarg_ptr;
    kernarg_ptr k = (kernarg_ptr)__builtin_amdgcn_kernarg_segment_ptr();
    __asm__ volatile("" : "+s"(k));
    return *(const r35a_decode_args *)k;
#else
    return a;
#endif
}

/* Writes the LSE of query token t, query head h (decode_args.h lse; the caller checks it is set). */
R35A_DEV void store_lse(const r35a_decode_args &a, int t, int h, float v) {
    store_f32(a.lse + (i64)t * a.lse_token_stride + (i64)h * a.lse_head_stride, v);
}

/* A query row's sink logit in base 2 (-inf without sinks). */
R35A_DEV float sink_base2(const r35a_decode_args &a, int h) { return a.sinks ? load_f32(a.sinks + h) * LOG2E_F : neg_inf(); }

} /* namespace r35a */

#endif /* R35A_DECODE_SOFTMAX_H */
