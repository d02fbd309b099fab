"""Build the service's image from the project's Dockerfile, unchanged, with buildah.

No container registry is reachable where the tests run, so the Dockerfile's base
(``python:3.11.7-slim-bookworm``) cannot be pulled: this script makes a stand-in
under the same name first, a Debian bookworm root filesystem (mmdebstrap,
minbase with ca-certificates, python3 and python3-pip) in which ``python`` and
``pip`` are what the official image provides. Debian's Python is 3.11.2, not
the official image's 3.11.7; the wheels are the same (the project's is pure
Python, its dependencies' are built for CPython 3.11). Anyone with a registry
builds the same Dockerfile with ``docker build`` or ``buildah bud`` and the
real base.

The image is exported as an OCI archive that containerd imports
(``ctr images import``), named ``localhost/gpu-admission:<tag>``; the tag is
a digest of the build context, so the e2e tests always run the code they test
and rebuild only when it changed. Everything (buildah's storage, the stand-in's
root filesystem, the archives) lives in the cache directory the control plane's
binaries use, outside the repository::

    python -m tests.e2e.image          # build (or reuse) and print a summary
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

from .build_controlplane import cache_root

__all__ = ["BuiltImage", "ImageToolsMissing", "ensure_image", "main"]

REPOSITORY = Path(__file__).resolve().parents[2]
IMAGE_REPOSITORY = "localhost/gpu-admission"
BASE_IMAGE = "docker.io/library/python:3.11.7-slim-bookworm"
DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
BASE_PACKAGES = ("ca-certificates", "python3", "python3-pip")
# As the official slim image: what the packages need, not what they recommend
# (python3-pip recommends a whole C toolchain).
APT_OPTIONS = ('APT::Install-Recommends "false"',)
# pip in the builder stage reaches the package index with the machine's trust store.
MACHINE_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


class ImageToolsMissing(RuntimeError):
    """buildah or mmdebstrap is not installed (Debian packages of the same names)."""


class ImageBuildFailed(RuntimeError):
    """A step of the build failed; the message carries its output."""


@dataclass(frozen=True)
class BuiltImage:
    reference: str
    archive: Path
    tag: str

    @property
    def repository(self) -> str:
        return self.reference.rsplit(":", 1)[0]


def _image_dir() -> Path:
    return cache_root() / "image"


def _buildah(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    storage = _image_dir() / "storage"
    command = [
        "buildah",
        f"--root={storage / 'root'}",
        f"--runroot={storage / 'run'}",
        "--storage-driver=overlay",
        *args,
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise ImageBuildFailed(
            f"{' '.join(command[:5])}... failed ({result.returncode}):\n{result.stderr[-4000:]}"
        )
    return result


def _context_rules() -> tuple[list[str], list[str]]:
    """What the build context holds and leaves out, as the .dockerignore says: it
    excludes everything (`*`), allows paths back (`!webhook/`), then excludes patterns
    at any depth (`**/__pycache__`); the Dockerfile itself is read too."""
    allowed, excluded = ["Dockerfile"], []
    lines = (REPOSITORY / ".dockerignore").read_text().splitlines()
    for line in (line.strip() for line in lines):
        if not line or line.startswith("#") or line == "*":
            continue
        if line.startswith("!"):
            allowed.append(line[1:].strip("/"))
        else:
            excluded.append(line.removeprefix("**/"))
    return allowed, excluded


def _context_files() -> list[Path]:
    allowed, excluded = _context_rules()
    files: list[Path] = []
    for entry in allowed:
        path = REPOSITORY / entry
        candidates = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for candidate in candidates:
            parts = candidate.relative_to(REPOSITORY).parts
            if any(fnmatch.fnmatch(part, pattern) for part in parts for pattern in excluded):
                continue
            files.append(candidate)
    return files


def context_digest() -> str:
    """A digest of every file the build reads: the image's tag."""
    digest = hashlib.sha256()
    for path in _context_files():
        digest.update(str(path.relative_to(REPOSITORY)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _base_recipe() -> str:
    return json.dumps([DEBIAN_SUITE, DEBIAN_MIRROR, *BASE_PACKAGES, *APT_OPTIONS, BASE_IMAGE])


def _log(message: str) -> None:
    print(f"[image] {message}", file=sys.stderr, flush=True)


def ensure_tools() -> None:
    missing = [tool for tool in ("buildah", "mmdebstrap") if shutil.which(tool) is None]
    if missing:
        raise ImageToolsMissing(
            f"{' and '.join(missing)} not installed: apt-get install {' '.join(missing)}"
        )


def ensure_base() -> None:
    """Make the stand-in base under the Dockerfile's name unless it is made already."""
    marker = _image_dir() / "base.recipe"
    present = _buildah("inspect", "--type=image", BASE_IMAGE, check=False).returncode == 0
    if present and marker.is_file() and marker.read_text() == _base_recipe():
        return
    started = time.monotonic()
    _log(f"making the stand-in base {BASE_IMAGE} from Debian {DEBIAN_SUITE}")
    rootfs = _image_dir() / "base-rootfs.tar"
    rootfs.parent.mkdir(parents=True, exist_ok=True)
    made = subprocess.run(
        [
            "mmdebstrap",
            "--variant=minbase",
            *(f"--aptopt={option}" for option in APT_OPTIONS),
            f"--include={','.join(BASE_PACKAGES)}",
            DEBIAN_SUITE,
            str(rootfs),
            DEBIAN_MIRROR,
        ],
        capture_output=True,
        text=True,
    )
    if made.returncode != 0:
        raise ImageBuildFailed(f"mmdebstrap failed:\n{made.stderr[-4000:]}")
    container = _buildah("from", "--pull=never", "scratch").stdout.strip()
    try:
        _buildah("add", container, str(rootfs), "/")
        # What the official image offers and the Dockerfile relies on: `python` and
        # `pip` on PATH, and pip allowed to install into the system's Python.
        _buildah(
            "run",
            "--isolation=chroot",
            container,
            "--",
            "sh",
            "-c",
            "rm -f /usr/lib/python3*/EXTERNALLY-MANAGED"
            " && ln -sf /usr/bin/python3 /usr/local/bin/python"
            " && ln -sf /usr/bin/pip3 /usr/local/bin/pip",
        )
        _buildah(
            "config",
            "--env=PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin",
            "--env=LANG=C.UTF-8",
            "--cmd=python3",
            f"--label=io.gpu-admission.stand-in=debian-{DEBIAN_SUITE}-python3",
            container,
        )
        _buildah("commit", "--rm", container, BASE_IMAGE)
    except BaseException:
        _buildah("rm", container, check=False)
        raise
    rootfs.unlink()
    marker.write_text(_base_recipe())
    _log(f"stand-in base made in {time.monotonic() - started:.0f}s")


def ensure_image() -> BuiltImage:
    """Build the service's image from the current sources unless built already,
    and return its reference and OCI archive."""
    ensure_tools()
    tag = f"src-{context_digest()}"
    reference = f"{IMAGE_REPOSITORY}:{tag}"
    archive = _image_dir() / f"gpu-admission-{tag}.tar"
    if archive.is_file():
        return BuiltImage(reference, archive, tag)
    ensure_base()
    started = time.monotonic()
    _log(f"building {reference} from the Dockerfile")
    _buildah(
        "bud",
        "--pull=never",
        "--isolation=chroot",
        "--network=host",
        "--layers=false",
        f"--volume={MACHINE_CA_BUNDLE}:{MACHINE_CA_BUNDLE}:ro",
        f"--tag={reference}",
        f"--build-arg=REVISION={tag}",
        f"--file={REPOSITORY / 'Dockerfile'}",
        str(REPOSITORY),
    )
    partial = archive.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    _buildah("push", reference, f"oci-archive:{partial}:{reference}")
    partial.replace(archive)
    _forget_older_builds(reference, archive)
    _log(f"built {reference} in {time.monotonic() - started:.0f}s")
    return BuiltImage(reference, archive, tag)


def installed_distributions(image: BuiltImage) -> list[str]:
    """The Python distributions the Dockerfile's pip install added (name-version),
    read from the image's layers."""
    found: set[str] = set()
    with tarfile.open(image.archive) as archive:
        for member in archive.getmembers():
            if not member.name.startswith("blobs/") or member.size < 1024:
                continue
            blob = archive.extractfile(member)
            if blob is None or blob.read(2) != b"\x1f\x8b":
                continue
            blob.seek(0)
            with tarfile.open(fileobj=blob, mode="r:gz") as layer:
                for entry in layer:
                    parts = entry.name.split("/")
                    if parts[-1].endswith(".dist-info") and entry.isdir() and "local" in parts:
                        found.add(parts[-1].removesuffix(".dist-info"))
    return sorted(found, key=str.lower)


def _forget_older_builds(reference: str, archive: Path) -> None:
    """One build of the sources at a time in the cache: older archives and images go."""
    for old in _image_dir().glob("gpu-admission-src-*.tar"):
        if old != archive:
            old.unlink()
    listed = _buildah("images", "--format={{.Name}}:{{.Tag}}", check=False).stdout
    for name in listed.split():
        if name.startswith(f"{IMAGE_REPOSITORY}:src-") and name != reference:
            _buildah("rmi", name, check=False)
    _buildah("rmi", "--prune", check=False)


def summary(image: BuiltImage) -> str:
    """What the image is: its sizes, user, entry point and the Python packages in it."""
    inspected = json.loads(_buildah("inspect", "--type=image", image.reference).stdout)
    config = inspected.get("OCIv1", {}).get("config", {})
    size = _buildah("images", "--format={{.Size}}", image.reference).stdout.strip()
    distributions = installed_distributions(image)
    return "\n".join(
        [
            f"image     {image.reference}",
            f"size      {size} unpacked, {image.archive.stat().st_size / 2**20:.1f} MiB "
            f"as an OCI archive ({image.archive})",
            f"user      {config.get('User')}",
            f"entry     {config.get('Entrypoint')} {config.get('Cmd')}",
            f"base      {BASE_IMAGE} (stand-in: Debian {DEBIAN_SUITE} minbase, "
            f"{', '.join(BASE_PACKAGES)})",
            f"python    {len(distributions)} distributions: {', '.join(distributions)}",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    """Build (or reuse) the image and print what it is. With ``--before-tests``
    (``make test``, so that a build shows its progress before pytest captures
    output) it follows ``GPU_ADMISSION_E2E`` as the tests do: nothing when off,
    a note rather than a failure without buildah unless the tests are required."""
    before_tests = "--before-tests" in (sys.argv[1:] if argv is None else argv)
    mode = os.environ.get("GPU_ADMISSION_E2E", "").strip().lower()
    if before_tests and mode == "off":
        return 0
    try:
        image = ensure_image()
    except ImageToolsMissing as error:
        _log(str(error))
        return 1 if mode == "required" or not before_tests else 0
    except ImageBuildFailed as error:
        _log(str(error))
        return 1
    print(image.reference if before_tests else summary(image))
    return 0


if __name__ == "__main__":
    sys.exit(main())
