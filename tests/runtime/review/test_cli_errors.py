"""`python -m runtime` as a person at a terminal meets it, run as a real process: a mistyped
setting, a Redis that is down, a chart it cannot write. Each says what to fix in one line,
never with a traceback, and exits 2 (bad input) or 1 (unavailable)."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.db.local import RedisServer
from tests.support.processes import ROOT


def runtime_cli(*args: str, cwd: Path = ROOT, **environ: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runtime", *args],
        cwd=cwd,
        env={**os.environ, "AGENTS": "runtime.examples:AGENTS", **environ},
        capture_output=True,
        text=True,
        timeout=60,
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.fixture
def stopped_redis(tmp_path: Path) -> str:
    """The URL of a Redis that ran here and was stopped."""
    server = RedisServer(directory=tmp_path / "redis")
    server.start()
    server.stop()
    return server.url


@pytest.mark.parametrize("process", ["runtime", "bot"])
def test_a_redis_url_that_is_not_one_is_a_settings_error(process: str, tmp_path: Path) -> None:
    args = ["audit"] if process == "runtime" else ["worker"]
    done = subprocess.run(
        [sys.executable, "-m", process, *args],
        cwd=ROOT,
        env={
            **os.environ,
            "REDIS_URL": "notaurl",
            "SLACK_BOT_TOKEN": "xoxb-1",
            "SLACK_SIGNING_SECRET": "s",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    [line] = [line for line in done.stderr.splitlines() if "REDIS_URL" in line]
    assert "REDIS_URL is invalid (Redis URL must specify one of the following schemes" in line
    assert line.endswith(
        "Set it to a Redis URL such as redis://localhost:6379/0 (rediss:// for TLS)."
    )


@pytest.mark.parametrize(
    "command",
    [["audit"], ["stats"], ["policy", "backtest", "bot/console/demo_policy.toml"]],
    ids=["audit", "stats", "backtest"],
)
def test_with_redis_down_it_says_so_in_one_line(stopped_redis: str, command: list[str]) -> None:
    done = runtime_cli(*command, REDIS_URL=stopped_redis)
    assert done.returncode == 1
    line = one_line(done)
    assert line.startswith("Redis does not answer ("), line
    assert line.endswith("start it, or set REDIS_URL to where it runs."), line


def test_a_wrong_redis_password_names_the_setting(tmp_path: Path) -> None:
    with RedisServer(directory=tmp_path / "redis", password="right") as server:
        wrong = server.url.replace(":right@", ":wrong@")
        done = runtime_cli("audit", REDIS_URL=wrong)
    assert done.returncode == 2
    line = one_line(done)
    assert line.startswith("Redis refused (") and line.endswith("check REDIS_URL."), line


@pytest.mark.parametrize(
    ("chart", "told"),
    [
        ("no-such-folder/chart.png", "there is no folder no-such-folder. Create it"),
        ("chart.xyz", "cannot draw a .xyz file. End the name in .png"),
        ("chart", "cannot draw a file without an extension"),
    ],
    ids=["missing-folder", "unknown-extension", "no-extension"],
)
def test_a_chart_it_cannot_write_is_one_line_before_anything_is_counted(
    stopped_redis: str, tmp_path: Path, chart: str, told: str
) -> None:
    # Redis is down: the chart's path is checked first, so a typo costs no wait.
    done = runtime_cli("stats", "--chart", chart, cwd=tmp_path, REDIS_URL=stopped_redis)
    assert done.returncode == 2
    line = one_line(done)
    assert line.startswith(f"--chart {chart}: {told}"), line


def test_stats_counts_the_last_7_days_without_since(redis_url: str, prefix: str) -> None:
    done = runtime_cli("stats", REDIS_URL=redis_url, REDIS_KEY_PREFIX=prefix)
    assert done.returncode == 0, done.stderr
    week_ago = dt.datetime.now(dt.UTC) - dt.timedelta(days=7)
    assert done.stdout.startswith(f"No tool call asked anyone since {week_ago.date()}T")
