"""Round 17 of outside checks: data going in, artifacts and files that are not plugins.

- An array object (jax, or anything with ``__array__``/``__dlpack__``) given with ``dtype=``
  converts by value, as a numpy array does; only plain buffers (bytes, memoryview,
  array.array) are raw bytes that ``dtype=`` reinterprets.
- A numpy masked array is refused wherever host data goes in: its buffer is the data
  without the mask, so the hidden values would be computed with.
- A client's topology refuses work once the client is closed; a deleted alias is not
  fulfilled (which would consume the target for nothing).
- A file given as a plugin that is an artifact, a program or a wheel says what it is.
- An artifact records the plugin build it was compiled by.
"""

from __future__ import annotations

import array
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rpjrt
from rpjrt.sharding import Mesh, split

ID8 = """func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}"""


class _ArrayLike:
    """A minimal foreign array: the buffer protocol of int8 data (as jax's CPU arrays
    export) and ``__array__``."""

    def __init__(self, a: Any) -> None:
        self._a = np.ascontiguousarray(a)

    def __buffer__(self, flags: int) -> memoryview:
        return memoryview(self._a)

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        return self._a if dtype is None else self._a.astype(dtype)


def test_a_foreign_int8_array_with_dtype_converts_by_value(client: rpjrt.Client) -> None:
    jnp = pytest.importorskip("jax.numpy")
    a = np.arange(1, 9, dtype=np.int8).reshape(1, 8)
    for obj in (jnp.asarray(a), _ArrayLike(a)):
        for dtype in (np.float64, np.int32, np.float32):
            b = client.put(obj, dtype=dtype)
            assert b.shape == (1, 8), (type(obj), dtype)
            np.testing.assert_array_equal(b.to_numpy(), a.astype(dtype))
    # Values the wanted type cannot hold are refused, as for numpy arrays.
    u = np.array([0, 2, 1, 255], dtype=np.uint8)
    for obj in (jnp.asarray(u), _ArrayLike(u), u):
        with pytest.raises(rpjrt.InvalidArgumentError, match="int8"):
            client.put(obj, dtype=np.int8)
    # Plain buffers keep their documented meaning: raw bytes reinterpreted.
    raw = np.arange(4, dtype=np.float32).tobytes()
    for obj in (raw, bytearray(raw), memoryview(raw), array.array("b", raw)):
        np.testing.assert_array_equal(
            client.put(obj, dtype=np.float32).to_numpy(), np.arange(4, dtype=np.float32)
        )


def test_masked_arrays_are_refused_wherever_data_goes_in(client: rpjrt.Client) -> None:
    m = np.ma.masked_array(np.arange(8, dtype=np.float32), mask=[0, 1] * 4, fill_value=-999)
    exe = client.compile(ID8)
    for what, call in [
        ("put", lambda: client.put(m)),
        ("put dtype=", lambda: client.put(m, dtype=np.float64)),
        ("argument", lambda: exe(m)),
        ("split", lambda: split(m, Mesh({"x": 2}, [0, 1]), ["x"])),
    ]:
        with pytest.raises(rpjrt.InvalidArgumentError, match="masked array") as e:
            call()
        assert "filled" in str(e.value), what
    # Its filled array goes in, and so does an ordinary array after numpy.ma is loaded.
    np.testing.assert_array_equal(exe(m.filled(0))[0].to_numpy(), m.filled(0))
    x = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(exe(x)[0].to_numpy(), x)
    np.testing.assert_array_equal(client.put(x[::-1]).to_numpy(), x[::-1])


def test_a_closed_clients_topology_refuses_work(plugin_path: str) -> None:
    c = rpjrt.Client(plugin_path)
    t = c.topology()
    c.close()
    with pytest.raises(rpjrt.ClientClosedError):
        t.compile(ID8)
    with pytest.raises(rpjrt.ClientClosedError):
        t.serialize()


def test_a_deleted_alias_is_not_fulfilled(client: rpjrt.Client) -> None:
    alias, fulfiller = client.create_alias_buffer(np.float32, (8,))
    alias.delete()
    src = client.put(np.arange(8, dtype=np.float32))
    with pytest.raises(rpjrt.BufferDeletedError, match="alias buffer was deleted"):
        fulfiller.fulfill(src)
    # The target was not consumed.
    np.testing.assert_array_equal(src.to_numpy(), np.arange(8, dtype=np.float32))


def test_files_that_are_not_plugins_say_what_they_are(client: rpjrt.Client, tmp_path: Path) -> None:
    art = tmp_path / "model.rpjrt"
    art.write_bytes(client.compile(ID8).serialize())
    prog = tmp_path / "model.so"
    prog.write_text(ID8)
    wheel = tmp_path / "plugin.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("x.txt", "x")
    for path, says in [(art, "rpjrt artifact"), (prog, "program text"), (wheel, "zip archive")]:
        with pytest.raises(rpjrt.Error) as e:
            rpjrt.Client(str(path))
        assert says in str(e.value), str(e.value)


def test_an_artifact_records_the_plugin_build(client: rpjrt.Client) -> None:
    info = rpjrt.inspect_artifact(client.compile(ID8).serialize())
    build = info["target"]["plugin_build"] if "target" in info else info["plugin_build"]
    assert isinstance(build, str) and len(build) == 16
    int(build, 16)
    assert client.artifact_target()["plugin_build"] == build


@pytest.mark.parametrize("value", [" 1", "1 ", "1\n"])
def test_launcher_numbers_with_spaces_are_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    from rpjrt import distributed

    for k in list(os.environ):
        if k.startswith(("RPJRT_", "OMPI_", "PMI_", "SLURM_")) or k in ("RANK", "WORLD_SIZE"):
            monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("RPJRT_PROCESS_ID", value)
    monkeypatch.setenv("RPJRT_NUM_PROCESSES", "2")
    monkeypatch.setenv("RPJRT_COORDINATOR", "127.0.0.1:1234")
    with pytest.raises(rpjrt.InvalidArgumentError, match="RPJRT_PROCESS_ID"):
        distributed.detect()
    monkeypatch.setenv("RPJRT_PROCESS_ID", "1")
    assert distributed.detect().process_id == 1


@pytest.mark.parametrize("fn", ["cholesky", "eigh", "qr"])
def test_jax_exported_linalg_bytecode_passes_the_index_screen(client: rpjrt.Client, fn: str) -> None:
    """jax writes index-typed operand layouts on its LAPACK custom calls; only an integer
    attribute of type index (what crashes the compiler) is refused in bytecode."""
    jax = pytest.importorskip("jax")
    from jax import export

    import rpjrt.ffi

    a = np.array([[4.0, 1.0], [1.0, 3.0]], np.float32)
    f = getattr(jax.numpy.linalg, fn)
    exported = export.export(jax.jit(f))(a).mlir_module_serialized
    try:
        rpjrt.ffi.register_jaxlib_cpu_targets(client)
    except rpjrt.FailedPreconditionError as e:
        # The 0.81 plugin's FFI runtime predates jaxlib's handlers: the program reaches
        # the plugin (which lacks the handler), it is not refused by the screen.
        assert "FFI runtime" in str(e)
        with pytest.raises(rpjrt.Error) as refused:
            client.compile(exported)
        assert "type index" not in str(refused.value), str(refused.value)
        return
    got = client.compile(exported)(a)
    want = jax.tree_util.tree_leaves(jax.jit(f)(a))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.abs(g.to_numpy()), np.abs(np.asarray(w)), rtol=1e-5, atol=1e-5)


def test_a_jax_array_dlpack_cannot_export_goes_in_through_its_array(client: rpjrt.Client) -> None:
    """jax raises its own error (not BufferError) from __dlpack__ for int4; the array
    still goes in through __array__, with and without dtype=, and as an argument."""
    jnp = pytest.importorskip("jax.numpy")
    ml_dtypes = pytest.importorskip("ml_dtypes")
    want = np.array([1, -2, 3, 0], dtype=ml_dtypes.int4)
    j = jnp.asarray(want)
    for b in (client.put(j), client.put(j, dtype="int4")):
        assert b.dtype == rpjrt.dtype("int4")
        np.testing.assert_array_equal(b.to_numpy().astype(np.int8), want.astype(np.int8))


def test_a_masked_array_without_a_buffer_is_refused_as_masked(client: rpjrt.Client) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    m = np.ma.masked_array(np.arange(4).astype(ml_dtypes.bfloat16), mask=[0, 1, 0, 0])
    with pytest.raises(rpjrt.InvalidArgumentError, match="masked array"):
        client.put(m)


def test_a_jax_float4_array_goes_in_without_dtype(client: rpjrt.Client) -> None:
    """jax exports float4 through DLPack as packed data, which rpjrt's DLPack import does
    not unpack: the array goes in through __array__ instead, as with dtype=."""
    jnp = pytest.importorskip("jax.numpy")
    ml_dtypes = pytest.importorskip("ml_dtypes")
    want = np.array([1.5, 2.0, -0.5, 6.0], dtype=ml_dtypes.float4_e2m1fn)
    b = client.put(jnp.asarray(want))
    assert b.dtype == rpjrt.dtype("float4_e2m1fn")
    np.testing.assert_array_equal(b.to_numpy().astype(np.float32), want.astype(np.float32))
