/* bench.h - internals of r35a_bench, the librdna35attn benchmark CLI (not installed).
 *
 * Files: options.c parses the command line into a list of row shapes (presets.c adds the named
 * sweeps); problem.c builds one row's problem (random inputs, shuffled block tables, the bytes-moved
 * model) and calls the library on it; memory.c says where buffers live (host memory for the
 * reference, device memory through gpu_device.c for a HIP or CUDA context); roofline.c measures the
 * peak bandwidth (a host copy, or the embedded read-stream kernel on the device); report.c prints
 * the table, CSV or JSON; bench.c ties them together and times the rows.
 */
#ifndef R35A_BENCH_H
#define R35A_BENCH_H

#include "rdna35attn.h"

#include "gpu_device.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    BENCH_MAX_CONTEXTS = 64,       /* --contexts items */
    BENCH_MAX_SEGMENT_ROWS = 64,   /* --segments rows */
    BENCH_MAX_SEGMENTS = 4096,     /* segments over all --segments rows */
    BENCH_MAX_BUFFERS = 12         /* buffers one call touches */
};

/* Process exit codes. */
enum { BENCH_EXIT_OK = 0, BENCH_EXIT_ERROR = 1, BENCH_EXIT_USAGE = 2, BENCH_EXIT_CHECK_FAILED = 3 };

typedef enum bench_op { BENCH_OP_PAGED = 0, BENCH_OP_ENCODER = 1 } bench_op;
typedef enum bench_format { BENCH_FORMAT_TABLE = 0, BENCH_FORMAT_JSON = 1, BENCH_FORMAT_CSV = 2 } bench_format;

/* The whole bench model of "bytes a call must move at least"; printed by --help and in JSON. */
#define BENCH_BYTES_MODEL_PAGED                                                                     \
    "K and V bytes of every key some query row reaches (with --window only the window's keys: "    \
    "positions L-M-W+1 .. L-1 of each sequence), + Q read + O written + metadata read "           \
    "(seq_lens, query_start_loc, and the block-table entries of the reached pages), + the LSE written " \
    "with --lse"
#define BENCH_BYTES_MODEL_ENCODER                                                                   \
    "Q, K and V read once + O written once + cu_seqlens (+ the LSE written with --lse); FLOPs = "  \
    "4 * D * q_heads * (key, query) pairs (QK^T and PV)"

/* The working set a GPU row rotates through by default: at least this, and at least 4x the
 * device's last-level cache where the runtime reports it (above every gfx11 MALL, 32-96 MiB, and the
 * H200's 50 MiB L2). */
#define BENCH_GPU_MIN_WORKING_SET_MB 512.0

/* ---- options.c ---------------------------------------------------------------------------- */

/* One row: the problem of one timed call. */
typedef struct bench_shape {
    bench_op op;
    r35a_dtype dtype;
    int32_t head_size;
    int32_t num_q_heads;
    int32_t num_kv_heads;
    /* paged */
    int32_t page_size;
    int32_t batch;               /* sequences per call, all of length context */
    int32_t query_len;           /* M: query tokens per sequence */
    int32_t window;              /* 0 = none */
    int32_t context;             /* L */
    r35a_dtype kv_dtype;         /* 0 = dtype; R35A_DTYPE_FP8_E4M3 / R35A_DTYPE_INT8: 8-bit cache */
    int32_t kv_scales;           /* 8-bit: an r35a_kv_scale_granularity (--kv-scales) */
    bool alibi;
    /* both ops */
    bool sinks;
    bool lse;                    /* the softmax LSE output (use_lse) */
    double softcap;              /* 0 = off */
    /* encoder: segments opt->segment_lens[segment_first .. segment_first + num_segments - 1] */
    int segment_first;
    int num_segments;
    bool causal;
} bench_shape;

/* Shape fields, as bits of bench_options.varying (the fields that differ between rows). */
enum {
    BENCH_FIELD_DTYPE = 1u << 0,
    BENCH_FIELD_HEAD_SIZE = 1u << 1,
    BENCH_FIELD_Q_HEADS = 1u << 2,
    BENCH_FIELD_KV_HEADS = 1u << 3,
    BENCH_FIELD_PAGE_SIZE = 1u << 4,
    BENCH_FIELD_BATCH = 1u << 5,
    BENCH_FIELD_QUERY_LEN = 1u << 6,
    BENCH_FIELD_WINDOW = 1u << 7,
    BENCH_FIELD_CONTEXT = 1u << 8,
    BENCH_FIELD_SEGMENTS = 1u << 9,
    BENCH_FIELD_CAUSAL = 1u << 10
};

typedef struct bench_options {
    /* the shape the flags describe (a preset replaces the fields it sets) */
    bench_op op;
    r35a_dtype dtype;
    int32_t head_size;
    int32_t num_q_heads;
    int32_t num_kv_heads;
    int32_t page_size;
    int32_t batch;
    int32_t query_len;
    int32_t window;
    r35a_dtype kv_dtype;         /* 0 = dtype; R35A_DTYPE_FP8_E4M3 / R35A_DTYPE_INT8: 8-bit cache */
    int32_t kv_scales;           /* 8-bit: an r35a_kv_scale_granularity (--kv-scales) */
    bool alibi;
    bool sinks;                  /* both ops */
    bool lse;                    /* both ops: write the softmax LSE (--lse) */
    double softcap;              /* both ops; 0 = off */
    int32_t contexts[BENCH_MAX_CONTEXTS];
    int num_contexts;
    /* encoder: --segments row r is segment_lens[segment_row_start[r] .. segment_row_start[r+1]-1] */
    int32_t segment_lens[BENCH_MAX_SEGMENTS];
    int segment_row_start[BENCH_MAX_SEGMENT_ROWS + 1];
    int num_segment_rows;
    bool causal;
    const char *preset;          /* --preset name, NULL without */
    /* the rows, built from the above by bench_parse_options; free with bench_options_free */
    bench_shape *shapes;
    int num_shapes;
    unsigned varying;            /* BENCH_FIELD_* bits that differ between rows */
    /* measurement */
    r35a_backend backend;
    double min_working_set_mb;   /* < 0: automatic (GPU: see BENCH_GPU_MIN_WORKING_SET_MB; host: 0) */
    int32_t iters;               /* 0 = adapt to the row's run time */
    double peak_gbs;             /* 0 = measure */
    double peak_tflops;          /* the device's dense matrix peak for the dtype; 0 = no "% mma" column */
    bool check;                  /* compare against a reference context */
    bool graph;                  /* also time the calls captured in a HIP/CUDA graph */
    bool list;                   /* --list: print the rows and exit */
    uint64_t seed;
    bool seed_given;
    bench_format format;
} bench_options;

/* Parses argv into *opt. Returns BENCH_EXIT_OK, or BENCH_EXIT_USAGE after printing the problem to
 * stderr. *help_shown is set when --help printed the usage (the caller then exits 0). */
int bench_parse_options(int argc, char **argv, bench_options *opt, bool *help_shown);
void bench_options_free(bench_options *opt);
/* The row's size for the table, JSON and CSV: the fields in opt->varying (the context alone for a
 * plain context sweep; "D128 Hq32 M4 B16 L8192"-like for a preset), or the segment list. */
void bench_shape_label(const bench_options *opt, const bench_shape *shape, char *buf, size_t len);
/* An encoder shape's segment lengths, "577,577,...", cut with ",..." when they do not fit. */
void bench_segments_label(const bench_options *opt, const bench_shape *shape, char *buf, size_t len);
const char *bench_dtype_name(r35a_dtype dtype);
const char *bench_backend_name(r35a_backend backend);

/* Rows whose call costs more flops than this are not checked against the reference context (its
 * single-threaded host loop would take minutes: a 2048-token chunk over 16K keys is ~1e12); the
 * tests check those kernels against the float64 oracle on smaller shapes. */
#define BENCH_CHECK_MAX_FLOPS 5e10

/* ---- presets.c ---------------------------------------------------------------------------- */

/* The flags a preset sets itself (they are refused next to it). */
enum {
    BENCH_SETS_OP = 1u << 0,
    BENCH_SETS_HEAD_SIZE = 1u << 1,
    BENCH_SETS_HEADS = 1u << 2,      /* --q-heads and --kv-heads */
    BENCH_SETS_PAGE_SIZE = 1u << 3,
    BENCH_SETS_BATCH = 1u << 4,
    BENCH_SETS_M = 1u << 5,
    BENCH_SETS_CONTEXTS = 1u << 6
};

typedef struct bench_preset {
    const char *name;
    const char *summary;         /* one line for --help */
    bench_op op;
    unsigned sets;               /* BENCH_SETS_* */
    int32_t default_context;     /* paged, without --contexts: this one context (0: the bench's list) */
    const char *default_segments; /* encoder, without --segments: this one row (NULL: the bench's rows) */
    /* appends its rows to shapes (capacity *cap, grown with realloc); 0, or -1 when out of memory */
    int (*build)(const bench_options *opt, bench_shape **shapes, int *count, int *cap);
} bench_preset;

extern const bench_preset bench_presets[];
extern const int bench_num_presets;
const bench_preset *bench_find_preset(const char *name);

/* ---- memory.c ----------------------------------------------------------------------------- */

/* Where the problem's buffers live and how to reach them. Functions return 0, or -1 with the reason
 * in error(self). The host table serves the reference context; the device table (gpu_device.c:
 * HIP or CUDA, matching the context's backend) serves GPU contexts, with a stream of its own. */
typedef struct bench_memory {
    const char *name;            /* "host", "hip device", "cuda device" */
    gpu_device *gpu;            /* device memory: its runtime; NULL for host memory */
    void *self;                  /* passed back to every function */
    void *stream;                /* passed to the library's run() */
    int (*alloc)(void *self, void **ptr, size_t bytes);
    void (*release)(void *self, void *ptr);
    int (*upload)(void *self, void *dst, const void *host_src, size_t bytes);
    int (*download)(void *self, void *host_dst, const void *src, size_t bytes);
    int (*copy)(void *self, void *dst, const void *src, size_t bytes);
    int (*fill)(void *self, void *dst, int byte, size_t bytes);
    int (*synchronize)(void *self);
    const char *(*error)(void *self);
} bench_memory;

/* Opens the memory that a context of this backend works on: host memory for the reference, the
 * device of a "hip" or "cuda" context through its runtime. False with the reason in why when the
 * bench cannot provide it. */
bool bench_memory_open(const r35a_context_info *info, bench_memory *mem, char *why, size_t why_len);
void bench_memory_close(bench_memory *mem);

double bench_now_seconds(void);
/* Sorts values in place and returns their median. */
double bench_median(double *values, int count);

/* ---- roofline.c --------------------------------------------------------------------------- */

/* Peak bandwidth of mem. Host: a large memcpy (bytes read + bytes written per second, median of
 * several). Device: the best read stream of the embedded read kernel over its unroll, load and grid
 * settings (bytes read per second), or a device copy when this build has no read kernel for arch.
 * Returns 0, or -1 with the reason in why; method describes what was measured. */
int bench_measure_peak(const bench_memory *mem, const char *arch, double *gbs, char *method, size_t method_len,
                       char *why, size_t why_len);

/* ---- problem.c ---------------------------------------------------------------------------- */

/* One row's problem. All buffers of one call sit in one slab at offset[]; the host slab holds the
 * inputs (and a poisoned output) and is uploaded to every copy the row rotates through. */
typedef struct bench_problem {
    bench_op op;
    union {
        r35a_paged_attention_desc paged;
        r35a_varlen_attention_desc varlen;
    } desc;
    r35a_dtype dtype;
    int num_buffers;
    int out_buffer;
    size_t offset[BENCH_MAX_BUFFERS];
    size_t size[BENCH_MAX_BUFFERS];
    size_t slab_bytes;
    unsigned char *host;         /* slab_bytes of host memory */
    double bytes_moved;          /* see BENCH_BYTES_MODEL_* */
    double flops;
    int32_t tokens;              /* encoder: tokens of the call */
} bench_problem;

/* Builds the problem of shape with inputs from seed. Returns 0, or -1 with the reason in why. */
int bench_problem_build(const bench_options *opt, const bench_shape *shape, uint64_t seed, bench_problem *problem,
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
/* The largest max error that passes for dtype: 4 units in the last place at 1.0 of the output
 * type (two correct results rounded separately differ by up to one; accumulation order adds a
 * little), 1e-4 for f32. */
double bench_error_tolerance(r35a_dtype dtype);

/* ---- report.c ----------------------------------------------------------------------------- */

typedef struct bench_machine {
    char cpu[128];               /* CPU model from /proc/cpuinfo */
    long cpus;                   /* online CPUs */
    r35a_context_info context;   /* the measured context */
    char device[128];            /* the GPU's name from its runtime, "" on the reference */
    char memory[192];            /* where the buffers live, for the header */
    double peak_gbs;
    bool peak_measured;
    char peak_method[256];
    double working_set_mb;       /* the resolved --min-working-set-mb */
    char working_set_why[128];   /* how it was chosen */
    const char *timing;          /* how a call is timed */
} bench_machine;

typedef struct bench_row {
    const bench_shape *shape;
    char label[96];
    char implementation[128];
    char fallback_reason[256];
    uint32_t grid[3];
    uint32_t block[3];
    int32_t splits;
    size_t workspace_bytes;
    int32_t tokens;
    int copies;
    double working_set_mb;       /* copies x slab */
    int iters;
    double median_s;             /* plain launches */
    double min_s;
    bool graph_timed;
    int graph_calls;             /* calls captured in one graph */
    int graph_replays;
    double graph_median_s;       /* per call, from the median replay */
    double bytes_moved;
    double flops;
    double gbs;                  /* from graph_median_s with --graph, else median_s */
    double roofline_pct;
    double gflops;
    bool error_checked;
    bool error_vs_self;          /* the measured context is itself the reference */
    double max_error;
    bool check_failed;           /* NaN, or above bench_error_tolerance */
} bench_row;

void bench_read_cpu_model(char *buf, size_t len);
void bench_report_begin(const bench_options *opt, const bench_machine *machine);
void bench_report_row(const bench_options *opt, const bench_machine *machine, const bench_row *row,
                      const bench_row *previous);
void bench_report_end(const bench_options *opt, const bench_machine *machine, const bench_row *rows,
                      int num_rows, double elapsed_s);

#endif
