"""The one program-format table (crates/rpjrt/tests/fixtures/program-formats.tsv), read
by the Rust and CLI tests too: ``Client.compile`` takes exactly the program rows the CLI's
``compile`` takes, ``Client.load`` exactly the artifact rows ``rpjrt run`` loads,
``Client.load(bare=True)`` the bare executables ``rpjrt run --format executable`` loads, and
every other row is refused by both as an InvalidArgumentError (a FIFO at once)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import rpjrt

TABLE_DIR = Path(__file__).resolve().parents[2] / "crates" / "rpjrt" / "tests" / "fixtures"


def _rows() -> list[tuple[str, str | None, str]]:
    rows = []
    for line in (TABLE_DIR / "program-formats.tsv").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        file, fmt, kind = line.split("\t")
        rows.append((file, None if fmt == "-" else fmt, kind))
    return rows


ROWS = _rows()


def test_the_table_is_read() -> None:
    kinds = {k for _, _, k in ROWS}
    assert kinds == {"mlir", "hlo", "artifact", "executable", "error"}


@pytest.mark.parametrize(("file", "fmt", "kind"), ROWS, ids=[f"{f}-{m}-{k}" for f, m, k in ROWS])
def test_compile_and_load_follow_the_table(
    client: rpjrt.Client, tmp_path: Path, file: str, fmt: str | None, kind: str
) -> None:
    if file == "@artifact":
        path = tmp_path / "mul_add.rpjrt"
        exe = client.compile(TABLE_DIR / "mul_add.mlir")
        path.write_bytes(exe.serialize())
    elif file == "@bare":
        path = tmp_path / "mul_add.pjrt-executable"
        exe = client.compile(TABLE_DIR / "mul_add.mlir")
        path.write_bytes(exe.serialize_bare())
    elif file == "@fifo":
        path = tmp_path / "pipe.mlir"
        os.mkfifo(path)
    else:
        path = TABLE_DIR / file
    if kind in ("mlir", "hlo"):
        assert client.compile(path, format=fmt).num_outputs == 1
        # The same bytes, given as bytes, are told apart by the same rule (the HLO row
        # needs its file name or format).
        if kind == "mlir" or fmt == "hlo":
            assert client.compile(path.read_bytes(), format=fmt).num_outputs == 1
    else:
        with pytest.raises(rpjrt.InvalidArgumentError):
            client.compile(path, format=fmt)
    if kind == "executable":
        # A plugin's bare serialized executable: load_bare takes it, load refuses it.
        assert client.load(path, bare=True).num_outputs == 1
        with pytest.raises(rpjrt.InvalidArgumentError):
            client.load(path)
    if fmt is not None:
        return  # load takes no format: only the rows without one apply to it
    if kind == "artifact":
        assert client.load(path).num_outputs == 1
    else:
        with pytest.raises(rpjrt.InvalidArgumentError):
            client.load(path)


def test_old_names_warn_and_keep_working(client: rpjrt.Client) -> None:
    import numpy as np

    from rpjrt import sharding as sh

    assert client.devices() == client.addressable_devices()
    with pytest.warns(DeprecationWarning, match="all_devices"):
        assert client.all_devices() == client.devices()
    exe = client.compile(TABLE_DIR / "mul_add.mlir")
    with pytest.warns(DeprecationWarning, match="addressable_devices"):
        assert exe.devices() == exe.addressable_devices()
    mesh = sh.Mesh({"x": 2}, devices=[0, 1])
    parts = [np.array([1.0], np.float32), np.array([2.0], np.float32)]
    with pytest.warns(DeprecationWarning, match="assemble"):
        old = sh.gather(parts, mesh, ("x",), (2,))
    assert (old == sh.assemble(parts, mesh, ("x",), (2,))).all()
