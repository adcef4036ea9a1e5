"""Property tests of host ingest and DLPack import, compared against numpy's own reading.

Random dtypes, shapes, strides (zero, negative, overlapping), byte orders, buffer-protocol
formats, read-only and misaligned memory. Derandomized with a bounded example budget, so
every run tries the same cases and the whole file stays within seconds per plugin.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.lib.stride_tricks import as_strided

import rpjrt

SETTINGS = settings(
    max_examples=120,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

DTYPES = ["?", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f2", "f4", "f8", "c8", "c16"]


@st.composite
def host_arrays(draw: Any, native_only: bool = False) -> np.ndarray:
    """A numpy array over random bytes with a random layout."""
    code = draw(st.sampled_from(DTYPES))
    order = "=" if native_only else draw(st.sampled_from(["<", ">", "="]))
    dt = np.dtype(order + code) if code != "?" else np.dtype("?")
    rank = draw(st.integers(0, 3))
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=rank, max_size=rank)))
    # Element strides in units of the item size: zero (broadcast), negative, overlapping.
    units = draw(st.lists(st.integers(-3, 3), min_size=rank, max_size=rank))
    misalign = draw(st.integers(0, dt.itemsize - 1)) if dt.itemsize > 1 else 0
    item = dt.itemsize
    strides = tuple(u * item for u in units)
    lo = sum((d - 1) * s for d, s in zip(shape, strides) if s < 0 and d > 0)
    hi = sum((d - 1) * s for d, s in zip(shape, strides) if s > 0 and d > 0)
    nbytes = hi - lo + item
    data = draw(st.binary(min_size=nbytes + misalign, max_size=nbytes + misalign))
    if code == "?":
        data = bytes(x % 3 for x in data)  # bool bytes 0, 1 and 2
    base = np.frombuffer(bytearray(data), dtype=np.uint8)
    start = misalign - lo
    first = base[start : start + item].view(dt)  # one element at the start, maybe misaligned
    arr = as_strided(first, shape=shape, strides=strides)
    if draw(st.booleans()):
        arr.flags.writeable = False
    return arr


def expected(a: np.ndarray) -> np.ndarray:
    """numpy's own reading of `a`, in native byte order (bool: nonzero is true)."""
    if a.dtype == np.bool_:
        return a.view(np.uint8) != 0
    return a.astype(a.dtype.newbyteorder("="))


def assert_same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)
    # Bitwise too (NaN payloads, signed zeros), except for bool where only truth counts.
    if want.dtype != np.bool_:
        assert got.tobytes() == np.ascontiguousarray(want).tobytes()


@SETTINGS
@given(a=host_arrays(), copy=st.sampled_from([True, None]), as_view=st.booleans())
def test_put_reads_what_numpy_reads(
    client: rpjrt.Client, a: np.ndarray, copy: bool | None, as_view: bool
) -> None:
    obj: Any = memoryview(a) if as_view else a
    b = client.put(obj, copy=copy)
    assert_same(b.to_numpy(), expected(a))


@SETTINGS
@given(a=host_arrays())
def test_copy_false_is_in_place_or_refused(client: rpjrt.Client, a: np.ndarray) -> None:
    try:
        b = client.put(a, copy=False)
    except rpjrt.InvalidArgumentError:
        return
    assert_same(b.to_numpy(), expected(a))


@SETTINGS
@given(a=host_arrays(native_only=True), copy=st.sampled_from([True, None]))
def test_from_dlpack_reads_what_numpy_reads(
    client: rpjrt.Client, a: np.ndarray, copy: bool | None
) -> None:
    try:
        np.from_dlpack(a)  # numpy refuses some layouts (e.g. misaligned strides) itself
    except (BufferError, TypeError, ValueError):
        return
    b = client.from_dlpack(a, copy=copy)
    assert_same(b.to_numpy(), expected(a))


def test_strategy_makes_the_layouts_it_claims() -> None:
    seen: set[str] = set()

    @settings(max_examples=200, derandomize=True, database=None, deadline=None)
    @given(a=host_arrays())
    def probe(a: np.ndarray) -> None:
        if 0 in a.strides and a.size > 1:
            seen.add("zero")
        if any(s < 0 for s in a.strides) and a.size > 1:
            seen.add("negative")
        if a.dtype.byteorder == ">":
            seen.add("big")
        if not a.flags.writeable:
            seen.add("readonly")
        if not a.flags.aligned:
            seen.add("misaligned")

    probe()
    assert seen >= {"zero", "negative", "big", "readonly", "misaligned"}, seen


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__])
