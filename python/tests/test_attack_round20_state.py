"""Round 20 (sessions, checkpoints, artifacts, prepared calls): defects found by outside
checks, and the classes behind them.

A. A file replaced atomically (a temporary file renamed over it, as ``Session.save`` and
   careful writers do) while it was read was refused as damaged: the readers looked at the
   path more than once (the checkpoint reader opened it a second time for the zip
   directory; the artifact reader took the size from one look and the bytes from an open
   after it). Every reader now takes the size and the bytes from one open file.
B. An ``.npz`` with bytes before the zip (which ``numpy.load`` reads) was called "damaged":
   the bytes before it were counted twice when finding the zip directory.
C. ``Executable.prepare`` accepted a buffer passed both donated and not donated (every
   call was then refused, naming no position), and one buffer donated in two positions
   (handed to the plugin to consume twice). Both are refused at prepare now, naming the
   positions.
"""

from __future__ import annotations

import io
import os
import threading
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rpjrt

from .conftest import fixture_text


def _while_replaced(replace: Callable[[int], None], read: Callable[[], None], seconds: float, min_reads: int) -> int:
    """Calls ``replace(k)`` in a loop on a thread while ``read()`` runs here for about
    ``seconds`` (and at least ``min_reads`` times); returns the number of reads."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        k = 0
        try:
            while not stop.is_set():
                replace(k)
                k += 1
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    t = threading.Thread(target=writer)
    t.start()
    reads = 0
    try:
        start = time.monotonic()
        while reads < min_reads or time.monotonic() - start < seconds:
            read()
            reads += 1
    finally:
        stop.set()
        t.join()
    assert not errors, errors
    return reads


# A. Atomic replacement while reading ------------------------------------------------------


def test_a_checkpoint_saved_while_restored_restores_old_or_new(client: rpjrt.Client, tmp_path: Path) -> None:
    path = str(tmp_path / "latest.npz")
    a = rpjrt.Session(client)
    a.bind("w", np.zeros(1000, np.float32))
    b = rpjrt.Session(client)
    b.bind("w", np.ones(1000, np.float32))
    b.bind("v", np.ones(3, np.float32))
    a.save(path)

    def read() -> None:
        s = rpjrt.Session(client)
        try:
            s.restore(path)  # refused now and then as "damaged .npz archive"
            w = s.fetch("w")
            if "v" in s:
                np.testing.assert_array_equal(w, np.ones(1000, np.float32))
            else:
                np.testing.assert_array_equal(w, np.zeros(1000, np.float32))
        finally:
            s.close()

    _while_replaced(lambda k: (a if k % 2 else b).save(path), read, 1.5, 100)
    a.close()
    b.close()


def _replace_atomically(path: Path, data: bytes, k: int) -> None:
    tmp = path.with_name(f".{path.name}.{k}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def test_an_npz_or_npy_replaced_while_loaded_is_read_whole(client: rpjrt.Client, tmp_path: Path) -> None:
    # np.load-style files restored while they are replaced, the kind changing too: a .npy
    # file and .npz archives of different sizes over one path (the reader opened the path
    # again to read a .npy file after the first open found no zip).
    path = tmp_path / "x.npz"
    small, big, npy = io.BytesIO(), io.BytesIO(), io.BytesIO()
    np.savez(small, w=np.arange(4, dtype=np.float32))
    np.savez(big, w=np.arange(4, dtype=np.float32) + 1, v=np.zeros(500, np.float32), u=np.ones(7, np.int32))
    np.save(npy, np.arange(4, dtype=np.float32))
    files = [small.getvalue(), big.getvalue()]
    path.write_bytes(files[0])

    def read() -> None:
        s = rpjrt.Session(client)
        try:
            s.restore(str(path))
            w = s.fetch("w")
            want = np.arange(4, dtype=np.float32) + (1 if "v" in s else 0)
            np.testing.assert_array_equal(w, want)
        finally:
            s.close()

    _while_replaced(lambda k: _replace_atomically(path, files[k % 2], k), read, 1.0, 100)
    # A .npy file in turn with an archive: a checkpoint restore refuses the .npy file with
    # its own message, never a "damaged" one.
    both = [files[0], npy.getvalue()]

    def read_either() -> None:
        s = rpjrt.Session(client)
        try:
            s.restore(str(path))
        except rpjrt.InvalidArgumentError as e:
            assert "damaged" not in str(e) and "not a valid" not in str(e), e
            assert "zip" in str(e) or ".npz" in str(e), e
        finally:
            s.close()

    _while_replaced(lambda k: _replace_atomically(path, both[k % 2], k), read_either, 1.0, 100)


def test_an_artifact_replaced_while_loaded_is_read_whole(client: rpjrt.Client, tmp_path: Path) -> None:
    # "the artifact is truncated: its header says 7331 bytes, but only 5306 are there":
    # the size came from one look at the path, the bytes from an open after it.
    first = client.compile(fixture_text("scalar_add.mlir")).serialize()
    second = client.compile(fixture_text("two_outputs.mlir")).serialize()
    assert len(first) != len(second)
    path = tmp_path / "prog.rpjrt"
    path.write_bytes(first)

    def read() -> None:
        info = rpjrt.inspect_artifact(path)
        assert info is not None
        exe = client.load(path)
        assert exe.num_outputs in (1, 2)

    _while_replaced(lambda k: _replace_atomically(path, (second, first)[k % 2], k), read, 1.5, 100)


def test_what_is_no_regular_file_is_still_refused_without_blocking(client: rpjrt.Client, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for p in (fifo, tmp_path):
        with pytest.raises(rpjrt.InvalidArgumentError, match="not a regular file"):
            rpjrt.inspect_artifact(p)
        with pytest.raises(rpjrt.InvalidArgumentError, match="not a regular file"):
            client.load(p)
        s = rpjrt.Session(client)
        with pytest.raises(rpjrt.InvalidArgumentError, match="not a regular file"):
            s.restore(str(p))
        s.close()


# B. Bytes before the archive --------------------------------------------------------------


def _prefixes() -> list[bytes]:
    return [b"PK\x03\x04" + b"\0" * 60, b"PK" + b"junk" * 10, b"PK\x03\x04" + bytes(range(256)) * 20]


def test_an_npz_after_other_bytes_restores_as_numpy_reads_it(client: rpjrt.Client, tmp_path: Path) -> None:
    w = np.arange(4, dtype=np.float32)
    v = np.arange(6, dtype=np.int32).reshape(2, 3)
    archives = []
    for save in (np.savez, np.savez_compressed):
        buf = io.BytesIO()
        save(buf, w=w, v=v)
        archives.append(buf.getvalue())
    p = tmp_path / "prefixed.npz"
    for prefix in _prefixes():
        for archive in archives:
            p.write_bytes(prefix + archive)
            with zipfile.ZipFile(p) as z:  # Python's zipfile reads it
                assert sorted(z.namelist()) == ["v.npy", "w.npy"]
            if prefix.startswith(b"PK\x03\x04"):  # and so does numpy.load (by its magic)
                np.testing.assert_array_equal(dict(np.load(p))["w"], w)
            s = rpjrt.Session(client)
            s.restore(str(p))
            np.testing.assert_array_equal(s.fetch("w"), w)
            np.testing.assert_array_equal(s.fetch("v"), v)
            s.close()
    # A rpjrt checkpoint after other bytes, too.
    s = rpjrt.Session(client)
    s.bind("w", w)
    s.save(str(p))
    saved = p.read_bytes()
    s.close()
    for prefix in _prefixes():
        p.write_bytes(prefix + saved)
        back = rpjrt.Session(client)
        back.restore(str(p))
        np.testing.assert_array_equal(back.fetch("w"), w)
        back.close()


def test_a_duplicate_member_after_other_bytes_is_named(client: rpjrt.Client, tmp_path: Path) -> None:
    # The duplicate's message named "" (nothing was found where the directory was looked
    # for).
    buf = io.BytesIO()
    npy = io.BytesIO()
    np.save(npy, np.zeros(1, np.float32))
    with zipfile.ZipFile(buf, "w") as z:
        for name in ("w.npy", "v.npy", "x.npy"):
            z.writestr(name, npy.getvalue())
    data = buf.getvalue().replace(b"x.npy", b"w.npy")  # in both headers of the third
    p = tmp_path / "dup.npz"
    for prefix in _prefixes():
        p.write_bytes(prefix + data)
        s = rpjrt.Session(client)
        with pytest.raises(rpjrt.InvalidArgumentError, match='stores member "w.npy" more than once'):
            s.restore(str(p))
        s.close()


# C. Donation overlaps refused at prepare ---------------------------------------------------

ADD2 = """func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %b : tensor<4xf32>
  return %0 : tensor<4xf32>
}"""

ADD3 = """func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %b : tensor<4xf32>
  %1 = stablehlo.add %0, %c : tensor<4xf32>
  return %1 : tensor<4xf32>
}"""


def _intact(b: Any) -> None:
    assert not b.is_deleted()
    np.testing.assert_array_equal(b.to_numpy(), [0, 1, 2, 3])


@pytest.mark.parametrize(
    ("which", "donate", "message"),
    [
        # Donated and passed undonated, either way round.
        (
            [0, 0],
            [0],
            r"argument 1 of device list 0 is a buffer this call also donates \(as argument 0 of "
            r"device list 0\); pass a donated buffer only in its donated position",
        ),
        ([0, 0], [1], r"argument 0 of device list 0 is a buffer this call also donates \(as argument 1 of"),
        ([0, 1, 0], [2], r"argument 0 of device list 0 is a buffer this call also donates \(as argument 2 of"),
        ([1, 0, 0], [0, 1], r"argument 2 of device list 0 is a buffer this call also donates \(as argument 1 of"),
        # Donated twice (it would be consumed twice): refused before the other overlap, as a
        # plain call does.
        ([0, 0], [0, 1], r"arguments 0 and 1 of device list 0 are the same buffer, and both are donated"),
        ([0, 0, 0], [0, 2], r"arguments 0 and 2 of device list 0 are the same buffer, and both are donated"),
        ([0, 1, 0], [2, 0], r"arguments 0 and 2 of device list 0 are the same buffer, and both are donated"),
    ],
)
def test_prepare_refuses_a_buffer_donated_and_used_again(
    client: rpjrt.Client, which: list[int], donate: list[int], message: str
) -> None:
    exe = client.compile(ADD2 if len(which) == 2 else ADD3)
    bufs = [client.put(np.arange(4, dtype=np.float32)), client.put(np.arange(4, dtype=np.float32))]
    args = [bufs[i] for i in which]
    with pytest.raises(rpjrt.InvalidArgumentError, match=message):
        exe.prepare([args], donate=donate)
    # Refused before anything happened: nothing was consumed.
    for b in bufs:
        _intact(b)


def test_prepare_still_accepts_what_a_call_can_run(client: rpjrt.Client) -> None:
    exe = client.compile(ADD2)
    a = client.put(np.arange(4, dtype=np.float32))
    b = client.put(np.ones(4, np.float32))
    # The same buffer twice, undonated.
    call = exe.prepare([[a, a]])
    np.testing.assert_array_equal(call()[0][0].to_numpy(), [0, 2, 4, 6])
    # One donated position named twice is one donation.
    call = exe.prepare([[a, b]], donate=[0, 0])
    np.testing.assert_array_equal(call()[0][0].to_numpy(), [1, 2, 3, 4])
    assert a.is_deleted() and not b.is_deleted()


def test_prepare_names_the_device_list_of_the_overlap(client: rpjrt.Client) -> None:
    d0, d1 = client.devices()[:2]
    exe = client.compile(fixture_text("mul_add.mlir"), num_replicas=2, device_assignment=[[d0], [d1]])
    x0 = client.put(np.arange(8, dtype=np.float32), device=d0)
    y0 = client.put(np.ones(8, np.float32), device=d0)
    x1 = client.put(np.arange(8, dtype=np.float32), device=d1)
    with pytest.raises(
        rpjrt.InvalidArgumentError,
        match=r"argument 0 of device list 1 is a buffer this call also donates \(as argument 1 of device list 1\)",
    ):
        exe.prepare([[x0, y0], [x1, x1]], donate=[1])
    with pytest.raises(
        rpjrt.InvalidArgumentError, match=r"arguments 0 and 1 of device list 1 are the same buffer, and both are donated"
    ):
        exe.prepare([[x0, y0], [x1, x1]], donate=[0, 1])
    for b in (x0, y0, x1):
        assert not b.is_deleted()
    # Distinct buffers in every list: accepted, and it runs once.
    y1 = client.put(np.ones(8, np.float32), device=d1)
    call = exe.prepare([[x0, y0], [x1, y1]], donate=[1])
    outs = call()
    np.testing.assert_array_equal(outs[0][1].to_numpy(), np.arange(8, dtype=np.float32) * 2)
    assert y0.is_deleted() and y1.is_deleted()
