"""A sharded matrix product on a 2x2 mesh of CPU devices: split the inputs, run one SPMD
program on every device, put the outputs back together.

    python sharded.py [PLUGIN]

The client is made with 4 CPU devices (`options={"cpu_device_count": 4}`). The program
carries its shardings (Shardy `sdy.sharding` attributes, as JAX writes them): `a` is split
by rows over mesh axis "x", `w` by columns over "y", the product by both, and its total is
replicated (the compiler adds the all-reduce that needs). `rpjrt.sharding` only moves data
the way the program says: `split` cuts host arrays into per-device shards, `execute_sharded`
runs them, `assemble` rebuilds global arrays from the output shards.
"""

import sys

import numpy as np

import rpjrt
from rpjrt.sharding import Mesh, assemble, split

# The shardings are written with the Shardy dialect, on a mesh of the same axes: each
# dimension lists the mesh axes it is split over ({} = not split); axes a value does not
# name hold copies. Mesh position k is partition k (row-major over "x", "y").
SPMD = """
module @sharded_matmul attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func public @main(
      %a: tensor<8x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>},
      %w: tensor<6x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}]>})
      -> (tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>},
          tensor<f32> {sdy.sharding = #sdy.sharding<@mesh, []>}) {
    %0 = stablehlo.dot_general %a, %w, contracting_dims = [1] x [0]
        : (tensor<8x6xf32>, tensor<6x4xf32>) -> tensor<8x4xf32>
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %1 = stablehlo.reduce(%0 init: %zero) applies stablehlo.add across dimensions = [0, 1]
        : (tensor<8x4xf32>, tensor<f32>) -> tensor<f32>
    return %0, %1 : tensor<8x4xf32>, tensor<f32>
  }
}
"""

A_SPEC, W_SPEC = ("x", None), (None, "y")
OUT_SPEC, TOTAL_SPEC = ("x", "y"), None  # None: replicated, every device has all of it


def main(argv: list[str]) -> int:
    a = np.arange(48, dtype=np.float32).reshape(8, 6)
    w = (np.arange(24, dtype=np.float32).reshape(6, 4) % 5) - 2

    with rpjrt.Client(argv[1] if len(argv) > 1 else None, options={"cpu_device_count": 4}) as client:
        mesh = Mesh({"x": 2, "y": 2}, devices=client.devices()[:4])
        print(mesh)
        exe = client.compile(SPMD, num_partitions=4, device_assignment=[mesh.device_ids])

        # One host shard per mesh position: a's are 4x6, w's are 6x2.
        a_shards, w_shards = split(a, mesh, A_SPEC), split(w, mesh, W_SPEC)
        print("shard shapes: a", a_shards[0].shape, "w", w_shards[0].shape)
        # execute_sharded takes one argument list per device, in the executable's
        # device order; map each device to its mesh position.
        pos = {d: k for k, d in enumerate(mesh.device_ids)}
        order = [pos[d.id] for d in exe.addressable_devices()]
        args = [
            [client.put(shards[k], device=client.device(mesh.device_ids[k])) for shards in (a_shards, w_shards)]
            for k in order
        ]
        outs = exe.execute_sharded(args)  # one [product shard, total] list per device
        for dev, (part, total) in zip(exe.addressable_devices(), outs):
            print(f"{dev}: product shard {part.shape}, total {float(total.to_numpy())}")

        by_pos = [outs[order.index(k)] for k in range(len(mesh))]  # back to mesh order
        product = assemble([o[0] for o in by_pos], mesh, OUT_SPEC, (8, 4))
        total = assemble([o[1] for o in by_pos], mesh, TOTAL_SPEC, ())

    np.testing.assert_allclose(product, a @ w, rtol=1e-6)
    assert float(total) == float((a @ w).sum())
    print("reassembled a @ w:")
    print(product)
    print("reassembled total:", float(total), "== numpy:", float((a @ w).sum()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
