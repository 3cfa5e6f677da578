/*
 * decode/policy.h - the words of a decode variant's table row (variants/<arch>.tsv) the kernel takes:
 * the KV pipeline (pipe) and Q^T's place (q) as template arguments, the K/V element format (kv); and
 * the constants every part of the kernel shares.
 */
#ifndef R35A_DECODE_POLICY_H
#define R35A_DECODE_POLICY_H

#include "common/device.h"
#include "common/device_error.h"
#include "common/row_norm.h"
#include "decode/decode_layers.h"
#include "decode/decode_args.h"

namespace r35a {

/* The policies a variant's table row names (variants/<arch>.tsv): its KV pipeline (pipe) and where
 * its Q^T lives (q); the macro R35A_DECODE_VARIANT pastes the row's words onto these names. */
enum { DECODE_PIPE_regs = 0, DECODE_PIPE_lds = 1, DECODE_PIPE_lds_shared = 2 };
enum { DECODE_Q_regs = 0, DECODE_Q_staged = 1, DECODE_Q_lds = 2 };

constexpr int cmax(int a, int b) { return a > b ? a : b; }

/* Keeps the scheduler from hoisting every chunk's operand loads ahead of the products (on gfx11 it
 * would hold all V^T fragments of a tile at once: NC x 8 VGPRs). */
#define R35A_DECODE_CHUNK_FENCE() sched_barrier()

/* The element format of a variant's K and V: kv16 (the Q/O dtype E), fp8, int8 (device.h). */
struct kv_kv16_t {};
template <class E, class K>
struct kv_type {
    typedef K type;
};
template <class E>
struct kv_type<E, kv_kv16_t> {
    typedef E type;
};

} /* namespace r35a */

#endif /* R35A_DECODE_POLICY_H */
