"""Round 28 probe findings on sharding, meshes and transfers (r28-shard).

1. split/assemble allocate fallibly: memory running out is ResourceExhaustedError naming
   the size, never an abort.
2. run_sharded checks host arguments against the program's global shapes and refuses an
   uneven (padded) sharding of an argument or result: no padded or cut array comes back.
3. put(x, memory=...) lands in that memory for every source, DLPack producers and Buffers
   of another client included.
4. A program with no outputs reports no output shardings, and run_sharded's input-spec check
   does not depend on the output count.
5. Numeric parameters of the sharding/transfer API are range-checked by name; bools are
   refused.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest

import rpjrt
from rpjrt import sharding as sh
from rpjrt import transfer

# --- 1. fallible host allocations in split / assemble ------------------------------------

_OOM_CHILD = textwrap.dedent(
    r"""
    import resource, sys
    import numpy as np
    import rpjrt
    from rpjrt import sharding as sh
    vm = [int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmSize")][0]
    what = sys.argv[1]
    mesh = sh.Mesh({"x": 8}, list(range(8)))
    a = np.ones(64 << 20, np.uint8)
    # Room for a few shards, not for eight (split) or the 512 MiB whole (assemble).
    resource.setrlimit(resource.RLIMIT_AS, (vm + (64 << 20) + (160 << 20), resource.RLIM_INFINITY))
    try:
        if what == "split":
            sh.split(a, mesh, None)
        else:
            sh.assemble([a] * 8, mesh, ("x",), (8 * a.size,))
        print("NO ERROR")
    except rpjrt.ResourceExhaustedError as e:
        assert isinstance(e, MemoryError)
        print("EXHAUSTED", e)
    """
)


@pytest.mark.parametrize("what", ["split", "assemble"])
def test_split_and_assemble_out_of_memory_raise_not_abort(what: str) -> None:
    p = subprocess.run(
        [sys.executable, "-c", _OOM_CHILD, what], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    assert "EXHAUSTED" in p.stdout, p.stdout + p.stderr[-2000:]
    assert "bytes" in p.stdout, p.stdout


def test_split_and_assemble_still_round_trip_every_form() -> None:
    import ml_dtypes

    mesh = sh.Mesh({"x": 2, "y": 3}, [5, 0, 1, 2, 3, 4])
    cases: list[tuple[Any, Any]] = [
        (np.arange(24, dtype=np.float32).reshape(4, 6), ("x", "y")),
        (np.arange(24, dtype=np.float32).reshape(6, 4).T, ("x", None)),  # not contiguous
        (np.arange(12).astype(ml_dtypes.bfloat16).reshape(2, 6), (None, "y")),
        (np.array([1, -2, 3, -4, 5, -6], dtype=ml_dtypes.int4), (("x", "y"),)),
        (np.array([True, False] * 6).reshape(6, 2), ("y",)),
        (np.zeros((0, 6), np.int8), (None, ("y",))),
        (np.float64(3.5), None),
    ]
    for a, spec in cases:
        shards = sh.split(a, mesh, spec)
        back = sh.assemble(shards, mesh, spec, np.shape(a))
        np.testing.assert_array_equal(back, a)
        assert back.dtype == np.asarray(a).dtype
        back[...] = back  # writable, as before (a bytearray underneath, not a copy)


# --- 2. global shapes and uneven shardings -----------------------------------------------

IN_UNEVEN = """func.func @main(%a: tensor<3x4xf32> {mhlo.sharding = "{devices=[2,1]<=[2]}"})
    -> (tensor<4xf32> {mhlo.sharding = "{replicated}"}) {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%a init: %z) applies stablehlo.add across dimensions = [0] : (tensor<3x4xf32>, tensor<f32>) -> tensor<4xf32>
  return %s : tensor<4xf32>
}"""

OUT_UNEVEN = """func.func @main(%a: tensor<3x4xf32> {mhlo.sharding = "{replicated}"})
    -> (tensor<3x4xf32> {mhlo.sharding = "{devices=[2,1]<=[2]}"}) {
  %two = stablehlo.constant dense<2.0> : tensor<3x4xf32>
  %0 = stablehlo.multiply %a, %two : tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}"""

EVEN = """func.func @main(%a: tensor<4x4xf32> {mhlo.sharding = "{devices=[2,1]<=[2]}"})
    -> (tensor<4xf32> {mhlo.sharding = "{replicated}"}) {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%a init: %z) applies stablehlo.add across dimensions = [0] : (tensor<4x4xf32>, tensor<f32>) -> tensor<4xf32>
  return %s : tensor<4xf32>
}"""


def _mesh_of(exe: rpjrt.Executable) -> sh.Mesh:
    return sh.Mesh({"x": 2}, [d.id for d in exe.addressable_devices()])


def test_uneven_parameter_sharding_refuses_a_wrong_global_shape(client: rpjrt.Client) -> None:
    exe = client.compile(IN_UNEVEN, num_partitions=2)
    mesh = _mesh_of(exe)
    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"shape \(4, 4\).*parameter 0 is \(3, 4\)"):
        sh.run_sharded(exe, [a], mesh, [("x",)], [None])
    # The program's own shape does not split evenly: refused, naming the spec.
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"in_specs\[0\].*unevenly.*size 3 into 2"):
        sh.run_sharded(exe, [a[:3]], mesh, [("x",)], [None])


def test_uneven_result_sharding_is_refused_never_padded(client: rpjrt.Client) -> None:
    exe = client.compile(OUT_UNEVEN, num_partitions=2)
    mesh = _mesh_of(exe)
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"out_specs\[0\].*unevenly.*size 3 into 2"):
        sh.run_sharded(exe, [a], mesh, [None], [("x",)])


def test_even_sharding_still_runs_and_the_signature_is_read(client: rpjrt.Client) -> None:
    exe = client.compile(EVEN, num_partitions=2)
    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    (got,) = sh.run_sharded(exe, [a], _mesh_of(exe), [("x",)], [None])
    np.testing.assert_array_equal(got, a.sum(0))
    assert rpjrt._rpjrt._global_signature(exe) == ([[4, 4]], [[4]])
    # A wrong global shape is refused even where its shards would fit.
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"parameter 0 is \(4, 4\)"):
        sh.run_sharded(exe, [np.zeros((4, 5), np.float32)], _mesh_of(exe), [("x",)], [None])


# --- 3. memory= on every put source ------------------------------------------------------


class _DLPackOnly:
    """A producer with only the DLPack protocol, as a torch tensor is."""

    def __init__(self, a: Any) -> None:
        self.a = a

    def __dlpack__(self, **kw: Any) -> Any:
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self) -> Any:
        return self.a.__dlpack_device__()


def test_put_memory_is_honoured_for_dlpack_sources(client: rpjrt.Client, plugin_path: str) -> None:
    other = rpjrt.Client(plugin_path)
    try:
        a = np.arange(12, dtype=np.float32).reshape(3, 4)
        sources = {"other-client Buffer": other.put(a), "DLPack-only": _DLPackOnly(a)}
        for label, src in sources.items():
            for kind in ["pinned_host", "unpinned_host", "device"]:
                for mem in [kind, client.device(1).memory(kind)]:
                    b = client.put(src, memory=mem)
                    assert b.memory.kind == kind, (label, mem, b.memory)
                    np.testing.assert_array_equal(b.to_numpy(), a)
            # copy=True as well, and a same-client Buffer re-placed through DLPack import.
            b = client.put(src, memory="pinned_host", copy=True)
            assert b.memory.kind == "pinned_host"
        own = client.put(a)
        moved = client.put(own, memory="pinned_host")
        assert moved.memory.kind == "pinned_host"
        np.testing.assert_array_equal(moved.to_numpy(), a)
    finally:
        other.close()


# --- 4. no outputs, no output shardings ----------------------------------------------------

_S = '"{devices=[2,1,2]<=[4] last_tile_dim_replicate}"'
NO_OUT = f"""func.func @main(%a: tensor<8x4xf32> {{mhlo.sharding = {_S}}}) -> () {{
  return
}}"""


def test_no_outputs_no_output_shardings_and_inputs_still_checked(client: rpjrt.Client) -> None:
    exe = client.compile(NO_OUT, num_partitions=4)
    assert exe.num_outputs == 0
    assert exe.output_shardings() == []
    mesh = sh.Mesh({"x": 2, "y": 2}, [d.id for d in exe.addressable_devices()])
    a = np.arange(32, dtype=np.float32).reshape(8, 4)
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"in_specs\[0\]"):
        sh.run_sharded(exe, [a], mesh, [("y", None)], [])
    assert sh.run_sharded(exe, [a], mesh, [("x", None)], []) == []


# --- 5. numeric parameters -----------------------------------------------------------------


def test_numeric_parameters_are_named_and_range_checked(client: rpjrt.Client) -> None:
    a = np.arange(8, dtype=np.float32)
    invalid = [
        (lambda: sh.Mesh({"x": 2**63}, [0]), "axis .x. has size 9223372036854775808"),
        (lambda: sh.Mesh({"x": -1}, [0]), "mesh axis 0 .*axis .x. has size -1"),
        (lambda: transfer.put_streaming(client, a, chunk_bytes=-1), "chunk_bytes is -1"),
        (lambda: transfer.put_streaming(client, a, chunk_bytes=0), "chunk_bytes is 0"),
        (lambda: transfer.put_streaming(client, a, chunk_bytes=2**64), "chunk_bytes is 18446744073709551616"),
        (lambda: transfer.put_streaming(client, a, progress_threshold=-1), "progress_threshold"),
        (lambda: transfer.read_raw(client.put(a), -1, 4), "offset is -1"),
        (lambda: transfer.read_raw(client.put(a), 0, 2**64), "size is"),
        (lambda: transfer.uninitialized(client, "float32", [2**64]), r"shape\[0\]"),
        (lambda: sh.assemble([a, a], sh.Mesh({"x": 2}, [0, 1]), None, [2**64]), r"shape\[0\]"),
        (lambda: rpjrt._rpjrt._put_streaming(client, lambda o, n: b"", "float32", [1], chunk_bytes=-5), "chunk_bytes"),
    ]
    for f, pattern in invalid:
        with pytest.raises(rpjrt.InvalidArgumentError, match=pattern):
            f()
    for f in [
        lambda: transfer.put_streaming(client, a, chunk_bytes=True),
        lambda: transfer.put_streaming(client, a, progress_threshold=False),
        lambda: transfer.put_streaming(client, a, chunk_bytes=4.0),
        lambda: rpjrt._rpjrt._put_streaming(client, lambda o, n: b"", "float32", [1], chunk_bytes=True),
        lambda: sh.Mesh({"x": True}, [0]),
        lambda: sh.assemble([a, a], sh.Mesh({"x": 2}, [0, 1]), None, [True]),
    ]:
        with pytest.raises(TypeError, match="bool|integer"):
            f()
    # numpy integers are integers.
    b = transfer.put_streaming(client, a, chunk_bytes=np.int64(8), progress_threshold=np.uint8(0))
    np.testing.assert_array_equal(b.to_numpy(), a)

