"""Regressions of the second outside attack on the newer half of the package (custom calls,
checkpoints, transfers), on both plugins. Each failed silently or crashed before its fix."""

from __future__ import annotations

import itertools
import os
import struct
from pathlib import Path

import numpy as np
import pytest

import rpjrt
import rpjrt.ffi

from .test_attack_regressions import run_case

_ids = itertools.count()


# -- custom calls whose buffers are not row-major -----------------------------------------


def _layout_program(target: str, operand: str, result: str) -> str:
    layouts = ""
    if operand:  # StableHLO wants both or neither
        layouts = (
            f", operand_layouts = [dense<{operand}> : tensor<2xindex>],"
            f" result_layouts = [dense<{result}> : tensor<2xindex>]"
        )
    return f"""func.func public @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {{
  %0 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32{layouts}}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}}
"""


def test_custom_call_layouts_other_than_row_major_are_refused(client: rpjrt.Client) -> None:
    """A column-major operand reached the handler as a row-major view ([[0, 3, 1], [4, 2, 5]]
    for [[0, 1, 2], [3, 4, 5]]) and a column-major result was filled in the wrong order:
    silent wrong answers. A custom call served by rpjrt's handlers must be row-major."""
    target = f"py_layout_{next(_ids)}"
    calls: list[object] = []

    @rpjrt.ffi.handler(client, target)
    def copy(call: rpjrt.ffi.FfiCall) -> object:
        calls.append(call.args[0].to_numpy().tolist())
        return call.args[0].to_numpy()

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for operand, result, what in (("[0, 1]", "[1, 0]", "operand 0"), ("[1, 0]", "[0, 1]", "result 0")):
        with pytest.raises(rpjrt.InvalidArgumentError, match=rf'custom call to "{target}" lays out its {what} as \[0, 1\]'):
            client.compile(_layout_program(target, operand, result))
    assert calls == []
    # Row-major spelt out, or left to the compiler, runs and is right.
    for operand, result in (("[1, 0]", "[1, 0]"), ("", "")):
        (y,) = client.compile(_layout_program(target, operand, result))(x)
        np.testing.assert_array_equal(y.to_numpy(), x)
    assert calls == [x.tolist(), x.tolist()]


# -- checkpoints whose zip headers disagree -----------------------------------------------


def _central_directory_name_offset(raw: bytes, member: bytes) -> int:
    """Where the central directory entry of `member` stores its name."""
    at = raw.rindex(b"PK\x01\x02")
    while True:
        at = raw.rindex(b"PK\x01\x02", 0, at + 1)
        (n,) = struct.unpack_from("<H", raw, at + 28)
        if raw[at + 46 : at + 46 + n] == member:
            return at + 46
        at -= 1


@pytest.mark.parametrize("where", ["central directory", "local header"])
def test_checkpoint_member_named_differently_in_its_two_headers_is_refused(
    client: rpjrt.Client, tmp_path: Path, where: str
) -> None:
    """One damaged byte in a member's name restored the array into another, new slot and
    left the slot of its real name as it was (numpy refuses such a file)."""
    source = rpjrt.Session(client)
    source.bind("w", np.arange(4, dtype=np.float32))
    source.bind("b", np.full(3, 7, np.int32))
    path = tmp_path / "ckpt.npz"
    source.save(path)
    raw = bytearray(path.read_bytes())
    at = _central_directory_name_offset(bytes(raw), b"b.npy") if where == "central directory" else raw.index(b"b.npy")
    raw[at] = ord("c")
    path.write_bytes(bytes(raw))

    session = rpjrt.Session(client)
    session.bind("b", np.zeros(3, np.int32))
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"ckpt.npz: member \"[bc]\": damaged .npz archive .*header inconsistency"):
        session.restore(path)
    assert list(session) == ["b"]
    np.testing.assert_array_equal(session.fetch("b"), np.zeros(3, np.int32))


# -- DLPack producers that lie ------------------------------------------------------------


def test_dlpack_producer_claiming_huge_ndim_is_refused_before_reading_its_shape(plugin_path: str) -> None:
    """A producer whose tensor claimed 2**30 dimensions had 8 GiB of 'shape' read from its
    one-entry array: a segfault. The dimension count is bounded before anything is read."""
    r = run_case(
        plugin_path,
        r"""
import ctypes
class Device(ctypes.Structure): _fields_ = [("type", ctypes.c_int32), ("id", ctypes.c_int32)]
class DType(ctypes.Structure): _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]
class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", Device), ("ndim", ctypes.c_int32), ("dtype", DType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]
class Managed(ctypes.Structure): pass
Deleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(Managed))
Managed._fields_ = [("dl_tensor", Tensor), ("manager_ctx", ctypes.c_void_p), ("deleter", Deleter)]
deleted = []
deleter = Deleter(lambda p: deleted.append(1))
new_capsule = ctypes.pythonapi.PyCapsule_New
new_capsule.restype, new_capsule.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
data, shape, keep = np.arange(16, dtype=np.float32), (ctypes.c_int64 * 1)(16), []

class Liar:
    def __init__(self, ndim): self.ndim = ndim
    def __dlpack_device__(self): return (1, 0)
    def __dlpack__(self, **kw):
        m = Managed()
        m.dl_tensor.data, m.dl_tensor.device, m.dl_tensor.ndim = data.ctypes.data, Device(1, 0), self.ndim
        m.dl_tensor.dtype, m.dl_tensor.shape, m.deleter = DType(2, 32, 1), ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)), deleter
        keep.append(m)
        return new_capsule(ctypes.addressof(m), b"dltensor", None)

c = rpjrt.Client(plugin)
for ndim in (1 << 30, 65):
    expect(rpjrt.UnsupportedError, f"claims {ndim} dimensions; rpjrt reads at most 64", c.put, Liar(ndim))
assert deleted == [1, 1], deleted
np.testing.assert_array_equal(c.put(Liar(1)).to_numpy(), data)
print("ok")
""",
    )
    assert r.stdout.strip().splitlines()[-1] == "ok", r.stdout


# -- paths as bytes, and sizes, where a checkpoint or a cache takes them ------------------


def test_checkpoint_and_cache_paths_take_bytes_and_name_a_wrong_type(
    client: rpjrt.Client, plugin_path: str, tmp_path: Path
) -> None:
    """A bytes path (any file name Linux allows, not only UTF-8) was refused with "'bytes'
    object is not an instance of 'str'" by Session.save/restore and Cache, and as "not a
    directory path" by Client(cache_dir=...); a negative max_bytes raised OverflowError
    about C types."""
    session = rpjrt.Session(client)
    session.bind("w", np.arange(3, dtype=np.float32))
    raw_name = bytes(tmp_path) + b"/ckpt-\xff.npz"
    session.save(raw_name)
    restored = rpjrt.Session(client)
    restored.restore(raw_name)
    np.testing.assert_array_equal(restored.fetch("w"), np.arange(3, dtype=np.float32))
    with pytest.raises(TypeError, match="the checkpoint path must be a path .* not int"):
        session.save(3)  # type: ignore[arg-type]

    cache_dir = bytes(tmp_path) + b"/cache-\xfe"
    assert rpjrt.Cache(cache_dir).dir == str(tmp_path / "cache-\udcfe")
    assert os.path.isdir(cache_dir)
    cached = rpjrt.Client(plugin_path, cache_dir=cache_dir)
    assert cached.cache is not None and cached.cache.dir == str(tmp_path / "cache-\udcfe")
    cached.close()
    with pytest.raises(TypeError, match=r"cache \(an rpjrt.Cache or a directory path\) must be a path .* not int"):
        rpjrt.Client(plugin_path, cache_dir=5)  # type: ignore[arg-type]
    for bad, words in ((-1, "not -1"), (2**70, "out of range for max_bytes"), (1.5, "max_bytes must be an int")):
        with pytest.raises(rpjrt.InvalidArgumentError, match=words):
            rpjrt.Cache(tmp_path / "c", max_bytes=bad)  # type: ignore[arg-type]


# -- sharding: arrays put() takes, and mesh sizes -----------------------------------------


def test_sharding_takes_what_put_takes_and_names_a_negative_mesh_size() -> None:
    """split/assemble refused a big-endian array as "not a dtype rpjrt knows" (put converts
    it), and a negative mesh size raised OverflowError about C types."""
    import ml_dtypes

    import rpjrt.sharding as sh

    mesh = sh.Mesh({"x": 2, "y": 2}, devices=[0, 1, 2, 3])
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    for src in (a.astype(">f4"), a[::-1, ::-1].copy()[::-1, ::-1]):
        shards = sh.split(src, mesh, ("x", "y"))
        assert all(s.dtype == np.float32 for s in shards)
        np.testing.assert_array_equal(sh.assemble(shards, mesh, ("x", "y"), (4, 6)), a)
    swapped = [s.astype(">f4") for s in sh.split(a, mesh, ("x", "y"))]
    np.testing.assert_array_equal(sh.assemble(swapped, mesh, ("x", "y"), (4, 6)), a)
    b = a.astype(ml_dtypes.bfloat16)
    shards = sh.split(b, mesh, ("x", None))
    assert shards[0].dtype == ml_dtypes.bfloat16
    back = sh.assemble(shards, mesh, ("x", None), (4, 6))
    assert back.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(back.astype(np.float32), a)
    with pytest.raises(rpjrt.InvalidArgumentError, match="no PJRT equivalent"):
        sh.split(np.array(["a", "b"]), mesh, ("x",))
    with pytest.raises(rpjrt.InvalidArgumentError, match="mesh axis 0 must have a name and a size of at least 1"):
        sh.Mesh({"x": -2, "y": -2}, devices=[0, 1, 2, 3])


# -- shapes XLA cannot hold, at the Layouts extension and uninitialized buffers -----------


def test_shapes_no_xla_array_can_hold_are_refused_before_the_plugin(plugin_path: str) -> None:
    """default_layout with a negative or overflowing shape aborted the process: the plugin
    threw a C++ exception through an extension entry that bypassed the exception guard.
    Such shapes are refused first (one rule: more than 2**63 - 1 bytes, or a negative
    dimension), and the extension entries now run inside the guard."""
    r = run_case(
        plugin_path,
        r"""
import rpjrt.transfer as T
c = rpjrt.Client(plugin)
for shape, words in (((-5, 3), "dimension 0 is negative (-5)"),
                     ((2**62, 2**62), "has too many elements"),
                     ((2**61,), "float32[2305843009213693952] is more than 2**63 - 1 bytes"),
                     ((2**63 - 1,), "is more than 2**63 - 1 bytes")):
    expect(rpjrt.InvalidArgumentError, words, T.default_layout, c, "float32", shape)
    expect(rpjrt.InvalidArgumentError, words, T.uninitialized, c, "float32", shape)
assert T.default_layout(c, "float32", (2**40,)).minor_to_major == (0,)
print("ok")
""",
    )
    assert r.stdout.strip().splitlines()[-1] == "ok", r.stdout
