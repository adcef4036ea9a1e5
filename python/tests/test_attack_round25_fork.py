"""Round 25 of outside checks: fork hooks of other code that load plugins, forks during a
slow plugin load, children that fork in turn, and DLPack exports from two threads."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .conftest import WAIT_CHILD, exit_log_library, fake_plugin_path


def _run(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WAIT_CHILD + textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize("hook", ["before", "after_in_child"])
def test_a_fork_hook_registered_before_rpjrt_may_load_a_plugin(
    plugin_paths_all: dict[str, str], hook: str
) -> None:
    # Python runs `before` hooks last-registered first and `after_in_child` hooks
    # first-registered first, so a hook registered before `import rpjrt` runs inside
    # rpjrt's own pair of hooks: the registry of plugins must be free there (it used to be
    # held from rpjrt's `before` hook to its `after` hook, and the hook's load waited for
    # ever, in the parent's os.fork() or in the child).
    code = """
    import os, sys, time
    hook, new, old = sys.argv[1], sys.argv[2], sys.argv[3]
    def load():
        import rpjrt
        print("hook made", rpjrt.Client(old).platform, flush=True)
    if hook == "before":
        os.register_at_fork(before=load)
    else:
        os.register_at_fork(after_in_child=load)
    import numpy as np
    import rpjrt
    c = rpjrt.Client(new)
    c.put(np.ones(4, np.float32)).block_until_ready()
    pid = os.fork()
    if pid == 0:
        os._exit(3)
    print("status", wait_child(pid, 30), flush=True)
    """
    r = _run(code, hook, plugin_paths_all["new"], plugin_paths_all["old"], timeout=90)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "status 3" in r.stdout and "hook made cpu" in r.stdout, r.stdout


def test_a_child_forked_during_a_slow_plugin_load_is_told_at_once(
    plugin_paths_all: dict[str, str]
) -> None:
    # A load on another thread outlasts the fork's 2 s wait: the child inherits the registry
    # locked by a thread it does not have. Loading there is refused at once, naming the
    # fork (it used to wait for ever, or blame the plugin after a timeout).
    code = """
    import os, sys, threading, time
    import rpjrt
    new, old, fake = sys.argv[1], sys.argv[2], sys.argv[3]
    os.environ["RPJRT_FAKE_HANG_ON"] = "PJRT_Plugin_Initialize"
    rpjrt.Client(new)
    threading.Thread(target=lambda: rpjrt.Plugin(fake), daemon=True).start()
    time.sleep(0.5)
    pid = os.fork()
    if pid == 0:
        t = time.monotonic()
        try:
            rpjrt.Client(old, timeout=30)
            os._exit(0)
        except rpjrt.FailedPreconditionError as e:
            ok = "forked while another thread" in str(e) and time.monotonic() - t < 5
            os._exit(7 if ok else 8)
    print("status", wait_child(pid, 40), flush=True)
    os._exit(0)
    """
    r = _run(code, plugin_paths_all["new"], plugin_paths_all["old"], str(fake_plugin_path()), timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "status 7" in r.stdout, (r.stdout, r.stderr[-2000:])


@pytest.mark.parametrize("how", ["fork", "preexec", "mpfork"])
def test_a_forked_child_that_forks_still_runs_its_own_exit_handlers(
    plugin_path: str, tmp_path: Path, how: str
) -> None:
    # The exit handler registered at a fork ends the *children* of that fork before the
    # plugin's static destructors; in the process that forked (itself a forked child here)
    # it does nothing, so that process's own handlers run.
    lib = exit_log_library(tmp_path)
    code = """
    import ctypes, os, subprocess, sys
    import rpjrt
    how = sys.argv[4]
    c = rpjrt.Client(sys.argv[1])
    pid = os.fork()
    if pid == 0:
        ctypes.CDLL(sys.argv[2]).start_log(sys.argv[3].encode())
        if how == "fork":
            g = os.fork()
            if g == 0:
                os._exit(0)
            wait_child(g)
        elif how == "preexec":
            subprocess.run(["true"], preexec_fn=lambda: None)
        else:
            import multiprocessing
            p = multiprocessing.get_context("fork").Process(target=int)
            p.start()
            p.join()
        sys.exit(3)
    print("status", wait_child(pid, 60), flush=True)
    """
    log = tmp_path / "log.txt"
    r = _run(code, plugin_path, str(lib), str(log), how)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "status 3" in r.stdout, r.stdout
    assert log.read_text() == "ran"


def test_two_threads_exporting_one_buffer_through_dlpack_do_not_abort(plugin_path: str) -> None:
    # The plugins count a buffer's external references in a list without a lock: two
    # exports at once lost a count, and the plugin aborted the process when it destroyed
    # the buffer ("Non-zero type 1 hold on destruction").
    code = """
    import sys, threading
    import numpy as np, rpjrt
    for r in range(150):
        c = rpjrt.Client(sys.argv[1])
        b = c.put(np.arange(1 << 14, dtype=np.float32))
        stop = threading.Event()
        def export():
            while not stop.is_set():
                a = np.from_dlpack(b)
                assert a[9] == 9.0
                del a
        ts = [threading.Thread(target=export) for _ in range(3)]
        for t in ts:
            t.start()
        threading.Event().wait(0.001 * (r % 7))
        stop.set()
        for t in ts:
            t.join()
        del b
        c.close()
    print("done", flush=True)
    """
    r = _run(code, plugin_path, timeout=240)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert "done" in r.stdout


def test_a_sessions_repr_in_a_forked_child_says_its_slots_are_inherited(plugin_path: str) -> None:
    code = """
    import os, sys
    import numpy as np, rpjrt
    c = rpjrt.Client(sys.argv[1])
    s = rpjrt.Session(c)
    s.bind("w", np.zeros(4, np.float32))
    pid = os.fork()
    if pid == 0:
        print(repr(s), flush=True)
        os._exit(0)
    print("status", wait_child(pid), flush=True)
    print(repr(s), flush=True)
    """
    r = _run(code, plugin_path)
    assert r.returncode == 0, r.stderr[-2000:]
    child, status, parent = r.stdout.splitlines()
    assert status == "status 0"
    assert "w: float32[4] inherited across fork" in child, child
    assert "w: float32[4] ready" in parent, parent
