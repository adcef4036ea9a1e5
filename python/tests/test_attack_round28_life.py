"""Round 28 of outside checks: lifetimes, threads and exit. Done-callbacks still running
(or queued) when the interpreter finalizes; user hooks (``__index__``, ``__dlpack_device__``,
``__bytes__``, ...) that a daemon thread is inside at exit; a fork inside a done-callback or
an FFI handler (the parent must exit, the child must end); ``Event.error()`` of work that
never ran once the client is closed; a zero-copy Buffer over a memoryview alive at exit."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from .conftest import WAIT_CHILD, plugin_paths, run_python


def _plug() -> str:
    return plugin_paths()["new"]


def _exit_clean(code: str, *, runs: int = 1, timeout: float = 90) -> None:
    """Runs `code` in fresh interpreters: each must print "main done" and exit with 0."""
    for _ in range(runs):
        r = run_python(code, timeout=timeout)
        assert r.returncode == 0, (r.returncode, r.stdout, r.stderr[-3000:])
        assert "main done" in r.stdout, (r.stdout, r.stderr[-3000:])
        assert "Fatal Python error" not in r.stderr, r.stderr[-3000:]


# -- 1. done-callbacks at exit ------------------------------------------------------------


@pytest.mark.parametrize(
    ("callback_s", "small_callbacks", "linger_s"),
    [
        # Longer than the exit hook's wait: still sleeping when the interpreter finalizes.
        (2.5, 0, 2.0),
        # Longer than every wait at exit, with a queue of small callbacks behind it.
        (6.0, 50, 4.0),
    ],
    ids=["past_the_hooks_wait", "past_every_exit_wait"],
)
def test_slow_done_callback_at_exit_does_not_abort(
    callback_s: float, small_callbacks: int, linger_s: float
) -> None:
    _exit_clean(
        f"""
        import sys, time, types, rpjrt
        c = rpjrt.Client({_plug()!r})
        y = c.put([1.0, 2.0])
        y.ready_event().add_done_callback(lambda ev: time.sleep({callback_s}))
        for _ in range({small_callbacks}):
            y.ready_event().add_done_callback(lambda ev: time.sleep(0.01))
        class Linger:
            def __del__(self): time.sleep({linger_s})
        sys.modules["lingering"] = types.ModuleType("lingering")
        sys.modules["lingering"].obj = Linger()
        time.sleep(0.2)
        print("main done", flush=True)
        """
    )


def test_backlog_of_done_callbacks_at_exit_is_dropped() -> None:
    _exit_clean(
        f"""
        import time, rpjrt
        c = rpjrt.Client({_plug()!r})
        ev = c.put([1.0, 2.0]).ready_event()
        for _ in range(300):
            ev.add_done_callback(lambda ev: time.sleep(0.02))
        print("main done", flush=True)
        """,
        runs=2,
    )


def test_done_callback_errors_are_still_reported() -> None:
    r = run_python(
        f"""
        import time, rpjrt
        c = rpjrt.Client({_plug()!r})
        seen = []
        def bad(ev):
            seen.append(1)
            raise ValueError("r28 callback failure")
        c.put([1.0]).ready_event().add_done_callback(bad)
        c.put([1.0]).ready_event().add_done_callback(lambda ev: seen.append(2))
        t0 = time.time()
        while len(seen) < 2 and time.time() - t0 < 10:
            time.sleep(0.01)
        print("main done", sorted(seen), flush=True)
        """
    )
    assert r.returncode == 0, r.stderr
    assert "main done [1, 2]" in r.stdout, r.stdout
    assert "ValueError: r28 callback failure" in r.stderr, r.stderr


# -- 2. user hooks a daemon thread is inside at exit ---------------------------------------

_HOOKS = """
import sys, threading, time, numpy as np, rpjrt
c = rpjrt.Client({plug!r})
mode, nap = sys.argv[1], float(sys.argv[2])
class Idx:
    def __index__(self): time.sleep(nap); return 0
class Flt:
    def __float__(self): time.sleep(nap); return 0.0
class Prod:
    def __init__(self): self.a = np.arange(8, dtype=np.float32)
    def __dlpack__(self, **kw): return self.a.__dlpack__(**kw)
    def __dlpack_device__(self): time.sleep(nap); return (1, 0)
class Data:
    def __bytes__(self): time.sleep(nap); return b"not an artifact"
class Opts:
    def items(self): time.sleep(nap); return []
class Seq:
    def __iter__(self): time.sleep(nap); return iter([Idx()])
go = threading.Event()
def worker():
    go.set()
    while True:
        try:
            if mode == "device": c.device(Idx())
            elif mode == "dlpack": c.from_dlpack(Prod())
            elif mode == "load": c.load(Data())
            elif mode == "wait": c.put([1.0]).ready_event().wait(Flt())
            elif mode == "alias": c.create_alias_buffer("float32", Seq())
            elif mode == "spin": rpjrt.set_wait_spin(Flt())
            elif mode == "compile": c.compile("garbage", num_replicas=Idx())
            elif mode == "put": c.put(Seq())
        except (rpjrt.Error, TypeError, ValueError):
            pass
for _ in range(4):
    threading.Thread(target=worker, daemon=True).start()
go.wait(); time.sleep(0.2)
class Linger:
    def __del__(self): time.sleep(1.0)
import types
sys.modules["lingering"] = types.ModuleType("lingering")
sys.modules["lingering"].obj = Linger()
print("main done", flush=True)
"""


@pytest.mark.parametrize(
    "mode,nap",
    [
        ("device", "0.005"),
        ("dlpack", "0.3"),
        ("load", "0.3"),
        ("wait", "0.3"),
        ("alias", "0.3"),
        ("spin", "0.3"),
        ("compile", "0.3"),
        ("put", "0.3"),
    ],
)
def test_daemon_thread_inside_user_hook_at_exit(mode: str, nap: str) -> None:
    import subprocess
    import sys

    code = _HOOKS.format(plug=_plug())
    for _ in range(2):
        r = subprocess.run(
            [sys.executable, "-c", code, mode, nap], capture_output=True, text=True, timeout=90
        )
        assert r.returncode == 0, (mode, r.returncode, r.stderr[-3000:])
        assert "main done" in r.stdout


def test_typed_arguments_still_refused_clearly(client: Any) -> None:
    import rpjrt

    with pytest.raises(TypeError) as e:
        rpjrt.set_wait_spin("fast")  # type: ignore[arg-type]
    assert "while processing 'seconds'" in (getattr(e.value, "__notes__", None) or [""])[0]
    with pytest.raises(TypeError):
        client.create_alias_buffer("float32", 3)
    exe = client.compile(
        "func.func public @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n  return %a : tensor<2xf32>\n}"
    )
    assert exe.num_replicas == 1


# -- 3./4. fork inside a done-callback or an FFI handler -----------------------------------


def test_fork_in_done_callback_lets_parent_exit() -> None:
    r = run_python(
        f"""
        import os, sys, time, rpjrt          # no `import threading` of its own
        c = rpjrt.Client({_plug()!r})
        info = {{}}
        def cb(ev):
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            info["pid"] = pid
        c.put([1.0, 2.0]).ready_event().add_done_callback(cb)
        while "pid" not in info:
            time.sleep(0.01)
        print("child status", os.waitpid(info["pid"], 0)[1])
        print("main done", flush=True)
        """,
        timeout=30,
    )
    assert r.returncode == 0, r.stderr
    assert "child status 0" in r.stdout and "main done" in r.stdout, r.stdout


@pytest.mark.parametrize("how", ["return", "raise", "exit"])
def test_child_forked_in_done_callback_ends(how: str) -> None:
    r = run_python(
        WAIT_CHILD
        + textwrap.dedent(
            f"""
            import os, sys, time, rpjrt
            c = rpjrt.Client({_plug()!r})
            info = {{}}
            def cb(ev):
                pid = os.fork()
                if pid == 0:
                    print("in child", flush=True)
                    if {how!r} == "raise": raise RuntimeError("child fails")
                    if {how!r} == "exit": sys.exit(0)
                    return
                info["pid"] = pid
            c.put([1.0, 2.0]).ready_event().add_done_callback(cb)
            while "pid" not in info:
                time.sleep(0.01)
            print("child", wait_child(info["pid"], 15))
            print("main done", flush=True)
            """
        ),
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert "child 0" in r.stdout, r.stdout
    assert "in child" in r.stdout


@pytest.mark.parametrize("how", ["return", "exit"])
def test_child_forked_in_ffi_handler_ends(how: str) -> None:
    r = run_python(
        WAIT_CHILD
        + textwrap.dedent(
            f"""
            import os, sys, numpy as np, rpjrt, rpjrt.ffi
            c = rpjrt.Client({_plug()!r})
            info = {{}}
            def h(call):
                if "pid" not in info:
                    pid = os.fork()
                    if pid == 0:
                        if {how!r} == "exit": sys.exit(0)
                        return call.args[0].to_numpy()
                    info["pid"] = pid
                return call.args[0].to_numpy()
            rpjrt.ffi.register(c, "r28_fork_handler", h)
            exe = c.compile(
                "func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {{\\n"
                "  %0 = stablehlo.custom_call @r28_fork_handler(%x) {{api_version = 4 : i32}} : "
                "(tensor<4xf32>) -> tensor<4xf32>\\n  return %0 : tensor<4xf32>\\n}}")
            print(exe(np.ones(4, np.float32))[0].to_numpy().tolist(), flush=True)
            print("child", wait_child(info["pid"], 15))
            print("main done", flush=True)
            """
        ),
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert "child 0" in r.stdout, r.stdout


# -- 5. Event.error() after close ----------------------------------------------------------


def test_event_of_work_that_never_ran_is_not_a_success_after_close(plugin_path: str) -> None:
    import time

    import rpjrt

    c = rpjrt.Client(plugin_path)
    exe = c.compile(
        "func.func public @main(%a: tensor<8xf32>) -> tensor<8xf32> {\n"
        "  %0 = stablehlo.add %a, %a : tensor<8xf32>\n  return %0 : tensor<8xf32>\n}"
    )
    alias, _fulfiller = c.create_alias_buffer("float32", (8,))
    (y,) = exe(alias)
    ev = y.ready_event()
    other = y.ready_event()  # no callback: asked only after close
    seen: list[object] = []
    ev.add_done_callback(lambda e: seen.append(e.error()))
    assert ev.error() is None and "pending" in repr(ev)
    c.close()
    deadline = time.time() + 10
    while not seen and time.time() < deadline:
        time.sleep(0.01)
    assert seen and isinstance(seen[0], rpjrt.ClientClosedError), seen
    assert isinstance(ev.error(), rpjrt.ClientClosedError)
    assert isinstance(other.error(), rpjrt.ClientClosedError)
    for e in (ev, other):
        assert "ready" not in repr(e) and "closed" in repr(e), repr(e)
        with pytest.raises(rpjrt.ClientClosedError):
            e.wait()


def test_completed_event_stays_done_after_close(plugin_path: str) -> None:
    import rpjrt

    c = rpjrt.Client(plugin_path)
    ev = c.put([1.0, 2.0]).ready_event()
    ev.wait()
    assert ev.error() is None
    assert repr(ev).endswith("ready, done)")
    c.close()
    assert ev.error() is None
    assert repr(ev).endswith("ready, done)"), repr(ev)


# -- 6. zero-copy Buffer over a memoryview at exit -----------------------------------------


def test_zero_copy_memoryview_buffer_alive_at_exit_is_silent() -> None:
    r = run_python(
        f"""
        import numpy as np, rpjrt
        c = rpjrt.Client({_plug()!r})
        def aligned():
            raw = np.zeros(32 + 64, np.uint8)
            off = (-raw.ctypes.data) % 64
            return raw[off:off + 32].view(np.float32)
        keep = []
        for _ in range(3):
            a = aligned()
            mv = memoryview(a)
            keep.append(c.put(mv, copy=False))
            del a, mv
        b = keep[0]
        print(b.to_numpy().tolist(), flush=True)
        print("main done", flush=True)
        """
    )
    assert r.returncode == 0, r.stderr
    assert "main done" in r.stdout
    assert r.stderr.strip() == "" or "Exception ignored" not in r.stderr, r.stderr
