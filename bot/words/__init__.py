"""Every word a person reads in Slack, in one place."""
