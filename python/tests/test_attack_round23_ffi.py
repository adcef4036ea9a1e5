"""Round 23 (outside checks of custom calls): regressions of the fixes.

- ``async def``, generator and async generator handlers (and instantiate functions) are
  refused when registered: the plugin calls handlers synchronously. A plain handler that
  returns a coroutine or generator anyway is refused at the call with words that say so
  (the coroutine is closed, so Python does not warn that it was never awaited); it read as
  a 0-d object array.
- A traceback frame whose file name holds a lone surrogate (``os.fsdecode`` of a non-UTF-8
  path) keeps its name in the error (it was dropped).
- A ``KeyboardInterrupt`` raised while rpjrt describes a handler's exception (its
  ``__str__``) reaches the caller as itself, as one the handler raises does.
"""

from __future__ import annotations

import functools
import itertools
import re
import warnings
from typing import Any

import numpy as np
import pytest

import rpjrt
import rpjrt.ffi

_ids = itertools.count()


def _name(base: str) -> str:
    return f"r23_{base}_{next(_ids)}"


def _program(target: str) -> str:
    return f"""func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {{
  %0 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32}} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}}
"""


X4 = np.arange(4, dtype=np.float32)


async def _coroutine_handler(call: Any) -> Any:
    return call.args[0].to_numpy()


def _generator_handler(call: Any) -> Any:
    yield call.args[0].to_numpy()


async def _async_generator_handler(call: Any) -> Any:
    yield call.args[0].to_numpy()


class _AsyncCallable:
    async def __call__(self, call: Any) -> Any:
        return call.args[0].to_numpy()


@pytest.mark.parametrize(
    "handler, what",
    [
        (_coroutine_handler, "an async def function"),
        (_generator_handler, "a generator function"),
        (_async_generator_handler, "an async generator function"),
        (_AsyncCallable(), "an async def function"),
        (functools.partial(_coroutine_handler), "an async def function"),
    ],
)
def test_asynchronous_handlers_are_refused_at_registration(
    client: rpjrt.Client, handler: Any, what: str
) -> None:
    target = _name("async")
    with pytest.raises(TypeError, match=f"handler is {what}: the plugin calls it synchronously"):
        rpjrt.ffi.register(client, target, handler)
    assert not rpjrt.ffi.is_registered(client, target)


def test_an_asynchronous_instantiate_function_is_refused(client: rpjrt.Client) -> None:
    with pytest.raises(TypeError, match="instantiate function is an async def function"):
        rpjrt.ffi.register(
            client, _name("inst"), lambda call: None, instantiate=_coroutine_handler
        )


@pytest.mark.parametrize("kind", ["coroutine", "generator"])
def test_a_coroutine_returned_by_a_plain_handler_is_named(client: rpjrt.Client, kind: str) -> None:
    target = _name("returns")
    make = _coroutine_handler if kind == "coroutine" else _generator_handler
    rpjrt.ffi.register(client, target, lambda call: make(call))
    exe = client.compile(_program(target))
    with warnings.catch_warnings():
        # A coroutine left unclosed would warn "never awaited" when collected.
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(rpjrt.InvalidArgumentError) as info:
            exe(X4, wait=True)
        import gc

        gc.collect()
    message = str(info.value)
    expected = "a generator" if kind == "generator" else "a coroutine (is it an async def"
    assert f"returned {expected}" in message, message
    assert "handlers run synchronously" in message, message
    # The handler did not run as a mistake of dtype or shape.
    assert "object" not in message, message


def test_a_surrogate_in_a_traceback_file_name_is_kept(client: rpjrt.Client) -> None:
    ns: dict[str, Any] = {}
    code = compile("def f(call):\n    raise ValueError('boom')\n", "/tmp/d/h\udce9ndler.py", "exec")
    exec(code, ns)
    target = _name("file")
    rpjrt.ffi.register(client, target, ns["f"])
    exe = client.compile(_program(target))
    with pytest.raises(rpjrt.InvalidArgumentError) as info:
        exe(X4, wait=True)
    message = str(info.value)
    assert "raised ValueError: boom" in message, message
    # The name stays, its unencodable character replaced.
    assert re.search("h\ufffd+ndler\\.py:2 in f", message), message


class _StrInterrupted(Exception):
    def __str__(self) -> str:
        raise KeyboardInterrupt("Ctrl-C while rpjrt describes the error (r23)")


def test_a_keyboard_interrupt_while_describing_an_error_propagates(client: rpjrt.Client) -> None:
    target = _name("ki")

    def handler(call: Any) -> Any:
        raise _StrInterrupted()

    rpjrt.ffi.register(client, target, handler)
    exe = client.compile(_program(target))
    with pytest.raises(KeyboardInterrupt, match="while rpjrt describes the error"):
        exe(X4, wait=True)
    # The program runs again afterwards.
    rpjrt.ffi.register(client, target, lambda call: call.args[0].to_numpy() * 2, replace=True)
    np.testing.assert_array_equal(exe(X4, wait=True)[0].to_numpy(), X4 * 2)


def test_an_awaitable_array_like_returned_is_taken_as_data(client: rpjrt.Client) -> None:
    # An rpjrt Buffer is awaitable; it is an array-like like any other here.
    target = _name("buffer")
    rpjrt.ffi.register(client, target, lambda call: client.put(call.args[0].to_numpy() + 10))
    exe = client.compile(_program(target))
    np.testing.assert_array_equal(exe(X4, wait=True)[0].to_numpy(), X4 + 10)


def test_a_coroutine_from_a_handler_without_results_is_named_and_closed(
    client: rpjrt.Client,
) -> None:
    ran: list[int] = []

    async def body(call: Any) -> None:
        ran.append(1)

    @functools.wraps(body)
    def wrapped(call: Any) -> Any:  # a plain function: registration cannot tell
        return body(call)

    target = _name("noresult")
    rpjrt.ffi.register(client, target, wrapped)
    exe = client.compile(
        f"""func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {{
  stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32, has_side_effect = true}} : (tensor<4xf32>) -> ()
  return %x : tensor<4xf32>
}}"""
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(rpjrt.InvalidArgumentError, match="returned a coroutine"):
            exe(X4, wait=True)
        import gc

        gc.collect()
    assert ran == []
