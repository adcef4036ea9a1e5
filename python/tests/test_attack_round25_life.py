"""Round 25 of outside checks: exit, fork, close and shutdown. A signal handler's exception
during the exit hook's wait for compiles; a child forked during the parent's trace; a
client closed while the compile cache compiles; DLPack and reprs in a forked child;
to_numpy() while the interpreter shuts down."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .conftest import WAIT_CHILD


def _run(
    code: str, *args: str, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    import os

    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", _PRELUDE + textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
    )


_PRELUDE = WAIT_CHILD + """
import atexit, os, signal, sys, threading, time
import rpjrt

def long_program(n):
    body = "\\n".join(f"  %v{i+1} = stablehlo.sine %v{i} : tensor<64xf32>" for i in range(n))
    return ("func.func public @main(%v0: tensor<64xf32>) -> tensor<64xf32> {\\n"
            f"{body}\\n  return %v{n} : tensor<64xf32>\\n}}")

"""


# The main thread ends while a daemon thread compiles, so rpjrt's exit hook waits for the
# compile; SIGTERM arrives during that wait (sent once the other exit hooks have run), and
# its Python handler raises.
_EXIT_WAIT = """
how = sys.argv[2]
c = rpjrt.Client(sys.argv[1])
prog = long_program(9000)
if how == "exit9":
    handler = lambda s, f: sys.exit(9)
elif how == "exit_text":
    handler = lambda s, f: sys.exit("stopped by SIGTERM")
elif how == "exit_none":
    handler = lambda s, f: sys.exit()
else:
    def handler(s, f):
        raise RuntimeError("raised by the SIGTERM handler")
signal.signal(signal.SIGTERM, handler)
started = threading.Event()
def compile_it():
    started.set()
    c.compile(prog)
    print("compile done", flush=True)
threading.Thread(target=compile_it, daemon=True).start()
exiting = threading.Event()
def killer():
    exiting.wait()
    time.sleep(0.3)
    os.kill(os.getpid(), signal.SIGTERM)
threading.Thread(target=killer, daemon=True).start()
# Registered after rpjrt's exit hook, so it runs before it.
atexit.register(exiting.set)
started.wait()
time.sleep(0.2)
print("main: ending", flush=True)
"""


@pytest.mark.parametrize(
    "how, status",
    [("exit9", 9), ("exit_text", 1), ("exit_none", 0), ("raise", 1)],
)
def test_a_signal_handlers_exception_during_the_exit_wait_ends_as_python_would(
    plugin_paths_all: dict[str, str], how: str, status: int
) -> None:
    r = _run(_EXIT_WAIT, plugin_paths_all["new"], how)
    assert "main: ending" in r.stdout, r.stderr
    # The compile was still running: the process ended in the exit hook's wait.
    assert "compile done" not in r.stdout, (r.stdout, r.stderr)
    assert r.returncode == status, (r.returncode, r.stderr)
    # Not Ctrl-C: the status and the notice are the handler's exception's.
    assert "interrupted" not in r.stderr, r.stderr
    assert "status 130" not in r.stderr, r.stderr
    assert f"ending the process now (status {status})" in r.stderr, r.stderr
    if how == "exit_text":
        # As CPython prints a SystemExit's non-integer code.
        assert "stopped by SIGTERM" in r.stderr, r.stderr
    if how == "raise":
        # Printed as an unhandled exception.
        assert "Traceback (most recent call last)" in r.stderr, r.stderr
        assert "RuntimeError: raised by the SIGTERM handler" in r.stderr, r.stderr


def test_a_child_forked_during_the_parents_trace_records_nothing_and_may_trace(
    plugin_paths_all: dict[str, str], tmp_path: Path
) -> None:
    code = """
    import json
    import numpy as np
    parent_file = sys.argv[3]
    c = rpjrt.Client(sys.argv[1])
    with rpjrt.trace(parent_file) as t:
        c.put(np.ones(4, np.float32)).to_numpy()
        pid = os.fork()
        if pid == 0:
            try:
                # A plugin the parent never loaded works in the child.
                c2 = rpjrt.Client(sys.argv[2])
                for _ in range(50):
                    c2.put(np.ones(4, np.float32)).to_numpy()
                # The parent's recording is not the child's: it may begin its own.
                with rpjrt.trace() as own:
                    c2.put(np.ones(4, np.float32)).to_numpy()
                assert own.count("transfer") == 1, own.events
                assert own.count("load") == 0, own.events
                # Again, left running while the inherited block ends (which stops nothing
                # of the child's).
                own2 = rpjrt.trace()
                own2.__enter__()
                c2.put(np.ones(4, np.float32))
            except BaseException as e:
                print(f"child: {type(e).__name__}: {e}", flush=True)
                os._exit(3)
    if pid == 0:
        # The inherited block ended in the child: nothing of it was recorded here.
        try:
            assert len(t.events) == 0, t.events
            assert "forked" in t.metadata.get("recording", ""), t.metadata
            c2.put(np.ones(4, np.float32))
            own2.__exit__(None, None, None)
            assert own2.count("transfer") == 2, own2.events
        except BaseException as e:
            print(f"child: {type(e).__name__}: {e}", flush=True)
            os._exit(4)
        print("child: ok", flush=True)
        sys.stdout.flush()
        os._exit(0)
    print("child status", wait_child(pid, 60), flush=True)
    spans = json.load(open(parent_file))["traceEvents"]
    print("parent transfers", sum(1 for e in spans if e.get("cat") == "transfer"))
    """
    r = _run(
        code,
        plugin_paths_all["new"],
        plugin_paths_all["old"],
        str(tmp_path / "parent.json"),
    )
    assert "child: ok" in r.stdout, (r.stdout, r.stderr)
    assert "child status 0" in r.stdout, (r.stdout, r.stderr)
    # The parent's file holds its own put, none of the child's.
    assert "parent transfers 1" in r.stdout, (r.stdout, r.stderr)


def test_closing_the_client_during_a_cache_compile_does_not_blame_the_plugin(
    plugin_paths_all: dict[str, str], tmp_path: Path
) -> None:
    code = """
    import warnings
    cache = rpjrt.Cache(sys.argv[2])
    c = rpjrt.Client(sys.argv[1])
    c.cache = cache
    got = {}
    started = threading.Event()
    def compile_it():
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            started.set()
            try:
                got["exe"] = c.compile(long_program(9000))
            except Exception as e:
                got["err"] = f"{type(e).__name__}: {e}"
            got["warnings"] = [str(x.message) for x in w]
    th = threading.Thread(target=compile_it)
    th.start()
    started.wait()
    time.sleep(0.5)
    c.close()
    th.join()
    for m in got["warnings"] + cache.take_warnings():
        print("warning:", m)
    print("entries:", len(cache.entries()))
    """
    r = _run(code, plugin_paths_all["new"], str(tmp_path / "cache"))
    assert r.returncode == 0, r.stderr
    assert "cannot serialize" not in r.stdout, r.stdout
    assert "warning: compile cache: nothing is cached" in r.stdout, r.stdout
    assert "closed" in r.stdout, r.stdout
    assert "entries: 0" in r.stdout, r.stdout


def test_dlpack_and_event_repr_in_a_forked_child_say_fork(plugin_path: str) -> None:
    code = """
    import numpy as np
    c = rpjrt.Client(sys.argv[1])
    b = c.put(np.arange(8, dtype=np.float32))
    ev = b.ready_event()
    ev.wait()
    pid = os.fork()
    if pid == 0:
        bad = []
        for name, fn in [
            ("__dlpack__", lambda: b.__dlpack__()),
            ("__dlpack__(max_version)", lambda: b.__dlpack__(max_version=(1, 0))),
            ("__dlpack_device__", lambda: b.__dlpack_device__()),
            ("np.from_dlpack", lambda: np.from_dlpack(b)),
            ("c.from_dlpack", lambda: c.from_dlpack(np.ones(3, np.float32))),
        ]:
            try:
                fn()
                bad.append(f"{name}: no error")
            except rpjrt.FailedPreconditionError as e:
                if "is a fork of the process" not in str(e):
                    bad.append(f"{name}: {e}")
            except Exception as e:
                bad.append(f"{name}: {type(e).__name__}: {e}")
        r = repr(ev)
        if "inherited across fork" not in r or "closed" in r:
            bad.append(f"repr(ev) = {r}")
        print("child:", bad, flush=True)
        os._exit(10 if not bad else 11)
    print("child status", wait_child(pid, 30))
    # In the parent the event is as it was.
    print("parent:", repr(ev))
    """
    r = _run(code, plugin_path)
    assert "child status 10" in r.stdout, (r.stdout, r.stderr)
    assert "rpjrt.Event(buffer float32[8] ready, done)" in r.stdout, r.stdout


def test_to_numpy_at_interpreter_shutdown_names_the_shutdown_not_a_missing_numpy(
    plugin_paths_all: dict[str, str],
) -> None:
    code = """
    import numpy as np
    c = rpjrt.Client(sys.argv[1])
    class Holder:
        def __init__(self):
            self.b = c.put(np.arange(8, dtype=np.float32))
        def __del__(self):
            try:
                print("__del__ read", self.b.to_numpy()[3], flush=True)
            except ImportError as e:
                print(f"__del__ raised: {e} | cause: {e.__cause__!r}", flush=True)
    # A module global: collected while the interpreter finalizes, when imports fail.
    h = Holder()
    """
    r = _run(code, plugin_paths_all["new"])
    # numpy is installed (and imported): the message names the shutdown, with the import's
    # own error as its cause.
    assert "__del__ raised: Buffer.to_numpy() cannot import numpy" in r.stdout, (
        r.stdout,
        r.stderr,
    )
    assert "pip install" not in r.stdout, r.stdout
    assert "shutting down" in r.stdout, r.stdout
    assert "cause: ImportError(" in r.stdout, r.stdout
    assert "PanicException" not in r.stderr, r.stderr


def test_to_numpy_keeps_the_real_import_error(
    plugin_paths_all: dict[str, str], tmp_path: Path
) -> None:
    # A numpy that is there but fails to import: its error, not "pip install".
    broken = tmp_path / "numpy"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise ImportError('this numpy build is broken')\n")
    code = """
    c = rpjrt.Client(sys.argv[1])
    b = c.put([1.0, 2.0])
    try:
        b.to_numpy()
    except ImportError as e:
        print(f"raised: {e} | cause: {e.__cause__!r}")
    """
    r = _run(code, plugin_paths_all["new"], env={"PYTHONPATH": str(tmp_path)})
    assert "raised:" in r.stdout, (r.stdout, r.stderr)
    assert "pip install" not in r.stdout, r.stdout
    assert "this numpy build is broken" in r.stdout, r.stdout
    # numpy absent (an import that finds no module): the install hint, with its cause.
    r = _run('\n    sys.modules["numpy"] = None' + code, plugin_paths_all["new"])
    assert "pip install 'rpjrt[numpy]'" in r.stdout, (r.stdout, r.stderr)
    assert "cause: ModuleNotFoundError(" in r.stdout, r.stdout
