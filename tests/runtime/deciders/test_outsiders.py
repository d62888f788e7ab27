"""People outside the workspace (issue 18, item 5): under the default policy only full members of
the installing workspace (or of its Enterprise Grid organisation) may approve, reject, grant,
stop or revoke. A Slack Connect user of another organisation and a guest are refused, told why
in one sentence; `EXTERNAL_DECIDERS=allow` or a rule's `external = true` lets them decide.

On the Procfile's processes, with payloads shaped like Slack's own for a Slack Connect user
(bolt-python's `connect_channel_payload`: the person's `user.team_id` and the payload's `team`
are their organisation's) and `users.info` answers with `team_id`, `is_restricted`,
`is_ultra_restricted` and `enterprise_user`.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from bot.words.members import OUTSIDE_REQUESTER, OUTSIDE_WORKSPACE, STANDING_UNKNOWN
from runtime.jobs.contracts import start_job_id
from runtime.record.layout import ENVELOPE
from tests.conftest import with_env
from tests.support.deployment import Deployment
from tests.support.fake_openai import message
from tests.support.fake_slack import Message
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer
from tests.test_faults import ledger
from tests.test_threads import reply

OTHER_ORG = {"team_id": "T0THERORG", "is_stranger": True}
"""What `users.info` says of eve, who works for another organisation (a Slack Connect user)."""


async def waiting_card(deployment: Deployment, **env: str) -> tuple[Message, Message]:
    """The web and a worker running, and a run of alice's waiting on one card."""
    deployment.model.script = delete_then_answer
    deployment.slack.channels["CGENERAL"] = "general"
    await deployment.web(**env)
    deployment.worker("worker.1", **env)
    root = await deployment.start_run("delete u-100")
    [card] = await deployment.cards(root, 1)
    return root, card


async def notes_to(deployment: Deployment, user: str, count: int = 1) -> list[str]:
    def notes() -> list[str]:
        return [str(e["text"]) for e in deployment.slack.ephemerals if e["user"] == user]

    await deployment.slack.wait_for(lambda: len(notes()) >= count, 20, f"{count} note(s) to {user}")
    return notes()


async def audit_until(deployment: Deployment, event: str) -> list[dict[str, Any]]:
    """The audit trail as (event, details) once `event` is in it."""
    deadline = time.monotonic() + 20
    while True:
        trail = [
            {"event": e[b"event"].decode(), **json.loads(e[b"details"])}
            for e in await deployment.audit_entries()
        ]
        if any(entry["event"] == event for entry in trail):
            return trail
        if time.monotonic() > deadline:
            raise AssertionError(f"no {event} in the audit trail: {trail}")
        await asyncio.sleep(0.05)


async def grant_line(deployment: Deployment, run: Message) -> Message:
    """The quiet line saying that `run`'s call was approved by a grant."""
    lines: list[Message] = await deployment.slack.wait_for(
        lambda: [m for m in deployment.slack.thread(run.channel, run.ts) if "'s grant" in m.text],
        20,
        "the grant's quiet line",
    )
    [line] = lines
    return line


async def choose_grant(deployment: Deployment, card: Message, option: str, *, user: str) -> None:
    """Pick `option` from the card's "Approve and allow…" menu, as Slack sends it."""
    [menu] = [b["accessory"] for b in card.blocks if b.get("block_id") == "grant_menu"]
    [value] = [o["value"] for o in menu["options"] if o["text"]["text"] == option]
    await deployment.sender.choose_grant(card, value, user=user, text=option)


def status_message(deployment: Deployment, root: Message) -> Message:
    thread = deployment.slack.thread(root.channel, root.ts)
    [status] = [m for m in thread if "stop_run" in m.action_ids()]
    return status


HOUR = "delete_user in #general for 1 hour"


async def test_a_slack_connect_user_may_not_approve_grant_stop_or_revoke(
    deployment: Deployment,
) -> None:
    deployment.slack.people["UEVE"] = OTHER_ORG
    root, card = await waiting_card(deployment)

    # eve, in the shared channel, tries every button a member has.
    await deployment.sender.click(card, "approve", user="UEVE")
    await choose_grant(deployment, card, HOUR, user="UEVE")
    await deployment.slack.wait_for(lambda: status_message(deployment, root), 20, "Stop button")
    await deployment.sender.click(status_message(deployment, root), "stop_run", user="UEVE")
    notes = await notes_to(deployment, "UEVE", count=3)
    assert notes == [OUTSIDE_WORKSPACE] * 3
    assert OUTSIDE_WORKSPACE.count(". ") == 0 and OUTSIDE_WORKSPACE.endswith("recorded.")
    trail = await audit_until(deployment, "denied")
    [denied] = [e for e in trail if e["event"] == "denied"]
    assert denied["user_id"] == "UEVE" and denied["team"] == "T0THERORG"
    assert denied["reason"] == "outside_workspace"
    assert not [e for e in trail if e["event"] in ("approved", "granted", "stopped")]
    assert await ledger(deployment) == [], "nothing ran on eve's say"
    assert card.action_ids() == ["approve", "approve_note", "approve_always", "reject", "answer"]

    # bob, a member, grants; the next run is approved by his grant and eve cannot revoke it.
    await choose_grant(deployment, card, HOUR, user="UBOB")
    await deployment.final_answers(root)
    second = await deployment.start_run("delete u-100 again")
    line = await grant_line(deployment, second)
    await deployment.final_answers(second)
    await deployment.sender.click(line, "revoke_grant", user="UEVE")
    assert (await notes_to(deployment, "UEVE", count=4))[-1] == OUTSIDE_WORKSPACE
    status, listing = await deployment.sender.command("grants")
    assert status == 200 and "granted by <@UBOB>" in json.dumps(listing["blocks"])
    trail = await audit_until(deployment, "grant_used")
    assert not [e for e in trail if e["event"] == "revoked"]
    assert [e["tool"] for e in await ledger(deployment)] == ["delete_user", "delete_user"]


@pytest.mark.parametrize("guest", ["is_restricted", "is_ultra_restricted"])
async def test_a_guest_may_not_decide(deployment: Deployment, guest: str) -> None:
    """A guest is of the workspace's own team: only `users.info` tells them apart."""
    deployment.slack.people["UGUEST"] = {guest: True}
    _root, card = await waiting_card(deployment)
    await deployment.sender.click(card, "reject", user="UGUEST")
    await deployment.sender.click(card, "approve", user="UGUEST")
    assert await notes_to(deployment, "UGUEST", count=2) == [OUTSIDE_WORKSPACE] * 2
    assert deployment.slack.views == [], "no reason modal for someone who may not decide"
    trail = await audit_until(deployment, "denied")
    [denied] = [e for e in trail if e["event"] == "denied"]
    assert denied["team"] == "T0001" and denied["reason"] == "outside_workspace"
    assert await ledger(deployment) == []


async def test_when_slack_cannot_say_who_someone_is_nothing_is_recorded(
    deployment: Deployment,
) -> None:
    _root, card = await waiting_card(deployment)
    deployment.slack.fail_next("users.info", 200, {"ok": False, "error": "ratelimited"})
    await deployment.sender.click(card, "approve", user="UBOB")
    assert await notes_to(deployment, "UBOB") == [STANDING_UNKNOWN]
    assert await ledger(deployment) == []
    assert card.action_ids() == ["approve", "approve_note", "approve_always", "reject", "answer"]
    # Slack answers again: the same click goes through.
    await deployment.sender.click(card, "approve", user="UBOB")
    await deployment.final_answers(_root)
    assert len(await ledger(deployment)) == 1


def external_rule(tmp_path: Path) -> dict[str, str]:
    policy = tmp_path / "policy.toml"
    policy.write_text('[[rule]]\ntool = "delete_*"\nanyone = true\nexternal = true\n')
    return {"POLICY_FILE": str(policy)}


@pytest.mark.parametrize("opt_in", ["EXTERNAL_DECIDERS=allow", "external = true"])
async def test_outsiders_decide_where_the_policy_lets_them(
    deployment: Deployment, tmp_path: Path, opt_in: str
) -> None:
    deployment.slack.people["UEVE"] = OTHER_ORG
    env = (
        {"EXTERNAL_DECIDERS": "allow"} if opt_in.startswith("EXTERNAL") else external_rule(tmp_path)
    )
    root, card = await waiting_card(deployment, **env)
    await deployment.sender.click(card, "approve", user="UEVE")
    [answer] = await deployment.final_answers(root)
    assert answer.text == "done: deleted u-100"
    trail = await audit_until(deployment, "approved")
    [approved] = [e for e in trail if e["event"] == "approved"]
    assert approved["user_id"] == "UEVE" and approved["team"] == "T0THERORG"
    assert len(await ledger(deployment)) == 1


async def test_outsiders_may_stop_and_revoke_with_external_deciders_allowed(
    deployment: Deployment,
) -> None:
    deployment.slack.people["UEVE"] = OTHER_ORG
    root, card = await waiting_card(deployment, EXTERNAL_DECIDERS="allow")
    await choose_grant(deployment, card, HOUR, user="UBOB")
    await deployment.final_answers(root)
    second = await deployment.start_run("delete u-100 again")
    line = await grant_line(deployment, second)
    await deployment.sender.click(line, "revoke_grant", user="UEVE")
    trail = await audit_until(deployment, "revoked")
    [revoked] = [e for e in trail if e["event"] == "revoked"]
    assert revoked["user_id"] == "UEVE" and revoked["team"] == "T0THERORG"

    third = await deployment.start_run("delete u-100 once more")
    await deployment.cards(third, 1)
    await deployment.slack.wait_for(lambda: status_message(deployment, third), 20, "Stop button")
    await deployment.sender.click(status_message(deployment, third), "stop_run", user="UEVE")
    trail = await audit_until(deployment, "stopped")
    [stopped] = [e for e in trail if e["event"] == "stopped"]
    assert stopped["user_id"] == "UEVE" and stopped["team"] == "T0THERORG"
    assert len(await ledger(deployment)) == 2


async def test_a_member_of_another_workspace_of_the_same_enterprise_decides(
    deployment: Deployment,
) -> None:
    """On Enterprise Grid the installing workspace is one of the organisation's: a member of
    another of its workspaces is inside (their `user.team_id` differs, their enterprise not)."""
    deployment.slack.enterprise = "E0GRID"
    deployment.slack.people["UFRED"] = {
        "team_id": "T0SISTER",
        "enterprise_user": {
            "id": "UFRED",
            "enterprise_id": "E0GRID",
            "enterprise_name": "Grid Org",
            "is_admin": False,
            "is_owner": False,
            "teams": ["T0SISTER"],
        },
    }
    deployment.slack.people["UEVE"] = OTHER_ORG
    root, card = await waiting_card(deployment)
    await deployment.sender.click(card, "approve", user="UEVE")
    assert await notes_to(deployment, "UEVE") == [OUTSIDE_WORKSPACE]
    await deployment.sender.click(card, "approve", user="UFRED")
    [answer] = await deployment.final_answers(root)
    assert answer.text == "done: deleted u-100"
    trail = await audit_until(deployment, "approved")
    [approved] = [e for e in trail if e["event"] == "approved"]
    assert approved["user_id"] == "UFRED" and approved["team"] == "T0SISTER"


async def test_an_outsiders_grant_covers_no_call_once_its_rule_wants_members(
    deployment: Deployment, tmp_path: Path
) -> None:
    """eve's grant, made where outsiders may decide, is checked again at each call it would
    cover: once the policy says members only, her grant approves nothing."""
    deployment.slack.people["UEVE"] = OTHER_ORG
    root, card = await waiting_card(deployment, **external_rule(tmp_path))
    await choose_grant(deployment, card, HOUR, user="UEVE")
    await deployment.final_answers(root)
    trail = await audit_until(deployment, "granted")
    [granted] = [e for e in trail if e["event"] == "granted"]
    assert granted["user_id"] == "UEVE" and granted["team"] == "T0THERORG"

    # The policy changes (a deploy without the rule): `delete_user` is for members only.
    [worker] = [p for p in deployment.processes if p.name == "worker.1"]
    worker.stop()
    deployment.worker("worker.2")
    second = await deployment.start_run("delete u-100 again")
    await deployment.cards(second, 1)
    assert len(await ledger(deployment)) == 1, "the second call waits for a member"
    trail = await audit_until(deployment, "granted")
    assert not [e for e in trail if e["event"] == "grant_used"]


async def test_clicks_cost_slack_one_users_info_per_person_and_no_auth_test(
    bot: Harness,
) -> None:
    """The installation is asked for as the web starts; a person's standing once per
    `STANDING_TTL_SECONDS` however often they click, and not at all when the signed payload
    already names another organisation's team."""
    bot.slack.people["UEVE"] = OTHER_ORG
    bot.slack.people["UGUEST"] = {"is_restricted": True}
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    asked = len(bot.slack.calls_to("auth.test"))
    assert asked >= 1
    for _ in range(3):
        await bot.sender.click(card, "approve", user="UEVE")
        await bot.sender.click(card, "approve", user="UGUEST")
    await bot.slack.wait_for(
        lambda: len([e for e in bot.slack.ephemerals if e["text"] == OUTSIDE_WORKSPACE]) == 6,
        what="six refusals",
    )

    def lookups(user: str) -> int:
        return len([c for c in bot.slack.calls_to("users.info") if c.args.get("user") == user])

    assert (lookups("UEVE"), lookups("UGUEST")) == (0, 1)
    assert len(bot.slack.calls_to("auth.test")) == asked
    await bot.sender.click(card, "approve", user="UBOB")
    assert (await bot.final_answer(root)).text == "done: deleted u-100"


@with_env(APPROVERS="UGUEST,UBOB")
async def test_a_guest_listed_as_approver_is_refused_on_the_home_tab_too(bot: Harness) -> None:
    """Listing someone by id does not make them a member: the Home tab's buttons ask too."""
    bot.slack.people["UGUEST"] = {"is_ultra_restricted": True}
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    await bot.sender.click_home("UGUEST", "home_approve", str(card.actions()[0]["value"]))
    [note] = await bot.slack.wait_for(
        lambda: [m for m in bot.slack.messages.values() if m.channel == "UGUEST"],
        what="a direct message to the guest",
    )
    assert note.text == OUTSIDE_WORKSPACE
    assert card.action_ids() == ["approve", "approve_note", "approve_always", "reject", "answer"]
    await bot.sender.click(card, "approve", user="UBOB")
    assert (await bot.final_answer(root)).text == "done: deleted u-100"


async def runs_queued(bot: Harness) -> list[str]:
    """The runs whose start job was enqueued lately (its marker is written with the job, before
    the web answers Slack): settled once the requests are answered."""
    markers = tuple(shard.job_marker(start_job_id("")) for shard in bot.keys.shards)
    return [key.split(":start:")[-1] for key in await bot.keys_left() if key.startswith(markers)]


def mention(user: str, text: str, *, thread: str | None = None) -> dict[str, Any]:
    """An `app_mention` event as Slack sends it (in a thread: also sent as a `message`)."""
    event = {
        "type": "app_mention",
        "channel": "CGENERAL",
        "user": user,
        "text": f"<@UBOT0001> {text}",
        "ts": f"{time.time():.6f}",
    }
    return {**event, "thread_ts": thread} if thread else event


@pytest.mark.parametrize("who", ["UEVE", "UGUEST"], ids=["other organisation", "guest"])
async def test_an_outsider_starts_no_run_by_command_mention_reply_or_dm(
    bot: Harness, who: str
) -> None:
    bot.slack.people["UEVE"] = OTHER_ORG
    bot.slack.people["UGUEST"] = {"is_restricted": True}
    bot.model.script = lambda request: [message("done")]
    root = await bot.start_run("say hello")
    await bot.final_answer(root)
    roots = len(bot.slack.roots())

    for channel in ("CGENERAL", f"D{who}"):  # in a channel, and in their DM with the app
        status, answer = await bot.sender.command("delete u-100", user=who, channel=channel)
        assert (status, answer["text"]) == (200, OUTSIDE_REQUESTER)
    await bot.sender.event(mention(who, "delete u-100"))
    # A reply in the finished run's thread, and a mention there, which Slack sends twice.
    await bot.sender.event(reply(root, "now delete u-100", user=who))
    in_thread = mention(who, "delete u-101", thread=root.ts)
    await bot.sender.event(in_thread)
    await bot.sender.event({**in_thread, "type": "message"})

    notes = [e for e in bot.slack.ephemerals if e["user"] == who]
    assert [n["text"] for n in notes] == [OUTSIDE_REQUESTER] * 3, "once per message, privately"
    assert [n.get("thread_ts") for n in notes] == [None, root.ts, root.ts]
    assert OUTSIDE_REQUESTER.count(". ") == 0, "one sentence"
    [started] = [e for e in await bot.audit_entries() if e[b"event"] == b"started"]
    assert json.loads(started[b"details"])["requester"] == "UALICE"
    assert await runs_queued(bot) == [started[b"run_id"].decode()], "nothing queued"
    assert len(bot.slack.roots()) == roots
    assert [m.text for m in bot.slack.thread(root.channel, root.ts)][-1] == "done"


@with_env(EXTERNAL_REQUESTERS="allow")
async def test_with_external_requesters_allowed_an_outsiders_run_starts_and_says_so(
    bot: Harness,
) -> None:
    bot.slack.people["UEVE"] = OTHER_ORG
    bot.model.script = delete_then_answer
    eves = await bot.start_run("delete u-100", user="UEVE")
    await bot.cards(eves, 1)
    alices = await bot.start_run("delete u-101")
    await bot.cards(alices, 1)

    async def stored(root: Message) -> dict[str, Any]:
        [card] = await bot.cards(root, 1)
        run_id = str(card.actions()[0]["value"]).split(":")[0]
        envelope: dict[str, Any] = json.loads(await bot.field(bot.keys.run(run_id), ENVELOPE))
        return envelope["conversation"]  # type: ignore[no-any-return]

    assert (await stored(eves))["requester_external"] is True
    assert "requester_external" not in await stored(alices), "written only when set"
