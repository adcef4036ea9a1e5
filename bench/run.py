"""Runs rpjrt's Python benchmarks, merges the Rust benchmark's figures, prints one table of
targets and figures, and writes everything as JSON.

Usage (scripts/bench.sh calls this): python bench/run.py [--smoke] [--strict]
[--rust-json bench/out/rust_execute.json] [--out bench/out/results.json] [--only SUITE,...]

--smoke runs few iterations and judges nothing; --strict exits 1 when a target misses.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as h  # noqa: E402

SUITES = ("execute", "transfer", "process", "session", "compile", "ffi", "spmd", "exec_threads")


def machine() -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        load = os.getloadavg()
    except OSError:
        load = (float("nan"),) * 3
    commit = subprocess.run(
        ["git", "-C", str(h.ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(h.ROOT), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    versions = {"python": platform.python_version()}
    for mod in ("numpy", "jax", "jaxlib"):
        try:
            versions[mod] = __import__(mod).__version__
        except ImportError:
            versions[mod] = None
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "host": platform.node(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "loadavg_at_start": [round(x, 2) for x in load],
        "kernel": platform.release(),
        "commit": commit + ("+dirty" if dirty else ""),
        "versions": versions,
        "env": {k: os.environ.get(k) for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS") if os.environ.get(k)},
    }


def rust_targets(res: h.Results, rust: dict[str, Any] | None) -> None:
    if rust is None:
        res.target(
            "Rust execute + wait vs raw C floor",
            value=None,
            op="<=",
            threshold=1.10,
            unit="x",
            detail="the Rust benchmark did not run",
        )
        res.target(
            "Rust execute_into + wait (no allocation) vs raw C floor",
            value=None,
            op="<=",
            threshold=1.05,
            unit="x",
            detail="the Rust benchmark did not run",
        )
        return
    for name, v in rust["variants"].items():
        res.figure(f"rust.{name}", v["what"], "ns", h.stats(v["samples"]))
    r = rust["ratios"]["rust_execute/floor"]
    res.target(
        "Rust execute + wait vs raw C floor",
        value=h.stats(r["samples"]),
        op="<=",
        threshold=1.10,
        unit="x",
        detail="exe.execute(&[&x, &x]) + out[0].block_until_ready() + drop; "
        f"vs completion-event floor {rust['ratios']['rust_execute/floor_event']['median']:.3f}x",
        reference="raw C floor (faster of the two C sequences per repetition), interleaved",
    )
    into = rust["ratios"].get("rust_execute_into/floor")
    res.target(
        "Rust execute_into + wait (no allocation) vs raw C floor",
        value=None if into is None else h.stats(into["samples"]),
        op="<=",
        threshold=1.05,
        unit="x",
        detail="exe.execute_into(&[&x, &x], &mut outs) + outs[0].block_until_ready(), reusing outs "
        "(tests/zero_alloc.rs: no heap allocation per call with 1, 2 and 8 outputs)",
        reference="raw C floor (faster of the two C sequences per repetition), interleaved",
    )


def fmt_value(t: dict[str, Any]) -> str:
    v = t["value"]
    if v is None:
        return "not measured"
    unit = t["unit"]
    prec = 3 if unit == "x" else 2
    return f"{v['median']:.{prec}f}{unit} [{v['min']:.{prec}f}..{v['max']:.{prec}f}]"


def fmt_figure(f: dict[str, Any]) -> tuple[str, str, str]:
    unit = f["unit"]
    if unit == "ns":
        return h.fmt_time(f["median"]), h.fmt_time(f["min"]), h.fmt_time(f["max"])

    def one(v: float) -> str:
        return f"{v:.0f} {unit}" if abs(v) >= 100 else f"{v:.2f} {unit}"

    return one(f["median"]), one(f["min"]), one(f["max"])


def print_table(results: dict[str, Any], smoke: bool) -> None:
    m = results["machine"]
    print()
    print(f"rpjrt benchmarks ({'smoke: few iterations, no thresholds' if smoke else 'full run'})")
    print(f"  {m['date']}, {m['cpu']} x{m['cpus']}, load {m['loadavg_at_start']}, commit {m['commit']}")
    print(f"  {results['plugin']}")
    print()
    w = max(len(t["target"]) for t in results["targets"]) + 2
    print(f"{'target':<{w}}{'median [min..max]':<30}{'threshold':<12}holds")
    for t in results["targets"]:
        thr = f"{t['op']} {t['threshold']}{t['unit']}"
        holds = "-" if smoke else {True: "yes", False: "NO", None: "n/a"}[t["holds"]]
        print(f"{t['target']:<{w}}{fmt_value(t):<30}{thr:<12}{holds}")
        sub = "; ".join(x for x in (t["detail"], t["reference"] and f"ref: {t['reference']}") if x)
        if sub:
            print(f"{'':<4}{sub}")
    print()
    print(f"{'figure':<28}{'median':>14}{'min':>14}{'max':>14}  what")
    for k, f in results["figures"].items():
        a, b, c = fmt_figure(f)
        print(f"{k:<28}{a:>14}{b:>14}{c:>14}  {f['what']}")
    for n in results["notes"]:
        print(f"note: {n}")
    print()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--strict", action="store_true")
    ap.add_argument("--rust-json", default=str(h.ROOT / "bench/out/rust_execute.json"))
    ap.add_argument("--out", default=str(h.ROOT / "bench/out/results.json"))
    ap.add_argument("--only", default=",".join(SUITES))
    args = ap.parse_args()

    started = time.monotonic()
    res = h.Results()
    rust = None
    if os.path.exists(args.rust_json):
        rust = json.loads(Path(args.rust_json).read_text())
    else:
        res.note(f"no Rust results at {args.rust_json}")
    rust_targets(res, rust)
    if args.smoke:
        res.note("smoke run: few iterations and the debug build of the Rust benchmark; the figures only show that everything runs")

    failed = []
    for suite in [s for s in args.only.split(",") if s]:
        mod = __import__(f"b_{suite}")
        try:
            mod.run(res, smoke=args.smoke, rust=rust)
        except Exception:  # noqa: BLE001 - one failing suite must not hide the others
            failed.append(suite)
            res.note(f"suite {suite} failed:\n{traceback.format_exc()}")

    import rpjrt

    results = {
        "mode": "smoke" if args.smoke else "full",
        "machine": machine(),
        "plugin": f"rpjrt {rpjrt.__version__} on {h.plugin_path('NEW')}",
        "rust": rust,
        "targets": res.targets,
        "figures": res.figures,
        "notes": res.notes,
        "seconds": round(time.monotonic() - started, 1),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    print_table(results, args.smoke)
    print(f"wrote {out} ({results['seconds']} s)")
    if failed:
        print(f"benchmark suites failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    if args.strict and not args.smoke and any(t["holds"] is False for t in res.targets):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
