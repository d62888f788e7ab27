"""An approved edit's preview: the tool's preview run again on the edited arguments, just before
the tool runs with them, and shown on the card and in the thread.

The card's preview was made for the model's arguments, before anyone decided; once a person
edits them it says nothing true of the call (`bot.blocks.call_context` hides it). So on the
resume that runs an edited call, the worker previews exactly the arguments the approval binds
(`runtime.runs.state_decisions.approved_edits`) and reports it (`Reporter.edit_previewed`)
before the tool starts. The preview is a read like the card's: only for calls whose card had
one (the tool declares it and its rule allows it), and not again once the tool has run (a
redelivered resume).
"""

from __future__ import annotations

import logging
from typing import Any

from agents import RunState

from runtime.calls.previews import PreviewFunction, preview_of, run_previews
from runtime.record.envelope import RunEnvelope
from runtime.record.leases import Lease
from runtime.record.stop_mark import Stopped
from runtime.record.store import RunStore
from runtime.reporter import Reporter, RunView
from runtime.runs.call_context import function_tool_of
from runtime.runs.state_decisions import approved_edits

log = logging.getLogger(__name__)


async def preview_edits(
    state: RunState[Any, Any],
    envelope: RunEnvelope,
    *,
    store: RunStore,
    reporter: Reporter,
    lease: Lease,
) -> None:
    """Preview and report each approved edit of `envelope`'s calls that is still to run.
    `state` is the restored state its decisions were applied to."""
    edits = approved_edits(envelope)
    by_call_id = {call.call_id: call for call in envelope.calls}
    wanted: dict[str, tuple[PreviewFunction, str]] = {}
    for item in state.get_interruptions():
        call_id = item.call_id or ""
        call, edit = by_call_id.get(call_id), edits.get(call_id)
        if call is None or edit is None or call.preview is None:
            continue  # not edited, or its card showed no preview (none, or `preview = false`)
        function = preview_of(function_tool_of(item))
        if function is not None and not await _ran(store, lease, call_id):
            wanted[call_id] = (function, edit.arguments)
    texts = await run_previews(wanted, run_id=envelope.run_id)
    for call_id, text in texts.items():
        shown = by_call_id[call_id].model_copy(update={"edited_preview": text})
        await reporter.edit_previewed(RunView.of(envelope), shown)


async def _ran(store: RunStore, lease: Lease, call_id: str) -> bool:
    """The tool already ran (a redelivered resume), or will not: the run was stopped."""
    try:
        return await store.journal_entry(lease, call_id) is not None
    except Stopped:
        return True
