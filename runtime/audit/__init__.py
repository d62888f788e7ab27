"""The audit trail: a Redis stream of everything that happened, and its event names."""
