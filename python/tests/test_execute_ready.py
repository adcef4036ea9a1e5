"""What a plain call learns about its outputs' readiness while the GIL is released for the
execution, so that `block_until_ready()` afterwards makes no plugin call (issue 24, the
Python execute + wait path)."""

from __future__ import annotations

import subprocess
import textwrap

import rpjrt

from .conftest import fake_plugin_path, run_python

MUL_ADD = """
func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.multiply %a, %b : tensor<4xf32>
  %1 = stablehlo.add %0, %b : tensor<4xf32>
  return %1 : tensor<4xf32>
}
"""


def in_child(body: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Runs `body` in a fresh interpreter after a preamble that loads the fake plugin as
    `lib` (with its live-handle counter, `live`), opens client `c`, compiles `exe` and
    puts `x`."""
    path = str(fake_plugin_path())
    preamble = f"""
import ctypes, threading
import rpjrt
lib = ctypes.CDLL({path!r})
lib.rpjrt_fake_live_handle_count.restype = ctypes.c_size_t
live = lib.rpjrt_fake_live_handle_count
c = rpjrt.Client({path!r})
exe = c.compile({MUL_ADD!r})
x = c.put([1.0, 2.0, 3.0, 4.0], dtype="float32")
"""
    return run_python(preamble + textwrap.dedent(body), env=env)


def test_a_call_remembers_outputs_that_were_ready_on_return() -> None:
    # The fake plugin runs programs inside Execute, so outputs are ready on return. After
    # the calls, every PJRT_Buffer_ReadyEvent fails: a wait that still asked the plugin
    # would raise, one that knows the output is ready does not.
    r = in_child(
        """
        (y,) = exe(x, x)
        (z,), _ = exe.execute_with_events(x, x)  # no readiness check on this path
        spec = b"RPJRT_FAKE_FAIL=PJRT_Buffer_ReadyEvent:INTERNAL:no more ready events"
        assert lib.rpjrt_fake_configure(spec, len(spec)) == 0
        assert y.block_until_ready() is y
        assert y.is_ready()
        print("Y", y.to_numpy().tolist())  # the fake's toy compiler returns `a`
        try:
            z.block_until_ready()
        except rpjrt.InternalError as e:
            print("Z", e)
        """
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Y [1.0, 2.0, 3.0, 4.0]" in r.stdout, r.stdout
    assert "Z PJRT_Buffer_ReadyEvent failed with INTERNAL: no more ready events" in r.stdout


def test_a_failed_readiness_check_is_reported_by_the_wait() -> None:
    # The check after the execution swallows its own error; the wait reports it.
    r = in_child(
        """
        (y,) = exe(x, x)
        try:
            y.block_until_ready()
        except rpjrt.InternalError as e:
            print("WAIT", e)
        """,
        env={"RPJRT_FAKE_FAIL": "PJRT_Buffer_ReadyEvent:INTERNAL:no ready event"},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "WAIT PJRT_Buffer_ReadyEvent failed with INTERNAL: no ready event" in r.stdout, r.stdout


def test_outputs_of_a_call_are_ready_and_correct_on_a_cpu_plugin(client: rpjrt.Client) -> None:
    exe = client.compile(MUL_ADD)
    x = client.put([1.0, 2.0, 3.0, 4.0], dtype="float32")
    outs = [exe(x, x)[0] for _ in range(20)]
    for y in outs:
        assert y.block_until_ready() is y
        assert y.to_numpy().tolist() == [2.0, 6.0, 12.0, 20.0]


def test_small_dropped_buffers_are_destroyed_by_the_next_call_and_big_ones_at_once() -> None:
    # A Buffer freed with the GIL held leaves its (small) C buffer to the next call of an
    # executable of its client, which destroys it with the GIL released; at most 8 wait,
    # bigger ones and the rest are destroyed at once, and close() destroys those waiting.
    r = in_child(
        """
        (y,) = exe(x, x)
        n = live()
        del y
        print("AFTER_DEL", live() - n)
        (z,) = exe(x, x)
        print("AFTER_CALL", live() - n)
        big = c.put(bytes(1 << 20))
        del big
        print("BIG", live() - n)
        small = [c.put([1.0], dtype="float32") for _ in range(10)]
        m = live()
        del small
        print("SMALL", live() - m)
        exe(x, x)  # destroys the 8 kept
        print("DRAINED", live() - n)
        del z
        c.close()
        print("CLOSED", live() - n)
        """
    )
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "AFTER_DEL 0\n" in out, out  # kept for the next call
    assert "AFTER_CALL 0\n" in out, out  # destroyed by it, and its own output made
    assert "BIG 0\n" in out, out  # 1 MiB: destroyed at once
    assert "SMALL -2\n" in out, out  # 8 kept, 2 destroyed at once
    assert "DRAINED 1\n" in out, out  # 8 destroyed; the call's own output, dropped, waits
    assert "CLOSED -1\n" in out, out  # close destroyed it and z: only x is left


def test_two_threads_dropping_outputs_leak_nothing() -> None:
    # Two threads call one executable and drop the outputs (kept for later destruction
    # by either thread's next call, or destroyed at once when the list is full or busy).
    r = in_child(
        """
        xs = [c.put([float(i)] * 4, dtype="float32") for i in range(2)]
        n = live()
        def work(i):
            for _ in range(500):
                (y,) = exe(xs[i], xs[i])
                assert y.block_until_ready().to_numpy().tolist() == [float(i)] * 4
                exe(xs[i], xs[i], wait=True)
        ts = [threading.Thread(target=work, args=(i,)) for i in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        print("KEPT", 0 <= live() - n <= 8)
        c.close()
        print("CLOSED", live() - n)
        """
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "KEPT True\n" in r.stdout, r.stdout
    assert "CLOSED 0\n" in r.stdout, r.stdout
