"""Regressions of the third round of attacks (compile-once artifacts with lying fields,
checkpoints saved through links), on both plugins. Each failed silently before its fix."""

from __future__ import annotations

import hashlib
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rpjrt
import rpjrt.ffi

from .conftest import fixture_text


def _forge(data: bytes, fields: dict[str, str]) -> bytes:
    """Rewrites header fields of an rpjrt artifact and recomputes its length and checksum,
    so every envelope check passes and only the fields lie (the documented format)."""
    assert data[:8] == b"RPJRTEXE"
    pos = 8 + 4 + 8
    (n,) = struct.unpack_from("<I", data, pos)
    pos += 4
    header: list[tuple[str, str]] = []
    for _ in range(n):
        (k,) = struct.unpack_from("<I", data, pos)
        key = data[pos + 4 : pos + 4 + k].decode()
        pos += 4 + k
        (v,) = struct.unpack_from("<I", data, pos)
        header.append((key, data[pos + 4 : pos + 4 + v].decode()))
        pos += 4 + v
    rest = data[pos:-32]  # compile options and the plugin's blob, as they were
    header = [(k, v) for k, v in header if k not in fields] + list(fields.items())
    body = bytearray(b"RPJRTEXE" + struct.pack("<IQI", 1, 0, len(header)))
    for k, v in header:
        body += struct.pack("<I", len(k.encode())) + k.encode()
        body += struct.pack("<I", len(v.encode())) + v.encode()
    body += rest
    body[12:20] = struct.pack("<Q", len(body) + 32)
    return bytes(body) + hashlib.sha256(body).digest()


def test_artifact_parameter_header_does_not_decide_the_checks(client: rpjrt.Client) -> None:
    """An artifact whose `parameters` field (checksum recomputed) said int32[8] for the
    program's float32[8] parameters ran int32 arguments as floats and answered 1.0 for
    every element, with no error. The parameter types now come from the plugin."""
    exe = client.compile(fixture_text("mul_add.mlir"))
    ints = np.arange(8, dtype=np.int32)
    x = np.full(8, 2.0, np.float32)
    (want,) = exe(x, x)
    for lie in ("4:8;4:8", "11:4;11:4", "", "junk"):
        loaded = client.load(_forge(exe.serialize(), {"parameters": lie}))
        with pytest.raises(rpjrt.InvalidArgumentError, match=r"expects float32\[8\]"):
            loaded(ints, ints)
        (y,) = loaded(x, x)
        np.testing.assert_array_equal(y.to_numpy(), want.to_numpy())


def test_session_save_through_a_symlink_writes_its_target(client: rpjrt.Client, tmp_path: Path) -> None:
    """Saving to a symbolic link renamed the new file over the link: the save succeeded, the
    link turned into a plain file, and the checkpoint it pointed at kept the old values."""
    store = tmp_path / "store"
    store.mkdir()
    real = store / "ckpt.npz"
    session = rpjrt.Session(client)
    session.bind("w", np.zeros(3, np.float32))
    session.save(real)
    link = tmp_path / "latest.npz"
    os.symlink("store/ckpt.npz", link)
    session.bind("w", np.ones(3, np.float32))
    session.save(link)
    assert link.is_symlink()
    np.testing.assert_array_equal(np.load(real)["w"], np.ones(3, np.float32))
    back = rpjrt.Session(client)
    back.restore(link)
    np.testing.assert_array_equal(back.fetch("w"), np.ones(3, np.float32))
    assert [p.name for p in tmp_path.rglob("*.tmp")] == []


def test_python_handlers_compute_with_ieee_subnormals(client: rpjrt.Client) -> None:
    """A Python handler ran under the CPU runtime's flush-to-zero mode: inside it
    `1e-310 * 1.0` was 0.0 and numpy flushed subnormals, and a subnormal f32 attribute
    arrived as 0.0. Handlers now run Python with IEEE floats, as every Python thread has."""
    target = f"attack3_subnormal_{id(client)}"
    tiny = float(np.float32(1e-40))
    seen: list[Any] = []

    def h(call: rpjrt.ffi.FfiCall) -> Any:
        x = call.args[0].to_numpy()
        seen.append((call.attrs["t"], call.attrs["arr"], 1e-310 * 1.0, float(x[0] * 1.0)))
        return x * np.float32(1.0)

    rpjrt.ffi.register(client, target, h)
    program = f"""func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {{
  %0 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32,
      backend_config = {{t = 1.0e-40 : f32, arr = array<f32: 1.0e-40, -1.0e-40>}}}}
      : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}}
"""
    x = np.full(4, 1e-40, np.float32)
    (y,) = client.compile(program)(x)
    assert seen == [(tiny, [tiny, -tiny], 1e-310, tiny)]
    np.testing.assert_array_equal(y.to_numpy(), x)


def test_replacing_across_stateful_and_stateless_handlers(
    client: rpjrt.Client, plugin_label: str
) -> None:
    """A stateless handler replacing a stateful one was called at the instantiate stage
    (no buffers: `call.args[0]` raised IndexError and failed the compile); a stateful one
    replacing a stateless name was accepted but never instantiated, so every run failed.
    The first now works; the second is refused at registration."""
    x = np.arange(8, dtype=np.float32)

    def program(target: str) -> str:
        return f"""func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {{
  %0 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32}}
      : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}}
"""

    if plugin_label == "old":  # FFI 0.2: no instantiate stage at all
        with pytest.raises(rpjrt.UnimplementedError):
            rpjrt.ffi.register(client, "attack3_nostate", lambda c: None, instantiate=lambda c: 1)
        return
    a = f"attack3_state_then_plain_{id(client)}"
    rpjrt.ffi.register(client, a, lambda c: c.args[0].to_numpy() + c.state, instantiate=lambda c: 5)
    (y,) = client.compile(program(a))(x)
    np.testing.assert_array_equal(y.to_numpy(), x + 5)
    rpjrt.ffi.register(client, a, lambda c: c.args[0].to_numpy() + 1, replace=True)
    (y,) = client.compile(program(a))(x)
    np.testing.assert_array_equal(y.to_numpy(), x + 1)

    b = f"attack3_plain_then_state_{id(client)}"
    rpjrt.ffi.register(client, b, lambda c: c.args[0].to_numpy() * 2)
    with pytest.raises(rpjrt.FailedPreconditionError, match="new target name"):
        rpjrt.ffi.register(
            client, b, lambda c: c.args[0].to_numpy() + c.state, replace=True, instantiate=lambda c: 7
        )
    (y,) = client.compile(program(b))(x)
    np.testing.assert_array_equal(y.to_numpy(), x * 2)


def test_handlers_with_token_results_return_none_in_their_place(client: rpjrt.Client) -> None:
    """A custom call with a token result could not return its values: the token's place
    took no value (`None` was refused, asking to unpack a token "packed below a byte"), so
    the handler had to write views. `None` now stands for the token, a value there is
    refused naming the token, and a token's `to_numpy()` says it holds no data."""
    program = """func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %t = stablehlo.create_token : !stablehlo.token
  %0:2 = stablehlo.custom_call @TARGET(%t, %x) {api_version = 4 : i32}
      : (!stablehlo.token, tensor<4xf32>) -> (!stablehlo.token, tensor<4xf32>)
  return %0#1 : tensor<4xf32>
}
"""
    x = np.arange(4, dtype=np.float32)
    messages: list[str] = []

    def good(call: rpjrt.ffi.FfiCall) -> Any:
        for b in (call.args[0], call.rets[0]):
            with pytest.raises(rpjrt.InvalidArgumentError, match="token") as e:
                b.to_numpy()
            messages.append(str(e.value))
        return (None, call.args[1].to_numpy() * 2)

    good_name = f"attack3_token_ok_{id(client)}"
    rpjrt.ffi.register(client, good_name, good)
    (y,) = client.compile(program.replace("TARGET", good_name))(x)
    np.testing.assert_array_equal(y.to_numpy(), x * 2)
    assert all("holds no data" in m and "packed" not in m for m in messages), messages

    bad_name = f"attack3_token_bad_{id(client)}"
    rpjrt.ffi.register(client, bad_name, lambda call: (np.zeros(()), call.args[1].to_numpy()))
    with pytest.raises(rpjrt.InvalidArgumentError, match="result 0, which is a token"):
        client.compile(program.replace("TARGET", bad_name))(x)
