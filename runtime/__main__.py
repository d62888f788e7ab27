"""`python -m runtime audit --since 2026-11-01 > audit.jsonl`: export the audit trail.

Reads `REDIS_URL`/`REDIS_TLS_URL`, `REDIS_KEY_PREFIX` and `AUDIT_RETENTION_DAYS` like the
processes do; writes one JSON object per line, oldest first, and says on stderr when the trail
starts after `--since` (older events were trimmed, or never happened). `--demo` exports what
`python -m bot demo` recorded, run from the same folder: the demo's Redis (started again from
`.redis/` while exporting, if the demo started one) and its key prefix.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import sys
from pathlib import Path

from pydantic import ValidationError

from runtime.audit.trail import AuditTrail, retention_note
from runtime.db.client import connect_to
from runtime.db.keys import Keys
from runtime.db.local import DEMO_KEY_PREFIX, DEMO_REDIS_FOLDER, LocalRedisError, redis_for_demo
from runtime.settings import FIXES, RuntimeSettings, describe_settings_error


def _date(text: str) -> dt.datetime:
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date: {text!r} (use e.g. 2026-11-01)") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runtime")
    commands = parser.add_subparsers(dest="command", required=True)
    audit = commands.add_parser("audit", help="export audit events as JSON lines")
    audit.add_argument("--since", type=_date, default=dt.datetime(1970, 1, 1, tzinfo=dt.UTC))
    audit.add_argument(
        "--demo", action="store_true", help="export the trail of `python -m bot demo` run here"
    )
    args = parser.parse_args(argv)
    environ: dict[str, str] = dict(os.environ)
    server = None
    if args.demo:
        try:
            url, server = redis_for_demo(environ, Path.cwd() / DEMO_REDIS_FOLDER)
        except LocalRedisError as error:
            print(error, file=sys.stderr)
            return 2
        environ = {"REDIS_KEY_PREFIX": DEMO_KEY_PREFIX, **environ}
        environ.update(REDIS_URL=url, REDIS_TLS_URL="")  # as the demo sets them
    try:
        settings = RuntimeSettings.from_environ(environ)
        count = asyncio.run(export(settings, args.since))
    except ValidationError as error:
        print(describe_settings_error(error, FIXES), file=sys.stderr)
        return 2
    finally:
        if server is not None:
            server.stop()
    print(f"{count} audit event(s) exported", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
