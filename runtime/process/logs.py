"""How a process logs: text for people (the default), or one JSON object per line for log
drains (`LOG_FORMAT=json`).

A JSON line has `time`, `level`, `logger`, `message` and, where known, `run_id`,
`approval_id` and `event` (what the process was doing: a job's kind, a decision's outcome).
Those come from a log call's `extra=` or from the context bound around the work: the worker
binds a job's run id while it handles the job, the web process a click's run and approval.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import Literal

LogFormat = Literal["text", "json"]

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
CONTEXT_FIELDS = ("run_id", "approval_id", "event")

_CONTEXT: ContextVar[Mapping[str, str] | None] = ContextVar("countersign_log_context", default=None)


def _merged(fields: Mapping[str, str | None]) -> dict[str, str]:
    known = {name: value for name, value in fields.items() if value is not None}
    return {**(_CONTEXT.get() or {}), **known}


@contextlib.contextmanager
def log_context(
    *, run_id: str | None = None, approval_id: str | None = None, event: str | None = None
) -> Iterator[None]:
    """Lines logged inside carry these fields (and tasks started inside keep them)."""
    token = _CONTEXT.set(_merged({"run_id": run_id, "approval_id": approval_id, "event": event}))
    try:
        yield
    finally:
        _CONTEXT.reset(token)


def bind_log_context(
    *, run_id: str | None = None, approval_id: str | None = None, event: str | None = None
) -> None:
    """For the rest of the current task: only where the work owns its task (a request, a job
    the consumer spawned), since each task has its own copy of the context and nothing leaks
    into others."""
    _CONTEXT.set(_merged({"run_id": run_id, "approval_id": approval_id, "event": event}))


def iso_time(record: logging.LogRecord) -> str:
    """When a line was logged, in ISO 8601 with its zone (UTC): one way to write a time."""
    return dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds")


class TextFormatter(logging.Formatter):
    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return iso_time(record)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": iso_time(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        context = _CONTEXT.get() or {}
        for name in CONTEXT_FIELDS:
            value = getattr(record, name, None) or context.get(name)
            if value is not None:
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def configure_logging(log_format: LogFormat) -> None:
    """Give the root logger's handlers (`logging.basicConfig`'s) the chosen format."""
    formatter = JsonFormatter() if log_format == "json" else TextFormatter(TEXT_FORMAT)
    for handler in logging.getLogger().handlers:
        handler.setFormatter(formatter)
