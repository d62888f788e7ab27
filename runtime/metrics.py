"""Every Prometheus metric Countersign exports, and the worker's own `/metrics` endpoint.

Two kinds of numbers, and which process has them:

- **Counted in the process** that saw it happen (below): a web process counts the decisions
  people make and its Slack calls; a worker counts expiries, runs, tool executions, model errors
  and its Slack calls. Prometheus sums them across processes (`sum(rate(...))`).
- **Read from Redis at scrape time** (`runtime.record.gauges`): open approvals, the job stream,
  dead letters. Any one web process tells the whole truth, so dashboards take `max` across
  instances rather than `sum`. Workers do not export these.

The web process serves both at `GET /metrics` (`bot.web.operations`); a worker serves its own
counters on `METRICS_PORT` when that is set (`MetricsEndpoint`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Final

import openai
from agents.exceptions import ModelBehaviorError, ModelRefusalError, ModelTimeoutError
from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_PLAIN_0_0_4,
    REGISTRY,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from runtime.record.envelope import Decision
from runtime.reporter import Failure

log = logging.getLogger(__name__)

# `_created` series double what is scraped and no dashboard here reads them.
disable_created_metrics()  # type: ignore[no-untyped-call]  # untyped upstream

DECISION_OUTCOMES: Final = (
    "approved",
    "approved_always",
    "rejected",
    "answered",
    "expired",
    "stopped",
    "denied",
)
"""`denied` counts refused clicks (the person may not decide); `stopped` an approval closed
because its run was stopped."""

RUN_OUTCOMES: Final = ("finished", *(kind.value for kind in Failure), "conversation_unavailable")

DECISIONS = Counter(
    "countersign_decisions_total",
    "Decisions on approvals, by outcome (people's in the web process; expiries in workers).",
    ["outcome"],
)
DECISION_LATENCY = Histogram(
    "countersign_decision_latency_seconds",
    "Time to decide: from the approval card being posted to the decision, by tool and outcome.",
    ["tool", "outcome"],
    buckets=(5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 86400, 7 * 86400),
)
QUICK_APPROVALS = Counter(
    "countersign_quick_approvals_total",
    "Calls approved within QUICK_APPROVAL_SECONDS of the card being posted (a sign of "
    "rubber-stamping; under a quorum, by the approval that met it), by tool (web processes).",
    ["tool"],
)
RUNS = Counter(
    "countersign_runs_total",
    "Runs that ended, by outcome: finished, or why it failed (workers).",
    ["outcome"],
)
TOOL_EXECUTIONS = Counter(
    "countersign_tool_executions_total",
    "Tool calls, by tool and outcome: ok, error (raised), replayed (recorded output reused).",
    ["tool", "outcome"],
)
MODEL_ERRORS = Counter(
    "countersign_model_errors_total",
    "Errors from the model, by kind (http_<status>, connection, timeout, behavior, refusal, "
    "client); transient ones are retried (workers).",
    ["kind"],
)
SLACK_API_ERRORS = Counter(
    "countersign_slack_api_errors_total",
    "Slack Web API responses that were not ok, by method and Slack's error code.",
    ["method", "error"],
)
SLACK_RATE_LIMITED = Counter(
    "countersign_slack_rate_limited_total",
    "HTTP 429 answers from the Slack Web API, by method (each is waited out and retried).",
    ["method"],
)

for _outcome in DECISION_OUTCOMES:
    DECISIONS.labels(_outcome)
for _outcome in RUN_OUTCOMES:
    RUNS.labels(_outcome)


def count_decision(
    decision: Decision | None,
    *,
    tool: str,
    card_ts: str | None,
    quick_seconds: float | None = None,
) -> None:
    """A decision on a call of `tool` was recorded; `card_ts` is its card's message id, which
    for Slack is the time the card was posted (when the person was asked). An approval within
    `quick_seconds` of it is also a quick one (None: an expiry's caller, no approvals)."""
    if decision is None:
        return
    DECISIONS.labels(decision.outcome).inc()
    if card_ts is None:
        return
    try:
        waited = max(0.0, decision.decided_at - float(card_ts))
    except ValueError:
        return
    DECISION_LATENCY.labels(tool, decision.outcome).observe(waited)
    approved = decision.outcome in ("approved", "approved_always")
    if approved and quick_seconds is not None and waited <= quick_seconds:
        QUICK_APPROVALS.labels(tool).inc()


def count_denied() -> None:
    DECISIONS.labels("denied").inc()


def count_run(outcome: str) -> None:
    RUNS.labels(outcome).inc()


def count_tool(tool: str, outcome: str) -> None:
    TOOL_EXECUTIONS.labels(tool, outcome).inc()


def count_model_error(error: BaseException) -> None:
    """Count `error` if the model (not a tool, not Redis) raised it."""
    kind = model_error_kind(error)
    if kind is not None:
        MODEL_ERRORS.labels(kind).inc()


def model_error_kind(error: BaseException) -> str | None:
    if isinstance(error, openai.APIStatusError):
        return f"http_{error.status_code}"
    if isinstance(error, openai.APITimeoutError | ModelTimeoutError):
        return "timeout"
    if isinstance(error, openai.APIConnectionError):
        return "connection"
    if isinstance(error, openai.OpenAIError):
        return "client"
    if isinstance(error, ModelBehaviorError):
        return "behavior"
    if isinstance(error, ModelRefusalError):
        return "refusal"
    return None


# --- exposition ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Scrape:
    """The process's metrics plus any read for this scrape (a prometheus `Collector`)."""

    extra: tuple[Collector, ...] = ()

    def collect(self) -> Iterable[Metric]:
        yield from REGISTRY.collect()
        for collector in self.extra:
            yield from collector.collect()


def metrics_response(scrape: Scrape) -> web.Response:
    return web.Response(
        body=generate_latest(scrape), headers={"Content-Type": CONTENT_TYPE_PLAIN_0_0_4}
    )


async def process_metrics(request: web.Request) -> web.Response:
    return metrics_response(Scrape())


@dataclass(kw_only=True)
class MetricsEndpoint:
    """A worker's `GET /metrics` on `port`, on every interface, until stopped; and its
    `GET /readyz` when given `readyz`."""

    port: int
    host: str = "0.0.0.0"
    readyz: Callable[[], Awaitable[web.Response]] | None = None
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", process_metrics)
        if (readyz := self.readyz) is not None:

            async def ready(_: web.Request) -> web.Response:
                return await readyz()

            app.router.add_get("/readyz", ready)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self.port).start()
        except OSError as error:
            # The worker's jobs matter more than its metrics: it keeps working without them.
            log.error(
                "metrics not served: port %d unavailable (%s). Set METRICS_PORT to a free port, "
                "or unset it.",
                self.port,
                error.strerror,
            )
            await runner.cleanup()
            return
        log.info("metrics: http://%s:%d/metrics", self.host, self.port)
        try:
            await self._stopping.wait()
        finally:
            await runner.cleanup()

    def stop(self) -> None:
        self._stopping.set()
