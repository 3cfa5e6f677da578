/* backend_hip.c - the HIP backend: runtime loading, device and arch detection, code-object loading,
 * kernel lookup and launches on the caller's stream.
 *
 * The HIP runtime is dlopen'ed (libamdhip64.so.7, then .so.6, then .so), once per process under
 * pthread_once, and never closed (unloading a GPU runtime under live allocations is unsafe). Only
 * the entry points in hip_api below are looked up. No HIP header is used: the few types the calls
 * take are pointers and ints, declared here as the HIP C API documents them.
 *
 * The device's arch name comes from hipGetDevicePropertiesR0600 (exported by ROCm 6.0 and later,
 * ROCm 7 included; hipGetDeviceProperties is a macro over it in ROCm's headers): its struct puts
 * gcnArchName[256] at byte offset 1160 and is 1472 bytes long on LP64. That offset was checked two
 * ways: by laying out the documented hipDeviceProp_tR0600 field list (name[256], hipUUID, luid[8],
 * ... reserved[63], hipReserved[32], then gcnArchName) and against LLVM's offload-arch tool, which
 * reads the same field at the same offset. The buffer handed to the runtime is 4 KiB, so a runtime
 * whose struct grew at the end cannot write past it; a name that does not start with "gfx" is
 * reported as an unreadable arch rather than trusted.
 *
 * A context loads its code objects (one module per kernel family of its arch) and resolves every
 * kernel when it is created, so runs only read immutable state and need no lock; module and kernel
 * handles are per context because HIP modules are per device. */
#include "backend_hip.h"

#include "code_objects.h"
#include "plan_gfx1151.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the HIP C API, as much of it as the backend calls ---- */

typedef int hip_error;          /* hipError_t: hipSuccess = 0 */
typedef void *hip_module;       /* hipModule_t */
typedef void *hip_function;     /* hipFunction_t */
typedef void *hip_stream;       /* hipStream_t; NULL is the default stream */

#define HIP_PROPS_R0600_ARCH_OFFSET 1160
#define HIP_PROPS_R0600_CU_OFFSET 388   /* int multiProcessorCount */
#define HIP_PROPS_BUFFER_BYTES 4096

typedef struct hip_api {
    hip_error (*GetDeviceCount)(int *count);
    hip_error (*GetDevicePropertiesR0600)(void *props, int device);
    hip_error (*GetDevice)(int *device);
    hip_error (*SetDevice)(int device);
    hip_error (*ModuleLoadData)(hip_module *module, const void *image);
    hip_error (*ModuleUnload)(hip_module module);
    hip_error (*ModuleGetFunction)(hip_function *function, hip_module module, const char *name);
    hip_error (*ModuleLaunchKernel)(hip_function f, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                                    unsigned block_x, unsigned block_y, unsigned block_z,
                                    unsigned shared_bytes, hip_stream stream, void **params, void **extra);
    hip_error (*MemsetAsync)(void *dst, int value, size_t bytes, hip_stream stream);
    const char *(*GetErrorString)(hip_error error);
} hip_api;

static struct {
    hip_api api;
    bool ok;
    char library[64];       /* the soname that loaded */
    char why[200];          /* why not, when !ok */
} runtime;
static pthread_once_t runtime_once = PTHREAD_ONCE_INIT;

static const char *hip_error_text(hip_error e)
{
    const char *s = runtime.api.GetErrorString ? runtime.api.GetErrorString(e) : NULL;
    return s ? s : "unknown HIP error";
}

static void load_runtime(void)
{
    /* R35A_HIP_LIBRARY (test-only knob) names the one library to try, e.g. a stub runtime. */
    const char *forced = getenv("R35A_HIP_LIBRARY");
    const char *const defaults[] = {"libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so"};
    const char *const *names = defaults;
    size_t count = sizeof defaults / sizeof *defaults;
    if (forced && forced[0]) {
        names = &forced;
        count = 1;
    }
    void *lib = NULL;
    const char *last_error = "";
    for (size_t i = 0; i < count && !lib; ++i) {
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (lib) {
            snprintf(runtime.library, sizeof runtime.library, "%s", names[i]);
        } else {
            last_error = dlerror();
            r35a_log("hip: dlopen %s: %s", names[i], last_error ? last_error : "failed");
        }
    }
    if (!lib) {
        if (forced && forced[0])
            snprintf(runtime.why, sizeof runtime.why, "no HIP runtime: dlopen %s (R35A_HIP_LIBRARY) failed: %s",
                     forced, last_error ? last_error : "");
        else
            snprintf(runtime.why, sizeof runtime.why, "no HIP runtime: dlopen libamdhip64.so.7/.6 failed");
        return;
    }

    static const struct {
        const char *name;
        size_t offset;
    } symbols[] = {
#define SYM(field) {"hip" #field, offsetof(hip_api, field)}
        SYM(GetDeviceCount),    SYM(GetDevicePropertiesR0600), SYM(GetDevice),
        SYM(SetDevice),         SYM(ModuleLoadData),           SYM(ModuleUnload),
        SYM(ModuleGetFunction), SYM(ModuleLaunchKernel),       SYM(MemsetAsync),
        SYM(GetErrorString),
#undef SYM
    };
    hip_api api;
    memset(&api, 0, sizeof api);
    for (size_t i = 0; i < sizeof symbols / sizeof *symbols; ++i) {
        void *fn = dlsym(lib, symbols[i].name);
        if (!fn) {
            snprintf(runtime.why, sizeof runtime.why,
                     "the HIP runtime %s lacks %s (ROCm 6.0 or later is needed)", runtime.library,
                     symbols[i].name);
            r35a_log("hip: %s", runtime.why);
            return; /* the runtime stays loaded: its constructors ran, and unloading GPU runtimes is unsafe */
        }
        memcpy((char *)&api + symbols[i].offset, &fn, sizeof fn);
    }
    runtime.api = api;
    runtime.ok = true;
    r35a_log("hip: loaded %s", runtime.library);
}

/* ---- per-context state ---- */

#define MAX_FAMILIES 4

typedef struct hip_state {
    int device;
    int num_cus;
    char arch[64];
    hip_module modules[MAX_FAMILIES];
    size_t num_modules;
    /* Kernel handles, indexed like r35a_decode_variants / r35a_generic_kernels / r35a_encoder_variants;
     * NULL for another arch. */
    hip_function decode[R35A_NUM_DECODE_VARIANTS > 0 ? R35A_NUM_DECODE_VARIANTS : 1];
    hip_function generic[R35A_NUM_GENERIC_KERNELS > 0 ? R35A_NUM_GENERIC_KERNELS : 1];
    hip_function encoder[R35A_NUM_ENCODER_VARIANTS > 0 ? R35A_NUM_ENCODER_VARIANTS : 1];
} hip_state;

static const hip_state *state_of(const r35a_context *ctx) { return (const hip_state *)ctx->gpu; }

/* Makes device current on this thread; *previous gets the device to restore (-1: none needed). */
static hip_error enter_device(int device, int *previous)
{
    *previous = -1;
    int current = -1;
    hip_error e = runtime.api.GetDevice(&current);
    if (e != 0 || current != device) {
        e = runtime.api.SetDevice(device);
        if (e != 0)
            return e;
        *previous = current;
    }
    return 0;
}

static void leave_device(int previous)
{
    if (previous >= 0)
        (void)runtime.api.SetDevice(previous);
}

/* "gfx1151:sramecc-:xnack-" -> "gfx1151". */
static void base_arch(const char *full, char *out, size_t cap)
{
    size_t n = strcspn(full, ":");
    if (n >= cap)
        n = cap - 1;
    memcpy(out, full, n);
    out[n] = '\0';
}

/* Arch list of the embedded code objects, e.g. "gfx1151", for messages. */
static void built_archs(char *out, size_t cap)
{
    out[0] = '\0';
    for (size_t i = 0; i < r35a_num_code_objects; ++i) {
        if (strncmp(r35a_code_objects[i].arch, "gfx", 3) != 0)
            continue; /* an NVIDIA cubin (backend_cuda.c) */
        bool listed = false;
        for (size_t j = 0; j < i && !listed; ++j)
            listed = strcmp(r35a_code_objects[j].arch, r35a_code_objects[i].arch) == 0;
        if (listed)
            continue;
        size_t used = strlen(out);
        snprintf(out + used, cap - used, "%s%s", used ? "," : "", r35a_code_objects[i].arch);
    }
}

static bool has_code_objects_for(const char *arch)
{
    for (size_t i = 0; i < r35a_num_code_objects; ++i)
        if (strcmp(r35a_code_objects[i].arch, arch) == 0)
            return true;
    return false;
}

static void release_state(hip_state *st)
{
    if (!st)
        return;
    if (runtime.ok && st->num_modules) {
        int previous;
        if (enter_device(st->device, &previous) == 0) {
            for (size_t i = 0; i < st->num_modules; ++i)
                (void)runtime.api.ModuleUnload(st->modules[i]);
            leave_device(previous);
        }
    }
    free(st);
}

/* Looks kernel `name` up in the modules of st; NULL if absent. */
static hip_function find_kernel(const hip_state *st, const char *name)
{
    for (size_t i = 0; i < st->num_modules; ++i) {
        hip_function f = NULL;
        if (runtime.api.ModuleGetFunction(&f, st->modules[i], name) == 0 && f)
            return f;
    }
    return NULL;
}

/* Loads the code objects of st->arch and resolves every kernel; on failure writes why. */
static bool load_kernels(hip_state *st, char *reason, size_t reason_len)
{
    for (size_t i = 0; i < r35a_num_code_objects; ++i) {
        const r35a_code_object *co = &r35a_code_objects[i];
        if (strcmp(co->arch, st->arch) != 0)
            continue;
        if (st->num_modules == MAX_FAMILIES) {
            snprintf(reason, reason_len, "more than %d kernel families for %s", MAX_FAMILIES, st->arch);
            return false;
        }
        hip_module m = NULL;
        hip_error e = runtime.api.ModuleLoadData(&m, co->data);
        if (e != 0 || !m) {
            snprintf(reason, reason_len, "hipModuleLoadData of the %s %s code object (%zu bytes) failed: %s (%d)",
                     co->arch, co->family, co->size, hip_error_text(e), e);
            return false;
        }
        st->modules[st->num_modules++] = m;
    }
    for (int v = 0; v < R35A_NUM_DECODE_VARIANTS; ++v) {
        const char *name = r35a_decode_variants[v].name;
        if (strcmp(r35a_decode_variants[v].arch, st->arch) != 0)
            continue;
        st->decode[v] = find_kernel(st, name);
        if (!st->decode[v]) {
            snprintf(reason, reason_len, "kernel %s is missing from the %s code objects", name, st->arch);
            return false;
        }
    }
    for (int k = 0; k < R35A_NUM_GENERIC_KERNELS; ++k) {
        const char *name = r35a_generic_kernels[k].name;
        if (strcmp(r35a_generic_kernels[k].arch, st->arch) != 0)
            continue;
        st->generic[k] = find_kernel(st, name);
        if (!st->generic[k]) {
            snprintf(reason, reason_len, "kernel %s is missing from the %s code objects", name, st->arch);
            return false;
        }
    }
    for (int v = 0; v < R35A_NUM_ENCODER_VARIANTS; ++v) {
        const char *name = r35a_encoder_variants[v].name;
        if (strcmp(r35a_encoder_variants[v].arch, st->arch) != 0)
            continue;
        st->encoder[v] = find_kernel(st, name);
        if (!st->encoder[v]) {
            snprintf(reason, reason_len, "kernel %s is missing from the %s code objects", name, st->arch);
            return false;
        }
    }
    return true;
}

bool r35a_hip_context_init(r35a_context *ctx, int device_index, char *reason, size_t reason_len)
{
    char built[64];
    built_archs(built, sizeof built);
    if (!built[0]) {
        snprintf(reason, reason_len, "built without gfx1151 code objects (%s)",
                 r35a_num_code_objects ? "only NVIDIA cubins" : r35a_code_objects_absent_reason);
        return false;
    }
    pthread_once(&runtime_once, load_runtime);
    if (!runtime.ok) {
        snprintf(reason, reason_len, "%s", runtime.why);
        return false;
    }

    int count = 0;
    hip_error e = runtime.api.GetDeviceCount(&count);
    if (e != 0 || count <= 0) {
        if (e != 0)
            snprintf(reason, reason_len, "no HIP device: hipGetDeviceCount failed: %s (%d)", hip_error_text(e), e);
        else
            snprintf(reason, reason_len, "no HIP device: hipGetDeviceCount found none");
        return false;
    }
    if (device_index >= count) {
        snprintf(reason, reason_len, "no HIP device %d: the runtime sees %d device%s", device_index, count,
                 count == 1 ? "" : "s");
        return false;
    }

    _Alignas(16) unsigned char props[HIP_PROPS_BUFFER_BYTES];
    memset(props, 0, sizeof props);
    e = runtime.api.GetDevicePropertiesR0600(props, device_index);
    if (e != 0) {
        snprintf(reason, reason_len, "hipGetDevicePropertiesR0600(%d) failed: %s (%d)", device_index,
                 hip_error_text(e), e);
        return false;
    }
    char full_arch[256];
    memcpy(full_arch, props + HIP_PROPS_R0600_ARCH_OFFSET, sizeof full_arch);
    full_arch[sizeof full_arch - 1] = '\0';
    char arch[64];
    base_arch(full_arch, arch, sizeof arch);
    char served[64];
    built_archs(served, sizeof served);
    if (strncmp(arch, "gfx", 3) != 0) {
        snprintf(reason, reason_len, "cannot read the arch of HIP device %d (hipDeviceProp_tR0600.gcnArchName "
                 "is not a gfx name; an unexpected HIP runtime?)", device_index);
        return false;
    }
    if (!has_code_objects_for(arch)) {
        snprintf(reason, reason_len, "no %s device: found %s (HIP device %d)", served, arch, device_index);
        return false;
    }
    int num_cus = 0;
    memcpy(&num_cus, props + HIP_PROPS_R0600_CU_OFFSET, sizeof num_cus);

    hip_state *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(reason, reason_len, "allocation of the HIP backend state failed");
        return false;
    }
    st->device = device_index;
    st->num_cus = num_cus > 0 && num_cus <= 4096 ? num_cus : R35A_GFX1151_DEFAULT_CUS;
    snprintf(st->arch, sizeof st->arch, "%s", arch);

    int previous;
    e = enter_device(device_index, &previous);
    if (e != 0) {
        snprintf(reason, reason_len, "hipSetDevice(%d) failed: %s (%d)", device_index, hip_error_text(e), e);
        free(st);
        return false;
    }
    bool ok = load_kernels(st, reason, reason_len);
    leave_device(previous);
    if (!ok) {
        release_state(st);
        return false;
    }

    ctx->gpu = st;
    ctx->backend = R35A_BACKEND_GPU;
    ctx->info.backend = R35A_BACKEND_GPU;
    ctx->info.device_index = device_index;
    snprintf(ctx->info.backend_name, sizeof ctx->info.backend_name, "hip");
    snprintf(ctx->info.arch, sizeof ctx->info.arch, "%s", arch);
    char device_name[64];
    memcpy(device_name, props, sizeof device_name - 1); /* hipDeviceProp_t.name opens both layouts */
    device_name[sizeof device_name - 1] = '\0';
    int written = snprintf(ctx->info.reason, sizeof ctx->info.reason, "HIP device %d: %s, %s, %d CUs (%s)",
                           device_index, device_name[0] ? device_name : "unnamed", full_arch, st->num_cus,
                           runtime.library);
    (void)written; /* a reason cut at the field's size is still informative */
    r35a_log("hip: device %d is %s with %d CUs; %zu modules, %d decode variants, %d generic kernels and %d "
             "encoder variants loaded", device_index, full_arch, st->num_cus, st->num_modules,
             R35A_NUM_DECODE_VARIANTS, R35A_NUM_GENERIC_KERNELS, R35A_NUM_ENCODER_VARIANTS);
    return true;
}

void r35a_hip_context_release(r35a_context *ctx)
{
    if (!ctx || !ctx->gpu)
        return;
    release_state((hip_state *)ctx->gpu);
    ctx->gpu = NULL;
}

/* ---- launches ---- */

/* Launches f with its one by-value argument struct on stream; first, when clear_bytes > 0, zeroes
 * clear_bytes at clear on the same stream. */
static r35a_status launch(const hip_state *st, hip_function f, const char *name, const r35a_plan_info *info,
                          void *arg, void *clear, size_t clear_bytes, void *stream)
{
    int previous;
    hip_error e = enter_device(st->device, &previous);
    if (e != 0)
        return r35a_fail(R35A_ERR_DEVICE, "hipSetDevice(%d) failed: %s (%d)", st->device, hip_error_text(e), e);
    if (clear_bytes > 0) {
        e = runtime.api.MemsetAsync(clear, 0, clear_bytes, stream);
        if (e != 0) {
            leave_device(previous);
            return r35a_fail(R35A_ERR_DEVICE, "hipMemsetAsync of %zu workspace bytes for %s failed: %s (%d)",
                             clear_bytes, name, hip_error_text(e), e);
        }
    }
    void *params[] = {arg};
    e = runtime.api.ModuleLaunchKernel(f, info->grid[0], info->grid[1], info->grid[2], info->block[0],
                                       info->block[1], info->block[2], 0, stream, params, NULL);
    leave_device(previous);
    if (e != 0)
        return r35a_fail(R35A_ERR_DEVICE, "hipModuleLaunchKernel(%s, grid %ux%ux%u, block %u) failed: %s (%d)",
                         name, info->grid[0], info->grid[1], info->grid[2], info->block[0], hip_error_text(e), e);
    return R35A_OK;
}

/* R35A_FORCE (test-only) naming one kernel of a family, e.g. "decode_f16_d128_r16_kw2_dw2_w8": the
 * planner then considers that kernel only. Dispatch calls a family's entry only when R35A_FORCE is
 * unset, the family's name, or one of its kernels' names. */
static const char *forced_kernel(const char *family)
{
    const char *force = r35a_forced_impl();
    return force && strcmp(force, family) != 0 ? force : NULL;
}

static void fill_info(r35a_plan_info *info, const r35a_gpu_launch *l, const char *name)
{
    snprintf(info->implementation, sizeof info->implementation, "%s", name);
    info->workspace_bytes = l->workspace_bytes;
    memcpy(info->grid, l->grid, sizeof info->grid);
    memcpy(info->block, l->block, sizeof info->block);
    info->num_splits = l->num_splits;
}

static bool nothing_to_launch(const uint32_t grid[3]) { return grid[0] == 0 || grid[1] == 0 || grid[2] == 0; }

/* ---- the generic (portable) kernel ---- */

static bool generic_paged_supports(const r35a_context *ctx, const void *desc, char *reason, size_t reason_len)
{
    r35a_gpu_launch l;
    return r35a_plan_generic_paged(desc, state_of(ctx)->arch, forced_kernel("generic"), &l, reason, reason_len);
}

static r35a_status generic_paged_plan(const r35a_context *ctx, const void *desc, r35a_plan_info *info)
{
    r35a_gpu_launch l;
    char why[256];
    if (!r35a_plan_generic_paged(desc, state_of(ctx)->arch, forced_kernel("generic"), &l, why, sizeof why))
        return r35a_fail(R35A_ERR_INTERNAL, "generic paged planner declined after accepting: %s", why);
    fill_info(info, &l, r35a_generic_kernels[l.kernel].name);
    return R35A_OK;
}

/* Runs the generic paged kernel `kernel` over the sequences with M > min_query_len. */
static r35a_status run_generic_paged(const hip_state *st, int kernel, const r35a_paged_attention_desc *d,
                                     const r35a_paged_attention_args *args, int32_t min_query_len, void *stream)
{
    r35a_plan_info info;
    memset(&info, 0, sizeof info);
    r35a_generic_grid(d->num_tokens, d->num_q_heads, info.grid);
    info.block[0] = R35A_GENERIC_THREADS;
    info.block[1] = info.block[2] = 1;
    if (nothing_to_launch(info.grid))
        return R35A_OK;
    r35a_generic_paged_args ka;
    r35a_fill_generic_paged_args(d, args, min_query_len, &ka);
    return launch(st, st->generic[kernel], r35a_generic_kernels[kernel].name, &info, &ka, NULL, 0, stream);
}

static r35a_status generic_paged_run(const r35a_context *ctx, const r35a_plan *plan, const void *args,
                                     void *workspace, size_t workspace_bytes, void *stream)
{
    (void)workspace;
    (void)workspace_bytes;
    int k = r35a_find_generic_kernel(plan->info.implementation);
    if (k < 0)
        return r35a_fail(R35A_ERR_INTERNAL, "plan names unknown kernel %s", plan->info.implementation);
    return run_generic_paged(state_of(ctx), k, &plan->desc.paged, args, 0, stream);
}

static bool generic_varlen_supports(const r35a_context *ctx, const void *desc, char *reason, size_t reason_len)
{
    r35a_gpu_launch l;
    return r35a_plan_generic_varlen(desc, state_of(ctx)->arch, forced_kernel("generic"), &l, reason, reason_len);
}

static r35a_status generic_varlen_plan(const r35a_context *ctx, const void *desc, r35a_plan_info *info)
{
    r35a_gpu_launch l;
    char why[256];
    if (!r35a_plan_generic_varlen(desc, state_of(ctx)->arch, forced_kernel("generic"), &l, why, sizeof why))
        return r35a_fail(R35A_ERR_INTERNAL, "generic varlen planner declined after accepting: %s", why);
    fill_info(info, &l, r35a_generic_kernels[l.kernel].name);
    return R35A_OK;
}

/* Runs the generic varlen kernel `kernel` over all segments. */
static r35a_status run_generic_varlen(const hip_state *st, int kernel, const r35a_varlen_attention_desc *d,
                                      const r35a_varlen_attention_args *args, void *stream)
{
    r35a_plan_info info;
    memset(&info, 0, sizeof info);
    r35a_generic_grid(d->num_tokens, d->num_q_heads, info.grid);
    info.block[0] = R35A_GENERIC_THREADS;
    info.block[1] = info.block[2] = 1;
    if (nothing_to_launch(info.grid))
        return R35A_OK;
    r35a_generic_varlen_args ka;
    r35a_fill_generic_varlen_args(d, args, &ka);
    return launch(st, st->generic[kernel], r35a_generic_kernels[kernel].name, &info, &ka, NULL, 0, stream);
}

static r35a_status generic_varlen_run(const r35a_context *ctx, const r35a_plan *plan, const void *args,
                                      void *workspace, size_t workspace_bytes, void *stream)
{
    (void)workspace;
    (void)workspace_bytes;
    int k = r35a_find_generic_kernel(plan->info.implementation);
    if (k < 0)
        return r35a_fail(R35A_ERR_INTERNAL, "plan names unknown kernel %s", plan->info.implementation);
    return run_generic_varlen(state_of(ctx), k, &plan->desc.varlen, args, stream);
}

/* ---- the tuned encoder variants (non-causal varlen) ---- */

static bool encoder_supports(const r35a_context *ctx, const void *desc, char *reason, size_t reason_len)
{
    r35a_gpu_launch l;
    return r35a_plan_encoder(desc, state_of(ctx)->arch, forced_kernel("encoder"), &l, reason, reason_len);
}

static r35a_status encoder_plan(const r35a_context *ctx, const void *desc, r35a_plan_info *info)
{
    r35a_gpu_launch l;
    char why[256];
    if (!r35a_plan_encoder(desc, state_of(ctx)->arch, forced_kernel("encoder"), &l, why, sizeof why))
        return r35a_fail(R35A_ERR_INTERNAL, "encoder planner declined after accepting: %s", why);
    fill_info(info, &l, r35a_encoder_variants[l.kernel].name);
    return R35A_OK;
}

/* One launch for all segments, shaped by the plan (host-known values only); nothing is read back. */
static r35a_status encoder_run(const r35a_context *ctx, const r35a_plan *plan, const void *args_v,
                               void *workspace, size_t workspace_bytes, void *stream)
{
    (void)workspace;
    (void)workspace_bytes;
    const hip_state *st = state_of(ctx);
    const r35a_varlen_attention_desc *d = &plan->desc.varlen;
    const r35a_varlen_attention_args *args = args_v;
    int v = r35a_find_encoder_variant(plan->info.implementation);
    if (v < 0)
        return r35a_fail(R35A_ERR_INTERNAL, "plan names unknown kernel %s", plan->info.implementation);
    const r35a_encoder_variant *var = &r35a_encoder_variants[v];

    char why[128];
    if (!r35a_encoder_pointers_aligned(args, why, sizeof why)) {
        /* Pointers are only known now; the portable kernel serves any alignment. */
        r35a_gpu_launch g;
        char gwhy[256];
        if (!r35a_plan_generic_varlen(d, st->arch, NULL, &g, gwhy, sizeof gwhy))
            return r35a_fail(R35A_ERR_INVALID_ARGUMENT, "varlen_attention_args: %s as %s needs, and no generic "
                             "kernel serves the call: %s", why, var->name, gwhy);
        r35a_log("varlen: %s cannot run: %s; running %s instead", var->name, why,
                 r35a_generic_kernels[g.kernel].name);
        return run_generic_varlen(st, g.kernel, d, args, stream);
    }
    if (nothing_to_launch(plan->info.grid))
        return R35A_OK;
    r35a_encoder_args ka;
    r35a_fill_encoder_args(d, args, &ka);
    return launch(st, st->encoder[v], var->name, &plan->info, &ka, NULL, 0, stream);
}

/* ---- the tuned decode variants ----
 * A call with max_query_len <= 8 is one decode launch. A mixed batch (max_query_len > 8) is two
 * launches on the caller's stream: the decode variant for the sequences with M <= 8 (it skips the
 * others), then the generic kernel with min_query_len = 8 for the rest. The plan names both,
 * "decode_...+generic_paged_...", and its grid, block, splits and workspace are the decode launch's. */

static bool plan_tuned(const r35a_context *ctx, const r35a_paged_attention_desc *d, r35a_gpu_launch *dl,
                       r35a_gpu_launch *gl, bool *mixed, char *reason, size_t reason_len)
{
    const hip_state *st = state_of(ctx);
    *mixed = d->max_query_len > R35A_DECODE_MAX_QUERY_LEN;
    if (!*mixed)
        return r35a_plan_decode(d, st->arch, st->num_cus, forced_kernel("decode"), dl, reason, reason_len);
    return r35a_plan_mixed(d, st->arch, st->num_cus, forced_kernel("decode"), dl, gl, reason, reason_len);
}

static bool decode_supports(const r35a_context *ctx, const void *desc, char *reason, size_t reason_len)
{
    r35a_gpu_launch dl, gl;
    bool mixed;
    return plan_tuned(ctx, desc, &dl, &gl, &mixed, reason, reason_len);
}

static r35a_status decode_plan(const r35a_context *ctx, const void *desc, r35a_plan_info *info)
{
    const r35a_paged_attention_desc *d = desc;
    r35a_gpu_launch dl, gl;
    bool mixed;
    char why[256];
    if (!plan_tuned(ctx, d, &dl, &gl, &mixed, why, sizeof why))
        return r35a_fail(R35A_ERR_INTERNAL, "decode planner declined after accepting: %s", why);
    fill_info(info, &dl, r35a_decode_variants[dl.kernel].name);
    if (mixed) {
        const char *generic = r35a_generic_kernels[gl.kernel].name;
        snprintf(info->implementation, sizeof info->implementation, "%s+%s", r35a_decode_variants[dl.kernel].name,
                 generic);
        /* dispatch.c adds this note to the plan's fallback_reason. */
        snprintf(info->fallback_reason, sizeof info->fallback_reason,
                 "max_query_len %d > %d: the sequences with M > %d run on %s in a second launch",
                 (int)d->max_query_len, R35A_DECODE_MAX_QUERY_LEN, R35A_DECODE_MAX_QUERY_LEN, generic);
    }
    return R35A_OK;
}

static r35a_status decode_run(const r35a_context *ctx, const r35a_plan *plan, const void *args_v,
                              void *workspace, size_t workspace_bytes, void *stream)
{
    (void)workspace_bytes;
    const hip_state *st = state_of(ctx);
    const r35a_paged_attention_desc *d = &plan->desc.paged;
    const r35a_paged_attention_args *args = args_v;
    /* "decode_..." or, for a mixed batch, "decode_...+generic_paged_...". */
    char name[sizeof plan->info.implementation];
    snprintf(name, sizeof name, "%s", plan->info.implementation);
    char *plus = strchr(name, '+');
    if (plus)
        *plus = '\0';
    int v = r35a_find_decode_variant(name);
    int mixed_generic = plus ? r35a_find_generic_kernel(plus + 1) : -1;
    if (v < 0 || (plus && mixed_generic < 0))
        return r35a_fail(R35A_ERR_INTERNAL, "plan names unknown kernel %s", plan->info.implementation);
    const r35a_decode_variant *var = &r35a_decode_variants[v];

    char why[128];
    if (!r35a_decode_pointers_aligned(args, workspace, plan->info.num_splits, why, sizeof why)) {
        /* Pointers are only known now; the portable kernel serves any alignment and needs no workspace. */
        r35a_gpu_launch g;
        char gwhy[256];
        if (!r35a_plan_generic_paged(d, st->arch, NULL, &g, gwhy, sizeof gwhy))
            return r35a_fail(R35A_ERR_INVALID_ARGUMENT, "paged_attention_args: %s as %s needs, and no generic "
                             "kernel serves the call: %s", why, var->name, gwhy);
        r35a_log("paged: %s cannot run: %s; running %s instead", var->name, why,
                 r35a_generic_kernels[g.kernel].name);
        return run_generic_paged(st, g.kernel, d, args, 0, stream);
    }

    if (!nothing_to_launch(plan->info.grid)) {
        /* The decode launch serves M <= max_query_len, capped at 8 in a mixed batch (as planned). */
        const r35a_paged_attention_desc part = r35a_decode_part(d);
        r35a_gpu_launch l;
        memset(&l, 0, sizeof l);
        l.kernel = v;
        l.num_splits = plan->info.num_splits;
        l.num_row_groups = r35a_decode_num_row_groups(part.num_q_heads / part.num_kv_heads, part.max_query_len,
                                                      var->rows);
        r35a_decode_args ka;
        r35a_fill_decode_args(&part, args, &l, workspace, &ka);

        /* The split-KV arrival counters must start at zero, and the caller's workspace may hold anything
         * (another op's scratch): clear them on the stream, ahead of the kernel. */
        size_t counters = l.num_splits > 1 ? (size_t)r35a_decode_counters_bytes(part.num_seqs, part.num_kv_heads,
                                                                                l.num_row_groups)
                                           : 0;
        r35a_status rs = launch(st, st->decode[v], var->name, &plan->info, &ka, workspace, counters, stream);
        if (rs != R35A_OK)
            return rs;
    }
    if (!plus)
        return R35A_OK;
    /* Mixed batch: the sequences with M > 8 on the same stream (a failure here leaves the decode
     * launch queued: only a broken device or runtime fails a launch whose shape was planned). */
    return run_generic_paged(st, mixed_generic, d, args, R35A_DECODE_MAX_QUERY_LEN, stream);
}

const r35a_impl r35a_hip_paged_tuned = {"decode", R35A_OP_PAGED, R35A_BACKEND_GPU,
                                        decode_supports, decode_plan, decode_run};
const r35a_impl r35a_hip_paged_generic = {"generic", R35A_OP_PAGED, R35A_BACKEND_GPU,
                                          generic_paged_supports, generic_paged_plan, generic_paged_run};
const r35a_impl r35a_hip_varlen_generic = {"generic", R35A_OP_VARLEN, R35A_BACKEND_GPU,
                                           generic_varlen_supports, generic_varlen_plan, generic_varlen_run};
const r35a_impl r35a_hip_varlen_encoder = {"encoder", R35A_OP_VARLEN, R35A_BACKEND_GPU,
                                           encoder_supports, encoder_plan, encoder_run};
