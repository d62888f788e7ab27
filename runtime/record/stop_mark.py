"""Who stopped a run (written by the stop script, `runtime/record/lua/stop.lua`), and the
exception a working run raises at its next safe point once it sees the mark."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StopMark(BaseModel):
    """Who stopped a run, and when (Redis's clock)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    user_id: str
    user_name: str | None = None
    at: float = 0.0


class Stopped(Exception):
    """Someone stopped the run: no further tool runs, no card appears, the model is not called."""

    def __init__(self, run_id: str, mark: StopMark) -> None:
        super().__init__(f"run {run_id}: stopped by {mark.user_id}")
        self.run_id = run_id
        self.mark = mark
