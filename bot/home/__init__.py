"""The app's Home tab: what waits for each person, their runs, its buttons and republishing."""
