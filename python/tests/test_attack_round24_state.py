"""Round 24 of outside checks: sessions used from custom-call handlers, and compile-cache
entries whose load fails because of this process's handlers."""

from __future__ import annotations

import itertools
import os
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rpjrt
import rpjrt.ffi

_ids = itertools.count()


def _name(base: str) -> str:
    return f"r24_{base}_{os.getpid()}_{next(_ids)}"


def _call(target: str, extra: str = "") -> str:
    return (
        f"func.func public @main(%x: tensor<4xf32>{extra}) -> tensor<4xf32> {{\n"
        f"  %0 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32}} : "
        "(tensor<4xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n}"
    )


def test_a_handler_of_another_execution_cannot_bind_into_a_running_step(
    client: rpjrt.Client, tmp_path: Path
) -> None:
    # Session B steps on another thread (its handler is slow); a handler of an unrelated
    # program, on this thread, touches B's slot "w", which B's step donates and writes.
    # A bind would be replaced by the step's output and a fetch would read an input being
    # consumed: both are refused, saying why; a save says the step runs on another thread.
    slow = _name("slow")

    def slow_handler(call: Any) -> Any:
        time.sleep(0.6)
        return call.args[0].to_numpy() + 1

    rpjrt.ffi.register(client, slow, slow_handler)
    step_text = _call(slow).replace("%x: tensor<4xf32>", "%x: tensor<4xf32> {tf.aliasing_output = 0 : i32}")
    for act in ("bind", "fetch", "save"):
        b = rpjrt.Session(client)
        step = b.program(step_text, inputs=["w"], outputs=["w"])
        b.bind("w", np.zeros(4, np.float32))
        seen: dict[str, Any] = {}
        other = _name("other")

        def h(call: Any, b: Any = b, act: str = act, seen: dict[str, Any] = seen) -> Any:
            try:
                if act == "bind":
                    b.bind("w", np.full(4, 100, np.float32))
                elif act == "fetch":
                    b.fetch("w")
                else:
                    b.save(str(tmp_path / "b.npz"))
                seen["r"] = "accepted"
            except rpjrt.Error as e:
                seen["r"] = e
            return call.args[0].to_numpy()

        rpjrt.ffi.register(client, other, h)
        exe = client.compile(_call(other))
        t = threading.Thread(target=step)
        t.start()
        time.sleep(0.2)
        exe(np.zeros(4, np.float32))[0].to_numpy()
        t.join()
        err = seen["r"]
        assert isinstance(err, rpjrt.InvalidArgumentError), (act, err)
        msg = str(err)
        if act == "save":
            assert "running on another thread" in msg and "cannot wait" in msg, msg
        else:
            assert f'slot "w": a {act} from inside a plugin callback' in msg, msg
            assert ("writes the slot" if act == "bind" else "donates the slot") in msg, msg
        # The step's result stands.
        assert b.fetch("w").tolist() == [1.0] * 4, act


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("what", ["bind", "restore"])
def test_a_handler_of_a_sessions_own_step_cannot_replace_its_output(
    plugin_path: str, tmp_path: Path, what: str, asynchronous: bool
) -> None:
    # Whether the plugin runs the step inline or dispatches it (a large dot first), a
    # handler of the step that binds or restores the slot the step writes is refused, and
    # the slot holds what the step computed.
    c = rpjrt.Client(plugin_path)
    n = 256
    target = _name(f"own_{what}")
    ck = tmp_path / "three.npz"
    np.savez(ck, w=np.full(4, 3, np.float32))
    s = rpjrt.Session(c)
    said: dict[str, Any] = {}

    def h(call: Any) -> Any:
        try:
            if what == "bind":
                s.bind("w", np.full(4, 7, np.float32))
            else:
                s.restore(str(ck))
            said["r"] = "accepted"
        except rpjrt.Error as e:
            said["r"] = e
        return call.args[0].to_numpy() + 1

    rpjrt.ffi.register(c, target, h)
    if asynchronous:
        text = (
            f"func.func public @main(%w: tensor<4xf32>, %x: tensor<{n}x{n}xf32>) -> tensor<4xf32> {{\n"
            f"  %d = stablehlo.dot_general %x, %x, contracting_dims = [1] x [0] : "
            f"(tensor<{n}x{n}xf32>, tensor<{n}x{n}xf32>) -> tensor<{n}x{n}xf32>\n"
            f"  %s = stablehlo.slice %d [0:1, 0:4] : (tensor<{n}x{n}xf32>) -> tensor<1x4xf32>\n"
            "  %r = stablehlo.reshape %s : (tensor<1x4xf32>) -> tensor<4xf32>\n"
            "  %a = stablehlo.add %r, %w : tensor<4xf32>\n"
            f"  %0 = stablehlo.custom_call @{target}(%a) {{api_version = 4 : i32}} : "
            "(tensor<4xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n}"
        )
        step = s.program(text, inputs=["w", "x"], outputs=["w"])
        s.bind("x", np.zeros((n, n), np.float32))
    else:
        step = s.program(_call(target).replace("%x", "%w"), inputs=["w"], outputs=["w"])
    s.bind("w", np.zeros(4, np.float32))
    out = step()
    assert out["w"].to_numpy().tolist() == [1.0] * 4
    assert s.fetch("w").tolist() == [1.0] * 4, said
    err = said["r"]
    assert isinstance(err, rpjrt.InvalidArgumentError), err
    assert "step" in str(err), err
    c.close()


def _instantiated(plugin_path: str, cache: Path, target: str, make: Any) -> rpjrt.Client:
    c = rpjrt.Client(plugin_path, cache_dir=str(cache))
    rpjrt.ffi.register(c, target, lambda call: call.args[0].to_numpy() * call.state, instantiate=make)
    return c


def _entries(d: Path) -> list[str]:
    return sorted(p.name for p in d.glob("*.rpjrtexe"))


def test_a_base_exception_of_an_instantiate_function_on_a_cache_hit_propagates(
    plugin_paths_all: dict[str, str], tmp_path: Path
) -> None:
    # The new plugin runs instantiate functions when it loads an entry; one that raises
    # KeyboardInterrupt (or SystemExit) there ends the compile as itself, as it would
    # without a cache, and the entry is kept.
    plugin = plugin_paths_all["new"]
    for raised in (KeyboardInterrupt, SystemExit):
        target = _name("kbi")
        prog = _call(target)
        armed = {"on": False}

        def make(call: Any) -> float:
            if armed["on"]:
                armed["on"] = False
                raise raised()
            return 1.0

        d = tmp_path / raised.__name__
        c = _instantiated(plugin, d, target, make)
        c.compile(prog)
        stored = _entries(d)
        assert len(stored) == 1
        armed["on"] = True
        c2 = rpjrt.Client(plugin, cache_dir=str(d))
        with pytest.raises(raised):
            c2.compile(prog)
        assert _entries(d) == stored
        assert c2.cache is not None and c2.cache.stats()["corrupt"] == 0
        # And the entry still serves a compile whose handler works.
        assert c2.compile(prog)(np.ones(4, np.float32))[0].to_numpy().tolist() == [1.0] * 4
        assert c2.cache.stats()["hits"] == 1
        c.close()
        c2.close()


def test_an_entry_whose_load_fails_in_a_handler_of_this_process_is_kept(
    plugin_paths_all: dict[str, str], tmp_path: Path
) -> None:
    # Instantiate raising an ordinary exception, or a target whose handler was removed,
    # is this process's failure, not the file's: the compile fails with it (as without a
    # cache), nothing is counted corrupt, and the entry stays for other processes.
    plugin = plugin_paths_all["new"]
    target = _name("table")
    prog = _call(target)
    broken: dict[str, Any] = {"exc": None}

    def make(call: Any) -> float:
        if broken["exc"] is not None:
            raise broken["exc"]
        return 2.0

    c = _instantiated(plugin, tmp_path, target, make)
    c.compile(prog)
    stored = _entries(tmp_path)
    assert len(stored) == 1
    for exc, cls in [
        (ValueError("today's table is missing"), rpjrt.InvalidArgumentError),
        (RuntimeError("transient"), rpjrt.Error),
        (rpjrt.FailedPreconditionError("not yet"), rpjrt.FailedPreconditionError),
    ]:
        broken["exc"] = exc
        c2 = rpjrt.Client(plugin, cache_dir=str(tmp_path))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(cls) as e:
                c2.compile(prog)
        assert str(exc) in str(e.value), e.value
        assert _entries(tmp_path) == stored, exc
        assert c2.cache is not None and c2.cache.stats()["corrupt"] == 0
        c2.close()
    broken["exc"] = None
    assert c.compile(prog)(np.ones(4, np.float32))[0].to_numpy().tolist() == [2.0] * 4
    c.close()
