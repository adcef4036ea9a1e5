"""Ctrl-C during a long wait is not lost: KeyboardInterrupt arrives within a moment."""

from __future__ import annotations

from .conftest import FIXTURES, run_python

CODE = r"""
import os, signal, sys, threading, time
import numpy as np
import rpjrt
plugin, fixtures, how = sys.argv[1], sys.argv[2], sys.argv[3]
# A shell that runs the suite in the background starts children with SIGINT ignored, and
# Python then leaves it ignored: install the handler that raises KeyboardInterrupt here.
signal.signal(signal.SIGINT, signal.default_int_handler)
c = rpjrt.Client(plugin)
spin = c.compile(open(f"{fixtures}/spin.mlir").read())
if how == "prepared":
    # The same work on two devices at once, through a prepared call that waits for both.
    two = c.compile(open(f"{fixtures}/spin.mlir").read(), num_replicas=2)
    call = two.prepare([[np.int32(60_000_000), np.zeros(4096, np.float32)]] * 2)
else:
    (y,) = spin(np.int32(60_000_000), np.zeros(4096, np.float32))  # ~20 s of work
threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
t0 = time.perf_counter()
try:
    if how == "prepared":
        call()
    elif how == "block":
        y.block_until_ready()
    else:
        y.to_host()
    print("finished without interruption", time.perf_counter() - t0)
except KeyboardInterrupt:
    print(f"interrupted after {time.perf_counter() - t0:.2f}s")
sys.stdout.flush()
os._exit(0)  # do not wait for the program still running on the device
"""


def _check(plugin_path: str, how: str) -> None:
    import sys

    r = run_python(
        "import sys; sys.argv = ['x'] + " + repr([plugin_path, str(FIXTURES), how]) + "\n" + CODE,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout.strip().splitlines()[-1]
    assert out.startswith("interrupted after"), out
    assert float(out.split()[-1].rstrip("s")) < 3.0, out
    del sys


def test_ctrl_c_during_block_until_ready(plugin_path: str) -> None:
    _check(plugin_path, "block")


def test_ctrl_c_during_to_host(plugin_path: str) -> None:
    _check(plugin_path, "to_host")


def test_ctrl_c_during_a_prepared_multi_device_call(plugin_path: str) -> None:
    _check(plugin_path, "prepared")


def test_ctrl_c_arrives_when_the_runner_ignores_sigint(plugin_path: str) -> None:
    """The suite started from a background job (SIGINT ignored) still checks Ctrl-C."""
    import signal

    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        _check(plugin_path, "block")  # the child inherits SIG_IGN
    finally:
        signal.signal(signal.SIGINT, old)
