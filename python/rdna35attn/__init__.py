"""rdna35attn: Python bindings (ctypes) for librdna35attn, attention kernels for AMD gfx1151.

    import numpy as np, rdna35attn
    out = rdna35attn.paged_attention(q, k_cache, v_cache, seq_lens, query_start_loc, block_table)

Buffers: numpy arrays on a reference context (host memory); on a GPU context device buffers:
torch tensors (data_ptr()), objects with __cuda_array_interface__, or int pointers (passed
unchecked). f16 and f32 are numpy float16/float32; bf16 is passed as uint16 with dtype="bfloat16".

Plan once, run many times:

    with rdna35attn.Context() as ctx:                       # AUTO backend; ctx.info says which
        plan = ctx.plan_paged_attention(q, k_cache, v_cache, out, block_table,
                                        max_seq_len=4096, max_query_len=1)
        plan.run(q, k_cache, v_cache, out, seq_lens, query_start_loc, block_table)

Errors: every r35a_status other than R35A_OK raises its own subclass of R35AError carrying
.status, .status_name, .detail (the library's detail, naming the field) and .field; see
rdna35attn.errors. The shim checks shapes, dtypes, strides and memory location before calling and
raises the same classes (from_library=False).

The library is found through $R35A_LIBRARY, next to this package, in the build tree of a source
checkout (build/librdna35attn.so), or on the loader's search path.
"""

from .api import (KV_SCALE_PER_KV_HEAD, KV_SCALE_PER_TENSOR, KV_SCALE_PER_TOKEN_HEAD, Backend, Context, ContextInfo,
                  DType, MergeStatesDesc, MergeStatesPlan, PagedAttentionDesc,
                  PagedAttentionPlan, PlanInfo, VarlenAttentionDesc, VarlenAttentionPlan, default_context,
                  library_path, merge_states, paged_attention, resolve_dtype, varlen_attention, version)
from .errors import (BackendUnavailableError, DeviceError, InternalError, InvalidArgumentError, InvalidDataError,
                     LibraryNotFoundError, NullPointerError, OutOfMemoryError, PlanMismatchError, R35AError,
                     SizeOverflowError, StructSizeError, UnknownDtypeError, UnsupportedError,
                     WorkspaceTooSmallError)

__version__ = "0.4.0"

__all__ = [
    "Backend", "Context", "ContextInfo", "DType", "PagedAttentionDesc", "PagedAttentionPlan", "PlanInfo",
    "VarlenAttentionDesc", "VarlenAttentionPlan", "default_context", "library_path", "paged_attention",
    "resolve_dtype", "varlen_attention", "version", "MergeStatesDesc", "MergeStatesPlan", "merge_states",
    "R35AError", "NullPointerError", "InvalidArgumentError", "StructSizeError", "UnknownDtypeError",
    "SizeOverflowError", "UnsupportedError", "BackendUnavailableError", "WorkspaceTooSmallError",
    "OutOfMemoryError", "DeviceError", "InvalidDataError", "PlanMismatchError", "InternalError",
    "LibraryNotFoundError", "KV_SCALE_PER_TENSOR", "KV_SCALE_PER_KV_HEAD", "KV_SCALE_PER_TOKEN_HEAD",
]
