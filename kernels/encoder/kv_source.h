/*
 * kv_source.h - where the encoder body's rows come from (kernels/encoder/encoder.hip): the K/V
 * SOURCE policies the staging policies (kv_stage_regs.h, kv_stage_async.h) read key rows through,
 * and what the body needs of an item besides (its Q and O rows, its query and key counts, the causal
 * offset, the metadata check).
 *
 *   varlen_source   a segment of a varlen call (encoder_args.h): Q, K, V rows of tokens t0 .. t1-1,
 *                   qlen = klen = t1 - t0, causal offset 0 (row i sees keys 0 .. i with causal).
 *   paged_source    a sequence of a paged call (prefill_args.h) and one kv head: the M query tokens
 *                   from query_start_loc[s] of its G = kv_group query heads packed as M x G rows
 *                   (row r: token r / G, query head g G + r % G), L keys through the block table,
 *                   causal offset L - M (row r sees keys 0 .. L - M + r / G).
 *
 * Both offer (C: the kernel's encoder_cfg):
 *   open(s, xb, h, half, gtid)      checks the item's metadata (device_error.h) and sets qlen, klen,
 *                                   coff; false: the group has nothing to do (bad metadata: its NaN
 *                                   rows written and recorded)
 *   bind(h, gtid)                   what the item needs of head h (varlen: query head h, its kv head's
 *                                   K/V bases; paged: kv head h)
 *   pos(r)                          row r's position: the last key it sees with causal (coff + r, or
 *                                   coff + r / G packed)
 *   PACKED                          rows are (token, head) pairs: q_row(r) / o_row(r) give each row's
 *                                   Q and O row (else q_rows(h) / o_rows(h) give row 0's, and row r
 *                                   is r token strides further), row_head(r) its query head
 *   FEATURES                        the args carry softcap, sinks and the LSE output (both sources);
 *                                   row_token(r) / row_head(r): row r's token and query head
 *   WINDOW_ALIBI                    and a window and ALiBi (the paged source, prefill_args.h); klo,
 *                                   the first key the group reads (its first row's window), set by
 *                                   the body: keys below it are neither read nor looked up
 *                                   (block.first(): the block's first such row)
 *   block<C> at<C>(key0)            the rows of the K/V block starting at key key0 (a multiple of 16):
 *       k_at(key, extra), v_at(key, extra)   byte address of key row key0 + key (< klen) plus extra
 *                                            (a 32-bit offset within the row); a paged block also
 *       k_row(jc, next, key, extra), v_row   the same with the key's sub-tile given (jc, or jc + 1)
 *       CONTIGUOUS: rows are stride bytes apart from k_base / v_base (the varlen source), which
 *       kv_stage_async.h copies with one multiply-add per row
 * A paged block reads one table entry per 16-key sub-tile (a page size that is a multiple of 16 never
 * splits a sub-tile); entries of sub-tiles at or past klen are not read. An entry outside
 * 0..num_pages-1 is never dereferenced: page 0 stands in; scan_pages, after the key loop, sets `bad`
 * (the same in every wave), which the body turns into NaN rows and a device error record. The paged source's
 * functions are forced inline (nvcc otherwise passes its blocks through local memory).
 */
#ifndef R35A_ENCODER_KV_SOURCE_H
#define R35A_ENCODER_KV_SOURCE_H

#include "common/device.h"
#include "common/device_error.h"
#include "encoder/encoder_args.h"
#include "encoder/prefill_args.h"

namespace r35a {
namespace {   /* internal linkage, as the kernel body's lambdas have */

/* Rows [t0, t1) of head h of O as NaN (a bad item's rows; the error path only), by the GT threads of
 * a group. */
template <class E, int D, int GT>
R35A_DEV void nan_rows(void *out, i64 o_token_stride, i64 o_head_stride, int t0, int t1, int h, int gtid) {
    const u16 nan = E::from_f32(quiet_nan());
    u16 *const og = (u16 *)out + (i64)t0 * o_token_stride + (i64)h * o_head_stride;
    for (i64 idx = gtid; idx < (i64)(t1 - t0) * D; idx += GT)
        store_u16(og + (idx / D) * o_token_stride + idx % D, nan);
}

/* The LSE of rows [t0, t1) of head h as NaN (a bad item's rows, with the LSE output; the error path). */
template <int GT>
R35A_DEV void nan_lse(float *lse, i64 lse_token_stride, i64 lse_head_stride, int t0, int t1, int h, int gtid) {
    if (!lse)
        return;
    for (int t = t0 + gtid; t < t1; t += GT) store_f32(lse + (i64)t * lse_token_stride + (i64)h * lse_head_stride, quiet_nan());
}

/* ---- varlen: a segment's contiguous rows ---- */
struct varlen_source {
    typedef r35a_encoder_args args;
    static constexpr bool PAGED = false, PACKED = false, FEATURES = true, WINDOW_ALIBI = false;
    static constexpr int klo = 0;
    int hq;                                           /* the item's query head (bind) */
    const r35a_encoder_args &a;
    int t0, qlen, klen;
    static constexpr int coff = 0;                    /* row i sees keys 0 .. i (causal) */
    const char *kg, *vg;
    bool bad;                                         /* never set: no block table */
    R35A_ENC_FN explicit varlen_source(const r35a_encoder_args &args_) : a(args_) {}

    R35A_ENC_FN bool causal() const { return a.causal != 0; }
    R35A_ENC_FN int pos(int r) const { return r; }
    /* row r's token and query head (the LSE's row) */
    R35A_ENC_FN int row_token(int r) const { return t0 + r; }
    R35A_ENC_FN int row_head(int) const { return hq; }

    /* A segment whose cu_seqlens entries fail their check (device_error.h): when only its length is
     * wrong (longer than max_seqlen, its range inside 0..num_tokens) the group of its row block 0
     * writes all its rows of head h (and their LSE) as NaN, those past max_seqlen included (no other
     * workgroup has them); thread 0 of head 0 records it. The error path only. */
    template <class E, int D, int GT>
    R35A_ENC_FN void bad_item(u32 code, int s, int h, int t1, int gtid) const {
        if (code == R35A_DEVICE_ERROR_SEGMENT_LEN) {
            nan_rows<E, D, GT>(a.out, a.o_token_stride, a.o_head_stride, t0, t1, h, gtid);
            nan_lse<GT>(a.lse, a.lse_token_stride, a.lse_head_stride, t0, t1, h, gtid);
        }
        if (h == 0 && gtid == 0) report_bad_data(a.error, code, (u32)s);
    }

    /* Item (segment s, row block xb, head h): false when the group has nothing to do. */
    template <class E, int D, int GT>
    R35A_ENC_FN bool open(int s, int xb, int h, int half, int gtid) {
        if (s >= a.num_segments)
            return false;                                /* group-uniform: no barrier is shared with other groups */
        t0 = a.cu_seqlens[s];
        const int t1 = a.cu_seqlens[s + 1];
        /* metadata the host never saw: checked before anything else is read (group-uniform) */
        const u32 code = r35a_varlen_segment_error(s, a.num_segments, t0, t1, a.num_tokens, a.max_seqlen);
        if (code != R35A_DEVICE_ERROR_NONE) {
            if (xb == 0 && half <= 0) bad_item<E, D, GT>(code, s, h, t1, gtid);
            return false;
        }
        qlen = klen = t1 - t0;
        return true;
    }
    /* the item's K/V bases, for query head h (after open) */
    R35A_ENC_FN void bind(int h, int) {
        hq = h;
        const int hk = h / a.kv_group;                   /* GQA: the kv head of query head h */
        kg = (const char *)a.k + 2 * ((i64)t0 * a.k_token_stride + (i64)hk * a.k_head_stride);
        vg = (const char *)a.v + 2 * ((i64)t0 * a.v_token_stride + (i64)hk * a.v_head_stride);
        bad = false;
    }
    /* head h's row of the item's first token in Q and in O */
    R35A_ENC_FN const char *q_rows(int h) const {
        return (const char *)a.q + 2 * ((i64)t0 * a.q_token_stride + (i64)h * a.q_head_stride);
    }
    R35A_ENC_FN u16 *o_rows(int h) const { return (u16 *)a.out + (i64)t0 * a.o_token_stride + (i64)h * a.o_head_stride; }

    template <class C>
    struct block {
        static constexpr bool CONTIGUOUS = true;
        const char *k_base, *v_base;
        const r35a_encoder_args &a;
        R35A_ENC_FN const char *k_at(int key, u32 extra) const { return k_base + ((u32)(2 * key * a.k_token_stride) + extra); }
        R35A_ENC_FN const char *v_at(int key, u32 extra) const { return v_base + ((u32)(2 * key * a.v_token_stride) + extra); }
        R35A_ENC_FN u32 k_stride() const { return (u32)(2 * a.k_token_stride); }
        static constexpr int first() { return 0; }
        R35A_ENC_FN u32 v_stride() const { return (u32)(2 * a.v_token_stride); }
    };
    template <class C>
    R35A_ENC_FN block<C> at(int key0) {
        return block<C>{kg + 2 * (i64)key0 * a.k_token_stride, vg + 2 * (i64)key0 * a.v_token_stride, a};
    }
};

/* ---- paged: a sequence's keys through its block table ---- */
struct paged_source {
    typedef r35a_prefill_args args;
    static constexpr bool PAGED = true, PACKED = true, FEATURES = true, WINDOW_ALIBI = true;
    const r35a_prefill_args &a;
    int seq, t0, qlen, klen, coff;                    /* qlen: the packed rows, M x G */
    int klo;                                          /* the first key the group reads (a window's) */
    int hq0;                                          /* the kv head's first query head */
    bool bad;                                         /* a block-table entry outside the cache was met */
    bool reporter;                                    /* the thread that records it (head 0, thread 0) */
    R35A_MEMBER explicit paged_source(const r35a_prefill_args &args_) : a(args_) {}

    R35A_MEMBER bool causal() const { return true; }
    R35A_MEMBER int pos(int r) const { return coff + r / a.kv_group; }

    /* A sequence whose metadata fails its check: its M rows of the query heads of kv head h (and
     * their LSE) become NaN when its query_start_loc range is sound (the workgroup of row block 0
     * writes them), thread 0 of kv head 0 records it. The error path only. */
    template <class E, int D, int GT>
    R35A_MEMBER void bad_item(u32 code, int s, int h, int q1, int gtid) const {
        if (code != R35A_DEVICE_ERROR_QUERY_START_LOC)
            for (int x = 0; x < a.kv_group; ++x) {
                nan_rows<E, D, GT>(a.out, a.o_token_stride, a.o_head_stride, t0, q1, h * a.kv_group + x, gtid);
                nan_lse<GT>(a.lse, a.lse_token_stride, a.lse_head_stride, t0, q1, h * a.kv_group + x, gtid);
            }
        if (h == 0 && gtid == 0) report_bad_data(a.error, code, (u32)s);
    }

    template <class E, int D, int GT>
    R35A_MEMBER bool open(int s, int xb, int h, int half, int gtid) {
        (void)half;
        if (s >= a.num_seqs)
            return false;
        seq = s;
        t0 = a.query_start_loc[s];
        const int q1 = a.query_start_loc[s + 1];
        const int L = a.seq_lens[s];
        const u32 code = r35a_paged_sequence_error(s, a.num_seqs, t0, q1, L, a.num_tokens, a.max_query_len,
                                                   a.max_seq_len);
        if (code != R35A_DEVICE_ERROR_NONE) {
            if (xb == 0) bad_item<E, D, GT>(code, s, h, q1, gtid);
            return false;
        }
        const int m = q1 - t0;
        qlen = m * a.kv_group;                           /* < 2^31: the planner bounds max_query_len x G */
        klen = L;
        coff = L - m;
        klo = 0;
        return m > a.min_query_len;                      /* else the decode launch's rows */
    }
    R35A_MEMBER void bind(int h, int gtid) {
        hq0 = h * a.kv_group;
        bad = false;
        reporter = h == 0 && gtid == 0;
    }
    /* packed row r's token and query head */
    R35A_MEMBER int row_token(int r) const { return t0 + r / a.kv_group; }
    R35A_MEMBER int row_head(int r) const { return hq0 + r % a.kv_group; }
    /* packed row r's row in Q and in O: token r / G, query head hq0 + r % G */
    R35A_MEMBER const char *q_row(int r) const {
        const int i = r / a.kv_group, x = r - i * a.kv_group;
        return (const char *)a.q + 2 * ((i64)(t0 + i) * a.q_token_stride + (i64)(hq0 + x) * a.q_head_stride);
    }
    R35A_MEMBER u16 *o_row(int r) const {
        const int i = r / a.kv_group, x = r - i * a.kv_group;
        return (u16 *)a.out + (i64)(t0 + i) * a.o_token_stride + (i64)(hq0 + x) * a.o_head_stride;
    }
    /* The rows of a block. Each 16-key sub-tile lies in one page (page sizes are multiples of 16): its
     * table entry gives the page (page 0 in place of an entry outside the cache; entries at or past the
     * keys are not read), its first slot follows from the block's first key. Two forms:
     *   - register staging (gfx11): every sub-tile's row 0 in K and V at once (uniform), and a row's
     *     address from its sub-tile's by a select and a 32-bit offset (k_at, v_at: lane-varying keys);
     *   - asynchronous copies (NVIDIA): the block's NS page indices, read at once when the block is
     *     issued (independent loads, one latency per block), and each row's address formed where it is
     *     copied (k_row, v_row: the copy's pass gives jc; the passes are not unrolled), so no page row
     *     stays live beside the products' registers and no copy waits on a table load of its own.
     * Whether an entry was outside the cache is found after the key loop (scan_pages). */
    template <class C>
    struct block {
        static constexpr bool CONTIGUOUS = false;
        static constexpr int NS = C::KEYS_PER_BLOCK / 16;
        static constexpr bool EAGER = !C::ASYNC;
        const char *kp[EAGER ? NS : 1], *vp[EAGER ? NS : 1];   /* EAGER: each sub-tile's row 0 in K and V */
        int pe[EAGER ? 1 : NS];                       /* else each sub-tile's page */
        int pi0, slot0, nsub;                         /* the first key's page index and slot; sub-tiles below klen */
        int lo;                                       /* the block's first key at or past klo (0 .. KB) */
        const char *kb, *vb;                          /* the kv head's rows in page 0 */
        const int32_t *bt;                            /* the sequence's block-table row */
        const r35a_prefill_args &a;

        R35A_MEMBER const char *pick(const char *const (&p)[EAGER ? NS : 1], int key) const {
            const char *r = p[0];
#pragma unroll
            for (int x = 1; x < NS; ++x)
                if ((key >> 4) == x) r = p[EAGER ? x : 0];
            return r;
        }
        /* (EAGER) the sub-tile's row 0, selected per lane, plus the row's 32-bit offset (slot strides
         * < 2^24 elements) */
        R35A_MEMBER const char *k_at(int key, u32 extra) const {
            return pick(kp, key) + ((u32)(key & 15) * (u32)(2 * a.k_slot_stride) + extra);
        }
        R35A_MEMBER const char *v_at(int key, u32 extra) const {
            return pick(vp, key) + ((u32)(key & 15) * (u32)(2 * a.v_slot_stride) + extra);
        }

        /* sub-tile j's page index in the table and first slot */
        R35A_MEMBER void place(int j, int &pi, int &sl) const {
            pi = pi0;
            sl = slot0;
#pragma unroll
            for (int x = 0; x < NS - 1; ++x)
                if (x < j) {
                    sl += 16;
                    if (sl == a.page_size) {
                        sl = 0;
                        ++pi;
                    }
                }
        }
        R35A_MEMBER int first() const { return lo; }
        /* sub-tile j's page, read from the table (page 0 for an entry outside the cache; none read at
         * or past klen, nor wholly below klo) */
        R35A_MEMBER int page(int pi, int j) const {
            const int entry = j < nsub && 16 * j + 16 > lo ? load_i32_uniform(bt + pi) : 0;
            return r35a_page_index_ok(entry, a.num_pages) ? entry : 0;
        }
        /* key's row with its sub-tile given: jc (a constant where the caller unrolls) or, with next,
         * jc + 1; the page from pe (read when the block was made) */
        R35A_MEMBER const char *row(const char *base, int jc, bool next, int key, u32 extra, i64 page_stride,
                                    i64 slot_stride) const {
            const int j = next && jc + 1 < NS ? jc + 1 : jc;
            int pi, sl, pg = pe[0];
            place(j, pi, sl);
#pragma unroll
            for (int x = 1; x < NS; ++x)
                if (j == x) pg = pe[EAGER ? 0 : x];
            return base + 2 * ((i64)pg * page_stride + (i64)(sl + (key & 15)) * slot_stride) + extra;
        }
        R35A_MEMBER const char *k_row(int jc, bool next, int key, u32 extra) const {
            return row(kb, jc, next, key, extra, a.k_page_stride, a.k_slot_stride);
        }
        R35A_MEMBER const char *v_row(int jc, bool next, int key, u32 extra) const {
            return row(vb, jc, next, key, extra, a.v_page_stride, a.v_slot_stride);
        }
    };
    template <class C>
    R35A_MEMBER block<C> at(int key0) {
        /* the kv head from the grid (block y), not a register held across the products */
        const int g = block_y();
        const int pi = key0 / a.page_size;
        block<C> b{{}, {}, {}, pi, key0 - pi * a.page_size, (klen - key0 + 15) >> 4, imin(imax(klo - key0, 0), C::KEYS_PER_BLOCK),
                   (const char *)a.k_cache + 2 * (i64)g * a.k_head_stride,
                   (const char *)a.v_cache + 2 * (i64)g * a.v_head_stride,
                   a.block_table + (i64)seq * a.block_table_stride, a};
        if constexpr (block<C>::EAGER) {   /* uniform (scalar) arithmetic, once per block */
#pragma unroll
            for (int j = 0; j < block<C>::NS; ++j) {
                int pi, sl;
                b.place(j, pi, sl);
                const int pg = b.page(pi, j);
                b.kp[j] = b.kb + 2 * ((i64)pg * a.k_page_stride + (i64)sl * a.k_slot_stride);
                b.vp[j] = b.vb + 2 * ((i64)pg * a.v_page_stride + (i64)sl * a.v_slot_stride);
            }
        } else {   /* the block's entries, independent loads issued together */
#pragma unroll
            for (int j = 0; j < block<C>::NS; ++j) {
                int pi, sl;
                b.place(j, pi, sl);
                b.pe[j] = b.page(pi, j);
            }
        }
        return b;
    }

    /* After the key loop: whether an entry of the pages holding keys klo .. nkeys - 1 (those the
     * group streamed) lies outside the cache. Each wave's 32 lanes read the entries 32 apart (independent
     * loads, not one dependent scalar load per page) and vote; every wave reaches the same answer.
     * Sets bad (uniform). */
    R35A_MEMBER void scan_pages(int nkeys) {
        const int32_t *const bt = a.block_table + (i64)seq * a.block_table_stride;
        const int n = imin(nkeys, klen), np = (n + a.page_size - 1) / a.page_size;
        bool any = false;
        for (int pi = klo / a.page_size + lane_id(); pi < np; pi += 32)   /* from the first page read */
            any |= !r35a_page_index_ok(load_i32(bt + pi), a.num_pages);
        bad = wave_any(any);
    }
};

} /* namespace */
} /* namespace r35a */

#endif /* R35A_ENCODER_KV_SOURCE_H */
