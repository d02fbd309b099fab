"""The lengths Kubernetes allows label keys and values, which a pattern does not say.

A label key (and a taint key, an extended resource name) is a qualified name: a name
of at most 63 characters, after an optional DNS prefix of at most 253 and '/'. A label
value (and a taint value) has at most 63 characters. The model's patterns check the
characters; these check the lengths, so that a key no node or pod could carry is
refused when the policy loads, not when kube-apiserver refuses the object made of it.
"""

from __future__ import annotations

NAME_LIMIT = 63
PREFIX_LIMIT = 253
VALUE_LIMIT = 63


def qualified_name(key: str) -> str:
    """`key` if its lengths are those of a qualified name; raises ValueError otherwise."""
    prefix, _, name = key.rpartition("/")
    if len(name) > NAME_LIMIT:
        raise ValueError(
            f"{_cut(key)!r}: the name after the prefix has {len(name)} characters; "
            f"Kubernetes allows at most {NAME_LIMIT}"
        )
    if len(prefix) > PREFIX_LIMIT:
        raise ValueError(
            f"{_cut(key)!r}: the prefix before '/' has {len(prefix)} characters; "
            f"Kubernetes allows at most {PREFIX_LIMIT}"
        )
    return key


def label_value(value: str) -> str:
    """`value` if it is short enough for a label value; raises ValueError otherwise."""
    if len(value) > VALUE_LIMIT:
        raise ValueError(
            f"{_cut(value)!r} has {len(value)} characters; a label value has at most {VALUE_LIMIT}"
        )
    return value


def _cut(text: str) -> str:
    return text if len(text) <= NAME_LIMIT else f"{text[:NAME_LIMIT]}..."
