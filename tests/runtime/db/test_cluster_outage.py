"""A Redis Cluster gone or failing over, on real processes: a clear message and a retry, never a
traceback, and nothing lost or doubled once it is back.

Each test has a cluster of its own (the session's is shared), every write in its nodes'
append-only files, so a node stopped and started finds its data again, as a managed one does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.db.local import RedisServer
from tests.support.deployment import Deployment
from tests.support.model_scripts import delete_then_answer
from tests.support.redis_cluster import LocalCluster
from tests.test_faults import ledger, migrate_then_answer, only_run_id, wait_for_ledger

pytestmark = pytest.mark.cluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(directory=tmp_path / "cluster", durable=True) as started:
        yield started


def node_of(deployment: Deployment, cluster: LocalCluster, key: str) -> RedisServer:
    """The node that serves `key`'s slot."""
    served = deployment.redis.get_node_from_key(key)  # type: ignore[attr-defined]
    [node] = [n for n in cluster.nodes if n.port == served.port]
    return node


async def test_every_node_stopped_asks_for_a_retry_and_loses_nothing(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    async with Deployment(cluster.url, "outage:", tmp_path, cluster=True) as deployment:
        deployment.model.script = delete_then_answer
        web = await deployment.web()
        worker = deployment.worker("worker.1")
        root = await deployment.start_run("delete u-100")
        [card] = await deployment.cards(root, 1)

        for node in cluster.nodes:
            node.stop()
        started = time.monotonic()
        status, _ = await deployment.sender.click(card, "approve", user="UBOB")
        assert status == 200 and time.monotonic() - started < 3, "answered within Slack's 3 s"
        note = await deployment.slack.wait_for(lambda: deployment.slack.ephemerals, 10, "note")
        assert "your decision was not recorded" in note[0]["text"]
        assert card.action_ids() == [
            "approve",
            "approve_note",
            "approve_always",
            "reject",
            "answer",
        ], "buttons stay"
        await asyncio.sleep(3)  # the worker's loops meet the outage meanwhile

        cluster.restart(*cluster.nodes)
        await deployment.sender.click(card, "approve", user="UBOB")
        [answer] = await deployment.final_answers(root)
        assert answer.text == "done: deleted u-100"
        assert len(await ledger(deployment)) == 1, "the tool ran once"
        assert web.popen.poll() is None and worker.popen.poll() is None, "nothing crashed"
        assert "Traceback" not in deployment.logs_text(), deployment.logs_text()


async def test_the_runs_node_stopped_while_its_tool_runs_runs_it_once(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    async with Deployment(cluster.url, "failover:", tmp_path, cluster=True) as deployment:
        deployment.model.script = migrate_then_answer
        web = await deployment.web()
        worker = deployment.worker("worker.1", SLOW_TOOL_SECONDS="2")
        root = await deployment.start_run("migrate users")
        [card] = await deployment.cards(root, 1)
        await deployment.sender.click(card, "approve", user="UBOB")
        await wait_for_ledger(deployment, 1)

        # The tool returns in 2 s into a node gone: its slots answer nothing, and once the
        # others notice (the node timeout, 5 s) every node says "the cluster is down".
        run = deployment.keys.run(await only_run_id(deployment))
        gone = node_of(deployment, cluster, run)
        gone.stop()
        await asyncio.sleep(10)
        cluster.restart(gone)

        [answer] = await deployment.final_answers(root)
        assert answer.text.startswith("migrated users (attempt 1, key "), answer.text
        assert len(await ledger(deployment)) == 1, deployment.logs_text()
        assert len(deployment.slack.cards()) == 1, "no 'may have run' card either"
        assert web.popen.poll() is None and worker.popen.poll() is None, "nothing crashed"
        assert "Traceback" not in deployment.logs_text(), deployment.logs_text()
