/* code_objects.h - the GPU code objects embedded in the library at build time: AMDGPU code objects
 * (arch "gfx1151", ...) and NVIDIA cubins (arch "sm_90", ...; family "<family>.gfx11emu" for the
 * build with the gfx11-exact fragment emulation).
 *
 * Defined by a generated source (tools/embed_code_objects.py, or cmake/gpu_kernels.cmake when the
 * build has no GPU code objects). One entry per (kernel family, arch); a NULL entry ends the table. */
#ifndef R35A_CODE_OBJECTS_H
#define R35A_CODE_OBJECTS_H

#include <stddef.h>

typedef struct r35a_code_object {
    const char *family;          /* "decode", "generic", ...: kernels/<family>.hip */
    const char *arch;            /* "gfx1151", "sm_90", ... */
    const unsigned char *data;   /* the ELF code object or cubin, as hipModuleLoadData / cuModuleLoadData take it */
    size_t size;
} r35a_code_object;

extern const r35a_code_object r35a_code_objects[];
extern const size_t r35a_num_code_objects;
/* Why the table is empty ("" when it is not), e.g. "no clang found ...". */
extern const char r35a_code_objects_absent_reason[];

#endif
