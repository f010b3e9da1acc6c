"""The command line's shape (nemo_rl/cli.py and each verb's parser): one -v on every verb, help that points at
the right page, `deps patches export` parsed by argparse; and how the errors a verb raises map to exit codes."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from nemo_rl import verbose
from nemo_rl.cli import build_parser, main


def leaves(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()):
    """(words, parser) of every command that runs: doctor, deps VERB, envs VERB."""
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not actions:
        yield words, parser
        return
    for name, sub in actions[0].choices.items():
        yield from leaves(sub, (*words, name))


def test_every_command_takes_verbose_with_one_meaning():
    found = list(leaves(build_parser()))
    assert len(found) >= 13
    for words, parser in found:
        options = {o: a for a in parser._actions for o in a.option_strings}
        assert options["-v"] is options["--verbose"] and options["-v"].help == verbose.HELP, words
        assert parser.description, f"`nemo-rl {' '.join(words)} --help` says nothing about what it does"


@pytest.mark.parametrize("argv", [["-v", "envs", "list"], ["envs", "list", "-v"], ["deps", "status", "--verbose"],
                                  ["doctor", "-v"], ["-v", "deps", "bump", "megatron-core", "--branch", "b"],
                                  ["deps", "-v", "status"], ["envs", "-v", "list"]])
def test_verbose_before_or_after_the_verb(argv):
    assert build_parser().parse_args(argv).verbose is True
    assert build_parser().parse_args([w for w in argv if w not in ("-v", "--verbose")]).verbose is False


def test_doctor_json_help_names_the_page_with_the_schema():
    doctor = dict(leaves(build_parser()))[("doctor",)]
    [json_option] = [a for a in doctor._actions if "--json" in a.option_strings]
    assert "docs/mcore.md" in json_option.help
    assert "`nemo-rl doctor --json` schema" in (Path(__file__).parent.parent / "docs" / "mcore.md").read_text()


def test_patches_takes_a_distribution_or_the_export_form():
    parse = build_parser().parse_args
    found = parse(["deps", "patches", "megatron-core", "--check"])
    assert (found.distribution, found.export, found.check) == ("megatron-core", None, True)
    found = parse(["deps", "patches", "export", "megatron-core", "out", "--no-wait"])
    assert (found.distribution, found.export, found.export_dir) == (None, "megatron-core", Path("out"))
    assert parse(["deps", "patches"]).distribution is None


@pytest.mark.parametrize("argv, message", [
    (["export", "megatron-core"], "patches export DIST DIR: the following arguments are required: DIR"),
    (["export", "a", "b", "c"], "unrecognized arguments: c"),
    (["a", "b"], "unrecognized arguments: b"),
])
def test_patches_refuses_other_word_counts_as_bad_arguments(argv, message, capsys):
    with pytest.raises(SystemExit) as caught:
        build_parser().parse_args(["deps", "patches", *argv])
    assert caught.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("flags", [["--check"], ["--offline"], ["--check", "--offline"]])
@pytest.mark.parametrize("before", [True, False])
def test_patches_export_refuses_check_before_or_after_its_words(flags, before):
    """`--check` is a flag of the records' form: with `export` it would be ignored (the export ran instead)."""
    from nemo_rl.deps import patches
    from nemo_rl.errors import UsageError

    words = ["export", "megatron-core", "out"]
    args = build_parser().parse_args(["deps", "patches", *(flags + words if before else words + flags)])
    with pytest.raises(UsageError, match="takes no --check or --offline"):
        patches.run(Path("/nonexistent-project"), args)


@pytest.mark.parametrize("argv, export, directory", [
    (["export", "megatron-core", "-v", "out"], "megatron-core", "out"),
    (["export", "megatron-core", "--project", "/p", "out"], "megatron-core", "out"),
    (["--project", "/p", "export", "-v", "megatron-core", "out"], "megatron-core", "out"),
    (["export", "-v", "megatron-core", "--", "-out"], "megatron-core", "-out"),
])
def test_patches_export_takes_its_options_anywhere_and_words_after_a_double_dash(argv, export, directory):
    args = build_parser().parse_args(["deps", "patches", *argv])
    assert (args.export, args.export_dir, args.distribution) == (export, Path(directory), None)
    assert build_parser().parse_args(["deps", "patches", "--", "-x"]).distribution == "-x"
    assert build_parser().parse_args(["deps", "patches", "megatron-core", "--check"]).distribution == "megatron-core"


ROOT = Path(__file__).resolve().parent.parent


def test_the_cli_and_the_node_build_import_with_the_standard_library_alone():
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from nemo_rl import cli; cli.build_parser(); "
            "import nemo_rl.envs.build, nemo_rl.workers.bundles, nemo_rl.workers.environments; "
            "import nemo_rl.workers.verified; "
            "bad = sorted(m for m in ('packaging', 'tomlkit', 'ray', 'pyproject_hooks') if m in sys.modules); "
            "print(bad); sys.exit(1 if bad else 0)")
    result = subprocess.run([str(base), "-I", "-S", "-c", code, str(ROOT)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_status_into_a_closed_pipe_is_no_error(world):
    result = subprocess.run(f"{sys.executable} -m nemo_rl deps status --project {world.project} | head -c 1",
                            shell=True, capture_output=True, text=True)
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr
def test_cli_maps_errors_to_exit_codes(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["deps", "status"]) == 1  # no project here: an expected error
    assert "no pyproject.toml with a [tool.nemo-rl.forks] table" in capsys.readouterr().err
    from nemo_rl.deps import status

    def explode(project, args):
        raise RuntimeError("boom")

    here = ["--project", str(Path(__file__).resolve().parent.parent)]  # handlers run once a project is found
    monkeypatch.setattr(status, "run", explode)
    assert main(["deps", "status", *here]) == 3
    assert "unexpected error: RuntimeError: boom" in capsys.readouterr().err

    def interrupt(project, args):
        raise KeyboardInterrupt

    monkeypatch.setattr(status, "run", interrupt)
    assert main(["deps", "status", *here]) == 130
