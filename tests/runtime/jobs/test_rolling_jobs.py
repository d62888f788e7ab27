"""A rolling deploy meets a reply in a thread: this version's web enqueues the reply's run while
a worker of the release before thread replies is the only one up. That worker would drop the
job as malformed (its `StartJob` forbids `continues`); it must never see it, and the reply's run
must answer, with the thread's history, once a worker of this version is up."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.conftest import on_cluster_too
from tests.support.deployment import Deployment
from tests.support.fake_openai import Item, ModelRequest, message
from tests.support.model_scripts import delete_then_answer
from tests.support.processes import release

PREVIOUS_RELEASE = "7cf106049b14e7008bd6d3350025a54abf66c884^"
"""Main just before a reply in a thread continued the conversation (`StartJob.continues`)."""


def counts_the_turns(request: ModelRequest) -> list[Item]:
    said = [i for i in request.input if i.get("role") in ("user", "assistant")]
    return [message(f"turn {len(said)}: {said[-1].get('content')}")]


@on_cluster_too
async def test_a_reply_enqueued_for_a_newer_worker_waits_for_one_and_is_not_dropped(
    deployment: Deployment, tmp_path: Path
) -> None:
    older = release(PREVIOUS_RELEASE, tmp_path)
    if older is None:
        pytest.skip(f"this clone has no {PREVIOUS_RELEASE} (a shallow clone?)")
    deployment.model.script = counts_the_turns
    await deployment.web()
    new_worker = deployment.worker("worker.1")
    root = await deployment.start_run("say hello")
    [first] = await deployment.final_answers(root)
    assert first.text == "turn 1: say hello"
    new_worker.signal(signal.SIGTERM)
    assert await new_worker.wait(timeout=30) == 0, new_worker.log()

    # Mid-deploy: only the older worker is up, and reads jobs.
    old_worker = deployment.older_worker("worker.2", older)
    event = {
        "type": "message",
        "channel": root.channel,
        "user": "UBOB",
        "text": "and now?",
        "ts": f"{time.time():.6f}",
        "thread_ts": root.ts,
        "channel_type": "channel",
    }
    status, _ = await deployment.sender.event(event)
    assert status == 200
    # It still runs every job it can read: a run started meanwhile answers.
    other = await deployment.start_run("still there?")
    [answer] = await deployment.final_answers(other)
    assert answer.text == "turn 1: still there?"
    assert len(deployment.slack.final_answers(root.ts)) == 1, "the reply waits"
    assert "malformed" not in old_worker.log(), old_worker.log()

    deployment.worker("worker.1", name="worker.1b")  # the deploy goes on
    answers = await deployment.slack.wait_for(
        lambda: (a := deployment.slack.final_answers(root.ts)) and len(a) == 2 and a,
        30,
        "the reply's answer",
    )
    assert answers[-1].text == "turn 3: and now?", "the reply continued the conversation"
    assert "malformed" not in old_worker.log(), old_worker.log()


BEFORE_DIRECT_MESSAGES = "a8a919a84fa00a064996840cb3d82cb5899ec39c"
"""Main just before a direct message started a run (`Conversation.direct`): its workers read
`jobs` and `jobs_v2`."""


@on_cluster_too
async def test_a_direct_messages_run_waits_for_a_worker_that_can_read_it(
    deployment: Deployment, tmp_path: Path
) -> None:
    older = release(BEFORE_DIRECT_MESSAGES, tmp_path)
    if older is None:
        pytest.skip(f"this clone has no {BEFORE_DIRECT_MESSAGES} (a shallow clone?)")
    deployment.model.script = counts_the_turns
    env = {"APPROVAL_CHANNEL": "CAPPROVALS"}
    await deployment.web(**env)
    old_worker = deployment.older_worker("worker.2", older)
    said = {
        "type": "message",
        "channel": "DUALICE",
        "user": "UALICE",
        "text": "say hello",
        "ts": f"{time.time():.6f}",
        "channel_type": "im",
    }
    status, _ = await deployment.sender.event(said)
    assert status == 200
    # It still runs every job it can read: a run started in a channel meanwhile answers.
    other = await deployment.start_run("still there?")
    [answer] = await deployment.final_answers(other)
    assert answer.text == "turn 1: still there?"
    assert deployment.slack.thread("DUALICE", str(said["ts"])) == [], "the direct run waits"
    assert "malformed" not in old_worker.log(), old_worker.log()

    deployment.worker("worker.1", **env)  # the deploy goes on
    answered = await deployment.slack.wait_for(
        lambda: [
            m
            for m in deployment.slack.thread("DUALICE", str(said["ts"]))
            if m.text == "turn 1: say hello"
        ],
        30,
        "the direct message's answer",
    )
    assert len(answered) == 1
    assert "malformed" not in old_worker.log(), old_worker.log()


async def test_a_direct_messages_run_decided_mid_deploy_resumes_on_a_worker_that_can_read_it(
    deployment: Deployment, tmp_path: Path
) -> None:
    """Its stored record is one the release before cannot read: the resume waits for a newer
    worker instead of ending the run as unreadable."""
    older = release(BEFORE_DIRECT_MESSAGES, tmp_path)
    if older is None:
        pytest.skip(f"this clone has no {BEFORE_DIRECT_MESSAGES} (a shallow clone?)")
    deployment.model.script = delete_then_answer
    env = {"APPROVAL_CHANNEL": "CAPPROVALS", "APPROVERS": "UBOB"}
    await deployment.web(**env)
    new_worker = deployment.worker("worker.1", **env)
    said = {
        "type": "message",
        "channel": "DUALICE",
        "user": "UALICE",
        "text": "delete u-100",
        "ts": f"{time.time():.6f}",
        "channel_type": "im",
    }
    assert (await deployment.sender.event(said))[0] == 200
    [card] = await deployment.slack.wait_for(
        lambda: [c for c in deployment.slack.cards() if c.channel == "CAPPROVALS"], 20, "the card"
    )
    new_worker.signal(signal.SIGTERM)
    assert await new_worker.wait(timeout=30) == 0, new_worker.log()

    old_worker = deployment.older_worker("worker.2", older)
    await deployment.sender.click(card, "approve", user="UBOB")
    other = await deployment.start_run("delete u-200")  # it still runs what it can read
    await deployment.cards(other, 1)
    assert "stored envelope" not in old_worker.log(), old_worker.log()
    assert not [m for m in deployment.slack.thread("DUALICE", str(said["ts"])) if "done" in m.text]

    deployment.worker("worker.1", name="worker.1b", **env)  # the deploy goes on
    await deployment.slack.wait_for(
        lambda: [
            m
            for m in deployment.slack.thread("DUALICE", str(said["ts"]))
            if m.text == "done: deleted u-100"
        ],
        30,
        "the direct message's answer",
    )
    assert "stored envelope" not in old_worker.log(), old_worker.log()
