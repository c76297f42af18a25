"""faithgrpo.tasks."""
