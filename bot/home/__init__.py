"""The app's Home tab: what waits for each person, their runs, its buttons and republishing.

Above `listeners` and `bot.wiring` (imports them and the floors below); below `bot.web`.
"""
