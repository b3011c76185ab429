"""Terminal-Bench: shell tasks in a persistent shell, graded by the task's own tests."""
