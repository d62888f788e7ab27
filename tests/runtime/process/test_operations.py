"""What an operator sees: `/metrics` as people decide, `/readyz` through a Redis outage, and the
Grafana dashboard reading only metrics that exist."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from bot.settings import SettingsError, load_settings
from runtime.db.local import RedisServer, free_port
from runtime.process.logs import TEXT_FORMAT, JsonFormatter, TextFormatter, log_context
from runtime.record.gauges import UNSAMPLED, read_state
from runtime.record.scripts import SCRIPTS
from tests.support.deployment import Deployment
from tests.support.fake_openai import ModelRequest, message, tool_call
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer
from tests.support.processes import Process

ROOT = Path(__file__).resolve().parents[3]
DASHBOARD = ROOT / "docs" / "grafana-dashboard.json"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


@dataclass(frozen=True)
class Scraped:
    families: list[Metric]

    def value(self, name: str, **labels: str) -> float:
        """The sample's value; 0 when the series is absent (as Prometheus would show a sum)."""
        for family in self.families:
            for sample in family.samples:
                if sample.name == name and sample.labels == labels:
                    return float(sample.value)
        return 0.0

    def names(self) -> set[str]:
        """Every name a PromQL query may use: the samples' names, with or without samples."""
        return {
            family.name + suffix
            for family in self.families
            for suffix in SUFFIXES.get(family.type, ("",))
        }


async def scrape(url: str) -> Scraped:
    async with aiohttp.ClientSession() as session, session.get(f"{url}/metrics") as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return Scraped(list(text_string_to_metric_families(await response.text())))


async def scrape_until(url: str, ready: Callable[[Scraped], bool], timeout: float = 10) -> Scraped:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        scraped = await scrape(url)
        if ready(scraped) or asyncio.get_running_loop().time() > deadline:
            return scraped
        await asyncio.sleep(0.05)


def decisions(scraped: Scraped, outcome: str) -> float:
    return scraped.value("countersign_decisions_total", outcome=outcome)


async def test_metrics_follow_an_approve_a_refused_click_and_a_reject(bot: Harness) -> None:
    bot.model.script = delete_then_answer
    before = await scrape(bot.web_url)
    assert before.value("countersign_redis_up") == 1
    assert before.value("countersign_approvals_pending", tool="delete_user") == 0

    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    waiting = await scrape(bot.web_url)
    assert waiting.value("countersign_approvals_pending", tool="delete_user") == 1

    await bot.sender.click(card, "approve", user="UALICE")  # who asked may not approve
    refused = await scrape(bot.web_url)
    assert decisions(refused, "denied") - decisions(before, "denied") == 1
    assert refused.value("countersign_approvals_pending", tool="delete_user") == 1, "still open"

    await bot.sender.click(card, "approve", user="UBOB")
    approved = await scrape(bot.web_url)
    assert approved.value("countersign_approvals_pending", tool="delete_user") == 0
    assert decisions(approved, "approved") - decisions(before, "approved") == 1
    assert decisions(approved, "rejected") == decisions(before, "rejected")
    latency = "countersign_decision_latency_seconds_count"
    tool = {"tool": "delete_user", "outcome": "approved"}
    assert approved.value(latency, **tool) - before.value(latency, **tool) == 1
    await bot.final_answer(root)

    second = await bot.start_run("delete u-100 again")
    [card] = await bot.cards(second, 1)
    await bot.sender.reject(card, user="UCAROL", reason="not today")
    rejected = await scrape(bot.web_url)
    assert decisions(rejected, "rejected") - decisions(before, "rejected") == 1
    assert decisions(rejected, "approved") - decisions(before, "approved") == 1, "unchanged"
    assert rejected.value("countersign_approvals_pending", tool="delete_user") == 0
    await bot.final_answer(second)

    finished = "countersign_runs_total"

    def both_finished(s: Scraped) -> bool:
        return (
            s.value(finished, outcome="finished") - before.value(finished, outcome="finished") == 2
        )

    after = await scrape_until(bot.web_url, both_finished)
    assert both_finished(after), "the in-process worker counted both runs"
    ran = "countersign_tool_executions_total"
    assert (
        after.value(ran, tool="delete_user", outcome="ok")
        - before.value(ran, tool="delete_user", outcome="ok")
        == 1
    ), "the approved call ran, the rejected one did not"


async def test_slack_rate_limits_and_errors_are_counted_by_method(bot: Harness) -> None:
    bot.model.script = delete_then_answer
    before = await scrape(bot.web_url)
    limited = ("countersign_slack_rate_limited_total", {"method": "chat.postMessage"})
    errors = "countersign_slack_api_errors_total"
    server_error = {"method": "chat.postMessage", "error": "http_500"}
    refused = {"method": "chat.postEphemeral", "error": "user_not_in_channel"}
    bot.slack.fail_next(
        "chat.postMessage", 429, {"ok": False, "error": "ratelimited"}, headers={"Retry-After": "0"}
    )
    bot.slack.fail_next("chat.postMessage", 500, {"ok": False, "error": "internal_error"})
    bot.slack.fail_next("chat.postEphemeral", 200, {"ok": False, "error": "user_not_in_channel"})

    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1, timeout=15)
    await bot.sender.click(card, "approve", user="UALICE")  # refused: told privately, or not

    def counted(s: Scraped) -> bool:
        return s.value(errors, **refused) > before.value(errors, **refused)

    after = await scrape_until(bot.web_url, counted)
    assert counted(after)
    assert after.value(limited[0], **limited[1]) - before.value(limited[0], **limited[1]) == 1
    assert after.value(errors, **server_error) - before.value(errors, **server_error) == 1


async def test_pending_approvals_beyond_the_sample_still_add_up(bot: Harness) -> None:
    def two_calls(request: ModelRequest) -> list[dict[str, object]]:
        if not request.tool_outputs:
            return [
                tool_call("delete_user", {"user_id": "u-100"}, "call_del"),
                tool_call("restart_service", {"service": "api"}, "call_restart"),
            ]
        return [message("done")]

    bot.model.script = two_calls
    for n in range(2):
        root = await bot.start_run(f"clean up #{n}")
        await bot.cards(root, 2)

    everything = await read_state(bot.redis, bot.keys)
    assert everything.pending_by_tool == {"delete_user": 2, "restart_service": 2, UNSAMPLED: 0}
    sampled = await read_state(bot.redis, bot.keys, sample=3)
    assert sampled.pending_by_tool[UNSAMPLED] == 1
    assert sum(sampled.pending_by_tool.values()) == 4


async def test_a_job_nobody_takes_shows_in_the_stream_and_ages(redis_url: str, prefix: str) -> None:
    harness = Harness(redis_url=redis_url, prefix=prefix)
    await harness.start(worker=False)
    try:
        status, _ = await harness.sender.command("delete u-100")
        assert status == 200
        await asyncio.sleep(0.3)
        scraped = await scrape(harness.web_url)
        assert scraped.value("countersign_job_stream_length") == 1
        assert scraped.value("countersign_job_oldest_age_seconds") >= 0.3
        assert scraped.value("countersign_dead_letters") == 0
    finally:
        await harness.stop()


async def readyz(url: str) -> tuple[int, dict[str, object]]:
    async with aiohttp.ClientSession() as session, session.get(f"{url}/readyz") as response:
        body: dict[str, object] = await response.json()
        return response.status, body


async def test_readyz_wants_redis_and_its_scripts(own_redis: RedisServer) -> None:
    harness = Harness(redis_url=own_redis.url, prefix=f"ready:{uuid.uuid4().hex[:6]}:")
    await harness.start(worker=False)
    try:
        assert await readyz(harness.web_url) == (
            200,
            {"ok": True, "redis": "reachable", "scripts": "loaded"},
        )
        await harness.redis.script_flush()  # as after a failover: Redis forgot the scripts
        status, _ = await readyz(harness.web_url)
        assert status == 200, "it loads them again"
        shas = [harness.redis.register_script(body).sha for body in SCRIPTS.values()]
        assert await harness.redis.script_exists(*shas) == [True] * len(SCRIPTS)

        own_redis.stop()
        assert await readyz(harness.web_url) == (
            503,
            {"ok": False, "redis": "unreachable", "scripts": "unknown"},
        )
        scraped = await scrape(harness.web_url)
        assert scraped.value("countersign_redis_up") == 0, "/metrics still answers"
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{harness.web_url}/healthz") as response,
        ):
            assert response.status == 503, "and liveness says so too"
    finally:
        await harness.stop()


def dashboard_metric_names() -> set[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    return {name for expr in exprs for name in re.findall(r"\bcountersign_[a-z_]+\b", expr)}


async def test_the_dashboard_reads_every_metric_and_only_metrics_that_exist(bot: Harness) -> None:
    scraped = await scrape(bot.web_url)
    used = dashboard_metric_names()
    assert used - scraped.names() == set(), "the dashboard queries names nobody exports"
    unshown = {
        family.name
        for family in scraped.families
        if family.name.startswith("countersign_")
        and not any(family.name + suffix in used for suffix in SUFFIXES[family.type])
    }
    assert unshown == set(), "every metric has a panel"


@pytest.mark.parametrize(
    ("variable", "value", "fix"),
    [
        ("LOG_FORMAT", "yaml", "Use text (the default) or json"),
        ("METRICS_PORT", "0", "Use a free TCP port (1-65535) for the worker's /metrics"),
    ],
)
def test_a_bad_operations_setting_names_its_fix(variable: str, value: str, fix: str) -> None:
    environ = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s", variable: value}
    with pytest.raises(SettingsError) as raised:
        load_settings(environ)
    assert f"{variable} is invalid" in str(raised.value)
    assert fix in str(raised.value)


@pytest.mark.parametrize("formatter", [JsonFormatter(), TextFormatter(TEXT_FORMAT)])
def test_a_log_line_writes_its_time_in_iso_8601_with_its_zone(formatter: logging.Formatter) -> None:
    record = logging.LogRecord("countersign", logging.INFO, __file__, 1, "hello", None, None)
    record.created = 1_796_124_967.25  # 2026-12-01 11:36:07.250 UTC
    line = formatter.format(record)
    assert "2026-12-01T11:36:07.250+00:00" in line, line


def test_a_json_log_line_carries_the_context_and_the_traceback() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("countersign.test_operations")
    logger.addHandler(handler)
    try:
        with log_context(run_id="r0123456789abcdef", event="resume"):
            try:
                raise RuntimeError("boom")
            except RuntimeError:
                logger.exception("run failed\non two lines")
        logger.warning("outside", extra={"approval_id": "a0123456789"})
    finally:
        logger.removeHandler(handler)
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["message"] == "run failed\non two lines"
    assert (first["level"], first["logger"]) == ("ERROR", "countersign.test_operations")
    assert (first["run_id"], first["event"]) == ("r0123456789abcdef", "resume")
    assert "RuntimeError: boom" in first["exception"]
    assert second["approval_id"] == "a0123456789"
    assert "run_id" not in second, "the context ended with its block"


async def test_a_deployment_logs_json_lines_and_each_process_serves_its_metrics(
    deployment: Deployment,
) -> None:
    deployment.model.script = delete_then_answer
    worker_metrics = f"http://127.0.0.1:{free_port()}"
    web = await deployment.web(LOG_FORMAT="json")
    worker = deployment.worker(
        "worker.1", LOG_FORMAT="json", METRICS_PORT=worker_metrics.rsplit(":", 1)[1]
    )
    root = await deployment.start_run("delete u-100")
    [card] = await deployment.cards(root, 1)
    await deployment.sender.click(card, "approve", user="UBOB")
    await deployment.final_answers(root)

    counted = await scrape_until(
        worker_metrics, lambda s: s.value("countersign_runs_total", outcome="finished") == 1
    )
    assert counted.value("countersign_runs_total", outcome="finished") == 1
    assert counted.value("countersign_tool_executions_total", tool="delete_user", outcome="ok") == 1
    assert "countersign_approvals_pending" not in counted.names(), "Redis's truth is the web's"
    decided = await scrape(f"http://127.0.0.1:{deployment.port}")
    assert decisions(decided, "approved") == 1
    latency = "countersign_decision_latency_seconds_count"
    assert decided.value(latency, tool="delete_user", outcome="approved") == 1

    rows: Any = await deployment.redis.xrange(deployment.keys.audit)
    [run_id] = {fields[b"run_id"].decode() for _, fields in rows}
    web_lines, worker_lines = (json_lines(process) for process in (web, worker))
    assert all({"time", "level", "logger", "message"} <= line.keys() for line in worker_lines)
    job_lines = [line for line in worker_lines if line.get("run_id") == run_id]
    assert {line["event"] for line in job_lines} == {"start", "resume"}, worker_lines
    assert any(
        line.get("run_id") == run_id and line.get("event") == "approved" and "approval_id" in line
        for line in web_lines
    ), web_lines


def json_lines(process: Process) -> list[dict[str, Any]]:
    """Every line the process wrote, each parsed as one JSON object (failing on any other)."""
    lines = process.log_path.read_text().splitlines()
    assert lines, f"{process.name} logged nothing"
    return [json.loads(line) for line in lines if line.strip()]
