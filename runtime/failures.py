"""Which errors end a run (with words a person can read) and which are ours to retry.

Exception
├── RunFailed            a run ended; `kind` and a safe `detail` go to the thread (also when the
│                        SDK wraps it: raised by a model call, or an agent tool's inner run)
├── RecursionError       input nested too deep to handle -> RunFailed(AGENT_ERROR): retrying it
│                        would fail the same way (`runtime.jobs.consumer` buries a job that
│                        raises one anywhere else at once)
├── openai.OpenAIError   model API trouble  -> RunFailed(MODEL_ERROR)
├── agents.AgentsException
│   ├── MaxTurnsExceeded -> RunFailed(MAX_TURNS)
│   ├── ModelBehaviorError, ModelRefusalError, ModelTimeoutError -> RunFailed(MODEL_ERROR)
│   └── anything else    -> RunFailed(AGENT_ERROR)
├── McpServerUnavailable  a run's MCP server stayed down -> RunFailed(MCP_UNAVAILABLE), by the
│                         executor once the connection's bounded retries are used up
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
    UserError,
)

from runtime.process.causes import caused_by
from runtime.reporter import Failure


class RunFailed(Exception):
    def __init__(self, kind: Failure, detail: str) -> None:
        super().__init__(f"{kind.value}: {detail}")
        self.kind = kind
        self.detail = detail


TRANSIENT_HTTP_STATUSES = frozenset({408, 409, 429})


def describe_run_error(error: Exception) -> RunFailed | None:
    """Translate an error raised by a run into a failure to report, or None to retry."""
    if (failed := caused_by(error, RunFailed)) is not None:
        return failed
    if caused_by(error, RecursionError) is not None:
        return RunFailed(Failure.AGENT_ERROR, "something was nested too deeply to handle")
    if isinstance(error, openai.OpenAIError | ModelTimeoutError):
        return _model_api_error(error)
    if isinstance(error, MaxTurnsExceeded):
        return RunFailed(Failure.MAX_TURNS, "")
    if isinstance(error, ModelBehaviorError | ModelRefusalError):
        return RunFailed(Failure.MODEL_ERROR, "the model's reply could not be used")
    if isinstance(error, UserError) and _raised_by_a_tool(error):
        return None
    if isinstance(error, AgentsException):
        return RunFailed(Failure.AGENT_ERROR, type(error).__name__)
    return None


def _model_api_error(error: Exception) -> RunFailed | None:
    if isinstance(error, openai.APIStatusError):
        code = error.status_code
        if code in TRANSIENT_HTTP_STATUSES or code >= 500:
            return None
        return RunFailed(Failure.MODEL_ERROR, f"the model API answered HTTP {code}")
    if isinstance(error, openai.APIConnectionError | ModelTimeoutError):
        return None
    return RunFailed(Failure.MODEL_ERROR, "the model client is not configured or failed")


def _raised_by_a_tool(error: UserError) -> bool:
    """The SDK wraps an exception escaping a tool in UserError('Error running tool …')."""
    cause = error.__cause__
    return cause is not None and not isinstance(cause, AgentsException)
