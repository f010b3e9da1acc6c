"""A bundle's CUDA record (nemo_rl/workers/cuda_archs.py): the pack's refusal of a declared arch without cubins; a
node's refusal of a bundle its GPU cannot run. The fixture extension is compiled by a real nvcc for sm_80 (skips
without a CUDA 12 nvcc)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from fakes import _python, fake_bundle, revision_http

from nemo_rl import extras
from nemo_rl.errors import NemoRLError
from nemo_rl.project import installed, lockfile
from nemo_rl.project.model import Project
from nemo_rl.workers import bundle_pack, bundles, cuda_archs, manifests, pack_seed

ROOT = Path(__file__).resolve().parents[2]
# a bundle's manifest where the arch check refuses first: never compared
UNREAD = manifests.Manifest(manifests.SCHEMA, manifests.Inputs("0" * 64, (), "3.12.1", "linux-x86_64", "uv 0.13.9"), {},
                            0, 0, "sha256:" + "0" * 64, 1.7e9, manifests.Proven((), ()))


def fake_env(tmp_path: Path, extension: Path, distribution: str = "transformer-engine-torch") -> Path:
    """An environment whose one distribution installed `extension` (as uv installs a wheel it built)."""
    env = tmp_path / "env"
    site = env / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    info = site / f"{distribution.replace('-', '_')}-2.3.0.dist-info"
    info.mkdir(parents=True)
    shutil.copy(extension, site / extension.name)
    # spelled as transformer-engine-torch's own wheel spells it
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution.replace('-', '_')}\nVersion: 2.3.0\n")
    (info / "RECORD").write_text(f"{extension.name},,\n{info.name}/METADATA,,\n{info.name}/RECORD,,\n")
    return env


def needs_sm90(bundle: Path) -> None:
    """A CUDA record in `bundle` whose one extension holds sm_90 cubins only."""
    (bundle / cuda_archs.SIDECAR).write_text(json.dumps({"toolchain": {}, "extensions": {
        "te.so": {"sm": [90], "ptx": []}}}))


SDIST_LOCK = {"package": [{"name": "transformer-engine-torch", "sdist": {"url": "x"}},
                          {"name": "torch", "wheels": [{"url": "y"}]}]}


def test_a_missing_arch_is_said_with_the_cubins_and_the_ptx_there():
    from nemo_rl.toolchain.archs import Archs

    assert cuda_archs.missing_archs("ext", Archs((80,), (80,)), (80, 90)) == \
        "ext holds cubins for sm 80 (PTX: 80), the build declares 80;90 (NVTE_CUDA_ARCHS): sm 90 missing"
    assert cuda_archs.missing_archs("ext", Archs((80, 90), ()), (80, 90)) is None


@pytest.mark.nvcc
def test_a_declared_arch_without_cubins_fails_the_pack(sm80_extension, tmp_path, monkeypatch):
    env = fake_env(tmp_path, sm80_extension)
    monkeypatch.setenv("NVTE_CUDA_ARCHS", "80;90")
    with pytest.raises(NemoRLError) as refused:
        cuda_archs.record(env, SDIST_LOCK, tmp_path)
    assert "holds cubins for sm 80" in refused.value.what and "sm 90 missing" in refused.value.what
    # never the advice that destroys the user's own 20-minute build: the pack builds afresh in its own cache
    assert "NVTE_CUDA_ARCHS" in refused.value.remedy and "no `uv cache clean`" in refused.value.remedy
    assert not (tmp_path / cuda_archs.SIDECAR).exists()
    # a wheel from the index is not ours to judge (torch's own libraries hold every arch NVIDIA chose): the record
    # says no extension, and a node checks nothing
    wheel_lock = {"package": [{"name": "transformer-engine-torch", "wheels": [{}]}]}
    assert cuda_archs.record(env, wheel_lock, tmp_path) == {"toolchain": {}, "extensions": {}}
    assert cuda_archs.node_record(tmp_path, gpu=90)[1] is None


@pytest.mark.nvcc
def test_a_node_whose_gpu_is_not_among_the_archs_refuses_naming_both(sm80_extension, tmp_path, monkeypatch):
    env = fake_env(tmp_path, sm80_extension)
    monkeypatch.setenv("NVTE_CUDA_ARCHS", "80")
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    data = cuda_archs.record(env, SDIST_LOCK, bundle)
    on_disk = json.loads((bundle / cuda_archs.SIDECAR).read_text())
    assert on_disk == data and on_disk["extensions"][sm80_extension.name]["sm"] == [80]
    tools = on_disk["toolchain"]
    assert tools["nvcc_at_pack"].startswith("12.") and tools["declared_archs_at_pack"] == [80]
    assert on_disk["toolchain"]["host_compiler_at_pack"]
    # what built it, read from the binary: nvcc compiled the host side with the machine's g++
    assert any(line.startswith("GCC:") for line in on_disk["extensions"][sm80_extension.name]["host_compilers"])
    with pytest.raises(NemoRLError) as refused:
        cuda_archs.node_record(bundle, gpu=90)
    assert "sm_90" in refused.value.what and "sm 80" in refused.value.what
    assert "NVTE_CUDA_ARCHS" in refused.value.remedy
    assert "fits" in cuda_archs.node_record(bundle, gpu=86)[1]
    monkeypatch.setattr(cuda_archs, "node_gpus", lambda: ((), "no GPU found (nvidia-smi, torch)"))
    assert "could not check" in cuda_archs.node_record(bundle)[1]


def test_building_from_a_bundle_refuses_before_installing(tmp_path, monkeypatch):
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / cuda_archs.SIDECAR).write_text(json.dumps({"toolchain": {}, "extensions": {
        "transformer_engine_torch.so": {"distribution": "transformer-engine-torch", "sm": [80], "ptx": []}}}))
    monkeypatch.setattr(cuda_archs, "node_gpus", lambda: ((90,), "nvidia-smi"))
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    monkeypatch.setattr(bundles.uv, "sync", lambda *a, **k: pytest.fail("installed before the arch check"))
    with pytest.raises(NemoRLError, match="this node's GPU is sm_90"):
        bundles.sync_from(bundle, Project.read(ROOT), [], tmp_path / "env", UNREAD)
    assert not (tmp_path / "venvs").exists() or not any((tmp_path / "venvs").iterdir())


@pytest.mark.nvcc
def test_pack_records_the_extensions_archs(sm80_extension, tmp_path, monkeypatch):
    """bundle_pack.pack with uv replaced by a fake environment holding the fixture extension as transformer-engine's."""
    for name in ("pyproject.toml", "uv.lock", ".python-version"):
        shutil.copy(ROOT / name, tmp_path / name)
    monkeypatch.setenv("NVTE_CUDA_ARCHS", "80")
    made = {}

    def venv(path, python):  # twice: the worker environment, then the checkout's own
        if "env" not in made:
            made["env"] = fake_env(path.parent / "made", sm80_extension)
        shutil.copytree(made["env"], path)

    # the builder's own cache holds transformer-engine-torch's built wheel: the fresh cache has it before uv runs
    built = tmp_path / "user-cache" / "sdists-v11" / "pypi" / "transformer-engine-torch" / "2.3.0" / "REV" / "S"
    built.mkdir(parents=True)
    (built / "transformer_engine_torch-2.3.0-cp312-cp312-linux_x86_64.whl").write_bytes(b"built once")
    sha256 = pack_seed.sdist_builds(lockfile.load_toml(ROOT / "uv.lock"))["transformer-engine-torch"][1]
    (built.parent.parent / "revision.http").write_bytes(revision_http("REV", sha256))
    monkeypatch.setattr(bundles.uv, "cache_dir", lambda: tmp_path / "user-cache")
    seen = []

    def sync(*args, **kwargs):
        cache = Path(kwargs["extra_env"]["UV_CACHE_DIR"])
        seen.append((cache / built.relative_to(tmp_path / "user-cache")).is_dir())
        cache.mkdir(exist_ok=True)

    monkeypatch.setattr(bundles.uv, "venv", venv)
    monkeypatch.setattr(bundles.uv, "sync", sync)
    monkeypatch.setattr(bundle_pack, "_prove", lambda project, env: manifests.Proven((), ()))  # no real Python there
    bundle_pack.pack(Project.read(tmp_path), [], tmp_path / "bundle")
    assert seen and seen[0]
    # built for sm_80, asked for by a node whose nvidia-smi says 9.0: refused on the node's real path
    fake_smi(tmp_path / "smi", monkeypatch, "9.0")
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    monkeypatch.setattr(bundles.uv, "sync", lambda *a, **k: pytest.fail("installed before the arch check"))
    with pytest.raises(NemoRLError, match="this node's GPU is sm_90, but the bundle's .*sm 80"):
        bundles.sync_from(tmp_path / "bundle", Project.read(tmp_path), [], tmp_path / "node-env",
                          bundles.read_manifest(tmp_path / "bundle"))
    sidecar = json.loads((tmp_path / "bundle" / cuda_archs.SIDECAR).read_text())
    held = sidecar["extensions"][sm80_extension.name]
    assert {k: held[k] for k in ("distribution", "sm", "ptx")} == {"distribution": "transformer-engine-torch",
                                                                   "sm": [80], "ptx": []}


def fake_smi(bin_dir: Path, monkeypatch, capability: str) -> None:
    """`nvidia-smi --query-gpu=index,uuid,compute_cap` answering one GPU of `capability`, first on PATH."""
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(f"#!/bin/sh\necho '0, GPU-fake, {capability}'\n")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    (bin_dir / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")


def test_the_nodes_gpu_is_what_nvidia_smi_says(tmp_path, monkeypatch):
    fake_smi(tmp_path / "smi", monkeypatch, "8.6")
    assert cuda_archs.node_gpus()[0] == (86,)


def mixed_node(tmp_path: Path, monkeypatch) -> None:
    """An H100 and an A100 as nvidia-smi lists them: every GPU, whatever CUDA_VISIBLE_DEVICES says."""
    bin_dir = tmp_path / "smi"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho '0, GPU-aaaa-1111, 9.0'\necho '1, GPU-bbbb-2222, 8.0'\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")


@pytest.mark.parametrize("visible", [None, "0", "GPU-aaaa", "7", "", "MIG-1234"])
def test_every_gpu_of_the_node_is_checked_whatever_cuda_visible_devices_says(tmp_path, monkeypatch, visible):
    """The environment serves every worker of the node, each given GPUs of its own: a bundle built for sm_90 only is
    refused for the A100 beside the H100, even when this process is given the H100 alone or a GPU the node lacks."""
    mixed_node(tmp_path, monkeypatch)
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert cuda_archs.node_gpus() == ((90, 80), "nvidia-smi")
    needs_sm90(tmp_path)
    with pytest.raises(NemoRLError, match="this node's GPU is sm_80"):
        cuda_archs.node_record(tmp_path)


@pytest.mark.parametrize("other", ["[N/A]", "", "9.O"])
def test_a_gpu_nvidia_smi_cannot_say_is_could_not_check_never_skipped(tmp_path, monkeypatch, other):
    """One row nvidia-smi cannot say the capability of: the GPUs it can say are checked, and the line says the
    others could not be."""
    bin_dir = tmp_path / "smi"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(f"#!/bin/sh\necho '0, GPU-a, 8.0'\necho '1, GPU-b, {other}'\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    gpus, found = cuda_archs.node_gpus()
    assert gpus == (80, None) and found == ("nvidia-smi; it could not say the compute capability of "
                                        f"{f'1, GPU-b, {other}'.strip()}")
    (tmp_path / cuda_archs.SIDECAR).write_text(json.dumps({"toolchain": {}, "extensions": {
        "te.so": {"sm": [80], "ptx": []}}}))
    assert cuda_archs.node_record(tmp_path)[1] == (
        f"GPU sm_80 ({found}) fits the bundle's te.so: sm 80; could not check the bundle's CUDA architectures on "
        "the GPUs it could not read")
    needs_sm90(tmp_path)
    with pytest.raises(NemoRLError, match="this node's GPU is sm_80"):  # a readable GPU that does not fit refuses
        cuda_archs.node_record(tmp_path)


def test_building_from_a_bundle_for_another_gpu_is_refused_whatever_this_process_is_given(tmp_path, monkeypatch):
    """`CUDA_VISIBLE_DEVICES=7 nemo-rl envs build BASE --from <bundle for sm_80>` on an sm_90 node: refused before
    anything is installed, never "could not check"."""
    bin_dir = tmp_path / "smi"
    fake_smi(bin_dir, monkeypatch, "9.0")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / cuda_archs.SIDECAR).write_text(json.dumps({"toolchain": {}, "extensions": {
        "transformer_engine_torch.so": {"distribution": "transformer-engine-torch", "sm": [80], "ptx": []}}}))
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    monkeypatch.setattr(bundles.uv, "sync", lambda *a, **k: pytest.fail("installed before the arch check"))
    with pytest.raises(NemoRLError, match="this node's GPU is sm_90"):
        bundles.sync_from(bundle, Project.read(ROOT), [], tmp_path / "env", UNREAD)


def test_torch_is_never_taken_for_the_whole_node_while_cuda_visible_devices_is_set(tmp_path, monkeypatch):
    """Without nvidia-smi, torch sees only the GPUs CUDA_VISIBLE_DEVICES gives this process: that is "could not
    check", saying why; with the setting unset, torch sees every GPU."""
    import types

    cuda = types.SimpleNamespace(is_available=lambda: True, device_count=lambda: 1,
                                 get_device_capability=lambda i: (9, 0))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no nvidia-smi
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    gpus, why = cuda_archs.node_gpus()
    assert gpus == () and why == "nvidia-smi is not on PATH, and torch sees only this process's CUDA_VISIBLE_DEVICES"
    needs_sm90(tmp_path)
    assert cuda_archs.node_record(tmp_path)[1].startswith(f"{why}: could not check")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert cuda_archs.node_gpus() == ((90,), "torch")


def test_a_hung_nvidia_smi_is_could_not_check(tmp_path, monkeypatch):
    """A probe never raises: an nvidia-smi that never answers is a reason, and the node says it could not check."""
    bin_dir = tmp_path / "smi"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\nsleep 60\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setattr(cuda_archs, "SMI_TIMEOUT", 1)
    try:
        gpus, why = cuda_archs.node_gpus()
    except NemoRLError:  # what process.run raises on its timeout: the probe let it through
        pytest.fail("the GPU probe raised instead of saying it could not check")
    assert gpus == () and "nvidia-smi did not answer" in why


def test_the_pack_proves_transformer_engine_imports_when_it_is_there(tmp_path):
    """The compiled extension is what a bundle most needs proven: the pack's import check includes it."""
    (tmp_path / "ext.so").write_bytes(b"")
    env = fake_env(tmp_path, tmp_path / "ext.so", "transformer-engine")
    assert extras.modules_to_import([], installed.site_packages(env)) == ["ray", "transformer_engine.pytorch"]
    assert extras.modules_to_import([], installed.site_packages(tmp_path / "empty")) == ["ray"]


def test_a_fifo_cuda_record_is_refused_not_a_hang(world, tmp_path):
    bundle = fake_bundle(world, tmp_path / "b")
    (bundle / bundles.cuda_archs.SIDECAR).unlink()
    os.mkfifo(bundle / bundles.cuda_archs.SIDECAR)
    code, out = _python(f"from pathlib import Path; from nemo_rl.workers import cuda_archs; "
                        f"cuda_archs.read_record(Path({str(bundle)!r}))", {})
    assert code != 0 and "NemoRLError" in out and "not a regular file" in out, out
