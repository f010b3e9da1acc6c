"""`nemo-rl doctor`: what is installed, at which commit, whether it matches uv.lock, and how to fix it."""
