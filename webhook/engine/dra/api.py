"""The names of Dynamic Resource Allocation's API, said once: its group and the version
the service reads, its kinds and their resources (plurals)."""

from __future__ import annotations

GROUP = "resource.k8s.io"
VERSION = "v1"
"""The version kube-apiserver stores claims in and the service reads and is sent."""

TEMPLATE = "ResourceClaimTemplate"
CLAIM = "ResourceClaim"
DEVICE_CLASS = "DeviceClass"

CLAIM_TEMPLATES = "resourceclaimtemplates"
CLAIMS = "resourceclaims"
RESOURCE_SLICES = "resourceslices"
DEVICE_CLASSES = "deviceclasses"

PLURALS = {TEMPLATE: CLAIM_TEMPLATES, CLAIM: CLAIMS}
"""The resource of each kind a pod names."""
