"""A process's life: shutdown signal and budget, owned tasks, logs, readiness."""
