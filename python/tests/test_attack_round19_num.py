"""Regressions from attack round 19 (data in and out, numbers).

- F-1: integers stored as a float type were rounded twice (int -> float64 -> target), so a
  value just past a tie of the target became the tie and then rounded to even: not the
  nearest value, and not what numpy / ml_dtypes give.
- F-2: ``rpjrt.transfer.put_streaming`` sent bool bytes other than 0/1 to the device as
  they were (``client.put`` normalises them: nonzero is true).
- F-4: numpy's string type codes (``'S8'``, ``'U16'``, ``'a8'``) were read as XLA's
  integer names (``s8``, ``u16``) through the case-insensitive match, and ``'U1'`` was
  refused with a message saying numpy reads it as uint8.
"""

from __future__ import annotations

import random
import warnings
from fractions import Fraction
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import rpjrt
from rpjrt import transfer

# --------------------------------------------------------------------------------------
# F-1: one rounding from integers to floats
# --------------------------------------------------------------------------------------

FLOAT_TARGETS = [d.name for d in rpjrt._dtypes.ALL if d.kind in "fc"]


def _real_part(name: str) -> np.dtype:
    d = rpjrt.dtype(name).numpy
    return {"complex64": np.dtype(np.float32), "complex128": np.dtype(np.float64)}.get(d.name, d)


def _finfo(nd: np.dtype) -> Any:
    return np.finfo(nd) if nd.type.__module__ == "numpy" else ml_dtypes.finfo(nd)


def _uint(nd: np.dtype) -> Any:
    return {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[nd.itemsize]


def _exact_nearest(n: int, nd: np.dtype) -> float:
    """The value of the real float dtype `nd` nearest to the integer `n`, ties to even
    (ties up for float8_e8m0fnu, as ml_dtypes rounds), from exact distances: the
    candidates are the codes around numpy's (possibly twice-rounded) conversion."""
    with np.errstate(all="ignore"):
        code = int(np.array([float(n)]).astype(nd).view(_uint(nd))[0])
    ties_up = nd == np.dtype(ml_dtypes.float8_e8m0fnu)
    best: tuple[tuple[Fraction, float], float] | None = None
    for k in range(max(code - 3, 0), min(code + 4, 1 << (8 * nd.itemsize))):
        v = float(np.array([k], _uint(nd)).view(nd)[0])
        if v != v or v in (float("inf"), float("-inf")) or (v < 0) != (n < 0) and v != 0:
            continue
        key = (abs(Fraction(v) - n), -abs(v) if ties_up else float(k & 1))
        if best is None or key < best[0]:
            best = (key, v)
    assert best is not None
    return best[1]


def _edge_integers(nd: np.dtype) -> list[int]:
    """Integers around the places where rounding once and twice differ, and random ones,
    that the float type `nd` holds without overflow (both signs where it has them)."""
    rng = random.Random(19)
    top = int(_finfo(nd).max)
    out: set[int] = set()
    for e in (11, 24, 25, 53, 54, 60, 63, 64):
        for d in range(-40, 41):
            for step in (1, 1 << max(e - 8, 0), 1 << max(e - 11, 0), 1 << max(e - 24, 0), 1 << max(e - 53, 0)):
                out.update({(1 << e) + d * step, (1 << e) + d * step + 1, (1 << e) + d * step - 1})
    out.update({2**64 - 1, 2**63 - 1, 2**63 + 2**39 + 1, 3 * 2**59 - 1, 3 * 2**59 + 1})
    out.update(rng.getrandbits(64) >> rng.randrange(0, 60) for _ in range(3000))
    out.update(range(0, min(top, 600) + 1))
    out.update(range(max(top - 300, 0), top + 1))
    vals = sorted(v for v in out if 0 <= v <= min(top, 2**64 - 1))
    if _finfo(nd).min < 0:
        vals += [-v for v in vals if v <= 2**63 and v != 0]
    return vals


def _stored(client: Any, obj: Any, target: str) -> Any:
    """What ``client.put(obj, dtype=target)`` stores, as numpy: read back from the device
    where the plugin has the type, else the host data put hands the plugin."""
    try:
        return np.asarray(client.put(obj, dtype=target).to_numpy())
    except rpjrt.UnsupportedError:  # e.g. float6 on PJRT 0.81: convert on the host only
        data, d, shape = rpjrt._host.as_host(obj, target)
        return np.frombuffer(memoryview(data).cast("B"), dtype=d.numpy).reshape(shape)


def _bits(a: Any) -> bytes:
    return np.ascontiguousarray(np.asarray(a)).reshape(-1).view(np.uint8).tobytes()


@pytest.mark.parametrize("target", FLOAT_TARGETS)
def test_integers_round_once_to_the_nearest_value_as_numpy_does(client: Any, target: str) -> None:
    nd = _real_part(target)
    want_t = rpjrt.dtype(target).numpy
    vals = _edge_integers(nd)
    if rpjrt.dtype(target).name == "float8_e8m0fnu":
        vals = [v for v in vals if v > 0]  # it has no zero nor negatives
    signed = [v for v in vals if -(2**63) <= v < 2**63]
    unsigned = [v for v in vals if v >= 0]
    with np.errstate(all="ignore"):
        want_signed = np.array(signed, np.int64).astype(want_t)
        want_unsigned = np.array(unsigned, np.uint64).astype(want_t)
    for src, ints, want in [
        (np.array(signed, np.int64), signed, want_signed),
        (np.array(unsigned, np.uint64), unsigned, want_unsigned),
        (signed, signed, want_signed),  # Python ints, through the core's rule for numbers
    ]:
        got = _stored(client, src, target)
        assert got.dtype == want.dtype
        if _bits(got) != _bits(want):
            wrong = [(v, got[i], want[i]) for i, v in enumerate(ints) if _bits(got[i]) != _bits(want[i])]
            pytest.fail(f"{target}: {len(wrong)} integers differ from numpy, e.g. {wrong[:3]}")
    # numpy / ml_dtypes are the nearest value here, exactly (the reference is sound).
    sample = signed[:: max(1, len(signed) // 400)] + [2**60 + 2**36 + 1, 2**60 + 2**52 + 1]
    sample = [v for v in sample if abs(v) <= float(_finfo(nd).max)]
    for v in sample:
        with np.errstate(all="ignore"):
            numpy_value = float(np.array([v], np.int64).astype(nd)[0])
        assert numpy_value == _exact_nearest(v, nd), (target, v)


@pytest.mark.parametrize(
    "target,n,want",
    [
        ("float32", 2**60 + 2**36 + 1, 2.0**60 + 2.0**37),
        ("float32", -(2**60 + 2**36 + 1), -(2.0**60 + 2.0**37)),
        ("complex64", 2**60 + 2**36 + 1, 2.0**60 + 2.0**37),
        ("bfloat16", 2**60 + 2**52 + 1, 2.0**60 + 2.0**53),
        ("float64", 2**53 + 1, 2.0**53),
        ("float64", 2**64 - 1, 2.0**64),
        ("float8_e8m0fnu", 3 * 2**59 - 1, 2.0**60),
        # Past 64 bits (Python ints): one past a float32 / bfloat16 tie.
        ("float32", 2**127 + 2**103 + 1, 2.0**127 + 2.0**104),
        ("complex64", 2**127 + 2**103 + 1, 2.0**127 + 2.0**104),
        ("bfloat16", 2**127 + 2**119 + 1, 2.0**127 + 2.0**120),
        # One below float32's / bfloat16's overflow limit: the largest finite value, though
        # float64 rounds it onto the limit (which overflows).
        ("float32", 2**128 - 2**103 - 1, float(np.finfo(np.float32).max)),
        ("bfloat16", 2**128 - 2**119 - 1, float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)),
        ("float64", 2**1024 - 2**970 - 1, float(np.finfo(np.float64).max)),
    ],
)
def test_python_ints_round_once(client: Any, target: str, n: int, want: float) -> None:
    assert _exact_nearest(n, _real_part(target)) == want
    for obj in (n, [n], [[n]]):
        got = _stored(client, obj, target).reshape(-1)[0]
        assert float(np.real(got)) == want, (target, n, got)


@pytest.mark.parametrize(
    "target,n",
    [("float32", 2**128 - 2**103), ("bfloat16", 2**128 - 2**119), ("float64", 2**1024 - 2**970), ("float16", 65520)],
)
def test_integers_that_round_past_the_largest_value_are_refused(client: Any, target: str, n: int) -> None:
    with pytest.raises(rpjrt.InvalidArgumentError, match=f"overflows {target}"):
        client.put([n], dtype=target)
    with pytest.raises(rpjrt.InvalidArgumentError, match=f"overflows {target}"):
        client.put([-n], dtype=target)


def test_weakly_typed_integer_arguments_round_once(client: Any) -> None:
    for t, n, want in [("f32", 2**60 + 2**36 + 1, 2.0**60 + 2.0**37), ("bf16", 2**60 + 2**52 + 1, 2.0**60 + 2.0**53)]:
        exe = client.compile(
            f"func.func public @main(%a: tensor<{t}>) -> tensor<{t}> {{\n  return %a : tensor<{t}>\n}}\n"
        )
        (y,) = exe(n)
        assert float(y.to_numpy()) == want, t


# --------------------------------------------------------------------------------------
# F-2: put_streaming normalises bool bytes as client.put does
# --------------------------------------------------------------------------------------

_BOOL_PROGRAM = (
    "func.func public @main(%a: tensor<6xi1>) -> (tensor<6xi1>, tensor<6xi32>) {\n"
    "  %n = stablehlo.not %a : tensor<6xi1>\n"
    "  %i = stablehlo.convert %a : (tensor<6xi1>) -> tensor<6xi32>\n"
    "  return %n, %i : tensor<6xi1>, tensor<6xi32>\n}\n"
)


def test_put_streaming_normalises_bool_bytes(client: Any) -> None:
    raw = np.array([0, 1, 2, 254, 255, 128], np.uint8)
    q = raw.view(np.bool_)
    want = [0, 1, 1, 1, 1, 1]
    exe = client.compile(_BOOL_PROGRAM)
    streamed = [
        transfer.put_streaming(client, q, progress=False),
        transfer.put_streaming(client, q, progress=False, chunk_bytes=4),
        transfer.put_streaming(
            client, lambda off, n: raw[off : off + n].tobytes(), dtype="bool", shape=(6,), chunk_bytes=5, progress=False
        ),
        transfer.put_streaming(client, memoryview(raw.tobytes()).cast("B").cast("?"), progress=False),
    ]
    for b in streamed:
        assert b.dtype == rpjrt.bool_
        assert b.to_numpy().view(np.uint8).tolist() == want
        n, i = exe(b)
        assert n.to_numpy().tolist() == [True, False, False, False, False, False]
        assert i.to_numpy().tolist() == want
    # The same as client.put stores.
    assert client.put(q).to_numpy().view(np.uint8).tolist() == want


def test_put_streaming_keeps_other_bytes_as_they_are(client: Any) -> None:
    raw = np.array([0, 1, 2, 254, 255, 128], np.uint8)
    b = transfer.put_streaming(client, raw, progress=False, chunk_bytes=4)
    assert b.to_numpy().tolist() == raw.tolist()
    i8 = raw.view(np.int8)
    assert transfer.put_streaming(client, i8, progress=False).to_numpy().tolist() == i8.tolist()


# --------------------------------------------------------------------------------------
# F-4: numpy's string type codes are not XLA integer names
# --------------------------------------------------------------------------------------

STRING_CODES = ["S1", "S2", "S4", "S8", "S16", "S32", "S64", "U1", "U2", "U4", "U8", "U16", "U32", "U64",
                "a8", "a1", "|S8", "<U16", ">U4", "=S2", "S", "U", "S0", "S08", "c", "|c"]


@pytest.mark.parametrize("code", STRING_CODES)
def test_numpy_string_codes_are_refused_as_strings(code: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # numpy 2 deprecates 'a'
        nd = np.dtype(code)
    assert nd.kind in "SU"  # numpy reads it as a string type
    n = nd.itemsize if nd.kind == "S" else nd.itemsize // 4
    what = "bytes" if nd.kind == "S" else "unicode"
    plural = "" if n == 1 else "s"
    with pytest.raises(rpjrt.InvalidArgumentError) as e:
        rpjrt.dtype(code)
    msg = str(e.value)
    assert f"numpy's type code for a {what} string of {n} character{plural}" in msg, msg
    assert "rpjrt has no string types" in msg, msg
    assert "reads it as uint" not in msg, msg


def test_string_code_messages_say_how_to_write_the_xla_name() -> None:
    def msg(code: str) -> str:
        with pytest.raises(rpjrt.InvalidArgumentError) as e:
            rpjrt.dtype(code)
        return str(e.value)

    assert "for XLA's s8 (int8) write \"s8\" or \"int8\"" in msg("S8")
    assert "for XLA's u16 (uint16) write \"u16\" or \"uint16\"" in msg("U16")
    assert "for XLA's u1 (uint1) write \"uint1\"" in msg("U1")
    assert "numpy reads it as uint8" not in msg("U1")


def test_put_with_a_string_code_is_refused(client: Any) -> None:
    for code in ("S8", "U16", "U64", "S1"):
        with pytest.raises(rpjrt.InvalidArgumentError, match="string"):
            client.put(b"abcdefgh", dtype=code)
    for nd in (np.dtype("S8"), np.dtype("U3"), np.str_):
        with pytest.raises(rpjrt.InvalidArgumentError, match="string type"):
            rpjrt.dtype(nd)


@pytest.mark.parametrize(
    "name,expected",
    [("s1", "int1"), ("s4", "int4"), ("s8", "int8"), ("s16", "int16"), ("s32", "int32"), ("s64", "int64"),
     ("u16", "uint16"), ("u32", "uint32"), ("u64", "uint64"), ("F32", "float32"), ("F64", "float64"),
     ("BF16", "bfloat16"), ("PRED", "bool"), ("C64", "complex64"), ("Float32", "float32"),
     ("BFloat16", "bfloat16"), ("i8", "int64"), ("<i8", "int64"), ("F", "complex64"), ("f8", "float64")],
)
def test_documented_spellings_keep_their_meaning(name: str, expected: str) -> None:
    assert rpjrt.dtype(name) is rpjrt.dtype(expected)


@pytest.mark.parametrize("name,code", [("I8", "i8"), ("I4", "i4"), ("F8", "f8"), ("F4", "f4"), ("F2", "f2"), ("B1", "b1"), ("C8", "c8")])
def test_numpy_sized_codes_are_case_sensitive(name: str, code: str) -> None:
    with pytest.raises(TypeError):
        np.dtype(name)  # numpy does not read them either
    with pytest.raises(rpjrt.InvalidArgumentError, match="case-sensitive") as e:
        rpjrt.dtype(name)
    assert f'write "{code}"' in str(e.value)
