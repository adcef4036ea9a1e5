"""One timed compilation in a fresh process, for b_compile.py; prints milliseconds.

    python _compile_child.py rpjrt PLUGIN PROGRAM_TEXT_FILE CACHE_DIR|-
    python _compile_child.py jax PROGRAM_NAME CACHE_DIR|-

Only the compile call is timed (not the interpreter, imports, client creation or JAX's
tracing and lowering): its wall time, and the CPU time all threads of the process spent in
it (from /proc/self/task/*/schedstat; on a loaded machine wall time includes waiting for a
core, CPU time does not). With a cache directory the compile goes through that cache
(rpjrt's Cache, or JAX's persistent compilation cache); `-` compiles without one. For an
rpjrt hit it also prints rpjrt's own share of the load in ms (OWN: the cache's hit time minus
the plugin's deserialization, `Cache.stats()`; -1 otherwise).
"""

from __future__ import annotations

import os
import sys
import time


def cpu_ms() -> float:
    """CPU time of every thread of this process so far, in ms (-1 where /proc lacks it)."""
    ns = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return -1.0
    for t in tasks:
        try:
            with open(f"/proc/self/task/{t}/schedstat") as f:
                ns += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return ns / 1e6


def main() -> None:
    tool = sys.argv[1]
    if tool == "rpjrt":
        import rpjrt

        plugin, text_file, cache_dir = sys.argv[2:5]
        client = rpjrt.Client(plugin)
        text = open(text_file).read()
        cache = None if cache_dir == "-" else rpjrt.Cache(cache_dir)
        c0 = cpu_ms()
        t0 = time.perf_counter()
        # Kept alive past the timer: destroying an executable is not part of loading it
        # (for a large program the plugin takes tens of milliseconds to free it).
        exe = client.compile(text, cache=cache)
        ms = (time.perf_counter() - t0) * 1e3
        cpu = cpu_ms() - c0
        stats = cache.stats() if cache is not None else {}
        hit = stats.get("hits", 0)
        # rpjrt's own work within a hit: everything but the plugin's deserialization.
        share = (stats["hit_time"] - stats["hit_plugin_time"]) * 1e3 if hit else -1.0
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import jax

        import _compile_models as models

        name, cache_dir = sys.argv[2:4]
        if cache_dir != "-":
            jax.config.update("jax_compilation_cache_dir", cache_dir)
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
        f, args = models.build(name)
        lowered = jax.jit(f).lower(*args)
        c0 = cpu_ms()
        t0 = time.perf_counter()
        exe = lowered.compile()
        ms = (time.perf_counter() - t0) * 1e3
        cpu = cpu_ms() - c0
        hit = -1
        share = -1.0
    print(f"MS {ms:.3f} HIT {hit} CPU {cpu:.3f} OWN {share:.4f}")
    del exe


if __name__ == "__main__":
    main()
