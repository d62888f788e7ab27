"""`python -m runtime stats --chart FILE.png`: time to decide per tool, drawn as box plots
(median, quartiles, the fastest and the slowest), one box per tool, most decided first.

matplotlib comes with the `bench` extra (`pip install -e '.[bench]'`); without it the chart is
not drawn and the error says how to get it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.review.stats import ChannelStats

if TYPE_CHECKING:
    from matplotlib.figure import Figure

INSTALL = "The chart needs matplotlib: pip install -e '.[bench]' (or pip install matplotlib)."


class ChartUnavailable(Exception):
    """matplotlib is not installed, or the chart cannot be written where asked; the message
    says what to do, in one line."""


def check_path(path: Path) -> None:
    """Before anything is counted: that `path`'s folder exists and its extension names a
    format matplotlib draws (`.png`, `.svg`, `.pdf`, ...)."""
    folder = path.parent
    if not folder.is_dir():
        raise ChartUnavailable(
            f"--chart {path}: there is no folder {folder}. Create it, or name a file in a "
            "folder that exists."
        )
    formats = _formats()
    suffix = path.suffix.lower().removeprefix(".")
    if suffix not in formats:
        given = f"a .{suffix} file" if suffix else "a file without an extension"
        raise ChartUnavailable(
            f"--chart {path}: cannot draw {given}. End the name in .png (or .svg, .pdf, .jpg: "
            "a format matplotlib draws)."
        )


def _formats() -> set[str]:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
    except ImportError:
        raise ChartUnavailable(INSTALL) from None
    return set(FigureCanvasAgg.get_supported_filetypes())


def waits_per_tool(channels: Mapping[str, ChannelStats]) -> dict[str, list[float]]:
    """Every channel's times to decide, per tool, most decisions first."""
    merged: dict[str, list[float]] = {}
    for stats in channels.values():
        for name, tool in stats.tools.items():
            merged.setdefault(name, []).extend(tool.waits)
    return dict(sorted(merged.items(), key=lambda item: (-len(item[1]), item[0])))


NO_DATA = "no data in this period"


def draw(channels: Mapping[str, ChannelStats], path: Path, title: str) -> int:
    """Draw the chart into `path` (PNG); the number of tools drawn (those with decisions)."""
    figure, drawn = chart(channels, title)
    try:
        figure.savefig(path, dpi=120)
    except OSError as error:
        raise ChartUnavailable(f"--chart {path}: cannot write it ({error.strerror}).") from None
    finally:
        _pyplot().close(figure)
    return drawn


def chart(channels: Mapping[str, ChannelStats], title: str) -> tuple[Figure, int]:
    """The figure `draw` saves: a box per tool, or, with no decision to draw, the title and
    `NO_DATA` on a blank page (not empty axes on a log scale, which read as a broken chart)."""
    pyplot = _pyplot()
    # A log axis has no 0: a decision within 10 ms is drawn at 10 ms.
    waits = {
        name: [max(wait, 0.01) for wait in found]
        for name, found in waits_per_tool(channels).items()
        if found
    }
    figure: Figure
    figure, axes = pyplot.subplots(figsize=(max(6.0, 1.2 + 0.9 * len(waits)), 4.5))
    axes.set_title(title)
    if waits:
        # Whiskers from the fastest to the slowest: no decision is drawn as an outlier.
        axes.boxplot(list(waits.values()), whis=(0, 100))
        axes.set_xticks(range(1, len(waits) + 1), labels=list(waits), rotation=30, ha="right")
        axes.set_yscale("log")
        axes.set_ylabel("seconds from asking to the decision (log)")
    else:
        axes.set_axis_off()
        axes.text(0.5, 0.5, NO_DATA, ha="center", va="center", transform=axes.transAxes)
    figure.tight_layout()
    return figure, len(waits)


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display: a file only
        from matplotlib import pyplot
    except ImportError:
        raise ChartUnavailable(INSTALL) from None
    return pyplot
