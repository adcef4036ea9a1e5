"""Host ingest: the element-type table, byte order and formats, the number conversion rule,
bool normalisation and huge (broadcast) inputs.

Each reproduction from the attack report is here as a regression test, on both plugins;
those that used to abort the process run in a subprocess.
"""

from __future__ import annotations

import array
import ctypes

import ml_dtypes
import numpy as np
import pytest

import rpjrt
from rpjrt import _rpjrt

from .conftest import run_python

# DLPack's DLDataTypeCode (dlpack.h 1.1) and XLA FFI's XLA_FFI_DataType (c_api.h), written
# out independently of the Rust table they check.
DLPACK = {
    "bool": (6, 8), "int8": (0, 8), "int16": (0, 16), "int32": (0, 32), "int64": (0, 64),
    "uint8": (1, 8), "uint16": (1, 16), "uint32": (1, 32), "uint64": (1, 64),
    "float16": (2, 16), "float32": (2, 32), "float64": (2, 64), "bfloat16": (4, 16),
    "complex64": (5, 64), "complex128": (5, 128), "float8_e3m4": (7, 8),
    "float8_e4m3": (8, 8), "float8_e4m3b11fnuz": (9, 8), "float8_e4m3fn": (10, 8),
    "float8_e4m3fnuz": (11, 8), "float8_e5m2": (12, 8), "float8_e5m2fnuz": (13, 8),
    "float8_e8m0fnu": (14, 8), "float6_e2m3fn": (15, 6), "float6_e3m2fn": (16, 6),
    "float4_e2m1fn": (17, 4), "int4": (0, 4), "uint4": (1, 4), "int2": (0, 2),
    "uint2": (1, 2), "int1": (0, 1), "uint1": (1, 1),
}  # fmt: skip
FFI = {
    "bool": 1, "int8": 2, "int16": 3, "int32": 4, "int64": 5, "uint8": 6, "uint16": 7,
    "uint32": 8, "uint64": 9, "float16": 10, "float32": 11, "float64": 12, "complex64": 15,
    "bfloat16": 16, "token": 17, "complex128": 18, "float8_e5m2": 19, "float8_e4m3fn": 20,
    "int4": 21, "uint4": 22, "float8_e4m3b11fnuz": 23, "float8_e5m2fnuz": 24,
    "float8_e4m3fnuz": 25, "int2": 26, "uint2": 27, "float8_e4m3": 28, "float8_e3m4": 29,
    "int1": 30, "uint1": 31, "float4_e2m1fn": 32, "float8_e8m0fnu": 33,
}  # fmt: skip


def test_rust_python_dlpack_and_ffi_codes_agree() -> None:
    rows = _rpjrt._element_types()
    assert len(rows) == len(rpjrt.dtypes) == 33
    for row, d in zip(rows, rpjrt.dtypes):
        name, code, bits, itemsize, kind, fmt, aliases, dl, ffi = row
        assert (d.name, d.code, d.bits, d.itemsize, d.kind, d.format) == (
            name, code, bits, itemsize, kind, fmt,
        )  # fmt: skip
        assert d.dlpack == dl and d.ffi_code == ffi
        assert (dl[:2] if dl else None) == DLPACK.get(name), name
        assert dl is None or dl[2] == 1
        assert ffi == FFI.get(name), name
        for a in aliases:
            assert rpjrt.dtype(a) is d, a
        if name != "token":
            nd = np.dtype(getattr(ml_dtypes, name)) if fmt is None else np.dtype(name)
            assert nd.itemsize == itemsize, name
            assert rpjrt.dtype(nd) is d
            if dl is not None and bits >= 8 and name != "bool":
                assert bits == 8 * nd.itemsize or name.startswith("float6"), name
    # float6 is six bits wide (stored one per byte).
    assert rpjrt.float6_e2m3fn.bits == 6 and rpjrt.float6_e2m3fn.itemsize == 1


@pytest.mark.parametrize(
    "name,expected",
    [
        ("i8", "int64"),
        ("<i8", "int64"),
        ("=i4", "int32"),
        ("|b1", "bool"),
        ("|u1", "uint8"),
        ("<u8", "uint64"),
        ("s8", "int8"),
        ("int8", "int8"),
        ("float", "float64"),
        ("f8", "float64"),
        ("F32", "float32"),
        ("F", "complex64"),
        ("bf16", "bfloat16"),
    ],
)
def test_names_follow_numpy_for_numpy_codes(name: str, expected: str) -> None:
    assert rpjrt.dtype(name) is rpjrt.dtype(expected)
    if not name.startswith(("s", "F3", "bf")) and name not in ("int8",):
        assert np.dtype(name) == rpjrt.dtype(expected).numpy  # numpy agrees


@pytest.mark.parametrize("name", ["u1", "u2", "u4", "u8", "f16"])
def test_ambiguous_names_are_refused(name: str) -> None:
    with pytest.raises(rpjrt.InvalidArgumentError, match="ambiguous"):
        rpjrt.dtype(name)


@pytest.mark.parametrize("name", ["i16", "i32", "i64", ">f4"])
def test_misleading_names_are_refused(name: str) -> None:
    with pytest.raises(rpjrt.InvalidArgumentError):
        rpjrt.dtype(name)


# --- byte order and formats of buffer-protocol objects (issue 8 item 10) ---------------


def test_big_endian_memoryview_is_converted(client: rpjrt.Client) -> None:
    mv = memoryview(np.array([1, 2, 3], ">i4"))
    assert mv.format == ">i"
    for kw in ({}, {"dtype": "int32"}, {"copy": None}):
        b = client.put(mv, **kw)
        assert b.dtype == rpjrt.int32 and b.to_numpy().tolist() == [1, 2, 3], kw
    c = client.put(memoryview(np.array([1 + 2j, -3j], ">c8")))
    assert c.to_numpy().tolist() == [1 + 2j, -3j]


def test_big_endian_memoryview_refuses_copy_false(client: rpjrt.Client) -> None:
    with pytest.raises(rpjrt.InvalidArgumentError, match="converted"):
        client.put(memoryview(np.array([1, 2], ">i4")), copy=False)


def test_other_formats_are_not_reinterpreted(client: rpjrt.Client) -> None:
    with pytest.raises(rpjrt.InvalidArgumentError, match="only raw bytes"):
        client.put(memoryview(np.array([1.0, 2.0], ">d")), dtype="float32")
    with pytest.raises(rpjrt.InvalidArgumentError, match="only raw bytes"):
        client.put(memoryview(np.array([1.0, 2.0])), dtype="float32")
    # raw bytes are reinterpreted, in any of the three byte formats
    raw = np.array([1.5, -2.0], "<f4").tobytes()
    for fmt in ("B", "b", "c"):
        b = client.put(memoryview(raw).cast(fmt), dtype="float32")
        assert b.to_numpy().tolist() == [1.5, -2.0]


def test_ctypes_arrays_honour_byte_order(client: rpjrt.Client) -> None:
    be = (ctypes.c_int32.__ctype_be__ * 3)(1, -2, 3)  # type: ignore[attr-defined]
    le = (ctypes.c_int32.__ctype_le__ * 3)(1, -2, 3)  # type: ignore[attr-defined]
    bd = (ctypes.c_double.__ctype_be__ * 2)(0.5, 4.0)  # type: ignore[attr-defined]
    assert client.put(be).to_numpy().tolist() == [1, -2, 3]
    assert client.put(be, dtype="int32").to_numpy().tolist() == [1, -2, 3]
    assert client.put(le).to_numpy().tolist() == [1, -2, 3]
    assert client.put(bd).to_numpy().tolist() == [0.5, 4.0]
    with pytest.raises(rpjrt.InvalidArgumentError, match="only raw bytes"):
        client.put(bd, dtype="float32")


def test_strided_big_endian(client: rpjrt.Client) -> None:
    a = np.arange(24, dtype=">f8").reshape(4, 6)[::-1, ::2]
    b = client.put(memoryview(a))
    np.testing.assert_array_equal(b.to_numpy(), a.astype("<f8"))


# --- bool bytes other than 0 and 1 (issue 8 item 13) ------------------------------------

AND_TRUE = """
func.func public @main(%a: tensor<4xi1>) -> tensor<4xi1> {
  %t = stablehlo.constant dense<true> : tensor<4xi1>
  %0 = stablehlo.and %a, %t : tensor<4xi1>
  return %0 : tensor<4xi1>
}
"""


@pytest.mark.parametrize("copy", [True, None])
def test_bool_bytes_are_normalised(client: rpjrt.Client, copy: bool | None) -> None:
    raw = np.array([0, 1, 2, 255], np.uint8)
    x = raw.view(np.bool_)
    b = client.put(x, copy=copy)
    assert b.to_host().tobytes() == b"\x00\x01\x01\x01"
    (y,) = client.compile(AND_TRUE)(b)
    assert y.to_numpy().tolist() == [False, True, True, True]
    (z,) = client.compile(AND_TRUE)(x)  # as an execute argument
    assert z.to_numpy().tolist() == [False, True, True, True]
    assert raw.tolist() == [0, 1, 2, 255]  # the caller's memory is not written


def test_bool_bytes_refuse_copy_false(client: rpjrt.Client) -> None:
    x = np.array([0, 2, 1, 1] * 16, np.uint8).view(np.bool_)
    with pytest.raises(rpjrt.InvalidArgumentError, match="converted"):
        client.put(x, copy=False)


# --- one conversion rule for Python numbers (issue 8 item 11) --------------------------


@pytest.mark.parametrize(
    "values,dtype",
    [
        ([100, -100, 8], "int4"),
        ([16, -1], "uint4"),
        ([1.7], "int4"),
        ([2.0], "int8"),
        ([1e6], "float8_e4m3fn"),
        ([1e6], "float4_e2m1fn"),  # would saturate to 6.0
        ([8.0], "float6_e2m3fn"),  # would saturate to 7.5
        ([-1.0], "float8_e8m0fnu"),  # would become nan
        ([1e300], "bfloat16"),
        ([1e300], "float32"),
        ([70000], "float16"),
        ([128], "int8"),
        ([2], "bool"),
        ([1.5], "bool"),
        ([1j], "float32"),
        ([2**70], "float8_e5m2"),
        ([4], "uint2"),
    ],
)
def test_out_of_range_numbers_are_refused(
    client: rpjrt.Client, values: list[object], dtype: str
) -> None:
    with pytest.raises(rpjrt.InvalidArgumentError, match="cast=True"):
        client.put(values, dtype=dtype)


@pytest.mark.parametrize(
    "values,dtype",
    [([100, -100, 8], "int4"), ([16, -1], "uint4"), ([1.7], "int4"), ([1e300], "bfloat16")],
)
def test_cast_converts_as_numpy_does(client: rpjrt.Client, values: list[object], dtype: str) -> None:
    nd = rpjrt.dtype(dtype).numpy
    with np.errstate(all="ignore"):
        want = np.asarray(values).astype(nd)
    got = client.put(values, dtype=dtype, cast=True).to_numpy()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "values,dtype",
    [
        ([-8, 7, 0], "int4"),
        ([0, 15], "uint4"),
        ([448.0, -448.0, 0.1], "float8_e4m3fn"),
        ([3.0e38, 1.0], "bfloat16"),
        ([True, False, 1, 0], "bool"),
        ([1, 2], "float8_e5m2"),
        ([-2, 1], "int2"),
    ],
)
def test_representable_numbers_are_stored(
    client: rpjrt.Client, values: list[object], dtype: str
) -> None:
    nd = rpjrt.dtype(dtype).numpy
    got = client.put(values, dtype=dtype).to_numpy()
    np.testing.assert_array_equal(got, np.asarray(values).astype(nd))


BF16_DOUBLE = """
func.func public @main(%a: tensor<2xbf16>) -> tensor<2xbf16> {
  %0 = stablehlo.add %a, %a : tensor<2xbf16>
  return %0 : tensor<2xbf16>
}
"""
I4_ID = """
func.func public @main(%a: tensor<2xi4>) -> tensor<2xi4> {
  return %a : tensor<2xi4>
}
"""


def test_weakly_typed_arguments_follow_the_rule(client: rpjrt.Client) -> None:
    exe = client.compile(BF16_DOUBLE)
    with pytest.raises(rpjrt.InvalidArgumentError, match="argument 0.*overflows bfloat16"):
        exe([1e300, 1.0])
    (y,) = exe([1.5, -2.0])
    assert y.to_numpy().astype(np.float32).tolist() == [3.0, -4.0]
    exe4 = client.compile(I4_ID)
    with pytest.raises(rpjrt.InvalidArgumentError, match="argument 0.*does not fit in int4"):
        exe4([100, 1])
    with pytest.raises(rpjrt.InvalidArgumentError, match="argument 0"):
        exe4([1.7, 1])
    (z,) = exe4([-8, 7])
    assert z.to_numpy().astype(np.int8).tolist() == [-8, 7]


# --- huge inputs: MemoryError, never an abort (issue 8 item 1) -------------------------

HUGE = """
import sys, numpy as np, rpjrt
c = rpjrt.Client(sys.argv[1] if len(sys.argv) > 1 else {path!r})
a = np.broadcast_to(np.float32(1), (2**40,))
try:
    {action}
except MemoryError as e:
    assert isinstance(e, rpjrt.ResourceExhaustedError), type(e)
    assert "bytes" in str(e), e
    print("MEMORY-ERROR", e)
else:
    print("NO ERROR")
"""

ACTIONS = {
    "put": "c.put(a)",
    "put_copy_none": "c.put(a, copy=None)",
    # Arguments are converted before their shapes are checked against the program's.
    # (A program over tensor<2^40xf32> itself crashes the 0.115 plugin's compiler.)
    "execute": (
        "c.compile('func.func public @main(%x: tensor<8xf32>, %y: tensor<8xf32>) -> "
        "tensor<8xf32> {\\n %0 = stablehlo.add %x, %y : tensor<8xf32>\\n return %0 : "
        "tensor<8xf32>\\n}')(a, a)"
    ),
    "from_dlpack": "c.from_dlpack(a)",
    "put_2d": "c.put(np.broadcast_to(np.float64(1), (2**20, 2**21)))",
}


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_huge_broadcasts_raise_memory_error(plugin_path: str, action: str) -> None:
    code = HUGE.format(path=plugin_path, action=ACTIONS[action])
    r = run_python(code, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "MEMORY-ERROR" in r.stdout, (r.stdout, r.stderr[-2000:])


def test_array_module_still_works_without_numpy_paths(client: rpjrt.Client) -> None:
    b = client.put(array.array("d", [1.0, 2.0]))
    assert b.to_host().tolist() == [1.0, 2.0]


def test_resource_exhausted_is_a_memory_error() -> None:
    assert issubclass(rpjrt.ResourceExhaustedError, MemoryError)
    assert issubclass(rpjrt.ResourceExhaustedError, rpjrt.Error)
    assert rpjrt.ResourceExhaustedError("x").code == "RESOURCE_EXHAUSTED"


def test_dlpack_negative_and_zero_strides(client: rpjrt.Client) -> None:
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[::-1, ::2]
    np.testing.assert_array_equal(client.from_dlpack(a).to_numpy(), a)
    z = np.broadcast_to(np.arange(3, dtype=np.int16), (4, 3))
    np.testing.assert_array_equal(client.from_dlpack(z).to_numpy(), z)
    with pytest.raises(rpjrt.InvalidArgumentError, match="copy=False"):
        client.from_dlpack(a, copy=False)
