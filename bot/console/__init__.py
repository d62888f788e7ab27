"""The local console: all of Countersign in a browser, with a local stand-in for Slack."""
