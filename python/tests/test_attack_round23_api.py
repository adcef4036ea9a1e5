"""Round 23 (outside checks of the Python API): regressions of the fixes.

- ``client.close()`` ends every wait on the client: blocking ones did already; an ``await``
  of a buffer or event, and an event's done-callbacks, waited on (a pending alias whose
  fulfiller is kept) until the alias completed.
- Deleting a pending alias buffer fails it (as dropping its fulfiller does): waits that
  began before the delete ended only when the fulfiller was failed or dropped.
- A ``Slot`` with a spec checks what is bound, not only the value's ``dtype`` and ``shape``
  attributes: an array-like whose data differs from what its attributes say was bound.
- An error the program chose (an alias failed with ``RESOURCE_EXHAUSTED``, an error buffer)
  is reported as given, without the out-of-memory figures and hint of an allocation that
  failed.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import numpy as np
import pytest

import rpjrt
from rpjrt import transfer


def _close_soon(client: Any, delay: float = 0.2) -> threading.Thread:
    t = threading.Thread(target=lambda: (time.sleep(delay), client.close()))
    t.start()
    return t


@pytest.mark.parametrize("what", ["buffer", "event"])
def test_close_ends_an_await_of_a_pending_alias(fresh_client: Any, what: str) -> None:
    alias, fulfiller = fresh_client.create_alias_buffer("float32", [4])

    async def wait() -> None:
        if what == "buffer":
            await alias
        else:
            await alias.ready_event()

    closer = _close_soon(fresh_client)
    t0 = time.monotonic()
    with pytest.raises(rpjrt.ClientClosedError):
        asyncio.run(asyncio.wait_for(wait(), 20))
    assert time.monotonic() - t0 < 10, "the await ended only at its timeout"
    closer.join()
    assert fulfiller.pending  # the fulfiller was kept: only close() ended the wait


def test_close_runs_done_callbacks_of_a_pending_alias(fresh_client: Any) -> None:
    alias, fulfiller = fresh_client.create_alias_buffer("float32", [4])
    ev = alias.ready_event()
    called = threading.Event()
    ev.add_done_callback(lambda e: called.set())
    fresh_client.close()
    assert called.wait(10), "close() must complete the event's done-callbacks"
    with pytest.raises(rpjrt.ClientClosedError):
        ev.wait()
    del fulfiller


def test_deleting_a_pending_alias_fails_the_waits_begun_before(fresh_client: Any) -> None:
    alias, fulfiller = fresh_client.create_alias_buffer("float32", [4])
    results: list[BaseException | None] = []

    def block() -> None:
        try:
            alias.block_until_ready()
            results.append(None)
        except BaseException as e:  # noqa: BLE001 - the test records what ended the wait
            results.append(e)

    t = threading.Thread(target=block)
    t.start()
    time.sleep(0.2)
    alias.delete()
    t.join(10)
    assert not t.is_alive(), "a wait begun before the delete must end with it"
    assert len(results) == 1 and isinstance(results[0], rpjrt.Error), results
    assert "deleted" in str(results[0])
    # Nothing can fulfill a deleted alias; the fulfiller says so and consumes nothing.
    target = fresh_client.put(np.ones(4, np.float32))
    with pytest.raises(rpjrt.BufferDeletedError):
        fulfiller.fulfill(target)
    assert not target.is_deleted()
    np.testing.assert_array_equal(target.to_numpy(), np.ones(4, np.float32))


class _Claims:
    """Says float32[4] in its attributes; its data is float64[7]."""

    dtype = np.dtype(np.float32)
    shape = (4,)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = np.arange(7, dtype=np.float64)
        return a if dtype is None else a.astype(dtype)


@pytest.mark.parametrize("how", ["bind", "bind_many", "feed_back"])
def test_a_slot_spec_checks_the_data_bound(client: Any, how: str) -> None:
    spec = rpjrt.Slot("x", ("float32", (4,)))
    s = rpjrt.Session(client)
    before = np.array([1, 2, 3, 4], np.float32)
    s.bind(spec, before)
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"float32\[4\].*float64\[7\]"):
        if how == "bind":
            s.bind(spec, _Claims())
        elif how == "bind_many":
            s.bind_many({spec: _Claims()})
        else:
            s.feed_back({spec: _Claims()})
    b = s.buffer("x")
    assert (b.dtype, b.shape) == (np.dtype(np.float32), (4,))
    np.testing.assert_array_equal(b.to_numpy(), before)


def test_a_slot_spec_still_takes_array_likes_that_say_the_truth(client: Any) -> None:
    class Honest:
        dtype = np.dtype(np.float32)
        shape = (4,)

        def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
            return np.full(4, 2.5, np.float32)

    s = rpjrt.Session(client)
    s.bind(rpjrt.Slot("x", ("float32", (4,))), Honest())
    np.testing.assert_array_equal(s.fetch("x"), np.full(4, 2.5, np.float32))


def _waited_error(buf: Any) -> rpjrt.Error:
    with pytest.raises(rpjrt.ResourceExhaustedError) as info:
        buf.block_until_ready()
    return info.value


def test_a_chosen_resource_exhausted_error_is_not_an_allocation_failure(
    client: Any, plugin_label: str
) -> None:
    alias, fulfiller = client.create_alias_buffer("float32", [4])
    fulfiller.fail("RESOURCE_EXHAUSTED", "the upstream queue is full (r23)")
    chosen = [(alias, "the upstream queue is full (r23)")]
    made = lambda: transfer.error_buffer(  # noqa: E731
        client, "float32", [4], "RESOURCE_EXHAUSTED", "quota exceeded (r23)"
    )
    if plugin_label == "old":
        # PJRT 0.81 has no PJRT_Client_CreateErrorBuffer.
        with pytest.raises(rpjrt.UnsupportedError):
            made()
    else:
        chosen.append((made(), "quota exceeded (r23)"))
    for buf, text in chosen:
        for e in [_waited_error(buf), _event_error(buf)]:
            message = str(e)
            assert text in message, message
            # No allocator figures, request line or hint: nothing was allocated.
            assert "hint:" not in message and "request:" not in message, message


def _event_error(buf: Any) -> rpjrt.Error:
    with pytest.raises(rpjrt.ResourceExhaustedError) as info:
        buf.ready_event().wait()
    return info.value


# ----------------------------------------------------------------- third wave (variants)

_NO_OUTPUTS = """func.func public @main(%a: tensor<4xf32>) -> () {
  return
}"""


def test_close_ends_a_prepared_call_without_outputs_waiting_on_a_pending_alias(
    fresh_client: Any,
) -> None:
    exe = fresh_client.compile(_NO_OUTPUTS)
    alias, fulfiller = fresh_client.create_alias_buffer("float32", [4])
    call = exe.prepare([[alias]])
    closer = _close_soon(fresh_client, 0.3)
    t0 = time.monotonic()
    with pytest.raises(rpjrt.ClientClosedError):
        call(wait=True)
    assert time.monotonic() - t0 < 10
    closer.join()
    del fulfiller


def test_a_pending_alias_donated_to_an_execution_can_be_fulfilled(client: Any) -> None:
    exe = client.compile(
        """func.func public @main(%a: tensor<4xf32> {tf.aliasing_output = 0 : i32}) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}"""
    )
    alias, fulfiller = client.create_alias_buffer("float32", [4])
    (out,) = exe(alias, donate=[0])
    assert alias.is_deleted()
    fulfiller.fulfill(client.put(np.arange(4, dtype=np.float32)))
    np.testing.assert_array_equal(out.to_numpy(), 2 * np.arange(4, dtype=np.float32))


class _LyingArray(np.ndarray):
    """An ndarray subclass whose dtype and shape attributes say float32[4]."""

    @property
    def dtype(self) -> Any:  # type: ignore[override]
        return np.dtype(np.float32)

    @property
    def shape(self) -> Any:  # type: ignore[override]
        return (4,)


def test_an_ndarray_subclass_that_lies_is_checked_by_its_data(client: Any) -> None:
    lie = np.arange(7, dtype=np.float64).view(_LyingArray)
    s = rpjrt.Session(client)
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"float32\[4\].*float64\[7\]"):
        s.bind(rpjrt.Slot("x", ("float32", (4,))), lie)


def test_a_copy_into_an_ml_dtypes_destination_of_another_type_names_no_entry_point(
    client: Any,
) -> None:
    import ml_dtypes

    b = client.put(np.array([1.5, -2.0, 3.0], np.float32))
    with pytest.raises(rpjrt.InvalidArgumentError) as info:
        b.to_numpy(out=np.zeros(3, ml_dtypes.bfloat16))
    message = str(info.value)
    assert "a copy to the host does not convert" in message, message
    assert "copy_to_host" not in message, message
