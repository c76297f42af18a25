"""faithgrpo.eval."""
