"""Contexts, descriptors, plans and the one-call helpers over the C API."""

import ctypes
import enum
import itertools
import operator
import threading
import weakref
from collections import namedtuple

from . import _buffers
from ._buffers import DEVICE, HOST
from ._lib import (MERGE_INT_FIELDS, MERGE_STRIDE_FIELDS, PAGED_INT_FIELDS, PAGED_SCALE_STRIDE_FIELDS,
                   PAGED_STRIDE_FIELDS, VARLEN_INT_FIELDS, VARLEN_STRIDE_FIELDS, ContextInfoC, ContextOptions, MergeArgsC, MergeDescC,
                   PagedArgsC, PagedDescC, PlanInfoC, VarlenArgsC, VarlenDescC, load)
from .errors import SizeOverflowError, UnknownDtypeError, WorkspaceTooSmallError, error_for_status, invalid


class Backend(enum.IntEnum):
    """r35a_backend."""
    AUTO = 0
    GPU = 1
    REFERENCE = 2


class DType(enum.IntEnum):
    """r35a_dtype. Numpy has no bfloat16 and no float8: pass bf16 data as uint16 arrays with
    dtype="bfloat16", and fp8 e4m3 KV caches as uint8 arrays with kv_dtype="fp8_e4m3" (torch's
    float8_e4m3fn tensors are recognized as they are). FP8_E4M3 and INT8 are KV-cache dtypes only."""
    F16 = 1
    BF16 = 2
    F32 = 3
    FP8_E4M3 = 4
    INT8 = 5


_DTYPE_NAMES = {"float16": DType.F16, "f16": DType.F16, "half": DType.F16, "fp16": DType.F16,
                "bfloat16": DType.BF16, "bf16": DType.BF16,
                "float32": DType.F32, "f32": DType.F32, "float": DType.F32, "fp32": DType.F32,
                "float8_e4m3fn": DType.FP8_E4M3, "fp8_e4m3": DType.FP8_E4M3, "fp8": DType.FP8_E4M3,
                "e4m3": DType.FP8_E4M3, "int8": DType.INT8}
# Element types a buffer may have for each r35a_dtype (uint16: the raw bits of f16 or bf16; uint8:
# the raw bytes of fp8 e4m3).
_ELEMENT_TYPES = {DType.F16: ("float16", "uint16"), DType.BF16: ("bfloat16", "uint16"), DType.F32: ("float32",),
                  DType.FP8_E4M3: ("float8_e4m3fn", "uint8"), DType.INT8: ("int8",)}
_KNOWN_ELEMENT_TYPES = ("float16", "bfloat16", "float32", "uint16", "float8_e4m3fn", "uint8", "int8")
_INT32_MIN, _INT32_MAX = -2 ** 31, 2 ** 31 - 1
_INT64_MIN, _INT64_MAX = -2 ** 63, 2 ** 63 - 1


def resolve_dtype(dtype, what="dtype"):
    """A DType from a DType, its value, a name ("float16", "bf16", ...), a numpy or torch dtype."""
    if isinstance(dtype, DType):
        return dtype
    if isinstance(dtype, int) and not isinstance(dtype, bool):
        try:
            return DType(dtype)
        except ValueError:
            raise UnknownDtypeError("%s: %d is not an r35a_dtype" % (what, dtype), from_library=False) from None
    name = getattr(dtype, "name", None) if not isinstance(dtype, str) else dtype
    if not isinstance(name, str):
        name = getattr(dtype, "__name__", None) or str(dtype)
    resolved = _DTYPE_NAMES.get(name.replace("torch.", "").lower())
    if resolved is None:
        raise UnknownDtypeError("%s: %r is not float16, bfloat16, float32, float8_e4m3fn or int8" % (what, dtype),
                                from_library=False)
    return resolved


def _resolve_kv_dtype(value):
    """kv_dtype: 0 or None (= dtype, the default), else a dtype as resolve_dtype() takes it."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value == 0):
        return 0
    return resolve_dtype(value, "paged_attention_desc.kv_dtype")


def _check_status(lib, status):
    if status != 0:
        raise error_for_status(status, lib.r35a_last_error_detail().decode(errors="replace"),
                               lib.r35a_status_string(status).decode())


ContextInfo = namedtuple("ContextInfo", "backend device_index backend_name arch reason")
ContextInfo.__doc__ = "r35a_context_info: backend is Backend.GPU or Backend.REFERENCE."
PlanInfo = namedtuple("PlanInfo", "implementation fallback_reason workspace_bytes grid block num_splits")
PlanInfo.__doc__ = "r35a_plan_info."


def _as_int(what, value):
    """value as a Python int (numpy integers included); InvalidArgumentError otherwise."""
    if isinstance(value, bool):
        return int(value)
    try:
        return operator.index(value)
    except TypeError:
        raise invalid("%s: %r is not an integer" % (what, value)) from None


def _int32_args(struct_name, names, values):
    result = []
    for name, value in zip(names, values):
        value = _as_int("%s.%s" % (struct_name, name), value)
        if not _INT32_MIN <= value <= _INT32_MAX:
            raise invalid("%s.%s: %d is not a 32-bit integer" % (struct_name, name, value))
        result.append(value)
    return tuple(result)


# ---- descriptors ------------------------------------------------------------------------------

class _Desc:
    """Common part of the descriptor twins: attributes named as the C fields, range-checked on use."""

    _C = None
    _NAME = ""
    _DTYPES = ("dtype",)   # r35a_dtype fields
    _INT32 = ()
    _INT64 = ()
    _FLOAT = ()

    def __init__(self, **fields):
        for name, value in fields.items():
            setattr(self, name, value)

    def __setattr__(self, name, value):
        if name not in self._DTYPES + self._INT32 + self._INT64 + self._FLOAT:
            raise AttributeError("%s has no field %r" % (self._NAME, name))
        if name == "dtype":
            value = resolve_dtype(value, self._NAME + ".dtype")
        elif name == "kv_dtype":
            value = _resolve_kv_dtype(value)
        object.__setattr__(self, name, value)

    def fields(self):
        return {name: getattr(self, name) for name in self._DTYPES + self._INT32 + self._FLOAT + self._INT64}

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__, ", ".join("%s=%r" % kv for kv in self.fields().items()))

    def __eq__(self, other):
        return type(self) is type(other) and self.fields() == other.fields()

    def to_c(self):
        """The C struct, struct_size set; InvalidArgumentError for values the C fields cannot hold."""
        c = self._C()
        c.struct_size = ctypes.sizeof(c)
        for name in self._DTYPES:
            setattr(c, name, int(getattr(self, name)))
        for names, lo, hi in ((self._INT32, _INT32_MIN, _INT32_MAX), (self._INT64, _INT64_MIN, _INT64_MAX)):
            for name in names:
                value = _as_int("%s.%s" % (self._NAME, name), getattr(self, name))
                if not lo <= value <= hi:
                    raise SizeOverflowError("%s.%s: %d does not fit the C field" % (self._NAME, name, value),
                                            from_library=False)
                setattr(c, name, value)
        for name in self._FLOAT:
            setattr(c, name, float(getattr(self, name)))
        return c

    @classmethod
    def _from_c(cls, c):
        desc = cls.__new__(cls)
        for name in cls._DTYPES:
            value = getattr(c, name)
            object.__setattr__(desc, name, DType(value) if value in DType._value2member_map_ else value)
        for name in cls._INT32 + cls._INT64 + cls._FLOAT:
            object.__setattr__(desc, name, getattr(c, name))
        return desc


class PagedAttentionDesc(_Desc):
    """r35a_paged_attention_desc. The constructor is r35a_paged_attention_desc_init (contiguous HND
    layout, softmax_scale = 1/sqrt(head_size)); keyword arguments then override any field. Use
    for_tensors() to read the shape and strides off the arrays instead."""

    _C = PagedDescC
    _NAME = "paged_attention_desc"
    _DTYPES = ("dtype", "kv_dtype")
    _INT32 = PAGED_INT_FIELDS + ("window", "use_alibi", "use_sinks", "kv_scale_per_head", "use_lse")
    _INT64 = PAGED_STRIDE_FIELDS + ("lse_token_stride", "lse_head_stride") + PAGED_SCALE_STRIDE_FIELDS
    _FLOAT = ("softmax_scale", "logit_softcap")

    def __init__(self, dtype, num_seqs, num_tokens, max_query_len, max_seq_len, num_q_heads, num_kv_heads,
                 head_size, page_size, num_pages, **fields):
        c = PagedDescC()
        args = _int32_args(self._NAME, PAGED_INT_FIELDS, (num_seqs, num_tokens, max_query_len, max_seq_len,
                                                          num_q_heads, num_kv_heads, head_size, page_size, num_pages))
        load().r35a_paged_attention_desc_init(ctypes.byref(c), int(resolve_dtype(dtype)), *args)
        base = self._from_c(c)
        super().__init__(**base.fields())
        super().__init__(**fields)

    @classmethod
    def for_tensors(cls, q, k_cache, v_cache, out, block_table, *, max_seq_len, max_query_len, dtype=None,
                    kv_layout="HND", window=0, softmax_scale=None, logit_softcap=0.0, use_alibi=False,
                    use_sinks=False, kv_dtype=None, kv_scale_per_head=False, lse=None, k_scale=None,
                    v_scale=None):
        """A descriptor whose shape and strides are those of the given buffers (numpy arrays,
        tensors, __cuda_array_interface__ objects; only their shapes, strides and dtypes are read).

        q, out: [num_tokens, num_q_heads, head_size]; k_cache, v_cache: [num_pages, num_kv_heads,
        page_size, head_size] for kv_layout="HND" or [num_pages, page_size, num_kv_heads, head_size]
        for "NHD"; block_table: int32 [num_seqs, >= ceil(max_seq_len / page_size)]. max_seq_len and
        max_query_len are the host-known bounds the plan is made for.

        8-bit KV caches: kv_dtype "fp8_e4m3" (torch.float8_e4m3fn caches are recognized; numpy has no
        fp8, so pass uint8 arrays and say kv_dtype="fp8_e4m3") or "int8" (int8 arrays are
        recognized); kv_scale_per_head: False / "tensor" (one scale each), True / "kv_head"
        ([num_kv_heads] each) or "token_head" (one per key and kv head: k_scale and v_scale are then
        float32 [num_pages, page_size, num_kv_heads] tensors, any strides, which must be passed here
        too so the descriptor takes their strides, and again to run()). use_sinks:
        run() then takes sinks ([num_q_heads] float32). lse: a float32 [num_tokens, num_q_heads]
        buffer (any strides) turns the LSE output on (use_lse=1, its strides); run() then takes it."""
        bufs = {name: _shaped(name, obj) for name, obj in
                (("q", q), ("k_cache", k_cache), ("v_cache", v_cache), ("out", out), ("block_table", block_table))}
        dtype = _tensor_dtype([bufs[n] for n in ("q", "out")], dtype)
        kv_dtype = _cache_dtype([bufs[n] for n in ("k_cache", "v_cache")], kv_dtype, dtype)
        qb, kb, vb, ob, bt = (bufs[n] for n in ("q", "k_cache", "v_cache", "out", "block_table"))
        _require_ndim(qb, 3, "[num_tokens, num_q_heads, head_size]")
        num_tokens, num_q_heads, head_size = qb.shape
        if kv_layout not in ("HND", "NHD"):
            raise invalid("kv_layout: %r is not 'HND' or 'NHD'" % (kv_layout,))
        axes = ("num_pages", "num_kv_heads", "page_size", "head_size") if kv_layout == "HND" else \
            ("num_pages", "page_size", "num_kv_heads", "head_size")
        _require_ndim(kb, 4, "[%s]" % ", ".join(axes))
        named = dict(zip(axes, kb.shape))
        _require_shape(vb, kb.shape, "k_cache.shape")
        _require_shape(ob, qb.shape, "q.shape")
        if named["head_size"] != head_size:
            raise invalid("k_cache.shape: head_size %d differs from q's %d" % (named["head_size"], head_size))
        for b in (qb, kb, vb, ob):
            _require_unit_last_stride(b)
        _require_int32(bt)
        if len(bt.shape) != 2:
            raise invalid("block_table.shape: %s is not 2-D [num_seqs, pages per sequence]" % (bt.shape,))
        num_seqs, table_width = bt.shape
        page_size = named["page_size"]
        max_seq_len = _as_int("max_seq_len", max_seq_len)
        pages_needed = -(-max_seq_len // page_size) if page_size > 0 else 0
        if table_width < pages_needed:
            raise invalid("block_table.shape: %d entries per sequence, below ceil(max_seq_len %d / page_size %d)"
                          " = %d" % (table_width, max_seq_len, page_size, pages_needed))
        if table_width > 1 and bt.strides[1] != 1:
            raise invalid("block_table.strides: %s; entries of a sequence must be contiguous" % (bt.strides,))
        desc = cls(dtype, num_seqs, num_tokens, max_query_len, max_seq_len, num_q_heads,
                   named["num_kv_heads"], head_size, page_size, named["num_pages"])
        desc.block_table_stride = bt.strides[0] if num_seqs > 1 else table_width
        desc.q_token_stride, desc.q_head_stride = _used_strides(qb)[:2]
        desc.o_token_stride, desc.o_head_stride = _used_strides(ob)[:2]
        vstrides = dict(zip(axes, _used_strides(vb)))
        kstrides = dict(zip(axes, _used_strides(kb)))
        desc.k_page_stride, desc.k_head_stride, desc.k_slot_stride = (
            kstrides["num_pages"], kstrides["num_kv_heads"], kstrides["page_size"])
        desc.v_page_stride, desc.v_head_stride, desc.v_slot_stride = (
            vstrides["num_pages"], vstrides["num_kv_heads"], vstrides["page_size"])
        desc.window = window
        if softmax_scale is not None:
            desc.softmax_scale = softmax_scale
        desc.logit_softcap = logit_softcap
        desc.use_alibi = 1 if use_alibi else 0
        desc.use_sinks = 1 if use_sinks else 0
        desc.kv_dtype = kv_dtype
        desc.kv_scale_per_head = _scale_granularity(kv_scale_per_head)
        if desc.kv_scale_per_head == KV_SCALE_PER_TOKEN_HEAD:
            shape = (named["num_pages"], page_size, named["num_kv_heads"])
            for p, obj in (("k", k_scale), ("v", v_scale)):
                if obj is None:
                    raise invalid("%s_scale: None, but kv_scale_per_head='token_head' reads the scale tensors' "
                                  "strides" % p)
                sb = _shaped(p + "_scale", obj)
                if sb.dtype != "float32" or tuple(sb.shape) != shape:
                    raise invalid("%s_scale.shape: %s %s, expected float32 [num_pages, page_size, num_kv_heads] = %s"
                                  % (p, sb.dtype, tuple(sb.shape), shape))
                strides = _used_strides(sb)
                for axis, field in enumerate(("page", "slot", "head")):
                    setattr(desc, "%s_scale_%s_stride" % (p, field), strides[axis])
        _set_lse_layout(desc, lse, num_tokens, num_q_heads)
        return desc


class VarlenAttentionDesc(_Desc):
    """r35a_varlen_attention_desc. The constructor is r35a_varlen_attention_desc_init (separate
    contiguous [tokens][heads][head_size] buffers, non-causal); keyword arguments override fields."""

    _C = VarlenDescC
    _NAME = "varlen_attention_desc"
    _INT32 = VARLEN_INT_FIELDS + ("use_sinks", "use_lse")
    _INT64 = VARLEN_STRIDE_FIELDS + ("lse_token_stride", "lse_head_stride")
    _FLOAT = ("softmax_scale", "logit_softcap")

    def __init__(self, dtype, num_segments, num_tokens, max_seqlen, num_q_heads, num_kv_heads, head_size,
                 **fields):
        c = VarlenDescC()
        args = _int32_args(self._NAME, VARLEN_INT_FIELDS,
                           (num_segments, num_tokens, max_seqlen, num_q_heads, num_kv_heads, head_size))
        load().r35a_varlen_attention_desc_init(ctypes.byref(c), int(resolve_dtype(dtype)), *args)
        super().__init__(**self._from_c(c).fields())
        super().__init__(**fields)

    @classmethod
    def for_tensors(cls, q, k, v, out, cu_seqlens, *, max_seqlen, causal=False, dtype=None,
                    softmax_scale=None, logit_softcap=0.0, use_sinks=False, lse=None):
        """A descriptor for q, out: [num_tokens, num_q_heads, head_size] and k, v: [num_tokens,
        num_kv_heads, head_size], any strides with contiguous head vectors (so a fused qkv buffer
        [tokens, 3, heads, D] is passed as qkv[:, 0], qkv[:, 1], qkv[:, 2]). cu_seqlens (int32,
        num_segments + 1 entries) gives the number of segments; max_seqlen bounds their lengths.
        use_sinks: run() then takes sinks ([num_q_heads] float32). lse: as in
        PagedAttentionDesc.for_tensors()."""
        bufs = {name: _shaped(name, obj) for name, obj in
                (("q", q), ("k", k), ("v", v), ("out", out), ("cu_seqlens", cu_seqlens))}
        dtype = _tensor_dtype([bufs[n] for n in ("q", "k", "v", "out")], dtype)
        qb, kb, vb, ob, cu = (bufs[n] for n in ("q", "k", "v", "out", "cu_seqlens"))
        _require_ndim(qb, 3, "[num_tokens, num_q_heads, head_size]")
        _require_ndim(kb, 3, "[num_tokens, num_kv_heads, head_size]")
        num_tokens, num_q_heads, head_size = qb.shape
        _require_shape(vb, kb.shape, "k.shape")
        _require_shape(ob, qb.shape, "q.shape")
        if kb.shape[0] != num_tokens or kb.shape[2] != head_size:
            raise invalid("k.shape: %s does not match q's num_tokens %d and head_size %d"
                          % (kb.shape, num_tokens, head_size))
        for b in (qb, kb, vb, ob):
            _require_unit_last_stride(b)
        _require_int32(cu)
        if len(cu.shape) != 1 or cu.shape[0] < 2:
            raise invalid("cu_seqlens.shape: %s is not 1-D with num_segments + 1 >= 2 entries" % (cu.shape,))
        desc = cls(dtype, cu.shape[0] - 1, num_tokens, max_seqlen, num_q_heads, kb.shape[1], head_size)
        desc.q_token_stride, desc.q_head_stride = _used_strides(qb)[:2]
        desc.k_token_stride, desc.k_head_stride = _used_strides(kb)[:2]
        desc.v_token_stride, desc.v_head_stride = _used_strides(vb)[:2]
        desc.o_token_stride, desc.o_head_stride = _used_strides(ob)[:2]
        desc.causal = 1 if causal else 0
        if softmax_scale is not None:
            desc.softmax_scale = softmax_scale
        desc.logit_softcap = logit_softcap
        desc.use_sinks = 1 if use_sinks else 0
        _set_lse_layout(desc, lse, num_tokens, num_q_heads)
        return desc


class MergeStatesDesc(_Desc):
    """r35a_merge_states_desc: N partial (O, LSE) states of the same rows merged into one. The
    constructor is r35a_merge_states_desc_init (contiguous parts [num_parts, num_tokens, num_heads,
    head_size], part LSEs [num_parts, num_tokens, num_heads], output [num_tokens, num_heads,
    head_size], use_out_lse 0); keyword arguments override fields. Partial O's have the op's dtype."""

    _C = MergeDescC
    _NAME = "merge_states_desc"
    _INT32 = MERGE_INT_FIELDS
    _INT64 = MERGE_STRIDE_FIELDS

    def __init__(self, dtype, num_parts, num_tokens, num_heads, head_size, **fields):
        c = MergeDescC()
        args = _int32_args(self._NAME, MERGE_INT_FIELDS[:4], (num_parts, num_tokens, num_heads, head_size))
        load().r35a_merge_states_desc_init(ctypes.byref(c), int(resolve_dtype(dtype)), *args)
        super().__init__(**self._from_c(c).fields())
        super().__init__(**fields)

    @classmethod
    def for_tensors(cls, parts_o, parts_lse, out, out_lse=None, *, dtype=None):
        """A descriptor for parts_o [num_parts, num_tokens, num_heads, head_size] (dtype),
        parts_lse float32 [num_parts, num_tokens, num_heads], out [num_tokens, num_heads, head_size]
        and, optionally, out_lse float32 [num_tokens, num_heads]; any strides with contiguous head
        vectors (a stack of attention outputs, or views of them, works as it is)."""
        bufs = {name: _shaped(name, obj) for name, obj in
                (("parts_o", parts_o), ("parts_lse", parts_lse), ("out", out))}
        dtype = _tensor_dtype([bufs["parts_o"], bufs["out"]], dtype)
        pb, lb, ob = bufs["parts_o"], bufs["parts_lse"], bufs["out"]
        _require_ndim(pb, 4, "[num_parts, num_tokens, num_heads, head_size]")
        num_parts, num_tokens, num_heads, head_size = pb.shape
        _require_shape(lb, (num_parts, num_tokens, num_heads), "parts_o.shape[:3]")
        _require_shape(ob, (num_tokens, num_heads, head_size), "parts_o.shape[1:]")
        for b in (pb, ob):
            _require_unit_last_stride(b)
        if lb.dtype is not None and lb.dtype != "float32":
            raise invalid("parts_lse.dtype: %s, expected float32" % lb.dtype)
        desc = cls(dtype, num_parts, num_tokens, num_heads, head_size)
        desc.part_stride, desc.part_token_stride, desc.part_head_stride = _used_strides(pb)[:3]
        desc.lse_part_stride, desc.lse_token_stride, desc.lse_head_stride = _used_strides(lb)
        desc.o_token_stride, desc.o_head_stride = _used_strides(ob)[:2]
        if out_lse is not None:
            lob = _shaped("out_lse", out_lse)
            _require_shape(lob, (num_tokens, num_heads), "(num_tokens, num_heads)")
            if lob.dtype is not None and lob.dtype != "float32":
                raise invalid("out_lse.dtype: %s, expected float32" % lob.dtype)
            desc.use_out_lse = 1
            desc.out_lse_token_stride, desc.out_lse_head_stride = _used_strides(lob)
        return desc


# r35a_kv_scale_granularity: where an 8-bit cache's scales live
KV_SCALE_PER_TENSOR, KV_SCALE_PER_KV_HEAD, KV_SCALE_PER_TOKEN_HEAD = 0, 1, 2
_SCALE_NAMES = {"tensor": KV_SCALE_PER_TENSOR, "kv_head": KV_SCALE_PER_KV_HEAD, "token_head": KV_SCALE_PER_TOKEN_HEAD}


def _scale_granularity(value):
    """kv_scale_per_head as the descriptor's int: False/True (0.2's per tensor / per kv head), a name
    of _SCALE_NAMES or an int (the library validates its range)."""
    if isinstance(value, str):
        if value not in _SCALE_NAMES:
            raise invalid("kv_scale_per_head: %r is not one of %s" % (value, ", ".join(sorted(_SCALE_NAMES))))
        return _SCALE_NAMES[value]
    return int(value)


def _set_lse_layout(desc, lse, num_tokens, num_q_heads):
    """use_lse and the LSE strides of an attention descriptor from the lse buffer (None: off)."""
    if lse is None:
        desc.use_lse = 0
        return
    lb = _shaped("lse", lse)
    _require_shape(lb, (num_tokens, num_q_heads), "(num_tokens, num_q_heads)")
    if lb.dtype is not None and lb.dtype != "float32":
        raise invalid("lse.dtype: %s, expected float32" % lb.dtype)
    desc.use_lse = 1
    desc.lse_token_stride, desc.lse_head_stride = _used_strides(lb)


# ---- buffer checks ----------------------------------------------------------------------------

def _shaped(name, obj):
    buf = _buffers.describe(name, obj)
    if not buf.checked:
        raise invalid("%s: an int pointer has no shape; build the descriptor with its constructor instead"
                      % name)
    return buf


def _tensor_dtype(bufs, dtype):
    """The DType of the attention tensors: the explicit one, else q's element type."""
    if dtype is not None:
        dtype = resolve_dtype(dtype)
        if dtype in (DType.FP8_E4M3, DType.INT8):
            raise invalid("dtype: %s is a KV-cache dtype (pass it as kv_dtype); q and out are float16, bfloat16 "
                          "or float32" % dtype.name.lower())
    else:
        first = bufs[0]
        if first.dtype == "uint16":
            raise UnknownDtypeError("%s.dtype: uint16 holds raw 16-bit values; say dtype='bfloat16' "
                                    "(or 'float16')" % first.name, from_library=False)
        if first.dtype not in ("float16", "bfloat16", "float32"):
            raise UnknownDtypeError("%s.dtype: %s is not float16, bfloat16 or float32"
                                    % (first.name, first.dtype), from_library=False)
        dtype = resolve_dtype(first.dtype)
    for buf in bufs:
        _require_element_type(buf, dtype)
    return dtype


def _cache_dtype(bufs, kv_dtype, dtype):
    """kv_dtype of the caches: the explicit one; else fp8 for float8_e4m3fn tensors, int8 for int8
    arrays, and 0 (= dtype) otherwise. Every cache buffer must hold that type."""
    if kv_dtype is not None:
        kv_dtype = _resolve_kv_dtype(kv_dtype)
    else:
        first = bufs[0].dtype
        if first == "uint8":
            raise UnknownDtypeError("%s.dtype: uint8 holds raw bytes; say kv_dtype='fp8_e4m3' (numpy has no "
                                    "float8)" % bufs[0].name, from_library=False)
        kv_dtype = {"float8_e4m3fn": DType.FP8_E4M3, "int8": DType.INT8}.get(first, 0)
    for buf in bufs:
        _require_element_type(buf, kv_dtype or dtype)
    return kv_dtype


def _require_element_type(buf, dtype):
    if buf.dtype is None or buf.dtype in _ELEMENT_TYPES[dtype]:
        return
    if buf.dtype not in _KNOWN_ELEMENT_TYPES:
        raise UnknownDtypeError("%s.dtype: %s is not float16, bfloat16, float32, float8_e4m3fn, uint8 or int8"
                                % (buf.name, buf.dtype), from_library=False)
    raise invalid("%s.dtype: %s does not hold %s data (expected %s)"
                  % (buf.name, buf.dtype, dtype.name, " or ".join(_ELEMENT_TYPES[dtype])))


def _require_int32(buf):
    if buf.dtype is not None and buf.dtype != "int32":
        raise invalid("%s.dtype: %s, expected int32" % (buf.name, buf.dtype))


def _require_ndim(buf, ndim, layout):
    if len(buf.shape) != ndim:
        raise invalid("%s.shape: %s is not %d-D %s" % (buf.name, buf.shape, ndim, layout))


def _require_shape(buf, shape, like):
    if tuple(buf.shape) != tuple(shape):
        raise invalid("%s.shape: %s differs from %s %s" % (buf.name, buf.shape, like, tuple(shape)))


def _require_unit_last_stride(buf):
    if buf.shape[-1] > 1 and buf.strides[-1] != 1:
        raise invalid("%s.strides: %s; the last dimension (head_size) must be contiguous (stride 1)"
                      % (buf.name, buf.strides))
    for axis, (size, stride) in enumerate(zip(buf.shape, buf.strides)):
        if size > 1 and stride < 0:
            raise invalid("%s.strides: %s; axis %d has a negative stride" % (buf.name, buf.strides, axis))


def _used_strides(buf):
    """Strides with the ones of size-1 axes (never stepped along) replaced by 0 when negative."""
    return tuple(stride if (size > 1 or stride >= 0) else 0 for size, stride in zip(buf.shape, buf.strides))


def _same_layout(shape, strides, want_shape, want_strides):
    return tuple(shape) == tuple(want_shape) and all(
        size <= 1 or stride == want for size, stride, want in zip(shape, strides, want_strides))


class _Checker:
    """Checks run() arguments against the plan's descriptor before anything reaches the library."""

    def __init__(self, plan):
        self.dtype = plan.desc.dtype
        self.kv_dtype = getattr(plan.desc, "kv_dtype", 0) or plan.desc.dtype
        self.backend = plan.context.info.backend
        self.backend_name = plan.context.info.backend_name

    def buffer(self, name, obj, optional=False):
        if obj is None:
            if optional:
                return None
            raise invalid("%s: None" % name)
        buf = _buffers.describe(name, obj)
        if self.backend == Backend.REFERENCE and buf.location == DEVICE:
            raise invalid("%s: device memory (%s) given to a reference context, which reads host memory"
                          % (name, buf.describe_kind()))
        if self.backend == Backend.GPU and buf.location == HOST:
            raise invalid("%s: host memory (%s) given to a %s GPU context; pass device memory (a tensor, an "
                          "object with __cuda_array_interface__, or an int pointer)"
                          % (name, buf.describe_kind(), self.backend_name))
        return buf

    def tensor(self, name, obj, shape, strides, shape_names, stride_names, writeable=False):
        buf = self.buffer(name, obj)
        if not buf.checked:
            return buf
        _require_element_type(buf, self.dtype)
        if len(buf.shape) != len(shape) or not _same_layout(buf.shape, buf.strides, shape, strides):
            field = "shape" if tuple(buf.shape) != tuple(shape) else "strides"
            raise invalid("%s.%s: shape %s strides %s, but the plan has (%s) = %s with strides (%s) = %s"
                          % (name, field, buf.shape, buf.strides, ", ".join(shape_names), tuple(shape),
                             ", ".join(stride_names), tuple(strides)))
        if writeable and not buf.writeable:
            raise invalid("%s: read-only buffer" % name)
        return buf

    def float32_tensor(self, name, obj, shape, strides, shape_names, stride_names, writeable=False):
        """A float32 tensor of the plan's shape and strides (LSE inputs and outputs)."""
        buf = self.buffer(name, obj)
        if not buf.checked:
            return buf
        if buf.dtype != "float32":
            raise invalid("%s.dtype: %s, expected float32" % (name, buf.dtype))
        if len(buf.shape) != len(shape) or not _same_layout(buf.shape, buf.strides, shape, strides):
            field = "shape" if tuple(buf.shape) != tuple(shape) else "strides"
            raise invalid("%s.%s: shape %s strides %s, but the plan has (%s) = %s with strides (%s) = %s"
                          % (name, field, buf.shape, buf.strides, ", ".join(shape_names), tuple(shape),
                             ", ".join(stride_names), tuple(strides)))
        if writeable and not buf.writeable:
            raise invalid("%s: read-only buffer" % name)
        return buf

    def lse_output(self, obj, flag, num_tokens, num_heads, token_stride, head_stride, name="lse", flag_name="use_lse"):
        """The optional float32 LSE output: given exactly when the plan's flag is set."""
        if bool(flag) != (obj is not None):
            raise invalid("%s: %s, but the plan has %s=%d" % (name, "given" if obj is not None else "None", flag_name,
                                                              flag))
        if obj is None:
            return None
        return self.float32_tensor(name, obj, (num_tokens, num_heads), (token_stride, head_stride),
                                   ("num_tokens", "num_heads"), (name + "_token_stride", name + "_head_stride"),
                                   writeable=True)

    def cache(self, name, obj, axes, head_size):
        """A paged cache: 4-D, its first three axes in any order (HND, NHD, ...), head vectors last."""
        buf = self.buffer(name, obj)
        if not buf.checked:
            return buf
        _require_element_type(buf, self.kv_dtype)
        want = sorted("%s=%d (stride %s=%d)" % (n, size, sn, stride) for n, size, sn, stride in axes)
        ok = len(buf.shape) == 4 and buf.shape[3] == head_size and (head_size <= 1 or buf.strides[3] == 1)
        if ok:
            ok = any(all(size == a[1] and (size <= 1 or stride == a[3])
                         for size, stride, a in zip(buf.shape[:3], buf.strides[:3], perm))
                     for perm in itertools.permutations(axes))
        if not ok:
            raise invalid("%s.shape: shape %s strides %s do not match the plan's %s and head_size=%d (stride 1)"
                          % (name, buf.shape, buf.strides, ", ".join(want), head_size))
        return buf

    def float32_vector(self, name, obj, lengths, why):
        """An optional contiguous float32 vector of one of the given lengths (a 0-d array counts as
        length 1); None when obj is None."""
        buf = self.buffer(name, obj, optional=True)
        if buf is None or not buf.checked:
            return buf
        shape = tuple(buf.shape)
        length = shape[0] if len(shape) == 1 else 1 if shape == () else None
        if buf.dtype != "float32" or length not in lengths or (len(shape) == 1 and length > 1 and buf.strides[0] != 1):
            raise invalid("%s.shape: %s %s, expected contiguous float32 (%s,) (%s)"
                          % (name, buf.dtype, shape, " or ".join(str(n) for n in sorted(set(lengths))), why))
        return buf

    def int32_vector(self, name, obj, length, min_length=None):
        buf = self.buffer(name, obj)
        if not buf.checked:
            return buf
        _require_int32(buf)
        if len(buf.shape) != 1 or (buf.shape[0] != length if min_length is None else buf.shape[0] < min_length):
            raise invalid("%s.shape: %s, expected (%d,)" % (name, buf.shape, length))
        if buf.shape[0] > 1 and buf.strides[0] != 1:
            raise invalid("%s.strides: %s; must be contiguous" % (name, buf.strides))
        return buf

    def block_table(self, obj, num_seqs, stride, width):
        buf = self.buffer("block_table", obj)
        if not buf.checked:
            return buf
        _require_int32(buf)
        if len(buf.shape) == 2:
            ok = (buf.shape[0] == num_seqs and buf.shape[1] >= width
                  and (num_seqs <= 1 or buf.strides[0] == stride) and (buf.shape[1] <= 1 or buf.strides[1] == 1))
        else:
            ok = len(buf.shape) == 1 and buf.shape[0] >= (num_seqs - 1) * stride + width and \
                (buf.shape[0] <= 1 or buf.strides[0] == 1)
        if not ok:
            raise invalid("block_table.shape: shape %s strides %s, but the plan has num_seqs=%d rows of >= %d "
                          "entries, block_table_stride=%d" % (buf.shape, buf.strides, num_seqs, width, stride))
        return buf

    def workspace(self, obj, nbytes, needed):
        if obj is None:
            if needed:
                raise WorkspaceTooSmallError("workspace: None, but the plan needs %d bytes" % needed,
                                             from_library=False)
            return 0, 0
        buf = self.buffer("workspace", obj)
        if nbytes is None:
            nbytes = buf.nbytes if buf.nbytes is not None else needed
        if nbytes < needed:
            raise WorkspaceTooSmallError("workspace: %d bytes, below the plan's %d" % (nbytes, needed),
                                         from_library=False)
        return buf.ptr, nbytes


def _no_overlap(out, inputs):
    """A numpy out may not share memory with a numpy input (the library reads while it writes)."""
    if not isinstance(out.obj, _numpy_ndarray()):
        return
    import numpy
    for buf in inputs:
        if buf is not None and isinstance(buf.obj, numpy.ndarray) and numpy.may_share_memory(out.obj, buf.obj):
            raise invalid("out: overlaps %s; the output may not alias an input" % buf.name)


def _numpy_ndarray():
    try:
        import numpy
        return numpy.ndarray
    except ImportError:
        return ()


def _stream_handle(stream):
    if stream is None:
        return None
    if isinstance(stream, int):
        return stream or None
    for attribute in ("cuda_stream", "ptr", "handle"):
        value = getattr(stream, attribute, None)
        if isinstance(value, int):
            return value or None
    raise invalid("stream: %s is not an int handle or a stream object with .cuda_stream/.ptr"
                  % type(stream).__name__)


# ---- contexts and plans -----------------------------------------------------------------------

class Context:
    """An r35a_context. backend: "auto" (default), "gpu", "reference" or a Backend.

    Use as a context manager or call close(); plans made by it are closed with it."""

    def __init__(self, backend="auto", device_index=0):
        self._lib = load()
        self._handle = None
        if isinstance(backend, str):
            try:
                backend = Backend[backend.upper()]
            except KeyError:
                raise invalid("backend: %r is not 'auto', 'gpu' or 'reference'" % backend) from None
        options = ContextOptions()
        self._lib.r35a_context_options_init(ctypes.byref(options))
        options.backend = int(backend)
        if not isinstance(device_index, int) or not _INT32_MIN <= device_index <= _INT32_MAX:
            raise invalid("device_index: %r is not a 32-bit integer" % (device_index,))
        options.device_index = device_index
        handle = ctypes.c_void_p()
        _check_status(self._lib, self._lib.r35a_context_create(ctypes.byref(options), ctypes.byref(handle)))
        self._handle = handle.value
        self._plans = weakref.WeakSet()
        info = ContextInfoC()
        info.struct_size = ctypes.sizeof(info)
        _check_status(self._lib, self._lib.r35a_context_get_info(self._handle, ctypes.byref(info)))
        self.info = ContextInfo(Backend(info.backend), info.device_index, info.backend_name.decode(),
                                info.arch.decode(), info.reason.decode())

    @property
    def handle(self):
        if self._handle is None:
            raise invalid("context: closed")
        return self._handle

    def check_device(self):
        """Raises InvalidDataError when a kernel of this context found bad device metadata in an
        earlier run (r35a_context_check_device: call it after synchronizing the run's stream; the
        record is cleared once reported). A no-op on a reference context."""
        _check_status(self._lib, self._lib.r35a_context_check_device(self.handle))

    def plan(self, desc):
        """A plan for a PagedAttentionDesc, VarlenAttentionDesc or MergeStatesDesc."""
        if isinstance(desc, PagedAttentionDesc):
            plan = PagedAttentionPlan(self, desc)
        elif isinstance(desc, VarlenAttentionDesc):
            plan = VarlenAttentionPlan(self, desc)
        elif isinstance(desc, MergeStatesDesc):
            plan = MergeStatesPlan(self, desc)
        else:
            raise invalid("desc: %s is not a PagedAttentionDesc, VarlenAttentionDesc or MergeStatesDesc"
                          % type(desc).__name__)
        self._plans.add(plan)
        return plan

    def plan_paged_attention(self, q, k_cache, v_cache, out, block_table, **kwargs):
        """plan(PagedAttentionDesc.for_tensors(...)): see there for the arguments."""
        return self.plan(PagedAttentionDesc.for_tensors(q, k_cache, v_cache, out, block_table, **kwargs))

    def plan_varlen_attention(self, q, k, v, out, cu_seqlens, **kwargs):
        """plan(VarlenAttentionDesc.for_tensors(...)): see there for the arguments."""
        return self.plan(VarlenAttentionDesc.for_tensors(q, k, v, out, cu_seqlens, **kwargs))

    def close(self):
        if self._handle is None:
            return
        for plan in list(self._plans):
            plan.close()
        self._lib.r35a_context_destroy(self._handle)
        self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_handle", None) is not None:
            self.close()

    def __repr__(self):
        return "<rdna35attn.Context %s %s (%s)>" % (self.info.backend_name, self.info.arch, self.info.reason)


class _Plan:
    _PLAN_FN = ""

    def __init__(self, context, desc):
        self.context = context
        self._lib = context._lib
        self._handle = None
        c_desc = desc.to_c()
        self.desc = type(desc)._from_c(c_desc)  # a snapshot: later edits of desc do not reach the plan
        self._c_desc = c_desc
        handle = ctypes.c_void_p()
        _check_status(self._lib, getattr(self._lib, self._PLAN_FN)(context.handle, ctypes.byref(c_desc),
                                                                    ctypes.byref(handle)))
        self._handle = handle.value
        info = PlanInfoC()
        info.struct_size = ctypes.sizeof(info)
        _check_status(self._lib, self._lib.r35a_plan_get_info(self._handle, ctypes.byref(info)))
        self.info = PlanInfo(info.implementation.decode(), info.fallback_reason.decode(), info.workspace_bytes,
                             tuple(info.grid), tuple(info.block), info.num_splits)
        self._checker = _Checker(self)

    def close(self):
        if self._handle is not None:
            self._lib.r35a_plan_destroy(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_handle", None) is not None and getattr(self.context, "_handle", None) is not None:
            self.close()

    def _call(self, run_fn, args, workspace, workspace_bytes, stream):
        if self._handle is None:
            raise invalid("plan: closed")
        ws_ptr, ws_bytes = self._checker.workspace(workspace, workspace_bytes, self.info.workspace_bytes)
        _check_status(self._lib, run_fn(self.context.handle, self._handle, ctypes.byref(args), ws_ptr or None,
                                        ws_bytes, _stream_handle(stream)))

    def __repr__(self):
        return "<rdna35attn.%s %s>" % (type(self).__name__, self.info.implementation)


class PagedAttentionPlan(_Plan):
    """A plan of r35a_paged_attention_plan(); run() as often as wanted."""

    _PLAN_FN = "r35a_paged_attention_plan"

    def run(self, q, k_cache, v_cache, out, seq_lens, query_start_loc, block_table, alibi_slopes=None,
            workspace=None, workspace_bytes=None, stream=None, sinks=None, k_scale=None, v_scale=None, lse=None):
        """Checks every buffer against the plan, then runs it; returns out. GPU runs are asynchronous:
        keep the buffers alive until the stream is synchronized.

        lse: float32 [num_tokens, num_q_heads] (the plan's strides), required by a plan with
        use_lse=1: each row's natural-log softmax LSE (rdna35attn.h "Softmax LSE").

        sinks: [num_q_heads] float32 raw sink logits, required by a plan with use_sinks=1.
        k_scale, v_scale: float32 scales of an 8-bit KV cache, (1,) per tensor, (num_kv_heads,) per
        kv head, or [num_pages, page_size, num_kv_heads] with the plan's k_scale_* / v_scale_* strides
        per token and kv head, as the plan says; they live where the tensors live (device memory on
        a GPU)."""
        d, check = self._c_desc, self._checker
        rows = ("num_tokens", "num_q_heads", "head_size")
        qb = check.tensor("q", q, (d.num_tokens, d.num_q_heads, d.head_size), (d.q_token_stride, d.q_head_stride, 1),
                          rows, ("q_token_stride", "q_head_stride", "1"))
        ob = check.tensor("out", out, (d.num_tokens, d.num_q_heads, d.head_size),
                          (d.o_token_stride, d.o_head_stride, 1), rows, ("o_token_stride", "o_head_stride", "1"),
                          writeable=True)
        kb, vb = (check.cache(name, obj, (("num_pages", d.num_pages, p + "_page_stride", getattr(d, p + "_page_stride")),
                                          ("num_kv_heads", d.num_kv_heads, p + "_head_stride", getattr(d, p + "_head_stride")),
                                          ("page_size", d.page_size, p + "_slot_stride", getattr(d, p + "_slot_stride"))),
                              d.head_size)
                  for name, obj, p in (("k_cache", k_cache, "k"), ("v_cache", v_cache, "v")))
        sb = check.int32_vector("seq_lens", seq_lens, d.num_seqs)
        qsb = check.int32_vector("query_start_loc", query_start_loc, d.num_seqs + 1)
        pages_needed = -(-d.max_seq_len // d.page_size)
        btb = check.block_table(block_table, d.num_seqs, d.block_table_stride, pages_needed)
        ab = check.buffer("alibi_slopes", alibi_slopes, optional=True)
        if d.use_alibi and ab is None:
            raise invalid("alibi_slopes: None, but the plan has use_alibi=1")
        if not d.use_alibi and ab is not None:
            raise invalid("alibi_slopes: given, but the plan has use_alibi=0")
        if ab is not None and ab.checked:
            if ab.dtype != "float32" or ab.shape != (d.num_q_heads,) or (d.num_q_heads > 1 and ab.strides[0] != 1):
                raise invalid("alibi_slopes.shape: %s %s, expected contiguous float32 (%d,)"
                              % (ab.dtype, ab.shape, d.num_q_heads))
        sinkb = check.float32_vector("sinks", sinks, (d.num_q_heads,), "one raw logit per query head")
        if bool(d.use_sinks) != (sinkb is not None):
            raise invalid("sinks: %s, but the plan has use_sinks=%d" % ("given" if sinkb is not None else "None",
                                                                        d.use_sinks))
        eight_bit = d.kv_dtype in (DType.FP8_E4M3, DType.INT8)
        if d.kv_scale_per_head == KV_SCALE_PER_TOKEN_HEAD:
            ksb, vsb = (None if obj is None else check.float32_tensor(
                p + "_scale", obj, (d.num_pages, d.page_size, d.num_kv_heads),
                tuple(getattr(d, "%s_scale_%s_stride" % (p, f)) for f in ("page", "slot", "head")),
                ("num_pages", "page_size", "num_kv_heads"),
                tuple("%s_scale_%s_stride" % (p, f) for f in ("page", "slot", "head")))
                for p, obj in (("k", k_scale), ("v", v_scale)))
        else:
            scale_lengths = (d.num_kv_heads,) if d.kv_scale_per_head else (1,)
            why = "one per kv head" if d.kv_scale_per_head else "one per tensor"
            ksb = check.float32_vector("k_scale", k_scale, scale_lengths, why)
            vsb = check.float32_vector("v_scale", v_scale, scale_lengths, why)
        for name, buf in (("k_scale", ksb), ("v_scale", vsb)):
            if eight_bit and buf is None:
                raise invalid("%s: None, but the plan's KV cache is %s" % (name, DType(d.kv_dtype).name.lower()))
            if not eight_bit and buf is not None:
                raise invalid("%s: given, but the plan's KV cache is not 8-bit (kv_dtype fp8_e4m3 or int8)" % name)
        lb = check.lse_output(lse, d.use_lse, d.num_tokens, d.num_q_heads, d.lse_token_stride, d.lse_head_stride)
        _no_overlap(ob, (qb, kb, vb, sb, qsb, btb, ab, sinkb, ksb, vsb, lb))
        if lb is not None:
            _no_overlap(lb, (qb, kb, vb, sb, qsb, btb, ab, sinkb, ksb, vsb, ob))
        ptr = lambda buf: buf.ptr if buf is not None else None  # noqa: E731
        args = PagedArgsC(ctypes.sizeof(PagedArgsC), qb.ptr, kb.ptr, vb.ptr, ob.ptr, sb.ptr, qsb.ptr, btb.ptr,
                          ptr(ab), ptr(sinkb), ptr(ksb), ptr(vsb), ptr(lb))
        self._call(self._lib.r35a_paged_attention_run, args, workspace, workspace_bytes, stream)
        return out


class VarlenAttentionPlan(_Plan):
    """A plan of r35a_varlen_attention_plan(); run() as often as wanted."""

    _PLAN_FN = "r35a_varlen_attention_plan"

    def run(self, q, k, v, out, cu_seqlens, workspace=None, workspace_bytes=None, stream=None, sinks=None,
            lse=None):
        """Checks every buffer against the plan, then runs it; returns out. sinks: [num_q_heads]
        float32 raw sink logits, required by a plan with use_sinks=1. lse: float32 [num_tokens,
        num_q_heads], required by a plan with use_lse=1."""
        d, check = self._c_desc, self._checker
        bufs = []
        for name, obj, heads, prefix in (("q", q, "num_q_heads", "q"), ("k", k, "num_kv_heads", "k"),
                                         ("v", v, "num_kv_heads", "v"), ("out", out, "num_q_heads", "o")):
            bufs.append(check.tensor(name, obj, (d.num_tokens, getattr(d, heads), d.head_size),
                                     (getattr(d, prefix + "_token_stride"), getattr(d, prefix + "_head_stride"), 1),
                                     ("num_tokens", heads, "head_size"),
                                     (prefix + "_token_stride", prefix + "_head_stride", "1"), writeable=name == "out"))
        cb = check.int32_vector("cu_seqlens", cu_seqlens, d.num_segments + 1)
        qb, kb, vb, ob = bufs
        sinkb = check.float32_vector("sinks", sinks, (d.num_q_heads,), "one raw logit per query head")
        if bool(d.use_sinks) != (sinkb is not None):
            raise invalid("sinks: %s, but the plan has use_sinks=%d" % ("given" if sinkb is not None else "None",
                                                                        d.use_sinks))
        lb = check.lse_output(lse, d.use_lse, d.num_tokens, d.num_q_heads, d.lse_token_stride, d.lse_head_stride)
        _no_overlap(ob, (qb, kb, vb, cb, sinkb, lb))
        if lb is not None:
            _no_overlap(lb, (qb, kb, vb, cb, sinkb, ob))
        args = VarlenArgsC(ctypes.sizeof(VarlenArgsC), qb.ptr, kb.ptr, vb.ptr, ob.ptr, cb.ptr,
                           sinkb.ptr if sinkb is not None else None, lb.ptr if lb is not None else None)
        self._call(self._lib.r35a_varlen_attention_run, args, workspace, workspace_bytes, stream)
        return out


class MergeStatesPlan(_Plan):
    """A plan of r35a_merge_states_plan(); run() as often as wanted."""

    _PLAN_FN = "r35a_merge_states_plan"

    def run(self, parts_o, parts_lse, out, out_lse=None, stream=None):
        """Checks every buffer against the plan, then merges; returns out. out_lse (float32
        [num_tokens, num_heads]) is required by a plan with use_out_lse=1."""
        d, check = self._c_desc, self._checker
        pb = check.tensor("parts_o", parts_o, (d.num_parts, d.num_tokens, d.num_heads, d.head_size),
                          (d.part_stride, d.part_token_stride, d.part_head_stride, 1),
                          ("num_parts", "num_tokens", "num_heads", "head_size"),
                          ("part_stride", "part_token_stride", "part_head_stride", "1"))
        lb = check.float32_tensor("parts_lse", parts_lse, (d.num_parts, d.num_tokens, d.num_heads),
                                  (d.lse_part_stride, d.lse_token_stride, d.lse_head_stride),
                                  ("num_parts", "num_tokens", "num_heads"),
                                  ("lse_part_stride", "lse_token_stride", "lse_head_stride"))
        ob = check.tensor("out", out, (d.num_tokens, d.num_heads, d.head_size), (d.o_token_stride, d.o_head_stride, 1),
                          ("num_tokens", "num_heads", "head_size"), ("o_token_stride", "o_head_stride", "1"),
                          writeable=True)
        olb = check.lse_output(out_lse, d.use_out_lse, d.num_tokens, d.num_heads, d.out_lse_token_stride,
                               d.out_lse_head_stride, name="out_lse", flag_name="use_out_lse")
        _no_overlap(ob, (pb, lb, olb))
        if olb is not None:
            _no_overlap(olb, (pb, lb, ob))
        args = MergeArgsC(ctypes.sizeof(MergeArgsC), pb.ptr, lb.ptr, ob.ptr, olb.ptr if olb is not None else None)
        self._call(self._lib.r35a_merge_states_run, args, None, None, stream)
        return out


# ---- one-call helpers -------------------------------------------------------------------------

_default_contexts = {}
_default_lock = threading.Lock()


def default_context(backend="auto"):
    """A process-wide context per backend ("auto", "gpu", "reference"), created on first use."""
    key = backend.lower() if isinstance(backend, str) else Backend(backend).name.lower()
    with _default_lock:
        ctx = _default_contexts.get(key)
        if ctx is None:
            ctx = _default_contexts[key] = Context(key)
        return ctx


def _context_for(context, q):
    if context is not None:
        return context
    location = _buffers.describe("q", q).location
    return default_context("gpu" if location == DEVICE else "reference" if location == HOST else "auto")


def _host_max(name, array, fn):
    if not isinstance(array, _numpy_ndarray()):
        raise invalid("%s: not a numpy array, so its bound must be given" % name)
    return int(fn(array)) if array.size else 0


def paged_attention(q, k_cache, v_cache, seq_lens, query_start_loc, block_table, *, out=None, max_seq_len=None,
                    max_query_len=None, context=None, alibi_slopes=None, sinks=None, k_scale=None, v_scale=None,
                    workspace=None, stream=None, lse=None, return_lse=False, **desc_args):
    """Plans and runs one paged attention call; returns out (allocated like q for numpy inputs).

    context: by default a reference context for host arrays and a GPU context for device buffers.
    max_seq_len / max_query_len default to the bounds of numpy seq_lens / query_start_loc. sinks
    ([num_q_heads] float32) turns sinks on; k_scale / v_scale are an 8-bit cache's float32 scales,
    per kv head when they hold num_kv_heads > 1 values, per token and kv head when they are 3-D
    [num_pages, page_size, num_kv_heads]. lse (float32 [num_tokens, num_q_heads]) or
    return_lse=True (allocates it for numpy inputs) also writes each row's softmax LSE and returns
    (out, lse). Other keywords (dtype, kv_dtype, kv_layout, window, softmax_scale, logit_softcap) go
    to PagedAttentionDesc.for_tensors()."""
    if out is None:
        out = _empty_like("q", q)
    lse = _lse_for(q, lse, return_lse)
    if max_seq_len is None:
        max_seq_len = _host_max("seq_lens", seq_lens, lambda a: a.max())
    if max_query_len is None:
        max_query_len = _host_max("query_start_loc", query_start_loc,
                                  lambda a: (a[1:] - a[:-1]).max() if a.size > 1 else 0)
    ctx = _context_for(context, q)
    if "kv_scale_per_head" not in desc_args and k_scale is not None:
        scale = _buffers.describe("k_scale", k_scale)
        desc_args["kv_scale_per_head"] = (
            "token_head" if scale.checked and len(scale.shape) == 3
            else "kv_head" if scale.checked and len(scale.shape) == 1 and scale.shape[0] > 1 else "tensor")
    with ctx.plan(PagedAttentionDesc.for_tensors(q, k_cache, v_cache, out, block_table, max_seq_len=max_seq_len,
                                                 max_query_len=max_query_len, use_alibi=alibi_slopes is not None,
                                                 use_sinks=sinks is not None, lse=lse, k_scale=k_scale,
                                                 v_scale=v_scale, **desc_args)) as plan:
        plan.run(q, k_cache, v_cache, out, seq_lens, query_start_loc, block_table, alibi_slopes,
                 workspace=workspace, stream=stream, sinks=sinks, k_scale=k_scale, v_scale=v_scale, lse=lse)
    return out if lse is None else (out, lse)


def varlen_attention(q, k, v, cu_seqlens, *, out=None, max_seqlen=None, causal=False, context=None, sinks=None,
                     workspace=None, stream=None, lse=None, return_lse=False, **desc_args):
    """Plans and runs one varlen attention call; returns out (allocated like q for numpy inputs).
    max_seqlen defaults to the longest segment of a numpy cu_seqlens; sinks ([num_q_heads] float32)
    turns sinks on; lse / return_lse as in paged_attention(). Other keywords (dtype, softmax_scale,
    logit_softcap) go to VarlenAttentionDesc.for_tensors()."""
    if out is None:
        out = _empty_like("q", q)
    lse = _lse_for(q, lse, return_lse)
    if max_seqlen is None:
        max_seqlen = _host_max("cu_seqlens", cu_seqlens, lambda a: (a[1:] - a[:-1]).max() if a.size > 1 else 0)
    ctx = _context_for(context, q)
    with ctx.plan(VarlenAttentionDesc.for_tensors(q, k, v, out, cu_seqlens, max_seqlen=max_seqlen, causal=causal,
                                                  use_sinks=sinks is not None, lse=lse, **desc_args)) as plan:
        plan.run(q, k, v, out, cu_seqlens, workspace=workspace, stream=stream, sinks=sinks, lse=lse)
    return out if lse is None else (out, lse)


def merge_states(parts_o, parts_lse, *, out=None, out_lse=None, return_lse=True, context=None, stream=None,
                 dtype=None):
    """Merges N partial attention states of the same rows: parts_o [num_parts, num_tokens, num_heads,
    head_size] (the op's dtype) with parts_lse float32 [num_parts, num_tokens, num_heads] (each
    part's natural-log LSE, e.g. from paged_attention(..., return_lse=True) over a shard of the
    keys) into O = sum_i exp(LSE_i - LSE) O_i and LSE = log sum_i exp(LSE_i). -inf parts weigh
    nothing (their O is not read); NaN propagates. Returns (out, out_lse), or out alone when
    return_lse is False and no out_lse is given; out / out_lse are allocated for numpy inputs."""
    if out is None:
        if not isinstance(parts_o, _numpy_ndarray()):
            raise invalid("out: required when parts_o is not a numpy array")
        import numpy
        out = numpy.empty(parts_o.shape[1:], dtype=parts_o.dtype)
    if out_lse is None and return_lse:
        if not isinstance(parts_lse, _numpy_ndarray()):
            raise invalid("out_lse: required (or return_lse=False) when parts_lse is not a numpy array")
        import numpy
        out_lse = numpy.empty(parts_lse.shape[1:], dtype=numpy.float32)
    ctx = _context_for(context, parts_o)
    with ctx.plan(MergeStatesDesc.for_tensors(parts_o, parts_lse, out, out_lse, dtype=dtype)) as plan:
        plan.run(parts_o, parts_lse, out, out_lse, stream=stream)
    return out if out_lse is None else (out, out_lse)


def _lse_for(q, lse, return_lse):
    """The LSE output buffer of a one-call helper: the given one, a new numpy one for return_lse."""
    if lse is not None or not return_lse:
        return lse
    if not isinstance(q, _numpy_ndarray()):
        raise invalid("lse: required with return_lse when q is not a numpy array")
    import numpy
    return numpy.empty(q.shape[:2], dtype=numpy.float32)


def _empty_like(name, q):
    if not isinstance(q, _numpy_ndarray()):
        raise invalid("out: required when %s is not a numpy array" % name)
    import numpy
    return numpy.empty(q.shape, dtype=q.dtype)


def version():
    """The linked library's version string, e.g. "0.4.0"."""
    return load().version


def library_path():
    """The path (or loader name) of the librdna35attn that was loaded."""
    return load().path
