"""`python -m runtime audit --since 2026-11-01 > audit.jsonl`: export the audit trail.

Reads `REDIS_URL`/`REDIS_TLS_URL`, `REDIS_KEY_PREFIX` and `AUDIT_RETENTION_DAYS` like the
processes do; writes one JSON object per line, oldest first, and says on stderr when the trail
starts after `--since` (older events were trimmed, or never happened). `--demo` exports what
`python -m bot demo` recorded, run from the same folder: the demo's own Redis (the running one,
or started again from `.redis/` while exporting) and its key prefix.

`python -m runtime policy backtest POLICY.toml [--since DATE] [--until DATE] [--json]` replays
the trail's calls against a proposed policy (`runtime.review.backtest`), with the same
environment (and `--demo`); `python -m runtime policy check POLICY.toml` warns of rules that
cannot match and globs that match nothing in `AGENTS` (`runtime.review.check`). Both exit 2 when
the file is invalid, with its line.

`python -m runtime stats [--since DATE] [--chart FILE.png]` prints how decisions went in every
channel since then (the last 7 days by default), as `/agent stats` tells one channel
(`runtime.review.stats`), and draws time to decide per tool (`runtime.review.chart`).

Every command says what went wrong in one line per problem on stderr, naming what to fix, never
with a traceback: exit 2 for bad input (a setting, a file, an argument), 1 when Redis is
unavailable.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import sys
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError
from redis.exceptions import AuthenticationError, AuthorizationError, RedisError

from runtime.audit.trail import AuditTrail, retention_note
from runtime.db.client import connect_to
from runtime.db.keys import Keys
from runtime.db.local import DEMO_KEY_PREFIX, DEMO_REDIS_FOLDER, LocalRedisError, redis_for_demo
from runtime.jobs.outages import redis_away
from runtime.policy import Policy, PolicyError, load_policy
from runtime.review.backtest import backtest
from runtime.review.chart import ChartUnavailable, check_path, draw
from runtime.review.names import KnownNames
from runtime.review.stats import decision_stats, principals, text
from runtime.settings import RuntimeSettings

BAD_INPUT = 2
UNAVAILABLE = 1
STATS_DAYS = 7
"""`stats` without `--since`: the last week, as `/agent stats`."""
_T = TypeVar("_T")


class Refused(Exception):
    """What to tell the person at the terminal (one line per problem) and the exit code."""

    def __init__(self, lines: str, code: int) -> None:
        super().__init__(lines)
        self.code = code


def _date(text: str) -> dt.datetime:
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date: {text!r} (use e.g. 2026-11-01)") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _end(text: str) -> dt.datetime:
    """`--until 2026-11-30` means to the end of that day; a time, up to that time."""
    end = _date(text)
    return end + dt.timedelta(days=1) if len(text) == len("2026-11-30") else end


async def export(settings: RuntimeSettings, since: dt.datetime) -> int:
    redis = connect_to(settings)
    try:
        trail = AuditTrail(redis, Keys.of(settings))
        note = retention_note(await trail.oldest(), since, settings.audit_retention_days)
        if note is not None:
            print(note, file=sys.stderr)
        count = 0
        async for entry in trail.since(since):
            sys.stdout.write(entry.model_dump_json() + "\n")
            count += 1
        return count
    finally:
        await redis.aclose()


async def replay(settings: RuntimeSettings, policy: Policy, args: argparse.Namespace) -> int:
    redis = connect_to(settings)
    try:
        trail = AuditTrail(redis, Keys.of(settings))
        since = args.since or dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        if args.since is not None:  # asked for a start the trail may not reach back to
            note = retention_note(await trail.oldest(), since, settings.audit_retention_days)
            if note is not None:
                print(note.replace("exported", "replayed"), file=sys.stderr)
        return await backtest(
            trail,
            policy,
            args.policy_file,
            since=since,
            until=args.until,
            as_json=args.json,
            out=sys.stdout,
            names=KnownNames(redis, Keys.of(settings)),
        )
    finally:
        await redis.aclose()


async def stats(settings: RuntimeSettings, args: argparse.Namespace) -> int:
    since = args.since or dt.datetime.now(dt.UTC) - dt.timedelta(days=STATS_DAYS)
    if args.chart is not None:
        _chart_checked(lambda: check_path(args.chart))  # before counting: a typo fails fast
    redis = connect_to(settings)
    try:
        trail = AuditTrail(redis, Keys.of(settings))
        note = retention_note(await trail.oldest(), since, settings.audit_retention_days)
        if note is not None:
            print(note.replace("exported", "counted"), file=sys.stderr)
        quick = settings.quick_approval_seconds
        found = await decision_stats(trail.since(since), quick_seconds=quick)
        names = await KnownNames(redis, Keys.of(settings)).of(principals(found))
    finally:
        await redis.aclose()
    shown = {channel: figures for channel, figures in sorted(found.items()) if figures.tools}
    if shown:
        print("\n\n".join(text(c, figures, quick, names) for c, figures in shown.items()))
    else:
        print(f"No tool call asked anyone since {since.isoformat(timespec='seconds')}.")
    if args.chart is not None:
        title = f"Time to decide per tool, since {since.date().isoformat()}"
        drawn = _chart_checked(lambda: draw(shown, args.chart, title))
        print(f"{args.chart}: time to decide of {drawn} tool(s)", file=sys.stderr)
    return 0


def _chart_checked(work: Callable[[], _T]) -> _T:
    try:
        return work()
    except ChartUnavailable as error:
        raise Refused(str(error), BAD_INPUT) from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m runtime")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = "use the Redis and key prefix of `python -m bot demo` run here"
    audit = commands.add_parser("audit", help="export audit events as JSON lines")
    audit.add_argument("--since", type=_date, default=dt.datetime(1970, 1, 1, tzinfo=dt.UTC))
    audit.add_argument("--demo", action="store_true", help=demo)
    policy = commands.add_parser("policy", help="review a proposed policy file")
    reviews = policy.add_subparsers(dest="review", required=True)
    replayed = reviews.add_parser("backtest", help="replay the trail's calls against it")
    replayed.add_argument("policy_file", metavar="POLICY.toml")
    replayed.add_argument("--since", type=_date, default=None)
    replayed.add_argument("--until", type=_end, default=None)
    replayed.add_argument("--json", action="store_true", help="one JSON object per call")
    replayed.add_argument("--demo", action="store_true", help=demo)
    checked = reviews.add_parser("check", help="warn of rules that cannot match")
    checked.add_argument("policy_file", metavar="POLICY.toml")
    counted = commands.add_parser("stats", help="how decisions went, per channel and tool")
    counted.add_argument(
        "--since", type=_date, default=None, help=f"default: the last {STATS_DAYS} days"
    )
    counted.add_argument("--chart", type=Path, default=None, metavar="FILE.png")
    counted.add_argument("--demo", action="store_true", help=demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _command(args)
    except Refused as refused:
        print(refused, file=sys.stderr)
        return refused.code
    except BrokenPipeError:
        # A reader that stopped early (`| head`) had what it wanted: no traceback, and
        # nothing more written at exit to the closed pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _command(args: argparse.Namespace) -> int:
    environ: dict[str, str] = dict(os.environ)
    server = None
    if getattr(args, "demo", False):
        try:
            url, server = redis_for_demo(environ, Path.cwd() / DEMO_REDIS_FOLDER)
        except LocalRedisError as error:
            raise Refused(str(error), BAD_INPUT) from None
        environ = {"REDIS_KEY_PREFIX": DEMO_KEY_PREFIX, **environ}
        environ.update(REDIS_URL=url, REDIS_TLS_URL="")  # as the demo sets them
    try:
        if args.command == "policy":
            return _review(args, environ)
        settings = _settings(environ)
        if args.command == "stats":
            return _against_redis(stats(settings, args), settings)
        count = _against_redis(export(settings, args.since), settings)
    finally:
        if server is not None:
            server.stop()
    print(f"{count} audit event(s) exported", file=sys.stderr)
    return 0


def _settings(environ: Mapping[str, str]) -> RuntimeSettings:
    try:
        return RuntimeSettings.from_environ(environ)
    except ValidationError as error:
        raise Refused("\n".join(RuntimeSettings.problems(error)), BAD_INPUT) from None


def _against_redis(work: Coroutine[Any, Any, _T], settings: RuntimeSettings) -> _T:
    """Run `work`; Redis away or refusing is one line naming the setting to check."""
    try:
        return asyncio.run(work)
    except RedisError as error:
        setting = settings.redis_url_setting
        detail = str(error).rstrip(".") or type(error).__name__
        # redis-py's AuthenticationError is a ConnectionError: asked first.
        if isinstance(error, AuthenticationError | AuthorizationError):
            raise Refused(f"Redis refused ({detail}): check {setting}.", BAD_INPUT) from None
        if redis_away(error) is not None:
            line = f"Redis does not answer ({detail}): start it, or set {setting} to where it runs."
            raise Refused(line, UNAVAILABLE) from None
        raise Refused(f"Redis refused ({detail}).", UNAVAILABLE) from None


def _review(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    # The processes' own loader, over the same defaults (APPROVERS, ...), reads the file.
    settings = _settings({**environ, "POLICY_FILE": args.policy_file})
    try:
        policy = load_policy(settings)
    except PolicyError as error:
        raise Refused(str(error), BAD_INPUT) from None
    if args.review == "backtest":
        count = _against_redis(replay(settings, policy, args), settings)
        print(f"{count} call(s) replayed", file=sys.stderr)
        return 0
    # Only `check` reads the registry: importing it loads the Agents SDK (seconds), which the
    # backtest, stats and the export never need.
    from runtime.registry import RegistryError, load_registry
    from runtime.review.check import Offered, warnings

    try:
        registry = load_registry(settings.agents)
    except RegistryError as error:
        raise Refused(str(error), BAD_INPUT) from None
    found = warnings(policy, args.policy_file, Offered.of(registry))
    for warning in found:
        print(f"warning: {warning}")
    print(f"{args.policy_file}: {len(policy.rules)} rule(s), {len(found)} warning(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
