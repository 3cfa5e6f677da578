/*
 * key_group_merge.h - the tail split's join (encoder_args.h "Tail split", KG = 2): after the last
 * block, each wave of key group 1 leaves its softmax state (m and l per row column, O^T) in the
 * group's LDS, lane fastest, and the wave of key group 0 with the same rows joins it into its own
 * (the split-KV merge inside a workgroup). Key group 1 may have had no keys (m = R35A_ENC_NO_KEY, l = 0, O^T 0):
 * its weight is then 0.
 */
#ifndef R35A_ENCODER_KEY_GROUP_MERGE_H
#define R35A_ENCODER_KEY_GROUP_MERGE_H

#include "common/device.h"
#include "encoder/encoder_frag.h"
#include "encoder/group_sync.h"

namespace r35a {

template <class C>
R35A_DEV void merge_key_groups(u16 *lds, int rw, int kgi, bool wave_has_rows, frag::colv (&m)[C::TE],
                               frag::colv (&l)[C::TE], frag::acc (&o)[C::TE][C::DC]) {
    constexpr int TE = C::TE, DC = C::DC;
    group_sync<C::GW>();                                        /* every wave is done with the stages */
    float *const mf = (float *)lds + rw * 32 * C::MERGE_FLOATS_PER_LANE + lane_id();
    if (kgi == 1 && wave_has_rows) {
        int i = 0;
#pragma unroll
        for (int t = 0; t < TE; ++t) {
#pragma unroll
            for (int c = 0; c < frag::NCOL; ++c) {
                mf[32 * i++] = m[t].v[c];
                mf[32 * i++] = l[t].v[c];
            }
#pragma unroll
            for (int c = 0; c < DC; ++c)
#pragma unroll
                for (int e = 0; e < frag::ACC_ELEMS; ++e) mf[32 * i++] = o[t][c].v[e];
        }
    }
    group_sync<C::GW>();
    if (kgi == 0 && wave_has_rows) {
        int i = 0;
#pragma unroll
        for (int t = 0; t < TE; ++t) {
            frag::colv c0, c1;
#pragma unroll
            for (int c = 0; c < frag::NCOL; ++c) {
                /* key group 1 may have had no keys (m1 = R35A_ENC_NO_KEY, l1 = 0, O^T 0): c1 = 0, or 1 when neither had one (l and O stay 0) */
                const float m1 = mf[32 * i++], l1 = mf[32 * i++];
                const float mn = fmax(m[t].v[c], m1);
                c0.v[c] = exp2_fast(m[t].v[c] - mn);
                c1.v[c] = exp2_fast(m1 - mn);
                l[t].v[c] = l[t].v[c] * c0.v[c] + l1 * c1.v[c];
            }
#pragma unroll
            for (int c = 0; c < DC; ++c)
#pragma unroll
                for (int e = 0; e < frag::ACC_ELEMS; ++e) {
                    const int sl = frag::acc_slot(e);
                    o[t][c].v[e] = o[t][c].v[e] * c0.v[sl] + mf[32 * i++] * c1.v[sl];
                }
        }
    }
}

} /* namespace r35a */

#endif /* R35A_ENCODER_KEY_GROUP_MERGE_H */
