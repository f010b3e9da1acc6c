import tomllib

from gitfixtures import commit, git

from nemo_rl.cli import main
from nemo_rl.deps.patches import WHY_PLACEHOLDER
from nemo_rl.process import run


def patches(world, *args):
    return main(["deps", "patches", *args, "--project", str(world.project)])


def write_why(world, dist, text="Ours: why the fork exists."):
    path = world.project / "patches" / dist / "index.toml"
    path.write_text(path.read_text().replace(WHY_PLACEHOLDER, text))


def test_generate_then_check_clean(world, capsys):
    assert patches(world) == 0
    megatron = world.forks["megatron-core"]
    index = tomllib.loads((world.project / "patches/megatron-core/index.toml").read_text())
    assert index["base"] == megatron.base and index["pinned"] == megatron.head
    assert [c["record"] for c in index["commit"]] == ["0001-add-tokens-entry.patch", "0002-fix-pad-tokens.patch"]
    record = (world.project / "patches/megatron-core/0002-fix-pad-tokens.patch").read_text()
    assert f"commit: {megatron.head}" in record and "tokens.py | 2 +-" in record
    assert "def tokens" not in record  # facts only, never the fork's code
    assert patches(world, "--check", "--offline") == 1  # the why-note is still the placeholder
    for dist in world.forks:
        write_why(world, dist)
    assert patches(world, "--check", "--offline") == 0
    assert patches(world, "--check") == 0


def test_notes_survive_regeneration(world):
    assert patches(world) == 0
    write_why(world, "nemo-toolkit", "Keep me.")
    record = world.project / "patches/nemo-toolkit/0001-add-tokens-entry.patch"
    record.write_text(record.read_text() + "  reviewed: upstream PR pending\n")
    assert patches(world, "nemo-toolkit") == 0
    assert "Keep me." in (world.project / "patches/nemo-toolkit/index.toml").read_text()
    assert "reviewed: upstream PR pending" in record.read_text()


def test_check_catches_drift(world, capsys):
    assert patches(world) == 0
    for dist in world.forks:
        write_why(world, dist)
    nemo = world.forks["nemo-toolkit"]
    # Rewrite the pinned commit's diff in place (force-push): same SHA pinned nowhere, new content.
    git(nemo.fork, "reset", "-q", "--hard", nemo.downstream[0])
    rewritten = commit(nemo.fork, "fix: pad tokens", {"nemo/tokens.py": "def tokens():\n    return [1, 2, 0, 0]\n"})
    pyproject = world.project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(nemo.head, rewritten))
    capsys.readouterr()
    assert patches(world, "nemo-toolkit", "--check") == 1
    out = capsys.readouterr().out
    assert "DRIFT" in out and "added: " + rewritten[:12] in out and "no longer in the fork" in out


def test_offline_check_catches_a_missing_record(world, capsys):
    assert patches(world) == 0
    write_why(world, "megatron-core")
    (world.project / "patches/megatron-core/0001-add-tokens-entry.patch").unlink()
    assert patches(world, "megatron-core", "--check", "--offline") == 1
    assert "0001-add-tokens-entry.patch listed in the index is missing" in capsys.readouterr().out


def test_export_and_git_am_reproduce_the_fork(world, tmp_path, capsys):
    megatron = world.forks["megatron-core"]
    out_dir = tmp_path / "series"
    assert patches(world, "export", "megatron-core", str(out_dir)) == 0
    names = sorted(p.name for p in out_dir.iterdir())
    assert names == ["0001-add-tokens-entry.patch", "0002-fix-pad-tokens.patch"]
    assert patches(world) == 0
    recorded = sorted(p.name for p in (world.project / "patches/megatron-core").glob("0*.patch"))
    assert recorded == names  # our record names are format-patch's
    check = tmp_path / "check"
    run(["git", "clone", "-q", str(megatron.upstream), str(check)])
    git(check, "checkout", "-q", megatron.base)
    git(check, "am", "-q", *[str(out_dir / n) for n in names])
    assert git(check, "rev-parse", "HEAD^{tree}") == git(megatron.fork, "rev-parse", f"{megatron.head}^{{tree}}")


def test_record_names_are_git_format_patch_names(tmp_path):
    from gitfixtures import init

    from nemo_rl.deps.patch_records import patch_filename

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
