"""Transfers at scale: streaming uploads in bounded chunks with progress, raw partial
reads, uninitialised and error buffers.

``put_streaming`` moves an array of any size to a device through the plugin's async
host-to-device transfer manager, one chunk at a time, so the extra host memory it needs is
about one chunk whatever the array's size. The source is either a C-contiguous
buffer-protocol object (a numpy array, an ``np.memmap``, bytes ...; its chunks are handed
to the plugin in place) or a function ``source(offset, nbytes)`` returning the next
``nbytes`` bytes (generate or read data chunk by chunk). Progress is reported for
transfers of at least ``progress_threshold`` bytes: to a callable ``progress(done, total)``,
or, when ``progress`` is left as ``None``, with a tqdm bar if tqdm is installed and stderr
is a terminal.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Union

from . import _rpjrt
from ._rpjrt import Buffer, Client, Device, Memory, RawCopy

__all__ = [
    "DEFAULT_CHUNK",
    "DEFAULT_PROGRESS_THRESHOLD",
    "put_streaming",
    "read_raw",
    "read_raw_async",
    "uninitialized",
    "error_buffer",
    "DeviceLayout",
    "device_layout",
    "default_layout",
    "byte_strides",
]

#: Default chunk size of ``put_streaming``: 64 MiB.
DEFAULT_CHUNK = 64 << 20
#: Transfers at least this large report progress: 256 MiB.
DEFAULT_PROGRESS_THRESHOLD = 256 << 20

Source = Union[Any, Callable[[int, int], Any]]
ProgressFn = Callable[[int, int], None]


def _tqdm_progress(total: int) -> tuple[ProgressFn | None, Callable[[], None]]:
    """A tqdm bar reporting bytes, when tqdm is installed and stderr is a terminal."""
    try:
        if not sys.stderr.isatty():
            return None, lambda: None
        from tqdm import tqdm  # type: ignore[import-untyped, unused-ignore]
    except Exception:
        return None, lambda: None
    bar = tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc="put")
    last = [0]

    def update(done: int, _total: int) -> None:
        bar.update(done - last[0])
        last[0] = done

    return update, bar.close


def _byte_source(obj: Any) -> tuple[Callable[[int, int], Any], Any, tuple[int, ...]]:
    """(source function, dtype, shape) of a C-contiguous buffer-protocol object."""
    from ._host import numpy_dtype_type, refuse_masked

    # A masked array's bytes are its data without the mask, as client.put refuses it.
    refuse_masked(obj)
    dtype = getattr(obj, "dtype", None)
    np = sys.modules.get("numpy")
    if np is not None and isinstance(obj, (np.ndarray, np.generic)):
        # Read by its dtype, as client.put reads it: numpy exports a datetime64 or
        # timedelta64 scalar's bytes as uint8, and dtypes without numbers are refused by name.
        numpy_dtype_type(dtype)
    byteorder = getattr(dtype, "byteorder", "=")
    if byteorder not in ("=", "|") and byteorder != ("<" if sys.byteorder == "little" else ">"):
        raise _rpjrt_invalid(
            f"put_streaming sends the array's bytes as they are, and this array's {dtype} is of "
            "the other byte order: convert it first (arr.astype(arr.dtype.newbyteorder('=')))"
        )
    try:
        view = memoryview(obj)
    except (TypeError, ValueError):
        # numpy cannot export some dtypes (ml_dtypes' bfloat16, float8, ...) through the
        # buffer protocol: their bytes are read through a uint8 view of the same memory.
        as_bytes = getattr(obj, "view", None)
        flags = getattr(obj, "flags", None)
        if dtype is None or as_bytes is None or flags is None:
            raise
        if not flags["C_CONTIGUOUS"]:
            raise _rpjrt_invalid("put_streaming needs a C-contiguous source array") from None
        flat_bytes = memoryview(obj.reshape(-1).view("u1"))
        shape = tuple(int(s) for s in obj.shape)

        def source_bytes(offset: int, nbytes: int) -> Any:
            return flat_bytes[offset : offset + nbytes]

        return source_bytes, dtype, shape
    if not view.c_contiguous:
        raise _rpjrt_invalid("put_streaming needs a C-contiguous source array")
    if dtype is None:
        from . import dtype as to_dtype

        dtype = to_dtype(view.format)
    shape = tuple(view.shape or ())
    flat = view.cast("B") if view.nbytes else view

    def source(offset: int, nbytes: int) -> Any:
        return flat[offset : offset + nbytes]

    return source, dtype, shape


def _agree_with_source(
    own_dtype: Any, own_shape: tuple[int, ...], dtype: Any, shape: Sequence[int] | None
) -> tuple[Any, Sequence[int]]:
    """The dtype and shape of an upload from an array: the array's own, or the caller's when
    they describe the same elements. A different element type would reinterpret the bytes,
    and a shape with another element count would drop or over-read data: both are refused."""
    from . import dtype as to_dtype

    if dtype is not None and to_dtype(dtype) != to_dtype(own_dtype):
        raise _rpjrt_invalid(
            f"put_streaming: dtype={to_dtype(dtype).name} differs from the source array's "
            f"{to_dtype(own_dtype).name} (convert the array first; its bytes are not reinterpreted)"
        )
    if shape is None:
        return own_dtype, own_shape
    negative = [int(s) for s in shape if int(s) < 0]
    if negative:
        raise _rpjrt_invalid(f"put_streaming: shape={list(shape)} has a negative dimension ({negative[0]})")
    shape = _dims(shape)
    count = 1
    for s in shape:
        count *= int(s)
    own = 1
    for s in own_shape:
        own *= int(s)
    if count != own or any(int(s) < 0 for s in shape):
        raise _rpjrt_invalid(
            f"put_streaming: shape={list(shape)} has {count} elements, the source array "
            f"{list(own_shape)} has {own}"
        )
    return own_dtype, shape


#: The largest size, offset or count the transfer API takes: 2**63 - 1.
_MAX_COUNT = 2**63 - 1


def _count(value: Any, what: str, lo: int, hi: int = _MAX_COUNT, noun: str = "it") -> int:
    """An integer parameter in ``lo..=hi``: a bool or a non-integer is a ``TypeError``
    naming ``what``; a value out of range an ``InvalidArgumentError`` naming it and the
    range (never Python's ``OverflowError`` about C types)."""
    import operator

    if isinstance(value, bool):
        raise TypeError(f"{what} must be an integer, not a bool")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an integer, not {type(value).__name__}") from None
    if not lo <= v <= hi:
        top = "2**63-1" if hi == _MAX_COUNT else str(hi)
        raise _rpjrt_invalid(f"{what} is {v}: {noun} must be at least {lo} and at most {top}")
    return v


def _dims(shape: Any, what: str = "shape") -> list[int]:
    """A shape parameter: a sequence of integers from 0 to 2**63-1 (each checked as
    :func:`_count` checks one, named ``shape[i]``)."""
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence):
        raise TypeError(f"{what} must be a sequence of integers, not {type(shape).__name__}")
    out = []
    for i, d in enumerate(shape):
        if not isinstance(d, bool) and hasattr(d, "__index__") and d.__index__() < 0:
            raise _rpjrt_invalid(f"{what}[{i}]: dimension {i} is negative ({d.__index__()})")
        out.append(_count(d, f"{what}[{i}]", 0, noun="a dimension"))
    return out


def _rpjrt_invalid(message: str) -> Exception:
    from ._errors import InvalidArgumentError

    return InvalidArgumentError(message)


def put_streaming(
    client: Client,
    source: Source,
    *,
    dtype: Any = None,
    shape: Sequence[int] | None = None,
    device: Device | int | None = None,
    memory: Memory | str | None = None,
    chunk_bytes: int = DEFAULT_CHUNK,
    progress: ProgressFn | bool | None = None,
    progress_threshold: int = DEFAULT_PROGRESS_THRESHOLD,
) -> Buffer:
    """Upload an array in chunks through the plugin's async transfer manager.

    source: a C-contiguous buffer-protocol object (dtype and shape come from it), or a
    function ``source(offset, nbytes)`` returning exactly ``nbytes`` C-contiguous bytes of
    the row-major array (then ``dtype`` and ``shape`` are required).
    progress: a callable ``progress(done_bytes, total_bytes)``; ``None`` shows a tqdm bar
    when tqdm is installed and stderr is a terminal; ``False`` reports nothing.
    chunk_bytes: from 1 to 2**63-1; progress_threshold: from 0 to 2**63-1 (a bool is
    neither: TypeError; out of range: InvalidArgumentError naming the parameter).
    Raises UnsupportedError naming the entry when the plugin has no transfer manager.
    """
    chunk_bytes = _count(chunk_bytes, "chunk_bytes", 1, noun="a streaming upload's chunk size")
    progress_threshold = _count(progress_threshold, "progress_threshold", 0)
    if callable(source) and not _has_buffer(source):
        if dtype is None or shape is None:
            raise _rpjrt_invalid("put_streaming from a function needs dtype= and shape=")
        shape = _dims(shape)
        fn = source
    else:
        fn, own_dtype, own_shape = _byte_source(source)
        dtype, shape = _agree_with_source(own_dtype, own_shape, dtype, shape)
    fn = _checked_chunks(fn, dtype)
    close: Callable[[], None] = lambda: None
    report: ProgressFn | None
    if progress is None or progress is True:
        from . import dtype as to_dtype

        d = to_dtype(dtype)
        n = d.itemsize
        for s in shape:
            n *= int(s)
        report, close = _tqdm_progress(n) if n >= progress_threshold else (None, close)
    elif progress is False:
        report = None
    else:
        report = progress
    try:
        return _rpjrt._put_streaming(
            client,
            fn,
            dtype,
            list(shape),
            device,
            memory,
            chunk_bytes,
            report,
            progress_threshold,
        )
    finally:
        close()


# The float6 types use the low 6 bits of each byte; a byte with bits 6-7 set is no value.
_SPARE_BITS = {"float6_e2m3fn", "float6_e3m2fn"}
_SPARE_BYTE = re.compile(rb"[\x40-\xff]")


def _checked_chunks(fn: Callable[[int, int], Any], dtype: Any) -> Callable[[int, int], Any]:
    """``fn`` with each chunk checked as client.put checks host data: a numpy masked array
    is refused (its mask would be lost), and for the float6 types a byte with bits 6-7
    set is refused as no value of the type, as int4 and float4 bytes are."""
    from . import dtype as to_dtype
    from ._host import refuse_masked

    try:
        name = to_dtype(dtype).name
    except Exception:
        name = ""  # an unknown dtype is refused by the upload itself, before any chunk
    spare = name in _SPARE_BITS

    def checked(offset: int, nbytes: int) -> Any:
        chunk = fn(offset, nbytes)
        refuse_masked(chunk)
        if spare:
            found = _first_spare_byte(chunk)
            if found is not None:
                i, byte = found
                raise _rpjrt_invalid(
                    f"put_streaming: the {name} data's element {offset + i} is the byte"
                    f" {byte:#04x}, which is no {name} value (6 bits)"
                )
        return chunk

    return checked


def _first_spare_byte(chunk: Any) -> tuple[int, int] | None:
    """The index and value of the first byte of ``chunk`` with bit 6 or 7 set, if any
    (with numpy when it is loaded: a scan at memory speed)."""
    try:
        np = sys.modules.get("numpy")
        if np is not None:
            a = np.frombuffer(chunk, np.uint8)
            if a.size == 0 or int(a.max()) < 0x40:
                return None
            i = int(np.argmax(a >= 0x40))
            return i, int(a[i])
        found = _SPARE_BYTE.search(chunk)
    except (TypeError, ValueError, BufferError):
        return None  # not contiguous bytes: refused by the upload itself
    return None if found is None else (found.start(), found.group()[0])


def _has_buffer(obj: Any) -> bool:
    try:
        memoryview(obj)
    except TypeError:
        return False
    return True


def read_raw(buffer: Buffer, offset: int, size: int) -> bytes:
    """``size`` bytes from byte ``offset`` of the buffer's on-device form
    (PJRT_Buffer_CopyRawToHost); on the CPU plugins that is the row-major data. A buffer put
    with a non-default ``layout`` is refused: plugins disagree on its bytes."""
    return _rpjrt._copy_raw_to_host(buffer, _count(offset, "offset", 0), _count(size, "size", 0))


def read_raw_async(buffer: Buffer, offset: int, size: int) -> RawCopy:
    """Start reading ``size`` bytes from byte ``offset`` of the buffer's on-device form and
    return at once; ``.wait()`` on the result gives the bytes. The range is checked first."""
    return _rpjrt._copy_raw_to_host_async(
        buffer, _count(offset, "offset", 0), _count(size, "size", 0)
    )


def uninitialized(
    client: Client,
    dtype: Any,
    shape: Sequence[int],
    *,
    device: Device | int | None = None,
    memory: Memory | str | None = None,
) -> Buffer:
    """A buffer whose contents are unspecified (PJRT_Client_CreateUninitializedBuffer).

    With ``memory``, the buffer is checked to be there: the CPU plugins place it in the
    device's default memory whatever is asked, which is an ``UnsupportedError`` naming
    both memories rather than a buffer somewhere else."""
    return _rpjrt._create_uninitialized_buffer(client, dtype, _dims(shape), device, memory)


def error_buffer(
    client: Client,
    dtype: Any,
    shape: Sequence[int],
    code: str,
    message: str,
    *,
    device: Device | int | None = None,
    memory: Memory | str | None = None,
) -> Buffer:
    """A buffer carrying an error (PJRT_Client_CreateErrorBuffer): waiting on it or using
    it raises ``code`` (a name such as "INTERNAL") with ``message``."""
    return _rpjrt._create_error_buffer(
        client, dtype, _dims(shape), code, message, device, memory
    )


class DeviceLayout(NamedTuple):
    """A device layout as the plugin's Layouts extension reports it."""

    minor_to_major: tuple[int, ...]
    tiles: tuple[tuple[int, ...], ...]
    element_size_bits: int
    memory_space: int

    @property
    def is_row_major(self) -> bool:
        n = len(self.minor_to_major)
        return not self.tiles and self.minor_to_major == tuple(range(n - 1, -1, -1))


def _layout(raw: tuple[list[int], list[list[int]], int, int]) -> DeviceLayout:
    m2m, tiles, bits, space = raw
    return DeviceLayout(tuple(m2m), tuple(tuple(t) for t in tiles), bits, space)


def device_layout(buffer: Buffer) -> DeviceLayout:
    """The buffer's device layout (Layouts extension; read within the struct size the
    plugin reports). Raises UnsupportedError when the plugin lacks the entry."""
    return _layout(_rpjrt._device_layout(buffer))


def default_layout(client: Client, dtype: Any, shape: Sequence[int]) -> DeviceLayout:
    """The plugin's default device layout for ``dtype[shape]``."""
    return _layout(_rpjrt._default_layout(client, dtype, _dims(shape)))


def byte_strides(buffer: Buffer) -> tuple[int, ...]:
    """Byte strides of the buffer's device layout (an error for tiled layouts)."""
    return tuple(_rpjrt._byte_strides(buffer))
