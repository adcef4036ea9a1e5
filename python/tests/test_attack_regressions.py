"""Regressions of an outside attack (issue 8, items 2-7, 9, 12, 14, 15), on both plugins.

Every case runs in its own interpreter with a timeout: before the fixes, these aborted the
process (C++ exceptions, plugin CHECK failures), crashed it (SIGSEGV/SIGBUS) or hung it
(deadlocks, a FIFO opened as a library). Each asserts the clean, specific error (or the
right result) and a clean exit.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import FIXTURES, run_python

PRELUDE = r"""
import asyncio, gc, os, sys, time
import numpy as np
import rpjrt
plugin, fixtures = sys.argv[1], sys.argv[2]
mlir = lambda name: open(f"{fixtures}/{name}").read()
TUPLE = '''func.func public @main(%t: tuple<tensor<2xf32>, tensor<2xf32>>) -> tensor<2xf32> {
  %a = stablehlo.get_tuple_element %t[0] : (tuple<tensor<2xf32>, tensor<2xf32>>) -> tensor<2xf32>
  return %a : tensor<2xf32>
}'''
TOKEN = '''func.func public @main() -> !stablehlo.token {
  %t = stablehlo.create_token : !stablehlo.token
  return %t : !stablehlo.token
}'''
def expect(exc, fragment, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except exc as e:
        assert fragment in str(e), f"{fragment!r} not in {e!r}"
        return e
    raise AssertionError(f"no {exc.__name__} (wanted {fragment!r})")
"""


def run_case(plugin_path: str, code: str, timeout: float = 90, **kw: object) -> subprocess.CompletedProcess[str]:
    argv = "import sys; sys.argv = ['x'] + " + repr([plugin_path, str(FIXTURES)]) + "\n"
    r = run_python(argv + PRELUDE + code, timeout=timeout, **kw)  # type: ignore[arg-type]
    assert r.returncode == 0, f"exit {r.returncode}\nstdout: {r.stdout[-2000:]}\nstderr: {r.stderr[-3000:]}"
    return r


# -- 2. a parameter signature that cannot be passed: refuse, never "no checks" ----------


def test_tuple_parameters_are_refused(plugin_path: str) -> None:
    run_case(
        plugin_path,
        r"""
c = rpjrt.Client(plugin)
e = c.compile(TUPLE)
x = c.put(np.ones(2, np.float32))
for args in [(x, x), (x,), ()]:
    expect(rpjrt.InvalidArgumentError, "parameter 0 is a tuple", e, *args)
err = expect(rpjrt.UnsupportedError, "tuple", lambda: e.input_dtypes)
assert "does not expose" not in str(err), err
print("ok")
""",
    )


# -- 3. token buffers: every operation that needs data refuses them ---------------------


def test_token_buffers_are_refused_by_data_operations(plugin_path: str) -> None:
    run_case(
        plugin_path,
        r"""
c = rpjrt.Client(plugin)
(tk,) = c.compile(TOKEN)()
d0, d1 = c.devices()[0], c.devices()[1]
expect(rpjrt.InvalidArgumentError, "token", tk.copy_to, d1)
expect(rpjrt.InvalidArgumentError, "token", tk.copy_to, d0)
expect(rpjrt.InvalidArgumentError, "token", tk.copy_to, d0.memory("pinned_host"))
expect(rpjrt.InvalidArgumentError, "token", c.put, tk, device=1)
expect(rpjrt.InvalidArgumentError, "token", c.put, tk)
expect(rpjrt.InvalidArgumentError, "token", tk.to_host)
expect(rpjrt.InvalidArgumentError, "token", tk.tobytes)
expect(rpjrt.InvalidArgumentError, "token", np.asarray, tk)
expect(rpjrt.Error, "token", tk.__dlpack__)
tk.block_until_ready()
print("ok")
""",
    )


# -- 4. option overrides the plugins throw C++ exceptions on ------------------------------


def test_env_option_overrides_are_checked(plugin_path: str) -> None:
    run_case(
        plugin_path,
        r"""
c = rpjrt.Client(plugin)
prog = mlir("mul_add.mlir")
split = "xla_cpu_parallel_codegen_split_count"
for bad in [-1, 0, -(2**31), 2**31 - 1, 2**40]:
    expect(rpjrt.InvalidArgumentError, "out of range", c.compile, prog, env_option_overrides={split: bad})
expect(rpjrt.InvalidArgumentError, "out of range", c.compile, prog,
       env_option_overrides={"xla_cpu_some_thread_count": -5})
expect(rpjrt.InvalidArgumentError, "not an XLA option", c.compile, prog,
       env_option_overrides={"no such option": 1})
expect(rpjrt.InvalidArgumentError, "finite", c.compile, prog,
       env_option_overrides={"xla_some_ratio": float("nan")})
# Reasonable values still work, and a misspelt name is the plugin's clean error.
e = c.compile(prog, env_option_overrides={split: 2})
x = c.put(np.ones(8, np.float32))
assert e(x, x)[0].to_numpy().tolist() == [2.0] * 8
expect(rpjrt.InvalidArgumentError, "xla_no_such_flag", c.compile, prog,
       env_option_overrides={"xla_no_such_flag": 1})
print("ok")
""",
    )


# -- 5. every per-device argument list is checked before anything is launched -------------


def test_execute_sharded_checks_every_list_before_launch(plugin_path: str) -> None:
    r = run_case(
        plugin_path,
        r"""
c = rpjrt.Client(plugin)
ar = c.compile(mlir("allreduce.mlir"), num_replicas=2)
x = np.arange(4, dtype=np.float32)
a0 = c.put(x, device=0)
a1 = c.put(x, device=1)
expect(rpjrt.InvalidArgumentError, "argument 0 of device list 1 is on device 0", ar.execute_sharded, [[a0], [a0]])
expect(rpjrt.InvalidArgumentError, "device list 0", ar.execute_sharded, [[a1], [a1]])
expect(rpjrt.InvalidArgumentError, "", ar.execute_sharded, [[a1], [a0]])
bad = c.put(np.arange(4, dtype=np.int32), device=1)
expect(rpjrt.InvalidArgumentError, "argument 0 of device list 1", ar.execute_sharded, [[a0], [bad]])
short = c.put(np.arange(3, dtype=np.float32), device=1)
expect(rpjrt.InvalidArgumentError, "device list 1", ar.execute_sharded, [[a0], [short]])
expect(rpjrt.InvalidArgumentError, "buffers", ar.execute_sharded, [[a0], [a1, a1]])
# Nothing was launched: a correct call still runs, and no replica waits for a partner.
(o0,), (o1,) = ar.execute_sharded([[a0], [a1]])
assert o0.to_numpy().tolist() == (2 * x).tolist()
assert o1.to_numpy().tolist() == (2 * x).tolist()
print("ok")
""",
        timeout=60,
    )
    assert "ok" in r.stdout


# -- 6. fork: inherited clients are unusable in the child and never destroyed there ---------


def test_forked_child_refuses_inherited_client_and_exits_cleanly(plugin_path: str) -> None:
    r = run_case(
        plugin_path,
        r"""
c = rpjrt.Client(plugin)
exe = c.compile(mlir("mul_add.mlir"))
x = c.put(np.ones(8, np.float32))
pid = os.fork()
if pid == 0:
    code = 0
    try:
        for fn in [lambda: c.compile(mlir("mul_add.mlir")), lambda: exe(x, x), lambda: c.put(np.ones(2)),
                   lambda: x.to_numpy(), lambda: rpjrt.Client(plugin)]:
            try:
                fn()
                print("child: no error", flush=True); code = 3
            except rpjrt.Error as e:
                if "fork" not in str(e):
                    print("child: unclear error", e, flush=True); code = 4
    except BaseException as e:
        print("child: unexpected", repr(e), flush=True); code = 5
    sys.exit(code)  # runs finalisation: the inherited client, buffer, executable are dropped
_, status = os.waitpid(pid, 0)
assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"child status {status}"
# The parent is unaffected.
assert exe(x, x)[0].to_numpy().tolist() == [2.0] * 8
print("ok")
""",
        timeout=60,
    )
    assert "child:" not in r.stdout, r.stdout


# -- 7. the loader checks the file before dlopen; discovery never opens non-regular files ---


@pytest.mark.parametrize("kind", ["truncated", "header_only", "empty", "fifo", "directory", "dev_zero", "text"])
def test_bad_plugin_files_are_refused_before_loading(plugin_path: str, kind: str, tmp_path: Path) -> None:
    if kind == "truncated":
        target = tmp_path / "cut.so"
        data = Path(plugin_path).read_bytes()
        target.write_bytes(data[: len(data) // 2])
        want = "truncated"
    elif kind == "header_only":
        target = tmp_path / "head.so"
        target.write_bytes(Path(plugin_path).read_bytes()[:64])
        want = "truncated"
    elif kind == "empty":
        target = tmp_path / "empty.so"
        target.write_bytes(b"")
        want = "the file is empty"
    elif kind == "fifo":
        target = tmp_path / "pipe.so"
        os.mkfifo(target)
        want = "FIFO"
    elif kind == "directory":
        target = tmp_path / "dir.so"
        target.mkdir()
        want = "directory"
    elif kind == "dev_zero":
        target = Path("/dev/zero")
        want = "character device"
    else:
        target = tmp_path / "text.so"
        target.write_text("not a library")
        want = "not an ELF file"
    run_case(
        plugin_path,
        f"""
target = {str(target)!r}
for fn in [rpjrt.Client, rpjrt.Plugin]:
    expect(rpjrt.PluginLoadError, {want!r}, fn, target)
# A listing probes without loading, and never blocks either.
assert rpjrt._rpjrt is not None
try:
    rpjrt._rpjrt._probe_pjrt_version(target)
    raise AssertionError("probe accepted it")
except rpjrt.PluginLoadError as e:
    assert {want!r} in str(e), e
print("ok")
""",
        timeout=60,
    )


def test_discovery_never_opens_a_fifo_config(plugin_path: str, tmp_path: Path) -> None:
    fifo = tmp_path / "plugin.json"
    os.mkfifo(fifo)
    run_case(
        plugin_path,
        f"""
os.environ["PJRT_NAMES_AND_LIBRARY_PATHS"] = "fifo:{fifo}"
expect(rpjrt.PluginLoadError, "not a regular file", rpjrt.Client, "fifo")
print("ok")
""",
        timeout=60,
    )


# -- 9. no deadlock between a thread holding the GIL and the plugin's callback ------------

SPIN = r"""
async def start(c):
    spin = c.compile(mlir("spin.mlir"))
    (y,) = spin(np.int32(10_000_000), np.zeros(4096, np.float32))
    try:
        await asyncio.wait_for(y, 0.01)
        print("finished early")
    except asyncio.TimeoutError:
        pass
    return spin, y
"""


def test_abandoned_await_then_client_drop_does_not_deadlock(plugin_path: str) -> None:
    run_case(
        plugin_path,
        SPIN
        + r"""
async def main():
    c = rpjrt.Client(plugin)
    spin, y = await start(c)
    del spin, y, c
    gc.collect()  # the client's destroy waits for the computation; its callback must not need us
asyncio.run(main())
print("ok")
""",
        timeout=120,
    )


def test_interpreter_exit_after_cancelled_await_does_not_deadlock(plugin_path: str) -> None:
    run_case(
        plugin_path,
        SPIN
        + r"""
KEEP = []
async def waiter(y):
    await y
async def main():
    c = rpjrt.Client(plugin)
    spin, y = await start(c)
    t = asyncio.ensure_future(waiter(y))
    await asyncio.sleep(0.01)
    t.cancel()
    KEEP.append((c, spin, y))
asyncio.run(main())
print("ok")
# Interpreter exit drops the client while the computation runs and callbacks are pending.
""",
        timeout=120,
    )


def test_ctrl_c_during_await_leaves_cleanly(plugin_path: str) -> None:
    code = (
        "import sys; sys.argv = ['x'] + "
        + repr([plugin_path, str(FIXTURES)])
        + "\n"
        + PRELUDE
        + r"""
import signal, threading
async def main():
    c = rpjrt.Client(plugin)
    spin = c.compile(mlir("spin.mlir"))
    (y,) = spin(np.int32(10_000_000), np.zeros(4096, np.float32))
    threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    await y
try:
    asyncio.run(main())
    print("finished")
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1] in ("interrupted", "finished"), r.stdout


# -- 12. devices of another client -------------------------------------------------------


def test_compile_refuses_devices_of_another_client(plugin_path: str) -> None:
    run_case(
        plugin_path,
        r"""
c = rpjrt.Client(plugin)
other = rpjrt.Client(plugin)
prog = mlir("mul_add.mlir")
expect(rpjrt.InvalidArgumentError, "another client", c.compile, prog, device=other.devices()[1])
expect(rpjrt.InvalidArgumentError, "another client", c.compile, mlir("allreduce.mlir"),
       num_replicas=2, device_assignment=[[other.devices()[0]], [other.devices()[1]]])
exe = c.compile(prog, device=c.devices()[1])
assert [d.id for d in exe.addressable_devices()] == [c.devices()[1].id]
print("ok")
""",
    )


# -- 14. small ones -----------------------------------------------------------------------


def test_bool_is_not_a_device_index(plugin_path: str) -> None:
    run_case(
        plugin_path,
        r"""
c = rpjrt.Client(plugin)
x = np.ones(8, np.float32)
for flag in (True, False):
    expect(rpjrt.InvalidArgumentError, "bool", c.put, x, device=flag)
    expect(rpjrt.InvalidArgumentError, "bool", c.put, x, flag)
    expect(rpjrt.InvalidArgumentError, "bool", c.from_dlpack, x, device=flag)
    expect(rpjrt.InvalidArgumentError, "bool", c.compile, mlir("mul_add.mlir"), device=flag)
    expect(rpjrt.InvalidArgumentError, "bool", c.device, flag)
    expect(rpjrt.InvalidArgumentError, "bool", c.compile, mlir("allreduce.mlir"), num_replicas=2,
           device_assignment=[[flag], [2]])
d = c.compile(mlir("donate.mlir"))
expect(rpjrt.InvalidArgumentError, "bool", d, c.put(np.ones(8, np.float32)), donate=[False])
assert c.put(x, device=1).device.id == c.devices()[1].id
print("ok")
""",
    )


def test_huge_cpu_device_count_is_refused_quickly(plugin_path: str) -> None:
    run_case(
        plugin_path,
        r"""
for n in (65536, 1025, 2**31, 0, -1):
    expect(rpjrt.InvalidArgumentError, "cpu_device_count", rpjrt.Client, plugin, options={"cpu_device_count": n})
with rpjrt.Client(plugin, options={"cpu_device_count": 8}) as c:
    assert len(c.devices()) == 8
print("ok")
""",
        timeout=60,
    )


def test_import_in_a_subinterpreter_is_refused_clearly(plugin_path: str) -> None:
    r = run_case(
        plugin_path,
        r"""
try:
    import _xxsubinterpreters as interpreters
except ImportError:
    import _interpreters as interpreters  # CPython 3.13+
sid = interpreters.create()
try:
    interpreters.run_string(sid, "import rpjrt")
    raise AssertionError("imported in a subinterpreter")
except Exception as e:
    assert "subinterpreter" in str(e), e
    assert "Reinstall" not in str(e), e
assert rpjrt.Client(plugin).put([1.0, 2.0]).to_numpy().tolist() == [1.0, 2.0]
print("ok")
""",
    )
    assert "ok" in r.stdout


@pytest.mark.parametrize("how", ["python -m rpjrt", "console script"])
def test_info_json_into_a_closed_pipe_exits_quietly(plugin_path: str, how: str) -> None:
    if how == "console script":
        exe = shutil.which("rpjrt", path=str(Path(sys.executable).parent))
        assert exe, "the rpjrt console script is not installed next to this Python"
        cmd = [exe]
    else:
        cmd = [sys.executable, "-m", "rpjrt"]
    env = dict(os.environ, RPJRT_PLUGIN=plugin_path)
    # A reader that is gone before the tool writes, like `| head` after its first lines.
    p = subprocess.Popen(cmd + ["info", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()
    err = p.stderr.read().decode(errors="replace")
    rc = p.wait(timeout=60)
    assert "panick" not in err.lower() and "Traceback" not in err and "Broken pipe" not in err, err
    assert rc in (0, -signal.SIGPIPE, 128 + signal.SIGPIPE), (rc, err)


# -- 15. Ctrl-C while dropping a client waits for its computation -------------------------


def test_ctrl_c_while_a_client_drop_waits_leaves_cleanly(plugin_path: str) -> None:
    r = run_case(
        plugin_path,
        r"""
import signal, threading
c = rpjrt.Client(plugin)
spin = c.compile(mlir("spin.mlir"))
(y,) = spin(np.int32(10_000_000), np.zeros(4096, np.float32))
threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
try:
    del y, spin, c  # waits for the computation, without the GIL
    gc.collect()
    time.sleep(1)
    print("finished")
except KeyboardInterrupt:
    print("interrupted")
""",
        timeout=120,
    )
    assert r.stdout.strip().splitlines()[-1] in ("interrupted", "finished"), r.stdout
