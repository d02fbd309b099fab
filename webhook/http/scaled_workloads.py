"""The workload an autoscaler under review targets, read from the cluster for its warning.

The engine says what an autoscaler scales (``Engine.scale_target``); reading that
workload is a blocking call into the cluster, run in a worker thread and given up on
after ``seconds``. A read that fails or takes too long costs the autoscaler its warning,
never its admission: it is logged and the review goes on without the workload.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fastapi.concurrency import run_in_threadpool

from webhook.engine import AdmissionRequest, Engine
from webhook.engine.autoscalers import ScaleTarget
from webhook.engine.templates import TemplateKind

log = logging.getLogger("gpu_admission.http")

ScaledWorkloads = Callable[[ScaleTarget, tuple[TemplateKind, ...]], Mapping[str, Any] | None]
"""Reads the workload an autoscaler targets (a blocking call, run in a worker thread)."""


@dataclass(frozen=True)
class ScaledWorkload:
    """An autoscaler's target, and the workload it names as the cluster has it (None when
    it could not be read)."""

    target: ScaleTarget
    workload: Mapping[str, Any] | None


@dataclass(frozen=True)
class ScaledWorkloadReader:
    """Reads the workload of each autoscaler under review with ``read``, waiting at most
    ``seconds`` for it."""

    read: ScaledWorkloads
    seconds: float

    async def scaled(self, engine: Engine, request: AdmissionRequest) -> ScaledWorkload | None:
        """What the autoscaler under review scales, worked out once, and the workload as the
        cluster has it (None when it cannot be read in time); None when ``request`` is not
        of an autoscaler."""
        target = engine.scale_target(request)
        if target is None:
            return None
        try:
            found = await asyncio.wait_for(
                run_in_threadpool(self.read, target, engine.kinds), self.seconds
            )
        except Exception as error:
            log.warning(
                "cannot read the workload an autoscaler targets; admitted without a look",
                extra={
                    "uid": request.uid,
                    "target": f"{target.kind}/{target.name}",
                    "namespace": target.namespace,
                    "reason": str(error) or type(error).__name__,
                },
            )
            found = None
        return ScaledWorkload(target, found)

    async def workload(self, engine: Engine, request: AdmissionRequest) -> Mapping[str, Any] | None:
        """The workload the autoscaler under review targets; None when ``request`` is not
        of an autoscaler, or its target cannot be read in time."""
        scaled = await self.scaled(engine, request)
        return None if scaled is None else scaled.workload
