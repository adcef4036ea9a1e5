"""Round 24 of outside checks: fork and exit. Children forked while a parent thread steps a
session, runs a Python handler, compiles through a cache for the first time, makes the
first client, or records a trace; a child's own exit handlers; close() while stepping."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .conftest import WAIT_CHILD, exit_log_library


def _run(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _PRELUDE + textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


_PRELUDE = WAIT_CHILD + """
import os, signal, sys, threading, time
import numpy as np, rpjrt, rpjrt.ffi

def stepping_session(plugin, seconds):
    # A session whose step (w <- handler(w) + 1) runs on a thread of its own, the handler
    # sleeping `seconds`; returns once the handler is running.
    c = rpjrt.Client(plugin)
    inside = threading.Event()
    def h(call):
        inside.set()
        time.sleep(seconds)
        return call.args[0].to_numpy() + 1
    rpjrt.ffi.register(c, "r24_life_slow", h)
    s = rpjrt.Session(c)
    step = s.program(
        "func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {\\n"
        "  %0 = stablehlo.custom_call @r24_life_slow(%x) {api_version = 4 : i32} : "
        "(tensor<4xf32>) -> tensor<4xf32>\\n  return %0 : tensor<4xf32>\\n}",
        inputs=["w"], outputs=["w"])
    s.bind("w", np.zeros(4, np.float32))
    threading.Thread(target=step, daemon=True).start()
    inside.wait()
    return s, step

"""


@pytest.mark.parametrize("act", ["with", "close", "fetch", "save", "step"])
def test_a_child_forked_while_a_parent_thread_steps_a_session_is_not_stuck(
    plugin_path: str, act: str, tmp_path: Path
) -> None:
    code = """
    act = sys.argv[2]
    s, step = stepping_session(sys.argv[1], 1.5)
    pid = os.fork()
    if pid == 0:
        try:
            if act == "with":
                with s:
                    pass
            elif act == "close":
                s.close()
            elif act == "fetch":
                s.fetch("w")
            elif act == "save":
                s.save(sys.argv[3])
            else:
                step()
            print("child: no error", flush=True)
        except rpjrt.FailedPreconditionError as e:
            assert "is a fork of the process" in str(e), e
            print("child: refused", flush=True)
        os._exit(0)
    print("status", wait_child(pid), flush=True)
    os._exit(0)
    """
    r = _run(code, plugin_path, act, str(tmp_path / "s.npz"))
    assert r.returncode == 0, r.stderr[-2000:]
    want = "child: no error" if act in ("with", "close") else "child: refused"
    assert want in r.stdout and "status 0" in r.stdout, r.stdout


def test_session_close_answers_ctrl_c_while_another_thread_steps(plugin_path: str) -> None:
    code = """
    # SIGINT may be ignored where the tests run (a background job): Python's handler first.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    s, step = stepping_session(sys.argv[1], 4)
    threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    t0 = time.monotonic()
    try:
        s.close()
        print("closed", flush=True)
    except KeyboardInterrupt:
        print("interrupted after", round(time.monotonic() - t0, 1), flush=True)
    os._exit(0)
    """
    r = _run(code, plugin_path)
    assert r.returncode == 0, r.stderr[-2000:]
    words = r.stdout.split()
    assert words[:2] == ["interrupted", "after"] and float(words[2]) < 2.5, r.stdout


def test_a_child_forked_during_a_python_handler_exits_at_once(plugin_path: str) -> None:
    code = """
    import os, sys, threading, time
    import numpy as np, rpjrt, rpjrt.ffi
    c = rpjrt.Client(sys.argv[1])
    inside = threading.Event()
    def h(call):
        inside.set()
        time.sleep(0.5)
        return call.args[0].to_numpy()
    rpjrt.ffi.register(c, "r24_life_handler", h)
    exe = c.compile(
        "func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {\\n"
        "  %0 = stablehlo.custom_call @r24_life_handler(%x) {api_version = 4 : i32} : "
        "(tensor<4xf32>) -> tensor<4xf32>\\n  return %0 : tensor<4xf32>\\n}")
    def loop():
        while True:
            exe(np.ones(4, np.float32))[0].to_numpy()
    threading.Thread(target=loop, daemon=True).start()
    inside.wait()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        sys.exit(0)
    print("status", wait_child(pid), round(time.monotonic() - t0, 1), flush=True)
    os._exit(0)
    """
    r = _run(code, plugin_path)
    assert r.returncode == 0, r.stderr[-2000:]
    words = r.stdout.split()
    assert words[:2] == ["status", "0"] and float(words[2]) < 5, r.stdout


def test_a_child_forked_inside_a_trace_block_leaves_the_parents_file_alone(
    plugin_path: str, tmp_path: Path
) -> None:
    code = """
    import json, os, sys, time
    import numpy as np, rpjrt
    c = rpjrt.Client(sys.argv[1])
    exe = c.compile("func.func public @main(%a: tensor<8xf32>) -> tensor<8xf32> {\\n"
                    "  %0 = stablehlo.add %a, %a : tensor<8xf32>\\n  return %0 : tensor<8xf32>\\n}")
    x = np.ones(8, np.float32)
    with rpjrt.trace(sys.argv[2]) as t:
        exe(x)[0].to_numpy()
        pid = os.fork()
        if pid == 0:
            time.sleep(1.0)
            sys.exit(0)
        for _ in range(5):
            exe(x)[0].to_numpy()
    print("status", wait_child(pid), flush=True)
    events = json.load(open(sys.argv[2]))["traceEvents"]
    n = sum(1 for e in events if e.get("cat") == "execute" and e.get("ph") in ("X", "B"))
    print("spans", t.count("execute"), n, flush=True)
    """
    r = _run(code, plugin_path, str(tmp_path / "trace.json"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "status 0" in r.stdout and "spans 6 6" in r.stdout, r.stdout


def test_a_forked_childs_own_exit_handlers_still_run(plugin_path: str, tmp_path: Path) -> None:
    # Only the handlers registered before the fork (the plugin's) are skipped.
    lib = exit_log_library(tmp_path)
    code = """
    import ctypes, os, sys
    import rpjrt
    c = rpjrt.Client(sys.argv[1])
    pid = os.fork()
    if pid == 0:
        ctypes.CDLL(sys.argv[2]).start_log(sys.argv[3].encode())
        sys.exit(5)
    print("status", wait_child(pid), flush=True)
    """
    log = tmp_path / "log.txt"
    r = _run(code, plugin_path, str(lib), str(log))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "status 5" in r.stdout, r.stdout
    assert log.read_text() == "ran"


def test_a_child_forked_during_the_first_client_is_not_stuck(plugin_paths_all: dict[str, str]) -> None:
    # The parent's thread makes the first client (discovery imports, the plugin registry);
    # the child makes a client of the other plugin, which works, within the limit.
    code = """
    import os, sys, threading, time
    import rpjrt
    new, old = sys.argv[1], sys.argv[2]
    results = []
    for delay in (0.002, 0.005, 0.01, 0.02):
        pid0 = os.fork()
        if pid0:
            results.append(wait_child(pid0, 60))
            continue
        threading.Thread(target=rpjrt.Client, args=(new,), daemon=True).start()
        time.sleep(delay)
        pid = os.fork()
        if pid == 0:
            rpjrt.Client(old)
            os._exit(0)
        os._exit(0 if wait_child(pid, 20) == 0 else 1)
    print("results", results, flush=True)
    """
    r = _run(code, plugin_paths_all["new"], plugin_paths_all["old"], timeout=240)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "results [0, 0, 0, 0]" in r.stdout, r.stdout


def test_reprs_in_a_forked_child_say_the_objects_are_inherited(plugin_path: str) -> None:
    # Not "closed": the parent's client is open; in the child nothing of it can be used.
    code = """
    c = rpjrt.Client(sys.argv[1])
    b = c.put(np.arange(4, dtype=np.float32))
    exe = c.compile("func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {"
                    " return %a : tensor<4xf32> }")
    pid = os.fork()
    if pid == 0:
        for x in (c, b, exe):
            print(repr(x), flush=True)
        os._exit(0)
    print("status", wait_child(pid), flush=True)
    c.close()
    print(repr(c), repr(b), flush=True)
    """
    r = _run(code, plugin_path)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert len(lines) == 5 and lines[3] == "status 0", r.stdout
    assert all("inherited across fork" in line for line in lines[:3]), r.stdout
    assert "closed" in lines[4] and "inherited" not in lines[4], r.stdout
