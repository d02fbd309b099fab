"""The oracles' clients: one Go process per test session each, asked in batches.

Each question is one JSON line, each answer one line back. Questions are written a batch
at a time and the answers read after, so a batch costs one round trip through the pipes;
batches are cut small enough that the answers never fill the pipe while the questions
are still being written.

The placement oracle says, for a pod and the nodes of a cluster, on which of the nodes
kube-scheduler's own node affinity and taint filters let the pod land.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import orjson

Json = dict[str, Any]

BATCH = 64
"""Questions written before their answers are read: at most a few KiB of answers."""


class OracleFailed(RuntimeError):
    """The oracle could not answer: it could not read a question, or it is gone."""


class OracleProcess:
    """A Go oracle running for a test session, asked JSON lines."""

    def __init__(self, binary: Path) -> None:
        self.process = subprocess.Popen(
            [str(binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )

    def ask(self, questions: Sequence[Json]) -> list[Mapping[str, Any]]:
        """The answer to each question; OracleFailed for one it could not answer."""
        answers: list[Mapping[str, Any]] = []
        for start in range(0, len(questions), BATCH):
            answers += self._ask(questions[start : start + BATCH])
        return answers

    def _ask(self, questions: Sequence[Json]) -> list[Mapping[str, Any]]:
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        try:
            stdin.write(b"".join(orjson.dumps(question) + b"\n" for question in questions))
            stdin.flush()
        except BrokenPipeError as error:
            raise OracleFailed(f"the oracle has gone: {self._exit()}") from error
        answers = []
        for question in questions:
            line = stdout.readline()
            if not line:
                raise OracleFailed(f"the oracle has gone: {self._exit()}")
            answer: Mapping[str, Any] = orjson.loads(line)
            if answer.get("error"):
                raise OracleFailed(f"the oracle could not answer {question!r}: {answer!r}")
            answers.append(answer)
        return answers

    def _exit(self) -> str:
        try:
            return f"exit code {self.process.wait(timeout=5)}"
        except subprocess.TimeoutExpired:
            return "still running, but not answering"

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class PlacementOracle(OracleProcess):
    def placeable(self, questions: Sequence[tuple[Json, Sequence[Json]]]) -> list[list[bool]]:
        """For each (pod, nodes): whether the pod may land on each of the nodes."""
        answers = self.ask([{"pod": pod, "nodes": list(nodes)} for pod, nodes in questions])
        placeable = []
        for (pod, nodes), answer in zip(questions, answers, strict=True):
            if len(answer.get("placeable") or ()) != len(nodes):
                raise OracleFailed(f"the oracle could not answer for {pod!r}: {answer!r}")
            placeable.append(list(answer["placeable"]))
        return placeable
