"""Round 19 (state): a session whose loaders refer back to it is reclaimed by Python's cycle
collector, a close refused by a live host view can be retried, a step never donates a
buffer another slot of the session holds, and a step's refusals name slots, not argument
positions. Every test runs on both CPU plugins (the ``client`` fixture)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import rpjrt
from rpjrt import Slot

from .conftest import fixture_text

CLOSED = "this Session was closed"
TWO_IN = """func.func public @main(%x: tensor<8xf32>, %a: tensor<8xf32> {tf.aliasing_output = 0 : i32}) -> tensor<8xf32> {
  %r = stablehlo.add %a, %x : tensor<8xf32>
  return %r : tensor<8xf32>
}"""


def _states(s: rpjrt.Session) -> dict[str, str]:
    return {n: st for n, _, _, st in s.slots()}


def _collected(ref: weakref.ref[Any]) -> bool:
    for _ in range(3):
        gc.collect()
        if ref() is None:
            return True
    return False


@pytest.fixture()
def own_client(plugin_path: str) -> Iterator[rpjrt.Client]:
    """A client of the test's own (closed at the end if the test left it open)."""
    c = rpjrt.Client(plugin_path)
    yield c
    c.close()


# 2: loaders that refer back to their session -------------------------------------------


class _Trainer:
    """Holds a session whose loader is a bound method of the trainer: a cycle."""

    def __init__(self, client: rpjrt.Client, spec: bool) -> None:
        self.session = rpjrt.Session(client)
        self.session.bind("w", np.zeros(1 << 16, np.float32))
        key: Any = Slot("eval_x", (np.float32, (4,))) if spec else "eval_x"
        self.session.bind_many({key: self.load_eval})

    def load_eval(self) -> np.ndarray:
        return np.ones(4, np.float32)


@pytest.mark.parametrize("spec", [False, True], ids=["plain", "slot-spec"])
def test_a_session_whose_loader_is_a_method_of_its_owner_is_collected(
    client: rpjrt.Client, spec: bool
) -> None:
    t = _Trainer(client, spec)
    refs = [weakref.ref(t), weakref.ref(t.session)]
    del t
    assert all(_collected(r) for r in refs), "the trainer, its session and loader stayed alive"


def test_a_loader_that_refers_to_a_program_of_its_session_is_collected(client: rpjrt.Client) -> None:
    s = rpjrt.Session(client)
    step = s.program(fixture_text("donate.mlir"), inputs=["w"], outputs=["w"])
    s.bind_many({"w": lambda p=step: np.full(8, len(p.inputs), np.float32)})
    refs = [weakref.ref(s), weakref.ref(step)]
    del s, step
    assert all(_collected(r) for r in refs), "the program/session cycle stayed alive"


def test_a_loader_that_ran_then_raised_in_a_cycle_is_collected(client: rpjrt.Client) -> None:
    # The loader's exception (its traceback holds the loader's frame, which holds the
    # session) is kept only until the failed call raises it.
    s = rpjrt.Session(client)

    def bad(s: rpjrt.Session = s) -> object:
        raise ValueError("no data")

    s.bind_many({"x": bad})
    with pytest.raises(rpjrt.InvalidArgumentError, match="no data"):
        s.fetch("x")
    ref = weakref.ref(s)
    del s, bad
    assert _collected(ref)


def test_close_releases_the_loaders_that_never_ran(client: rpjrt.Client) -> None:
    class Loader:
        calls = 0

        def __call__(self) -> np.ndarray:
            Loader.calls += 1
            return np.ones(4, np.float32)

    s = rpjrt.Session(client)
    loader = Loader()
    ref = weakref.ref(loader)
    s.bind_many({"x": loader})
    del loader
    assert ref() is not None, "the slot holds its loader until it runs"
    gc.disable()
    try:
        s.close()
        assert ref() is None, "close() kept the loader that will never run"
    finally:
        gc.enable()
    assert Loader.calls == 0
    assert _states(s) == {"x": "deleted"}
    with pytest.raises(rpjrt.FailedPreconditionError, match=CLOSED):
        s.fetch("x")


def test_a_loader_that_ran_is_released(client: rpjrt.Client) -> None:
    class Loader:
        def __call__(self) -> np.ndarray:
            return np.ones(4, np.float32)

    s = rpjrt.Session(client)
    loader = Loader()
    ref = weakref.ref(loader)
    s.bind_many({"x": loader})
    del loader
    gc.disable()
    try:
        np.testing.assert_array_equal(s.fetch("x"), np.ones(4, np.float32))
        assert ref() is None, "the session kept a loader that already ran"
    finally:
        gc.enable()
    s.close()


def test_a_closed_session_whose_loader_refers_to_it_lets_its_client_go(plugin_path: str) -> None:
    c = rpjrt.Client(plugin_path)
    with rpjrt.Session(c) as s:
        s.bind("w", np.zeros(4, np.float32))
        s.bind_many({"later": lambda s=s: s.fetch("w")})
    refs = [weakref.ref(c), weakref.ref(s)]
    del c, s
    assert all(_collected(r) for r in refs), "the closed session kept its client alive"


# 3: a close refused by a live host view -------------------------------------------------


def test_a_close_refused_by_a_host_view_can_be_retried(client: rpjrt.Client) -> None:
    s = rpjrt.Session(client)
    s.bind("w", np.zeros(1 << 10, np.float32))
    s.bind("v", np.ones(4, np.float32))
    b = s.buffer("w")
    other = s.buffer("v")
    view = np.from_dlpack(b)
    with pytest.raises(rpjrt.InvalidArgumentError, match=r'slot "w".*host view.*close\(\) again'):
        s.close()
    # Closed to every other use, the other slots freed, "w" still holding its buffer.
    assert s.closed
    assert other.is_deleted()
    assert not b.is_deleted()
    assert _states(s) == {"w": "ready", "v": "deleted"}
    with pytest.raises(rpjrt.FailedPreconditionError, match=CLOSED) as info:
        s.fetch("v")
    assert "were freed" not in str(info.value)
    assert 'slot(s) "w"' in str(info.value) and "close() again" in str(info.value)
    del view
    gc.collect()
    s.close()
    assert b.is_deleted(), "the retried close did not free the buffer"
    assert _states(s) == {"w": "deleted", "v": "deleted"}
    with pytest.raises(rpjrt.FailedPreconditionError, match="were freed"):
        s.fetch("w")
    s.close()  # complete: closing again does nothing


def test_a_with_block_whose_close_was_refused_can_be_closed_again(client: rpjrt.Client) -> None:
    s = rpjrt.Session(client)
    s.bind("w", np.zeros(4, np.float32))
    b = s.buffer("w")
    views = []
    with pytest.raises(rpjrt.InvalidArgumentError, match='slot "w"'):
        with s:
            views.append(np.from_dlpack(s.buffer("w")))
    views.clear()
    gc.collect()
    s.close()
    assert b.is_deleted()
    assert _states(s) == {"w": "deleted"}


def test_slots_read_deleted_after_the_client_closed(own_client: rpjrt.Client) -> None:
    s = rpjrt.Session(own_client)
    s.bind("w", np.zeros(4, np.float32))
    s.bind_many({"later": lambda: np.ones(4, np.float32)})
    own_client.close()
    assert _states(s) == {"w": "deleted", "later": "deleted"}
    assert "ready" not in repr(s) and "pending" not in repr(s)
    s.close()
    assert _states(s) == {"w": "deleted", "later": "deleted"}


def test_every_slot_reads_deleted_after_a_successful_close(client: rpjrt.Client) -> None:
    s = rpjrt.Session(client)
    s.program(fixture_text("donate.mlir"), inputs=["w"], outputs=["out"])
    s.bind("w", np.zeros(8, np.float32))
    s.bind_many({"later": lambda: np.ones(4, np.float32)})
    s.close()
    assert _states(s) == {"w": "deleted", "out": "empty", "later": "deleted"}


# 6: a buffer another slot holds is not donated -----------------------------------------


def test_a_snapshot_of_a_step_output_survives_the_next_step(client: rpjrt.Client) -> None:
    s = rpjrt.Session(client)
    p = s.program(fixture_text("donate.mlir"), inputs=["w"], outputs=["w"])
    assert p.donated == ["w"]
    s.bind("w", np.zeros(8, np.float32))
    out = p()
    s.bind("snap", out["w"])
    p()
    p()
    np.testing.assert_array_equal(s.fetch("snap"), np.ones(8, np.float32))
    np.testing.assert_array_equal(s.fetch("w"), np.full(8, 3, np.float32))
    assert _states(s) == {"w": "ready", "snap": "ready"}
    # With the snapshot replaced by a buffer of its own, the step donates "w" again.
    s.bind("snap", np.zeros(8, np.float32))
    before = s.buffer("w")
    p()
    assert before.is_deleted()


def test_a_slot_bound_to_another_slots_buffer_keeps_it(client: rpjrt.Client) -> None:
    s = rpjrt.Session(client)
    p = s.program(fixture_text("donate.mlir"), inputs=["w"], outputs=["w"])
    s.bind("w", np.zeros(8, np.float32))
    s.bind("keep", s.buffer("w"))
    p()
    np.testing.assert_array_equal(s.fetch("keep"), np.zeros(8, np.float32))
    np.testing.assert_array_equal(s.fetch("w"), np.ones(8, np.float32))


def test_a_loader_returning_another_slots_buffer_does_not_lose_it(client: rpjrt.Client) -> None:
    s = rpjrt.Session(client)
    p = s.program(fixture_text("donate.mlir"), inputs=["w"], outputs=["w"])
    s.bind("init", np.full(8, 5, np.float32))
    s.bind_many({"w": lambda: s.buffer("init")})
    p()
    np.testing.assert_array_equal(s.fetch("init"), np.full(8, 5, np.float32))
    np.testing.assert_array_equal(s.fetch("w"), np.full(8, 6, np.float32))


# 7: a step's refusal names the slot ------------------------------------------------------


def test_a_step_refused_for_a_host_view_names_the_slot(client: rpjrt.Client) -> None:
    s = rpjrt.Session(client)
    p = s.program(fixture_text("donate.mlir"), inputs=["w"], outputs=["w"])
    s.bind("w", np.zeros(8, np.float32))
    view = np.from_dlpack(s.buffer("w"))
    with pytest.raises(rpjrt.InvalidArgumentError) as info:
        p()
    text = str(info.value)
    assert 'slot "w"' in text and "donate=False" in text and "drop the host views" in text
    assert "argument 0 cannot" not in text
    del view
    gc.collect()
    p()
    np.testing.assert_array_equal(s.fetch("w"), np.ones(8, np.float32))


def test_the_refused_slot_is_named_by_its_position(client: rpjrt.Client) -> None:
    s = rpjrt.Session(client)
    p = s.program(TWO_IN, inputs=["x", "w"], outputs=["w"])
    assert p.donated == ["w"]
    s.bind("x", np.ones(8, np.float32))
    s.bind("w", np.zeros(8, np.float32))
    view = np.from_dlpack(s.buffer("w"))
    with pytest.raises(rpjrt.InvalidArgumentError, match=r'slot "w" \(argument 1\) cannot be donated') as info:
        p()
    assert '"x"' not in str(info.value)
    # The way out the message names: a program that does not donate.
    q = s.program(TWO_IN, inputs=["x", "w"], outputs=["w"], donate=False)
    q()
    np.testing.assert_array_equal(view, np.zeros(8, np.float32))
    np.testing.assert_array_equal(s.fetch("w"), np.ones(8, np.float32))
