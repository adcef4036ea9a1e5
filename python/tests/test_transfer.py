"""Streaming uploads (async transfer manager), progress, raw partial reads, uninitialised and
error buffers, on both CPU plugins; the 1 GiB streaming acceptance in a subprocess."""

from __future__ import annotations

import json
import sys
import types
from typing import Any

import numpy as np
import pytest

import rpjrt
from rpjrt import transfer

from .conftest import run_python


def test_stream_a_numpy_array_in_chunks_with_progress(client: Any) -> None:
    a = np.arange(10_000, dtype=np.float32).reshape(100, 100) * 0.5
    calls: list[tuple[int, int]] = []
    b = transfer.put_streaming(
        client,
        a,
        chunk_bytes=12_000,
        progress=lambda done, total: calls.append((done, total)),
        progress_threshold=1,
    )
    assert b.shape == (100, 100) and b.dtype == rpjrt.float32
    np.testing.assert_array_equal(b.to_numpy(), a)
    assert calls == [(12_000, 40_000), (24_000, 40_000), (36_000, 40_000), (40_000, 40_000)]
    # Below the threshold nothing is reported; progress=False never reports.
    quiet: list[Any] = []
    transfer.put_streaming(client, a, progress=quiet.append, progress_threshold=1 << 40)
    transfer.put_streaming(client, a, progress=False, progress_threshold=1)
    assert quiet == []


def test_stream_from_a_function(client: Any) -> None:
    want = np.arange(1000, dtype=np.int64)
    raw = want.tobytes()
    asked: list[tuple[int, int]] = []

    def source(offset: int, nbytes: int) -> bytes:
        asked.append((offset, nbytes))
        return raw[offset : offset + nbytes]

    b = transfer.put_streaming(client, source, dtype="int64", shape=(10, 100), chunk_bytes=3000)
    np.testing.assert_array_equal(b.to_numpy().ravel(), want)
    assert asked == [(0, 3000), (3000, 3000), (6000, 2000)]


def test_stream_overrides_must_describe_the_source_array(client: Any) -> None:
    """A shape or dtype given with an array source must describe the same elements: the
    rest of the array was silently dropped (16384 floats uploaded as float32[5])."""
    a = np.arange(16384, dtype=np.float32)
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"shape=\[5\] has 5 elements.*16384"):
        transfer.put_streaming(client, a, shape=[5])
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"shape=\[20000\]"):
        transfer.put_streaming(client, a, shape=[20000])
    with pytest.raises(rpjrt.InvalidArgumentError, match="dtype=int32 differs .*float32"):
        transfer.put_streaming(client, a, dtype="int32")
    # The same elements in another shape, and the array's own dtype named, are fine.
    b = transfer.put_streaming(client, a, dtype="float32", shape=(128, 128))
    assert b.shape == (128, 128)
    np.testing.assert_array_equal(b.to_numpy().ravel(), a)


def test_stream_bad_sources_are_refused(client: Any) -> None:
    with pytest.raises(rpjrt.InvalidArgumentError, match="lent 3 bytes for bytes 0..8 .*exactly 8"):
        transfer.put_streaming(client, lambda o, n: b"abc", dtype="float32", shape=(2,))
    with pytest.raises(rpjrt.InvalidArgumentError, match="chunk size must be at least 1"):
        transfer.put_streaming(client, np.zeros(4, np.float32), chunk_bytes=0)
    with pytest.raises(rpjrt.InvalidArgumentError, match="buffer-protocol"):
        transfer.put_streaming(client, lambda o, n: 3, dtype="float32", shape=(2,))
    with pytest.raises(rpjrt.InvalidArgumentError, match="dtype= and shape="):
        transfer.put_streaming(client, lambda o, n: b"", dtype="float32")
    with pytest.raises(rpjrt.InvalidArgumentError, match="C-contiguous"):
        transfer.put_streaming(client, np.zeros((4, 4), np.float32)[:, ::2])
    with pytest.raises(rpjrt.InvalidArgumentError, match="byte-sized"):
        transfer.put_streaming(client, lambda o, n: b"", dtype="int4", shape=(2,))

    def boom(o: int, n: int) -> bytes:
        raise KeyError("source failed")

    with pytest.raises(KeyError, match="source failed"):
        transfer.put_streaming(client, boom, dtype="float32", shape=(2,))


def test_a_progress_callback_that_raises_stops_the_upload(client: Any) -> None:
    asked: list[int] = []
    raw = np.arange(1000, dtype=np.float32).tobytes()

    def source(offset: int, nbytes: int) -> bytes:
        asked.append(offset)
        return raw[offset : offset + nbytes]

    def progress(done: int, total: int) -> None:
        if done >= 2000:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        transfer.put_streaming(
            client,
            source,
            dtype="float32",
            shape=(1000,),
            chunk_bytes=1000,
            progress=progress,
            progress_threshold=0,
        )
    assert asked == [0, 1000]


def test_tqdm_bar_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    updates: list[int] = []

    class FakeBar:
        def __init__(self, **kw: Any) -> None:
            assert kw["total"] == 100

        def update(self, n: int) -> None:
            updates.append(n)

        def close(self) -> None:
            updates.append(-1)

    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=FakeBar))
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    assert transfer._tqdm_progress(100)[0] is None
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    update, close = transfer._tqdm_progress(100)
    assert update is not None
    update(40, 100)
    update(100, 100)
    close()
    assert updates == [40, 60, -1]


def test_raw_partial_reads(client: Any) -> None:
    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    b = client.put(a)
    assert transfer.read_raw(b, 12, 40) == a.tobytes()[12:52]
    assert transfer.read_raw(b, 256, 0) == b""
    with pytest.raises(rpjrt.InvalidArgumentError, match="past the buffer's 256 bytes"):
        transfer.read_raw(b, 250, 8)
    b.delete()
    with pytest.raises(rpjrt.BufferDeletedError):
        transfer.read_raw(b, 0, 4)


def test_uninitialised_and_error_buffers(client: Any, plugin_label: str) -> None:
    u = transfer.uninitialized(client, "float64", (3, 5))
    assert (u.shape, u.dtype, u.on_device_size) == ((3, 5), rpjrt.float64, 120)
    with pytest.raises(rpjrt.InvalidArgumentError, match="token"):
        transfer.uninitialized(client, "token", ())
    with pytest.raises(rpjrt.InvalidArgumentError, match="unknown error code"):
        transfer.error_buffer(client, "float32", (4,), "NOPE", "boom")
    if plugin_label == "old":
        with pytest.raises(rpjrt.UnsupportedError, match="PJRT_Client_CreateErrorBuffer"):
            transfer.error_buffer(client, "float32", (4,), "INTERNAL", "boom")
    else:
        e = transfer.error_buffer(client, "float32", (4,), "INTERNAL", "boom")
        with pytest.raises(rpjrt.InternalError, match="boom"):
            e.block_until_ready()


STREAM_1GIB = r"""
import json, os
import numpy as np
import rpjrt
from rpjrt import transfer

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)

client = rpjrt.Client(os.environ["RPJRT_XFER_PLUGIN"])
total, chunk = 1 << 30, 64 << 20
n = total // 4

def source(offset, nbytes):
    # Generated chunk by chunk: the source itself never exists as a whole.
    return np.arange(offset // 4, (offset + nbytes) // 4, dtype=np.uint32)

warm = transfer.put_streaming(client, source, dtype="uint32", shape=(1024,), progress=False)
del warm
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the peak RSS (VmHWM) to the current RSS
base = status("VmRSS")
calls = []
b = transfer.put_streaming(client, source, dtype="uint32", shape=(n,), chunk_bytes=chunk,
                           progress=lambda d, t: calls.append(d), progress_threshold=chunk)
peak = status("VmHWM")
ok = True
for off in range(0, total, chunk):
    got = np.frombuffer(transfer.read_raw(b, off, chunk), dtype=np.uint32)
    ok = ok and bool(np.array_equal(got, source(off, chunk)))
print(json.dumps({"calls": calls, "overhead": peak - base - total, "ok": ok,
                  "shape": list(b.shape)}))
"""


def test_streaming_one_gib_has_bounded_host_overhead(plugin_path: str) -> None:
    r = run_python(STREAM_1GIB, env={"RPJRT_XFER_PLUGIN": plugin_path}, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    chunk = 64 << 20
    assert out["ok"] and out["shape"] == [1 << 28]
    assert out["calls"] == [chunk * (i + 1) for i in range(16)]
    assert out["overhead"] < 2 * chunk, out


def test_layouts(client: Any, plugin_label: str) -> None:
    assert rpjrt._rpjrt._layouts_extension_size(client) == (72 if plugin_label == "old" else 80)
    b = client.put(np.zeros((2, 3, 4), np.float32))
    lay = transfer.device_layout(b)
    assert lay.minor_to_major == (2, 1, 0) and lay.tiles == () and lay.is_row_major
    assert transfer.byte_strides(b) == (48, 16, 4)
    assert transfer.default_layout(client, "int8", (5, 7)).minor_to_major == (1, 0)
    # Fortran-ordered host data lands in the device's row-major layout.
    f = np.asfortranarray(np.arange(12, dtype=np.int16).reshape(3, 4))
    bf = client.put(f)
    assert transfer.byte_strides(bf) == (8, 2)
    np.testing.assert_array_equal(bf.to_numpy(), f)
