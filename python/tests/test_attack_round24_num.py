"""Round 24 of outside checks: data movement. Aliases fulfilled with buffers over host
memory, delete() of a zero-copy buffer with work queued on it, DLPack float6, raw reads of
a buffer put with a device layout."""

from __future__ import annotations

import ctypes
import subprocess
import sys
import textwrap
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import rpjrt
import rpjrt.transfer as tr


def _aligned(n: int) -> Any:
    raw = np.empty(n * 4 + 128, np.uint8)
    off = (-raw.ctypes.data) % 64
    a = raw[off : off + n * 4].view(np.float32)
    a[:] = np.arange(n) % 7
    return a


def test_an_alias_is_not_fulfilled_with_memory_read_in_place(plugin_path: str) -> None:
    # A buffer over the caller's memory is refused (the alias would keep reading the array
    # and the buffer's release would wait for the alias for ever); one in rpjrt's staging
    # memory (a large put) is copied on the device and consumed. Run in a child, so that a
    # release that waits for ever fails the test instead of hanging it.
    child = textwrap.dedent(
        """
        import sys
        import numpy as np, rpjrt
        c = rpjrt.Client(sys.argv[1])
        n = 16
        raw = np.empty(n * 4 + 128, np.uint8); off = (-raw.ctypes.data) % 64
        a = raw[off:off + n * 4].view(np.float32); a[:] = 1.0
        for make in (lambda: c.put(a, copy=False), lambda: c.from_dlpack(a)):
            b = make()
            al, ful = c.create_alias_buffer("float32", [n])
            try:
                ful.fulfill(b)
                print("accepted")
            except rpjrt.InvalidArgumentError as e:
                assert "caller's memory in place" in str(e), e
                print("refused")
            del b
            ful.fail("CANCELLED", "test")
        big = np.arange((8 << 20) // 4, dtype=np.float32)
        b = c.put(big)
        al, ful = c.create_alias_buffer("float32", [big.size])
        ful.fulfill(b)
        assert b.is_deleted()
        del b
        assert np.array_equal(al.to_numpy(), big)
        print("staged ok")
        """
    )
    r = subprocess.run(
        [sys.executable, "-c", child, plugin_path], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["refused", "refused", "staged", "ok"], r.stdout


def test_delete_of_a_zero_copy_buffer_waits_for_the_work_queued_on_it(client: rpjrt.Client) -> None:
    n = 1 << 16
    exe = client.compile(
        f"func.func public @main(%a: tensor<{n}xf32>) -> tensor<{n}xf32> {{\n"
        f"  %0 = stablehlo.sine %a : tensor<{n}xf32>\n"
        f"  %1 = stablehlo.cosine %0 : tensor<{n}xf32>\n"
        f"  %2 = stablehlo.add %1, %a : tensor<{n}xf32>\n"
        f"  return %2 : tensor<{n}xf32>\n}}"
    )
    ref_in = (np.arange(n) % 7).astype(np.float32)
    want = exe(ref_in)[0].to_numpy()
    wrong = 0
    for _ in range(60):
        a = _aligned(n)
        b = client.put(a, copy=False)
        copied = b.copy()
        out = exe(b)[0]
        b.delete()
        a[:] = -7.0  # the caller reuses its array once delete() returned
        wrong += not np.array_equal(out.to_numpy(), want)
        wrong += not np.array_equal(copied.to_numpy(), ref_in)
    assert wrong == 0


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device_type", ctypes.c_int32),
        ("device_id", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("code", ctypes.c_uint8),
        ("bits", ctypes.c_uint8),
        ("lanes", ctypes.c_uint16),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _Versioned(ctypes.Structure):
    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _DLTensor),
    ]


_PADDED = 1 << 2


def test_dlpack_float6_says_its_elements_take_a_byte(plugin_paths_all: dict[str, str]) -> None:
    api = ctypes.pythonapi
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    api.PyCapsule_New.restype = ctypes.py_object
    api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    c = rpjrt.Client(plugin_paths_all["new"])
    vals = np.array([0.5, 1.0, -1.5, 3.0], ml_dtypes.float6_e2m3fn)
    b = c.put(vals)
    cap = b.__dlpack__(max_version=(1, 1))
    m = _Versioned.from_address(api.PyCapsule_GetPointer(cap, b"dltensor_versioned"))
    assert (m.major, m.minor) == (1, 1)
    assert m.dl_tensor.bits == 6 and m.flags & _PADDED, m.flags
    del cap, m
    # The legacy form has no flags to say so.
    with pytest.raises(rpjrt.InvalidArgumentError, match="take a byte each"):
        b.__dlpack__()
    # A producer's packed float6 (DLPack's default for types under a byte) is refused.
    storage = (ctypes.c_uint8 * 16)()
    shape = (ctypes.c_int64 * 1)(16)
    mt = _Versioned(1, 1, None, None, 0, _DLTensor(ctypes.addressof(storage), 1, 0, 1, 15, 6, 1, shape, None, 0))

    class Producer:
        def __dlpack_device__(self) -> tuple[int, int]:
            return (1, 0)

        def __dlpack__(self, **kw: Any) -> Any:
            return api.PyCapsule_New(ctypes.addressof(mt), b"dltensor_versioned", None)

    with pytest.raises(rpjrt.Error, match="elements are packed"):
        c.from_dlpack(Producer(), copy=True)
    c.close()


def test_a_raw_read_of_a_buffer_put_with_a_layout_is_refused(client: rpjrt.Client) -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = client.put(a, layout=(0, 1))
    for read in (lambda x: tr.read_raw(x, 0, x.nbytes), lambda x: tr.read_raw_async(x, 0, x.nbytes).wait()):
        for target in (b, b.copy()):
            with pytest.raises(rpjrt.InvalidArgumentError, match="non-default device layout"):
                read(target)
    # The default layout still reads its row-major bytes.
    plain = client.put(a)
    assert np.array_equal(np.frombuffer(tr.read_raw(plain, 0, plain.nbytes), np.float32), a.ravel())
