/*
 * decode.hip - paged-KV decode and speculative decode on matrix fragments (gfx11 WMMA; NVIDIA
 * mma.sync through the same sources, kernels/target/fragment.h).
 *
 * One workgroup per (KV split, kv head x row group, sequence); see decode_args.h for the grid and
 * the workspace. All G x M query rows of a kv head (up to R of them, in row tiles) share one pass over
 * the KV cache, so each KV byte of a split is read once.
 *
 * The products run "transposed", with the query rows along the accumulator's n (column) axis:
 *     S^T[key][row]  = K[key][:] . Q[row][:]        A = K tile (16 keys x 16 d),
 *                                                  B = Q^T     (registers, loaded once)
 *     O^T[d][row]   += V^T[d][key] . P^T[key][row]  A = V^T     (the V tile read transposed),
 *                                                  B = P^T     (the S^T accumulator, re-packed)
 * so a query row's softmax statistics are per accumulator column and the rescale of O by the
 * running-max correction is a per-column multiply.
 *
 * KV streaming is a software pipeline of S stages (frag::kv_pipe_*, from the fragment layer): each
 * wave issues the loads of its tile i + S - 1 (and its block-table entry was loaded 32 tiles ago)
 * before it computes tile i, so S - 1 tiles stay in flight across the products. gfx11 stages tiles
 * in registers (K as operand fragments, V transposed through LDS right before use); NVIDIA in shared
 * memory by cp.async (K by ldmatrix, V by ldmatrix.trans).
 *
 * Waves: NW = KW x DW x RW. The KW key groups take 16-key tiles round-robin, each with its own online
 * softmax; the DW waves of a key group split the head dimension into DW slices of DS = D / DW
 * (each owns its slice of Q, K, V and O) and add their partial S^T tiles through LDS by
 * reduce-scatter (two LDS-only barriers per tile). The RW row waves split the R rows into RW
 * parts of T / RW row tiles on the same keys (each row wave has its own S^T exchange); where the
 * stages are in shared memory (NVIDIA) they share one pipeline (each copies its share of a tile; a
 * named barrier per tile), so a rows-32 workgroup reads its KV once with the registers of a rows-16
 * wave (two rows-16 row groups read it twice). Key groups merge through LDS at the end of the
 * split; splits write partial records to the workspace, and the merge kernel (decode_merge_<dtype>:
 * decode/merge.h, instantiated at the end of this file), launched next on the same stream, combines
 * them, all rows and d of all groups in parallel (decode_args.h "the split merge"). A sequence uses
 * r35a_decode_seq_splits() of the planned splits (fewer when it is short), each a balanced share of
 * its tiles.
 *
 * Model features (decode_args.h): the logit transform (softcap, then ALiBi) runs in the loop only when
 * the call has one (a uniform branch per tile); attention sinks join each row's denominator once,
 * where the row is normalized (the single split's store or the split merge). The K/V element format
 * is compiled in (variants: the table's kv column): 16-bit (the Q/O dtype) or 8-bit (fp8 e4m3,
 * int8), whose tiles move half the bytes and are dequantized in registers to the Q/O dtype
 * (device.h kv8x2); the caller's scales (times the conversion's unit) join the logit scale (K) and
 * the output normalization (V). (One kernel body per format: two bodies in one kernel made clang
 * spill SGPRs in every variant.)
 *
 * Rows 8 on NVIDIA (variants/sm_90.tsv): a second fragment layer, decode/rows8_nv.h, holds the query
 * rows as the products' n = 8 (16 on every other layer), and the body (decode_body.h) is instantiated
 * on it too (layer_n8, decode/layer.h): no product, exponent or shuffle then works on padding rows
 * when a kv head has G x M <= 8 rows (the table's layer mma8).
 * Rows 4 on gfx11 (variants/gfx1151.tsv): likewise decode/rows4_gfx11.h, 4-row tiles whose products are
 * v_dot2 instead of WMMA (layer_d4): a kv head with G x M <= 4 rows no longer pays for 12
 * padding rows of a 16 x 16 x 16 WMMA; its 8-bit K is converted half a row per half-wave.
 *
 * Compile-time: element type, K/V element format, D, R (rows per workgroup, in ceil(R / 16) row
 * tiles; R / 8 on the rows-8 layer, R / 4 on the rows-4 one), KW, DW, RW, WAVES (the occupancy
 * contract), and the policies the table row names (variants/<arch>.tsv): the fragment layer, the KV
 * pipeline (registers, shared-memory stages private or shared by the row waves; the stage count)
 * and where Q^T lives (registers, staged through LDS once, read from LDS per tile). decode_cfg lays
 * them out and fails the build where the LDS of the occupancy contract cannot hold them.
 * Run-time: page size (any multiple of 16), strides, G, M (per sequence), window, scale, splits,
 * softcap, ALiBi, sinks, the 8-bit scales (per tensor or per kv head).
 *
 * Bad device metadata (device_error.h): one scalar check of the sequence's entries per workgroup
 * before anything is read (a bad sequence's rows are written as NaN and recorded), one compare per
 * block-table entry as it is read (a page outside the cache is never dereferenced: page 0 is
 * streamed instead and the wave's softmax state is made NaN, which every merge carries to O).
 * Non-finite values: a NaN or +inf logit makes p (hence l and O) NaN in its row and every merge
 * multiplies it in (NaN x 0 is NaN), a -inf one gives p = 0; keys no row reaches are zeroed in the
 * staged V tile, so their values never meet a product. A key that some rows of the sequence and kv
 * head see and others do not (the first and last tiles' edges) shares the products of the tile:
 * its NaN / Inf value elements reach those elements of the other rows too (p = 0 times NaN).
 */
#include "common/device.h"
#include "common/device_error.h"
#include "decode/decode_layers.h"
#include "decode/decode_args.h"
#include "decode/policy.h"
#include "decode/feed.h"
#include "decode/softmax.h"
#include "decode/timing.h"
#include "decode/epilogue.h"
#include "decode/merge.h"
#include "decode/layer.h"

namespace r35a {

/* The layers the target has, as types (layer.h): the target's, and decode's few-row layers. */
R35A_DECODE_FRAG_LAYER(layer_target, ::r35a::frag)
#if defined(R35A_FRAG_HAS_N8)
R35A_DECODE_FRAG_LAYER(layer_n8, ::r35a::frag_n8)
#endif
#if defined(R35A_FRAG_HAS_D4)
R35A_DECODE_FRAG_LAYER(layer_d4, ::r35a::frag_d4)
#endif

} /* namespace r35a */

/* The configuration, softmax state, stores and kernel body, templates over the layer. */
#include "decode/decode_body.h"

namespace r35a {

/* The fragment layer a variant's body runs on (variants/<arch>.tsv layer): the target's (wmma16 on
 * gfx11, mma16 on NVIDIA: 16-row tiles: layer_target), gfx11's 4-row v_dot2 layer (dot4: layer_d4)
 * or NVIDIA's 8-row mma layer (mma8: layer_n8). */
enum { DECODE_LAYER_TARGET = 0, DECODE_LAYER_N8 = 1, DECODE_LAYER_D4 = 2 };
template <class E, class KV, int D, int R, int KW, int DW, int RW, int WAVES, int LAYER, int PIPE, int S, int QPLACE>
struct decode_entry {
    static_assert(LAYER != LAYER, "layer: this target has no such fragment layer");
};
template <class E, class KV, int D, int R, int KW, int DW, int RW, int WAVES, int PIPE, int S, int QPLACE>
struct decode_entry<E, KV, D, R, KW, DW, RW, WAVES, DECODE_LAYER_TARGET, PIPE, S, QPLACE> {
    typedef decode_cfg<layer_target, E, KV, D, R, KW, DW, RW, WAVES, PIPE, S, QPLACE> cfg;
    R35A_MEMBER static void run(const r35a_decode_args &a) {
        decode_kernel<layer_target, E, KV, D, R, KW, DW, RW, WAVES, PIPE, S, QPLACE>(a);
    }
};
#if defined(R35A_FRAG_HAS_N8)
template <class E, class KV, int D, int R, int KW, int DW, int RW, int WAVES, int PIPE, int S, int QPLACE>
struct decode_entry<E, KV, D, R, KW, DW, RW, WAVES, DECODE_LAYER_N8, PIPE, S, QPLACE> {
    typedef decode_cfg<layer_n8, E, KV, D, R, KW, DW, RW, WAVES, PIPE, S, QPLACE> cfg;
    R35A_MEMBER static void run(const r35a_decode_args &a) {
        decode_kernel<layer_n8, E, KV, D, R, KW, DW, RW, WAVES, PIPE, S, QPLACE>(a);
    }
};
#endif
#if defined(R35A_FRAG_HAS_D4)
template <class E, class KV, int D, int R, int KW, int DW, int RW, int WAVES, int PIPE, int S, int QPLACE>
struct decode_entry<E, KV, D, R, KW, DW, RW, WAVES, DECODE_LAYER_D4, PIPE, S, QPLACE> {
    typedef decode_cfg<layer_d4, E, KV, D, R, KW, DW, RW, WAVES, PIPE, S, QPLACE> cfg;
    R35A_MEMBER static void run(const r35a_decode_args &a) {
        decode_kernel<layer_d4, E, KV, D, R, KW, DW, RW, WAVES, PIPE, S, QPLACE>(a);
    }
};
#endif

} /* namespace r35a */

/* A table row's policy words (layer, pipe, stages, q) as decode_entry's parameters. The gfx11-emulation
 * test build (R35A_FRAGMENT_EMULATE_GFX11=1: NVIDIA's tables run on gfx11's lane layouts) has one
 * layer and no shared-memory stages: it runs every row on that layer with two register stages and
 * Q^T in LDS, whatever the row names. */
#define R35A_DECODE_LAYER_wmma16 r35a::DECODE_LAYER_TARGET
#define R35A_DECODE_LAYER_mma16 r35a::DECODE_LAYER_TARGET
#define R35A_DECODE_LAYER_dot4 r35a::DECODE_LAYER_D4
#define R35A_DECODE_LAYER_mma8 r35a::DECODE_LAYER_N8
#if defined(R35A_FRAGMENT_EMULATE_GFX11) && R35A_FRAGMENT_EMULATE_GFX11
#define R35A_DECODE_POLICY(layer, pipe, stages, q) r35a::DECODE_LAYER_TARGET, r35a::DECODE_PIPE_regs, 2, r35a::DECODE_Q_lds
#else
#define R35A_DECODE_POLICY(layer, pipe, stages, q)                                                         \
    R35A_DECODE_LAYER_##layer, r35a::DECODE_PIPE_##pipe, stages, r35a::DECODE_Q_##q
#endif

/* NVIDIA: the dynamic shared memory a variant is launched with is exactly what its layout uses,
 * published as the device global <name>_lds_bytes, which the host reads at module load
 * (src/gpu_runtime.c): the one place the size is decided is decode_cfg. (A launch with the whole
 * budget of the occupancy contract instead would let fewer workgroups share an SM than fit.) */
#define R35A_DECODE_ENTRY(dtype, kv, D, R, KW, DW, RW, WAVES, layer, pipe, stages, q)                      \
    r35a::decode_entry<r35a::dtype##_t, r35a::kv_type<r35a::dtype##_t, r35a::kv_##kv##_t>::type, D, R, KW, DW, RW, WAVES, \
                       R35A_DECODE_POLICY(layer, pipe, stages, q)>
#if defined(R35A_TARGET_CUDA)
#define R35A_DECODE_LDS_SYMBOL(name, ...)                                                                  \
    extern "C" __device__ const int name##_lds_bytes = R35A_DECODE_ENTRY(__VA_ARGS__)::cfg::LDS_BYTES;
#else
#define R35A_DECODE_LDS_SYMBOL(name, ...)
#endif

/* One extern "C" kernel per variant; the symbol is the variant name. */
#define R35A_DECODE_VARIANT(arch, name, dtype, kv, D, R, KW, DW, RW, WAVES, layer, pipe, stages, q)         \
    R35A_DECODE_LDS_SYMBOL(name, dtype, kv, D, R, KW, DW, RW, WAVES, layer, pipe, stages, q)               \
    R35A_KERNEL R35A_KERNEL_BOUNDS(32 * (KW) * (DW) * (RW), WAVES) void name(r35a_decode_args a) {         \
        R35A_DECODE_ENTRY(dtype, kv, D, R, KW, DW, RW, WAVES, layer, pipe, stages, q)::run(a);             \
    }
/* R35A_DECODE_VARIANT_LIST names a list of R35A_DECODE_VARIANT(...) lines to instantiate instead of
 * variants/variants.def: a compile unit's (tools/gen_variants.py --units), or a tuner's candidates. */
#ifdef R35A_DECODE_VARIANT_LIST
#include R35A_DECODE_VARIANT_LIST
#else
#include "variants.def"
#endif
#undef R35A_DECODE_VARIANT
#undef R35A_DECODE_LDS_SYMBOL
#undef R35A_DECODE_ENTRY
#undef R35A_DECODE_POLICY

/* The split merge of every variant of a Q/O dtype (decode_args.h "the split merge"): launched after a
 * decode kernel whose plan has more than one split, with the same argument struct. No LDS; 4 waves
 * per SIMD at least: 16 records' loads in flight take ~100 registers (at 8 waves, NVIDIA's 64
 * registers spilled 392 bytes). The build's compile units (tools/gen_variants.py --units) put them in
 * a unit of their own and leave them out of the variant units (R35A_DECODE_MERGE_KERNELS 0). */
#ifndef R35A_DECODE_MERGE_KERNELS
#define R35A_DECODE_MERGE_KERNELS 1
#endif
#if R35A_DECODE_MERGE_KERNELS
R35A_KERNEL R35A_KERNEL_BOUNDS(R35A_DECODE_MERGE_THREADS, 4) void decode_merge_f16(r35a_decode_args a) {
    r35a::decode_merge<r35a::f16_t>(a);
}
R35A_KERNEL R35A_KERNEL_BOUNDS(R35A_DECODE_MERGE_THREADS, 4) void decode_merge_bf16(r35a_decode_args a) {
    r35a::decode_merge<r35a::bf16_t>(a);
}
#endif /* R35A_DECODE_MERGE_KERNELS */
