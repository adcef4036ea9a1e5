"""Sessions on both CPU plugins: a JAX-lowered MLP trained for 200 steps with parameters
fed back and donated (loss curve against JAX's), lazy loaders, bind-time checks, donation
semantics, save/restore."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rpjrt

from .conftest import run_python

import jax  # a test dependency: it must be installed (a skip would count as a failure)
import jax.numpy as jnp

PARAMS = ["w1", "b1", "w2", "b2"]


def _loss(params: Any, x: Any, y: Any) -> Any:
    w1, b1, w2, b2 = params
    h = jnp.tanh(x @ w1 + b1)
    return jnp.mean((h @ w2 + b2 - y) ** 2)


def _step(params: Any, x: Any, y: Any) -> Any:
    loss, grads = jax.value_and_grad(_loss)(params, x, y)
    return [p - 0.05 * g for p, g in zip(params, grads)], loss


@pytest.fixture(scope="module")
def mlp() -> dict[str, Any]:
    rng = np.random.default_rng(1)
    params = [
        rng.normal(size=(4, 16)).astype(np.float32),
        np.zeros(16, np.float32),
        rng.normal(size=(16, 2)).astype(np.float32) * 0.5,
        np.zeros(2, np.float32),
    ]
    x = rng.normal(size=(32, 4)).astype(np.float32)
    y = rng.normal(size=(32, 2)).astype(np.float32)
    step = jax.jit(_step, donate_argnums=0)
    text = step.lower(params, x, y).as_text()
    assert "tf.aliasing_output" in text
    jparams = [jnp.asarray(p) for p in params]
    losses = []
    for _ in range(200):
        jparams, loss = step(jparams, x, y)
        losses.append(float(loss))
    return {
        "params": params,
        "x": x,
        "y": y,
        "text": text,
        "losses": np.array(losses),
        "final": [np.asarray(p) for p in jparams],
    }


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_sgd_200_steps_match_jax(client: rpjrt.Client, mlp: dict[str, Any]) -> None:
    session = rpjrt.Session(client)
    step = session.program(mlp["text"], inputs=PARAMS + ["x", "y"], outputs=PARAMS + ["loss"])
    assert step.donated == PARAMS
    loaded: list[str] = []

    def loader(name: str, value: Any) -> Any:
        def load() -> Any:
            loaded.append(name)
            return value

        return load

    session.bind_many({n: p for n, p in zip(PARAMS, mlp["params"])})
    session.bind_many(
        {
            "x": loader("x", mlp["x"]),
            "y": loader("y", mlp["y"]),
            "validation": loader("validation", np.zeros((1000, 4), np.float32)),
        }
    )
    assert loaded == [] and session.uploads == 4
    losses = []
    rss_after_warmup = 0
    for i in range(200):
        step()
        losses.append(float(session.fetch("loss")))
        if i == 20:
            rss_after_warmup = _rss_bytes()
    growth = _rss_bytes() - rss_after_warmup
    np.testing.assert_allclose(np.array(losses), mlp["losses"], rtol=1e-5, atol=0)
    for name, want in zip(PARAMS, mlp["final"]):
        np.testing.assert_allclose(session.fetch(name), want, rtol=1e-4, atol=1e-5)
    # Only slots a program names were uploaded: 4 parameters, then x and y once each.
    assert sorted(loaded) == ["x", "y"]
    assert (session.uploads, session.loads) == (6, 2)
    assert dict((s[0], s[3]) for s in session.slots())["validation"] == "pending"
    # Generous: 180 steps of 5 fresh output buffers must not accumulate (a leak of them
    # all would be far more than this with the allocator's per-buffer overhead).
    assert growth < 16 * 2**20, f"RSS grew by {growth} bytes over 180 steps"


def test_donated_buffers_become_unusable_others_stay_valid(
    client: rpjrt.Client, mlp: dict[str, Any]
) -> None:
    session = rpjrt.Session(client)
    step = session.program(mlp["text"], inputs=PARAMS + ["x", "y"], outputs=PARAMS + ["loss"])
    bound = {n: client.put(p) for n, p in zip(PARAMS, mlp["params"])}
    x = client.put(mlp["x"])
    session.bind_many({**bound, "x": x, "y": mlp["y"]})
    step()
    for b in bound.values():
        assert b.is_deleted()
        with pytest.raises(rpjrt.BufferDeletedError, match="donated"):
            b.to_numpy()
    np.testing.assert_array_equal(x.to_numpy(), mlp["x"])
    # Buffers taken from a slot share it: the next step donates them too.
    w1 = session["w1"]
    before = w1.to_numpy()
    step()
    assert w1.is_deleted()
    assert not np.array_equal(before, session.fetch("w1"))
    # Without donation every input stays valid.
    keep = session.program(
        mlp["text"], inputs=PARAMS + ["x", "y"], outputs=PARAMS + ["loss"], donate=False
    )
    assert keep.donated == []
    w1 = session["w1"]
    keep()
    assert not w1.is_deleted()


def test_bind_time_checks_name_the_slot(client: rpjrt.Client, mlp: dict[str, Any]) -> None:
    session = rpjrt.Session(client)
    step = session.program(mlp["text"], inputs=PARAMS + ["x", "y"], outputs=PARAMS + ["loss"])
    with pytest.raises(rpjrt.InvalidArgumentError, match=r'slot "w1" holds float32\[4, 16\].*float32\[4, 8\]'):
        session.bind("w1", np.zeros((4, 8), np.float32))
    with pytest.raises(rpjrt.InvalidArgumentError, match=r'slot "b1".*float64'):
        session.bind("b1", np.zeros(16, np.float64))
    with pytest.raises(rpjrt.InvalidArgumentError, match='slot "w1" has no value'):
        step()
    with pytest.raises(rpjrt.InvalidArgumentError, match="6 argument"):
        session.program(mlp["text"], inputs=PARAMS, outputs=PARAMS + ["loss"])
    with pytest.raises(TypeError):
        session.program(mlp["text"], inputs="w1", outputs=PARAMS)
    # A loader's own exception is the cause of the failed call.
    session.bind_many({n: p for n, p in zip(PARAMS, mlp["params"])})
    session.bind("y", mlp["y"])
    session.bind_many({"x": lambda: 1 / 0})
    with pytest.raises(rpjrt.InvalidArgumentError, match='slot "x": its loader raised') as e:
        step()
    assert isinstance(e.value.__cause__, ZeroDivisionError)
    session.bind_many({"x": lambda: np.zeros((3, 4), np.float32)})
    with pytest.raises(rpjrt.InvalidArgumentError, match=r'slot "x" holds float32\[32, 4\]'):
        step()
    # Keyword arguments bind before the call; Python lists take the slot's dtype.
    step(x=mlp["x"].tolist())
    assert session.fetch("loss").dtype == np.float32
    with pytest.raises(rpjrt.InvalidArgumentError, match='no slot "nope"'):
        session.buffer("nope")
    assert re.search(r"w1: float32\[4, 16\] ready", repr(session))
    assert "donates=[w1, b1, w2, b2]" in repr(step)


def test_save_and_restore(client: rpjrt.Client, mlp: dict[str, Any], tmp_path: Path) -> None:
    session = rpjrt.Session(client)
    step = session.program(mlp["text"], inputs=PARAMS + ["x", "y"], outputs=PARAMS + ["loss"])
    session.bind_many({n: p for n, p in zip(PARAMS, mlp["params"])})
    session.bind_many({"x": mlp["x"], "y": mlp["y"], "scale": np.array([1.5, -2], rpjrt.bfloat16.numpy)})
    step()
    path = tmp_path / "ckpt.npz"
    session.save(path)
    saved = {n: session.fetch(n) for n in PARAMS + ["loss", "scale"]}
    step()
    step()
    other = rpjrt.Session(client)
    other.restore(path)
    session.restore(path)
    for n, want in saved.items():
        got = session.fetch(n)
        assert got.dtype == want.dtype, n
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(other.fetch(n), want)
    assert sorted(other) == sorted(PARAMS + ["x", "y", "loss", "scale"])


def test_checkpoints_interoperate_with_numpy(client: rpjrt.Client, tmp_path: Path) -> None:
    """The core writes the .npz (numpy.load reads it); numpy.savez files restore, raw
    ml_dtypes members taking their slot's dtype; bad files and mismatches name what is
    wrong and change nothing."""
    import ml_dtypes

    session = rpjrt.Session(client)
    values = {
        "f": np.arange(6, dtype=np.float32).reshape(2, 3),
        "c": np.array([1 + 2j, -3j], np.complex64),
        "q": np.array(True),
        "e": np.zeros((0, 4), np.int16),
        "bf": np.array([1.5, -2, 3], ml_dtypes.bfloat16),
        "i4": np.array([-8, 7, -1], ml_dtypes.int4),
    }
    session.bind_many(values)
    path = tmp_path / "ckpt.npz"
    session.save(path)
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.npz"]  # no temporary left
    with np.load(path) as data:
        for n in ("f", "c", "q", "e"):
            np.testing.assert_array_equal(data[n], values[n])
            assert data[n].dtype == values[n].dtype
        bf = data["bf"].view(ml_dtypes.bfloat16)[..., 0]
        np.testing.assert_array_equal(bf, values["bf"])
        assert data["i4"].shape == (3, 1)
        assert "bfloat16" in str(data["__rpjrt_dtypes__"])
    fresh = rpjrt.Session(client)
    fresh.restore(str(path))
    for n, want in values.items():
        got = fresh.fetch(n)
        assert got.dtype == want.dtype, n
        np.testing.assert_array_equal(got, want)

    # A plain numpy.savez file: Fortran order, big-endian, and bfloat16 as raw bytes.
    plain = tmp_path / "plain.npz"
    np.savez(
        plain,
        f=np.asfortranarray(values["f"]),
        b=np.array([258, -2], ">i4"),
        bf=values["bf"],
    )
    other = rpjrt.Session(client)
    with pytest.raises(rpjrt.InvalidArgumentError, match=r'slot "bf" is stored as raw 2-byte'):
        other.restore(plain)
    assert list(other) == []
    other.bind("bf", np.zeros(3, ml_dtypes.bfloat16))
    other.restore(plain)
    np.testing.assert_array_equal(other.fetch("f"), values["f"])
    np.testing.assert_array_equal(other.fetch("b"), [258, -2])
    np.testing.assert_array_equal(other.fetch("bf"), values["bf"])

    # Mismatches name the slot; nothing is bound.
    small = rpjrt.Session(client)
    small.bind("f", np.zeros(3, np.float32))
    with pytest.raises(rpjrt.InvalidArgumentError, match=r'slot "f" holds float32\[3\], but .*ckpt.npz stores float32\[2, 3\]'):
        small.restore(path)
    assert list(small) == ["f"]

    # Damaged files never crash.
    good = path.read_bytes()
    bad = tmp_path / "bad.npz"
    for cut in (7, len(good) // 2, len(good) - 3):
        bad.write_bytes(good[:cut])
        with pytest.raises(rpjrt.InvalidArgumentError, match="bad.npz"):
            fresh.restore(bad)
    bad.write_bytes(b"not a zip at all")
    with pytest.raises(rpjrt.InvalidArgumentError, match="not an .npz archive"):
        fresh.restore(bad)
    with pytest.raises(rpjrt.InvalidArgumentError, match="missing.npz"):
        fresh.restore(tmp_path / "missing.npz")


def test_checkpoint_names_round_trip_exactly(client: rpjrt.Client, tmp_path: Path) -> None:
    """Issue 21: a slot "w.npy" came back as "w", and a session holding both "w" and
    "w.npy" saved a checkpoint that restore refused. Every name comes back as it was, and
    numpy.load sees the same names. (Round 27: "w" beside "w.npy" is refused instead, as
    numpy.load gives slot "w" under both keys; see test_attack_round27_state.)"""
    names = ["w", "w.npy.npy", ".npy", "a/b", "x y", "ünï ☃"]
    session = rpjrt.Session(client)
    session.bind_many({n: np.full(2, k, np.float32) for k, n in enumerate(names)})
    path = tmp_path / "names.npz"
    session.save(path)
    with np.load(path) as data:
        assert sorted(data.files) == sorted(names + ["__rpjrt_dtypes__"])
    back = rpjrt.Session(client)
    back.restore(path)
    assert sorted(back) == sorted(names)
    for k, n in enumerate(names):
        np.testing.assert_array_equal(back.fetch(n), np.full(2, k, np.float32))


def test_checkpoint_duplicates_are_refused_by_name(client: rpjrt.Client, tmp_path: Path) -> None:
    """Issue 21: a member stored twice was merged silently (the last one won)."""
    import io
    import warnings
    import zipfile

    def npy(v: float) -> bytes:
        buf = io.BytesIO()
        np.save(buf, np.array([v], np.float32))
        return buf.getvalue()

    path = tmp_path / "dup.npz"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate name
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("w.npy", npy(1.0))
            z.writestr("w.npy", npy(2.0))
    session = rpjrt.Session(client)
    with pytest.raises(rpjrt.InvalidArgumentError, match=r'dup.npz: .*member "w.npy" more than once'):
        session.restore(path)
    assert list(session) == []
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("w.npy", npy(1.0))
        z.writestr("w", npy(2.0))
    with pytest.raises(rpjrt.InvalidArgumentError, match=r'members "w.npy" and "w" both hold the array "w"'):
        session.restore(path)
    assert list(session) == []


def test_checkpoint_member_is_checked_before_it_is_inflated(client: rpjrt.Client, tmp_path: Path) -> None:
    """Issue 21: a small deflated member that inflates far past its slot was inflated in
    full before its header was compared with the slot. The header refuses it first (the
    damaged tail of its data is never reached), and a plain restore finds the damage."""
    import zipfile

    path = tmp_path / "bomb.npz"
    np.savez_compressed(path, w=np.zeros(4 << 20, np.float32))  # 16 MiB in ~16 KiB
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("w.npy")
    # The last bytes of the deflated data, just before the central directory.
    end = raw.index(b"PK\x01\x02")
    raw[end - 3] ^= 0xFF
    path.write_bytes(bytes(raw))
    assert info.file_size > 1000 * info.compress_size
    session = rpjrt.Session(client)
    session.bind("w", np.zeros(4, np.float32))
    with pytest.raises(rpjrt.InvalidArgumentError, match=r'slot "w" holds float32\[4\], but .*bomb.npz stores float32\[4194304\]'):
        session.restore(path)
    np.testing.assert_array_equal(session.fetch("w"), np.zeros(4, np.float32))
    with pytest.raises(rpjrt.InvalidArgumentError, match="bomb.npz.*damaged"):
        rpjrt.Session(client).restore(path)


def test_rss_stays_flat_with_a_large_state(client: rpjrt.Client) -> None:
    """A 4 MiB state slot updated (and donated) 100 times: a leak of the old states would
    grow RSS by 400 MiB; the bound is generous against allocator noise."""

    def decay(s: Any, k: Any) -> Any:
        return s * 0.5 + k, jnp.sum(s)

    state = np.ones((1024, 1024), np.float32)
    text = jax.jit(decay, donate_argnums=0).lower(state, np.float32(1)).as_text()
    session = rpjrt.Session(client)
    step = session.program(text, inputs=["state", "k"], outputs=["state", "total"])
    assert step.donated == ["state"]
    session.bind_many({"state": state, "k": np.float32(1)})
    for _ in range(10):
        step()
    session.buffer("total").block_until_ready()
    before = _rss_bytes()
    for _ in range(100):
        step()
    session.buffer("total").block_until_ready()
    growth = _rss_bytes() - before
    assert growth < 64 * 2**20, f"RSS grew by {growth / 2**20:.1f} MiB over 100 steps"
    np.testing.assert_allclose(session.fetch("state")[0, :3], [2.0, 2.0, 2.0], rtol=1e-6)


RESTORE_BOUNDED = r"""
import json, os, sys
import numpy as np
import rpjrt

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)

client = rpjrt.Client(os.environ["RPJRT_CKPT_PLUGIN"])
path, count, member = sys.argv[1], 8, 32 << 20
warm = rpjrt.Session(client)
warm.bind("w", np.zeros(4, np.float32))
warm.save(path + ".warm.npz")
warm.restore(path + ".warm.npz")
del warm
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the peak RSS (VmHWM) to the current RSS
base = status("VmRSS")
s = rpjrt.Session(client)
s.restore(path)
peak = status("VmHWM")
ok = all(
    np.array_equal(s.fetch(f"w{i}"), np.arange(member // 4, dtype=np.float32) + i)
    for i in range(count)
)
print(json.dumps({"overhead": peak - base - count * member, "ok": ok, "slots": sorted(s)}))
"""


def test_restore_reads_one_member_at_a_time(plugin_path: str, tmp_path: Path) -> None:
    """Restoring a 256 MiB checkpoint holds the restored buffers plus about one member
    (32 MiB) of host memory, not the file and copies of it."""
    member = 32 << 20
    path = tmp_path / "big.npz"
    np.savez(path, **{f"w{i}": np.arange(member // 4, dtype=np.float32) + i for i in range(8)})
    code = RESTORE_BOUNDED.replace("sys.argv[1]", repr(str(path)))
    r = run_python(code, env={"RPJRT_CKPT_PLUGIN": plugin_path}, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["ok"] and out["slots"] == [f"w{i}" for i in range(8)], out
    assert out["overhead"] < 3 * member, out


def test_handler_touching_its_session_does_not_deadlock(plugin_path: str) -> None:
    """A custom-call handler of a session program reads the session (slots, fetch, bind)
    and tries to step it again: the reads work, the nested step is refused with "session is
    stepping", nothing freezes (the session's lock is not held across execute). In a
    subprocess: a regression freezes the whole process."""
    r = run_python(
        f"""
        import numpy as np, rpjrt, rpjrt.ffi
        c = rpjrt.Client({plugin_path!r})
        s = rpjrt.Session(c)
        seen = {{}}
        def h(call):
            seen["slots"] = [n for n, *_ in s.slots()]
            seen["w"] = s.fetch("w").tolist()
            s.bind("other", np.ones(2, np.float32))
            try:
                step()
            except rpjrt.Error as e:
                seen["nested"] = str(e)
            call.rets[0].to_numpy()[:] = call.args[0].to_numpy() + 1
        rpjrt.ffi.register(c, "touch", h)
        prog = '''func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {{
          %0 = stablehlo.custom_call @touch(%x) {{api_version = 4 : i32}}
              : (tensor<4xf32>) -> tensor<4xf32>
          return %0 : tensor<4xf32>
        }}'''
        step = s.program(prog, ["w"], ["w"])
        s.bind("w", np.zeros(4, np.float32))
        step()
        step()
        assert s.fetch("w").tolist() == [2.0] * 4, s.fetch("w")
        assert seen["w"] == [1.0] * 4, seen
        assert "w" in seen["slots"] and "other" in [n for n, *_ in s.slots()]
        assert "session is stepping" in seen["nested"], seen
        print("ok")
        """,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "ok" in r.stdout


def test_closing_the_session_from_its_own_handler_does_not_hang(plugin_path: str) -> None:
    """A custom-call handler of a session program closes the session: close() deletes the
    slot the running step reads, which must not wait for that step (it hung on the PJRT
    0.115 plugin); the step then fails as closed, and the outputs it stored are freed too."""
    r = run_python(
        f"""
        import numpy as np, rpjrt, rpjrt.ffi
        c = rpjrt.Client({plugin_path!r})
        s = rpjrt.Session(c)
        def h(call):
            x = call.args[0].to_numpy()
            s.close()
            return x + 1
        rpjrt.ffi.register(c, "closer", h)
        prog = '''func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {{
          %0 = stablehlo.custom_call @closer(%x) {{api_version = 4 : i32}}
              : (tensor<4xf32>) -> tensor<4xf32>
          return %0 : tensor<4xf32>
        }}'''
        step = s.program(prog, ["w"], ["v"])
        s.bind("w", np.zeros(4, np.float32))
        w = s.buffer("w")
        try:
            step()
        except rpjrt.FailedPreconditionError as e:
            assert "closed" in str(e), e
        else:
            raise AssertionError("a step whose session was closed meanwhile succeeded")
        assert w.is_deleted()
        assert [st for *_, st in s.slots()] == ["deleted", "deleted"], s.slots()
        print("ok")
        """,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "ok" in r.stdout


def test_a_loader_asking_for_its_own_slot_is_refused(plugin_path: str) -> None:
    """A loader that fetches its own slot, or steps a program that reads it, is a cycle:
    refused at once, naming it, instead of recursing until the stack runs out (a SIGSEGV
    with a raised recursion limit, as ML code often sets)."""
    r = run_python(
        f"""
        import sys, numpy as np, rpjrt
        sys.setrecursionlimit(100000)
        c = rpjrt.Client({plugin_path!r})
        s = rpjrt.Session(c)
        step = s.program('''func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {{
          %0 = stablehlo.add %x, %x : tensor<4xf32>
          return %0 : tensor<4xf32>
        }}''', ["x"], ["y"])
        runs = []
        def own():
            runs.append(1)
            return s.fetch("x")
        def steps():
            runs.append(2)
            step()
            return np.ones(4, np.float32)
        for loader, call in [(own, lambda: s.fetch("x")), (steps, step)]:
            s.bind_many({{"x": loader}})
            try:
                call()
            except rpjrt.InvalidArgumentError as e:
                assert "loader cycle" in str(e), e
                assert isinstance(e.__cause__, rpjrt.InvalidArgumentError), repr(e.__cause__)
            else:
                raise AssertionError("a loader cycle was not refused")
        assert runs == [1, 2], runs
        s.bind_many({{"x": lambda: np.ones(4, np.float32)}})
        assert step()["y"].to_numpy().tolist() == [2.0] * 4
        print("ok")
        """,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "ok" in r.stdout


def test_threads_stepping_one_session_stay_serialised(client: rpjrt.Client) -> None:
    """Without the lock held across execute, steps from several threads still run one at a
    time: each reads the previous step's output (no lost update)."""
    import threading

    s = rpjrt.Session(client)
    prog = """func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = stablehlo.constant dense<1.0> : tensor<4xf32>
  %0 = stablehlo.add %x, %c : tensor<4xf32>
  return %0 : tensor<4xf32>
}"""
    step = s.program(prog, ["v"], ["v"])
    s.bind("v", np.zeros(4, np.float32))

    def work() -> None:
        for _ in range(50):
            step()

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert s.fetch("v").tolist() == [200.0] * 4


_ADD2 = """func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %b : tensor<4xf32>
  return %0 : tensor<4xf32>
}"""


def test_keyword_binds_of_a_step_are_all_or_nothing(client: rpjrt.Client) -> None:
    """``step(a=..., b=bad)`` changes no slot when any value is refused, and a keyword
    that is not an input of the program is refused (it would create a slot the step never
    reads, and the step would run on the old value)."""
    s = rpjrt.Session(client)
    step = s.program(_ADD2, ["a", "b"], ["out"])
    step(a=np.ones(4, np.float32), b=np.ones(4, np.float32))
    assert s.fetch("out").tolist() == [2.0] * 4
    with pytest.raises(rpjrt.InvalidArgumentError, match='slot "b"'):
        step(a=np.full(4, 7, np.float32), b=np.ones(3, np.float32))
    assert s.fetch("a").tolist() == [1.0] * 4, "a was bound though the step was refused"
    with pytest.raises(rpjrt.InvalidArgumentError, match=r'no input slot "typo".*a, b'):
        step(a=np.full(4, 7, np.float32), typo=np.ones(4, np.float32))
    assert "typo" not in s and s.fetch("a").tolist() == [1.0] * 4
    step(a=np.full(4, 7, np.float32))
    assert s.fetch("out").tolist() == [8.0] * 4


def test_bind_many_is_all_or_nothing(client: rpjrt.Client) -> None:
    s = rpjrt.Session(client)
    s.bind("b", np.zeros(4, np.float32))
    with pytest.raises(rpjrt.InvalidArgumentError, match='slot "b"'):
        s.bind_many({"a": np.ones(4, np.float32), "b": np.ones(2, np.float32)})
    assert "a" not in s and s.fetch("b").tolist() == [0.0] * 4
    s.bind_many({"a": np.ones(4, np.float32), "c": lambda: np.ones(4, np.float32)})
    assert s.fetch("a").tolist() == [1.0] * 4 and s.fetch("c").tolist() == [1.0] * 4


def test_a_loader_interrupted_by_ctrl_c_raises_keyboard_interrupt(client: rpjrt.Client) -> None:
    """Ctrl-C (or SystemExit) inside a loader reaches the caller as itself, not wrapped in
    an rpjrt error; the slot stays lazy and loads on the next need."""
    s = rpjrt.Session(client)
    step = s.program(_ADD2, ["a", "b"], ["out"])
    s.bind("b", np.ones(4, np.float32))
    calls = []

    def loader() -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt
        if len(calls) == 2:
            raise SystemExit(3)
        return np.full(4, 2, np.float32)

    s.bind_many({"a": loader})
    with pytest.raises(KeyboardInterrupt):
        step()
    with pytest.raises(SystemExit):
        s.fetch("a")
    step()
    assert s.fetch("out").tolist() == [3.0] * 4


def test_bind_many_refuses_what_is_not_a_mapping(client: rpjrt.Client) -> None:
    s = rpjrt.Session(client)
    for bad in ([("a", 1)], None, "a"):
        with pytest.raises(TypeError, match="mapping of slot names"):
            s.bind_many(bad)  # type: ignore[arg-type]
