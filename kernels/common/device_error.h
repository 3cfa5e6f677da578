/*
 * device_error.h - the device error record: how a kernel reports device-side metadata (seq_lens,
 * query_start_loc, block_table, cu_seqlens) that it found invalid, to a host that never reads that
 * metadata itself. Shared by the kernels and the host library (src/gpu_runtime.c reads it).
 *
 * The record is two uint32 words in host-mapped pinned memory that a GPU context allocates when it
 * is created (src/backend_hip.c, src/backend_cuda.c); every kernel gets its device address in the
 * `error` field of its argument struct:
 *     word 0   the field code (r35a_device_error_code; 0 = no error recorded)
 *     word 1   the index of the offending sequence (paged) or segment (varlen)
 * A kernel that meets bad metadata writes both words with ONE 64-bit store (so the code and the
 * index always come from the same workgroup), and only when it reads word 0 as 0 first: a plain
 * store guarded by a read, no atomics on host memory. When several workgroups (or launches, or
 * streams of the context) find bad data at about the same time, the record holds whichever store
 * landed last among those that read 0: "the first" offending sequence means one of the sequences
 * found first, not the lowest index. The host clears the record when it reports it.
 *
 * What a kernel does on bad metadata (the same rule in every kernel): it never reads or writes
 * outside the buffers the descriptor describes; the output rows of the offending sequence that it
 * can identify inside [0, num_tokens) are written as NaN (visible, never plausible); nothing
 * outside the output rows is written. The checks are scalar compares: per sequence (its lengths and
 * query_start_loc / cu_seqlens entries) and per page (its block_table entry).
 */
#ifndef R35A_DEVICE_ERROR_H
#define R35A_DEVICE_ERROR_H

#include "common/host_device.h"

#include <stdint.h>

/* Every code, once: X(name, value, args field, what the index counts, what is wrong). The host's
 * detail is "<field>: <unit> <index> <what> (found on the device by an earlier run)". */
#define R35A_DEVICE_ERROR_CODES(X)                                                                         \
    X(R35A_DEVICE_ERROR_PAGE_INDEX, 1, "paged_attention_args.block_table", "sequence",                     \
      "holds a page index outside 0..num_pages-1 in a page its queries reach")                             \
    X(R35A_DEVICE_ERROR_SEQ_LEN, 2, "paged_attention_args.seq_lens", "sequence",                          \
      "has a length outside 0..max_seq_len")                                                               \
    X(R35A_DEVICE_ERROR_QUERY_LEN, 3, "paged_attention_args.query_start_loc", "sequence",                 \
      "has more query tokens than max_query_len")                                                          \
    X(R35A_DEVICE_ERROR_QUERY_ABOVE_SEQ_LEN, 4, "paged_attention_args.seq_lens", "sequence",              \
      "is shorter than its query tokens (M > L)")                                                          \
    X(R35A_DEVICE_ERROR_QUERY_START_LOC, 5, "paged_attention_args.query_start_loc", "sequence",           \
      "has a start or end outside 0..num_tokens or decreasing ([0] must be 0, [num_seqs] num_tokens)")     \
    X(R35A_DEVICE_ERROR_CU_SEQLENS, 6, "varlen_attention_args.cu_seqlens", "segment",                      \
      "has a start or end outside 0..num_tokens or decreasing ([0] must be 0, [num_segments] num_tokens)") \
    X(R35A_DEVICE_ERROR_SEGMENT_LEN, 7, "varlen_attention_args.cu_seqlens", "segment",                     \
      "is longer than max_seqlen")

typedef enum r35a_device_error_code {
    R35A_DEVICE_ERROR_NONE = 0,
#define R35A_DEVICE_ERROR_ENUM(name, value, field, unit, what) name = value,
    R35A_DEVICE_ERROR_CODES(R35A_DEVICE_ERROR_ENUM)
#undef R35A_DEVICE_ERROR_ENUM
} r35a_device_error_code;

/* The record's size in bytes (two uint32 words, 8-byte aligned) and its 64-bit image. */
#define R35A_DEVICE_ERROR_BYTES 8
#define R35A_DEVICE_ERROR_WORD(code, index) ((uint64_t)(uint32_t)(code) | ((uint64_t)(uint32_t)(index) << 32))

/* ---- the rules, once for every kernel (and the tests) ---- */

/* A lab build with R35A_LAB_DEVICE_CHECKS=0 compiles the kernels without these checks, for one purpose
 * only: measuring what they cost (cmake -DR35A_LAB_BUILD=ON -DR35A_LAB_DEFINES=R35A_LAB_DEVICE_CHECKS=0;
 * lab/gpu_suite.sh checkcost). Such a library reads and writes out of bounds on bad metadata. */
#if defined(R35A_LAB) && defined(R35A_LAB_DEVICE_CHECKS)
#define R35A_DEVICE_CHECKS R35A_LAB_DEVICE_CHECKS
#else
#define R35A_DEVICE_CHECKS 1
#endif

/* What is wrong with sequence s of a paged call, given its query_start_loc entries q0 = [s] and
 * q1 = [s + 1] and its seq_len: the code of the first broken rule, R35A_DEVICE_ERROR_NONE if none.
 * Its block_table entries are checked page by page where they are read (r35a_page_index_ok). */
R35A_HD uint32_t r35a_paged_sequence_error(int32_t s, int32_t num_seqs, int32_t q0, int32_t q1, int32_t seq_len,
                                           int32_t num_tokens, int32_t max_query_len, int32_t max_seq_len) {
    if (!R35A_DEVICE_CHECKS) return R35A_DEVICE_ERROR_NONE;
    if (q0 < 0 || q1 < q0 || q1 > num_tokens || (s == 0 && q0 != 0) || (s == num_seqs - 1 && q1 != num_tokens))
        return R35A_DEVICE_ERROR_QUERY_START_LOC;
    if (seq_len < 0 || seq_len > max_seq_len) return R35A_DEVICE_ERROR_SEQ_LEN;
    if (q1 - q0 > max_query_len) return R35A_DEVICE_ERROR_QUERY_LEN;   /* no overflow: 0 <= q0 <= q1 */
    if (q1 - q0 > seq_len) return R35A_DEVICE_ERROR_QUERY_ABOVE_SEQ_LEN;
    return R35A_DEVICE_ERROR_NONE;
}

/* The same for segment s of a varlen call, from its cu_seqlens entries t0 = [s], t1 = [s + 1]. */
R35A_HD uint32_t r35a_varlen_segment_error(int32_t s, int32_t num_segments, int32_t t0, int32_t t1,
                                           int32_t num_tokens, int32_t max_seqlen) {
    if (!R35A_DEVICE_CHECKS) return R35A_DEVICE_ERROR_NONE;
    if (t0 < 0 || t1 < t0 || t1 > num_tokens || (s == 0 && t0 != 0) || (s == num_segments - 1 && t1 != num_tokens))
        return R35A_DEVICE_ERROR_CU_SEQLENS;
    if (t1 - t0 > max_seqlen) return R35A_DEVICE_ERROR_SEGMENT_LEN;
    return R35A_DEVICE_ERROR_NONE;
}

/* A block_table entry a query reaches must name a page of the cache. */
R35A_HD int r35a_page_index_ok(int64_t page, int32_t num_pages) {
    return !R35A_DEVICE_CHECKS || (page >= 0 && page < num_pages);
}

#if defined(__HIP__) || defined(__CUDACC__)
#include "common/device.h"

namespace r35a {

/* Records (code, index) in the context's error record unless one is recorded already. Called by
 * the one thread of a workgroup that decided the workgroup's rows are bad; the error path only. */
R35A_DEV void report_bad_data(uint32_t *error, u32 code, u32 index) {
    volatile R35A_GLOBAL u64 *record = (volatile R35A_GLOBAL u64 *)error;
    if (*record == 0ull) *record = R35A_DEVICE_ERROR_WORD(code, index);
}

} /* namespace r35a */
#endif

#endif /* R35A_DEVICE_ERROR_H */
