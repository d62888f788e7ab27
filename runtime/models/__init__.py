"""The models runs talk to: the shared OpenAI client, the offline scripted model, and the
journaled wrapper around whichever is used (`journaled`, `retries`: the worker's own), installed
with the journal on every tool (`install`).

Floor 6 (a run): imports `runs` beside it, and every floor below.
"""

from runtime.models.client import share_openai_client
from runtime.models.scripted import model_run_config, uses_scripted_model

__all__ = [
    "model_run_config",
    "share_openai_client",
    "uses_scripted_model",
]
