"""Exactly once: the journal of tool calls' starts and outcomes, for every tool kind."""
