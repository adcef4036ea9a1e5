"""Sharded calls against JAX driving the same plugin, and how a call's cost grows.

Target:
- an 8-device SPMD call + wait through a prepared call (`exe.prepare(lists)`, then `call()`:
  no per-device argument lists rebuilt, one wait for every device) vs JAX's jitted sharded call +
  `block_until_ready()` on the same plugin and the same 8 devices: <= 0.6x

Sweeps (rpjrt prepared call, rpjrt plain call, JAX; one program per point, interleaved):
arguments 1/8/64/256, outputs 1/8/32, devices 1/2/4/8. Each sweep is a table (figures
`spmd.<sweep>.<x>.<variant>`, and bench/out/spmd_sweeps.md) and a plot
(bench/out/spmd_<sweep>.png, when matplotlib is installed). The smoke run measures one point
of each sweep.

Everything is measured in a child process (_spmd_child.py), where JAX loads the plugin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import _harness as h

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "_spmd_child.py")
OUT = os.path.join(HERE, "out")

LABELS = {
    "rpjrt_prepared": "rpjrt prepared call",
    "rpjrt_plain": "rpjrt plain call",
    "jax": "JAX jit",
}
WHAT = {
    "rpjrt_prepared": "rpjrt: call = exe.prepare(lists); call() (executes, one wait for every device)",
    "rpjrt_plain": "rpjrt: exe(*args) / exe.execute_sharded(lists) + block_until_ready() per output",
    "jax": "JAX: jax.block_until_ready(jit(f)(*args)) on the same plugin",
    "c_floor": "raw C floor: one Execute for every device + each device's first output awaited + destroys",
    "py_floor": "Python floor: one raw C floor iteration per Python call",
}
SWEEP_TITLES = {
    "args": ("arguments (f32[8] each, summed, 1 device)", "arguments"),
    "outputs": ("outputs (of one f32[8] argument, 1 device)", "outputs"),
    "devices": ("devices (a * b + 1, f32[8] per device)", "devices"),
}


def run(res: h.Results, *, smoke: bool, rust: Any = None) -> None:
    name = "8-device SPMD call + wait: rpjrt prepared call vs JAX on the same plugin"
    try:
        import jax  # noqa: F401
    except ImportError:
        res.note("jax is not installed: the sharded-call benchmark needs it")
        res.target(name, value=None, op="<=", threshold=0.6, unit="x", detail="jax not installed")
        return
    proc = subprocess.run(
        [sys.executable, CHILD, *(["--smoke"] if smoke else [])],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{CHILD} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    jv = data["jax"]

    t = data["call8"]
    for k, v in t.items():
        res.figure(f"spmd.call8.{k}", f"8 devices: {WHAT[k]}", "ns", h.stats(v))
    cpu = data["call8_cpu"]
    cpu_ratio = h.paired(cpu["rpjrt_prepared"], cpu["jax"])
    res.figure(
        "spmd.call8.cpu_vs_jax",
        "8 devices: process CPU time per call (all threads), prepared call / JAX, per repetition",
        "x",
        cpu_ratio,
    )
    res.target(
        name,
        value=h.paired(t["rpjrt_prepared"], t["jax"]),
        op="<=",
        threshold=0.6,
        unit="x",
        detail=f"a * b + 1, f32[64] split over 8 CPU devices (PJRT 0.115 plugin); on process CPU "
        f"time {cpu_ratio['median']:.3f}x; execute_sharded + per-output waits: "
        f"{h.paired(t['rpjrt_plain'], t['jax'])['median']:.3f}x",
        reference=f"JAX {jv} loading the same plugin (8 devices), same process, interleaved",
    )
    if "c_floor" in t:
        # What no client can go under: the plugin's own cost of the call, against JAX.
        for key, what, a, b in (
            ("c_floor_vs_jax", "raw C floor / JAX (the least item 4's ratio can be)", "c_floor", "jax"),
            ("py_floor_vs_jax", "Python floor / JAX (the least a Python call's ratio can be)", "py_floor", "jax"),
            ("prepared_vs_c_floor", "prepared call / raw C floor", "rpjrt_prepared", "c_floor"),
        ):
            res.figure(f"spmd.call8.{key}", f"8 devices: {what}, per repetition", "x", h.paired(t[a], t[b]))
    res.figure(
        "spmd.call8.plain_vs_jax",
        "8 devices: execute_sharded + per-output waits / JAX, per repetition",
        "x",
        h.paired(t["rpjrt_plain"], t["jax"]),
    )

    lines = [f"Sweeps: median time per call + wait, µs (JAX {jv} on the same plugin).", ""]
    for kind, points in data["sweeps"].items():
        title, x_label = SWEEP_TITLES[kind]
        series: dict[str, list[tuple[float, float]]] = {LABELS[v]: [] for v in LABELS}
        lines += [f"{title}:", "", f"| {x_label} | " + " | ".join(LABELS.values()) + " | prepared / JAX |"]
        lines.append("|---:|" + "---:|" * (len(LABELS) + 1))
        for x, samples in points.items():
            row = []
            for v, s in samples.items():
                st = h.stats(s)
                res.figure(f"spmd.{kind}.{x}.{v}", f"{x} {x_label}: {WHAT[v]}", "ns", st)
                series[LABELS[v]].append((float(x), st["median"] / 1e3))
                row.append(f"{st['median'] / 1e3:.1f}")
            ratio = h.paired(samples["rpjrt_prepared"], samples["jax"])["median"]
            lines.append(f"| {x} | " + " | ".join(row) + f" | {ratio:.2f}x |")
        lines.append("")
        if not smoke:
            try:
                from _plots import plot_sweep

                png = plot_sweep(
                    os.path.join(OUT, f"spmd_{kind}.png"),
                    f"Call + wait vs {x_label} (PJRT 0.115 CPU plugin)",
                    x_label,
                    series,
                    log_x=True,
                    log_y=True,
                    y_label="time per call + wait (µs)",
                    x_format=lambda v: f"{v:g}",
                )
            except Exception as e:  # noqa: BLE001 - a plot must not lose the figures
                png = None
                res.note(f"spmd {kind} plot failed: {e}")
            if png is None:
                res.note(f"spmd {kind}: no plot drawn (matplotlib missing?)")
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "spmd_sweeps.md"), "w") as f:
        f.write("\n".join(lines))
    res.note("\n".join(lines))
