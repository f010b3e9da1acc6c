"""The landing journal (project/journal.py): a command that reads the pins refuses over a landing cut short and
names `deps recover`."""

from __future__ import annotations

from nemo_rl.cli import main
from nemo_rl.project import lockfile


def test_bump_and_patches_refuse_over_a_landing_cut_short(world, capsys):
    """A landing killed after pyproject.toml moved: a bump or `deps patches` run over it would read the half-moved
    pins and land over them (and `deps recover` then refuses the newer files); each names `deps recover`."""
    import json

    from nemo_rl.project import journal, state_dir

    rev = lockfile.fork(world.project, "megatron-core").rev
    staging = world.project / state_dir.STAGING_ROOT / "staging-1-a"
    staging.mkdir(parents=True)
    (staging / "uv.lock").write_text((world.project / "uv.lock").read_text())
    (staging / journal.JOURNAL).write_text(json.dumps({"moves": ["pyproject.toml", "uv.lock"], "before": {
        name: journal.digest(world.project / name) for name in ("pyproject.toml", "uv.lock")}}))
    for args in (["patches"], ["bump", "megatron-core", "--rev", rev], ["bump", "megatron-core", "--rev", rev,
                                                                          "--dry-run"]):
        capsys.readouterr()
        assert main(["deps", *args, "--project", str(world.project)]) == 1, args
        captured = capsys.readouterr()
        said = captured.out + captured.err
        assert "was cut short" in said and "nemo-rl deps recover" in said, (args, said)
    assert main(["deps", "recover", "--project", str(world.project)]) == 0
    assert main(["deps", "patches", "--project", str(world.project)]) == 0
