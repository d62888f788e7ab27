"""Connecting to Redis the way every process here needs it, and waiting for it at start."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import ssl
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import AuthenticationError, RedisError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from runtime.stopping import Stopping

log = logging.getLogger(__name__)

FIRST_RETRY_SECONDS = 1.0
MAX_RETRY_SECONDS = 30.0


def connect(
    url: str,
    *,
    tls_verify: bool = True,
    tls_ca_file: Path | None = None,
    socket_timeout: float = 10.0,
    connect_timeout: float = 5.0,
    retries: int = 3,
    max_connections: int = 50,
) -> aioredis.Redis:
    """A client with timeouts, and retries with backoff across a short Redis outage.

    The worker rides out outages (blocking reads wait 2 s, so replies may take that long);
    the web process must answer Slack within 3 s, so it uses short timeouts and one retry.
    A `rediss://` server's certificate is checked (against `tls_ca_file` if given) unless
    `tls_verify` is false (`REDIS_TLS_VERIFY`, `REDIS_TLS_CA_FILE`).
    """
    options: dict[str, Any] = {
        "socket_timeout": socket_timeout,
        "socket_connect_timeout": connect_timeout,
        "health_check_interval": 15,
        "retry": Retry(ExponentialWithJitterBackoff(base=0.1, cap=2.0), retries=retries),
        "retry_on_error": [RedisConnectionError, RedisTimeoutError],
        "max_connections": max_connections,
        # Wait for a free connection (bounded by the socket timeout) instead of failing at once
        # when a burst of clicks wants more connections than the pool holds.
        "timeout": socket_timeout,
        "client_name": "countersign",
    }
    if url.startswith("rediss://") and tls_verify:
        options["ssl_cert_reqs"] = "required"
        options["ssl_check_hostname"] = True
        if tls_ca_file is not None:
            options["ssl_ca_certs"] = str(tls_ca_file)
    elif url.startswith("rediss://"):
        # The operator's explicit choice (REDIS_TLS_VERIFY=false), for Heroku Redis's
        # self-signed certificate: encrypted, but anyone on the path could pose as the server.
        options["ssl_cert_reqs"] = "none"
        options["ssl_check_hostname"] = False
    pool = aioredis.BlockingConnectionPool.from_url(url, **options)
    return aioredis.Redis.from_pool(pool)


async def wait_until_reachable(
    redis: aioredis.Redis,
    *,
    setting: str,
    stopping: Stopping | None = None,
    first_delay: float = FIRST_RETRY_SECONDS,
    max_delay: float = MAX_RETRY_SECONDS,
) -> bool:
    """Ping until Redis answers: True then, False if `stopping` is set first.

    A process started before its Redis (or with a wrong URL) says so, one line per failed
    attempt naming `setting` and the address (never the password), and retries with a backoff
    doubling from `first_delay` to `max_delay`, instead of crashing into a restart loop.
    """
    stopping = stopping or Stopping()
    delay = first_delay
    failures = 0
    while not stopping.is_set():
        ping = asyncio.ensure_future(redis.ping())
        try:
            if not await _first_or_stopped(ping, stopping):
                return False
            await ping
        except RedisError as error:
            failures += 1
            log.warning(
                "cannot reach Redis at %s (%s): %s; retrying in %g s",
                address(redis),
                setting,
                _reason(error),
                delay,
            )
        else:
            if failures:
                log.info("Redis at %s (%s) answers", address(redis), setting)
            return True
        if await stopping.sleep(delay):
            return False
        delay = min(delay * 2, max_delay)
    return False


async def _first_or_stopped(work: asyncio.Future[Any], stopping: Stopping) -> bool:
    """Wait for `work` unless `stopping` comes first (then `work` is cancelled): done?"""
    stopped = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait({work, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
    if work.done():
        return True
    work.cancel()
    with contextlib.suppress(asyncio.CancelledError, RedisError):
        await work
    return False


def address(redis: aioredis.Redis) -> str:
    """Where `redis` connects (host:port or socket path): for logs, without credentials."""
    options = redis.connection_pool.connection_kwargs
    if options.get("path"):
        return str(options["path"])
    return f"{options.get('host', 'localhost')}:{options.get('port', 6379)}"


def _reason(error: RedisError) -> str:
    """Why a connection failed, in a few words an operator can act on."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, ssl.SSLCertVerificationError):
            return (
                f"its TLS certificate was not accepted ({cause.verify_message}); set "
                "REDIS_TLS_CA_FILE to its CA, or REDIS_TLS_VERIFY=false for Heroku Redis"
            )
        if isinstance(cause, ssl.SSLError):
            return f"TLS failed ({cause.reason or cause})"
        if isinstance(cause, socket.gaierror):
            return f"its host name did not resolve ({cause.strerror})"
        if isinstance(cause, OSError) and cause.errno:
            return os.strerror(cause.errno).lower()  # e.g. "connection refused"
        cause = cause.__cause__ or cause.__context__
    if isinstance(error, AuthenticationError):
        return "it refused the password"
    if isinstance(error, RedisTimeoutError):
        return "it did not answer in time"
    return str(error).rstrip(".") or type(error).__name__
