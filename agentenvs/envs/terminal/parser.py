"""Terminal-Bench's test-output parsers (``terminal_bench/parsers/``), reproduced.

A TB1 task names its parser in ``task.yaml`` (``parser_name``, default ``pytest``);
:data:`PARSERS` holds every one the official harness has, :func:`parse_results` runs the
task's. ``swebench``, ``sweperf`` and ``mlebench`` are marker scrapes: the text between the
first ``<Name> results starts here`` and the last ``<Name> results ends here`` line, stripped,
is one synthetic test ``tests``, passed only when it is exactly ``PASSED`` (``ALL TESTS
PASSED`` for mlebench); either marker missing is a parse error (never a pass). The task's
own ``run-tests.sh`` prints the markers around its grader's verdict (SWE-bench's
harness, in the image).

pytest: the test run's output is split at the first ``short test summary info`` banner (which
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


#: marker-scrape parsers: name -> (the markers' dataset name, the block that passes)
MARKER_PARSERS: dict[str, tuple[str, str]] = {
    "swebench": ("SWEBench", "PASSED"),
    "sweperf": ("SWE-Perf", "PASSED"),
    "mlebench": ("MLEBench", "ALL TESTS PASSED"),
}


def parse_markers(output: str, dataset: str, passing: str) -> dict[str, bool]:
    """``{"tests": passed}`` from the block between the markers; ParseError without them."""
    start, end = f"{dataset} results starts here", f"{dataset} results ends here"
    if start not in output or end not in output:
        raise ParseError(f"no {dataset} results between the start/end markers in the output")
    block = output.split(start, 1)[-1].rsplit(end, 1)[0].strip()
    return {"tests": block == passing}


#: every parser of the official harness (``ParserName``) this project reproduces
PARSERS = ("pytest", *MARKER_PARSERS)


def parse_results(parser_name: str, output: str) -> dict[str, bool]:
    """Test name -> passed, by the task's parser; ParseError when the output has none."""
    if parser_name == "pytest":
        return parse_pytest(output)
    if parser_name in MARKER_PARSERS:
        return parse_markers(output, *MARKER_PARSERS[parser_name])
    raise ValueError(f"unknown parser {parser_name!r} (known: {', '.join(PARSERS)})")
