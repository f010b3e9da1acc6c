"""`nemo-rl toolchain cuda DIR` parsed (toolchain/cuda.py)."""

from __future__ import annotations

import pytest

from nemo_rl.cli import main


def test_a_bad_arch_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["toolchain", "cuda", str(tmp_path / "cuda"), "--arch", "sm_90"])
    assert exit_info.value.code == 2


def test_the_printed_exports_hold_max_jobs_and_the_preflight_comes_before_the_build(tmp_path, monkeypatch, capsys):
    import os

    from nemo_rl.toolchain import assemble

    home = tmp_path / "cuda"

    def assembled(directory, **kwargs):  # what a verified toolkit returns; its making is tested in test_assemble.py
        return assemble.Toolkit(directory, "12.4", kwargs["arch"], (kwargs["arch"],), {"nvidia-cuda-toolkit": "12.4"},
                                True)

    monkeypatch.setattr(assemble, "assemble", assembled)
    assert main(["toolchain", "cuda", str(home), "--arch", "80"]) == 0
    lines = [line.strip() for line in capsys.readouterr().out.splitlines()]
    exports = next(line for line in lines if line.startswith("export CUDA_HOME="))
    assert exports == (f"export CUDA_HOME={home} PATH={home}/bin:$PATH NVTE_CUDA_ARCHS=80 "
                       f"MAX_JOBS={len(os.sched_getaffinity(0))}")
    assert "uv run nemo-rl doctor --extra mcore --preflight && uv sync --locked --extra mcore   # the build starts " \
        "only on go" in lines
    assert lines[-1].startswith("uv run --no-sync nemo-rl toolchain watch")  # a plain `uv run` waits for the build


# Each would put its own line into the private apt sources (`Trusted: yes` turns signature checks off) or a new
# line into the `export CUDA_HOME=...` line printed to paste.
HOSTILE = [
    (["--suite", "trixie\nTrusted: yes"], "argument --suite: 'trixie\\nTrusted: yes' is not a suite apt reads as one: "
     "a newline or another control character would start a new line in apt's sources"),
    (["--suite", "trixie Trusted: yes"], "argument --suite: 'trixie Trusted: yes' is not a suite apt reads as one: "
     "a suite is one word of letters, digits and . + ~ _ -"),
    (["--suite", "trixie\x1b"], "is not a suite apt reads as one: a newline or another control character"),
    (["--components", "main\nTrusted: yes"], "argument --components: --components 'main\\nTrusted: yes' is no list "
     "of words: a newline or another control character would start a new line in apt's sources"),
    (["--components", "main Trusted:yes"], "argument --components: 'Trusted:yes' is not a component apt reads as "
     "one"),
    (["--components", " "], "argument --components: --components ' ' is no list of words: it is empty"),
    (["--suite", "trixie/"], "argument --suite: 'trixie/' is not a suite apt reads as one"),
    (["--components", "main/../../x"], "argument --components: 'main/../../x' is not a component apt reads as one"),
    (["--debs", "/tmp/debs\nx"], "argument --debs: the path '/tmp/debs\\nx' contains a newline or another control "
     "character"),
]


@pytest.mark.parametrize("args, said", HOSTILE, ids=["a suite with a newline", "a suite with a space",
                                                     "a suite with an escape", "components with a newline",
                                                     "a component with a colon", "no component",
                                                     "an absolute suite", "a component with a path",
                                                     "debs with a newline"])
def test_a_value_that_would_break_out_of_apt_s_sources_is_refused_by_the_parser(tmp_path, monkeypatch, capsys, args,
                                                                               said):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # were the check gone, no apt: never a 1 GB download
    with pytest.raises(SystemExit) as exit_info:
        main(["toolchain", "cuda", str(tmp_path / "cuda"), *args])
    assert exit_info.value.code == 2 and said in capsys.readouterr().err
    assert not (tmp_path / "cuda").exists()


def test_a_directory_that_would_break_out_of_a_line_is_refused_by_the_parser(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(SystemExit) as exit_info:
        main(["toolchain", "cuda", str(tmp_path / "cuda\nrm -rf ~")])
    assert exit_info.value.code == 2
    assert "argument DIR: the path" in capsys.readouterr().err and not list(tmp_path.glob("*cuda*"))


def test_suites_and_components_apt_names_pass_the_parser(tmp_path, monkeypatch):
    from nemo_rl.toolchain import assemble

    seen = {}
    monkeypatch.setattr(assemble, "assemble", lambda home, **kw: seen.update(kw) or (_ for _ in ()).throw(
        KeyboardInterrupt()))
    main(["toolchain", "cuda", str(tmp_path / "cuda"), "--suite", "trixie-backports", "--components",
          "main non-free-firmware  contrib"])
    assert seen["suite"] == "trixie-backports" and seen["components"] == ("main", "non-free-firmware", "contrib")
