/* emu_exec.h - the executing half of the stand-in HIP runtime (tests/hip/fake_hip.c built with
 * FAKE_HIP_EMULATOR): device memory, streams and the gfx11 ISA emulator behind them (emu_exec.c).
 *
 * Values are hipError_t codes (0 = hipSuccess). */
#ifndef R35A_EMU_EXEC_H
#define R35A_EMU_EXEC_H

#include <stddef.h>

#define EMU_HIP_SUCCESS 0
#define EMU_HIP_INVALID_VALUE 1            /* hipErrorInvalidValue */
#define EMU_HIP_OUT_OF_MEMORY 2            /* hipErrorOutOfMemory */
#define EMU_HIP_INVALID_IMAGE 200          /* hipErrorInvalidImage */
#define EMU_HIP_NOT_FOUND 500              /* hipErrorNotFound */
#define EMU_HIP_ILLEGAL_ADDRESS 700        /* hipErrorIllegalAddress: a bounds check failed */
#define EMU_HIP_LAUNCH_FAILURE 719         /* hipErrorLaunchFailure: any other emulator error */

/* Loads the code object image[0 .. size) into the emulator; *handle names it afterwards. */
int emu_load_module(const void *image, size_t size, long *handle);
void emu_unload_module(long handle);
/* The argument bytes and the largest workgroup of kernel `name`, from the code object's metadata. */
int emu_kernel_info(long module, const char *name, size_t *args_bytes, unsigned *max_threads);

/* Queued on `stream` (NULL: the null stream) and executed, in order, when the stream is synchronized. */
int emu_enqueue_launch(void *stream, long module, const char *name, const unsigned grid[3], const unsigned block[3],
                       const void *args, size_t args_bytes);
int emu_enqueue_memset(void *stream, void *dst, int value, size_t bytes);

#endif
