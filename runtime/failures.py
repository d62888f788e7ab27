"""Which errors end a run (with words a person can read) and which are ours to retry.

Exception
├── RunFailed            a run ended; `kind` and a safe `detail` go to the thread
├── openai.OpenAIError   model API trouble  -> RunFailed(MODEL_ERROR)
├── agents.AgentsException
│   ├── MaxTurnsExceeded -> RunFailed(MAX_TURNS)
│   ├── ModelBehaviorError, ModelRefusalError, ModelTimeoutError -> RunFailed(MODEL_ERROR)
│   └── anything else    -> RunFailed(AGENT_ERROR)
└── anything else (Redis, Slack, bugs): re-raised, so the job is retried and, after too many
    deliveries, dead-lettered with RunFailed(GAVE_UP).
"""

from __future__ import annotations

import openai
from agents.exceptions import (
    AgentsException,
    MaxTurnsExceeded,
    ModelBehaviorError,
    ModelRefusalError,
    ModelTimeoutError,
)

from runtime.reporter import Failure


class RunFailed(Exception):
    def __init__(self, kind: Failure, detail: str) -> None:
        super().__init__(f"{kind.value}: {detail}")
        self.kind = kind
        self.detail = detail


def describe_run_error(error: Exception) -> RunFailed | None:
    """Translate an error raised by a run into a failure to report, or None to retry."""
    if isinstance(error, RunFailed):
        return error
    if isinstance(error, openai.APIStatusError):
        return RunFailed(Failure.MODEL_ERROR, f"the model API answered HTTP {error.status_code}")
    if isinstance(error, openai.APITimeoutError):
        return RunFailed(Failure.MODEL_ERROR, "the model API did not answer in time")
    if isinstance(error, openai.APIConnectionError):
        return RunFailed(Failure.MODEL_ERROR, "the model API could not be reached")
    if isinstance(error, openai.OpenAIError):
        return RunFailed(Failure.MODEL_ERROR, "the model client is not configured or failed")
    if isinstance(error, MaxTurnsExceeded):
        return RunFailed(Failure.MAX_TURNS, "")
    if isinstance(error, ModelBehaviorError | ModelRefusalError | ModelTimeoutError):
        return RunFailed(Failure.MODEL_ERROR, "the model's reply could not be used")
    if isinstance(error, AgentsException):
        return RunFailed(Failure.AGENT_ERROR, type(error).__name__)
    return None
