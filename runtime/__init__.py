"""Countersign's runtime: runs agents, asks for approvals, and keeps every run in Redis."""

from runtime import _moved

# Old import paths (`runtime.tool_journal`, `runtime.previews`) keep working for one release.
_moved.install()
