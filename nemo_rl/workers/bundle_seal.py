"""A bundle's digest over its uv cache, CUDA record and manifest fields, so a pin pins all three."""

from __future__ import annotations

import dataclasses
import hashlib
import json

from nemo_rl.workers.manifests import Manifest

VERSION = b"nemo-rl bundle digest 1\n"


def seal(cache_digest: str, manifest: Manifest, record: bytes) -> str:
    """The bundle's digest from its cache's digest, the CUDA record and the manifest."""
    data = dataclasses.asdict(manifest)
    del data["digest"]
    fields = json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()
    digest = hashlib.sha256(VERSION)
    for part in (cache_digest.encode(), hashlib.sha256(record).hexdigest().encode(), fields):
        digest.update(len(part).to_bytes(8, "big") + part)
    return "sha256:" + digest.hexdigest()
