"""`nemo-rl envs`: worker environments built from uv.lock."""
