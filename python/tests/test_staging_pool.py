"""The staging pool behind large copying puts: data, warm reuse after a buffer is freed,
threads, the bound (``set_pooled_memory_limit``) and release on demand
(``release_pooled_memory``), and ``to_numpy(out=)``. On both CPU plugins.

The pool is one per process; each test leaves the default bound behind it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np
import pytest

import rpjrt

MIB = 1 << 20
DEFAULT = 256 * MIB


@pytest.fixture(autouse=True)
def default_bound() -> Iterator[None]:
    rpjrt.set_pooled_memory_limit(DEFAULT)
    yield
    rpjrt.set_pooled_memory_limit(DEFAULT)


def _array(nbytes: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random(nbytes // 4, dtype=np.float32)


def test_stats_name_every_figure() -> None:
    s = rpjrt.pooled_memory_stats()
    assert set(s) == {
        "limit",
        "pooled_bytes",
        "pooled_blocks",
        "in_use_bytes",
        "in_use_blocks",
        "hits",
        "misses",
        "released_bytes",
    }
    assert s["limit"] == DEFAULT
    assert all(isinstance(v, int) and v >= 0 for v in s.values())


def test_repeated_puts_reuse_a_warm_block(client: rpjrt.Client) -> None:
    rpjrt.release_pooled_memory()
    a = _array(8 * MIB, 1)
    b = client.put(a)
    np.testing.assert_array_equal(b.to_numpy(), a)
    assert rpjrt.pooled_memory_stats()["in_use_blocks"] == 1
    del b
    s0 = rpjrt.pooled_memory_stats()
    assert s0["in_use_blocks"] == 0 and s0["pooled_blocks"] == 1
    for k in range(3):
        x = _array(8 * MIB, 10 + k)
        b = client.put(x)
        np.testing.assert_array_equal(b.to_numpy(), x)
        # Changing the source afterwards changes nothing: put copied it.
        x[:] = -1
        assert float(b.to_numpy()[0]) != -1.0
        del b
    s = rpjrt.pooled_memory_stats()
    assert s["hits"] - s0["hits"] == 3 and s["misses"] == s0["misses"]


def test_a_live_buffer_keeps_its_block(client: rpjrt.Client) -> None:
    a = _array(6 * MIB, 2)
    keep = client.put(a)
    others = [client.put(_array(6 * MIB, 20 + k)) for k in range(3)]
    del others
    np.testing.assert_array_equal(keep.to_numpy(), a)


def test_threads_put_through_one_pool(client: rpjrt.Client) -> None:
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for i in range(5):
                x = _array(5 * MIB, 100 * t + i)
                b = client.put(x)
                np.testing.assert_array_equal(b.to_numpy(), x)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert rpjrt.pooled_memory_stats()["in_use_blocks"] == 0


def test_the_bound_holds_and_release_frees(client: rpjrt.Client) -> None:
    rpjrt.release_pooled_memory()
    rpjrt.set_pooled_memory_limit(20 * MIB)
    bufs = [client.put(_array(8 * MIB, k)) for k in range(4)]
    assert rpjrt.pooled_memory_stats()["in_use_bytes"] == 32 * MIB
    del bufs
    s = rpjrt.pooled_memory_stats()
    assert s["pooled_bytes"] <= 20 * MIB and s["pooled_blocks"] == 2
    assert rpjrt.release_pooled_memory() == 16 * MIB
    s = rpjrt.pooled_memory_stats()
    assert s["pooled_bytes"] == 0 and s["pooled_blocks"] == 0
    rpjrt.set_pooled_memory_limit(0)
    b = client.put(_array(8 * MIB, 9))
    del b
    assert rpjrt.pooled_memory_stats()["pooled_blocks"] == 0


def test_a_negative_bound_is_refused() -> None:
    with pytest.raises(OverflowError, match="nbytes"):
        rpjrt.set_pooled_memory_limit(-1)


def test_to_numpy_into_out(client: rpjrt.Client) -> None:
    a = _array(5 * MIB, 3).reshape(-1, 1024)
    b = client.put(a)
    out = np.empty_like(a)
    assert b.to_numpy(out=out) is out
    np.testing.assert_array_equal(out, a)
    # Any strides, e.g. a Fortran-ordered destination.
    f = np.empty(a.shape, a.dtype, order="F")
    b.to_numpy(out=f)
    np.testing.assert_array_equal(f, a)
    assert b.to_numpy(out=None).flags.owndata
    with pytest.raises(rpjrt.InvalidArgumentError, match="shape|dims|elements"):
        b.to_numpy(out=np.empty(7, np.float32))
    with pytest.raises(rpjrt.InvalidArgumentError, match="float64|dtype|type"):
        b.to_numpy(out=np.empty(a.shape, np.float64))
