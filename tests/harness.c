/* harness.c - see harness.h. */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"

#include <math.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* host memory: the library gets the host buffers themselves                                    */

static void *host_upload(void *user, const void *host, size_t bytes)
{
    (void)user;
    (void)bytes;
    return (void *)(uintptr_t)host;
}

static void host_download(void *user, void *host, const void *buffer, size_t bytes)
{
    (void)user;
    if (host != buffer) {
        memcpy(host, buffer, bytes);
    }
}

static void *host_alloc(void *user, size_t bytes)
{
    (void)user;
    return tu_alloc(bytes);
}

static void host_release(void *user, void *buffer, const void *host)
{
    (void)user;
    if (buffer != host) {
        tu_free(buffer);
    }
}

static int host_sync(void *user, void *stream)
{
    (void)user;
    (void)stream;
    return 0;
}

static const tu_mem g_host_mem = {"host", host_upload, host_download, host_alloc, host_release,
                                  host_sync, NULL, NULL};

const tu_mem *tu_mem_host(void)
{
    return &g_host_mem;
}

/* ------------------------------------------------------------------------------------------ */
/* time spent, for the summary                                                                  */

static double g_time_build, g_time_oracle, g_time_library, g_time_check;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void harness_print_timing(const char *program)
{
    printf("[%s] cpu time: build %.2f s, oracle %.2f s, library %.2f s, compare %.2f s\n", program,
           g_time_build, g_time_oracle, g_time_library, g_time_check);
}

/* Guard bytes before and after every output allocation (a multiple of every element size and of
 * 16, so the first row keeps the alignment a fast path may want). */
#define OUT_GUARD_BYTES 256u

static int32_t ceil_div(int32_t a, int32_t b)
{
    return (a + b - 1) / b;
}

static const char *layout_name(const kv_layout *l, char *buf, size_t len)
{
    snprintf(buf, len, "%s+%d/%d/%d", l->nhd ? "NHD" : "HND", (int)l->pad[0], (int)l->pad[1],
             (int)l->pad[2]);
    return buf;
}

/* Strides of a cache layout: page, head, slot. */
static void kv_strides(const kv_layout *l, int32_t hkv, int32_t B, int32_t D, int64_t *page,
                       int64_t *head, int64_t *slot)
{
    if (!l->nhd) {
        *slot = (int64_t)D + l->pad[0];
        *head = (int64_t)B * *slot + l->pad[1];
        *page = (int64_t)hkv * *head + l->pad[2];
    } else {
        *head = (int64_t)D + l->pad[0];
        *slot = (int64_t)hkv * *head + l->pad[1];
        *page = (int64_t)B * *slot + l->pad[2];
    }
}

/* Fills n elements with NaN (when nan) or with finite values. */
static void fill_background(r35a_dtype dt, void *buf, size_t n, bool nan, tu_rng *rng)
{
    if (nan) {
        if (n == 0) {
            return;
        }
        tu_store_nan(dt, buf, 0);
        const size_t total = n * tu_dtype_size(dt);
        for (size_t done = tu_dtype_size(dt); done < total; done *= 2) { /* doubling copies */
            memcpy((uint8_t *)buf + done, buf, done < total - done ? done : total - done);
        }
        return;
    }
    tu_fill_uniform(dt, buf, 0, n, 1.0, 0.0, rng);
}

static void fill_vector(r35a_dtype dt, void *buf, int64_t off, int32_t n, double amp, double offset,
                        tu_rng *rng)
{
    tu_fill_uniform(dt, buf, (size_t)off, (size_t)n, amp, offset, rng);
}

/* Marks the owned bytes of rows [tokens][heads][D] at the given strides, after the guard. */
static void mark_rows(uint8_t *mask, size_t guard, size_t es, int32_t tokens, int32_t heads,
                      int32_t D, int64_t token_stride, int64_t head_stride)
{
    for (int32_t t = 0; t < tokens; ++t) {
        for (int32_t h = 0; h < heads; ++h) {
            size_t off = guard + (size_t)((int64_t)t * token_stride + (int64_t)h * head_stride) * es;
            memset(mask + off, 1, (size_t)D * es);
        }
    }
}

static double max_abs(const double *v, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; ++i) {
        if (fabs(v[i]) > m) {
            m = fabs(v[i]);
        }
    }
    return m;
}

/* ------------------------------------------------------------------------------------------ */
/* paged spec                                                                                   */

void paged_spec_init(paged_spec *s, r35a_dtype dtype, int32_t hq, int32_t hkv, int32_t d,
                     int32_t page_size)
{
    memset(s, 0, sizeof *s);
    s->dtype = dtype;
    s->num_q_heads = hq;
    s->num_kv_heads = hkv;
    s->head_size = d;
    s->page_size = page_size;
    s->nan_fill = true;
    s->q_amp = 1.0;
    s->k_amp = 1.0;
}

bool paged_spec_add_seq(paged_spec *s, int32_t seq_len, int32_t q_len)
{
    if (s->num_seqs >= H_MAX_SEQS) {
        return false;
    }
    s->seq_len[s->num_seqs] = seq_len;
    s->q_len[s->num_seqs] = q_len;
    s->num_seqs++;
    return true;
}

static int32_t visible_keys(int32_t pos, int32_t window)
{
    return window > 0 && window < pos + 1 ? window : pos + 1;
}

double paged_spec_cost(const paged_spec *s)
{
    double keys = 0.0;
    for (int32_t i = 0; i < s->num_seqs; ++i) {
        for (int32_t r = 0; r < s->q_len[i]; ++r) {
            keys += visible_keys(s->seq_len[i] - s->q_len[i] + r, s->window);
        }
    }
    return keys * s->num_q_heads * (2.0 * s->head_size);
}

double paged_spec_cache_elems(const paged_spec *s)
{
    double pages = s->extra_pages;
    for (int32_t i = 0; i < s->num_seqs; ++i) {
        pages += (s->seq_len[i] + s->page_size - 1) / s->page_size;
    }
    return (pages > 1 ? pages : 1) * s->page_size * s->num_kv_heads * s->head_size;
}

/* Standard deviation of the scaled logits: q ~ U(-q_amp, q_amp), k ~ U(-k_amp, k_amp). */
static double logit_std(double q_amp, double k_amp, float scale, int32_t head_size)
{
    double sc = scale > 0.0f ? (double)scale : 1.0 / sqrt((double)head_size);
    return sc * q_amp * k_amp * sqrt((double)head_size) / 3.0;
}

double paged_spec_logit_std(const paged_spec *s)
{
    return logit_std(s->q_amp, s->k_amp, s->softmax_scale, s->head_size);
}

/* Appends item to the string in buf[len] if all of it fits (a description lists whole items);
 * false when it does not. */
static bool append_whole(char *buf, size_t len, const char *item)
{
    size_t used = strlen(buf), n = strlen(item);
    if (used + n >= len)
        return false;
    memcpy(buf + used, item, n + 1);
    return true;
}

void paged_spec_describe(const paged_spec *s, char *buf, size_t len)
{
    char kl[48], vl[48];
    int n = snprintf(buf, len,
                     "paged %s hq=%d hkv=%d D=%d B=%d window=%d scale=%.9g softcap=%.9g alibi=%d "
                     "sinks=%d(%g+-%g%s) kv=%s%s lse=%d/%d sizes=%s "
                     "K=%s V=%s qpad=%d/%d opad=%d/%d bt_pad=%d extra_pages=%d slack=%d/%d "
                     "force_pages=%d shuffle=%d garbage=%d nan_fill=%d amp=%g/%g voff=%g qdrop=%d/%d seqs(L/M)=",
                     tu_dtype_name(s->dtype), (int)s->num_q_heads, (int)s->num_kv_heads,
                     (int)s->head_size, (int)s->page_size, (int)s->window, (double)s->softmax_scale,
                     (double)s->logit_softcap, (int)s->use_alibi, (int)s->use_sinks, s->sink_center,
                     s->sink_amp, s->sink_some_neg_inf ? ",-inf" : "",
                     s->kv_dtype ? tu_dtype_name(s->kv_dtype) : "=dtype",
                     s->kv_scale_per_head == 2 ? (s->scale_decades > 0 ? "/per-token-head-wide" : "/per-token-head")
                     : s->kv_scale_per_head ? "/per-head" : "", (int)s->use_lse, (int)s->lse_pad,
                     s->struct_sizes_0_1 ? "0.1" : "0.3",
                     layout_name(&s->k_layout, kl, sizeof kl), layout_name(&s->v_layout, vl, sizeof vl),
                     (int)s->q_token_pad, (int)s->q_head_pad, (int)s->o_token_pad, (int)s->o_head_pad,
                     (int)s->bt_pad, (int)s->extra_pages, (int)s->max_query_len_slack,
                     (int)s->max_seq_len_slack, (int)s->force_num_pages, (int)s->shuffle_pages,
                     (int)s->garbage_unreached, (int)s->nan_fill, s->q_amp, s->k_amp, s->v_offset,
                     (int)s->q_row_exp_drop, (int)s->q_elem_exp_drop);
    for (int32_t i = 0; i < s->num_seqs && n > 0; ++i) {
        char item[32]; /* ",L/M": at most 24 bytes */
        snprintf(item, sizeof item, "%s%d/%d", i ? "," : "", (int)s->seq_len[i], (int)s->q_len[i]);
        if (!append_whole(buf, len, item))
            break;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* LSE outputs                                                                                  */

/* Sets up the LSE buffers of a problem with `tokens` x `hq` rows (nothing when !use). */
static void lse_init(h_lse *l, bool use, int32_t tokens, int32_t hq, int32_t pad)
{
    memset(l, 0, sizeof *l);
    if (!use)
        return;
    l->token_stride = (int64_t)hq + pad;
    l->elems = (size_t)tokens * (size_t)l->token_stride;
    l->buf = tu_alloc(sizeof(float) * (l->elems ? l->elems : 1));
    l->ref = calloc((size_t)tokens * (size_t)hq + 1, sizeof(double));
}

static void lse_free(h_lse *l)
{
    tu_free(l->buf);
    free(l->ref);
    memset(l, 0, sizeof *l);
}

bool h_lse_check(const h_lse *l, r35a_dtype dtype, int32_t tokens, int32_t hq, const char *label)
{
    const double tol = dtype == R35A_DTYPE_F32 ? H_LSE_TOL_F32 : H_LSE_TOL_16BIT;
    int bad = 0;
    double worst = 0.0;
    for (int32_t t = 0; t < tokens; ++t) {
        for (int32_t hh = 0; hh < l->token_stride; ++hh) {
            const float got = l->buf[(size_t)t * (size_t)l->token_stride + (size_t)hh];
            if (hh >= hq) { /* a gap: the library must not write it */
                if (tu_first_unpoisoned(&got, sizeof got) != (size_t)-1) {
                    if (bad++ < 5)
                        printf("FAIL %s\n  LSE gap (token %d, slot %d) was written: %g\n", label, (int)t, (int)hh,
                               (double)got);
                }
                continue;
            }
            const double ref = l->ref[(size_t)t * (size_t)hq + (size_t)hh];
            bool ok;
            if (ref == -INFINITY)
                ok = got == -INFINITY;
            else {
                const double err = fabs((double)got - ref) / (fabs(ref) > 1.0 ? fabs(ref) : 1.0);
                ok = isfinite(got) && err <= tol;
                if (isfinite(got) && err > worst)
                    worst = err;
            }
            if (!ok && bad++ < 5)
                printf("FAIL %s\n  LSE (token %d, head %d): got %.9g, oracle %.9g (tolerance %g relative to max(1, |ref|))\n",
                       label, (int)t, (int)hh, (double)got, ref, tol);
        }
    }
    if (bad)
        printf("  %d LSE mismatches; largest finite error %.3g (seed 0x%016llx)\n", bad, worst,
               (unsigned long long)tu_seed());
    return bad == 0;
}

/* ------------------------------------------------------------------------------------------ */
/* paged problem                                                                                */

static uint64_t paged_input_hash(const paged_problem *p)
{
    const paged_spec *s = &p->spec;
    uint64_t h = tu_hash(p->q, p->q_bytes);
    h ^= tu_hash(p->k, p->k_bytes) * 3;
    h ^= tu_hash(p->v, p->v_bytes) * 5;
    h ^= tu_hash(p->seq_lens, sizeof(int32_t) * (size_t)s->num_seqs) * 7;
    h ^= tu_hash(p->query_start_loc, sizeof(int32_t) * ((size_t)s->num_seqs + 1)) * 11;
    h ^= tu_hash(p->block_table, sizeof(int32_t) * p->bt_entries) * 13;
    if (p->alibi) {
        h ^= tu_hash(p->alibi, sizeof(float) * (size_t)s->num_q_heads) * 17;
    }
    if (p->sinks) {
        h ^= tu_hash(p->sinks, sizeof(float) * (size_t)s->num_q_heads) * 19;
    }
    if (p->k_scale) {
        h ^= tu_hash(p->k_scale, sizeof(float) * p->k_scale_elems) * 23;
        h ^= tu_hash(p->v_scale, sizeof(float) * p->v_scale_elems) * 29;
    }
    return h;
}

static bool is_8bit(r35a_dtype dtype)
{
    return dtype == R35A_DTYPE_FP8_E4M3 || dtype == R35A_DTYPE_INT8;
}

/* Sink logits of the heads (see paged_spec). */
static float *make_sinks(int32_t hq, double center, double amp, bool some_neg_inf, tu_rng *rng)
{
    float *sinks = tu_alloc(sizeof(float) * (size_t)hq);
    for (int32_t h = 0; h < hq; ++h) {
        sinks[h] = some_neg_inf && h % 3 == 2 ? -INFINITY : (float)(center + amp * tu_sym(rng));
    }
    return sinks;
}

/* Invalid page ids for block-table entries no query reaches. */
static int32_t garbage_page(tu_rng *rng, int32_t num_pages)
{
    const int32_t choices[] = {-1, -7, INT32_MIN, INT32_MAX, 0x7FFFBEEF};
    int32_t k = tu_range(rng, 0, 5);
    return k == 5 ? num_pages + tu_range(rng, 0, 1000) : choices[k];
}

/* The float64 oracle of p's current host buffers into p->ref and p->ref_max. */
int paged_problem_oracle(paged_problem *p)
{
    const paged_spec *s = &p->spec;
    const r35a_paged_attention_desc *d = &p->desc;
    oracle_paged o;
    memset(&o, 0, sizeof o);
    o.dtype = s->dtype;
    o.num_seqs = s->num_seqs;
    o.num_tokens = p->num_tokens;
    o.num_q_heads = s->num_q_heads;
    o.num_kv_heads = s->num_kv_heads;
    o.head_size = s->head_size;
    o.page_size = s->page_size;
    o.num_pages = p->num_pages;
    o.block_table_stride = p->bt_stride;
    o.window = s->window;
    o.softmax_scale = (double)d->softmax_scale;
    o.logit_softcap = (double)s->logit_softcap;
    o.alibi_slopes = s->use_alibi ? p->alibi : NULL;
    o.sinks = p->sinks;
    o.kv_dtype = s->kv_dtype;
    o.k_scale = p->k_scale;
    o.v_scale = p->v_scale;
    o.kv_scale_per_head = s->kv_scale_per_head;
    o.ks_page = p->ks_strides[0];
    o.ks_slot = p->ks_strides[1];
    o.ks_head = p->ks_strides[2];
    o.vs_page = p->vs_strides[0];
    o.vs_slot = p->vs_strides[1];
    o.vs_head = p->vs_strides[2];
    o.q = p->q;
    o.q_token_stride = d->q_token_stride;
    o.q_head_stride = d->q_head_stride;
    o.k = p->k;
    o.k_page_stride = d->k_page_stride;
    o.k_head_stride = d->k_head_stride;
    o.k_slot_stride = d->k_slot_stride;
    o.v = p->v;
    o.v_page_stride = d->v_page_stride;
    o.v_head_stride = d->v_head_stride;
    o.v_slot_stride = d->v_slot_stride;
    o.seq_lens = p->seq_lens;
    o.query_start_loc = p->query_start_loc;
    o.block_table = p->block_table;
    o.lse = p->lse.ref;
    const double t0 = now_seconds();
    const int orc = oracle_paged_attention(&o, p->ref);
    g_time_oracle += now_seconds() - t0;
    if (orc != 0) {
        return -1;
    }
    p->ref_max = max_abs(p->ref, (size_t)p->num_tokens * (size_t)s->num_q_heads * (size_t)s->head_size);
    return 0;
}

int paged_problem_init(paged_problem *p, const paged_spec *spec, tu_rng *rng)
{
    const double t_start = now_seconds();
    memset(p, 0, sizeof *p);
    p->spec = *spec;
    const paged_spec *s = &p->spec;
    const r35a_dtype dt = s->dtype;
    const r35a_dtype kvdt = s->kv_dtype ? s->kv_dtype : dt;
    const size_t es = tu_dtype_size(dt), kv_es = tu_dtype_size(kvdt);
    const int32_t hq = s->num_q_heads, hkv = s->num_kv_heads, D = s->head_size, B = s->page_size;

    int32_t max_L = 0, max_M = 0, tokens = 0;
    for (int32_t i = 0; i < s->num_seqs; ++i) {
        if (s->q_len[i] < 0 || s->q_len[i] > s->seq_len[i]) {
            fprintf(stderr, "harness: sequence %d has M=%d > L=%d\n", (int)i, (int)s->q_len[i],
                    (int)s->seq_len[i]);
            return -1;
        }
        max_L = s->seq_len[i] > max_L ? s->seq_len[i] : max_L;
        max_M = s->q_len[i] > max_M ? s->q_len[i] : max_M;
        tokens += s->q_len[i];
    }
    const int32_t max_seq_len = max_L + s->max_seq_len_slack;
    const int32_t max_query_len = max_M + s->max_query_len_slack;
    p->num_tokens = tokens;
    p->bt_stride = ceil_div(max_seq_len, B) + s->bt_pad;

    /* pages each sequence's queries reach: logical pages [first, count) */
    int32_t first_page[H_MAX_SEQS], page_count[H_MAX_SEQS];
    int32_t needed = 0;
    for (int32_t i = 0; i < s->num_seqs; ++i) {
        const int32_t L = s->seq_len[i], M = s->q_len[i];
        if (M == 0) {
            first_page[i] = page_count[i] = 0;
            continue;
        }
        int32_t lowest_key = s->window > 0 ? L - M - s->window + 1 : 0;
        lowest_key = lowest_key < 0 ? 0 : lowest_key;
        first_page[i] = lowest_key / B;
        page_count[i] = ceil_div(L, B);
        needed += page_count[i] - first_page[i];
    }
    p->num_pages = s->force_num_pages > 0 ? s->force_num_pages : needed + s->extra_pages;
    if (p->num_pages < 1) {
        p->num_pages = 1;
    }
    if (p->num_pages < needed) {
        fprintf(stderr, "harness: force_num_pages %d < %d pages needed\n", (int)p->num_pages,
                (int)needed);
        return -1;
    }

    int32_t *ids = malloc(sizeof(int32_t) * (size_t)p->num_pages);
    for (int32_t i = 0; i < p->num_pages; ++i) {
        ids[i] = i;
    }
    if (s->shuffle_pages) {
        tu_shuffle_i32(rng, ids, p->num_pages);
    }

    p->bt_entries = (size_t)s->num_seqs * (size_t)p->bt_stride;
    p->block_table = tu_alloc(sizeof(int32_t) * (p->bt_entries ? p->bt_entries : 1));
    int32_t next = 0;
    for (int32_t i = 0; i < s->num_seqs; ++i) {
        int32_t *row = p->block_table + (size_t)i * (size_t)p->bt_stride;
        for (int32_t lp = 0; lp < p->bt_stride; ++lp) {
            if (lp >= first_page[i] && lp < page_count[i]) {
                row[lp] = ids[next++];
            } else if (s->garbage_unreached) {
                row[lp] = garbage_page(rng, p->num_pages);
            } else {
                row[lp] = (int32_t)tu_below(rng, (uint32_t)p->num_pages);
            }
        }
    }
    free(ids);

    /* KV cache */
    int64_t kps, khs, kss, vps, vhs, vss;
    kv_strides(&s->k_layout, hkv, B, D, &kps, &khs, &kss);
    kv_strides(&s->v_layout, hkv, B, D, &vps, &vhs, &vss);
    const size_t k_elems = (size_t)p->num_pages * (size_t)kps;
    const size_t v_elems = (size_t)p->num_pages * (size_t)vps;
    p->k_bytes = k_elems * kv_es;
    p->v_bytes = v_elems * kv_es;
    p->k = tu_alloc(p->k_bytes);
    p->v = tu_alloc(p->v_bytes);
    fill_background(kvdt, p->k, k_elems, s->nan_fill, rng);
    fill_background(kvdt, p->v, v_elems, s->nan_fill, rng);
    /* 8-bit: the real values' range (k_amp; |v_offset| + 1) maps onto 60-100 % of the stored range
     * (fp8 up to 448, int8 up to 127), a different fraction per scale */
    const bool per_token = is_8bit(kvdt) && s->kv_scale_per_head == 2;
    double k_base = 1.0, v_base = 1.0;   /* per token: the scale that maps the real range onto the stored one */
    if (is_8bit(kvdt)) {
        const double stored_max = kvdt == R35A_DTYPE_FP8_E4M3 ? 448.0 : 127.0;
        k_base = s->k_amp / (stored_max * 0.8);
        v_base = (fabs(s->v_offset) + 1.0) / (stored_max * 0.8);
        if (per_token) {
            /* K: [page][slot][head], V: [page][head][slot], each level padded by scale_pad */
            const int64_t pad = s->scale_pad;
            p->ks_strides[2] = 1;
            p->ks_strides[1] = hkv + pad;
            p->ks_strides[0] = (int64_t)B * (hkv + pad) + pad;
            p->vs_strides[1] = 1;
            p->vs_strides[2] = B + pad;
            p->vs_strides[0] = (int64_t)hkv * (B + pad) + pad;
            p->k_scale_elems = (size_t)p->num_pages * (size_t)p->ks_strides[0];
            p->v_scale_elems = (size_t)p->num_pages * (size_t)p->vs_strides[0];
        } else {
            p->n_scales = s->kv_scale_per_head ? hkv : 1;
            p->k_scale_elems = p->v_scale_elems = (size_t)p->n_scales;
        }
        p->k_scale = tu_alloc(sizeof(float) * p->k_scale_elems);
        p->v_scale = tu_alloc(sizeof(float) * p->v_scale_elems);
        for (size_t i = 0; i < p->k_scale_elems; ++i)
            p->k_scale[i] = per_token && s->nan_fill ? NAN : (float)(s->k_amp / (stored_max * (0.6 + 0.4 * tu_unit(rng))));
        for (size_t i = 0; i < p->v_scale_elems; ++i)
            p->v_scale[i] = per_token && s->nan_fill ? NAN
                            : (float)((fabs(s->v_offset) + 1.0) / (stored_max * (0.6 + 0.4 * tu_unit(rng))));
    }
    for (int32_t i = 0; i < s->num_seqs; ++i) {
        const int32_t *row = p->block_table + (size_t)i * (size_t)p->bt_stride;
        for (int32_t lp = first_page[i]; lp < page_count[i]; ++lp) {
            const int64_t page = row[lp];
            for (int32_t slot = 0; slot < B && (int64_t)lp * B + slot < s->seq_len[i]; ++slot) {
                for (int32_t g = 0; g < hkv; ++g) {
                    /* 8-bit: stored = real / scale, quantized by the fill */
                    double ks = p->k_scale ? p->k_scale[s->kv_scale_per_head ? g : 0] : 1.0;
                    double vs = p->v_scale ? p->v_scale[s->kv_scale_per_head ? g : 0] : 1.0;
                    double kf = 1.0, vf = 1.0;   /* per token with scale_decades: the real values' factor */
                    if (per_token) {
                        const double spread = s->scale_decades;
                        /* K's spread at most half a decade: wider, the logits reach 10^3 x k_amp and
                         * their fp32 rounding alone (relative 6e-8 of |s|) moves the f32 outputs past
                         * the f32 tolerance; the wide spread is V's, which weights each key's term */
                        kf = spread > 0 ? pow(10.0, fmin(spread, 0.5) * tu_sym(rng)) : 0.75 + 0.25 * tu_sym(rng);
                        vf = spread > 0 ? pow(10.0, spread * tu_sym(rng)) : 0.75 + 0.25 * tu_sym(rng);
                        ks = (float)(k_base * kf);
                        vs = (float)(v_base * vf);
                        p->k_scale[page * p->ks_strides[0] + slot * p->ks_strides[1] + g * p->ks_strides[2]] = (float)ks;
                        p->v_scale[page * p->vs_strides[0] + slot * p->vs_strides[1] + g * p->vs_strides[2]] = (float)vs;
                        if (spread <= 0)
                            kf = vf = 1.0;   /* the real range stays k_amp, |v_offset| + 1 */
                    }
                    fill_vector(kvdt, p->k, page * kps + g * khs + slot * kss, D, s->k_amp * kf / ks, 0.0, rng);
                    fill_vector(kvdt, p->v, page * vps + g * vhs + slot * vss, D, vf / vs, s->v_offset * vf / vs,
                                rng);
                }
            }
        }
    }

    /* Q and O */
    const int64_t qhs = (int64_t)D + s->q_head_pad, qts = (int64_t)hq * qhs + s->q_token_pad;
    const int64_t ohs = (int64_t)D + s->o_head_pad, ots = (int64_t)hq * ohs + s->o_token_pad;
    const size_t q_elems = (size_t)tokens * (size_t)qts;
    p->q_bytes = q_elems * es;
    p->q = tu_alloc(p->q_bytes);
    fill_background(dt, p->q, q_elems, s->nan_fill, rng);
    for (int32_t t = 0; t < tokens; ++t) {
        for (int32_t h = 0; h < hq; ++h) {
            fill_vector(dt, p->q, t * qts + h * qhs, D, s->q_amp, 0.0, rng);
            if (s->q_row_exp_drop > 0 || s->q_elem_exp_drop > 0) {
                const int e = s->q_row_exp_drop > 0 ? (int)tu_below(rng, (uint32_t)s->q_row_exp_drop + 1) : 0;
                for (int32_t d = 0; d < D; ++d) {
                    const int u = s->q_elem_exp_drop > 0 ? (int)tu_below(rng, (uint32_t)s->q_elem_exp_drop + 1) : 0;
                    const size_t i = (size_t)(t * qts + h * qhs + d);
                    tu_store(dt, p->q, i, ldexp(tu_load(dt, p->q, i), -e - u));
                }
            }
        }
    }
    p->out_guard_bytes = OUT_GUARD_BYTES;
    p->out_alloc_bytes = 2 * OUT_GUARD_BYTES + (size_t)tokens * (size_t)ots * es;
    p->out_alloc = tu_alloc(p->out_alloc_bytes);
    p->out_mask = tu_alloc(p->out_alloc_bytes);
    memset(p->out_mask, 0, p->out_alloc_bytes);
    mark_rows(p->out_mask, p->out_guard_bytes, es, tokens, hq, D, ots, ohs);

    /* metadata */
    p->seq_lens = tu_alloc(sizeof(int32_t) * (size_t)s->num_seqs);
    p->query_start_loc = tu_alloc(sizeof(int32_t) * ((size_t)s->num_seqs + 1));
    p->query_start_loc[0] = 0;
    for (int32_t i = 0; i < s->num_seqs; ++i) {
        p->seq_lens[i] = s->seq_len[i];
        p->query_start_loc[i + 1] = p->query_start_loc[i] + s->q_len[i];
    }
    if (s->use_alibi) {
        p->alibi = tu_alloc(sizeof(float) * (size_t)hq);
        for (int32_t h = 0; h < hq; ++h) {
            /* the usual geometric slopes, jittered so heads differ in more than the exponent */
            p->alibi[h] = (float)(pow(2.0, -8.0 * (h + 1) / hq) * (0.75 + 0.5 * tu_unit(rng)));
        }
    }
    if (s->use_sinks) {
        p->sinks = make_sinks(hq, s->sink_center, s->sink_amp, s->sink_some_neg_inf, rng);
    }

    /* descriptor, every field set explicitly */
    r35a_paged_attention_desc *d = &p->desc;
    memset(d, 0, sizeof *d);
    d->struct_size = sizeof *d;
    d->dtype = dt;
    d->num_seqs = s->num_seqs;
    d->num_tokens = tokens;
    d->max_query_len = max_query_len;
    d->max_seq_len = max_seq_len;
    d->num_q_heads = hq;
    d->num_kv_heads = hkv;
    d->head_size = D;
    d->page_size = B;
    d->num_pages = p->num_pages;
    d->block_table_stride = p->bt_stride;
    d->window = s->window;
    d->softmax_scale = s->softmax_scale > 0.0f ? s->softmax_scale : (float)(1.0 / sqrt((double)D));
    d->logit_softcap = s->logit_softcap;
    d->use_alibi = s->use_alibi;
    d->q_token_stride = qts;
    d->q_head_stride = qhs;
    d->o_token_stride = ots;
    d->o_head_stride = ohs;
    d->k_page_stride = kps;
    d->k_head_stride = khs;
    d->k_slot_stride = kss;
    d->v_page_stride = vps;
    d->v_head_stride = vhs;
    d->v_slot_stride = vss;
    d->use_sinks = s->use_sinks;
    d->kv_dtype = s->kv_dtype;
    d->kv_scale_per_head = s->kv_scale_per_head;
    if (per_token) {
        d->k_scale_page_stride = p->ks_strides[0];
        d->k_scale_slot_stride = p->ks_strides[1];
        d->k_scale_head_stride = p->ks_strides[2];
        d->v_scale_page_stride = p->vs_strides[0];
        d->v_scale_slot_stride = p->vs_strides[1];
        d->v_scale_head_stride = p->vs_strides[2];
    }
    if (s->struct_sizes_0_1) {
        d->struct_size = offsetof(r35a_paged_attention_desc, use_sinks);
    }
    lse_init(&p->lse, s->use_lse && !s->struct_sizes_0_1, tokens, hq, s->lse_pad);
    d->use_lse = p->lse.buf != NULL;
    d->lse_token_stride = p->lse.buf ? p->lse.token_stride : hq;
    d->lse_head_stride = 1;

    const size_t ref_elems = (size_t)tokens * (size_t)hq * (size_t)D;
    p->ref = calloc(ref_elems ? ref_elems : 1, sizeof(double));
    g_time_build += now_seconds() - t_start;
    if (!s->defer_oracle && paged_problem_oracle(p) != 0) {
        return -1;
    }
    p->input_hash = paged_input_hash(p);
    return 0;
}

void paged_problem_free(paged_problem *p)
{
    tu_free(p->q);
    tu_free(p->k);
    tu_free(p->v);
    tu_free(p->out_alloc);
    tu_free(p->out_mask);
    tu_free(p->seq_lens);
    tu_free(p->query_start_loc);
    tu_free(p->block_table);
    tu_free(p->alibi);
    tu_free(p->sinks);
    tu_free(p->k_scale);
    tu_free(p->v_scale);
    free(p->ref);
    lse_free(&p->lse);
    memset(p, 0, sizeof *p);
}

static void print_status_failure(const char *label, const char *what, r35a_status st)
{
    printf("FAIL %s\n  %s returned %s: \"%s\" (seed 0x%016llx)\n", label, what,
           r35a_status_string(st), r35a_last_error_detail(), (unsigned long long)tu_seed());
}

bool paged_problem_check(r35a_context *ctx, paged_problem *p, const r35a_plan *plan,
                         const tu_mem *mem, const char *label)
{
    const paged_spec *s = &p->spec;
    const r35a_dtype dt = s->dtype;
    r35a_plan *own_plan = NULL;
    if (!plan) {
        r35a_status st = r35a_paged_attention_plan(ctx, &p->desc, &own_plan);
        if (st != R35A_OK) {
            print_status_failure(label, "r35a_paged_attention_plan", st);
            tu_stats_record(dt, INFINITY, false, label);
            return false;
        }
        plan = own_plan;
    }
    r35a_plan_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    r35a_status st = r35a_plan_get_info(plan, &info);
    if (st != R35A_OK) {
        print_status_failure(label, "r35a_plan_get_info", st);
        r35a_plan_destroy(own_plan);
        tu_stats_record(dt, INFINITY, false, label);
        return false;
    }

    tu_poison(p->out_alloc, p->out_alloc_bytes);
    void *dq = mem->upload(mem->user, p->q, p->q_bytes);
    void *dk = mem->upload(mem->user, p->k, p->k_bytes);
    void *dv = mem->upload(mem->user, p->v, p->v_bytes);
    void *dout = mem->upload(mem->user, p->out_alloc, p->out_alloc_bytes);
    void *dsl = mem->upload(mem->user, p->seq_lens, sizeof(int32_t) * (size_t)s->num_seqs);
    void *dqsl = mem->upload(mem->user, p->query_start_loc, sizeof(int32_t) * ((size_t)s->num_seqs + 1));
    void *dbt = mem->upload(mem->user, p->block_table, sizeof(int32_t) * (p->bt_entries ? p->bt_entries : 1));
    void *dal = p->alibi ? mem->upload(mem->user, p->alibi, sizeof(float) * (size_t)s->num_q_heads) : NULL;
    void *dsinks = p->sinks ? mem->upload(mem->user, p->sinks, sizeof(float) * (size_t)s->num_q_heads) : NULL;
    void *dks = p->k_scale ? mem->upload(mem->user, p->k_scale, sizeof(float) * p->k_scale_elems) : NULL;
    void *dvs = p->v_scale ? mem->upload(mem->user, p->v_scale, sizeof(float) * p->v_scale_elems) : NULL;
    void *ws = info.workspace_bytes ? mem->alloc(mem->user, info.workspace_bytes) : NULL;
    if (p->lse.buf)
        tu_poison(p->lse.buf, sizeof(float) * (p->lse.elems ? p->lse.elems : 1));
    void *dlse = p->lse.buf ? mem->upload(mem->user, p->lse.buf, sizeof(float) * (p->lse.elems ? p->lse.elems : 1))
                            : NULL;

    r35a_paged_attention_args args;
    memset(&args, 0, sizeof args);
    args.struct_size = sizeof args;
    args.q = dq;
    args.k_cache = dk;
    args.v_cache = dv;
    args.out = (uint8_t *)dout + p->out_guard_bytes;
    args.seq_lens = dsl;
    args.query_start_loc = dqsl;
    args.block_table = dbt;
    args.alibi_slopes = dal;
    args.sinks = dsinks;
    args.k_scale = dks;
    args.v_scale = dvs;
    args.lse = dlse;
    if (s->struct_sizes_0_1) {
        args.struct_size = offsetof(r35a_paged_attention_args, sinks);
    }

    bool ok = true;
    const double t_run = now_seconds();
    st = r35a_paged_attention_run(ctx, plan, &args, ws, info.workspace_bytes, mem->stream);
    if (st != R35A_OK) {
        print_status_failure(label, "r35a_paged_attention_run", st);
        ok = false;
    } else if (strcmp(r35a_last_error_detail(), "") != 0) {
        printf("FAIL %s\n  a successful run left r35a_last_error_detail() = \"%s\"\n", label,
               r35a_last_error_detail());
        ok = false;
    }
    if (ok && mem->sync(mem->user, mem->stream) != 0) {
        printf("FAIL %s\n  sync failed\n", label);
        ok = false;
    }
    g_time_library += now_seconds() - t_run;
    if (ok) {
        mem->download(mem->user, p->out_alloc, dout, p->out_alloc_bytes);
        if (dlse)
            mem->download(mem->user, p->lse.buf, dlse, sizeof(float) * (p->lse.elems ? p->lse.elems : 1));
    }
    if (dlse) {
        mem->release(mem->user, dlse, p->lse.buf);
    }

    mem->release(mem->user, dq, p->q);
    mem->release(mem->user, dk, p->k);
    mem->release(mem->user, dv, p->v);
    mem->release(mem->user, dout, p->out_alloc);
    mem->release(mem->user, dsl, p->seq_lens);
    mem->release(mem->user, dqsl, p->query_start_loc);
    mem->release(mem->user, dbt, p->block_table);
    if (dal) {
        mem->release(mem->user, dal, p->alibi);
    }
    if (dsinks) {
        mem->release(mem->user, dsinks, p->sinks);
    }
    if (dks) {
        mem->release(mem->user, dks, p->k_scale);
        mem->release(mem->user, dvs, p->v_scale);
    }
    if (ws) {
        mem->release(mem->user, ws, NULL);
    }
    r35a_plan_destroy(own_plan);
    if (!ok) {
        tu_stats_record(dt, INFINITY, false, label);
        return false;
    }

    const double t_check = now_seconds();
    tu_check c;
    tu_check_begin(&c, dt, p->ref_max, "token,head,elem,seq");
    const size_t es = tu_dtype_size(dt);
    const size_t guard_elems = p->out_guard_bytes / es;
    for (int32_t i = 0; i < s->num_seqs; ++i) {
        for (int32_t t = p->query_start_loc[i]; t < p->query_start_loc[i + 1]; ++t) {
            for (int32_t h = 0; h < s->num_q_heads; ++h) {
                const size_t base = guard_elems + (size_t)(t * p->desc.o_token_stride +
                                                           h * p->desc.o_head_stride);
                const double *ref = p->ref + ((size_t)t * (size_t)s->num_q_heads + (size_t)h) *
                                                 (size_t)s->head_size;
                for (int32_t e = 0; e < s->head_size; ++e) {
                    tu_check_elem(&c, p->out_alloc, base + (size_t)e, ref[e], t, h, e, i);
                }
            }
        }
    }
    tu_check_untouched(&c, p->out_alloc, p->out_mask, p->out_alloc_bytes);
    bool passed = tu_check_passed(&c);
    if (p->lse.buf && !h_lse_check(&p->lse, dt, p->num_tokens, s->num_q_heads, label)) {
        passed = false;
    }
    if (paged_input_hash(p) != p->input_hash) {
        printf("FAIL %s\n  the call modified an input buffer (q, k, v or metadata)\n", label);
        passed = false;
    }
    if (!passed) {
        tu_check_report(&c, label);
        printf("  implementation \"%s\"\n", info.implementation);
    }
    tu_stats_record(dt, tu_check_error(&c), passed, label);
    g_time_check += now_seconds() - t_check;
    return passed;
}

bool paged_run_case(r35a_context *ctx, const paged_spec *spec, tu_rng *rng, const char *group,
                    int index)
{
    char label[160];
    snprintf(label, sizeof label, "%s:%d", group, index);
    paged_problem p;
    if (paged_problem_init(&p, spec, rng) != 0) {
        char desc[8192];
        paged_spec_describe(spec, desc, sizeof desc);
        printf("FAIL %s: harness could not build the problem: %s\n", label, desc);
        paged_problem_free(&p);
        tu_stats_record(spec->dtype, INFINITY, false, label);
        return false;
    }
    bool ok = paged_problem_check(ctx, &p, NULL, tu_mem_host(), label);
    if (tu_verbose()) {
        char desc[8192];
        paged_spec_describe(spec, desc, sizeof desc);
        printf("case %s %s error %.3e: %s\n", label, ok ? "ok" : "FAILED", tu_last_error(), desc);
    }
    if (!ok) {
        char desc[8192];
        paged_spec_describe(spec, desc, sizeof desc);
        printf("  case: %s\n  replay: R35A_TEST_SEED=0x%016llx R35A_TEST_CASE=%s\n", desc,
               (unsigned long long)tu_seed(), label);
    }
    paged_problem_free(&p);
    return ok;
}

/* ------------------------------------------------------------------------------------------ */
/* varlen spec                                                                                  */

void varlen_spec_init(varlen_spec *s, r35a_dtype dtype, int32_t hq, int32_t hkv, int32_t d)
{
    memset(s, 0, sizeof *s);
    s->dtype = dtype;
    s->num_q_heads = hq;
    s->num_kv_heads = hkv;
    s->head_size = d;
    s->nan_fill = true;
    s->q_amp = 1.0;
    s->k_amp = 1.0;
}

bool varlen_spec_add_segment(varlen_spec *s, int32_t len)
{
    if (s->num_segments >= H_MAX_SEGMENTS) {
        return false;
    }
    s->seg_len[s->num_segments++] = len;
    return true;
}

double varlen_spec_cost(const varlen_spec *s)
{
    double keys = 0.0;
    for (int32_t i = 0; i < s->num_segments; ++i) {
        double n = s->seg_len[i];
        keys += s->causal ? n * (n + 1) / 2 : n * n;
    }
    return keys * s->num_q_heads * (2.0 * s->head_size);
}

double varlen_spec_logit_std(const varlen_spec *s)
{
    return logit_std(s->q_amp, s->k_amp, s->softmax_scale, s->head_size);
}

void varlen_spec_describe(const varlen_spec *s, char *buf, size_t len)
{
    int n = snprintf(buf, len,
                     "varlen %s hq=%d hkv=%d D=%d causal=%d scale=%.9g softcap=%.9g sinks=%d(%g+-%g) "
                     "lse=%d/%d sizes=%s layout=%s "
                     "token_pad=%d/%d/%d/%d head_pad=%d/%d/%d/%d slack=%d nan_fill=%d amp=%g/%g "
                     "k_growth=%g voff=%g segments=",
                     tu_dtype_name(s->dtype), (int)s->num_q_heads, (int)s->num_kv_heads,
                     (int)s->head_size, (int)s->causal, (double)s->softmax_scale,
                     (double)s->logit_softcap, (int)s->use_sinks, s->sink_center, s->sink_amp,
                     (int)s->use_lse, (int)s->lse_pad, s->struct_sizes_0_1 ? "0.1" : "0.3", s->layout == VARLEN_FUSED ? "fused" : "separate",
                     (int)s->token_pad[0], (int)s->token_pad[1], (int)s->token_pad[2],
                     (int)s->token_pad[3], (int)s->head_pad[0], (int)s->head_pad[1],
                     (int)s->head_pad[2], (int)s->head_pad[3], (int)s->max_seqlen_slack,
                     (int)s->nan_fill, s->q_amp, s->k_amp, s->k_growth, s->v_offset);
    for (int32_t i = 0; i < s->num_segments && n > 0; ++i) {
        char item[16]; /* ",N": at most 12 bytes */
        snprintf(item, sizeof item, "%s%d", i ? "," : "", (int)s->seg_len[i]);
        if (!append_whole(buf, len, item))
            break;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* varlen problem                                                                               */

static uint64_t varlen_input_hash(const varlen_problem *p)
{
    uint64_t h = tu_hash(p->cu_seqlens, sizeof(int32_t) * ((size_t)p->spec.num_segments + 1));
    if (p->qkv) {
        h ^= tu_hash(p->qkv, p->qkv_bytes) * 3;
    } else {
        h ^= tu_hash(p->q, p->q_bytes) * 5;
        h ^= tu_hash(p->k, p->k_bytes) * 7;
        h ^= tu_hash(p->v, p->v_bytes) * 11;
    }
    if (p->sinks) {
        h ^= tu_hash(p->sinks, sizeof(float) * (size_t)p->spec.num_q_heads) * 13;
    }
    return h;
}

/* The float64 oracle of p's current host buffers into p->ref and p->ref_max. */
int varlen_problem_oracle(varlen_problem *p)
{
    const varlen_spec *s = &p->spec;
    const r35a_varlen_attention_desc *d = &p->desc;
    oracle_varlen o;
    memset(&o, 0, sizeof o);
    o.dtype = s->dtype;
    o.num_segments = s->num_segments;
    o.num_tokens = p->num_tokens;
    o.num_q_heads = s->num_q_heads;
    o.num_kv_heads = s->num_kv_heads;
    o.head_size = s->head_size;
    o.causal = s->causal;
    o.softmax_scale = (double)d->softmax_scale;
    o.logit_softcap = (double)s->logit_softcap;
    o.sinks = p->sinks;
    o.q = p->q;
    o.q_token_stride = d->q_token_stride;
    o.q_head_stride = d->q_head_stride;
    o.k = p->k;
    o.k_token_stride = d->k_token_stride;
    o.k_head_stride = d->k_head_stride;
    o.v = p->v;
    o.v_token_stride = d->v_token_stride;
    o.v_head_stride = d->v_head_stride;
    o.cu_seqlens = p->cu_seqlens;
    o.lse = p->lse.ref;
    const double t0 = now_seconds();
    const int orc = oracle_varlen_attention(&o, p->ref);
    g_time_oracle += now_seconds() - t0;
    if (orc != 0) {
        return -1;
    }
    p->ref_max = max_abs(p->ref, (size_t)p->num_tokens * (size_t)s->num_q_heads * (size_t)s->head_size);
    return 0;
}

int varlen_problem_init(varlen_problem *p, const varlen_spec *spec, tu_rng *rng)
{
    const double t_start = now_seconds();
    memset(p, 0, sizeof *p);
    p->spec = *spec;
    const varlen_spec *s = &p->spec;
    const r35a_dtype dt = s->dtype;
    const size_t es = tu_dtype_size(dt);
    const int32_t hq = s->num_q_heads, hkv = s->num_kv_heads, D = s->head_size;

    int32_t tokens = 0, max_len = 0;
    p->cu_seqlens = tu_alloc(sizeof(int32_t) * ((size_t)s->num_segments + 1));
    p->cu_seqlens[0] = 0;
    for (int32_t i = 0; i < s->num_segments; ++i) {
        tokens += s->seg_len[i];
        max_len = s->seg_len[i] > max_len ? s->seg_len[i] : max_len;
        p->cu_seqlens[i + 1] = tokens;
    }
    p->num_tokens = tokens;

    r35a_varlen_attention_desc *d = &p->desc;
    memset(d, 0, sizeof *d);
    d->struct_size = sizeof *d;
    d->dtype = dt;
    d->num_segments = s->num_segments;
    d->num_tokens = tokens;
    d->max_seqlen = max_len + s->max_seqlen_slack;
    d->num_q_heads = hq;
    d->num_kv_heads = hkv;
    d->head_size = D;
    d->causal = s->causal;
    d->softmax_scale = s->softmax_scale > 0.0f ? s->softmax_scale : (float)(1.0 / sqrt((double)D));
    d->logit_softcap = s->logit_softcap;
    d->use_sinks = s->use_sinks;
    if (s->struct_sizes_0_1) {
        d->struct_size = offsetof(r35a_varlen_attention_desc, use_sinks);
    }
    lse_init(&p->lse, s->use_lse && !s->struct_sizes_0_1, tokens, hq, s->lse_pad);
    d->use_lse = p->lse.buf != NULL;
    d->lse_token_stride = p->lse.buf ? p->lse.token_stride : hq;
    d->lse_head_stride = 1;
    if (s->use_sinks) {
        p->sinks = make_sinks(hq, s->sink_center, s->sink_amp, false, rng);
    }

    if (s->layout == VARLEN_FUSED) {
        const int64_t ts = (int64_t)(hq + 2 * hkv) * D + s->token_pad[0];
        const size_t elems = (size_t)tokens * (size_t)ts;
        p->qkv_bytes = elems * es;
        p->qkv = tu_alloc(p->qkv_bytes);
        fill_background(dt, p->qkv, elems, s->nan_fill, rng);
        p->q = p->qkv;
        p->k = (uint8_t *)p->qkv + (size_t)hq * (size_t)D * es;
        p->v = (uint8_t *)p->qkv + (size_t)(hq + hkv) * (size_t)D * es;
        d->q_token_stride = d->k_token_stride = d->v_token_stride = ts;
        d->q_head_stride = d->k_head_stride = d->v_head_stride = D;
    } else {
        d->q_head_stride = (int64_t)D + s->head_pad[0];
        d->q_token_stride = (int64_t)hq * d->q_head_stride + s->token_pad[0];
        d->k_head_stride = (int64_t)D + s->head_pad[1];
        d->k_token_stride = (int64_t)hkv * d->k_head_stride + s->token_pad[1];
        d->v_head_stride = (int64_t)D + s->head_pad[2];
        d->v_token_stride = (int64_t)hkv * d->v_head_stride + s->token_pad[2];
        const size_t qe = (size_t)tokens * (size_t)d->q_token_stride;
        const size_t ke = (size_t)tokens * (size_t)d->k_token_stride;
        const size_t ve = (size_t)tokens * (size_t)d->v_token_stride;
        p->q_bytes = qe * es;
        p->k_bytes = ke * es;
        p->v_bytes = ve * es;
        p->q = tu_alloc(p->q_bytes);
        p->k = tu_alloc(p->k_bytes);
        p->v = tu_alloc(p->v_bytes);
        fill_background(dt, p->q, qe, s->nan_fill, rng);
        fill_background(dt, p->k, ke, s->nan_fill, rng);
        fill_background(dt, p->v, ve, s->nan_fill, rng);
    }
    d->o_head_stride = (int64_t)D + s->head_pad[3];
    d->o_token_stride = (int64_t)hq * d->o_head_stride + s->token_pad[3];

    int32_t seg = 0;
    for (int32_t t = 0; t < tokens; ++t) {
        while (t >= p->cu_seqlens[seg + 1]) {
            ++seg;
        }
        const int32_t len = p->cu_seqlens[seg + 1] - p->cu_seqlens[seg];
        const double pos = len > 1 ? (double)(t - p->cu_seqlens[seg]) / (double)(len - 1) : 0.0;
        const double k_amp = s->k_amp * (1.0 + s->k_growth * pos);
        for (int32_t h = 0; h < hq; ++h) {
            fill_vector(dt, p->q, t * d->q_token_stride + h * d->q_head_stride, D, s->q_amp, 0.0, rng);
        }
        for (int32_t g = 0; g < hkv; ++g) {
            fill_vector(dt, p->k, t * d->k_token_stride + g * d->k_head_stride, D, k_amp, 0.0, rng);
            fill_vector(dt, p->v, t * d->v_token_stride + g * d->v_head_stride, D, 1.0, s->v_offset,
                        rng);
        }
    }

    p->out_guard_bytes = OUT_GUARD_BYTES;
    p->out_alloc_bytes = 2 * OUT_GUARD_BYTES + (size_t)tokens * (size_t)d->o_token_stride * es;
    p->out_alloc = tu_alloc(p->out_alloc_bytes);
    p->out_mask = tu_alloc(p->out_alloc_bytes);
    memset(p->out_mask, 0, p->out_alloc_bytes);
    mark_rows(p->out_mask, p->out_guard_bytes, es, tokens, hq, D, d->o_token_stride, d->o_head_stride);

    const size_t ref_elems = (size_t)tokens * (size_t)hq * (size_t)D;
    p->ref = calloc(ref_elems ? ref_elems : 1, sizeof(double));
    g_time_build += now_seconds() - t_start;
    if (!s->defer_oracle && varlen_problem_oracle(p) != 0) {
        return -1;
    }
    p->input_hash = varlen_input_hash(p);
    return 0;
}

void varlen_problem_free(varlen_problem *p)
{
    if (p->qkv) {
        tu_free(p->qkv);
    } else {
        tu_free(p->q);
        tu_free(p->k);
        tu_free(p->v);
    }
    tu_free(p->out_alloc);
    tu_free(p->out_mask);
    tu_free(p->cu_seqlens);
    tu_free(p->sinks);
    free(p->ref);
    lse_free(&p->lse);
    memset(p, 0, sizeof *p);
}

bool varlen_problem_check(r35a_context *ctx, varlen_problem *p, const r35a_plan *plan,
                          const tu_mem *mem, const char *label)
{
    const varlen_spec *s = &p->spec;
    const r35a_dtype dt = s->dtype;
    const size_t es = tu_dtype_size(dt);
    r35a_plan *own_plan = NULL;
    if (!plan) {
        r35a_status st = r35a_varlen_attention_plan(ctx, &p->desc, &own_plan);
        if (st != R35A_OK) {
            print_status_failure(label, "r35a_varlen_attention_plan", st);
            tu_stats_record(dt, INFINITY, false, label);
            return false;
        }
        plan = own_plan;
    }
    r35a_plan_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    r35a_status st = r35a_plan_get_info(plan, &info);
    if (st != R35A_OK) {
        print_status_failure(label, "r35a_plan_get_info", st);
        r35a_plan_destroy(own_plan);
        tu_stats_record(dt, INFINITY, false, label);
        return false;
    }

    tu_poison(p->out_alloc, p->out_alloc_bytes);
    void *dqkv = NULL, *dq, *dk, *dv;
    if (p->qkv) {
        dqkv = mem->upload(mem->user, p->qkv, p->qkv_bytes);
        dq = dqkv;
        dk = (uint8_t *)dqkv + ((uint8_t *)p->k - (uint8_t *)p->qkv);
        dv = (uint8_t *)dqkv + ((uint8_t *)p->v - (uint8_t *)p->qkv);
    } else {
        dq = mem->upload(mem->user, p->q, p->q_bytes);
        dk = mem->upload(mem->user, p->k, p->k_bytes);
        dv = mem->upload(mem->user, p->v, p->v_bytes);
    }
    void *dout = mem->upload(mem->user, p->out_alloc, p->out_alloc_bytes);
    void *dcu = mem->upload(mem->user, p->cu_seqlens, sizeof(int32_t) * ((size_t)s->num_segments + 1));
    void *dsinks = p->sinks ? mem->upload(mem->user, p->sinks, sizeof(float) * (size_t)s->num_q_heads) : NULL;
    void *ws = info.workspace_bytes ? mem->alloc(mem->user, info.workspace_bytes) : NULL;
    if (p->lse.buf)
        tu_poison(p->lse.buf, sizeof(float) * (p->lse.elems ? p->lse.elems : 1));
    void *dlse = p->lse.buf ? mem->upload(mem->user, p->lse.buf, sizeof(float) * (p->lse.elems ? p->lse.elems : 1))
                            : NULL;

    r35a_varlen_attention_args args;
    memset(&args, 0, sizeof args);
    args.struct_size = sizeof args;
    args.q = dq;
    args.k = dk;
    args.v = dv;
    args.out = (uint8_t *)dout + p->out_guard_bytes;
    args.cu_seqlens = dcu;
    args.sinks = dsinks;
    args.lse = dlse;
    if (s->struct_sizes_0_1) {
        args.struct_size = offsetof(r35a_varlen_attention_args, sinks);
    }

    bool ok = true;
    const double t_run = now_seconds();
    st = r35a_varlen_attention_run(ctx, plan, &args, ws, info.workspace_bytes, mem->stream);
    if (st != R35A_OK) {
        print_status_failure(label, "r35a_varlen_attention_run", st);
        ok = false;
    } else if (strcmp(r35a_last_error_detail(), "") != 0) {
        printf("FAIL %s\n  a successful run left r35a_last_error_detail() = \"%s\"\n", label,
               r35a_last_error_detail());
        ok = false;
    }
    if (ok && mem->sync(mem->user, mem->stream) != 0) {
        printf("FAIL %s\n  sync failed\n", label);
        ok = false;
    }
    g_time_library += now_seconds() - t_run;
    if (ok) {
        mem->download(mem->user, p->out_alloc, dout, p->out_alloc_bytes);
        if (dlse)
            mem->download(mem->user, p->lse.buf, dlse, sizeof(float) * (p->lse.elems ? p->lse.elems : 1));
    }
    if (dlse) {
        mem->release(mem->user, dlse, p->lse.buf);
    }
    if (p->qkv) {
        mem->release(mem->user, dqkv, p->qkv);
    } else {
        mem->release(mem->user, dq, p->q);
        mem->release(mem->user, dk, p->k);
        mem->release(mem->user, dv, p->v);
    }
    mem->release(mem->user, dout, p->out_alloc);
    mem->release(mem->user, dcu, p->cu_seqlens);
    if (dsinks) {
        mem->release(mem->user, dsinks, p->sinks);
    }
    if (ws) {
        mem->release(mem->user, ws, NULL);
    }
    r35a_plan_destroy(own_plan);
    if (!ok) {
        tu_stats_record(dt, INFINITY, false, label);
        return false;
    }

    const double t_check = now_seconds();
    tu_check c;
    tu_check_begin(&c, dt, p->ref_max, "token,head,elem,segment");
    const size_t guard_elems = p->out_guard_bytes / es;
    for (int32_t i = 0; i < s->num_segments; ++i) {
        for (int32_t t = p->cu_seqlens[i]; t < p->cu_seqlens[i + 1]; ++t) {
            for (int32_t h = 0; h < s->num_q_heads; ++h) {
                const size_t base = guard_elems + (size_t)(t * p->desc.o_token_stride +
                                                           h * p->desc.o_head_stride);
                const double *ref = p->ref + ((size_t)t * (size_t)s->num_q_heads + (size_t)h) *
                                                 (size_t)s->head_size;
                for (int32_t e = 0; e < s->head_size; ++e) {
                    tu_check_elem(&c, p->out_alloc, base + (size_t)e, ref[e], t, h, e, i);
                }
            }
        }
    }
    tu_check_untouched(&c, p->out_alloc, p->out_mask, p->out_alloc_bytes);
    bool passed = tu_check_passed(&c);
    if (p->lse.buf && !h_lse_check(&p->lse, dt, p->num_tokens, s->num_q_heads, label)) {
        passed = false;
    }
    if (varlen_input_hash(p) != p->input_hash) {
        printf("FAIL %s\n  the call modified an input buffer (q, k, v or cu_seqlens)\n", label);
        passed = false;
    }
    if (!passed) {
        tu_check_report(&c, label);
        printf("  implementation \"%s\"\n", info.implementation);
    }
    tu_stats_record(dt, tu_check_error(&c), passed, label);
    g_time_check += now_seconds() - t_check;
    return passed;
}

bool varlen_run_case(r35a_context *ctx, const varlen_spec *spec, tu_rng *rng, const char *group,
                     int index)
{
    char label[160];
    snprintf(label, sizeof label, "%s:%d", group, index);
    varlen_problem p;
    if (varlen_problem_init(&p, spec, rng) != 0) {
        char desc[8192];
        varlen_spec_describe(spec, desc, sizeof desc);
        printf("FAIL %s: harness could not build the problem: %s\n", label, desc);
        varlen_problem_free(&p);
        tu_stats_record(spec->dtype, INFINITY, false, label);
        return false;
    }
    bool ok = varlen_problem_check(ctx, &p, NULL, tu_mem_host(), label);
    if (tu_verbose()) {
        char desc[8192];
        varlen_spec_describe(spec, desc, sizeof desc);
        printf("case %s %s error %.3e: %s\n", label, ok ? "ok" : "FAILED", tu_last_error(), desc);
    }
    if (!ok) {
        char desc[8192];
        varlen_spec_describe(spec, desc, sizeof desc);
        printf("  case: %s\n  replay: R35A_TEST_SEED=0x%016llx R35A_TEST_CASE=%s\n", desc,
               (unsigned long long)tu_seed(), label);
    }
    varlen_problem_free(&p);
    return ok;
}
