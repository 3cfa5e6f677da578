/* bench.h - internals of r35a_bench, the librdna35attn benchmark CLI (not installed).
 *
 * Files: options.c parses the command line; problem.c builds one row's problem (random inputs,
 * shuffled block tables, the bytes-moved model) and calls the library on it; memory.c says where
 * buffers live (host today, device memory later) and measures the peak bandwidth; report.c prints
 * the table, CSV or JSON; bench.c ties them together and times the rows.
 */
#ifndef R35A_BENCH_H
#define R35A_BENCH_H

#include "rdna35attn.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    BENCH_MAX_ROWS = 64,         /* contexts (paged) or segment lists (encoder) per run */
    BENCH_MAX_SEGMENTS = 4096,   /* segments over all encoder rows */
    BENCH_MAX_BUFFERS = 12       /* buffers one call touches */
};

/* Process exit codes. */
enum { BENCH_EXIT_OK = 0, BENCH_EXIT_ERROR = 1, BENCH_EXIT_USAGE = 2 };

typedef enum bench_op { BENCH_OP_PAGED = 0, BENCH_OP_ENCODER = 1 } bench_op;
typedef enum bench_format { BENCH_FORMAT_TABLE = 0, BENCH_FORMAT_JSON = 1, BENCH_FORMAT_CSV = 2 } bench_format;

/* The whole bench model of "bytes a call must move at least"; printed by --help and in JSON. */
#define BENCH_BYTES_MODEL_PAGED                                                                     \
    "K and V bytes of every key some query row reaches (with --window only the window's keys: "    \
    "positions L-M-W+1 .. L-1 of each sequence), + Q read + O written + metadata read "           \
    "(seq_lens, query_start_loc, and the block-table entries of the reached pages)"
#define BENCH_BYTES_MODEL_ENCODER                                                                   \
    "Q, K and V read once + O written once + cu_seqlens; FLOPs = 4 * D * q_heads * (key, query) " \
    "pairs (QK^T and PV)"

/* ---- options.c ---------------------------------------------------------------------------- */

typedef struct bench_options {
    bench_op op;
    r35a_dtype dtype;
    int32_t head_size;
    int32_t num_q_heads;
    int32_t num_kv_heads;
    /* paged */
    int32_t page_size;
    int32_t batch;
    int32_t query_len;           /* M: query tokens per sequence */
    int32_t window;              /* 0 = none */
    r35a_dtype kv_dtype;         /* 0 = dtype; R35A_DTYPE_FP8_E4M3 / R35A_DTYPE_INT8: 8-bit cache */
    bool alibi;
    /* both ops */
    bool sinks;
    double softcap;              /* 0 = off */
    int32_t contexts[BENCH_MAX_ROWS];
    int num_contexts;
    /* encoder: row r has segments segment_lens[segment_row_start[r] .. segment_row_start[r+1]-1] */
    int32_t segment_lens[BENCH_MAX_SEGMENTS];
    int segment_row_start[BENCH_MAX_ROWS + 1];
    int num_segment_rows;
    bool causal;
    /* measurement */
    r35a_backend backend;
    double min_working_set_mb;   /* 0 = one copy of the buffers */
    int32_t iters;               /* 0 = adapt to the row's run time */
    double peak_gbs;             /* 0 = measure */
    bool check;                  /* compare against a reference context */
    uint64_t seed;
    bool seed_given;
    bench_format format;
} bench_options;

/* Parses argv into *opt. Returns BENCH_EXIT_OK, or BENCH_EXIT_USAGE after printing the problem to
 * stderr. *help_shown is set when --help printed the usage (the caller then exits 0). */
int bench_parse_options(int argc, char **argv, bench_options *opt, bool *help_shown);
int bench_num_rows(const bench_options *opt);
const char *bench_dtype_name(r35a_dtype dtype);
const char *bench_backend_name(r35a_backend backend);

/* ---- memory.c ----------------------------------------------------------------------------- */

/* Where the problem's buffers live and how to reach them. Functions return 0 on success. The host
 * table serves the reference context; a device table (hipMalloc/hipMemcpy/hipMemset/
 * hipStreamSynchronize looked up with dlopen, or their CUDA twins) will serve GPU contexts. */
typedef struct bench_memory {
    const char *name;
    void *self;                  /* passed back to every function */
    void *stream;                /* passed to the library's run() */
    void *(*alloc)(void *self, size_t bytes);
    void (*release)(void *self, void *ptr);
    int (*upload)(void *self, void *dst, const void *host_src, size_t bytes);
    int (*download)(void *self, void *host_dst, const void *src, size_t bytes);
    int (*copy)(void *self, void *dst, const void *src, size_t bytes);
    int (*fill)(void *self, void *dst, int byte, size_t bytes);
    int (*synchronize)(void *self, void *stream);
} bench_memory;

/* Picks the memory that a context of this backend works on. False with the reason in why when the
 * bench cannot provide it. */
bool bench_memory_for_context(const r35a_context_info *info, bench_memory *mem, char *why, size_t why_len);

/* Peak bandwidth from a large copy in mem (bytes read + bytes written per second, median of
 * several). Returns 0, or -1 with the reason in why. method describes what was measured. */
int bench_measure_peak(const bench_memory *mem, double *gbs, char *method, size_t method_len,
                       char *why, size_t why_len);

double bench_now_seconds(void);
/* Sorts values in place and returns their median. */
double bench_median(double *values, int count);

/* ---- problem.c ---------------------------------------------------------------------------- */

/* One row's problem. All buffers of one call sit in one slab at offset[]; the host slab holds the
 * inputs (and a poisoned output) and is uploaded to every copy the row rotates through. */
typedef struct bench_problem {
    bench_op op;
    union {
        r35a_paged_attention_desc paged;
        r35a_varlen_attention_desc varlen;
    } desc;
    char label[64];              /* the row's size: the context, or the segment list */
    int32_t context;             /* paged: seq_lens of every sequence; encoder: tokens */
    int num_buffers;
    int out_buffer;
    size_t offset[BENCH_MAX_BUFFERS];
    size_t size[BENCH_MAX_BUFFERS];
    size_t slab_bytes;
    unsigned char *host;         /* slab_bytes of host memory */
    double bytes_moved;          /* see BENCH_BYTES_MODEL_* */
    double flops;
} bench_problem;

/* Builds row `row` of opt with inputs from seed. Returns 0, or -1 with the reason in why. */
int bench_problem_build(const bench_options *opt, int row, uint64_t seed, bench_problem *problem,
                        char *why, size_t why_len);
void bench_problem_free(bench_problem *problem);
r35a_status bench_problem_plan(r35a_context *context, const bench_problem *problem, r35a_plan **plan);
/* Runs plan on the buffers of the slab at `slab` (laid out like problem->host); out, when not
 * NULL, replaces the slab's output buffer. */
r35a_status bench_problem_run(r35a_context *context, const r35a_plan *plan,
                              const bench_problem *problem, void *slab, void *out, void *workspace,
                              size_t workspace_bytes, void *stream);
/* max |out - ref| / max |ref| over all output elements (max |out - ref| when ref is all zero);
 * NaN when any element of either is NaN. out and ref are host copies of the output buffer. */
double bench_max_rel_error(const bench_problem *problem, const void *out, const void *ref);

/* ---- report.c ----------------------------------------------------------------------------- */

typedef struct bench_machine {
    char cpu[128];               /* CPU model from /proc/cpuinfo */
    long cpus;                   /* online CPUs */
    r35a_context_info context;   /* the measured context */
    double peak_gbs;
    bool peak_measured;
    char peak_method[160];
} bench_machine;

typedef struct bench_row {
    char implementation[128];
    char fallback_reason[256];
    char label[64];
    int32_t context;
    int copies;
    int iters;
    double median_s;
    double min_s;
    double bytes_moved;
    double flops;
    double gbs;
    double roofline_pct;
    double gflops;
    bool error_checked;
    bool error_vs_self;          /* the measured context is itself the reference */
    double max_error;
} bench_row;

void bench_read_cpu_model(char *buf, size_t len);
void bench_report_begin(const bench_options *opt, const bench_machine *machine);
void bench_report_row(const bench_options *opt, const bench_machine *machine, const bench_row *row,
                      const bench_row *previous);
void bench_report_end(const bench_options *opt, const bench_machine *machine, const bench_row *rows,
                      int num_rows, double elapsed_s);

#endif
