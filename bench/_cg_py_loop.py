"""A Python loop for bench/callgrind.sh: MODE N runs N iterations of one variant after a
short warm-up. MODE: bur (exe + block_until_ready), pyfloor (the Python floor: one C-floor
iteration per Python call; a `bench` build), wait (exe(..., wait=True)), numpy (exe +
to_numpy), asarray (exe + np.asarray), jax_bur, jax_numpy; spmd8 / spmd8floor (an 8-device
call and its floor, see spmd8_body); session (a Session step of the MLP in _mlp_step.py +
waiting for the loss), session_direct (the same executable called with the buffers fed back
by hand), jax_session (the jitted step with donation). The session modes read the lowered
program from bench/out/mlp_step.mlir (run `python bench/_cg_py_loop.py session 0` once
outside valgrind to write it with JAX)."""

from __future__ import annotations

import sys
from typing import Any

import _harness as h
import _mlp_step


def session_body(mode: str) -> Any:
    import rpjrt

    params, x, y = _mlp_step.data()
    if mode == "jax_session":
        import jax.numpy as jnp

        jstep = _mlp_step.jax_step()
        state = {"p": [jnp.asarray(p) for p in params]}
        jx, jy = jnp.asarray(x), jnp.asarray(y)

        def jbody() -> None:
            state["p"], loss = jstep(state["p"], jx, jy)
            loss.block_until_ready()

        return jbody
    client = rpjrt.Client(h.plugin_path("NEW"))
    names = _mlp_step.NAMES
    session = rpjrt.Session(client)
    prog = session.program(_mlp_step.program_text(), inputs=names + ["x", "y"], outputs=names + ["loss"])
    if mode == "session":
        session.bind_many(dict(zip(names, params)))
        session.bind_many({"x": x, "y": y})

        def sbody() -> None:
            prog()
            session.buffer("loss").block_until_ready()

        return sbody
    exe = prog.executable
    bufs = {"p": [client.put(p) for p in params]}
    bx, by = client.put(x), client.put(y)

    def dbody() -> None:
        *bufs["p"], loss = exe(*bufs["p"], bx, by, donate=[0, 1, 2, 3])
        loss.block_until_ready()

    return dbody


SPMD8 = h.ROOT / "bench" / "out" / "spmd8.mlir"


def spmd8_body(mode: str) -> Any:
    """The 8-device call of bench/b_spmd.py: `spmd8` is the prepared call without its wait
    (`call(wait=False)`), `spmd8floor` the floor's iteration with completion events (a
    `bench` build). The program is lowered by JAX outside valgrind (`spmd8 0`) and cached."""
    import numpy as np

    import rpjrt

    if not SPMD8.exists():
        import _spmd_child as sc

        jax = sc.setup_jax(h.plugin_path("NEW"))
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        sharding = NamedSharding(Mesh(np.array(jax.devices()[:8]), ("x",)), PartitionSpec("x"))
        args = [jax.device_put(np.arange(64, dtype=np.float32), sharding) for _ in range(2)]
        f = jax.jit(sc.mul_add, in_shardings=(sharding, sharding), out_shardings=sharding)
        SPMD8.parent.mkdir(parents=True, exist_ok=True)
        SPMD8.write_text(f.lower(*args).as_text())
    client = rpjrt.Client(h.plugin_path("NEW"), options={"cpu_device_count": 8})
    exe = client.compile(SPMD8.read_text(), num_partitions=8)
    host = [np.arange(64, dtype=np.float32) + i for i in range(2)]
    lists = [[client.put(a[8 * d.id : 8 * d.id + 8], device=d) for a in host] for d in exe.addressable_devices()]
    if mode == "spmd8floor":
        floor = rpjrt._rpjrt._BenchFloor(exe, lists, "event")
        return lambda: floor()
    call = exe.prepare(lists)
    return lambda: call(wait=False)


def main() -> None:
    import numpy as np

    mode, n = sys.argv[1], int(sys.argv[2])
    xs = np.arange(8, dtype=np.float32)
    if mode in ("session", "session_direct", "jax_session"):
        body = session_body(mode)
    elif mode in ("spmd8", "spmd8floor"):
        body = spmd8_body(mode)
    elif mode.startswith("jax"):
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
        bodies = {
            "bur": lambda: exe(b, b)[0].block_until_ready(),
            "wait": lambda: exe(b, b, wait=True),
            "numpy": lambda: exe(b, b)[0].to_numpy(),
            "asarray": lambda: np.asarray(exe(b, b)[0]),
        }
        if mode == "pyfloor":  # the Python floor of bench/b_execute.py (a `bench` build)
            pf = rpjrt._rpjrt._BenchFloor(exe, [[b, b]], "ready")
            bodies["pyfloor"] = lambda: pf(b, b)
        body = bodies[mode]
    for _ in range(min(n, 100)):
        body()
    for _ in range(n):
        body()


if __name__ == "__main__":
    main()
