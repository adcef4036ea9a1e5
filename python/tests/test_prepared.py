"""Prepared calls (Executable.prepare): the results of a plain call, every check at prepare
time, a clear error once a bound buffer is deleted or donated, and threads sharing one call."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import rpjrt

from .conftest import fixture_text


def _two_devices(client: rpjrt.Client) -> tuple[rpjrt.Executable, list[list[rpjrt.Buffer]]]:
    d0, d1 = client.devices()[:2]
    exe = client.compile(fixture_text("mul_add.mlir"), num_replicas=2, device_assignment=[[d0], [d1]])
    lists = [
        [client.put(np.arange(8, dtype=np.float32) + 10 * k, device=d)] * 2 for k, d in enumerate((d0, d1))
    ]
    return exe, lists


def test_prepared_call_gives_what_execute_sharded_gives(client: rpjrt.Client) -> None:
    exe, lists = _two_devices(client)
    plain = exe.execute_sharded(lists)
    call = exe.prepare(lists)
    assert (call.num_devices, call.num_args) == (2, 2)
    assert "2 device(s) x 2 argument(s)" in repr(call)
    for wait in (True, False, True):
        outs = call(wait=wait)
        if not wait:
            assert outs.block_until_ready() is outs
        assert len(outs) == 1 and outs.num_devices == 2
        (shards,) = list(outs)
        assert [s.device for s in shards] == exe.addressable_devices()
        for k, s in enumerate(shards):
            assert s.is_ready()
            x = np.arange(8, dtype=np.float32) + 10 * k
            np.testing.assert_array_equal(s.to_numpy(), x * x + x)
            np.testing.assert_array_equal(s.to_numpy(), plain[k][0].to_numpy())
        per_device = outs.per_device()
        assert [len(p) for p in per_device] == [1, 1]
        np.testing.assert_array_equal(outs.device(1)[0].to_numpy(), per_device[1][0].to_numpy())
        np.testing.assert_array_equal(outs[-1][0].to_numpy(), shards[0].to_numpy())
        with pytest.raises(IndexError, match="output index 1"):
            outs[1]
        with pytest.raises(IndexError, match="device index 2"):
            outs.device(2)


def test_single_device_prepared_call_and_host_arguments(client: rpjrt.Client) -> None:
    exe = client.compile(fixture_text("mul_add.mlir"))
    x = np.arange(8, dtype=np.float32)
    # Host arguments are put once, at prepare time.
    call = exe.prepare([[x, [2.0] * 8]])
    for _ in range(3):
        (y,) = call()[0]
        np.testing.assert_array_equal(y.to_numpy(), x * 2 + x)
    assert call.executable.name == exe.name
    np.testing.assert_array_equal(call.argument(0, 0).to_numpy(), x)
    with pytest.raises(IndexError, match="no argument 2 of device list 0"):
        call.argument(0, 2)


def test_prepare_checks_what_a_call_checks(client: rpjrt.Client) -> None:
    exe, lists = _two_devices(client)
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"1 argument list\(s\) given"):
        exe.prepare(lists[:1])
    with pytest.raises(rpjrt.InvalidArgumentError, match="copy it there first"):
        exe.prepare(lists[::-1])
    with pytest.raises(rpjrt.InvalidArgumentError, match="takes 2 argument"):
        exe.prepare([lst[:1] for lst in lists])
    with pytest.raises(rpjrt.InvalidArgumentError, match="donate index 5 is out of range"):
        exe.prepare(lists, donate=[5])
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"argument list 0 .* must be a list or tuple, not int"):
        exe.prepare([3, 4])
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"one argument list per device\) must be a list or tuple, not int"):
        exe.prepare(7)


def test_deleting_or_donating_a_bound_buffer_fails_clearly(client: rpjrt.Client) -> None:
    exe, lists = _two_devices(client)
    call = exe.prepare(lists)
    call()
    lists[1][0].delete()
    for _ in range(2):
        with pytest.raises(rpjrt.BufferDeletedError, match="argument 0 of device list 1.*prepare it again"):
            call()

    single = client.compile(fixture_text("mul_add.mlir"))
    a = client.put(np.ones(8, np.float32))
    b = client.put(np.ones(8, np.float32))
    call = single.prepare([[a, b]])
    call()
    # Donated to another call: the prepared call refuses rather than use a consumed buffer.
    single(a, b, donate=[1])[0].block_until_ready()
    with pytest.raises(rpjrt.BufferDeletedError, match="argument 1 of device list 0"):
        call()
    # A call that donates its own argument runs once.
    c = client.put(np.ones(8, np.float32))
    once = single.prepare([[a, c]], donate=[1])
    np.testing.assert_array_equal(once()[0][0].to_numpy(), np.full(8, 2.0, np.float32))
    assert c.is_deleted() and not a.is_deleted()
    with pytest.raises(rpjrt.BufferDeletedError, match="argument 1 of device list 0"):
        once()
    assert not a.is_deleted()


def test_threads_share_one_prepared_call(client: rpjrt.Client) -> None:
    exe, lists = _two_devices(client)
    call = exe.prepare(lists)
    want = [np.asarray(o[0].to_numpy()) for o in exe.execute_sharded(lists)]
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            for _ in range(30):
                shards = call()[0]
                for k, s in enumerate(shards):
                    np.testing.assert_array_equal(s.to_numpy(), want[k])
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
