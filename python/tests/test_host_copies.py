"""Bindings of the core's data-plane pieces on both CPU plugins: copies into a caller's
strided destination (``copy_to_host`` / ``to_host(out=)``), puts with a requested device
layout (``put(layout=)``) and alias buffers (``create_alias_buffer``)."""

from __future__ import annotations

import array
import re
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import rpjrt
from rpjrt import transfer

DTYPES = [
    np.bool_,
    np.int8,
    np.uint16,
    np.int32,
    np.int64,
    np.float16,
    np.float32,
    np.float64,
    np.complex64,
    np.complex128,
    ml_dtypes.bfloat16,
    ml_dtypes.float8_e4m3fn,
    ml_dtypes.int4,
]


def _values(dtype: Any, shape: tuple[int, ...]) -> Any:
    n = int(np.prod(shape))
    raw = (np.arange(n) % 7) - 3
    if np.dtype(dtype) == np.bool_:
        raw = raw > 0
    elif np.dtype(dtype).kind == "u":
        raw = raw + 3
    return raw.astype(dtype).reshape(shape)


# Destinations by how they address memory: (name, make(empty_like_target) -> view).
LAYOUTS = {
    "c": lambda a: a,
    "fortran": lambda a: np.asfortranarray(a),
    "reversed": lambda a: a[::-1, ::-1] if a.ndim == 2 else a[::-1],
    "strided": lambda a: np.zeros((a.shape[0] * 2,) + a.shape[1:], a.dtype)[::2]
    if a.ndim
    else a,
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_copy_into_any_strided_destination(client: rpjrt.Client, dtype: Any, layout: str) -> None:
    want = _values(dtype, (3, 4))
    buf = client.put(want)
    out = LAYOUTS[layout](np.zeros((3, 4), dtype))
    assert buf.copy_to_host(out) is None
    np.testing.assert_array_equal(out, want)
    other = LAYOUTS[layout](np.zeros((3, 4), dtype))
    assert buf.to_host(out=other) is other
    np.testing.assert_array_equal(other, want)


def test_copy_into_standard_library_objects_and_edge_shapes(client: rpjrt.Client) -> None:
    buf = client.put(array.array("i", range(6)))
    out = array.array("i", [0] * 6)
    buf.copy_to_host(out)
    assert out.tolist() == list(range(6))
    raw = bytearray(24)
    buf.copy_to_host(memoryview(raw).cast("i"))
    assert np.frombuffer(raw, np.int32).tolist() == list(range(6))
    # A memoryview with a negative stride (every other element, reversed).
    three = client.put(array.array("d", [1.0, 2.0, 3.0]))
    dst = array.array("d", [-1.0] * 6)
    three.copy_to_host(memoryview(dst)[::-2])
    assert dst.tolist() == [-1.0, 3.0, -1.0, 2.0, -1.0, 1.0]  # the gaps are untouched
    # 0-d and zero-size.
    scalar = np.zeros((), np.float32)
    client.put(np.float32(2.5)).copy_to_host(scalar)
    assert scalar == 2.5
    client.put(np.zeros((0, 3), np.int16)).copy_to_host(np.zeros((0, 3), np.int16))
    # Types without a buffer format also take integers of their size (the raw bits).
    bf = client.put(np.array([1.5, -2.0], ml_dtypes.bfloat16))
    bits = np.zeros(2, np.uint16)
    bf.copy_to_host(bits)
    np.testing.assert_array_equal(bits, np.array([1.5, -2.0], ml_dtypes.bfloat16).view(np.uint16))


def test_bad_destinations_name_what_is_wrong(client: rpjrt.Client) -> None:
    buf = client.put(np.arange(6, dtype=np.float32).reshape(2, 3))
    with pytest.raises(rpjrt.InvalidArgumentError, match=re.escape("shape (3, 2), but the buffer has shape (2, 3)")):
        buf.copy_to_host(np.zeros((3, 2), np.float32))
    with pytest.raises(rpjrt.InvalidArgumentError, match="holds float64, but the buffer holds float32"):
        buf.copy_to_host(np.zeros((2, 3), np.float64))
    with pytest.raises(rpjrt.InvalidArgumentError, match="holds bfloat16, but the buffer holds float32"):
        buf.copy_to_host(np.zeros((2, 3), ml_dtypes.bfloat16))
    frozen = np.zeros((2, 3), np.float32)
    frozen.flags.writeable = False
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"destination \(a ndarray\) is read-only"):
        buf.copy_to_host(frozen)
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"\(a bytes\) is read-only"):
        client.put(b"abc").copy_to_host(b"xyz")
    with pytest.raises(rpjrt.InvalidArgumentError, match="foreign byte order"):
        buf.copy_to_host(np.zeros((2, 3), ">f4"))
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"\(a list\) does not export"):
        buf.copy_to_host([0.0] * 6)
    # Too small a byte buffer viewed as the right type is a shape error, not an overrun.
    with pytest.raises(rpjrt.InvalidArgumentError, match="shape"):
        buf.copy_to_host(memoryview(bytearray(20)).cast("f"))
    with pytest.raises(rpjrt.InvalidArgumentError, match="token"):
        pass_token(client)
    buf.delete()
    with pytest.raises(rpjrt.BufferDeletedError):
        buf.copy_to_host(np.zeros((2, 3), np.float32))


def pass_token(client: rpjrt.Client) -> None:
    """A token buffer has no host data: made by an error-free program returning one."""
    exe = client.compile(
        "func.func public @main() -> !stablehlo.token {\n"
        "  %0 = stablehlo.create_token : !stablehlo.token\n"
        "  return %0 : !stablehlo.token\n}\n"
    )
    (tok,) = exe()
    tok.copy_to_host(np.zeros((), np.uint8))


def test_put_with_a_device_layout(client: rpjrt.Client) -> None:
    host = np.arange(12, dtype=np.int32).reshape(3, 4)
    col = client.put(host, layout=(0, 1))
    assert transfer.device_layout(col).minor_to_major == (0, 1)
    assert transfer.byte_strides(col) == (4, 12)
    np.testing.assert_array_equal(col.to_numpy(), host)
    # From a non-contiguous view, with a DeviceLayout object.
    view = np.arange(24, dtype=np.float32).reshape(4, 6)[::-1, ::2]
    want_layout = transfer.DeviceLayout((0, 1), (), 0, 0)
    b = client.put(view, layout=want_layout)
    assert transfer.device_layout(b).minor_to_major == (0, 1)
    np.testing.assert_array_equal(b.to_numpy(), view)
    out = np.zeros((4, 3), np.float32, order="F")
    b.copy_to_host(out)
    np.testing.assert_array_equal(out, view)
    # Row-major asked explicitly runs in programs like any put.
    row = client.put(host, layout=[1, 0])
    assert transfer.device_layout(row).is_row_major

    with pytest.raises(rpjrt.InvalidArgumentError, match=re.escape("minor_to_major [0] is not a permutation of the 2 dimensions")):
        client.put(host, layout=[0])
    with pytest.raises(rpjrt.InvalidArgumentError, match="not a permutation"):
        client.put(host, layout=[0, 0])
    with pytest.raises(rpjrt.InvalidArgumentError, match="copy=False cannot be combined with layout="):
        client.put(host, layout=(0, 1), copy=False)
    with pytest.raises(rpjrt.InvalidArgumentError, match="layout= applies to host data"):
        client.put(col, layout=(0, 1))
    with pytest.raises(rpjrt.InvalidArgumentError, match="tiled"):
        client.put(host, layout=transfer.DeviceLayout((0, 1), ((8, 128),), 0, 0))
    with pytest.raises(rpjrt.InvalidArgumentError, match="not str"):
        client.put(host, layout="01")
    with pytest.raises(rpjrt.InvalidArgumentError, match="whole-byte numeric"):
        client.put(np.ones((2, 2), bool), layout=(0, 1))


def test_alias_buffers(client: rpjrt.Client) -> None:
    alias, fulfiller = client.create_alias_buffer(np.float32, (2, 3))
    assert isinstance(fulfiller, rpjrt.AliasFulfiller)
    assert fulfiller.pending
    assert repr(fulfiller) == "rpjrt.AliasFulfiller(float32[2, 3], pending)"
    assert alias.shape == (2, 3) and alias.dtype == rpjrt.float32
    target = client.put(np.arange(6, dtype=np.float32).reshape(2, 3))
    fulfiller.fulfill(target)
    assert not fulfiller.pending
    assert repr(fulfiller).endswith("done)")
    np.testing.assert_array_equal(alias.to_numpy(), np.arange(6, dtype=np.float32).reshape(2, 3))
    # The plugin moved the target into the alias, as a donation does.
    assert target.is_deleted()
    with pytest.raises(rpjrt.BufferDeletedError):
        target.to_numpy()
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"float32\[2, 3\] alias was already completed"):
        fulfiller.fulfill(client.put(np.zeros((2, 3), np.float32)))

    failed, f = client.create_alias_buffer("int8", [4], device=1)
    assert failed.device == client.devices()[1]
    f.fail("DATA_LOSS", "the shard is gone")
    with pytest.raises(rpjrt.Error, match="the shard is gone"):
        failed.block_until_ready()
    with pytest.raises(rpjrt.InvalidArgumentError, match="unknown error code"):
        client.create_alias_buffer("int8", [4])[1].fail("NOPE", "x")

    # A mismatched target is refused naming both, and the alias stays pending for a retry
    # (it used to be cancelled as if the fulfiller had been dropped).
    wrong, f = client.create_alias_buffer(np.float32, (2, 3))
    with pytest.raises(rpjrt.InvalidArgumentError, match=re.escape("the alias is float32[2, 3], but the target buffer is int32[2, 3]")):
        f.fulfill(client.put(np.zeros((2, 3), np.int32)))
    with pytest.raises(rpjrt.InvalidArgumentError, match="target buffer is on"):
        f.fulfill(client.put(np.zeros((2, 3), np.float32), device=2))
    assert f.pending
    f.fulfill(client.put(np.full((2, 3), 5, np.float32)))
    np.testing.assert_array_equal(wrong.to_numpy(), np.full((2, 3), 5, np.float32))
    # Dropped without being used: the alias fails instead of waiting forever.
    lost, f = client.create_alias_buffer(np.float32, (1,))
    del f
    with pytest.raises(rpjrt.Error, match="dropped unfulfilled"):
        lost.block_until_ready()
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"dimension 0 is negative \(-1\)"):
        client.create_alias_buffer(np.float32, (-1,))
