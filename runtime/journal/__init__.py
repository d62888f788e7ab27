"""Exactly once: the journal of tool calls' starts and outcomes, for every tool kind, and of the
model's turns that asked for them."""
