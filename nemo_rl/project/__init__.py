"""The project on disk: pins, the lock, developed forks, `.nemo-rl`, and changes that land."""
