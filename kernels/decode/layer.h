/*
 * decode/layer.h - a fragment layer as a type: the decode body (decode_body.h) and its layout
 * (config.h) are templates over `Frag`, a struct that exposes the names of one fragment layer's
 * namespace (kernels/target/fragment*.h, decode/rows4_gfx11.h, decode/rows8_nv.h): its operand,
 * accumulator and column types, tile shape, products, column reductions, LDS storage and KV
 * pipelines. decode.hip defines one per layer the target has (R35A_DECODE_FRAG_LAYER); every
 * member forwards to the namespace's function with its exact signature (always inlined; a forwarder
 * that copied an accumulator the function takes by reference changed gfx11's register allocation).
 */
#ifndef R35A_DECODE_LAYER_H
#define R35A_DECODE_LAYER_H

#include "decode/decode_layers.h"

/* The parameter types of a layer's mma<E> (by value on the WMMA and mma.sync layers, by reference
 * on the 4-row one): its forwarder takes exactly those. */
template <class Fn>
struct r35a_frag_sig3;
template <class R, class A, class B, class C>
struct r35a_frag_sig3<R (*)(A, B, C)> {
    typedef A a;
    typedef B b;
    typedef C c;
};
/* Layers with shared-memory KV stages (R35A_FRAG_HAS_KV_PIPE_LDS: NVIDIA's native layers) */
#if defined(R35A_FRAG_HAS_KV_PIPE_LDS)
#define R35A_FRAG_KV_PIPE_LDS(NS)                                                                         \
    template <int DS, int S, class E, class KV, int RW = 1>                                                \
    using kv_pipe_lds = NS::kv_pipe_lds<DS, S, E, KV, RW>;
#else
#define R35A_FRAG_KV_PIPE_LDS(NS)
#endif
/* gfx11's layers: a B operand word's row (the bf16 queries' per-row scale in registers) */
#if defined(R35A_TARGET_AMDGCN)
#define R35A_FRAG_BOP_ROW(NS) R35A_MEMBER static int bop_row_of_word(int j) { return NS::bop_row_of_word(j); }
#else
#define R35A_FRAG_BOP_ROW(NS)
#endif

#define R35A_DECODE_FRAG_LAYER(NAME, NS)                                                                  \
    struct NAME {                                                                                         \
        typedef NS::ab ab;     /* an A operand (K, V^T) */                                                \
        typedef NS::bop bop;   /* a B operand (Q^T, P^T) */                                               \
        typedef NS::acc acc;   /* an accumulator (S^T, O^T) */                                            \
        typedef NS::colv colv; /* one value per accumulator column (query row) */                         \
        static constexpr int TILE_ROWS = NS::TILE_ROWS, NCOL = NS::NCOL, ACC_ELEMS = NS::ACC_ELEMS,        \
                             ACC_NATIVE_FLOATS = NS::ACC_NATIVE_FLOATS;                                   \
        template <int DS, int S, class E, class KV>                                                       \
        using kv_pipe_regs = NS::kv_pipe_regs<DS, S, E, KV>;                                              \
        R35A_FRAG_KV_PIPE_LDS(NS)                                                                         \
        template <class E>                                                                                \
        R35A_MEMBER static acc mma(typename r35a_frag_sig3<decltype(&NS::mma<E>)>::a x,                   \
                                   typename r35a_frag_sig3<decltype(&NS::mma<E>)>::b y,                   \
                                   typename r35a_frag_sig3<decltype(&NS::mma<E>)>::c z) {                 \
            return NS::mma<E>(x, y, z);                                                                   \
        }                                                                                                 \
        template <class E>                                                                                \
        R35A_MEMBER static bop b_from_acc(const acc &c) { return NS::b_from_acc<E>(c); }                  \
        template <bool K8_ORDER>                                                                          \
        R35A_MEMBER static bop load_bop_lds(const u16 *lds, int ld) { return NS::load_bop_lds<K8_ORDER>(lds, ld); } \
        template <bool K8_ORDER, class F, class OK>                                                       \
        R35A_MEMBER static bop load_bop_global_u16(F ptr_of, OK ok) {                                     \
            return NS::load_bop_global_u16<K8_ORDER>(ptr_of, ok);                                         \
        }                                                                                                 \
        R35A_MEMBER static acc acc_zero() { return NS::acc_zero(); }                                      \
        R35A_MEMBER static colv colv_fill(float x) { return NS::colv_fill(x); }                           \
        R35A_MEMBER static int acc_m(int e) { return NS::acc_m(e); }                                      \
        R35A_MEMBER static int acc_slot(int e) { return NS::acc_slot(e); }                                \
        R35A_MEMBER static int acc_n_of_slot(int slot) { return NS::acc_n_of_slot(slot); }                \
        R35A_MEMBER static bool col_owner(int slot) { return NS::col_owner(slot); }                       \
        R35A_MEMBER static colv col_max(const acc &c) { return NS::col_max(c); }                          \
        R35A_MEMBER static colv col_sum_share(const acc &c) { return NS::col_sum_share(c); }              \
        R35A_MEMBER static colv col_sum_finish(colv share) { return NS::col_sum_finish(share); }          \
        R35A_MEMBER static void acc_store_lds(float *lds, const acc &c) { NS::acc_store_lds(lds, c); }    \
        R35A_MEMBER static acc acc_load_lds(const float *lds) { return NS::acc_load_lds(lds); }           \
        R35A_MEMBER static void colv_store(float *p, colv c, bool global) { NS::colv_store(p, c, global); } \
        R35A_MEMBER static colv colv_load(const float *p, bool global) { return NS::colv_load(p, global); } \
        R35A_MEMBER static int k8_q_word_pos(int w) { return NS::k8_q_word_pos(w); }                      \
        R35A_FRAG_BOP_ROW(NS)                                                                             \
    };

#endif /* R35A_DECODE_LAYER_H */
