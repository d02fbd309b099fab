"""Kueue's ResourceFlavors for the policy's pools, as YAML to apply
(``gpu-admission manifests kueue-flavors``): each flavor says what its pool's nodes say,
so that Kueue assigns it only to workloads whose templates tolerate the pool
(``webhook.engine.kueue_flavors`` says why, and what the audit finds in flavors that
drift from the policy)."""

from __future__ import annotations

import yaml

from webhook.engine.kueue_flavors import classes_of_pool, pool_flavors
from webhook.policy.compiled import Policy


def flavors_yaml(policy: Policy) -> str:
    """One YAML document per pool's flavor, each behind a comment naming the classes
    whose workloads Kueue can assign it to."""
    documents = []
    for pool, flavor in zip(policy.pools.values(), pool_flavors(policy), strict=True):
        classes = ", ".join(classes_of_pool(policy, pool)) or "none of the policy's classes"
        comment = (
            f"# Pool {pool.name}: workloads of {classes} tolerate its taints once their\n"
            "# templates are mutated; no flavor tolerations, or Kueue would give them to all.\n"
        )
        body = yaml.safe_dump(flavor, sort_keys=False, default_flow_style=False, width=100)
        documents.append(f"---\n{comment}{body}")
    return "".join(documents)
