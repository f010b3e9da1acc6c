"""The project on disk: pins, the lock, forks under `deps develop`, `.nemo-rl`, and changes that land."""
