"""The web process: the Bolt app over HTTP or Socket Mode, and the operator's endpoints."""
