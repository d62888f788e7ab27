"""Connecting to Redis the way every process here needs it, and waiting for it at start."""

from __future__ import annotations

import logging
import os
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import MasterNotFoundError
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import AuthenticationError, RedisError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from runtime.process.backoff import Backoff
from runtime.process.shutdown import Shutdown

log = logging.getLogger(__name__)

FIRST_RETRY_SECONDS = 1.0
BLOCKING_READ_SECONDS = 100.0
"""The longest a blocking read (XREAD, XREADGROUP) waits on a client whose socket timeout
outlasts it (`BLOCKING_READS_SOCKET_TIMEOUT`): an idle process sends one read per this long,
per loop and shard. Waiting long loses nothing: a new entry ends the wait at once, a server
that dies or turns replica ends it with an error, and a host gone silent is noticed by TCP
keepalive (`keepalive`) within half a minute, not at the socket timeout."""
BLOCK_SHARE = 0.8
"""Of a client's socket timeout, the part a blocking read may wait (`longest_block`): the rest
is for the reply to arrive."""
BLOCKING_READS_SOCKET_TIMEOUT = BLOCKING_READ_SECONDS / BLOCK_SHARE + 1.0
"""So that `longest_block` allows the whole `BLOCKING_READ_SECONDS`."""
MAX_RETRY_SECONDS = 30.0
WORKER_OWN_CONNECTIONS = 8
"""Besides one per run: the job read (it blocks), heartbeats, the expiry and reminder pollers,
the audit trimmer, /metrics, and a spare."""


def worker_pool_size(concurrency: int) -> int:
    """Connections a worker may open: one per run it works on at once, plus its own loops.

    Fewer, and at high `WORKER_CONCURRENCY` runs queue for a connection: under a busy event
    loop each call holds its connection for a loop's turn (bench/concurrency.py saw a pool of
    50 full at 256 runs, when each run still polled its stop mark twice a second). The pool
    opens connections only when needed; this is a cap.
    """
    return max(50, concurrency + WORKER_OWN_CONNECTIONS)


@dataclass(frozen=True, kw_only=True)
class ClientOptions:
    """How a client times out, retries, pools and checks TLS: one set for one Redis
    (`connect`), a cluster (`runtime.db.cluster`) and Sentinel's primary (`runtime.db.sentinel`).

    The worker rides out outages (its blocking reads wait up to 8 s on the defaults, longer on
    a client whose socket timeout outlasts `BLOCKING_READ_SECONDS`); the web process must answer
    Slack within 3 s, so it uses short timeouts and one retry (`bot.wiring`).
    """

    tls_verify: bool = True
    """A `rediss://` server's certificate is checked unless false (`REDIS_TLS_VERIFY`)."""
    tls_ca_file: Path | None = None
    """The CA it is checked against, else the system's (`REDIS_TLS_CA_FILE`)."""
    socket_timeout: float = 10.0
    connect_timeout: float = 5.0
    retries: int = 3
    max_connections: int = 50
    """Per node, on a cluster."""


def connect(url: str, options: ClientOptions | None = None) -> aioredis.Redis:
    """A client with timeouts, and retries with backoff across a short Redis outage."""
    options = options or ClientOptions()
    kwargs = redis_kwargs(url, options)
    # Wait for a free connection (bounded by the socket timeout) instead of failing at once
    # when a burst of clicks wants more connections than the pool holds.
    kwargs["timeout"] = options.socket_timeout
    pool = aioredis.BlockingConnectionPool.from_url(url, **kwargs)
    return aioredis.Redis.from_pool(pool)


def redis_kwargs(url: str, options: ClientOptions) -> dict[str, Any]:
    """`options` as redis-py's keyword arguments, TLS as `url`'s scheme asks: the same for one
    Redis's client and a cluster's (`runtime.db.cluster`)."""
    kwargs: dict[str, Any] = {
        "socket_timeout": options.socket_timeout,
        "socket_connect_timeout": options.connect_timeout,
        **keepalive(),
        "retry": Retry(ExponentialWithJitterBackoff(base=0.1, cap=2.0), retries=options.retries),
        "retry_on_error": [RedisConnectionError, RedisTimeoutError],
        "max_connections": options.max_connections,
        "client_name": "countersign",
    }
    if url.startswith("rediss://"):
        kwargs |= tls_kwargs(options)
    return kwargs


def tls_kwargs(options: ClientOptions) -> dict[str, Any]:
    """How a TLS connection checks the server, as `options` say (also Sentinel's)."""
    if not options.tls_verify:
        # The operator's explicit choice (REDIS_TLS_VERIFY=false), for Heroku Redis's
        # self-signed certificate: encrypted, but anyone on the path could pose as the server.
        return {"ssl_cert_reqs": "none", "ssl_check_hostname": False}
    kwargs: dict[str, Any] = {"ssl_cert_reqs": "required", "ssl_check_hostname": True}
    if options.tls_ca_file is not None:
        kwargs["ssl_ca_certs"] = str(options.tls_ca_file)
    return kwargs


def keepalive() -> dict[str, Any]:
    """TCP keepalive instead of redis-py's health checks.

    A health check is a `PING` before any command on a connection idle for its interval, and
    a pool hands out its least recently used connection: on an idle worker nearly every command
    came with one (1.9 of a cluster's 5.2 commands a second). They only ever found connections
    a server or a NAT had closed, and such a connection fails on use, before the command
    reached Redis, so the client's retry sends it again on a new one. What a `PING` cannot do
    is notice a peer gone silent under a blocking read (a failed-over primary's host cut off):
    the kernel's probes do, within about half a minute, at no command's cost. redis-py 8 turns
    them on by default (first probe after 30 s); said here because 5.x, which `pyproject.toml`
    allows, does not.
    """
    options: dict[int, int] = {}
    for name, value in (("TCP_KEEPIDLE", 15), ("TCP_KEEPINTVL", 5), ("TCP_KEEPCNT", 3)):
        if hasattr(socket, name):  # not every platform has all three
            options[getattr(socket, name)] = value
    return {"socket_keepalive": True, "socket_keepalive_options": options}


def longest_block(redis: aioredis.Redis) -> float:
    """The longest a blocking read on `redis` may wait: well under its socket timeout, at most
    `BLOCKING_READ_SECONDS`."""
    pool = getattr(redis, "connection_pool", None)
    # A cluster client has no pool of its own: its nodes' connections share its options.
    options: dict[str, Any] = (
        pool.connection_kwargs if pool is not None else getattr(redis, "connection_kwargs", {})
    )
    timeout = options.get("socket_timeout")
    if timeout is None:
        return BLOCKING_READ_SECONDS
    return max(0.05, min(BLOCKING_READ_SECONDS, float(timeout) * BLOCK_SHARE))


async def wait_until_reachable(
    redis: aioredis.Redis,
    *,
    setting: str,
    stopping: Shutdown | None = None,
    first_delay: float = FIRST_RETRY_SECONDS,
    max_delay: float = MAX_RETRY_SECONDS,
) -> bool:
    """Ping until Redis answers: True then, False if `stopping` is set first.

    A process started before its Redis (or with a wrong URL) says so, one line per failed
    attempt naming `setting` and the address (never the password), and retries with a backoff
    (`runtime.process.backoff`) from `first_delay` up to `max_delay`, instead of crashing into
    a restart loop.
    """
    stopping = stopping or Shutdown()
    backoff = Backoff(first_delay, max_delay)
    failures = 0
    while not stopping.is_set():
        try:
            if await stopping.unless_stopped(_ping(redis)) is None:
                return False
        except RedisError as error:
            failures += 1
            delay = backoff.failed()
            log.warning(
                "cannot reach Redis at %s (%s): %s; retrying in %g s",
                address(redis),
                setting,
                describe_failure(error),
                delay,
            )
        else:
            if failures:
                log.info("Redis at %s (%s) answers", address(redis), setting)
            return True
        if await stopping.sleep(delay):
            return False
    return False


async def _ping(redis: aioredis.Redis) -> bool:
    return bool(await redis.ping())


def address(redis: aioredis.Redis) -> str:
    """Where `redis` connects (host:port or socket path): for logs, without credentials."""
    pool = getattr(redis, "connection_pool", None)
    if pool is None:  # a cluster client (`runtime.db.cluster`): the node it was given
        nodes = redis.nodes_manager.startup_nodes  # type: ignore[attr-defined]
        return ",".join(nodes) or "?"
    service = getattr(pool, "service_name", None)
    if isinstance(service, str):  # through Sentinel (runtime.db.sentinel)
        return f"the primary {service!r} named by Sentinel"
    options = pool.connection_kwargs
    if options.get("path"):
        return str(options["path"])
    return f"{options.get('host', 'localhost')}:{options.get('port', 6379)}"


def describe_failure(error: RedisError) -> str:
    """Why a Redis call failed, in a few words an operator can act on: for a loop's one log
    line per failed attempt, where a traceback per attempt would bury the log in an outage."""
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
    if isinstance(error, MasterNotFoundError):
        return "no Sentinel answered with that primary (check both settings)"
    if isinstance(error, RedisTimeoutError):
        return "it did not answer in time"
    return str(error).rstrip(".") or type(error).__name__
