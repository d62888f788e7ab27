"""Connecting to Redis the way every process here needs it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError


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
