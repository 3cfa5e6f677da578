/*
 * kv_format.h - the K/V element formats, the one definition every kernel family, the host planners
 * and the variant table use. The values are the r35a_dtype values of include/rdna35attn.h (the
 * kernels do not include the public header; src/registry.c checks that they agree).
 */
#ifndef R35A_KV_FORMAT_H
#define R35A_KV_FORMAT_H

#define R35A_KV_AS_Q 0        /* K and V have the Q/O dtype (16-bit) */
#define R35A_KV_FP8_E4M3 4    /* OCP float8_e4m3fn bytes x scale */
#define R35A_KV_INT8 5        /* two's-complement int8 x scale */

#endif /* R35A_KV_FORMAT_H */
