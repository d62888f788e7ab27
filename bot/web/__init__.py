"""The web process: the Bolt app over HTTP or Socket Mode, and the operator's endpoints.

Below only the processes (`bot.__main__`, `bot.demo`, `bot.worker`): imports every floor below.
"""
