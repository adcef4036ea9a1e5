"""Round 27 (numerics of put): defects found by outside checks, and the classes behind them.

Every host conversion, with ``cast=True`` or not and into any dtype, keeps three rules:

A. Integers stay exact. ``put(list, dtype=<int>, cast=True)`` went through
   ``np.asarray(list)``, which reads ints beyond int64 beside other ints (or beside floats)
   as float64: ``2**64-1`` became ``0``. Ints now convert one by one, wrapping modulo
   ``2**bits`` when out of range (numpy's astype), never through float64.
B. A bool is 0 or 1. ml_dtypes' casts from bool copy the byte, so a ``.view(np.bool_)`` of
   uint8 data put with ``cast=True`` into bfloat16 or int4 stored 2, 255, inf or NaN.
C. A sub-byte or float6 byte that is no value of its type is refused whatever the target:
   the "numpy calls it safe" shortcut (into float32/float64/complex64/int32) and
   ``cast=True`` skipped the check.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import rpjrt


def _wrap(v: int, bits: int, signed: bool) -> int:
    m = 1 << bits
    v %= m
    return v - m if signed and v >= m >> 1 else v


INT_TYPES = [
    ("int8", 8, True), ("int16", 16, True), ("int32", 32, True), ("int64", 64, True),
    ("uint8", 8, False), ("uint16", 16, False), ("uint32", 32, False), ("uint64", 64, False),
    ("int4", 4, True), ("uint4", 4, False), ("int2", 2, True), ("uint2", 2, False),
]

VALUE_SETS = [
    [2**64 - 1, 1],
    [2**53 + 1, 2**64 - 1],
    [2**63 + 1, 0],
    [2**70 + 5, -3],
    [-(2**63) - 1, 7],
    [2**64 - 1],
    [2**200 + 9],
]


@pytest.mark.parametrize("name,bits,signed", INT_TYPES)
@pytest.mark.parametrize("values", VALUE_SETS, ids=lambda v: "v" + str(abs(hash(str(v))) % 1000))
def test_cast_true_ints_wrap_exactly(client: Any, name: str, bits: int, signed: bool, values: list[int]) -> None:
    want = [_wrap(v, bits, signed) for v in values]
    got = client.put(values, dtype=name, cast=True).to_numpy().astype(np.int64 if signed else np.uint64).tolist()
    assert got == want
    # Nested, as an object array, and with a float beside them (truncated as astype does).
    nested = client.put([[v] for v in values], dtype=name, cast=True).to_numpy().reshape(-1)
    assert nested.astype(np.int64 if signed else np.uint64).tolist() == want
    obj = client.put(np.array(values, dtype=object), dtype=name, cast=True).to_numpy()
    assert obj.astype(np.int64 if signed else np.uint64).tolist() == want
    mixed = client.put([*values, 1.5], dtype=name, cast=True).to_numpy()
    assert mixed.astype(np.int64 if signed else np.uint64).tolist() == [*want, 1]


def test_cast_true_fitting_ints_match_cast_false(client: Any) -> None:
    for values, name in [([2**64 - 1, 1], "uint64"), ([2**53 + 1, 2**64 - 1], "uint64"), ([2**63 - 1, -(2**63)], "int64")]:
        exact = client.put(values, dtype=name).tolist()
        assert client.put(values, dtype=name, cast=True).tolist() == exact == values


def test_cast_true_int_float_mix_keeps_ints(client: Any) -> None:
    assert client.put([2**53 + 1, 0.5], dtype="int64", cast=True).tolist() == [2**53 + 1, 0]
    # Into floats a huge int saturates as an overflowing float does (no bare OverflowError).
    got = client.put([2**2000, -(2**2000), 3], dtype="float32", cast=True).tolist()
    assert got == [float("inf"), float("-inf"), 3.0]
    assert client.put([2**64 - 1, 1], dtype="bool", cast=True).tolist() == [True, True]
    assert client.put([2**70, 0], dtype="bool", cast=True).tolist() == [True, False]


ALL_TARGETS = ["float32", "float64", "bfloat16", "float16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e4m3",
               "float8_e5m2", "int4", "int2", "uint4", "uint2", "int8", "uint8", "int32", "complex64", "bool"]


@pytest.mark.parametrize("target", ALL_TARGETS)
@pytest.mark.parametrize("cast", [False, True])
def test_bool_bytes_normalized_into_every_type(client: Any, target: str, cast: bool) -> None:
    x = np.array([0, 1, 2, 255, 128], np.uint8).view(np.bool_)

    def values(obj: Any) -> list[float]:
        return np.real(client.put(obj, dtype=target, cast=cast).to_numpy()).astype(np.float64).reshape(-1).tolist()

    assert values(x) == [0, 1, 1, 1, 1]
    # Strided and 0-d bools too.
    assert values(x[::2]) == [0, 1, 1]
    assert values(x[3:4].reshape(())) == [1.0]


def _float6_supported(client: Any) -> bool:
    try:
        client.put(np.zeros(1, np.uint8).view(ml_dtypes.float6_e2m3fn))
        return True
    except rpjrt.UnsupportedError:
        return False


@pytest.mark.parametrize("cast", [False, True])
def test_sub_byte_foreign_bytes_refused_into_every_target(client: Any, cast: bool) -> None:
    names = ["int4", "uint4", "int2", "uint2", "float4_e2m1fn"]
    if _float6_supported(client):
        names += ["float6_e2m3fn", "float6_e3m2fn"]
    targets = [None, "int8", "bfloat16", "float32", "int32", "float64", "complex64", "uint8", "int64", "float16"]
    for name in names:
        bad = np.array([0x01, 0x40], np.uint8).view(getattr(ml_dtypes, name))
        for target in targets:
            with pytest.raises(rpjrt.InvalidArgumentError, match=r"element 1 is the byte 0x40, which is no " + name):
                client.put(bad, dtype=target, cast=cast)
            # Non-contiguous too.
            wide = np.array([0x01, 0x00, 0x40, 0x00], np.uint8).view(getattr(ml_dtypes, name))[::2]
            with pytest.raises(rpjrt.InvalidArgumentError, match=r"element 1 is the byte 0x40"):
                client.put(wide, dtype=target, cast=cast)


@pytest.mark.parametrize("cast", [False, True])
def test_sub_byte_valid_bytes_still_convert(client: Any, cast: bool) -> None:
    # ml_dtypes' own bytes and the plugins' sign-extended ones are values.
    x = np.array([0x0E, 0xFE, 0x07, 0x08], np.uint8).view(ml_dtypes.int4)
    for target in ["float32", "int32", "float64", "int8"]:
        got = client.put(x, dtype=target, cast=cast).to_numpy().astype(np.int64).tolist()
        assert got == [-2, -2, 7, -8], target
    u = np.array([0x0F, 0x03], np.uint8).view(ml_dtypes.uint4)
    assert client.put(u, dtype="float32", cast=cast).tolist() == [15.0, 3.0]
