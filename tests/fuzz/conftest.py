"""The fuzz runs' report: how many inputs, what became of them, the slowest reply."""

from __future__ import annotations

from _pytest.terminal import TerminalReporter

from tests.fuzz.invariants import TALLY


def pytest_terminal_summary(terminalreporter: TerminalReporter) -> None:
    lines = TALLY.report()
    if lines:
        terminalreporter.section("fuzz")
        for line in lines:
            terminalreporter.write_line(line)
