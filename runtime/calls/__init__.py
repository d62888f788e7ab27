"""What a pending call is and shows: its description, digest, context and effect preview."""
