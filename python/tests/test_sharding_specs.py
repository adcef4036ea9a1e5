"""run_sharded checks each partition spec against the sharding the program was compiled with.

A spec the program was not lowered with can give every shard the right shape and still hand
partition k another partition's block: the result was a wrong array with no error. Where
the plugin reports the executable's shardings, a mismatch is refused before anything runs.
"""

from __future__ import annotations

import numpy as np
import pytest

import rpjrt
from rpjrt import sharding as sh

# x * 2 over an 8 x 4 array: rows split along the first axis of a 2 x 2 mesh, replicated
# along the second, for the argument and the result.
ROWS_OVER_X = """func.func @main(%a: tensor<8x4xf32> {mhlo.sharding = "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"})
    -> (tensor<8x4xf32> {mhlo.sharding = "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"}) {
  %two = stablehlo.constant dense<2.0> : tensor<8x4xf32>
  %0 = stablehlo.multiply %a, %two : tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}"""

# Rows over y, columns over x (a transposed iota), and a replicated scalar output.
ROWS_Y_COLS_X = """func.func @main(%a: tensor<4x4xf32> {mhlo.sharding = "{devices=[2,2]<=[2,2]T(1,0)}"})
    -> (tensor<4x4xf32> {mhlo.sharding = "{devices=[2,2]<=[2,2]T(1,0)}"},
        tensor<f32> {mhlo.sharding = "{replicated}"}) {
  %one = stablehlo.constant dense<1.0> : tensor<4x4xf32>
  %0 = stablehlo.add %a, %one : tensor<4x4xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%a init: %z) applies stablehlo.add across dimensions = [0, 1] : (tensor<4x4xf32>, tensor<f32>) -> tensor<f32>
  return %0, %s : tensor<4x4xf32>, tensor<f32>
}"""

# The whole result on partition 2 alone.
ON_PARTITION_2 = """func.func @main(%a: tensor<4xf32> {mhlo.sharding = "{replicated}"})
    -> (tensor<4xf32> {mhlo.sharding = "{maximal device=2}"}) {
  %0 = stablehlo.negate %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}"""


def _compile(client: rpjrt.Client, text: str) -> rpjrt.Executable:
    exe = client.compile(text, num_partitions=4)
    try:
        exe.parameter_shardings()
    except rpjrt.UnsupportedError:
        pytest.fail(f"{client!r} reports no shardings")
    return exe


def _mesh(exe: rpjrt.Executable) -> sh.Mesh:
    return sh.Mesh({"x": 2, "y": 2}, [d.id for d in exe.addressable_devices()])


def test_the_compiled_spec_runs_and_others_are_refused(client: rpjrt.Client) -> None:
    exe = _compile(client, ROWS_OVER_X)
    mesh = _mesh(exe)
    a = np.arange(32, dtype=np.float32).reshape(8, 4)
    (got,) = sh.run_sharded(exe, [a], mesh, [("x", None)], [("x",)])
    np.testing.assert_array_equal(got, a * 2)
    # Each of these returned a wrong array (exit 0) before: the shard shapes all fit.
    cases = [
        ([("y", None)], [("x", None)], r"in_specs\[0\] \('y', None\) .*mesh position 1 \(device \d+\) block \[1, 0\]"),
        ([("x", None)], [("y", None)], r"out_specs\[0\] .*mesh position 1"),
        ([("x", None)], [None], r"out_specs\[0\] None .*cuts dimension 0 into 1 block, .* into 2"),
        ([None], [("x",)], r"in_specs\[0\] None .*cuts dimension 0 into 1 block"),
        ([(("x", "y"),)], [("x",)], r"in_specs\[0\] .*into 4 blocks"),
        ([(None, "x")], [("x",)], r"dimension 0 into 1 block"),
    ]
    for ins, outs, pattern in cases:
        with pytest.raises(rpjrt.InvalidArgumentError, match=pattern):
            sh.run_sharded(exe, [a], mesh, ins, outs)


def test_specs_are_compared_by_blocks_not_by_spelling(client: rpjrt.Client) -> None:
    exe = _compile(client, ROWS_Y_COLS_X)
    mesh = _mesh(exe)
    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    full, total = sh.run_sharded(exe, [a], mesh, [("y", "x")], [("y", "x"), None])
    np.testing.assert_array_equal(full, a + 1)
    assert float(total) == float(a.sum())
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"in_specs\[0\] \('x', 'y'\)"):
        sh.run_sharded(exe, [a], mesh, [("x", "y")], [("y", "x"), None])
    # A replicated output split by its spec would have been tiled from copies.
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"out_specs\[1\]"):
        sh.run_sharded(exe, [a], mesh, [("y", "x")], [("y", "x"), ("x",)])
    # The spec's rank is the value's: a scalar spec with an entry is refused by the core.
    with pytest.raises(rpjrt.InvalidArgumentError, match="1 entries, but the value has 0"):
        sh.run_sharded(exe, [a], mesh, [("y", "x")], [("y", "x"), (None,)])


def test_a_maximal_output_comes_from_the_partition_that_holds_it(client: rpjrt.Client) -> None:
    exe = _compile(client, ON_PARTITION_2)
    (s,) = exe.output_shardings()
    if s.type != "maximal":
        pytest.fail(f"the plugin compiled the output as {s}, not as a maximal sharding")
    mesh = _mesh(exe)
    a = np.arange(4, dtype=np.float32)
    (got,) = sh.run_sharded(exe, [a], mesh, [None], [None])
    np.testing.assert_array_equal(got, -a)
    with pytest.raises(rpjrt.InvalidArgumentError, match="one partition"):
        sh.run_sharded(exe, [a], mesh, [None], [("x",)])
