"""The models runs talk to: the shared OpenAI client, the offline scripted model, and the
journaled wrapper around whichever is used (`journaled`, `retries`: the worker's own).

The names `bot` uses, loaded on first use (`runtime._faces`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._faces import lazy_names

if TYPE_CHECKING:
    from runtime.models.client import share_openai_client
    from runtime.models.scripted import model_run_config, uses_scripted_model

_WHERE = {
    "model_run_config": "scripted",
    "share_openai_client": "client",
    "uses_scripted_model": "scripted",
}
__all__ = ["model_run_config", "share_openai_client", "uses_scripted_model"]

__getattr__ = lazy_names(__name__, _WHERE)
