"""`python -m nemo_rl`: the same as the `nemo-rl` console script."""

from nemo_rl.cli import entry_point

if __name__ == "__main__":
    entry_point()
