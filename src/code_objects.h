/* code_objects.h - the GPU code objects embedded in the library at build time: AMDGPU code objects
 * (arch "gfx1151", ...) and NVIDIA cubins (arch "sm_90", ...; family "<family>.gfx11emu" for the
 * build with the gfx11-exact fragment emulation).
 *
 * Defined by a generated source (tools/embed_code_objects.py, or cmake/gpu_kernels.cmake when the
 * build has no GPU code objects). One entry per (kernel family, compile unit, arch): a family's
 * kernels of one arch are built in several units (tools/gen_variants.py --units), each its own code
 * object and module; src/registry.c r35a_registry_unit() says which unit holds a kernel. A NULL
 * entry ends the table. */
#ifndef R35A_CODE_OBJECTS_H
#define R35A_CODE_OBJECTS_H

#include <stddef.h>

typedef struct r35a_code_object {
    const char *family;          /* "decode", "generic", ...: kernels/<family>/<family>.hip */
    const char *unit;            /* the family's compile unit: "f16_fp8", "merge", ...; "" for a whole family */
    const char *arch;            /* "gfx1151", "sm_90", ... */
    const unsigned char *data;   /* the ELF code object or cubin, as hipModuleLoadData / cuModuleLoadData take it */
    size_t size;
} r35a_code_object;

extern const r35a_code_object r35a_code_objects[];
extern const size_t r35a_num_code_objects;
/* Why the table is empty ("" when it is not), e.g. "no clang found ...". */
extern const char r35a_code_objects_absent_reason[];

#endif
