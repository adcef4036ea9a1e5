"""Round 21 (outside test of custom calls), on both CPU plugins.

1. Two results aliasing one operand (``output_operand_aliases``) got one memory: result 1
   started zeroed, and a result left alone was zeroed over the other. Such a call is now
   refused before the handler runs, naming the target, the results and the operand.
3. A handler that raises its own error quoting nested handler errors (siblings, a spoofed
   count) keeps its message whole: only the very error an execute raised, passed up
   unchanged, is collapsed as a chain.
4. Returning the result views (``return tuple(call.rets)``) costs O(n log n), not a
   ``np.may_share_memory`` call per pair of results.
5. The compile-time layout check accepts layouts that are row-major in memory (size-1
   dimensions anywhere, zero-size shapes) and still refuses the others.
6. ``FfiCall.device_ordinal`` is None during the instantiate stage (it was -1).
7. ``set_handler_wait_limit`` refuses every odd number with ``InvalidArgumentError`` and a
   short, right message (Decimal NaNs, huge and tiny numbers, bools, arrays).
"""

from __future__ import annotations

import decimal
import fractions
import itertools
import time
from typing import Any

import numpy as np
import pytest

import rpjrt
import rpjrt.ffi

_ids = itertools.count()
X4 = np.array([1, 2, 3, 4], np.float32)
F4 = "tensor<4xf32>"


def _name(base: str) -> str:
    """A fresh target name (registrations are per process and per plugin)."""
    return f"r21_{base}_{next(_ids)}"


def _has_instantiate(client: rpjrt.Client) -> bool:
    return rpjrt.ffi.runtime_version(client) >= (0, 3)


def _program(target: str, ty: str = F4, extra: str = "") -> str:
    return f"""func.func public @main(%x: {ty}) -> {ty} {{
  %0 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32{extra}}} : ({ty}) -> {ty}
  return %0 : {ty}
}}"""


def _alias(result: int, operand: int) -> str:
    return (
        f"#stablehlo.output_operand_alias<output_tuple_indices = [{result}], "
        f"operand_index = {operand}, operand_tuple_indices = []>"
    )


def _two_results(target: str, aliases: list[str]) -> str:
    return f"""func.func public @main(%x: {F4}, %y: {F4}) -> ({F4}, {F4}) {{
  %0:2 = stablehlo.custom_call @{target}(%x, %y) {{api_version = 4 : i32,
      output_operand_aliases = [{", ".join(aliases)}]}} : ({F4}, {F4}) -> ({F4}, {F4})
  return %0#0, %0#1 : {F4}, {F4}
}}"""


# ------------------------------------------------------ 1: results sharing memory


def test_results_aliasing_one_operand_are_refused_naming_them(client: rpjrt.Client) -> None:
    target = _name("alias2")
    runs: list[int] = []

    def h(call: rpjrt.ffi.FfiCall) -> None:
        runs.append(1)
        call.rets[0].to_numpy()[:] += 10
        call.rets[1].to_numpy()[:] += 100

    rpjrt.ffi.register(client, target, h)
    y = np.zeros(4, np.float32)
    for operand in (0, 1):
        exe = client.compile(_two_results(target, [_alias(0, operand), _alias(1, operand)]))
        with pytest.raises(rpjrt.InvalidArgumentError) as info:
            [o.to_numpy() for o in exe(X4, y)]
        msg = str(info.value)
        assert f'"{target}"' in msg, msg
        assert f"results 0 and 1 both alias operand {operand}" in msg, msg
    assert runs == []
    # One result per operand, crossed or not, still works in place.
    for a0, a1 in ((0, 1), (1, 0)):
        exe = client.compile(_two_results(target, [_alias(0, a0), _alias(1, a1)]))
        r0, r1 = (o.to_numpy() for o in exe(X4, y))
        start = (X4, y)
        np.testing.assert_array_equal(r0, start[a0] + 10)
        np.testing.assert_array_equal(r1, start[a1] + 100)
    assert len(runs) == 2


# ------------------------------------------------------ 3: a handler's own text is kept


def test_a_handlers_own_error_quoting_nested_errors_is_kept_whole(client: rpjrt.Client) -> None:
    b, c, outer = _name("sib_b"), _name("sib_c"), _name("sib_outer")

    def fail_b(call: rpjrt.ffi.FfiCall) -> Any:
        raise ValueError("table B is missing key 17")

    def fail_c(call: rpjrt.ffi.FfiCall) -> Any:
        raise KeyError("cache C is cold")

    rpjrt.ffi.register(client, b, fail_b)
    rpjrt.ffi.register(client, c, fail_c)
    eb, ec = client.compile(_program(b)), client.compile(_program(c))
    how: list[str] = ["siblings"]

    def h(call: rpjrt.ffi.FfiCall) -> Any:
        errs: list[rpjrt.Error] = []
        for e in (eb, ec):
            try:
                return e(call.args[0].to_numpy())[0].to_numpy()
            except rpjrt.Error as err:
                errs.append(err)
        if how[0] == "siblings":
            raise RuntimeError("lookup for row 3 failed; tried B then C: " + " || ".join(map(str, errs)))
        if how[0] == "own rpjrt error":
            raise rpjrt.UnknownError("retry budget spent: " + str(errs[1]))
        if how[0] == "spoofed count":
            fake = 'Python handler for "x" raised E from 18446744073709551615 nested handler errors; the innermost: '
            raise RuntimeError("quoting: " + fake + "a || " + fake + "b")
        raise errs[1]  # passed up unchanged: a real chain, collapsed

    rpjrt.ffi.register(client, outer, h)
    eo = client.compile(_program(outer))

    def message() -> str:
        with pytest.raises(rpjrt.Error) as info:
            eo(X4)[0].to_numpy()
        return str(info.value)

    m = message()
    assert "lookup for row 3 failed; tried B then C" in m, m
    assert "table B is missing key 17" in m and "cache C is cold" in m, m
    assert "nested handler errors" not in m, m
    how[0] = "own rpjrt error"
    m = message()
    assert "retry budget spent" in m and "cache C is cold" in m, m
    assert "nested handler errors" not in m, m
    how[0] = "spoofed count"
    m = message()
    assert m.count("18446744073709551615 nested handler errors") == 2, m
    assert "quoting: " in m and m.endswith(")"), m
    how[0] = "chain"
    m = message()
    assert f'Python handler for "{outer}" raised NotFoundError: ' in m, m
    assert f'Python handler for "{c}" raised KeyError' in m, m


def test_a_real_chain_is_still_collapsed_with_the_right_count(client: rpjrt.Client) -> None:
    target = _name("chain")
    exes: list[Any] = []
    level = [0]

    def h(call: rpjrt.ffi.FfiCall) -> Any:
        level[0] += 1
        try:
            if level[0] >= 5:
                raise ValueError("bottom reached, 'quoted' || text")
            return exes[0](call.args[0].to_numpy())[0].to_numpy()
        finally:
            level[0] -= 1

    rpjrt.ffi.register(client, target, h)
    exes.append(client.compile(_program(target)))
    with pytest.raises(rpjrt.InvalidArgumentError) as info:
        exes[0](X4)[0].to_numpy()
    msg = str(info.value)
    assert f'"{target}" raised InvalidArgumentError from 4 nested handler errors; the innermost: ' in msg, msg
    assert msg.count("bottom reached, 'quoted' || text") == 1, msg
    assert msg.count(f'Python handler for "{target}"') == 2, msg


# ------------------------------------------------------ 4: returning many views


def _many_results(target: str, n: int) -> str:
    ty = "tensor<2xf32>"
    rty = ", ".join([ty] * n)
    outs = ", ".join(f"%0#{i}" for i in range(n))
    return f"""func.func public @main(%x: {ty}) -> ({rty}) {{
  %0:{n} = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32}} : ({ty}) -> ({rty})
  return {outs} : {rty}
}}"""


def test_returning_many_result_views_is_not_quadratic(
    client: rpjrt.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = 3000
    target = _name("views")
    calls = [0]
    real = np.may_share_memory

    def counted(*a: Any, **k: Any) -> Any:
        calls[0] += 1
        return real(*a, **k)

    monkeypatch.setattr(np, "may_share_memory", counted)

    def h(call: rpjrt.ffi.FfiCall) -> Any:
        for i, r in enumerate(call.rets):
            r.to_numpy()[:] = i
        return tuple(call.rets)

    rpjrt.ffi.register(client, target, h)
    exe = client.compile(_many_results(target, n))
    x = np.zeros(2, np.float32)
    started = time.monotonic()
    outs = exe(x)
    last = outs[-1].to_numpy()
    took = time.monotonic() - started
    assert last[0] == n - 1 and outs[1234].to_numpy()[1] == 1234
    assert calls[0] < n, calls[0]  # was n * (n - 1) / 2
    assert took < 5, took  # was 5-11 s for 4000 results


def test_returned_views_in_any_order_are_read_as_they_were(client: rpjrt.Client) -> None:
    n = 40
    target = _name("reversed")

    def h(call: rpjrt.ffi.FfiCall) -> Any:
        views = [r.to_numpy() for r in call.rets]
        for i, v in enumerate(views):
            v[:] = i
        # Reversed, and as slices of other results' copies: each value is the one the
        # handler returned, whatever was written before it.
        return [np.frombuffer(r.memoryview(), np.float32) for r in call.rets][::-1]

    rpjrt.ffi.register(client, target, h)
    outs = client.compile(_many_results(target, n))(np.zeros(2, np.float32))
    assert [float(o.to_numpy()[0]) for o in outs] == [float(n - 1 - i) for i in range(n)]


# ------------------------------------------------------ 5: layouts


def _layouts(m2m: list[int]) -> str:
    dense = f"dense<[{', '.join(map(str, m2m))}]> : tensor<{len(m2m)}xindex>"
    return f", operand_layouts = [{dense}], result_layouts = [{dense}]"


@pytest.mark.parametrize(
    "shape,m2m",
    [((1, 4), [0, 1]), ((2, 1, 3), [2, 0, 1]), ((2, 1, 3), [1, 2, 0]), ((4, 1, 1), [1, 2, 0]),
     ((0, 3), [0, 1]), ((3, 0, 2), [0, 1, 2]), ((2, 3), [1, 0])],
)
def test_layouts_row_major_in_memory_are_accepted(
    client: rpjrt.Client, shape: tuple[int, ...], m2m: list[int]
) -> None:
    target = _name("lay")
    rpjrt.ffi.register(client, target, lambda call: call.args[0].to_numpy() + 1)
    ty = f"tensor<{'x'.join(map(str, shape))}xf32>"
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    (y,) = client.compile(_program(target, ty, _layouts(m2m)))(x)
    np.testing.assert_array_equal(y.to_numpy(), x + 1)


@pytest.mark.parametrize("shape,m2m", [((2, 3), [0, 1]), ((2, 1, 3), [0, 1, 2]), ((2, 3, 4), [1, 2, 0])])
def test_layouts_not_row_major_in_memory_are_still_refused(
    client: rpjrt.Client, shape: tuple[int, ...], m2m: list[int]
) -> None:
    target = _name("lay_bad")
    rpjrt.ffi.register(client, target, lambda call: call.args[0].to_numpy() + 1)
    ty = f"tensor<{'x'.join(map(str, shape))}xf32>"
    with pytest.raises(rpjrt.InvalidArgumentError, match="wrong order"):
        client.compile(_program(target, ty, _layouts(m2m)))


# ------------------------------------------------------ 6: device_ordinal


def test_device_ordinal_is_none_at_the_instantiate_stage(client: rpjrt.Client) -> None:
    target = _name("ordinal")
    seen: dict[str, Any] = {}

    def inst(call: rpjrt.ffi.FfiCall) -> Any:
        seen["instantiate"] = (call.device_ordinal, call.user_data, call.state, call.args, call.rets)
        return {}

    def h(call: rpjrt.ffi.FfiCall) -> Any:
        seen["execute"] = call.device_ordinal
        return call.args[0].to_numpy()

    if not _has_instantiate(client):
        with pytest.raises(rpjrt.UnimplementedError):
            rpjrt.ffi.register(client, target, h, instantiate=inst)
        return
    rpjrt.ffi.register(client, target, h, instantiate=inst)
    client.compile(_program(target))(X4)[0].to_numpy()
    assert seen == {"instantiate": (None, None, None, (), ()), "execute": 0}, seen


# ------------------------------------------------------ 7: the wait limit's numbers


def test_the_wait_limit_refuses_odd_numbers_with_short_right_messages() -> None:
    before = rpjrt.ffi.set_handler_wait_limit()
    try:
        cases: list[tuple[Any, str]] = [
            (decimal.Decimal("sNaN"), "not a number"),
            (decimal.Decimal("NaN"), "not a number"),
            (decimal.Decimal("-sNaN"), "not a number"),
            (decimal.Decimal("Infinity"), "above 86400"),
            (decimal.Decimal("1e400"), "above 86400"),
            (decimal.Decimal("1e-400"), "below 0.001"),
            (1e300, "above 86400"),
            (10**400, "above 86400"),
            (fractions.Fraction(1, 10**400), "below 0.001"),
            (fractions.Fraction(10**400, 3), "above 86400"),
            (-(10**400), "below 0.001"),
            (-1, "below 0.001"),
            (-0.0, "below 0.001"),
            (0, "below 0.001"),
            (0.000999999, "below 0.001"),
            (86400.00000001, "above 86400"),
            (float("nan"), "not a number"),
            (float("-inf"), "below 0.001"),
            (np.float32("nan"), "not a number"),
            (np.float64(1e9), "above 86400"),
            (np.int64(-5), "below 0.001"),
        ]
        for value, why in cases:
            with pytest.raises(rpjrt.InvalidArgumentError) as info:
                rpjrt.ffi.set_handler_wait_limit(value)
            msg = str(info.value)
            assert "from 0.001 to 86400" in msg and why in msg, (value, msg)
            assert len(msg) < 160, (value, msg)
        for wrong in (True, np.bool_(False), 1 + 0j, "3", np.array([5.0]), None.__class__):
            with pytest.raises(rpjrt.InvalidArgumentError, match="real number") as info2:
                rpjrt.ffi.set_handler_wait_limit(wrong)  # type: ignore[arg-type]
            assert isinstance(info2.value, TypeError), wrong
            assert len(str(info2.value)) < 80, str(info2.value)
        # Nothing refused changed the limit; the good ones are taken exactly.
        assert rpjrt.ffi.set_handler_wait_limit() == before
        for good, want in [
            (fractions.Fraction(3, 2), 1.5),
            (decimal.Decimal("0.001"), 0.001),
            (np.float16(0.5), 0.5),
            (np.array(2.0), 2.0),
            (86400, 86400.0),
        ]:
            rpjrt.ffi.set_handler_wait_limit(good)
            assert rpjrt.ffi.set_handler_wait_limit() == want, good
        # The binding's own refusal is short too.
        with pytest.raises(rpjrt.InvalidArgumentError) as info3:
            rpjrt._rpjrt._ffi_handler_wait_limit(1e300)
        assert len(str(info3.value)) < 120, str(info3.value)
    finally:
        rpjrt.ffi.set_handler_wait_limit(before)
