"""`nemo-rl deps`: fork pins, lock and environment status, fork bumps and patch records."""
