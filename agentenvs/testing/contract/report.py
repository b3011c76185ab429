"""What the checker reports: one ``CheckResult`` per check, the ``ContractReport`` of an env,
``ContractError`` when it fails, and the exceptions a check raises to say how it ended."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentenvs.core.errors import AgentEnvsError


@dataclass
class CheckResult:
    """The outcome of one named check: ``passed`` is None when it was skipped.

    ``missing`` is set when the check does not apply to the env: it names the parts of
    the suite's interface the env lacks for it (``"snapshot"``, ``"turn_state"``,
    ``"error_action"``, ``"score_action"``, ``"info_keys"``, ``"budget_option"``,
    ``"task_id_option"``, ``"turn_rules"``), and ``detail`` says what they are and how
    to get them. Such a check is skipped, or failed under ``strict=True``.
    """

    name: str
    passed: bool | None
    detail: str = ""
    seconds: float = 0.0
    missing: tuple[str, ...] = ()

    @property
    def applicable(self) -> bool:
        return not self.missing

    @property
    def status(self) -> str:
        """``"passed"``, ``"failed"``, ``"skipped"`` or ``"not applicable"``."""
        if self.missing and self.passed is not True:
            return "not applicable"
        return {True: "passed", False: "failed", None: "skipped"}[self.passed]


_MARKS = {"passed": "ok  ", "failed": "FAIL", "skipped": "skip", "not applicable": "n/a "}


@dataclass
class ContractReport:
    """Every check's outcome for one env, and the warnings raised along the way."""

    target: str
    results: list[CheckResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(r.passed is not False for r in self.results)

    @property
    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if r.passed is False]

    @property
    def failure_names(self) -> list[str]:
        return [r.name for r in self.failures]

    @property
    def skipped(self) -> list[CheckResult]:
        """Checks that did not run: skipped, or not applicable (see ``not_applicable``)."""
        return [r for r in self.results if r.passed is None]

    @property
    def not_applicable(self) -> list[CheckResult]:
        """Checks the env lacks a part of the suite's interface for (failed if strict)."""
        return [r for r in self.results if r.missing]

    def result(self, name: str) -> CheckResult:
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(name)

    def summary(self) -> str:
        failed = len(self.failures)
        if failed:
            head = f"{failed} of {len(self.results)} checks failed"
        elif self.not_applicable:
            head = f"all applicable checks passed, {len(self.not_applicable)} not applicable"
        else:
            head = "all checks passed"
        lines = [f"env contract for {self.target}: {head}"]
        for r in self.results:
            lines.append(f"  {_MARKS[r.status]} {r.name} ({r.seconds:.2f}s)")
            if r.detail and r.passed is not True:
                lines.extend("         " + line for line in r.detail.splitlines())
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


class ContractError(AgentEnvsError, AssertionError):
    """An env broke its contract; ``report`` holds every check, ``failures`` the broken ones."""

    def __init__(self, report: ContractReport) -> None:
        self.report = report
        super().__init__(report.summary())

    @property
    def failures(self) -> list[CheckResult]:
        return self.report.failures

    @property
    def failure_names(self) -> list[str]:
        return self.report.failure_names


class Failed(Exception):
    """Raised inside a check with the problems found."""

    def __init__(self, problems: str | list[str]) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


class Skipped(Exception):
    """Raised inside a check that cannot run for this env, with the reason."""


def collect(problems: list[str]) -> None:
    """Raise ``Failed`` with the problems (the first dozen) if there are any."""
    if problems:
        shown = problems[:12]
        if len(problems) > len(shown):
            shown.append(f"... and {len(problems) - len(shown)} more")
        raise Failed(shown)
