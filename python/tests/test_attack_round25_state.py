"""Round 25 of outside checks: sessions, custom calls and checkpoints."""

from __future__ import annotations

import itertools
import os
from typing import Any

import numpy as np
import pytest

import rpjrt
import rpjrt.ffi

_ids = itertools.count()


def _name(base: str) -> str:
    return f"r25_{base}_{os.getpid()}_{next(_ids)}"


# A 256x256 dot before the custom call: the CPU plugins run such a program asynchronously,
# so the handler's failure reaches only the outputs and the completion event.
_N = 256


def _logging_step(target: str, returns: bool) -> str:
    n = _N
    ret = "tensor<4xf32>" if returns else ""
    tail = "  return %r : tensor<4xf32>\n" if returns else "  return\n"
    return (
        f"func.func public @main(%x: tensor<{n}x{n}xf32>) -> ({ret}) {{\n"
        f"  %d = stablehlo.dot_general %x, %x, contracting_dims = [1] x [0] : "
        f"(tensor<{n}x{n}xf32>, tensor<{n}x{n}xf32>) -> tensor<{n}x{n}xf32>\n"
        f"  %s = stablehlo.slice %d [0:1, 0:4] : (tensor<{n}x{n}xf32>) -> tensor<1x4xf32>\n"
        "  %r = stablehlo.reshape %s : (tensor<1x4xf32>) -> tensor<4xf32>\n"
        f"  stablehlo.custom_call @{target}(%r) {{api_version = 4 : i32, has_side_effect = true}} "
        ": (tensor<4xf32>) -> ()\n" + tail + "}"
    )


@pytest.mark.parametrize("returns", [True, False], ids=["output-dropped", "no-outputs"])
@pytest.mark.parametrize("raised", [ValueError, KeyboardInterrupt])
def test_a_step_that_keeps_no_output_reports_its_handlers_failure(
    client: rpjrt.Client, returns: bool, raised: type[BaseException]
) -> None:
    # The step keeps nothing in a slot, so its outputs (which carry the failure) are gone
    # when it returns: it must wait for the execution and raise, not report success.
    target = _name("log")
    ran: list[int] = []

    def handler(call: Any) -> None:
        ran.append(1)
        raise raised("the logging callback failed")

    rpjrt.ffi.register(client, target, handler)
    s = rpjrt.Session(client)
    step = s.program(_logging_step(target, returns), inputs=["x"], outputs=[None] if returns else [])
    s.bind("x", np.ones((_N, _N), np.float32))
    # An Exception comes out as rpjrt's error naming it; a BaseException as itself.
    expected = rpjrt.Error if raised is ValueError else raised
    with pytest.raises(expected) as info:
        step()
    assert ran == [1]
    if raised is ValueError:
        assert "raised ValueError: the logging callback failed" in str(info.value)
    # A handler that succeeds: the step returns (nothing kept) and the session goes on.
    rpjrt.ffi.register(client, target, lambda call: None, replace=True)
    assert step() == {}
    assert s.fetch("x").shape == (_N, _N)
    s.close()


@pytest.mark.parametrize("act", ["fetch", "bind", "bind_many", "buffer"])
def test_a_handler_may_hand_a_call_on_an_untouched_slot_to_another_thread(
    client: rpjrt.Client, act: str
) -> None:
    # The step's handler waits for a helper thread that binds or fetches slot "lr", which
    # the step neither reads, writes nor donates: the helper goes ahead at once (it used to
    # wait for the step, which waited for the handler).
    from concurrent.futures import ThreadPoolExecutor

    target = _name("helper")
    s = rpjrt.Session(client)
    pool = ThreadPoolExecutor(1)
    calls = {
        "fetch": lambda: s.fetch("lr").tolist(),
        "bind": lambda: s.bind("lr", np.ones(1, np.float32)),
        "bind_many": lambda: s.bind_many({"lr": np.ones(1, np.float32), "new": np.zeros(2)}),
        "buffer": lambda: s.buffer("lr").to_numpy().tolist(),
    }
    seen: list[Any] = []

    def handler(call: Any) -> Any:
        seen.append(pool.submit(calls[act]).result(timeout=20))
        return call.args[0].to_numpy() + 1

    rpjrt.ffi.register(client, target, handler)
    text = (
        "func.func public @main(%w: tensor<4xf32> {tf.aliasing_output = 0 : i32}) -> tensor<4xf32> {\n"
        f"  %0 = stablehlo.custom_call @{target}(%w) {{api_version = 4 : i32}} : "
        "(tensor<4xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n}"
    )
    step = s.program(text, inputs=["w"], outputs=["w"])
    s.bind("w", np.zeros(4, np.float32))
    s.bind("lr", np.full(1, 0.5, np.float32))
    step()
    assert len(seen) == 1
    if act in ("fetch", "buffer"):
        assert seen[0] == [0.5]
    else:
        assert s.fetch("lr").tolist() == [1.0]
    np.testing.assert_array_equal(s.fetch("w"), np.ones(4, np.float32))
    pool.shutdown()
    s.close()


def test_a_bind_of_a_slot_the_running_step_writes_still_lands_after_it(client: rpjrt.Client) -> None:
    # The other side of the rule above: another thread's bind of the slot the step writes
    # waits for the step, so the step's output does not overwrite it.
    import threading
    import time

    target = _name("slow")
    started = threading.Event()

    def handler(call: Any) -> Any:
        started.set()
        time.sleep(0.5)
        return call.args[0].to_numpy() + 1

    rpjrt.ffi.register(client, target, handler)
    s = rpjrt.Session(client)
    text = (
        "func.func public @main(%w: tensor<4xf32>) -> tensor<4xf32> {\n"
        f"  %0 = stablehlo.custom_call @{target}(%w) {{api_version = 4 : i32}} : "
        "(tensor<4xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n}"
    )
    step = s.program(text, inputs=["w"], outputs=["w"])
    s.bind("w", np.zeros(4, np.float32))
    t = threading.Thread(target=step)
    t.start()
    assert started.wait(10)
    s.bind("w", np.full(4, 7, np.float32))
    t.join()
    np.testing.assert_array_equal(s.fetch("w"), np.full(4, 7, np.float32))
    s.close()


def test_a_checkpoints_type_table_rules_its_raw_members(client: rpjrt.Client, tmp_path: Any) -> None:
    # A raw 2-byte member whose type table says float16: restored as float16 into a fresh
    # session, and refused (naming both types) into a bfloat16 slot, where it used to be
    # read as bfloat16.
    import json

    import ml_dtypes

    p = str(tmp_path / "ck.npz")
    raw = np.array([1.5, 2.0], np.float16).view("V2")
    np.savez(p, w=raw, __rpjrt_dtypes__=np.array(json.dumps({"w": "float16"})))
    fresh = rpjrt.Session(client)
    fresh.restore(p)
    out = fresh.fetch("w")
    assert out.dtype == np.float16 and out.tolist() == [1.5, 2.0]
    typed = rpjrt.Session(client)
    typed.bind("w", np.zeros(2, ml_dtypes.bfloat16))
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"holds bfloat16\[2\].*stores float16\[2\]"):
        typed.restore(p)
    assert typed.fetch("w").tolist() == [0.0, 0.0]
    # A table whose type has another element size than the raw member is refused too.
    np.savez(p, w=raw, __rpjrt_dtypes__=np.array(json.dumps({"w": "float32"})))
    with pytest.raises(rpjrt.InvalidArgumentError, match="type table says float32"):
        rpjrt.Session(client).restore(p)


def _npz_with(path: str, member: bytes) -> None:
    import zipfile

    with zipfile.ZipFile(path, "w") as z:
        z.writestr("w.npy", member)


def test_npz_members_numpy_reads_restore_or_are_refused_for_the_real_reason(
    client: rpjrt.Client, tmp_path: Any
) -> None:
    import io
    import struct

    buf = io.BytesIO()
    np.save(buf, np.arange(4, dtype="<f4"))
    raw = buf.getvalue()
    hl = struct.unpack("<H", raw[8:10])[0]
    for name in ("float32", "single"):
        # numpy's type names in the header: numpy reads them, so does a restore.
        hdr = raw[10 : 10 + hl].decode("latin1").replace("'<f4'", repr(name)).rstrip("\n").rstrip(" ")
        hdr += " " * ((-(10 + len(hdr) + 1)) % 64) + "\n"
        p = str(tmp_path / f"{name}.npz")
        _npz_with(p, raw[:8] + struct.pack("<H", len(hdr)) + hdr.encode("latin1") + raw[10 + hl :])
        assert np.load(p)["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
        s = rpjrt.Session(client)
        s.restore(p)
        assert s.fetch("w").tolist() == [0.0, 1.0, 2.0, 3.0]
    # Bytes after the array's data: refused as such, not as a damaged archive.
    p = str(tmp_path / "extra.npz")
    _npz_with(p, raw + b"extra")
    with pytest.raises(rpjrt.Error) as info:
        rpjrt.Session(client).restore(p)
    assert "bytes after the array's data" in str(info.value)
    assert "damaged" not in str(info.value)


def test_a_keyboard_interrupt_from_a_handler_notes_the_slot_the_step_consumed(
    client: rpjrt.Client,
) -> None:
    target = _name("kbi")

    def handler(call: Any) -> Any:
        raise KeyboardInterrupt("Ctrl-C in the handler")

    rpjrt.ffi.register(client, target, handler)
    s = rpjrt.Session(client)
    text = (
        "func.func public @main(%w: tensor<4xf32> {tf.aliasing_output = 0 : i32}) -> tensor<4xf32> {\n"
        "  %c = stablehlo.constant dense<1.0> : tensor<4xf32>\n"
        "  %a = stablehlo.add %w, %c : tensor<4xf32>\n"
        f"  %0 = stablehlo.custom_call @{target}(%a) {{api_version = 4 : i32}} : "
        "(tensor<4xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n}"
    )
    step = s.program(text, inputs=["w"], outputs=["w"])
    s.bind("w", np.zeros(4, np.float32))
    with pytest.raises(KeyboardInterrupt) as info:
        step()
    notes = getattr(info.value, "__notes__", [])
    assert any('consumed donated slot "w"' in n and 'bind slot "w" again' in n for n in notes), notes
    assert [t[3] for t in s.slots() if t[0] == "w"] == ["deleted"]


def test_a_portable_executable_given_argument_lists_says_it_is_portable(client: rpjrt.Client) -> None:
    e = client.compile(
        "func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %0 = stablehlo.add %a, %a : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}",
        portable=True,
    )
    x = client.put(np.ones(4, np.float32))
    for call in (lambda: e.prepare([]), lambda: e.prepare([[x]]), lambda: e.execute_sharded([[x]])):
        with pytest.raises(rpjrt.InvalidArgumentError, match="compiled portable"):
            call()


def test_a_cache_named_by_the_client_is_bounded_by_the_environment(
    plugin_paths_all: dict[str, str], tmp_path: Any, monkeypatch: Any
) -> None:
    # RPJRT_CACHE_MAX_BYTES bounds a cache named by cache_dir (the CLI's --cache-dir) as it
    # bounds one named by RPJRT_CACHE_DIR; a malformed bound is refused for both.
    text = "func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %a : tensor<4xf32>\n}"
    monkeypatch.delenv("RPJRT_CACHE_DIR", raising=False)
    monkeypatch.setenv("RPJRT_CACHE_MAX_BYTES", "1")
    c = rpjrt.Client(plugin_paths_all["new"], cache_dir=str(tmp_path / "c1"))
    c.compile(text)
    assert len(c.cache.entries()) == 0
    c.close()
    monkeypatch.setenv("RPJRT_CACHE_MAX_BYTES", "lots")
    with pytest.raises(rpjrt.InvalidArgumentError, match="RPJRT_CACHE_MAX_BYTES"):
        rpjrt.Client(plugin_paths_all["new"], cache_dir=str(tmp_path / "c2"))
