"""A bundle's digest: one value over its uv cache, its CUDA record and its manifest's own fields, so that a site
pinning it pins all three. A digest of the cache alone would let a rewritten record turn the node's arch check
off, or a rewritten manifest change what the node takes as proven, under the same pinned value."""

from __future__ import annotations

import dataclasses
import hashlib
import json

from nemo_rl.workers.manifests import Manifest

VERSION = b"nemo-rl bundle digest 1\n"


def fields(manifest: Manifest) -> bytes:
    """The manifest without its digest, in one canonical form (what the builder wrote reads back as the same)."""
    data = dataclasses.asdict(manifest)
    del data["digest"]
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def seal(cache_digest: str, manifest: Manifest, record: bytes) -> str:
    """The bundle's digest from its cache's content digest (bundles.content_digest), the CUDA record's bytes and
    the manifest's other fields."""
    digest = hashlib.sha256(VERSION)
    for part in (cache_digest.encode(), hashlib.sha256(record).hexdigest().encode(), fields(manifest)):
        digest.update(len(part).to_bytes(8, "big") + part)
    return "sha256:" + digest.hexdigest()
