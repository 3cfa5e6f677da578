/*
 * decode/epilogue.h - what a workgroup writes besides its rows' outputs: the NaN rows (and NaN LSE)
 * and the error record of a sequence whose metadata fails its check. (The output and partial-record stores are
 * written against the fragment layer: decode_body.h store_o, store_record.)
 */
#ifndef R35A_DECODE_EPILOGUE_H
#define R35A_DECODE_EPILOGUE_H

#include "decode/policy.h"
#include "decode/softmax.h"

namespace r35a {

/* A sequence whose metadata fails its check: its rows of kv head g become NaN, and their LSE when the
 * call writes it (all M tokens, every one of the G query heads, whatever the row groups and splits
 * cover) when its query_start_loc range is sound, and thread 0 of kv head 0 records it. Called by
 * the workgroup of split 0 and row group 0 of each kv head; the error path only. */
template <class E, int D, int THREADS>
R35A_DEV void bad_sequence(const r35a_decode_args &a, u32 code, int s, int g, int q0, int q1) {
    if (code != R35A_DEVICE_ERROR_QUERY_START_LOC) {
        const int M = q1 - q0, G = a.group_size;
        const u16 nan = E::from_f32(quiet_nan());
        for (i64 idx = thread_x(); idx < (i64)M * G * D; idx += THREADS) {
            const int d = (int)(idx % D), row = (int)(idx / D), hl = row % G, i = row / G;
            store_u16((u16 *)a.out + (i64)(q0 + i) * a.o_token_stride + (i64)(g * G + hl) * a.o_head_stride + d, nan);
            if (a.lse && d == 0) store_lse(a, q0 + i, g * G + hl, quiet_nan());
        }
    }
    if (g == 0 && thread_x() == 0) report_bad_data(a.error, code, (u32)s);
}

} /* namespace r35a */

#endif /* R35A_DECODE_EPILOGUE_H */
