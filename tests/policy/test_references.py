"""The cross-field checks (webhook/policy/references.py) and the cap on problems
(webhook/policy/load.py): a policy of thousands of repeated names is refused as quickly
as it is read, with a bounded list of problems."""

from __future__ import annotations

import time

import pytest

from webhook.engine import RULES
from webhook.engine.serving import serving_engine
from webhook.errors import PolicyError
from webhook.policy.catalog import default_catalog
from webhook.policy.load import MAX_PROBLEMS, MAX_VALUES, default_policy_text
from webhook.policy.references import NAMES_LISTED, reference_problems

DUPLICATES = 20_000


def repeated_device_classes(repeats: int) -> str:
    """The default policy with DeviceClass lists of one name repeated (YAML keeps this,
    the last, `dra`)."""
    gpu, mig = ",".join(["a"] * repeats), ",".join(["b"] * repeats)
    return default_policy_text() + f"\ndra:\n  deviceClasses:\n    gpu: [{gpu}]\n    mig: [{mig}]\n"


def test_device_classes_repeated_thousands_of_times_are_checked_in_linear_time() -> None:
    data = {"dra": {"deviceClasses": {"gpu": ["a"] * DUPLICATES, "mig": ["a"] * DUPLICATES}}}

    started = time.perf_counter()
    found = reference_problems(data, default_catalog(), RULES.names)
    print(f"{len(found):,} problems in {time.perf_counter() - started:.3f} s")

    # Each list's repeats, and each MIG class also listed under gpu.
    assert len(found) == 2 * (DUPLICATES - 1) + DUPLICATES


def test_a_class_naming_thousands_of_pools_is_checked_in_linear_time() -> None:
    pools = {f"pool{n}": {} for n in range(DUPLICATES)}
    data = {
        "pools": pools,
        "classes": {
            "training": {
                "pools": ["missing"] * DUPLICATES + ["pool0"] * DUPLICATES,
                "preferredPools": [{"pool": "elsewhere"}] * DUPLICATES,
            }
        },
    }

    started = time.perf_counter()
    found = reference_problems(data, default_catalog(), RULES.names)
    print(f"{len(found):,} problems in {time.perf_counter() - started:.3f} s")

    assert len(found) == DUPLICATES + (DUPLICATES - 1) + DUPLICATES
    unknown = next(reason for _, reason in found if reason.startswith("unknown pool"))
    assert unknown.endswith(f"and {DUPLICATES - NAMES_LISTED:,} more")
    preferred = next(reason for _, reason in found if "not one of the class's pools" in reason)
    assert preferred.endswith("(missing, pool0)")


def test_a_policy_with_thousands_of_problems_carries_the_first_few_hundred_and_counts_all() -> None:
    repeats = 9_000

    with pytest.raises(PolicyError) as refused:
        serving_engine(repeated_device_classes(repeats), "policy.yaml")

    error = refused.value
    assert len(error.problems) == MAX_PROBLEMS
    assert error.count >= 2 * (repeats - 1)
    assert error.unlisted == error.count - MAX_PROBLEMS
    assert str(error).endswith(f"policy.yaml: and {error.unlisted:,} more problems")


def test_a_policy_longer_than_the_values_limit_is_refused_without_reading_it_all() -> None:
    with pytest.raises(PolicyError) as refused:
        serving_engine(repeated_device_classes(48_000), "policy.yaml")

    [problem] = refused.value.problems
    assert problem.reason == (
        f"not valid YAML: holds more than {MAX_VALUES:,} values; at most {MAX_VALUES:,}"
    )
