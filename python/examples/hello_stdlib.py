"""Hello, rpjrt: compile a StableHLO program and run it, with the standard library only.

    python hello_stdlib.py [PLUGIN]

PLUGIN is a path to a PJRT plugin library, a plugin name or a platform ("cpu"); without
it rpjrt discovers an installed plugin (RPJRT_PLUGIN, plugin wheels such as xla-cpu-pjrt).
Inputs are an array.array and a memoryview; the output comes back as a memoryview.
"""

import array
import sys

import rpjrt

PROGRAM = """
func.func public @main(%a: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<8xf32> {
  %0 = stablehlo.multiply %a, %b : tensor<8xf32>
  %1 = stablehlo.add %0, %a : tensor<8xf32>
  return %1 : tensor<8xf32>
}
"""


def main(argv: list[str]) -> int:
    plugin = argv[1] if len(argv) > 1 else None
    with rpjrt.Client(plugin) as client:
        major, minor = client.plugin.api_version
        print(f"plugin: {client.plugin.path} (PJRT {major}.{minor})")
        print(f"platform: {client.platform}, devices: {len(client.devices())}")

        exe = client.compile(PROGRAM)
        a = client.put(array.array("f", range(8)))  # 0, 1, ..., 7
        b = client.put(memoryview(array.array("f", [2.0] * 8)))
        (out,) = exe(a, b)  # returns at once; the work runs in the background

        result = out.to_host()  # waits, then copies: a memoryview of format "f", shape (8,)
        print(f"a * b + a = {result.tolist()}")
        print(f"{out!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
