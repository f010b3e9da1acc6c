"""Checks on every value read from disk or a setting (nemo_rl/values.py): names, paths, bundle digests, timeouts,
state files and the one reader of plain files."""

import os
import sys
from pathlib import Path

import pytest
from fakes import FLAGS, deps, fake_bundle

from nemo_rl import values
from nemo_rl.cli import main
from nemo_rl.errors import NemoRLError
from nemo_rl.project.develop_state import package_roots
from nemo_rl.project.model import Project
from nemo_rl.workers import bundles, environments

DIGEST = "sha256:" + "ab12" * 16


@pytest.mark.parametrize("name", ["megatron-core", "nemo_toolkit", "a", "a.b-c_d", "A1"])
def test_distribution_names_pass(name):
    assert values.distribution_name(name, "here") == name


@pytest.mark.parametrize("name", ["../../victim", "/abs", "a/b", "-x", ".hidden", "x-", "", "a b", "..", "x."])
def test_paths_and_options_are_not_distribution_names(name):
    with pytest.raises(NemoRLError, match="is not a distribution name"):
        values.distribution_name(name, "here")


def test_full_sha():
    sha = "0123456789abcdef0123456789abcdef01234567"
    assert values.full_sha(sha, "rev") == sha
    for bad in (sha[:-1], sha + "0", sha.upper(), "--upload-pack=touch x", "g" * 40, ""):
        with pytest.raises(NemoRLError, match="not a full 40-hex commit SHA"):
            values.full_sha(bad, "rev")


@pytest.mark.parametrize("branch", ["main", "terryk/main-2025-05-01-with-sahil-patch", "yifu/nano-v3-main", "v1.2"])
def test_branch_names_pass(branch):
    assert values.branch_name(branch, "branch") == branch


@pytest.mark.parametrize("branch", ["", "-x", "--upload-pack=x", "a..b", "a b", "a:b", "/a", "a/", "a.lock", "a~1",
                                    "a^", "a?", "a*", "a[", "a\\b", "a@{1}", ".a", "a//b", "a.", "x\x00y"])
def test_branch_names_that_git_would_misread_are_refused(branch):
    with pytest.raises(NemoRLError, match="not a usable branch name"):
        values.branch_name(branch, "branch")


@pytest.mark.parametrize("url", ["https://github.com/NVIDIA/NeMo.git", "http://h/x", "ssh://git@h/x.git",
                                 "git://h/x", "file://server/srv/x.git", "git@github.com:NVIDIA/NeMo.git"])
def test_git_urls_pass(url):
    assert values.git_url(url, "url") == url


@pytest.mark.parametrize("url", [".", "/srv/x.git", "--upload-pack=x", "ext::sh -c touch% x", "https://h/a b",
                                 "git@h:-oProxyCommand=x", "fd::3", "", "https://h/x\x1b[2K.git", "git@h:x\x07"])
def test_transports_and_options_are_not_git_urls(url):
    with pytest.raises(NemoRLError, match="is not a git URL"):
        values.git_url(url, "url")


def test_inside(tmp_path):
    assert values.inside(tmp_path, "a/b", "x") == tmp_path / "a/b"
    for escape in ("../x", "a/../../x", "/etc", "."):
        with pytest.raises(NemoRLError, match="points outside"):
            values.inside(tmp_path, escape, "x")
    (tmp_path / "link").symlink_to("/etc")
    with pytest.raises(NemoRLError, match="points outside"):
        values.inside(tmp_path, "link/passwd", "x")


def test_package_roots_follow_the_wheel():
    megatron = ["megatron/core/__init__.py", "megatron/core/a.py", "megatron/core/sub/__init__.py",
                "megatron/core/helpers.cpython-312-x86_64-linux-gnu.so", "megatron_core-0.1.data/data/x"]
    assert package_roots(megatron) == ["megatron/core"]  # megatron is a namespace: only core ships
    assert package_roots(["nemo/__init__.py", "nemo/tron/init.py", "is_nemo_installed.py"]) == [
        "is_nemo_installed.py", "nemo"]


@pytest.mark.parametrize("check, value, said, fix", [
    (values.distribution_name, "../x", "'../x'", "such as megatron-core"),
    (values.full_sha, "abc", "'abc'", "`git rev-parse <rev>`"),
    (values.branch_name, "-x", "'-x'", "the branch's plain name"),
    (values.git_url, ".", "'.'", "https://, ssh://, git:// or file:// URL"),
])
def test_each_refusal_names_the_value_the_place_and_the_fix(check, value, said, fix):
    with pytest.raises(NemoRLError) as refused:
        check(value, "[tool.x] y")
    assert refused.value.what.startswith("[tool.x] y: ") and said in refused.value.what
    assert fix in refused.value.remedy


def test_inside_names_the_path_and_the_fix(tmp_path):
    with pytest.raises(NemoRLError) as refused:
        values.inside(tmp_path, "../escape", "state.json")
    assert "'../escape' points outside" in refused.value.what
    assert refused.value.remedy == "fix or delete state.json"


def test_a_final_newline_is_part_of_the_value():
    """`$` matches before a final newline: "<sha>\\n" read from a file is not a SHA, nor a name or URL. (A bundle
    digest is another case: it is taken without the whitespace around it, see
    test_a_digest_in_either_case_is_one_digest.)"""
    checks = [(values.full_sha, "0123456789abcdef0123456789abcdef01234567"),
              (values.distribution_name, "megatron-core"), (values.git_url, "https://github.com/NVIDIA/NeMo.git"),
              (values.git_url, "git@github.com:NVIDIA/NeMo.git")]
    for check, good in checks:
        assert check(good, "here")
        with pytest.raises(NemoRLError):
            check(good + "\n", "here")


def test_extras_leave_out_what_the_flags_do_not_install(tmp_path):

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0"\n[project.optional-dependencies]\n'
                                             'mcore = ["megatron-core", "nemo-toolkit"]\n')
    flags = ["--locked", "--extra", "mcore"]
    assert Project.read(tmp_path).extras_require(flags, "nemo-toolkit")
    assert not Project.read(tmp_path).extras_require([*flags, "--no-install-package", "nemo-toolkit"], "nemo-toolkit")
    assert not Project.read(tmp_path).extras_require([*flags, "--no-install-package=nemo_toolkit"], "nemo-toolkit")
    assert Project.read(tmp_path).extras_require([*flags, "--no-install-package", "nemo-toolkit"], "megatron-core")


DEEP = "[" * 100000


def test_deeply_nested_state_files_name_the_file(world, tmp_path, capsys):
    state = world.project / ".nemo-rl" / "develop.json"
    state.parent.mkdir(parents=True)
    state.write_text(DEEP)
    assert deps(world, "status") == 1
    assert f"cannot read {state}: it is nested too deeply" in capsys.readouterr().err
    state.unlink()
    staging = world.project / ".nemo-rl" / "staging-1-x"
    staging.mkdir()
    (staging / "LANDING.json").write_text(DEEP)
    assert deps(world, "recover") == 1
    assert f"cannot read {staging / 'LANDING.json'}: it is nested too deeply" in capsys.readouterr().err
    env = tmp_path / "venvs" / "k"
    env.mkdir(parents=True)
    (env / environments.META).write_text(DEEP)
    with pytest.raises(NemoRLError, match="nested too deeply"):
        environments.describe(env)
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / bundles.MANIFEST).write_text(DEEP)
    with pytest.raises(NemoRLError, match=f"{bundle / bundles.MANIFEST}.*nested too deeply"):
        bundles.read_manifest(bundle)


def test_state_json_passes_a_missing_file_through(tmp_path):
    with pytest.raises(FileNotFoundError):
        values.state_json(tmp_path / "absent.json", "fix")
    (tmp_path / "bad.json").write_bytes(b"\xff\xfe")
    with pytest.raises(NemoRLError, match="bad.json"):
        values.state_json(tmp_path / "bad.json", "fix")


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf"), "30", None, True])
def test_a_timeout_that_cannot_be_right_is_refused(timeout, tmp_path):
    from nemo_rl import imports
    from nemo_rl.workers import ray_actors

    with pytest.raises(NemoRLError, match="not a number of seconds above zero"):
        ray_actors.wait_ready(None, None, timeout=timeout)
    with pytest.raises(NemoRLError, match="not a number of seconds above zero"):
        imports.check(Path(sys.executable), ["json"], timeout=timeout)
    assert values.timeout_seconds(2, "here") == 2.0 and values.timeout_seconds(0.5, "here") == 0.5


@pytest.mark.parametrize("character", ["\u2028", "\u0085"])
def test_a_path_with_a_line_separator_python_may_split_on_is_refused(character):
    from nemo_rl import values

    with pytest.raises(NemoRLError, match="control character"):
        values.plain_path(f"/tmp/x{character}import os", "the checkout")


# Paths nemo-rl writes into a .pth line (the project, a develop checkout), apt's sources or a printed command.
# `--project NOWHERE` and no apt on PATH: were the check gone, each command stops at once and touches nothing.
PATH_ARGUMENTS = [["envs", "build", "BASE", "--project", "{path}"], ["envs", "build", "BASE", "--from", "{path}"],
                  ["envs", "pack", "BASE", "{path}"], ["deps", "status", "--project", "{path}"],
                  ["deps", "develop", "megatron-core", "{path}"], ["toolchain", "cuda", "{path}"]]


@pytest.mark.parametrize("argv", PATH_ARGUMENTS, ids=[" ".join(a[:2]) + " " + a[-2] for a in PATH_ARGUMENTS])
@pytest.mark.parametrize("path", ["/tmp/x\nimport os; os.system('id')", "/tmp/x\u2028y", "/tmp/x\x1b[2Jy"],
                         ids=["a newline", "a line separator", "an escape"])
def test_a_path_argument_that_would_break_out_of_a_line_is_refused_by_the_parser(tmp_path, monkeypatch, capsys,
                                                                                   argv, path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    nowhere = [] if "--project" in argv or argv[0] == "toolchain" else ["--project", str(tmp_path / "nowhere")]
    with pytest.raises(SystemExit) as exit_info:
        main([word.replace("{path}", path) for word in argv] + nowhere)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and f"the path {path!r} contains a newline or another control character" in err


def test_an_empty_path_argument_is_refused_by_the_parser(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["deps", "develop", "megatron-core", "", "--project", str(tmp_path / "nowhere")])
    assert exit_info.value.code == 2 and "an empty path names no directory" in capsys.readouterr().err


@pytest.mark.parametrize(("given", "expected"), [
    (DIGEST, DIGEST), (DIGEST.upper(), DIGEST), ("  " + DIGEST + "\n", DIGEST), (DIGEST[7:].upper(), DIGEST)])
def test_a_digest_in_either_case_is_one_digest(given, expected):
    assert values.bundle_digest(given, "--digest") == expected


@pytest.mark.parametrize(("given", "message"), [
    ("sha256:" + "ab12" * 8 + " " + "ab12" * 8, "one digest is one word"), ("md5:" + "0" * 32, "not a bundle digest"),
    (DIGEST + "0", "not a bundle digest"), ("sha256:", "not a bundle digest")])
def test_a_digest_that_is_not_one_is_refused_by_name(given, message):
    with pytest.raises(NemoRLError, match=message) as refused:
        values.bundle_digest(given, "--digest")
    assert "64 hex digits" in refused.value.remedy


def test_digest_lists_take_commas_semicolons_and_spaces(world, tmp_path, monkeypatch, capsys):
    other = "sha256:" + "0" * 64
    assert values.bundle_digests(f"{other};{DIGEST.upper()} ,\t{DIGEST}", "X") == {other, DIGEST}
    with pytest.raises(NemoRLError, match="space after a colon"):
        values.bundle_digests("sha256: " + DIGEST[7:], "X")
    bundle = fake_bundle(world, tmp_path / "bundles" / "b")
    pinned = bundles.read_manifest(bundle).digest
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIR", str(bundle.parent))
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIGESTS", f"{other}; {pinned.upper()}")
    assert bundles.find(Project.read(world.project), FLAGS) == bundle
    assert bundles.check(bundle, Project.read(world.project), FLAGS, pinned.upper()).digest == pinned
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["envs", "build", "--help"])
    assert "semicolons" in capsys.readouterr().out


@pytest.mark.parametrize("timeout", [1e10, 10**400, 0, float("nan")])
def test_one_timeout_rule_for_every_api(timeout):
    from nemo_rl import imports, process
    from nemo_rl.workers import ray_actors

    for call in (lambda: imports.check(Path(sys.executable), ["json"], timeout=timeout),
                 lambda: ray_actors.wait_ready(None, None, timeout=timeout),
                 lambda: process.run(["true"], timeout=timeout)):
        with pytest.raises(NemoRLError, match=r"not a number of seconds above zero \(and at most 1e\+09\)"):
            call()
    assert process.run(["true"], timeout=values.TIMEOUT_MAX_S).returncode == 0


def test_the_reader_refuses_what_is_not_a_plain_file(tmp_path):
    fifo, link, big = tmp_path / "fifo", tmp_path / "link", tmp_path / "big"
    os.mkfifo(fifo)
    (tmp_path / "real").write_text("{}")
    link.symlink_to(tmp_path / "real")
    big.write_bytes(b"x" * 101)
    for path, said in ((fifo, "not a regular file"), (Path("/dev/null"), "not a regular file"),
                       (link, "symbolic link"), (big, "larger than 100 bytes")):
        with pytest.raises(values.NotAPlainFile, match=said):
            values.read_plain_file(path, 100)
    assert values.read_plain_file(tmp_path / "real", 100) == b"{}"
    with pytest.raises(FileNotFoundError):
        values.read_plain_file(tmp_path / "absent")


def test_the_reader_checks_the_file_it_opened(tmp_path, monkeypatch):
    """A file swapped for a FIFO between the look and the open is refused (O_NONBLOCK: the open does not block)."""
    (tmp_path / "plain").write_text("{}")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    real_lstat = os.lstat
    monkeypatch.setattr(values.os, "lstat", lambda p: real_lstat(tmp_path / "plain") if p == fifo else real_lstat(p))
    with pytest.raises(values.NotAPlainFile, match="replaced"):
        values.read_plain_file(fifo)


@pytest.mark.parametrize("quote", ['"', "'"])
def test_a_quoted_digest_says_to_drop_the_quotes(quote):
    with pytest.raises(NemoRLError, match="in quotes: drop them"):
        values.bundle_digest(f"{quote}sha256:{'ab' * 32}{quote}", "--digest")


def test_a_decimal_timeout_is_refused_by_its_type():
    from decimal import Decimal

    with pytest.raises(NemoRLError, match="is a Decimal, not a real number"):
        values.timeout_seconds(Decimal("30"), "t")
