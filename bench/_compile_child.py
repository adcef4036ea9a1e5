"""One timed compilation in a fresh process, for b_compile.py; prints milliseconds.

    python _compile_child.py rpjrt PLUGIN PROGRAM_TEXT_FILE CACHE_DIR|-
    python _compile_child.py jax PROGRAM_NAME CACHE_DIR|-

Only the compile call is timed (not the interpreter, imports, client creation or JAX's
tracing and lowering). With a cache directory the compile goes through that cache
(rpjrt's Cache, or JAX's persistent compilation cache); `-` compiles without one.
"""

from __future__ import annotations

import sys
import time


def main() -> None:
    tool = sys.argv[1]
    if tool == "rpjrt":
        import rpjrt

        plugin, text_file, cache_dir = sys.argv[2:5]
        client = rpjrt.Client(plugin)
        text = open(text_file).read()
        cache = None if cache_dir == "-" else rpjrt.Cache(cache_dir)
        t0 = time.perf_counter()
        client.compile(text, cache=cache)
        ms = (time.perf_counter() - t0) * 1e3
        hit = cache.stats()["hits"] if cache is not None else 0
    else:
        import os

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
        t0 = time.perf_counter()
        lowered.compile()
        ms = (time.perf_counter() - t0) * 1e3
        hit = -1
    print(f"MS {ms:.3f} HIT {hit}")


if __name__ == "__main__":
    main()
