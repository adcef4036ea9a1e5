"""What registering a custom-call handler costs executions of programs without custom calls.

Usage: python bench/_ctx_probe.py [ROUNDS]

Each round runs two fresh processes, one after the other: both time `exe(x, x)` +
`block_until_ready()` of a program with no custom call (15 repetitions of 3000 calls),
then one registers a Python handler and the other does not, and both time the loop again.
Prints the median per-call time before and after of each, and the ratio after/before per
round. Before rpjrt passed the custom-call execute context only to programs that may hold
a custom call, the registering process's ratio was 1.06-1.09 (the plugin's Execute does
more with a context).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, statistics, sys, time
import numpy as np
import rpjrt, rpjrt.ffi
sys.path.insert(0, sys.argv[2])
import _harness as h
c = rpjrt.Client(h.plugin_path("NEW"))
exe = c.compile('''func.func public @main(%x: tensor<8xf32>, %y: tensor<8xf32>) -> tensor<8xf32> {
  %0 = stablehlo.add %x, %y : tensor<8xf32>
  return %0 : tensor<8xf32>
}''')
x = c.put(np.arange(8, dtype=np.float32))
def loop(n):
    t = time.perf_counter_ns()
    for _ in range(n):
        exe(x, x)[0].block_until_ready()
    return (time.perf_counter_ns() - t) / n
for _ in range(3):
    loop(2000)
before = statistics.median(loop(3000) for _ in range(15))
if sys.argv[1] == "register":
    rpjrt.ffi.register(c, "ctx_probe_handler", lambda call: None)
after = statistics.median(loop(3000) for _ in range(15))
print(json.dumps({"before": before, "after": after}))
"""


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    here = str(Path(__file__).resolve().parent)
    ratios: dict[str, list[float]] = {"register": [], "none": []}
    for _ in range(rounds):
        for mode in ("register", "none"):
            out = subprocess.run(
                [sys.executable, "-c", CHILD, mode, here], capture_output=True, text=True, check=True
            ).stdout
            r = json.loads(out.strip().splitlines()[-1])
            ratios[mode].append(r["after"] / r["before"])
            print(f"{mode:9s} before {r['before']:7.0f} ns  after {r['after']:7.0f} ns  ratio {ratios[mode][-1]:.3f}")
    for mode, rs in ratios.items():
        print(f"{mode}: median after/before {statistics.median(rs):.3f}")


if __name__ == "__main__":
    main()
