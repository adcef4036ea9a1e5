"""Putting host data on devices and getting it back, with and without numpy."""

from __future__ import annotations

import array
import gc
import struct

import ml_dtypes
import numpy as np
import pytest

import rpjrt

from .conftest import fixture_text, run_python

STD_DTYPES = [
    np.bool_,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.float16,
    np.float32,
    np.float64,
    np.complex64,
    np.complex128,
]
ML_DTYPES = [
    ml_dtypes.bfloat16,
    ml_dtypes.float8_e5m2,
    ml_dtypes.float8_e4m3fn,
    ml_dtypes.int4,
    ml_dtypes.uint4,
    ml_dtypes.int2,
    ml_dtypes.uint2,
]


def aligned(n: int, dtype: object = np.float32, align: int = 64) -> np.ndarray:
    """An n-element array whose data starts on an `align`-byte boundary (XLA's CPU plugins
    use host memory in place only when it is 64-byte aligned)."""
    itemsize = np.dtype(dtype).itemsize
    raw = np.zeros(n * itemsize + align, np.uint8)
    off = (-raw.ctypes.data) % align
    return raw[off : off + n * itemsize].view(dtype)


def _sample(dt: object, shape: tuple[int, ...] = (2, 3)) -> np.ndarray:
    n = int(np.prod(shape))
    d = np.dtype(dt)
    if d == np.bool_:
        return (np.arange(n) % 2 == 0).reshape(shape)
    if d.kind == "c":
        return (np.arange(n) + 1j * np.arange(n)).astype(d).reshape(shape)
    if d.name in ("int2",):
        return (np.arange(n) % 4 - 2).astype(d).reshape(shape)
    if d.name in ("uint2", "int4", "uint4"):
        return (np.arange(n) % 4).astype(d).reshape(shape)
    return np.arange(n).astype(d).reshape(shape)


@pytest.mark.parametrize("dt", STD_DTYPES + ML_DTYPES, ids=lambda d: np.dtype(d).name)
def test_numpy_roundtrip(client: rpjrt.Client, dt: object) -> None:
    a = _sample(dt)
    b = client.put(a)
    assert b.dtype == a.dtype and b.shape == a.shape == (2, 3)
    assert b.ndim == 2 and b.size == 6 and b.nbytes == a.nbytes
    out = b.to_numpy()
    assert out.dtype == a.dtype
    np.testing.assert_array_equal(out, a)
    np.testing.assert_array_equal(np.asarray(b), a)
    assert b.tolist() == a.tolist()
    assert b.tobytes() == a.tobytes()


@pytest.mark.parametrize("dt", STD_DTYPES + ML_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(), (0,), (5,), (2, 1, 3, 2)], ids=str)
def test_to_numpy_gives_a_fresh_writable_array_that_owns_its_data(
    client: rpjrt.Client, dt: object, shape: tuple[int, ...]
) -> None:
    a = _sample(dt, shape)
    b = client.put(a)
    for out in (b.to_numpy(), np.asarray(b), np.array(b)):
        assert type(out) is np.ndarray
        assert out.dtype == a.dtype and out.shape == a.shape
        np.testing.assert_array_equal(out, a)
        assert out.flags.writeable and out.flags.owndata and out.base is None
        assert out.flags.c_contiguous
    # Writing to the array changes neither the buffer nor the next copy.
    out = b.to_numpy()
    out[...] = np.zeros((), a.dtype)
    again = b.to_numpy()
    assert again is not out
    np.testing.assert_array_equal(again, a)


def test_to_numpy_of_a_large_buffer(client: rpjrt.Client) -> None:
    # Above rpjrt.QUICK_COPY_BYTES the copy runs without the GIL.
    a = np.arange(1 << 18, dtype=np.float64).reshape(512, 512)
    b = client.put(a)
    np.testing.assert_array_equal(b.to_numpy(), a)
    np.testing.assert_array_equal(np.asarray(b, dtype=np.float32), a.astype(np.float32))


def test_array_protocol_conversions(client: rpjrt.Client) -> None:
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    b = client.put(a)
    f = np.asarray(b, dtype=np.float64)
    assert f.dtype == np.float64 and f.flags.owndata
    np.testing.assert_array_equal(f, a)
    same = b.__array__(np.int32)
    assert same.dtype == np.int32 and same.flags.owndata
    with pytest.raises(ValueError, match="only by copying"):
        np.array(b, copy=False)


def test_to_numpy_of_a_deleted_buffer(client: rpjrt.Client) -> None:
    b = client.put(np.ones(3, np.float32))
    b.delete()
    with pytest.raises(rpjrt.BufferDeletedError):
        b.to_numpy()
    with pytest.raises(rpjrt.BufferDeletedError):
        np.asarray(b)


def test_to_numpy_imports_numpy_only_when_called(plugin_path: str) -> None:
    code = f"""
        import sys, rpjrt
        assert "numpy" not in sys.modules
        b = rpjrt.Client({plugin_path!r}).put([1.0, 2.0, 3.0])
        assert "numpy" not in sys.modules
        a = b.to_numpy()
        import numpy as np
        assert type(a) is np.ndarray and a.dtype == np.float64, (type(a), a.dtype)
        assert a.tolist() == [1.0, 2.0, 3.0] and a.flags.owndata
        print("ok")
    """
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


@pytest.mark.parametrize(
    "code,values,name",
    [
        ("f", [0.5, 1.5, -2.0], "float32"),
        ("d", [1e300, -0.0, 3.0], "float64"),
        ("b", [-128, 0, 127], "int8"),
        ("B", [0, 1, 255], "uint8"),
        ("h", [-5, 6, 7], "int16"),
        ("i", [1, 2, -3], "int32"),
        ("q", [2**62, -(2**62), 0], "int64"),
        ("Q", [2**63, 1, 0], "uint64"),
    ],
)
def test_stdlib_roundtrip(client: rpjrt.Client, code: str, values: list[float], name: str) -> None:
    b = client.put(array.array(code, values))
    assert b.dtype == name and b.shape == (3,)
    mv = b.to_host()
    assert isinstance(mv, memoryview)
    assert mv.format == code or struct.calcsize(mv.format) == struct.calcsize(code)
    assert mv.shape == (3,) and not mv.readonly
    assert mv.tolist() == values
    assert b.tolist() == values


def test_memoryview_shapes_and_formats(client: rpjrt.Client) -> None:
    raw = struct.pack("<6f", *range(6))
    b = client.put(memoryview(raw).cast("B").cast("f", (2, 3)))
    assert b.shape == (2, 3) and b.dtype == rpjrt.float32
    assert b.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert b.to_host().shape == (2, 3)
    assert memoryview(b.to_host()).tolist() == b.tolist()
    h = client.put(memoryview(np.array([1.5, -2.0], np.float16)))
    assert h.dtype == rpjrt.float16 and h.to_host().format == "e" and h.tolist() == [1.5, -2.0]


def test_raw_bytes_with_dtype(client: rpjrt.Client) -> None:
    b = client.put(struct.pack("<4i", 1, 2, 3, 4), dtype=rpjrt.int32)
    assert b.shape == (4,) and b.tolist() == [1, 2, 3, 4]
    b2 = client.put(bytearray(8), dtype="bfloat16")
    assert b2.shape == (4,) and b2.dtype == rpjrt.bfloat16
    with pytest.raises(rpjrt.InvalidArgumentError, match="whole number"):
        client.put(b"\x00" * 6, dtype="float32")
    with pytest.raises(rpjrt.InvalidArgumentError, match="does not convert"):
        client.put(array.array("f", [1.0]), dtype="int32")
    with pytest.raises(rpjrt.InvalidArgumentError, match="is not a dtype"):
        client.put(b"\x00" * 4, dtype="float128")


def test_python_numbers_and_lists(client: rpjrt.Client) -> None:
    assert client.put(2.5).tolist() == 2.5 and client.put(2.5).shape == ()
    assert client.put(7).dtype == rpjrt.int64
    assert client.put(True).dtype == rpjrt.bool_
    assert client.put([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert client.put([1.0, 2.0], dtype="float32").dtype == rpjrt.float32
    assert client.put([1j, 2]).dtype == rpjrt.complex128 if False else True
    with pytest.raises(rpjrt.InvalidArgumentError, match="mixes float and int"):
        client.put([1, 2.5])
    with pytest.raises(rpjrt.InvalidArgumentError, match="cannot put a str"):
        client.put([1, "two"])


@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2), (1,), (2, 1, 3)])
def test_zero_d_and_zero_size(client: rpjrt.Client, shape: tuple[int, ...]) -> None:
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    b = client.put(a)
    assert b.shape == shape and b.size == a.size
    np.testing.assert_array_equal(b.to_numpy(), a)
    mv = b.to_host()
    assert mv.shape == shape and mv.nbytes == a.nbytes


@pytest.mark.parametrize(
    "make",
    [
        lambda a: a.T,  # Fortran order: byte strides
        lambda a: a[:, ::2],  # strided: gathered
        lambda a: a[::-1],  # negative strides: gathered
        lambda a: np.asfortranarray(a),
        lambda a: a[1:, 1:],
        lambda a: np.broadcast_to(a[:1], a.shape),  # zero strides
    ],
    ids=["transpose", "step", "reversed", "fortran", "offset", "broadcast"],
)
def test_non_contiguous_numpy(client: rpjrt.Client, make: object) -> None:
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    v = make(a)  # type: ignore[operator]
    b = client.put(v)
    assert b.shape == v.shape
    np.testing.assert_array_equal(b.to_numpy(), v)
    b2 = client.put(v, copy=None)  # one copy where sharing is impossible
    np.testing.assert_array_equal(b2.to_numpy(), v)


def test_copy_false_needs_contiguous(client: rpjrt.Client) -> None:
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    with pytest.raises(rpjrt.InvalidArgumentError, match="C-contiguous"):
        client.put(a[:, ::2], copy=False)


def test_copy_false_refuses_a_silent_copy(client: rpjrt.Client) -> None:
    a = aligned(65, np.uint8)[1:]  # one byte past a 64-byte boundary
    with pytest.raises(rpjrt.InvalidArgumentError, match="1 bytes past a 64-byte boundary"):
        client.put(a, copy=False)
    b = client.put(a, copy=None)  # allowed to copy
    assert np.from_dlpack(b).ctypes.data != a.ctypes.data


def test_devices_and_memories(client: rpjrt.Client) -> None:
    d1 = client.devices()[1]
    b = client.put(np.ones(4, np.float32), d1)
    assert b.device == d1 and b.memory.kind == "device"
    assert client.put(np.ones(4, np.float32), 2).device == client.devices()[2]
    p = client.put(np.ones(4, np.float32), d1, memory="pinned_host")
    assert p.memory.kind == "pinned_host" and p.device == d1
    c = b.copy_to(client.devices()[3])
    assert c.device.id == 3 and c.tolist() == [1.0] * 4
    m = b.copy_to(d1.memory("unpinned_host"))
    assert m.memory.kind == "unpinned_host" and m.tolist() == [1.0] * 4
    again = client.put(b, client.devices()[0])
    assert again.device.id == 0 and again.tolist() == [1.0] * 4
    with pytest.raises(rpjrt.InvalidArgumentError, match="out of range"):
        client.put(np.ones(1), 17)
    assert b.on_device_size >= 16


def test_delete(client: rpjrt.Client) -> None:
    b = client.put(np.ones(4, np.float32))
    assert not b.is_deleted()
    b.delete()
    assert b.is_deleted()
    assert repr(b) == "rpjrt.Buffer(float32[4], deleted)"
    for action in (b.to_host, b.tobytes, b.block_until_ready, b.to_numpy):
        with pytest.raises(rpjrt.BufferDeletedError):
            action()
    b.delete()  # deleting again does nothing, as in JAX
    assert b.is_deleted()


def test_copy_deepcopy_and_weakrefs(client: rpjrt.Client) -> None:
    import copy
    import weakref

    exe = client.compile(fixture_text("mul_add.mlir"))
    dev = client.devices()[1]
    b = client.put(np.arange(8, dtype=np.float32), device=dev)
    state = {"params": [b], "exe": exe, "device": dev, "client": client}
    snap = copy.deepcopy(state)
    # Buffers become new device buffers in the same memory; handles stay themselves.
    (c,) = snap["params"]
    assert c is not b and c.device == dev and c.memory == b.memory
    assert snap["exe"] is exe and snap["device"] is dev and snap["client"] is client
    b.delete()
    np.testing.assert_array_equal(c.to_numpy(), np.arange(8, dtype=np.float32))
    shallow = copy.copy(c)
    assert shallow is not c and shallow.tolist() == c.tolist()
    assert c.copy().tolist() == c.tolist()
    with pytest.raises(rpjrt.BufferDeletedError):
        b.copy()
    # Weak references, as to JAX arrays and devices (caches keyed by them).
    for obj in (c, exe, dev, client, dev.memories()[0], client.plugin):
        assert weakref.ref(obj)() is obj
    r = weakref.ref(shallow)
    del shallow
    gc.collect()
    assert r() is None


def test_repr_and_ready(client: rpjrt.Client) -> None:
    b = client.put(np.ones((2, 3), np.float32))
    assert repr(b) == "rpjrt.Buffer(float32[2, 3], device=cpu:0)"
    assert b.block_until_ready() is b
    assert b.is_ready()
    assert len(b) == 2


def test_zero_copy_numpy_to_buffer_and_back(client: rpjrt.Client) -> None:
    a = aligned(1024)
    a[:] = np.arange(1024)
    b = client.put(a, copy=False)
    view = np.from_dlpack(b)
    assert view.ctypes.data == a.ctypes.data  # the buffer uses the numpy memory in place
    np.testing.assert_array_equal(view, a)
    assert not view.flags.writeable
    copied = client.put(a)  # copy=True (the default) copies
    assert np.from_dlpack(copied).ctypes.data != a.ctypes.data
    del view, b
    gc.collect()


def test_zero_copy_survives_dropping_the_source(client: rpjrt.Client) -> None:
    a = aligned(256, np.int32)
    a[:] = np.arange(256)
    b = client.put(a, copy=False)
    del a
    gc.collect()
    assert b.tolist() == list(range(256))


def test_dlpack_export_is_zero_copy_and_pins(client: rpjrt.Client) -> None:
    b = client.put(np.arange(6, dtype=np.float64).reshape(2, 3))
    v1 = np.from_dlpack(b)
    v2 = np.from_dlpack(b)
    assert v1.ctypes.data == v2.ctypes.data
    assert b.__dlpack_device__() == (1, 0)
    np.testing.assert_array_equal(v1, [[0, 1, 2], [3, 4, 5]])
    # The refusal is the core's export pin (the binding keeps no count of its own).
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"cannot be deleted while 2 .*DLPack"):
        b.delete()
    donate = client.compile(fixture_text("donate.mlir"))
    x = client.put(np.zeros(8, np.float32))
    held = np.from_dlpack(x)
    with pytest.raises(rpjrt.InvalidArgumentError, match="cannot be donated"):
        donate(x, donate=[0])
    assert not x.is_deleted()
    del held
    gc.collect()
    donate(x, donate=[0])
    assert x.is_deleted()
    del v1, v2
    gc.collect()
    b.delete()
    assert b.is_deleted()


def test_dlpack_legacy_and_versioned_capsules(client: rpjrt.Client) -> None:
    b = client.put(np.arange(3, dtype=np.int16))
    legacy = b.__dlpack__()
    versioned = b.__dlpack__(max_version=(1, 0))
    assert "dltensor" in repr(legacy) and "dltensor_versioned" in repr(versioned)
    del legacy, versioned  # unconsumed capsules free themselves
    gc.collect()
    b.delete()


def test_dlpack_copy_and_device_arguments(client: rpjrt.Client) -> None:
    b = client.put(np.arange(4, dtype=np.float32))
    c = np.from_dlpack(b, copy=True)
    np.testing.assert_array_equal(c, [0, 1, 2, 3])
    # The copy is the consumer's own: writable, and writing it leaves the buffer alone.
    assert c.flags.writeable
    c[0] = 7
    np.testing.assert_array_equal(b.to_numpy(), [0, 1, 2, 3])
    assert not np.from_dlpack(b).flags.writeable
    with pytest.raises(rpjrt.UnsupportedError):
        b.__dlpack__(dl_device=(2, 0))


def test_from_dlpack_numpy_zero_copy(client: rpjrt.Client) -> None:
    a = aligned(12).reshape(3, 4)
    a[:] = np.arange(12).reshape(3, 4)
    b = rpjrt.from_dlpack(a, client=client)
    assert b.shape == (3, 4) and b.dtype == rpjrt.float32
    assert np.from_dlpack(b).ctypes.data == a.ctypes.data
    copied = client.from_dlpack(a, copy=True)
    assert np.from_dlpack(copied).ctypes.data != a.ctypes.data
    t = client.from_dlpack(a.T)  # strided producer: copied
    np.testing.assert_array_equal(t.to_numpy(), a.T)
    with pytest.raises(rpjrt.InvalidArgumentError, match="DLPack producer"):
        client.from_dlpack(object())


def test_from_dlpack_jax(client: rpjrt.Client) -> None:
    import jax.numpy as jnp

    x = jnp.arange(5, dtype=jnp.int32)
    b = client.put(x)  # a DLPack producer without the buffer protocol
    assert b.tolist() == [0, 1, 2, 3, 4]
    back = jnp.from_dlpack(client.put(np.arange(3, dtype=np.float32)))
    assert back.tolist() == [0.0, 1.0, 2.0]


def test_array_protocol(client: rpjrt.Client) -> None:
    b = client.put(np.arange(3, dtype=np.int32))
    assert np.asarray(b, dtype=np.float64).dtype == np.float64
    with pytest.raises(ValueError, match="from_dlpack"):
        np.asarray(b, copy=False)


def test_bad_objects(client: rpjrt.Client) -> None:
    with pytest.raises(rpjrt.InvalidArgumentError, match="neither the buffer protocol"):
        client.put(object())
    with pytest.raises(rpjrt.InvalidArgumentError):
        client.put("text")
    with pytest.raises(rpjrt.InvalidArgumentError):
        client.put(None)
    with pytest.raises(rpjrt.InvalidArgumentError, match="device must be"):
        client.put(np.ones(1), device="cpu:0")  # type: ignore[arg-type]


def test_a_large_staged_put_is_consumed_by_a_donation(client: rpjrt.Client) -> None:
    # A put this large goes through rpjrt's staging pool, which the plugin reads in place.
    # Donating one was refused, so a training loop that donates its parameters broke once
    # they reached 4 MiB. Nobody but rpjrt reaches that memory, so the donation consumes
    # the buffer (the outputs get memory of their own). Memory the caller shares (copy=False,
    # DLPack) stays refused: the plugin reads it until the execution ends.
    prog = """func.func public @main(%x: tensor<1048576xf32>) -> tensor<1048576xf32> {
  %0 = stablehlo.add %x, %x : tensor<1048576xf32>
  return %0 : tensor<1048576xf32>
}"""
    exe = client.compile(prog)
    host = np.ones(1 << 20, np.float32)
    b = client.put(host)
    for _ in range(3):
        old = b
        (b,) = exe(b, donate=[0])
        assert old.is_deleted()
    np.testing.assert_array_equal(b.to_numpy()[:4], [8, 8, 8, 8])
    raw = np.empty((1 << 22) + 64, np.uint8)
    start = (-raw.ctypes.data) % 64
    aligned = raw[start : start + (1 << 22)].view(np.float32)
    aligned[:] = 1
    shared = client.put(aligned, copy=False)
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"caller shares.*buf\.copy\(\)"):
        exe(shared, donate=[0])
    assert not shared.is_deleted()
    b = client.put(host)
    c = b.copy()
    (y,) = exe(c, donate=[0])
    assert c.is_deleted() and not b.is_deleted()
    np.testing.assert_array_equal(y.to_numpy()[:4], [2, 2, 2, 2])
