"""faithgrpo.trainers."""
