"""People's decisions on calls, through the one decision script, with grants and edits."""
