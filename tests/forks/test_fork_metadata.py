"""What a fork declares (forks.fork_metadata): its [project] table, the renamed-distribution refusal, the
requirements kept from its metadata, the drift report, and the METADATA a backend wrote, checked (the front end
itself: test_pep517.py); on fixture forks, a bump refused what that METADATA says, and one checkout moved from
commit to commit."""

from __future__ import annotations

import os
import time

import forkworld
import pytest
from fakes import _backend_commit, _state, bump, deps
from gitfixtures import commit

from nemo_rl import codec
from nemo_rl.errors import NemoRLError
from nemo_rl.forks import fork_cache, fork_metadata
from nemo_rl.forks.fork_metadata import Metadata
from nemo_rl.project.model import Project


def test_project_table_is_empty_for_setup_py_forks_and_bad_toml():
    assert fork_metadata.project_table('[project]\nname = "megatron-core"\n') == {"name": "megatron-core"}
    for text in (None, "", "[build-system]\n", "not = [toml", 'project = "a string"\n'):
        assert fork_metadata.project_table(text) == {}, text


def test_a_renamed_distribution_is_refused_and_a_normalised_name_is_not():
    fork_metadata.require_builds('[project]\nname = "Megatron_Core"\n', "megatron-core", "the fork")
    fork_metadata.require_builds(None, "megatron-core", "the fork")  # setup.py: nothing to compare
    fork_metadata.require_builds("[build-system]\n", "megatron-core", "the fork")  # dynamic: nothing either
    with pytest.raises(NemoRLError, match="builds distribution 'nemo-tron', not 'nemo-toolkit'"):
        fork_metadata.require_builds('[project]\nname = "nemo-tron"\n', "nemo-toolkit", "the fork at abc")


def test_requirements_leave_out_extras_and_what_does_not_parse():
    found = fork_metadata._requirements(["torch>=2.6", "Numpy (<2)", "pytest; extra == 'test'", "not a req ===",
                                         "einops; python_version >= '3.10'"])
    assert found == {"torch": "torch>=2.6", "numpy": "Numpy<2", "einops": 'einops; python_version >= "3.10"'}


def test_metadata_without_a_name_or_too_large_is_refused(tmp_path):
    with pytest.raises(NemoRLError, match="no Name or no Version"):
        fork_metadata._metadata("Metadata-Version: 2.1\nVersion: 1\n", [])
    (tmp_path / "METADATA").write_bytes(b"x" * (fork_metadata.METADATA_LIMIT + 1))
    with pytest.raises(NemoRLError, match="no METADATA file under"):
        fork_metadata._bounded(tmp_path / "METADATA")
    with pytest.raises(NemoRLError, match="no METADATA file under"):
        fork_metadata._bounded(tmp_path)  # a directory where the file should be
    assert fork_metadata._metadata("Name: f\nVersion: 1\nRequires-Dist: a\n", []).requires == {"a": "a"}


def test_a_version_that_is_not_pep_440_blames_the_fork():
    with pytest.raises(NemoRLError, match="has Version '0.2.0 garbage', not a PEP 440 version") as caught:
        fork_metadata._metadata("Name: f\nVersion: 0.2.0 garbage\n", [])
    assert "fix the fork's build backend" in caught.value.remedy


def test_metadata_naming_another_distribution_is_refused():
    """A setup.py (or dynamic [project]) fork renamed where require_builds cannot see: its METADATA says so."""
    fork_metadata.declares(Metadata("Megatron_Core", "0.2.0", {}), "a" * 40, "megatron-core", frozenset())
    with pytest.raises(NemoRLError, match="builds distribution 'megatron-tron', not 'megatron-core'"):
        fork_metadata.declares(Metadata("megatron-tron", "0.2.0", {}), "a" * 40, "megatron-core", frozenset())


@pytest.mark.parametrize("damage", [b'{"metadata": {"name": "megatron-core", "vers', b"[]",
                                    b'{"version": 5, "metadata": {"name": "m", "version": "1", "requires": {}}}',
                                    b'{"version": 6, "metadata": {"name": "m", "version": "1", "requires": {"a": 7}}}',
                                    b'{"version": 6, "metadata": {"name": "m", "version": "1", "requires": {}, '
                                    b'"extras": {"x": "b"}}}'])
def test_a_cached_answer_is_reused_and_one_of_another_version_or_shape_is_rebuilt(tmp_path, monkeypatch, damage):
    rev, built = "a" * 40, []
    answer = fork_metadata._Record(Metadata("m", "1", {"a": "a>=1"}, None, {"x": ("b; extra == 'x'",)}, ("big",)))
    monkeypatch.setattr(fork_metadata, "_build",
                        lambda repo, revs, wheel: built.extend(revs) or iter([(r, answer) for r in revs]))
    path = fork_metadata._cache_path(tmp_path, rev)
    path.parent.mkdir()
    codec.write(path, answer, fork_metadata.VERSION)
    assert (fork_metadata.read(tmp_path, rev), built) == (answer.metadata, [])
    assert fork_metadata.read(tmp_path, rev).placeholders == ("big",)
    path.write_bytes(damage)
    assert (fork_metadata.read(tmp_path, rev), built) == (answer.metadata, [rev])
    assert codec.read(path, fork_metadata._Record, fork_metadata.VERSION) == answer


def test_each_extra_keeps_the_requirements_only_it_brings():
    """A fork without a derived entry locks its own extras: [declares] records each with what it adds."""
    from nemo_rl.forks.fork_metadata import _metadata

    text = ("Metadata-Version: 2.1\nName: nemo-toolkit\nVersion: 0.1.0\nProvides-Extra: tron\n"
            "Provides-Extra: Dev_Tools\nRequires-Dist: six\nRequires-Dist: idna; extra == 'tron'\n"
            "Requires-Dist: pytest; extra == 'dev-tools'\n"
            "Requires-Dist: numpy; python_version >= '3' or extra == 'tron'\n\n")
    found = _metadata(text, [])
    assert found.extras == {"dev-tools": ("pytest; extra == 'dev-tools'",), "tron": ("idna; extra == 'tron'",)}
    assert sorted(found.requires) == ["numpy", "six"]


def test_a_marker_that_merely_names_extra_is_a_base_requirement():
    """Installed without any extra (extra = "" on some platform and Python), so the derived entry locks it; only a
    requirement that needs an extra is the extra's."""
    from nemo_rl.forks.fork_metadata import _requirements

    found = _requirements(["idna; python_version >= '3' or extra == 'never'", "six; extra != 'x'",
                           "pytest; extra == 'test'", "foo; sys_platform == 'linux' and extra == 'x'", "torch"])
    assert sorted(found) == ["idna", "six", "torch"], found


def test_a_backend_reading_its_version_from_git_sees_the_commit_it_builds(world):
    """A backend that reads its version from git (setuptools-scm, hatch-vcs) sees the commit being built: the
    checkout is a git work tree at it, as the one uv builds a git source from (the fork's tags are not fetched:
    docs/forks.md)."""
    from gitfixtures import commit

    from nemo_rl.forks import fork_cache

    backend = '''import os, subprocess
def _version():
    sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout
    return "0.2.0+g" + sha.strip()[:12]
def prepare_metadata_for_build_wheel(d, config_settings=None):
    os.makedirs(os.path.join(d, "megatron_core-0.2.0.dist-info"))
    with open(os.path.join(d, "megatron_core-0.2.0.dist-info", "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\\nName: megatron-core\\nVersion: " + _version() + "\\n")
    return "megatron_core-0.2.0.dist-info"
'''
    rev = commit(world.forks["megatron-core"].fork, "version from git", {
        "pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n',
        "backend.py": backend})
    repo = fork_cache.fetched(Project.read(world.project).fork("megatron-core"), rev)
    assert fork_metadata.read(repo, rev).version == f"0.2.0+g{rev[:12]}"


def _commit_to_build(world, message: str) -> str:
    from gitfixtures import commit

    backend = ("import os\ndef prepare_metadata_for_build_wheel(d, config_settings=None):\n"
               "    os.makedirs(os.path.join(d, 'megatron_core-0.2.0.dist-info'))\n"
               "    with open(os.path.join(d, 'megatron_core-0.2.0.dist-info', 'METADATA'), 'w') as f:\n"
               "        f.write('Metadata-Version: 2.1\\nName: megatron-core\\nVersion: 0.2.0\\n')\n"
               "    return 'megatron_core-0.2.0.dist-info'\n")
    return commit(world.forks["megatron-core"].fork, message, {
        "pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n',
        "backend.py": backend})


def test_a_worktree_is_added_under_the_caches_lock(world, monkeypatch):
    """Worktrees' names in the cache repository would race between two commands: each is added holding the
    cache's lock (the build itself runs unlocked)."""
    import fcntl
    import os

    from nemo_rl.forks import fork_cache, git_history

    def locked(path):  # another open file of the lock file: its exclusive lock is refused while the cache's is held
        fd = os.open(path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            return True
        finally:
            os.close(fd)

    rev = _commit_to_build(world, "a commit to build")
    repo = fork_cache.fetched(Project.read(world.project).fork("megatron-core"), rev)
    assert not locked(repo.parent / f"{repo.name}.lock")
    held, check_out = [], git_history.check_out
    monkeypatch.setattr(git_history, "check_out", lambda repo, tree, dest: (
        held.append(locked(repo.parent / f"{repo.name}.lock")), check_out(repo, tree, dest)))
    assert fork_metadata.read(repo, rev).version == "0.2.0"
    assert held == [True]


def test_a_worktree_left_by_a_killed_command_is_pruned_by_the_next_build(world):
    """A command killed during a build leaves its worktree registered (its directory removed with the scratch
    one), or marked "initializing" when killed inside `git worktree add`: the next build prunes both."""
    import shutil

    from nemo_rl.forks import fork_cache
    from nemo_rl.git import git

    rev = _commit_to_build(world, "a commit to build")
    repo = fork_cache.fetched(Project.read(world.project).fork("megatron-core"), rev)
    for name in ("killed-building", "killed-adding"):
        git(["worktree", "add", "--quiet", "--detach", "--no-checkout", str(world.root / name), rev], repo=repo)
        shutil.rmtree(world.root / name)
    (repo / "worktrees" / "killed-adding" / "locked").write_text("initializing")
    assert fork_metadata.read(repo, rev).version == "0.2.0"
    listed = git(["worktree", "list", "--porcelain"], repo=repo).stdout
    assert listed.count("worktree ") == 1 and not (repo / "worktrees").exists() or \
        not any((repo / "worktrees").iterdir()), listed


def test_drift_reports_changes_and_leaves_out_extras():
    old = fork_metadata.Metadata("megatron-core", "0.1", fork_metadata._requirements(
        ["torch>=2", "einops", "pytest; extra == 'test'"]))
    new = fork_metadata.Metadata("megatron-core", "0.2", fork_metadata._requirements(
        ["torch>=2.1", "numpy<2", "wandb; extra == 'dev'"]))
    drift = fork_metadata.drift(old.requires.values(), new.requires.values())
    assert drift.changed == (("torch>=2", "torch>=2.1"),)
    assert drift.added == ("numpy<2",) and drift.removed == ("einops",)  # extras' requirements are not imports
def test_a_refusal_while_uv_locks_ends_the_lock(world, capsys, tmp_path):
    """The fork's commit renames the distribution, and its build (run by uv lock meanwhile) would take two minutes:
    the refusal ends uv and the build at once; nothing changes."""
    started_build = tmp_path / "build.pid"
    renamed = commit(world.forks["megatron-core"].fork, "rename, with a slow build", {
        "pyproject.toml": "[build-system]\nrequires = ['setuptools']\nbuild-backend = 'setuptools.build_meta'\n"
                          "[project]\nname = 'megatron-tron'\ndynamic = ['version']\n",
        "setup.py": f"import os, time\nopen({str(started_build)!r}, 'w').write(str(os.getpid()))\ntime.sleep(120)\n"
                    "from setuptools import setup\nsetup(version='0.2.0', packages=['megatron', 'megatron.core'])\n",
    })
    before = world.files()
    started = time.monotonic()
    assert bump(world, "--rev", renamed) == 1
    assert time.monotonic() - started < 60
    assert "'megatron-tron'" in capsys.readouterr().err
    assert world.files() == before and not list((world.project / ".nemo-rl").glob("staging-*"))
    if started_build.exists():  # uv had reached the fork's build: it did not outlive the bump
        pid, deadline = int(started_build.read_text()), time.monotonic() + 10
        while os.path.exists(f"/proc/{pid}") and "Z" not in open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1][:3]:
            assert time.monotonic() < deadline, "the build outlived the bump"
            time.sleep(0.1)


def test_metadata_through_a_moved_checkout_equals_a_fresh_build(world, tmp_path, monkeypatch):
    """One checkout serves both commits of a bump's drift; what the first build left there must not reach the
    second (this build adds a requirement when it finds a file the build of another commit wrote; PEP 517 runs
    setup.py once per hook, so the same commit's file is no sign)."""
    setup = ("import os\nfrom setuptools import setup\n"
             "stale = os.path.exists('left-by-a-build') and open('left-by-a-build').read() != '{v}'\n"
             "if not os.path.exists('left-by-a-build'):\n    open('left-by-a-build', 'w').write('{v}')\n"
             "setup(name='megatron-core', version='{v}', packages=['megatron', 'megatron.core'],\n"
             "      install_requires=['stale-dep'] if stale else [])\n")
    build = "[build-system]\nrequires = ['setuptools']\nbuild-backend = 'setuptools.build_meta'\n"
    megatron = world.forks["megatron-core"]
    first = commit(megatron.fork, "setuptools 0.2.0", {"pyproject.toml": build, "setup.py": setup.format(v="0.2.0")})
    second = commit(megatron.fork, "setuptools 0.2.1", {"setup.py": setup.format(v="0.2.1")})
    fork = Project.read(world.project).fork("megatron-core")
    fork_cache.fetched(fork, first)
    both = fork_metadata.read_all(fork_cache.fetched(fork, second), [first, second])
    assert [m.version for m in both] == ["0.2.0", "0.2.1"]
    assert all("stale-dep" not in m.requires for m in both), both


def test_metadata_naming_another_distribution_is_not_bumped_to(world, capsys):
    """A fork without a static [project] name (setup.py style) whose METADATA says megatron-tron."""
    forkworld.derive_metadata(world, {})
    before = _state(world)
    rev = _backend_commit(world, "Metadata-Version: 2.1\nName: megatron-tron\nVersion: 0.2.0\n", pyproject_name=None)
    capsys.readouterr()
    assert deps(world, "bump", "megatron-core", "--rev", rev) == 1
    assert "builds distribution 'megatron-tron', not 'megatron-core'" in capsys.readouterr().err
    assert _state(world) == before


def test_a_version_that_is_not_pep_440_is_not_bumped_to(world, capsys):
    forkworld.derive_metadata(world, {})
    before = _state(world)
    rev = _backend_commit(world, "Metadata-Version: 2.1\nName: megatron-core\nVersion: 0.2.0 garbage\n")
    capsys.readouterr()
    assert deps(world, "bump", "megatron-core", "--rev", rev) == 1
    assert "not a PEP 440 version" in capsys.readouterr().err
    assert _state(world) == before
