"""Countersign's runtime: runs agents, asks for approvals, and keeps every run in Redis."""
