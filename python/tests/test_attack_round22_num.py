"""Regressions from attack round 22 (numbers), checked bit for bit against numpy and
ml_dtypes.

- F-1: ``to_numpy(out=)``, ``copy_to_host`` and ``to_host(out=)`` into an ml_dtypes array
  in non-native byte order (a big-endian bfloat16 array) wrote native-order bytes with no
  error: the dtype was compared by name only and then viewed as the native carrier integer
  type, which hid the order. Every entry point now refuses it as a big-endian ``float16``
  destination is refused ("foreign byte order", naming the dtype and its order), and
  leaves ``out`` untouched; one-byte ml_dtypes types, which numpy also gives a byte order,
  have none to get wrong and still copy.
- F-2: ``Session.restore`` of an ``np.savez`` file holding a big-endian bfloat16 array (the
  member's type string is ``'>V2'``) read the bytes as native order. The stated order is
  honoured now, per element of the slot's type.
- ``np.savez`` of a float8_e5m2 array writes the type string ``'<f1'``, which numpy cannot
  load; ``Session.restore`` refused it as "has no PJRT element type" only. The refusal now
  names float8_e5m2 and the raw-bytes form that restores (``arr.view("V1")``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

import ml_dtypes
import numpy as np
import pytest

import rpjrt

FOREIGN = ">" if sys.byteorder == "little" else "<"
FOREIGN_NAME = "big-endian" if FOREIGN == ">" else "little-endian"


def bits(a: Any) -> bytes:
    return np.ascontiguousarray(np.asarray(a)).reshape(-1).view(np.uint8).tobytes()


def npdt(name: str) -> np.dtype:
    return np.dtype(rpjrt.dtype(name).numpy)


def _exports_buffer(dt: np.dtype) -> bool:
    try:
        memoryview(np.zeros(1, dt))
        return True
    except (TypeError, ValueError, BufferError):
        return False


# Every rpjrt type that numpy holds through ml_dtypes (no buffer export), by item size.
ML_TYPES = [
    name
    for name in ["bfloat16", "float8_e5m2", "float8_e4m3fn", "float8_e4m3", "int4", "uint4", "int2", "float4_e2m1fn"]
    if not _exports_buffer(npdt(name))
]
ML_WIDE = [n for n in ML_TYPES if npdt(n).itemsize > 1]
ML_NARROW = [n for n in ML_TYPES if npdt(n).itemsize == 1]

ENTRY_POINTS: list[tuple[str, Callable[[Any, Any], Any]]] = [
    ("to_numpy(out=)", lambda b, o: b.to_numpy(out=o)),
    ("copy_to_host", lambda b, o: b.copy_to_host(o)),
    ("to_host(out=)", lambda b, o: b.to_host(out=o)),
]


def _values(name: str, shape: tuple[int, ...]) -> np.ndarray:
    """Exact values of type ``name`` whose bytes differ from their swapped bytes."""
    n = int(np.prod(shape))
    base = np.array([1.5, -2.0, 3.0, 0.5, -0.25, 1.0, 2.0, -1.5][: max(n, 1)] * (n // 8 + 1))[:n]
    if name.startswith(("int", "uint")):
        base = np.arange(n) % 2
    return base.astype(npdt(name)).reshape(shape)


def test_wide_ml_dtypes_exist() -> None:
    # bfloat16 is the one wide ml_dtypes type today; the tests below would check nothing
    # without it.
    assert "bfloat16" in ML_WIDE


@pytest.mark.parametrize("name", ML_WIDE)
@pytest.mark.parametrize("entry", [e[0] for e in ENTRY_POINTS])
@pytest.mark.parametrize("shape", [(3,), (2, 3), ()])
def test_f1_foreign_order_ml_dtypes_destination_is_refused(
    client: rpjrt.Client, name: str, entry: str, shape: tuple[int, ...]
) -> None:
    call = dict(ENTRY_POINTS)[entry]
    v = _values(name, shape)
    b = client.put(v)
    dt = npdt(name).newbyteorder(FOREIGN)
    # ml_dtypes honours the order: the foreign-order array holds the same values.
    assert bits(v.astype(dt).astype(npdt(name))) == bits(v)
    outs = [np.zeros(shape, dt)]
    if len(shape) > 1:
        outs.append(np.asfortranarray(np.zeros(shape, dt)))
    for out in outs:
        with pytest.raises(rpjrt.InvalidArgumentError) as e:
            call(b, out)
        msg = str(e.value)
        assert "foreign byte order" in msg, msg
        assert name in msg and FOREIGN_NAME in msg, msg
        assert bits(out) == bytes(out.nbytes), "out was written before the refusal"
    # A strided (every other element) destination is refused the same way.
    if shape:
        big = np.zeros(tuple(2 * d for d in shape), dt)
        view = big[tuple(slice(None, None, 2) for _ in shape)]
        with pytest.raises(rpjrt.InvalidArgumentError, match="foreign byte order"):
            call(b, view)
        assert bits(big) == bytes(big.nbytes)


@pytest.mark.parametrize("name", ML_WIDE)
def test_f1_same_answer_as_numpy_foreign_order(client: rpjrt.Client, name: str) -> None:
    # The numpy type of the same width in foreign order is refused with the same words.
    msgs = []
    for t, dt in [("float16", np.dtype("float16")), (name, npdt(name))]:
        b = client.put(np.zeros(3, dt))
        with pytest.raises(rpjrt.InvalidArgumentError) as e:
            b.to_numpy(out=np.zeros(3, dt.newbyteorder(FOREIGN)))
        msgs.append(str(e.value))
    for m in msgs:
        assert "the destination is in foreign byte order" in m, m
        assert "a copy to the host writes native order" in m, m


@pytest.mark.parametrize("name", ML_WIDE)
@pytest.mark.parametrize("entry", [e[0] for e in ENTRY_POINTS])
def test_f1_native_order_ml_dtypes_destination_still_copies(
    client: rpjrt.Client, name: str, entry: str
) -> None:
    call = dict(ENTRY_POINTS)[entry]
    v = _values(name, (2, 3))
    b = client.put(v)
    for dt in [npdt(name), npdt(name).newbyteorder("=")]:
        for out in [np.zeros((2, 3), dt), np.asfortranarray(np.zeros((2, 3), dt)), np.zeros((3, 2), dt).T]:
            call(b, out)
            assert bits(out) == bits(v), (dt, out.strides)


@pytest.mark.parametrize("name", ML_NARROW)
@pytest.mark.parametrize("entry", [e[0] for e in ENTRY_POINTS])
def test_f1_one_byte_types_have_no_order_to_refuse(client: rpjrt.Client, name: str, entry: str) -> None:
    # numpy gives one-byte ml_dtypes types a byte order too (isnative False after
    # newbyteorder), but one byte has nothing to swap: the copy is exact.
    call = dict(ENTRY_POINTS)[entry]
    v = _values(name, (2, 3))
    b = client.put(v)
    dt = npdt(name).newbyteorder(FOREIGN)
    out = np.zeros((2, 3), dt)
    call(b, out)
    assert bits(out) == bits(v)


def test_f1_reproducer(client: rpjrt.Client) -> None:
    # The report's case: bfloat16 [1.5, -2.0, 3.0] into a big-endian bfloat16 array.
    v = np.array([1.5, -2.0, 3.0])
    b = client.put(v.astype(ml_dtypes.bfloat16))
    be = np.dtype(ml_dtypes.bfloat16).newbyteorder(">")
    for _, call in ENTRY_POINTS:
        o = np.zeros(3, be)
        if sys.byteorder == "little":
            with pytest.raises(rpjrt.InvalidArgumentError, match="foreign byte order"):
                call(b, o)
            assert o.astype(np.float64).tolist() == [0.0, 0.0, 0.0]
        else:
            call(b, o)
            assert o.astype(np.float64).tolist() == v.tolist()


# --------------------------------------------------------------------------------------
# F-2: Session.restore honours the byte order of raw-byte members ('>V2')
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("order", [">", "<", "="])
@pytest.mark.parametrize("fortran", [False, True])
def test_f2_restore_honours_raw_member_byte_order(
    client: rpjrt.Client, tmp_path: Path, order: str, fortran: bool
) -> None:
    bf = np.dtype(ml_dtypes.bfloat16)
    v = np.array([[1.5, -2.0, 3.0], [0.5, -0.25, 96.0]]).astype(bf)
    x = v.astype(bf.newbyteorder(order))
    if fortran:
        x = np.asfortranarray(x)
    path = tmp_path / "w.npz"
    np.savez(path, w=x)
    with rpjrt.Session(client) as session:
        session.bind("w", np.zeros((2, 3), bf))
        session.restore(path)
        got = session.fetch("w")
        assert got.dtype == bf and got.shape == (2, 3)
        assert bits(got) == bits(v), (order, fortran, got.astype(np.float64).tolist())


def test_f2_reproducer(client: rpjrt.Client, tmp_path: Path) -> None:
    v = np.array([1.5, -2.0, 3.0])
    be = v.astype(np.dtype(ml_dtypes.bfloat16).newbyteorder(">"))
    path = tmp_path / "w.npz"
    np.savez(path, w=be)
    assert b"'>V2'" in path.read_bytes()
    with rpjrt.Session(client) as session:
        session.bind("w", np.zeros(3, ml_dtypes.bfloat16))
        session.restore(path)
        assert session.fetch("w").astype(np.float64).tolist() == v.tolist()


def test_f2_one_byte_raw_members_in_any_order(client: rpjrt.Client, tmp_path: Path) -> None:
    for name in ["float8_e4m3fn", "int4"]:
        dt = npdt(name)
        v = _values(name, (4,))
        for order in [">", "<", "|"]:
            path = tmp_path / f"{name}.npz"
            np.savez(path, w=v.astype(dt.newbyteorder(order)) if order != "|" else v)
            with rpjrt.Session(client) as session:
                session.bind("w", np.zeros(4, dt))
                session.restore(path)
                assert bits(session.fetch("w")) == bits(v), (name, order)


# --------------------------------------------------------------------------------------
# '<f1' (float8_e5m2 saved by np.savez): a refusal that says what it is and what to do
# --------------------------------------------------------------------------------------


def test_f1_descr_refusal_names_float8_e5m2(client: rpjrt.Client, tmp_path: Path) -> None:
    e5m2 = np.dtype(ml_dtypes.float8_e5m2)
    v = np.array([1.5, -2.0, 3.0]).astype(e5m2)
    path = tmp_path / "w.npz"
    np.savez(path, w=v)
    with rpjrt.Session(client) as session:
        # No slot yet: the type to give it is named.
        with pytest.raises(rpjrt.InvalidArgumentError) as e:
            session.restore(path)
        msg = str(e.value)
        for needle in ['"<f1"', "float8_e5m2", "raw bytes", 'view("V1")', "Session.save"]:
            assert needle in msg, msg
        assert session.slots() == []
        # A float8_e5m2 slot: still refused, and left as it was.
        session.bind("w", np.zeros(3, e5m2))
        with pytest.raises(rpjrt.InvalidArgumentError, match="float8_e5m2"):
            session.restore(path)
        assert bits(session.fetch("w")) == bytes(3)
        # The form the message recommends restores exactly.
        np.savez(path, w=v.view("V1"))
        session.restore(path)
        got = session.fetch("w")
        assert got.dtype == e5m2 and bits(got) == bits(v)
