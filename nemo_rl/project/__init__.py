"""The project on disk: pins and the lock, forks under `deps develop`, `.nemo-rl`, and changes that land by
renames through a journal."""
