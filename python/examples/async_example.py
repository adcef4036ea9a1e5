"""`await` a Buffer: the event loop keeps running while the device works.

    python async_example.py [PLUGIN]
"""

import array
import asyncio
import sys

import rpjrt

PROGRAM = """
func.func public @main(%a: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<8xf32> {
  %0 = stablehlo.multiply %a, %b : tensor<8xf32>
  return %0 : tensor<8xf32>
}
"""


async def main(plugin: str | None) -> None:
    with rpjrt.Client(plugin) as client:
        exe = client.compile(PROGRAM)
        x = client.put(array.array("f", range(8)))
        results = [exe(x, x)[0] for _ in range(4)]
        done = await asyncio.gather(*results)  # each `await buf` returns the buffer
        print([b.to_host().tolist()[-1] for b in done])


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else None))
