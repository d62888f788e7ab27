"""How a delivery of a job ends here without being acknowledged or failed: run again, taken
over by another worker, or left for one to take over (`runtime.jobs.consumer`)."""

from __future__ import annotations


class RunAgain(Exception):
    """The primary changed since the handler ran: run it again before acknowledging."""


class TakenOver(Exception):
    """Another worker took the job over: neither tried again nor acknowledged here."""


class LeftForTakeover(Exception):
    """Stopping while Redis is away (or its credentials refused): neither tried again nor
    acknowledged here."""
