import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nemo_rl import extras
from nemo_rl.cli import main
from nemo_rl.project.model import Project

ROOT = Path(__file__).resolve().parents[2]
COMPONENT_KEYS = {"name", "distribution", "module", "state", "installed", "version", "installed_commit",
                  "locked_commit", "locked_version", "reason", "remedy"}


def test_doctor_json_on_the_default_environment(capsys):
    assert main(["doctor", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == 3 and data["healthy"] is True and data["problems"] == []
    assert set(data) >= {"python", "uv", "torch", "project", "requested_extra", "components", "preflight", "smoke"}
    assert data["preflight"] == [] and data["preflight_ok"] is None  # no pre-flight was asked for
    assert data["python"]["requires_python"] == ">=3.12,<3.13" and data["python"]["satisfied"] is True
    assert data["torch"]["installed"] is True and data["torch"]["version"].startswith("2.7.0")
    by_name = {c["distribution"]: c for c in data["components"]}
    assert set(by_name) == {"megatron-core", "nemo-toolkit", "transformer-engine"}
    for component in by_name.values():
        assert set(component) == COMPONENT_KEYS
    assert by_name["nemo-toolkit"]["module"] == "nemo.tron.init"  # what nemo-rl uses, not bare `nemo`
    assert by_name["megatron-core"]["locked_commit"] == "a768e50588f6e833741dcd25cfda64a8798f4d8e"
    assert by_name["nemo-toolkit"]["locked_commit"] == "95b6daf96ada0fbdc1aaba81e2a778a4fea2da82"


def test_doctor_wrong_project_is_an_error(tmp_path, capsys):
    assert main(["doctor", "--project", str(tmp_path)]) == 1
    assert "no pyproject.toml with a [tool.nemo-rl.forks] table" in capsys.readouterr().err


def test_doctor_text_and_requested_extra(capsys):
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "result: healthy (the default environment)" in out
    if "megatron-core        not installed" in out:
        assert "fix: run `uv run nemo-rl doctor --extra mcore --preflight && uv sync --locked --extra mcore`" in out
        assert main(["doctor", "--extra", "mcore"]) == 1
        out = capsys.readouterr().out
        assert "result: NOT healthy (the mcore environment)" in out
        # the pre-flight answers before the long build, each item with pass/FAIL and a fix on failure
        assert "pre-flight for the mcore build" in out
        assert "nvcc" in out and "cudnn headers" in out and "python" in out


def copy_project(tmp_path) -> Path:
    project = tmp_path / "checkout"
    project.mkdir()
    for name in ("pyproject.toml", "uv.lock", ".python-version"):
        shutil.copy(ROOT / name, project / name)
    return project


@pytest.mark.parametrize("name, damage, expected", [
    ("pyproject.toml", b"[project\n", "cannot parse"),
    ("pyproject.toml", b"\xff\xfe[project]\n", "not valid UTF-8"),
    ("uv.lock", b"version = 1\n[[package]\nname = 'x'\n", "cannot parse"),
    ("uv.lock", b"version = 1\n\xe9\n", "not valid UTF-8"),
    ("uv.lock", None, "uv.lock is missing"),
])
def test_doctor_is_unhealthy_when_project_files_cannot_be_read(tmp_path, capsys, monkeypatch, name, damage, expected):
    project = copy_project(tmp_path)
    if damage is None:
        (project / name).unlink()
    elif name == "uv.lock":
        (project / name).write_bytes(damage)
    else:
        (project / name).write_bytes(damage + (ROOT / name).read_bytes())
    monkeypatch.chdir(project)
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "result: NOT healthy" in out and expected in out and "Traceback" not in out


def test_doctor_is_unhealthy_without_uv(capsys, monkeypatch):
    from nemo_rl import uv
    from nemo_rl.errors import NemoRLError

    def missing():
        raise NemoRLError("cannot find the uv executable", uv.INSTALL_UV)

    monkeypatch.setattr(uv, "find_uv_bin", missing)
    assert main(["doctor"]) == 1
    assert "uv is missing" in capsys.readouterr().out


def test_doctor_is_unhealthy_when_python_misses_the_requirement(tmp_path, capsys, monkeypatch):
    project = copy_project(tmp_path)
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('requires-python = ">=3.12,<3.13"',
                                                       'requires-python = ">=3.99"'))
    monkeypatch.chdir(project)
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "does not satisfy the project's requires-python >=3.99" in out and "--python 3.12" in out


def test_component_state_agrees_with_deps_status():
    from nemo_rl import extras
    from nemo_rl.doctor.report import component_state

    locked = "a768e50588f6e833741dcd25cfda64a8798f4d8e"
    megatron = extras.component("megatron")

    def probe(commit, installed=True, present=True):
        return extras.Probe(megatron, installed, present, "0.13.0rc0", commit, None if installed else "boom")

    assert component_state(probe(locked), locked) == ("ok", None)
    state, remedy = component_state(probe("0" * 40), locked)
    assert state == "env stale" and "another commit than uv.lock" in remedy
    state, remedy = component_state(probe(locked[:7]), locked)  # commits compare in full
    assert state == "env stale"
    state, remedy = component_state(probe(None), locked)  # a local wheel: no PEP 610 commit
    assert state == "env stale" and "without a git commit record" in remedy
    assert component_state(probe(None), None) == ("ok", None)  # a registry package has no locked commit
    assert component_state(probe(None, installed=False), locked)[0] == "broken"
    assert component_state(probe(None, installed=False, present=False), locked)[0] == "not installed"
    # the locked commit, but the fork's metadata differs from uv.lock's (installed_fork's problems)
    state, remedy = component_state(probe(locked), locked, ["the version differs: run this"])
    assert (state, remedy) == ("installed differs", "the version differs: run this")
    assert component_state(probe(locked), locked, []) == ("ok", None)


def test_doctor_compares_the_installed_forks_metadata_with_the_lock(tmp_path, monkeypatch):
    """The installed megatron-core at the locked commit, but its own version is not the one uv.lock says."""
    from fakes import COMMIT, fake_project
    from fakes import fake_installed_fork as fake_env

    from nemo_rl import extras
    from nemo_rl.doctor import report

    env = fake_env(tmp_path, "0.2.0", ["six>=1.16"])
    project = fake_project(tmp_path, version="0.1.0")
    real = extras.probe_component

    def probe(comp):
        if comp.distribution == "megatron-core":  # importing it is not what is tested: its metadata is
            return extras.Probe(comp, True, True, "0.2.0", COMMIT, None)
        return real(comp)

    monkeypatch.setattr(extras, "probe_component", probe)
    rows = {r.distribution: r for r in report.components(Project.read(project), extras.own(),
                                                         Project.read(project).packages, env)}
    row = rows["megatron-core"]
    assert row.state == "installed differs" and "megatron-core 0.2.0 is installed but uv.lock says 0.1.0" in row.remedy
    assert "nemo-rl deps patches megatron-core" in row.remedy


def test_doctor_outside_any_project_says_which_it_compared(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    main(["doctor"])
    out = capsys.readouterr().out
    assert f"no nemo-rl project at or above {tmp_path}" in out and "nemo-rl's own checkout" in out


def plant(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def doctor_in_subprocess(path, *args):
    env = {**os.environ, "PYTHONPATH": str(path)}
    proc = subprocess.run([sys.executable, "-m", "nemo_rl", "doctor", "--smoke", *args], env=env,
                          capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr


BROKEN_MEGATRON = {
    "megatron/__init__.py": "",
    "megatron/core/__init__.py": """
        import subprocess
        raise subprocess.CalledProcessError(1, ["ldconfig", "-p"])  # as TE 2.3 does without CUDA libraries
    """,
    "megatron_core-0.13.0rc0.dist-info/METADATA": "Metadata-Version: 2.1\nName: megatron-core\nVersion: 0.13.0rc0\n",
    "transformer_engine/__init__.py": "",
    "transformer_engine/pytorch/__init__.py": "raise OSError('libcudart.so.12: cannot open shared object file')\n",
    "transformer_engine-2.3.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: transformer-engine\nVersion: 2.3.0\n",
}


@pytest.mark.skipif(extras.probe("megatron").present, reason="a real megatron-core would shadow the planted one")
@pytest.mark.slow
def test_doctor_renders_planted_broken_extra_without_traceback(tmp_path):
    plant(tmp_path, BROKEN_MEGATRON)
    code, out = doctor_in_subprocess(tmp_path)
    assert code == 0  # the default environment was requested, and torch works
    assert "megatron-core        broken" in out
    assert "why: import megatron.core failed: CalledProcessError" in out
    assert "why: import transformer_engine.pytorch failed: OSError: libcudart.so.12" in out
    assert "fail    megatron: parallel state" in out and "MissingExtraError" in out
    assert "Traceback" not in out
    code, out = doctor_in_subprocess(tmp_path, "--extra", "mcore")
    assert code == 1 and "result: NOT healthy (the mcore environment)" in out
    assert "smoke check failed: megatron: parallel state" in out
    code, out = doctor_in_subprocess(tmp_path, "--extra", "mcore", "--verbose")
    assert "Traceback (most recent call last)" in out and "CalledProcessError" in out


def build_world(tmp_path, monkeypatch, *, nvcc_release: str | None = None, served: bool | str = "locked") -> Path:
    """A copy of this project whose pre-flight items can all pass: an nvcc of torch's CUDA release (or
    `nvcc_release`), cuDNN headers at CUDNN_PATH, and each fork URL rewritten by insteadOf to a local repository
    (one that does not exist unless `served`; that serves the locked commit when `served` is "locked")."""
    from gitfixtures import git

    from nemo_rl import toolchain

    torch_cuda = toolchain.torch_info().cuda_version
    if torch_cuda is None:
        pytest.skip("torch is a CPU build: no nvcc can match it")
    project = copy_project(tmp_path)
    cuda = tmp_path / "cuda"
    (cuda / "bin").mkdir(parents=True)
    nvcc = cuda / "bin" / "nvcc"
    # --version as nvcc says it; `-c SOURCE -o OBJECT` writes the object, as a host compiler nvcc accepts would
    nvcc.write_text("#!/bin/sh\n"
                    f'[ "$1" = --version ] && {{ echo "Cuda compilation tools, release {nvcc_release or torch_cuda}"; '
                    "exit 0; }\n"
                    # as nvcc 12.4: sm_100 is unknown, and -ccbin's compiler must run
                    'case "$*" in *sm_100*) echo "nvcc fatal   : Value \'sm_100\' is not defined" >&2; exit 1;; esac\n'
                    'while [ $# -gt 0 ]; do [ "$1" = -ccbin ] && { "$2" --version >/dev/null 2>&1 || exit 1; }\n'
                    '[ "$1" = -o ] && : > "$2"; shift; done\n')
    nvcc.chmod(0o755)
    cudnn = tmp_path / "cudnn"
    (cudnn / "include").mkdir(parents=True)
    (cudnn / "include" / "cudnn_version.h").write_text("#define CUDNN_MAJOR 9\n")
    forks = Project.read(project).forks
    for i, fork in enumerate(forks):
        mirror = tmp_path / "mirrors" / f"{fork.distribution}.git"
        if served:  # a mirror holding one commit, which the copy's pin and lock then name
            work = tmp_path / "work" / fork.distribution
            work.mkdir(parents=True)
            git(work, "init", "-q")
            git(work, "commit", "-q", "--allow-empty", "-m", "pin")
            mirror.mkdir(parents=True)
            git(mirror, "init", "-q", "--bare")
            git(work, "push", "-q", str(mirror), "HEAD:refs/heads/main")
            if served == "locked":
                for name in ("pyproject.toml", "uv.lock"):
                    text = (project / name).read_text()
                    (project / name).write_text(text.replace(fork.rev, git(work, "rev-parse", "HEAD")))
        monkeypatch.setenv(f"GIT_CONFIG_KEY_{i}", f"url.{mirror}.insteadOf")
        monkeypatch.setenv(f"GIT_CONFIG_VALUE_{i}", fork.url)
    monkeypatch.setenv("GIT_CONFIG_COUNT", str(len(forks)))
    for name in ("CUDA_PATH", "CPATH", "CUDNN_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CUDA_HOME", str(cuda))
    monkeypatch.setenv("CUDNN_PATH", str(cudnn))
    monkeypatch.setenv("NVTE_CUDA_ARCHS", "90")
    monkeypatch.setenv("UV_NO_GITHUB_FAST_PATH", "1")
    for name in ("CC", "CUDA_PATH"):
        monkeypatch.delenv(name, raising=False)
    return project


def test_a_preflight_that_passes_exits_0_though_the_extra_is_not_installed(tmp_path, monkeypatch, capsys):
    project = build_world(tmp_path, monkeypatch)
    assert main(["doctor", "--extra", "mcore", "--preflight", "--project", str(project)]) == 0
    out = capsys.readouterr().out
    assert "FAIL" not in out and "pre-flight: go: the mcore build can run here" in out
    assert main(["doctor", "--extra", "mcore", "--preflight", "--json", "--project", str(project)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["preflight_ok"] is True and [item["name"] for item in data["preflight"] if not item["ok"]] == []
    installed = all(c["installed"] for c in data["components"])
    assert data["healthy"] is installed  # the other verdict, carried beside it
    # without --preflight the exit code stays "is the extra installed and working"
    assert main(["doctor", "--extra", "mcore", "--project", str(project)]) == (0 if installed else 1)


def test_a_preflight_that_fails_exits_1_naming_each_failed_item(tmp_path, monkeypatch, capsys):
    project = build_world(tmp_path, monkeypatch, nvcc_release="13.0", served=False)
    assert main(["doctor", "--extra", "mcore", "--preflight", "--project", str(project)]) == 1
    out = capsys.readouterr().out
    verdict = out.strip().splitlines()[-1]
    assert verdict.startswith("pre-flight: NO-GO") and "fix nvcc, reach megatron-core, reach nemo-toolkit" in verdict
    assert "FAIL  nvcc" in out and "is CUDA 13.0" in out
    # git's own words and the URL git tried, not only an exit status
    mirror = tmp_path / "mirrors" / "megatron-core.git"
    assert f"cannot reach https://github.com/terrykong/Megatron-LM.git (git tried {mirror})" in out
    assert f"fatal: '{mirror}' does not appear to be a git repository" in out
    assert main(["doctor", "--extra", "mcore", "--preflight", "--json", "--project", str(project)]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["preflight_ok"] is False


def test_preflight_without_the_extra_is_a_usage_error(tmp_path, monkeypatch, capsys):
    project = build_world(tmp_path, monkeypatch)
    assert main(["doctor", "--preflight", "--project", str(project)]) == 2
    err = capsys.readouterr().err
    assert "--preflight checks the build of the mcore extra" in err and "add `--extra mcore`" in err
    assert main(["doctor", "--preflight", "--extra", "mcore", "--project", str(project)]) == 0  # the fix, followed


def test_doctor_names_the_process_holding_the_environments_uv_lock(tmp_path, monkeypatch, capsys):
    """As `uv sync` holds it through a whole build: every `uv run` in the checkout would wait, silently."""
    import fcntl

    env = tmp_path / "venv"
    env.mkdir()
    monkeypatch.setattr(sys, "prefix", str(env))
    main(["doctor"])
    assert "holds the lock of this environment" not in capsys.readouterr().out
    with open(env / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        main(["doctor"])
    out = capsys.readouterr().out
    assert f"note: process {os.getpid()} (" in out and f"holds the lock of this environment ({env / '.lock'})" in out
    assert "`uv run --no-sync <command>` runs without waiting" in out


def test_doctor_env_runs_doctor_with_that_environment_s_python(tmp_path, capsys):
    env = tmp_path / "worker-env"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").write_text('#!/bin/sh\n[ "$1 $2" = "-P -c" ] && exit 0\necho "$@"\nexit 3\n')
    (env / "bin" / "python").chmod(0o755)
    assert main(["doctor", "--env", str(env), "--extra", "mcore", "--json", "--project", str(ROOT)]) == 3
    assert capsys.readouterr().out == f"-P -m nemo_rl doctor --extra mcore --project {ROOT} --json\n"


def test_doctor_env_without_nemo_rl_is_refused_though_run_from_the_checkout(tmp_path, capsys, monkeypatch):
    env = tmp_path / "plain"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    monkeypatch.chdir(ROOT)  # where `python -m` would find the checkout's nemo_rl
    monkeypatch.delenv("PYTHONPATH", raising=False)
    assert main(["doctor", "--env", str(env), "--extra", "mcore", "--preflight", "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and f"error: {env} cannot run nemo-rl's doctor: ModuleNotFoundError: No module named " \
        "'nemo_rl'" in err
    assert "`uv run nemo-rl envs list`" in err


def test_doctor_env_without_a_python_is_refused_and_the_fix_works(tmp_path, capsys):
    assert main(["doctor", "--env", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"error: {tmp_path} is not an environment: it has no bin/python" in err
    assert "or .venv" in err
    assert main(["doctor", "--env", sys.prefix]) == 0  # the fix: the checkout's environment, which runs the tests
    assert f"env      {sys.prefix}\n" in capsys.readouterr().out


# (what differs from a world that says go, the FAIL it gives, the text naming why, how the fix is followed)
NO_GO = {
    # the mirrors answer, but hold another commit than the lock's
    "mirror-without-the-locked-commit": (lambda t, m: None, "reach megatron-core", "does not serve the locked commit",
                                         None),
    "cuda-home-without-nvcc": (lambda t, m: (m.setenv("CUDA_HOME", str(t / "nonexistent")),
                                             m.setenv("PATH", f"{t / 'cuda' / 'bin'}:{os.environ['PATH']}")), "nvcc",
                               "has no bin/nvcc",
                               lambda t, m: m.setenv("CUDA_HOME", str(t / "cuda"))),
    "cc-that-cannot-compile": (lambda t, m: m.setenv("CC", "/bin/false"), "host compiler",
                               "with CC=/bin/false", lambda t, m: m.setenv("CC", shutil.which("true"))),
    "relative-cudnn-path": (lambda t, m: m.setenv("CUDNN_PATH", "cudnn"), "absolute paths",
                            "CUDNN_PATH=cudnn: relative", lambda t, m: m.setenv("CUDNN_PATH", str(t / "cudnn"))),
    "mirror-without-no-github-fast-path": (lambda t, m: m.delenv("UV_NO_GITHUB_FAST_PATH"), "github fast path",
                                           "uv asks GitHub's API",
                                           lambda t, m: m.setenv("UV_NO_GITHUB_FAST_PATH", "1")),
    "an-arch-nvcc-does-not-know": (lambda t, m: m.setenv("NVTE_CUDA_ARCHS", "90;100"), "gpu architectures",
                                   "cannot compile for sm_100", lambda t, m: m.setenv("NVTE_CUDA_ARCHS", "90")),
}


@pytest.mark.parametrize("case", list(NO_GO))
def test_the_preflight_says_no_go_where_the_build_uv_runs_would_fail(case, tmp_path, monkeypatch, capsys):
    change, item, why, fix = NO_GO[case]
    unserved = case == "mirror-without-the-locked-commit"
    project = build_world(tmp_path, monkeypatch, served=True if unserved else "locked")
    change(tmp_path, monkeypatch)
    monkeypatch.chdir(tmp_path)  # a relative path is read from here, the build reads it elsewhere
    assert main(["doctor", "--extra", "mcore", "--preflight", "--project", str(project)]) == 1
    out = capsys.readouterr().out
    failed = [line for line in out.splitlines() if line.strip().startswith(f"FAIL  {item}")]
    assert len(failed) == 1 and why in failed[0], out
    if fix is not None:
        fix(tmp_path, monkeypatch)
        assert main(["doctor", "--extra", "mcore", "--preflight", "--project", str(project)]) == 0
