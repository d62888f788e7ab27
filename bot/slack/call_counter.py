"""Counts what the Slack Web API answers: errors by method and code, and 429s.

It sits first among the client's retry handlers, which `slack_sdk` shows every response and
every connection error, and it never asks for a retry itself: the handlers after it decide.
"""

from __future__ import annotations

from aiohttp import ClientError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

from runtime.metrics import SLACK_API_ERRORS, SLACK_RATE_LIMITED


class SlackCallCounter(AsyncRetryHandler):
    async def can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        method = request.url.rstrip("/").rsplit("/", 1)[-1] or "?"
        if error is not None or response is None:
            unreachable = error is None or isinstance(error, ClientError | OSError)
            SLACK_API_ERRORS.labels(method, "connection" if unreachable else "unreadable").inc()
        elif response.status_code == 429:
            SLACK_RATE_LIMITED.labels(method).inc()
        elif response.status_code >= 400:
            SLACK_API_ERRORS.labels(method, f"http_{response.status_code}").inc()
        elif response.body is not None and response.body.get("ok") is False:
            SLACK_API_ERRORS.labels(method, str(response.body.get("error", "unknown"))).inc()
        return False
