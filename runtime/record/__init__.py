"""The run record: one Redis hash per run, the scripts that touch it, the store."""
