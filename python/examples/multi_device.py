"""One program on two devices at once: an all-reduce over 2 replicas.

    python multi_device.py [PLUGIN]

CPU plugins expose several devices (4 by default; `options={"cpu_device_count": N}` on
the new plugin). execute_sharded takes one argument list per device and returns one
output list per device.
"""

import array
import sys

import rpjrt

ALLREDUCE = """
module @allreduce attributes {mhlo.num_replicas = 2 : i32, mhlo.num_partitions = 1 : i32} {
  func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "stablehlo.all_reduce"(%x) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
"""


def main(argv: list[str]) -> int:
    with rpjrt.Client(argv[1] if len(argv) > 1 else None) as client:
        d0, d1 = client.devices()[:2]
        exe = client.compile(ALLREDUCE, num_replicas=2, device_assignment=[[d0], [d1]])
        print("runs on:", exe.addressable_devices())
        x0 = client.put(array.array("f", [1, 2, 3, 4]), d0)
        x1 = client.put(array.array("f", [10, 20, 30, 40]), d1)
        outs = exe.execute_sharded([[x0], [x1]])
        for (out,) in outs:
            print(out.device, out.to_host().tolist())  # both: [11, 22, 33, 44]
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
