"""A model that answers 429 or 5xx, or cannot be reached, is asked again inside the run.

Left to the job queue, each such failure past the `openai` client's own two retries gave the
job back: a delivery spent (`JOB_MAX_DELIVERIES`), the run restarted from its saved state after
`JOB_IDLE_TIMEOUT_SECONDS`. The SDK's runner retries a model call itself
(`ModelSettings.retry`): `MODEL_RETRIES` more tries, each after the pause the model's
`Retry-After` asks for, else `FIRST_PAUSE_SECONDS` doubling up to `LONGEST_PAUSE_SECONDS`. Only
once they are spent is the job retried; a retried job replays the turns already answered
(`runtime.record.turns`), so nothing the model asked for runs twice either way.

Worst case a call holds its run for about `MODEL_RETRIES` x `LONGEST_PAUSE_SECONDS` (32 s at the
default 4) plus the tries themselves, far inside `JOB_TIMEOUT_SECONDS`; a stop still cancels it
at once (`runtime.stops.safe_point`).
"""

from __future__ import annotations

from agents import ModelRetrySettings, retry_policies
from agents.retry import ModelRetryBackoffSettings

FIRST_PAUSE_SECONDS = 0.5
LONGEST_PAUSE_SECONDS = 8.0
RETRIED_STATUSES = (408, 409, 429, 500, 502, 503, 504)
"""Besides what the model's client suggests (the `openai` client: these and any 5xx)."""


def model_retry(retries: int) -> ModelRetrySettings | None:
    """The runner's retries of a model call (`MODEL_RETRIES`). None for 0: the SDK's explicit
    "no retries" would switch off the `openai` client's own two as well."""
    if retries == 0:
        return None
    return ModelRetrySettings(
        max_retries=retries,
        backoff=ModelRetryBackoffSettings(
            initial_delay=FIRST_PAUSE_SECONDS,
            max_delay=LONGEST_PAUSE_SECONDS,
            multiplier=2.0,
            jitter=True,
        ),
        policy=retry_policies.any(
            retry_policies.provider_suggested(),
            retry_policies.http_status(RETRIED_STATUSES),
            retry_policies.network_error(),
        ),
    )
