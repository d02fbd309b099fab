"""Images the real node runs, made on this machine: no registry is reachable.

The sandbox (pause) image is a few lines of C, linked statically and packed as
an OCI image archive by :func:`write_image_archive`, which writes the layout
the OCI image specification describes (``oci-layout``, ``index.json`` and
content-addressed blobs) around one layer. containerd imports such an archive
under the name recorded in the index (``ctr images import``).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

__all__ = ["PAUSE_IMAGE", "build_pause_image", "write_image_archive"]

PAUSE_IMAGE = "localhost/gpu-admission-e2e/pause:1"

# What a sandbox's first process does: nothing, until it is told to stop.
PAUSE_SOURCE = r"""
#include <signal.h>
#include <unistd.h>

static void stop(int signal_number) { (void)signal_number; _exit(0); }

int main(void) {
    signal(SIGINT, stop);
    signal(SIGTERM, stop);
    for (;;) pause();
}
"""


class ImageBuildFailed(RuntimeError):
    """A C compiler or a packing step failed."""


def _blob(directory: Path, data: bytes, media_type: str) -> dict[str, Any]:
    digest = hashlib.sha256(data).hexdigest()
    (directory / "blobs" / "sha256" / digest).write_bytes(data)
    return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}


def write_image_archive(
    archive: Path, name: str, files: dict[str, tuple[bytes, int]], config: dict[str, Any]
) -> Path:
    """An OCI image archive of one layer holding `files` (path -> (content, mode)),
    with the runtime `config` (Entrypoint, User, ...), named `name`."""
    layer_tar = io.BytesIO()
    with tarfile.open(fileobj=layer_tar, mode="w") as tar:
        for path, (content, mode) in sorted(files.items()):
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size = len(content)
            info.mode = mode
            tar.addfile(info, io.BytesIO(content))
    uncompressed = layer_tar.getvalue()
    compressed = gzip.compress(uncompressed, mtime=0)

    work = archive.with_suffix(".layout")
    shutil.rmtree(work, ignore_errors=True)
    (work / "blobs" / "sha256").mkdir(parents=True)
    layer = _blob(work, compressed, "application/vnd.oci.image.layer.v1.tar+gzip")
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "config": config,
        "rootfs": {
            "type": "layers",
            "diff_ids": [f"sha256:{hashlib.sha256(uncompressed).hexdigest()}"],
        },
    }
    config_blob = _blob(
        work, json.dumps(image_config).encode(), "application/vnd.oci.image.config.v1+json"
    )
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": config_blob,
        "layers": [layer],
    }
    manifest_blob = _blob(
        work, json.dumps(manifest).encode(), "application/vnd.oci.image.manifest.v1+json"
    )
    manifest_blob["annotations"] = {
        "io.containerd.image.name": name,
        "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1],
    }
    manifest_blob["platform"] = {"architecture": "amd64", "os": "linux"}
    (work / "oci-layout").write_text(json.dumps({"imageLayoutVersion": "1.0.0"}))
    (work / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [manifest_blob]}))
    with tarfile.open(archive, "w") as tar:
        for entry in sorted(work.rglob("*")):
            tar.add(entry, arcname=str(entry.relative_to(work)), recursive=False)
    shutil.rmtree(work)
    return archive


def build_pause_image(directory: Path) -> Path:
    """The sandbox image's archive, built into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / "pause.c"
    source.write_text(PAUSE_SOURCE)
    binary = directory / "pause"
    compiled = subprocess.run(
        ["gcc", "-static", "-Os", "-o", str(binary), str(source)],
        capture_output=True,
        text=True,
    )
    if compiled.returncode != 0:
        raise ImageBuildFailed(f"gcc could not build the pause binary:\n{compiled.stderr}")
    return write_image_archive(
        directory / "pause.tar",
        PAUSE_IMAGE,
        {"/pause": (binary.read_bytes(), 0o755)},
        {"Entrypoint": ["/pause"], "User": "65535:65535"},
    )
