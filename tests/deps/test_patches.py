import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import forkworld
import pytest
from fakes import deps, derived_world, entry
from gitfixtures import commit, git

from nemo_rl.cli import main
from nemo_rl.forks import declared
from nemo_rl.forks.records import WHY_PLACEHOLDER
from nemo_rl.process import run
from nemo_rl.project import journal
from nemo_rl.project.model import Project


def patches(world, *args):
    return main(["deps", "patches", *args, "--project", str(world.project)])


def edit(path, old, new, count=1):
    text = path.read_text()
    assert old in text, (old, path)
    path.write_text(text.replace(old, new, count))


def test_generate_then_check_clean(world, capsys):
    megatron = world.forks["megatron-core"]
    index = tomllib.loads((world.project / "patches/megatron-core/index.toml").read_text())
    assert index["base"] == megatron.base and index["pinned"] == megatron.head
    assert [c["record"] for c in index["commit"]] == ["0001-add-tokens-entry.patch", "0002-fix-pad-tokens.patch"]
    record = (world.project / "patches/megatron-core/0002-fix-pad-tokens.patch").read_text()
    assert f"commit: {megatron.head}" in record and "tokens.py | 2 +-" in record
    assert "def tokens" not in record  # facts only, never the fork's code
    assert patches(world, "--check", "--offline") == 0
    assert patches(world, "--check") == 0
    edit(world.project / "patches/nemo-toolkit/index.toml", forkworld.WHY, WHY_PLACEHOLDER)
    assert patches(world, "--check", "--offline") == 1  # the why-note is the placeholder again
    assert "why: expected a note" in capsys.readouterr().out


def test_notes_survive_regeneration(world):
    edit(world.project / "patches/nemo-toolkit/index.toml", forkworld.WHY, "Keep me.")
    record = world.project / "patches/nemo-toolkit/0001-add-tokens-entry.patch"
    record.write_text(record.read_text() + "  reviewed: upstream PR pending\n")
    assert patches(world, "--check", "--offline") == 0  # notes are ours: not compared
    assert patches(world, "nemo-toolkit") == 0
    assert "Keep me." in (world.project / "patches/nemo-toolkit/index.toml").read_text()
    assert "reviewed: upstream PR pending" in record.read_text()


def test_generated_files_get_the_umask_mode(world):
    for path in (world.project / "patches").rglob("*"):
        if path.is_file():
            assert path.stat().st_mode & 0o777 == 0o666 & ~0o022, path  # pytest runs with umask 022


def test_check_catches_drift(world, capsys):
    nemo = world.forks["nemo-toolkit"]
    # Rewrite the pinned commit's diff in place (force-push): same subject, new content and SHA.
    git(nemo.fork, "reset", "-q", "--hard", nemo.downstream[0])
    rewritten = commit(nemo.fork, "fix: pad tokens", {"nemo/tokens.py": "def tokens():\n    return [1, 2, 0, 0]\n"})
    edit(world.project / "pyproject.toml", nemo.head, rewritten)
    capsys.readouterr()
    assert patches(world, "nemo-toolkit", "--check") == 1
    out = capsys.readouterr().out
    assert "DRIFT" in out
    assert f"0002-fix-pad-tokens.patch: commit: expected {rewritten}, found {nemo.head}" in out
    assert "0002-fix-pad-tokens.patch: patch-id: expected" in out


RECORD = "patches/megatron-core/0001-add-tokens-entry.patch"
RECORD_FACT_EDITS = {"subject", "author", "diffstat", "date", "patch-id in record"}
INDEX = "patches/megatron-core/index.toml"


def hand_edits(world):
    """Each a hand edit to records or index that leaves every file parseable; (name, edit, expected text)."""
    m = world.forks["megatron-core"]
    project = world.project

    def on(relative, old, new):
        return lambda: edit(project / relative, old, new)

    def duplicate():
        shutil.copy(project / RECORD, project / "patches/megatron-core/0003-add-tokens-entry.patch")

    def reorder():
        text = (project / INDEX).read_text()
        head, first, second = text.split("[[commit]]")
        (project / INDEX).write_text(head + "[[commit]]" + second.rstrip("\n") + "\n\n[[commit]]" + first.rstrip("\n"))

    return [
        ("subject", on(RECORD, "subject: add tokens entry", "subject: add tokens entries"), "subject"),
        ("author", on(RECORD, "author: Fixture Author", "author: Someone Else"), "author"),
        ("diffstat", on(RECORD, "| 2 ++", "| 3 +++"), "diffstat"),
        ("date", on(RECORD, "date: 2025", "date: 2024"), "date"),
        ("patch-id in record", on(RECORD, "patch-id: ", "patch-id: 0"), "patch-id"),
        ("reordered", reorder, "number"),
        ("duplicate record", duplicate, "0003-add-tokens-entry.patch"),
        ("fork url", on(INDEX, f'fork-url = "{m.fork_url}"', 'fork-url = "https://elsewhere.invalid/x.git"'),
         "fork-url"),
        ("upstream url", on(INDEX, f'upstream-url = "{m.upstream_url}"', 'upstream-url = "https://x.invalid/u.git"'),
         "upstream-url"),
        ("branch", on(INDEX, 'branch = "nemo-rl/main"', 'branch = "other"'), "branch"),
        ("pinned", on(INDEX, f'pinned = "{m.head}"', f'pinned = "{m.downstream[0]}"'), "pinned"),
        ("outside", on(INDEX, 'record = "0001-add-tokens-entry.patch"', 'record = "../nemo-toolkit/0001-add-tokens'
                       '-entry.patch"'), "a file name inside patches/megatron-core/"),
        ("index base", on(INDEX, f'base = "{m.base}"', f'base = "{m.head}"'), "base"),
        ("a key of its own", on(INDEX, 'record = "0001-add-tokens-entry.patch"',
                                'extra = 1\nrecord = "0001-add-tokens-entry.patch"'), "which nemo-rl does not write"),
        ("a mistyped number", on(INDEX, "number = 1\n", 'number = "1"\n'), "number is '1', not an integer"),
    ]


@pytest.mark.parametrize("mode", ["--offline", "online"])
def test_every_hand_edit_is_caught(world, capsys, mode):
    """One world, each edit applied to pristine records in turn: both modes must fail and name the field."""
    pristine = {p: p.read_bytes() for p in (world.project / "patches").rglob("*") if p.is_file()}
    args = ["megatron-core", "--check"] + (["--offline"] if mode == "--offline" else [])
    for name, apply, expected in hand_edits(world):
        apply()
        capsys.readouterr()
        assert patches(world, *args) == 1, name
        out = capsys.readouterr().out
        # offline, a record's facts can only be proved unedited through the index's digest of them
        wanted = "digest" if mode == "--offline" and name in RECORD_FACT_EDITS else expected
        assert "DRIFT" in out and wanted in out, (name, out)
        for path in list((world.project / "patches").rglob("*")):
            if path.is_file() and path not in pristine:
                path.unlink()
        for path, data in pristine.items():
            path.write_bytes(data)
        assert patches(world, *args) == 0, f"restoring after {name}"


def test_an_index_out_of_shape_is_drift_status_shows_and_deps_patches_regenerates(world, capsys):
    """A hand edit nemo-rl would not write ([[commit]] with a key of its own) stops nothing: status shows every
    fork with the records stale, the check names it, and `deps patches` writes the index again, why-note kept."""
    index = world.project / INDEX
    why = "Ours: a note only people write.\n"
    text = index.read_text()
    index.write_text(text.replace('record = "0001-add-tokens-entry.patch"',
                                  'extra = 1\nrecord = "0001-add-tokens-entry.patch"', 1)
                     .replace('why = """', f'why = """{why}', 1))
    capsys.readouterr()
    assert main(["deps", "status", "--project", str(world.project)]) == 0
    out = capsys.readouterr().out
    assert "megatron-core" in out and "nemo-toolkit" in out and "which nemo-rl does not write" in out
    assert patches(world, "--check", "--offline") == 1
    assert "[[commit]] #1 has extra, which nemo-rl does not write" in capsys.readouterr().out
    assert patches(world, "megatron-core") == 0
    assert "extra = 1" not in index.read_text() and why in index.read_text()
    assert patches(world, "megatron-core", "--check") == 0


def test_an_index_with_merge_conflict_markers_is_drift_and_deps_patches_writes_it_again(world, capsys):
    """Two branches bumped and git left conflict markers in index.toml: status still shows both forks, the check
    names the file, and `deps patches DIST` writes it again with the why-note the file held."""
    index = world.project / INDEX
    why = "Ours: a note only people write.\n"
    index.write_text(index.read_text().replace('why = """', f'why = """{why}', 1)
                     .replace("[[commit]]", "<<<<<<< HEAD\n[[commit]]", 1))
    capsys.readouterr()
    assert main(["deps", "status", "--project", str(world.project)]) == 0
    out = capsys.readouterr().out
    assert "megatron-core" in out and "nemo-toolkit" in out and "does not parse as TOML" in out
    assert patches(world, "--check", "--offline") == 1
    assert "index.toml: shape: expected as `nemo-rl deps patches` writes it, found does not parse" in \
        capsys.readouterr().out
    assert patches(world, "megatron-core") == 0
    assert "<<<<<<<" not in index.read_text() and why in index.read_text()
    assert patches(world, "megatron-core", "--check") == 0


def test_online_check_reports_field_expected_found(world, capsys):
    edit(world.project / RECORD, "author: Fixture Author <author@fixture.invalid>", "author: Someone <s@x.invalid>")
    capsys.readouterr()
    assert patches(world, "megatron-core", "--check") == 1
    out = capsys.readouterr().out
    assert ("0001-add-tokens-entry.patch: author: expected Fixture Author <author@fixture.invalid>, "
            "found Someone <s@x.invalid>") in out


def test_offline_check_catches_a_missing_record_and_a_deleted_fork_table(world, capsys):
    (world.project / RECORD).unlink()
    assert patches(world, "megatron-core", "--check", "--offline") == 1
    assert "record: expected 0001-add-tokens-entry.patch to exist, found missing" in capsys.readouterr().out
    pyproject = world.project / "pyproject.toml"
    text = pyproject.read_text()
    pyproject.write_text(text[:text.index("[tool.nemo-rl.forks.nemo-toolkit]")])
    assert patches(world, "--check", "--offline") == 1
    assert "patches/nemo-toolkit/: fork: expected [tool.nemo-rl.forks.nemo-toolkit]" in capsys.readouterr().out


def test_offline_check_compares_the_lock_in_full(world, capsys):
    lock = world.project / "uv.lock"
    head = world.forks["megatron-core"].head
    edit(lock, f"#{head}", f"#{head[:7]}{'0' * 33}")
    assert patches(world, "megatron-core", "--check", "--offline") == 1
    assert "uv.lock: megatron-core commit" in capsys.readouterr().out


def test_bad_arguments_exit_2(world, capsys):
    assert patches(world, "--offline") == 2
    assert "what to do:" in capsys.readouterr().err
    for args in (["export", "megatron-core"], ["a", "b"]):  # argparse's own refusal, with the verb's usage
        with pytest.raises(SystemExit) as caught:
            patches(world, *args)
        assert caught.value.code == 2 and "usage: nemo-rl deps patches" in capsys.readouterr().err


def test_export_and_git_am_reproduce_the_fork(world, tmp_path, capsys):
    megatron = world.forks["megatron-core"]
    out_dir = tmp_path / "series"
    assert patches(world, "export", "megatron-core", str(out_dir)) == 0
    names = sorted(p.name for p in out_dir.iterdir())
    assert names == ["0001-add-tokens-entry.patch", "0002-fix-pad-tokens.patch"]
    assert str(out_dir / names[0]) in capsys.readouterr().out  # it names what it wrote
    recorded = sorted(p.name for p in (world.project / "patches/megatron-core").glob("0*.patch"))
    assert recorded == names  # our record names are format-patch's
    check = tmp_path / "check"
    run(["git", "clone", "-q", str(megatron.upstream), str(check)])
    git(check, "checkout", "-q", megatron.base)
    git(check, "am", "-q", *[str(out_dir / n) for n in names])
    assert git(check, "rev-parse", "HEAD^{tree}") == git(megatron.fork, "rev-parse", f"{megatron.head}^{{tree}}")


def test_record_names_are_git_format_patch_names(tmp_path):
    from gitfixtures import init

    from nemo_rl.forks.record_files import patch_filename

    repo = init(tmp_path / "names")
    subjects = [
        "Add ConfigContainer plus data and tokenizer modules to nemo/tron (#12241)",
        "missed a change when renaming mlm -> tron. pushing fix for that in CI (#13038)",
        "  ...leading punctuation, trailing dots...",
        "feat: sahil patch",
        "unicode – dash and ümlauts__under_scores",
        "a..b...c --- d",
    ]
    for i, subject in enumerate(subjects):
        commit(repo, subject, {f"f{i}.txt": subject})
    out = run(["git", "-C", str(repo), "format-patch", "-o", str(tmp_path / "out"), "--root", "HEAD"]).stdout
    written = [line.rsplit("/", 1)[-1] for line in out.split()]
    assert written == [patch_filename(n, s) for n, s in enumerate(subjects, start=1)]


def test_a_careful_hand_edit_is_still_caught_by_the_index_digest(world, capsys):
    """A record edited together with its entry's digest: only the index's own digest can tell."""
    from nemo_rl.forks.record_files import read_record

    record = world.project / RECORD
    old_digest = read_record(record).digest()
    edit(record, "author: Fixture Author", "author: Someone Else")
    edit(world.project / INDEX, old_digest, read_record(record).digest())
    capsys.readouterr()
    assert patches(world, "megatron-core", "--check", "--offline") == 1
    assert "digest (a fact in the index was edited by hand)" in capsys.readouterr().out


def test_online_check_finds_a_wrong_base_that_agrees_everywhere_else(world, capsys):
    """pyproject and index agree on a wrong base (digest recomputed): offline cannot know, online must."""
    from dataclasses import replace

    from nemo_rl.forks.record_files import read_index, render_index

    megatron = world.forks["megatron-core"]
    wrong = megatron.downstream[0]
    edit(world.project / "pyproject.toml", f'base = "{megatron.base}"', f'base = "{wrong}"')
    directory = world.project / "patches/megatron-core"
    index = replace(read_index(directory), base=wrong)
    (directory / "index.toml").write_text(render_index(replace(index, digest=index.expected_digest())))
    assert patches(world, "megatron-core", "--check", "--offline") == 0
    capsys.readouterr()
    assert patches(world, "megatron-core", "--check") == 1
    assert f"index.toml: base: expected {megatron.base}, found {wrong}" in capsys.readouterr().out


def test_the_offline_check_over_a_landing_cut_short_names_recover(world, capsys):
    """Killed after the project's records were moved aside and before the new ones moved in: the check says the
    landing was interrupted and names `deps recover` (as status does), never DRIFT with `deps patches`, which
    refuses."""
    records = world.project / "patches" / "megatron-core"
    staging = world.project / ".nemo-rl" / "staging-1-x"
    (staging / "patches").mkdir(parents=True)
    shutil.copytree(records, staging / "patches" / "megatron-core")
    before = {"patches/megatron-core": journal.digest(records)}
    (staging / journal.JOURNAL).write_text(json.dumps({"version": 1, "moves": ["patches/megatron-core"],
                                                              "before": before}))
    records.rename(staging / ".old-megatron-core")
    capsys.readouterr()
    assert deps(world, "patches", "--check", "--offline") == 1
    out = capsys.readouterr().out
    assert "megatron-core: landing interrupted" in out and "nemo-rl deps recover" in out, out
    assert "DRIFT" not in out and "run `nemo-rl deps patches megatron-core`" not in out, out
    lock = world.project / "uv.lock"
    good_lock = lock.read_text()
    lock.write_text(re.sub(r'(?m)^name = "megatron-core"', 'name = ["megatron-core"]', good_lock))
    assert deps(world, "patches", "megatron-core", "--check", "--offline") == 1  # uv.lock named over the landing
    assert "without a name" in capsys.readouterr().err
    lock.write_text(good_lock)
    assert deps(world, "recover") == 0
    assert deps(world, "patches", "--check", "--offline") == 0, capsys.readouterr().out
def test_patches_derives_the_entry_and_records_what_the_fork_declares(world, capsys):
    derived_world(world)
    assert entry(world) == declared.Entry("megatron-core", "0.1.0", ">=3.10", ("nemo-toolkit",))
    index = tomllib.loads((world.project / "patches/megatron-core/index.toml").read_text())
    assert index["declares"] == {"commit": Project.read(world.project).fork("megatron-core").rev, "version": "0.1.0",
                                 "requires-python": ">=3.10",
                                 "requires-dist": ["nemo-toolkit", "pytest>=8"]}
    assert "# derived by `nemo-rl deps patches`" in (world.project / "pyproject.toml").read_text()
    lock = (world.project / "uv.lock").read_text()
    assert 'requires-dist = ["nemo-toolkit"]' in lock
    capsys.readouterr()
    assert deps(world, "patches", "--check", "--offline") == 0
    assert deps(world, "patches", "--check") == 0
    assert deps(world, "status", "--check") == 0


def test_a_relock_under_uv_frozen_is_refused_by_name_and_the_command_it_prints_relocks(world, capsys, monkeypatch):
    """A hand-edited uv.lock makes `deps patches` relock: UV_FROZEN would keep the lie, so it is named, with the
    command that runs without it; nothing lands before."""
    lock = world.project / "uv.lock"
    good = lock.read_text()
    edit(lock, 'name = "megatron-core"\nversion = "0.1.0"', 'name = "megatron-core"\nversion = "0.0.9"')
    before = world.files()
    monkeypatch.setenv("UV_FROZEN", "true")
    monkeypatch.chdir(world.project)  # where its fix runs as printed
    capsys.readouterr()
    assert patches(world, "megatron-core") == 1
    err = capsys.readouterr().err
    assert "error: UV_FROZEN='true' in the environment stops the relock" in err, err
    assert world.files() == before
    fix = re.search(r"what to do: run it without UV_FROZEN: `([^`]+)`", err).group(1)
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # this environment's nemo-rl
    done = subprocess.run(fix, shell=True, capture_output=True, text=True, env={**os.environ, "PATH": path})
    assert done.returncode == 0 and "relocked" in done.stdout, done.stdout + done.stderr
    assert lock.read_text() == good


def test_a_relock_that_gains_lock_options_from_the_users_uv_configuration_is_refused(world, capsys, monkeypatch,
                                                                                     tmp_path):
    """A hand-edited uv.lock makes `deps patches` relock; a uv.toml of the user's that writes [options] into it is
    named, and nothing lands."""
    edit(world.project / "uv.lock", 'name = "megatron-core"\nversion = "0.1.0"',
         'name = "megatron-core"\nversion = "0.0.9"')
    before = world.files()
    (tmp_path / "uv.toml").write_text('prerelease = "allow"\n')
    monkeypatch.setenv("UV_CONFIG_FILE", str(tmp_path / "uv.toml"))
    capsys.readouterr()
    assert patches(world, "megatron-core") == 1
    err = capsys.readouterr().err
    assert "error: uv lock wrote [options] prerelease-mode = 'allow' into the staged uv.lock" in err, err
    assert world.files() == before
