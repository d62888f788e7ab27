"""The benchmarks' pictures: one line chart per figure, written as a PNG beside the bench.

    from bench.charts import line_chart
    line_chart(path, "title", "x", "y", {"series": [(x, y), ...]}, logx=True)

matplotlib is the `bench` extra (`pip install -e .[bench]`); it is imported here only. Figures
are built without pyplot, so no display and no global state: a bench draws the same on a laptop,
a server or in CI.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from bench.harness import machine

Series = Mapping[str, Sequence[tuple[float, float]]]
"""Name -> (x, y) points; drawn in order of x."""
BENCH = Path(__file__).resolve().parent
PLAIN = FuncFormatter(lambda value, _position: f"{value:g}")
"""Log axes labelled 1, 2, 64, 0.5 rather than 10^0 or 1.0."""
NO_LABEL = NullFormatter()


def load_average() -> str:
    """The machine's load average over the last minute."""
    return Path("/proc/loadavg").read_text().split()[0]


def conditions() -> str:
    """The machine and its load average now (at the end of a run, so the 5-minute figure
    covers most of it), for a chart's `note`: the machine may be shared."""
    one, five, _fifteen = Path("/proc/loadavg").read_text().split()[:3]
    return f"{machine()}; load average at the end {one} (1 min), {five} (5 min)"


def line_chart(
    path: str | Path,
    title: str,
    xlabel: str,
    ylabel: str,
    series: Series,
    *,
    logx: bool = False,
    logy: bool = False,
    note: str = "",
    limits: Mapping[str, float] | None = None,
) -> Path:
    """Draw each series as a line with markers; returns the path written.

    A relative `path` lands in bench/. `note` (the machine, the load average) goes under the
    title in small type, because a figure without its conditions misleads. `limits` are drawn
    as dashed horizontal lines (Slack's 3 s, a target).
    """
    target = Path(path)
    if not target.is_absolute():
        target = BENCH / target
    figure = Figure(figsize=(7.5, 4.5), dpi=110, layout="tight")
    axes = figure.subplots()
    for name, points in series.items():
        ordered = sorted(points)
        axes.plot([x for x, _ in ordered], [y for _, y in ordered], marker="o", label=name)
    for name, value in (limits or {}).items():
        axes.axhline(value, linestyle="--", color="grey", label=name)
    if logx:
        axes.set_xscale("log", base=2)
        # Ticks where the measurements are (25, 50, 100…), not at the powers of two between.
        axes.set_xticks(sorted({x for points in series.values() for x, _ in points}))
        axes.xaxis.set_major_formatter(PLAIN)
        axes.xaxis.set_minor_formatter(NO_LABEL)
    if logy:
        axes.set_yscale("log")
        axes.yaxis.set_major_formatter(PLAIN)
    axes.set_title(title + (f"\n{note}" if note else ""), fontsize=10 if note else 11)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(True, which="both", alpha=0.3)
    if len(series) + len(limits or {}) > 1:
        axes.legend()
    figure.savefig(target)
    print(f"chart: {target}", flush=True)
    return target
