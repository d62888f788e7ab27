"""Calls waiting for people: copies, reminders, escalation, expiry, what waits."""
