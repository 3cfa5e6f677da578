/*
 * rdna35attn.h - attention kernels for AMD RDNA 3.5 (gfx1151, "Strix Halo") and the other gfx11 chips
 * (gfx1100, gfx1101, gfx1102, gfx1150, gfx1152: the archs of variants/archs.tsv that the build's
 * R35A_GPU_TARGETS names), and NVIDIA sm_90 in builds with R35A_NVIDIA_TARGETS.
 *
 * The whole public surface of librdna35attn. C11; no HIP or CUDA header is needed to include it.
 *
 * Two operations:
 *   - paged attention: decode, speculative decode (M <= 8 query tokens per sequence) and mixed
 *     batches with longer (causal, chunked-prefill) query spans, over a paged KV cache;
 *   - varlen attention: non-causal (encoder / ViT) or causal attention over variable-length
 *     segments of one packed token buffer, with Q/K/V read in place through strides.
 *
 * Usage: create a context once, plan a call on the host (a plan fixes the implementation, the
 * launch grid and the workspace size from host-known values only), then run the plan many times
 * with different buffers. See README.md for a complete example.
 *
 * Conventions used throughout:
 *   - All strides and offsets are in ELEMENTS of the tensor's dtype, never bytes.
 *   - Pointers in the *_args structs are device pointers on a GPU context and host pointers on a
 *     reference context. Metadata arrays (seq_lens, query_start_loc, block_table, cu_seqlens) live
 *     where the tensors live.
 *   - Every call returns an r35a_status. On any status other than R35A_OK nothing has been written
 *     to any output or workspace buffer, and r35a_last_error_detail() names the offending field.
 *   - Metadata contents are checked where they live: on the host before anything runs (reference
 *     context), on the device by the kernels (GPU context; see "Bad device data" below).
 *   - The library never aborts the host process and never prints unless R35A_LOG=1 is set.
 *
 * Semantics of the scores (both ops). For a query row q (query head h) and a key k that the row
 * may see, the logit is
 *     s = softmax_scale * dot(q, k)
 *     if logit_softcap > 0:  s = logit_softcap * tanh(s / logit_softcap)
 *     if ALiBi is on:        s = s + alibi_slopes[h] * (j - p)      (j key position, p query position)
 * and the output row is sum_j softmax(s)_j * v_j, computed with fp32 accumulation and fp32 softmax.
 * Attention sinks (use_sinks = 1; gpt-oss): query head h has one more logit, sinks[h], a raw value
 * (NOT multiplied by softmax_scale, no softcap, no ALiBi) that joins the softmax's denominator and
 * contributes no value: with m = max(sinks[h], max_j s_j),
 *     o = sum_j exp(s_j - m) v_j / (exp(sinks[h] - m) + sum_j exp(s_j - m))
 * (a softmax over [s_0 .. s_n, sink] whose last column is dropped). A sink of -inf is no sink.
 * A row that sees no key (padding, empty sequence) is written as zeros, never NaN, whatever its sink.
 * Non-finite inputs (the reference and every GPU kernel, checked against it on the gfx11 emulator
 * and by the GPU fuzzer tests/gpu/fuzz_gpu.c): a NaN or +inf logit makes its whole row NaN, never a
 * plausible-looking value; a -inf logit gives its key no weight (a row whose every logit is -inf
 * sees no key: zeros); a NaN or +inf sink is such a logit (a -inf sink is no sink); a NaN or Inf in
 * element e of a value vector (an fp8 NaN code included) makes element e of every row that sees
 * that key NaN or Inf (Q or K holding an Inf makes logits of +-inf or NaN, hence those rules). On the
 * decode kernels, on the encoder kernels' causal calls and on their paged siblings (the prefill
 * kernels: paged sequences of more than 8 query tokens), such a value element may also make element e
 * NaN in the other query rows of the same sequence (segment) and kv head: their rows share key tiles,
 * and a key seen by some of them (the causal or window edge) meets the others' zero weight in one
 * product. Elements the call does not reach (outside every
 * row's window, past L, unreached pages, stride gaps) never affect the output.
 *
 * Bad device data (GPU contexts). On a GPU context the metadata (seq_lens, query_start_loc,
 * block_table, cu_seqlens) is device memory the host never reads, so the kernels check it, with a
 * scalar compare per sequence and per page: a block_table entry outside 0..num_pages-1 in a page a
 * query reaches, a seq_len outside 0..max_seq_len, a sequence with more query tokens than
 * max_query_len or than its seq_len, query_start_loc / cu_seqlens entries outside 0..num_tokens or
 * decreasing, a segment longer than max_seqlen. Whatever the metadata holds, a kernel never reads
 * or writes outside the buffers the descriptor describes and writes nothing outside the output
 * rows. The rows of an offending sequence are written as NaN (for a bad page: at least the rows
 * that reach it, possibly all the sequence's), those of the others keep their values; when
 * query_start_loc / cu_seqlens themselves are broken, which rows are NaN and which hold values is
 * unspecified. It also stores (field, sequence) in the context's device error record, a few bytes
 * of host-mapped pinned memory allocated with the context: one record per context, shared by its
 * streams and threads, holding one of the offending sequences found first (whichever workgroup's
 * store got there) until it is reported. A call without query rows (num_tokens 0) launches nothing
 * and so checks nothing.
 *
 * Every later plan or run call on the context first reads the record (a plain read of host memory:
 * no device synchronization, so graph capture is unaffected) and, when it is set, returns
 * R35A_ERR_INVALID_DATA without doing anything else, with a detail such as
 *     "paged_attention_args.block_table: sequence 3 holds a page index outside 0..num_pages-1 in a
 *      page its queries reach (found on the device by an earlier run)"
 * and clears it. A caller that wants to know right after its own stream synchronize calls
 * r35a_context_check_device(). A run that is still executing records after the read: the next call
 * reports it.
 *
 * Softmax LSE (since 0.3; both ops, optional: desc.use_lse = 1 and args.lse). The LSE of a query
 * row is the natural log of its softmax denominator in logit units, the logits s_j being the ones
 * above (after softmax_scale, softcap and ALiBi), the sink's exp included when the call has sinks:
 *     lse = log( sum_j exp(s_j) + exp(sinks[h]) )     (computed as m + log(sum_j exp(s_j - m) + ...))
 * It is float32, written for row (token t, head h) at lse[t * lse_token_stride + h * lse_head_stride].
 * A row that sees no key gives lse = -inf and O = 0, whatever its sink (its sink is not counted). A
 * NaN or +inf logit makes lse NaN, like the row. Which implementations write it: the reference,
 * the decode kernels (paged calls with M <= 8, and the decode part of a mixed batch; on gfx11 - on
 * NVIDIA the portable kernel writes it until the decode kernels' LSE has run on a GPU), the encoder
 * kernels and their paged siblings (the prefill kernels; on NVIDIA, likewise, the portable kernel
 * until they have run there) and the portable GPU kernel (the plan's fallback_reason says which
 * declined). With O and lse of two calls over
 * disjoint key sets of the same rows, r35a_merge_states gives the call over their union (see
 * "Merging partial states" below).
 *
 * ABI growth: every descriptor and args struct opens with struct_size, and a library accepts the
 * sizes of every earlier release: the struct as that release declared it is the prefix of today's,
 * and the fields past it take their defaults (documented at each field). 0.1.0 callers pass
 * sizes that end before the fields marked "since 0.2", 0.2.0 callers sizes that end before those
 * marked "since 0.3", 0.3.0 callers sizes that end before those marked "since 0.4"; each struct's
 * comment names those sizes. r35a_*_desc_init write today's whole struct; on ELF systems a binary
 * built against an earlier header keeps calling that release's version of them (symbol version
 * R35A_0 for 0.1.0's, R35A_0.2 for 0.2.0's, R35A_0.3 for 0.3.0's: each fills only its release's
 * struct and sets its size), while programs linked now get today's (R35A_0.4 for
 * r35a_paged_attention_desc_init, whose struct grew in 0.4; R35A_0.3 for the varlen one).
 */
#ifndef RDNA35ATTN_H
#define RDNA35ATTN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define R35A_API
#elif defined(__GNUC__)
#define R35A_API __attribute__((visibility("default")))
#else
#define R35A_API
#endif

/* ---------------------------------------------------------------------------------------------
 * Version
 * ------------------------------------------------------------------------------------------- */

#define R35A_VERSION_MAJOR 0
#define R35A_VERSION_MINOR 4
#define R35A_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH, e.g. 400 for 0.4.0. */
#define R35A_VERSION_NUMBER (R35A_VERSION_MAJOR * 10000 + R35A_VERSION_MINOR * 100 + R35A_VERSION_PATCH)

/* The version of the library actually linked, as R35A_VERSION_NUMBER and as "0.4.0". */
R35A_API unsigned r35a_version_number(void);
R35A_API const char *r35a_version_string(void);

/* ---------------------------------------------------------------------------------------------
 * Status codes. The values are pinned: they never change meaning between releases.
 * ------------------------------------------------------------------------------------------- */

typedef enum r35a_status {
    R35A_OK = 0,
    R35A_ERR_NULL_POINTER = 1,          /* a required pointer argument or field is NULL */
    R35A_ERR_INVALID_ARGUMENT = 2,      /* a value is out of its documented range */
    R35A_ERR_STRUCT_SIZE = 3,           /* a struct's struct_size is not one this library knows */
    R35A_ERR_UNKNOWN_DTYPE = 4,         /* dtype is not an r35a_dtype value */
    R35A_ERR_SIZE_OVERFLOW = 5,         /* a size or offset product does not fit in 64 bits */
    R35A_ERR_UNSUPPORTED = 6,           /* valid input that no implementation of this context serves */
    R35A_ERR_BACKEND_UNAVAILABLE = 7,   /* the requested backend (e.g. GPU) is not available */
    R35A_ERR_WORKSPACE_TOO_SMALL = 8,   /* workspace_bytes is below the plan's workspace_bytes */
    R35A_ERR_OUT_OF_MEMORY = 9,         /* a host allocation failed */
    R35A_ERR_DEVICE = 10,               /* the GPU runtime returned an error */
    R35A_ERR_INVALID_DATA = 11,         /* metadata contents (seq_lens, block_table, ...) are invalid:
                                           found on the host before running (reference context), or
                                           on the device by an earlier run (GPU context: reported by
                                           the next call, see "Bad device data" above) */
    R35A_ERR_PLAN_MISMATCH = 12,        /* the plan was made by another context or for another op */
    R35A_ERR_INTERNAL = 13              /* a bug in the library; please report it */
} r35a_status;

/* Name of a status, e.g. "R35A_ERR_INVALID_ARGUMENT"; "R35A_ERR_UNKNOWN_STATUS" for others. */
R35A_API const char *r35a_status_string(r35a_status status);

/* Detail of the last failed call on this thread, naming the offending field, e.g.
 * "paged_attention_desc.num_kv_heads: 5 does not divide num_q_heads 32". Valid until the next
 * library call on this thread; "" if the last call succeeded. */
R35A_API const char *r35a_last_error_detail(void);

/* ---------------------------------------------------------------------------------------------
 * Data types
 * ------------------------------------------------------------------------------------------- */

typedef enum r35a_dtype {
    R35A_DTYPE_F16 = 1,      /* IEEE binary16 */
    R35A_DTYPE_BF16 = 2,     /* bfloat16 */
    R35A_DTYPE_F32 = 3,      /* IEEE binary32 (reference path only) */
    /* 8-bit KV-cache dtypes (r35a_paged_attention_desc.kv_dtype only; never Q, O or varlen): */
    R35A_DTYPE_FP8_E4M3 = 4, /* OCP float8_e4m3fn (torch.float8_e4m3fn, vLLM's "fp8"): sign, 4
                                exponent bits with bias 7, 3 mantissa bits; subnormals; no
                                infinities; S.1111.111 is NaN; largest finite 448 */
    R35A_DTYPE_INT8 = 5      /* two's-complement int8, symmetric: real value = stored x scale */
} r35a_dtype;

/* Where an 8-bit KV cache's scales live (r35a_paged_attention_desc.kv_scale_per_head; since 0.4
 * the field takes these named values, 0 and 1 keeping their 0.2 meaning). */
typedef enum r35a_kv_scale_granularity {
    R35A_KV_SCALE_PER_TENSOR = 0,     /* k_scale, v_scale: [1] */
    R35A_KV_SCALE_PER_KV_HEAD = 1,    /* k_scale, v_scale: [num_kv_heads] */
    R35A_KV_SCALE_PER_TOKEN_HEAD = 2  /* k_scale, v_scale: one per (page, slot, kv head), laid out like
                                         the cache's pages ([num_pages][page_size][num_kv_heads] by
                                         default) through the desc's k_scale_* / v_scale_* strides;
                                         since 0.4 */
} r35a_kv_scale_granularity;

/* ---------------------------------------------------------------------------------------------
 * Context
 * ------------------------------------------------------------------------------------------- */

typedef enum r35a_backend {
    R35A_BACKEND_AUTO = 0,       /* the GPU if one this build serves is present, else the reference */
    R35A_BACKEND_GPU = 1,        /* the GPU or R35A_ERR_BACKEND_UNAVAILABLE */
    R35A_BACKEND_REFERENCE = 2   /* the portable CPU reference on host pointers */
} r35a_backend;

typedef struct r35a_context_options {
    size_t struct_size;      /* sizeof(r35a_context_options) */
    r35a_backend backend;    /* default R35A_BACKEND_AUTO */
    int32_t device_index;    /* GPU ordinal for GPU backends; default 0 */
} r35a_context_options;

/* Fills *options with defaults (struct_size set). */
R35A_API void r35a_context_options_init(r35a_context_options *options);

typedef struct r35a_context r35a_context;

/* options may be NULL for the defaults. On failure *context is set to NULL. Thread-safe. */
R35A_API r35a_status r35a_context_create(const r35a_context_options *options, r35a_context **context);
/* NULL is accepted. Plans made by the context must be destroyed first. */
R35A_API void r35a_context_destroy(r35a_context *context);

typedef struct r35a_context_info {
    size_t struct_size;        /* set by the caller: sizeof(r35a_context_info) */
    r35a_backend backend;      /* the active backend: R35A_BACKEND_GPU or R35A_BACKEND_REFERENCE */
    int32_t device_index;      /* GPU ordinal, -1 on the reference backend */
    char backend_name[32];     /* "reference", "hip", ... */
    char arch[64];             /* GPU arch, e.g. "gfx1151"; the host CPU arch for the reference */
    char reason[256];          /* why this backend is active, e.g. "no HIP runtime found ..." */
} r35a_context_info;

R35A_API r35a_status r35a_context_get_info(const r35a_context *context, r35a_context_info *info);

/* Reports bad device metadata that the context's kernels found ("Bad device data" above): call it
 * after synchronizing the stream a run was queued on. Returns R35A_ERR_INVALID_DATA with the detail
 * naming the field and the sequence (and clears the record) when a kernel recorded one, R35A_OK
 * otherwise; always R35A_OK on a reference context (its data is checked before each run). It only
 * reads host memory: no device call, safe during graph capture and from any thread. Since 0.2. */
R35A_API r35a_status r35a_context_check_device(r35a_context *context);

/* ---------------------------------------------------------------------------------------------
 * Plans
 * ------------------------------------------------------------------------------------------- */

typedef struct r35a_plan r35a_plan;

typedef struct r35a_plan_info {
    size_t struct_size;          /* set by the caller: sizeof(r35a_plan_info) */
    char implementation[128];    /* the chosen implementation: a tuned variant's kernel name (e.g.
                                    "decode_f16_d128_r16_kw2_dw2_w6_wmma16_pregs2_qlds"), a portable kernel's name (e.g.
                                    "generic_paged_f16_dmax256") or "reference"; a mixed batch served
                                    by two launches lists both, joined by '+' */
    char fallback_reason[256];   /* why a faster implementation declined, "" if none did */
    size_t workspace_bytes;      /* bytes of workspace run() needs; 0 means none. The caller owns it;
                                    it needs no initialization (GPU backends reset the split counters
                                    they use on the stream before each launch) */
    uint32_t grid[3];            /* launch grid in workgroups (0s on the reference backend; a 0 in
                                    it: nothing to launch). A two-launch plan (a mixed batch,
                                    "decode_...+generic_..." or "decode_...+encoder_..._paged")
                                    reports its first, decode launch here (grid, block,
                                    workspace_bytes and num_splits alike); its second launch has no
                                    workspace and grid {num_tokens, num_q_heads, 1} (generic) or
                                    {num_seqs x ceil(max_query_len x G / R), num_kv_heads, 1} (prefill:
                                    R rows per workgroup, the G = num_q_heads / num_kv_heads query
                                    heads of a kv head packed into its rows) */
    uint32_t block[3];           /* workgroup size in threads (0s on the reference backend) */
    int32_t num_splits;          /* KV splits per (kv head, row group); 1 without split-KV */
} r35a_plan_info;

R35A_API r35a_status r35a_plan_get_info(const r35a_plan *plan, r35a_plan_info *info);
/* NULL is accepted. */
R35A_API void r35a_plan_destroy(r35a_plan *plan);

/* ---------------------------------------------------------------------------------------------
 * Paged attention: decode, speculative decode and mixed batches.
 *
 * Sequence s has L = seq_lens[s] tokens of context, its new query tokens included. Its M query
 * tokens are rows query_start_loc[s] .. query_start_loc[s+1]-1 of Q and O, and they sit at key
 * positions L-M .. L-1. Query token i (position p = L-M+i) sees key positions j with j <= p and,
 * when window > 0, p - j < window (the window counts `window` keys, the current one included).
 * M must not exceed L.
 *
 * Paged KV: key position j of sequence s is in physical page
 *     page = block_table[s * block_table_stride + j / page_size],  slot j % page_size,
 * and its key vector for kv head g starts at element
 *     k_cache + page * k_page_stride + g * k_head_stride + slot * k_slot_stride
 * (the same for V with the v_* strides). Elements within a vector are contiguous (stride 1).
 * The usual HND cache [num_pages][num_kv_heads][page_size][head_size] has
 *     page_stride = num_kv_heads * page_size * head_size, head_stride = page_size * head_size,
 *     slot_stride = head_size.
 * Only the pages a query can reach need valid block_table entries: a windowed sequence's table may
 * hold anything in the entries before the first page its window reaches.
 *
 * Q row for (token t, query head h) starts at q + t * q_token_stride + h * q_head_stride; the same
 * for O with the o_* strides. GQA: num_q_heads is a multiple of num_kv_heads and query head h
 * reads kv head h / (num_q_heads / num_kv_heads).
 *
 * 8-bit KV cache (kv_dtype R35A_DTYPE_FP8_E4M3 or R35A_DTYPE_INT8): K and V hold one byte per
 * element and their strides count those bytes (elements of the KV dtype, as always). The real
 * value of a stored element x of kv head g at key position j (in page, slot as above) is
 *     k = x * ks,   v = x * vs,   by desc.kv_scale_per_head (r35a_kv_scale_granularity):
 *       R35A_KV_SCALE_PER_TENSOR      ks = k_scale[0], vs = v_scale[0]
 *       R35A_KV_SCALE_PER_KV_HEAD     ks = k_scale[g], vs = v_scale[g]
 *       R35A_KV_SCALE_PER_TOKEN_HEAD  ks = k_scale[page * k_scale_page_stride + slot * k_scale_slot_stride
 *                                                  + g * k_scale_head_stride], vs likewise (v_scale_*)
 * (fp8: x is the decoded e4m3 value; int8: x is the integer -128 .. 127), and the call is exactly
 * the attention of Q over those real values: scales and dequantization happen in fp32 inside the
 * kernel, no 16-bit rounding of k or v in between (the products must be finite in fp32). Q and O
 * keep dtype (f16 or bf16; f32 on the reference).
 * Per-token-head scales are what vLLM's int8_per_token_head / fp8_per_token_head caches carry: one
 * float32 tensor for K and one for V, [num_blocks, block_size, num_kv_heads] each (its
 * k_scale_cache / v_scale_cache), or a strided view into a cache that keeps each row's scale
 * beside it. K and V scales therefore have three strides each (float32 elements): two separate
 * tensors, possibly laid out differently. Only the scales of keys some query row reaches are read
 * (like the cache's own pages); each must be finite and > 0, checked on the reference backend. On a
 * GPU context the portable kernel serves per-token-head scales, and the plan's fallback_reason says
 * so: the decode kernels fold one scale into the softmax scale and one into the output
 * normalization, and a per-key V scale must weight each key's share of P.V apart from the softmax
 * denominator.
 *
 * Empty-sequence rule: a sequence with L = 0 (a padding slot; it must then have M = 0) writes
 * nothing because it has no rows; a query row that sees no key writes zeros.
 *
 * On a GPU context: a call with max_query_len <= 8 runs one launch of a tuned decode kernel when
 * one serves it (f16/bf16, a head size built for the dtype and KV dtype (variants/variants.def; the
 * plan's fallback_reason lists them when none is), page size a multiple of 16, Q strides multiples
 * of 8 elements and K/V strides multiples of 16 bytes: 8 elements of a 16-bit cache, 16 of an
 * 8-bit one, whose scales are per tensor or per kv head), else of the portable kernel, which serves
 * all of these; the plan's fallback_reason says why. Softcap, ALiBi, sinks and 8-bit KV caches run
 * on the decode kernels too (an fp8 NaN code is NaN there as everywhere: gfx11's bit-arithmetic
 * dequantization flags it). A mixed batch
 * (max_query_len > 8, several sequences) that the decode kernels serve otherwise runs as two
 * launches on the caller's stream within one run call: the decode kernel serves the sequences with
 * M <= 8, and the sequences with M > 8 run on a prefill kernel (an encoder variant's paged sibling,
 * "encoder_..._paged": f16/bf16 with a 16-bit cache, a head size of the encoder kernels, page size a
 * multiple of 16, strides multiples of 8 elements; windows, softcap, ALiBi, sinks and the LSE run there;
 * on NVIDIA not yet: the portable kernel serves these rows until this build has run on a GPU)
 * or else on the portable kernel, each launch skipping the other's sequences on the device, so
 * nothing is read back to the host. The plan's implementation then names both, e.g.
 * "decode_f16_d128_r16_kw2_dw2_w6_wmma16_pregs2_qlds+encoder_f16_d128_r16_kb32_nw8_w5_paged". A single
 * sequence of more than 8 query tokens (a prefill), or a mixed batch of a head size no decode kernel
 * has, runs on the prefill kernel alone when it serves the call. Every launch shape comes from the
 * descriptor (host-known values), never from seq_lens or query_start_loc contents, so a run can be
 * captured in a HIP graph. A run whose q, k_cache, v_cache or (split-KV) workspace pointer, or with a
 * prefill kernel its out pointer, is not 16-byte aligned runs the portable kernel alone for that run
 * (logged with R35A_LOG=1).
 * ------------------------------------------------------------------------------------------- */

typedef struct r35a_paged_attention_desc {
    size_t struct_size;            /* sizeof(r35a_paged_attention_desc); 0.1.0's size,
                                      offsetof(r35a_paged_attention_desc, use_sinks), 0.2.0's,
                                      offsetof(r35a_paged_attention_desc, lse_token_stride), and
                                      0.3.0's, offsetof(r35a_paged_attention_desc,
                                      k_scale_page_stride), are accepted */
    r35a_dtype dtype;              /* of Q and O, and of K and V unless kv_dtype says otherwise:
                                      f16, bf16 (f32 on the reference); the 8-bit dtypes are
                                      R35A_ERR_INVALID_ARGUMENT here */

    /* Host-known shape. These fix the plan; run() reads the device data only on the device. */
    int32_t num_seqs;              /* >= 1: entries of seq_lens; query_start_loc has num_seqs + 1 */
    int32_t num_tokens;            /* >= 0: query rows in Q and O, = query_start_loc[num_seqs] */
    int32_t max_query_len;         /* >= 0: upper bound on every sequence's M */
    int32_t max_seq_len;           /* >= 0: upper bound on every seq_lens[s] */
    int32_t num_q_heads;           /* >= 1 */
    int32_t num_kv_heads;          /* >= 1, divides num_q_heads */
    int32_t head_size;             /* 1 .. 1024 (elements per head vector) */
    int32_t page_size;             /* >= 1 tokens per page */
    int32_t num_pages;             /* >= 1 pages in the cache; block_table entries are 0 .. num_pages-1 */
    int32_t block_table_stride;    /* >= ceil(max_seq_len / page_size) entries between sequences' rows */

    int32_t window;                /* sliding window in keys (current one included); 0 = no window */
    float softmax_scale;           /* > 0 and finite, usually 1/sqrt(head_size) */
    float logit_softcap;           /* 0 = off; > 0 applies cap * tanh(s / cap) */
    int32_t use_alibi;             /* 0 or 1; 1 requires args.alibi_slopes ([num_q_heads] float32) */

    /* Strides in elements (see above); each >= 0. Vectors are contiguous. */
    int64_t q_token_stride, q_head_stride;
    int64_t o_token_stride, o_head_stride;
    int64_t k_page_stride, k_head_stride, k_slot_stride;
    int64_t v_page_stride, v_head_stride, v_slot_stride;

    /* Since 0.2 (default: the zeros r35a_paged_attention_desc_init writes). */
    int32_t use_sinks;             /* 0 or 1; 1 requires args.sinks ([num_q_heads] float32) */
    r35a_dtype kv_dtype;           /* of K and V: 0 = dtype (the default); dtype itself; or the
                                      8-bit R35A_DTYPE_FP8_E4M3 / R35A_DTYPE_INT8, which require
                                      args.k_scale and args.v_scale. Another 16/32-bit dtype than
                                      dtype is R35A_ERR_INVALID_ARGUMENT */
    int32_t kv_scale_per_head;     /* an r35a_kv_scale_granularity, the layout of k_scale and
                                      v_scale of an 8-bit cache: per tensor (0), per kv head (1), per
                                      token and kv head (2, since 0.4: a struct of 0.4's size, which
                                      has its strides). Must be 0 for a 16/32-bit KV cache */

    /* Since 0.3 (default: the zeros of a 0.2.0 caller; r35a_paged_attention_desc_init writes
     * use_lse 0 and the contiguous strides num_q_heads, 1). */
    int64_t lse_token_stride;      /* float32 elements between tokens' LSE rows, >= 0 */
    int64_t lse_head_stride;       /* float32 elements between heads' LSE, >= 0 */
    int32_t use_lse;               /* 0 or 1; 1 requires args.lse and writes each row's LSE (see
                                      "Softmax LSE" above: which kernels write it) */

    /* Since 0.4 (default: the zeros of a 0.3.0 caller; r35a_paged_attention_desc_init writes the
     * contiguous [num_pages][page_size][num_kv_heads] strides page_size * num_kv_heads,
     * num_kv_heads, 1). Float32 elements, each >= 0 (checked whatever the granularity); read only
     * with kv_scale_per_head = R35A_KV_SCALE_PER_TOKEN_HEAD (see "8-bit KV cache" above). */
    int64_t k_scale_page_stride, k_scale_slot_stride, k_scale_head_stride;
    int64_t v_scale_page_stride, v_scale_slot_stride, v_scale_head_stride;
} r35a_paged_attention_desc;

typedef struct r35a_paged_attention_args {
    size_t struct_size;            /* sizeof(r35a_paged_attention_args); 0.1.0's size,
                                      offsetof(r35a_paged_attention_args, sinks), and 0.2.0's,
                                      offsetof(r35a_paged_attention_args, lse), are accepted */
    const void *q;                 /* query rows, dtype */
    const void *k_cache;           /* kv_dtype (dtype by default) */
    const void *v_cache;           /* kv_dtype (dtype by default) */
    void *out;                     /* output rows, dtype; may not alias the inputs */
    const int32_t *seq_lens;       /* [num_seqs], each 0 .. max_seq_len */
    const int32_t *query_start_loc;/* [num_seqs + 1], non-decreasing, [0] = 0, [num_seqs] = num_tokens */
    const int32_t *block_table;    /* [num_seqs * block_table_stride] page indices */
    const float *alibi_slopes;     /* [num_q_heads] when use_alibi, else must be NULL */
    /* Since 0.2 (default NULL). Like the metadata, these live where the tensors live (device
     * memory on a GPU context, so a captured graph replays with their current contents). */
    const float *sinks;            /* [num_q_heads] raw sink logits when use_sinks, else NULL */
    const float *k_scale;          /* 8-bit KV: [1], [num_kv_heads] or per (page, slot, kv head)
                                      (kv_scale_per_head), each finite and > 0; must be NULL for a
                                      16/32-bit KV cache.
                                      Values are checked on the reference backend only
                                      (R35A_ERR_INVALID_DATA); on a GPU another value gives an
                                      unspecified output, never an out-of-bounds access */
    const float *v_scale;          /* likewise for V */
    /* Since 0.3 (default NULL); where the tensors live. */
    float *lse;                    /* use_lse: float32 LSE per row (desc's lse strides), else NULL;
                                      may not alias the other buffers */
} r35a_paged_attention_args;

/* Fills *desc with a contiguous HND layout for the given shape: defaults strides, softmax_scale =
 * 1/sqrt(head_size), block_table_stride = ceil(max_seq_len / page_size), no window, no softcap,
 * no ALiBi, no sinks, kv_dtype 0 (= dtype), no LSE (its strides contiguous: [num_tokens][num_q_heads]),
 * per-tensor KV scales (the per-token-head scale strides contiguous: [num_pages][page_size]
 * [num_kv_heads]). For an 8-bit KV cache set kv_dtype afterwards: the
 * default strides count elements, so they stay right. */
R35A_API void r35a_paged_attention_desc_init(r35a_paged_attention_desc *desc, r35a_dtype dtype,
                                             int32_t num_seqs, int32_t num_tokens,
                                             int32_t max_query_len, int32_t max_seq_len,
                                             int32_t num_q_heads, int32_t num_kv_heads,
                                             int32_t head_size, int32_t page_size, int32_t num_pages);

/* Validates desc and chooses an implementation. *plan is NULL on failure. */
R35A_API r35a_status r35a_paged_attention_plan(r35a_context *context,
                                               const r35a_paged_attention_desc *desc,
                                               r35a_plan **plan);

/* Runs a plan made by r35a_paged_attention_plan() on the same context. workspace may be NULL only
 * when the plan's workspace_bytes is 0. stream is a hipStream_t / CUstream (NULL = the default
 * stream) on GPU contexts and ignored on the reference. GPU runs are asynchronous. */
R35A_API r35a_status r35a_paged_attention_run(r35a_context *context, const r35a_plan *plan,
                                              const r35a_paged_attention_args *args,
                                              void *workspace, size_t workspace_bytes, void *stream);

/* ---------------------------------------------------------------------------------------------
 * Varlen attention: encoder (non-causal) or causal self-attention over packed segments.
 *
 * Segment s covers tokens cu_seqlens[s] .. cu_seqlens[s+1]-1. In a non-causal call token i of a
 * segment sees every key of its segment; in a causal call it sees the segment's keys 0 .. i.
 * Q row for (token t, head h) starts at q + t * q_token_stride + h * q_head_stride; likewise
 * K and V (kv head h / (num_q_heads / num_kv_heads)) and O. A fused qkv buffer
 * [tokens][3][heads][D] is read in place with q = qkv, k = qkv + heads*D, v = qkv + 2*heads*D and
 * token strides 3*heads*D. Empty segments are allowed and write nothing.
 *
 * On a GPU context a call is served by a WMMA encoder kernel when it is non-causal, has
 * num_q_heads == num_kv_heads, dtype f16 or bf16, no softcap, no sinks, a head size built for the
 * dtype (variants/variants.def; the fallback_reason lists them when none is), every stride a
 * multiple of 8 elements and token strides of Q, K and V
 * below 2^24 elements; otherwise by the portable kernel, and the plan's fallback_reason says why.
 * The encoder runs ONE launch for all segments, planned on the host from num_segments, max_seqlen
 * and num_q_heads only: cu_seqlens is read on the device, never on the host, so a run can be
 * captured in a HIP graph. max_seqlen must bound every segment's length: a longer segment is bad
 * device data (all its rows are written as NaN and it is recorded, see "Bad device data"). A run
 * whose q, k, v or out pointer is not 16-byte aligned
 * runs the portable kernel for that run (logged with R35A_LOG=1).
 * ------------------------------------------------------------------------------------------- */

typedef struct r35a_varlen_attention_desc {
    size_t struct_size;            /* sizeof(r35a_varlen_attention_desc); 0.1.0's size,
                                      offsetof(r35a_varlen_attention_desc, use_sinks), and 0.2.0's,
                                      offsetof(r35a_varlen_attention_desc, lse_token_stride), are
                                      accepted */
    r35a_dtype dtype;              /* of Q, K, V and O alike: f16, bf16 (f32 on the reference) */
    int32_t num_segments;          /* >= 1; cu_seqlens has num_segments + 1 entries */
    int32_t num_tokens;            /* >= 0: = cu_seqlens[num_segments] */
    int32_t max_seqlen;            /* >= 0: host-known upper bound on every segment's length */
    int32_t num_q_heads;           /* >= 1 */
    int32_t num_kv_heads;          /* >= 1, divides num_q_heads */
    int32_t head_size;             /* 1 .. 1024 */
    int32_t causal;                /* 0 (encoder) or 1 */
    float softmax_scale;           /* > 0 and finite */
    float logit_softcap;           /* 0 = off */
    /* Strides in elements; each >= 0. Vectors are contiguous. */
    int64_t q_token_stride, q_head_stride;
    int64_t k_token_stride, k_head_stride;
    int64_t v_token_stride, v_head_stride;
    int64_t o_token_stride, o_head_stride;
    /* Since 0.2 (default 0). */
    int32_t use_sinks;             /* 0 or 1; 1 requires args.sinks ([num_q_heads] float32) */
    /* Since 0.3 (default: the zeros of a 0.2.0 caller; r35a_varlen_attention_desc_init writes
     * use_lse 0 and the contiguous strides num_q_heads, 1). */
    int64_t lse_token_stride;      /* float32 elements between tokens' LSE rows, >= 0 */
    int64_t lse_head_stride;       /* float32 elements between heads' LSE, >= 0 */
    int32_t use_lse;               /* 0 or 1; 1 requires args.lse (see "Softmax LSE" above: which
                                      kernels write it) */
} r35a_varlen_attention_desc;

typedef struct r35a_varlen_attention_args {
    size_t struct_size;            /* sizeof(r35a_varlen_attention_args); 0.1.0's size,
                                      offsetof(r35a_varlen_attention_args, sinks), and 0.2.0's,
                                      offsetof(r35a_varlen_attention_args, lse), are accepted */
    const void *q, *k, *v;         /* dtype */
    void *out;                     /* dtype; may not alias the inputs */
    const int32_t *cu_seqlens;     /* [num_segments + 1], non-decreasing, [0] = 0 */
    /* Since 0.2 (default NULL); where the tensors live. */
    const float *sinks;            /* [num_q_heads] raw sink logits when use_sinks, else NULL */
    /* Since 0.3 (default NULL); where the tensors live. */
    float *lse;                    /* use_lse: float32 LSE per row (desc's lse strides), else NULL */
} r35a_varlen_attention_args;

/* Fills *desc for separate contiguous [tokens][heads][D] Q, K, V and O buffers, non-causal, no
 * sinks, no LSE (its strides contiguous: [num_tokens][num_q_heads]). */
R35A_API void r35a_varlen_attention_desc_init(r35a_varlen_attention_desc *desc, r35a_dtype dtype,
                                              int32_t num_segments, int32_t num_tokens,
                                              int32_t max_seqlen, int32_t num_q_heads,
                                              int32_t num_kv_heads, int32_t head_size);

R35A_API r35a_status r35a_varlen_attention_plan(r35a_context *context,
                                                const r35a_varlen_attention_desc *desc,
                                                r35a_plan **plan);

R35A_API r35a_status r35a_varlen_attention_run(r35a_context *context, const r35a_plan *plan,
                                               const r35a_varlen_attention_args *args,
                                               void *workspace, size_t workspace_bytes, void *stream);

/* ---------------------------------------------------------------------------------------------
 * Merging partial states (since 0.3): N partial attention results of the same rows -> one.
 *
 * Part i of row (token t, head h) is (O_i, LSE_i): the output and the softmax LSE of one attention
 * call over a subset of the row's keys (use_lse = 1 above). The merge writes
 *     LSE = log sum_i exp(LSE_i),   O = sum_i w_i O_i,   w_i = exp(LSE_i - LSE),
 * computed in fp32 against m = max_i LSE_i. A part whose LSE_i is -inf weighs nothing and its O_i
 * is not read (it may hold anything); a row whose parts are all -inf gives O = 0 and LSE = -inf; a
 * NaN or +inf LSE_i, or a NaN in a read O_i, makes the row NaN (never a plausible value).
 *
 * Layout: one strided tensor for all parts (graph-capture friendly: one pointer, no host array):
 *     O_i of row (t, h) starts at parts_o + i * part_stride + t * part_token_stride + h * part_head_stride
 *     LSE_i            is at   parts_lse[i * lse_part_stride + t * lse_token_stride + h * lse_head_stride]
 * O vectors are contiguous (D elements). Partial O's have the op's dtype, as the attention ops write
 * them (f16/bf16; f32 on the reference); LSEs are float32. The output O (dtype) and the optional
 * output LSE (float32) use the out_* strides; they may not alias the parts.
 *
 * Sharding a paged call so that the shards merged equal the unsharded call (context parallelism,
 * cascade attention). A shard is a paged call over a range of a sequence's pages: for key range
 * [a, b) of sequence s (a a multiple of page_size), its block_table row is the unsharded row's
 * entries a/page_size .. ceil(b/page_size)-1 and its seq_lens entry is b - a; each shard runs with
 * use_lse = 1, into its own part. The shard sees key j' = j - a and places its M query tokens at
 * positions (b - a) - M .. (b - a) - 1, so it reproduces the unsharded rows exactly when:
 *   - the shard holding the sequence's last keys ends at b = L (the query tokens stay at the end,
 *     so causality, the window and ALiBi are the unsharded ones there);
 *   - every other shard is seen whole by every query row: decode (M = 1 per sequence), or, for
 *     M > 1, one shard sequence per query token (the same block_table row and seq_len b - a,
 *     M = 1 each: its keys all precede position L - M);
 *   - windows: a shard other than the last one reproduces the window only when no row's window
 *     starts inside it (pass window = 0 to the shards wholly inside every row's window and leave
 *     out the shards wholly before it); a window edge inside an earlier shard is not expressible;
 *   - ALiBi: in a shard ending at b < L, the logits of a query at unsharded position p are all
 *     shifted by slopes[h] * (p + 1 - b) (decode: slopes[h] * (L - b)), so its O is exact and its
 *     LSE is larger by exactly that: subtract it before merging;
 *   - sinks belong to exactly one shard: pass use_sinks = 1 on one shard only; with ALiBi, on the
 *     shard ending at L (the correction above would shift a sink logit it does not apply to).
 * The API has no per-sequence key-position offset, which would express any shard of a causal,
 * windowed or ALiBi call directly; the rules above are what the present fields express.
 *
 * On a GPU context the merge runs one launch of the portable merge kernel merge_states_<dtype>
 * (grid {num_tokens, num_heads, 1}, from host-known values only: graph-capture safe; no workspace).
 * ------------------------------------------------------------------------------------------- */

typedef struct r35a_merge_states_desc {
    size_t struct_size;            /* sizeof(r35a_merge_states_desc) */
    r35a_dtype dtype;              /* of the partial O's and the output O: f16, bf16 (f32 on the
                                      reference) */
    int32_t num_parts;             /* N >= 1 */
    int32_t num_tokens;            /* >= 0 */
    int32_t num_heads;             /* >= 1 */
    int32_t head_size;             /* 1 .. 1024 */
    int32_t use_out_lse;           /* 0 or 1; 1 requires args.out_lse */
    /* Strides in elements (dtype for O, float32 for LSE); each >= 0. */
    int64_t part_stride, part_token_stride, part_head_stride;
    int64_t lse_part_stride, lse_token_stride, lse_head_stride;
    int64_t o_token_stride, o_head_stride;
    int64_t out_lse_token_stride, out_lse_head_stride;
} r35a_merge_states_desc;

typedef struct r35a_merge_states_args {
    size_t struct_size;            /* sizeof(r35a_merge_states_args) */
    const void *parts_o;           /* dtype, [num_parts][num_tokens][num_heads][head_size] strided */
    const float *parts_lse;        /* [num_parts][num_tokens][num_heads] strided */
    void *out;                     /* dtype, [num_tokens][num_heads][head_size] strided */
    float *out_lse;                /* use_out_lse: [num_tokens][num_heads] strided; else NULL */
} r35a_merge_states_args;

/* Fills *desc for contiguous parts [num_parts][num_tokens][num_heads][head_size], part LSEs
 * [num_parts][num_tokens][num_heads], output [num_tokens][num_heads][head_size] and output LSE
 * [num_tokens][num_heads], use_out_lse 0. Since 0.3. */
R35A_API void r35a_merge_states_desc_init(r35a_merge_states_desc *desc, r35a_dtype dtype, int32_t num_parts,
                                          int32_t num_tokens, int32_t num_heads, int32_t head_size);

/* Validates desc and plans the merge. *plan is NULL on failure. Since 0.3. */
R35A_API r35a_status r35a_merge_states_plan(r35a_context *context, const r35a_merge_states_desc *desc,
                                            r35a_plan **plan);

/* Runs a merge plan (workspace: none is needed, NULL and 0 are fine). Since 0.3. */
R35A_API r35a_status r35a_merge_states_run(r35a_context *context, const r35a_plan *plan,
                                           const r35a_merge_states_args *args, void *workspace,
                                           size_t workspace_bytes, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* RDNA35ATTN_H */
