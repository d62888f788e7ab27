"""What the app says in a run's thread when someone replies there, or mentions it."""

from __future__ import annotations

STILL_WORKING = "Still working on the last request; reply again when it answers."
"""A reply while the thread's run is still working: nothing starts."""
STILL_WAITING = (
    "The last request is waiting for approval (its card is above); reply again once it has "
    "answered."
)
"""A reply while a call of the thread's run waits for a person: nothing starts."""

REPLY_NOT_STARTED = "Your reply could not be passed on (the job queue is unreachable); try again."

MENTION_EMPTY = "Mention me with a task, as you would type `/agent <task>`."
