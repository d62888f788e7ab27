"""The local console: all of Countersign in a browser, with a local stand-in for Slack.

Beside `home`, below `bot.web` (which mounts it): imports only the bottom floor.
"""
