"""Round 20: defects found by outside checks, and the classes behind them.

A. A custom-call handler on a plugin worker thread (its program was dispatched
   asynchronously) that waits for a COPY (``copy_to`` another device) of a buffer queued
   behind its own execution used to wait for ever: the check looked only at the copy's own
   device. A copy now remembers the devices whose queues produce it, and the wait is
   refused at once, through every way of waiting.
B. ``np.from_dlpack(buf, copy=True)`` gave a read-only array: the copy is the consumer's
   own, so it is writable now (and the buffer itself stays read-only through DLPack).
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np
import pytest

import rpjrt
import rpjrt.ffi

from .conftest import WAIT_CHILD

N = 256


def _side_effect_program(target: str) -> str:
    # The dot makes the CPU plugins dispatch the program asynchronously: the custom call
    # then runs on a plugin thread after the execute call has returned.
    return (
        f"func.func public @main(%x: tensor<{N}x{N}xf32>) -> () {{\n"
        f"  %d = stablehlo.dot_general %x, %x, contracting_dims = [1] x [0] : "
        f"(tensor<{N}x{N}xf32>, tensor<{N}x{N}xf32>) -> tensor<{N}x{N}xf32>\n"
        f"  %s = stablehlo.slice %d [0:1, 0:1] : (tensor<{N}x{N}xf32>) -> tensor<1x1xf32>\n"
        f"  stablehlo.custom_call @{target}(%s) {{api_version = 4 : i32, has_side_effect = true}}"
        " : (tensor<1x1xf32>) -> ()\n  return\n}"
    )


DOT = (
    f"func.func public @main(%x: tensor<{N}x{N}xf32>) -> tensor<{N}x{N}xf32> {{\n"
    f"  %d = stablehlo.dot_general %x, %x, contracting_dims = [1] x [0] : "
    f"(tensor<{N}x{N}xf32>, tensor<{N}x{N}xf32>) -> tensor<{N}x{N}xf32>\n"
    f"  return %d : tensor<{N}x{N}xf32>\n}}"
)

WAITS: dict[str, Callable[[Any], Any]] = {
    "block_until_ready": lambda b: b.block_until_ready(),
    "to_numpy": lambda b: b.to_numpy(),
    "ready_event": lambda b: b.ready_event().wait(),
}


@pytest.mark.parametrize("how", sorted(WAITS))
@pytest.mark.parametrize("hops", [1, 2])
def test_worker_handler_waiting_for_a_copy_of_a_queued_buffer_is_refused(
    plugin_paths_all: dict[str, str], how: str, hops: int
) -> None:
    for which in ("old", "new"):
        c = rpjrt.Client(plugin_paths_all[which], options={"cpu_device_count": 3})
        try:
            got: list[Any] = []
            pending: dict[str, Any] = {}

            def h(call: Any) -> None:
                time.sleep(0.2)
                try:
                    got.append(WAITS[how](pending["b"]))
                except rpjrt.Error as e:
                    got.append(e)

            target = f"r20_copy_wait_{how}_{hops}_{id(c)}"
            rpjrt.ffi.register(c, target, h)
            outer = c.compile(_side_effect_program(target))
            dot = c.compile(DOT)
            x = c.put(np.ones((N, N), np.float32))
            outer(x)  # the handler runs on device 0's worker thread, later
            b = dot(x)[0]  # queued behind it on device 0
            for d in c.devices()[1 : 1 + hops]:
                b = b.copy_to(d)  # a copy on another device, of contents not produced yet
            pending["b"] = b
            deadline = time.monotonic() + 30
            while not got and time.monotonic() < deadline:
                time.sleep(0.05)
            assert got, f"{which}: the handler hung waiting for the copy ({how})"
            assert isinstance(got[0], rpjrt.FailedPreconditionError), (which, got)
            msg = str(got[0])
            assert "worker thread" in msg and "device 0" in msg and "copy" in msg, msg
            # Once the execution is done, the copy is there and right.
            np.testing.assert_array_equal(b.to_numpy()[0, :4], float(N))
        finally:
            c.close()


def test_worker_handler_may_wait_for_a_copy_of_a_ready_buffer(plugin_path: str) -> None:
    c = rpjrt.Client(plugin_path, options={"cpu_device_count": 2})
    try:
        got: list[Any] = []
        src = c.put(np.arange(4, dtype=np.float32))
        src.block_until_ready()
        copy = src.copy_to(c.devices()[1])

        def h(call: Any) -> None:
            try:
                got.append(copy.to_numpy().copy())
            except rpjrt.Error as e:
                got.append(e)

        target = f"r20_copy_ready_{id(c)}"
        rpjrt.ffi.register(c, target, h)
        outer = c.compile(_side_effect_program(target))
        outer(c.put(np.ones((N, N), np.float32)))
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            time.sleep(0.05)
        assert got and isinstance(got[0], np.ndarray), got
        np.testing.assert_array_equal(got[0], [0, 1, 2, 3])
    finally:
        c.close()


def test_from_dlpack_copy_is_the_consumers_own(client: rpjrt.Client) -> None:
    b = client.put(np.arange(6, dtype=np.int32).reshape(2, 3))
    view = np.from_dlpack(b)
    assert not view.flags.writeable
    c = np.from_dlpack(b, copy=True)
    assert c.flags.writeable and c.ctypes.data != view.ctypes.data
    c[...] = -1
    np.testing.assert_array_equal(b.to_numpy(), np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(view, np.arange(6).reshape(2, 3))
    del view, c
    b.delete()


ADD2 = """func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %b : tensor<4xf32>
  return %0 : tensor<4xf32>
}"""


def test_one_buffer_donated_in_two_positions_is_refused(client: rpjrt.Client) -> None:
    exe = client.compile(ADD2)
    b = client.put(np.arange(4, dtype=np.float32))
    with pytest.raises(rpjrt.InvalidArgumentError, match="arguments 0 and 1 are the same buffer"):
        exe(b, b, donate=[0, 1])
    # Refused before anything happened: the buffer is intact and usable, and donating it
    # once works.
    np.testing.assert_array_equal(b.to_numpy(), [0, 1, 2, 3])
    np.testing.assert_array_equal(exe(b, client.put(np.ones(4, np.float32)), donate=[0])[0].to_numpy(), [1, 2, 3, 4])
    assert b.is_deleted()


@pytest.mark.parametrize("replicas", [1, 2])
def test_execute_sharded_wait_raises_a_zero_output_programs_error(
    plugin_path: str, replicas: int
) -> None:
    c = rpjrt.Client(plugin_path, options={"cpu_device_count": replicas})
    try:
        target = f"r20_sharded_zero_{replicas}_{id(c)}"
        ran: list[int] = []

        def h(call: Any) -> None:
            ran.append(1)
            raise ValueError("the handler failed on purpose")

        rpjrt.ffi.register(c, target, h)
        exe = c.compile(_side_effect_program(target), num_replicas=replicas)
        lists = [[c.put(np.ones((N, N), np.float32), device=d)] for d in exe.addressable_devices()]
        with pytest.raises(rpjrt.Error, match="the handler failed on purpose"):
            exe.execute_sharded(lists, wait=True)
        assert len(ran) == replicas
        # A program that succeeds: wait=True returns its (ready) outputs.
        ok = c.compile(DOT, num_replicas=replicas)
        outs = ok.execute_sharded(lists, wait=True)
        assert len(outs) == replicas and all(o[0].is_ready() for o in outs)
    finally:
        c.close()


@pytest.mark.parametrize("raise_", ["rpjrt", "memory"])
def test_only_a_handlers_memory_error_gets_a_memory_report(
    client: rpjrt.Client, raise_: str
) -> None:
    target = f"r20_quota_{raise_}_{id(client)}"

    def h(call: Any) -> None:
        if raise_ == "rpjrt":
            raise rpjrt.ResourceExhaustedError("request quota of the lookup service exceeded")
        raise MemoryError("the handler's own cache is full")

    rpjrt.ffi.register(client, target, h)
    exe = client.compile(
        "func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {\n"
        f"  %0 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32}} : "
        "(tensor<8xf32>) -> tensor<8xf32>\n  return %0 : tensor<8xf32>\n}"
    )
    with pytest.raises(rpjrt.ResourceExhaustedError) as e:
        exe(np.zeros(8, np.float32))[0].to_numpy()
    msg = str(e.value)
    if raise_ == "rpjrt":
        # The handler's own limit: no memory ran out, so no memory report.
        assert "quota" in msg, msg
        assert "smaller batches" not in msg and "allocator" not in msg, msg
        assert not getattr(e.value, "hint", None), e.value.hint
    else:
        # The process ran out of memory: the report (once) is about that.
        assert "cache is full" in msg and msg.count("\nhint: ") == 1, msg


def test_a_child_forked_during_a_compile_exits_at_once(plugin_path: str, tmp_path: Any) -> None:
    # The child does nothing with rpjrt: its exit hook must not wait for the parent's
    # compile (or client destroy), whose thread does not exist in the child.
    import subprocess
    import sys
    import textwrap

    script = tmp_path / "fork_during_compile.py"
    script.write_text(
        WAIT_CHILD
        + textwrap.dedent(
            """
            import os, sys, threading, time
            import rpjrt
            c = rpjrt.Client(sys.argv[1])
            src = sys.argv[2]
            in_compile = threading.Event()
            def compiler():
                while True:
                    in_compile.set()
                    c.compile(src)
            threading.Thread(target=compiler, daemon=True).start()
            in_compile.wait()
            for i in range(5):
                time.sleep(0.02)
                t0 = time.monotonic()
                pid = os.fork()
                if pid == 0:
                    sys.exit(0)
                status = wait_child(pid, 15)
                if status == "HUNG":
                    print("HUNG", i)
                    sys.exit(3)
                assert status == 0, status
                print("child", i, round(time.monotonic() - t0, 2))
            os._exit(0)
            """
        )
    )
    r = subprocess.run(
        [sys.executable, str(script), plugin_path, ADD2],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr[-2000:])
    times = [float(line.split()[2]) for line in r.stdout.splitlines() if line.startswith("child")]
    assert len(times) == 5 and max(times) < 5, r.stdout


def _async_custom_call(target: str) -> str:
    return (
        f"func.func public @main(%x: tensor<{N}x{N}xf32>) -> tensor<4xf32> {{\n"
        f"  %d = stablehlo.dot_general %x, %x, contracting_dims = [1] x [0] : "
        f"(tensor<{N}x{N}xf32>, tensor<{N}x{N}xf32>) -> tensor<{N}x{N}xf32>\n"
        f"  %s = stablehlo.slice %d [0:1, 0:4] : (tensor<{N}x{N}xf32>) -> tensor<1x4xf32>\n"
        "  %r = stablehlo.reshape %s : (tensor<1x4xf32>) -> tensor<4xf32>\n"
        f"  %0 = stablehlo.custom_call @{target}(%r) {{api_version = 4 : i32}} : "
        "(tensor<4xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n}"
    )


ADD1 = """func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %x, %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}"""


def test_worker_handlers_waiting_on_each_others_devices_are_refused_not_deadlocked(
    plugin_paths_all: dict[str, str],
) -> None:
    """Handlers of async programs on devices 0 and 1 each execute on the other device and
    read the result: each device's queue waits for the other's. One wait is refused (the
    one that would close the cycle); the other then completes."""
    import threading

    for which in ("old", "new"):
        c = rpjrt.Client(plugin_paths_all[which], options={"cpu_device_count": 2})
        try:
            devs = c.devices()
            small = c.compile(ADD1, portable=True)
            barrier = threading.Barrier(2, timeout=10)
            got: dict[int, Any] = {}

            def h(call: Any) -> Any:
                d = call.device_ordinal
                barrier.wait()
                outs = small(np.ones(4, np.float32), device=devs[1 - d])
                try:
                    got[d] = outs[0].to_numpy().copy()
                except rpjrt.FailedPreconditionError as e:
                    got[d] = e
                return call.args[0].to_numpy()

            target = f"r20_cross_{id(c)}"
            rpjrt.ffi.register(c, target, h)
            e = c.compile(_async_custom_call(target), portable=True)
            a = np.ones((N, N), np.float32)
            outs = [e(a, device=devs[0])[0], e(a, device=devs[1])[0]]
            deadline = time.monotonic() + 30
            while len(got) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert len(got) == 2, f"{which}: the handlers deadlocked ({got})"
            refused = [d for d, v in got.items() if isinstance(v, Exception)]
            assert len(refused) == 1, (which, got)
            msg = str(got[refused[0]])
            assert "each device's queue waits for the other's" in msg, msg
            ok = 1 - refused[0]
            np.testing.assert_array_equal(got[ok], 2.0)
            # The handlers caught the refusal and returned: both programs complete.
            for o in outs:
                np.testing.assert_array_equal(o.to_numpy(), float(N))
        finally:
            c.close()


@pytest.mark.parametrize("how", ["event", "prepared"])
def test_worker_handler_waiting_for_a_queued_executions_events_is_refused(
    plugin_path: str, how: str
) -> None:
    c = rpjrt.Client(plugin_path)
    try:
        small = c.compile(ADD1)
        later: dict[str, Any] = {}
        got: list[Any] = []

        def h(call: Any) -> Any:
            time.sleep(0.2)
            try:
                if how == "event":
                    later["w"].wait()
                else:
                    later["w"].block_until_ready()
                got.append("returned")
            except rpjrt.Error as e:
                got.append(e)
            return call.args[0].to_numpy()

        target = f"r20_events_{how}_{id(c)}"
        rpjrt.ffi.register(c, target, h)
        outer = c.compile(_async_custom_call(target))
        x4 = c.put(np.ones(4, np.float32))
        o = outer(np.ones((N, N), np.float32))[0]  # the handler runs later, on a worker
        if how == "event":
            later["w"] = small.execute_with_events(x4)[1]
        else:
            later["w"] = small.prepare([[x4]])(wait=False)
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            time.sleep(0.05)
        assert got, "the handler hung waiting"
        assert isinstance(got[0], rpjrt.FailedPreconditionError), got
        assert "worker thread" in str(got[0])
        np.testing.assert_array_equal(o.to_numpy(), float(N))
        later["w"].wait() if how == "event" else later["w"].block_until_ready()
    finally:
        c.close()


def test_a_handler_value_whose_array_is_masked_is_refused(client: rpjrt.Client) -> None:
    class Holder:
        def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
            return np.ma.masked_array(np.arange(4, dtype=np.float32), mask=[0, 1, 0, 0])

    target = f"r20_masked_holder_{id(client)}"
    rpjrt.ffi.register(client, target, lambda call: Holder())
    exe = client.compile(
        "func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        f"  %0 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32}} : "
        "(tensor<4xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n}"
    )
    with pytest.raises(rpjrt.InvalidArgumentError, match="masked array for result 0"):
        exe(np.zeros(4, np.float32))[0].to_numpy()

    class Plain:
        def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
            return np.full(4, 3, np.float32)

    rpjrt.ffi.register(client, target, lambda call: Plain(), replace=True)
    np.testing.assert_array_equal(exe(np.zeros(4, np.float32))[0].to_numpy(), 3.0)


def test_prepared_calls_and_their_outputs_take_weak_references(client: rpjrt.Client) -> None:
    import weakref

    exe = client.compile(ADD1)
    p = exe.prepare([[client.put(np.ones(4, np.float32))]])
    outs = p(wait=True)
    assert weakref.ref(p)() is p and weakref.ref(outs)() is outs


def test_worker_handler_waiting_for_a_portable_executions_event_is_refused(
    plugin_path: str,
) -> None:
    c = rpjrt.Client(plugin_path, options={"cpu_device_count": 2})
    try:
        d0 = c.devices()[0]
        small = c.compile(ADD1, portable=True)
        later: dict[str, Any] = {}
        got: list[Any] = []

        def h(call: Any) -> Any:
            time.sleep(0.2)
            try:
                later["ev"].wait()
                got.append("returned")
            except rpjrt.Error as e:
                got.append(e)
            return call.args[0].to_numpy()

        target = f"r20_portable_event_{id(c)}"
        rpjrt.ffi.register(c, target, h)
        outer = c.compile(_async_custom_call(target), portable=True)
        o = outer(np.ones((N, N), np.float32), device=d0)[0]
        later["ev"] = small.execute_with_events(c.put(np.ones(4, np.float32), device=d0), device=d0)[1]
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            time.sleep(0.05)
        assert got and isinstance(got[0], rpjrt.FailedPreconditionError), got
        np.testing.assert_array_equal(o.to_numpy(), float(N))
    finally:
        c.close()


def test_outputs_computed_from_a_queued_copy_wait_for_its_source_device(plugin_path: str) -> None:
    """A handler on device 0 copies a buffer queued behind its own execution to device 1,
    runs a program there on the copy and reads the output: refused, not hung."""
    c = rpjrt.Client(plugin_path, options={"cpu_device_count": 2})
    try:
        d0, d1 = c.devices()[:2]
        small = c.compile(ADD1, portable=True)
        later: dict[str, Any] = {}
        got: list[Any] = []

        def h(call: Any) -> Any:
            time.sleep(0.3)
            try:
                z = later["y"].copy_to(d1)
                got.append(small(z, device=d1)[0].to_numpy().copy())
            except rpjrt.Error as e:
                got.append(e)
            return call.args[0].to_numpy()

        target = f"r20_via_input_{id(c)}"
        rpjrt.ffi.register(c, target, h)
        outer = c.compile(_async_custom_call(target), portable=True)
        o = outer(np.ones((N, N), np.float32), device=d0)[0]
        later["y"] = small(c.put(np.ones(4, np.float32), device=d0), device=d0)[0]
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            time.sleep(0.05)
        assert got and isinstance(got[0], rpjrt.FailedPreconditionError), got
        np.testing.assert_array_equal(o.to_numpy(), float(N))
    finally:
        c.close()


def test_handlers_waiting_for_host_filled_alias_buffers_are_not_a_cycle(plugin_path: str) -> None:
    """Handlers on devices 0 and 1 each wait for an alias buffer on the other device that
    the host fills later: no device queue produces those, so neither wait is refused."""
    import threading

    c = rpjrt.Client(plugin_path, options={"cpu_device_count": 2})
    try:
        devs = c.devices()[:2]
        alias = {d.id: c.create_alias_buffer("float32", [4], device=d) for d in devs}
        got: dict[int, Any] = {}
        barrier = threading.Barrier(2, timeout=10)

        def h(call: Any) -> Any:
            d = call.device_ordinal
            barrier.wait()
            try:
                got[d] = alias[devs[1 - d].id][0].to_numpy().copy()
            except rpjrt.Error as e:
                got[d] = e
            return call.args[0].to_numpy()

        target = f"r20_alias_wait_{id(c)}"
        rpjrt.ffi.register(c, target, h)
        e = c.compile(_async_custom_call(target), portable=True)
        outs = [e(np.ones((N, N), np.float32), device=d)[0] for d in devs]
        time.sleep(1.8)  # past the 1 s grace
        for d in devs:
            alias[d.id][1].fulfill(c.put(np.full(4, 7, np.float32), device=d))
        deadline = time.monotonic() + 30
        while len(got) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(got) == 2, got
        for v in got.values():
            assert not isinstance(v, Exception), v
            np.testing.assert_array_equal(v, 7.0)
        for o in outs:
            np.testing.assert_array_equal(o.to_numpy(), float(N))
    finally:
        c.close()


_EXIT_HANDLER_C = r"""
#include <stdlib.h>
#include <unistd.h>
static pid_t loaded_in;
/* Stands in for a plugin's static destructor that waits for a lock or a thread pool of the
   process that loaded it: in a forked child it never returns. */
static void wait_for_parent_threads(void) {
    if (getpid() != loaded_in) {
        for (;;) pause();
    }
}
__attribute__((constructor)) static void on_load(void) {
    loaded_in = getpid();
    atexit(wait_for_parent_threads);
}
"""


def test_a_forked_child_ends_without_the_exit_handlers_of_its_parent(
    plugin_path: str, tmp_path: Any
) -> None:
    # In a child forked after a plugin was loaded, C exit handlers registered before the
    # child's exit (a plugin's static destructors) are skipped: they wait for the parent's
    # threads. The exit status and C stdio output survive; the parent still runs them.
    import shutil
    import subprocess
    import sys
    import textwrap

    cc = shutil.which("cc")
    if cc is None:
        pytest.fail("the C compiler `cc` is needed to build the test's exit-handler library")
    lib = tmp_path / "libexithandler.so"
    src = tmp_path / "exithandler.c"
    src.write_text(_EXIT_HANDLER_C)
    r = subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    script = tmp_path / "fork_exit.py"
    script.write_text(
        WAIT_CHILD
        + textwrap.dedent(
            """
            import ctypes, os, sys, time
            import rpjrt
            c = rpjrt.Client(sys.argv[1])
            ctypes.CDLL(sys.argv[2])
            libc = ctypes.CDLL(None)
            for how in ("sys.exit", "end of script"):
                pid = os.fork()
                if pid == 0:
                    libc.printf(b"child output kept (%s) ", how.encode())
                    if how == "sys.exit":
                        sys.exit(7)
                    raise SystemExit(7)
                status = wait_child(pid, 20)
                if status == "HUNG":
                    print("HUNG", how, flush=True)
                    os._exit(3)
                print("child", how, status, flush=True)
            """
        )
    )
    r = subprocess.run(
        [sys.executable, str(script), plugin_path, str(lib)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr[-2000:])
    assert "child sys.exit 7" in r.stdout and "child end of script 7" in r.stdout, r.stdout
    assert r.stdout.count("child output kept") == 2, r.stdout
