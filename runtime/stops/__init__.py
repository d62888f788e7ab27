"""Stopping a run: the stop script, who stopped it, and hearing of it while a step runs."""
