"""Tasks: each module declares a task's datasets and prepares its data and model."""
