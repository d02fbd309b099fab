"""Talking to a cluster the way a person does: through the real kubectl.

Tests drive the cluster with ``kubectl apply`` and friends rather than a
client library, so what they prove is what a user at a terminal would see,
admission warnings and error messages included.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from .waiting import wait_for

T = TypeVar("T")

KUBECTL_TIMEOUT = 120.0


class KubectlFailed(subprocess.CalledProcessError):
    """kubectl exited non-zero; unlike CalledProcessError, says what kubectl printed."""

    def __str__(self) -> str:
        return f"{super().__str__()}\nstdout: {self.stdout}\nstderr: {self.stderr}"


class Cluster:
    """kubectl with a fixed kubeconfig, plus the waits that e2e tests need."""

    def __init__(self, kubectl_binary: Path, kubeconfig: Path, cache_dir: Path) -> None:
        self.kubectl_binary = kubectl_binary
        self.kubeconfig = kubeconfig
        # kubectl caches API discovery; keep it with this cluster, not in ~/.kube.
        self._cache_dir = cache_dir

    # -- running kubectl ---------------------------------------------------

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run ``kubectl --kubeconfig=... ARGS``; with ``check`` raise KubectlFailed
        on a non-zero exit. stdout and stderr are captured as text."""
        command = [
            str(self.kubectl_binary),
            f"--kubeconfig={self.kubeconfig}",
            f"--cache-dir={self._cache_dir}",
            *args,
        ]
        result = subprocess.run(
            command, input=input, capture_output=True, text=True, timeout=KUBECTL_TIMEOUT
        )
        if check and result.returncode != 0:
            raise KubectlFailed(result.returncode, command, result.stdout, result.stderr)
        return result

    def apply(
        self,
        yaml_text: str,
        namespace: str | None = None,
        dry_run: str | None = None,
        check: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        """``kubectl apply -f -`` with ``yaml_text`` on stdin. ``dry_run`` is kubectl's
        ``--dry-run`` value: ``server`` runs admission (webhooks included) without
        persisting. Pass ``check=False`` to look at a rejection's stderr."""
        args = ["apply", "-f", "-"]
        if namespace is not None:
            args += ["--namespace", namespace]
        if dry_run is not None:
            args.append(f"--dry-run={dry_run}")
        return self.kubectl(*args, input=yaml_text, check=check)

    def get_json(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        args = ["get", kind, name, "--output=json"]
        if namespace is not None:
            args += ["--namespace", namespace]
        document: dict[str, Any] = json.loads(self.kubectl(*args).stdout)
        return document

    def list_json(
        self, kind: str, namespace: str | None = None, selector: str | None = None
    ) -> list[dict[str, Any]]:
        args = ["get", kind, "--output=json"]
        args += ["--namespace", namespace] if namespace is not None else ["--all-namespaces"]
        if selector is not None:
            args.append(f"--selector={selector}")
        items: list[dict[str, Any]] = json.loads(self.kubectl(*args).stdout)["items"]
        return items

    def exists(self, kind: str, name: str, namespace: str | None = None) -> bool:
        args = ["get", kind, name, "--ignore-not-found", "--output=name"]
        if namespace is not None:
            args += ["--namespace", namespace]
        return bool(self.kubectl(*args).stdout.strip())

    # -- waiting -------------------------------------------------------------

    def wait_for(
        self, predicate: Callable[[], T | None], timeout: float = 30.0, what: str = "condition"
    ) -> T:
        return wait_for(predicate, timeout, what)

    def wait_for_binding(self, namespace: str, pod_name: str, timeout: float = 60.0) -> str:
        """Wait until the scheduler has bound the pod; return its node's name."""

        def node_name() -> str | None:
            pod = self.get_json("pod", pod_name, namespace)
            bound: str | None = pod["spec"].get("nodeName")
            return bound

        return wait_for(
            node_name,
            timeout,
            f"pod {namespace}/{pod_name} to be bound to a node",
            interval=0.5,
            describe_last=lambda: self._scheduling_events(namespace, pod_name),
        )

    def wait_for_bindings(
        self, namespace: str, selector: str, count: int, timeout: float = 60.0
    ) -> list[str]:
        """Wait until ``count`` pods matching ``selector`` are bound; return their node
        names in the order of the pod names."""

        def node_names() -> list[str] | None:
            pods = sorted(
                self.list_json("pods", namespace, selector), key=lambda p: p["metadata"]["name"]
            )
            nodes = [p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")]
            return nodes if len(pods) == count and len(nodes) == count else None

        return wait_for(
            node_names,
            timeout,
            f"{count} pods matching {selector!r} in {namespace} to be bound",
            interval=0.5,
            describe_last=lambda: (
                self.kubectl(
                    "get", "pods", "-n", namespace, "-l", selector, "-o", "wide", check=False
                ).stdout
            ),
        )

    def events_for(self, namespace: str, name: str) -> list[dict[str, Any]]:
        """Events about the object called ``name`` in ``namespace``, oldest first."""
        events = [
            event
            for event in self.list_json("events", namespace)
            if event.get("involvedObject", {}).get("name") == name
        ]
        return sorted(events, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")

    def wait_for_event(
        self, namespace: str, name: str, reason: str, timeout: float = 60.0
    ) -> dict[str, Any]:
        """Wait for an event with ``reason`` (e.g. FailedScheduling) about ``name``."""

        def matching() -> dict[str, Any] | None:
            found = [e for e in self.events_for(namespace, name) if e.get("reason") == reason]
            return found[-1] if found else None

        return wait_for(
            matching,
            timeout,
            f"a {reason} event for {namespace}/{name}",
            interval=0.5,
            describe_last=lambda: self._scheduling_events(namespace, name),
        )

    def _scheduling_events(self, namespace: str, name: str) -> str:
        lines = [f"{e.get('reason')}: {e.get('message')}" for e in self.events_for(namespace, name)]
        return "events: " + ("; ".join(lines) if lines else "none")

    # -- namespaces and pods -------------------------------------------------

    def create_namespace(self, name: str, labels: dict[str, str] | None = None) -> str:
        """Create (or update) a namespace and wait until pods can be created in it.

        The ServiceAccount admission plugin rejects pods until the controller-
        manager has created the namespace's ``default`` ServiceAccount, which
        takes a moment after the namespace appears.
        """
        namespace = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": labels or {}},
        }
        self.apply(json.dumps(namespace))
        wait_for(
            lambda: self.exists("serviceaccount", "default", name),
            30.0,
            f"the default ServiceAccount of namespace {name}",
        )
        return name

    def finish_pod_deletion(self, namespace: str, name: str, timeout: float = 30.0) -> None:
        """Delete a pod and make it go away now.

        A pod that was bound to a node is deleted gracefully: the apiserver only
        sets deletionTimestamp and waits for the node's kubelet to stop the
        containers and then delete the pod for good with gracePeriodSeconds=0.
        There is no kubelet here, so the pod would stay Terminating forever; this
        sends that final delete itself (kubectl's --grace-period=0 --force).
        """
        self.kubectl(
            "delete",
            "pod",
            name,
            "--namespace",
            namespace,
            "--grace-period=0",
            "--force",
            "--ignore-not-found",
            "--wait=false",
        )
        wait_for(
            lambda: not self.exists("pod", name, namespace),
            timeout,
            f"pod {namespace}/{name} to be gone",
        )

    def finish_terminating_pods(self, namespace: str, timeout: float = 30.0) -> None:
        """Finish the deletion of every pod in ``namespace`` that is Terminating,
        e.g. after deleting its Deployment or the namespace itself."""
        for pod in self.list_json("pods", namespace):
            if pod["metadata"].get("deletionTimestamp"):
                self.finish_pod_deletion(namespace, pod["metadata"]["name"], timeout)

    def delete_namespace(self, name: str, timeout: float = 60.0, wait: bool = True) -> None:
        """Delete a namespace, finishing pod deletions on the way (the namespace
        controller waits for them as it would for a kubelet).

        Its pods, and so the node resources they held, are gone when this
        returns. With ``wait`` it also waits (about 5 s) until the namespace
        itself is gone, which matters only to reuse the name.
        """
        self.kubectl("delete", "namespace", name, "--ignore-not-found", "--wait=false")
        # The namespace controller acts 5 s after the deletion. Pods still there
        # then make it wait half their grace period (16 s by default) before it
        # looks again, so remove them all now; a Terminating namespace admits
        # no new pods, so controllers cannot bring them back.
        self.kubectl(
            "delete",
            "pods",
            "--all",
            "--namespace",
            name,
            "--grace-period=0",
            "--force",
            "--wait=false",
        )
        if not wait:
            return

        def gone() -> bool:
            if not self.exists("namespace", name):
                return True
            self.finish_terminating_pods(name)
            return False

        wait_for(gone, timeout, f"namespace {name} to be deleted", interval=0.5)

    def delete(self, kind: str, names: Sequence[str], namespace: str | None = None) -> None:
        args = ["delete", kind, *names, "--ignore-not-found", "--wait=false"]
        if namespace is not None:
            args += ["--namespace", namespace]
        self.kubectl(*args)
