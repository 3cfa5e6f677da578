"""Exceptions: one class per r35a_status, all derived from R35AError.

Every failing library call raises the class of its status, carrying

    .status       the r35a_status value (int), pinned by the C header;
    .status_name  its name, e.g. "R35A_ERR_INVALID_ARGUMENT";
    .detail       the library's r35a_last_error_detail(), e.g.
                  "paged_attention_desc.num_kv_heads: 5 does not divide num_q_heads 32";
    .field        the part of .detail before the first ": " (the offending struct field or argument);
    .from_library False when the shim found the problem itself before calling the library.

The shim checks arguments before it calls (shapes, dtypes, strides, where the memory lives) and
raises the same classes with the same kind of detail, naming the Python argument, e.g.
"q.shape: (3, 8, 64) is not ...". Each class also derives from the closest built-in exception
(ValueError, TypeError, MemoryError, ...), so generic handlers work too.
"""


class R35AError(Exception):
    """A librdna35attn status other than R35A_OK."""

    status = -1
    status_name = "R35A_ERR_UNKNOWN_STATUS"

    def __init__(self, detail, status=None, status_name=None, from_library=True):
        if status is not None:
            self.status = int(status)
        if status_name is not None:
            self.status_name = status_name
        self.detail = detail
        self.field = detail.split(": ", 1)[0] if ": " in detail else None
        self.from_library = from_library
        super().__init__("%s: %s" % (self.status_name, detail))


class NullPointerError(R35AError, ValueError):
    status, status_name = 1, "R35A_ERR_NULL_POINTER"


class InvalidArgumentError(R35AError, ValueError):
    status, status_name = 2, "R35A_ERR_INVALID_ARGUMENT"


class StructSizeError(R35AError):
    status, status_name = 3, "R35A_ERR_STRUCT_SIZE"


class UnknownDtypeError(R35AError, TypeError):
    status, status_name = 4, "R35A_ERR_UNKNOWN_DTYPE"


class SizeOverflowError(R35AError, OverflowError):
    status, status_name = 5, "R35A_ERR_SIZE_OVERFLOW"


class UnsupportedError(R35AError):
    status, status_name = 6, "R35A_ERR_UNSUPPORTED"


class BackendUnavailableError(R35AError, RuntimeError):
    status, status_name = 7, "R35A_ERR_BACKEND_UNAVAILABLE"


class WorkspaceTooSmallError(R35AError, ValueError):
    status, status_name = 8, "R35A_ERR_WORKSPACE_TOO_SMALL"


class OutOfMemoryError(R35AError, MemoryError):
    status, status_name = 9, "R35A_ERR_OUT_OF_MEMORY"


class DeviceError(R35AError, RuntimeError):
    status, status_name = 10, "R35A_ERR_DEVICE"


class InvalidDataError(R35AError, ValueError):
    status, status_name = 11, "R35A_ERR_INVALID_DATA"


class PlanMismatchError(R35AError, ValueError):
    status, status_name = 12, "R35A_ERR_PLAN_MISMATCH"


class InternalError(R35AError, RuntimeError):
    status, status_name = 13, "R35A_ERR_INTERNAL"


class LibraryNotFoundError(OSError):
    """librdna35attn.so could not be found or loaded (not a library status)."""


#: status value -> exception class
ERROR_CLASSES = {cls.status: cls for cls in (
    NullPointerError, InvalidArgumentError, StructSizeError, UnknownDtypeError, SizeOverflowError,
    UnsupportedError, BackendUnavailableError, WorkspaceTooSmallError, OutOfMemoryError, DeviceError,
    InvalidDataError, PlanMismatchError, InternalError)}


def error_for_status(status, detail, status_name=None, from_library=True):
    """The exception for a status; unknown statuses give R35AError itself."""
    cls = ERROR_CLASSES.get(int(status), R35AError)
    if cls is R35AError:
        return R35AError(detail, status=status, status_name=status_name or "R35A_ERR_UNKNOWN_STATUS",
                         from_library=from_library)
    return cls(detail, status_name=status_name, from_library=from_library)


def invalid(detail):
    """A shim-side R35A_ERR_INVALID_ARGUMENT."""
    return InvalidArgumentError(detail, from_library=False)
