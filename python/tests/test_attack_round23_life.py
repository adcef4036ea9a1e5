"""Round 23 (lifecycles): regressions of the fixes.

- rpjrt's notifier thread (which runs done-callbacks) keeps one Python thread state for
  its life. It made and deleted one for each callback, which takes the interpreter's lock
  of thread states without the GIL: a ``fork()`` at that moment left the child stuck
  inside ``os.fork()`` for good (about one fork in a hundred with callbacks in flight). A
  plugin's worker threads, which end with their client, do not keep theirs (kept, they
  outlived their threads, one more per worker per client).
- ``close()`` of a client inherited by a forked child does nothing (a ``with`` block the
  child leaves ends quietly); it ran the parent's pending done-callbacks in the child.
- A Session loader's failure that keeps a class of its own (MemoryError, TimeoutError, an
  rpjrt error) no longer says "invalid argument:".
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import numpy as np
import pytest

import rpjrt
import rpjrt.ffi

from .conftest import run_python


def test_the_notifier_keeps_its_thread_state_between_callbacks(client: Any) -> None:
    # A threading.local lives in the thread state: it keeps its values from one callback
    # to the next only if the notifier's thread state does.
    local = threading.local()
    counts: list[int] = []
    done = threading.Event()
    b = client.put(np.ones(4, np.float32))

    def callback(last: bool) -> None:
        local.n = getattr(local, "n", 0) + 1
        counts.append(local.n)
        if last:
            done.set()

    for k in range(20):
        b.ready_event().add_done_callback(lambda e, last=(k == 19): callback(last))
        time.sleep(0.005)  # let the notifier go idle (and let go of the GIL) in between
    assert done.wait(10)
    assert counts == list(range(1, 21)), counts


def _thread_states() -> int:
    """How many Python thread states the interpreter has (C API, with the GIL held)."""
    import ctypes

    api = ctypes.pythonapi
    api.PyInterpreterState_Get.restype = ctypes.c_void_p
    api.PyInterpreterState_ThreadHead.restype = ctypes.c_void_p
    api.PyInterpreterState_ThreadHead.argtypes = [ctypes.c_void_p]
    api.PyThreadState_Next.restype = ctypes.c_void_p
    api.PyThreadState_Next.argtypes = [ctypes.c_void_p]
    n, ts = 0, api.PyInterpreterState_ThreadHead(api.PyInterpreterState_Get())
    while ts:
        n, ts = n + 1, api.PyThreadState_Next(ts)
    return n


def test_plugin_worker_threads_leave_no_thread_states_behind(plugin_path: str) -> None:
    # Custom calls on a plugin's worker threads (two replicas), in clients made and closed
    # one after another: each client's workers end with it, and a thread state kept for
    # them would outlive them (one more per worker per client).
    target = f"r23_life_states_{os.getpid()}"

    def run_one() -> None:
        c = rpjrt.Client(plugin_path)
        rpjrt.ffi.register(c, target, lambda call: call.args[0].to_numpy() + 1, replace=True)
        exe = c.compile(
            f"""func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {{
  %0 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32}} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}}""",
            num_replicas=2,
        )
        args = [[c.put(np.zeros(4, np.float32), device=d)] for d in c.devices()[:2]]
        for _ in range(3):
            exe.execute_sharded(args, wait=True)
        c.close()

    run_one()
    before = _thread_states()
    for _ in range(8):
        run_one()
    import gc

    gc.collect()
    time.sleep(0.2)
    assert _thread_states() <= before + 2, (before, _thread_states())


def test_close_in_a_forked_child_does_nothing(plugin_path: str) -> None:
    r = run_python(
        """
        import os, sys, time, numpy as np, rpjrt
        c = rpjrt.Client(sys.argv[1] if len(sys.argv) > 1 else os.environ["P"])
        alias, fulfiller = c.create_alias_buffer("float32", [4])
        ran = []
        alias.ready_event().add_done_callback(lambda e: ran.append(os.getpid()))
        pid = os.fork()
        if pid == 0:
            # A `with` block the child leaves closes the client: quietly, running nothing.
            try:
                with c:
                    pass
                code = 0
            except BaseException as e:
                print("child close raised", type(e).__name__, e, flush=True)
                code = 3
            try:
                c.put(np.ones(2, np.float32))
                code = code or 4
            except rpjrt.FailedPreconditionError as e:
                code = code or (0 if "is a fork of" in str(e) else 6)
            time.sleep(0.5)
            os._exit(code if not ran else 5)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
        fulfiller.fail("ABORTED", "r23")
        time.sleep(0.5)
        print("parent ran", ran == [os.getpid()])
        """,
        env={"P": plugin_path},
        timeout=60,
    )
    assert "child 0" in r.stdout and "parent ran True" in r.stdout, r.stdout + r.stderr


_PROG = """func.func public @main(%w: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %w, %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}"""


@pytest.mark.parametrize(
    "raised, cls",
    [
        (MemoryError("out of host memory (r23)"), rpjrt.ResourceExhaustedError),
        (TimeoutError("the reader timed out (r23)"), rpjrt.DeadlineExceededError),
        (rpjrt.ResourceExhaustedError("pool empty (r23)"), rpjrt.ResourceExhaustedError),
    ],
)
def test_a_loader_failure_with_a_class_of_its_own_says_no_invalid_argument(
    client: Any, raised: BaseException, cls: type
) -> None:
    s = rpjrt.Session(client)
    step = s.program(_PROG, inputs=["w", "x"], outputs=["w"])
    s.bind("w", np.zeros(4, np.float32))

    def load() -> Any:
        raise raised

    s.bind_many({"x": load})
    with pytest.raises(cls) as info:
        step()
    message = str(info.value)
    assert "invalid argument" not in message, message
    assert message.startswith('slot "x": its loader raised'), message
    assert info.value.__cause__ is raised
