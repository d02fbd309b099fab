"""The ConfigMaps and Secrets a pod's containers take whole with envFrom, judged at the
pod's CREATE by their key names (webhook/engine/env_references.py, rule device-env)."""

from __future__ import annotations

from typing import Any

from tests.builders import admitted, container, pod, pod_create
from webhook.engine import Engine
from webhook.engine.dra.claims import ClaimSource
from webhook.engine.dra.pod_claims import ClaimObjects
from webhook.engine.env_references import (
    CONFIG_MAP,
    SECRET,
    env_sources,
    key_names,
)
from webhook.policy import load_default_policy

ENGINE = Engine(load_default_policy())
SETTINGS = ClaimSource(CONFIG_MAP, "settings")
TOKENS = ClaimSource(SECRET, "tokens")


def taking(*env_from: dict[str, Any], label: str | None = "training") -> dict[str, Any]:
    return pod(label, containers=[container(envFrom=list(env_from))])


def whole(kind: str, name: str) -> dict[str, Any]:
    field = "configMapRef" if kind == CONFIG_MAP else "secretRef"
    return {field: {"name": name}}


def holding(*keys: str) -> dict[str, Any]:
    return key_names({"data": {key: "value" for key in keys}})


def test_the_objects_taken_whole_are_named_and_those_with_a_prefix_are_not() -> None:
    obj = taking(
        whole(CONFIG_MAP, "settings"),
        whole(SECRET, "tokens"),
        {"prefix": "APP_", "configMapRef": {"name": "prefixed"}},
    )

    assert env_sources(obj) == (SETTINGS, TOKENS)


def test_only_key_names_are_kept_of_what_is_read() -> None:
    read = {"data": {"NVIDIA_VISIBLE_DEVICES": "all"}, "binaryData": {"blob": "AA=="}}

    assert key_names(read) == {"keys": ["NVIDIA_VISIBLE_DEVICES", "blob"]}


def test_a_gpu_pods_create_reads_what_its_containers_take_whole() -> None:
    request = pod_create(taking(whole(CONFIG_MAP, "settings")))

    assert SETTINGS in ENGINE.claim_sources(request, handler="validate")


def test_a_configmap_holding_a_device_variable_taken_whole_is_refused() -> None:
    objects = ClaimObjects(found={SETTINGS: holding("NVIDIA_VISIBLE_DEVICES", "MODEL")})

    decision = admitted(ENGINE, taking(whole(CONFIG_MAP, "settings")), claims=objects)

    assert not decision.allowed
    assert "takes every key of ConfigMap 'settings'" in decision.message
    assert "NVIDIA_VISIBLE_DEVICES" in decision.message
    assert "envFrom[0]" in decision.message


def test_a_secret_holding_a_device_variable_is_refused_without_its_value() -> None:
    objects = ClaimObjects(found={TOKENS: holding("NVIDIA_IMEX_CHANNELS")})

    decision = admitted(ENGINE, taking(whole(SECRET, "tokens")), claims=objects)

    assert not decision.allowed
    assert "Secret 'tokens'" in decision.message
    assert "value" not in decision.message.split("NVIDIA_IMEX_CHANNELS")[1][:20]


def test_harmless_keys_pass() -> None:
    objects = ClaimObjects(found={SETTINGS: holding("MODEL", "BATCH_SIZE")})

    assert admitted(ENGINE, taking(whole(CONFIG_MAP, "settings")), claims=objects).allowed


def test_an_object_not_written_yet_is_judged_when_it_is_written() -> None:
    objects = ClaimObjects(missing=frozenset({SETTINGS}))

    assert admitted(ENGINE, taking(whole(CONFIG_MAP, "settings")), claims=objects).allowed


def test_an_object_that_could_not_be_read_refuses_the_gpu_pod_with_why() -> None:
    objects = ClaimObjects(unreadable={SETTINGS: "no answer from the cluster within 2 s"})

    decision = admitted(ENGINE, taking(whole(CONFIG_MAP, "settings")), claims=objects)

    assert not decision.allowed
    assert decision.outcome == "error"
    assert "no answer from the cluster within 2 s" in decision.message


def test_a_cpu_pod_that_cannot_reach_a_gpu_node_reads_nothing() -> None:
    request = pod_create(taking(whole(CONFIG_MAP, "settings"), label=None))

    assert ENGINE.claim_sources(request, handler="validate-unclassed") == ()
