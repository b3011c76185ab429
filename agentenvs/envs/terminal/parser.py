"""Terminal-Bench's pytest parser (``terminal_bench/parsers/pytest_parser.py``), reproduced.

The test run's output is split at the first ``short test summary info`` banner (which
``pytest -rA`` prints with a line per test); each following line ``STATUS path::name``
gives one test. PASSED, SKIPPED and XFAIL count as passed; FAILED, ERROR and XPASS as
failed; any other line is ignored. No banner is a parse error (never a pass). As
officially, a test's key is the part after the first ``::`` and a FAILED line's
`` - message`` tail is cut; an empty result (a banner with no test lines) is *resolved*,
since ``all([])`` is true in the official harness.
"""

from __future__ import annotations

import re

SUMMARY_BANNER = re.compile(r"=+\s*short test summary info\s*=+", re.IGNORECASE)
PASSING = frozenset({"PASSED", "SKIPPED", "XFAIL"})
FAILING = frozenset({"FAILED", "ERROR", "XPASS"})
_FAILED_DELIMITER = " - "


class ParseError(ValueError):
    """The test output has no ``short test summary info`` section."""


def _clean_line(line: str) -> str:
    if line.startswith("FAILED"):
        parts = line.split(_FAILED_DELIMITER)
        if len(parts) > 1:
            line = _FAILED_DELIMITER.join(parts[:-1])
    return line


def _parse_line(line: str) -> tuple[str, bool] | None:
    parts = _clean_line(line).split(maxsplit=1)
    if len(parts) <= 1:
        return None
    status = parts[0].strip().strip(":")
    if status not in PASSING and status not in FAILING:
        return None
    name = parts[1].strip().split("::", maxsplit=1)[-1]
    if not name:
        return None
    return name, status in PASSING


def parse_pytest(output: str) -> dict[str, bool]:
    """Test name -> passed, from ``pytest -rA`` output; ParseError without a summary."""
    parts = SUMMARY_BANNER.split(output, maxsplit=1)
    if len(parts) < 2:
        raise ParseError("no short test summary info found in the test output")
    results: dict[str, bool] = {}
    for line in parts[1].splitlines():
        parsed = _parse_line(line)
        if parsed is not None:
            results[parsed[0]] = parsed[1]
    return results


def is_resolved(results: dict[str, bool]) -> bool:
    """The official verdict: every parsed test passed (vacuously true when none parsed)."""
    return all(results.values())
