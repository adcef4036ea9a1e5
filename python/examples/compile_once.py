"""Compile once, run many times: serialize an executable and load it back, and keep
compiled programs in a persistent compile-cache directory.

    python compile_once.py [PLUGIN]

`Executable.serialize()` gives bytes (an artifact that names the plugin and version that
built it; `Client.load` checks them before the plugin sees the data). A cache directory
(`rpjrt.Client(..., cache_dir=...)`, or `rpjrt.Cache` passed to `compile`) stores each
compiled program under a key of the program and its options: a second compile of the same
program, in this process or another, is loaded from the directory instead of recompiled.
"""

import os
import sys
import tempfile

import numpy as np

import rpjrt

PROGRAM = """
func.func public @main(%a: tensor<2x3xf32>, %b: tensor<3x2xf32>) -> tensor<2x2xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]
      : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
  %1 = stablehlo.tanh %0 : tensor<2x2xf32>
  return %1 : tensor<2x2xf32>
}
"""


def main(argv: list[str]) -> int:
    plugin = argv[1] if len(argv) > 1 else None
    a = np.arange(6, dtype=np.float32).reshape(2, 3) / 10
    b = np.ones((3, 2), dtype=np.float32)

    with tempfile.TemporaryDirectory() as tmp:
        # 1. Serialize to a file and load it back (Client.load also takes the bytes' path).
        with rpjrt.Client(plugin) as client:
            exe = client.compile(PROGRAM)
            artifact = os.path.join(tmp, "matmul_tanh.rpjrt")
            with open(artifact, "wb") as f:
                f.write(exe.serialize())
            target = client.artifact_target()  # what the artifact records and load checks
            size = os.path.getsize(artifact)
            print(f"serialized: {size} bytes for {target['platform_name']} PJRT {target['pjrt_version']}")
            with open(artifact, "rb") as f:
                loaded = client.load(f.read())
            direct = exe(a, b)[0].to_numpy()
            reloaded = loaded(a, b)[0].to_numpy()
            print("compiled:", direct.tolist())
            print("loaded:  ", reloaded.tolist())
            print("serialize/load results equal:", np.array_equal(direct, reloaded))
            assert np.array_equal(direct, reloaded)

        # 2. A compile cache directory, shared by clients (and processes).
        cache_dir = os.path.join(tmp, "cache")
        with rpjrt.Client(plugin, cache_dir=cache_dir) as client:
            assert client.cache is not None
            first = client.compile(PROGRAM)(a, b)[0].to_numpy()  # compiled, then stored
            print("first client:", client.cache.stats()["misses"], "miss,", len(client.cache.entries()), "entry")
        with rpjrt.Client(plugin) as client:
            cache = rpjrt.Cache(cache_dir)  # the same directory, passed to compile
            second = client.compile(PROGRAM, cache=cache)(a, b)[0].to_numpy()  # loaded, not compiled
            s = cache.stats()
            print(f"second client: hits={s['hits']} misses={s['misses']}")
            assert np.array_equal(first, second) and np.array_equal(first, direct)
            print("cached results equal:", np.array_equal(first, second))
            if s["hits"] == 1 and s["misses"] == 0:
                print("cache hit: compiled once, loaded from", os.path.basename(cache_dir))
                return 0
    print("no cache hit")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
