"""What the shim knows about one buffer argument: address, shape, strides, element type, location.

Accepted objects, tried in this order:
  - numpy arrays (host memory);
  - torch tensors and anything else with data_ptr() (host or device as its .device says);
  - anything with __cuda_array_interface__ (device memory: CuPy, Numba, PyTorch, ...);
  - plain ints, taken as raw pointers and passed through unchecked (no shape, dtype or location).
Strides are reported in elements, as the C API wants them.
"""

from .errors import UnknownDtypeError, invalid

HOST, DEVICE, UNKNOWN = "host", "device", "unknown"

# numpy typestr (kind + size) -> element type name; bfloat16 has no typestr of its own.
_TYPESTR = {"f2": "float16", "f4": "float32", "f8": "float64", "u2": "uint16", "i2": "int16",
            "i4": "int32", "i8": "int64", "u4": "uint32", "u8": "uint64", "u1": "uint8", "i1": "int8"}
_ITEMSIZE = {"float16": 2, "bfloat16": 2, "uint16": 2, "int16": 2, "float32": 4, "int32": 4,
             "uint32": 4, "float64": 8, "int64": 8, "uint64": 8, "uint8": 1, "int8": 1,
             "float8_e4m3fn": 1}


class Buffer:
    """One described argument. shape/strides/dtype are None for raw int pointers."""

    __slots__ = ("name", "obj", "ptr", "shape", "strides", "dtype", "location", "writeable", "nbytes")

    def __init__(self, name, obj, ptr, shape=None, strides=None, dtype=None, location=UNKNOWN,
                 writeable=True, nbytes=None):
        self.name = name
        self.obj = obj
        self.ptr = ptr
        self.shape = shape
        self.strides = strides
        self.dtype = dtype
        self.location = location
        self.writeable = writeable
        self.nbytes = nbytes

    @property
    def checked(self):
        return self.shape is not None

    def describe_kind(self):
        return type(self.obj).__module__ + "." + type(self.obj).__name__


def _element_strides(name, byte_strides, itemsize):
    strides = []
    for axis, stride in enumerate(byte_strides):
        if stride % itemsize:
            raise invalid("%s.strides: byte stride %d of axis %d is not a multiple of the element size %d"
                          % (name, stride, axis, itemsize))
        strides.append(stride // itemsize)
    return tuple(strides)


def _contiguous_strides(shape):
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(int(size), 1)
    return tuple(reversed(strides))


def _from_numpy(name, array):
    dtype = array.dtype.name
    if dtype not in _ITEMSIZE:
        raise UnknownDtypeError("%s.dtype: %s is not a type librdna35attn works with" % (name, dtype),
                                from_library=False)
    return Buffer(name, array, array.__array_interface__["data"][0], tuple(array.shape),
                  _element_strides(name, array.strides, array.itemsize), dtype, HOST,
                  bool(array.flags.writeable), int(array.nbytes))


def _from_torch_like(name, tensor):
    dtype = str(getattr(tensor, "dtype", "")).replace("torch.", "")
    if dtype not in _ITEMSIZE:
        raise UnknownDtypeError("%s.dtype: %s is not a type librdna35attn works with" % (name, dtype),
                                from_library=False)
    device = getattr(tensor, "device", None)
    location = HOST if getattr(device, "type", "cpu") == "cpu" else DEVICE
    shape = tuple(int(s) for s in tensor.shape)
    strides = tuple(int(s) for s in tensor.stride())
    nbytes = _ITEMSIZE[dtype]
    for size in shape:
        nbytes *= size
    return Buffer(name, tensor, int(tensor.data_ptr()), shape, strides, dtype, location, True, nbytes)


def _from_cuda_array_interface(name, obj):
    cai = obj.__cuda_array_interface__
    typestr = cai.get("typestr", "")
    dtype = _TYPESTR.get(typestr[1:])
    if typestr[:1] not in "<|=" or dtype is None:
        raise UnknownDtypeError("%s.dtype: __cuda_array_interface__ typestr %r is not a type librdna35attn "
                                "works with" % (name, typestr), from_library=False)
    shape = tuple(int(s) for s in cai["shape"])
    itemsize = _ITEMSIZE[dtype]
    strides = cai.get("strides")
    strides = _element_strides(name, strides, itemsize) if strides is not None else _contiguous_strides(shape)
    ptr, readonly = cai["data"]
    nbytes = itemsize
    for size in shape:
        nbytes *= size
    return Buffer(name, obj, int(ptr or 0), shape, strides, dtype, DEVICE, not readonly, nbytes)


def describe(name, obj):
    """The Buffer for argument `name`; raises InvalidArgumentError for objects it cannot use."""
    if isinstance(obj, bool):
        raise invalid("%s: a bool is not a buffer" % name)
    if isinstance(obj, int):
        if obj < 0:
            raise invalid("%s: pointer %d is negative" % (name, obj))
        return Buffer(name, obj, obj)
    if hasattr(obj, "__array_interface__") and hasattr(obj, "dtype") and hasattr(obj, "strides") \
            and hasattr(obj, "flags"):
        return _from_numpy(name, obj)
    if callable(getattr(obj, "data_ptr", None)) and callable(getattr(obj, "stride", None)):
        return _from_torch_like(name, obj)
    if hasattr(obj, "__cuda_array_interface__"):
        return _from_cuda_array_interface(name, obj)
    raise invalid("%s: expected a numpy array, a tensor with data_ptr(), an object with "
                  "__cuda_array_interface__, or an int pointer; got %s" % (name, type(obj).__name__))
