"""`nemo-rl doctor`: what is installed, whether it matches uv.lock, and the fix."""
