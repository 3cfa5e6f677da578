/*
 * decode/softmax.h - the online softmax's scalar rules, shared by the kernel body, the key-group
 * merge and the split merge: merging two partial states (merge_scales), the softcap transform, the
 * row's sink (sink_base2) and LSE store (store_lse); the normalization and the LSE themselves are
 * common/row_norm.h's (row_inv, row_lse), which the encoder family uses too.
 */
#ifndef R35A_DECODE_SOFTMAX_H
#define R35A_DECODE_SOFTMAX_H

#include "common/row_norm.h"
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
