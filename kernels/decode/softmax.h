/*
 * decode/softmax.h - the online softmax's scalar rules, shared by the kernel body, the key-group
 * merge and the split merge: merging two partial states (merge_scales), the softcap transform, the
 * row's normalization with its attention sink (row_inv, sink_base2).
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

/* A query row's sink logit in base 2 (-inf without sinks). */
R35A_DEV float sink_base2(const r35a_decode_args &a, int h) { return a.sinks ? load_f32(a.sinks + h) * LOG2E_F : neg_inf(); }

} /* namespace r35a */

#endif /* R35A_DECODE_SOFTMAX_H */
