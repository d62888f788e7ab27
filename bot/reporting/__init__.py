"""The worker's side of Slack: the runtime's Reporter and card copies through the Slack Web API.

Above `blocks`: imports `bot.blocks` and the bottom floor (`words`, `slack`, `settings`).
"""
