from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis

from runtime.examples.ops import REFUNDS, SERVICES, USERS
from runtime.local_redis import RedisServer, answers
from tests import agents
from tests.deployment import Deployment
from tests.harness import Harness

# The SDK would export traces to OpenAI; tests must never reach a real service.
os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    existing = os.environ.get("REDIS_URL")
    if existing and answers(existing):
        yield existing
        return
    server = RedisServer(directory=tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def prefix(redis_url: str) -> Iterator[str]:
    """A key prefix of the test's own; every key under it is deleted afterwards."""
    value = f"cstest:{uuid.uuid4().hex[:10]}:"
    yield value
    client = redis.Redis.from_url(redis_url)
    try:
        keys = list(client.scan_iter(match=f"{value}*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


@pytest.fixture
def env_overrides(request: pytest.FixtureRequest) -> dict[str, str]:
    """Settings for one test: `@with_env(NAME="value")`, or a module's own fixture."""
    param: dict[str, str] = getattr(request, "param", {})
    return param


def with_env(**environ: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("env_overrides", [environ], indirect=True, ids=["env"])


@pytest.fixture
async def bot(redis_url: str, prefix: str, env_overrides: dict[str, str]) -> AsyncIterator[Harness]:
    agents.EXECUTIONS.clear()
    harness = Harness(redis_url=redis_url, prefix=prefix, env=env_overrides)
    await harness.start()
    try:
        yield harness
    finally:
        await harness.stop()


@pytest.fixture
async def deployment(redis_url: str, prefix: str, tmp_path: Path) -> AsyncIterator[Deployment]:
    """The Procfile's processes against a fake Slack and model (see tests/deployment.py)."""
    deployment = Deployment(redis_url, prefix, tmp_path)
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
    saved = [(world, dict(world)) for world in (USERS, SERVICES, REFUNDS)]
    yield
    for world, copy in saved:
        world.clear()
        world.update(copy)  # type: ignore[arg-type]
