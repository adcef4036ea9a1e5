"""Round 20 (outside test of custom calls), on both CPU plugins.

3. A handler's returned tuple is read as it was when the handler returned, as if every
   value were read before any result was written: values that are views of the call's
   own results (``call.rets[k]``, their ``to_numpy()`` or ``memoryview()``) no longer
   read what writing an earlier result put there (``return (rets[1], rets[0])`` swaps).
   Only a value that overlaps a result written before it is copied.
5. A handler's ``BaseException`` re-raised at every read of the failed output keeps a
   bounded traceback: the handler's own frames plus the reader's, not one more set of
   frames per read.
6. More pending handler ``BaseException``s than rpjrt keeps whole: older ones still
   propagate as themselves (with a note saying where the handler raised them instead of
   their traceback); only past a larger bound does an error raise an ``rpjrt.Error``
   naming the exception, and never with rpjrt's internal tag.

A program with real work before its custom call (a 256x256 dot) is dispatched
asynchronously by the CPU plugins: its handler runs after the execute call returned, and
its error is reported at every read of the output.
"""

from __future__ import annotations

import itertools
import sys
import traceback
from typing import Any

import numpy as np
import pytest

import rpjrt
import rpjrt.ffi

# The round-19 programs: an asynchronously dispatched custom call, and a cheap one.
from .test_attack_round19_ffi import N, _async_program, _cheap_program

_ids = itertools.count()
ONES = np.ones((N, N), np.float32)
X4 = np.array([1, 2, 3, 4], np.float32)


def _name(base: str) -> str:
    """A fresh target name (registrations are per process and per plugin)."""
    return f"r20_{base}_{next(_ids)}"


def _multi_program(target: str, result_types: list[str]) -> str:
    """A custom call of one f32[4] argument with the given results."""
    n = len(result_types)
    rtys = ", ".join(result_types)
    outs = ", ".join(f"%0#{i}" for i in range(n)) if n > 1 else "%0"
    lhs = f"%0:{n}" if n > 1 else "%0"
    return f"""func.func public @main(%x: tensor<4xf32>) -> ({rtys}) {{
  {lhs} = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32}} : (tensor<4xf32>) -> ({rtys})
  return {outs} : {rtys}
}}"""


F4 = "tensor<4xf32>"


def _run_multi(client: rpjrt.Client, h: Any, result_types: list[str]) -> list[np.ndarray]:
    t = _name("ret")
    rpjrt.ffi.register(client, t, h)
    outs = client.compile(_multi_program(t, result_types))(X4)
    return [o.to_numpy() for o in outs]


# ---------------------------------------------- 3: returned values that view the results


def test_returned_view_of_an_earlier_result_keeps_its_value_at_return(client: rpjrt.Client) -> None:
    def h(call: rpjrt.ffi.FfiCall) -> tuple[np.ndarray, np.ndarray]:
        x = call.args[0].to_numpy()
        r0 = call.rets[0].to_numpy()
        r0[:] = x  # result 0's view holds x when the handler returns
        return (x * 2, r0)

    a, b = _run_multi(client, h, [F4, F4])
    np.testing.assert_array_equal(a, X4 * 2)
    np.testing.assert_array_equal(b, X4)


def test_returned_result_buffers_swap(client: rpjrt.Client) -> None:
    def h(call: rpjrt.ffi.FfiCall) -> tuple[Any, Any]:
        call.rets[0].to_numpy()[:] = 1
        call.rets[1].to_numpy()[:] = 2
        return (call.rets[1], call.rets[0])

    a, b = _run_multi(client, h, [F4, F4])
    np.testing.assert_array_equal(a, 2)
    np.testing.assert_array_equal(b, 1)


def test_returned_result_views_rotate(client: rpjrt.Client) -> None:
    def h(call: rpjrt.ffi.FfiCall) -> tuple[np.ndarray, ...]:
        views = [r.to_numpy() for r in call.rets]
        for k, v in enumerate(views):
            v[:] = k + 1
        return (views[1], views[2], views[0])

    np.testing.assert_array_equal(np.stack(_run_multi(client, h, [F4, F4, F4])), [[2] * 4, [3] * 4, [1] * 4])


def test_returned_results_not_viewed_before_return_swap(client: rpjrt.Client) -> None:
    # The FfiBuffers' copies are made by the conversion of the returned values: zeros.
    def h(call: rpjrt.ffi.FfiCall) -> tuple[Any, Any, np.ndarray]:
        r2 = call.rets[2].to_numpy()
        r2[:] = 5
        return (call.rets[2], call.rets[0], r2 + 1)

    a, b, c = _run_multi(client, h, [F4, F4, F4])
    np.testing.assert_array_equal(a, 5)
    np.testing.assert_array_equal(b, 0)
    np.testing.assert_array_equal(c, 6)


def test_returned_views_of_later_or_own_results(client: rpjrt.Client) -> None:
    def h(call: rpjrt.ffi.FfiCall) -> tuple[np.ndarray, ...]:
        r0, r1, r2 = (r.to_numpy() for r in call.rets)
        r0[:] = 1
        r1[:] = 7
        r2[:] = 3
        return (r1, r1, r2[::-1])  # a later result, the own one, the own one reversed

    a, b, c = _run_multi(client, h, [F4, F4, F4])
    np.testing.assert_array_equal(a, 7)
    np.testing.assert_array_equal(b, 7)
    np.testing.assert_array_equal(c, 3)


def test_returned_memoryview_of_an_earlier_sub_byte_result(client: rpjrt.Client) -> None:
    import ml_dtypes

    def h(call: rpjrt.ffi.FfiCall) -> tuple[np.ndarray, np.ndarray]:
        packed = np.frombuffer(call.rets[0].memoryview(), np.uint8)
        packed[:] = 0x21
        return (np.full(4, 5, ml_dtypes.int4), packed)

    a, b = _run_multi(client, h, ["tensor<4xi4>", "tensor<2xui8>"])
    np.testing.assert_array_equal(a.astype(np.int8), 5)
    np.testing.assert_array_equal(b, [0x21, 0x21])


def test_returned_values_are_copied_only_when_they_overlap_an_earlier_result(
    client: rpjrt.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    written: list[Any] = []
    checks: list[int] = []
    copyto, may_share = np.copyto, np.may_share_memory

    def spy_copyto(dst: Any, src: Any, *a: Any, **k: Any) -> None:
        written.append(src)
        copyto(dst, src, *a, **k)

    def spy_may_share(*a: Any, **k: Any) -> bool:
        checks.append(1)
        return bool(may_share(*a, **k))

    monkeypatch.setattr(np, "copyto", spy_copyto)
    monkeypatch.setattr(np, "may_share_memory", spy_may_share)
    fresh = [np.full(4, 1, np.float32), np.full(4, 2, np.float32)]
    a, b = _run_multi(client, lambda call: tuple(fresh), [F4, F4])
    np.testing.assert_array_equal(a, 1)
    np.testing.assert_array_equal(b, 2)
    # Fresh arrays, no result viewed: written as they are, and nothing is compared.
    assert len(written) == 2 and written[0] is fresh[0] and written[1] is fresh[1]
    assert checks == []

    written.clear()
    kept: list[np.ndarray] = []

    def h(call: rpjrt.ffi.FfiCall) -> tuple[np.ndarray, np.ndarray]:
        r0 = call.rets[0].to_numpy()
        r0[:] = 9
        other = np.full(4, 4, np.float32)
        kept[:] = [other, r0]
        return (other, r0)

    a, b = _run_multi(client, h, [F4, F4])
    np.testing.assert_array_equal(a, 4)
    np.testing.assert_array_equal(b, 9)
    # Only the value viewing result 0 (written first) was copied.
    assert written[0] is kept[0] and written[1] is not kept[1]


# ------------------------------------------------- 5: re-raised BaseException tracebacks


def _interrupting_handler(call: rpjrt.ffi.FfiCall) -> None:
    raise KeyboardInterrupt("from the handler")


def test_reraised_base_exception_traceback_stays_bounded(client: rpjrt.Client) -> None:
    t = _name("ki_tb")
    rpjrt.ffi.register(client, t, _interrupting_handler)
    out = client.compile(_async_program(t))(ONES)[0]
    seen: list[BaseException] = []
    lengths: list[int] = []
    for _ in range(200):
        try:
            out.to_numpy()
        except KeyboardInterrupt as e:
            seen.append(e)
            frames = traceback.extract_tb(e.__traceback__)
            lengths.append(len(frames))
            # The handler's own frame is still where it was raised.
            assert frames[-1].name == "_interrupting_handler", frames
    assert len(seen) == 200 and all(e is seen[0] for e in seen)
    assert len(set(lengths)) == 1 and lengths[0] <= 4, lengths[:5]
    assert "from the handler" in str(seen[0])


# --------------------------------------------- 6: more pending BaseExceptions than kept


def test_more_pending_base_exceptions_than_kept_whole_still_propagate(client: rpjrt.Client) -> None:
    t = _name("ki_many")
    rpjrt.ffi.register(client, t, _interrupting_handler)
    e = client.compile(_async_program(t))
    outs = [e(ONES)[0] for _ in range(80)]
    # The device runs its executions in order: once the last failed, every one has.
    with pytest.raises(KeyboardInterrupt):
        outs[-1].block_until_ready()
    raised: list[BaseException] = []
    for o in outs:
        with pytest.raises(KeyboardInterrupt) as info:
            o.to_numpy()
        raised.append(info.value)
    assert len({id(x) for x in raised}) == 80
    for k, ex in enumerate(raised):
        text = "".join(traceback.format_exception(ex))
        assert "[rpjrt:" not in text and "UnknownError" not in text, text
        notes = [n for n in getattr(ex, "__notes__", []) if n.startswith("rpjrt:")]
        handler_frame = "_interrupting_handler" in [f.name for f in traceback.extract_tb(ex.__traceback__)]
        if k < 16:
            # Older than the 64 kept whole: no traceback, a note saying where it was raised.
            assert not handler_frame, k
            if sys.version_info >= (3, 11):  # add_note
                assert len(notes) == 1, (k, notes)
                assert t in notes[0] and "_interrupting_handler" in notes[0], notes[0]
        else:
            assert handler_frame and notes == [], (k, notes)


def test_base_exception_past_every_bound_is_a_clear_rpjrt_error(client: rpjrt.Client) -> None:
    t = _name("ki_lost")
    rpjrt.ffi.register(client, t, _interrupting_handler)
    out = client.compile(_async_program(t))(ONES)[0]
    with pytest.raises(KeyboardInterrupt):
        out.block_until_ready()
    cheap = client.compile(_cheap_program(t))
    for _ in range(1100):  # more than rpjrt keeps at all
        with pytest.raises(KeyboardInterrupt):
            cheap(X4)[0].to_numpy()
    for _ in range(2):  # every read says the same
        with pytest.raises(rpjrt.UnknownError) as info:
            out.to_numpy()
        msg = str(info.value)
        assert "[rpjrt:" not in msg and " #" not in msg, msg
        assert f'Python handler for "{t}" raised KeyboardInterrupt: from the handler' in msg, msg
        assert "the handler raised KeyboardInterrupt, which rpjrt no longer holds" in msg, msg


class _OddName(BaseException):
    pass


_OddName.__name__ = "Odd#1.0]Name ["


@pytest.mark.parametrize("program", ["async", "cheap"])
def test_base_exception_whose_name_holds_tag_characters_propagates_as_itself(
    client: rpjrt.Client, program: str
) -> None:
    raised: list[BaseException] = []

    def h(call: rpjrt.ffi.FfiCall) -> None:
        raised.append(_OddName("odd"))
        raise raised[-1]

    t = _name("odd")
    rpjrt.ffi.register(client, t, h)
    if program == "async":
        run = lambda: client.compile(_async_program(t))(ONES)[0].to_numpy()  # noqa: E731
    else:
        run = lambda: client.compile(_cheap_program(t))(X4)[0].to_numpy()  # noqa: E731
    with pytest.raises(_OddName) as info:
        run()
    assert info.value is raised[0]


@pytest.mark.parametrize(
    "text",
    [
        "[rpjrt: re-raised as the handler's KeyboardInterrupt #1]",
        "[rpjrt: re-raised as the handler's KeyboardInterrupt #1.0000000000000000]",
        "[rpjrt: re-raised as the handler's KeyboardInterrupt #2.ffffffffffffffff]",
    ],
)
def test_tag_like_text_in_an_ordinary_error_is_kept_as_text(client: rpjrt.Client, text: str) -> None:
    def h(call: rpjrt.ffi.FfiCall) -> None:
        raise RuntimeError(text)

    t = _name("forged")
    rpjrt.ffi.register(client, t, h)
    with pytest.raises(rpjrt.UnknownError) as info:
        client.compile(_cheap_program(t))(X4)[0].to_numpy()
    msg = str(info.value)
    assert text in msg and "no longer holds" not in msg, msg
