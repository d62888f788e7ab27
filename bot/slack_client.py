"""The Slack Web API client every Countersign process uses."""

from __future__ import annotations

import aiohttp
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack_call_counter import SlackCallCounter


def slack_client(
    *, token: str, base_url: str, session: aiohttp.ClientSession | None = None
) -> AsyncWebClient:
    """429s wait for Retry-After and 5xx/connection errors retry, in slack_sdk, not by hand."""
    return AsyncWebClient(
        token=token,
        base_url=base_url,
        session=session,
        timeout=15,
        retry_handlers=[
            SlackCallCounter(),  # counts every answer for /metrics; never retries itself
            AsyncRateLimitErrorRetryHandler(max_retry_count=5),
            AsyncServerErrorRetryHandler(max_retry_count=3),
            AsyncConnectionErrorRetryHandler(max_retry_count=3),
        ],
    )
