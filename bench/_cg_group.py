"""Instructions per iteration, by shared object, from two callgrind runs of the same loop.

Usage: python _cg_group.py SHORT.out LONG.out EXTRA_ITERATIONS
The difference of the two runs (LONG did EXTRA_ITERATIONS more iterations than SHORT)
divided by EXTRA_ITERATIONS is the cost of one iteration, without start-up. Functions of
the rpjrt Python extension are split into the rpjrt crate and the bindings (PyO3).
"""

from __future__ import annotations

import collections
import re
import subprocess
import sys


def load(path: str) -> collections.Counter[str]:
    out = subprocess.run(
        ["callgrind_annotate", "--auto=no", "--threshold=100", path],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    by_object: collections.Counter[str] = collections.Counter()
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+(.*)$", line)
        if not m or "PROGRAM TOTALS" in line:
            continue
        name = m.group(2)
        obj = re.search(r"\[([^\]]+)\]\s*$", name)
        key = obj.group(1).rsplit("/", 1)[-1] if obj else "(inlined, no object)"
        if "_rpjrt" in key:
            crate = re.search(r"\brpjrt::", name) and "_rpjrt::" not in name
            key = "_rpjrt.abi3.so: " + ("rpjrt crate" if crate else "bindings, PyO3")
        by_object[key] += int(m.group(1).replace(",", ""))
    return by_object


def main() -> None:
    a, b, n = load(sys.argv[1]), load(sys.argv[2]), int(sys.argv[3])
    diff = {k: (b[k] - a[k]) / n for k in set(a) | set(b)}
    print(f"  {sum(diff.values()):9.0f}  instructions per iteration, of which:")
    for k, v in sorted(diff.items(), key=lambda kv: -kv[1]):
        if abs(v) >= 20:
            print(f"  {v:9.0f}  {k}")


if __name__ == "__main__":
    main()
