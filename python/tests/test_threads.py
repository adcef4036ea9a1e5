"""Many threads sharing one client and one executable: correct results, no deadlock."""

from __future__ import annotations

import threading

import numpy as np

import rpjrt

from .conftest import fixture_text

THREADS = 8
ITERATIONS = 500


def test_eight_threads_times_500_executes(client: rpjrt.Client) -> None:
    exe = client.compile(fixture_text("mul_add.mlir"))
    shared = client.put(np.full(8, 2.0, np.float32))
    errors: list[BaseException] = []
    done = [0] * THREADS

    def worker(k: int) -> None:
        try:
            x = client.put(np.arange(8, dtype=np.float32) + k)
            want = ((np.arange(8) + k) * 2 + (np.arange(8) + k)).tolist()
            for i in range(ITERATIONS):
                (y,) = exe(x, shared)
                if i % 50 == 0 or i == ITERATIONS - 1:
                    assert y.tolist() == want
                else:
                    y.block_until_ready()
                done[k] += 1
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), f"deadlock? progress per thread: {done}"
    assert not errors, errors[0]
    assert done == [ITERATIONS] * THREADS


def test_threads_sharing_buffers_and_reading(client: rpjrt.Client) -> None:
    """Readers, deleters and executors on the same objects at once: errors, never crashes."""
    exe = client.compile(fixture_text("mul_add.mlir"))
    bufs = [client.put(np.full(8, float(i), np.float32)) for i in range(32)]
    problems: list[BaseException] = []

    def reader() -> None:
        for b in bufs:
            try:
                b.to_host()
                exe(b, b)
            except rpjrt.BufferDeletedError:
                pass
            except BaseException as e:
                problems.append(e)

    def deleter() -> None:
        for b in bufs[::2]:
            try:
                b.delete()
            except rpjrt.BufferDeletedError:
                pass
            except BaseException as e:
                problems.append(e)

    ts = [threading.Thread(target=reader) for _ in range(4)] + [threading.Thread(target=deleter) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in ts)
    assert not problems, problems[0]
    assert all(b.is_deleted() for b in bufs[::2])
    assert [b.tolist()[0] for b in bufs[1::2]] == [float(i) for i in range(1, 32, 2)]
