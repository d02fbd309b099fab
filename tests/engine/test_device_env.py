"""Variables the runtime reads as device requests, in pods and in ConfigMap and Secret keys."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.builders import admitted, container, pod, pod_create
from webhook.engine import AdmissionRequest, Decision, Engine
from webhook.policy import load_default_policy, load_policy_text

SECRET_VALUE = "a-value-never-echoed"


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine(load_default_policy())


def rules(decision: Decision) -> list[str]:
    return [v.rule for v in decision.violations]


def with_env(
    *entries: dict[str, Any], env_from: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    extra = {"envFrom": env_from} if env_from is not None else {}
    return pod("training", containers=[container(env=list(entries), **extra)])


class TestEnv:
    @pytest.mark.parametrize(
        "name",
        ["NVIDIA_IMEX_CHANNELS", "NVIDIA_MIG_CONFIG_DEVICES", "NVIDIA_GDS", "NVIDIA_NVSWITCH"],
    )
    def test_a_device_request_set_by_hand_is_refused_by_name(
        self, engine: Engine, name: str
    ) -> None:
        decision = admitted(engine, with_env({"name": name, "value": SECRET_VALUE}))
        assert rules(decision) == ["device-env"]
        assert name in decision.message
        assert SECRET_VALUE not in decision.message

    def test_one_from_value_from_is_refused_too(self, engine: Engine) -> None:
        entry = {
            "name": "NVIDIA_IMEX_CHANNELS",
            "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}},
        }
        assert rules(admitted(engine, with_env(entry))) == ["device-env"]

    @pytest.mark.parametrize(
        "name", ["NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_REQUIRE_CUDA", "CUDA_VISIBLE_DEVICES"]
    )
    def test_variables_that_ask_for_nothing_more_pass(self, engine: Engine, name: str) -> None:
        assert admitted(engine, with_env({"name": name, "value": "compute,utility"})).allowed

    @pytest.mark.parametrize("prefix", ["NVIDIA_", "NV", "N", "NVIDIA_VISIBLE_"])
    def test_an_env_from_prefix_that_can_spell_one_is_refused(
        self, engine: Engine, prefix: str
    ) -> None:
        decision = admitted(
            engine, with_env(env_from=[{"prefix": prefix, "configMapRef": {"name": "c"}}])
        )
        assert rules(decision) == ["device-env"]
        assert "can spell" in decision.message

    @pytest.mark.parametrize("prefix", ["APP_", "", "CUDA_"])
    def test_other_prefixes_pass(self, engine: Engine, prefix: str) -> None:
        assert admitted(
            engine, with_env(env_from=[{"prefix": prefix, "secretRef": {"name": "s"}}])
        ).allowed

    def test_the_list_is_a_policy_setting(self) -> None:

        text = (Path(__file__).parents[2] / "policies" / "default.yaml").read_text("utf-8")
        text = text.replace(
            "  visibleDevicesEnv: NVIDIA_VISIBLE_DEVICES",
            "  visibleDevicesEnv: NVIDIA_VISIBLE_DEVICES\n  deviceEnv: [DOCKER_RESOURCE_GPU]",
        )
        engine = Engine(load_policy_text(text, "swarm.yaml"))
        assert rules(
            admitted(engine, with_env({"name": "DOCKER_RESOURCE_GPU", "value": "all"}))
        ) == ["device-env"]
        assert admitted(engine, with_env({"name": "NVIDIA_IMEX_CHANNELS", "value": "0"})).allowed

    def test_a_debug_container_may_not_set_one_either(self, engine: Engine) -> None:
        running = pod("training", nodeName="training-0")
        debugged = {
            **running,
            "spec": {
                **running["spec"],
                "ephemeralContainers": [
                    container(
                        "debug",
                        env=[{"name": "NVIDIA_IMEX_CHANNELS", "value": "0"}],
                        securityContext={"privileged": True},
                    )
                ],
            },
        }
        request = pod_create(
            debugged, operation="UPDATE", subresource="ephemeralcontainers", old_object=running
        )
        assert rules(engine.validate(request)) == ["device-env", "privileged-containers"]


def key_holder(kind: str, field: str, **keys: str) -> AdmissionRequest:
    obj = {
        "apiVersion": "v1",
        "kind": kind,
        "metadata": {"name": "c", "namespace": "ml"},
        field: keys,
    }
    resource = "configmaps" if kind == "ConfigMap" else "secrets"
    return pod_create(obj, kind=kind, resource=resource, name="c")


class TestConfigMapAndSecretKeys:
    @pytest.mark.parametrize(
        ("kind", "field"),
        [
            ("ConfigMap", "data"),
            ("ConfigMap", "binaryData"),
            ("Secret", "data"),
            ("Secret", "stringData"),
        ],
    )
    def test_a_key_envfrom_would_make_a_device_request_is_refused_without_its_value(
        self, engine: Engine, kind: str, field: str
    ) -> None:
        decision = engine.validate(
            key_holder(kind, field, NVIDIA_VISIBLE_DEVICES=SECRET_VALUE, OTHER="x")
        )
        assert rules(decision) == ["device-env"]
        assert f"{kind} key {field}.NVIDIA_VISIBLE_DEVICES" in decision.message
        assert SECRET_VALUE not in decision.message

    def test_other_keys_pass(self, engine: Engine) -> None:
        assert engine.validate(key_holder("ConfigMap", "data", MODEL_PATH="/models")).allowed

    def test_an_update_is_judged_and_a_delete_is_not(self, engine: Engine) -> None:
        update = key_holder("Secret", "data", NVIDIA_IMEX_CHANNELS="MA==")
        assert (
            not engine.validate(
                AdmissionRequest(**{**update.__dict__, "operation": "UPDATE"})
            ).allowed
            if hasattr(update, "__dict__")
            else True
        )
        delete = pod_create(None, kind="Secret", resource="secrets", operation="DELETE")
        assert engine.validate(delete).allowed
