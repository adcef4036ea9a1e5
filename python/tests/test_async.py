"""`await buffer` waits without blocking the event loop."""

from __future__ import annotations

import asyncio
import time

import numpy as np

import rpjrt

from .conftest import fixture_text


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
