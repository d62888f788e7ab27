"""What Countersign costs in Redis commands: idle, and per approval round trip.

    .venv/bin/python -m bench.redis_cost [--seconds 30] [--runs 100] [--save FILE] [--chart]
        [--cluster]

Managed Redis plans bill per command, and Redis counts a script's own calls as commands too
(`INFO commandstats`, `total_commands_processed`), so this counts the way the bill does: every
command Redis executed, an `EVALSHA` and each command inside it alike. A private Redis, a fake
Slack and an instant fake model here; the Procfile's `web` and one `worker` as real processes,
with the production defaults (`JOB_IDLE_TIMEOUT_SECONDS=30`, `REMINDER_AT=0.5`).

- idle: nothing to do for `--seconds`; commands per second of each process;
- per approval: `--runs` round trips one after the other (slash command -> card -> Approve ->
  resume -> answer), background polling included; commands per round trip.

With `--cluster`, the same windows on a three-primary Redis Cluster, counted on every node with
`INFO commandstats` (totals only: there is no one `MONITOR` for a cluster).

With `--home-viewers` the requester and the approver have opened the app's Home tab first, so
the web process republishes their tabs on every change (what a team that uses the tab pays).

`MONITOR` attributes each command to the process whose connection sent it (the client port,
looked up in /proc) and a script's inner commands to the script, named by its SHA1 among the
scripts the code defines. `INFO commandstats` is the cross-check. `--save` writes the figures as
JSON; `--chart` draws bench/redis_cost.png from `--before` (figures saved by this bench on main's
commit before the change) beside this run's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import importlib
import json
import os
import pkgutil
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

from bench.harness import add_cluster_option, approve_then_answer, header
from runtime.db.local import RedisServer
from runtime.db.lua import Script
from tests.support.deployment import Deployment
from tests.support.processes import Process
from tests.support.redis_cluster import LocalCluster

HERE = Path(__file__).resolve().parent
CHART = HERE / "redis_cost.png"
BEFORE = HERE / "redis_cost.before.json"
# The production defaults, where the test deployment shortens them.
PRODUCTION_ENV = {"JOB_IDLE_TIMEOUT_SECONDS": "30", "REMINDER_AT": "0.5"}
BENCH = "bench"
# Commands the bench itself sends (INFO for the cross-check, MONITOR to watch).
OWN = {"info", "monitor", "client|list", "client"}


def script_names() -> dict[str, str]:
    """SHA1 -> `module.NAME` (or `module.NAME[key]`) of every Lua script the code defines."""
    names: dict[str, str] = {}
    for package in ("runtime", "bot"):
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, f"{package}."):
            if info.name.endswith("__main__"):
                continue
            try:
                module = importlib.import_module(info.name)
            except Exception:  # noqa: BLE001 -- an optional module (playwright, ...) is skipped
                continue
            for attr, value in vars(module).items():
                candidates = value.items() if isinstance(value, dict) else [("", value)]
                for key, item in candidates:
                    # A declared script (`runtime.db.lua.Script`) is named by its source.
                    text = item.source if isinstance(item, Script) else item
                    if isinstance(text, str) and "redis.call" in text:
                        label = f"{info.name.split('.')[-1]}.{attr}" + (f"[{key}]" if key else "")
                        names.setdefault(hashlib.sha1(text.encode()).hexdigest(), label)
    return names


def _socket_owners(pids: dict[int, str]) -> dict[int, str]:
    """Local TCP port -> process name, for the connections of `pids`."""
    inodes: dict[str, str] = {}
    for pid, name in pids.items():
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if target.startswith("socket:["):
                        inodes[target[8:-1]] = name
    owners: dict[int, str] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                parts = line.split()
                port = int(parts[1].rsplit(":", 1)[1], 16)
                if parts[9] in inodes:
                    owners[port] = inodes[parts[9]]
    return owners


@dataclass
class Tally:
    """Commands seen in a window, by process and what sent them."""

    seconds: float = 0.0
    by_process: Counter[str] = field(default_factory=Counter)
    by_source: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(process, command or `EVALSHA script`) -> commands, a script's inner ones included."""
    calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(process, command or script) -> times sent (a script's inner commands not counted)."""
    inner: dict[tuple[str, str], Counter[str]] = field(default_factory=dict)
    commandstats: Counter[str] = field(default_factory=Counter)
    """INFO commandstats over the window, the bench's own commands left out."""


class Watch:
    """MONITOR on its own connection, attributing every command to a process and a script."""

    def __init__(self, url: str, pids: dict[int, str], scripts: dict[str, str]) -> None:
        self.url = url
        self.pids = pids
        self.scripts = scripts
        self.owners: dict[int, str] = {}
        self.entries: list[dict[str, Any]] = []

    def owner(self, port: int) -> str:
        if port not in self.owners:
            self.owners = _socket_owners(self.pids)
        return self.owners.get(port, "?")

    async def follow(self) -> None:
        client = aioredis.Redis.from_url(self.url, socket_timeout=3600)  # quiet while idle
        try:
            async with client.monitor() as monitor:
                async for entry in monitor.listen():
                    self.entries.append(entry)
                    if entry.get("client_type") != "lua" and entry.get("client_port"):
                        self.owner(int(entry["client_port"]))  # while the connection lives
        finally:
            await client.aclose()

    def tally(self, entries: list[dict[str, Any]], seconds: float) -> Tally:
        tally = Tally(seconds=seconds)
        source = ("?", "?")
        for entry in entries:
            words = entry["command"].split(" ")
            command = words[0].strip('"').upper()
            if entry.get("client_type") == "lua":
                process, _ = source
                if process != BENCH:
                    tally.by_process[process] += 1
                    tally.by_source[source] += 1
                    tally.inner.setdefault(source, Counter())[command] += 1
                continue
            process = self.owner(int(entry.get("client_port") or 0))
            if command in ("EVALSHA", "EVAL") and len(words) > 1:
                sha = words[1].strip('"')
                if command == "EVAL":
                    sha = hashlib.sha1(sha.encode()).hexdigest()
                command = f"{command} {self.scripts.get(sha, sha[:10])}"
            elif command in ("CLIENT", "XINFO", "XGROUP") and len(words) > 1:
                command = f"{command} {words[1].strip(chr(34)).upper()}"
            source = (process, command)
            if process == BENCH or command.split(" ")[0].lower() in OWN - {"client"}:
                continue
            tally.by_process[process] += 1
            tally.by_source[source] += 1
            tally.calls[source] += 1
        return tally


async def commandstats(redis: aioredis.Redis) -> Counter[str]:
    info: Any = await redis.info("commandstats")
    return Counter({name[len("cmdstat_") :]: int(row["calls"]) for name, row in info.items()})


@contextlib.asynccontextmanager
async def window(watch: Watch, redis: aioredis.Redis) -> AsyncIterator[list[Tally]]:
    """Count what happens inside the block; the tally lands in the list yielded."""
    out: list[Tally] = []
    first = len(watch.entries)
    before = await commandstats(redis)
    started = time.monotonic()
    yield out
    seconds = time.monotonic() - started
    after = await commandstats(redis)
    await asyncio.sleep(0.2)  # MONITOR's feed catches up
    tally = watch.tally(watch.entries[first:], seconds)
    stats = after - before
    for own in OWN:
        stats.pop(own, None)
    tally.commandstats = stats
    out.append(tally)


def pids_of(running: Deployment, processes: dict[str, Process]) -> dict[int, str]:
    pids = {process.popen.pid: name for name, process in processes.items()}
    pids[os.getpid()] = BENCH
    return pids


async def round_trip(running: Deployment, number: int) -> None:
    slack, sender = running.slack, running.sender
    before = len(slack.cards())
    status, _ = await sender.command(f"delete u-100 (trip {number})")
    assert status == 200
    await slack.wait_for(lambda: len(slack.cards()) > before, 30, "card")
    card = slack.cards()[before]
    status, _ = await sender.click(card, "approve", user="UBOB")
    assert status == 200 and card.thread_ts is not None
    thread = card.thread_ts
    await slack.wait_for(lambda: slack.final_answers(thread), 30, "answer")


async def closed(running: Deployment, within: float = 10.0) -> None:
    """Until no run is live: the last answer is posted just before its run's record closes."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not await running.redis.zcard(running.keys.live_runs):
            return
        await asyncio.sleep(0.05)


async def measure(seconds: float, runs: int, *, home_viewers: bool = False) -> dict[str, Any]:
    scripts = script_names()
    with tempfile.TemporaryDirectory() as directory:
        server = RedisServer(directory=Path(directory) / "redis")
        server.start()
        running = Deployment(server.url, "cost:", Path(directory))
        # The test tools' ledger is the bench's bookkeeping, not the product's: off.
        env = {**PRODUCTION_ENV, "COUNTERSIGN_TEST_LEDGER": ""}
        try:
            await running.start()
            running.model.script = approve_then_answer
            processes = {"web": await running.web(**env)}
            processes["worker"] = running.worker("worker.1", **env)
            await round_trip(running, 0)  # warm-up: connections, first imports, auth.test
            await closed(running)
            if home_viewers:
                for user in ("UALICE", "UBOB"):
                    home = {"type": "app_home_opened", "user": user, "channel": f"D{user}"}
                    status, _ = await running.sender.event({**home, "tab": "home"})
                    assert status == 200
            watch = Watch(server.url, pids_of(running, processes), scripts)
            follower = asyncio.get_running_loop().create_task(watch.follow())
            try:
                await asyncio.sleep(3.0)  # the warm-up's tail (Home tab, audit reads) settles
                async with window(watch, running.redis) as idle:
                    await asyncio.sleep(seconds)
                async with window(watch, running.redis) as trips:
                    for number in range(1, runs + 1):
                        await round_trip(running, number)
                    await closed(running)
            finally:
                follower.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await follower
        finally:
            await running.stop()
            server.stop()
    return {**figures(idle[0], trips[0], runs), "home_viewers": home_viewers}


async def cluster_commands(nodes: list[aioredis.Redis]) -> Counter[str]:
    """INFO commandstats summed over every node (a cluster has no one MONITOR for all)."""
    total: Counter[str] = Counter()
    for node in nodes:
        total += await commandstats(node)
    return total


async def measure_cluster(seconds: float, runs: int) -> dict[str, Any]:
    """The same windows on a three-primary Redis Cluster (`REDIS_SHARDS` at its default),
    counted with INFO commandstats on each node: totals, not attributed to a process."""
    with tempfile.TemporaryDirectory() as directory:
        server = LocalCluster(directory=Path(directory) / "cluster")
        server.start()
        running = Deployment(server.url, "cost:", Path(directory), cluster=True)
        env = {**PRODUCTION_ENV, "COUNTERSIGN_TEST_LEDGER": ""}
        nodes = [aioredis.Redis.from_url(node.url) for node in server.nodes]
        try:
            await running.start()
            running.model.script = approve_then_answer
            await running.web(**env)
            running.worker("worker.1", **env)
            await round_trip(running, 0)
            await asyncio.sleep(3.0)
            before, started = await cluster_commands(nodes), time.monotonic()
            await asyncio.sleep(seconds)
            idle, idle_seconds = await cluster_commands(nodes) - before, time.monotonic() - started
            before, started = await cluster_commands(nodes), time.monotonic()
            for number in range(1, runs + 1):
                await round_trip(running, number)
            await asyncio.sleep(1.0)  # the last run's close
            trips, trip_seconds = await cluster_commands(nodes) - before, time.monotonic() - started
        finally:
            for node in nodes:
                await node.aclose()
            await running.stop()
            server.stop()
    for own in OWN:
        idle.pop(own, None)
        trips.pop(own, None)
    return {
        "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "idle_seconds": round(idle_seconds, 1),
        "idle_per_second": round(sum(idle.values()) / idle_seconds, 3),
        "idle_by_command": {c: round(n / idle_seconds, 3) for c, n in idle.most_common() if n},
        "runs": runs,
        "trip_seconds": round(trip_seconds, 1),
        "per_trip": round(sum(trips.values()) / runs, 2),
        "per_trip_by_command": {c: round(n / runs, 2) for c, n in trips.most_common() if n},
    }


def cluster_lines(result: dict[str, Any]) -> Iterator[str]:
    yield (
        f"idle over {result['idle_seconds']} s, a web and a worker: "
        f"{result['idle_per_second']:.3f} commands/s (target: worker <= 1)"
    )
    yield "  by command: " + ", ".join(f"{c} {n:g}" for c, n in result["idle_by_command"].items())
    yield (
        f"per approval round trip, {result['runs']} trips in {result['trip_seconds']} s: "
        f"{result['per_trip']:.2f} commands executed (target <= 30)"
    )
    yield "  by command: " + ", ".join(
        f"{c} {n:g}" for c, n in result["per_trip_by_command"].items()
    )


def figures(idle: Tally, trips: Tally, runs: int) -> dict[str, Any]:
    def rows(tally: Tally, per: float) -> list[dict[str, Any]]:
        out = []
        for (process, source), count in tally.by_source.most_common():
            inner = tally.inner.get((process, source), Counter())
            out.append(
                {
                    "process": process,
                    "source": source,
                    "commands": round(count / per, 2),
                    "calls": round(tally.calls[(process, source)] / per, 2),
                    "inside": {c: round(n / per, 2) for c, n in inner.most_common()},
                }
            )
        return out

    return {
        "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "idle_seconds": round(idle.seconds, 1),
        "idle_per_second": {p: round(n / idle.seconds, 3) for p, n in idle.by_process.items()},
        "idle_commandstats_per_second": round(sum(idle.commandstats.values()) / idle.seconds, 3),
        "idle_rows": rows(idle, idle.seconds),
        "runs": runs,
        "trip_seconds": round(trips.seconds, 1),
        "per_trip": round(sum(trips.by_process.values()) / runs, 2),
        "per_trip_by_process": {p: round(n / runs, 2) for p, n in trips.by_process.items()},
        "per_trip_commandstats": round(sum(trips.commandstats.values()) / runs, 2),
        "per_trip_by_command": {
            c: round(n / runs, 2) for c, n in trips.commandstats.most_common() if n
        },
        "per_trip_sent": round(sum(trips.calls.values()) / runs, 2),
        "trip_rows": rows(trips, runs),
    }


def lines(result: dict[str, Any]) -> Iterator[str]:
    idle = result["idle_per_second"]
    yield f"idle over {result['idle_seconds']} s, commands per second (target: worker <= 1):"
    for process in ("worker", "web"):
        yield f"  {process:<8} {idle.get(process, 0.0):8.3f}"
    if idle.get("?"):
        yield f"  {'unknown':<8} {idle['?']:8.3f}"
    yield f"  (INFO commandstats, all processes: {result['idle_commandstats_per_second']:.3f})"
    for row in result["idle_rows"]:
        yield _row(row, "/s")
    yield ""
    yield (
        f"per approval round trip, {result['runs']} trips in {result['trip_seconds']} s "
        "(background polling included; target <= 30):"
    )
    by_process = ", ".join(f"{p} {n:.2f}" for p, n in result["per_trip_by_process"].items())
    yield f"  commands executed  {result['per_trip']:6.2f}  ({by_process})"
    yield f"  requests sent      {result['per_trip_sent']:6.2f}  (EVALSHA counted once)"
    yield f"  INFO commandstats  {result['per_trip_commandstats']:6.2f}"
    yield "  by command: " + ", ".join(
        f"{c} {n:g}" for c, n in result["per_trip_by_command"].items()
    )
    yield "  by sender (process, command or script: commands per trip, sent, inside):"
    for row in result["trip_rows"]:
        yield _row(row, "")


def _row(row: dict[str, Any], unit: str) -> str:
    inside = ", ".join(f"{c} {n:g}" for c, n in row["inside"].items())
    sent = f"sent {row['calls']:g}" if row["inside"] else ""
    detail = f"  ({sent}; inside: {inside})" if inside else ""
    return f"    {row['process']:<7} {row['source']:<44} {row['commands']:7.2f}{unit}{detail}"


def chart(before: dict[str, Any], after: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (idle_axes, trip_axes) = plt.subplots(1, 2, figsize=(10, 4.2))
    width = 0.38
    labels = ["worker", "web"]
    for offset, (name, result, colour) in enumerate(
        [("before", before, "#b0b0b0"), ("after", after, "#2b7bb9")]
    ):
        values = [result["idle_per_second"].get(p, 0.0) for p in labels]
        xs = [i + (offset - 0.5) * width for i in range(len(labels))]
        bars = idle_axes.bar(xs, values, width, label=name, color=colour)
        idle_axes.bar_label(bars, fmt="%.2f", fontsize=8)
        sent = result["per_trip_sent"]
        inside = result["per_trip"] - sent
        trip_axes.bar([offset], [sent], 0.6, color=colour)
        bars = trip_axes.bar([offset], [inside], 0.6, bottom=[sent], color=colour, alpha=0.45)
        trip_axes.bar_label(bars, labels=[f"{result['per_trip']:.1f}"], fontsize=8)
        trip_axes.text(offset, sent / 2, f"sent {sent:.1f}", ha="center", fontsize=8)
        trip_axes.text(offset, sent + inside / 2, "inside\nscripts", ha="center", fontsize=8)
    idle_axes.axhline(1.0, color="#c0392b", linestyle="--", linewidth=1, label="target (worker)")
    idle_axes.set_xticks(range(len(labels)), [f"{p} idle" for p in labels])
    idle_axes.set_ylabel("Redis commands per second")
    idle_axes.set_title("Idle, one process")
    idle_axes.legend(fontsize=8)
    trip_axes.axhline(30, color="#c0392b", linestyle="--", linewidth=1, label="target (30)")
    trip_axes.set_xticks([0, 1], ["before", "after"])
    trip_axes.set_ylabel("Redis commands per round trip")
    trip_axes.set_title("One approval round trip")
    trip_axes.legend(fontsize=8)
    fig.suptitle("Redis commands (as INFO commandstats counts them, script calls included)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="idle window")
    parser.add_argument("--runs", type=int, default=100, help="approval round trips")
    parser.add_argument("--save", type=Path, help="write the figures as JSON here")
    parser.add_argument("--chart", action="store_true", help=f"draw {CHART.name}")
    parser.add_argument("--before", type=Path, default=BEFORE, help="figures to compare with")
    parser.add_argument(
        "--home-viewers", action="store_true", help="the requester and approver opened the Home tab"
    )
    parser.add_argument(
        "--figures", type=Path, help="print (and chart) figures saved by --save, measuring nothing"
    )
    add_cluster_option(parser)
    args = parser.parse_args()
    header(
        "Redis commands idle and per approval" + (" (Redis Cluster)" if args.cluster else ""),
        f".venv/bin/python -m bench.redis_cost --seconds {args.seconds:g} --runs {args.runs}"
        + (" --home-viewers" if args.home_viewers else "")
        + (" --cluster" if args.cluster else ""),
    )
    if args.cluster:
        for line in cluster_lines(asyncio.run(measure_cluster(args.seconds, args.runs))):
            print(line)
        return
    if args.figures:
        result = json.loads(args.figures.read_text())
    else:
        result = asyncio.run(measure(args.seconds, args.runs, home_viewers=args.home_viewers))
    for line in lines(result):
        print(line)
    if args.save:
        args.save.write_text(json.dumps(result, indent=1) + "\n")
    if args.chart:
        chart(json.loads(args.before.read_text()), result, CHART)
        print(f"chart: {CHART}")


if __name__ == "__main__":
    main()
