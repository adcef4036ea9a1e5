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
