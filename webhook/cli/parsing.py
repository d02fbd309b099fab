"""The argument parser of every command: kubectl's conventions, in one place.

- An unknown option is refused by the command it was given to, with that command's
  usage (argparse's own subparsers leave it to the top-level parser, whose usage says
  nothing of the command's options).
- Every `--help` shows each option's default: `(default: ...)` is added to the help of
  an option with a default of note, unless its help already speaks of one.
- Files are named as kubectl names them: as arguments, with `-f/--filename` (as often
  as needed), `-` for standard input, a folder for the files under it (`file_names`).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

__all__ = ["CommandParser", "add_file_arguments", "file_names"]


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Adds `(default: X)` to an option's help, as ArgumentDefaultsHelpFormatter does, but
    not to a help that already says its default, nor for a default of nothing (None,
    False, an empty list), which says nothing."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help
        if text is None or "default" in text or not action.option_strings:
            return text
        if action.default in (None, False, argparse.SUPPRESS, [], ()):
            return text
        return f"{text} (default: %(default)s)"


class RawDescriptionDefaultsHelpFormatter(
    DefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter
):
    """The same, with the description and epilog kept as written (line for line)."""


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser whose subcommands refuse an unknown option themselves, and whose
    help shows defaults."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.files_required_unless: str | None = None
        """Set by `add_file_arguments`: files must be named, unless this option is given."""
        given = kwargs.get("formatter_class", argparse.HelpFormatter)
        if issubclass(given, argparse.RawDescriptionHelpFormatter):
            kwargs["formatter_class"] = RawDescriptionDefaultsHelpFormatter
        elif given is argparse.HelpFormatter:
            kwargs["formatter_class"] = DefaultsHelpFormatter
        super().__init__(*args, **kwargs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        # A subcommand's parser is called with parse_known_args by its parent: what it does
        # not know is refused here, with this command's usage, not the top-level one's.
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        unless = self.files_required_unless
        if unless is not None and not file_names(parsed) and not getattr(parsed, unless, False):
            self.error("the following arguments are required: FILE (or -f FILE; - for stdin)")
        return parsed, extras


def add_file_arguments(
    parser: argparse.ArgumentParser, help_text: str, many: bool = True, unless: str = "help"
) -> None:
    """FILE arguments and `-f/--filename FILE` (repeatable): both name files to read, `-`
    for standard input; `file_names(args)` is every one, in the order given. At least one
    is required, unless the option whose dest is `unless` is given."""
    if isinstance(parser, CommandParser):
        parser.files_required_unless = unless
    parser.add_argument(
        "files", nargs="*", metavar="FILE", help=f"{help_text}; - for standard input"
    )
    parser.add_argument(
        "-f",
        "--filename",
        dest="filenames",
        action="append",
        default=[],
        metavar="FILE",
        help="the same, as kubectl names files" + (" (repeatable)" if many else ""),
    )


def file_names(args: argparse.Namespace) -> list[str]:
    """The files named by `-f/--filename` and as arguments, in the order of each."""
    return [*args.filenames, *args.files]
