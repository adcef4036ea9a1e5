"""A Python loop for bench/callgrind.sh: MODE N runs N iterations of one variant after a
short warm-up. MODE: bur (exe + block_until_ready), numpy (exe + to_numpy), jax_bur,
jax_numpy."""

from __future__ import annotations

import sys

import _harness as h


def main() -> None:
    import numpy as np

    mode, n = sys.argv[1], int(sys.argv[2])
    xs = np.arange(8, dtype=np.float32)
    if mode.startswith("jax"):
        import jax
        import jax.numpy as jnp

        f = jax.jit(lambda a, b: a * b + 1)
        x = jnp.asarray(xs)
        body = (lambda: f(x, x).block_until_ready()) if mode == "jax_bur" else (lambda: np.asarray(f(x, x)))
    else:
        import rpjrt

        client = rpjrt.Client(h.plugin_path("NEW"))
        exe = client.compile(h.MUL_ADD)
        b = client.put(xs)
        body = (lambda: exe(b, b)[0].block_until_ready()) if mode == "bur" else (lambda: exe(b, b)[0].to_numpy())
    for _ in range(100):
        body()
    for _ in range(n):
        body()


if __name__ == "__main__":
    main()
