"""When a bump keeps uv's offline lock (nemo_rl/forks/offline_lock.py): pure, on hand-made uv.lock texts, and
on fixture forks: offline when only the pin moves, online when more changed."""

from __future__ import annotations

import forkworld
import pytest
from fakes import bump
from gitfixtures import commit

from nemo_rl.forks import offline_lock

OLD, NEW = "a" * 40, "b" * 40
FORK_URL = "https://github.com/example/Megatron-LM.git"


def lock(fork_version="0.13.0rc0", rev=OLD, fork_deps=("numpy", "tensorstore"), packages=None, header=None,
         manifest_extra="", forks=1, other_entry="2.4.0rc0") -> str:
    packages = packages if packages is not None else {"numpy": "1.26.4", "tensorstore": "0.1.71"}
    lines = [header or 'version = 1\nrevision = 3\nrequires-python = ">=3.12"\n',
             "[manifest]\n" + manifest_extra,
             f'[[manifest.dependency-metadata]]\nname = "megatron-core"\nversion = "{fork_version}"\n'
             f"requires-dist = {list(fork_deps)!r}\n".replace("'", '"'),
             f'[[manifest.dependency-metadata]]\nname = "nemo-toolkit"\nversion = "{other_entry}"\n']
    for _ in range(forks):
        lines.append(f'[[package]]\nname = "megatron-core"\nversion = "{fork_version}"\n'
                     f'source = {{ git = "{FORK_URL}?rev={rev}#{rev}" }}\n'
                     "dependencies = [" + ", ".join(f'{{ name = "{d}" }}' for d in fork_deps) + "]\n")
    for name, version in packages.items():
        lines.append(f'[[package]]\nname = "{name}"\nversion = "{version}"\n'
                     'source = { registry = "https://pypi.org/simple" }\n')
    return "\n".join(lines)


def rejected(offline: str, committed: str | None = None) -> str | None:
    return offline_lock.rejected(committed or lock(), offline, "megatron-core", OLD, NEW)


def test_only_the_sha_moved_is_kept():
    assert rejected(lock(rev=NEW)) is None


def test_the_forks_new_version_and_requirements_are_kept_with_what_only_it_reached_dropped():
    """The real move's shape: 0.16.0rc0 needs numpy and packaging (both locked), no longer tensorstore."""
    committed = lock(packages={"numpy": "1.26.4", "packaging": "24.2", "tensorstore": "0.1.71"})
    offline = lock("0.16.0rc0", NEW, ("numpy", "packaging"), {"numpy": "1.26.4", "packaging": "24.2"})
    assert rejected(offline, committed) is None


def test_a_package_added_or_moved_needs_the_index():
    assert rejected(lock(rev=NEW, packages={"numpy": "1.26.4", "tensorstore": "0.1.71", "six": "1.17.0"})) == \
        "it adds or changes six 1.17.0"
    assert rejected(lock(rev=NEW, packages={"numpy": "2.0.0", "tensorstore": "0.1.71"})) == \
        "it adds or changes numpy 2.0.0"


def test_a_changed_header_or_manifest_needs_the_index():
    assert rejected(lock(rev=NEW, header='version = 1\nrevision = 3\nrequires-python = ">=3.11"\n')) == \
        "it changed uv.lock's 'requires-python'"
    assert rejected(lock(rev=NEW, manifest_extra='members = ["other"]\n')) == \
        "it changed uv.lock's [manifest] beyond the fork's entry"
    assert rejected(lock(rev=NEW, other_entry="2.5.0")) == "it changed uv.lock's [manifest] beyond the fork's entry"


def test_the_fork_must_be_locked_once_at_the_new_commit():
    assert rejected(lock()) == (f"it locks megatron-core from {{'git': '{FORK_URL}?rev={OLD}#{OLD}'}}, not "
                                f"{{'git': '{FORK_URL}?rev={NEW}#{NEW}'}}")
    assert rejected(lock(rev=NEW, forks=2)) == "it locks megatron-core 2 time(s), the committed lock 1"
    assert rejected(lock(rev=NEW, forks=0)) == "it locks megatron-core 0 time(s), the committed lock 1"


@pytest.mark.parametrize("text", ["[[package]\n", 'version = "1\n'])
def test_a_lock_that_does_not_parse_is_thrown_away(text):
    assert rejected(text).startswith("uv wrote a uv.lock that does not parse")
    # a committed one edited by hand into something that does not parse: named as such, and online
    assert offline_lock.rejected(text, lock(rev=NEW), "megatron-core", OLD, NEW).startswith(
        "the committed uv.lock does not parse")


def next_commit(world) -> str:
    megatron = world.forks["megatron-core"]
    return commit(megatron.fork, "fix: one more token", {"megatron/core/tokens.py": "def tokens():\n    return [3]\n"})


def test_bump_locks_offline_when_only_the_pin_moves(world, capsys):
    """With declared metadata nothing but the SHA can change: uv's offline run, checked to be exactly that."""
    forkworld.derive_metadata(world, {})
    before = (world.project / "uv.lock").read_text()
    new = next_commit(world)
    assert bump(world, "--rev", new) == 0
    assert "locked offline" in capsys.readouterr().out
    assert (world.project / "uv.lock").read_text() == before.replace(world.forks["megatron-core"].head, new)
    forkworld.uv_run(world, "lock", "--check")  # what an online lock gives


def test_bump_locks_online_when_more_than_the_pin_changes(world, capsys):
    """pyproject.toml changed since the last lock (the project's own version): offline is not the whole answer."""
    forkworld.derive_metadata(world, {})
    path = world.project / "pyproject.toml"
    path.write_text(path.read_text().replace('name = "fixture-project"\nversion = "0.1.0"',
                                             'name = "fixture-project"\nversion = "0.1.1"'))
    assert bump(world, "--rev", next_commit(world)) == 0
    assert "locked offline" not in capsys.readouterr().out
    forkworld.uv_run(world, "lock", "--check")
