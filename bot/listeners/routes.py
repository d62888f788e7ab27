"""Which listener answers which of Slack's requests: every command, button, modal and event id.

The Home tab adds its own (`bot.home.routes`) between `add_listeners` and `add_catch_alls`:
Bolt asks its listeners in order, and the catch-all must come last.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from slack_bolt.app.async_app import AsyncApp

from bot.blocks import questions as question_blocks
from bot.blocks.batch import ACTION_APPROVE_ALL, ACTION_REJECT_ALL, BATCH_CALLBACK
from bot.blocks.cards import (
    ACTION_ANSWER,
    ACTION_APPROVE,
    ACTION_APPROVE_ALWAYS,
    ACTION_APPROVE_NOTE,
    ACTION_APPROVE_TYPED,
    ACTION_REJECT,
    ACTION_VIEW_ARGUMENTS,
    ANSWER_CALLBACK,
    NOTE_CALLBACK,
    REJECT_CALLBACK,
)
from bot.blocks.commands import ACTION_RUN_AS_TASK
from bot.blocks.confirmations import CONFIRM_CALLBACK
from bot.blocks.edits import ACTION_EDIT, EDIT_CALLBACK
from bot.blocks.grants import ACTION_GRANT, ACTION_REVOKE_GRANT
from bot.blocks.status import ACTION_STOP
from bot.listeners.answers import AnswerActions
from bot.listeners.approvals import ApprovalActions
from bot.listeners.batch import BatchActions
from bot.listeners.commands import AgentCommand
from bot.listeners.confirmations import ConfirmActions
from bot.listeners.direct_messages import DirectMessages
from bot.listeners.edits import EditActions
from bot.listeners.grants import GrantActions
from bot.listeners.questions import QuestionActions
from bot.listeners.stops import StopActions
from bot.listeners.threads import ThreadReplies
from bot.listeners.workspace import (
    ChannelMembershipEvents,
    GroupMembershipEvents,
    app_event,
    unknown_action,
)
from bot.slack.events import (
    HomeOpened,
    MemberChanged,
    Said,
    SessionStopped,
    SubteamMembersChanged,
    SubteamUpdated,
    listener,
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Listeners:
    command: AgentCommand
    approvals: ApprovalActions
    grants: GrantActions
    edits: EditActions
    confirmations: ConfirmActions
    answers: AnswerActions
    stops: StopActions
    groups: GroupMembershipEvents
    batch: BatchActions
    threads: ThreadReplies
    questions: QuestionActions
    direct: DirectMessages


def add_listeners(bolt: AsyncApp, listeners: Listeners) -> None:
    bolt.command(re.compile(r"^/.*"))(listeners.command)
    bolt.action(ACTION_RUN_AS_TASK)(listeners.command.on_run_as_task)
    approvals, grants, edits = listeners.approvals, listeners.grants, listeners.edits
    bolt.action(ACTION_APPROVE)(approvals.on_approve)
    bolt.action(ACTION_APPROVE_ALWAYS)(approvals.on_approve)
    bolt.action(ACTION_REJECT)(approvals.on_reject)
    bolt.action(ACTION_VIEW_ARGUMENTS)(approvals.on_view_arguments)
    bolt.action(ACTION_STOP)(listeners.stops.on_stop_button)
    bolt.event("agent_session_stopped")(
        listener(SessionStopped, listeners.stops.on_session_stopped)
    )
    bolt.action(ACTION_GRANT)(grants.on_grant_chosen)
    bolt.action(ACTION_REVOKE_GRANT)(grants.on_revoke)
    bolt.action(ACTION_EDIT)(edits.on_edit)
    bolt.view(EDIT_CALLBACK)(edits.on_edit_submitted)
    bolt.view(REJECT_CALLBACK)(approvals.on_reject_submitted)
    bolt.action(ACTION_APPROVE_TYPED)(listeners.confirmations.on_approve_typed)
    bolt.view(CONFIRM_CALLBACK)(listeners.confirmations.on_confirm_submitted)
    answers = listeners.answers
    bolt.action(ACTION_ANSWER)(answers.on_answer)
    bolt.view(ANSWER_CALLBACK)(answers.on_answer_submitted)
    bolt.action(ACTION_APPROVE_NOTE)(answers.on_note)
    bolt.view(NOTE_CALLBACK)(answers.on_note_submitted)
    bolt.action(ACTION_APPROVE_ALL)(listeners.batch.on_approve_all)
    bolt.action(ACTION_REJECT_ALL)(listeners.batch.on_reject_all)
    bolt.view(BATCH_CALLBACK)(listeners.batch.on_submitted)
    questions = listeners.questions
    bolt.action(question_blocks.ACTION_ANSWER)(questions.on_answer)
    bolt.action(question_blocks.ACTION_DECLINE)(questions.on_decline)
    bolt.action(question_blocks.ACTION_DONE)(questions.on_done)
    bolt.view(question_blocks.FORM_CALLBACK)(questions.on_form_submitted)
    bolt.view_closed(question_blocks.FORM_CALLBACK)(questions.on_form_closed)
    # The app's own messages first (a direct message, its Messages tab), then the channels'.
    bolt.event("message", matchers=[_in_direct_message])(
        listener(Said, listeners.direct.on_message)
    )
    bolt.event("app_home_opened", matchers=[_messages_tab])(
        listener(HomeOpened, listeners.direct.on_messages_tab)
    )
    bolt.event("message")(listener(Said, listeners.threads.on_message))
    bolt.event("app_mention")(listener(Said, listeners.threads.on_mention))


async def _in_direct_message(event: dict[str, Any]) -> bool:
    """`message.im`: a message in a direct message with the app."""
    return event.get("channel_type") == "im"


async def _messages_tab(event: dict[str, Any]) -> bool:
    """`app_home_opened` of the Messages tab (the Home tab's goes to `bot.home`)."""
    return event.get("tab") == "messages"


def add_catch_alls(bolt: AsyncApp, listeners: Listeners, channels: ChannelMembershipEvents) -> None:
    """After every other listener: an unknown click, and the workspace's events. `channels`
    comes with the Home tab, which it keeps up to date."""
    bolt.action(re.compile(r".*"))(unknown_action)
    groups = listeners.groups
    members_changed = listener(SubteamMembersChanged, groups.on_members_changed)
    bolt.event("subteam_members_changed")(members_changed)
    bolt.event("subteam_updated")(listener(SubteamUpdated, groups.on_group_updated))
    bolt.event("member_joined_channel")(listener(MemberChanged, channels.on_member_changed))
    bolt.event("member_left_channel")(listener(MemberChanged, channels.on_member_changed))
    # The manifests subscribe to these so operators see them in the log; Slack wants a 200.
    bolt.event("app_uninstalled")(app_event)
    bolt.event("tokens_revoked")(app_event)
