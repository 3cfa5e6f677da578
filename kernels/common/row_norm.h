/*
 * row_norm.h - the one place an attention row's softmax state (m, l: its base-2 running max and sum)
 * becomes its normalization 1 / denominator and its LSE, the attention sink joining the denominator
 * (rdna35attn.h "Semantics of the scores", "Softmax LSE"). Used by the decode family
 * (decode/softmax.h), the portable kernel (generic.hip, log2_fast and the constants) and the encoder
 * family's paged siblings (encoder.hip).
 */
#ifndef R35A_COMMON_ROW_NORM_H
#define R35A_COMMON_ROW_NORM_H

#include "common/device.h"

namespace r35a {

constexpr float LOG2E_F = 1.4426950408889634f;

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

} /* namespace r35a */

#endif /* R35A_COMMON_ROW_NORM_H */
