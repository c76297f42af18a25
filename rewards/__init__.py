"""faithgrpo.rewards."""
