"""The OpenAI client a worker's runs share, with a kept-alive connection for each of them."""

from __future__ import annotations

import itertools
import math

import httpx2
from agents import set_default_openai_client
from openai import AsyncOpenAI, DefaultAsyncHttpxClient

MIN_CONNECTIONS = 1000
"""The `openai` client's own cap on connections open at once."""
CONNECTIONS_PER_POOL = 16
"""Kept-alive connections per pool: each request scans its pool's connections (`httpcore`
probes every idle one), so one pool of 256 cost a busy worker about a tenth of its CPU."""


class PoolsTransport(httpx2.AsyncBaseTransport):
    """Several connection pools taken in turn: the same connections kept alive as one big pool,
    at a small pool's cost per request."""

    def __init__(self, pools: list[httpx2.AsyncHTTPTransport]) -> None:
        self._pools = pools
        self._turns = itertools.cycle(pools)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return await next(self._turns).handle_async_request(request)

    async def aclose(self) -> None:
        for pool in self._pools:
            await pool.aclose()


def pools_for(concurrency: int) -> PoolsTransport:
    count = max(1, math.ceil(concurrency / CONNECTIONS_PER_POOL))
    # Taken in turn, a pool has about concurrency / count requests in flight; the slack keeps a
    # momentary excess from closing (and later re-opening, TLS and all) a connection.
    keep = math.ceil(concurrency / count) + 4
    limits = httpx2.Limits(
        max_connections=max(MIN_CONNECTIONS // count, keep), max_keepalive_connections=keep
    )
    return PoolsTransport([httpx2.AsyncHTTPTransport(limits=limits) for _ in range(count)])


def share_openai_client(concurrency: int) -> None:
    """Make the SDK's default model client keep `concurrency` connections alive between calls.

    The `openai` client keeps 100: with `WORKER_CONCURRENCY` above that, every model call past
    the hundredth would open (and TLS-handshake) a connection of its own and drop it after.
    Reads `OPENAI_API_KEY`, `OPENAI_BASE_URL` and the rest as the SDK's own client would; call
    it only when a real model is used (without a key the client cannot be built).
    """
    client = AsyncOpenAI(http_client=DefaultAsyncHttpxClient(transport=pools_for(concurrency)))
    # Traces keep going where they went: only the model calls change client.
    set_default_openai_client(client, use_for_tracing=False)
