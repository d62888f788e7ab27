"""`rediss://` with a self-signed certificate, as Heroku Redis serves it."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError

from bot.settings import Settings, SettingsError, load_settings
from runtime.db.connection import ClientOptions, connect, wait_until_reachable
from runtime.db.local import RedisServer, free_port
from runtime.process.shutdown import Shutdown

OPENSSL = shutil.which("openssl")


@dataclass(frozen=True)
class TlsRedis:
    url: str
    ca_file: Path
    """The server's self-signed certificate, which is its own CA."""


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsRedis]:
    directory = tmp_path_factory.mktemp("redis-tls")
    server = RedisServer(directory=directory)
    if OPENSSL is None or not _linked_with_openssl(server.binary):
        pytest.skip("needs openssl and a redis-server built with TLS (Debian's is)")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            OPENSSL,
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=self-signed.example",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    tls_port = free_port()
    server.extra_args = [
        "--tls-port",
        str(tls_port),
        "--tls-cert-file",
        str(cert),
        "--tls-key-file",
        str(key),
        "--tls-ca-cert-file",
        str(cert),
        "--tls-auth-clients",
        "no",
    ]
    server.start()
    if "Failed to configure TLS" in (directory / "redis.log").read_text():
        server.stop()
        pytest.skip("this redis-server cannot serve TLS")
    try:
        yield TlsRedis(url=f"rediss://127.0.0.1:{tls_port}/0", ca_file=cert)
    finally:
        server.stop()


def _linked_with_openssl(binary: str) -> bool:
    ldd = shutil.which("ldd")
    if ldd is None:
        return False
    linked = subprocess.run([ldd, binary], capture_output=True, text=True, check=False).stdout
    return "libssl" in linked


def heroku_like(url: str, **more: str) -> dict[str, str]:
    """Heroku sets both URLs; the TLS one wins."""
    return {
        "SLACK_BOT_TOKEN": "xoxb-x",
        "SLACK_SIGNING_SECRET": "y",
        "REDIS_URL": "redis://127.0.0.1:1/0",
        "REDIS_TLS_URL": url,
        **more,
    }


def client_for(settings: Settings) -> aioredis.Redis:
    options = ClientOptions(
        tls_verify=settings.redis_tls_verify, tls_ca_file=settings.redis_tls_ca_file, retries=0
    )
    return connect(settings.effective_redis_url, options)


async def test_a_self_signed_certificate_is_refused_by_default(
    tls_redis: TlsRedis, caplog: pytest.LogCaptureFixture
) -> None:
    settings = load_settings(heroku_like(tls_redis.url))
    client = client_for(settings)
    try:
        with pytest.raises(RedisConnectionError, match="certificate verify failed"):
            await client.ping()
        stopping = Shutdown()
        asyncio.get_running_loop().call_later(0.5, stopping.set)
        reachable = await wait_until_reachable(
            client, setting=settings.redis_url_setting, stopping=stopping, first_delay=5
        )
    finally:
        await client.aclose()
    assert not reachable
    [line] = [r.getMessage() for r in caplog.records if "cannot reach Redis" in r.getMessage()]
    assert "(REDIS_TLS_URL): its TLS certificate was not accepted" in line
    assert "REDIS_TLS_VERIFY=false for Heroku Redis" in line


@pytest.mark.parametrize(
    "trust", ["opt-out", "ca-file"], ids=["REDIS_TLS_VERIFY=false", "REDIS_TLS_CA_FILE"]
)
async def test_a_self_signed_certificate_is_accepted_when_told(
    tls_redis: TlsRedis, trust: str
) -> None:
    more = (
        {"REDIS_TLS_VERIFY": "false"}
        if trust == "opt-out"
        else {"REDIS_TLS_CA_FILE": str(tls_redis.ca_file)}
    )
    client = client_for(load_settings(heroku_like(tls_redis.url, **more)))
    try:
        assert await client.ping()
        await client.set("cstest:tls", "1", ex=5)
        assert await client.get("cstest:tls") == b"1"
    finally:
        await client.delete("cstest:tls")
        await client.aclose()


def test_a_missing_ca_file_names_the_setting(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="REDIS_TLS_CA_FILE is invalid"):
        load_settings(heroku_like("rediss://x:1/0", REDIS_TLS_CA_FILE=str(tmp_path / "no.pem")))
