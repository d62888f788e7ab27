"""`python -m runtime audit --since 2026-11-01 > audit.jsonl`: export the audit trail.

Reads `REDIS_URL`/`REDIS_TLS_URL`, `REDIS_KEY_PREFIX` and `AUDIT_RETENTION_DAYS` like the
processes do; writes one JSON object per line, oldest first, and says on stderr when the trail
starts after `--since` (older events were trimmed, or never happened).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import sys

from pydantic import ValidationError

from runtime.audit import AuditTrail, retention_note
from runtime.keys import Keys
from runtime.redis_connection import connect
from runtime.settings import FIXES, RuntimeSettings, describe_settings_error


def _date(text: str) -> dt.datetime:
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date: {text!r} (use e.g. 2026-11-01)") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


async def export(settings: RuntimeSettings, since: dt.datetime) -> int:
    redis = connect(
        settings.effective_redis_url,
        tls_verify=settings.redis_tls_verify,
        tls_ca_file=settings.redis_tls_ca_file,
    )
    try:
        trail = AuditTrail(redis, Keys(settings.redis_key_prefix))
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
    args = parser.parse_args(argv)
    try:
        settings = RuntimeSettings.from_environ()
    except ValidationError as error:
        print(describe_settings_error(error, FIXES), file=sys.stderr)
        return 2
    count = asyncio.run(export(settings, args.since))
    print(f"{count} audit event(s) exported", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
