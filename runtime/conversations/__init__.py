"""A thread's history, kept by Countersign in Redis for each reply in the thread."""
