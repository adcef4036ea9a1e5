"""Curve figures of benchmark sweeps (PNG, matplotlib's Agg backend, no display needed).

One function draws every sweep plot of the benchmark, so they look alike:

    from _plots import plot_sweep, fmt_bytes
    plot_sweep(
        "bench/out/transfer_put.png",
        "host -> device copy",
        "bytes",
        {"rpjrt put": [(4096, 3.1), (65536, 9.8), ...], "jax device_put": [...]},
        y_label="GB/s",
        log_y=False,
        x_format=fmt_bytes,
    )

`series` maps a legend label to (x, y) points (any order; drawn sorted by x); colours and
markers follow the order of the labels, and `styles` fixes a line's look where it matters
(e.g. {"memcpy (warm)": {"linestyle": "--", "color": "black"}}). matplotlib is a
bench-only dependency (scripts/bench.sh installs it into the bench venv); without it
`plot_sweep` returns None and draws nothing, so the tables still come out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any


def fmt_bytes(n: float) -> str:
    """A byte count as a short power-of-two label: 4 KiB, 64 MiB, 1 GiB."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            v = n / (1 << shift)
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{n:.0f} B"


def have_matplotlib() -> bool:
    """Whether plots can be drawn here."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def plot_sweep(
    path_png: str | Path,
    title: str,
    x_label: str,
    series: Mapping[str, Sequence[tuple[float, float]]],
    log_x: bool = True,
    log_y: bool = True,
    *,
    y_label: str = "time per call (µs)",
    x_format: Callable[[float], str] | None = None,
    styles: Mapping[str, Mapping[str, Any]] | None = None,
    note: str = "",
) -> Path | None:
    """Draws one line per entry of `series` (label -> [(x, y), ...]) into `path_png`.

    `log_x`/`log_y` pick logarithmic axes; `x_format` labels the x ticks (the x values of
    the points become the ticks), e.g. `fmt_bytes`; `styles` passes matplotlib line
    keywords per label; `note` is a line of small text under the axes (machine, load).
    Returns the path written, or None when matplotlib is missing or no series has points.
    """
    if not have_matplotlib() or not any(series.values()):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, ax = plt.subplots(figsize=(7.5, 4.6), dpi=110)
    markers = "osD^v<>ph*"
    xs_all: set[float] = set()
    for i, (label, points) in enumerate(series.items()):
        pts = sorted((float(x), float(y)) for x, y in points)
        if not pts:
            continue
        xs_all.update(x for x, _ in pts)
        style: dict[str, Any] = {"marker": markers[i % len(markers)], "markersize": 4, "linewidth": 1.6}
        style.update((styles or {}).get(label, {}))
        ax.plot([x for x, _ in pts], [y for _, y in pts], label=label, **style)
    if log_x:
        ax.set_xscale("log", base=2 if x_format is fmt_bytes else 10)
    if log_y:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    if x_format is not None and xs_all:
        ticks = sorted(xs_all)
        ax.set_xticks(ticks)
        ax.set_xticklabels([x_format(t) for t in ticks], rotation=30, ha="right")
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.set_title(title)
    ax.grid(True, which="major", alpha=0.35)
    ax.legend(fontsize=8, loc="best")
    if note:
        fig.text(0.01, 0.01, note, fontsize=7, alpha=0.7)
    fig.tight_layout(rect=(0, 0.03 if note else 0, 1, 1))
    out = Path(path_png)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out
