/* fake_hip.c - a stand-in HIP runtime for the HIP backend's tests on machines without a GPU.
 *
 * Built as a shared library and loaded by the library through the test-only knob
 * R35A_HIP_LIBRARY=<path>. It exports the HIP entry points the backend looks up, with the C
 * signatures HIP documents, and records what the backend does with them so a test can check it:
 *   - hipGetDeviceCount / hipGetDevicePropertiesR0600 describe FAKE_HIP_DEVICES devices (default 1)
 *     of arch FAKE_HIP_ARCH (default "gfx1151") reporting FAKE_HIP_CUS multiprocessors (default 20:
 *     what ROCm reports for a Radeon 8060S, whose 40 CUs form 20 WGPs),
 *     writing gcnArchName and multiProcessorCount at their hipDeviceProp_tR0600 offsets;
 *   - hipModuleLoadData accepts only an AMDGPU ELF image; hipModuleGetFunction finds the kernel in
 *     its dynamic symbol table (FUNC symbol plus its ".kd" descriptor), as a real loader would;
 *   - hipModuleLaunchKernel and hipMemsetAsync are recorded (kernel name, grid, block, stream, a
 *     copy of the argument struct);
 *   - hipHostMalloc / hipHostGetDevicePointer / hipHostFree keep pinned host memory (the library's
 *     device error record) as calloc'ed memory whose "device" address is the host address plus
 *     FAKE_HIP_DEVICE_OFFSET (never dereferenced here: a test tells the two views apart; with
 *     FAKE_HIP_EMULATOR, an allocation of the executing runtime at one address); with
 *     FAKE_HIP_HOST_MALLOC_FAIL=1 hipHostMalloc fails.
 * The test reads the records through fake_hip_* functions (dlsym on the same library).
 *
 * Built twice (tests/CMakeLists.txt): r35a_fake_hip only records, for the backend's unit tests
 * (test_hip_backend.c); r35a_emu_hip, built with FAKE_HIP_EMULATOR, also EXECUTES: the code objects go
 * to the gfx11 ISA emulator, launches and memsets are queued on their stream and run there, and it
 * exports hipMalloc, hipMemcpy, streams and synchronization (emu_exec.c) for test_emulator.c. */
#include "fake_hip.h"
#ifdef FAKE_HIP_EMULATOR
#include "emu_exec.h"
#endif

#include "encoder/encoder_args.h"
#include "encoder/prefill_args.h"
#include "decode/decode_args.h"
#include "generic/generic_args.h"

#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_MODULES 1024   /* never reclaimed: one process makes a few dozen contexts of ~10 modules (compile units) each */

typedef struct fake_module {
    const unsigned char *image;
    size_t size;                 /* the ELF's extent, from its headers (the runtime gets no size) */
    long emulator;               /* emu_exec's handle (FAKE_HIP_EMULATOR) */
    int unloaded;
} fake_module;

typedef struct fake_function {
    char name[128];
    const fake_module *module;
    size_t args_bytes;           /* from the code object's metadata (FAKE_HIP_EMULATOR) */
    unsigned max_threads;
} fake_function;

static fake_module modules[MAX_MODULES];
static int num_modules, num_unloaded;
static fake_function functions[4096];   /* never reclaimed, like the modules: every context resolves every
                                          * kernel of its arch (~150) */
static int num_functions;
static fake_launch launches[MAX_RECORDS];
static int num_launches;
static fake_memset memsets[MAX_RECORDS];
static int num_memsets;
static int current_device;
#define MAX_HOST_ALLOCATIONS 16
#define FAKE_HIP_DEVICE_OFFSET ((uintptr_t)1 << 44)
static fake_host_allocation host_allocations[MAX_HOST_ALLOCATIONS];
static int num_host_allocations, num_host_frees;
/* Order of calls, one letter each: M memset, L launch (to check the memset comes first). */
static char call_order[MAX_RECORDS * 2 + 1];

static int env_int(const char *name, int fallback)
{
    const char *s = getenv(name);
    return s && s[0] ? atoi(s) : fallback;
}

EXPORT int hipGetDeviceCount(int *count)
{
    *count = env_int("FAKE_HIP_DEVICES", 1);
    return *count > 0 ? 0 : 100; /* hipErrorNoDevice */
}

EXPORT int hipGetDevicePropertiesR0600(void *props, int device)
{
    if (device < 0 || device >= env_int("FAKE_HIP_DEVICES", 1))
        return 101; /* hipErrorInvalidDevice */
    unsigned char *p = props;
    memset(p, 0, 1472); /* sizeof(hipDeviceProp_tR0600) */
    snprintf((char *)p, 256, "Fake Radeon");
    const char *arch = getenv("FAKE_HIP_ARCH");
    snprintf((char *)p + 1160, 256, "%s", arch && arch[0] ? arch : "gfx1151");
    int cus = env_int("FAKE_HIP_CUS", 20);
    memcpy(p + 388, &cus, sizeof cus);
    return 0;
}

EXPORT int hipGetDevice(int *device)
{
    *device = current_device;
    return 0;
}

EXPORT int hipSetDevice(int device)
{
    if (device < 0 || device >= env_int("FAKE_HIP_DEVICES", 1))
        return 101;
    current_device = device;
    return 0;
}

/* Bytes an ELF image spans: hipModuleLoadData gets only its address, so the extent comes from the
 * headers (the section header table, every section with file contents, the program headers). */
static size_t elf_image_size(const unsigned char *image)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)image;
    size_t end = (size_t)eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(image + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum; ++i)
        if (sh[i].sh_type != SHT_NOBITS && sh[i].sh_offset + sh[i].sh_size > end)
            end = sh[i].sh_offset + sh[i].sh_size;
    const Elf64_Phdr *ph = (const Elf64_Phdr *)(image + eh->e_phoff);
    for (int i = 0; i < eh->e_phnum; ++i)
        if (ph[i].p_offset + ph[i].p_filesz > end)
            end = ph[i].p_offset + ph[i].p_filesz;
    return end;
}

EXPORT int hipModuleLoadData(void **module, const void *image)
{
    const Elf64_Ehdr *eh = image;
    if (!image || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_machine != EM_AMDGPU)
        return 200; /* hipErrorInvalidImage */
    if (num_modules == MAX_MODULES)
        return 2;
    fake_module *m = &modules[num_modules];
    m->image = image;
    m->size = elf_image_size(image);
#ifdef FAKE_HIP_EMULATOR
    int e = emu_load_module(image, m->size, &m->emulator);
    if (e != 0)
        return e;
#endif
    ++num_modules;
    *module = m;
    return 0;
}

EXPORT int hipModuleUnload(void *module)
{
    fake_module *m = module;
#ifdef FAKE_HIP_EMULATOR
    emu_unload_module(m->emulator);
#endif
    m->unloaded = 1;
    ++num_unloaded;
    return 0;
}

/* Whether the ELF image defines symbol `name` of type `type` in .dynsym. */
static int has_symbol(const unsigned char *image, const char *name, int type)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)image;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(image + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum; ++i) {
        if (sh[i].sh_type != SHT_DYNSYM)
            continue;
        const Elf64_Sym *syms = (const Elf64_Sym *)(image + sh[i].sh_offset);
        const char *strtab = (const char *)(image + sh[sh[i].sh_link].sh_offset);
        size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
        for (size_t k = 0; k < n; ++k)
            if (ELF64_ST_TYPE(syms[k].st_info) == type && syms[k].st_shndx != SHN_UNDEF &&
                strcmp(strtab + syms[k].st_name, name) == 0)
                return 1;
    }
    return 0;
}

EXPORT int hipModuleGetFunction(void **function, void *module, const char *name)
{
    const fake_module *m = module;
    char kd[160];
    snprintf(kd, sizeof kd, "%s.kd", name);
    if (!has_symbol(m->image, name, STT_FUNC) || !has_symbol(m->image, kd, STT_OBJECT))
        return 500; /* hipErrorNotFound */
    /* Every context looks its kernels up again: one slot per (name, live module); a slot whose
     * module was unloaded is taken over, so the table does not grow with contexts created and
     * destroyed one after another. */
    fake_function *fn = NULL;
    for (int i = 0; i < num_functions && !fn; ++i)
        if (strcmp(functions[i].name, name) == 0 && (functions[i].module == m || functions[i].module->unloaded))
            fn = &functions[i];
    if (!fn) {
        if (num_functions == (int)(sizeof functions / sizeof *functions))
            return 2;
        fn = &functions[num_functions++];
        snprintf(fn->name, sizeof fn->name, "%s", name);
    }
    fn->module = m;
#ifdef FAKE_HIP_EMULATOR
    int e = emu_kernel_info(m->emulator, name, &fn->args_bytes, &fn->max_threads);
    if (e != 0)
        return e;
#endif
    *function = fn;
    return 0;
}

#ifndef FAKE_HIP_EMULATOR
/* Size of the one by-value argument struct of a kernel, from its name (decode_args.h, generic_args.h,
 * encoder_args.h, prefill_args.h). */
static size_t args_size_of(const char *kernel)
{
    if (strncmp(kernel, "decode_", 7) == 0)
        return sizeof(r35a_decode_args);
    if (strncmp(kernel, "generic_paged_", 14) == 0)
        return sizeof(r35a_generic_paged_args);
    if (strncmp(kernel, "generic_varlen_", 15) == 0)
        return sizeof(r35a_generic_varlen_args);
    const size_t n = strlen(kernel);
    if (strncmp(kernel, "encoder_", 8) == 0 && n > 6 && strcmp(kernel + n - 6, "_paged") == 0)
        return sizeof(r35a_prefill_args);   /* an encoder variant's paged sibling (prefill_args.h) */
    if (strncmp(kernel, "encoder_", 8) == 0)
        return sizeof(r35a_encoder_args);
    return 0;
}

#endif

EXPORT int hipModuleLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                 unsigned bz, unsigned shared_bytes, void *stream, void **params, void **extra)
{
    const fake_function *fn = f;
    if (!fn || !params || extra || num_launches == MAX_RECORDS)
        return 1; /* hipErrorInvalidValue */
    if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 || bx * by * bz > 1024)
        return 9; /* hipErrorInvalidConfiguration */
    fake_launch *l = &launches[num_launches++];
    memset(l, 0, sizeof *l);
    snprintf(l->kernel, sizeof l->kernel, "%s", fn->name);
    l->grid[0] = gx, l->grid[1] = gy, l->grid[2] = gz;
    l->block[0] = bx, l->block[1] = by, l->block[2] = bz;
    l->shared_bytes = shared_bytes;
    l->stream = stream;
#ifdef FAKE_HIP_EMULATOR
    /* As a real runtime: the kernarg bytes the code object declares, and its workgroup limit. */
    if (bx * by * bz > fn->max_threads || fn->args_bytes > sizeof l->args) {
        --num_launches;
        return 9;
    }
    l->args_size = fn->args_bytes;
#else
    l->args_size = args_size_of(fn->name);
#endif
    memcpy(l->args, params[0], l->args_size);
    strcat(call_order, "L");
#ifdef FAKE_HIP_EMULATOR
    const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
    return emu_enqueue_launch(stream, fn->module->emulator, fn->name, grid, block, params[0], fn->args_bytes);
#else
    return 0;
#endif
}

EXPORT int hipMemsetAsync(void *dst, int value, size_t bytes, void *stream)
{
    if (num_memsets == MAX_RECORDS)
        return 1;
    fake_memset *m = &memsets[num_memsets++];
    m->dst = dst, m->value = value, m->bytes = bytes, m->stream = stream;
    strcat(call_order, "M");
#ifdef FAKE_HIP_EMULATOR
    return emu_enqueue_memset(stream, dst, value, bytes);
#else
    return 0;
#endif
}

#ifdef FAKE_HIP_EMULATOR
/* The executing runtime's device memory (emu_exec.c): pinned host memory is one of its
 * allocations, registered for the emulator's bounds checks, its device address its host one. */
int hipMalloc(void **ptr, size_t bytes);
int hipFree(void *ptr);
#endif

EXPORT int hipHostMalloc(void **ptr, size_t bytes, unsigned flags)
{
    if (env_int("FAKE_HIP_HOST_MALLOC_FAIL", 0))
        return 2; /* hipErrorOutOfMemory */
    if (!ptr || bytes == 0 || num_host_allocations == MAX_HOST_ALLOCATIONS)
        return 1;
    fake_host_allocation *a = &host_allocations[num_host_allocations++];
#ifdef FAKE_HIP_EMULATOR
    a->host = NULL;
    if (hipMalloc(&a->host, bytes) != 0 || !a->host) {
        --num_host_allocations;
        return 2;
    }
    memset(a->host, 0, bytes);
    a->device = a->host;
#else
    a->host = calloc(1, bytes);
    a->device = (void *)((uintptr_t)a->host + FAKE_HIP_DEVICE_OFFSET);
#endif
    a->bytes = bytes;
    a->flags = flags;
    a->freed = 0;
    *ptr = a->host;
    return a->host ? 0 : 2;
}

EXPORT int hipHostGetDevicePointer(void **device_ptr, void *host_ptr, unsigned flags)
{
    for (int i = 0; i < num_host_allocations; ++i)
        if (host_allocations[i].host == host_ptr && !host_allocations[i].freed && flags == 0 &&
            (host_allocations[i].flags & 0x2u /* hipHostMallocMapped */)) {
            *device_ptr = host_allocations[i].device;
            return 0;
        }
    return 1;
}

EXPORT int hipHostFree(void *ptr)
{
    for (int i = 0; i < num_host_allocations; ++i)
        if (host_allocations[i].host == ptr && !host_allocations[i].freed) {
#ifdef FAKE_HIP_EMULATOR
            (void)hipFree(ptr);
#else
            free(ptr);
#endif
            host_allocations[i].freed = 1;
            ++num_host_frees;
            return 0;
        }
    return 1;
}

EXPORT const char *hipGetErrorString(int error)
{
    return error == 0 ? "hipSuccess" : "fake HIP error";
}

/* ---- what the tests read ---- */

EXPORT int fake_hip_num_launches(void) { return num_launches; }
EXPORT const fake_launch *fake_hip_launch(int i) { return i >= 0 && i < num_launches ? &launches[i] : NULL; }
EXPORT int fake_hip_num_memsets(void) { return num_memsets; }
EXPORT const fake_memset *fake_hip_memset(int i) { return i >= 0 && i < num_memsets ? &memsets[i] : NULL; }
EXPORT int fake_hip_num_modules(void) { return num_modules; }
EXPORT int fake_hip_num_unloaded(void) { return num_unloaded; }
EXPORT const char *fake_hip_call_order(void) { return call_order; }
EXPORT int fake_hip_num_host_allocations(void) { return num_host_allocations; }
EXPORT int fake_hip_num_host_frees(void) { return num_host_frees; }
EXPORT const fake_host_allocation *fake_hip_host_allocation(int i)
{
    return i >= 0 && i < num_host_allocations ? &host_allocations[i] : NULL;
}
EXPORT void fake_hip_reset_records(void)
{
    num_launches = num_memsets = 0;
    call_order[0] = '\0';
}
