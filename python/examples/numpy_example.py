"""numpy in, numpy out: shapes and dtypes are inferred, results convert with np.asarray.

    python numpy_example.py [PLUGIN]
"""

import sys

import ml_dtypes
import numpy as np

import rpjrt

TWO_OUTPUTS = """
func.func public @main(%a: tensor<2x3xi32>, %b: tensor<2x3xi32>) -> (tensor<2x3xi32>, tensor<2x3xi32>) {
  %0 = stablehlo.add %a, %b : tensor<2x3xi32>
  %1 = stablehlo.subtract %a, %b : tensor<2x3xi32>
  return %0, %1 : tensor<2x3xi32>, tensor<2x3xi32>
}
"""

BF16_DOUBLE = """
func.func public @main(%a: tensor<4xbf16>) -> tensor<4xbf16> {
  %0 = stablehlo.add %a, %a : tensor<4xbf16>
  return %0 : tensor<4xbf16>
}
"""


def main(argv: list[str]) -> int:
    with rpjrt.Client(argv[1] if len(argv) > 1 else None) as client:
        exe = client.compile(TWO_OUTPUTS)
        print("inputs:", exe.input_dtypes, exe.input_shapes)
        a = np.arange(6, dtype=np.int32).reshape(2, 3)
        b = np.full((3, 2), 10, dtype=np.int32).T  # Fortran order: handled without fuss
        total, diff = exe(a, b)  # host arrays are put on the device for you
        print("a + b =\n", np.asarray(total))
        print("a - b =\n", diff.to_numpy())

        half = client.compile(BF16_DOUBLE)
        x = np.array([0.5, 1.5, -2.0, 3.25], dtype=ml_dtypes.bfloat16)
        (y,) = half(x)
        print("bfloat16:", y.dtype, y.to_numpy())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
