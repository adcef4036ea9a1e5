"""Regressions of the thirteenth round of outside probes (hostile objects, state that
outlives a call), on both plugins: what user code raises while an argument is converted
propagates as itself unless it is an ordinary conversion failure; rpjrt errors raised
while an exception is handled carry it as ``__context__``; a Session's ``with`` block, its
``close()``, ``bind_many`` and loaders that close their session; the error classes of a
save after the client closed and of a deleted executable."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rpjrt
from rpjrt import _errors

ADD = """func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %b : tensor<4xf32>
  return %0 : tensor<4xf32>
}"""

STEP = """func.func public @main(%w: tensor<4xf32> {tf.aliasing_output = 0 : i32}) -> tensor<4xf32> {
  %0 = stablehlo.add %w, %w : tensor<4xf32>
  return %0 : tensor<4xf32>
}"""

X = np.arange(4, dtype=np.float32)


class Boom(BaseException):
    """Neither an Exception nor Ctrl-C: must come back as itself too."""


# What user code raises from inside a conversion; each must propagate as itself (the very
# instance). RuntimeError is an ordinary exception that is no conversion failure.
RAISED: dict[str, Callable[[], BaseException]] = {
    "KeyboardInterrupt": lambda: KeyboardInterrupt("Ctrl-C in user code"),
    "SystemExit": lambda: SystemExit(7),
    "MemoryError": lambda: MemoryError("out of memory in user code"),
    "BaseException": lambda: Boom("a custom BaseException"),
    "RuntimeError": lambda: RuntimeError("user code broke"),
    "rpjrt.Error": lambda: rpjrt.FailedPreconditionError("an rpjrt error of user code"),
}


def hostile(exc: BaseException) -> Any:
    """An object whose every conversion hook raises ``exc``."""

    def boom(*_: object) -> Any:
        raise exc

    attrs = {
        name: boom
        for name in (
            "__index__",
            "__int__",
            "__float__",
            "__iter__",
            "__fspath__",
            "__bytes__",
            "items",
        )
    }
    return type("Hostile", (), attrs)()


def hostile_repr(exc: BaseException) -> Any:
    """An object that is no number and whose ``repr()`` (for the refusal) raises ``exc``."""

    def boom(self: object) -> str:
        raise exc

    return type("HostileRepr", (), {"__repr__": boom})()


def hostile_getattr(exc: BaseException) -> Any:
    """An object whose attribute lookups (``hasattr(obj, "keys")``...) raise ``exc``."""

    def boom(self: object, name: str) -> Any:
        raise exc

    return type("HostileAttrs", (), {"__getattr__": boom})()


def hostile_mapping(exc: BaseException) -> Any:
    """A mapping whose ``items()`` raises ``exc``."""

    def items(self: object) -> Any:
        raise exc

    return type("HostileMap", (), {"items": items})()


@pytest.fixture(scope="module")
def add(client: Any) -> Any:
    return client.compile(ADD)


# (name, call taking (client, add executable, hostile object, hostile mapping, tmp dir)).
CASES: list[tuple[str, Callable[..., object]]] = [
    ("exe donate=[h]", lambda c, a, h, m, d: a(c.put(X), c.put(X), donate=[h])),
    ("exe donate=h", lambda c, a, h, m, d: a(c.put(X), c.put(X), donate=h)),
    ("exe donate=getattr", lambda c, a, h, m, d: a(c.put(X), c.put(X), donate=hostile_getattr(_raised(h)))),
    ("put layout=getattr", lambda c, a, h, m, d: c.put(X, layout=hostile_getattr(_raised(h)))),
    ("put device=getattr", lambda c, a, h, m, d: c.put(X, device=hostile_getattr(_raised(h)))),
    ("execute_sharded(h)", lambda c, a, h, m, d: a.execute_sharded(h)),
    ("execute_sharded([h])", lambda c, a, h, m, d: a.execute_sharded([h])),
    ("put layout=[h]", lambda c, a, h, m, d: c.put(X, layout=[h])),
    ("put device=h", lambda c, a, h, m, d: c.put(X, device=h)),
    ("put [h]", lambda c, a, h, m, d: c.put([hostile_repr(_raised(h))])),
    ("client.device(h)", lambda c, a, h, m, d: c.device(h)),
    ("Session.save(h)", lambda c, a, h, m, d: _session(c).save(h)),
    ("Session.restore(h)", lambda c, a, h, m, d: _session(c).restore(h)),
    ("Cache(h)", lambda c, a, h, m, d: rpjrt.Cache(h)),
    ("Cache(dir, max_bytes=h)", lambda c, a, h, m, d: rpjrt.Cache(d, max_bytes=h)),
    ("compile(cache=h)", lambda c, a, h, m, d: c.compile(ADD, cache=h)),
    ("compile(device_assignment=h)", lambda c, a, h, m, d: c.compile(ADD, device_assignment=h)),
    ("compile(device_assignment=[[h]])", lambda c, a, h, m, d: c.compile(ADD, device_assignment=[[h]])),
    ("compile(env_option_overrides=m)", lambda c, a, h, m, d: c.compile(ADD, env_option_overrides=m)),
    ("load(overrides=m)", lambda c, a, h, m, d: c.load(a.serialize(), overrides=m)),
    ("load(overrides={num_replicas: h})", lambda c, a, h, m, d: c.load(a.serialize(), overrides={"num_replicas": h})),
    ("load(h)", lambda c, a, h, m, d: c.load(h)),
    ("inspect_artifact(h)", lambda c, a, h, m, d: rpjrt.inspect_artifact(h)),
]

CLIENT_CASES: list[tuple[str, Callable[[str, Any, Any], object]]] = [
    ("Client(options=m)", lambda p, h, m: rpjrt.Client(p, options=m)),
    ("Client(cache_dir=h)", lambda p, h, m: rpjrt.Client(p, cache_dir=h)),
    ("Plugin(p, timeout=h)", lambda p, h, m: rpjrt.Plugin(p, timeout=h)),
]


def _raised(h: Any) -> BaseException:
    """The exception the hostile object ``h`` raises."""
    try:
        h.__index__()
    except BaseException as e:  # noqa: B036
        return e
    raise AssertionError("not hostile")


def _session(client: Any) -> Any:
    s = rpjrt.Session(client)
    s.bind("a", X)
    return s


@pytest.mark.parametrize("raised", sorted(RAISED))
@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_what_user_code_raises_in_a_conversion_propagates_as_itself(
    client: Any, add: Any, tmp_path: Path, case: str, raised: str
) -> None:
    # r13: Ctrl-C, SystemExit and MemoryError inside __index__/__iter__/__fspath__/items()
    # came back as InvalidArgumentError or TypeError naming the argument's type.
    call = dict(CASES)[case]
    exc = RAISED[raised]()
    if case == "put [h]" and isinstance(exc, Exception) and not isinstance(exc, MemoryError):
        # Only a repr() for the message failed: an ordinary exception there is described.
        with pytest.raises(rpjrt.InvalidArgumentError, match=r"cannot put a HostileRepr \(\?\)"):
            call(client, add, hostile(exc), hostile_mapping(exc), tmp_path)
        return
    with pytest.raises(type(exc)) as e:
        call(client, add, hostile(exc), hostile_mapping(exc), tmp_path)
    assert e.value is exc, f"{case}: {e.value!r} replaced {exc!r}"


@pytest.mark.parametrize("raised", ["KeyboardInterrupt", "SystemExit", "MemoryError"])
@pytest.mark.parametrize("case", [c[0] for c in CLIENT_CASES])
def test_client_arguments_let_ctrl_c_through(plugin_path: str, case: str, raised: str) -> None:
    call = dict(CLIENT_CASES)[case]
    exc = RAISED[raised]()
    with pytest.raises(type(exc)) as e:
        call(plugin_path, hostile(exc), hostile_mapping(exc))
    assert e.value is exc


def test_wrong_types_are_still_refused_by_name(client: Any, add: Any, tmp_path: Path) -> None:
    # The ordinary conversion failures keep their messages naming the argument.
    b = client.put(X)
    with pytest.raises(rpjrt.InvalidArgumentError, match="an argument position must be an int, not str"):
        add(b, b, donate=["0"])
    with pytest.raises(rpjrt.InvalidArgumentError, match="must be a list or tuple, not set"):
        add(b, b, donate={0})
    with pytest.raises(rpjrt.InvalidArgumentError, match="a device id must be an int, not float"):
        client.device(0.5)
    with pytest.raises(rpjrt.InvalidArgumentError, match="out of range"):
        client.device(2**70)
    with pytest.raises(TypeError, match="checkpoint path must be a path .*not int"):
        _session(client).save(3)
    with pytest.raises(rpjrt.InvalidArgumentError, match="options must be a mapping .*not list"):
        rpjrt.Client(client.plugin.path, options=[1])
    with pytest.raises(rpjrt.InvalidArgumentError, match="option names are strings, not int"):
        rpjrt.Client(client.plugin.path, options={1: 2})
    with pytest.raises(rpjrt.InvalidArgumentError, match="overrides must be a mapping"):
        client.load(add.serialize(), overrides=3)
    with pytest.raises(rpjrt.InvalidArgumentError, match="data must be bytes-like or a path, not int"):
        rpjrt.inspect_artifact(3)
    with pytest.raises(TypeError, match="timeout must be a number of seconds .*not str"):
        rpjrt.Plugin(client.plugin.path, timeout="1")
    # An item of the wrong type is named, not only the list that holds it.
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"layout= .*not list \(it holds a str\)"):
        client.put(X, layout=["0"])
    with pytest.raises(rpjrt.InvalidArgumentError, match="layout= .*not int"):
        client.put(X, layout=0)
    assert client.put(X, layout=[0]).to_numpy().tolist() == X.tolist()


def test_a_conversion_failure_of_user_code_is_the_refusals_cause(client: Any, add: Any) -> None:
    # A ValueError/TypeError that the object's own __index__ raised is a conversion failure
    # (refused naming the argument), and what it said is kept as the refusal's cause.
    class Bad:
        def __index__(self) -> int:
            raise ValueError("position 9 is not allowed here")

    b = client.put(X)
    with pytest.raises(rpjrt.InvalidArgumentError, match="an argument position must be an int, not Bad") as e:
        add(b, b, donate=[Bad()])
    assert isinstance(e.value.__cause__, ValueError)
    assert "position 9" in str(e.value.__cause__)
    # Interpreter-level type errors (nothing of the user's ran) are not chained.
    with pytest.raises(rpjrt.InvalidArgumentError) as e2:
        add(b, b, donate=[object()])
    assert e2.value.__cause__ is None


def test_rpjrt_errors_raised_while_handling_carry_the_handled_exception(client: Any) -> None:
    # r13: a native error raised in an except/finally block had no __context__, so the
    # exception being handled vanished from the traceback.
    b = client.put([1.0])
    b.delete()
    first = RuntimeError("first")
    with pytest.raises(rpjrt.BufferDeletedError) as e:
        try:
            raise first
        except RuntimeError:
            b.to_numpy()
    assert e.value.__context__ is first
    assert not e.value.__suppress_context__
    text = "".join(traceback.format_exception(e.value))
    assert "During handling of the above exception" in text and "first" in text

    # An rpjrt error made by a refusal (not by the core) too, and in a finally block.
    with pytest.raises(rpjrt.InvalidArgumentError) as e2:
        try:
            raise KeyError("second")
        finally:
            client.put(object())
    assert isinstance(e2.value.__context__, KeyError)

    # The innermost exception being handled is the context, as for a Python raise.
    with pytest.raises(rpjrt.BufferDeletedError) as e3:
        try:
            raise ValueError("outer")
        except ValueError:
            try:
                raise TypeError("inner")
            except TypeError:
                b.to_numpy()
    assert isinstance(e3.value.__context__, TypeError)
    assert isinstance(e3.value.__context__.__context__, ValueError)

    # Nothing handled: no context.
    with pytest.raises(rpjrt.BufferDeletedError) as e4:
        b.to_numpy()
    assert e4.value.__context__ is None


def test_with_session_keeps_the_blocks_exception_when_the_client_was_closed(fresh_client: Any) -> None:
    # r13: close() in __exit__ raised ClientClosedError in place of the user's error.
    c = fresh_client
    with pytest.raises(RuntimeError, match="the user's own error") as e:
        with rpjrt.Session(c) as s:
            s.bind("w", np.ones(4, np.float32))
            c.close()
            raise RuntimeError("the user's own error")
    assert s.closed
    assert not getattr(e.value, "__notes__", None), "closing after the client closed is no failure"


def test_close_after_client_close_only_marks_the_session_closed(fresh_client: Any) -> None:
    c = fresh_client
    s = rpjrt.Session(c)
    s.bind("w", X)
    step = s.program(STEP, inputs=["w"], outputs=["w"])
    c.close()
    s.close()
    assert s.closed
    s.close()  # twice: nothing
    with pytest.raises(rpjrt.FailedPreconditionError, match="Session was closed"):
        step()
    # And a with block whose client closes inside it ends without an error.
    c2 = rpjrt.Client(c.plugin.path)
    with rpjrt.Session(c2) as s2:
        s2.bind("w", X)
        c2.close()
    assert s2.closed


def test_a_close_failure_is_a_note_on_the_blocks_exception(client: Any) -> None:
    # A host view of a slot still open makes close() fail; with an exception propagating,
    # that failure is a note on it, not a replacement.
    with pytest.raises(RuntimeError, match="the user's own error") as e:
        with rpjrt.Session(client) as s:
            s.bind("w", np.ones(4, np.float32))
            view = np.from_dlpack(s.buffer("w"))
            raise RuntimeError("the user's own error")
    notes = getattr(e.value, "__notes__", [])
    assert any("Session.close()" in n and "InvalidArgumentError" in n for n in notes), notes
    if sys.version_info >= (3, 11):
        assert "Session.close()" in "".join(traceback.format_exception(e.value))
    del view
    # Without an exception in flight, the close failure is raised as it was.
    with pytest.raises(rpjrt.InvalidArgumentError, match="host view"):
        with rpjrt.Session(client) as s:
            s.bind("w", np.ones(4, np.float32))
            view = np.from_dlpack(s.buffer("w"))
    del view


def test_ctrl_c_in_a_with_block_stays_ctrl_c(client: Any) -> None:
    with pytest.raises(KeyboardInterrupt):
        with rpjrt.Session(client) as s:
            s.bind("w", X)
            raise KeyboardInterrupt
    assert s.closed


def test_bind_many_is_all_or_nothing_with_loaders(client: Any) -> None:
    # r13: the eager values were bound before a bad loader entry was refused.
    s = rpjrt.Session(client)
    s.bind("a", np.zeros(3, np.float32))
    with pytest.raises(rpjrt.InvalidArgumentError, match="a slot name is empty"):
        s.bind_many({"a": np.ones(3, np.float32), "": lambda: np.ones(3, np.float32)})
    assert s.fetch("a").tolist() == [0.0, 0.0, 0.0]
    assert [n for n, *_ in s.slots()] == ["a"]
    # A slot given a value and a loader (a Slot key and a str key of one name).
    with pytest.raises(rpjrt.InvalidArgumentError, match='slot "a" is given both a value and a loader'):
        s.bind_many({rpjrt.Slot("a"): np.ones(3, np.float32), "a": lambda: np.ones(3, np.float32)})
    assert s.fetch("a").tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(rpjrt.InvalidArgumentError, match='slot "b" is given more than one loader'):
        s.bind_many({rpjrt.Slot("b"): lambda: X, "b": lambda: X, "a": np.ones(3, np.float32)})
    assert s.fetch("a").tolist() == [0.0, 0.0, 0.0]
    assert [n for n, *_ in s.slots()] == ["a"]
    # The good case still binds both kinds.
    s.bind_many({"a": np.ones(3, np.float32), "c": lambda: X})
    assert s.fetch("a").tolist() == [1.0, 1.0, 1.0]
    assert s.fetch("c").tolist() == X.tolist()


def test_loaders_are_refused_for_a_closed_client(fresh_client: Any) -> None:
    c = fresh_client
    s = rpjrt.Session(c)
    s.bind("a", np.zeros(3, np.float32))
    c.close()
    with pytest.raises(rpjrt.ClientClosedError):
        s._s.bind_lazy("q", lambda: np.ones(3))
    with pytest.raises(rpjrt.ClientClosedError):
        s.bind_many({"q": lambda: np.ones(3)})
    assert [n for n, *_ in s.slots()] == ["a"]


def test_bind_lazy_is_refused_after_close(client: Any) -> None:
    s = rpjrt.Session(client)
    s.close()
    with pytest.raises(rpjrt.FailedPreconditionError, match="Session was closed"):
        s.bind_many({"q": lambda: X})


def _closing(s: rpjrt.Session) -> Callable[[], object]:
    """A loader that closes session ``s``, then returns a value."""

    def load() -> object:
        s.close()
        return X

    return load


def test_a_loader_that_closes_its_session_reports_the_session_closed(client: Any, tmp_path: Path) -> None:
    # r13: the step said `BufferDeletedError: slot "a": its buffer was deleted (or donated
    # outside this session)`; nothing was deleted but by the close.
    s = rpjrt.Session(client)
    p = s.program(ADD, inputs=["a", "b"], outputs=["out"], donate=False)
    s.bind_many({"a": X, "b": _closing(s)})
    with pytest.raises(rpjrt.FailedPreconditionError, match="Session was closed") as e:
        p()
    assert not isinstance(e.value, rpjrt.BufferDeletedError)
    assert e.value.__cause__ is None
    with pytest.raises(rpjrt.FailedPreconditionError, match="Session was closed"):
        p()

    # fetch / buffer
    s = rpjrt.Session(client)
    s.bind_many({"a": X, "b": _closing(s)})
    with pytest.raises(rpjrt.FailedPreconditionError, match="Session was closed") as e:
        s.fetch("b")
    assert not isinstance(e.value, rpjrt.BufferDeletedError)
    # What the loader returned after the close is freed as close() promises.
    assert {n: st for n, _, _, st in s.slots()} == {"a": "deleted", "b": "deleted"}

    # save
    s = rpjrt.Session(client)
    s.bind_many({"a": X, "b": _closing(s)})
    with pytest.raises(rpjrt.FailedPreconditionError, match="Session was closed"):
        s.save(tmp_path / "ck.npz")
    assert not (tmp_path / "ck.npz").exists()


def test_a_loader_that_closes_its_session_and_raises_is_the_cause(client: Any) -> None:
    s = rpjrt.Session(client)
    p = s.program(ADD, inputs=["a", "b"], outputs=["out"], donate=False)

    def loader() -> object:
        s.close()
        raise ValueError("the loader's own error")

    s.bind_many({"a": X, "b": loader})
    with pytest.raises(rpjrt.FailedPreconditionError, match="Session was closed") as e:
        p()
    assert isinstance(e.value.__cause__, ValueError)

    # Ctrl-C in such a loader stays Ctrl-C.
    s = rpjrt.Session(client)
    p = s.program(ADD, inputs=["a", "b"], outputs=["out"], donate=False)

    def interrupted() -> object:
        s.close()
        raise KeyboardInterrupt

    s.bind_many({"a": X, "b": interrupted})
    with pytest.raises(KeyboardInterrupt):
        p()


def test_save_after_client_close_is_client_closed(fresh_client: Any, tmp_path: Path) -> None:
    # r13: InvalidArgumentError "slot "w": buffer cannot be used: its client was closed".
    c = fresh_client
    s = rpjrt.Session(c)
    s.bind("w", X)
    c.close()
    path = tmp_path / "ck.npz"
    with pytest.raises(rpjrt.ClientClosedError):
        s.save(path)
    assert not path.exists()


def test_a_deleted_executable_is_an_executable_deleted_error(client: Any) -> None:
    # r13: BufferDeletedError("executable was deleted").
    exe = client.compile(ADD)
    b = client.put(X)
    exe.delete()
    with pytest.raises(_errors.ExecutableDeletedError, match="executable was deleted") as e:
        exe(b, b)
    assert isinstance(e.value, rpjrt.FailedPreconditionError)
    assert not isinstance(e.value, rpjrt.BufferDeletedError)
    assert e.value.code == "FAILED_PRECONDITION"
    assert _errors.error_class("FAILED_PRECONDITION", "ExecutableDeleted") is _errors.ExecutableDeletedError
    assert type(e.value).__module__ == "rpjrt"
    # A deleted argument stays a BufferDeletedError.
    exe2 = client.compile(ADD)
    b.delete()
    with pytest.raises(rpjrt.BufferDeletedError):
        exe2(b, b)


def test_executable_deleted_error_is_exported() -> None:
    assert rpjrt.ExecutableDeletedError is _errors.ExecutableDeletedError
    assert "ExecutableDeletedError" in rpjrt.__all__
