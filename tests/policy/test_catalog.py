"""The MIG profile catalog (webhook/policy/catalog.py, policies/mig-profiles.yaml)."""

from __future__ import annotations

import pytest

from webhook.errors import PolicyError
from webhook.policy.catalog import default_catalog, parse_catalog


@pytest.mark.parametrize(
    ("product", "profile", "most"),
    [
        ("A100-SXM4-40GB", "1g.5gb", 7),
        ("A100-SXM4-40GB", "1g.5gb.me", 1),
        ("A100-SXM4-40GB", "3g.20gb", 2),
        ("NVIDIA-A100-SXM4-80GB", "1g.10gb", 7),
        ("A100-SXM4-80GB", "7g.80gb", 1),
        ("A30", "1g.6gb", 4),
        ("NVIDIA-H100-80GB-HBM3", "1g.10gb", 7),
    ],
)
def test_the_catalog_knows_the_mig_profiles_of_the_guide(
    product: str, profile: str, most: int
) -> None:
    found = default_catalog().find(product)
    assert found is not None, product
    assert found.profiles[profile] == most


def test_a_40gb_a100_has_no_40gb_slices() -> None:
    found = default_catalog().find("A100-SXM4-40GB")
    assert found is not None and "3g.40gb" not in found.profiles


@pytest.mark.parametrize("product", ["V100-SXM2-32GB", "Tesla-T4", "NVIDIA-L4", "L40S", "A10"])
def test_gpus_without_mig_offer_no_profiles(product: str) -> None:
    found = default_catalog().find(product)
    assert found is not None, product
    assert (found.mig_capable, dict(found.profiles)) == (False, {})


@pytest.mark.parametrize("product", ["H200", "B200", "H100-NVL"])
def test_the_catalog_covers_newer_products(product: str) -> None:
    assert any(product.upper() in name for name in default_catalog().names())


def test_a_broken_catalog_names_the_entry() -> None:
    with pytest.raises(PolicyError, match=r"products\[0\]\.profiles"):
        parse_catalog({"products": [{"product": "X", "profiles": {"1g.5gb": "seven"}}]}, "c.yaml")
