"""`rediss://` with a self-signed certificate, as Heroku Redis serves it."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator

import pytest

from bot.settings import load_settings
from runtime.local_redis import RedisServer, free_port
from runtime.redis_connection import connect

OPENSSL = shutil.which("openssl")


@pytest.fixture(scope="module")
def tls_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
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
        yield f"rediss://127.0.0.1:{tls_port}/0"
    finally:
        server.stop()


def _linked_with_openssl(binary: str) -> bool:
    ldd = shutil.which("ldd")
    if ldd is None:
        return False
    linked = subprocess.run([ldd, binary], capture_output=True, text=True, check=False).stdout
    return "libssl" in linked


async def test_a_self_signed_rediss_url_connects(tls_url: str) -> None:
    settings = load_settings(
        {
            "SLACK_BOT_TOKEN": "x",
            "SLACK_SIGNING_SECRET": "y",
            "REDIS_URL": "redis://127.0.0.1:1/0",
            "REDIS_TLS_URL": tls_url,
        }
    )
    client = connect(settings.effective_redis_url)
    try:
        assert await client.ping()
        await client.set("cstest:tls", "1", ex=5)
        assert await client.get("cstest:tls") == b"1"
    finally:
        await client.delete("cstest:tls")
        await client.aclose()
