"""The worker's MCP servers: connected once at start, kept, reconnected, closed at shutdown.

Every distinct server object reachable from the registry (several agents may share one: it is
connected once) gets a task of its own that owns it for the worker's life: connect; then probe
it every `probe_interval` seconds with a `tools/list` round trip, which every MCP server
answers; after a failure, clean up and reconnect with the shared backoff, logging the
server's name; on shutdown, clean up. Connect and cleanup run in that same task, as some
transports require. The web process never connects them.

A run asks `ensure` before it needs a server: a fresh probe of each one (a server that died
while an approval waited is found here, not by the call), and, while one is down, a bounded
wait for its task to bring it back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from agents.mcp import MCPServer

from runtime.process.backoff import Backoff

log = logging.getLogger(__name__)

PROBE_TIMEOUT_SECONDS = 5.0
CLEANUP_TIMEOUT_SECONDS = 5.0
BACKOFF_FIRST_SECONDS = 0.5
BACKOFF_MAX_SECONDS = 30.0

OnConnect = Callable[[MCPServer], Awaitable[None]]


class McpServerUnavailable(Exception):
    """An MCP server a run needs cannot be reached; the worker keeps trying to reconnect."""

    def __init__(self, server: str, reason: str) -> None:
        super().__init__(f"MCP server {server!r} is not reachable: {reason}")
        self.server = server
        self.reason = reason


@dataclass(eq=False)
class _Link:
    server: MCPServer
    up: asyncio.Event = field(default_factory=asyncio.Event)
    probe_now: asyncio.Event = field(default_factory=asyncio.Event)
    last_error: str = "not connected yet"
    connections: int = 0


class McpConnections:
    def __init__(
        self,
        servers: Iterable[MCPServer],
        *,
        probe_interval: float = 5.0,
        connect_timeout: float = 30.0,
        wait_seconds: float = 30.0,
        on_connect: OnConnect | None = None,
    ) -> None:
        self._links: dict[int, _Link] = {}
        for server in servers:
            self._links.setdefault(id(server), _Link(server))
        self._probe_interval = probe_interval
        self._connect_timeout = connect_timeout
        self._wait_seconds = wait_seconds
        self._on_connect = on_connect
        self._stopping = asyncio.Event()

    def __len__(self) -> int:
        return len(self._links)

    def is_up(self, server: MCPServer) -> bool:
        link = self._links.get(id(server))
        return link is not None and link.up.is_set()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Keep every server connected while the body runs; close them all afterwards."""
        loop = asyncio.get_running_loop()
        tasks = [
            loop.create_task(self._keep(link), name=f"mcp:{link.server.name}")
            for link in self._links.values()
        ]
        try:
            yield
        finally:
            self._stopping.set()
            if tasks:
                _done, pending = await asyncio.wait(tasks, timeout=CLEANUP_TIMEOUT_SECONDS + 1)
                for task in pending:
                    task.cancel()
                for task in pending:
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
            log.info("MCP servers closed: %d", len(tasks))

    async def ensure(self, servers: Iterable[MCPServer]) -> None:
        """Return once every server answered a fresh probe; McpServerUnavailable (naming the
        first one that did not) after `wait_seconds`, while its task keeps reconnecting."""
        deadline = asyncio.get_running_loop().time() + self._wait_seconds
        for server in servers:
            link = self._links.get(id(server))
            if link is None:
                raise McpServerUnavailable(server.name, "the worker does not manage it")
            while True:
                if link.up.is_set():
                    error = await _probe(server)
                    if error is None:
                        break
                    self._lost(link, error)
                remaining = deadline - asyncio.get_running_loop().time()
                if remaining <= 0 or self._stopping.is_set():
                    raise McpServerUnavailable(server.name, link.last_error)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(link.up.wait(), timeout=remaining)

    async def first_unreachable(self, servers: Iterable[MCPServer]) -> str | None:
        """The name of the first server that is down or fails a fresh probe (its task is then
        told to reconnect), else None. Does not wait."""
        for server in servers:
            link = self._links.get(id(server))
            if link is None or not link.up.is_set():
                return server.name
            error = await _probe(server)
            if error is not None:
                self._lost(link, error)
                return server.name
        return None

    def _lost(self, link: _Link, error: str) -> None:
        """A probe from a run failed: its owner probes again now and reconnects if need be."""
        if link.up.is_set():
            log.warning("MCP server %r did not answer (%s); checking it", link.server.name, error)
        link.last_error = error
        link.up.clear()
        link.probe_now.set()

    async def _keep(self, link: _Link) -> None:
        """The one task that connects, probes, reconnects and closes this server."""
        backoff = Backoff(BACKOFF_FIRST_SECONDS, BACKOFF_MAX_SECONDS)
        attempt = 0
        while not self._stopping.is_set():
            error = await self._connect(link.server)
            if error is not None:
                link.last_error = error
                delay = backoff.failed()
                attempt += 1
                log.warning(
                    "MCP server %r cannot be reached (%s); retrying in %.1f s (attempt %d)",
                    link.server.name,
                    error,
                    delay,
                    attempt,
                )
                await self._cleanup(link.server)
                await self._sleep(delay)
                continue
            attempt = 0
            backoff.succeeded()
            link.connections += 1
            again = "re" if link.connections > 1 else ""
            log.info("MCP server %r %sconnected", link.server.name, again)
            link.up.set()
            if self._on_connect is not None:
                await self._on_connect(link.server)
            await self._watch(link)
            link.up.clear()
            await self._cleanup(link.server)

    async def _watch(self, link: _Link) -> None:
        """Probe until a probe fails or the worker stops."""
        while not self._stopping.is_set():
            link.probe_now.clear()
            await self._sleep(self._probe_interval, wake=link.probe_now)
            if self._stopping.is_set():
                return
            error = await _probe(link.server)
            if error is not None:
                link.last_error = error
                log.warning(
                    "MCP server %r connection lost (%s); reconnecting", link.server.name, error
                )
                return
            link.up.set()

    async def _connect(self, server: MCPServer) -> str | None:
        try:
            async with asyncio.timeout(self._connect_timeout):
                await server.connect()  # type: ignore[no-untyped-call]
        except TimeoutError:
            return f"no answer within {self._connect_timeout:.0f} s"
        except Exception as error:
            log.debug("MCP server %r: connect failed", server.name, exc_info=True)
            return _describe(error)
        invalidate = getattr(server, "invalidate_tools_cache", None)
        if callable(invalidate):
            invalidate()  # the server may have restarted with other tools
        return None

    @staticmethod
    async def _cleanup(server: MCPServer) -> None:
        try:
            async with asyncio.timeout(CLEANUP_TIMEOUT_SECONDS):
                await server.cleanup()  # type: ignore[no-untyped-call]
        except Exception:
            log.warning("MCP server %r: cleanup failed", server.name, exc_info=True)

    async def _sleep(self, seconds: float, wake: asyncio.Event | None = None) -> None:
        """Sleep, waking early on shutdown (or on `wake`)."""
        waiters = [asyncio.ensure_future(self._stopping.wait())]
        if wake is not None:
            waiters.append(asyncio.ensure_future(wake.wait()))
        try:
            await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()


async def _probe(server: MCPServer) -> str | None:
    """None if the server answered a `tools/list` round trip, else why not.

    The session's own `list_tools` (not the server object's, which may answer from its cache).
    """
    session = getattr(server, "session", None)
    try:
        async with asyncio.timeout(PROBE_TIMEOUT_SECONDS):
            await (session.list_tools() if session is not None else server.list_tools())
    except TimeoutError:
        return f"no answer within {PROBE_TIMEOUT_SECONDS:.0f} s"
    except Exception as error:
        log.debug("MCP server %r: probe failed", server.name, exc_info=True)
        return _describe(error)
    return None


def _describe(error: BaseException) -> str:
    """One line for the log: the innermost cause, not the task group wrapped around it."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:200]}" if text else type(error).__name__
