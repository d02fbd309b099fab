"""The placement oracle's client: one Go process per test session, asked in batches.

Each question is a pod and the nodes of a cluster, one JSON line; each answer, one line
back, says on which of the nodes kube-scheduler's own node affinity and taint filters
let the pod land. Questions are written a batch at a time and the answers read after, so
a batch costs one round trip through the pipes; batches are cut small enough that the
answers never fill the pipe while the questions are still being written.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import orjson

Json = dict[str, Any]

BATCH = 64
"""Questions written before their answers are read: at most a few KiB of answers."""


class OracleFailed(RuntimeError):
    """The oracle could not answer: it could not read a question, or it is gone."""


class PlacementOracle:
    def __init__(self, binary: Path) -> None:
        self.process = subprocess.Popen(
            [str(binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )

    def placeable(self, questions: Sequence[tuple[Json, Sequence[Json]]]) -> list[list[bool]]:
        """For each (pod, nodes): whether the pod may land on each of the nodes."""
        answers: list[list[bool]] = []
        for start in range(0, len(questions), BATCH):
            answers += self._ask(questions[start : start + BATCH])
        return answers

    def _ask(self, questions: Sequence[tuple[Json, Sequence[Json]]]) -> list[list[bool]]:
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        lines = b"".join(
            orjson.dumps({"pod": pod, "nodes": list(nodes)}) + b"\n" for pod, nodes in questions
        )
        try:
            stdin.write(lines)
            stdin.flush()
        except BrokenPipeError as error:
            raise OracleFailed(f"the oracle has gone: {self._exit()}") from error
        answers = []
        for pod, nodes in questions:
            line = stdout.readline()
            if not line:
                raise OracleFailed(f"the oracle has gone: {self._exit()}")
            answer: Mapping[str, Any] = orjson.loads(line)
            if answer.get("error") or len(answer.get("placeable") or ()) != len(nodes):
                raise OracleFailed(f"the oracle could not answer for {pod!r}: {answer!r}")
            answers.append(list(answer["placeable"]))
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

    def __enter__(self) -> PlacementOracle:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
