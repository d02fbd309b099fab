"""The Dockerfile and .dockerignore, checked without a container engine.

No engine builds images on the test machines, so these tests check what can
be checked: the Dockerfile parses (with the small parser below), pins its
base, runs as a numeric non-root user, installs the wheel its builder stage
makes from the project, and agrees with the Deployment on entrypoint and user.
The builder stage is replayed on the build context .dockerignore leaves, and
the wheel it makes is opened.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.specifiers import SpecifierSet

import webhook.service.logs
import webhook.service.serve
from webhook.cli.main import main
from webhook.policy import Policy
from webhook.service.serve import ServeSettings

REPOSITORY = Path(__file__).resolve().parents[2]
DOCKERFILE = REPOSITORY / "Dockerfile"
DOCKERIGNORE = REPOSITORY / ".dockerignore"
DEPLOYMENT = REPOSITORY / "deploy" / "base" / "deployment.yaml"
PYPROJECT = tomllib.loads((REPOSITORY / "pyproject.toml").read_text("utf-8"))

KEYWORDS = {
    "ADD", "ARG", "CMD", "COPY", "ENTRYPOINT", "ENV", "EXPOSE", "FROM", "HEALTHCHECK",
    "LABEL", "MAINTAINER", "ONBUILD", "RUN", "SHELL", "STOPSIGNAL", "USER", "VOLUME", "WORKDIR",
}  # fmt: skip
FLAGGED = {"ADD", "COPY", "FROM", "RUN", "HEALTHCHECK"}


class DockerfileError(ValueError):
    pass


@dataclass(frozen=True)
class Instruction:
    keyword: str
    flags: dict[str, str]
    arguments: str
    line: int

    def exec_form(self) -> list[str]:
        """The JSON array of ENTRYPOINT/CMD/RUN in exec form; an error in shell form."""
        if not self.arguments.startswith("["):
            raise DockerfileError(f"line {self.line}: {self.keyword} is not in exec form")
        value = json.loads(self.arguments)
        if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise DockerfileError(f"line {self.line}: {self.keyword} is not a list of strings")
        return value

    @property
    def words(self) -> list[str]:
        return shlex.split(self.arguments)


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def last(self, keyword: str) -> Instruction | None:
        found = self.all(keyword)
        return found[-1] if found else None


def logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(first line number, instruction text): comments dropped, continuations joined."""
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue  # comment lines end nothing, even inside a continuation
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending.append(stripped[:-1].strip())
            continue
        pending.append(stripped)
        yield start, " ".join(part for part in pending if part)
        pending = []
    if pending:
        raise DockerfileError(f"line {start}: continuation runs past the end of the file")


def parse_dockerfile(text: str) -> list[Stage]:
    """The stages of a Dockerfile; DockerfileError on what Docker would refuse."""
    stages: list[Stage] = []
    for number, line in logical_lines(text):
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword not in KEYWORDS:
            raise DockerfileError(f"line {number}: unknown instruction {keyword}")
        flags: dict[str, str] = {}
        rest = rest.strip()
        while keyword in FLAGGED and rest.startswith("--"):
            flag, _, rest = rest.partition(" ")
            key, _, value = flag[2:].partition("=")
            flags[key] = value
            rest = rest.strip()
        instruction = Instruction(keyword, flags, rest, number)
        if keyword == "FROM":
            words = instruction.words
            if len(words) not in (1, 3) or (len(words) == 3 and words[1].upper() != "AS"):
                raise DockerfileError(f"line {number}: FROM IMAGE [AS NAME] expected")
            stages.append(Stage(words[0], words[2] if len(words) == 3 else None))
        elif not stages:
            if keyword != "ARG":
                raise DockerfileError(f"line {number}: {keyword} before the first FROM")
        else:
            if keyword in ("CMD", "ENTRYPOINT") or rest.startswith("["):
                instruction.exec_form()  # parses the JSON form or raises
            stages[-1].instructions.append(instruction)
    if not stages:
        raise DockerfileError("no FROM instruction")
    return stages


STAGES = parse_dockerfile(DOCKERFILE.read_text("utf-8"))
BUILDER = next(s for s in STAGES if s.name == "builder")
RUNTIME = STAGES[-1]


def the_container() -> dict[str, Any]:
    deployment = yaml.safe_load(DEPLOYMENT.read_text("utf-8"))
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


class TestParser:
    def test_continuations_are_joined_and_comments_inside_them_dropped(self) -> None:
        [stage] = parse_dockerfile("FROM a:1\nRUN one \\\n# note\n    two\n")

        assert stage.instructions == [Instruction("RUN", {}, "one two", 2)]

    def test_flags_are_read_before_the_arguments(self) -> None:
        [stage] = parse_dockerfile("FROM a:1\nCOPY --from=b --chmod=0644 /x /y\n")

        assert stage.instructions[0].flags == {"from": "b", "chmod": "0644"}
        assert stage.instructions[0].arguments == "/x /y"

    @pytest.mark.parametrize(
        ("text", "problem"),
        [
            ("FROM a:1\nRUNN true\n", "line 2: unknown instruction RUNN"),
            ("USER 1\nFROM a:1\n", "line 1: USER before the first FROM"),
            ("FROM a:1\nRUN true \\\n", "line 2: continuation runs past the end"),
            ('FROM a:1\nENTRYPOINT ["x",]\n', "Expecting value"),
            ("FROM a:1\nENTRYPOINT x\n", "line 2: ENTRYPOINT is not in exec form"),
            ("FROM a:1 b\n", "line 1: FROM IMAGE [AS NAME] expected"),
            ("# only a comment\n", "no FROM instruction"),
        ],
    )
    def test_what_docker_would_refuse_is_an_error_naming_the_line(
        self, text: str, problem: str
    ) -> None:
        with pytest.raises(ValueError, match=re.escape(problem)):
            parse_dockerfile(text)


def test_the_dockerfile_has_a_builder_stage_and_a_runtime_stage() -> None:
    assert [s.name for s in STAGES] == ["builder", None]


def test_every_base_image_is_a_slim_python_pinned_by_version_or_digest() -> None:
    for stage in STAGES:
        image, _, digest = stage.base.partition("@")
        name, _, tag = image.partition(":")
        assert name in ("python", "docker.io/library/python"), stage.base
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest) or re.fullmatch(
            r"\d+\.\d+\.\d+-slim-[a-z]+", tag
        ), f"{stage.base} is not pinned to a patch release or a digest"


def test_the_base_python_satisfies_the_projects_requires_python() -> None:
    version = re.match(r"python:(\d+\.\d+\.\d+)", RUNTIME.base)
    assert version is not None, RUNTIME.base
    assert version.group(1) in SpecifierSet(PYPROJECT["project"]["requires-python"])
    assert BUILDER.base == RUNTIME.base


def test_the_builder_makes_wheels_of_the_project_and_its_dependencies_as_locked() -> None:
    [run] = BUILDER.all("RUN")
    assert run.words == ["pip", "wheel", "--wheel-dir", "/wheels", "-c", "requirements.lock", "."]
    workdir = BUILDER.last("WORKDIR")
    assert workdir is not None and workdir.arguments == "/src"


def test_the_runtime_installs_only_the_projects_wheel_from_the_builders_wheels() -> None:
    [run] = RUNTIME.all("RUN")
    mount = dict(part.split("=", 1) for part in run.flags["mount"].split(","))

    assert mount == {"type": "bind", "from": "builder", "source": "/wheels", "target": "/wheels"}
    assert run.words == [
        "pip", "install", "--no-index", "--find-links=/wheels", PYPROJECT["project"]["name"],
    ]  # fmt: skip
    assert RUNTIME.all("COPY") == RUNTIME.all("ADD") == []


def test_the_runtime_runs_as_a_numeric_non_root_user_the_deployment_also_runs_as() -> None:
    user = RUNTIME.last("USER")
    assert user is not None
    uid, _, gid = user.arguments.partition(":")
    assert uid.isdigit() and int(uid) != 0
    assert gid.isdigit() and int(gid) != 0
    context = the_container()["securityContext"]
    assert (context["runAsUser"], context["runAsGroup"]) == (int(uid), int(gid))


def test_the_image_is_labelled_with_its_title_license_version_and_revision() -> None:
    arguments = {
        i.arguments.partition("=")[0]: i.arguments.partition("=")[2]
        for i in RUNTIME.instructions
        if i.keyword == "ARG"
    }
    (label,) = [i.arguments for i in RUNTIME.instructions if i.keyword == "LABEL"]

    assert arguments["VERSION"] == PYPROJECT["project"]["version"]
    assert "REVISION" in arguments
    for key, value in (
        ("title", '"gpu-admission"'),
        ("licenses", f'"{PYPROJECT["project"]["license"]}"'),
        ("version", '"${VERSION}"'),
        ("revision", '"${REVISION}"'),
    ):
        assert f"org.opencontainers.image.{key}={value}" in label


def test_there_is_no_healthcheck_since_kubernetes_probes_the_service() -> None:
    assert [i for stage in STAGES for i in stage.all("HEALTHCHECK")] == []


def test_the_entrypoint_is_the_projects_command() -> None:
    entrypoint = RUNTIME.last("ENTRYPOINT")
    assert entrypoint is not None
    assert entrypoint.exec_form() == ["gpu-admission"]
    assert PYPROJECT["project"]["scripts"]["gpu-admission"] == "webhook.cli.main:main"


def test_the_image_serves_by_default_on_all_addresses() -> None:
    cmd = RUNTIME.last("CMD")
    assert cmd is not None
    assert cmd.exec_form() == ["serve", "--host", "0.0.0.0", "--port", "8443"]


def test_the_deployment_keeps_the_images_entrypoint_and_gives_serve_arguments() -> None:
    container = the_container()
    cmd = RUNTIME.last("CMD")
    assert cmd is not None

    assert "command" not in container
    assert container["args"][0] == cmd.exec_form()[0] == "serve"
    assert container["image"] == f"gpu-admission:{PYPROJECT['project']['version']}"


def test_the_deployments_arguments_are_accepted_by_the_command_it_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The args run `serve` with the mounted policy and certificate (moved under tmp_path)."""
    calls: list[tuple[Policy, ServeSettings]] = []
    monkeypatch.setattr(webhook.service.serve, "serve", lambda p, s: calls.append((p, s)))
    monkeypatch.setattr(webhook.service.logs, "configure_logging", lambda level: None)
    policy = tmp_path / "etc/gpu-admission/policy/policy.yaml"
    policy.parent.mkdir(parents=True)
    shutil.copy(REPOSITORY / "deploy" / "base" / "policy.yaml", policy)
    args = [
        str(tmp_path) + arg if arg.startswith("/etc/") else arg for arg in the_container()["args"]
    ]

    assert main(args) == 0

    [(served_policy, settings)] = calls
    assert served_policy.source == str(policy)
    assert settings == ServeSettings(
        host="0.0.0.0",
        port=8443,
        tls_cert=tmp_path / "etc/gpu-admission/tls/tls.crt",
        tls_key=tmp_path / "etc/gpu-admission/tls/tls.key",
        policy_file=policy,
        audit_interval=3600.0,
    )


# -- the build context and the wheel --------------------------------------------


def _pattern(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern (Go filepath.Match plus `**`) as a regular expression."""
    parts = re.split(r"(\*\*/|\*\*|\*|\?)", pattern.strip("/"))
    wildcards = {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}
    return re.compile("".join(wildcards.get(p, re.escape(p)) for p in parts))


def dockerignore_rules() -> list[tuple[bool, re.Pattern[str]]]:
    """(excludes, pattern) in file order; the last matching rule wins, as in Docker."""
    rules = []
    for line in DOCKERIGNORE.read_text("utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            rules.append((not line.startswith("!"), _pattern(line.lstrip("!"))))
    return rules


def in_build_context(path: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Whether `path` (relative, with /) is sent to the engine: a rule matching the
    path or one of its parent directories decides, the last one winning."""
    parts = path.split("/")
    prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    excluded = False
    for excludes, pattern in rules:
        if any(pattern.fullmatch(prefix) for prefix in prefixes):
            excluded = excludes
    return not excluded


def build_context(destination: Path) -> Path:
    """Copy the files .dockerignore lets through into `destination`."""
    rules = dockerignore_rules()
    for path in REPOSITORY.rglob("*"):
        relative = path.relative_to(REPOSITORY).as_posix()
        if relative.split("/")[0] in (".git", ".venv", ".mypy_cache", ".hypothesis"):
            continue  # excluded by `*` with no exception under them; skipped for speed
        if path.is_file() and not path.is_symlink() and in_build_context(relative, rules):
            target = destination / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    return destination


class TestBuildContext:
    @pytest.mark.parametrize(
        "path",
        [
            "pyproject.toml",
            "README.md",
            "requirements.lock",
            "webhook/cli/main.py",
            "webhook/policies/default.yaml",
            "deploy/base/webhooks.yaml",
        ],
    )
    def test_what_the_wheel_is_built_from_is_sent(self, path: str) -> None:
        assert in_build_context(path, dockerignore_rules())

    @pytest.mark.parametrize(
        "path",
        [
            ".venv/bin/python",
            ".git/config",
            "tests/cli/test_main.py",
            "deploy/overlays/cert-manager/certificates.yaml",
            "deploy/README.md",
            "webhook/__pycache__/cli.cpython-311.pyc",
            "webhook/dev.key",
            "certs/dev/ca.pem",
        ],
    )
    def test_everything_else_stays_out_keys_and_caches_included(self, path: str) -> None:
        assert not in_build_context(path, dockerignore_rules())

    def test_every_copy_of_the_builder_finds_its_sources_in_the_context(self) -> None:
        sources = [word for copy in BUILDER.all("COPY") for word in copy.words[:-1]]

        assert sources == [
            "pyproject.toml", "README.md", "requirements.lock", "webhook", "deploy/base"
        ]  # fmt: skip
        assert all(in_build_context(source, dockerignore_rules()) for source in sources)


def replay_builder_copies(context: Path, root: Path) -> Path:
    """Run the builder's COPY instructions from `context` into `root`; the WORKDIR."""
    workdir = BUILDER.last("WORKDIR")
    assert workdir is not None
    directory = root / workdir.arguments.lstrip("/")
    directory.mkdir(parents=True)
    for copy in BUILDER.all("COPY"):
        *sources, target = copy.words
        for source in sources:
            origin = context / source
            destination = directory / target
            if target.endswith("/"):
                destination = destination / origin.name
            if origin.is_dir():
                shutil.copytree(origin, destination)
            else:
                shutil.copy2(origin, destination)
    return directory


def test_the_builder_stage_makes_a_wheel_with_the_policies_and_the_command(
    tmp_path: Path,
) -> None:
    """The builder's COPYs on the .dockerignore'd context, then its `pip wheel`
    without dependencies (the build backend comes from PyPI, as in the image)."""
    source = replay_builder_copies(build_context(tmp_path / "context"), tmp_path / "image")
    wheels = tmp_path / "wheels"

    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(wheels), "."],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert build.returncode == 0, build.stdout + build.stderr

    [wheel] = wheels.glob("gpu_admission-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        [entry_points] = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        scripts = archive.read(entry_points).decode()
    for packaged in (
        "webhook/cli/main.py",
        "webhook/install/manifests.py",
        "webhook/py.typed",
        "webhook/policies/default.yaml",
        "webhook/policies/overflow.yaml",
        "webhook/policies/mig-profiles.yaml",
        "webhook/deploy/base/kustomization.yaml",
        "webhook/deploy/base/webhooks.yaml",
    ):
        assert packaged in names, packaged
    assert "gpu-admission = webhook.cli.main:main" in scripts
    assert not [n for n in names if n.startswith("tests/") or n.endswith((".key", ".pem"))]
