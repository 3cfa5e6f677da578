/* gpu_device.h - a GPU opened through one loader for the HIP runtime and the CUDA driver: device
 * memory, a stream of its own, events, graph capture and module launches, for the programs around
 * librdna35attn (the bench; tests/gpu can compile it in too). Not part of the library: its public
 * API is attention only, and an engine owns its memory (README, "Device memory for callers").
 *
 * Plain C11, no HIP or CUDA header: the runtime is dlopen'ed at gpu_device_open() (HIP:
 * R35A_HIP_LIBRARY, else libamdhip64.so.7, .so.6, .so; CUDA: R35A_CUDA_LIBRARY, else libcuda.so.1,
 * the same libraries and knobs the library's backends use) and only the entry points below are
 * looked up, with the signatures the HIP and CUDA driver APIs document. Every call's return code is
 * checked: a function returns 0, or -1 with "<call>(<arguments>) failed: <runtime's text> (<code>)"
 * in gpu_device_error().
 *
 * Streams and ordering: all copies, fills, launches and event records go to the runtime's own
 * non-blocking stream, asynchronously; gpu_upload() and gpu_download() also wait for the stream, so
 * their host buffer is free (upload) or filled (download) on return. On CUDA the device's primary
 * context is made current on the calling thread at open (the library's CUDA backend works in the
 * same primary context, so pointers and the stream are valid there); on HIP the device is made
 * current. One thread uses a gpu_device at a time. */
#ifndef R35A_BENCH_GPU_DEVICE_H
#define R35A_BENCH_GPU_DEVICE_H

#include <stddef.h>
#include <stdint.h>

typedef enum gpu_api { GPU_API_HIP = 1, GPU_API_CUDA = 2 } gpu_api;

typedef struct gpu_device gpu_device;

/* Loads the runtime of api, selects device `device` and creates the stream. 0 with *out set, or -1
 * with the reason in why (no runtime, a missing entry point, no such device). */
int gpu_device_open(gpu_api api, int device, gpu_device **out, char *why, size_t why_len);
/* Destroys the stream and releases the device; NULL is accepted. */
void gpu_device_close(gpu_device *rt);

const char *gpu_device_error(const gpu_device *rt);   /* the last failure, "" before any */
const char *gpu_device_api_name(const gpu_device *rt); /* "hip" or "cuda" */
const char *gpu_device_library(const gpu_device *rt);  /* the library that loaded */
const char *gpu_device_name(const gpu_device *rt);
/* Compute units as the runtime counts them (CUDA: SMs; HIP: multiProcessorCount); 0 if unknown. */
int gpu_device_units(const gpu_device *rt);
/* Last-level cache bytes the runtime reports (CUDA: L2); 0 when it reports none (HIP: the MALL of
 * RDNA is not reported). */
size_t gpu_device_llc_bytes(const gpu_device *rt);
void *gpu_device_stream(const gpu_device *rt);         /* the stream to hand to the library */

/* ---- memory ---- */
int gpu_alloc(gpu_device *rt, void **ptr, size_t bytes);
int gpu_free(gpu_device *rt, void *ptr);                /* NULL is accepted */
int gpu_upload(gpu_device *rt, void *dst, const void *host_src, size_t bytes);   /* waits */
int gpu_download(gpu_device *rt, void *host_dst, const void *src, size_t bytes); /* waits */
int gpu_copy(gpu_device *rt, void *dst, const void *src, size_t bytes);          /* device to device */
int gpu_fill(gpu_device *rt, void *dst, int byte, size_t bytes);
int gpu_synchronize(gpu_device *rt);                    /* waits for the stream */

/* ---- events (timing on the stream) ---- */
int gpu_event_create(gpu_device *rt, void **event);
int gpu_event_destroy(gpu_device *rt, void *event);     /* NULL is accepted */
int gpu_event_record(gpu_device *rt, void *event);
/* Waits for stop, then *seconds = time from start to stop. */
int gpu_event_elapsed(gpu_device *rt, void *start, void *stop, double *seconds);

/* ---- graphs: what is issued on the stream between begin and end is captured, not run ---- */
int gpu_capture_begin(gpu_device *rt);
/* Ends the capture and instantiates it into *exec. When `keep` is 0 (a call during the capture
 * failed) it only ends the capture and discards the graph, so the stream is usable again. */
int gpu_capture_end(gpu_device *rt, int keep, void **exec);
int gpu_graph_launch(gpu_device *rt, void *exec);
int gpu_graph_destroy(gpu_device *rt, void *exec);      /* NULL is accepted */

/* ---- modules and launches (a code object or cubin image, kernels with one by-value argument) ---- */
int gpu_module_load(gpu_device *rt, const void *image, void **module);
int gpu_module_unload(gpu_device *rt, void *module);    /* NULL is accepted */
int gpu_module_function(gpu_device *rt, void *module, const char *name, void **function);
/* Launches function on grid x block threads (1-D) on the stream; args points at its one argument. */
int gpu_launch(gpu_device *rt, void *function, uint32_t grid, uint32_t block, void *args);

#endif
