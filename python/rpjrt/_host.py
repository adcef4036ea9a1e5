"""Turning host objects into bytes the extension can copy (the slow path of Client.put).

The extension handles buffer-protocol objects whose format it knows directly. Everything
else comes here: numpy arrays (any dtype, including ml_dtypes ones, byte-swapped or with
a requested conversion), ``__dlpack__`` producers (read through numpy), raw bytes
reinterpreted with ``dtype=``, Python numbers and nested lists of numbers. The result is ``(obj, dtype, shape)``: ``obj`` supports the buffer
protocol and holds exactly the elements of ``dtype`` in C order; ``shape`` is ``None`` when
it is the shape of ``obj``'s own buffer view.

One conversion rule for Python numbers and nested lists, into every dtype, kept in the core
(``rpjrt_npy::scalars``; ``Client.put`` calls it directly, this module through
``_rpjrt._python_to_host``): a value must be representable -- integers in range (``int4``
holds -8..7), no float into an integer or bool type (even 2.0), only 0/1/True/False into
bool, no complex into a real type, no finite float that overflows the target
(``float8_e4m3fn`` cannot hold 1e6, ``bfloat16`` not 1e300), and NaN or infinities only
into types that have them; rounding to the nearest representable float is fine. Anything
else raises ``InvalidArgumentError`` unless the caller asks for ``cast=True``, which
converts as numpy's ``astype`` does (wrapping, truncating, saturating). Execute arguments
given as Python numbers follow the same rule with the parameter's dtype, and so do numpy
arrays and scalars converted to another dtype (``_rpjrt._convert_host``, the core's
``rpjrt_npy::scalars::convert``), unless numpy calls the cast safe.

Buffer-protocol objects other than numpy arrays are never converted: with ``dtype=`` their
format must be that dtype (any byte order) or raw bytes (``"B"``, ``"b"``, ``"c"``), which
are reinterpreted.
"""

from __future__ import annotations

import struct
import sys
from typing import Any

from ._dtypes import ALL, DType, _lookup, from_code, from_format, import_failed
from ._errors import InvalidArgumentError

__all__ = ["as_host"]

# The unsigned type that carries the raw bits of a dtype without a buffer format.
_CARRIER = {1: "B", 2: "H", 4: "I", 8: "Q"}


def _dtype_arg(dtype: Any) -> DType | None:
    if dtype is None:
        return None
    return DType(dtype)


def _numpy() -> Any:
    return sys.modules.get("numpy")


def _is_numpy(obj: object) -> bool:
    np = _numpy()
    return np is not None and isinstance(obj, (np.ndarray, np.generic))


def refuse_masked(obj: object) -> None:
    """Refuses a numpy masked array: reading it as an array keeps the values hidden under
    its mask and drops the mask, so a computation would use them as data."""
    ma = sys.modules.get("numpy.ma")
    if ma is not None and isinstance(obj, ma.MaskedArray):
        raise InvalidArgumentError(
            "a numpy masked array cannot go to a device: its mask would be lost and the masked"
            " values used as data; pass arr.filled(value) (or arr.data to keep them on purpose)"
        )


# What a numpy dtype of a kind other than numpy's numeric ones holds, for refusals.
_NOT_NUMBERS = {
    "M": "dates (datetime64)",
    "m": "durations (timedelta64)",
    "O": "Python objects",
    "S": "bytes",
    "U": "text",
    "V": "raw or structured records",
}


def no_equivalent(dtype: Any) -> InvalidArgumentError:
    """The refusal of a numpy dtype rpjrt has no type for, naming it (and, for dates,
    durations, objects, text and records, what it holds instead of numbers)."""
    held = _NOT_NUMBERS.get(getattr(dtype, "kind", ""))
    why = f" (it holds {held}, not numbers)" if held else ""
    return InvalidArgumentError(
        f"numpy dtype {dtype} has no PJRT equivalent{why}; known dtypes: "
        + ", ".join(x.name for x in ALL)
    )


def numpy_dtype_type(dtype: Any) -> DType:
    """The rpjrt type of a numpy dtype (either byte order), or the refusal naming it."""
    found = _lookup(dtype)
    if found is None and dtype.byteorder == (">" if sys.byteorder == "little" else "<"):
        found = _lookup(dtype.newbyteorder("="))
    if found is None:
        raise no_equivalent(dtype)
    return found


def _from_numpy(
    obj: Any, want: DType | None, cast: bool = False
) -> tuple[object, DType, tuple[int, ...] | None]:
    np = _numpy()
    assert np is not None
    refuse_masked(obj)
    arr = np.asarray(obj)
    if want is not None:
        if arr.dtype != want.numpy:
            return _convert_numpy(np, arr, want, cast)
        d = want
    else:
        found = _lookup(arr.dtype)
        if found is None:
            found = numpy_dtype_type(arr.dtype)
            arr = arr.astype(found.numpy)
        d = found
    if not arr.flags.c_contiguous:
        arr = arr.copy(order="C")  # (np.ascontiguousarray would turn 0-d into 1-d)
    if d.format is None:
        arr = arr.view(np.dtype(_CARRIER[d.itemsize]))
    elif arr.dtype.byteorder not in ("=", "|"):
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return arr, d, tuple(arr.shape)


def _convert_numpy(
    np: Any, arr: Any, want: DType, cast: bool
) -> tuple[object, DType, tuple[int, ...] | None]:
    """A numpy array of another dtype than ``want``, converted: raw void bytes of the same
    width are reinterpreted, object arrays follow the rule for Python numbers, and numeric
    arrays follow it too (through the core) unless numpy calls the cast safe or the caller
    asked for ``cast=True`` (numpy's astype)."""
    if arr.dtype.kind == "O":
        return _from_python(arr.tolist(), want, cast) if arr.ndim else _from_python(arr.item(), want, cast)
    if arr.dtype.kind == "b":
        # A bool is 0 or 1 in every type, whatever its byte holds (a view of uint8 data):
        # ml_dtypes' casts from bool copy the byte (True 2 -> bfloat16 2.0), numpy's test it.
        arr = arr.view(np.uint8) != 0
    src = _lookup(arr.dtype)
    if src is None and arr.dtype.byteorder == (">" if sys.byteorder == "little" else "<"):
        src = _lookup(arr.dtype.newbyteorder("="))
        if src is not None:
            arr = arr.astype(arr.dtype.newbyteorder("="))
    if src is None:
        if arr.dtype.kind == "V" and arr.dtype.fields is None and arr.dtype.subdtype is None:
            if arr.dtype.itemsize != want.itemsize:
                raise InvalidArgumentError(
                    f"the array holds raw {arr.dtype.itemsize}-byte items (numpy dtype"
                    f" {arr.dtype}), which cannot be {want.name} ({want.itemsize} bytes each)"
                )
            raw = np.ascontiguousarray(arr) if arr.ndim else arr.copy()
            return _from_numpy(raw.view(want.numpy), want)
        raise InvalidArgumentError(
            f"numpy dtype {arr.dtype} holds no numbers rpjrt converts to {want.name}; known"
            " dtypes: " + ", ".join(x.name for x in ALL)
        )
    # A sub-byte or float6 byte with bits set above the element's holds no value of its
    # type: refused whatever the target and cast= (as the core's conversion refuses it),
    # before astype makes a value of those bits (int4 0x10 -> 0, float6 0x40 -> -0.0).
    _check_narrow_bytes(np, arr, src)
    # numpy's own "safe" casts keep every value; ml_dtypes registers casts into its narrow
    # floats as safe that overflow (int8 100 into float8_e3m4) or have no zero (e8m0fnu),
    # so those go through the core's check. Out of ml_dtypes' types into numpy's of 4 or
    # more bytes (bfloat16 into float32) every value fits.
    into = np.dtype(want.numpy)
    if cast or (
        np.can_cast(arr.dtype, into, casting="safe")
        and into.type.__module__ == "numpy"
        and (arr.dtype.type.__module__ == "numpy" or into.itemsize >= 4)
    ):
        with np.errstate(all="ignore"):
            return _from_numpy(arr.astype(want.numpy), want)
    from . import _rpjrt

    dense = arr.copy(order="C") if not arr.flags.c_contiguous else arr
    data, code, shape = _rpjrt._convert_host(dense.reshape(-1).view(np.uint8), src, list(arr.shape), want)
    return data, from_code(code), tuple(shape)


def _check_narrow_bytes(np: Any, arr: Any, src: DType) -> None:
    """Refuses an element of ``arr`` (of ``src``, one element per byte) whose byte has bits
    set above the element's width, unless (signed types) they copy its sign bit: the rule of
    the core's ``first_foreign_byte``, with its message."""
    bits = src.bits
    if src.itemsize != 1 or bits >= 8 or src.kind == "b":
        return
    u = arr.view(np.uint8).reshape(-1)
    ok = (u >> bits) == 0
    if src.kind == "i":
        ok |= (u.view(np.int8) >> (bits - 1)) == -1
    bad = np.flatnonzero(~ok)
    if bad.size:
        i = int(bad[0])
        ext = ", or those sign-extended" if src.kind == "i" else ""
        raise InvalidArgumentError(
            f"the {src.name} data's element {i} is the byte {int(u[i]):#04x}, which is no"
            f" {src.name} value ({bits} bits{ext})"
        )


def _from_buffer(obj: object, want: DType) -> tuple[object, DType, tuple[int, ...] | None]:
    mv = memoryview(obj)  # type: ignore[arg-type]
    src = from_format(mv.format, mv.itemsize)
    raw = mv.format.lstrip("@=<>!") in ("B", "b", "c")
    if src is want:
        return mv, want, None
    if not raw:
        what = src.name if src else f"format {mv.format!r}"
        raise InvalidArgumentError(
            f"the data has {what} elements (item size {mv.itemsize}) and dtype={want.name} was"
            " requested; rpjrt reinterprets only raw bytes (format 'B', 'b' or 'c') and does not"
            " convert buffer-protocol data (convert first, e.g. with numpy's .astype, or say the"
            " bytes are raw with memoryview(x).cast('B'))"
        )
    if want.itemsize == 0:
        raise InvalidArgumentError(f"dtype {want.name} has no host representation")
    if not mv.c_contiguous:
        # A C-ordered copy of the same shape (tobytes() alone would flatten it).
        mv = memoryview(mv.tobytes()).cast("B", mv.shape or (mv.nbytes,))
    if mv.ndim == 0:
        shape: tuple[int, ...] = ()
        nbytes = mv.nbytes
        if nbytes != want.itemsize:
            raise InvalidArgumentError(
                f"{nbytes} bytes do not hold one {want.name} ({want.itemsize} bytes)"
            )
    else:
        last = mv.shape[-1] * mv.itemsize if mv.shape else mv.nbytes
        if last % want.itemsize:
            raise InvalidArgumentError(
                f"the last dimension holds {last} bytes, not a whole number of {want.name}"
                f" elements ({want.itemsize} bytes each)"
            )
        dims = tuple(mv.shape or (mv.nbytes,))
        shape = dims[:-1] + (last // want.itemsize,)
    return mv.cast("B") if mv.ndim != 1 or mv.format != "B" else mv, want, shape


def _numpy_or_refuse(want: DType) -> Any:
    np = _numpy()
    if np is None:
        try:
            import numpy as np
        except ImportError:
            raise InvalidArgumentError(
                f"cast=True converts as numpy's astype does, so storing Python numbers as"
                f" {want.name} with it needs numpy and ml_dtypes (pip install 'rpjrt[numpy]')"
            ) from None
    return np


def _from_python(
    obj: Any, want: DType | None, cast: bool = False
) -> tuple[object, DType, tuple[int, ...] | None]:
    from . import _rpjrt

    if not cast:
        # The one rule for numbers is rpjrt_npy::scalars::to_host.
        data, code, shape = _rpjrt._python_to_host(obj, want)
        return data, from_code(code), tuple(shape)
    # cast=True: the core checks the shape and picks the type; numpy's astype converts.
    shape, code = _rpjrt._python_shape(obj, want)
    want = from_code(code)
    np = _numpy_or_refuse(want)
    with np.errstate(all="ignore"):
        try:
            src = np.asarray(obj) if shape else np.asarray([obj])
        except OverflowError:  # an int beyond every numpy type, beside floats
            src = None
        # numpy reads a list of ints beyond int64 (with other ints, or floats) as float64 or
        # objects: those ints would lose their low bits, or not convert at all. Each value is
        # then converted on its own, ints exactly.
        if src is None or src.dtype.kind == "O" or (want.kind in "iu" and src.dtype.kind in "fc"):
            return _from_numpy(_cast_each(np, obj, tuple(shape), want), want)
        if src.dtype.kind == "c" and want.kind != "c":
            src = src.real
        arr = src.astype(want.numpy).reshape(tuple(shape))
    return _from_numpy(arr, want)


def _leaves(obj: Any) -> list[Any]:
    """The numbers of a nested list (or a lone number), in row-major order."""
    if not isinstance(obj, (list, tuple)):
        return [obj]
    out: list[Any] = []
    for x in obj:
        out.extend(_leaves(x))
    return out


def _cast_each(np: Any, obj: Any, shape: tuple[int, ...], want: DType) -> Any:
    """``obj``'s numbers as a ``want`` array of ``shape``, as numpy's astype converts each
    one, with integers (Python's and numpy's, any size) kept exact: into an integer type
    they wrap modulo 2**bits (never through float64, where 2**64-1 becomes 2**64); into a
    float type one too large for float64 saturates to infinity."""
    flat = _leaves(obj)
    out = np.empty(len(flat), dtype=want.numpy)
    ints = [i for i, v in enumerate(flat) if isinstance(v, (int, np.integer, np.bool_))]
    taken = set(ints)
    rest = [i for i in range(len(flat)) if i not in taken]
    if ints:
        vals = [int(flat[i]) for i in ints]
        if want.kind in ("i", "u"):
            m = 1 << want.bits
            vals = [v % m for v in vals]
            if want.kind == "i":
                vals = [v - m if v >= m >> 1 else v for v in vals]
            carrier = np.int64 if want.kind == "i" else np.uint64
            out[ints] = np.array(vals, dtype=carrier).astype(want.numpy)
        elif want.kind == "b":
            out[ints] = np.array([v != 0 for v in vals], dtype=np.bool_)
        else:
            out[ints] = np.array([_float_of(v) for v in vals], dtype=np.float64).astype(want.numpy)
    if rest:
        r = np.asarray([flat[i] for i in rest])
        if r.dtype.kind == "c" and want.kind != "c":
            r = r.real
        out[rest] = r.astype(want.numpy)
    return out.reshape(shape)


def _float_of(v: int) -> float:
    """``float(v)``, or an infinity of its sign when ``v`` is beyond float64's range."""
    try:
        return float(v)
    except OverflowError:
        return float("inf") if v > 0 else float("-inf")


def as_host(
    obj: object, dtype: Any = None, cast: bool = False
) -> tuple[object, DType, tuple[int, ...] | None]:
    """``(buffer object, dtype, shape or None)`` for the data in ``obj``; see the module doc."""
    want = _dtype_arg(dtype)
    if _is_numpy(obj):
        return _from_numpy(obj, want, cast)
    if isinstance(obj, (bool, int, float, complex, list, tuple)):
        return _from_python(obj, want, cast)
    if hasattr(obj, "__array__") or hasattr(obj, "__array_interface__") or hasattr(obj, "__dlpack__"):
        # An array (jax, torch, ...) converts by value, as numpy's own arrays do, even where
        # it also exports a buffer: only plain buffers (bytes, memoryview, array.array) are
        # raw bytes that dtype= reinterprets.
        return _from_numpy(numpy_of(obj), want, cast)
    try:
        memoryview(obj)  # type: ignore[arg-type]
        has_buffer = True
    except TypeError:
        has_buffer = False
    except (ValueError, BufferError) as e:  # e.g. a released memoryview
        raise InvalidArgumentError(f"cannot read the {type(obj).__name__}'s buffer: {e}") from None
    if has_buffer:
        if want is None:
            mv = memoryview(obj)  # type: ignore[arg-type]
            raise InvalidArgumentError(
                f"the buffer's format {mv.format!r} (item size {mv.itemsize}) is not a type rpjrt"
                " knows; pass dtype= with raw bytes (memoryview(x).cast('B')) to say what the"
                " bytes hold"
            )
        return _from_buffer(obj, want)
    raise InvalidArgumentError(
        f"cannot put a {type(obj).__module__}.{type(obj).__qualname__} on a device: it supports"
        " neither the buffer protocol, __array__ nor __dlpack__, and it is not a number or a"
        " nested list of numbers"
    )


def shares_memory(obj: object, data: object) -> bool:
    """Whether ``data`` (what :func:`as_host` made of ``obj``) may lie in ``obj``'s own
    memory, rather than in a new array: a view, not a conversion."""
    if data is obj:
        return True
    if isinstance(obj, (bool, int, float, complex, list, tuple)):
        return False
    try:
        import numpy as np

        a, d = numpy_of(obj), np.asarray(data)
        # No element, no memory to share or to copy (numpy says no sharing for every empty
        # array, which would refuse a put(copy=False) that copies nothing).
        if a.size == 0 and d.size == 0:
            return True
        return bool(np.may_share_memory(a, d))
    except Exception:
        return False


def numpy_of(obj: object) -> Any:
    """A numpy array of a host object that numpy reads (``np.asarray``), or of one that only
    offers ``__dlpack__`` (read in place with ``np.from_dlpack``; it must be on the host)."""
    try:
        import numpy as np
    except ImportError:
        raise InvalidArgumentError(
            f"{type(obj).__name__} converts only through numpy, which is not installed"
        ) from None
    if hasattr(obj, "__dlpack__") and not (
        isinstance(obj, np.ndarray) or hasattr(obj, "__array__") or hasattr(obj, "__array_interface__")
    ):
        try:
            return np.from_dlpack(obj)
        except (BufferError, TypeError, ValueError, RuntimeError) as e:
            raise InvalidArgumentError(
                f"cannot read the {type(obj).__name__} through __dlpack__ on the host: {e}"
            ) from None
    if isinstance(obj, np.ndarray):
        refuse_masked(obj)
        return np.asarray(obj)
    # What __array__ gives may itself be a masked array, whose mask np.asarray drops.
    arr = np.asanyarray(obj)
    refuse_masked(arr)
    return np.asarray(arr)


def as_numpy(obj: object, dtype: Any = None, cast: bool = False) -> tuple[Any, DType]:
    """``(numpy array, dtype)`` of the data in ``obj`` under :func:`as_host`'s rules (the
    conversion rule for numbers included): C order, native byte order; sub-byte types one
    element per byte. The array may be read-only."""
    np = _numpy_or_refuse(_dtype_arg(dtype) or ALL[0])
    data, d, shape = as_host(obj, dtype, cast)
    mv = memoryview(data)  # type: ignore[arg-type]
    if shape is None:
        shape = tuple(mv.shape or ())
    if not mv.c_contiguous:
        mv = memoryview(mv.tobytes())
    flat = mv if (mv.ndim == 1 and mv.format == "B") else mv.cast("B")
    return np.frombuffer(flat, dtype=d.numpy).reshape(shape), d


def _nest(flat: list[Any], shape: tuple[int, ...]) -> Any:
    if not shape:
        return flat[0]
    if len(shape) == 1:
        return flat
    step = len(flat) // shape[0] if shape[0] else 0
    return [_nest(flat[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]


def to_numpy(mv: memoryview, dtype: DType) -> Any:
    """A numpy array over a fresh host copy (``mv`` from ``Buffer.to_host()``)."""
    try:
        import numpy as np
    except ImportError as e:
        raise import_failed("numpy", "Buffer.to_numpy()", e, "Buffer.to_host() gives a memoryview without it") from e
    arr = np.asarray(mv)
    if dtype.format is None:
        arr = arr.view(dtype.numpy)
    return arr


def tolist(mv: memoryview, dtype: DType) -> Any:
    """Python numbers, nested like the shape (``mv`` from ``Buffer.to_host()``)."""
    if dtype.format is None:
        return to_numpy(mv, dtype).tolist()
    shape = tuple(mv.shape or ())
    if dtype.kind == "c":
        part = dtype.format[1]
        flat: list[Any] = [complex(r, i) for r, i in struct.iter_unpack("<" + part * 2, mv.tobytes())]
        return _nest(flat, shape)
    try:
        return mv.tolist()
    except NotImplementedError:  # formats memoryview cannot index, e.g. "e" (float16)
        return _nest([v for (v,) in struct.iter_unpack("<" + dtype.format, mv.tobytes())], shape)
