"""Effective GPU request as kube-scheduler computes it (webhook/engine/resources.py)."""

from __future__ import annotations

from decimal import Decimal

from tests.builders import container, pod
from webhook.engine.pod import read_pod
from webhook.engine.resources import effective_gpu_request, pod_requests_gpu
from webhook.policy import load_default_policy

POLICY = load_default_policy()


def effective(**spec: object) -> dict[str, Decimal]:
    return effective_gpu_request(POLICY, read_pod(pod(**spec), POLICY))


def test_app_containers_add_up_per_resource() -> None:
    assert effective(
        containers=[
            container("a", gpus=2),
            container("b", limits={"nvidia.com/gpu": "1", "nvidia.com/mig-1g.5gb": "3"}),
        ]
    ) == {"nvidia.com/gpu": Decimal(3), "nvidia.com/mig-1g.5gb": Decimal(3)}


def test_the_larger_of_init_and_app_wins() -> None:
    assert effective(
        initContainers=[container("prep", gpus=6)], containers=[container("a", gpus=2)]
    ) == {"nvidia.com/gpu": Decimal(6)}


def test_sidecars_count_with_the_app_and_with_later_init_containers() -> None:
    assert effective(
        initContainers=[
            container("early", gpus=4),
            container("side", gpus=1, restartPolicy="Always"),
            container("late", gpus=4),
        ],
        containers=[container("a", gpus=2)],
    ) == {"nvidia.com/gpu": Decimal(5)}


def test_a_limit_alone_counts_because_defaulting_copies_it() -> None:
    assert effective(containers=[container(limits={"nvidia.com/gpu": "2"})]) == {
        "nvidia.com/gpu": Decimal(2)
    }


def test_other_resources_do_not_count() -> None:
    assert effective(containers=[container(limits={"cpu": "2", "example.com/fpga": "1"})]) == {}


def test_a_zero_gpu_limit_is_no_gpu_but_an_unreadable_one_is() -> None:
    zero = read_pod(pod(containers=[container(limits={"nvidia.com/gpu": "0"})]), POLICY)
    odd = read_pod(pod(containers=[container(limits={"nvidia.com/gpu": "lots"})]), POLICY)
    assert (pod_requests_gpu(POLICY, zero), pod_requests_gpu(POLICY, odd)) == (False, True)
