"""The models runs talk to: the shared OpenAI client and the offline scripted model.

The names `bot` uses, loaded when first asked for: importing the package loads none of its
modules, so a module inside it may import a sibling package without a cycle.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runtime.models.client import share_openai_client
    from runtime.models.scripted import model_run_config, uses_scripted_model

_WHERE = {
    "model_run_config": "scripted",
    "share_openai_client": "client",
    "uses_scripted_model": "scripted",
}
__all__ = ["model_run_config", "share_openai_client", "uses_scripted_model"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
