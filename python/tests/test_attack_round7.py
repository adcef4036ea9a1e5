"""Regressions of the seventh round of outside probes of the Python package (device layouts
of copies and DLPack, the notifier threads at exit and under slow callbacks, artifact
overrides, messages), on both plugins."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rpjrt

from .conftest import fixture_text

IDENT = "func.func public @main(%a: tensor<3x4xf32>) -> tensor<3x4xf32> { return %a : tensor<3x4xf32> }"
X = np.arange(12, dtype=np.float32).reshape(3, 4)


def test_copies_of_a_column_major_buffer_are_refused_as_arguments_like_it(client: rpjrt.Client) -> None:
    # The 0.115 plugin's copies keep the layout, but only the put was marked: every copy
    # was read as row-major by a program, a silent transposition-like scramble.
    e0 = client.compile(IDENT)
    e1 = client.compile(IDENT, device=client.devices()[1])
    col = client.put(X, layout=(0, 1))
    copies = [
        (col.copy(), e0),
        (col.copy_to(client.devices()[1]), e1),
        (client.put(col), e0),
        (client.put(col, client.devices()[1]), e1),
    ]
    for cp, exe in copies:
        np.testing.assert_array_equal(cp.to_numpy(), X)
        with pytest.raises(rpjrt.InvalidArgumentError, match="non-default device layout"):
            exe(cp)
    # The way out the message gives: read it back and put it with the default layout.
    (y,) = e0(client.put(col.to_numpy()))
    np.testing.assert_array_equal(y.to_numpy(), X)


def test_a_column_major_buffer_is_not_exported_through_dlpack(client: rpjrt.Client) -> None:
    # The 0.81 plugin reports the layout asked for but holds row-major bytes: the strides
    # made from the layout gave the transpose.
    col = client.put(X, layout=(0, 1))
    with pytest.raises(rpjrt.InvalidArgumentError, match="cannot be exported through DLPack"):
        np.from_dlpack(col)
    np.testing.assert_array_equal(col.to_numpy(), X)
    np.testing.assert_array_equal(np.from_dlpack(client.put(X)), X)


def test_awaiting_many_buffers_then_exiting_does_not_abort(plugin_path: str) -> None:
    # The notifier thread could still be calling into Python while the interpreter
    # finalized: CPython ended it from inside Rust frames, "FATAL: exception not rethrown"
    # (SIGABRT) in a quarter to half of the runs.
    code = textwrap.dedent(
        f"""
        import asyncio
        import numpy as np, rpjrt
        c = rpjrt.Client({plugin_path!r})
        spin = c.compile({fixture_text("spin.mlir")!r})
        x0 = np.zeros(4096, np.float32)
        async def one(b):
            return await b
        async def main():
            bs = [spin(np.int32(1000), x0)[0] for _ in range(200)]
            await asyncio.gather(*[one(b) for b in bs])
        asyncio.run(main())
        print("done")
        """
    )
    for _ in range(6):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and "done" in r.stdout, (r.returncode, r.stderr[-2000:])


def test_a_blocking_done_callback_does_not_delay_await(client: rpjrt.Client) -> None:
    # Callbacks and await wake-ups shared one thread: a callback that slept held every
    # await of the process behind it.
    import asyncio
    import threading

    spin = client.compile(fixture_text("spin.mlir"))
    x0 = np.zeros(4096, np.float32)
    release = threading.Event()
    ev = spin(np.int32(1000), x0)[0].ready_event()
    ev.add_done_callback(lambda e: release.wait(30))
    ev.wait()
    try:

        async def main() -> float:
            b = spin(np.int32(1000), x0)[0]
            t0 = time.monotonic()
            await b
            return time.monotonic() - t0

        took = asyncio.run(main())
        assert took < 10, took  # it waited for the callback (30 s) before
    finally:
        release.set()


def test_overrides_cannot_change_the_compiled_replica_or_partition_counts(client: rpjrt.Client) -> None:
    # Loading re-places a compiled program: other counts loaded, then reported the old
    # sharding (or failed inside the plugin at the first collective).
    art = client.compile(fixture_text("allreduce.mlir"), num_replicas=2).serialize()
    for ov in ({"num_replicas": 1}, {"num_replicas": 4}, {"portable": False}):
        with pytest.raises(rpjrt.InvalidArgumentError, match=r"compiled for 2 replica\(s\) x 1 partition"):
            client.load(art, overrides=ov)
    exe = client.load(art, overrides={"num_replicas": 2})
    assert len(exe.addressable_devices()) == 2
    with pytest.raises(rpjrt.InvalidArgumentError, match="must be an int >= 1"):
        client.load(art, overrides={"num_replicas": True})
    with pytest.raises(rpjrt.InvalidArgumentError, match="override names are strings, not int"):
        client.load(art, overrides={1: 2})


def test_execute_messages_say_what_python_callers_do(client: rpjrt.Client) -> None:
    mul_add = fixture_text("mul_add.mlir")
    x = np.ones(8, np.float32)
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"one list per device \(execute_sharded\)"):
        client.compile(mul_add, num_replicas=2)(x, x)
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"exe\(\.\.\., device=d\)"):
        client.compile(mul_add, portable=True)(x, x)


def test_env_option_override_messages_agree_and_topology_refusals_do_not_contradict(
    client: rpjrt.Client, plugin_label: str
) -> None:
    mul_add = fixture_text("mul_add.mlir")
    # A list was first offered ("or list of int") and then refused; a non-str key was a
    # bare TypeError.
    for bad, says in (([1], "not list"), (None, "not NoneType"), (b"x", "not bytes")):
        with pytest.raises(rpjrt.InvalidArgumentError, match=f"must be a str, bool, int or float, {says}"):
            client.compile(mul_add, env_option_overrides={"xla_cpu_parallel_codegen_split_count": bad})
    with pytest.raises(rpjrt.InvalidArgumentError, match="names are strings, not int"):
        client.compile(mul_add, env_option_overrides={1: 2})  # type: ignore[dict-item]
    # "needs PJRT 0.81, and this plugin implements PJRT 0.81 without it" said nothing.
    if plugin_label == "old":
        with pytest.raises(rpjrt.UnsupportedError, match=r"this plugin \(PJRT 0\.81\) does not implement it"):
            client.topology().compile(mul_add)
