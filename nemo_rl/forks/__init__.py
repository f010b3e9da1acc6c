"""Fork history: finding, fetching, describing and comparing a fork's downstream commits over its upstream.

The `nemo-rl deps` verbs (nemo_rl/deps/) are its callers; nothing here prints a report or parses arguments."""
