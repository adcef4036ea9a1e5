"""Round 23 (lifecycles): regressions of the fixes.

- rpjrt's notifier thread (which runs done-callbacks) and a plugin's worker threads
  (which run Python custom calls) keep one Python thread state for their life. They made
  and deleted one each time they took the GIL, which takes the interpreter's lock of
  thread states without the GIL: a ``fork()`` at that moment left the child stuck inside
  ``os.fork()`` for good (about one fork in a hundred with callbacks in flight).
- ``close()`` of a client inherited by a forked child is refused as every other use is
  there; it ran the parent's pending done-callbacks in the child.
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


def test_plugin_threads_keep_their_thread_state_between_custom_calls(client: Any) -> None:
    target = f"r23_life_keep_{os.getpid()}"
    local = threading.local()
    seen: dict[int, list[int]] = {}

    def handler(call: Any) -> Any:
        local.n = getattr(local, "n", 0) + 1
        seen.setdefault(threading.get_ident(), []).append(local.n)
        return call.args[0].to_numpy() + 1

    rpjrt.ffi.register(client, target, handler)
    # Two replicas: each device's handler runs on a worker thread of the plugin's.
    exe = client.compile(
        f"""func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {{
  %0 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32}} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}}""",
        num_replicas=2,
    )
    args = [[client.put(np.zeros(4, np.float32), device=d)] for d in client.devices()[:2]]
    for _ in range(20):
        for outs in exe.execute_sharded(args, wait=True):
            np.testing.assert_array_equal(outs[0].to_numpy(), np.ones(4, np.float32))
    # On each thread the handler ran on, its thread-local count goes on from call to call.
    for ident, ns in seen.items():
        assert ns == list(range(1, len(ns) + 1)), (ident, ns)
    workers = set(seen) - {threading.main_thread().ident}
    assert workers and max(len(seen[w]) for w in workers) > 1, seen


def test_close_in_a_forked_child_is_refused_and_runs_nothing(plugin_path: str) -> None:
    r = run_python(
        """
        import os, sys, time, numpy as np, rpjrt
        c = rpjrt.Client(sys.argv[1] if len(sys.argv) > 1 else os.environ["P"])
        alias, fulfiller = c.create_alias_buffer("float32", [4])
        ran = []
        alias.ready_event().add_done_callback(lambda e: ran.append(os.getpid()))
        pid = os.fork()
        if pid == 0:
            try:
                c.close()
                code = 3
            except rpjrt.FailedPreconditionError as e:
                code = 0 if "is a fork of" in str(e) else 4
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
