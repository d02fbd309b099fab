"""YAML as people read it: the data's own key order, and no anchors for shared values."""

from __future__ import annotations

from typing import Any

import yaml


class _PlainDumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump_yaml(data: Any) -> str:
    return yaml.dump(data, Dumper=_PlainDumper, sort_keys=False, allow_unicode=True, width=100)
