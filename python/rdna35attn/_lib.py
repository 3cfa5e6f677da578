"""Finding and loading librdna35attn, and the ctypes mirror of include/rdna35attn.h.

The structs below copy the header field by field (tests/test_abi.py compares every offset with a C
compiler's). The library itself rejects a struct whose struct_size it does not know, so a layout
that drifted from the header fails loudly instead of passing garbage.
"""

import ctypes
import os
import pathlib
import threading

from .errors import LibraryNotFoundError

#: ABI major version this shim is written for; it must equal the library's R35A_VERSION_MAJOR.
ABI_MAJOR = 0

_LIBRARY_NAMES = ("librdna35attn.so", "librdna35attn.so.%d" % ABI_MAJOR)

# ---- the C structs ----------------------------------------------------------------------------

c_enum = ctypes.c_int  # C enums are int-sized on every ABI the library supports


class ContextOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("backend", c_enum),
        ("device_index", ctypes.c_int32),
    ]


class ContextInfoC(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("backend", c_enum),
        ("device_index", ctypes.c_int32),
        ("backend_name", ctypes.c_char * 32),
        ("arch", ctypes.c_char * 64),
        ("reason", ctypes.c_char * 256),
    ]


class PlanInfoC(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("implementation", ctypes.c_char * 128),
        ("fallback_reason", ctypes.c_char * 256),
        ("workspace_bytes", ctypes.c_size_t),
        ("grid", ctypes.c_uint32 * 3),
        ("block", ctypes.c_uint32 * 3),
        ("num_splits", ctypes.c_int32),
    ]


PAGED_INT_FIELDS = ("num_seqs", "num_tokens", "max_query_len", "max_seq_len", "num_q_heads",
                    "num_kv_heads", "head_size", "page_size", "num_pages", "block_table_stride")
PAGED_STRIDE_FIELDS = ("q_token_stride", "q_head_stride", "o_token_stride", "o_head_stride",
                       "k_page_stride", "k_head_stride", "k_slot_stride",
                       "v_page_stride", "v_head_stride", "v_slot_stride")
# per-token-head scale tensors [num_pages][page_size][num_kv_heads] (since 0.4)
PAGED_SCALE_STRIDE_FIELDS = ("k_scale_page_stride", "k_scale_slot_stride", "k_scale_head_stride",
                             "v_scale_page_stride", "v_scale_slot_stride", "v_scale_head_stride")


class PagedDescC(ctypes.Structure):
    _fields_ = ([("struct_size", ctypes.c_size_t), ("dtype", c_enum)]
                + [(name, ctypes.c_int32) for name in PAGED_INT_FIELDS]
                + [("window", ctypes.c_int32), ("softmax_scale", ctypes.c_float),
                   ("logit_softcap", ctypes.c_float), ("use_alibi", ctypes.c_int32)]
                + [(name, ctypes.c_int64) for name in PAGED_STRIDE_FIELDS]
                + [("use_sinks", ctypes.c_int32), ("kv_dtype", c_enum), ("kv_scale_per_head", ctypes.c_int32)]
                + [("lse_token_stride", ctypes.c_int64), ("lse_head_stride", ctypes.c_int64),
                   ("use_lse", ctypes.c_int32)]
                + [(name, ctypes.c_int64) for name in PAGED_SCALE_STRIDE_FIELDS])


class PagedArgsC(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("q", ctypes.c_void_p),
        ("k_cache", ctypes.c_void_p),
        ("v_cache", ctypes.c_void_p),
        ("out", ctypes.c_void_p),
        ("seq_lens", ctypes.c_void_p),
        ("query_start_loc", ctypes.c_void_p),
        ("block_table", ctypes.c_void_p),
        ("alibi_slopes", ctypes.c_void_p),
        ("sinks", ctypes.c_void_p),
        ("k_scale", ctypes.c_void_p),
        ("v_scale", ctypes.c_void_p),
        ("lse", ctypes.c_void_p),
    ]


VARLEN_INT_FIELDS = ("num_segments", "num_tokens", "max_seqlen", "num_q_heads", "num_kv_heads",
                     "head_size", "causal")
VARLEN_STRIDE_FIELDS = ("q_token_stride", "q_head_stride", "k_token_stride", "k_head_stride",
                        "v_token_stride", "v_head_stride", "o_token_stride", "o_head_stride")


class VarlenDescC(ctypes.Structure):
    _fields_ = ([("struct_size", ctypes.c_size_t), ("dtype", c_enum)]
                + [(name, ctypes.c_int32) for name in VARLEN_INT_FIELDS]
                + [("softmax_scale", ctypes.c_float), ("logit_softcap", ctypes.c_float)]
                + [(name, ctypes.c_int64) for name in VARLEN_STRIDE_FIELDS]
                + [("use_sinks", ctypes.c_int32)]
                + [("lse_token_stride", ctypes.c_int64), ("lse_head_stride", ctypes.c_int64),
                   ("use_lse", ctypes.c_int32)])


class VarlenArgsC(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("q", ctypes.c_void_p),
        ("k", ctypes.c_void_p),
        ("v", ctypes.c_void_p),
        ("out", ctypes.c_void_p),
        ("cu_seqlens", ctypes.c_void_p),
        ("sinks", ctypes.c_void_p),
        ("lse", ctypes.c_void_p),
    ]


MERGE_INT_FIELDS = ("num_parts", "num_tokens", "num_heads", "head_size", "use_out_lse")
MERGE_STRIDE_FIELDS = ("part_stride", "part_token_stride", "part_head_stride",
                       "lse_part_stride", "lse_token_stride", "lse_head_stride",
                       "o_token_stride", "o_head_stride", "out_lse_token_stride", "out_lse_head_stride")


class MergeDescC(ctypes.Structure):
    _fields_ = ([("struct_size", ctypes.c_size_t), ("dtype", c_enum)]
                + [(name, ctypes.c_int32) for name in MERGE_INT_FIELDS]
                + [(name, ctypes.c_int64) for name in MERGE_STRIDE_FIELDS])


class MergeArgsC(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("parts_o", ctypes.c_void_p),
        ("parts_lse", ctypes.c_void_p),
        ("out", ctypes.c_void_p),
        ("out_lse", ctypes.c_void_p),
    ]


STRUCTS = {
    "r35a_context_options": ContextOptions,
    "r35a_context_info": ContextInfoC,
    "r35a_plan_info": PlanInfoC,
    "r35a_paged_attention_desc": PagedDescC,
    "r35a_paged_attention_args": PagedArgsC,
    "r35a_varlen_attention_desc": VarlenDescC,
    "r35a_varlen_attention_args": VarlenArgsC,
    "r35a_merge_states_desc": MergeDescC,
    "r35a_merge_states_args": MergeArgsC,
}

# ---- function prototypes ----------------------------------------------------------------------

_P = ctypes.POINTER
_status = ctypes.c_int
_PROTOTYPES = {
    "r35a_version_number": (ctypes.c_uint, []),
    "r35a_version_string": (ctypes.c_char_p, []),
    "r35a_status_string": (ctypes.c_char_p, [_status]),
    "r35a_last_error_detail": (ctypes.c_char_p, []),
    "r35a_context_options_init": (None, [_P(ContextOptions)]),
    "r35a_context_create": (_status, [_P(ContextOptions), _P(ctypes.c_void_p)]),
    "r35a_context_destroy": (None, [ctypes.c_void_p]),
    "r35a_context_get_info": (_status, [ctypes.c_void_p, _P(ContextInfoC)]),
    "r35a_context_check_device": (_status, [ctypes.c_void_p]),
    "r35a_plan_get_info": (_status, [ctypes.c_void_p, _P(PlanInfoC)]),
    "r35a_plan_destroy": (None, [ctypes.c_void_p]),
    "r35a_paged_attention_desc_init": (None, [_P(PagedDescC), c_enum] + [ctypes.c_int32] * 9),
    "r35a_paged_attention_plan": (_status, [ctypes.c_void_p, _P(PagedDescC), _P(ctypes.c_void_p)]),
    "r35a_paged_attention_run": (_status, [ctypes.c_void_p, ctypes.c_void_p, _P(PagedArgsC),
                                           ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]),
    "r35a_varlen_attention_desc_init": (None, [_P(VarlenDescC), c_enum] + [ctypes.c_int32] * 6),
    "r35a_varlen_attention_plan": (_status, [ctypes.c_void_p, _P(VarlenDescC), _P(ctypes.c_void_p)]),
    "r35a_varlen_attention_run": (_status, [ctypes.c_void_p, ctypes.c_void_p, _P(VarlenArgsC),
                                            ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]),
    "r35a_merge_states_desc_init": (None, [_P(MergeDescC), c_enum] + [ctypes.c_int32] * 4),
    "r35a_merge_states_plan": (_status, [ctypes.c_void_p, _P(MergeDescC), _P(ctypes.c_void_p)]),
    "r35a_merge_states_run": (_status, [ctypes.c_void_p, ctypes.c_void_p, _P(MergeArgsC),
                                        ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]),
}

# ---- finding the library ----------------------------------------------------------------------


def candidate_paths():
    """Where the library is looked for, in order, as (description, path-or-name) pairs.

    1. $R35A_LIBRARY, when set (then nothing else is tried);
    2. inside the package: rdna35attn/librdna35attn.so, which `python3 -m pip install ./python` puts
       there (the wheel carries the library: python/_r35a_build.py), then the directory holding
       the package;
    3. the build tree of a source checkout: <repo>/build/librdna35attn.so;
    4. the dynamic loader's search path (LD_LIBRARY_PATH, ld.so.cache), e.g. after `cmake --install`.
    """
    env = os.environ.get("R35A_LIBRARY")
    if env:
        return [("R35A_LIBRARY", env)]
    package_dir = pathlib.Path(__file__).resolve().parent
    found = []
    for directory in (package_dir, package_dir.parent):
        for name in _LIBRARY_NAMES:
            found.append(("next to the package", str(directory / name)))
    found.append(("build tree", str(package_dir.parent.parent / "build" / _LIBRARY_NAMES[0])))
    for name in reversed(_LIBRARY_NAMES):
        found.append(("loader search path", name))
    return found


class Library:
    """The loaded library with its prototypes set; attribute access gives the C functions."""

    def __init__(self, path):
        self.path = path
        self._cdll = ctypes.CDLL(path)
        for name, (restype, argtypes) in _PROTOTYPES.items():
            function = getattr(self._cdll, name)
            function.restype = restype
            function.argtypes = argtypes
            setattr(self, name, function)
        self.version_number = int(self.r35a_version_number())
        self.version = self.r35a_version_string().decode()
        if self.version_number // 10000 != ABI_MAJOR:
            raise LibraryNotFoundError(
                "%s is librdna35attn %s, but this package speaks ABI version %d"
                % (path, self.version, ABI_MAJOR))


_library = None
_library_lock = threading.Lock()


def load():
    """Returns the Library, loading it on first use; raises LibraryNotFoundError listing what was tried."""
    global _library
    if _library is not None:
        return _library
    with _library_lock:
        if _library is None:
            tried = []
            for origin, path in candidate_paths():
                is_name = os.sep not in path
                if not is_name and not os.path.exists(path):
                    tried.append("%s (%s): not found" % (path, origin))
                    continue
                try:
                    _library = Library(path)
                    break
                except OSError as error:
                    tried.append("%s (%s): %s" % (path, origin, error))
            if _library is None:
                raise LibraryNotFoundError(
                    "librdna35attn not found; install the package with the library (python3 -m pip install "
                    "./python from the repository) or set R35A_LIBRARY=/path/to/librdna35attn.so. Tried:\n  "
                    + "\n  ".join(tried))
    return _library
