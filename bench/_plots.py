"""Sweep plots of the benchmark (PNG through matplotlib's Agg backend; no display needed).

    plot_sweep("bench/out/spmd_devices.png", "8-device call", "devices",
               {"rpjrt": [(1, 40.0), (8, 90.0)], "JAX": [(1, 60.0), (8, 150.0)]})

`series` maps a legend label to (x, y) points. matplotlib is needed by the benchmark only:
without it `plot_sweep` draws nothing and returns None (the tables still print).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path


def plot_sweep(
    path_png: str | Path,
    title: str,
    x_label: str,
    series: Mapping[str, Sequence[tuple[float, float]]],
    log_x: bool = True,
    log_y: bool = True,
    *,
    y_label: str = "time per call (µs)",
) -> Path | None:
    """One line per series (label -> [(x, y), ...], drawn sorted by x) into `path_png`;
    the x values of the points are the ticks. Returns the path, or None without matplotlib
    or points."""
    try:
        import matplotlib
    except ImportError:
        return None
    if not any(series.values()):
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, ax = plt.subplots(figsize=(7, 4.3), dpi=110)
    xs: set[float] = set()
    for i, (label, points) in enumerate(series.items()):
        pts = sorted((float(x), float(y)) for x, y in points)
        if not pts:
            continue
        xs.update(x for x, _ in pts)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="osD^v<>"[i % 7], label=label)
    if log_x:
        ax.set_xscale("log", base=2)
    if log_y:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    ax.set_xticks(sorted(xs))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.set_title(title)
    ax.grid(True, alpha=0.35)
    ax.legend(fontsize=8)
    fig.tight_layout()
    out = Path(path_png)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out
