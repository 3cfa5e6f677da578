/*
 * epilogue.h - the output of an encoder wave: O = O^T / l, re-packed by b_from_acc into the B-operand
 * layout (lane = query row, 16 contiguous d values) so that each lane writes 16 bytes of its row:
 * whole-row 128-bit stores, no scatter. Rows past the segment's end and d >= D are not stored.
 */
#ifndef R35A_ENCODER_EPILOGUE_H
#define R35A_ENCODER_EPILOGUE_H

#include "common/device.h"
#include "encoder/encoder_frag.h"

namespace r35a {

/* Rows [wrow0, wrow0 + 16 TE) of this wave from its O^T and each row's normalization inv (1 / l, 0 for
 * a row that saw no key); row_at(row) gives a row's O row, or nullptr for a row not stored (past the
 * item's end). */
template <class C, class E, int D, class RowAt>
R35A_DEV void store_rows(int wrow0, const frag::colv (&inv_)[C::TE], const frag::acc (&o)[C::TE][C::DC], RowAt &&row_at) {
    constexpr int TE = C::TE, DC = C::DC;
#pragma unroll
    for (int t = 0; t < TE; ++t) {
        const frag::colv inv = inv_[t];
        const int trow0 = wrow0 + 16 * t;
#pragma unroll
        for (int c = 0; c < DC; ++c) {
            frag::acc x = o[t][c];
#pragma unroll
            for (int e = 0; e < frag::ACC_ELEMS; ++e) x.v[e] *= inv.v[frag::acc_slot(e)];
            frag::ab ob = frag::b_from_acc<E>(x);
            frag::pin(ob);                                   /* see pin(): the store below is per lane */
            frag::store_vec16_global_pv(ob, imin(16, D - 16 * c), [&](int n) -> void * {
                u16 *const r = row_at(trow0 + n);
                return r ? r + 16 * c : nullptr;
            });
        }
    }
}

} /* namespace r35a */

#endif /* R35A_ENCODER_EPILOGUE_H */
