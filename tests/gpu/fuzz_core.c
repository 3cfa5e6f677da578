/* fuzz_core.c - see fuzz_core.h. */
#define _POSIX_C_SOURCE 200809L
#include "fuzz_core.h"

#include "rel_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- fault classes of bad-data cases ---- */

enum {
    FAULT_NONE,
    FAULT_PAGE_HIGH,       /* a reached block_table entry >= num_pages */
    FAULT_PAGE_NEG,        /* a reached block_table entry < 0 */
    FAULT_SEQ_LEN_HIGH,    /* seq_lens[s] > max_seq_len */
    FAULT_SEQ_LEN_NEG,     /* seq_lens[s] < 0 */
    FAULT_M_ABOVE_L,       /* seq_lens[s] below the sequence's query tokens */
    FAULT_QUERY_LEN,       /* max_query_len below some sequence's query tokens */
    FAULT_QSL_ORDER,       /* query_start_loc[k] < [k-1] */
    FAULT_QSL_FIRST,       /* query_start_loc[0] != 0 */
    FAULT_QSL_LAST,        /* query_start_loc[num_seqs] != num_tokens */
    FAULT_CU_ORDER,        /* cu_seqlens[k] < [k-1] */
    FAULT_CU_FIRST,
    FAULT_CU_LAST,
    FAULT_SEG_LEN,         /* max_seqlen below some segment's length */
    FAULT_COUNT
};

static const char *const k_fault_names[FAULT_COUNT] = {
    "none", "page_high", "page_neg", "seq_len_high", "seq_len_neg", "m_above_l", "query_len",
    "qsl_order", "qsl_first", "qsl_last", "cu_order", "cu_first", "cu_last", "seg_len"};

const char *fuzz_fault_name(int fault) { return fault >= 0 && fault < FAULT_COUNT ? k_fault_names[fault] : "?"; }

static const char *const k_kind_names[FUZZ_KINDS] = {"valid", "non-finite", "bad data", "bad desc"};

/* What a row of the output must hold after the call. */
enum { ROW_REF, ROW_NAN, ROW_NAN_OR_REF, ROW_ANY };

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- one case's state ---- */

typedef struct fuzz_case {
    int index;
    bool paged;
    paged_spec ps;
    varlen_spec vs;
    paged_problem pp;
    varlen_problem vp;
    int kind;
    int fault;
    int bad_seq;                 /* the sequence the fault is in, -1 when several or unknown */
    const char *fields[3];       /* detail prefixes the fault may be reported under */
    bool oracle;                 /* compared with the oracle */
    char what[256];              /* the fault or mutation, for reports */
    uint8_t *row_state;          /* [num_tokens * num_q_heads] ROW_* */
    /* A non-finite value element of a key some rows see: on a decode kernel, and on the encoder
     * kernel's causal rows, the other rows of the sequence (segment) and kv head share the key's
     * tile and may come out non-finite in that element too (rdna35attn.h): tokens
     * [loose_t0, loose_t0 + loose_m), query heads of kv head loose_g, element loose_e (-1: none). */
    int32_t loose_t0, loose_m, loose_g, loose_e;
    bool decode_served;          /* the plan's first launch is a decode variant */
    bool encoder_causal_served;  /* a causal varlen call the encoder kernel serves */
    bool prefill_served;         /* a paged call whose plan names an encoder paged sibling (prefill: M > 8,
                                    every M when it runs alone) */
    bool report_by_call;         /* GPU: learn about the record from the next plan call, not check_device */
} fuzz_case;

static int32_t pick(tu_rng *rng, const int32_t *v, int n) { return v[tu_below(rng, (uint32_t)n)]; }
#define PICK(rng, ...) pick((rng), (const int32_t[]){__VA_ARGS__}, (int)(sizeof((int32_t[]){__VA_ARGS__}) / sizeof(int32_t)))

/* ---- generators ---- */

static int32_t gen_head_size(tu_rng *rng)
{
    if (tu_chance(rng, 0.15))
        return tu_range(rng, 1, 200);
    if (tu_chance(rng, 0.03))
        return PICK(rng, 512, 300, 1000);
    return PICK(rng, 64, 128, 64, 128, 256, 32, 48, 72, 80, 96, 40);
}

/* One random paged problem; returns its oracle cost (paged_spec_cost). */
static double draw_paged(fuzz_case *c, tu_rng *rng)
{
    paged_spec *s = &c->ps;
    const r35a_dtype dt = tu_chance(rng, 0.5) ? R35A_DTYPE_F16 : R35A_DTYPE_BF16;
    const int32_t hkv = PICK(rng, 1, 2, 2, 4, 8), g = PICK(rng, 1, 2, 4, 4, 5, 8);
    const int32_t d = gen_head_size(rng);
    const int32_t page = tu_chance(rng, 0.7) ? PICK(rng, 16, 16, 32, 64) : PICK(rng, 1, 5, 8, 13, 48, 528);
    paged_spec_init(s, dt, hkv * g, hkv, d, page);
    const int32_t nseq = tu_range(rng, 1, 6);
    for (int32_t i = 0; i < nseq; ++i) {
        int32_t L;
        const double u = tu_unit(rng);
        if (u < 0.1)
            L = 0;
        else if (u < 0.6)
            L = tu_range(rng, 1, 80);
        else if (u < 0.95)
            L = tu_range(rng, 1, 400);
        else
            L = tu_range(rng, 500, 2500);
        int32_t M = 0;
        if (L > 0) {
            const double m = tu_unit(rng);
            /* M > 8: a mixed batch's or a prefill's rows (the prefill kernels where they serve the call) */
            M = m < 0.5 ? 1 : m < 0.85 ? tu_range(rng, 2, 8) : m < 0.97 ? tu_range(rng, 9, 24) : tu_range(rng, 25, 160);
            M = M > L ? L : M;
        }
        paged_spec_add_seq(s, L, M);
    }
    if (tu_chance(rng, 0.25))
        s->window = tu_range(rng, 1, 300);
    if (tu_chance(rng, 0.12))
        s->logit_softcap = (float)tu_range(rng, 5, 50);
    s->use_alibi = tu_chance(rng, 0.12);
    if (tu_chance(rng, 0.12)) {
        s->use_sinks = 1;
        s->sink_center = 1.0;
        s->sink_amp = 3.0;
        s->sink_some_neg_inf = tu_chance(rng, 0.5);
    }
    if (tu_chance(rng, 0.12)) {
        s->kv_dtype = tu_chance(rng, 0.5) ? R35A_DTYPE_FP8_E4M3 : R35A_DTYPE_INT8;
        s->kv_scale_per_head = (int32_t)tu_below(rng, 3);   /* per tensor, per kv head, per token and kv head */
        if (s->kv_scale_per_head == R35A_KV_SCALE_PER_TOKEN_HEAD) {
            s->scale_pad = PICK(rng, 0, 1, 3);
            s->scale_decades = tu_chance(rng, 0.3) ? 3.0 : 0.0;
        }
    }
    if (tu_chance(rng, 0.2))
        s->k_layout.nhd = s->v_layout.nhd = true;
    if (tu_chance(rng, 0.2)) {
        s->k_layout.pad[0] = PICK(rng, 0, 8, 3);
        s->v_layout.pad[1] = PICK(rng, 0, 16, 5);
        s->q_head_pad = PICK(rng, 0, 8, 1);
        s->o_token_pad = PICK(rng, 0, 8, 7);
    }
    s->bt_pad = tu_range(rng, 0, 2);
    s->extra_pages = tu_range(rng, 0, 4);
    if (tu_chance(rng, 0.2))
        s->max_query_len_slack = tu_range(rng, 1, 4);
    if (tu_chance(rng, 0.2))
        s->max_seq_len_slack = tu_range(rng, 1, 200);
    s->shuffle_pages = tu_chance(rng, 0.7);
    s->garbage_unreached = tu_chance(rng, 0.6);
    s->defer_oracle = true;
    return paged_spec_cost(s);
}

/* One random varlen problem; returns its oracle cost (varlen_spec_cost). */
static double draw_varlen(fuzz_case *c, tu_rng *rng)
{
    varlen_spec *s = &c->vs;
    const r35a_dtype dt = tu_chance(rng, 0.5) ? R35A_DTYPE_F16 : R35A_DTYPE_BF16;
    const int32_t hkv = PICK(rng, 1, 2, 3, 4), g = tu_chance(rng, 0.6) ? 1 : PICK(rng, 2, 4);
    int32_t d = tu_chance(rng, 0.7) ? PICK(rng, 32, 48, 64, 72, 80, 128) : gen_head_size(rng);
    varlen_spec_init(s, dt, hkv * g, hkv, d);
    const int32_t nseg = tu_range(rng, 1, 6);
    for (int32_t i = 0; i < nseg; ++i)
        varlen_spec_add_segment(s, tu_chance(rng, 0.1) ? 0 : tu_range(rng, 1, tu_chance(rng, 0.8) ? 150 : 600));
    s->causal = tu_chance(rng, 0.3);
    if (tu_chance(rng, 0.1))
        s->logit_softcap = (float)tu_range(rng, 5, 50);
    if (tu_chance(rng, 0.1)) {
        s->use_sinks = 1;
        s->sink_center = 0.5;
        s->sink_amp = 3.0;
    }
    if (tu_chance(rng, 0.2)) {
        s->layout = VARLEN_FUSED;
        s->token_pad[0] = PICK(rng, 0, 8, 5);
    } else if (tu_chance(rng, 0.2)) {
        for (int i = 0; i < 4; ++i) {
            s->token_pad[i] = PICK(rng, 0, 8, 3);
            s->head_pad[i] = PICK(rng, 0, 8, 1);
        }
    }
    if (tu_chance(rng, 0.2))
        s->max_seqlen_slack = tu_range(rng, 1, 40);
    s->defer_oracle = true;
    return varlen_spec_cost(s);
}

/* Draws problems until one costs at most env->max_cost. After DRAW_ATTEMPTS misses it takes the
 * cheapest of them, drawn again from the generator state it started from. (Taking the last draw instead
 * once let a varlen case 4000x over the emulator's cap through: 15 minutes on the portable kernel.) */
enum { DRAW_ATTEMPTS = 50 };
/* False when every attempt was over the cap (the cheapest one was taken): fuzz_totals.over_cost. */
static bool draw_within_cost(double (*draw)(fuzz_case *, tu_rng *), fuzz_case *c, tu_rng *rng, const fuzz_env *env)
{
    tu_rng cheapest_start = *rng;
    double cheapest = INFINITY;
    for (int attempt = 0; attempt < DRAW_ATTEMPTS; ++attempt) {
        const tu_rng start = *rng;
        const double cost = draw(c, rng);
        if (cost <= (double)env->max_cost)
            return true;
        if (cost < cheapest) {
            cheapest = cost;
            cheapest_start = start;
        }
    }
    const tu_rng after = *rng;
    *rng = cheapest_start;
    draw(c, rng);
    *rng = after;
    return false;
}

static bool gen_paged(fuzz_case *c, tu_rng *rng, const fuzz_env *env) { return draw_within_cost(draw_paged, c, rng, env); }
static bool gen_varlen(fuzz_case *c, tu_rng *rng, const fuzz_env *env) { return draw_within_cost(draw_varlen, c, rng, env); }

/* ---- shapes of a built problem ---- */

static int32_t num_seqs_of(const fuzz_case *c) { return c->paged ? c->ps.num_seqs : c->vs.num_segments; }
static int32_t num_tokens_of(const fuzz_case *c) { return c->paged ? c->pp.num_tokens : c->vp.num_tokens; }
static int32_t heads_of(const fuzz_case *c) { return c->paged ? c->ps.num_q_heads : c->vs.num_q_heads; }
static int32_t head_size_of(const fuzz_case *c) { return c->paged ? c->ps.head_size : c->vs.head_size; }
static r35a_dtype dtype_of(const fuzz_case *c) { return c->paged ? c->ps.dtype : c->vs.dtype; }
static int32_t *starts_of(fuzz_case *c) { return c->paged ? c->pp.query_start_loc : c->vp.cu_seqlens; }
/* Query rows of sequence (segment) s: [start, start + count). */
static int32_t rows_of(const fuzz_case *c, int32_t s) { return c->paged ? c->ps.q_len[s] : c->vs.seg_len[s]; }

static void set_rows(fuzz_case *c, int32_t s, uint8_t state)
{
    const int32_t first = starts_of(c)[s], hq = heads_of(c);
    for (int32_t t = first; t < first + rows_of(c, s); ++t)
        for (int32_t h = 0; h < hq; ++h)
            c->row_state[(size_t)t * (size_t)hq + (size_t)h] = state;
}

/* The first key a query row at position p of the paged spec sees. */
static int32_t first_key(const paged_spec *s, int32_t p)
{
    return s->window > 0 && p - s->window + 1 > 0 ? p - s->window + 1 : 0;
}

/* ---- bad data ---- */

/* A sequence with at least one query row, or -1. */
static int32_t seq_with_rows(const fuzz_case *c, tu_rng *rng)
{
    int32_t cand[H_MAX_SEGMENTS], n = 0;
    for (int32_t s = 0; s < num_seqs_of(c); ++s)
        if (rows_of(c, s) > 0)
            cand[n++] = s;
    return n ? cand[tu_below(rng, (uint32_t)n)] : -1;
}

/* Breaks one metadata entry (host copies: the oracle ran on the valid ones) and sets what the call
 * must do. Returns false when the problem has nothing this fault can break. */
static bool apply_fault(fuzz_case *c, int fault, tu_rng *rng)
{
    const int32_t n = num_seqs_of(c), T = num_tokens_of(c);
    int32_t *starts = starts_of(c);
    c->fault = fault;
    c->bad_seq = -1;
    switch (fault) {
    case FAULT_PAGE_HIGH:
    case FAULT_PAGE_NEG: {
        const int32_t s = seq_with_rows(c, rng);
        if (s < 0)
            return false;
        const paged_spec *ps = &c->ps;
        const int32_t L = ps->seq_len[s], M = ps->q_len[s], B = ps->page_size;
        const int32_t lo = first_key(ps, L - M), lp = tu_range(rng, lo / B, (L - 1) / B);
        int32_t *entry = c->pp.block_table + (size_t)s * (size_t)c->pp.bt_stride + lp;
        *entry = fault == FAULT_PAGE_HIGH ? c->pp.num_pages + (tu_chance(rng, 0.5) ? 0 : tu_range(rng, 1, 1 << 20))
                                          : (tu_chance(rng, 0.3) ? INT32_MIN : -tu_range(rng, 1, 1000));
        snprintf(c->what, sizeof c->what, "block_table[%d][%d] = %d (num_pages %d)", (int)s, (int)lp, (int)*entry,
                 (int)c->pp.num_pages);
        c->bad_seq = s;
        c->fields[0] = "paged_attention_args.block_table";
        /* rows that reach the page must be NaN; the sequence's others may be */
        set_rows(c, s, ROW_NAN_OR_REF);
        for (int32_t i = 0; i < M; ++i) {
            const int32_t p = L - M + i;
            if (first_key(ps, p) <= (lp + 1) * B - 1 && p >= lp * B)
                for (int32_t h = 0; h < ps->num_q_heads; ++h)
                    c->row_state[(size_t)(starts[s] + i) * (size_t)ps->num_q_heads + (size_t)h] = ROW_NAN;
        }
        return true;
    }
    case FAULT_SEQ_LEN_HIGH:
    case FAULT_SEQ_LEN_NEG: {
        const int32_t s = tu_range(rng, 0, n - 1);
        int32_t *L = &c->pp.seq_lens[s];
        *L = fault == FAULT_SEQ_LEN_HIGH
                 ? (tu_chance(rng, 0.2) ? INT32_MAX : c->pp.desc.max_seq_len + tu_range(rng, 1, 3000))
                 : (tu_chance(rng, 0.2) ? INT32_MIN : -tu_range(rng, 1, 100));
        snprintf(c->what, sizeof c->what, "seq_lens[%d] = %d (max_seq_len %d)", (int)s, (int)*L,
                 (int)c->pp.desc.max_seq_len);
        c->bad_seq = s;
        c->fields[0] = "paged_attention_args.seq_lens";
        set_rows(c, s, ROW_NAN);
        return true;
    }
    case FAULT_M_ABOVE_L: {
        const int32_t s = seq_with_rows(c, rng);
        if (s < 0)
            return false;
        c->pp.seq_lens[s] = tu_range(rng, 0, c->ps.q_len[s] - 1);
        snprintf(c->what, sizeof c->what, "seq_lens[%d] = %d below its %d query tokens", (int)s,
                 (int)c->pp.seq_lens[s], (int)c->ps.q_len[s]);
        c->bad_seq = s;
        c->fields[0] = "paged_attention_args.seq_lens";
        set_rows(c, s, ROW_NAN);
        return true;
    }
    case FAULT_QUERY_LEN: {
        int32_t max_m = 0, over = 0, which = -1;
        for (int32_t s = 0; s < n; ++s)
            max_m = c->ps.q_len[s] > max_m ? c->ps.q_len[s] : max_m;
        const int32_t limit = max_m - 1;
        if (max_m < 1 || (int64_t)T > (int64_t)n * limit)
            return false; /* the descriptor would be invalid (num_tokens > num_seqs x max_query_len) */
        c->pp.desc.max_query_len = limit;
        for (int32_t s = 0; s < n; ++s)
            if (c->ps.q_len[s] > limit) {
                set_rows(c, s, ROW_NAN);
                ++over;
                which = s;
            }
        snprintf(c->what, sizeof c->what, "max_query_len %d below %d sequence(s)' query tokens (%d)", (int)limit,
                 (int)over, (int)max_m);
        c->bad_seq = over == 1 ? which : -1;
        c->fields[0] = "paged_attention_args.query_start_loc";
        return true;
    }
    case FAULT_SEG_LEN: {
        int32_t max_len = 0, over = 0, which = -1;
        for (int32_t s = 0; s < n; ++s)
            max_len = c->vs.seg_len[s] > max_len ? c->vs.seg_len[s] : max_len;
        const int32_t limit = max_len - 1;
        if (max_len < 1 || (int64_t)T > (int64_t)n * limit)
            return false;
        c->vp.desc.max_seqlen = limit;
        for (int32_t s = 0; s < n; ++s)
            if (c->vs.seg_len[s] > limit) {
                set_rows(c, s, ROW_NAN);
                ++over;
                which = s;
            }
        snprintf(c->what, sizeof c->what, "max_seqlen %d below %d segment(s)' length (%d)", (int)limit, (int)over,
                 (int)max_len);
        c->bad_seq = over == 1 ? which : -1;
        c->fields[0] = "varlen_attention_args.cu_seqlens";
        return true;
    }
    case FAULT_QSL_ORDER:
    case FAULT_QSL_FIRST:
    case FAULT_QSL_LAST:
    case FAULT_CU_ORDER:
    case FAULT_CU_FIRST:
    case FAULT_CU_LAST: {
        /* which rows are NaN depends on where each row's owner search lands: only the record, the
         * bounds and the guards are checked */
        int32_t k;
        if (fault == FAULT_QSL_ORDER || fault == FAULT_CU_ORDER) {
            if (n < 2)
                return false;
            k = tu_range(rng, 1, n - 1);
            starts[k] = starts[k - 1] - tu_range(rng, 1, 50);
        } else if (fault == FAULT_QSL_FIRST || fault == FAULT_CU_FIRST) {
            k = 0;
            starts[0] = tu_chance(rng, 0.5) ? -tu_range(rng, 1, 50) : tu_range(rng, 1, 50);
        } else {
            k = n;
            starts[n] = tu_chance(rng, 0.5) || T == 0 ? T + tu_range(rng, 1, 50) : tu_range(rng, 0, T - 1);
        }
        snprintf(c->what, sizeof c->what, "%s[%d] = %d (num_tokens %d)", c->paged ? "query_start_loc" : "cu_seqlens",
                 (int)k, (int)starts[k], (int)T);
        if (c->paged) {
            c->fields[0] = "paged_attention_args.query_start_loc";
            c->fields[1] = "paged_attention_args.seq_lens"; /* a row count above the sequence's length */
        } else {
            c->fields[0] = "varlen_attention_args.cu_seqlens";
        }
        memset(c->row_state, ROW_ANY, (size_t)T * (size_t)heads_of(c));
        return true;
    }
    }
    return false;
}

/* ---- non-finite values ---- */

static void store_value(r35a_dtype dt, void *base, size_t i, double v) { tu_store(dt, base, i, v); }

/* One NaN or +-Inf in a reached element of Q, K, V or a sink of a valid problem (the oracle then
 * runs on it). Returns false when nothing is reached. */
static bool apply_nonfinite(fuzz_case *c, tu_rng *rng)
{
    const int32_t s = seq_with_rows(c, rng);
    if (s < 0)
        return false;
    const double values[3] = {NAN, INFINITY, -INFINITY};
    const double v = values[tu_below(rng, 3)];
    const int32_t D = head_size_of(c), e = tu_range(rng, 0, D - 1);
    const int where = (int)tu_below(rng, 4); /* 0 Q, 1 K, 2 V, 3 sink */
    const char *vname = isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf";
    if (c->paged) {
        paged_spec *ps = &c->ps;
        paged_problem *p = &c->pp;
        const int32_t L = ps->seq_len[s], M = ps->q_len[s], i = tu_range(rng, 0, M - 1);
        const int32_t t = p->query_start_loc[s] + i, h = tu_range(rng, 0, ps->num_q_heads - 1);
        if (where == 3 && p->sinks) {
            p->sinks[h] = (float)v;
            snprintf(c->what, sizeof c->what, "sinks[%d] = %s", (int)h, vname);
            return true;
        }
        if (where == 0 || ps->kv_dtype != 0) { /* 8-bit caches have no Inf (fp8's NaN code: test_gpu_cuda) */
            store_value(ps->dtype, p->q, (size_t)t * (size_t)p->desc.q_token_stride +
                                             (size_t)h * (size_t)p->desc.q_head_stride + (size_t)e, v);
            snprintf(c->what, sizeof c->what, "q[token %d][head %d][%d] = %s", (int)t, (int)h, (int)e, vname);
            return true;
        }
        /* a key the sequence's rows reach: between the first row's first key and L - 1 */
        const int32_t j = tu_range(rng, first_key(ps, L - M), L - 1), g = tu_range(rng, 0, ps->num_kv_heads - 1);
        const int64_t page = p->block_table[(size_t)s * (size_t)p->bt_stride + (size_t)(j / ps->page_size)];
        const int32_t slot = j % ps->page_size;
        const bool k = where == 1;
        const size_t at = (size_t)(page * (k ? p->desc.k_page_stride : p->desc.v_page_stride) +
                                   g * (k ? p->desc.k_head_stride : p->desc.v_head_stride) +
                                   slot * (k ? p->desc.k_slot_stride : p->desc.v_slot_stride) + e);
        store_value(ps->dtype, k ? p->k : p->v, at, v);
        snprintf(c->what, sizeof c->what, "%s[seq %d][key %d][kv head %d][%d] = %s", k ? "k" : "v", (int)s, (int)j,
                 (int)g, (int)e, vname);
        if (!k) {
            c->loose_t0 = p->query_start_loc[s];
            c->loose_m = M;
            c->loose_g = g;
            c->loose_e = e;
        }
        return true;
    }
    varlen_problem *p = &c->vp;
    /* often the segment's first token: with causal its first row sees that key alone, so an
     * infinite K there can leave that row no key at all (all logits -inf: zeros) */
    const int32_t t = p->cu_seqlens[s] + (tu_chance(rng, 0.3) ? 0 : tu_range(rng, 0, c->vs.seg_len[s] - 1));
    const int32_t h = tu_range(rng, 0, c->vs.num_q_heads - 1), g = tu_range(rng, 0, c->vs.num_kv_heads - 1);
    if (where == 3 && p->sinks) {
        p->sinks[h] = (float)v;
        snprintf(c->what, sizeof c->what, "sinks[%d] = %s", (int)h, vname);
        return true;
    }
    const r35a_varlen_attention_desc *d = &p->desc;
    void *base = where == 0 ? p->q : where == 1 ? p->k : p->v;
    const int64_t ts = where == 0 ? d->q_token_stride : where == 1 ? d->k_token_stride : d->v_token_stride;
    const int64_t hs = where == 0 ? d->q_head_stride : where == 1 ? d->k_head_stride : d->v_head_stride;
    store_value(c->vs.dtype, base, (size_t)(t * ts + (where == 0 ? h : g) * hs + e), v);
    snprintf(c->what, sizeof c->what, "%s[token %d][head %d][%d] = %s", where == 0 ? "q" : where == 1 ? "k" : "v",
             (int)t, (int)(where == 0 ? h : g), (int)e, vname);
    if (where >= 2) { /* V (where 3 without sinks lands here too) */
        c->loose_t0 = p->cu_seqlens[s];
        c->loose_m = c->vs.seg_len[s];
        c->loose_g = g;
        c->loose_e = e;
    }
    return true;
}

/* ---- the reference context's rows: the truth of non-finite cases ----
 * tests/oracle.c refuses non-finite inputs (it is the float64 truth of finite ones); the header's
 * non-finite rules are the reference backend's (tests/reliability/test_extreme.c holds it to them), so
 * a non-finite case's rows come from a reference context run on the same host buffers. */

static r35a_context *g_reference;

static r35a_context *reference_context(void)
{
    r35a_context **ref = &g_reference;
    if (!*ref) {
        r35a_context_options o;
        r35a_context_options_init(&o);
        o.backend = R35A_BACKEND_REFERENCE;
        if (r35a_context_create(&o, ref) != R35A_OK)
            *ref = NULL;
    }
    return *ref;
}

void fuzz_finish(void)
{
    r35a_context_destroy(g_reference);
    g_reference = NULL;
}

/* Runs the case's (valid) call on a reference context into c's ref / ref_max. 0 on success. */
static int reference_rows(fuzz_case *c)
{
    r35a_context *ref = reference_context();
    if (!ref)
        return -1;
    const r35a_dtype dt = dtype_of(c);
    const int32_t T = num_tokens_of(c), hq = heads_of(c), D = head_size_of(c);
    const size_t bytes = c->paged ? c->pp.out_alloc_bytes : c->vp.out_alloc_bytes;
    const size_t guard = c->paged ? c->pp.out_guard_bytes : c->vp.out_guard_bytes;
    const int64_t ots = c->paged ? c->pp.desc.o_token_stride : c->vp.desc.o_token_stride;
    const int64_t ohs = c->paged ? c->pp.desc.o_head_stride : c->vp.desc.o_head_stride;
    uint8_t *out = tu_alloc(bytes);
    tu_poison(out, bytes);
    r35a_plan *plan = NULL;
    r35a_status st;
    if (c->paged) {
        const paged_problem *p = &c->pp;
        const r35a_paged_attention_args a = {.struct_size = sizeof a, .q = p->q, .k_cache = p->k, .v_cache = p->v,
                                             .out = out + guard, .seq_lens = p->seq_lens,
                                             .query_start_loc = p->query_start_loc, .block_table = p->block_table,
                                             .alibi_slopes = p->alibi, .sinks = p->sinks, .k_scale = p->k_scale,
                                             .v_scale = p->v_scale};
        st = r35a_paged_attention_plan(ref, &p->desc, &plan);
        if (st == R35A_OK)
            st = r35a_paged_attention_run(ref, plan, &a, NULL, 0, NULL);
    } else {
        const varlen_problem *p = &c->vp;
        const r35a_varlen_attention_args a = {.struct_size = sizeof a, .q = p->q, .k = p->k, .v = p->v,
                                              .out = out + guard, .cu_seqlens = p->cu_seqlens, .sinks = p->sinks};
        st = r35a_varlen_attention_plan(ref, &p->desc, &plan);
        if (st == R35A_OK)
            st = r35a_varlen_attention_run(ref, plan, &a, NULL, 0, NULL);
    }
    r35a_plan_destroy(plan);
    double *r = c->paged ? c->pp.ref : c->vp.ref, mx = 0.0;
    const size_t base = guard / tu_dtype_size(dt);
    for (int32_t t = 0; t < T && st == R35A_OK; ++t)
        for (int32_t h = 0; h < hq; ++h)
            for (int32_t e = 0; e < D; ++e) {
                const double x = tu_load(dt, out, base + (size_t)(t * ots + h * ohs + e));
                r[((size_t)t * (size_t)hq + (size_t)h) * (size_t)D + (size_t)e] = x;
                mx = isfinite(x) && fabs(x) > mx ? fabs(x) : mx;
            }
    *(c->paged ? &c->pp.ref_max : &c->vp.ref_max) = mx;
    tu_free(out);
    return st == R35A_OK ? 0 : -1;
}

/* ---- running a call on the memory of env ---- */

typedef struct device_buffers {
    void *q, *k, *v, *out, *meta[3], *alibi, *sinks, *k_scale, *v_scale, *ws;
} device_buffers;

static void *upload(const fuzz_env *env, const void *host, size_t bytes)
{
    return host ? env->mem->upload(env->mem->user, host, bytes) : NULL;
}

static void release(const fuzz_env *env, void *dev, const void *host)
{
    if (dev)
        env->mem->release(env->mem->user, dev, host);
}

/* Whether bytes of device buffer dev still equal host (inputs must never change). */
static bool unchanged(const fuzz_env *env, const void *dev, const void *host, size_t bytes, const char *name,
                      char *why, size_t cap)
{
    if (!dev || !bytes)
        return true;
    void *copy = tu_alloc(bytes);
    env->mem->download(env->mem->user, copy, dev, bytes);
    const bool same = memcmp(copy, host, bytes) == 0;
    tu_free(copy);
    if (!same)
        snprintf(why, cap, "the call modified its input %s", name);
    return same;
}

/* ---- checking the output ---- */

typedef struct out_check {
    double err_max, ref_max;
    size_t bad, nonfinite_mismatch, unwritten, not_nan, outside;
    char first[400];
} out_check;

static void note(out_check *o, const char *fmt, int t, int h, int e, double got, double want)
{
    if (strlen(o->first) > 300)
        return;
    char buf[128];
    snprintf(buf, sizeof buf, fmt, t, h, e, got, want);
    rel_append(o->first, sizeof o->first, buf);
}

/* Checks out (downloaded, guards included) against the case's row states and, with the oracle, its
 * reference. */
static void check_output(const fuzz_case *c, const uint8_t *out, const uint8_t *mask, size_t out_bytes,
                         size_t guard_bytes, int64_t ots, int64_t ohs, const double *ref, double ref_max,
                         bool use_oracle, out_check *o)
{
    memset(o, 0, sizeof *o);
    const r35a_dtype dt = dtype_of(c);
    const size_t es = tu_dtype_size(dt), base = guard_bytes / es;
    const int32_t T = num_tokens_of(c), hq = heads_of(c), D = head_size_of(c);
    /* non-finite cases compare with the reference context: two roundings of the dtype apart */
    const double tol = (c->kind == FUZZ_NONFINITE ? 2.0 : 1.0) * tu_tolerance(dt) * (ref_max > TU_TINY ? ref_max : TU_TINY);
    o->ref_max = ref_max;
    for (int32_t t = 0; t < T; ++t)
        for (int32_t h = 0; h < hq; ++h) {
            const uint8_t state = c->row_state[(size_t)t * (size_t)hq + (size_t)h];
            const double *r = ref + ((size_t)t * (size_t)hq + (size_t)h) * (size_t)D;
            /* a NaN_OR_REF row passes as a whole when it is all NaN or all right */
            bool row_nan = true;
            for (int32_t e = 0; e < D && state == ROW_NAN_OR_REF; ++e) {
                const size_t i = base + (size_t)(t * ots + h * ohs + e);
                row_nan = row_nan && !tu_elem_is_poison(dt, out, i) && isnan(tu_load(dt, out, i));
            }
            for (int32_t e = 0; e < D; ++e) {
                const size_t i = base + (size_t)(t * ots + h * ohs + e);
                const bool poison = tu_elem_is_poison(dt, out, i);
                const double x = tu_load(dt, out, i);
                if (state == ROW_ANY)
                    continue;
                if (poison) {
                    ++o->unwritten;
                    note(o, " [%d,%d,%d] unwritten%.0g%.0g;", t, h, e, 0, 0);
                    continue;
                }
                if (state == ROW_NAN || (state == ROW_NAN_OR_REF && row_nan)) {
                    if (!isnan(x)) {
                        ++o->not_nan;
                        note(o, " [%d,%d,%d] %g, not NaN%.0g;", t, h, e, x, 0);
                    }
                    continue;
                }
                /* ROW_REF, or a NAN_OR_REF row that is not all NaN: right */
                if (!use_oracle) {
                    if (!isfinite(x)) {
                        ++o->nonfinite_mismatch;
                        note(o, " [%d,%d,%d] %g (no oracle: must be finite)%.0g;", t, h, e, x, 0);
                    }
                    continue;
                }
                if (!isfinite(r[e]) || !isfinite(x)) {
                    const int32_t group = hq / (c->paged ? c->ps.num_kv_heads : c->vs.num_kv_heads);
                    /* the kernels whose rows share P.V products on tiles where some rows see a key and
                     * others do not (rdna35attn.h "Non-finite") */
                    const bool shared_tiles = (c->decode_served && c->loose_m <= 8 /* R35A_DECODE_MAX_QUERY_LEN */) ||
                                              c->encoder_causal_served || c->prefill_served;
                    const bool loose = shared_tiles && e == c->loose_e && t >= c->loose_t0 &&
                                       t < c->loose_t0 + c->loose_m && h / group == c->loose_g;
                    if (isfinite(r[e]) != isfinite(x) && !(loose && !isfinite(x))) {
                        ++o->nonfinite_mismatch;
                        note(o, " [%d,%d,%d] got %g want %g;", t, h, e, x, r[e]);
                    }
                    continue;
                }
                const double err = fabs(x - r[e]);
                o->err_max = err > o->err_max ? err : o->err_max;
                if (err > tol) {
                    ++o->bad;
                    note(o, " [%d,%d,%d] got %g want %g;", t, h, e, x, r[e]);
                }
            }
        }
    for (size_t b = 0; b < out_bytes; ++b)
        if (!mask[b] && out[b] != TU_POISON_BYTE)
            ++o->outside;
}

static bool out_ok(const out_check *o)
{
    return !o->bad && !o->nonfinite_mismatch && !o->unwritten && !o->not_nan && !o->outside;
}

/* ---- detail checks ---- */

static bool detail_names(const fuzz_case *c, const char *detail)
{
    for (int i = 0; i < 3 && c->fields[i]; ++i) {
        const size_t n = strlen(c->fields[i]);
        if (strncmp(detail, c->fields[i], n) == 0 && (detail[n] == ':' || detail[n] == '['))
            return true;
    }
    return false;
}

/* The device detail's "sequence N" / "segment N" is the faulted one (when the fault has one). */
static bool detail_sequence_ok(const fuzz_case *c, const char *detail)
{
    if (c->bad_seq < 0)
        return true;
    char want[48];
    snprintf(want, sizeof want, ": %s %d ", c->paged ? "sequence" : "segment", c->bad_seq);
    return strstr(detail, want) != NULL;
}

/* ---- bad descriptors and arguments ---- */

/* Mutates one field of a valid descriptor or the args into something the header forbids. */
static void mutate_desc(fuzz_case *c, tu_rng *rng, r35a_paged_attention_args *pa, r35a_varlen_attention_args *va)
{
    if (c->paged) {
        r35a_paged_attention_desc *d = &c->pp.desc;
        switch (tu_below(rng, 21)) {
        case 0: d->num_seqs = PICK(rng, 0, -3); snprintf(c->what, sizeof c->what, "num_seqs %d", (int)d->num_seqs); break;
        case 1: d->num_tokens = -1; snprintf(c->what, sizeof c->what, "num_tokens -1"); break;
        case 2: d->num_kv_heads = d->num_q_heads + 1; snprintf(c->what, sizeof c->what, "num_kv_heads %d", (int)d->num_kv_heads); break;
        case 3: d->head_size = PICK(rng, 0, 1025, -64); snprintf(c->what, sizeof c->what, "head_size %d", (int)d->head_size); break;
        case 4: d->page_size = PICK(rng, 0, -16); snprintf(c->what, sizeof c->what, "page_size %d", (int)d->page_size); break;
        case 5: d->num_pages = 0; snprintf(c->what, sizeof c->what, "num_pages 0"); break;
        case 6: d->max_seq_len = d->max_seq_len + d->page_size * (d->block_table_stride + 1);
            snprintf(c->what, sizeof c->what, "max_seq_len %d beyond block_table_stride", (int)d->max_seq_len); break;
        case 7: d->window = -1; snprintf(c->what, sizeof c->what, "window -1"); break;
        case 8: d->softmax_scale = tu_chance(rng, 0.5) ? NAN : -1.0f; snprintf(c->what, sizeof c->what, "softmax_scale %g", (double)d->softmax_scale); break;
        case 9: d->logit_softcap = -2.0f; snprintf(c->what, sizeof c->what, "logit_softcap -2"); break;
        case 10: d->use_alibi = 2; snprintf(c->what, sizeof c->what, "use_alibi 2"); break;
        case 11: d->kv_dtype = (r35a_dtype)PICK(rng, 99, 3); snprintf(c->what, sizeof c->what, "kv_dtype %d", (int)d->kv_dtype); break;
        case 12: d->q_token_stride = -8; snprintf(c->what, sizeof c->what, "q_token_stride -8"); break;
        case 13: /* a K extent past 2^63 bytes (3 pages of 2^62 elements) */
            d->k_page_stride = INT64_MAX / 2;
            d->num_pages = d->num_pages < 3 ? 3 : d->num_pages;
            snprintf(c->what, sizeof c->what, "k_page_stride 2^62 x %d pages", (int)d->num_pages);
            break;
        case 14: d->struct_size = 7; snprintf(c->what, sizeof c->what, "struct_size 7"); break;
        case 15: pa->q = NULL; snprintf(c->what, sizeof c->what, "args.q NULL"); break;
        case 16: pa->block_table = NULL; snprintf(c->what, sizeof c->what, "args.block_table NULL"); break;
        case 17: /* not an r35a_kv_scale_granularity, or per token with a 16-bit cache */
            if (tu_chance(rng, 0.5)) {
                d->kv_scale_per_head = PICK(rng, 3, -1, 77);
            } else {
                d->kv_scale_per_head = R35A_KV_SCALE_PER_TOKEN_HEAD;
                d->kv_dtype = (r35a_dtype)0;
            }
            snprintf(c->what, sizeof c->what, "kv_scale_per_head %d kv_dtype %d", (int)d->kv_scale_per_head,
                     (int)d->kv_dtype);
            break;
        case 18: /* a negative per-token-head scale stride (checked whatever the granularity) */
            if (tu_chance(rng, 0.5))
                d->k_scale_slot_stride = -1;
            else
                d->v_scale_page_stride = tu_chance(rng, 0.5) ? -1 : INT64_MIN;
            snprintf(c->what, sizeof c->what, "scale stride %lld/%lld", (long long)d->k_scale_slot_stride,
                     (long long)d->v_scale_page_stride);
            break;
        case 19: /* a scale tensor extent past 2^63 bytes (3 pages of 2^62 floats) */
            d->k_scale_page_stride = INT64_MAX / 2;
            d->num_pages = d->num_pages < 3 ? 3 : d->num_pages;
            snprintf(c->what, sizeof c->what, "k_scale_page_stride 2^62 x %d pages", (int)d->num_pages);
            break;
        default: pa->struct_size = 3; snprintf(c->what, sizeof c->what, "args.struct_size 3"); break;
        }
        return;
    }
    r35a_varlen_attention_desc *d = &c->vp.desc;
    switch (tu_below(rng, 11)) {
    case 0: d->num_segments = 0; snprintf(c->what, sizeof c->what, "num_segments 0"); break;
    case 1: d->max_seqlen = -1; snprintf(c->what, sizeof c->what, "max_seqlen -1"); break;
    case 2: d->causal = 2; snprintf(c->what, sizeof c->what, "causal 2"); break;
    case 3: d->head_size = 0; snprintf(c->what, sizeof c->what, "head_size 0"); break;
    case 4: d->num_kv_heads = d->num_q_heads + 1; snprintf(c->what, sizeof c->what, "num_kv_heads %d", (int)d->num_kv_heads); break;
    case 5: d->v_head_stride = -1; snprintf(c->what, sizeof c->what, "v_head_stride -1"); break;
    case 6: d->softmax_scale = INFINITY; snprintf(c->what, sizeof c->what, "softmax_scale inf"); break;
    case 7: d->dtype = (r35a_dtype)77; snprintf(c->what, sizeof c->what, "dtype 77"); break;
    case 8: va->cu_seqlens = NULL; snprintf(c->what, sizeof c->what, "args.cu_seqlens NULL"); break;
    case 9: va->out = NULL; snprintf(c->what, sizeof c->what, "args.out NULL"); break;
    default: d->use_sinks = 3; snprintf(c->what, sizeof c->what, "use_sinks 3"); break;
    }
}

/* ---- the case ---- */

static void fail_report(const fuzz_case *c, const char *fmt, const char *a, const char *b)
{
    char desc[8192];
    if (c->paged)
        paged_spec_describe(&c->ps, desc, sizeof desc);
    else
        varlen_spec_describe(&c->vs, desc, sizeof desc);
    printf("FAIL fuzz:%d (%s%s%s): ", c->index, k_kind_names[c->kind], c->what[0] ? ": " : "", c->what);
    printf(fmt, a ? a : "", b ? b : "");
    printf("\n  case: %s\n  replay: R35A_TEST_SEED=0x%016llx R35A_TEST_CASE=fuzz:%d\n", desc,
           (unsigned long long)tu_seed(), c->index);
}

/* The call's effect on the device error record after the stream is synchronized: the expected
 * report (bad data on a GPU context) or none; then the record must be clear. */
static bool check_record(r35a_context *ctx, const fuzz_env *env, fuzz_case *c, bool expect_report)
{
    r35a_status st;
    char detail[512];
    if (expect_report && c->report_by_call) {
        /* the next plan call reports it (and makes no plan) */
        r35a_plan *plan = (r35a_plan *)1;
        st = c->paged ? r35a_paged_attention_plan(ctx, &c->pp.desc, &plan)
                      : r35a_varlen_attention_plan(ctx, &c->vp.desc, &plan);
        if (plan) {
            r35a_plan_destroy(plan);
            fail_report(c, "a plan call after bad device data made a plan%s%s", NULL, NULL);
            return false;
        }
    } else {
        st = r35a_context_check_device(ctx);
    }
    snprintf(detail, sizeof detail, "%s", r35a_last_error_detail());
    if (!expect_report) {
        if (st != R35A_OK) {
            fail_report(c, "r35a_context_check_device: %s (%s) after a call with valid data", r35a_status_string(st), detail);
            return false;
        }
        return true;
    }
    if (st != R35A_ERR_INVALID_DATA || !detail_names(c, detail) || !detail_sequence_ok(c, detail) ||
        !strstr(detail, "(found on the device by an earlier run)")) {
        fail_report(c, "bad device data reported as %s: \"%s\"", r35a_status_string(st), detail);
        return false;
    }
    (void)env;
    st = r35a_context_check_device(ctx);
    if (st != R35A_OK) {
        fail_report(c, "the record was not cleared when reported: %s (%s)", r35a_status_string(st),
                    r35a_last_error_detail());
        return false;
    }
    return true;
}

bool fuzz_run_case(r35a_context *ctx, const fuzz_env *env, int index, fuzz_totals *totals)
{
    fuzz_case c;
    memset(&c, 0, sizeof c);
    c.index = index;
    c.bad_seq = -1;
    c.loose_e = -1;
    tu_rng rng;
    tu_rng_init(&rng, tu_case_seed("fuzz", index));
    c.paged = env->paged_only ? true : env->varlen_only ? false : tu_chance(&rng, 0.75);
    const double u = tu_unit(&rng);
    c.kind = u < 0.45 ? FUZZ_VALID : u < 0.55 ? FUZZ_NONFINITE : u < 0.92 ? FUZZ_BAD_DATA : FUZZ_BAD_DESC;
    if (!(c.paged ? gen_paged(&c, &rng, env) : gen_varlen(&c, &rng, env)))
        totals->over_cost++;
    const int build = c.paged ? paged_problem_init(&c.pp, &c.ps, &rng) : varlen_problem_init(&c.vp, &c.vs, &rng);
    if (build != 0) {
        fail_report(&c, "the harness could not build the problem%s%s", NULL, NULL);
        totals->cases++;
        totals->failed++;
        return false;
    }
    const int32_t T = num_tokens_of(&c), hq = heads_of(&c);
    c.row_state = calloc((size_t)T * (size_t)hq + 1, 1); /* ROW_REF */
    c.oracle = env->oracle_every <= 1 || index % env->oracle_every == 0;

    if (c.kind == FUZZ_NONFINITE && !apply_nonfinite(&c, &rng))
        c.kind = FUZZ_VALID;
    if (c.kind == FUZZ_NONFINITE) {
        c.oracle = true; /* against the reference context's rows (the oracle refuses non-finite inputs) */
        if (reference_rows(&c) != 0) {
            fail_report(&c, "the reference context failed: %s%s", r35a_last_error_detail(), NULL);
            c.oracle = false;
        }
    } else if (c.oracle && (c.paged ? paged_problem_oracle(&c.pp) : varlen_problem_oracle(&c.vp)) != 0) {
        /* the oracle on the valid inputs (bad data: before the fault, for the rows that stay right) */
        fail_report(&c, "the oracle failed%s%s", NULL, NULL);
        c.oracle = false;
    }
    if (c.kind == FUZZ_BAD_DATA) {
        static const int paged_faults[] = {FAULT_PAGE_HIGH, FAULT_PAGE_NEG, FAULT_PAGE_HIGH, FAULT_SEQ_LEN_HIGH,
                                           FAULT_SEQ_LEN_NEG, FAULT_M_ABOVE_L, FAULT_QUERY_LEN, FAULT_QSL_ORDER,
                                           FAULT_QSL_FIRST, FAULT_QSL_LAST};
        static const int varlen_faults[] = {FAULT_CU_ORDER, FAULT_CU_FIRST, FAULT_CU_LAST, FAULT_SEG_LEN};
        bool applied = false;
        for (int attempt = 0; attempt < 8 && !applied; ++attempt) {
            const int f = c.paged ? paged_faults[tu_below(&rng, sizeof paged_faults / sizeof *paged_faults)]
                                  : varlen_faults[tu_below(&rng, sizeof varlen_faults / sizeof *varlen_faults)];
            applied = apply_fault(&c, f, &rng);
        }
        /* a call without query rows launches nothing, so reads and checks nothing (rdna35attn.h) */
        if (!applied || (T == 0 && env->device_checks))
            c.kind = FUZZ_VALID;
        c.report_by_call = tu_chance(&rng, 0.25);
    }
    totals->cases++;
    totals->by_kind[c.kind]++;
    if (c.kind == FUZZ_BAD_DATA)
        totals->by_fault[c.fault]++;

    bool ok = true;
    char why[256] = "";
    const fuzz_env *e = env;
    /* device copies of every buffer, exactly sized; the output with guard bytes, poisoned */
    device_buffers b;
    memset(&b, 0, sizeof b);
    uint8_t *out_host, *out_mask;
    size_t out_bytes, guard;
    int64_t ots, ohs;
    if (c.paged) {
        paged_problem *p = &c.pp;
        out_host = p->out_alloc, out_mask = p->out_mask, out_bytes = p->out_alloc_bytes, guard = p->out_guard_bytes;
        ots = p->desc.o_token_stride, ohs = p->desc.o_head_stride;
        tu_poison(out_host, out_bytes);
        b.q = upload(e, p->q, p->q_bytes);
        b.k = upload(e, p->k, p->k_bytes);
        b.v = upload(e, p->v, p->v_bytes);
        b.out = upload(e, out_host, out_bytes);
        b.meta[0] = upload(e, p->seq_lens, sizeof(int32_t) * (size_t)c.ps.num_seqs);
        b.meta[1] = upload(e, p->query_start_loc, sizeof(int32_t) * ((size_t)c.ps.num_seqs + 1));
        b.meta[2] = upload(e, p->block_table, sizeof(int32_t) * (p->bt_entries ? p->bt_entries : 1));
        b.alibi = upload(e, p->alibi, sizeof(float) * (size_t)hq);
        b.sinks = upload(e, p->sinks, sizeof(float) * (size_t)hq);
        b.k_scale = upload(e, p->k_scale, sizeof(float) * p->k_scale_elems);
        b.v_scale = upload(e, p->v_scale, sizeof(float) * p->v_scale_elems);
    } else {
        varlen_problem *p = &c.vp;
        out_host = p->out_alloc, out_mask = p->out_mask, out_bytes = p->out_alloc_bytes, guard = p->out_guard_bytes;
        ots = p->desc.o_token_stride, ohs = p->desc.o_head_stride;
        tu_poison(out_host, out_bytes);
        if (p->qkv) {
            b.q = upload(e, p->qkv, p->qkv_bytes);
        } else {
            b.q = upload(e, p->q, p->q_bytes);
            b.k = upload(e, p->k, p->k_bytes);
            b.v = upload(e, p->v, p->v_bytes);
        }
        b.out = upload(e, out_host, out_bytes);
        b.meta[0] = upload(e, p->cu_seqlens, sizeof(int32_t) * ((size_t)c.vs.num_segments + 1));
        b.sinks = upload(e, p->sinks, sizeof(float) * (size_t)hq);
    }

    /* the call */
    r35a_paged_attention_args pa;
    r35a_varlen_attention_args va;
    memset(&pa, 0, sizeof pa);
    memset(&va, 0, sizeof va);
    if (c.paged) {
        pa = (r35a_paged_attention_args){.struct_size = sizeof pa, .q = b.q, .k_cache = b.k, .v_cache = b.v,
                                         .out = (uint8_t *)b.out + guard, .seq_lens = b.meta[0],
                                         .query_start_loc = b.meta[1], .block_table = b.meta[2],
                                         .alibi_slopes = b.alibi, .sinks = b.sinks, .k_scale = b.k_scale,
                                         .v_scale = b.v_scale};
    } else {
        const varlen_problem *p = &c.vp;
        const uint8_t *qb = b.q;
        va = (r35a_varlen_attention_args){.struct_size = sizeof va, .q = b.q, .k = b.k, .v = b.v,
                                          .out = (uint8_t *)b.out + guard, .cu_seqlens = b.meta[0], .sinks = b.sinks};
        if (p->qkv) { /* q, k, v point into the one fused buffer */
            va.q = qb + ((const uint8_t *)p->q - (const uint8_t *)p->qkv);
            va.k = qb + ((const uint8_t *)p->k - (const uint8_t *)p->qkv);
            va.v = qb + ((const uint8_t *)p->v - (const uint8_t *)p->qkv);
        }
    }
    if (c.kind == FUZZ_BAD_DESC) {
        mutate_desc(&c, &rng, &pa, &va);
        c.fields[0] = NULL;
    }
    if (env->before_run)
        env->before_run(env->mem->user);

    r35a_plan *plan = NULL;
    double t0 = now_seconds();
    r35a_status st = c.paged ? r35a_paged_attention_plan(ctx, &c.pp.desc, &plan)
                             : r35a_varlen_attention_plan(ctx, &c.vp.desc, &plan);
    totals->plan_seconds += now_seconds() - t0;
    totals->plan_calls++;
    bool ran = false;
    r35a_status run_st = R35A_OK;
    char run_detail[512] = "";
    if (c.kind == FUZZ_BAD_DESC) {
        /* plan or run must fail as rel_common expects */
        rel_expect ex;
        rel_expect_init(&ex);
        if (c.paged)
            rel_expect_paged_desc(&c.pp.desc, &ex);
        else
            rel_expect_varlen_desc(&c.vp.desc, &ex);
        r35a_status got = st;
        char detail[512];
        snprintf(detail, sizeof detail, "%s", r35a_last_error_detail());
        if (st == R35A_OK && ex.count == 0) {
            if (c.paged)
                rel_expect_paged_args(&c.pp.desc, &pa, &ex);
            else
                rel_expect_varlen_args(&c.vp.desc, &va, &ex);
            r35a_plan_info info = {.struct_size = sizeof info};
            r35a_plan_get_info(plan, &info);
            b.ws = info.workspace_bytes ? e->mem->alloc(e->mem->user, info.workspace_bytes) : NULL;
            got = c.paged ? r35a_paged_attention_run(ctx, plan, &pa, b.ws, info.workspace_bytes, e->mem->stream)
                          : r35a_varlen_attention_run(ctx, plan, &va, b.ws, info.workspace_bytes, e->mem->stream);
            snprintf(detail, sizeof detail, "%s", r35a_last_error_detail());
            ran = got == R35A_OK;
        }
        if (ex.count == 0) {
            fail_report(&c, "the mutation left a valid call (test bug)%s%s", NULL, NULL);
            ok = false;
        } else if (!rel_expect_explains(&ex, got, detail, why, sizeof why)) {
            fail_report(&c, "%s: %s", r35a_status_string(got), why);
            ok = false;
        }
        if (st != R35A_OK && plan) {
            fail_report(&c, "a failed plan call left *plan set%s%s", NULL, NULL);
            ok = false;
        }
        if (ran)
            e->mem->sync(e->mem->user, e->mem->stream);
    } else if (st != R35A_OK) {
        fail_report(&c, "plan: %s (%s)", r35a_status_string(st), r35a_last_error_detail());
        ok = false;
    } else {
        r35a_plan_info info = {.struct_size = sizeof info};
        r35a_plan_get_info(plan, &info);
        c.decode_served = strncmp(info.implementation, "decode_", 7) == 0;
        c.encoder_causal_served = !c.paged && c.vs.causal && strncmp(info.implementation, "encoder_", 8) == 0;
        c.prefill_served = c.paged && strstr(info.implementation, "encoder_") != NULL;
        b.ws = info.workspace_bytes ? e->mem->alloc(e->mem->user, info.workspace_bytes) : NULL;
        t0 = now_seconds();
        run_st = c.paged ? r35a_paged_attention_run(ctx, plan, &pa, b.ws, info.workspace_bytes, e->mem->stream)
                         : r35a_varlen_attention_run(ctx, plan, &va, b.ws, info.workspace_bytes, e->mem->stream);
        totals->run_seconds += now_seconds() - t0;
        totals->run_calls++;
        snprintf(run_detail, sizeof run_detail, "%s", r35a_last_error_detail());
        ran = true;
        if (e->mem->sync(e->mem->user, e->mem->stream) != 0) {
            fail_report(&c, "the stream failed after the run (a device fault)%s%s", NULL, NULL);
            ok = false;
        }
        const bool bad_data = c.kind == FUZZ_BAD_DATA;
        if (bad_data && !env->device_checks) {
            /* reference context: the run itself refuses, naming the field, and writes nothing */
            if (run_st != R35A_ERR_INVALID_DATA || !detail_names(&c, run_detail)) {
                fail_report(&c, "bad host data refused as %s: \"%s\"", r35a_status_string(run_st), run_detail);
                ok = false;
            }
            memset(c.row_state, ROW_ANY, (size_t)T * (size_t)hq); /* and the output: all poison, below */
        } else if (run_st != R35A_OK) {
            fail_report(&c, "run: %s (%s)", r35a_status_string(run_st), run_detail);
            ok = false;
        }
        if (ok && env->device_checks)
            ok = check_record(ctx, env, &c, bad_data);
    }

    /* the output: rows as the case says, nothing outside them written; a refused call writes nothing */
    e->mem->download(e->mem->user, out_host, b.out, out_bytes);
    const bool refused = c.kind == FUZZ_BAD_DESC || (c.kind == FUZZ_BAD_DATA && !env->device_checks);
    if (refused) {
        if (tu_first_unpoisoned(out_host, out_bytes) != (size_t)-1) {
            fail_report(&c, "a refused call wrote to the output%s%s", NULL, NULL);
            ok = false;
        }
    } else if (ran) {
        out_check oc;
        const double *ref = c.paged ? c.pp.ref : c.vp.ref;
        const double ref_max = c.paged ? c.pp.ref_max : c.vp.ref_max;
        check_output(&c, out_host, out_mask, out_bytes, guard, ots, ohs, ref, ref_max, c.oracle, &oc);
        if (!out_ok(&oc)) {
            char msg[600];
            snprintf(msg, sizeof msg, "%zu above tolerance (err %.3g of max|ref| %.3g), %zu finite/non-finite "
                     "mismatches, %zu unwritten, %zu not NaN, %zu bytes written outside the rows:",
                     oc.bad, oc.err_max, oc.ref_max, oc.nonfinite_mismatch, oc.unwritten, oc.not_nan, oc.outside);
            fail_report(&c, "output: %s%s", msg, oc.first);
            ok = false;
        } else if (c.oracle && c.kind == FUZZ_VALID) {
            const double rel = oc.err_max / (oc.ref_max > TU_TINY ? oc.ref_max : TU_TINY);
            totals->worst_error = rel > totals->worst_error ? rel : totals->worst_error;
        }
        for (size_t r = 0; r < (size_t)T * (size_t)hq; ++r)
            totals->nan_rows += c.row_state[r] == ROW_NAN && c.kind == FUZZ_BAD_DATA && env->device_checks;
    }
    if (c.oracle) {
        totals->oracle_checked++;
        /* inputs never change (the metadata as uploaded, faults included) */
        char changed[128] = "";
        bool same;
        if (c.paged) {
            const paged_problem *p = &c.pp;
            same = unchanged(e, b.q, p->q, p->q_bytes, "q", changed, sizeof changed) &&
                   unchanged(e, b.k, p->k, p->k_bytes, "k_cache", changed, sizeof changed) &&
                   unchanged(e, b.v, p->v, p->v_bytes, "v_cache", changed, sizeof changed) &&
                   unchanged(e, b.meta[2], p->block_table, sizeof(int32_t) * p->bt_entries, "block_table", changed,
                             sizeof changed) &&
                   unchanged(e, b.meta[0], p->seq_lens, sizeof(int32_t) * (size_t)c.ps.num_seqs, "seq_lens", changed,
                             sizeof changed);
        } else {
            const varlen_problem *p = &c.vp;
            same = (p->qkv ? unchanged(e, b.q, p->qkv, p->qkv_bytes, "qkv", changed, sizeof changed)
                           : unchanged(e, b.q, p->q, p->q_bytes, "q", changed, sizeof changed) &&
                                 unchanged(e, b.k, p->k, p->k_bytes, "k", changed, sizeof changed) &&
                                 unchanged(e, b.v, p->v, p->v_bytes, "v", changed, sizeof changed)) &&
                   unchanged(e, b.meta[0], p->cu_seqlens, sizeof(int32_t) * ((size_t)c.vs.num_segments + 1),
                             "cu_seqlens", changed, sizeof changed);
        }
        if (!same) {
            fail_report(&c, "%s%s", changed, NULL);
            ok = false;
        }
    }
    /* whatever happened, the next case starts with a clear record */
    if (env->device_checks && r35a_context_check_device(ctx) != R35A_OK) {
        fail_report(&c, "the device error record was set after the case: %s%s", r35a_last_error_detail(), NULL);
        ok = false;
    }

    r35a_plan_destroy(plan);
    void *devs[] = {b.q, b.k, b.v, b.out, b.meta[0], b.meta[1], b.meta[2], b.alibi, b.sinks, b.k_scale, b.v_scale, b.ws};
    for (size_t i = 0; i < sizeof devs / sizeof *devs; ++i)
        release(e, devs[i], NULL);
    free(c.row_state);
    if (c.paged)
        paged_problem_free(&c.pp);
    else
        varlen_problem_free(&c.vp);
    totals->failed += !ok;
    return ok;
}

void fuzz_print_totals(const fuzz_totals *t, const char *program)
{
    printf("[%s] %d cases: %d valid, %d non-finite, %d bad data, %d bad descriptors; %d compared with the "
           "oracle (worst error %.3e of max|ref|); %d rows checked NaN; %d failed\n",
           program, t->cases, t->by_kind[FUZZ_VALID], t->by_kind[FUZZ_NONFINITE], t->by_kind[FUZZ_BAD_DATA],
           t->by_kind[FUZZ_BAD_DESC], t->oracle_checked, t->worst_error, t->nan_rows, t->failed);
    if (t->over_cost)
        printf("[%s] %d cases over the cost cap (no draw of %d fitted; the cheapest was taken)\n", program,
               t->over_cost, DRAW_ATTEMPTS);
    printf("[%s] bad data by fault:", program);
    for (int f = 1; f < FAULT_COUNT; ++f)
        if (t->by_fault[f])
            printf(" %s %d", k_fault_names[f], t->by_fault[f]);
    printf("\n");
    if (t->plan_calls && t->run_calls)
        printf("[%s] host time of the library's calls (fresh plans, cold): %.1f us per plan, %.1f us per run "
               "(%lld plans, %lld runs)\n", program, 1e6 * t->plan_seconds / (double)t->plan_calls,
               1e6 * t->run_seconds / (double)t->run_calls, (long long)t->plan_calls, (long long)t->run_calls);
}
