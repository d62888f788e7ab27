"""The Slack Web API clients Countersign processes use: one for everything, one for clicks."""

from __future__ import annotations

import logging
from collections.abc import Coroutine
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackObjectFormationError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.models.views import View
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.slack.call_counter import SlackCallCounter
from runtime.process import TaskSet

log = logging.getLogger(__name__)

CLICK_LOOKUP_SECONDS = 1.5
"""What a click may spend asking Slack who is in a group: Slack wants the acknowledgement within
3 s, and recording the decision in Redis comes after."""


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


def publish_client(client: AsyncWebClient) -> AsyncWebClient:
    """`client` without waiting out 429s: the Home tab's publishes pause every web process for
    the Retry-After instead (`bot.home.pace`), and a tab waiting meanwhile holds nothing."""
    return AsyncWebClient(
        token=client.token,
        base_url=client.base_url,
        session=client.session,
        timeout=client.timeout,
        retry_handlers=[
            handler
            for handler in client.retry_handlers
            if not isinstance(handler, AsyncRateLimitErrorRetryHandler)
        ],
    )


def directory_client(
    *, token: str, base_url: str, session: aiohttp.ClientSession | None = None
) -> AsyncWebClient:
    """For the web process's approver directory, asked while a click waits: one try only.

    Waiting out a 429's Retry-After, or retrying a 5xx, would outlast Slack's 3 s; a click that
    cannot be checked is refused politely and the person clicks again. slack_sdk counts its
    timeout in whole seconds, so the directory bounds each lookup at CLICK_LOOKUP_SECONDS too.
    """
    return AsyncWebClient(
        token=token, base_url=base_url, session=session, timeout=2, retry_handlers=[]
    )


RESPONSE_URL_SECONDS = 10


def response_url(url: str, client: AsyncWebClient) -> AsyncWebhookClient:
    """A `response_url` (an answer to a command or a click, seen by one person), posted to
    through `client`'s HTTP session, the process's shared one: without it slack_sdk opens and
    closes a session, and a connection, for every post."""
    return AsyncWebhookClient(url, timeout=RESPONSE_URL_SECONDS, session=client.session)


def send_later(tasks: TaskSet, work: Coroutine[Any, Any, Any], name: str) -> None:
    """Send a Slack call after the acknowledgement, from an owned task that shutdown drains:
    a refusal or an outage is one log line (the person's decision is already stored), never
    an unhandled task error."""
    tasks.spawn(_logged(work, name), name=name)


def open_modal(
    tasks: TaskSet, client: AsyncWebClient, trigger_id: str, modal: View, name: str
) -> None:
    """Open `modal` for the click that gave `trigger_id`, after the acknowledgement
    (`send_later`)."""
    send_later(tasks, client.views_open(trigger_id=trigger_id, view=modal), name)


async def _logged(work: Coroutine[Any, Any, Any], name: str) -> None:
    try:
        await work
    except SlackApiError as error:
        log.warning("%s: Slack refused: %s", name, error.response.get("error"))
    except SlackObjectFormationError as error:
        # What Slack would refuse, refused before sending (`slack_sdk`'s models check it).
        log.warning("%s: not sent, past Slack's limits: %s", name, error)
    except (aiohttp.ClientError, TimeoutError) as error:
        log.warning("%s: Slack unreachable: %s", name, type(error).__name__)
