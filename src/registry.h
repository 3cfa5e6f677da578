/* registry.h - the GPU kernels this build knows, one table per kernel family, generated from
 * variants/variants.def (the one list that also feeds the kernels, the tests and the bench). Pure
 * host data: no runtime, no planning. */
#ifndef R35A_REGISTRY_H
#define R35A_REGISTRY_H

#include "internal.h"

#include <string.h>

/* Both names are set and equal (arch and kernel names). */
static inline bool r35a_same_name(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

typedef struct r35a_decode_variant {
    const char *arch;
    const char *name;            /* the kernel symbol, log label and bench label */
    r35a_dtype dtype;
    r35a_dtype kv_dtype;         /* K/V element format: 0 = dtype (16-bit), R35A_DTYPE_FP8_E4M3, R35A_DTYPE_INT8 */
    int32_t head_size;
    int32_t rows;                /* R: query rows per workgroup */
    int32_t kw, dw, rw;          /* key groups, head-dim waves, row waves: block = 32 * kw * dw * rw threads */
    int32_t waves;               /* minimum waves per SIMD the kernel's VGPR budget allows */
} r35a_decode_variant;

typedef struct r35a_generic_kernel {
    const char *arch;
    const char *name;
    r35a_op op;                  /* R35A_OP_PAGED, R35A_OP_VARLEN, or R35A_OP_MERGE (merge_states_<dtype>,
                                    variants.def's R35A_GENERIC_MERGE_KERNEL rows) */
    r35a_dtype dtype;
    int32_t dmax;                /* largest head size served (1024 for the merge: every head size) */
} r35a_generic_kernel;

/* Row counts (the same kernel name may appear in several tuning tables). */
enum {
    R35A_NUM_DECODE_VARIANTS = 0
#define R35A_DECODE_VARIANT(arch, name, dtype, kv, head_size, rows, kw, dw, rw, waves, layer, pipe, stages, q) +1
#include "variants.def"
#undef R35A_DECODE_VARIANT
};
enum {
    R35A_NUM_GENERIC_KERNELS = 0
#define R35A_GENERIC_KERNEL(arch, name, op, dtype, dmax) +1
#define R35A_GENERIC_MERGE_KERNEL(arch, name, dtype) +1
#include "variants.def"
#undef R35A_GENERIC_KERNEL
#undef R35A_GENERIC_MERGE_KERNEL
};

typedef struct r35a_encoder_variant {
    const char *arch;
    const char *name;            /* the kernel symbol, log label and bench label */
    r35a_dtype dtype;
    int32_t head_size;           /* D (72 runs padded to 80 inside the kernel) */
    int32_t rows;                /* query rows per wave (16 or 32) */
    int32_t kb, nw;              /* keys per K/V block; waves per workgroup: block = 32 * nw threads */
    int32_t waves;               /* minimum waves per SIMD (occupancy contract) */
    int32_t maxlen;              /* 0: one group per workgroup; > 0: one wave per group, preferred when
                                    max_seqlen <= maxlen (encoder_args.h) */
} r35a_encoder_variant;

enum {
    R35A_NUM_ENCODER_VARIANTS = 0
#define R35A_ENCODER_VARIANT(arch, name, dtype, head_size, rows, kb, nw, waves, maxlen) +1
#include "variants.def"
#undef R35A_ENCODER_VARIANT
};

extern const r35a_decode_variant r35a_decode_variants[];
extern const r35a_generic_kernel r35a_generic_kernels[];
extern const r35a_encoder_variant r35a_encoder_variants[];

/* The archs of variants/archs.tsv: which tuning rows each runs and how its runtime counts CUs. */
typedef struct r35a_gpu_arch {
    const char *arch;            /* "gfx1151", "sm_90", ...: the runtime's name of the device's arch */
    const char *tuning;          /* the `arch` of the registry rows it runs, e.g. "gfx1151" for gfx1100 */
    const char *unit;            /* what the runtime's multiprocessor count counts: "wgp", "cu" or "sm" */
    int32_t cus_per_unit;        /* compute units per reported unit (2 per RDNA WGP) */
    int32_t default_cus;         /* CUs assumed when the runtime reports none */
    int32_t simds_per_cu;        /* SIMDs (NVIDIA: SM sub-partitions) per compute unit */
} r35a_gpu_arch;
extern const r35a_gpu_arch r35a_gpu_archs[];   /* ends with a NULL arch */
/* SIMDs per CU of the archs that run tuning table `tuning` (they share it: 2 on gfx11, 4 on sm_90). */
int32_t r35a_tuning_simds_per_cu(const char *tuning);
/* Whether tuning table `tuning` is run by NVIDIA archs (its unit is "sm"): their decode kernels take
 * dynamic shared memory (decode_args.h r35a_nv_smem_bytes). */
bool r35a_tuning_is_nvidia(const char *tuning);
/* The row of arch (a base name such as "gfx1151", without ':' features), or NULL. */
const r35a_gpu_arch *r35a_find_gpu_arch(const char *arch);

/* The split merge kernel of the decode variants of dtype (f16 or bf16): "decode_merge_f16",
 * "decode_merge_bf16" (kernels/decode/decode.hip), both in the decode unit R35A_DECODE_MERGE_UNIT. */
const char *r35a_decode_merge_name(r35a_dtype dtype);
#define R35A_NUM_DECODE_MERGE_KERNELS 2
/* Index of dtype's merge kernel among the R35A_NUM_DECODE_MERGE_KERNELS (0 f16, 1 bf16). */
int r35a_decode_merge_index(r35a_dtype dtype);
/* The compile unit of the decode family that holds the split merge kernels. */
#define R35A_DECODE_MERGE_UNIT "merge"
/* The compile unit of kernel `index` of family ("f16_fp8", "bf16", "all"; on NVIDIA tables with the
 * head size: "f16_fp8_d128", "bf16_d64": tools/gen_variants.py --units): the kernel is in the code
 * object (arch, family, unit) (code_objects.h). */
const char *r35a_registry_unit(r35a_gpu_family family, int index);

/* Family-generic views of the three tables (index < r35a_registry_count(family)). */
int r35a_registry_count(r35a_gpu_family family);
const char *r35a_registry_name(r35a_gpu_family family, int index);
const char *r35a_registry_tuning(r35a_gpu_family family, int index);
const char *r35a_family_name(r35a_gpu_family family);   /* "decode", "generic", "encoder" */
/* Index of the kernel `name` of `family` among the rows of tuning table `tuning`, or -1. Names are
 * unique within a tuning table, not across tables (the same kernel serves several archs). */
int r35a_registry_find(r35a_gpu_family family, const char *tuning, const char *name);
/* The tail kernel of encoder variant `variant` (<name>_tail, encoder_args.h "Tail split"), or NULL:
 * variants.def lists one for each workgroup-wide variant of the tunings that use the tail split. */
const char *r35a_encoder_tail_name(int variant);
/* The paged sibling of encoder variant `variant` (<name>_paged, kernels/encoder/prefill_args.h: causal
 * prefill over the paged KV cache), or NULL: variants.def lists one for each workgroup-wide variant. */
const char *r35a_encoder_paged_name(int variant);
/* Why no kernel of family (decode or encoder) among tuning's rows serves (dtype, kv_dtype, head_size):
 * the forced kernel is of another dtype or K/V format, or the head size is not built; the reason lists
 * the head sizes built for them in table order ("head_size 80 not built (gfx1151 f16: 64, 96, 128)",
 * "(gfx1151 f16, int8 KV: 64, 128)"), only the forced kernel's when forced >= 0. kv_dtype: a decode
 * kernel's K/V element format (0: the dtype itself; always 0 for the encoder). */
void r35a_registry_explain_missing(r35a_gpu_family family, const char *tuning, r35a_dtype dtype, r35a_dtype kv_dtype,
                                   int32_t head_size, int forced, const char *only, char *reason, size_t cap);
/* A planner's R35A_FORCE restriction: *forced gets the index of kernel `only` of family among
 * tuning's rows (-1 when only is NULL: any kernel). False, with the reason "no <what> <only> for
 * <tuning>" written, when only names no such kernel. */
bool r35a_registry_forced(r35a_gpu_family family, const char *what, const char *tuning, const char *only,
                          int *forced, char *reason, size_t cap);

#endif
