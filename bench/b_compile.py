"""Compile once: cold compilation vs a warm compile-cache load, against JAX's own
persistent compilation cache on the same programs, in the same run.

Programs (lowered by JAX, see _compile_models.py): an MLP training step and a 12-layer
transformer block stack. Each figure is one compilation in a fresh process (only the
compile call is timed; see _compile_child.py), repeated with the variants interleaved:

- rpjrt cold: `client.compile(text)` without a cache (the 0.115 CPU plugin)
- rpjrt warm: `client.compile(text, cache=Cache(dir))` on a populated cache (a hit)
- JAX cold / warm: `jax.jit(f).lower(...).compile()` without / with a populated
  `jax_compilation_cache_dir` (JAX's own CPU backend)

Targets (issue 24 target 5, which replaced "warm <= 5% of cold": on the CPU plugins a warm
load is the plugin's own deserialization, which rebuilds the program): rpjrt warm <= 0.8x JAX
warm, judged on wall time; rpjrt's own share of a warm load (the hit's time minus the plugin's
`PJRT_Executable_DeserializeAndLoad`, from `Cache.stats()`) <= 1 ms. Warm / cold is still
recorded as a figure. The CPU time each child spent in the timed call is recorded too (all
threads; figures `*_cpu`), and the warm ratios on CPU time are printed with the targets: on a
machine shared by many jobs, wall time is mostly waiting for a core.

Each warm child also says where its time went (figures `compile.<program>.<variant>.<part>`):
rpjrt's `own` and `plugin` (the plugin's deserialization), JAX's `key`, `read`,
`decompress`, `plugin` (its CPU client's deserialization) and `rest`, their sum
`jax_warm.own`, and `plugin_vs_jax_plugin`, the two deserializations' ratio per repetition.
Both sides deserialize the same XLA CPU executable, so that ratio, not either client's own
share, is what decides the warm ratio of a large program.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any

import _compile_models as models
import _harness as h

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "_compile_child.py")


def _child(args: list[str]) -> tuple[float, int, float, float, dict[str, float]]:
    out = subprocess.run(
        [sys.executable, CHILD, *args], check=True, capture_output=True, text=True, timeout=600
    ).stdout
    line = next(l for l in out.splitlines() if l.startswith("MS "))
    f = line.split()
    split: dict[str, float] = {}
    for l in out.splitlines():
        if l.startswith("SPLIT "):
            split = {k: float(v) for k, v in (p.split("=") for p in l[6:].split(","))}
    return float(f[1]), int(f[3]), float(f[5]), float(f[7]), split


def run(res: h.Results, *, smoke: bool, rust: Any = None) -> None:
    programs = ["mlp-256"] if smoke else ["mlp-1024", "transformer-12"]
    reps = 1 if smoke else 5
    plugin = h.plugin_path("NEW")
    tmp = tempfile.mkdtemp(prefix="rpjrt-bench-compile-")
    try:
        for name in programs:
            text_file = os.path.join(tmp, f"{name}.mlir")
            with open(text_file, "w") as f:
                f.write(models.lower_text(name))
            rp_dir = os.path.join(tmp, f"rpjrt-{name}")
            jax_dir = os.path.join(tmp, f"jax-{name}")
            # Populate both caches once.
            _child(["rpjrt", plugin, text_file, rp_dir])
            _child(["jax", name, jax_dir])
            variants = {
                "rpjrt_cold": ["rpjrt", plugin, text_file, "-"],
                "rpjrt_warm": ["rpjrt", plugin, text_file, rp_dir],
                "jax_cold": ["jax", name, "-"],
                "jax_warm": ["jax", name, jax_dir],
            }
            samples: dict[str, list[float]] = {k: [] for k in variants}
            cpu: dict[str, list[float]] = {k: [] for k in variants}
            own: list[float] = []
            # Where each warm load went (ms per part, one list per part; see _compile_child.py).
            parts: dict[str, dict[str, list[float]]] = {"rpjrt_warm": {}, "jax_warm": {}}
            keys = list(variants)
            for rep in range(reps):
                for k in range(len(keys)):
                    v = keys[(rep + k) % len(keys)]
                    ms, hit, c, share, split = _child(variants[v])
                    for part, part_ms in split.items():
                        parts.setdefault(v, {}).setdefault(part, []).append(part_ms)
                    if v == "rpjrt_warm" and hit != 1:
                        res.note(f"compile.{name}: the rpjrt warm run missed its cache")
                    elif v == "rpjrt_warm":
                        own.append(share)
                    samples[v].append(ms)
                    cpu[v].append(c)
            for v, s in samples.items():
                res.figure(f"compile.{name}.{v}", f"{v.replace('_', ' ')} compile of {name} (fresh process)", "ms", h.stats(s))
                res.figure(f"compile.{name}.{v}_cpu", f"{v.replace('_', ' ')} compile of {name}, CPU time", "ms", h.stats(cpu[v]))

            for v, by_part in parts.items():
                for part, part_ms in by_part.items():
                    res.figure(
                        f"compile.{name}.{v}.{part}",
                        f"{v.replace('_', ' ')} load of {name}: {part}",
                        "ms",
                        h.stats(part_ms),
                    )
            jax_parts = parts["jax_warm"]
            if jax_parts.get("plugin"):
                jax_own = [
                    sum(jax_parts[p][i] for p in jax_parts if p != "plugin")
                    for i in range(len(jax_parts["plugin"]))
                ]
                res.figure(
                    f"compile.{name}.jax_warm.own",
                    f"JAX's own share of a warm load of {name} (key, read, decompress, rest)",
                    "ms",
                    h.stats(jax_own),
                )
            rp_plugin = parts["rpjrt_warm"].get("plugin", [])
            jax_plugin = parts["jax_warm"].get("plugin", [])
            if rp_plugin and len(rp_plugin) == len(jax_plugin):
                # The same XLA CPU deserialization on both sides (the plugin's, JAX's own
                # CPU client's): what is left of the ratio once each client's own work is out.
                res.figure(
                    f"compile.{name}.plugin_vs_jax_plugin",
                    f"deserialization alone of {name}: the 0.115 plugin's (rpjrt) / JAX's CPU client's",
                    "x",
                    h.paired(rp_plugin, jax_plugin),
                )

            def cpu_ratio(a: str, b: str) -> str:
                return f"{h.paired(cpu[a], cpu[b])['median']:.3f}x"

            res.figure(
                f"compile.{name}.warm_vs_cold",
                f"rpjrt warm cache / cold compile of {name} (JAX's: "
                f"{h.paired(samples['jax_warm'], samples['jax_cold'])['median']:.3f}x)",
                "x",
                h.paired(samples["rpjrt_warm"], samples["rpjrt_cold"]),
            )
            res.target(
                f"compile {name}: rpjrt warm / JAX warm cache",
                value=h.paired(samples["rpjrt_warm"], samples["jax_warm"]),
                op="<=",
                threshold=0.8,
                unit="x",
                detail="both load a cached executable in a fresh process; on CPU time "
                f"{cpu_ratio('rpjrt_warm', 'jax_warm')}",
                reference="JAX persistent compilation cache, same repetition",
            )
            res.target(
                f"compile {name}: rpjrt's own share of a warm load",
                value=h.stats(own) if own else None,
                op="<=",
                threshold=1.0,
                unit=" ms",
                detail="the cache hit's time minus the plugin's PJRT_Executable_DeserializeAndLoad "
                "(key, file read, envelope checks, executable facts); Cache.stats() in the warm child",
                reference="the plugin's deserialization, timed around the call",
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
