"""Round 17 (outside test of Python custom-call handlers), on both CPU plugins:

1. A handler that runs its program one level deeper on another thread (a thread pool, a
   thread it joins) and waits for it used to hang once about 32 levels were in flight (the
   plugins' bound on executions in flight); at most 16 Python handlers are now in progress
   at once, and a waiting one that sees none of them return is refused with
   ResourceExhaustedError, while many threads with prompt handlers keep working.
2. ``FfiBuffer.__array__`` follows numpy's protocol: the same dtype is the view itself,
   ``copy=True`` a copy, ``copy=False`` where a copy is needed a ValueError.
3. A bool result's bytes are made 0/1 whichever way the handler wrote them.
4. A plain list returned for one result: the error says a list is one value per result.
5. Every BaseException that is not an Exception propagates as itself.
"""

from __future__ import annotations

import ctypes
import itertools
import sys
from typing import Any

import numpy as np
import pytest

import rpjrt
import rpjrt.ffi

from .conftest import run_python

_ids = itertools.count()


def _name(base: str) -> str:
    """A fresh target name (registrations are per process and per plugin)."""
    return f"r17_{base}_{next(_ids)}"


def _program(target: str, ty: str = "tensor<4xf32>") -> str:
    return f"""func.func public @main(%x: {ty}) -> {ty} {{
  %0 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32}} : ({ty}) -> {ty}
  return %0 : {ty}
}}
"""


X4 = np.arange(4, dtype=np.float32)
NESTING = "rpjrt's custom-call nesting limit"


# ------------------------------------------------------ 1: nesting through other threads

# A handler that runs its own program one level deeper on another thread and waits for it.
# HOW is "pool" (a ThreadPoolExecutor) or "thread" (a thread it starts and joins); the
# main thread waits for the whole chain on a daemon thread with a deadline, so a hang is
# reported as such instead of hanging the test.
_CHAIN = """
import concurrent.futures as cf, threading, time, numpy as np, rpjrt, rpjrt.ffi
c = rpjrt.Client({plugin!r})
LIMIT = {limit!r}
if LIMIT is not None:
    assert rpjrt.ffi.set_handler_wait_limit(LIMIT) == 5.0
pool = cf.ThreadPoolExecutor(64)
box = {{"deepest": 0}}
def deeper(x, d):
    return box["e"](x + 1, ffi_user_data=d + 1)[0].to_numpy()
def h(call):
    d = call.user_data
    box["deepest"] = max(box["deepest"], d)
    x = call.args[0].to_numpy()
    if d >= box["depth"]:
        return x
    if {how!r} == "pool":
        return pool.submit(deeper, x, d).result()
    out = {{}}
    def w():
        try:
            out["r"] = deeper(x, d)
        except BaseException as e:
            out["e"] = e
    t = threading.Thread(target=w, daemon=True)
    t.start()
    t.join(60)
    if t.is_alive():
        raise RuntimeError(f"level {{d}} hung")
    if "e" in out:
        raise out["e"]
    return out["r"]
rpjrt.ffi.register(c, "r17_chain", h)
box["e"] = c.compile({program!r})

def run(depth):
    box["depth"], box["deepest"] = depth, 0
    got = {{}}
    def top():
        try:
            got["r"] = box["e"](np.zeros(4, np.float32), ffi_user_data=0)[0].to_numpy()
        except BaseException as e:
            got["e"] = e
    t = threading.Thread(target=top, daemon=True)
    started = time.monotonic()
    t.start()
    t.join(45)
    assert not t.is_alive(), f"a chain {{depth}} deep hung (deepest level {{box['deepest']}})"
    return got, time.monotonic() - started

# A short chain through other threads works.
got, _ = run(5)
assert got.get("r") is not None and got["r"].tolist() == [5.0] * 4, got
# A deep one is refused, not hung, and says why and what to do.
got, took = run(40)
e = got.get("e")
assert isinstance(e, rpjrt.ResourceExhaustedError), (type(e), str(e)[-2000:])
msg = str(e)
assert {nesting!r} in msg, msg[-2000:]
assert "Python handlers are in progress" in msg and "set_handler_wait_limit" in msg, msg[-2000:]
assert "thread pool" in msg, msg[-2000:]
assert e.hint is None and e.memory_stats is None
assert box["deepest"] <= 16, box
if LIMIT is not None:
    assert took < 30, took
# Nothing is left stuck: the program runs again afterwards.
got, _ = run(3)
assert got.get("r").tolist() == [3.0] * 4, got
print("ok", round(took, 2), box["deepest"])
"""


@pytest.mark.parametrize(
    ("how", "limit"), [("pool", 0.5), ("thread", None)], ids=["pool-0.5s", "thread-default"]
)
def test_a_handler_waiting_for_deeper_levels_on_other_threads_is_refused_not_hung(
    plugin_path: str, how: str, limit: float | None
) -> None:
    """The outside test's t08/t07: each level runs the next through another thread and
    waits. It used to enter 32 levels and hang; now at most 16 Python handlers are in
    progress, the 17th waits for one to return, and when none does within the wait limit
    it is refused, failing every level above instead of hanging (also with the default
    5 s limit)."""
    code = _CHAIN.format(
        plugin=plugin_path, limit=limit, how=how, program=_program("r17_chain"), nesting=NESTING
    )
    r = run_python(code, timeout=120)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "ok" in r.stdout, r.stdout


_WIDE = """
import threading, time, numpy as np, rpjrt, rpjrt.ffi
c = rpjrt.Client({plugin!r})
lock = threading.Lock()
now = {{"in": 0, "max": 0, "calls": 0}}
def h(call):
    with lock:
        now["in"] += 1
        now["calls"] += 1
        now["max"] = max(now["max"], now["in"])
    try:
        if call.user_data:
            time.sleep(call.user_data)       # releases the GIL: many in progress at once
        return call.args[0].to_numpy() * 2
    finally:
        with lock:
            now["in"] -= 1
rpjrt.ffi.register(c, "r17_wide", h)
e = c.compile({program!r})
errors, wrong = [], []
def work(i, n, nap):
    x = np.full(4, float(i), np.float32)
    for _ in range(n):
        try:
            y = e(x, ffi_user_data=nap)[0].to_numpy()
        except BaseException as ex:
            errors.append(f"{{type(ex).__name__}}: {{str(ex)[:300]}}")
            return
        if y.tolist() != [2.0 * i] * 4:
            wrong.append((i, y.tolist()))
for n, nap in [(25, 0.0), (4, 0.05)]:
    threads = [threading.Thread(target=work, args=(i, n, nap), daemon=True) for i in range(48)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert not any(t.is_alive() for t in threads), "some threads never returned"
    assert not errors, errors[:3]
    assert not wrong, wrong[:3]
    print("took", n, nap, round(time.monotonic() - started, 2), "max in progress", now["max"])
# 48 threads whose handlers nap: the handlers in progress at once were bounded by 16
# (without the bound, up to the plugin's 32 executions in flight would be).
assert 2 <= now["max"] <= 16, now
assert now["calls"] == 48 * 25 + 48 * 4, now
print("ok")
"""


def test_many_threads_with_prompt_handlers_all_succeed(plugin_path: str) -> None:
    """Ordinary concurrent use is not refused: 48 threads executing a program whose handler
    returns promptly (at once, or after a 50 ms nap that releases the GIL, so more than 16
    would be in progress at once), every result right; the handlers in progress at once
    never exceed 16."""
    r = run_python(_WIDE.format(plugin=plugin_path, program=_program("r17_wide")), timeout=150)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "ok" in r.stdout, r.stdout


def test_the_wait_limit_is_checked_and_restored(client: rpjrt.Client) -> None:
    before = rpjrt.ffi.set_handler_wait_limit()
    assert before == 5.0
    try:
        assert rpjrt.ffi.set_handler_wait_limit(2.5) == 5.0
        assert rpjrt.ffi.set_handler_wait_limit() == 2.5
        for bad in (0, -1.0, float("nan"), float("inf"), 1e9):
            with pytest.raises(rpjrt.InvalidArgumentError, match="handler wait limit"):
                rpjrt.ffi.set_handler_wait_limit(bad)
        with pytest.raises(TypeError, match="number"):
            rpjrt.ffi.set_handler_wait_limit("3")  # type: ignore[arg-type]
        assert rpjrt.ffi.set_handler_wait_limit() == 2.5
        # Handlers keep running under the new limit.
        target = _name("limit")
        rpjrt.ffi.register(client, target, lambda call: call.args[0].to_numpy() + 1)
        (y,) = client.compile(_program(target))(X4)
        np.testing.assert_array_equal(y.to_numpy(), X4 + 1)
    finally:
        rpjrt.ffi.set_handler_wait_limit(before)
    assert rpjrt.ffi.set_handler_wait_limit() == before


# ------------------------------------------------------ 2: numpy's __array__ protocol


def _run(client: rpjrt.Client, h: Any, x: Any = X4, ty: str = "tensor<4xf32>") -> Any:
    target = _name("arr")
    rpjrt.ffi.register(client, target, h)
    (y,) = client.compile(_program(target, ty))(x)
    return y.to_numpy()


@pytest.mark.parametrize("dtype", [np.float32, "float32", np.dtype("<f4"), None])
def test_asarray_of_a_result_with_its_own_dtype_is_the_view(client: rpjrt.Client, dtype: Any) -> None:
    """``np.asarray(call.rets[0], dtype=<its dtype>)`` (also with copy=False) is the view:
    what is written into it becomes the result (it used to be a private copy, and the
    result stayed zeros)."""

    def h(call: rpjrt.ffi.FfiCall) -> None:
        a = np.asarray(call.rets[0], dtype=dtype)
        a[:] = 5.0
        b = np.asarray(call.rets[0], dtype=dtype, copy=False)
        b[1] += 1.0
        assert np.shares_memory(a, b)
        assert call.rets[0].__array__(dtype) is not None

    np.testing.assert_array_equal(_run(client, h), [5.0, 6.0, 5.0, 5.0])


def test_array_copy_false_that_needs_a_copy_raises_value_error(client: rpjrt.Client) -> None:
    """``copy=False`` with another dtype raises ValueError naming why, on a result and on an
    argument (it used to return a converted copy whose writes were lost)."""
    seen: list[str] = []

    def h(call: rpjrt.ffi.FfiCall) -> None:
        for buf, kind in ((call.rets[0], "result"), (call.args[0], "argument")):
            for attempt in (
                lambda: np.asarray(buf, dtype=np.float64, copy=False),
                lambda: buf.__array__(np.int32, copy=False),
            ):
                try:
                    attempt()
                except ValueError as e:
                    seen.append(f"{kind}: {e}")
                else:
                    seen.append(f"{kind}: no error")
        call.rets[0].to_numpy()[:] = 7.0

    np.testing.assert_array_equal(_run(client, h), [7.0] * 4)
    assert len(seen) == 4, seen
    for s in seen:
        assert "no error" not in s, seen
        assert "copy=False" in s and "cannot avoid a copy" in s and "float32" in s, s
    assert "would not reach the result" in seen[0], seen[0]
    assert seen[2].startswith("argument:"), seen


def test_array_copy_true_and_conversions_are_copies(client: rpjrt.Client) -> None:
    """``copy=True`` is always a fresh copy (writing it changes no result); another dtype
    gives converted values; an argument's own-dtype view is read-only, its copy is not."""
    checks: list[Any] = []

    def h(call: rpjrt.ffi.FfiCall) -> None:
        c = np.array(call.rets[0], copy=True)
        c[:] = 9.0  # a copy: lost
        c2 = call.rets[0].__array__(None, copy=True)
        c2[:] = 9.0
        a64 = np.asarray(call.args[0], dtype=np.float64)
        checks.append((a64.dtype, a64.tolist()))
        v = np.asarray(call.args[0], dtype=np.float32)
        checks.append(v.flags.writeable)
        checks.append(np.array(call.args[0], copy=True).flags.writeable)
        checks.append(np.asarray(call.args[0]).flags.writeable)
        np.asarray(call.rets[0])[2] = 3.0  # the view: kept

    np.testing.assert_array_equal(_run(client, h), [0.0, 0.0, 3.0, 0.0])
    assert checks == [(np.dtype(np.float64), [0.0, 1.0, 2.0, 3.0]), False, True, False], checks


# ------------------------------------------------------ 3: bool results are 0 or 1


_BOOL_PROGRAM = """func.func public @main(%x: tensor<4xi1>) -> (tensor<4xi1>, tensor<4xi32>, tensor<4xi32>) {{
  %0 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32}} : (tensor<4xi1>) -> tensor<4xi1>
  %1 = stablehlo.convert %0 : (tensor<4xi1>) -> tensor<4xi32>
  %2 = stablehlo.not %0 : tensor<4xi1>
  %3 = stablehlo.convert %2 : (tensor<4xi1>) -> tensor<4xi32>
  return %0, %1, %3 : tensor<4xi1>, tensor<4xi32>, tensor<4xi32>
}}
"""

_STRAY = [2, 0, 1, 255]


def _ret_returned(call: rpjrt.ffi.FfiCall) -> Any:
    return np.array(_STRAY, np.uint8).view(np.bool_)


def _ret_memoryview(call: rpjrt.ffi.FfiCall) -> None:
    call.rets[0].memoryview()[:] = bytes(_STRAY)


def _ret_numpy_view(call: rpjrt.ffi.FfiCall) -> None:
    call.rets[0].to_numpy().view(np.uint8)[:] = _STRAY


def _ret_data(call: rpjrt.ffi.FfiCall) -> None:
    ctypes.memmove(call.rets[0].data, bytes(_STRAY), 4)


def _ret_tuple(call: rpjrt.ffi.FfiCall) -> Any:
    return (np.array(_STRAY, np.uint8).view(np.bool_),)


@pytest.mark.parametrize(
    "h",
    [_ret_returned, _ret_tuple, _ret_memoryview, _ret_numpy_view, _ret_data],
    ids=["returned", "tuple", "memoryview", "numpy-view", "data"],
)
def test_bool_result_bytes_become_zero_or_one(client: rpjrt.Client, h: Any) -> None:
    """A bool result holding bytes 2 and 255 (a ``.view(np.bool_)`` of other bytes, or raw
    bytes written through a view or ``data``) reads as nonzero-is-true, as put reads bool
    bytes: the result holds 0/1 and later ops compute on true/false (the 0.81 plugin's
    convert gave 2 and -1)."""
    target = _name("bool")
    rpjrt.ffi.register(client, target, h)
    out, as_int, not_int = client.compile(_BOOL_PROGRAM.format(target=target))(np.zeros(4, bool))
    assert out.to_numpy().view(np.uint8).tolist() == [1, 0, 1, 1]
    assert as_int.to_numpy().tolist() == [1, 0, 1, 1]
    assert not_int.to_numpy().tolist() == [0, 1, 0, 0]


def test_bool_in_place_result_passes_through(client: rpjrt.Client) -> None:
    """A bool result aliasing its argument, left alone, still passes the argument through
    (normalising touches only bytes that are not 0/1)."""
    target = _name("bool_alias")
    rpjrt.ffi.register(client, target, lambda call: None)
    prog = f"""func.func public @main(%x: tensor<4xi1>) -> tensor<4xi1> {{
  %0 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32,
      output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [],
        operand_index = 0, operand_tuple_indices = []>]}} : (tensor<4xi1>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}}
"""
    x = np.array([True, False, False, True])
    (y,) = client.compile(prog)(x)
    assert y.to_numpy().tolist() == x.tolist()


# ------------------------------------------------------ 4: a plain list for one result


def test_a_plain_list_for_one_result_says_a_list_is_one_value_per_result(
    client: rpjrt.Client,
) -> None:
    with pytest.raises(rpjrt.InvalidArgumentError) as info:
        _run(client, lambda call: [0.0, 1.0, 2.0, 3.0, 4.0])
    msg = str(info.value)
    assert "returned 5 values" in msg, msg
    assert "one value per result" in msg and "np.asarray" in msg, msg
    assert "has 1 result" in msg and "1 results" not in msg, msg
    # The fix the message suggests works.
    np.testing.assert_array_equal(
        _run(client, lambda call: np.asarray([0.0, 1.0, 2.0, 3.0], np.float32)), [0, 1, 2, 3]
    )
    # With several results the count is explained, without the one-array hint.
    target = _name("two")
    rpjrt.ffi.register(client, target, lambda call: (X4, X4, X4))
    prog = f"""func.func public @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {{
  %0:2 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32}} : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %0#0, %0#1 : tensor<4xf32>, tensor<4xf32>
}}
"""
    with pytest.raises(rpjrt.InvalidArgumentError) as info:
        client.compile(prog)(X4)
    msg = str(info.value)
    assert "returned 3 values (a tuple, which is taken as one value per result)" in msg, msg
    assert "has 2 results" in msg and "np.asarray" not in msg, msg


# ------------------------------------------------------ 5: BaseExceptions


class _OwnBase(BaseException):
    pass


_BASE_EXCEPTIONS: dict[str, Any] = {
    "own-subclass": lambda: _OwnBase("own"),
    "BaseException": lambda: BaseException("plain"),
    "GeneratorExit": lambda: GeneratorExit("gen"),
}
if sys.version_info >= (3, 11):
    _BASE_EXCEPTIONS["BaseExceptionGroup"] = lambda: BaseExceptionGroup(  # noqa: F821
        "grp", [KeyboardInterrupt("inner")]
    )


@pytest.mark.parametrize("make", list(_BASE_EXCEPTIONS.values()), ids=list(_BASE_EXCEPTIONS))
def test_every_base_exception_propagates_as_itself(client: rpjrt.Client, make: Any) -> None:
    raised: list[BaseException] = []

    def h(call: rpjrt.ffi.FfiCall) -> None:
        e = make()
        raised.append(e)
        raise e

    with pytest.raises(BaseException) as info:
        _run(client, h)
    assert info.value is raised[0], (info.value, raised)
    assert not isinstance(info.value, rpjrt.Error)


def test_docs_say_every_base_exception_propagates() -> None:
    doc = rpjrt.ffi.__doc__ or ""
    assert "GeneratorExit" in doc and "``BaseException`` that is not an ``Exception``" in doc
    assert "GeneratorExit" in (rpjrt.ffi.FfiCall.__doc__ or "")
