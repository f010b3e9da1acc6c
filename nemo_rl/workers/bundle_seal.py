"""A bundle's digest over its uv cache, CUDA record and manifest fields, so a pin pins all three."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

from nemo_rl.errors import NemoRLError
from nemo_rl.workers.manifests import Manifest

VERSION = b"nemo-rl bundle digest 1\n"


def fields(manifest: Manifest) -> bytes:
    data = dataclasses.asdict(manifest)
    del data["digest"]
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def seal(cache_digest: str, manifest: Manifest, record: bytes) -> str:
    """The bundle's digest from its cache's digest, the CUDA record and the manifest."""
    digest = hashlib.sha256(VERSION)
    for part in (cache_digest.encode(), hashlib.sha256(record).hexdigest().encode(), fields(manifest)):
        digest.update(len(part).to_bytes(8, "big") + part)
    return "sha256:" + digest.hexdigest()


def check_copy(bundle: Path, manifest: Manifest, record: bytes, content: tuple[int, int, str]) -> None:
    """Refuse unless the node's copy (`content`: content_digest's), `record` and the manifest match the digest."""
    files, total, cache_digest = content
    digest = seal(cache_digest, manifest, record)
    if (files, total, digest) != (manifest.files, manifest.bytes, manifest.digest):  # guard: bundles-content-against-the-digest
        raise NemoRLError(f"bundle {bundle} does not match its manifest: {files} files, {total} bytes, {digest} "
                          f"found; {manifest.files}, {manifest.bytes}, {manifest.digest} recorded",
                          f"copy the bundle again from the builder: {bundle}")
