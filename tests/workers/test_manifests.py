"""A bundle's manifest (workers/manifests.py) is read through the plain-file reader: a FIFO in its place is
refused, never waited on."""

from __future__ import annotations

import os

from fakes import _python, fake_bundle

from nemo_rl.workers import bundles


def test_a_fifo_bundle_manifest_is_refused_not_a_hang(world, tmp_path):
    bundle = fake_bundle(world, tmp_path / "bundles" / "b")
    (bundle / bundles.MANIFEST).unlink()
    os.mkfifo(bundle / bundles.MANIFEST)
    code, out = _python(f"from pathlib import Path; from nemo_rl.workers import manifests; "
                        f"manifests.read_manifest(Path({str(bundle)!r}))", {})
    assert code != 0 and "NemoRLError" in out and "not a regular file" in out, out
