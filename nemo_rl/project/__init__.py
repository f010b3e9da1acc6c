"""The project on disk, shared by every command and the worker environments: pins and the lock (`lockfile`),
the installed-commit rule (`installed`), forks under `deps develop` (`develop_state`), and changes that land
by renames under one project lock (`landing`)."""
