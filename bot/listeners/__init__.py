"""Slack's requests: `/agent`, clicks, edits, grants, stops, and the gate every click passes."""
