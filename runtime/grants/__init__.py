"""Grants: an approval that lets later calls like it run without a card, for a while."""
