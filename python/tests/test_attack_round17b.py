"""Round 17b (outside test of the round-17 fixes), on both CPU plugins:

A. ``np.asarray(ffi_buffer, copy=True)`` or with a ``dtype=`` of a sub-byte (int4, uint4,
   int2, uint2) custom-call buffer was refused as if a view were required: now an unpacked
   copy is given wherever numpy's ``__array__(dtype, copy)`` protocol allows one; only
   ``copy=False``, and a result's ``copy=None`` with no conversion (which asks for the view
   whose writes reach the result), are refused.
B. ``rpjrt.ffi.set_handler_wait_limit`` refused numpy numbers and raised a raw
   OverflowError for ``10**400``: any real number is taken, and one out of range is
   InvalidArgumentError naming the range.
C. Masked arrays: ``client.from_dlpack(masked)`` dropped the mask; a masked ``out`` of
   ``to_numpy`` / ``to_host`` / ``copy_to_host`` got the copy in ``.data`` under its old
   mask, hiding the copied values. Both are refused, naming what to pass instead.
"""

from __future__ import annotations

import decimal
import fractions
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import rpjrt
import rpjrt.ffi

ml_dtypes = pytest.importorskip("ml_dtypes")

_ids = itertools.count()


def _name(base: str) -> str:
    """A fresh target name (registrations are per process and per plugin)."""
    return f"r17b_{base}_{next(_ids)}"


# (mlir type, dtype, values covering the type's range, negatives included)
SUB_BYTE = [
    ("i4", ml_dtypes.int4, [-8, -7, -1, 0, 3, 7, -2]),
    ("ui4", ml_dtypes.uint4, [0, 15, 1, 8, 7, 3, 9]),
]


def _program(target: str, mlir: str, n: int, alias: bool = False) -> str:
    t = f"tensor<{n}x{mlir}>"
    aliases = (
        ", output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices"
        " = [], operand_index = 0, operand_tuple_indices = []>]"
        if alias
        else ""
    )
    return f"""func.func public @main(%a: {t}) -> {t} {{
  %0 = stablehlo.custom_call @{target}(%a) {{api_version = 4 : i32{aliases}}} : ({t}) -> {t}
  return %0 : {t}
}}
"""


def _attempt(seen: dict[str, Any], key: str, f: Callable[[], Any]) -> Any:
    """Runs ``f`` inside a handler, recording its result or its exception by ``key``."""
    try:
        r = f()
    except Exception as e:  # noqa: BLE001 - recorded, checked by the test
        seen[key] = e
        return None
    seen[key] = r
    return r


# ------------------------------------------------------ A: sub-byte __array__


@pytest.mark.parametrize(("mlir", "dtype", "values"), SUB_BYTE, ids=[s[0] for s in SUB_BYTE])
def test_a_sub_byte_argument_converts_to_an_unpacked_copy(
    client: rpjrt.Client, mlir: str, dtype: Any, values: list[int]
) -> None:
    target = _name(f"arg_{mlir}")
    seen: dict[str, Any] = {}

    def h(call: rpjrt.ffi.FfiCall) -> Any:
        arg = call.args[0]
        _attempt(seen, "asarray", lambda: np.asarray(arg))
        _attempt(seen, "array", lambda: np.array(arg))
        _attempt(seen, "copy", lambda: np.asarray(arg, copy=True))
        _attempt(seen, "own", lambda: np.asarray(arg, dtype=dtype))
        _attempt(seen, "f32", lambda: np.asarray(arg, dtype=np.float32))
        _attempt(seen, "i8", lambda: np.asarray(arg, dtype=np.int8, copy=True))
        _attempt(seen, "view", lambda: np.asarray(arg, copy=False))
        _attempt(seen, "f32 view", lambda: np.asarray(arg, dtype=np.float32, copy=False))
        _attempt(seen, "to_numpy", arg.to_numpy)
        # The copy is in ml_dtypes' own form: returned as is, it is the identity.
        return np.array(arg)

    rpjrt.ffi.register(client, target, h)
    x = np.array(values, dtype)
    (y,) = client.compile(_program(target, mlir, len(values)))(x)
    assert y.to_numpy().tolist() == values

    for key in ("asarray", "array", "copy", "own"):
        a = seen[key]
        assert isinstance(a, np.ndarray), (key, a)
        assert a.dtype == np.dtype(dtype) and a.shape == (len(values),), (key, a)
        assert a.tolist() == values, (key, a)
        # Stored as ml_dtypes stores the type: its bits, zeros above.
        assert (a.view(np.uint8) < 16).all(), (key, a.view(np.uint8))
    # An argument is read-only, as its views are; an explicit copy is the caller's.
    assert not seen["asarray"].flags.writeable and not seen["own"].flags.writeable
    assert seen["array"].flags.writeable and seen["copy"].flags.writeable
    assert seen["f32"].dtype == np.float32 and seen["f32"].tolist() == values
    assert seen["i8"].dtype == np.int8 and seen["i8"].tolist() == values
    for key in ("view", "f32 view"):
        e = seen[key]
        assert isinstance(e, rpjrt.InvalidArgumentError) and isinstance(e, ValueError), e
        assert "copy=False" in str(e) and "cannot be a view" in str(e), e
        assert "copy=True" in str(e), e
    # to_numpy() is a view, which cannot be: it still raises, now naming the copy.
    e = seen["to_numpy"]
    assert isinstance(e, rpjrt.InvalidArgumentError), e
    assert "read the packed bytes" in str(e) and "np.asarray(arg)" in str(e), e


@pytest.mark.parametrize(("mlir", "dtype", "values"), SUB_BYTE, ids=[s[0] for s in SUB_BYTE])
def test_a_sub_byte_result_gives_a_copy_only_where_no_write_is_lost(
    client: rpjrt.Client, mlir: str, dtype: Any, values: list[int]
) -> None:
    target = _name(f"ret_{mlir}")
    seen: dict[str, Any] = {}

    def h(call: rpjrt.ffi.FfiCall) -> Any:
        ret = call.rets[0]
        _attempt(seen, "asarray", lambda: np.asarray(ret))
        _attempt(seen, "own", lambda: np.asarray(ret, dtype=dtype))
        _attempt(seen, "view", lambda: np.asarray(ret, copy=False))
        _attempt(seen, "array", lambda: np.array(ret))
        _attempt(seen, "f64", lambda: np.asarray(ret, dtype=np.float64))
        a = seen["array"]
        if isinstance(a, np.ndarray):
            a[...] = np.array(values, dtype)  # a detached copy: writing it sets nothing
        return np.array(values, dtype)

    rpjrt.ffi.register(client, target, h)
    (y,) = client.compile(_program(target, mlir, len(values)))(np.zeros(len(values), dtype))
    assert y.to_numpy().tolist() == values
    for key in ("asarray", "own"):
        e = seen[key]
        assert isinstance(e, rpjrt.InvalidArgumentError), (key, e)
        assert "view" in str(e) and "np.array(ret)" in str(e) and "return an array" in str(e), e
    e = seen["view"]
    assert isinstance(e, rpjrt.InvalidArgumentError) and "copy=False" in str(e), e
    assert "detached from the result" in str(e), e
    a = seen["array"]
    assert isinstance(a, np.ndarray) and a.dtype == np.dtype(dtype) and a.flags.writeable
    assert seen["f64"].dtype == np.float64 and seen["f64"].tolist() == [0.0] * len(values)


@pytest.mark.parametrize(("mlir", "dtype", "values"), SUB_BYTE, ids=[s[0] for s in SUB_BYTE])
def test_a_copy_of_an_in_place_sub_byte_result_holds_the_arguments_values(
    client: rpjrt.Client, mlir: str, dtype: Any, values: list[int]
) -> None:
    target = _name(f"alias_{mlir}")
    seen: dict[str, Any] = {}

    def h(call: rpjrt.ffi.FfiCall) -> None:
        _attempt(seen, "array", lambda: np.array(call.rets[0]))
        _attempt(seen, "i8", lambda: np.asarray(call.rets[0], dtype=np.int8))

    rpjrt.ffi.register(client, target, h)
    x = np.array(values, dtype)
    (y,) = client.compile(_program(target, mlir, len(values), alias=True))(x)
    assert y.to_numpy().tolist() == values
    assert seen["array"].tolist() == values, seen
    assert seen["i8"].dtype == np.int8 and seen["i8"].tolist() == values, seen


def test_a_sub_byte_copy_after_the_call_raises(client: rpjrt.Client) -> None:
    target = _name("late")
    kept: list[Any] = []

    def h(call: rpjrt.ffi.FfiCall) -> Any:
        kept.append(call.args[0])
        return np.array(call.args[0])

    rpjrt.ffi.register(client, target, h)
    client.compile(_program(target, "i4", 3))(np.array([1, -2, 3], ml_dtypes.int4))
    with pytest.raises(rpjrt.InvalidArgumentError, match="only valid during the handler call"):
        np.array(kept[0])


# ------------------------------------------------------ B: the wait limit's numbers


def test_b_the_wait_limit_takes_any_real_number() -> None:
    before = rpjrt.ffi.set_handler_wait_limit()
    try:
        for value, want in [
            (np.float32(2.0), 2.0),
            (np.int64(3), 3.0),
            (np.float16(0.5), 0.5),
            (fractions.Fraction(3, 2), 1.5),
            (decimal.Decimal("2.25"), 2.25),
            (7, 7.0),
        ]:
            rpjrt.ffi.set_handler_wait_limit(value)
            assert rpjrt.ffi.set_handler_wait_limit() == want, value
        for huge in (10**400, -(10**400), fractions.Fraction(10**400, 3)):
            with pytest.raises(rpjrt.InvalidArgumentError, match="from 0.001 to 86400") as e:
                rpjrt.ffi.set_handler_wait_limit(huge)
            assert len(str(e.value)) < 300, str(e.value)
        for bad in (np.float64(1e9), np.float32("nan"), decimal.Decimal("Infinity")):
            with pytest.raises(rpjrt.InvalidArgumentError, match="from 0.001 to 86400"):
                rpjrt.ffi.set_handler_wait_limit(bad)
        for wrong in (True, np.bool_(True), 1 + 0j, np.complex64(1), "3", b"3", None.__class__):
            with pytest.raises(TypeError, match="real number"):
                rpjrt.ffi.set_handler_wait_limit(wrong)  # type: ignore[arg-type]
        # Nothing refused changed the limit.
        assert rpjrt.ffi.set_handler_wait_limit() == 7.0
    finally:
        rpjrt.ffi.set_handler_wait_limit(before)
    assert rpjrt.ffi.set_handler_wait_limit() == before


# ------------------------------------------------------ C: masked arrays


def _masked() -> list[Any]:
    class Sub(np.ma.MaskedArray):
        pass

    m = np.ma.masked_array(np.array([1, 2, 3, 4], np.float32), mask=[False, True, False, False])
    return [
        m,
        np.ma.masked_array(np.array([1, 2, 3, 4], np.float32)),  # nomask
        m.view(Sub),
        np.ma.masked_array(np.array([1, 2, 3, 4], ml_dtypes.bfloat16), mask=[False, True, False, False]),
    ]


def test_c_from_dlpack_refuses_a_masked_array(client: rpjrt.Client) -> None:
    for m in _masked():
        with pytest.raises(rpjrt.InvalidArgumentError, match="masked array") as e:
            client.from_dlpack(m)
        assert "filled" in str(e.value), e.value
    # Its plain data still goes in, and so does a plain ndarray.
    m = _masked()[0]
    assert client.from_dlpack(m.data).to_numpy().tolist() == [1, 2, 3, 4]
    assert client.from_dlpack(m.filled(0)).to_numpy().tolist() == [1, 0, 3, 4]


def test_c_put_of_a_bf16_masked_array_says_masked(client: rpjrt.Client) -> None:
    """A bfloat16 masked array has no buffer protocol and reaches the DLPack import, which
    now refuses it as a masked array (not as something DLPack cannot carry)."""
    mbf = _masked()[3]
    with pytest.raises(rpjrt.InvalidArgumentError, match="masked array") as e:
        client.put(mbf)
    assert "filled" in str(e.value) and "DLPack" not in str(e.value), e.value


@pytest.mark.parametrize("how", ["to_numpy", "to_host", "copy_to_host"])
def test_c_a_masked_out_is_refused_and_left_alone(client: rpjrt.Client, how: str) -> None:
    b = client.put(np.array([5, 6, 7, 8], np.float32))
    bbf = client.put(np.array([5, 6, 7, 8], ml_dtypes.bfloat16))

    def copy(buf: rpjrt.Buffer, out: Any) -> Any:
        if how == "to_numpy":
            return buf.to_numpy(out=out)
        if how == "to_host":
            return buf.to_host(out=out)
        return buf.copy_to_host(out)

    for m in _masked():
        out = m.copy()
        out.data[...] = 0
        mask_before = np.ma.getmaskarray(out).copy()
        src = bbf if out.dtype == ml_dtypes.bfloat16 else b
        with pytest.raises(rpjrt.InvalidArgumentError, match="masked array") as e:
            copy(src, out)
        assert "out.data" in str(e.value) and "plain ndarray" in str(e.value), e.value
        # Nothing was written, and the mask is as it was.
        assert out.data.astype(np.float32).tolist() == [0, 0, 0, 0]
        assert np.ma.getmaskarray(out).tolist() == mask_before.tolist()
        # What the message suggests works.
        copy(src, out.data)
        assert out.data.astype(np.float32).tolist() == [5, 6, 7, 8]
    # A plain ndarray and a plain subclass still work.
    plain = np.zeros(4, np.float32)
    copy(b, plain)
    assert plain.tolist() == [5, 6, 7, 8]
    class Plain(np.ndarray):
        pass

    sub = np.zeros(4, np.float32).view(Plain)
    copy(b, sub)
    assert sub.tolist() == [5, 6, 7, 8]
