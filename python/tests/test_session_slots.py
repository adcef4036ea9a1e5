"""Sessions written the reference client's way (issue 22 item 3): Slot values, step()
returning its outputs, feed_back routing them, and ``with Session(...)`` freeing the
slots' buffers. Every test runs on both CPU plugins (the ``client`` fixture)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rpjrt
from rpjrt import Slot

import jax  # a test dependency: it must be installed (a skip would count as a failure)

from .test_session import _step  # the same two-layer MLP step as the plain Session tests

NAMES = ["w1", "b1", "w2", "b2"]
STEPS = 50


@pytest.fixture(scope="module")
def sgd() -> dict[str, Any]:
    rng = np.random.default_rng(7)
    params = [
        rng.normal(size=(4, 16)).astype(np.float32),
        np.zeros(16, np.float32),
        rng.normal(size=(16, 2)).astype(np.float32) * 0.5,
        np.zeros(2, np.float32),
    ]
    x = rng.normal(size=(32, 4)).astype(np.float32)
    y = rng.normal(size=(32, 2)).astype(np.float32)
    # No donation here: the plain loop below keeps every buffer it passes.
    text = jax.jit(_step).lower(params, x, y).as_text()
    donating = jax.jit(_step, donate_argnums=0).lower(params, x, y).as_text()
    return {"params": params, "x": x, "y": y, "text": text, "donating": donating}


def _plain_loop(client: rpjrt.Client, sgd: dict[str, Any]) -> tuple[list[float], list[Any]]:
    """The same training driven by plain executable calls, parameters fed back by hand."""
    exe = client.compile(sgd["text"])
    params = [client.put(p) for p in sgd["params"]]
    x, y = client.put(sgd["x"]), client.put(sgd["y"])
    losses = []
    for _ in range(STEPS):
        outs = exe(*params, x, y)
        params = outs[:4]
        losses.append(float(outs[4].to_numpy()))
    return losses, [p.to_numpy() for p in params]


def test_sgd_with_slots_feed_back_and_with_matches_plain_calls(
    client: rpjrt.Client, sgd: dict[str, Any]
) -> None:
    want_losses, want_params = _plain_loop(client, sgd)
    assert want_losses[-1] < want_losses[0]  # it trains
    params = [Slot(n, p) for n, p in zip(NAMES, sgd["params"])]
    nexts = [Slot(n + "_next", p) for n, p in zip(NAMES, sgd["params"])]
    loss = Slot("loss", (rpjrt.float32, ()))
    losses = []
    taken: list[rpjrt.Buffer] = []
    with rpjrt.Session(client) as session:
        step = session.program(
            sgd["text"], inputs=[*params, Slot("x"), Slot("y")], outputs=[*nexts, loss]
        )
        assert step.inputs == NAMES + ["x", "y"]
        assert step.outputs == [n + "_next" for n in NAMES] + ["loss"]
        values: dict[rpjrt.session.SlotLike, object] = dict(zip(params, sgd["params"]))
        values.update({Slot("x"): sgd["x"], "y": lambda: sgd["y"]})
        session.bind_many(values)
        for _ in range(STEPS):
            out = step()
            assert list(out) == [n + "_next" for n in NAMES] + ["loss"]
            losses.append(float(out["loss"].to_numpy()))
            session.feed_back(out, into=dict(zip(nexts, params)))
        got = [session.fetch(p) for p in params]
        taken = [session[p] for p in params] + [out["loss"]]
        assert session.fetch(loss).shape == ()
    np.testing.assert_allclose(losses, want_losses, rtol=1e-6, atol=0)
    for name, g, w in zip(NAMES, got, want_params):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7, err_msg=name)
    # Leaving the with block freed every slot's buffer, taken ones included.
    assert session.closed
    assert all(b.is_deleted() for b in taken)
    assert {state for *_, state in session.slots()} == {"deleted"}


def test_feeding_back_into_the_same_slots_with_donation(client: rpjrt.Client, sgd: dict[str, Any]) -> None:
    """Outputs written to the slots they were read from: step() returns buffers shared
    with the slots; feeding them back is a rebind of the same values, and the next step
    donates them."""
    want_losses, want_params = _plain_loop(client, sgd)
    with rpjrt.Session(client) as session:
        step = session.program(sgd["donating"], inputs=NAMES + ["x", "y"], outputs=NAMES + ["loss"])
        assert step.donated == NAMES
        session.bind_many({**dict(zip(NAMES, sgd["params"])), "x": sgd["x"], "y": sgd["y"]})
        losses = []
        previous: dict[str, rpjrt.Buffer] = {}
        for _ in range(STEPS):
            out = step()
            assert all(previous[n].is_deleted() for n in previous if n != "loss")
            losses.append(float(out["loss"].to_numpy()))
            session.feed_back(out)
            previous = out
        np.testing.assert_allclose(losses, want_losses, rtol=1e-6, atol=0)
        for name, want in zip(NAMES, want_params):
            np.testing.assert_allclose(session.fetch(name), want, rtol=1e-6, atol=1e-7, err_msg=name)


def test_slot_values_and_specs() -> None:
    w = Slot("w", (rpjrt.float32, [4, 2]))
    assert w.spec == (rpjrt.float32, (4, 2))
    assert repr(w) == "Slot('w', float32[4, 2])"
    assert repr(Slot("x")) == "Slot('x')"
    assert repr(Slot("s", ("bf16", ()))) == "Slot('s', bfloat16[])"
    assert Slot("a", np.zeros((3,), np.int8)).spec == (rpjrt.int8, (3,))
    assert w == Slot("w", ("float32", (4, 2))) and hash(w) == hash(Slot("w", ("f32", (4, 2))))
    assert w != Slot("w")
    with pytest.raises(AttributeError):
        w.name = "v"
    with pytest.raises(TypeError, match="non-empty str"):
        Slot("")
    with pytest.raises(TypeError, match=r"Slot 'w': spec is \(dtype, shape\)"):
        Slot("w", 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="sizes >= 0"):
        Slot("w", (rpjrt.float32, (-1,)))
    # numpy integers are sizes (shapes computed with numpy have them); floats and bools not.
    assert Slot("w", (rpjrt.float32, (np.int64(2), np.uint8(3)))) == Slot("w", (rpjrt.float32, (2, 3)))
    for bad in [(2.0,), (True, 2), (np.int64(-1),)]:
        with pytest.raises(ValueError, match="sizes >= 0"):
            Slot("w", (rpjrt.float32, bad))
    with pytest.raises(rpjrt.InvalidArgumentError):
        Slot("w", ("no_such_dtype", (1,)))


def test_errors_name_the_slot(client: rpjrt.Client, sgd: dict[str, Any]) -> None:
    with rpjrt.Session(client) as session:
        # A declared spec that the program contradicts is refused before the program exists.
        with pytest.raises(rpjrt.InvalidArgumentError, match=r"slot 'w1' is declared float32\[4, 8\], but argument 0 .* is float32\[4, 16\]"):
            session.program(sgd["text"], inputs=[Slot("w1", (rpjrt.float32, (4, 8))), "b1", "w2", "b2", "x", "y"], outputs=NAMES + ["loss"])
        with pytest.raises(rpjrt.InvalidArgumentError, match=r"slot 'loss' is declared float64\[\], but output 4"):
            session.program(sgd["text"], inputs=NAMES + ["x", "y"], outputs=[*NAMES, Slot("loss", ("float64", ()))])
        step = session.program(sgd["text"], inputs=NAMES + ["x", "y"], outputs=NAMES + ["loss"])
        # A value that contradicts its Slot's spec is refused before it is bound.
        x = Slot("x", (rpjrt.float32, (32, 4)))
        with pytest.raises(rpjrt.InvalidArgumentError, match=r"slot 'x' is declared float32\[32, 4\], but the value bound to it is float32\[32, 5\]"):
            session.bind(x, np.zeros((32, 5), np.float32))
        with pytest.raises(rpjrt.InvalidArgumentError, match=r"slot 'x' is declared float32\[32, 4\], but the value bound to it is float32\[2\]"):
            session.bind(x, [1.0, 2.0])
        assert dict((n, st) for n, *_, st in session.slots())["x"] == "empty"
        # A loader's value is checked when it runs.
        session.bind_many({**dict(zip(NAMES, sgd["params"])), "y": sgd["y"]})
        session.bind_many({x: lambda: np.zeros((3, 4), np.float32)})
        with pytest.raises(rpjrt.InvalidArgumentError, match="its loader raised") as e:
            step()
        assert "the value its loader returned is float32[3, 4]" in str(e.value.__cause__)
        session.bind(x, sgd["x"].tolist())  # a Python list takes the spec's dtype
        out = step()
        # feed_back: unknown slots, misrouted names and mismatched values, nothing bound.
        before = session.fetch("w1")
        with pytest.raises(rpjrt.InvalidArgumentError, match=r"feed_back: no slot 'w9'"):
            session.feed_back({"w1": np.zeros((4, 16), np.float32), "w9": out["w2"]})
        with pytest.raises(rpjrt.InvalidArgumentError, match=r"not among the outputs"):
            session.feed_back(out, into={"w1_next": "w1"})
        with pytest.raises(rpjrt.InvalidArgumentError, match=r"slot 'b1' is declared float32\[16\], but the output 'w1' fed back to it is float32\[4, 16\]"):
            session.feed_back({"w2": np.zeros((16, 2), np.float32), "w1": out["w1"]}, into={"w1": "b1"})
        with pytest.raises(rpjrt.InvalidArgumentError, match=r"slot 'b2' is declared float32\[3\]"):
            session.feed_back({Slot("b2", (rpjrt.float32, (3,))): out["b2"]})
        np.testing.assert_array_equal(session.fetch("w1"), before)
        assert not np.array_equal(session.fetch("w2"), np.zeros((16, 2), np.float32))
        # Names: unknown slots, wrong types, a Slot whose spec disagrees with the slot's.
        with pytest.raises(rpjrt.InvalidArgumentError, match='no slot "nope"'):
            session.fetch(Slot("nope"))
        with pytest.raises(TypeError, match="a slot is named by a str or an rpjrt.Slot, not int"):
            session.bind(3, 1.0)  # type: ignore[arg-type]
        with pytest.raises(rpjrt.InvalidArgumentError, match=r"slot 'w1' is declared float32\[4\], but the buffer it holds is float32\[4, 16\]"):
            session.fetch(Slot("w1", (rpjrt.float32, (4,))))
        assert Slot("w1") in session and Slot("nope") not in session
        kept = session["x"]
    assert kept.is_deleted()


def test_use_after_exit_is_a_clear_error(client: rpjrt.Client, tmp_path: Any) -> None:
    prog = """func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = stablehlo.constant dense<1.0> : tensor<4xf32>
  %0 = stablehlo.add %x, %c : tensor<4xf32>
  return %0 : tensor<4xf32>
}"""
    mine = client.put(np.zeros(4, np.float32))
    with rpjrt.Session(client) as session:
        step = session.program(prog, [Slot("v")], [Slot("v")])
        session.bind("v", np.zeros(4, np.float32))
        session.bind_many({"kept": mine, "never": lambda: 1 / 0})  # a loader that never runs
        step()
        out = step()
        np.testing.assert_array_equal(out["v"].to_numpy(), [2.0] * 4)
    closed = "this Session was closed"
    for use in (
        lambda: step(),
        lambda: step(v=np.zeros(4, np.float32)),
        lambda: session.fetch("v"),
        lambda: session["v"],
        lambda: session.bind("v", np.zeros(4, np.float32)),
        lambda: session.bind_many({"w": lambda: 1.0}),
        lambda: session.feed_back({"v": np.zeros(4, np.float32)}),
        lambda: session.program(prog, ["v"], ["v"]),
        lambda: session.save(tmp_path / "x.npz"),
        lambda: session.restore(tmp_path / "x.npz"),
    ):
        with pytest.raises(rpjrt.FailedPreconditionError, match=closed):
            use()
    with pytest.raises(rpjrt.FailedPreconditionError, match="closed"):
        with session:
            pass
    # The caller's buffer bound into the slot was freed with it (it shares the slot).
    assert mine.is_deleted() and out["v"].is_deleted()
    session.close()  # closing again does nothing
    assert "v: float32[4] deleted" in repr(session)
    # Exiting on an exception frees the buffers too, and lets the exception through.
    with pytest.raises(ZeroDivisionError):
        with rpjrt.Session(client) as other:
            other.bind("a", np.ones(2, np.float32))
            a = other["a"]
            1 / 0
    assert other.closed and a.is_deleted()


def test_step_outputs_are_each_calls_own_under_threads(client: rpjrt.Client) -> None:
    """Four threads step one counter 25 times each: every call returns its own output
    (100 distinct values 1..100), never a value another thread's step left in the slot."""
    import threading

    prog = """func.func public @main(%x: tensor<f32>) -> tensor<f32> {
  %c = stablehlo.constant dense<1.0> : tensor<f32>
  %0 = stablehlo.add %x, %c : tensor<f32>
  return %0 : tensor<f32>
}"""
    seen: list[float] = []
    with rpjrt.Session(client) as session:
        step = session.program(prog, [Slot("n")], [Slot("n", (rpjrt.float32, ()))])
        session.bind("n", np.float32(0))

        def work() -> None:
            for _ in range(25):
                out = step()["n"].to_numpy()
                seen.append(float(out))

        ts = [threading.Thread(target=work) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert float(session.fetch("n")) == 100.0
    assert sorted(seen) == [float(k) for k in range(1, 101)]
