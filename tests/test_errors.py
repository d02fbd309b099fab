"""One tree of exceptions (webhook/errors.py): every exception class the project defines
derives from ``GpuAdmissionError``, so a caller can tell what it raised on purpose from a
bug."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import webhook
from webhook.errors import GpuAdmissionError


def defined_exceptions() -> list[type[BaseException]]:
    found = []
    for module_info in pkgutil.walk_packages(webhook.__path__, "webhook."):
        if module_info.name.endswith("__main__"):
            continue  # runs the command
        module = importlib.import_module(module_info.name)
        found.extend(
            obj
            for obj in vars(module).values()
            if inspect.isclass(obj)
            and issubclass(obj, BaseException)
            and obj.__module__ == module.__name__
        )
    return found


def test_every_exception_of_the_project_derives_from_its_root_error() -> None:
    exceptions = defined_exceptions()

    assert len(exceptions) > 20
    assert [e.__qualname__ for e in exceptions if not issubclass(e, GpuAdmissionError)] == []
