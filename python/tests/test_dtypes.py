from __future__ import annotations

import copy
import pickle

import ml_dtypes
import numpy as np
import pytest

import rpjrt
from rpjrt import _dtypes

# (name, PJRT code, bits, host itemsize) -- codes from docs/PJRT-FACTS.md "Element-type codes".
TABLE = [
    ("bool", 1, 8, 1),
    ("int8", 2, 8, 1),
    ("int16", 3, 16, 2),
    ("int32", 4, 32, 4),
    ("int64", 5, 64, 8),
    ("uint8", 6, 8, 1),
    ("uint16", 7, 16, 2),
    ("uint32", 8, 32, 4),
    ("uint64", 9, 64, 8),
    ("float16", 10, 16, 2),
    ("float32", 11, 32, 4),
    ("float64", 12, 64, 8),
    ("bfloat16", 13, 16, 2),
    ("complex64", 14, 64, 8),
    ("complex128", 15, 128, 16),
    ("float8_e5m2", 16, 8, 1),
    ("float8_e4m3fn", 17, 8, 1),
    ("float8_e4m3b11fnuz", 18, 8, 1),
    ("float8_e5m2fnuz", 19, 8, 1),
    ("float8_e4m3fnuz", 20, 8, 1),
    ("int4", 21, 4, 1),
    ("uint4", 22, 4, 1),
    ("token", 23, 0, 0),
    ("int2", 24, 2, 1),
    ("uint2", 25, 2, 1),
    ("float8_e4m3", 26, 8, 1),
    ("float8_e3m4", 27, 8, 1),
    ("float8_e8m0fnu", 28, 8, 1),
    ("float4_e2m1fn", 29, 4, 1),
    ("int1", 30, 1, 1),
    ("uint1", 31, 1, 1),
    ("float6_e2m3fn", 32, 6, 1),
    ("float6_e3m2fn", 33, 6, 1),
]


def test_table_is_complete_and_in_code_order() -> None:
    assert [(d.name, d.code, d.bits, d.itemsize) for d in rpjrt.dtypes] == TABLE


@pytest.mark.parametrize("name,code,bits,itemsize", TABLE)
def test_each_dtype(name: str, code: int, bits: int, itemsize: int) -> None:
    d = rpjrt.dtype(name)
    assert d is rpjrt.from_code(code)
    assert d.name == name == str(d)
    assert repr(d) == f"rpjrt.dtype({name!r})"
    assert (d.code, d.bits, d.itemsize) == (code, bits, itemsize)
    assert d == name and name == d
    assert hash(d) == hash(name)
    assert pickle.loads(pickle.dumps(d)) is d
    assert copy.deepcopy(d) is d
    exported = "bool_" if name == "bool" else name
    assert getattr(rpjrt, exported) is d


@pytest.mark.parametrize("name,code,bits,itemsize", [t for t in TABLE if t[0] != "token"])
def test_numpy_and_ml_dtypes_equality(name: str, code: int, bits: int, itemsize: int) -> None:
    d = rpjrt.dtype(name)
    nd = np.dtype(getattr(ml_dtypes, name)) if d.format is None else np.dtype(name)
    assert d.numpy == nd
    assert d == nd and nd == d
    assert d == nd.type and nd.type == d
    assert rpjrt.dtype(nd) is d
    assert rpjrt.dtype(nd.type) is d
    assert np.dtype(d) == nd  # numpy reads the .dtype attribute
    assert np.zeros(2, d).dtype == nd
    assert nd.itemsize == d.itemsize


def test_inequality() -> None:
    assert rpjrt.float32 != rpjrt.float64
    assert rpjrt.float32 != "float64"
    assert rpjrt.float32 != np.float64
    assert rpjrt.float32 != 11  # a code is not a dtype
    assert rpjrt.float32 != object()
    assert rpjrt.int4 != rpjrt.uint4


def test_aliases() -> None:
    assert rpjrt.dtype("f32") is rpjrt.float32
    assert rpjrt.dtype("F32") is rpjrt.float32
    assert rpjrt.dtype("bf16") is rpjrt.bfloat16
    assert rpjrt.dtype("pred") is rpjrt.bool_
    assert rpjrt.dtype("s4") is rpjrt.int4
    assert rpjrt.dtype("f4") is rpjrt.float32  # numpy's meaning
    assert rpjrt.dtype(float) is rpjrt.float64
    assert rpjrt.dtype(bool) is rpjrt.bool_
    assert rpjrt.dtype(rpjrt.float16) is rpjrt.float16
    assert rpjrt.dtype(np.zeros(2, np.int16)) is rpjrt.int16  # an array's element type
    assert rpjrt.float32 == "f32"


@pytest.mark.parametrize("alias", ["u1", "u2", "u4", "u8"])
def test_ambiguous_short_names_are_refused(alias: str) -> None:
    with pytest.raises(rpjrt.InvalidArgumentError, match="ambiguous"):
        rpjrt.dtype(alias)


@pytest.mark.parametrize("bad", ["float128", "", "int3", np.dtype(">f4"), np.dtype("U3"), 11, None])
def test_unknown_dtypes_raise(bad: object) -> None:
    with pytest.raises(rpjrt.InvalidArgumentError):
        rpjrt.dtype(bad)


def test_from_code_unknown() -> None:
    with pytest.raises(rpjrt.InvalidArgumentError, match="unknown PJRT buffer type code 99"):
        rpjrt.from_code(99)
    with pytest.raises(rpjrt.InvalidArgumentError):
        rpjrt.from_code(0)


def test_immutable() -> None:
    with pytest.raises(AttributeError):
        rpjrt.float32.name = "x"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del rpjrt.float32.code  # type: ignore[misc]


def test_is_a_type_like_numpy() -> None:
    assert isinstance(rpjrt.float32, rpjrt.dtype)
    assert rpjrt.dtype is rpjrt.DType
    assert rpjrt.float32.is_floating and not rpjrt.float32.is_integer
    assert rpjrt.int4.is_integer and rpjrt.complex64.is_complex


@pytest.mark.parametrize(
    "fmt,itemsize,name",
    [
        ("f", 4, "float32"),
        ("<f", 4, "float32"),
        ("=d", 8, "float64"),
        ("e", 2, "float16"),
        ("?", 1, "bool"),
        ("b", 1, "int8"),
        ("B", 1, "uint8"),
        ("h", 2, "int16"),
        ("i", 4, "int32"),
        ("l", 8, "int64"),
        ("L", 8, "uint64"),
        ("q", 8, "int64"),
        ("Zf", 8, "complex64"),
        ("Zd", 16, "complex128"),
        ("n", 8, "int64"),
    ],
)
def test_from_format(fmt: str, itemsize: int, name: str) -> None:
    assert _dtypes.from_format(fmt, itemsize) is rpjrt.dtype(name)


@pytest.mark.parametrize("fmt,itemsize", [(">f", 4), ("x", 1), ("ff", 8), ("T{f}", 4), ("f", 8)])
def test_from_format_unknown(fmt: str, itemsize: int) -> None:
    assert _dtypes.from_format(fmt, itemsize) is None


def test_token_has_no_numpy_dtype() -> None:
    with pytest.raises(rpjrt.UnsupportedError):
        rpjrt.token.numpy


def test_memoryview_formats_match() -> None:
    import array

    for code, name in [("f", "float32"), ("d", "float64"), ("b", "int8"), ("H", "uint16")]:
        mv = memoryview(array.array(code, [0]))
        assert _dtypes.from_format(mv.format, mv.itemsize) == name
