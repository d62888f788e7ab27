"""Every word a person reads in Slack, in one place.

Bottom floor of `bot`: imports nothing else of `bot`; of `runtime`, only package faces.
"""
