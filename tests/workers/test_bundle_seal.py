"""A bundle's digest covers its uv cache, its CUDA record and its manifest's own fields: rewriting the record (to
claim the node's arch) or a manifest field (what was proven) is refused before anything is installed, and so is a
bundle without its record."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from nemo_rl.errors import NemoRLError
from nemo_rl.jsonout import dumps
from nemo_rl.project.model import Project
from nemo_rl.workers import bundle_seal, bundles, cuda_archs, manifests

ROOT = Path(__file__).resolve().parents[2]
FLAGS = ["--locked"]
SM80 = {"toolchain": {"nvcc_at_pack": "12.4"}, "extensions": {
    "transformer_engine_torch.so": {"distribution": "transformer-engine-torch", "sm": [80], "ptx": [],
                                    "host_compilers": ["GCC: (Debian 12.2.0-14) 12.2.0"]}}}


def make_bundle(root: Path, record: dict, body: str = "X = 1\n") -> Path:
    """A bundle as pack seals it: a cache, a CUDA record, a manifest whose digest covers all three."""
    cache = root / bundles.CACHE
    (cache / "archive-v0" / "abc").mkdir(parents=True)
    (cache / "archive-v0" / "abc" / "mod.py").write_text(body)
    files, total, cache_digest = bundles.content_digest(cache)
    record_bytes = (json.dumps(record, indent=1) + "\n").encode()
    (root / cuda_archs.SIDECAR).write_bytes(record_bytes)
    unsealed = manifests.Manifest(manifests.SCHEMA, manifests.inputs_for(Project.read(ROOT), FLAGS),
                                  {"torch": "2.7.0"}, files,
                                  total, "", 1.7e9, manifests.Proven(("ray",), ("lib/ray/__init__.py",)))
    manifest = dataclasses.replace(unsealed, digest=bundle_seal.seal(cache_digest, unsealed, record_bytes))
    (root / manifests.MANIFEST).write_text(dumps(manifest) + "\n")
    return root


@pytest.fixture
def node(tmp_path, monkeypatch):
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    monkeypatch.setattr(cuda_archs, "node_gpus", lambda: ((90,), "nvidia-smi"))
    installs = []
    monkeypatch.setattr(bundles.uv, "sync", lambda *a, **k: installs.append(k))
    return installs


def test_the_digest_reads_back_and_covers_each_part(tmp_path):
    bundle = make_bundle(tmp_path / "b", {"toolchain": {}, "extensions": {}})
    manifest = manifests.read_manifest(bundle)
    record = cuda_archs.read_record(bundle)
    cache_digest = bundles.content_digest(bundle / bundles.CACHE)[2]
    assert bundle_seal.seal(cache_digest, manifest, record) == manifest.digest  # the manifest as read back
    assert bundle_seal.seal(cache_digest, manifest, record + b" ") != manifest.digest
    assert bundle_seal.seal("sha256:" + "0" * 64, manifest, record) != manifest.digest
    for field, value in (("created", 1.8e9), ("distributions", {"torch": "2.7.1"}),
                         ("proven", manifests.Proven((), ())), ("files", manifest.files + 1)):
        assert bundle_seal.seal(cache_digest, dataclasses.replace(manifest, **{field: value}), record) != \
            manifest.digest, field


def test_a_sealed_bundle_installs(tmp_path, node):
    bundle = make_bundle(tmp_path / "b", {"toolchain": {}, "extensions": {}})
    bundles.sync_from(bundle, Project.read(ROOT), FLAGS, tmp_path / "env", manifests.read_manifest(bundle))
    assert len(node) == 1  # the control: the refusals below are the seal's, not the fixture's


def test_a_record_rewritten_to_claim_the_nodes_arch_is_refused(tmp_path, node):
    bundle = make_bundle(tmp_path / "b", SM80)
    with pytest.raises(NemoRLError, match="this node's GPU is sm_90"):  # as packed: sm_80 only
        bundles.sync_from(bundle, Project.read(ROOT), FLAGS, tmp_path / "env", manifests.read_manifest(bundle))
    claimed = json.loads(json.dumps(SM80))
    claimed["extensions"]["transformer_engine_torch.so"]["sm"] = [90]
    (bundle / cuda_archs.SIDECAR).write_text(json.dumps(claimed))
    with pytest.raises(NemoRLError, match="does not match its manifest"):
        bundles.sync_from(bundle, Project.read(ROOT), FLAGS, tmp_path / "env", manifests.read_manifest(bundle))
    assert node == []


def test_a_manifest_field_rewritten_is_refused(tmp_path, node):
    bundle = make_bundle(tmp_path / "b", {"toolchain": {}, "extensions": {}})
    data = json.loads((bundle / manifests.MANIFEST).read_text())
    data["proven"]["modules"] = ["ray", "megatron.core"]  # a node would take megatron.core as proven
    (bundle / manifests.MANIFEST).write_text(json.dumps(data))
    with pytest.raises(NemoRLError, match="does not match its manifest"):
        bundles.sync_from(bundle, Project.read(ROOT), FLAGS, tmp_path / "env", manifests.read_manifest(bundle))
    assert node == []


def test_a_bundle_without_its_record_is_refused(tmp_path, node):
    bundle = make_bundle(tmp_path / "b", SM80)
    (bundle / cuda_archs.SIDECAR).unlink()  # which would have skipped the arch check
    with pytest.raises(NemoRLError, match="has no nemo-rl-cuda.json"):
        bundles.sync_from(bundle, Project.read(ROOT), FLAGS, tmp_path / "env", manifests.read_manifest(bundle))
    assert node == []


def test_a_kept_copy_whose_stamp_names_another_bundle_is_not_that_bundle(tmp_path, node):
    """A stamp edited to name bundle B's digest over bundle A's files: building from B neither uses that copy nor
    refuses B (which is fine); it copies B afresh."""
    plain = {"toolchain": {}, "extensions": {}}
    first, second = make_bundle(tmp_path / "a", plain), make_bundle(tmp_path / "b", plain, body="X = 2\n")
    bundles.sync_from(first, Project.read(ROOT), FLAGS, tmp_path / "env-a", manifests.read_manifest(first))
    [kept] = (tmp_path / "venvs").glob(".bundle-copy-*")
    stamp = json.loads((kept / "checked.json").read_text())
    stamp["digest"] = manifests.read_manifest(second).digest
    (kept / "checked.json").write_text(json.dumps(stamp))
    bundles.sync_from(second, Project.read(ROOT), FLAGS, tmp_path / "env-b", manifests.read_manifest(second))
    assert len(node) == 2
    [made] = (tmp_path / "venvs").glob(".bundle-copy-*")  # B's own; the edited one, "B's" too, gave way to it
    assert made != kept
