"""The project on disk, shared by every command and the worker environments: pins and the lock (`lockfile`),
the installed-commit rule (`installed`), forks under `deps develop` (`develop_state`), the private `.nemo-rl`
directory, atomic writes and the project lock (`state_dir`), and changes that land by renames (`landing`) through
a journal that `deps recover` can finish (`journal`)."""
