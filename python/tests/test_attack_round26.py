"""Round 26 of outside checks, and this session's other changes: reprs that say when the
client behind an object is closed, and a multi-device wait that does not poll when its
devices need every core (its result must be the same either way)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rpjrt

from .conftest import fixture_text


def test_reprs_say_the_client_is_closed(plugin_path: str) -> None:
    c = rpjrt.Client(plugin_path)
    exe = c.compile(fixture_text("mul_add.mlir"))
    x = c.put(np.arange(8, dtype=np.float32))
    call = exe.prepare([[x, x]])
    outs = call()
    dev = c.devices()[0]
    live = [repr(dev), repr(call), repr(outs)]
    assert all("closed" not in r for r in live), live
    c.close()
    closed = [repr(dev), repr(call), repr(outs)]
    for before, after in zip(live, closed):
        assert after.startswith(before[:-1]) and after.endswith(", client closed)"), (before, after)


@pytest.mark.parametrize("devices", [1, 2, 4, 8])
@pytest.mark.parametrize("spin_us", [0, 100, 5000])
def test_prepared_multi_device_wait_is_exact_whatever_the_poll(plugin_path: str, devices: int, spin_us: int) -> None:
    """Whether the wait polls depends on the device count against the host's cores: every
    combination gives every device's result, and waiting again is free and the same."""
    old = rpjrt.wait_spin()
    rpjrt.set_wait_spin(spin_us / 1e6)
    try:
        with rpjrt.Client(plugin_path, options={"cpu_device_count": 8}) as c:
            text = fixture_text("mul_add.mlir")
            exe = c.compile(text, num_partitions=devices) if devices > 1 else c.compile(text)
            devs = exe.addressable_devices()
            assert len(devs) == devices
            hosts = [np.arange(8, dtype=np.float32) * (k + 1) for k in range(devices)]
            lists: list[list[Any]] = [[c.put(h, device=d), c.put(h, device=d)] for h, d in zip(hosts, devs)]
            call = exe.prepare(lists)
            for _ in range(20):
                outs = call(wait=False)
                outs.block_until_ready()
                outs.block_until_ready()
                for k, h in enumerate(hosts):
                    np.testing.assert_array_equal(outs.device(k)[0].to_numpy(), h * h + h)
    finally:
        rpjrt.set_wait_spin(old)


_ADD = """func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %b : tensor<4xf32>
  return %0 : tensor<4xf32>
}"""

_INC = """func.func public @main(%a: tensor<4xf32> {tf.aliasing_output = 0 : i32}) -> tensor<4xf32> {
  %c = stablehlo.constant dense<1.0> : tensor<4xf32>
  %0 = stablehlo.add %a, %c : tensor<4xf32>
  return %0 : tensor<4xf32>
}"""


def test_a_steps_keywords_are_its_own_under_threads(client: rpjrt.Client) -> None:
    # Each call's keyword value lands and is read in one hold of the session: a slow lazy
    # input used to let the second thread's x replace the first's before its step read it.
    import threading
    import time

    s = rpjrt.Session(client)
    p = s.program(_ADD, inputs=["x", "z"], outputs=["y"])

    def load_z() -> Any:
        time.sleep(0.4)
        return np.zeros(4, np.float32)

    s.bind_many({"z": load_z})
    got: dict[int, list[float]] = {}

    def run(k: int, delay: float) -> None:
        time.sleep(delay)
        got[k] = p(x=np.full(4, k, np.float32))["y"].to_numpy().tolist()

    threads = [threading.Thread(target=run, args=(k, 0.15 * (k - 1))) for k in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert got == {1: [1.0] * 4, 2: [2.0] * 4}

    # Without a loader, many threads: every step computes with its own value.
    s.bind("z", np.zeros(4, np.float32))
    bad: list[tuple[int, list[float]]] = []

    def many(base: int) -> None:
        for k in range(base, base + 150):
            y = p(x=np.full(4, k, np.float32))["y"].to_numpy().tolist()
            if y != [float(k)] * 4:
                bad.append((k, y))

    threads = [threading.Thread(target=many, args=(1000 * i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert bad == []
    s.close()


def test_a_bind_of_a_buffer_the_running_step_donates_is_refused_or_kept(client: rpjrt.Client) -> None:
    # A snapshot of "w" bound while another thread's step donates "w": either the bind
    # lands first (the step then leaves "w" alone) or it waits for the step and is refused
    # as deleted. It used to land a buffer the step was consuming: "snap" read deleted and
    # every later save failed.
    import threading
    import time

    s = rpjrt.Session(client)
    p = s.program(_INC, inputs=["w"], outputs=["w"])
    assert p.donated == ["w"]
    s.bind("w", np.zeros(4, np.float32))
    stop = threading.Event()

    def stepper() -> None:
        while not stop.is_set():
            p()

    th = threading.Thread(target=stepper)
    th.start()
    lost = accepted = 0
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 2:
            try:
                s.bind("snap", s.buffer("w"))
            except rpjrt.BufferDeletedError:
                continue
            accepted += 1
            if s.buffer("snap").is_deleted():
                lost += 1
    finally:
        stop.set()
        th.join(30)
    assert accepted > 0
    assert lost == 0
    assert [x[3] for x in s.slots() if x[0] == "snap"] == ["ready"]
    s.close()


def test_fetch_and_a_donating_step_on_two_threads_both_succeed(client: rpjrt.Client) -> None:
    # A fetch copies the slot while no step donates it (a step that starts meanwhile
    # writes a fresh buffer): fetches used to fail as deleted, and steps with a message
    # about host views that did not exist.
    import threading
    import time

    s = rpjrt.Session(client)
    p = s.program(_INC, inputs=["w"], outputs=["w"])
    s.bind("w", np.zeros(4, np.float32))
    stop = threading.Event()
    step_errors: list[BaseException] = []
    steps = [0]

    def stepper() -> None:
        while not stop.is_set():
            try:
                p()
                steps[0] += 1
            except BaseException as e:  # noqa: BLE001 - every failure is the finding
                step_errors.append(e)

    th = threading.Thread(target=stepper)
    th.start()
    seen: list[float] = []
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.5:
            v = s.fetch("w")
            assert v.shape == (4,) and len(set(v.tolist())) == 1, v
            seen.append(float(v[0]))
    finally:
        stop.set()
        th.join(30)
    assert step_errors == []
    assert steps[0] > 0 and len(seen) > 0
    # Values only move forward (each is one step's whole result).
    assert seen == sorted(seen)
    assert float(s.fetch("w")[0]) == steps[0]
    s.close()
