"""The MIG profile catalog: which MIG profiles each GPU product offers.

The data ships as `policies/mig-profiles.yaml`, transcribed from NVIDIA's MIG
user guide (the file names its source). Product names are matched without
regard to case and to a leading `NVIDIA-`, so both `A100-SXM4-40GB` and GPU
Feature Discovery's `NVIDIA-A100-SXM4-40GB` find the same entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import yaml

from webhook.errors import PolicyError
from webhook.policy.shipped import shipped_text

CATALOG_RESOURCE = "mig-profiles.yaml"


@dataclass(frozen=True, slots=True)
class GpuProduct:
    product: str
    memory_gib: int | None
    mig_capable: bool
    profiles: Mapping[str, int]
    """MIG profile as named in resources (e.g. `1g.5gb`, `1g.5gb.me`) -> most per GPU."""


@dataclass(frozen=True, slots=True)
class MigCatalog:
    products: Mapping[str, GpuProduct]
    """Normalised product name or alias -> product."""

    def find(self, product: str) -> GpuProduct | None:
        return self.products.get(normalise_product(product))

    def names(self) -> list[str]:
        return sorted({p.product for p in self.products.values()})


def normalise_product(name: str) -> str:
    name = name.strip().upper().replace(" ", "-")
    return name.removeprefix("NVIDIA-")


def parse_catalog(data: Any, source: str) -> MigCatalog:
    if not isinstance(data, dict) or not isinstance(data.get("products"), list):
        raise PolicyError(source, "products", "expected a list of GPU products")
    products: dict[str, GpuProduct] = {}
    for index, entry in enumerate(data["products"]):
        path = f"products[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("product"), str):
            raise PolicyError(source, path, "expected a mapping with a 'product' name")
        profiles = entry.get("profiles") or {}
        if not isinstance(profiles, dict) or not all(
            isinstance(k, str) and isinstance(v, int) and v > 0 for k, v in profiles.items()
        ):
            raise PolicyError(source, f"{path}.profiles", "expected profile: max instances (> 0)")
        product = GpuProduct(
            product=entry["product"],
            memory_gib=entry.get("memory_gib"),
            mig_capable=bool(entry.get("mig", False)),
            profiles=dict(profiles),
        )
        for name in [entry["product"], *entry.get("aliases", [])]:
            products[normalise_product(str(name))] = product
    return MigCatalog(products=products)


@cache
def default_catalog() -> MigCatalog:
    text = shipped_text(CATALOG_RESOURCE)
    return parse_catalog(yaml.safe_load(text), f"policies/{CATALOG_RESOURCE}")
