"""Round 25 of outside checks: data movement (raw reads, zero-size zero-copy puts, the
DLPack version a capsule states)."""

from __future__ import annotations

import ctypes
import resource

import ml_dtypes
import numpy as np
import pytest

import rpjrt
import rpjrt.transfer

from .test_attack_round24_num import _Versioned


def test_a_raw_read_checks_its_range_before_allocating(client: rpjrt.Client) -> None:
    # A read past the buffer's end is refused as such, before a destination of `size`
    # bytes is reserved (it used to zero-fill 1 GiB first, or name a failed allocation).
    b = client.put(np.arange(8, dtype=np.float32))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for offset, size in ((0, 2**30), (4, 2**40), (2**62, 8)):
        with pytest.raises(rpjrt.InvalidArgumentError, match="runs past the buffer's 32 bytes"):
            rpjrt.transfer.read_raw(b, offset, size)
    grew_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grew_kib < 64 * 1024, grew_kib
    assert rpjrt.transfer.read_raw(b, 4, 8) == np.arange(8, dtype=np.float32)[1:3].tobytes()


@pytest.mark.parametrize(
    "dtype", [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.int4, np.float32]
)
@pytest.mark.parametrize("shape", [(0,), (0, 3), (2**40, 0)])
def test_a_zero_size_array_is_put_without_a_copy_whatever_its_type(
    client: rpjrt.Client, dtype: object, shape: tuple[int, ...]
) -> None:
    # An empty array has no memory to share or to copy; numpy's may_share_memory says no
    # for every one, which refused copy=False for the ml_dtypes types.
    a = np.zeros(shape, dtype)
    b = client.put(a, copy=False)
    assert b.shape == shape and b.dtype == np.dtype(dtype)
    assert b.to_numpy().shape == shape


@pytest.mark.parametrize(
    "dtype,minor",
    [
        (np.float32, 0),
        (ml_dtypes.bfloat16, 0),
        (ml_dtypes.float8_e5m2, 1),
        (ml_dtypes.float8_e4m3fn, 1),
        (ml_dtypes.float4_e2m1fn, 1),
        (ml_dtypes.float6_e2m3fn, 1),
    ],
)
def test_a_dlpack_capsule_states_the_version_its_type_needs(
    client: rpjrt.Client, dtype: object, minor: int
) -> None:
    # The float8, float6 and float4 type codes came with DLPack 1.1: a capsule of one says
    # 1.1, and a consumer that reads at most 1.0 is refused (BufferError, the protocol's
    # answer) rather than handed a capsule past its version.
    api = ctypes.pythonapi
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    try:
        b = client.put(np.zeros(4, dtype))
    except rpjrt.UnsupportedError as e:
        # float6 came with PJRT 0.114; the older CPU plugin refuses it, saying so.
        assert dtype is ml_dtypes.float6_e2m3fn and "needs PJRT 0.114" in str(e)
        return
    cap = b.__dlpack__(max_version=(1, 1))
    m = _Versioned.from_address(api.PyCapsule_GetPointer(cap, b"dltensor_versioned"))
    assert (m.major, m.minor) == (1, minor)
    del m, cap
    if minor:
        with pytest.raises(BufferError, match=r"needs DLPack 1\.1"):
            b.__dlpack__(max_version=(1, 0))
    else:
        assert b.__dlpack__(max_version=(1, 0)) is not None
