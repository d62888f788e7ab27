"""One worker at a real model's pace: throughput and memory against WORKER_CONCURRENCY.

    .venv/bin/python -m bench.concurrency [--latency 1.0] [--jitter 0.5] [--levels 1,2,...,256]
        [--chart]

One real `worker` process (the Procfile's), a fake model that answers each request after
`--latency` seconds on average (each answer takes latency x uniform(1 - jitter, 1 + jitter):
real models vary, and a constant time would keep runs released together in lockstep, their CPU
work bunched on the worker's one event loop, which steady traffic never does; `--jitter 0` shows
that burst), and runs that need no approval (one model call, then the answer). For each
`WORKER_CONCURRENCY` the worker is paused (SIGSTOP) while the web queues the runs, so the figure
is the worker's alone, not the web's enqueue rate; then it is let go, and runs/s is taken in
the steady middle of the batch (between the answers of its first and last tenth; the whole
batch's rate, release to last answer, is printed too). The target is 90% of min(concurrency /
latency, the CPU-bound rate), where the CPU-bound rate is the same worker's right after, with an
instant model: on a shared
machine the CPU a process gets changes by the minute, so each level is compared with what it
could do then. Memory per in-flight run is the worker's peak RSS under load minus its idle RSS,
over the runs in flight. The worker's CPU time per run and its share of a core tell whether it
was CPU-bound (and whether the machine's other load took the rest).

The worker runs at niceness 0 here (`WORKER_NICENESS=0`): the machine is shared, and a worker
that yields to every other process would measure the neighbours.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import random
import signal
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from bench.charts import conditions, line_chart, load_average
from bench.harness import answer_at_once, deployment, header, poll_until
from tests.support.deployment import Deployment
from tests.support.fake_openai import ModelRequest, Reply, Script
from tests.support.processes import Process

LEVELS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
SENDERS = 16
INSTANT_RUNS = 200
INSTANT_ROUNDS = 8
"""Rounds of the slots in the instant batch. With two (as before), the steady middle of 256
slots was their ramp: every slot's first step at once, then a burst of answers, a rate
(142 runs/s at 11.8 ms of CPU each) that one core cannot keep."""
"""Slash commands in flight at once while the queue is filled."""


@dataclass(frozen=True)
class Batch:
    """One load: `runs` queued while the worker was paused, then let go."""

    runs: int
    rate: float
    """Runs finished per second in the steady middle: between the answers of the first and the
    last tenth. The first round's start and the last round's stragglers (with varying model
    times, the slowest slot's sum of them) say nothing about the rate a busy worker keeps."""
    whole_rate: float
    """Runs over the whole batch, from the worker's release to the last answer."""
    cpu_seconds: float
    """The worker's CPU time (user + system) over the batch."""
    wall_seconds: float
    peak_rss_mb: float
    load: str

    @property
    def cpu_ms_per_run(self) -> float:
        return self.cpu_seconds * 1000 / self.runs

    @property
    def cpu_share(self) -> float:
        """Of one core: below 100% while CPU-bound means the machine's other load took it."""
        return self.cpu_seconds / self.wall_seconds * 100


@dataclass(frozen=True)
class Level:
    concurrency: int
    latency: float
    paced: Batch
    """At the model's pace."""
    instant: Batch
    """The same worker right after, with an instant model: the CPU-bound rate here and now."""
    idle_rss_mb: float

    @property
    def ideal(self) -> float:
        return min(self.concurrency / self.latency, self.instant.rate)

    @property
    def share(self) -> float:
        return self.paced.rate / self.ideal * 100

    @property
    def kib_per_run(self) -> float:
        in_flight = min(self.paced.runs, self.concurrency)
        return (self.paced.peak_rss_mb - self.idle_rss_mb) * 1024 / in_flight


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def answer_times(running: Deployment, since: float) -> list[float]:
    """When each run's answer reached Slack (the instant script answers "done")."""
    return sorted(
        call.at
        for call in list(running.slack.calls)
        if call.method == "chat.postMessage"
        and call.at >= since
        and str(call.args.get("text", "")).startswith("done")
    )


async def queue_runs(running: Deployment, runs: int) -> None:
    slots = asyncio.Semaphore(SENDERS)

    async def send(number: int) -> None:
        async with slots:
            status, _ = await running.sender.command(f"say hello ({number})")
            assert status == 200, status

    async with asyncio.TaskGroup() as group:
        for number in range(runs):
            group.create_task(send(number))


@contextlib.asynccontextmanager
async def paused(worker: Process) -> AsyncIterator[None]:
    worker.signal(signal.SIGSTOP)
    try:
        yield
    finally:
        worker.signal(signal.SIGCONT)


def paced_model(latency: float, jitter: float) -> Script:
    """An instant answer, sent after `latency` seconds give or take `jitter` of it."""

    async def answer(request: ModelRequest) -> Reply:
        await asyncio.sleep(latency * random.uniform(1 - jitter, 1 + jitter))
        return answer_at_once(request)

    return answer


async def batch(running: Deployment, worker: Process, runs: int, model: Script) -> Batch:
    running.model.script = model
    pid = worker.popen.pid
    async with paused(worker):
        await queue_runs(running, runs)
        released = time.time()
        cpu_before = cpu_seconds(pid)
    peak = rss_mb(pid)

    def finished() -> bool:
        nonlocal peak
        peak = max(peak, rss_mb(pid))
        return len(answer_times(running, released)) >= runs

    await poll_until(finished, 600, "answers", every=0.1)
    times = answer_times(running, released)[:runs]
    last = times[-1]
    return Batch(
        runs=runs,
        rate=steady_rate(times),
        whole_rate=runs / (last - released),
        cpu_seconds=cpu_seconds(pid) - cpu_before,
        wall_seconds=last - released,
        peak_rss_mb=peak,
        load=load_average(),
    )


async def measure(
    concurrency: int, latency: float, jitter: float, seconds: float, cpu_hint: float
) -> Level:
    async with deployment(
        workers=1,
        WORKER_CONCURRENCY=str(concurrency),
        WORKER_NICENESS="0",
        # The product's default: the tests' 1 s would hand jobs over whenever the event loop
        # of a loaded worker is late with a heartbeat.
        JOB_IDLE_TIMEOUT_SECONDS="30",
    ) as running:
        worker = running.processes[-1]
        await asyncio.sleep(1.0)  # the warm-up run's last writes
        idle = rss_mb(worker.popen.pid)
        runs = runs_for(concurrency, latency, cpu_hint, seconds)
        paced = await batch(running, worker, runs, paced_model(latency, jitter))
        instant_runs = max(INSTANT_RUNS, INSTANT_ROUNDS * concurrency)
        instant = await batch(running, worker, instant_runs, answer_at_once)
        return Level(concurrency, latency, paced, instant, idle)


def steady_rate(times: list[float]) -> float:
    """Answers per second between the first tenth's last answer and the last tenth's first."""
    first, last = len(times) // 10, len(times) - 1 - len(times) // 10
    return (last - first) / (times[last] - times[first])


def runs_for(concurrency: int, latency: float, cpu_rate: float, seconds: float) -> int:
    """Enough runs to keep every slot busy for `seconds` at the rate to expect (at least 4
    rounds of the slots, so the first and last round's ramps weigh little)."""
    expected = min(concurrency / latency, cpu_rate)
    return max(4 * concurrency, math.ceil(expected * seconds), 8)


TABLE_HEAD = (
    "| conc | runs | runs/s | (whole batch) | CPU-bound runs/s | target | % of ideal "
    "| KiB/run in flight "
    "| worker CPU ms/run (instant) | worker CPU % of a core (instant) | load avg |\n"
    "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def row(level: Level) -> str:
    paced = level.paced
    verdict = "" if level.share >= 90 else " BELOW"
    return (
        f"| {level.concurrency} | {paced.runs} | {paced.rate:.2f} | ({paced.whole_rate:.2f}) "
        f"| {level.instant.rate:.1f} "
        f"| {0.9 * level.ideal:.2f} | {level.share:.0f}%{verdict} | {level.kib_per_run:.0f} "
        f"| {paced.cpu_ms_per_run:.1f} ({level.instant.cpu_ms_per_run:.1f}) "
        f"| {paced.cpu_share:.0f}% ({level.instant.cpu_share:.0f}%) | {paced.load} |"
    )


async def measure_all(args: argparse.Namespace) -> None:
    print(
        f"\nmodel latency {args.latency:g} s (+-{args.jitter:.0%}); ideal = min(concurrency / "
        "latency, the CPU-bound rate: the same worker with an instant model, measured right "
        "after); target = 90% of it"
        f"\n{TABLE_HEAD}",
        flush=True,
    )
    levels: list[Level] = []
    cpu_hint = args.cpu_hint
    for concurrency in args.levels:
        level = await measure(concurrency, args.latency, args.jitter, args.seconds, cpu_hint)
        cpu_hint = level.instant.rate
        levels.append(level)
        print(row(level), flush=True)
    if args.chart:
        draw(levels, args.latency, args.jitter)


def draw(levels: list[Level], latency: float, jitter: float) -> None:
    ideal: list[tuple[float, float]] = [(level.concurrency, level.ideal) for level in levels]
    line_chart(
        "concurrency.png" if jitter else "concurrency_lockstep.png",
        f"One worker, a {latency:g} s model: throughput against WORKER_CONCURRENCY",
        "WORKER_CONCURRENCY",
        "runs per second",
        {
            f"measured (model {latency:g} s +-{jitter:.0%})": [
                (level.concurrency, level.paced.rate) for level in levels
            ],
            "ideal: min(concurrency / latency, CPU-bound rate)": ideal,
            "target: 90% of ideal": [(x, 0.9 * y) for x, y in ideal],
            "CPU-bound rate (instant model)": [
                (level.concurrency, level.instant.rate) for level in levels
            ],
        },
        logx=True,
        logy=True,
        note=conditions(),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=1.0, help="model answer time, s")
    parser.add_argument("--jitter", type=float, default=0.5, help="latency's spread, 0-1")
    parser.add_argument("--levels", default=",".join(map(str, LEVELS)))
    parser.add_argument("--seconds", type=float, default=10.0, help="load per level, about")
    parser.add_argument(
        "--cpu-hint", type=float, default=50.0, help="CPU-bound runs/s to size the first load"
    )
    parser.add_argument("--chart", action="store_true", help="draw bench/concurrency.png")
    args = parser.parse_args()
    args.levels = [int(level) for level in args.levels.split(",")]
    header(
        "worker concurrency at a real model's pace",
        f".venv/bin/python -m bench.concurrency --latency {args.latency:g} "
        f"--jitter {args.jitter:g} "
        f"--levels {','.join(map(str, args.levels))} --seconds {args.seconds:g}"
        + (" --chart" if args.chart else ""),
    )
    asyncio.run(measure_all(args))


if __name__ == "__main__":
    main()
