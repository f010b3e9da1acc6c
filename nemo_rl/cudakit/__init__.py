"""A CUDA toolkit assembled from the distribution's own packages into a directory: no installer, no GPU,
no change to the system (`nemo-rl toolchain cuda DIR`)."""
