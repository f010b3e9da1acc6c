"""Probes and the missing-extra guard, with the extra absent and with planted broken packages; an unknown
component is a NemoRLError."""

import json
import subprocess
import sys
import textwrap

import pytest

from nemo_rl import extras, settings, uv
from nemo_rl.doctor import smoke
from nemo_rl.errors import MissingExtraError, NemoRLError
from nemo_rl.project import lockfile
from nemo_rl.project.model import Project

PROBE_SCRIPT = """
import json
from nemo_rl.extras import probe
p = probe({key!r})
print(json.dumps({{"installed": p.installed, "present": p.present, "reason": p.reason, "commit": p.commit}}))
"""


def plant(root, distribution, module, init_body, direct_url=None):
    """A fake installed distribution: its module and a dist-info, as an installer would leave them."""
    package = root.joinpath(*module.split("."))
    package.mkdir(parents=True)
    for parent in list(package.relative_to(root).parents)[:-1]:
        (root / parent / "__init__.py").touch()
    (package / "__init__.py").write_text(textwrap.dedent(init_body))
    info = root / f"{distribution.replace('-', '_')}-9.9.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 9.9\n")
    if direct_url:
        (info / "direct_url.json").write_text(json.dumps(direct_url))


def probe_in_subprocess(key, path):
    env = {"PYTHONPATH": str(path), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", PROBE_SCRIPT.format(key=key)], env=env, capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out)


def test_absent_extra_is_reported_not_raised():
    if extras.probe("megatron").present:
        pytest.skip("megatron-core is installed in this environment")
    probe = extras.probe("megatron")
    assert probe.installed is False and probe.reason == "megatron-core is not installed"
    assert extras.is_megatron_installed() is False
    if not extras.probe("transformer_engine").present:
        assert extras.is_te_installed() is False
        assert extras.probe("transformer_engine").reason == "transformer-engine is not installed"


def test_megatron_raising_calledprocesserror_is_broken_with_reason(tmp_path):
    plant(tmp_path, "megatron-core", "megatron.core", """
        import subprocess
        raise subprocess.CalledProcessError(1, ["nvidia-smi"])  # what TE 2.3 does without CUDA libraries
    """)
    result = probe_in_subprocess("megatron", tmp_path)
    assert result["installed"] is False and result["present"] is True
    assert result["reason"].startswith("import megatron.core failed: CalledProcessError:")


def test_missing_dependency_is_broken_not_absent(tmp_path):
    plant(tmp_path, "nemo-toolkit", "nemo", "import lightning_not_installed_anywhere\n")
    result = probe_in_subprocess("nemo", tmp_path)
    assert result["present"] is True and "ModuleNotFoundError" in result["reason"]
    assert "lightning_not_installed_anywhere" in result["reason"]


def test_working_fork_reports_its_commit(tmp_path):
    sha = "a768e50588f6e833741dcd25cfda64a8798f4d8e"
    plant(tmp_path, "megatron-core", "megatron.core", "VERSION = 1\n",
          {"url": "https://github.com/terrykong/Megatron-LM.git", "vcs_info": {"vcs": "git", "commit_id": sha}})
    result = probe_in_subprocess("megatron", tmp_path)
    assert result == {"installed": True, "present": True, "reason": None, "commit": sha}


def test_upstream_compat_modules_expose_installed(tmp_path):
    code = ("import is_megatron_installed, is_nemo_installed; "
            "print(is_megatron_installed.INSTALLED, is_nemo_installed.INSTALLED)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == [str(extras.is_megatron_installed()), str(extras.is_nemo_installed())]


def test_guard_message_names_distribution_reason_and_remedy(monkeypatch):
    broken = extras.Probe(extras.component("megatron"), False, True, "0.13.0rc0", None,
                          "import megatron.core failed: CalledProcessError: boom")
    monkeypatch.setattr(extras, "probe", lambda key: broken)
    with pytest.raises(MissingExtraError) as info:
        extras.require("megatron", purpose="the Megatron GPT backend")
    message = str(info.value)
    assert message.startswith("the Megatron GPT backend needs the mcore extra, but megatron-core is not usable")
    assert "CalledProcessError: boom" in message
    assert uv.sync_command() in message
    assert info.value.missing == ["megatron-core"]
    assert isinstance(info.value, NemoRLError) and isinstance(info.value, ImportError)


def test_the_installed_commit_is_read_from_pep_610(tmp_path, monkeypatch):
    sha = "95b6daf96ada0fbdc1aaba81e2a778a4fea2da82"
    plant(tmp_path, "nemo-toolkit", "nemo", "",
          {"url": "https://github.com/NVIDIA/NeMo.git", "vcs_info": {"vcs": "git", "commit_id": sha}})
    plant(tmp_path / "wheel", "megatron-core", "megatron.core", "", {"url": "https://wheels.example.invalid/megatron_core.whl",
                                                                      "archive_info": {}})
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(tmp_path / "wheel"))
    assert extras.find_installed("nemo-toolkit").commit == sha
    assert extras.find_installed("megatron-core").commit is None  # installed from a wheel: no commit recorded
    assert extras.find_installed("no-such-distribution") is None


@pytest.mark.parametrize("text", ['{"vcs_info": [1]}', "[" * 100_000])
def test_a_direct_url_record_of_any_shape_is_no_commit(text):
    from nemo_rl import extras

    assert extras.commit_from_direct_url(text) is None
def test_unknown_component_and_cpu_forward_are_nemo_rl_errors():
    from nemo_rl import extras
    from nemo_rl.models import ModelConfig, build_model
    from nemo_rl.models.megatron_gpt import gpt_forward_backward

    with pytest.raises(NemoRLError, match="unknown mcore component"):
        extras.require("megatrn", purpose="x")
    config = ModelConfig(num_layers=1)
    with pytest.raises(NemoRLError, match="needs a CUDA device"):
        gpt_forward_backward(build_model(config, "torch"), config)
def test_every_smoke_component_has_a_remedy_from_the_one_table():
    from nemo_rl import extras

    for check in smoke.CHECKS:
        assert extras.remedy_for(check.component)
    with pytest.raises(NemoRLError, match="(?s)unknown mcore component 'megatrn'.*megatron, nemo, transformer_engine"):
        extras.require("megatrn", purpose="x")


def fork(distribution: str, **table) -> lockfile.Fork:
    return lockfile.Fork(distribution, f"https://forks.nemo-rl.invalid/{distribution}.git", "a" * 40, None, None,
                         "main", None, **table)


def test_a_forks_component_is_what_its_table_says():
    bridge = extras.of_fork(fork("megatron-bridge", module="megatron.bridge", entry_points=("megatron.bridge.x",),
                                 component="bridge", remedy="on a GPU node"))
    assert bridge == extras.Component("bridge", "megatron-bridge", "megatron.bridge",
                                      f"{extras.SYNC_REMEDY} on a GPU node", ("megatron.bridge.x",))
    plain = extras.of_fork(fork("megatron-bridge"))
    assert (plain.key, plain.module, plain.remedy) == ("megatron-bridge", "megatron_bridge", extras.SYNC_REMEDY)
    assert list(extras.components([fork("b"), fork("a")])) == ["b", "a", "transformer_engine"]


def test_nemo_rl_requires_what_its_own_fork_tables_declare():
    for declared in Project.read(settings.CHECKOUT_DIR).forks:
        comp = extras.of_fork(declared)
        assert extras.component(comp.key) == comp
        assert comp.module == declared.module  # each real table names its module: no default stands in


@pytest.mark.parametrize("taken", ["torch", "transformer_engine", "megatron"])
def test_a_component_name_taken_twice_is_refused_with_the_fix(taken):
    forks = [fork("megatron-core", component="megatron"), fork("megatron-bridge", component=taken)]
    with pytest.raises(NemoRLError, match=f"megatron-bridge\\] component '{taken}' names another component") as error:
        extras.components(forks)
    assert "set component in [tool.nemo-rl.forks.megatron-bridge]" in str(error.value.remedy)
    forks[1] = fork("megatron-bridge", component="bridge")  # the fix, followed
    assert extras.components(forks)["bridge"].distribution == "megatron-bridge"


def test_a_forks_remedy_is_shown_escaped():
    remedy = extras.of_fork(fork("megatron-bridge", remedy="then \x1b[2J\x1b]0;owned\x07")).remedy
    assert "\x1b" not in remedy and "\x07" not in remedy and remedy.endswith("then \\x1b[2J\\x1b]0;owned\\x07")


def test_a_probe_without_nemo_rls_own_fork_tables_says_why_and_never_raises(tmp_path, monkeypatch):
    monkeypatch.setattr(extras.settings, "CHECKOUT_DIR", tmp_path)  # an installed nemo_rl with no pyproject.toml
    extras.own.cache_clear()
    try:
        probe = extras.probe("megatron")
    finally:
        extras.own.cache_clear()
    assert not probe.installed and not probe.present and "pyproject.toml" in (probe.reason or "")


def test_a_distribution_whose_files_are_not_utf8_reads_as_one_without_them(tmp_path):
    for name, metadata in (("good", b"Name: good\nVersion: 1.0\n"), ("junk", b"Name: junk\nSummary: \xff\n")):
        info = tmp_path / f"{name}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_bytes(metadata)
        (info / "direct_url.json").write_bytes(b'{"url": "\xff"}')
    found = extras.installed_on([str(tmp_path)])
    assert found == {"good": extras.Installed("1.0", None), "junk": extras.Installed(None, None)}
    assert extras.find_installed("junk", [str(tmp_path)]) == found["junk"]


def test_a_leftover_directory_of_a_name_never_hides_the_installed_distribution(tmp_path):
    leftover, site = tmp_path / "first", tmp_path / "second"
    (leftover / "six-0.0.1.dist-info").mkdir(parents=True)
    (leftover / "six-0.0.1.dist-info" / "RECORD").write_text("")
    (site / "six-1.17.0.dist-info").mkdir(parents=True)
    (site / "six-1.17.0.dist-info" / "METADATA").write_text("Name: six\nVersion: 1.17.0\n")
    path = [str(leftover), str(site)]
    assert extras.installed_on(path)["six"].version == extras.find_installed("six", path).version == "1.17.0"


@pytest.mark.parametrize("pkg_info", [b"Version: 1.0\n", b"Version: 1.0\nSummary: caf\xe9\n"],
                         ids=["no-name", "not-utf8"])
def test_an_egg_without_a_readable_name_is_known_by_the_egg_s_name(tmp_path, pkg_info):
    egg = tmp_path / "foo-1.0-py3.12.egg"
    (egg / "EGG-INFO").mkdir(parents=True)
    (egg / "EGG-INFO" / "PKG-INFO").write_bytes(pkg_info)
    found = extras.installed_on([str(egg)])
    assert list(found) == ["foo"] and found["foo"] == extras.find_installed("foo", [str(egg)])


@pytest.mark.parametrize("metadata", ["not-utf8", "empty", "a-directory", "a-dangling-link"])
def test_the_first_distribution_with_metadata_wins_even_unreadable(tmp_path, metadata):
    first, second = tmp_path / "first", tmp_path / "second"
    (first / "six-1.17.0.dist-info").mkdir(parents=True)
    path = first / "six-1.17.0.dist-info" / "METADATA"
    if metadata == "a-directory":
        path.mkdir()
    elif metadata == "a-dangling-link":
        path.symlink_to(tmp_path / "nowhere")
    else:
        path.write_bytes(b"Name: six\nSummary: caf\xe9\n" if metadata == "not-utf8" else b"")
    (second / "six-1.0.0.dist-info").mkdir(parents=True)
    (second / "six-1.0.0.dist-info" / "METADATA").write_text("Name: six\nVersion: 1.0.0\n")
    path = [str(first), str(second)]  # Python imports the first: its version is unknown, never the stale one's
    assert extras.installed_on(path)["six"] == extras.find_installed("six", path) == extras.Installed(None, None)
