"""Slack's requests: `/agent`, clicks, edits, grants, stops, and the gate every click passes.

Above `reporting`: imports it and the floors below; never the web process that registers it.
"""
