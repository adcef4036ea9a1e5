"""Property tests of host ingest and DLPack import, compared against numpy's own reading.

Random dtypes, shapes, strides (zero, negative, overlapping), byte orders, buffer-protocol
formats, read-only and misaligned memory. Derandomized with a bounded example budget, so
every run tries the same cases and the whole file stays within seconds per plugin.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
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


INT_TYPES = ["int2", "int4", "int8", "int16", "uint2", "uint4", "uint8", "uint16"]  # 1-bit: PJRT 0.94+


@SETTINGS
@given(
    name=st.sampled_from(INT_TYPES),
    values=st.lists(st.integers(-(2**17), 2**17), min_size=1, max_size=6),
)
def test_python_ints_are_stored_exactly_or_refused(
    client: rpjrt.Client, name: str, values: list[int]
) -> None:
    d = rpjrt.dtype(name)
    lo, hi = (-(2 ** (d.bits - 1)), 2 ** (d.bits - 1) - 1) if d.kind == "i" else (0, 2**d.bits - 1)
    fits = all(lo <= v <= hi for v in values)
    try:
        b = client.put(values, dtype=d)
    except rpjrt.InvalidArgumentError as e:
        assert not fits, e
        return
    assert fits
    assert b.to_numpy().astype(np.int64).tolist() == values


FLOAT_TYPES = ["bfloat16", "float16", "float32", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"]


@SETTINGS
@given(
    name=st.sampled_from(FLOAT_TYPES),
    values=st.lists(
        st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=1, max_size=6
    ),
)
def test_python_floats_round_or_are_refused_on_overflow(
    client: rpjrt.Client, name: str, values: list[float]
) -> None:
    nd = rpjrt.dtype(name).numpy
    with np.errstate(all="ignore"):
        want = np.asarray(values).astype(nd)
    fi = ml_dtypes.finfo(nd)
    limit = float(fi.max) + float(fi.eps) * 2.0 ** (int(fi.maxexp) - 1) / 2
    overflow = not np.isfinite(want.astype(np.float64)).all() or any(
        abs(v) >= limit for v in values
    )
    try:
        b = client.put(values, dtype=name)
    except rpjrt.InvalidArgumentError as e:
        assert overflow, e
        return
    assert not overflow
    assert b.to_numpy().tobytes() == want.tobytes()


ML_TYPES = ["bfloat16", "float8_e4m3fn", "float8_e5m2", "int4", "uint4", "int2"]


@SETTINGS
@given(
    name=st.sampled_from(ML_TYPES),
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    step=st.sampled_from([1, -1, 2]),
    seed=st.integers(0, 2**16),
)
def test_ml_dtypes_arrays_read_as_numpy_reads_them(
    client: rpjrt.Client, name: str, shape: list[int], step: int, seed: int
) -> None:
    nd = rpjrt.dtype(name).numpy
    rng = np.random.default_rng(seed)
    if rpjrt.dtype(name).kind in "iu":
        info = ml_dtypes.iinfo(nd)
        base = rng.integers(int(info.min), int(info.max) + 1, size=[2 * n for n in shape])
    else:
        base = rng.normal(size=[2 * n for n in shape]) * 4
    a = base.astype(nd)[tuple(slice(None, None, step) for _ in shape)]
    a = a[tuple(slice(0, n) for n in shape)]
    got = client.put(a, copy=None).to_numpy()
    assert got.dtype == nd and got.shape == a.shape
    assert got.tobytes() == np.ascontiguousarray(a).tobytes()
