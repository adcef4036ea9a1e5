"""`await buffer` waits without blocking the event loop."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

import rpjrt

from .conftest import fixture_text, run_python


def test_await_returns_the_buffer(client: rpjrt.Client) -> None:
    exe = client.compile(fixture_text("mul_add.mlir"))
    x = client.put(np.arange(8, dtype=np.float32))

    async def main() -> list[float]:
        (y,) = exe(x, x)
        z = await y
        assert z is y
        return z.tolist()

    assert asyncio.run(main()) == [float(i * i + i) for i in range(8)]


def test_gather_many(client: rpjrt.Client) -> None:
    exe = client.compile(fixture_text("mul_add.mlir"))
    x = client.put(np.ones(8, np.float32))

    async def main() -> list[rpjrt.Buffer]:
        return await asyncio.gather(*[exe(x, x)[0] for _ in range(50)])

    outs = asyncio.run(main())
    assert len(outs) == 50 and all(o.tolist() == [2.0] * 8 for o in outs)


def test_loop_keeps_running_while_the_device_works(client: rpjrt.Client) -> None:
    spin = client.compile(fixture_text("spin.mlir"))
    start = np.zeros(4096, np.float32)

    async def main() -> tuple[int, float]:
        ticks = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.005)

        t = asyncio.create_task(ticker())
        (y,) = spin(np.int32(2_000_000), start)  # about half a second of work
        t0 = time.perf_counter()
        await y
        elapsed = time.perf_counter() - t0
        stop.set()
        await t
        return ticks, elapsed

    ticks, elapsed = asyncio.run(main())
    assert elapsed > 0.05, "the program finished too fast to tell"
    assert ticks >= 5, f"the loop was blocked: {ticks} ticks in {elapsed:.2f}s"


def test_await_a_deleted_buffer_raises(client: rpjrt.Client) -> None:
    b = client.put(np.ones(2, np.float32))
    b.delete()

    async def main() -> None:
        await b

    try:
        asyncio.run(main())
    except rpjrt.BufferDeletedError:
        pass
    else:
        raise AssertionError("awaiting a deleted buffer must raise")


def test_waits_poll_for_a_set_time_before_sleeping(client: rpjrt.Client) -> None:
    before = rpjrt.wait_spin()
    assert 0 <= before <= 1
    exe = client.compile(fixture_text("mul_add.mlir"))
    x = client.put(np.arange(8, dtype=np.float32))
    try:
        for spin in (0.0, 50e-6, 0.005):
            rpjrt.set_wait_spin(spin)
            assert abs(rpjrt.wait_spin() - spin) < 1e-9
            (y,) = exe(x, x)
            assert y.block_until_ready() is y
            assert y.tolist() == [float(i * i + i) for i in range(8)]
        for bad in (-1e-6, 2.0, float("nan")):
            with pytest.raises(rpjrt.InvalidArgumentError, match="seconds from 0 to 1"):
                rpjrt.set_wait_spin(bad)
    finally:
        rpjrt.set_wait_spin(before)
    assert rpjrt.wait_spin() == before


def test_wait_spin_from_the_environment(plugin_path: str) -> None:
    code = f"""
import rpjrt
try:
    rpjrt.Client({plugin_path!r})
    print("SPIN", rpjrt.wait_spin())
except rpjrt.InvalidArgumentError as e:
    print("ERROR", e)
"""
    r = run_python(code, env={"RPJRT_WAIT_SPIN_US": "250"})
    assert r.returncode == 0, r.stderr
    assert "SPIN 0.00025" in r.stdout, r.stdout
    r = run_python(code, env={"RPJRT_WAIT_SPIN_US": "fast"})
    assert r.returncode == 0, r.stderr
    assert "ERROR" in r.stdout and "RPJRT_WAIT_SPIN_US" in r.stdout, r.stdout
