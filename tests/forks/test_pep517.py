"""The PEP 517 front end (forks/pep517.py) run on in-tree backends: get_requires' additions installed, the hooks
in PEP 517's order, a [build-system] of the wrong shape refused before anything runs, odd answers and hangs
reported as errors."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from nemo_rl.errors import NemoRLError
from nemo_rl.forks import fork_metadata, pep517

BACKEND = '''
import os

def get_requires_for_build_wheel(config_settings=None):
    return ["iniconfig==2.0.0"]

def prepare_metadata_for_build_wheel(directory, config_settings=None):
    import iniconfig  # only there when the front end installed what get_requires_for_build_wheel asked for
    os.makedirs(os.path.join(directory, "fixture-0.1.dist-info"))
    with open(os.path.join(directory, "fixture-0.1.dist-info", "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\\nName: fixture\\nVersion: 0.1\\nRequires-Dist: iniconfig\\n")
    return "fixture-0.1.dist-info"
'''


@pytest.mark.slow  # installs a requirement from PyPI into uv's cache
def test_the_front_end_installs_what_get_requires_for_build_wheel_asks_for(tmp_path):
    source, out = tmp_path / "src", tmp_path / "out"
    source.mkdir()
    out.mkdir()
    (source / "pyproject.toml").write_text(textwrap.dedent('''\
        [build-system]
        requires = []
        build-backend = "backend"
        backend-path = ["."]
        '''))
    (source / "backend.py").write_text(BACKEND)
    resolved: set[tuple[str, ...]] = set()
    name = pep517.call_backend(source, out, "0" * 40, False, resolved)
    assert (out / name / "METADATA").read_text().startswith("Metadata-Version: 2.1\nName: fixture\n")
    assert resolved == {(), ("iniconfig==2.0.0",)}  # each set resolved once, online


def test_a_backend_that_fails_is_a_clear_error(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[build-system]\nrequires = []\nbuild-backend = "nowhere"\n')
    with pytest.raises(NemoRLError, match="could not produce metadata at 000000000000"):
        pep517.call_backend(tmp_path, tmp_path, "0" * 40, False, set())


@pytest.mark.parametrize("table", [
    'requires = ["--index-url=https://elsewhere.invalid"]', 'requires = "setuptools"', "requires = [1]",
    'requires = []\nbackend-path = "."', 'requires = []\nbuild-backend = ["a"]',
])
def test_a_build_system_of_the_wrong_shape_is_refused_before_anything_runs(tmp_path, table):
    (tmp_path / "pyproject.toml").write_text(f"[build-system]\n{table}\n")
    with pytest.raises(NemoRLError, match="at 000000000000") as caught:
        pep517.call_backend(tmp_path, tmp_path, "0" * 40, False, set())
    assert "fix the fork" in caught.value.remedy


def test_the_defaults_are_pep_517s_for_a_setup_py_project(tmp_path):
    assert pep517._build_system(tmp_path, "0" * 40) == (
        ["setuptools>=40.8.0"], "setuptools.build_meta:__legacy__", None)


def test_a_backend_path_outside_the_tree_is_refused(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[build-system]\nrequires = []\nbuild-backend = "b"\n'
                                             'backend-path = ["../elsewhere"]\n')
    with pytest.raises(NemoRLError, match="could not produce metadata at 000000000000"):
        pep517.call_backend(tmp_path, tmp_path, "0" * 40, False, set())


def test_build_requirements_that_are_direct_references_are_refused():
    """`pkg @ <a file URL>` in a fork's [build-system] would build (and run) code outside the fork."""
    with pytest.raises(NemoRLError, match="direct references are not taken"):
        pep517._checked(["setuptools", f"pkg @ {Path('/').as_uri()}elsewhere"], "a" * 40)


def test_the_users_uv_configuration_is_read_and_the_forks_is_not(tmp_path, monkeypatch):
    """The hooks run with the fork's checkout as the working directory: its uv.toml must not choose where build
    requirements come from, while the user's own uv.toml (an index mirror) still does."""
    for name in ("UV_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX", "UV_EXTRA_INDEX_URL", "UV_CONFIG_FILE",
                 "UV_NO_CONFIG", "UV_OFFLINE", "UV_FIND_LINKS"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "config" / "uv").mkdir(parents=True)
    (tmp_path / "config" / "uv" / "uv.toml").write_text('index-url = "http://user-mirror.invalid/simple"\n')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("UV_HTTP_RETRIES", "0")
    source = tmp_path / "src"
    source.mkdir()
    (source / "pyproject.toml").write_text('[build-system]\nrequires = ["nemo-rl-fixture-absent==1.0"]\n'
                                           'build-backend = "backend"\nbackend-path = ["."]\n')
    (source / "uv.toml").write_text('index-url = "http://fork-side.invalid/simple"\n')
    with pytest.raises(NemoRLError, match="could not produce metadata at 000000000000") as caught:
        pep517.call_backend(source, tmp_path, "0" * 40, False, set())
    assert "user-mirror.invalid" in caught.value.remedy
    assert "fork-side.invalid" not in caught.value.remedy


def in_tree_backend(source: Path, code: str) -> Path:
    """A fork checkout whose build backend is `code` (backend.py, in the tree, no build requirements)."""
    source.mkdir(parents=True, exist_ok=True)
    (source / "pyproject.toml").write_text('[build-system]\nrequires = []\nbuild-backend = "backend"\n'
                                           'backend-path = ["."]\n')
    (source / "backend.py").write_text(textwrap.dedent(code))
    return source


WRITES_METADATA = '''
    import os, sys

    def _seen(hook):
        with open(os.path.join(os.path.dirname(__file__), "pids"), "a") as f:
            f.write(f"{hook} {os.getpid()}\\n")

    def get_requires_for_build_wheel(config_settings=None):
        _seen("get_requires")
        return []

    def prepare_metadata_for_build_wheel(directory, config_settings=None):
        _seen("prepare_metadata")
        os.makedirs(os.path.join(directory, "fixture-0.1.dist-info"))
        with open(os.path.join(directory, "fixture-0.1.dist-info", "METADATA"), "w") as f:
            f.write("Metadata-Version: 2.1\\nName: fixture\\nVersion: 0.1\\n")
        return "fixture-0.1.dist-info"

    def build_wheel(directory, config_settings=None, metadata_directory=None):
        import zipfile
        _seen("build_wheel")
        with zipfile.ZipFile(os.path.join(directory, "fixture-0.1-py3-none-any.whl"), "w") as wheel:
            wheel.writestr("fixture/__init__.py", "")
            wheel.writestr("fixture-0.1.dist-info/METADATA", "Metadata-Version: 2.1\\nName: fixture\\nVersion: 0.1\\n")
        return "fixture-0.1-py3-none-any.whl"
'''


def test_metadata_and_a_wheel_come_from_the_backends_own_hooks_after_get_requires(tmp_path):
    """As a PEP 517 front end runs them: get_requires_for_build_wheel first, then prepare_metadata_for_build_wheel
    (the metadata) or build_wheel (a file list), each answer read from what the hook wrote."""
    source, out = in_tree_backend(tmp_path / "src", WRITES_METADATA), tmp_path / "out"
    out.mkdir()
    name = pep517.call_backend(source, out, "0" * 40, False, set())
    assert (out / name / "METADATA").read_text().startswith("Metadata-Version: 2.1\nName: fixture\n")
    wheel_out = tmp_path / "wheel"
    wheel_out.mkdir()
    name = pep517.call_backend(source, wheel_out, "0" * 40, True, set())
    assert fork_metadata._read_wheel(wheel_out / name, []).files == fork_metadata.Files(("fixture/__init__.py",))
    seen = [line.split()[0] for line in (source / "pids").read_text().splitlines()]
    assert seen == ["get_requires", "prepare_metadata", "get_requires", "build_wheel"]


@pytest.mark.parametrize("returned, written", [
    ("42", None), ('"../elsewhere"', None), ('{"a": 1}', None), ('"never-written.dist-info"', None),
    ('"fixture-0.1.dist-info"', "[1]"), ('"fixture-0.1.dist-info"', '"' + "x" * (2 << 20) + '"'),
])
def test_a_backend_answering_odd_values_is_a_clear_error(tmp_path, returned, written):
    """A hostile or broken backend: a hook's return value that names nothing it wrote, or an output.json (which
    the backend's own process writes) that is not an object or is huge, is an error naming the commit (exit 1),
    never a crash (exit 3)."""
    overwrite = f'''
    import atexit
    def _overwrite():  # after the hook script wrote its answer
        with open(os.path.join(sys.argv[2], "output.json"), "w") as f:
            f.write({written!r})
    atexit.register(_overwrite)
''' if written else ""
    code = WRITES_METADATA.replace('        return "fixture-0.1.dist-info"', f"        return {returned}")
    source, out = in_tree_backend(tmp_path / "src", code + overwrite), tmp_path / "out"
    out.mkdir()
    with pytest.raises(NemoRLError, match="could not produce metadata at 000000000000") as caught:
        pep517.call_backend(source, out, "0" * 40, False, set())
    assert caught.value.remedy.startswith("read its output:\n")


def test_a_backend_that_never_returns_is_ended_and_reported(tmp_path, monkeypatch):
    """L2: the hooks run under a time limit; past it the backend's whole process group is ended."""
    monkeypatch.setattr(pep517, "METADATA_TIMEOUT_S", 3.0)
    code = WRITES_METADATA.replace('        _seen("prepare_metadata")', '        import time; time.sleep(20)')
    source, out = in_tree_backend(tmp_path / "src", code), tmp_path / "out"
    out.mkdir()
    with pytest.raises(NemoRLError, match="could not produce metadata") as caught:
        pep517.call_backend(source, out, "0" * 40, False, set())
    assert "did not finish within 3 s" in caught.value.remedy


def test_a_hook_answer_swapped_for_a_symlink_or_a_fifo_is_refused(tmp_path):
    """A backend's process (or one it left behind) replaces output.json after the hook wrote it: a symlink (to a
    file of its choosing, to /dev/zero) is never followed, a FIFO never waited on."""
    target = tmp_path / "elsewhere.json"
    target.write_text('{"return_val": []}')  # an answer that would be taken
    swap = f'''
    import atexit
    _asked = get_requires_for_build_wheel

    def get_requires_for_build_wheel(config_settings=None):
        out = os.path.join(sys.argv[2], "output.json")  # get_requires' own answer, once the process ends

        def _swap():
            os.unlink(out)
            os.symlink({str(target)!r}, out)
        atexit.register(_swap)
        return _asked(config_settings)
'''
    source, out = in_tree_backend(tmp_path / "src", WRITES_METADATA + swap), tmp_path / "out"
    out.mkdir()
    with pytest.raises(NemoRLError, match="could not produce metadata") as caught:
        pep517.call_backend(source, out, "0" * 40, False, set())
    assert "unreadable" in caught.value.remedy
    fifo = WRITES_METADATA + swap.replace(f"os.symlink({str(target)!r}, out)", "os.mkfifo(out)")
    source, out = in_tree_backend(tmp_path / "fifo", fifo), tmp_path / "fifo-out"
    out.mkdir()
    with pytest.raises(NemoRLError, match="could not produce metadata"):
        pep517.call_backend(source, out, "0" * 40, False, set())


def test_what_a_backend_prints_is_kept_only_in_part(tmp_path):
    """A backend printing hundreds of MB costs no memory: the error message keeps the end of each output."""
    loud = '''        _seen("prepare_metadata")
        for _ in range(40):
            sys.stdout.write("o" * (1 << 17) + "\\n")
            sys.stderr.write("e" * (1 << 17) + "\\n")
        sys.stderr.write("the real error\\n")
        raise SystemExit(1)'''
    code = WRITES_METADATA.replace('        _seen("prepare_metadata")', loud)
    source, out = in_tree_backend(tmp_path / "src", code), tmp_path / "out"
    out.mkdir()
    with pytest.raises(NemoRLError, match="could not produce metadata") as caught:
        pep517.call_backend(source, out, "0" * 40, False, set())
    assert "the real error" in caught.value.remedy and "bytes before this left out" in caught.value.remedy
    assert len(caught.value.remedy) < 4 * pep517.OUTPUT_KEPT


def test_thousands_of_build_requirements_are_refused_not_a_crash(tmp_path, monkeypatch):
    monkeypatch.setenv("UV_OFFLINE", "1")  # were they passed on, uv would fail at once
    listed = ", ".join(f'"pkg{n}"' for n in range(5000))
    (tmp_path / "pyproject.toml").write_text(f"[build-system]\nrequires = [{listed}]\n")
    with pytest.raises(NemoRLError, match="5000 requirements"):
        pep517.call_backend(tmp_path, tmp_path, "0" * 40, False, set())
    with pytest.raises(NemoRLError, match="longer than"):
        pep517._checked(["a" + "1" * 2000], "0" * 40)


def test_a_forks_pyproject_that_is_a_link_is_refused(tmp_path):
    from nemo_rl.forks import pep517

    (tmp_path / "elsewhere.toml").write_text('[build-system]\nbuild-backend = "setuptools.build_meta"\n')
    (tmp_path / "pyproject.toml").symlink_to(tmp_path / "elsewhere.toml")
    with pytest.raises(NemoRLError, match="not a plain file"):  # a link to /dev/zero would be read forever
        pep517._build_system(tmp_path, "0" * 40)
