/*
 * window.h - the sliding-window rule, written once for every place that applies it: validation and
 * the CPU reference (src/), the kernels (kernels/) and the decode planner's reach formula.
 *
 * A query at key position p with window W > 0 sees keys j with p - W < j <= p: W keys, the current
 * one included. W = 0 means no window (keys 0 .. p).
 */
#ifndef R35A_WINDOW_H
#define R35A_WINDOW_H

#include "common/host_device.h"

/* First key position a query at position p sees (0 without a window; never negative). */
R35A_HD int64_t r35a_window_first_key(int64_t p, int32_t window) {
    const int64_t lo = p - (int64_t)window + 1;
    return window > 0 && lo > 0 ? lo : 0;
}

/* Keys the M queries of a sequence of L keys reach together: [r35a_window_first_key(L - M, W), L).
 * Their count is at most W + M - 1 with a window. */
R35A_HD int64_t r35a_window_reach(int64_t seq_len, int32_t query_len, int32_t window) {
    return seq_len - r35a_window_first_key(seq_len - query_len, window);
}

#endif /* R35A_WINDOW_H */
