"""Build the Kubernetes control-plane binaries the e2e tests run against.

The versions are pinned by the wrapper Go module in ``tests/e2e/controlplane``
(and Helm's by ``tests/e2e/helm``, a module of its own: it needs newer k8s.io
modules than the control plane's); this script only turns them into binaries
in a per-version cache directory, so a test run pays the (long) build once per
machine. The oracles of ``tests/differential`` (small Go programs: Kubernetes'
scheduling helpers, and kube-apiserver's webhook matching) are built here too, each
into a directory named by a hash of its sources. It deliberately imports nothing from the project so that it
also runs as a plain script:

    python -m tests.e2e.build_controlplane
    python tests/e2e/build_controlplane.py
"""

from __future__ import annotations

import datetime
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

MODULE_DIR = Path(__file__).resolve().parent / "controlplane"
HELM_MODULE_DIR = Path(__file__).resolve().parent / "helm"
OLDER_MODULE_DIR = Path(__file__).resolve().parent / "controlplane-1.34"
HELM3_MODULE_DIR = Path(__file__).resolve().parent / "helm3"
KUEUE_MODULE_DIR = Path(__file__).resolve().parent / "kueue"
PROMTOOL_MODULE_DIR = Path(__file__).resolve().parent / "promtool"
NODE_MODULE_DIR = Path(__file__).resolve().parent / "node"
CONTAINERD_MODULE = "github.com/containerd/containerd/v2"
CNI_PLUGINS_MODULE = "github.com/containernetworking/plugins"
# Snapshotters and graph drivers that need C headers or kernel modules the real
# node does not use (it runs on overlayfs): containerd's own build tags leave them out.
CONTAINERD_TAGS = "no_btrfs,no_devmapper,no_zfs,no_aufs"
ORACLE_MODULE_DIR = Path(__file__).resolve().parents[1] / "differential" / "oracle"
MATCHING_MODULE_DIR = Path(__file__).resolve().parents[1] / "differential" / "matching"
TOOLKIT_MODULE_DIR = Path(__file__).resolve().parents[1] / "differential" / "toolkit"
ORACLE_SOURCES = ("go.mod", "go.sum", "main.go")
HELM_MODULE = "helm.sh/helm/v4"
HELM3_MODULE = "helm.sh/helm/v3"
KUEUE_MODULE = "sigs.k8s.io/kueue"
PROMETHEUS_MODULE = "github.com/prometheus/prometheus"

# How often a build that is still running says so: a cold kube-apiserver build
# takes many minutes on two cores and silence looks like a hang.
HEARTBEAT_SECONDS = 60.0


class GoToolchainMissing(RuntimeError):
    """No ``go`` command: the e2e tests cannot build their control plane."""


class BuildFailed(RuntimeError):
    """``go build`` failed for one of the binaries."""


class Binary(NamedTuple):
    name: str
    package: str
    # Minutes a cold build of it took on two cores, in this order (later builds
    # reuse what Go compiled for earlier ones): what the progress lines expect. Measured
    # 2026-12 with an empty Go build cache: 16 min 18 s for every binary and oracle.
    expected_minutes: float
    module_dir: Path = MODULE_DIR
    # A binary whose module is not the control plane's records the version it
    # was built from beside it (``.<name>.version``): the cache directory follows
    # the Kubernetes version only, so a bumped Helm must not reuse the old one.
    pinned_module: str | None = None
    # Go build tags, comma-separated.
    tags: str = ""


def _cni_plugin(name: str, group: str) -> Binary:
    package = f"{CNI_PLUGINS_MODULE}/plugins/{group}/{name}"
    return Binary(f"cni/{name}", package, 0.05, NODE_MODULE_DIR, CNI_PLUGINS_MODULE)


# etcd first: it is the quickest and proves the toolchain works before the
# long Kubernetes builds start. helm, then the real node's parts (kubelet,
# kube-proxy, containerd, the CNI plugins): only the chart's tests need them. Kueue's
# manager: only the Kueue tests need it. promtool last: only the alert rules' tests need it.
BINARIES: tuple[Binary, ...] = (
    Binary("etcd", "go.etcd.io/etcd/server/v3", 0.5),
    Binary("kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver", 2),
    Binary("kube-controller-manager", "k8s.io/kubernetes/cmd/kube-controller-manager", 1),
    Binary("kube-scheduler", "k8s.io/kubernetes/cmd/kube-scheduler", 0.2),
    Binary("kubectl", "k8s.io/kubernetes/cmd/kubectl", 0.5),
    Binary("helm", f"{HELM_MODULE}/cmd/helm", 2, HELM_MODULE_DIR, HELM_MODULE),
    Binary("kubelet", "k8s.io/kubernetes/cmd/kubelet", 0.5),
    Binary("kube-proxy", "k8s.io/kubernetes/cmd/kube-proxy", 0.2),
    Binary(
        "containerd",
        f"{CONTAINERD_MODULE}/cmd/containerd",
        1,
        NODE_MODULE_DIR,
        CONTAINERD_MODULE,
        CONTAINERD_TAGS,
    ),
    Binary("ctr", f"{CONTAINERD_MODULE}/cmd/ctr", 0.1, NODE_MODULE_DIR, CONTAINERD_MODULE),
    Binary(
        "containerd-shim-runc-v2",
        f"{CONTAINERD_MODULE}/cmd/containerd-shim-runc-v2",
        0.5,
        NODE_MODULE_DIR,
        CONTAINERD_MODULE,
    ),
    _cni_plugin("bridge", "main"),
    _cni_plugin("loopback", "main"),
    _cni_plugin("host-local", "ipam"),
    _cni_plugin("portmap", "meta"),
    Binary("kueue", f"{KUEUE_MODULE}/cmd/kueue", 3.5, KUEUE_MODULE_DIR, KUEUE_MODULE),
    Binary(
        "promtool",
        f"{PROMETHEUS_MODULE}/cmd/promtool",
        5,
        PROMTOOL_MODULE_DIR,
        PROMETHEUS_MODULE,
    ),
)


# The older release the suite's core also runs on (``GPU_ADMISSION_KUBERNETES=v1.34``,
# `make e2e-older`): its control plane and kubectl, etcd as that release requires it, and
# Helm 3, as a team that keeps an older cluster keeps its Helm. Nothing of the real node,
# Kueue or promtool: the tests that need them run on the pinned release only.
OLDER_BINARIES: tuple[Binary, ...] = (
    Binary("etcd", "go.etcd.io/etcd/server/v3", 0.4, OLDER_MODULE_DIR),
    Binary("kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver", 3, OLDER_MODULE_DIR),
    Binary(
        "kube-controller-manager",
        "k8s.io/kubernetes/cmd/kube-controller-manager",
        1,
        OLDER_MODULE_DIR,
    ),
    Binary("kube-scheduler", "k8s.io/kubernetes/cmd/kube-scheduler", 0.1, OLDER_MODULE_DIR),
    Binary("kubectl", "k8s.io/kubernetes/cmd/kubectl", 0.4, OLDER_MODULE_DIR),
    Binary("helm", f"{HELM3_MODULE}/cmd/helm", 1.5, HELM3_MODULE_DIR, HELM3_MODULE),
)

RELEASE_VARIABLE = "GPU_ADMISSION_KUBERNETES"
"""Which release the end-to-end tests run on: unset (or the pinned minor, v1.36) for the
one of tests/e2e/controlplane, ``v1.34`` for the older one."""


class Release(NamedTuple):
    """A Kubernetes release the tests can run on: its wrapper module and its binaries."""

    module_dir: Path
    binaries: tuple[Binary, ...]
    helm_module: str
    helm_module_dir: Path


PINNED = Release(MODULE_DIR, BINARIES, HELM_MODULE, HELM_MODULE_DIR)
OLDER = Release(OLDER_MODULE_DIR, OLDER_BINARIES, HELM3_MODULE, HELM3_MODULE_DIR)


def active_release() -> Release:
    """The release ``GPU_ADMISSION_KUBERNETES`` names (its minor, ``v1.34``, or a full
    version of it); the pinned one when unset. Another value is refused by name."""
    wanted = os.environ.get(RELEASE_VARIABLE, "").strip()
    if not wanted:
        return PINNED
    for release in (PINNED, OLDER):
        version = required_version("k8s.io/kubernetes", release.module_dir)
        if version == wanted or version.startswith(wanted.rstrip(".") + "."):
            return release
    known = ", ".join(required_version("k8s.io/kubernetes", r.module_dir) for r in (PINNED, OLDER))
    raise BuildFailed(f"{RELEASE_VARIABLE}={wanted}: no such release here (known: {known})")


# Not control-plane binaries: each is built on its own (ensure_oracle), from its own module.
ORACLE = Binary(
    "placement-oracle", "gpu-admission/tests/differential/oracle", 0.5, ORACLE_MODULE_DIR
)
MATCHING_ORACLE = Binary(
    "matching-oracle", "gpu-admission/tests/differential/matching", 1, MATCHING_MODULE_DIR
)
# The NVIDIA Container Toolkit's reading of device requests: its module path lies under
# the toolkit's, so that Go lets it import the toolkit's internal package.
TOOLKIT_ORACLE = Binary(
    "toolkit-oracle",
    "github.com/NVIDIA/nvidia-container-toolkit/gpu-admission-oracle",
    0.1,
    TOOLKIT_MODULE_DIR,
)
ORACLES = (ORACLE, MATCHING_ORACLE, TOOLKIT_ORACLE)


def required_version(module: str, module_dir: Path) -> str:
    """The version of `module` that the wrapper go.mod in `module_dir` requires."""
    text = (module_dir / "go.mod").read_text()
    pattern = rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\d+\.\d+\.\d+)\b"
    match = re.search(pattern, text, re.MULTILINE)
    if match is None:
        raise BuildFailed(f"no {module} requirement in {module_dir / 'go.mod'}")
    return match.group(1)


def pinned_kubernetes_version(module_dir: Path | None = None) -> str:
    """The ``k8s.io/kubernetes`` version the wrapper go.mod requires, e.g. ``v1.36.3``
    (that of the active release when no module is named)."""
    return required_version("k8s.io/kubernetes", module_dir or active_release().module_dir)


def pinned_helm_version() -> str:
    """The Helm version the active release's helm wrapper go.mod requires, e.g. ``v4.3.2``."""
    release = active_release()
    return required_version(release.helm_module, release.helm_module_dir)


def cache_root() -> Path:
    override = os.environ.get("GPU_ADMISSION_CACHE")
    if override:
        return Path(override).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "gpu-admission"


def bin_dir(version: str | None = None) -> Path:
    """Where the binaries of one Kubernetes version live; the version is in the
    path so that bumping go.mod never reuses binaries of the old release."""
    return cache_root() / f"k8s-{version or pinned_kubernetes_version()}" / "bin"


def version_ldflags(version: str, build_date: str) -> list[str]:
    """``-X`` flags that stamp the release into the binaries.

    Without them ``kubectl version`` and the apiserver's /version report
    ``v0.0.0-master``; both the component-base and the client-go copies of the
    version variables are read by different code paths.
    """
    major, minor = version.lstrip("v").split(".")[:2]
    values = {
        "gitVersion": version,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "buildDate": build_date,
    }
    return [
        f"-X {package}.{key}={value}"
        for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
        for key, value in values.items()
    ]


def helm_ldflags(version: str, module: str = HELM_MODULE) -> list[str]:
    """``-X`` flags that make ``helm version`` report the release (as Helm's
    Makefile does for a tagged build) instead of a bare ``v4.3`` "unreleased"."""
    package = f"{module}/internal/version"
    return [f"-X {package}.version={version}", f"-X {package}.metadata="]


def prometheus_ldflags(module_version: str, build_date: str) -> list[str]:
    """``-X`` flags that make ``promtool --version`` report the release instead of
    an empty one. Prometheus 3 publishes release 3.MM.P as module version v0.3MM.P
    (v0.316.0 is 3.16.0); the module version goes in as the revision it was built from,
    and the branch is "HEAD" as in a release build from its tag."""
    _, minor, patch = module_version.split(".")
    values = {
        "Version": f"{int(minor) // 100}.{int(minor) % 100}.{patch}",
        "Revision": module_version,
        "Branch": "HEAD",
        "BuildUser": "gpu-admission",
        "BuildDate": build_date,
    }
    return [f"-X github.com/prometheus/common/version.{k}={v}" for k, v in values.items()]


def _version_stamp(binary: Binary, directory: Path) -> Path:
    target = directory / binary.name
    return target.with_name(f".{target.name}.version")


def _is_built(binary: Binary, directory: Path) -> bool:
    if not (directory / binary.name).is_file():
        return False
    if binary.pinned_module is None:
        return True
    stamp = _version_stamp(binary, directory)
    wanted = required_version(binary.pinned_module, binary.module_dir)
    return stamp.is_file() and stamp.read_text().strip() == wanted


def _go_command() -> str:
    go = shutil.which("go")
    if go is None:
        raise GoToolchainMissing(
            "the 'go' command is not on PATH; the e2e control plane is built from Go modules"
        )
    return go


def _log(message: str) -> None:
    print(f"[build_controlplane] {message}", file=sys.stderr, flush=True)


@contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """Serialise concurrent builders (two test runs at once) so that the second
    waits and then finds the binaries instead of building them again."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            started = time.monotonic()
            _log(f"waiting for another build that holds {lock_path} (another test run?)")
            fcntl.flock(lock, fcntl.LOCK_EX)
            _log(f"the other build finished after {time.monotonic() - started:.0f}s")
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class Progress(NamedTuple):
    """Where a build of several binaries is: the one under way is number `step` of
    `steps`, and the cold-build minutes still expected after it."""

    step: int
    steps: int
    minutes_after: float

    def starting(self, binary: Binary) -> str:
        left = binary.expected_minutes + self.minutes_after
        return (
            f"[{self.step}/{self.steps}] building {binary.name} ({binary.package}): "
            f"about {_minutes(binary.expected_minutes)} cold on two cores, "
            f"about {_minutes(left)} left in all"
        )

    def still(self, binary: Binary, seconds: float) -> str:
        return (
            f"[{self.step}/{self.steps}] still building {binary.name}: "
            f"{_minutes(seconds / 60)} of about {_minutes(binary.expected_minutes)}"
        )


def _minutes(minutes: float) -> str:
    return f"{minutes:.0f} min" if minutes >= 1 else f"{minutes * 60:.0f} s"


def plan_progress(missing: list[Binary]) -> list[Progress]:
    """The progress of each binary of `missing`, built in that order."""
    return [
        Progress(step, len(missing), sum(b.expected_minutes for b in missing[step:]))
        for step in range(1, len(missing) + 1)
    ]


def _build_one(
    go: str, binary: Binary, target: Path, ldflags: list[str], progress: Progress
) -> None:
    # Build to a temporary name in the same directory and rename: the rename
    # is atomic, so an interrupted build never leaves a truncated binary that
    # a later run would take for a finished one.
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    partial.parent.mkdir(parents=True, exist_ok=True)
    tags = [f"-tags={binary.tags}"] if binary.tags else []
    command = [
        go,
        "build",
        "-trimpath",
        *tags,
        "-ldflags=" + " ".join(["-s", "-w", *ldflags]),
        "-o",
        str(partial),
        binary.package,
    ]
    env = {
        **os.environ,
        # Static binaries like upstream's release builds; no C toolchain needed.
        "CGO_ENABLED": "0",
        # Never download a different Go toolchain behind the caller's back:
        # if go.mod ever needs a newer Go, fail with Go's own clear message.
        "GOTOOLCHAIN": "local",
    }
    started = time.monotonic()
    _log(progress.starting(binary))
    process = subprocess.Popen(
        command,
        cwd=binary.module_dir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        while True:
            try:
                output, _ = process.communicate(timeout=HEARTBEAT_SECONDS)
                break
            except subprocess.TimeoutExpired:
                _log(progress.still(binary, time.monotonic() - started))
    except BaseException:
        process.kill()
        process.wait()
        partial.unlink(missing_ok=True)
        raise
    if process.returncode != 0:
        partial.unlink(missing_ok=True)
        raise BuildFailed(f"go build {binary.package} failed:\n{output}")
    partial.replace(target)
    _log(f"built {binary.name} in {time.monotonic() - started:.0f}s")


def ensure_binaries() -> Path:
    """Build whatever binary is missing and return the directory holding all of them."""
    release = active_release()
    version = pinned_kubernetes_version(release.module_dir)
    directory = bin_dir(version)
    if all(_is_built(b, directory) for b in release.binaries):
        return directory
    go = _go_command()
    directory.mkdir(parents=True, exist_ok=True)
    build_date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    kubernetes_ldflags = version_ldflags(version, build_date)
    started = time.monotonic()
    with _exclusive(directory.parent / "build.lock"):
        missing = [b for b in release.binaries if not _is_built(b, directory)]
        if not missing:
            return directory  # built while this waited for the lock
        expected = sum(b.expected_minutes for b in missing)
        _log(
            f"building {', '.join(b.name for b in missing)} into {directory}: about "
            f"{_minutes(expected)} on two cores when Go's caches are cold, once per release"
        )
        for binary, progress in zip(missing, plan_progress(missing), strict=True):
            target = directory / binary.name
            if binary.pinned_module is None:
                _build_one(go, binary, target, kubernetes_ldflags, progress)
                continue
            pinned = required_version(binary.pinned_module, binary.module_dir)
            if binary.pinned_module in (HELM_MODULE, HELM3_MODULE):
                ldflags = helm_ldflags(pinned, binary.pinned_module)
            elif binary.pinned_module == PROMETHEUS_MODULE:
                ldflags = prometheus_ldflags(pinned, build_date)
            else:
                ldflags = []
            _build_one(go, binary, target, ldflags, progress)
            _version_stamp(binary, directory).write_text(pinned + "\n")
    _log(f"control plane {version} ready in {directory} ({time.monotonic() - started:.0f}s)")
    return directory


def oracle_path(oracle: Binary = ORACLE) -> Path:
    """Where an oracle lives: under a hash of its go.mod, go.sum and main.go, so that an
    edit of any of them builds it again."""
    digest = hashlib.sha256()
    for name in ORACLE_SOURCES:
        digest.update(f"{name}\0".encode() + (oracle.module_dir / name).read_bytes() + b"\0")
    return cache_root() / f"{oracle.name}-{digest.hexdigest()[:16]}" / oracle.name


def ensure_oracle(oracle: Binary = ORACLE) -> Path:
    """Build an oracle (the placement oracle unless told) unless built already, and
    return its path."""
    target = oracle_path(oracle)
    if target.is_file():
        return target
    go = _go_command()
    with _exclusive(target.parent / "build.lock"):
        if not target.is_file():
            _build_one(go, oracle, target, [], plan_progress([oracle])[0])
    return target


def main(argv: list[str] | None = None) -> int:
    """Build what is missing (the oracles first, quick builds) and print the
    control plane's directory. With ``--before-tests`` (what
    `make test` runs before pytest, so that a cold build shows its progress instead
    of sitting behind pytest's output capture) it follows ``GPU_ADMISSION_E2E`` as
    the tests do: nothing when off, and without Go a note rather than a failure
    unless the end-to-end tests are required."""
    before_tests = "--before-tests" in (sys.argv[1:] if argv is None else argv)
    mode = os.environ.get("GPU_ADMISSION_E2E", "").strip().lower()
    if before_tests and mode == "off":
        return 0
    try:
        for oracle in ORACLES:
            ensure_oracle(oracle)
        print(ensure_binaries())
    except GoToolchainMissing as error:
        _log(str(error))
        return 1 if mode == "required" or not before_tests else 0
    except BuildFailed as error:
        _log(str(error))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
