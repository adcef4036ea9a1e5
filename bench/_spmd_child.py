"""The sharded-call benchmark's measuring process (run by b_spmd.py; JSON on stdout's last line).

    python bench/_spmd_child.py [--smoke]

JAX and rpjrt drive the same PJRT plugin (the 0.115 CPU plugin, 8 devices): JAX loads it as
a PJRT plugin platform, which must happen before JAX starts any backend, hence a process of
its own. Every program is lowered by JAX for that platform and compiled by both, and every
variant of one measurement is interleaved with the others (bench/_harness.py).

Measured:
- call8: an 8-device SPMD call of `a * b + 1` (f32[64] split over 8 devices) + wait:
  rpjrt's prepared call, rpjrt's `execute_sharded` + a wait per output, JAX's jitted call,
  and (with a `bench` build) the raw C floor of the same call and its Python floor;
- sweeps: the same three (the plain `exe(*args)` on one device) over arguments (1, 8, 64,
  256 f32[8] arguments summed, one device), outputs (1, 8, 32 outputs of one argument, one
  device) and devices (1, 2, 4, 8, `a * b + 1` with f32[8] per device).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as h  # noqa: E402

NUM_DEVICES = 8


def setup_jax(plugin: str) -> Any:
    import jax
    from jax._src import xla_bridge

    xla_bridge.register_plugin("rpjrtbench", library_path=plugin, options={"cpu_device_count": NUM_DEVICES})
    jax.config.update("jax_platforms", "rpjrtbench")
    if len(jax.devices()) != NUM_DEVICES:
        raise SystemExit(f"JAX sees {len(jax.devices())} devices of the plugin, not {NUM_DEVICES}")
    return jax


class Case:
    """One program, set up for every variant: `variants` maps a name to a loop of `n` calls."""

    def __init__(self, jax: Any, client: Any, fn: Callable[..., Any], num_args: int, devices: int) -> None:
        import numpy as np
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        self.np = np
        mesh = Mesh(np.array(jax.devices()[:devices]), ("x",))
        sharding = NamedSharding(mesh, PartitionSpec("x"))
        host = [np.arange(8 * devices, dtype=np.float32) + i for i in range(num_args)]
        jargs = [jax.device_put(a, sharding) for a in host]
        jf = jax.jit(fn, in_shardings=(sharding,) * num_args, out_shardings=sharding)
        text = jf.lower(*jargs).as_text()
        exe = client.compile(text, num_partitions=devices) if devices > 1 else client.compile(text)
        exe_devices = exe.addressable_devices()
        # Mesh position k (device k) holds rows [8k, 8k + 8) of every argument.
        lists = [[client.put(a[8 * d.id : 8 * d.id + 8], device=d) for a in host] for d in exe_devices]
        call = exe.prepare(lists)

        # Same program, same data: the results agree before anything is timed.
        want = jax.block_until_ready(jf(*jargs))
        want = [np.asarray(w) for w in (want if isinstance(want, (tuple, list)) else [want])]
        outs = call()
        for j, w in enumerate(want):
            for k, shard in enumerate(outs[j]):
                d = exe_devices[k].id
                np.testing.assert_allclose(shard.to_numpy(), w[8 * d : 8 * d + 8], rtol=1e-6)

        def rp_prepared(n: int) -> None:
            for _ in range(n):
                call()

        if devices == 1:
            args1 = lists[0]

            def rp_plain(n: int) -> None:
                for _ in range(n):
                    for o in exe(*args1):
                        o.block_until_ready()

        else:

            def rp_plain(n: int) -> None:
                for _ in range(n):
                    for per_device in exe.execute_sharded(lists):
                        for o in per_device:
                            o.block_until_ready()

        def jax_call(n: int) -> None:
            for _ in range(n):
                jax.block_until_ready(jf(*jargs))

        self.variants = {"rpjrt_prepared": rp_prepared, "rpjrt_plain": rp_plain, "jax": jax_call}
        self.exe, self.lists = exe, lists

    def add_floors(self) -> None:
        """Adds the raw C floor of the same call (one Execute for every device, then each
        device's first output awaited, then every output destroyed; a Rust loop with the GIL
        released) and the Python floor (one such iteration per Python call), when the
        extension is built with the `bench` feature."""
        import rpjrt

        cls = getattr(rpjrt._rpjrt, "_BenchFloor", None)
        try:
            floor = cls(self.exe, self.lists, "ready") if cls is not None else None
        except Exception:  # built without the `bench` feature
            floor = None
        if floor is None:
            return

        def py_floor(n: int) -> None:
            for _ in range(n):
                floor()

        self.variants["c_floor"] = floor.run
        self.variants["py_floor"] = py_floor


def mul_add(a: Any, b: Any) -> Any:
    return a * b + 1


def sum_args(*xs: Any) -> Any:
    return functools.reduce(lambda p, q: p + q, xs)


def fan_out(k: int) -> Callable[[Any], Any]:
    def f(x: Any) -> Any:
        return tuple(x + i for i in range(k))

    return f


def main() -> None:
    smoke = "--smoke" in sys.argv[1:]
    plugin = h.plugin_path("NEW")
    jax = setup_jax(plugin)
    import rpjrt

    client = rpjrt.Client(plugin, options={"cpu_device_count": NUM_DEVICES})
    out: dict[str, Any] = {"jax": jax.__version__, "load": os.getloadavg()[0]}

    reps, iters = (3, 30) if smoke else (15, 400)
    t0 = time.monotonic()
    case = Case(jax, client, mul_add, 2, NUM_DEVICES)
    case.add_floors()
    # Process CPU time per call next to the wall clock (all threads, the plugin's included):
    # on a loaded machine the wall clock mostly measures the scheduler.
    cpu: dict[str, list[float]] = {k: [] for k in case.variants}

    def cpu_timed(name: str, f: Callable[[int], None]) -> Callable[[int], None]:
        def g(n: int) -> None:
            c0 = time.process_time_ns()
            f(n)
            cpu[name].append((time.process_time_ns() - c0) / n)

        return g

    out["call8"] = h.interleaved({k: cpu_timed(k, f) for k, f in case.variants.items()}, reps=reps, iters=iters)
    # The warm-up call of each variant is recorded first: dropped.
    out["call8_cpu"] = {k: v[-reps:] for k, v in cpu.items()}

    sweeps: dict[str, list[tuple[int, Callable[[], Case]]]] = {
        "args": [(n, lambda n=n: Case(jax, client, sum_args, n, 1)) for n in (1, 8, 64, 256)],
        "outputs": [(k, lambda k=k: Case(jax, client, fan_out(k), 1, 1)) for k in (1, 8, 32)],
        "devices": [(d, lambda d=d: Case(jax, client, mul_add, 2, d)) for d in (1, 2, 4, 8)],
    }
    sreps, siters = (2, 20) if smoke else (9, 200)
    out["sweeps"] = {}
    for kind, points in sweeps.items():
        if smoke:
            points = points[1:2]
        out["sweeps"][kind] = {}
        for x, make in points:
            c = make()
            out["sweeps"][kind][str(x)] = h.interleaved(c.variants, reps=sreps, iters=siters)
    out["seconds"] = round(time.monotonic() - t0, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
