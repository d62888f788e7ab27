"""Network namespaces for partition tests: a small network of the test's own, on one machine.

A `Lab` makes a hub namespace holding a bridge, and member namespaces joined to it by veth
pairs, each member with one address of `LAB_NETWORK` (RFC 2544's range for benchmarking
networks, so it names nothing real). Addresses exist only inside these namespaces; the host's
own namespace gets none, so nothing a test sends there can leave the machine. A member may
instead have `aliases`: the other members' addresses on its loopback and no link at all, so
that a process inside reaches the lab only through the test's own proxy (`tests.support.tcp_proxy`).

The test process itself stays in the host's namespace and makes sockets inside the lab with
`Namespace.socket`: a thread of its own enters the namespace (`setns` moves only the calling
thread), and a socket keeps the namespace it was made in. Only such sockets ever connect to a lab
address; the host's own sockets connect to loopback only (`Namespace.host`).

Partitions are an nftables table in the hub (`Lab.partition`): frames between the groups'
veths are dropped, both ways. Everything is removed by `Lab.remove`, and a run that was killed
before it could clean up is swept by the next (`sweep`): namespace names carry the test
process's pid, and those of dead processes go, with the processes inside them.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ipaddress
import os
import shutil
import signal
import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

LAB_PREFIX = "cslab"
LAB_NETWORK = ipaddress.ip_network("198.18.0.0/24")
NETNS_DIR = Path("/var/run/netns")
CLONE_NEWNET = 0x40000000
TABLE = "countersign_partitions"
COMMAND_TIMEOUT = 10.0


def unavailable() -> str | None:
    """Why this machine cannot run a lab (None: it can)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "no `ip` (iproute2) to make network namespaces"
    if shutil.which("nft") is None:
        return "no `nft`: `apt-get install nftables` (scripts/dev.py test does, as root)"
    return None


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ip", *args], capture_output=True, text=True, check=check, timeout=COMMAND_TIMEOUT
    )


def _enter(name: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(NETNS_DIR / name, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {name}")
    finally:
        os.close(fd)


class Namespace:
    """One network namespace (or, with no name, the host's: loopback only)."""

    def __init__(self, name: str | None) -> None:
        self.name = name
        self._thread = ThreadPoolExecutor(1, initializer=_enter, initargs=(name,)) if name else None

    @classmethod
    def host(cls) -> Namespace:
        return cls(None)

    def wrap(self, command: list[str]) -> list[str]:
        """`command`, run inside this namespace."""
        return ["ip", "netns", "exec", self.name, *command] if self.name else command

    async def new_socket(self) -> socket.socket:
        """A non-blocking TCP socket made inside this namespace."""

        def make() -> socket.socket:
            made = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            made.setblocking(False)
            return made

        if self._thread is None:
            return make()
        return await asyncio.get_running_loop().run_in_executor(self._thread, make)

    async def connect(self, host: str, port: int) -> socket.socket:
        if self.name is None and not ipaddress.ip_address(host).is_loopback:
            raise ValueError(f"the host's namespace connects to loopback only, not {host}")
        made = await self.new_socket()
        try:
            await asyncio.wait_for(asyncio.get_running_loop().sock_connect(made, (host, port)), 5)
        except BaseException:
            made.close()
            raise
        return made

    async def listener(self, host: str, port: int) -> socket.socket:
        made = await self.new_socket()
        made.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        made.bind((host, port))
        made.listen(128)
        return made

    def pids(self) -> list[int]:
        if self.name is None:
            return []
        found = ip("netns", "pids", self.name, check=False).stdout.split()
        return [int(pid) for pid in found if pid.isdigit()]

    def close(self) -> None:
        if self._thread is not None:
            self._thread.shutdown(wait=False)


class Lab:
    """A hub with a bridge and member namespaces on `LAB_NETWORK`, named `cslab<pid>-<tag>-*`."""

    def __init__(self, tag: str) -> None:
        self.prefix = f"{LAB_PREFIX}{os.getpid()}-{tag}"
        self.hub = self._make("hub")
        self.members: dict[str, Namespace] = {}
        self.addresses: dict[str, str] = {}
        self._ports: dict[str, str] = {}
        """Member -> its veth in the hub."""
        self.partitioned = False
        ip("-n", self.hub.name or "", "link", "add", "br0", "type", "bridge")
        ip("-n", self.hub.name or "", "link", "set", "br0", "up")
        self._nft(
            [
                f"add table bridge {TABLE}",
                f"add chain bridge {TABLE} forward "
                "{ type filter hook forward priority 0; policy accept; }",
            ]
        )

    def _make(self, role: str) -> Namespace:
        name = f"{self.prefix}-{role}"
        ip("netns", "add", name)
        ip("-n", name, "link", "set", "lo", "up")
        return Namespace(name)

    def add(self, member: str) -> Namespace:
        """A member joined to the hub, with the next address of the network."""
        namespace = self._make(member)
        address = str(LAB_NETWORK[len(self.addresses) + 1])
        port = f"p{len(self._ports)}"
        hub = self.hub.name or ""
        ip(
            "-n",
            hub,
            "link",
            "add",
            port,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            namespace.name or "",
        )
        ip("-n", hub, "link", "set", port, "master", "br0", "up")
        ip(
            "-n",
            namespace.name or "",
            "addr",
            "add",
            f"{address}/{LAB_NETWORK.prefixlen}",
            "dev",
            "eth0",
        )
        ip("-n", namespace.name or "", "link", "set", "eth0", "up")
        self.members[member] = namespace
        self.addresses[member] = address
        self._ports[member] = port
        return namespace

    def add_behind_proxy(self, member: str) -> Namespace:
        """A member with no link: every other member's address is local to it (on its
        loopback), where the test's proxy listens and relays from a member's namespace."""
        namespace = self._make(member)
        name = namespace.name or ""
        for address in self.addresses.values():
            ip("-n", name, "addr", "add", f"{address}/32", "dev", "lo")
        self.members[member] = namespace
        return namespace

    def partition(self, *groups: list[str]) -> None:
        """Members of different groups no longer reach each other (members left out of every
        group keep reaching everyone); replaces any partition before."""
        rules = []
        for index, group in enumerate(groups):
            for other in groups[index + 1 :]:
                ours = ", ".join(self._ports[m] for m in group)
                theirs = ", ".join(self._ports[m] for m in other)
                for way in ((ours, theirs), (theirs, ours)):
                    rules.append(
                        f"add rule bridge {TABLE} forward "
                        f"iifname {{ {way[0]} }} oifname {{ {way[1]} }} drop"
                    )
        self._nft([f"flush chain bridge {TABLE} forward", *rules])
        self.partitioned = bool(rules)

    def heal(self) -> None:
        self._nft([f"flush chain bridge {TABLE} forward"])
        self.partitioned = False

    def _nft(self, commands: list[str]) -> None:
        subprocess.run(
            ["ip", "netns", "exec", self.hub.name or "", "nft", "-f", "-"],
            input="\n".join(commands) + "\n",
            text=True,
            check=True,
            capture_output=True,
            timeout=COMMAND_TIMEOUT,
        )

    def namespaces(self) -> list[Namespace]:
        return [self.hub, *self.members.values()]

    def remove(self) -> None:
        """Kill what runs inside, then remove every namespace (the veths and the nftables
        table go with them)."""
        for namespace in self.namespaces():
            _remove(namespace.name or "")
            namespace.close()


def _remove(name: str) -> None:
    for pid in Namespace(name).pids():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    ip("netns", "delete", name, check=False)


def sweep() -> list[str]:
    """Remove the labs of test processes that are gone (killed before they cleaned up)."""
    if not NETNS_DIR.is_dir():
        return []
    swept = []
    for path in NETNS_DIR.iterdir():
        if not path.name.startswith(LAB_PREFIX):
            continue
        owner = path.name[len(LAB_PREFIX) :].split("-", 1)[0]
        if owner.isdigit() and _alive(int(owner)):
            continue
        _remove(path.name)
        swept.append(path.name)
    return swept


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
