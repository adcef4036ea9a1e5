"""Regressions from attack round 21 (numbers), each checked bit for bit against numpy and
ml_dtypes.

- F-1: the checked conversion (``rpjrt_npy::scalars``) replaced every NaN by the target
  type's default NaN, even float64 into float64: a Python float's payload was lost by
  ``put``, lists, ``dtype=``, executable arguments and ``Session.bind``, and numpy arrays
  converted with ``dtype=`` (float64 into float32, float32 into float16...) lost theirs.
  A NaN now converts as numpy's ``astype`` converts it, for every pair of float and complex
  types: the same bits into the same type, the payload's top bits where numpy keeps them
  (with the quiet bit where the processor's float32/float64 conversions set it), the
  type's own NaN (with the sign) for bfloat16 and the float8 types.
- F-2: a numpy ``longdouble`` / ``clongdouble`` inside a list (or an object array, or an
  argument) was read through ``float()``/``complex()``: 1e4000 became inf. It is refused
  now, naming its dtype, as the bare scalar is.
- F-4: numpy and ml_dtypes scalars inside lists lost their dtype: ml_dtypes ones were
  refused as "not numbers", ``[np.int8(1)]`` became int64, ``[np.uint64(2**64-1)]`` was
  refused as not fitting int64. Such a list now takes the dtype ``numpy.asarray`` gives it.
"""

from __future__ import annotations

import struct
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import rpjrt

FLOATS = [
    "float16",
    "float32",
    "float64",
    "bfloat16",
    "float8_e5m2",
    "float8_e4m3",
    "float8_e3m4",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "float8_e4m3b11fnuz",
    "float8_e8m0fnu",
]
COMPLEX = ["complex64", "complex128"]
WITH_NAN = FLOATS + COMPLEX
NO_NAN = ["float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn"]
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def npdt(name: str) -> np.dtype:
    return np.dtype(rpjrt.dtype(name).numpy)


def bits(a: Any) -> bytes:
    return np.ascontiguousarray(np.asarray(a)).reshape(-1).view(np.uint8).tobytes()


def _payload_nans(width: int) -> list[int]:
    """NaN bit patterns of a float32 (width 4) or float64 (8): signalling and quiet, with
    payloads in the bits every narrower type keeps and in the bits they drop."""
    man = 23 if width == 4 else 52
    exp = (0xFF if width == 4 else 0x7FF) << man
    quiet = 1 << (man - 1)
    rng = np.random.default_rng(21)
    payloads = [1, 2, 0x123, quiet, quiet | 1, quiet | 0x123, (1 << man) - 1, quiet >> 1]
    payloads += [1 << k for k in range(0, man, 3)]
    payloads += [int(x) % (1 << man) or 1 for x in rng.integers(1, 1 << 62, 12)]
    out = []
    for p in payloads:
        for sign in (0, 1 << (8 * width - 1)):
            out.append(sign | exp | p)
    return out


def nans(name: str) -> np.ndarray:
    """Every NaN of a 1- or 2-byte float type; a spread of them for the wider ones; for
    complex types, NaN parts of every such kind next to numbers."""
    d = npdt(name)
    if d.kind == "c":
        part = np.dtype(np.float32 if d.itemsize == 8 else np.float64)
        p = nans(part.name)
        out = np.empty(2 * len(p), d)
        out.real[: len(p)] = p
        out.imag[: len(p)] = np.roll(p, 1)
        out.real[len(p) :] = 1.5
        out.imag[len(p) :] = p
        return out
    if d.itemsize <= 2:
        every = np.arange(1 << (8 * d.itemsize), dtype=UINT[d.itemsize])
        return every.view(d)[np.isnan(every.view(d).astype(np.float32))]
    return np.array(_payload_nans(d.itemsize), UINT[d.itemsize]).view(d)


def numpy_convert(a: np.ndarray, dst: str) -> np.ndarray:
    with np.errstate(all="ignore"):
        return a.astype(npdt(dst))


def pairs() -> list[tuple[str, str]]:
    # Complex into a real type is refused by the rule whatever the values.
    return [(s, d) for s in WITH_NAN for d in WITH_NAN if not (s in COMPLEX and d not in COMPLEX)]


# --------------------------------------------------------------------------------------
# F-1: NaN payloads and signs convert as numpy's astype converts them
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("src", WITH_NAN)
def test_f1_nan_arrays_with_dtype_match_numpy(client: rpjrt.Client, src: str) -> None:
    a = nans(src)
    for s, dst in pairs():
        if s != src:
            continue
        got = client.put(a, dtype=dst).to_numpy()
        want = numpy_convert(a, dst)
        assert got.dtype == want.dtype, (src, dst)
        assert bits(got) == bits(want), (src, dst)
        # Fortran order, a strided view and a byte-swapped copy take the same way.
        m = a[: len(a) // 2 * 2].reshape(2, -1)
        assert bits(client.put(np.asfortranarray(m), dtype=dst).to_numpy()) == bits(
            numpy_convert(m, dst)
        ), (src, dst)
        if a.dtype.type.__module__ == "numpy" and a.dtype.itemsize > 1:
            swapped = a.astype(a.dtype.newbyteorder())
            assert bits(client.put(swapped, dtype=dst).to_numpy()) == bits(want), (src, dst)


@pytest.mark.parametrize("src", WITH_NAN)
def test_f1_nan_scalars_in_lists_match_numpy(client: rpjrt.Client, src: str) -> None:
    a = nans(src)
    items = list(a)  # numpy / ml_dtypes scalars
    # Without dtype= the list keeps the scalars' type and their bits.
    got = client.put(items).to_numpy()
    assert got.dtype == a.dtype and bits(got) == bits(a), src
    for s, dst in pairs():
        if s != src:
            continue
        want = numpy_convert(a, dst)
        for obj in (items, tuple(items), np.array(items + [a[0]], dtype=object)[:-1]):
            got = client.put(obj, dtype=dst).to_numpy()
            assert got.dtype == want.dtype and bits(got) == bits(want), (src, dst, type(obj))
        # numpy's np.array(items, dtype=) converts each item from its own type, too.
        with np.errstate(all="ignore"):
            assert bits(np.array(items, dtype=npdt(dst))) == bits(want)
        half = len(items) // 2
        nested = [items[:half], items[half : 2 * half]]
        got = client.put(nested, dtype=dst).to_numpy()
        assert bits(got) == bits(numpy_convert(a[: 2 * half].reshape(2, half), dst)), (src, dst)


@pytest.mark.parametrize("dst", [None] + WITH_NAN)
def test_f1_python_float_nans_match_numpy(client: rpjrt.Client, dst: str | None) -> None:
    raw = _payload_nans(8)
    xs = [struct.unpack("<d", struct.pack("<Q", b))[0] for b in raw]
    ref = np.array(raw, np.uint64).view(np.float64)
    want = ref if dst is None else numpy_convert(ref, dst)
    kw = {} if dst is None else {"dtype": dst}
    assert bits(client.put(xs, **kw).to_numpy()) == bits(want)
    for i in (0, 3, 9, len(xs) - 1):
        got = client.put(xs[i], **kw).to_numpy()
        assert got.shape == () and bits(got) == bits(want[i]), (dst, hex(raw[i]))
        with np.errstate(all="ignore"):
            assert bits(np.array(xs[i], dtype=want.dtype)) == bits(want[i])
    if dst is not None and npdt(dst).kind == "c":
        zs = [complex(x, y) for x, y in zip(xs, xs[1:] + xs[:1])]
        zref = np.array(zs, np.complex128)
        zref.real = ref
        zref.imag = np.roll(ref, -1)
        assert bits(client.put(zs, **kw).to_numpy()) == bits(numpy_convert(zref, dst))


@pytest.mark.parametrize("dst", NO_NAN)
def test_f1_nan_into_types_without_nan_is_refused(client: rpjrt.Client, dst: str) -> None:
    for src in ["float64", "float32", "float16", "bfloat16", "float8_e4m3fn"]:
        a = nans(src)[:3]
        for obj in (a, list(a), float("nan")):
            with pytest.raises(rpjrt.InvalidArgumentError, match=f"{dst}, which has no NaN"):
                client.put(obj, dtype=dst)


def _identity(client: rpjrt.Client, t: str, shape: str = "") -> Any:
    ty = f"tensor<{shape}{t}>"
    return client.compile(f"func.func @main(%a: {ty}) -> {ty} {{ return %a : {ty} }}")


def test_f1_arguments_and_slots_keep_payloads(client: rpjrt.Client) -> None:
    raw = [0x7FF8000000000123, 0xFFF0000000000001, 0x7FFC000000000123, 0x7FF4000000000000]
    xs = [struct.unpack("<d", struct.pack("<Q", b))[0] for b in raw]
    ref = np.array(raw, np.uint64).view(np.float64)
    for t, name in [("f64", "float64"), ("f32", "float32"), ("f16", "float16"), ("bf16", "bfloat16")]:
        want = numpy_convert(ref, name)
        exe = _identity(client, t)
        for i, x in enumerate(xs):
            (out,) = exe(x)
            assert bits(out.to_numpy()) == bits(want[i]), (t, hex(raw[i]))
        (out,) = _identity(client, t, "4x")(xs)
        assert bits(out.to_numpy()) == bits(want), t
        # numpy scalars in a list argument convert from their own type.
        f32 = np.array([0x7F800001, 0xFFC12345, 0x7FA00000, 0x7F812000], np.uint32).view(np.float32)
        (out,) = _identity(client, t, "4x")(list(f32))
        assert bits(out.to_numpy()) == bits(numpy_convert(f32, name)), t
    (out,) = _identity(client, "f64")(np.float64(xs[0]))
    assert bits(out.to_numpy()) == bits(ref[0])
    with rpjrt.Session(client) as session:
        for i, x in enumerate(xs):
            session.bind("w", x)
            assert bits(session.fetch("w")) == bits(ref[i])
        session.bind("v", xs)
        assert bits(session.fetch("v")) == bits(ref)


def test_f1_cast_true_and_numpy_scalars_agree(client: rpjrt.Client) -> None:
    a = nans("float64")
    for dst in ["float32", "float16", "complex64", "bfloat16"]:
        checked = client.put(a, dtype=dst).to_numpy()
        cast = client.put(a, dtype=dst, cast=True).to_numpy()
        assert bits(checked) == bits(cast) == bits(numpy_convert(a, dst)), dst
    s = nans("float32")[0]
    for dst in ["float32", "float64", "float16"]:
        assert bits(client.put(s, dtype=dst).to_numpy()) == bits(numpy_convert(np.array(s), dst))


# --------------------------------------------------------------------------------------
# F-2: longdouble / clongdouble items are refused as the bare scalar is
# --------------------------------------------------------------------------------------

LONG = [np.longdouble("1e4000"), np.longdouble("-1e4000"), np.longdouble("1e-4000"), np.longdouble(1.5)]
CLONG = [np.clongdouble(np.longdouble("1e4000")) + 1j, np.clongdouble(1 + 2j)]


def _long_known() -> bool:
    """Whether rpjrt has longdouble's dtype (where longdouble is float64)."""
    try:
        rpjrt.dtype(np.dtype(np.longdouble))
        return True
    except rpjrt.InvalidArgumentError:
        return False


def test_f2_longdouble_items_are_refused_like_the_bare_scalar(client: rpjrt.Client) -> None:
    exe = _identity(client, "f64", "2x")
    cexe = _identity(client, "complex<f64>", "2x")
    for v, run in [(x, exe) for x in LONG] + [(x, cexe) for x in CLONG]:
        name = np.asarray(v).dtype.name
        if _long_known():  # longdouble is float64 here: it converts as numpy does
            assert bits(client.put([v, v]).to_numpy()) == bits(np.asarray([v, v]))
            continue
        with pytest.raises(rpjrt.InvalidArgumentError, match=f"numpy dtype {name} has no PJRT equivalent"):
            client.put(v)  # the bare scalar
        pattern = f"numpy dtype {name} has no PJRT equivalent"
        for obj, kw in [
            ([v], {}),
            ([v, v], {"dtype": "float64"}),
            ([1.0, v], {"dtype": "complex128"}),
            ([[1.0], [v]], {}),
            ((v,), {"dtype": "float32"}),
            ([v], {"dtype": "float64", "cast": True}),
            (np.array([v, 1.0], dtype=object), {"dtype": "float64"}),
            (np.array([[v]], dtype=object), {"dtype": "complex128"}),
        ]:
            with pytest.raises(rpjrt.InvalidArgumentError, match=pattern):
                client.put(obj, **kw)
        with pytest.raises(rpjrt.InvalidArgumentError, match="argument 0: .*" + pattern):
            run([v, v])
        with rpjrt.Session(client) as session:
            with pytest.raises(rpjrt.InvalidArgumentError, match=pattern):
                session.bind("t", [v, v])


# --------------------------------------------------------------------------------------
# F-4: numpy and ml_dtypes scalars in lists keep their dtype, as numpy.asarray does
# --------------------------------------------------------------------------------------

md = ml_dtypes
TYPED_LISTS: list[Any] = [
    [np.float16(1)],
    [np.float16(1.5), np.float16(-2)],
    [np.int8(1), np.int8(2)],
    [np.int8(-128), np.int8(127)],
    [np.uint64(2**64 - 1)],
    [np.uint64(2**64 - 1), np.uint64(0)],
    [np.uint32(2**32 - 1)],
    [np.int16(-5)],
    [np.bool_(True), np.bool_(False)],
    [np.float32(0.1), np.float32(2)],
    [np.complex64(1 + 2j)],
    [md.bfloat16(1.5), md.bfloat16(2)],
    [md.float8_e4m3fn(1), md.float8_e4m3fn(-448)],
    [md.float8_e5m2(3), md.float8_e4m3b11fnuz(1)],
    [md.int4(3), md.int4(-8)],
    [md.uint4(15)],
    [md.int2(-2), md.int2(1)],
    [md.uint2(3)],
    [md.float4_e2m1fn(1.5)],
    [md.float6_e2m3fn(1.25)],
    [md.float6_e3m2fn(-3)],
    [md.float8_e8m0fnu(4)],
    [md.float8_e3m4(1.5), md.float8_e4m3(2)],
    # Mixed: promoted as numpy promotes.
    [np.int8(1), np.float16(2)],
    [np.int8(1), np.uint8(2)],
    [np.uint64(2**64 - 1), np.int64(-1)],
    [np.int64(5), np.int8(-1), np.uint64(7)],
    [np.float16(1), np.int16(1)],
    [md.bfloat16(1), np.float16(1)],
    [md.bfloat16(1), md.float8_e4m3fn(1)],
    [md.int4(1), np.int8(1)],
    [md.int4(1), md.uint4(1)],
    [md.bfloat16(1), np.float32(1)],
    [md.float8_e4m3fn(1), np.int8(100)],
    [np.complex64(1), np.float64(1)],
    [np.int8(1), True],
    [np.float16(1), True],
    # With Python numbers (numpy reads them as bool, int64/uint64, float64, complex128).
    [np.int8(1), 2],
    [np.int8(1), 300],
    [np.float16(1), 2.5],
    [np.float32(1), 2],
    [np.bool_(True), 1],
    [md.bfloat16(1.5), 1],
    [md.bfloat16(1), 1.0],
    [np.int8(1), 2**63],
    [np.float32(1), 1j],
    [md.float8_e4m3fn(1), 1],
    [np.float64(1e300), 1],
    # Nested lists and tuples.
    [(np.int8(1), np.int8(2)), [np.int8(3), np.int8(4)]],
    [[md.bfloat16(1)], [md.bfloat16(2)]],
    ((np.uint16(1), np.uint16(65535)),),
    [[np.float16(1), 2.0], [3.0, np.float16(4)]],
]


def _has_type(client: rpjrt.Client, name: str) -> bool:
    try:
        client.put(np.zeros(1, np.uint8).view(npdt(name)))
    except rpjrt.UnsupportedError:  # PJRT 0.81 predates the float6 types
        return False
    return True


@pytest.mark.parametrize("i", range(len(TYPED_LISTS)))
def test_f4_typed_scalars_keep_numpy_dtype(client: rpjrt.Client, i: int) -> None:
    obj = TYPED_LISTS[i]
    want = np.asarray(obj)
    if want.dtype.name.startswith("float6_") and not _has_type(client, want.dtype.name):
        with pytest.raises(rpjrt.UnsupportedError, match="needs PJRT 0.114"):
            client.put(obj)  # PJRT 0.81 predates float6: refused as unsupported
        return
    got = client.put(obj).to_numpy()
    assert got.dtype == want.dtype, (obj, got.dtype, want.dtype)
    assert got.shape == want.shape and bits(got) == bits(want), obj
    # cast=True picks the same dtype, and converts as numpy does.
    cast = client.put(obj, cast=True).to_numpy()
    assert cast.dtype == want.dtype and bits(cast) == bits(want), obj


def test_f4_typed_scalars_as_arguments_and_slots(client: rpjrt.Client) -> None:
    for t, name, items in [
        ("bf16", "bfloat16", [md.bfloat16(1.5), md.bfloat16(-2)]),
        ("f8E4M3FN", "float8_e4m3fn", [md.float8_e4m3fn(1), md.float8_e4m3fn(448)]),
        ("i4", "int4", [md.int4(3), md.int4(-8)]),
        ("ui64", "uint64", [np.uint64(2**64 - 1), np.uint64(1)]),
        ("f32", "float32", [md.bfloat16(1.5), np.float16(0.1)]),
        ("f16", "float16", [np.int8(-3), md.float8_e5m2(0.25)]),
    ]:
        (out,) = _identity(client, t, "2x")(items)
        want = np.array(items, dtype=npdt(name))
        assert out.to_numpy().dtype == want.dtype and bits(out.to_numpy()) == bits(want), t
    with rpjrt.Session(client) as session:
        session.bind("b", [md.bfloat16(1.5), md.bfloat16(2)])
        got = session.fetch("b")
        assert got.dtype == npdt("bfloat16") and got.tolist() == [1.5, 2.0]
        session.bind("u", [np.uint64(2**64 - 1)])
        assert session.fetch("u").tolist() == [2**64 - 1]


def test_f4_object_arrays_of_typed_scalars(client: rpjrt.Client) -> None:
    for items, dst in [
        ([md.bfloat16(1.5), md.bfloat16(2)], "bfloat16"),
        ([md.int4(3), md.int4(-8)], "int8"),
        ([np.uint64(2**64 - 1)], "uint64"),
        ([md.float8_e4m3fn(1.5), np.float16(2)], "float32"),
    ]:
        obj = np.empty(len(items), dtype=object)
        obj[:] = items
        got = client.put(obj, dtype=dst).to_numpy()
        want = np.array(items, dtype=npdt(dst))
        assert got.dtype == want.dtype and bits(got) == bits(want), (items, dst)


def test_f4_refusals_name_the_type(client: rpjrt.Client) -> None:
    cases: list[tuple[Any, dict[str, Any], str]] = [
        # The wanted type is named, not one the caller never asked for.
        ([np.uint64(2**64 - 1)], {"dtype": "int64"}, r"18446744073709551615 at index \[0\] does not fit in int64"),
        ([md.int4(7), np.int8(100)], {"dtype": "int4"}, r"100 at index \[1\] does not fit in int4"),
        ([md.bfloat16(1e38), md.bfloat16(3e38)], {"dtype": "float16"}, "overflows float16"),
        ([md.bfloat16(1.5)], {"dtype": "int8"}, "float values cannot be stored as int8"),
        # numpy's promotion of the list is named when a value does not fit it.
        ([md.float8_e8m0fnu(1), np.int8(-3)], {}, r"-3 at index \[1\] cannot be stored as float8_e8m0fnu.*numpy's type for"),
        # numpy would make an object array: refused, naming the value.
        ([np.int8(1), 2**64], {}, r"18446744073709551616 at index \[1\] does not fit in 64 bits"),
        ([np.float16(1), -(2**70)], {}, "does not fit in 64 bits"),
        # Items that are no numbers are named by their type.
        ([np.int8(1), np.str_("a")], {}, "cannot put a str_"),
        ([md.bfloat16(1), np.datetime64("2020-01-01")], {}, "cannot put a datetime64"),
        ([md.bfloat16(1), "x"], {}, "cannot put a str"),
        # Ragged lists are rpjrt's own message, numpy scalars or not.
        ([[np.int8(1)], [np.int8(1), np.int8(2)]], {}, "ragged"),
    ]
    for obj, kw, pattern in cases:
        with pytest.raises(rpjrt.InvalidArgumentError, match=pattern):
            client.put(obj, **kw)
    with pytest.raises(rpjrt.InvalidArgumentError, match="not a number|no numbers|does not fit"):
        _identity(client, "i64", "1x")([np.uint64(2**64 - 1)])


def test_f4_python_only_lists_keep_their_rule(client: rpjrt.Client) -> None:
    # Lists of Python numbers are unchanged: one kind, the core's default types.
    with pytest.raises(rpjrt.InvalidArgumentError, match="mixes float and int"):
        client.put([1, 2.0])
    assert client.put([1, 2]).to_numpy().dtype == np.int64
    assert client.put([1.0]).to_numpy().dtype == np.float64
    with pytest.raises(rpjrt.InvalidArgumentError, match="does not fit in int64"):
        client.put([2**63])
    assert client.put([]).to_numpy().dtype == np.float64
