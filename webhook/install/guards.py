"""The optional guards of deploy/guards/, written for a policy: what kube-apiserver itself
enforces around the webhooks, in the policy's words.

- ``admission-configuration.yaml``: kube-apiserver's ResourceQuota plugin limits the
  policy's PriorityClasses to namespaces granted them;
- ``gpu-priority-quota.yaml``: the grant, applied to each opted-in namespace;
- ``opt-in-label-policy.yaml``: a ValidatingAdmissionPolicy letting only named groups
  change the policy's opt-in label on namespaces.

Each names the policy's classes or opt-in label, so each is written from the policy:
deploy/guards/ holds the default policy's (``manifests sync``), and ``gpu-admission
manifests guards --policy FILE --output-dir DIR`` writes a team's. The names are put in
as YAML flow scalars: a class name is a DNS subdomain and a label key a qualified name,
neither of which YAML or CEL reads as anything else.
"""

from __future__ import annotations

import textwrap

from webhook.policy.compiled import Policy, PriorityClass

__all__ = ["GUARDS_COMMAND", "GUARD_FILES", "guard_files"]

GUARDS_COMMAND = "gpu-admission manifests guards --policy FILE --output-dir DIR"

ADMISSION_CONFIGURATION = """\
# kube-apiserver admission configuration: pods may use the GPU PriorityClasses only in
# namespaces that hold a ResourceQuota scoped to them (gpu-priority-quota.yaml).
#
{without}
#
# Not applied with kubectl: kube-apiserver reads it at start-up, from
#   kube-apiserver --admission-control-config-file=/etc/kubernetes/admission-configuration.yaml
# (kubeadm: apiServer.extraArgs plus an extraVolume for the file). If the apiserver
# already has an admission configuration (PodSecurity defaults, EventRateLimit, ...),
# add the ResourceQuota entry below to that file's `plugins` instead: there is only one.
# Managed control planes (EKS, GKE, AKS) usually do not take this flag; use the
# webhook's own priority check there.
#
{generated}
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
  - name: ResourceQuota
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: ResourceQuotaConfiguration
      limitedResources:
        - resource: pods
          matchScopes:
            - scopeName: PriorityClass
              operator: In
              values: [{classes}]
"""

PRIORITY_QUOTA = """\
# Lets the pods of one namespace use the GPU PriorityClasses, once kube-apiserver runs
# with admission-configuration.yaml. Apply it to each opted-in namespace, next to the
# label, as a cluster administrator:
#   kubectl label namespace NS {key}={value}
#   kubectl apply --namespace NS -f gpu-priority-quota.yaml
# Namespace admins cannot create ResourceQuotas (the built-in `admin` and `edit` roles
# only read them), so the grant stays with whoever may opt namespaces in.
#
# No `hard` limits: the quota only has to exist and match the classes. Add, say,
# `hard: {{pods: "50"}}` to also cap how many such pods the namespace may have.
#
{generated}
apiVersion: v1
kind: ResourceQuota
metadata:
  name: gpu-priority-classes
  labels:
    app.kubernetes.io/name: gpu-admission
spec:
  scopeSelector:
    matchExpressions:
      - scopeName: PriorityClass
        operator: In
        values: [{classes}]
"""

OPT_IN_LABEL_POLICY = """\
{only_named_groups}
#   kubectl apply -f opt-in-label-policy.yaml
# Needs Kubernetes 1.30 or later (ValidatingAdmissionPolicy v1), no webhook: kube-
# apiserver evaluates it in-process.
#
# The groups are `allowedGroups` below. system:masters is the kubeadm admin; add the
# group your platform team's credentials carry (an OIDC group, say), or the people who
# opt namespaces in are refused too, `gpu-admission install` included (it creates the
# gpu-admission namespace with the label set to "false"). Bind the group
# `gpu-admission:namespace-admins` (or yours) to whoever may opt namespaces in or out.
#
{generated_opt_in}
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: gpu-admission-opt-in-label
  labels:
    app.kubernetes.io/name: gpu-admission
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - apiGroups: [""]
        apiVersions: [v1]
        operations: [CREATE, UPDATE]
        resources: [namespaces]
  variables:
    - name: allowedGroups
      expression: "['system:masters', 'gpu-admission:namespace-admins']"
    - name: key
      expression: "'{key}'"
    - name: labelled
      expression: "has(object.metadata.labels) && variables.key in object.metadata.labels"
    - name: wasLabelled
      expression: >-
        oldObject != null && has(oldObject.metadata.labels) &&
        variables.key in oldObject.metadata.labels
    # Added, removed, or a new value.
    - name: changed
      expression: >-
        variables.labelled != variables.wasLabelled ||
        (variables.labelled &&
          object.metadata.labels[variables.key] != oldObject.metadata.labels[variables.key])
    - name: allowed
      expression: >-
        has(request.userInfo.groups) &&
        request.userInfo.groups.exists(group, group in variables.allowedGroups)
  validations:
    - expression: "!variables.changed || variables.allowed"
      reason: Forbidden
      messageExpression: >-
        'only members of ' + variables.allowedGroups.join(' or ') +
        ' may add, change or remove the label ' + variables.key +
        ' on a namespace (it decides whether gpu-admission enforces the GPU policy there); ' +
        'ask your platform team to opt this namespace in or out'
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: gpu-admission-opt-in-label
  labels:
    app.kubernetes.io/name: gpu-admission
spec:
  policyName: gpu-admission-opt-in-label
  validationActions: [Deny]
"""

GUARD_FILES = {
    "admission-configuration.yaml": ADMISSION_CONFIGURATION,
    "gpu-priority-quota.yaml": PRIORITY_QUOTA,
    "opt-in-label-policy.yaml": OPT_IN_LABEL_POLICY,
}
"""Each guard's file name, and its text with the policy's words left out."""


def guard_files(policy: Policy, source: str) -> dict[str, str]:
    """Each guard's file name and text for `policy`, read from `source` (named in the
    files' comment saying how they were made)."""
    key, value = policy.namespace_opt_in
    classes = [c.priority_class for c in policy.classes.values()]
    names = list(dict.fromkeys(c.name for c in classes))
    generated = (
        f"Written from {source} by `{GUARDS_COMMAND}`: write it again when the policy's "
        "classes or opt-in label change."
    )
    words = {
        "key": key,
        "value": value,
        "classes": ", ".join(names),
        "without": _comment(
            f"Without this, any pod anywhere may name {_class_phrase(classes)}; the webhooks "
            "only see opted-in namespaces. With it, kube-apiserver's own ResourceQuota "
            'plugin refuses such a pod ("insufficient quota to match these scopes") '
            "wherever no quota covers those classes, webhook or not."
        ),
        "generated": _comment(generated),
        "only_named_groups": _comment(
            f"Optional: only named groups may add, change or remove the opt-in label `{key}` "
            "on Namespaces. Everyone else's namespace CREATE or UPDATE that changes it is "
            "refused; every other change to a namespace passes untouched."
        ),
        "generated_opt_in": _comment(
            f"{generated} See deploy/README.md for the trade-off of opt-in."
        ),
    }
    return {name: template.format(**words) for name, template in GUARD_FILES.items()}


def _comment(text: str) -> str:
    """`text` as YAML comment lines of at most 90 characters."""
    return "\n".join(f"# {line}" for line in textwrap.wrap(text, 88, break_on_hyphens=False))


def _class_phrase(classes: list[PriorityClass]) -> str:
    """`a` (1,000,000, preempting) or `b` (100, never preempting): what a pod may borrow."""
    described = {
        c.name: f"`{c.name}` ({c.value:,}, "
        + ("never preempting" if c.preemption_policy == "Never" else "preempting")
        + ")"
        for c in classes
    }
    phrases = list(described.values())
    return ", ".join(phrases[:-1]) + " or " + phrases[-1] if len(phrases) > 1 else phrases[0]
