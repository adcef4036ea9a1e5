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

A warm load also prints where its time went (a `SPLIT` line, ms, parts separated by `,`):
for rpjrt, `own` (key, file read, envelope checks, executable facts) and `plugin`
(`PJRT_Executable_DeserializeAndLoad`); for JAX, `key` (the cache key: the module and
options serialized and hashed), `read` (the entry file), `decompress`, `plugin` (its CPU
client's deserialization, with the few microseconds that split the stored compile time off)
and `rest` (JAX's Python around them: looking up the strategy, wrapping the executable).
JAX's parts are timed by wrapping the module functions of its persistent cache.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any


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


def _time_jax_cache() -> dict[str, float]:
    """Wraps the functions of JAX's persistent cache that a hit goes through, adding the
    milliseconds each takes to the returned dict (`get` is the whole lookup: read,
    decompress and deserialize; `hits` counts lookups that found an entry)."""
    from jax._src import compilation_cache as cc

    parts = {"key": 0.0, "read": 0.0, "decompress": 0.0, "get": 0.0, "hits": 0.0}

    def timed(name: str, fn: Any) -> Any:
        def wrapper(*a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                parts[name] += (time.perf_counter() - t0) * 1e3

        return wrapper

    class TimedCache:
        def __init__(self, base: Any) -> None:
            self.base = base

        def get(self, key: str) -> Any:
            return timed("read", self.base.get)(key)

        def __getattr__(self, attr: str) -> Any:
            return getattr(self.base, attr)

    get_cache = cc._get_cache
    get_executable = cc.get_executable_and_time

    def get_and_count(*a: Any, **k: Any) -> Any:
        out = timed("get", get_executable)(*a, **k)
        parts["hits"] += out[0] is not None
        return out

    cc.get_cache_key = timed("key", cc.get_cache_key)
    cc.decompress_executable = timed("decompress", cc.decompress_executable)
    cc._get_cache = lambda backend: (lambda c: None if c is None else TimedCache(c))(get_cache(backend))
    cc.get_executable_and_time = get_and_count
    return parts


def main() -> None:
    tool = sys.argv[1]
    split: dict[str, float] = {}
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
        if hit:
            split = {"own": share, "plugin": stats["hit_plugin_time"] * 1e3}
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
        parts = _time_jax_cache() if cache_dir != "-" else {}
        c0 = cpu_ms()
        t0 = time.perf_counter()
        exe = lowered.compile()
        ms = (time.perf_counter() - t0) * 1e3
        cpu = cpu_ms() - c0
        hit = -1
        share = -1.0
        if parts.get("hits"):
            get = parts.pop("get")
            parts.pop("hits")
            split = {
                "key": parts["key"],
                "read": parts["read"],
                "decompress": parts["decompress"],
                "plugin": get - parts["read"] - parts["decompress"],
            }
            split["rest"] = ms - sum(split.values())
    print(f"MS {ms:.3f} HIT {hit} CPU {cpu:.3f} OWN {share:.4f}")
    if split:
        print("SPLIT " + ",".join(f"{k}={v:.3f}" for k, v in split.items()))
    del exe


if __name__ == "__main__":
    main()
