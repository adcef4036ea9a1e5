"""Where a warm compile-cache load goes: rpjrt and JAX in one process, interleaved.

    python bench/_load_split.py [PROGRAM ...] [--reps N]     (default transformer-12, 7 reps)

Not part of run.py (b_compile.py is the benchmark); this is the breakdown behind its
"Compile once" notes in RESULTS.md. Each repetition runs, in a rotating order:

- rpjrt cache hit: `client.compile(text, cache=cache)` on a populated cache (0.115 plugin);
- rpjrt load: `client.load(artifact)` of the same entry's bytes (envelope checks + plugin);
- plugin load: `client.load(blob, bare=True)` (the plugin's DeserializeAndLoad alone, plus the
  optimized-program read that bare loads need for parameter types);
- rpjrt hit (fast min/max): a cache hit of the executable compiled with the plugin's own
  default `xla_cpu_enable_fast_min_max=true` (what rpjrt sent before it turned it off);
- JAX cache hit: `jax.jit(f).lower(...).compile()` with JAX's persistent cache populated,
  after `jax.clear_caches()` so the in-memory caches do not answer.

Each figure is wall time and CPU time (all threads of the process, from
/proc/self/task/*/schedstat), so a loaded machine's waiting shows as the difference.
The first load of each kind in the process is reported apart (`first`), the rest as
median [min..max].
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import _compile_models as models  # noqa: E402
import _harness as h  # noqa: E402


def cpu_ms() -> float:
    ns = 0
    for t in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{t}/schedstat") as f:
                ns += int(f.read().split()[0])
        except OSError:
            pass
    return ns / 1e6


def timed(fn: Callable[[], Any]) -> tuple[float, float]:
    c0 = cpu_ms()
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3, cpu_ms() - c0


def main() -> None:
    args = sys.argv[1:]
    reps = 7
    if "--reps" in args:
        i = args.index("--reps")
        reps = int(args[i + 1])
        del args[i : i + 2]
    programs = args or ["transformer-12"]

    import jax

    import rpjrt

    tmp = tempfile.mkdtemp(prefix="rpjrt-load-split-")
    jax.config.update("jax_compilation_cache_dir", os.path.join(tmp, "jax"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    client = rpjrt.Client(h.plugin_path("NEW"))
    print(f"load average {os.getloadavg()[0]:.1f}; rpjrt on {client.platform} (PJRT 0.115 plugin)")
    try:
        for name in programs:
            text = models.lower_text(name)
            f, fargs = models.build(name)
            cache = rpjrt.Cache(os.path.join(tmp, f"rp-{name}"))
            fast = rpjrt.Cache(os.path.join(tmp, f"rp-fast-{name}"))
            fast_opts = {"xla_cpu_enable_fast_min_max": True}
            cold_rp = timed(lambda: client.compile(text, cache=cache))
            client.compile(text, cache=fast, env_option_overrides=fast_opts)
            cold_jax = timed(lambda: jax.jit(f).lower(*fargs).compile())
            (entry,) = cache.entries()
            artifact = open(entry["path"], "rb").read()
            blob = client.load(artifact).serialize_bare()
            (fast_entry,) = fast.entries()
            print(
                f"\n{name}: cold compile rpjrt {cold_rp[0]:.0f} ms wall / {cold_rp[1]:.0f} ms CPU, "
                f"JAX {cold_jax[0]:.0f} / {cold_jax[1]:.0f}; entry {len(artifact)} bytes "
                f"(with fast min/max: {fast_entry['bytes']} bytes)"
            )

            def jax_hit() -> None:
                jax.clear_caches()
                lowered = jax.jit(f).lower(*fargs)
                t = timed(lowered.compile)
                samples["JAX cache hit"].append(t)

            variants: dict[str, Callable[[], None]] = {
                "rpjrt cache hit": lambda: samples["rpjrt cache hit"].append(
                    timed(lambda: client.compile(text, cache=cache))
                ),
                "rpjrt load(artifact)": lambda: samples["rpjrt load(artifact)"].append(
                    timed(lambda: client.load(artifact))
                ),
                "plugin load(bare)": lambda: samples["plugin load(bare)"].append(
                    timed(lambda: client.load(blob, bare=True))
                ),
                "rpjrt hit, fast min/max": lambda: samples["rpjrt hit, fast min/max"].append(
                    timed(lambda: client.compile(text, cache=fast, env_option_overrides=fast_opts))
                ),
                "JAX cache hit": jax_hit,
            }
            samples: dict[str, list[tuple[float, float]]] = {k: [] for k in variants}
            keys = list(variants)
            for rep in range(reps + 1):
                for k in range(len(keys)):
                    variants[keys[(rep + k) % len(keys)]]()
            print(f"{'variant':26} {'first wall/CPU':>16}   {'wall ms median [min..max]':>28}   CPU ms median [min..max]")
            for k, s in samples.items():
                first, rest = s[0], s[1:]
                w = [x[0] for x in rest]
                c = [x[1] for x in rest]
                print(
                    f"{k:26} {first[0]:7.0f}/{first[1]:<7.0f}   {statistics.median(w):8.1f} "
                    f"[{min(w):.0f}..{max(w):.0f}]{'':8}   {statistics.median(c):6.1f} [{min(c):.0f}..{max(c):.0f}]"
                )
            rp = [x[1] for x in samples["rpjrt cache hit"][1:]]
            jx = [x[1] for x in samples["JAX cache hit"][1:]]
            rw = [x[0] for x in samples["rpjrt cache hit"][1:]]
            jw = [x[0] for x in samples["JAX cache hit"][1:]]
            print(
                f"rpjrt hit / JAX hit, per repetition: wall {statistics.median([a / b for a, b in zip(rw, jw)]):.2f}x, "
                f"CPU {statistics.median([a / b for a, b in zip(rp, jx)]):.2f}x; "
                f"rpjrt hit / cold compile (CPU) {statistics.median(rp) / cold_rp[1]:.3f}x"
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
