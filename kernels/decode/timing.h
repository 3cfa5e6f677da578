/*
 * decode/timing.h - a lab build's per-workgroup time stamps (cmake -DR35A_LAB_BUILD=ON
 * -DR35A_LAB_DEFINES=R35A_LAB_DECODE_TIMING=1, NVIDIA only); R35A_TIMING(...) compiles to nothing otherwise.
 */
#ifndef R35A_DECODE_TIMING_H
#define R35A_DECODE_TIMING_H

#include "decode/policy.h"

namespace r35a {

/* R35A_LAB_DECODE_TIMING=1 (a lab build, NVIDIA only, never for use): thread 0 of each
 * workgroup that has tiles writes 16 u64 to the workspace past the planned bytes (the caller
 * allocates 128 bytes per workgroup of both launches): globaltimer ns at entry, loop end and exit
 * (the single-split path: before its O store), SM | kind << 32 (kind 0: a decode workgroup, 1: a
 * merge workgroup, whose slots follow the decode grid's and whose loop end is its exit). Read by
 * lab/decode_timeline.py. */
#if defined(R35A_LAB) && defined(R35A_LAB_DECODE_TIMING) && R35A_LAB_DECODE_TIMING && defined(R35A_TARGET_CUDA)
struct decode_timing {
    unsigned long long t0, t1;
    R35A_MEMBER static unsigned long long now() {
        unsigned long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        return t;
    }
    R35A_MEMBER void mark() { t1 = now(); }
    /* id: the workgroup's slot (decode: its grid index; merge: the decode grid's size + its index) */
    R35A_MEMBER void done(const r35a_decode_args &a, int rows_per_group, int head, bool merge) {
        if (threadIdx.x != 0 || !a.workspace) return;   /* a single-split plan passes no workspace */
        unsigned sm;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        const long long base = r35a_decode_workspace_bytes(a.num_seqs, a.num_kv_heads, a.num_row_groups, a.num_splits,
                                                           rows_per_group, head);
        long long id = ((long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
        if (merge) id += (long long)a.num_splits * gridDim.y * gridDim.z;
        unsigned long long *rec = (unsigned long long *)((char *)a.workspace + base) + 16 * id;
        rec[0] = t0;
        rec[1] = merge ? now() : t1;
        rec[2] = now();
        rec[3] = sm | ((unsigned long long)merge << 32);
    }
};
#define R35A_TIMING(...) __VA_ARGS__
#else
#define R35A_TIMING(...)
#endif

} /* namespace r35a */

#endif /* R35A_DECODE_TIMING_H */
