"""Round trip of every element type x host layout x both CPU plugins: put -> an identity
program -> host, compared with the numpy / ml_dtypes array bit for bit (values for the
sub-byte types, whose spare bits numpy leaves unspecified).

Layouts: 0-d, zero-size, rank 1, rank 4, non-contiguous (every other row), Fortran order
and negative strides. Types a plugin cannot hold raise a clear error, asserted below with
the plugin and the message.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import rpjrt


# StableHLO element type of each rpjrt dtype (int1/uint1 have no StableHLO spelling).
MLIR = {
    "bool": "i1",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "ui8",
    "uint16": "ui16",
    "uint32": "ui32",
    "uint64": "ui64",
    "float16": "f16",
    "float32": "f32",
    "float64": "f64",
    "bfloat16": "bf16",
    "complex64": "complex<f32>",
    "complex128": "complex<f64>",
    "float8_e5m2": "f8E5M2",
    "float8_e4m3fn": "f8E4M3FN",
    "float8_e4m3b11fnuz": "f8E4M3B11FNUZ",
    "float8_e5m2fnuz": "f8E5M2FNUZ",
    "float8_e4m3fnuz": "f8E4M3FNUZ",
    "int4": "i4",
    "uint4": "ui4",
    "int2": "i2",
    "uint2": "ui2",
    "float8_e4m3": "f8E4M3",
    "float8_e3m4": "f8E3M4",
    "float8_e8m0fnu": "f8E8M0FNU",
    "float4_e2m1fn": "f4E2M1FN",
    "float6_e2m3fn": "f6E2M3FN",
    "float6_e3m2fn": "f6E3M2FN",
}

DTYPES = [d.name for d in rpjrt.dtypes if d.name != "token"]

LAYOUTS = ["0d", "zero_size", "rank1", "rank4", "non_contiguous", "fortran", "negative_strides"]

# What each plugin refuses, and how: {plugin label: {dtype: (stage, message part)}}.
# Filled from what the plugins really do; every other dtype must round-trip exactly.
# The 0.81 plugin predates the 1-bit integers (PJRT 0.94) and the float6 types (0.114): put
# refuses them before the plugin sees them (an unknown type code aborts the process).
REFUSED: dict[str, dict[str, tuple[str, str]]] = {
    "old": {
        "int1": ("put", r"element type int1 is not available: it needs PJRT 0\.94, and this plugin implements PJRT 0\.81"),
        "uint1": ("put", r"element type uint1 is not available: it needs PJRT 0\.94"),
        "float6_e2m3fn": ("put", r"element type float6_e2m3fn is not available: it needs PJRT 0\.114"),
        "float6_e3m2fn": ("put", r"element type float6_e3m2fn is not available: it needs PJRT 0\.114"),
    },
    "new": {},
}


# Compiling a zero-size float6 program would abort the 0.115 plugin inside XLA ("literal.cc:
# Unhandled primitive type F6E2M3FN", a CHECK failure); rpjrt refuses it before compiling.
PROGRAM_REFUSED = {("new", "float6_e2m3fn", "zero_size"), ("new", "float6_e3m2fn", "zero_size")}


def values(name: str, shape: tuple[int, ...], rng: np.random.Generator) -> Any:
    """A C-contiguous array of `shape` holding valid values of dtype `name`."""
    dt = np.dtype(getattr(ml_dtypes, name)) if rpjrt.dtype(name).format is None else np.dtype(name)
    n = int(np.prod(shape))
    if name == "bool":
        return (rng.integers(0, 2, n) == 1).reshape(shape)
    kind = rpjrt.dtype(name).kind
    if kind in ("i", "u"):
        info = ml_dtypes.iinfo(dt) if name in ("int4", "uint4", "int2", "uint2", "int1", "uint1") else np.iinfo(dt)
        gen = np.uint64 if name == "uint64" else np.int64
        return rng.integers(int(info.min), int(info.max), n, endpoint=True, dtype=gen).astype(dt).reshape(shape)
    if kind == "c":
        re, im = rng.standard_normal(n), rng.standard_normal(n)
        return (re + 1j * im).astype(dt).reshape(shape)
    x = rng.standard_normal(n) * 3
    if name == "float8_e8m0fnu":
        x = np.abs(x) + 0.25  # no sign, no zero
    return x.astype(np.float32).astype(dt).reshape(shape)


def host_array(name: str, layout: str, rng: np.random.Generator) -> Any:
    if layout == "0d":
        return values(name, (), rng)
    if layout == "zero_size":
        return values(name, (0, 3), rng)
    if layout == "rank1":
        return values(name, (5,), rng)
    if layout == "rank4":
        return values(name, (2, 3, 1, 2), rng)
    if layout == "non_contiguous":
        a = values(name, (6, 4), rng)[::2]
        assert not a.flags.c_contiguous
        return a
    if layout == "fortran":
        a = np.asfortranarray(values(name, (3, 4), rng))
        assert a.flags.f_contiguous and not a.flags.c_contiguous
        return a
    a = values(name, (3, 4), rng)[::-1, ::-1]
    assert a.strides[0] < 0 and a.strides[1] < 0
    return a


def same(name: str, got: Any, want: Any) -> bool:
    want = want.copy(order="C")
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if rpjrt.dtype(name).bits < 8:
        wide = np.int16 if rpjrt.dtype(name).kind in ("i", "u") else np.float32
        return bool(np.array_equal(got.astype(wide), want.astype(wide), equal_nan=wide is np.float32))
    return bool(np.array_equal(got.reshape(-1).view(np.uint8), want.reshape(-1).view(np.uint8)))


_EXES: dict[tuple[int, str, tuple[int, ...]], Any] = {}


def identity(client: Any, name: str, shape: tuple[int, ...]) -> Any:
    key = (id(client), name, shape)
    if key not in _EXES:
        t = MLIR[name]
        ty = f"tensor<{'x'.join(map(str, shape))}{'x' if shape else ''}{t}>"
        _EXES[key] = client.compile(
            f"func.func public @main(%a: {ty}) -> {ty} {{\n  return %a : {ty}\n}}\n"
        )
    return _EXES[key]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", DTYPES)
def test_round_trip(client: Any, plugin_label: str, name: str, layout: str) -> None:
    rng = np.random.default_rng(abs(hash((name, layout))) % (1 << 32))
    a = host_array(name, layout, rng)
    refused = REFUSED[plugin_label].get(name)
    if refused is not None and refused[0] == "put":
        with pytest.raises(rpjrt.UnsupportedError, match=refused[1]):
            client.put(a)
        return
    b = client.put(a)
    assert b.shape == a.shape and b.dtype == rpjrt.dtype(name)
    # Straight back, without a program.
    assert same(name, b.to_numpy(), a), (name, layout)
    if name not in MLIR:
        # No StableHLO spelling: the buffer itself must still round-trip (checked above).
        return
    if (plugin_label, name, layout) in PROGRAM_REFUSED:
        with pytest.raises(rpjrt.InvalidArgumentError, match=f"uses {name} in a tensor with no elements"):
            identity(client, name, a.shape)
        return
    if refused is not None and refused[0] == "program":
        with pytest.raises(rpjrt.Error, match=refused[1]):
            (y,) = identity(client, name, a.shape)(b)
            y.block_until_ready()
        return
    (y,) = identity(client, name, a.shape)(b)
    got = y.to_numpy()
    assert same(name, got, a), (name, layout, got, a)


