"""What a machine can run of whole Terminal-Bench datasets, and why not the rest.

:func:`survey` loads each dataset folder (a folder of task folders, TB1 or Harbor layout)
in a :class:`TerminalBenchEnv` and asks its ``check_tasks``: each task is *accepted* (it
runs, perhaps on a stand-in base that differs: ``stood_in``), *refused* with its unmet
need, or *invalid* (its files do not load: file and field). ``agentenvs check-tasks`` prints
the result as a table with the commonest reasons, and as JSON per task.

Each task's solution and tests are also read for the commands that reach past this
machine (``needs.network_warnings``): they are *warnings* (``file:line: command``) printed
under the table; without network they are part of the task's refusal instead.

A task whose Dockerfile ``COPY``/``ADD`` reads a source outside its build context (``..``
past its root) or missing from it (an absolute source is read from the context's root), or
has a step that starts with an instruction Docker's parser does not know, is *invalid*,
with the Dockerfile's path and line: no machine builds it (``needs.unbuildable``; the env's
``check_tasks`` moves it to ``invalid_tasks``, so both say the same).

A reason names the task's own files and images; to count alike reasons together, the
quoted names in it are replaced by ``…`` (:func:`reason_kind`).
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: quoted names, paths of task folders and numbers in a reason (what differs per task)
_PARTICULAR = re.compile(r"'[^']*'|\"[^\"]*\"|(?<![\w.])/[\w./-]+|\b\d+(?:\.\d+)*\b")


#: warnings printed under the table (all of them are in the JSON)
WARNINGS_SHOWN = 40


def reason_kind(reason: str) -> str:
    """``reason`` with what is particular to its task replaced by ``…``."""
    first = (reason.splitlines() or [""])[0]
    return _PARTICULAR.sub("…", first)[:160]


@dataclass
class DatasetSurvey:
    """One dataset folder: its task folders and what became of each."""

    path: str
    folders: int
    accepted: list[str] = field(default_factory=list)
    stood_in: dict[str, str] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    invalid: dict[str, str] = field(default_factory=dict)
    #: task id -> the commands of its solution and tests that need the network
    warnings: dict[str, list[str]] = field(default_factory=dict)
    #: why the folder holds no task at all (None: it holds some)
    error: str | None = None
    seconds: float = 0.0

    def kinds(self, top: int = 3) -> list[tuple[str, int]]:
        """The commonest kinds of reason among refused and invalid tasks, with counts."""
        found = Counter(reason_kind(r) for r in (*self.refused.values(), *self.invalid.values()))
        return found.most_common(top)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "kinds": self.kinds(top=10)}


def survey(
    paths: list[Path], *, runtime: str = "docker", build: bool = False, **env_kwargs: Any
) -> list[DatasetSurvey]:
    """Each folder of ``paths`` surveyed on ``runtime`` (``build``: every Docker image built,
    else predicted); ``env_kwargs`` go to :class:`TerminalBenchEnv` (``offline=True``...).
    A registry or engine that fails raises its :class:`~agentenvs.core.errors.Fault`: an
    infrastructure fault is never counted as a task's need."""
    from agentenvs.core.errors import TaskError
    from agentenvs.envs.terminal.env import TerminalBenchEnv
    from agentenvs.envs.terminal.needs import network_warnings

    found = []
    for path in paths:
        start = time.monotonic()
        try:
            env = TerminalBenchEnv(tasks_path=path, runtime=runtime, **env_kwargs)
        except TaskError as exc:  # no task folder in it: the row says so, the rest go on
            entries = sorted(p.name for p in path.iterdir()) if path.is_dir() else []
            why = str(exc)
            found.append(
                DatasetSurvey(
                    path=str(path),
                    folders=len(entries),
                    invalid=dict.fromkeys(entries, why),
                    error=why,
                )
            )
            continue
        try:
            # a Dockerfile that does not parse or reads past its context fails to build
            # whatever the machine: check_tasks counts it invalid, not refused
            refused = env.check_tasks(build=build)
            result = DatasetSurvey(
                path=str(path),
                folders=len(env.tasks) + len(env.invalid_tasks),
                accepted=list(env.task_ids),
                stood_in=dict(env.stood_in),
                refused=refused,
                invalid=dict(env.invalid_tasks),
                warnings={
                    task_id: said
                    for task_id, task in sorted(env.tasks.items())
                    if task_id not in refused and (said := network_warnings(task))
                },
            )
        finally:
            env.close()
        result.seconds = time.monotonic() - start
        found.append(result)
    return found


def survey_markdown(found: list[DatasetSurvey], *, build: bool) -> str:
    """A table: per dataset, folders, accepted (on a differing stand-in), refused,
    invalid, and the commonest reasons."""
    what = "built" if build else "predicted"
    lines = [
        f"| dataset | folders | accepted ({what}) | of them on a stand-in that differs "
        "| refused | invalid | commonest reasons |",
        "|---|---|---|---|---|---|---|",
    ]
    for d in found:
        reasons = "; ".join(f"{n}× {kind}" for kind, n in d.kinds()) or "—"
        if d.error is not None:
            reasons = d.error
        lines.append(
            f"| {Path(d.path).name} | {d.folders} | {len(d.accepted)} | {len(d.stood_in)} "
            f"| {len(d.refused)} | {len(d.invalid)} | {reasons.replace('|', '/')} |"
        )
    warned = [(Path(d.path).name, t, w) for d in found for t, ws in d.warnings.items() for w in ws]
    if warned:
        lines.append("\nCommands that need the network (the tasks run only with it):")
        lines += [f"- {name}/{task}: {w}" for name, task, w in warned[:WARNINGS_SHOWN]]
        if len(warned) > WARNINGS_SHOWN:
            lines.append(f"- ... and {len(warned) - WARNINGS_SHOWN} more (in the JSON)")
    total = sum(d.folders for d in found)
    accepted = sum(len(d.accepted) for d in found)
    lines.append(f"\n{accepted} of {total} task folders accepted.")
    return "\n".join(lines)
