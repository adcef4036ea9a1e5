"""Round 27 (sessions, checkpoints): defects found by outside checks, and the classes
behind them.

A. A checkpoint's member names must be ones ``numpy.load`` tells apart: slots ``x`` and
   ``x.npy`` were saved as members ``x.npy`` and ``x.npy.npy``, and numpy (which looks a key
   up as a member name before adding ``.npy``) returned slot ``x`` under ``"x.npy"``.
   ``save`` refuses every such set, naming both slots (the type table's name included, and
   ``\\`` against ``/``, one member on Windows).
B. Ranks past numpy's 64 dimensions: a program's rank-65 output could not be fetched (a
   bare CPython ``ValueError``), ``save`` wrote a file numpy cannot load, and ``restore``
   took headers of any rank. Each path now refuses with the limit named: ``program`` up
   front naming the slot, ``to_numpy``/``to_host`` of such a Buffer, ``save`` and
   ``restore``.
C. ``Session.program`` accepted a portable executable of another client (the first step
   then blamed the session's device); it is refused at ``program()`` as a non-portable one
   is.
"""

from __future__ import annotations

import ast
import struct
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rpjrt


def _saved_or_refused(client: Any, tmp_path: Path, slots: dict[str, Any]) -> tuple[Path | None, str]:
    s = rpjrt.Session(client)
    for name, v in slots.items():
        s.bind(name, v)
    path = tmp_path / "ck.npz"
    try:
        s.save(str(path))
    except rpjrt.InvalidArgumentError as e:
        assert not path.exists()
        return None, str(e)
    return path, ""


# --- A: member names numpy cannot tell apart ---------------------------------------------


@pytest.mark.parametrize(
    "pair",
    [("x", "x.npy"), ("w.npy", "w.npy.npy"), ("a\\b", "a/b"), ("a\\b", "a/b.npy"), (".npy", ".npy.npy")],
)
def test_save_refuses_slot_names_numpy_confuses(client: Any, tmp_path: Path, pair: tuple[str, str]) -> None:
    a, b = pair
    path, why = _saved_or_refused(client, tmp_path, {a: np.zeros(3, np.float32), b: np.ones(3, np.float32)})
    assert path is None, f"slots {pair} saved; numpy.load cannot tell them apart"
    quoted = [f'"{n}"'.replace("\\", "\\\\") for n in pair]
    assert all(q in why for q in quoted), why
    assert "rename" in why, why


def test_save_refuses_slot_beside_type_table_member(client: Any, tmp_path: Path) -> None:
    path, why = _saved_or_refused(client, tmp_path, {"__rpjrt_dtypes__.npy": np.ones(2, np.float32)})
    assert path is None
    assert "type table" in why and "__rpjrt_dtypes__.npy" in why, why


@pytest.mark.parametrize("names", [["x", "X"], ["x", "x.NPY"], ["x.npy"], ["x", "xnpy", "x.np"], ["a/b", "a"]])
def test_save_keeps_names_numpy_tells_apart(client: Any, tmp_path: Path, names: list[str]) -> None:
    slots = {n: np.full(2, i, np.float32) for i, n in enumerate(names)}
    path, why = _saved_or_refused(client, tmp_path, slots)
    assert path is not None, why
    z = np.load(path)
    for n, v in slots.items():
        np.testing.assert_array_equal(z[n], v)
    s = rpjrt.Session(client)
    s.restore(str(path))
    for n, v in slots.items():
        np.testing.assert_array_equal(s.fetch(n), v)


def test_saved_checkpoint_every_slot_reachable_by_numpy(client: Any, tmp_path: Path) -> None:
    # Whatever set of names is accepted, numpy.load returns each slot's own array.
    names = ["p", "p.npy.x", "q.npy", "r", "r.npy.npy", "s\\t", "u/v"]
    slots = {n: np.full(2, i, np.int32) for i, n in enumerate(names)}
    path, why = _saved_or_refused(client, tmp_path, slots)
    assert path is not None, why
    z = np.load(path)
    for n, v in slots.items():
        np.testing.assert_array_equal(z[n], v, err_msg=n)


def test_repro1_x_and_x_npy(client: Any, tmp_path: Path) -> None:
    s = rpjrt.Session(client)
    s.bind("x", np.zeros(3, np.float32))
    s.bind("x.npy", np.ones(3, np.float32))
    with pytest.raises(rpjrt.InvalidArgumentError, match=r'"x\.npy".*"x"|"x".*"x\.npy"'):
        s.save(str(tmp_path / "ck.npz"))
    assert not (tmp_path / "ck.npz").exists()


# --- B: ranks numpy cannot hold ----------------------------------------------------------


def _reshape_text(rank: int, dt: str = "f32") -> str:
    ty = "tensor<" + "1x" * rank + f"{dt}>"
    return f"""func.func public @main(%x: tensor<{dt}>) -> {ty} {{
  %0 = stablehlo.reshape %x : (tensor<{dt}>) -> {ty}
  return %0 : {ty}
}}"""


def test_program_refuses_output_slot_past_numpy_rank(client: Any) -> None:
    s = rpjrt.Session(client)
    s.bind("x", np.float32(3))
    with pytest.raises(rpjrt.InvalidArgumentError, match=r'65 dimensions.*at most 64.*slot "y"'):
        s.program(_reshape_text(65), ["x"], ["y"])
    assert "y" not in s
    # Unkept, the output is no slot: the program is accepted.
    s.program(_reshape_text(65), ["x"], [None])()
    # 64 dimensions round-trip through fetch, save and numpy.load.
    s.program(_reshape_text(64), ["x"], ["y64"])()
    got = s.fetch("y64")
    assert got.ndim == 64 and got.reshape(-1).tolist() == [3.0]


def test_buffer_past_numpy_rank_names_the_limit(client: Any) -> None:
    exe = client.compile(_reshape_text(65))
    out = exe(np.float32(3))
    b = out[0] if isinstance(out, (list, tuple)) else out
    for read in (b.to_numpy, lambda: np.asarray(b), b.to_host, b.tolist):
        with pytest.raises(rpjrt.InvalidArgumentError, match=r"65 dimensions.*at most 64"):
            read()
    assert b.tobytes() == np.float32(3).tobytes()


def test_save_refuses_slot_past_numpy_rank(client: Any, tmp_path: Path) -> None:
    import ml_dtypes

    path = tmp_path / "ck.npz"
    # A rank-64 bfloat16 slot is stored with a trailing byte axis: 65 dimensions.
    s = rpjrt.Session(client)
    s.bind("x", np.array(3, ml_dtypes.bfloat16))
    s.program(_reshape_text(64, "bf16"), ["x"], ["y"])()
    assert s.fetch("y").shape == (1,) * 64
    with pytest.raises(rpjrt.InvalidArgumentError, match=r'slot "y".*64 dimensions.*65.*at most 64'):
        s.save(str(path))
    assert not path.exists()
    # A rank-65 Buffer bound to a slot: fetch names the slot and the limit, save refuses it.
    out = client.compile(_reshape_text(65))(np.float32(3))
    b = out[0] if isinstance(out, (list, tuple)) else out
    s2 = rpjrt.Session(client)
    s2.bind("deep", b)
    with pytest.raises(rpjrt.InvalidArgumentError, match=r'slot "deep".*65 dimensions.*at most 64'):
        s2.fetch("deep")
    with pytest.raises(rpjrt.InvalidArgumentError, match=r'slot "deep".*65 dimensions.*at most 64'):
        s2.save(str(path))
    assert not path.exists()
    # 64 dimensions of a type numpy names save and load.
    s3 = rpjrt.Session(client)
    s3.bind("x", np.float32(3))
    s3.program(_reshape_text(64), ["x"], ["y"])()
    s3.save(str(path))
    assert np.load(path)["y"].shape == (1,) * 64


def _npz_with_rank(path: Path, rank: int) -> None:
    header = {"descr": "<f4", "fortran_order": False, "shape": tuple([1] * rank)}
    text = repr(header)
    pad = 64 - (10 + len(text) + 1) % 64
    h = (text + " " * pad + "\n").encode()
    npy = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + np.float32(2).tobytes()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("y.npy", npy)
    assert ast.literal_eval(text)["shape"] == tuple([1] * rank)


@pytest.mark.parametrize("rank", [65, 5000])
def test_restore_refuses_member_past_numpy_rank(client: Any, tmp_path: Path, rank: int) -> None:
    path = tmp_path / "deep.npz"
    _npz_with_rank(path, rank)
    s = rpjrt.Session(client)
    with pytest.raises(rpjrt.InvalidArgumentError, match=rf'"y" has {rank} dimensions.*at most 64'):
        s.restore(str(path))
    assert "y" not in s


def test_restore_takes_member_of_64_dimensions(client: Any, tmp_path: Path) -> None:
    path = tmp_path / "deep.npz"
    _npz_with_rank(path, 64)
    s = rpjrt.Session(client)
    s.restore(str(path))
    assert s.fetch("y").shape == (1,) * 64


# --- C: a portable executable of another client ------------------------------------------


def test_program_refuses_portable_executable_of_another_client(plugin_path: str) -> None:
    c1, c2 = rpjrt.Client(plugin_path), rpjrt.Client(plugin_path)
    try:
        text = """func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %x, %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}"""
        s = rpjrt.Session(c2)
        s.bind("x", np.ones(4, np.float32))
        for portable in (True, False):
            exe = c1.compile(text, portable=portable)
            with pytest.raises(rpjrt.InvalidArgumentError, match="another client.*session's client"):
                s.program(exe, ["x"], ["y"])
        # The session's own client's portable executable still works.
        step = s.program(c2.compile(text, portable=True), ["x"], ["y"])
        step()
        np.testing.assert_array_equal(s.fetch("y"), np.full(4, 2, np.float32))
    finally:
        c1.close()
        c2.close()
