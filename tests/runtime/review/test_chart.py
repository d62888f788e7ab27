"""`runtime stats --chart`: a period without decisions reads as such, not as broken axes."""

from __future__ import annotations

from pathlib import Path

from runtime.review.chart import NO_DATA, chart, draw
from runtime.review.stats import ChannelStats, ToolStats


def texts(figure: object) -> list[str]:
    return [text.get_text() for axes in figure.axes for text in axes.texts]  # type: ignore[attr-defined]


def test_a_period_without_decisions_says_so_on_a_blank_chart(tmp_path: Path) -> None:
    expired_only = ChannelStats(tools={"delete_user": ToolStats(asked=1)})
    for channels in ({}, {"C1": expired_only}):
        figure, drawn = chart(channels, "Time to decide per tool, since 2026-12-01")
        [axes] = figure.axes
        assert drawn == 0
        assert texts(figure) == [NO_DATA] == ["no data in this period"]
        assert not axes.axison, "no empty log axes"
        assert axes.get_title() == "Time to decide per tool, since 2026-12-01"
    assert draw({}, tmp_path / "empty.png", "t") == 0
    assert (tmp_path / "empty.png").read_bytes().startswith(b"\x89PNG")


def test_decisions_are_drawn_on_a_log_axis() -> None:
    decided = ChannelStats(tools={"delete_user": ToolStats(asked=2, waits=[1.5, 30.0])})
    figure, drawn = chart({"C1": decided}, "t")
    [axes] = figure.axes
    assert drawn == 1 and axes.axison and axes.get_yscale() == "log"
    assert NO_DATA not in texts(figure)
