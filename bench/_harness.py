"""Timing helpers shared by rpjrt's benchmarks (standard library only).

Every comparison is measured in one process and interleaved: each repetition runs every
variant once, in an order that rotates between repetitions, so that the noise of a busy
machine hits all variants alike. Figures are summarised as the median over repetitions,
with min and max; ratios are taken per repetition (variant / reference of the same
repetition) and then summarised the same way.
"""

from __future__ import annotations

import gc
import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "crates" / "rpjrt" / "tests" / "fixtures"
MUL_ADD = (FIXTURES / "mul_add.mlir").read_text()
MIB = 1 << 20


def plugin_path(which: str = "NEW") -> str:
    """The test plugin's path: $RPJRT_TEST_PLUGIN_<which>, else .deps/plugins.env."""
    var = f"RPJRT_TEST_PLUGIN_{which}"
    if os.environ.get(var):
        return os.environ[var]
    env = ROOT / ".deps" / "plugins.env"
    for line in env.read_text().splitlines():
        if line.startswith(var + "="):
            return line.split("=", 1)[1].strip().strip('"')
    raise SystemExit(f"{var} is not set and {env} has no {var}= line: run scripts/setup.sh")


def stats(samples: Sequence[float]) -> dict[str, Any]:
    """Median, min, max of `samples` (and the samples)."""
    return {
        "median": statistics.median(samples),
        "min": min(samples),
        "max": max(samples),
        "n": len(samples),
        "samples": list(samples),
    }


def paired(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """Per-repetition ratios a[i] / b[i], summarised."""
    return stats([x / y for x, y in zip(a, b)])


def interleaved(
    variants: Mapping[str, Callable[[int], Any]],
    *,
    reps: int,
    iters: int,
    warmup: int | None = None,
) -> dict[str, list[float]]:
    """Runs each `variants[name](n)` (which must do `n` iterations) `reps` times, rotating
    the order; returns the nanoseconds per iteration of each repetition by name.

    The garbage collector is off while a variant runs (as `timeit` does).
    """
    names = list(variants)
    out: dict[str, list[float]] = {n: [] for n in names}
    for n in names:
        variants[n](warmup if warmup is not None else max(1, iters // 4))
    gc_was = gc.isenabled()
    try:
        for rep in range(reps):
            for k in range(len(names)):
                name = names[(rep + k) % len(names)]
                gc.collect()
                gc.disable()
                t0 = time.perf_counter_ns()
                variants[name](iters)
                t1 = time.perf_counter_ns()
                if gc_was:
                    gc.enable()
                out[name].append((t1 - t0) / iters)
    finally:
        if gc_was:
            gc.enable()
    return out


def fmt_time(ns: float) -> str:
    """A duration in ns as a short human string."""
    if ns < 1e3:
        return f"{ns:.0f} ns"
    if ns < 1e6:
        return f"{ns / 1e3:.2f} µs"
    if ns < 1e9:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e9:.2f} s"


class Results:
    """What one benchmark run found: figures (measurements) and targets (checks)."""

    def __init__(self) -> None:
        self.figures: dict[str, dict[str, Any]] = {}
        self.targets: list[dict[str, Any]] = []
        self.notes: list[str] = []

    def figure(self, key: str, what: str, unit: str, summary: Mapping[str, Any]) -> None:
        """Records a measurement (summary from `stats`), `unit` e.g. "ns" or "GiB/s"."""
        self.figures[key] = {"what": what, "unit": unit, **summary}

    def target(
        self,
        name: str,
        *,
        value: Mapping[str, Any] | None,
        op: str,
        threshold: float,
        unit: str,
        detail: str,
        reference: str = "",
    ) -> None:
        """Records a target: `value` (a `stats` summary, judged on its median) `op`
        ("<=" or ">=") `threshold`. `value` None means it could not be measured."""
        if value is None:
            holds = None
        elif op == "<=":
            holds = value["median"] <= threshold
        else:
            holds = value["median"] >= threshold
        self.targets.append(
            {
                "target": name,
                "op": op,
                "threshold": threshold,
                "unit": unit,
                "value": None if value is None else {k: value[k] for k in ("median", "min", "max", "n")},
                "holds": holds,
                "detail": detail,
                "reference": reference,
            }
        )

    def note(self, text: str) -> None:
        """A remark printed under the table (e.g. a fallback that was used)."""
        self.notes.append(text)
