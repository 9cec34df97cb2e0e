"""Shared fixtures: the real engines, loaded once per test session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import settings

from rtc_server.engine_set import Engines

# Property tests draw the same examples on every run and every machine: a suite that fails
# by chance blocks everyone, and one that passes by chance hides a regression.
settings.register_profile("deterministic", derandomize=True, database=None)
settings.load_profile("deterministic")


@pytest.fixture(scope="session")
def agent_engines() -> Iterator[Engines]:
    """ASR, LLM, TTS and face on the embedded defaults (slow to load: share them)."""
    from rtc_server.engine_set import load_engines
    from testkit.agent import agent_config, patient

    engines = load_engines(patient(agent_config()))
    yield engines
    engines.close()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line: what was skipped and why (a skip is a check that did not run)."""
    reasons: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    if reasons:
        parts = "; ".join(f"{n} x {reason}" for reason, n in sorted(reasons.items()))
        terminalreporter.write_line(f"skipped {sum(reasons.values())}: {parts}")
    else:
        terminalreporter.write_line("skipped 0")
