"""Round 13 (hostile objects and re-entrancy), custom calls: what a Python handler keeps
alive past exit, how runaway nesting is reported, and the legacy DLPack export of an
argument. Every test runs on both CPU plugins (the instantiate stage only on the 0.115
plugin; the 0.81 plugin refuses it, which is checked instead)."""

from __future__ import annotations

import ctypes
import itertools
import time
from typing import Any

import numpy as np
import pytest

import rpjrt
import rpjrt.ffi

from .conftest import run_python

_ids = itertools.count()


def _name(base: str) -> str:
    return f"r13_{base}_{next(_ids)}"


def _program(target: str, n: int = 4) -> str:
    return f"""func.func public @main(%x: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %0 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32}} : (tensor<{n}xf32>) -> tensor<{n}xf32>
  return %0 : tensor<{n}xf32>
}}
"""


X4 = np.arange(4, dtype=np.float32)
TB = "(traceback, innermost first:"


def _has_instantiate(client: rpjrt.Client) -> bool:
    return rpjrt.ffi.runtime_version(client) >= (0, 3)


# ------------------------------------------------------------------ finding 1: exit


_EXIT_SCRIPT = """
import os, sys, numpy as np, rpjrt, rpjrt.ffi
class Z:
    def __init__(self, tag): self.tag = tag
    def __del__(self, write=os.write): write(1, f"del {{self.tag}}\\n".encode())
z = Z("module")
log = open({log!r}, "w")          # buffered, never closed: flushed only if finalized
log.write("written at module level\\n")
c = rpjrt.Client({plugin!r})
def handler(call):
    return call.args[0].to_numpy() + 1
rpjrt.ffi.register(c, "r13_exit_plain", handler)
prog = '''{program}'''
e = c.compile(prog.replace("TARGET", "r13_exit_plain"))
assert e(np.zeros(4, np.float32), wait=True)[0].to_numpy().tolist() == [1.0] * 4
if rpjrt.ffi.runtime_version(c) >= (0, 3):
    # A state object that refers back to the module, held by a live executable's instance.
    def make(call):
        return {{"z": Z("state"), "module": sys.modules[__name__]}}
    rpjrt.ffi.register(c, "r13_exit_state", handler, instantiate=make)
    es = c.compile(prog.replace("TARGET", "r13_exit_state"))
    es(np.zeros(4, np.float32), wait=True)
else:
    print("del state", flush=True)
print("main done", flush=True)
"""


def test_exit_releases_python_handlers_so_module_globals_are_finalized(
    plugin_path: str, tmp_path: Any
) -> None:
    """A registered handler (and an instantiate function, and an instance's state) kept
    its module's globals alive past exit: `__del__` never ran and a buffered file written
    at module level ended up empty. The exit hook now lets go of them."""
    log = tmp_path / "log.txt"
    started = time.monotonic()
    r = run_python(
        _EXIT_SCRIPT.format(log=str(log), plugin=plugin_path, program=_program("TARGET")),
        timeout=60,
    )
    took = time.monotonic() - started
    assert r.returncode == 0, r.stderr[-3000:]
    assert "main done" in r.stdout, r.stdout
    assert log.read_text() == "written at module level\n"
    assert "del module" in r.stdout, r.stdout
    assert "del state" in r.stdout, r.stdout
    assert took < 30, took


def test_after_the_exit_hook_no_python_handler_runs_and_nothing_crashes(plugin_path: str) -> None:
    """An atexit hook that runs after rpjrt's (registered before rpjrt was imported): custom
    calls fail with CancelledError (the handler, its instantiate function and the state
    were released, never touched), registering is refused, other programs still run."""
    r = run_python(
        f"""
        import atexit
        def late():
            import numpy as np, rpjrt, rpjrt.ffi
            c, progs = box["c"], box["progs"]
            x = np.arange(4, dtype=np.float32)
            for name, f in [
                ("plain", lambda: progs["plain"](x, wait=True)[0].to_numpy()),
                ("stateful", lambda: progs.get("state", progs["plain"])(x, wait=True)[0].to_numpy()),
                ("compile stateful", lambda: c.compile(box["text"].replace("TARGET", box["st"]))),
                ("register", lambda: rpjrt.ffi.register(c, "r13_late_new", lambda call: None)),
            ]:
                try:
                    f()
                    print("late", name, "ran", flush=True)
                except rpjrt.CancelledError as e:
                    print("late", name, "cancelled:", str(e)[-60:], flush=True)
            assert box["calls"] == box["before"], box
            print("late plain program", progs["add"](x, x, wait=True)[0].to_numpy().tolist(), flush=True)
        atexit.register(late)
        import numpy as np, rpjrt, rpjrt.ffi
        box = {{"calls": 0}}
        c = rpjrt.Client({plugin_path!r})
        def h(call):
            box["calls"] += 1
            return call.args[0].to_numpy() + 1
        text = {_program("TARGET")!r}
        rpjrt.ffi.register(c, "r13_late_plain", h)
        progs = {{"plain": c.compile(text.replace("TARGET", "r13_late_plain"))}}
        st = "r13_late_plain"
        if rpjrt.ffi.runtime_version(c) >= (0, 3):
            st = "r13_late_state"
            rpjrt.ffi.register(c, st, h, instantiate=lambda call: {{"n": 0}})
            progs["state"] = c.compile(text.replace("TARGET", st))
        progs["add"] = c.compile('''func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {{
          %0 = stablehlo.add %a, %b : tensor<4xf32>
          return %0 : tensor<4xf32>
        }}''')
        for p in progs.values():
            if p is not progs["add"]:
                p(np.zeros(4, np.float32), wait=True)
        box.update(c=c, progs=progs, text=text, st=st, before=box["calls"])
        print("main done", "stateful" if "state" in progs else "plain", flush=True)
        """,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout
    assert "late plain cancelled: " in out and "interpreter is shutting down" in out, out
    assert "late stateful cancelled" in out, out
    assert "late register cancelled" in out, out
    assert "late plain program [0.0, 2.0, 4.0, 6.0]" in out, out
    if "main done stateful" in out:
        # Compiling a stateful target after exit: its instantiate function is not run.
        assert "late compile stateful cancelled" in out, out
    else:
        assert "main done plain" in out, out


@pytest.mark.parametrize("stateful", [False, True])
def test_daemon_threads_running_custom_calls_through_exit(plugin_path: str, stateful: bool) -> None:
    """Daemon threads run custom calls (and a handler that sleeps) while the interpreter
    exits: the exit hook waits for the running ones, releases the handlers, and the calls
    that come later fail without touching them. No crash, and exit is not slowed."""
    for attempt in range(3):
        started = time.monotonic()
        r = run_python(
            f"""
            import threading, time, numpy as np, rpjrt, rpjrt.ffi
            c = rpjrt.Client({plugin_path!r})
            def h(call):
                if call.args[0].to_numpy()[0] == 7:
                    time.sleep(0.3)          # running when the exit hook starts
                return call.args[0].to_numpy() + 1
            text = {_program("TARGET")!r}
            kw = {{}}
            if {stateful!r} and rpjrt.ffi.runtime_version(c) >= (0, 3):
                kw["instantiate"] = lambda call: [object()]
            rpjrt.ffi.register(c, "r13_spin", h, **kw)
            e = c.compile(text.replace("TARGET", "r13_spin"))
            def spin(v):
                x = np.full(4, v, np.float32)
                while True:
                    try:
                        e(x, wait=True)
                    except rpjrt.Error:
                        pass
            for v in (0, 7, 0, 7):
                threading.Thread(target=spin, args=(v,), daemon=True).start()
            time.sleep(0.3)
            print("main done", flush=True)
            """,
            timeout=60,
        )
        took = time.monotonic() - started
        assert r.returncode == 0, (attempt, r.returncode, r.stderr[-3000:])
        assert "main done" in r.stdout
        assert took < 20, took


# ------------------------------------------------------------------ finding 4: nesting


def _assert_short_nesting_refusal(e: BaseException, target: str, wrapper: str) -> str:
    msg = str(e)
    assert isinstance(e, rpjrt.ResourceExhaustedError), type(e)
    assert len(msg) < 2000, (len(msg), msg[:3000])
    # Not given out-of-memory advice, nor the attributes of one.
    assert "hint:" not in msg and "client memory options" not in msg, msg
    assert e.hint is None and e.memory_stats is None
    # Names the handler, the depth and the limit; the wrapper is said twice (this level,
    # and the innermost), the count is right.
    assert f'{wrapper} "{target}"' in msg, msg
    assert "rpjrt's custom-call nesting limit of 16" in msg, msg
    assert msg.count(wrapper) == 2, msg
    assert "from 15 nested handler errors; the innermost: " in msg, msg
    assert msg.count(TB) <= 2, msg
    return msg


def test_runaway_execute_nesting_is_a_short_error_naming_handler_depth_and_limit(
    client: rpjrt.Client,
) -> None:
    target = _name("rec")
    exes: list[Any] = []

    def h(call: rpjrt.ffi.FfiCall) -> Any:
        return exes[0](call.args[0].to_numpy(), wait=True)[0].to_numpy()

    rpjrt.ffi.register(client, target, h)
    exes.append(client.compile(_program(target)))
    with pytest.raises(rpjrt.ResourceExhaustedError) as info:
        exes[0](X4, wait=True)
    msg = _assert_short_nesting_refusal(info.value, target, "Python handler for")
    assert "while 16 handlers run" in msg, msg
    # The program still runs once the nesting is gone.
    rpjrt.ffi.register(client, target, lambda call: call.args[0].to_numpy() * 2, replace=True)
    np.testing.assert_array_equal(exes[0](X4, wait=True)[0].to_numpy(), X4 * 2)


def test_runaway_instantiate_nesting_is_a_short_error(client: rpjrt.Client) -> None:
    """An instantiate function that compiles its own target: refused 17 deep; the wrapper
    of an instantiate function is collapsed as a handler's is."""
    target = _name("inst_rec")
    if not _has_instantiate(client):
        with pytest.raises(rpjrt.UnimplementedError, match="0.3"):
            rpjrt.ffi.register(client, target, lambda call: None, instantiate=lambda call: 0)
        return

    def inst(call: rpjrt.ffi.FfiCall) -> Any:
        return client.compile(_program(target))

    rpjrt.ffi.register(client, target, lambda call: call.args[0].to_numpy(), instantiate=inst)
    with pytest.raises(rpjrt.ResourceExhaustedError) as info:
        client.compile(_program(target))
    msg = _assert_short_nesting_refusal(
        info.value, target, "Python instantiate function (the instantiate stage) for"
    )
    assert f'the FFI handler for "{target}" was not run: it would be nested 17 deep' in msg, msg


@pytest.mark.parametrize("depth", [1, 2, 3, 6])
def test_a_nested_failure_counts_every_level_once(client: rpjrt.Client, depth: int) -> None:
    """A handler that recurses `depth` levels, the innermost raising ValueError: the count
    of nested errors is depth - 1 at every depth (it used to reset to 2), the innermost
    error appears once with its own traceback, and no level adds another."""
    target = _name("count")
    exes: list[Any] = []
    level = [0]

    def h(call: rpjrt.ffi.FfiCall) -> Any:
        level[0] += 1
        try:
            if level[0] >= depth:
                raise ValueError("bottom reached")
            return exes[0](call.args[0].to_numpy(), wait=True)[0].to_numpy()
        finally:
            level[0] -= 1

    rpjrt.ffi.register(client, target, h)
    exes.append(client.compile(_program(target)))
    with pytest.raises(rpjrt.InvalidArgumentError) as info:
        exes[0](X4, wait=True)
    msg = str(info.value)
    assert msg.count("bottom reached") == 1, msg
    assert msg.count(f'Python handler for "{target}"') == min(depth, 2), msg
    if depth >= 3:
        assert f"from {depth - 1} nested handler errors; the innermost: " in msg, msg
    else:
        assert "nested handler errors" not in msg, msg
    assert f'Python handler for "{target}" raised ValueError: bottom reached' in msg, msg
    # The innermost's traceback and this level's: the levels between add none.
    assert msg.count(TB) == min(depth, 2), msg


def test_mixed_chain_of_handler_and_instantiate_errors_counts_both(client: rpjrt.Client) -> None:
    """A handler that compiles a program whose instantiate function compiles again, three
    deep, the innermost raising KeyError: one count over both kinds of wrapper."""
    outer = _name("mx_outer")
    inner = _name("mx_inner")
    if not _has_instantiate(client):
        with pytest.raises(rpjrt.UnimplementedError):
            rpjrt.ffi.register(client, inner, lambda call: None, instantiate=lambda call: 0)
        return
    level = [0]

    def inst(call: rpjrt.ffi.FfiCall) -> Any:
        level[0] += 1
        try:
            if level[0] >= 3:
                raise KeyError("no table")
            return client.compile(_program(inner))
        finally:
            level[0] -= 1

    rpjrt.ffi.register(client, inner, lambda call: None, instantiate=inst)

    def h(call: rpjrt.ffi.FfiCall) -> Any:
        client.compile(_program(inner))
        return call.args[0].to_numpy()

    rpjrt.ffi.register(client, outer, h)
    exe = client.compile(_program(outer))
    with pytest.raises(rpjrt.NotFoundError) as info:
        exe(X4, wait=True)
    msg = str(info.value)
    assert f'Python handler for "{outer}" raised NotFoundError from 3 nested handler errors; ' in msg, msg
    assert (
        f"the innermost: Python instantiate function (the instantiate stage) for \"{inner}\" "
        "raised KeyError: 'no table'"
    ) in msg, msg
    assert msg.count("instantiate function") == 1, msg


def test_an_out_of_memory_report_is_not_repeated_by_enclosing_levels(client: rpjrt.Client) -> None:
    """A MemoryError deep in nested handlers: RESOURCE_EXHAUSTED, and the execute that
    reports it gets the out-of-memory report; each enclosing execute used to add one
    more. Now the report appears once."""
    target = _name("oom")
    exes: list[Any] = []
    level = [0]

    def h(call: rpjrt.ffi.FfiCall) -> Any:
        level[0] += 1
        try:
            if level[0] >= 4:
                raise MemoryError("cannot allocate the table")
            return exes[0](call.args[0].to_numpy(), wait=True)[0].to_numpy()
        finally:
            level[0] -= 1

    rpjrt.ffi.register(client, target, h)
    exes.append(client.compile(_program(target)))
    with pytest.raises(rpjrt.ResourceExhaustedError) as info:
        exes[0](X4, wait=True)
    msg = str(info.value)
    assert msg.count("cannot allocate the table") == 1, msg
    assert msg.count("\nhint: ") == 1, msg
    assert msg.count("client memory options") == 1, msg
    # A MemoryError at the first level still gets its report and its attributes.
    rpjrt.ffi.register(client, target, lambda call: (_ for _ in ()).throw(MemoryError("x")), replace=True)
    with pytest.raises(rpjrt.ResourceExhaustedError) as info2:
        exes[0](X4, wait=True)
    assert str(info2.value).count("\nhint: ") == 1, str(info2.value)
    assert info2.value.hint is not None


# ------------------------------------------------------------------ finding 5: DLPack


def test_legacy_dlpack_of_an_argument_exports_a_private_copy(client: rpjrt.Client) -> None:
    target = _name("dl")
    seen: dict[str, Any] = {}

    class Legacy:
        """A consumer's view of a producer that speaks only the legacy protocol."""

        def __init__(self, buf: Any, **kw: Any) -> None:
            self.buf, self.kw = buf, kw

        def __dlpack__(self, **_: Any) -> Any:
            return self.buf.__dlpack__(**self.kw)

        def __dlpack_device__(self) -> Any:
            return self.buf.__dlpack_device__()

    def h(call: rpjrt.ffi.FfiCall) -> Any:
        arg = call.args[0]
        cases: list[tuple[str, dict[str, Any]]] = [
            ("none", {}),
            ("v0", {"max_version": (0, 8)}),
            ("copy", {"copy": True}),
        ]
        for label, kw in cases:
            a = np.from_dlpack(Legacy(arg, **kw))
            np.testing.assert_array_equal(a, X4)
            seen[label] = True
        # A private copy: a legacy consumer that writes it (nothing tells it not to)
        # does not reach the argument's views.
        cap = arg.__dlpack__()
        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        data = ctypes.cast(get(cap, b"dltensor"), ctypes.POINTER(ctypes.c_void_p))[0]
        assert data and data != arg.data
        ctypes.memset(data, 0xFF, 16)
        np.testing.assert_array_equal(arg.to_numpy(), X4)
        del cap
        # Versioned: read-only, as before.
        v = np.from_dlpack(arg)
        seen["versioned"] = v.flags.writeable
        try:
            arg.__dlpack__(copy=False)
        except BufferError as e:
            seen["copy=False"] = str(e)
        # A result's legacy export still works, as before.
        r = np.from_dlpack(Legacy(call.rets[0]))
        seen["ret"] = r.shape
        call.rets[0].to_numpy()[:] = call.args[0].to_numpy() * 3
        return None

    rpjrt.ffi.register(client, target, h)
    out = client.compile(_program(target))(X4, wait=True)[0].to_numpy()
    np.testing.assert_array_equal(out, X4 * 3)
    assert seen["none"] and seen["v0"] and seen["copy"] and seen["ret"] == (4,), seen
    assert seen["versioned"] is False, seen
    assert "max_version=(1, 0)" in seen["copy=False"], seen
    assert "read-only" in seen["copy=False"], seen


def test_dlpack_after_the_call_still_raises(client: rpjrt.Client) -> None:
    target = _name("dl_late")
    kept: list[Any] = []

    def h(call: rpjrt.ffi.FfiCall) -> Any:
        kept.append(call.args[0])
        return call.args[0].to_numpy()

    rpjrt.ffi.register(client, target, h)
    client.compile(_program(target))(X4, wait=True)
    with pytest.raises(rpjrt.InvalidArgumentError, match="only valid during the handler call"):
        kept[0].__dlpack__()


def test_nested_errors_of_rpjrt_about_a_handler_and_keyboard_interrupt(client: rpjrt.Client) -> None:
    """rpjrt's own errors about a handler ("the Python handler for ... returned ...") are
    not counted as nesting levels, and a KeyboardInterrupt five levels down still comes
    out as itself."""
    target = _name("kinds")
    exes: list[Any] = []
    level = [0]
    bottom: list[Any] = []

    def h(call: rpjrt.ffi.FfiCall) -> Any:
        level[0] += 1
        try:
            if level[0] >= 4:
                return bottom[0]()
            return exes[0](call.args[0].to_numpy(), wait=True)[0].to_numpy()
        finally:
            level[0] -= 1

    rpjrt.ffi.register(client, target, h)
    exes.append(client.compile(_program(target)))
    bottom.append(lambda: np.zeros(3, np.float32))  # the wrong shape
    with pytest.raises(rpjrt.InvalidArgumentError) as info:
        exes[0](X4, wait=True)
    msg = str(info.value)
    assert "from 3 nested handler errors; the innermost: " in msg, msg
    assert f'the Python handler for "{target}" returned float32 (3,) for result 0' in msg, msg

    def interrupt() -> Any:
        raise KeyboardInterrupt("stop at level 4")

    bottom[0] = interrupt
    with pytest.raises(KeyboardInterrupt, match="stop at level 4"):
        exes[0](X4, wait=True)


def test_legacy_dlpack_with_copy_false_is_refused_by_rpjrt(client: rpjrt.Client) -> None:
    target = _name("dl_nocopy")
    seen: dict[str, str] = {}

    def h(call: rpjrt.ffi.FfiCall) -> Any:
        cases: list[tuple[str, dict[str, Any]]] = [
            ("none", {"copy": False}),
            ("v0", {"copy": False, "max_version": (0, 8)}),
        ]
        for label, kw in cases:
            try:
                call.args[0].__dlpack__(**kw)
                seen[label] = "exported"
            except BufferError as e:
                seen[label] = str(e)
        # Versioned with copy=False: a read-only export of the view, no copy needed.
        call.args[0].__dlpack__(max_version=(1, 0), copy=False)
        return call.args[0].to_numpy()

    rpjrt.ffi.register(client, target, h)
    client.compile(_program(target))(X4, wait=True)
    for label in ("none", "v0"):
        assert "pass max_version=(1, 0)" in seen[label], seen
        assert "legacy DLPack protocol" in seen[label], seen
