/* emu_exec.c - the executing half of the stand-in HIP runtime: device memory, streams and kernel launches
 * on the gfx11 ISA emulator (../shared/gfx11emu), for tests/hip/test_emulator.c.
 *
 * Built only into r35a_emu_hip (fake_hip.c with FAKE_HIP_EMULATOR), which the library loads through
 * R35A_HIP_LIBRARY like any HIP runtime. It embeds a Python interpreter (libpython3) and imports
 * tests/hip/emu_runtime.py, which holds the gfx11emu objects.
 *
 *   Device memory is host memory the emulator addresses. hipMalloc maps every allocation on its own,
 *   followed by at least 64 KiB that are never registered, and registers exactly the requested bytes
 *   with gfx11emu: with check_bounds on, any kernel access outside a live allocation (the kernarg
 *   segment and the code object aside) stops the launch, and that launch's stream reports
 *   hipErrorIllegalAddress at its next synchronization. hipMemset(Async) and hipMemcpy check their
 *   ranges against the allocations in the same way (hipErrorInvalidValue).
 *   Streams are queues: hipMemsetAsync and hipModuleLaunchKernel append to the stream's queue, which
 *   runs in order when the stream is synchronized (hipStreamSynchronize, hipDeviceSynchronize,
 *   hipFree, which synchronizes the device as HIP's does, and, for the null stream only,
 *   hipMemcpy/hipMemset). Created streams behave as hipStreamNonBlocking ones: a caller that reads
 *   results without synchronizing their stream reads what was there before, as on a GPU.
 *   A failed launch drops the rest of its stream's queue (what follows depends on it) and counts as an
 *   emulator error; fake_hip_emulator_errors() lets a test check that none went unnoticed.
 *
 * Environment (test_emulator sets it from the build's paths): FAKE_HIP_GFX11EMU_DIR (the gfx11emu
 * folder), FAKE_HIP_PY_DIR (this folder, for emu_runtime.py), FAKE_HIP_PYCACHE (where Python's
 * bytecode caches go); tinygrad's CACHEDB and CC pass through. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "emu_exec.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

/* ---- the embedded interpreter ---- */

static PyObject *runtime_module;     /* emu_runtime */
static pthread_once_t python_once = PTHREAD_ONCE_INIT;
static char python_why[1024];

/* "Type: message" of the pending Python exception, which is cleared; *bounds is set for EmuCheckError. */
static void take_exception(char *out, size_t cap, bool *bounds)
{
    PyObject *type = NULL, *value = NULL, *tb = NULL;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    const char *type_name = type ? ((PyTypeObject *)type)->tp_name : "unknown error";
    PyObject *text = value ? PyObject_Str(value) : NULL;
    const char *message = text ? PyUnicode_AsUTF8(text) : NULL;
    snprintf(out, cap, "%s: %s", type_name, message ? message : "(no message)");
    if (bounds)
        *bounds = strstr(type_name, "EmuCheckError") != NULL;
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    PyErr_Clear();
}

static bool prepend_sys_path(const char *dir)
{
    PyObject *path = PySys_GetObject("path"); /* borrowed */
    PyObject *entry = PyUnicode_FromString(dir);
    bool ok = path && entry && PyList_Insert(path, 0, entry) == 0;
    Py_XDECREF(entry);
    return ok;
}

static void start_python(void)
{
    const char *emu_dir = getenv("FAKE_HIP_GFX11EMU_DIR");
    const char *py_dir = getenv("FAKE_HIP_PY_DIR");
    if (!emu_dir || !emu_dir[0] || !py_dir || !py_dir[0]) {
        snprintf(python_why, sizeof python_why,
                 "FAKE_HIP_GFX11EMU_DIR (the gfx11emu folder) and FAKE_HIP_PY_DIR (tests/hip) must be set");
        return;
    }
    /* This module was dlopen'ed RTLD_LOCAL, so libpython's symbols are not global, and the extension
     * modules the standard library loads (_ctypes, _sqlite3, ...) expect them to be: promote it. */
    Dl_info where;
    if (dladdr((void *)&Py_InitializeFromConfig, &where) && where.dli_fname)
        (void)dlopen(where.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);

    /* Isolated: PYTHONPATH, PYTHONHOME and user site-packages of the caller's environment stay out. */
    PyConfig config;
    PyConfig_InitIsolatedConfig(&config);
    config.install_signal_handlers = 0;
    /* Bytecode caches go to the build directory, not next to the sources (tests/hip, ../shared). */
    const char *pycache = getenv("FAKE_HIP_PYCACHE");
    PyStatus status = pycache && pycache[0] ? PyConfig_SetBytesString(&config, &config.pycache_prefix, pycache)
                                            : PyStatus_Ok();
    if (!PyStatus_Exception(status))
        status = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(status)) {
        snprintf(python_why, sizeof python_why, "Python initialization failed: %s",
                 status.err_msg ? status.err_msg : "?");
        return;
    }
    if (!prepend_sys_path(emu_dir) || !prepend_sys_path(py_dir)) {
        snprintf(python_why, sizeof python_why, "cannot extend sys.path");
    } else {
        runtime_module = PyImport_ImportModule("emu_runtime");
        if (!runtime_module) {
            char text[768];
            take_exception(text, sizeof text, NULL);
            snprintf(python_why, sizeof python_why, "import of emu_runtime (%s) / gfx11emu (%s) failed: %s", py_dir,
                     emu_dir, text);
        }
    }
    (void)PyEval_SaveThread(); /* every later call takes the GIL with PyGILState_Ensure */
}

static bool python_ready(void)
{
    pthread_once(&python_once, start_python);
    if (!runtime_module)
        fprintf(stderr, "fake_hip (gfx11emu): %s\n", python_why);
    return runtime_module != NULL;
}

/* Calls emu_runtime.<fn>(format...); the new reference or NULL with the error text in why. */
static PyObject *call_runtime(char *why, size_t why_len, bool *bounds, const char *fn, const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    PyObject *callable = PyObject_GetAttrString(runtime_module, fn);
    PyObject *args = callable ? Py_VaBuildValue(format, ap) : NULL;
    va_end(ap);
    PyObject *result = NULL;
    if (args && !PyTuple_Check(args)) {
        PyObject *one = PyTuple_Pack(1, args);
        Py_DECREF(args);
        args = one;
    }
    if (callable && args)
        result = PyObject_CallObject(callable, args);
    if (!result)
        take_exception(why, why_len, bounds);
    Py_XDECREF(args);
    Py_XDECREF(callable);
    return result;
}

/* ---- code objects ---- */

int emu_load_module(const void *image, size_t size, long *handle)
{
    if (!python_ready())
        return EMU_HIP_INVALID_IMAGE;
    PyGILState_STATE gil = PyGILState_Ensure();
    char why[1024];
    PyObject *r = call_runtime(why, sizeof why, NULL, "load", "(y#)", (const char *)image, (Py_ssize_t)size);
    int e = EMU_HIP_SUCCESS;
    if (r) {
        *handle = PyLong_AsLong(r);
        Py_DECREF(r);
    } else {
        fprintf(stderr, "fake_hip (gfx11emu): loading a %zu-byte code object failed: %s\n", size, why);
        e = EMU_HIP_INVALID_IMAGE;
    }
    PyGILState_Release(gil);
    return e;
}

void emu_unload_module(long handle)
{
    if (!runtime_module)
        return;
    PyGILState_STATE gil = PyGILState_Ensure();
    char why[256];
    Py_XDECREF(call_runtime(why, sizeof why, NULL, "unload", "(l)", handle));
    PyGILState_Release(gil);
}

int emu_kernel_info(long module, const char *name, size_t *args_bytes, unsigned *max_threads)
{
    PyGILState_STATE gil = PyGILState_Ensure();
    char why[1024];
    PyObject *r = call_runtime(why, sizeof why, NULL, "kernel_info", "(ls)", module, name);
    int e = EMU_HIP_SUCCESS;
    long size = 0, threads = 0;
    if (!r) {
        fprintf(stderr, "fake_hip (gfx11emu): metadata of %s: %s\n", name, why);
        e = EMU_HIP_NOT_FOUND;
    } else if (r == Py_None || !PyArg_ParseTuple(r, "ll", &size, &threads)) {
        PyErr_Clear();
        e = EMU_HIP_NOT_FOUND;
    } else {
        *args_bytes = (size_t)size;
        *max_threads = (unsigned)threads;
    }
    Py_XDECREF(r);
    PyGILState_Release(gil);
    return e;
}

/* ---- device memory ---- */

#define ALLOC_GAP (64 * 1024) /* never-registered bytes after each allocation */

typedef struct emu_alloc {
    unsigned char *base;
    size_t bytes, map_bytes;
    long key;                 /* gfx11emu.register_memory's */
} emu_alloc;

static emu_alloc *allocs;
static size_t num_allocs, cap_allocs;
static long alloc_serial;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* The live allocation holding [p, p + bytes), or NULL. */
static const emu_alloc *allocation_of(const void *p, size_t bytes)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < num_allocs; ++i)
        if (c >= allocs[i].base && c <= allocs[i].base + allocs[i].bytes &&
            bytes <= (size_t)(allocs[i].base + allocs[i].bytes - c))
            return &allocs[i];
    return NULL;
}

EXPORT int hipMalloc(void **ptr, size_t bytes)
{
    if (!ptr)
        return EMU_HIP_INVALID_VALUE;
    *ptr = NULL;
    if (bytes == 0)
        return EMU_HIP_SUCCESS; /* as HIP: success and a NULL pointer */
    if (!python_ready())
        return EMU_HIP_OUT_OF_MEMORY;
    size_t page = 4096, map_bytes = (bytes + page - 1) / page * page + ALLOC_GAP;
    void *map = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (map == MAP_FAILED)
        return EMU_HIP_OUT_OF_MEMORY;
    pthread_mutex_lock(&lock);
    if (num_allocs == cap_allocs) {
        size_t cap = cap_allocs ? 2 * cap_allocs : 64;
        emu_alloc *grown = realloc(allocs, cap * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&lock);
            munmap(map, map_bytes);
            return EMU_HIP_OUT_OF_MEMORY;
        }
        allocs = grown;
        cap_allocs = cap;
    }
    char label[96];
    snprintf(label, sizeof label, "hipMalloc #%ld (%zu B)", ++alloc_serial, bytes);
    PyGILState_STATE gil = PyGILState_Ensure();
    char why[512];
    PyObject *r = call_runtime(why, sizeof why, NULL, "register", "(KKs)", (unsigned long long)(uintptr_t)map,
                               (unsigned long long)bytes, label);
    long key = r ? PyLong_AsLong(r) : -1;
    Py_XDECREF(r);
    PyGILState_Release(gil);
    if (key < 0) {
        pthread_mutex_unlock(&lock);
        fprintf(stderr, "fake_hip (gfx11emu): register_memory failed: %s\n", why);
        munmap(map, map_bytes);
        return EMU_HIP_OUT_OF_MEMORY;
    }
    allocs[num_allocs++] = (emu_alloc){map, bytes, map_bytes, key};
    pthread_mutex_unlock(&lock);
    *ptr = map;
    return EMU_HIP_SUCCESS;
}

/* ---- streams ---- */

#define STREAM_MAGIC 0x5354524du

typedef enum { OP_MEMSET, OP_LAUNCH } op_kind;

typedef struct emu_op {
    op_kind kind;
    void *dst;                 /* memset */
    int value;
    size_t bytes;
    long module;               /* launch */
    char name[128];
    unsigned grid[3], block[3];
    unsigned char *args;
    size_t args_bytes;
} emu_op;

typedef struct emu_stream {
    unsigned magic;
    emu_op *ops;
    size_t num_ops, cap_ops;
} emu_stream;

#define MAX_STREAMS 64
static emu_stream null_stream = {STREAM_MAGIC, NULL, 0, 0};
static emu_stream *streams[MAX_STREAMS];

static int emulator_errors;
static char last_error[2048];
static long launches_run;
static double launch_seconds;

static emu_stream *stream_of(void *handle)
{
    if (!handle)
        return &null_stream;
    for (int i = 0; i < MAX_STREAMS; ++i)
        if (streams[i] == handle)
            return streams[i];
    return NULL;
}

static int push(emu_stream *s, const emu_op *op)
{
    if (s->num_ops == s->cap_ops) {
        size_t cap = s->cap_ops ? 2 * s->cap_ops : 16;
        emu_op *grown = realloc(s->ops, cap * sizeof *grown);
        if (!grown)
            return EMU_HIP_OUT_OF_MEMORY;
        s->ops = grown;
        s->cap_ops = cap;
    }
    s->ops[s->num_ops++] = *op;
    return EMU_HIP_SUCCESS;
}

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int run_launch(const emu_op *op)
{
    PyGILState_STATE gil = PyGILState_Ensure();
    char why[1536];
    bool bounds = false;
    const double t0 = seconds_now();
    PyObject *r = call_runtime(why, sizeof why, &bounds, "launch", "(ls(III)(III)y#)", op->module, op->name,
                               op->grid[0], op->grid[1], op->grid[2], op->block[0], op->block[1], op->block[2],
                               (const char *)op->args, (Py_ssize_t)op->args_bytes);
    launch_seconds += seconds_now() - t0;
    ++launches_run;
    const bool ran = r != NULL;
    Py_XDECREF(r);
    PyGILState_Release(gil);
    if (ran)
        return EMU_HIP_SUCCESS;
    ++emulator_errors;
    snprintf(last_error, sizeof last_error, "%s grid %ux%ux%u block %u: %s", op->name, op->grid[0], op->grid[1],
             op->grid[2], op->block[0], why);
    printf("fake_hip (gfx11emu): launch failed: %s\n", last_error);
    fflush(stdout);
    return bounds ? EMU_HIP_ILLEGAL_ADDRESS : EMU_HIP_LAUNCH_FAILURE;
}

/* Runs the queue of s in order; after a failed launch the rest is dropped. The first error, or 0. */
static int drain(emu_stream *s)
{
    int error = EMU_HIP_SUCCESS;
    for (size_t i = 0; i < s->num_ops; ++i) {
        emu_op *op = &s->ops[i];
        if (error == EMU_HIP_SUCCESS) {
            if (op->kind == OP_MEMSET)
                memset(op->dst, op->value, op->bytes);
            else
                error = run_launch(op);
        }
        free(op->args);
    }
    s->num_ops = 0;
    return error;
}

static int drain_all(void)
{
    int error = drain(&null_stream);
    for (int i = 0; i < MAX_STREAMS; ++i) {
        int e = streams[i] ? drain(streams[i]) : EMU_HIP_SUCCESS;
        if (error == EMU_HIP_SUCCESS)
            error = e;
    }
    return error;
}

int emu_enqueue_launch(void *stream, long module, const char *name, const unsigned grid[3], const unsigned block[3],
                       const void *args, size_t args_bytes)
{
    pthread_mutex_lock(&lock);
    emu_stream *s = stream_of(stream);
    emu_op op;
    memset(&op, 0, sizeof op);
    op.kind = OP_LAUNCH;
    op.module = module;
    snprintf(op.name, sizeof op.name, "%s", name);
    memcpy(op.grid, grid, sizeof op.grid);
    memcpy(op.block, block, sizeof op.block);
    op.args = malloc(args_bytes ? args_bytes : 1);
    op.args_bytes = args_bytes;
    int e = s && op.args ? EMU_HIP_SUCCESS : EMU_HIP_INVALID_VALUE;
    if (e == EMU_HIP_SUCCESS) {
        memcpy(op.args, args, args_bytes); /* by value, as hipModuleLaunchKernel copies the kernargs */
        e = push(s, &op);
    }
    if (e != EMU_HIP_SUCCESS)
        free(op.args);
    pthread_mutex_unlock(&lock);
    return e;
}

int emu_enqueue_memset(void *stream, void *dst, int value, size_t bytes)
{
    pthread_mutex_lock(&lock);
    emu_stream *s = stream_of(stream);
    int e = EMU_HIP_INVALID_VALUE;
    if (!s) {
        fprintf(stderr, "fake_hip (gfx11emu): hipMemsetAsync on unknown stream %p\n", stream);
    } else if (bytes && !allocation_of(dst, bytes)) {
        fprintf(stderr, "fake_hip (gfx11emu): hipMemsetAsync of %zu B at %p is outside every allocation\n", bytes,
                dst);
    } else {
        emu_op op;
        memset(&op, 0, sizeof op);
        op.kind = OP_MEMSET;
        op.dst = dst;
        op.value = value;
        op.bytes = bytes;
        e = push(s, &op);
    }
    pthread_mutex_unlock(&lock);
    return e;
}

/* ---- the HIP entry points a test calls for its buffers and streams ---- */

EXPORT int hipFree(void *ptr)
{
    if (!ptr)
        return EMU_HIP_SUCCESS;
    pthread_mutex_lock(&lock);
    int error = drain_all(); /* hipFree synchronizes the device */
    size_t i = 0;
    while (i < num_allocs && allocs[i].base != ptr)
        ++i;
    if (i == num_allocs) {
        pthread_mutex_unlock(&lock);
        return EMU_HIP_INVALID_VALUE;
    }
    emu_alloc a = allocs[i];
    allocs[i] = allocs[--num_allocs];
    PyGILState_STATE gil = PyGILState_Ensure();
    char why[256];
    Py_XDECREF(call_runtime(why, sizeof why, NULL, "unregister", "(l)", a.key));
    PyGILState_Release(gil);
    munmap(a.base, a.map_bytes);
    pthread_mutex_unlock(&lock);
    return error;
}

enum { MEMCPY_H2H = 0, MEMCPY_H2D = 1, MEMCPY_D2H = 2, MEMCPY_D2D = 3 };

EXPORT int hipMemcpy(void *dst, const void *src, size_t bytes, int kind)
{
    if (bytes == 0)
        return EMU_HIP_SUCCESS;
    pthread_mutex_lock(&lock);
    int error = drain(&null_stream);
    bool dst_ok = kind == MEMCPY_H2H || kind == MEMCPY_D2H || allocation_of(dst, bytes);
    bool src_ok = kind == MEMCPY_H2H || kind == MEMCPY_H2D || allocation_of(src, bytes);
    if (!dst || !src || kind < MEMCPY_H2H || kind > MEMCPY_D2D || !dst_ok || !src_ok) {
        fprintf(stderr, "fake_hip (gfx11emu): hipMemcpy(%p, %p, %zu B, kind %d): a range outside every allocation\n",
                dst, src, bytes, kind);
        error = EMU_HIP_INVALID_VALUE;
    } else {
        memcpy(dst, src, bytes);
    }
    pthread_mutex_unlock(&lock);
    return error;
}

EXPORT int hipMemset(void *dst, int value, size_t bytes)
{
    if (bytes == 0)
        return EMU_HIP_SUCCESS;
    pthread_mutex_lock(&lock);
    int error = drain(&null_stream);
    if (!allocation_of(dst, bytes)) {
        fprintf(stderr, "fake_hip (gfx11emu): hipMemset of %zu B at %p is outside every allocation\n", bytes, dst);
        error = EMU_HIP_INVALID_VALUE;
    } else {
        memset(dst, value, bytes);
    }
    pthread_mutex_unlock(&lock);
    return error;
}

EXPORT int hipStreamCreateWithFlags(void **stream, unsigned flags)
{
    (void)flags; /* every created stream behaves as hipStreamNonBlocking */
    if (!stream)
        return EMU_HIP_INVALID_VALUE;
    emu_stream *s = calloc(1, sizeof *s);
    if (!s)
        return EMU_HIP_OUT_OF_MEMORY;
    s->magic = STREAM_MAGIC;
    pthread_mutex_lock(&lock);
    int i = 0;
    while (i < MAX_STREAMS && streams[i])
        ++i;
    if (i < MAX_STREAMS)
        streams[i] = s;
    pthread_mutex_unlock(&lock);
    if (i == MAX_STREAMS) {
        free(s);
        return EMU_HIP_OUT_OF_MEMORY;
    }
    *stream = s;
    return EMU_HIP_SUCCESS;
}

EXPORT int hipStreamCreate(void **stream) { return hipStreamCreateWithFlags(stream, 0); }

EXPORT int hipStreamSynchronize(void *stream)
{
    pthread_mutex_lock(&lock);
    emu_stream *s = stream_of(stream);
    int error = s ? drain(s) : EMU_HIP_INVALID_VALUE;
    pthread_mutex_unlock(&lock);
    return error;
}

EXPORT int hipStreamDestroy(void *stream)
{
    pthread_mutex_lock(&lock);
    emu_stream *s = stream ? stream_of(stream) : NULL;
    int error = s ? drain(s) : EMU_HIP_INVALID_VALUE; /* HIP completes a destroyed stream's work */
    for (int i = 0; s && i < MAX_STREAMS; ++i)
        if (streams[i] == s)
            streams[i] = NULL;
    pthread_mutex_unlock(&lock);
    if (s) {
        free(s->ops);
        free(s);
    }
    return error;
}

EXPORT int hipDeviceSynchronize(void)
{
    pthread_mutex_lock(&lock);
    int error = drain_all();
    pthread_mutex_unlock(&lock);
    return error;
}

/* ---- what a test reads ---- */

/* Launches that failed on the emulator (bounds or any other error) since the process started. */
EXPORT int fake_hip_emulator_errors(void) { return emulator_errors; }
EXPORT const char *fake_hip_emulator_last_error(void) { return last_error; }
/* Launches executed and the seconds spent in them. */
EXPORT void fake_hip_emulator_stats(long *launches, double *seconds)
{
    *launches = launches_run;
    *seconds = launch_seconds;
}
/* Operations queued and not yet run, over all streams (0 after a synchronization). */
EXPORT int fake_hip_emulator_pending(void)
{
    pthread_mutex_lock(&lock);
    size_t n = null_stream.num_ops;
    for (int i = 0; i < MAX_STREAMS; ++i)
        n += streams[i] ? streams[i]->num_ops : 0;
    pthread_mutex_unlock(&lock);
    return (int)n;
}
