"""The pure-Python slow path of Client.put (rpjrt._host.as_host)."""

from __future__ import annotations

import array
import struct

import ml_dtypes
import numpy as np
import pytest

import rpjrt
from rpjrt._host import as_host


def _bytes(obj: object) -> bytes:
    return memoryview(obj).tobytes()  # type: ignore[arg-type]


def test_python_numbers_and_lists() -> None:
    data, d, shape = as_host([[1, 2, 3], [4, 5, 6]])
    assert (d, shape) == (rpjrt.int64, (2, 3))
    assert struct.unpack("<6q", _bytes(data)) == (1, 2, 3, 4, 5, 6)
    assert as_host(2.5)[1:] == (rpjrt.float64, ())
    assert as_host(True)[1:] == (rpjrt.bool_, ())
    assert as_host([1j, 2j])[1:] == (rpjrt.complex128, (2,))
    assert as_host([])[1:] == (rpjrt.float64, (0,))
    assert as_host([[], []])[1:] == (rpjrt.float64, (2, 0))
    data, d, shape = as_host([1, 2], dtype="float32")
    assert (d, shape) == (rpjrt.float32, (2,))
    assert struct.unpack("<2f", _bytes(data)) == (1.0, 2.0)
    data, d, _ = as_host([1.5, 2], dtype=rpjrt.float16)
    assert struct.unpack("<2e", _bytes(data)) == (1.5, 2.0)
    data, d, _ = as_host([1 + 2j], dtype=rpjrt.complex64)
    assert struct.unpack("<2f", _bytes(data)) == (1.0, 2.0)
    data, d, _ = as_host([1.0, 2.0], dtype=rpjrt.bfloat16)
    assert d is rpjrt.bfloat16
    assert np.frombuffer(_bytes(data), ml_dtypes.bfloat16).tolist() == [1.0, 2.0]


@pytest.mark.parametrize(
    "bad,match",
    [
        ([1, 2.0], "mixes float and int"),
        ([True, 1], "mixes bool and int"),
        ([1, "a"], "cannot put a str"),
        ([None], "cannot put a NoneType"),
        ([[1], [2, 3]], "ragged"),
        ([[1], 2], "ragged"),
        (object(), "neither the buffer protocol, __array__ nor __dlpack__"),
        ({1: 2}, "neither the buffer protocol"),
        ("text", "neither the buffer protocol"),
    ],
)
def test_bad_python_objects(bad: object, match: str) -> None:
    with pytest.raises(rpjrt.InvalidArgumentError, match=match):
        as_host(bad)


def test_bad_conversions() -> None:
    with pytest.raises(rpjrt.InvalidArgumentError, match="rounding"):
        as_host([1.5], dtype="int32")
    with pytest.raises(rpjrt.InvalidArgumentError, match="does not fit"):
        as_host([300], dtype="int8")
    with pytest.raises(rpjrt.InvalidArgumentError, match="complex"):
        as_host([1j], dtype="float32")


def test_raw_bytes_are_reinterpreted() -> None:
    raw = struct.pack("<4f", 1, 2, 3, 4)
    data, d, shape = as_host(raw, dtype="float32")
    assert (d, shape) == (rpjrt.float32, (4,))
    assert _bytes(data) == raw
    data, d, shape = as_host(memoryview(raw).cast("B", (2, 8)), dtype="float32")
    assert shape == (2, 2)
    with pytest.raises(rpjrt.InvalidArgumentError, match="whole number"):
        as_host(b"\x00" * 6, dtype="float32")


def test_typed_buffers_are_not_silently_converted() -> None:
    with pytest.raises(rpjrt.InvalidArgumentError, match="does not convert"):
        as_host(array.array("f", [1.0]), dtype="int32")
    data, d, shape = as_host(array.array("f", [1.0]), dtype="float32")
    assert (d, shape) == (rpjrt.float32, None)


def test_unknown_buffer_format_needs_dtype() -> None:
    import ctypes

    class Pair(ctypes.Structure):
        _fields_ = [("a", ctypes.c_uint8), ("b", ctypes.c_uint8)]

    records = (Pair * 4)()
    assert memoryview(records).format.startswith("T{")
    with pytest.raises(rpjrt.InvalidArgumentError, match="pass dtype="):
        as_host(records)
    # Only raw bytes are reinterpreted: a record format is refused, its bytes are not.
    with pytest.raises(rpjrt.InvalidArgumentError, match="only raw bytes"):
        as_host(records, dtype="uint16")
    data, d, shape = as_host(memoryview(records).cast("B"), dtype="uint16")
    assert d is rpjrt.uint16 and shape == (4,) and len(_bytes(data)) == 8


def test_numpy_arrays() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    data, d, shape = as_host(a.T)  # Fortran order: made C-contiguous here
    assert (d, shape) == (rpjrt.float32, (3, 2))
    assert _bytes(data) == np.ascontiguousarray(a.T).tobytes()
    with pytest.raises(rpjrt.InvalidArgumentError, match="float values cannot be stored as int32"):
        as_host(a, dtype="int32")  # numpy arrays convert under the rule for numbers
    data, d, shape = as_host(a, dtype="int32", cast=True)
    assert d is rpjrt.int32 and _bytes(data) == a.astype(np.int32).tobytes()
    data, d, shape = as_host(a.astype(np.int64), dtype="int8")
    assert d is rpjrt.int8 and _bytes(data) == a.astype(np.int8).tobytes()
    b = np.arange(3, dtype=">i4")
    data, d, _ = as_host(b)
    assert d is rpjrt.int32 and _bytes(data) == np.arange(3, dtype="<i4").tobytes()
    h = np.array([1, 2], ml_dtypes.bfloat16)
    data, d, shape = as_host(h)
    assert d is rpjrt.bfloat16 and shape == (2,) and _bytes(data) == h.tobytes()
    i4 = np.array([1, -2], ml_dtypes.int4)
    data, d, shape = as_host(i4)
    assert d is rpjrt.int4 and _bytes(data) == i4.tobytes()
    data, d, shape = as_host(np.float32(3))
    assert d is rpjrt.float32 and shape == ()
    with pytest.raises(rpjrt.InvalidArgumentError, match="no PJRT equivalent"):
        as_host(np.array(["a"]))
