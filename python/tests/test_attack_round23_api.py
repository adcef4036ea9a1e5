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
