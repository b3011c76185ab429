"""``agentenvs/TerminalBench-v0``: shell tasks in one persistent shell, graded by their tests."""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from agentenvs.core import info as keys
from agentenvs.core.env import TextEnv, Transition
from agentenvs.core.errors import Fault, SandboxError, TaskError, require_installed
from agentenvs.envs.terminal import grading as grading_rules
from agentenvs.envs.terminal.actions import FORMAT, parse_action
from agentenvs.envs.terminal.agent_clock import COUNTINGS, AgentClock
from agentenvs.envs.terminal.data import TerminalTask, load_tasks_report
from agentenvs.envs.terminal.faults import SANDBOX_FAILURES
from agentenvs.envs.terminal.shell import CommandResult, ShellSession
from agentenvs.envs.terminal.state import check_state, read_work_dir, work_dir_key
from agentenvs.envs.terminal.verdict import TaskTests
from agentenvs.sandbox import limits_info
from agentenvs.sandbox._files import OverLimit
from agentenvs.sandbox.base import Limits

#: ``Limits.max_file_mb`` that bounds no file in practice (1 PiB; RLIMIT_FSIZE takes it)
NO_FILE_SIZE_LIMIT_MB = 1 << 30

RUNTIMES = ("local", "docker")
SYSTEM_PROMPT = (
    "You are an AI assistant solving a task in a Linux terminal. You act only through "
    "shell commands, which run in one persistent bash shell, and you see their output."
)


#: sandboxes or containers a fork fills at once
FORK_CONCURRENCY = 8


class TerminalBenchEnv(TaskTests, TextEnv):
    """Solve a Terminal-Bench task with shell commands in one persistent shell.

    ## Description
    A task in the Terminal-Bench layout (TB1 ``task.yaml`` or Harbor ``task.toml``, see
    ``agentenvs.envs.terminal.data``): an instruction and a starting state in ``/app``.
    The agent works in ONE bash shell per episode: ``cd``, variables and background
    jobs persist between turns. When it says it is done (or the turn budget runs out)
    the task's own test runner runs as the official harnesses run it, but out of the
    agent's reach (``grading="safe"``, see ``agentenvs.envs.terminal.verifier``): every
    process of the agent is stopped first, then the tests run in a new session on a
    verifier toolchain the agent never had, their verdict on a channel only the
    verifier's pytest may use; ``grading="official"`` runs them beside the
    agent's shell in its container, as TB1 and Harbor do. Either way: TB1's
    ``bash /tests/run-tests.sh`` with ``tests/`` at ``/tests`` (``TEST_DIR=/tests``), its
    ``pytest -rA`` output read by the official parser; Harbor's ``bash /tests/test.sh``,
    its reward read from ``/logs/verifier/reward.json`` (named rewards), else
    ``reward.txt``. They run in the image's environment (its ``ENV``, working dir), not
    the agent's shell, within the task's test timeout (TB1 ``max_test_timeout_sec``,
    default 60 s; Harbor ``[verifier] timeout_sec``, default 600 s). Offline, the
    standard bootstraps (``curl … uv/install.sh | sh``, ``uv add pytest``, ``pip install``,
    ``apt-get install curl``) are served by stand-ins from what the image has (see
    ``agentenvs.envs.terminal.offline``); what they could not provide is reported in
    ``info["offline_unmet"]`` and the observation, so a failure for that reason is never
    silent. If the agent wrecked its sandbox (``rm -rf /``, a fork bomb, its container's
    init killed from inside) the episode ends and the tests run in a fresh sandbox of the
    task's image, which the observation says. A sandbox that fails for a reason not the
    agent's (its container killed or removed from outside, the engine restarted, down or
    refusing a request, the local sandbox SIGKILLed from the host) is decided so from
    evidence the agent cannot forge (``agentenvs.envs.terminal.faults``): ``reset``,
    ``step``, ``snapshot``, ``restore`` and ``score_action`` raise
    :class:`~agentenvs.core.errors.Fault`, never a reward; the env is then left with
    nothing running and the next ``reset`` starts afresh. On the docker runtime the other
    services of the task's ``docker-compose.yaml`` run as sidecar containers in the task
    container's network namespace (reachable by their names); their state is not part of
    a snapshot: a restore (and a fork) starts them afresh.

    ## Action Space
    ``FreeText``: a ```bash block (several run in order), bare commands, or Terminus JSON
    ``{"analysis", "plan", "commands": [{"keystrokes", "duration"}], "task_complete"}``.
    ``submit`` alone, or as the script's last line, ends the episode after the script.
    A reply with no command is invalid (the turn is spent). Commands read /dev/null as
    stdin (no interactive programs) and are interrupted after ``command_timeout`` s:
    SIGINT, then SIGKILL, to the process groups the command started (jobs of earlier
    commands keep running); a shell stuck in a builtin loop is replaced.

    ## Observation Space
    First: the instruction and how to act. Then per command: its output (stdout and
    stderr as a terminal interleaves them, cut in the middle to ``max_output_chars``
    with the cut said), ``[exit status: N]``, and notes on timeouts or a restarted
    shell. After the tests: their summary (passed/total, failing tests).

    ## Starting State
    The task's image: locally, its ``COPY`` sources unpacked into ``/app`` and its
    ``setup.sh`` run; with Docker, a fresh container of the task's own image (built once
    per machine, see ``runtime_docker``). The shell starts in ``/app``.

    ## Rewards
    1 when the tests pass (the official verdict: every parsed test passed, so an empty
    parse counts as resolved, while missing ``short test summary info`` is a failure), else 0.

    ## Episode End
    ``terminated`` after ``submit``/``task_complete``, a lost sandbox (``sandbox_lost``:
    wrecked, past its disk cap) or the task's wall-clock budget spent (its agent timeout:
    ``agentenvs.envs.terminal.agent_clock``); ``truncated`` when the turn budget runs out;
    tests run in all.

    ## Information
    ``success`` (resolved; Harbor: every reward ≥ 1), ``score`` (fraction of tests
    passed, 0 before the tests ran; Harbor: the reward, or the mean of the named
    rewards of ``reward.json``), ``state_key`` (a hash of the work dir's files and the
    shell's directory), ``tests_passed``/``tests_total``, ``test_results`` (name →
    passed) once they ran, ``rewards`` (Harbor's named rewards) once they ran,
    ``offline_unmet`` (what the offline stand-ins could not provide, when anything),
    ``exit_status`` (absent before the first command and after one interrupted without a
    status), ``timed_out``, ``runtime``, ``grading``, ``agent_timeout_s`` (the task's
    wall-clock budget) and ``agent_timed_out``; once the tests ran ``verifier_timed_out``
    (they ran past the task's verifier timeout: the task failed, whatever they reported
    before); for a Harbor task with ``[[steps]]`` (``agentenvs.envs.terminal.steps``: one
    episode of several instructions, each step's tests at its submit) ``step_index``,
    ``steps_total``, ``step_name`` and ``step_results`` (each step run's name, rewards,
    success and score; ``success`` and ``score`` are the trial's once it is over); on reset ``sandbox_limits`` (what
    bounds the session as a whole: ``agentenvs.sandbox.limits_info``); once the tests ran,
    ``grading_findings`` (what safe grading found the agent changed in what grades it:
    the episode then scores 0) and ``processes_stopped``; under safe grading also
    ``grading_problems`` (what kept the verifier's verdict from a pass besides failed
    tests: a test never reported, a pytest killed) and ``grading_exposed`` (modules the
    tests imported from the end state, which ran inside pytest). With ``step_rewards=True`` every
    step's info has ``step_reward`` (``agentenvs.core.info.STEP_REWARD``): the change in
    the fraction of tests passed that the step made. After each command the task's tests
    run on a *copy* of the state (a snapshot restored into a second env of the same
    settings, with its own sandbox or container, graded as ``grading`` says), never in the
    agent's sandbox, whose processes never see the tests, their files or their output; on
    the step that ends the episode the fraction is the episode's own ``score``. The first
    step's baseline is 0 (no test ran at reset), so an episode's step rewards sum to its
    ``score``; an invalid action that ends nothing gets 0. The copy holds what a snapshot
    holds (the work dir, the shell's directory and exports): tests that check files
    outside the work dir or processes the agent left running see the starting state
    there until the final verdict. A fault of the copy's sandbox is raised from ``step``
    like the agent's own.

    Snapshots hold the work dir's files (a tar keeping modes, owners where the runtime
    can keep them, symlinks, empty dirs and mtimes), the shell's directory and exported
    variables, and the test results: restore starts a new shell in a new sandbox,
    unpacks the files and replays ``cd``/exports; background jobs, shell functions,
    unexported variables and files outside the work dir are not restored. A snapshot of
    a wrecked sandbox restores as wrecked (the next step ends the episode as above).
    ``error_action`` deletes or damages a file of the work dir, or runs a command on a
    mistyped path. ``score_action`` is the test pass fraction after the command, from a
    snapshot. ``oracle_action()`` is the task's solution as one action: its files put
    where the official harness puts them (TB1 ``/oracle/solution.sh``, Harbor's
    ``solution/`` at ``/solution``) and run from the work dir.

    ## Arguments
    - ``tasks_path``: a folder of task folders (default: the bundled ``tasks/terminal``).
    - ``runtime``: ``"local"`` (bubblewrap, the default: no daemon) or ``"docker"`` (a
      container per episode from the task's own Dockerfile, so tasks with other
      Dockerfile steps run too; needs an engine and the images of
      ``sandboxes/build_images.sh``). Tasks the runtime cannot run faithfully are listed
      in ``unsupported_tasks`` with the reason and refused at reset (``check_tasks()``
      finds them all ahead, and lists in ``stood_in`` the accepted tasks whose base is
      stood in for by an image that differs, and how); task folders that do not load are listed in
      ``invalid_tasks`` (file and field) and the rest load.
    - Docker only: ``offline`` (None: ``AGENTENVS_OFFLINE``, else whether the engine can
      pull), ``network`` (``"task"``: the official defaults; ``"tests-only"``: the agent
      has none, the tests do; ``"none"``), ``image_map`` (more official-name → local
      image entries, globs allowed), ``wheelhouse`` (a folder of wheels the offline
      stand-ins install from at test time), ``build_wheelhouse`` (the binary wheels an
      offline build whose Dockerfile runs pip gets), ``registry`` (None:
      ``AGENTENVS_REGISTRY``; the registry base images on registries other than Docker
      Hub are pulled through), ``force_build`` (False: a task's ``[environment]
      docker_image`` beside its Dockerfile is run as Harbor runs it; True: the Dockerfile
      is built instead, Harbor's ``--force-build``; ``check_tasks`` judges what will run).
    - ``grading``: ``"safe"`` (the default) or ``"official"`` (the harnesses' own way,
      open to the attacks ``docs/terminal.md`` lists; tasks tagged ``agent-processes``,
      whose tests check processes the agent left running, run only under it).
    - ``command_timeout`` (60 s), ``max_output_chars`` (10000), ``limits``.
    - ``agent_clock``: what the task's agent budget counts: ``"wall"`` (the default, as
      TB1 and Harbor hold an agent: the whole episode's wall clock, the policy's thinking
      included), ``"commands"`` (only the time commands ran: a slow model or a loaded
      trainer costs the agent nothing, so outcomes do not depend on inference speed) or
      ``"off"`` (no time budget; commands keep ``command_timeout``).
    - ``step_rewards`` (False): grade every step (see Information). Off by default: each
      step then pays a snapshot, a restore into the copy and a test run: on the local
      runtime about 0.6 s a step for a bundled task's pytest suite against 0.02 s without
      (measured on 2 loaded cores), plus the task's own test time for a slow suite.
    - ``max_turns`` (30), ``show_budget``, ``render_mode``, ``max_action_chars``.

    ## Version History
    - v0: initial version; snapshots of version 2 hold the grading's findings (and,
      optionally, its problems and exposed modules); safe grading runs on the verifier;
      the task's agent timeout bounds the episode's wall clock, its verifier timeout is
      reported apart (snapshots may hold both).
    """

    default_max_turns: ClassVar[int] = 30
    #: the task's tests run where the agent never sees them: their results stay hidden
    hidden_info_keys = frozenset(
        {"score", "tests_passed", "tests_total", "test_results", "rewards", "step_reward"}
    )
    #: the tests also run when the budget runs out: success within T is not "first
    #: success at a turn <= T" of a longer episode, so Pass@(K,T) derive mode is refused
    success_checked_at_budget_end: ClassVar[bool] = True
    snapshot_version: ClassVar[int] = 2

    def __init__(
        self,
        *,
        tasks_path: str | Path | None = None,
        runtime: str = "local",
        command_timeout: float = 60.0,
        max_output_chars: int = 10_000,
        limits: Limits | None = None,
        max_turns: int | None = None,
        show_budget: bool = False,
        render_mode: str | None = None,
        max_action_chars: int = 1 << 16,
        offline: bool | None = None,
        network: str = "task",
        image_map: Mapping[str, str] | None = None,
        wheelhouse: str | Path | None = None,
        registry: str | None = None,
        grading: str = "safe",
        build_wheelhouse: str | Path | None = None,
        step_rewards: bool = False,
        agent_clock: str = "wall",
        force_build: bool = False,
    ) -> None:
        super().__init__(
            max_turns=max_turns,
            show_budget=show_budget,
            render_mode=render_mode,
            max_action_chars=max_action_chars,
        )
        if runtime not in RUNTIMES:
            raise ValueError(f"runtime must be one of {RUNTIMES}, got {runtime!r}")
        if runtime == "docker":  # refused here, before a run starts, not at the first reset
            require_installed("docker", "docker")
        if grading not in grading_rules.GRADINGS:
            raise ValueError(f"grading must be one of {grading_rules.GRADINGS}, got {grading!r}")
        self.grading = grading
        if agent_clock not in COUNTINGS:
            raise ValueError(f"agent_clock must be one of {COUNTINGS}, got {agent_clock!r}")
        self.agent_clock = agent_clock
        if not isinstance(step_rewards, bool):
            raise ValueError(f"step_rewards must be a bool, got {step_rewards!r}")
        self.step_rewards = step_rewards
        #: the second env whose sandbox grades copies of the state (step_rewards only)
        self._copy_env: TerminalBenchEnv | None = None
        #: task id -> the script of its own solution (None: it has none)
        self._oracle_scripts: dict[str, str | None] = {}
        if not command_timeout > 0:
            raise ValueError(f"command_timeout must be positive, got {command_timeout!r}")
        self.runtime_name = runtime
        self.command_timeout = float(command_timeout)
        self.max_output_chars = int(max_output_chars)
        self.limits = limits or Limits(
            cpu_seconds=3600,
            memory_mb=2048,
            max_processes=256,
            # no file-size limit (Harbor sets none: a sparse file may be any size); the
            # disk is bounded by the tmpfs sizes, the disk watch and storage_mb
            max_file_mb=NO_FILE_SIZE_LIMIT_MB,
            max_open_files=1024,
            disk_mb=2048,  # disk: what a docker container may fill
            max_output_bytes=1 << 20,
        )
        self.docker_options: dict[str, Any] = {
            "offline": offline,
            "network": network,
            "image_map": dict(image_map or {}),
            "wheelhouse": wheelhouse,
            "registry": registry,
            "build_wheelhouse": build_wheelhouse,
            "force_build": bool(force_build),
        }
        if runtime == "docker":
            from agentenvs.envs.terminal.runtime_docker import NETWORKS, unsupported_reason

            if network not in NETWORKS:
                raise ValueError(f"network must be one of {NETWORKS}, got {network!r}")
        else:
            from agentenvs.envs.terminal.runtime_local import unsupported_reason
        self.tasks_path = tasks_path
        self.tasks: dict[str, TerminalTask]
        self.tasks, self.invalid_tasks = load_tasks_report(tasks_path)

        self.unsupported_tasks: dict[str, str] = {
            tid: why
            for tid, task in self.tasks.items()
            if (why := unsupported_reason(task) or self._grading_reason(task))
        }
        self._task_ids = [t for t in self.tasks if t not in self.unsupported_tasks]
        #: task id -> what its stood-in base differs in (filled by ``check_tasks``)
        self.stood_in: dict[str, str] = {}
        self._runtime: Any = None
        self._shell: ShellSession | None = None
        self._reset_episode_state()

    def _grading_reason(self, task: TerminalTask) -> str | None:
        if self.grading == "safe" and grading_rules.AGENT_PROCESSES_TAG in task.tags:
            return (
                "its tests check processes the agent left running, which safe grading stops "
                "before the tests; grade it with grading='official'"
            )
        return None

    def _reset_episode_state(self) -> None:
        self._tested = False
        #: the fraction of tests the state passed after the last step (step_rewards)
        self._fraction = 0.0
        #: what safe grading found the agent changed in the test toolchain or output
        self._findings: list[str] = []
        self._problems: list[str] = []
        self._exposed: list[str] = []
        self._stopped = 0
        self._results: dict[str, bool] = {}
        self._harbor_reward: float | None = None
        self._rewards: dict[str, float] = {}
        self._unmet: list[str] = []
        self._test_output = ""
        self._last_exit: int | None = None
        self._last_timed_out = False
        #: why the sandbox was lost (None: it is fine)
        self._lost: str | None = None
        self._verifier_timed_out = False
        #: the task's agent time budget, started once the starting state is ready
        self._clock: AgentClock | None = None
        self._agent_timed_out = False
        #: a multi-step task (Harbor ``[[steps]]``): the step being played, each step
        #: run's verdict, and whether the trial is over (its reward is then the trial's)
        self._step_index = 0
        self._step_results: list[dict[str, Any]] = []
        self._steps_over = False

    # ---------------------------------------------------------------- tasks
    @property
    def task_ids(self) -> Sequence[str]:
        return self._task_ids

    def _known_task(self, task_id: Any) -> Mapping[str, TerminalTask]:
        return self.tasks

    @property
    def task(self) -> TerminalTask:
        if self._task_id is None:
            raise RuntimeError("no task yet: call reset() first")
        if self._verifier_view is not None:
            return self._verifier_view  # a separate verifier's tests are running
        task = self.tasks[self._task_id]
        if not task.steps:
            return task
        # a multi-step task is seen at its current step: that step's instruction, tests,
        # solution and timeouts (Harbor's fall back to the task's)
        step = task.steps[min(self._step_index, len(task.steps) - 1)]
        return dataclasses.replace(
            task,
            instruction=step.instruction,
            step_tests_dir=step.tests_dir,
            solution_path=step.solution_path or task.solution_path,
            max_agent_timeout_sec=step.agent_timeout_sec or task.max_agent_timeout_sec,
            max_test_timeout_sec=step.test_timeout_sec or task.max_test_timeout_sec,
            verifier_env=(*task.verifier_env, *step.verifier_env),  # the step's win
        )

    def action_format(self) -> str:
        return FORMAT

    def _prompt(self, task: TerminalTask) -> str:
        where = self._shell.workdir if self._shell is not None else "/app"
        return (
            f"{task.instruction}\n\n"
            f"You are in a bash shell in {where}. Commands run in one persistent shell (cd, "
            "variables and background jobs persist), with stdin from /dev/null, and are "
            f"interrupted after {self.command_timeout:g} s. {FORMAT}"
        )

    # ---------------------------------------------------------------- sandbox
    def runtime(self) -> Any:
        if self._runtime is None:
            if self.runtime_name == "docker":
                from agentenvs.envs.terminal.runtime_docker import DockerRuntime

                self._runtime = DockerRuntime(self.limits, **self.docker_options)
                # safe grading fills each task container's read-only verifier dirs
                self._runtime.verifier_mounts = self.grading == "safe"
                if self.grading == "safe":  # the process's one copy, made with the runtime
                    from agentenvs.envs.terminal.verifier.tree import pylib

                    pylib(self._runtime.wheelhouse)
            else:
                from agentenvs.envs.terminal.runtime_local import LocalRuntime
                from agentenvs.sandbox.local import hide_from_sandboxes

                # the tests and solutions must not show through a system dir the sandbox
                # shows (a tasks_path under /usr or /etc)
                hide_from_sandboxes(*(task.path for task in self.tasks.values()))
                self._runtime = LocalRuntime(self.limits)
        return self._runtime

    @property
    def shell(self) -> ShellSession:
        if self._shell is None:
            raise RuntimeError("no shell: call reset() first")
        return self._shell

    def _new_session(self, task: TerminalTask) -> ShellSession:
        if self._shell is not None:
            # docker: closed in the background before its container goes
            retire = getattr(self._runtime, "retire_shell", None)
            (retire or ShellSession.close)(self._shell)
            self._shell = None
        # docker exec gives the image's ENV itself; locally, the Dockerfile's ENV (expanded)
        init = (
            "".join(f"export {k}={shlex.quote(v)}\n" for k, v in task.env)
            if self.runtime_name == "local"
            else ""
        )
        self._shell = self.runtime().session(task, init, self.limits.max_output_bytes)
        return self._shell

    def _reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        if (options or {}).get("task_id") is None and not self._task_ids:
            reasons = "; ".join(
                f"{tid}: {why}"
                for tid, why in {**self.invalid_tasks, **self.unsupported_tasks}.items()
            )
            raise TaskError(
                str(self.tasks_path or "tasks/terminal"),
                "runtime",
                f"no task can run on the {self.runtime_name} runtime: {reasons}",
            )
        return super().reset(seed=seed, options=options)

    def _refuse(self, task: TerminalTask, why: str) -> TaskError:
        self.unsupported_tasks[task.id] = why
        if task.id in self._task_ids:
            self._task_ids.remove(task.id)
        return TaskError(
            str(task.path),
            "runtime",
            f"task {task.id!r} cannot run on the {self.runtime_name} runtime: {why}",
        )

    def check_tasks(self, *, build: bool = False) -> dict[str, str]:
        """Find what each task needs that this machine cannot give, and name it. Docker:
        predicted without building (``agentenvs.envs.terminal.needs``), or with ``build``
        every image built now; a registry or engine that fails raises :class:`Fault`.
        Local: the refusals made at load time. Updates and returns ``unsupported_tasks``;
        ``stood_in`` then holds, for each task still accepted that runs on a stand-in
        which differs from the base it names, what differs (also ``info["base_standin"]``).
        A task whose Dockerfile no machine builds (a step Docker's parser does not know, a
        ``COPY`` source outside its context: ``needs.unbuildable``) is invalid, as its
        files are wrong: it moves to ``invalid_tasks`` with file and line, on any runtime."""
        from agentenvs.envs.terminal.images import as_run
        from agentenvs.envs.terminal.needs import unbuildable

        for task_id, task in list(self.tasks.items()):
            if self.runtime_name == "docker":  # a prebuilt image is run, its Dockerfile unread
                task = as_run(task, force_build=self.docker_options["force_build"])
            if task_id != self._task_id and (why := unbuildable(task)) is not None:
                self.invalid_tasks[task_id] = why
                del self.tasks[task_id]
                self.unsupported_tasks.pop(task_id, None)
                if task_id in self._task_ids:
                    self._task_ids.remove(task_id)
        if self.runtime_name == "docker":
            from agentenvs.envs.terminal.needs import unmet_on_docker

            tasks = [self.tasks[t] for t in self._task_ids]
            for task_id, why in unmet_on_docker(self.runtime(), tasks, build=build).items():
                self._refuse(self.tasks[task_id], why)
            for task in [self.tasks[t] for t in self._task_ids]:
                if (short := self.runtime().unmet_resources(task)) is not None:
                    self._refuse(task, short)
        self.stood_in = {
            t: note for t in self._task_ids if (note := self._standin(self.tasks[t])) is not None
        }
        return dict(self.unsupported_tasks)

    def _load_task(self, task_id: str, options: Mapping[str, Any]) -> str:
        task = self.tasks[task_id]
        if task_id in self.unsupported_tasks:
            raise TaskError(
                str(task.path),
                "runtime",
                f"task {task_id!r} cannot run on the {self.runtime_name} runtime: "
                f"{self.unsupported_tasks[task_id]}",
            )
        if self.runtime_name == "docker":
            from agentenvs.envs.terminal.images import UnprovidableError

            try:
                self.runtime().image(task)
            except UnprovidableError as exc:
                raise self._refuse(task, str(exc)) from exc
            except SandboxError as exc:
                # the task's Dockerfile (an engine or registry that failed is a Fault)
                if "cannot build the image" not in str(exc):
                    raise
                raise self._refuse(task, str(exc)) from exc
            except OSError as exc:  # an engine request that failed
                raise self.runtime().engine_fault(exc) or exc from exc
            short = self.runtime().unmet_resources(task)  # more than this host has
            if short is not None:
                raise self._refuse(task, short)
        self._reset_episode_state()
        try:
            shell = self._new_session(task)
            self.runtime().starting_state(task, shell)
            if task.steps:
                problem = self._prepare_step()
                if problem is not None:
                    raise SandboxError(problem)
        except SANDBOX_FAILURES as exc:
            fault = self.runtime().diagnose(exc)
            if fault is not None:
                raise fault from exc
            # nothing of the agent's ran yet: the task's image or setup is the reason
            why = (str(exc).splitlines() or [type(exc).__name__])[0][:300]
            raise self._refuse(task, f"its starting state cannot be set up: {why}") from exc
        self._clock = self._new_clock(self.task)
        # the suite's convention: system prompt, a blank line, then the task
        return f"{SYSTEM_PROMPT}\n\n{self._prompt(task)}"

    def _new_clock(self, task: TerminalTask, used_s: float = 0.0) -> AgentClock | None:
        """The episode's clock of the task's agent budget (None: ``agent_clock="off"``)."""
        if self.agent_clock == "off":
            return None
        return AgentClock(task.max_agent_timeout_sec, used_s, counting=self.agent_clock)

    def _reset_info(self) -> dict[str, Any]:  # a task container's pids slack is 32
        bounds = limits_info(self.runtime_name, self.limits, docker_pids_slack=32)
        return {"system_prompt": SYSTEM_PROMPT, "sandbox_limits": bounds}

    # ---------------------------------------------------------------- acting
    def _format_result(self, result: CommandResult, limit_s: float) -> str:
        out = result.output
        limit = self.max_output_chars
        if len(out) > limit:
            head, tail = out[: limit // 2], out[-(limit // 2) :]
            cut = len(out) - len(head) - len(tail)
            out = f"{head}\n[... output truncated: {cut} of {len(out)} characters omitted ...]\n{tail}"
        notes = []
        if result.timed_out:
            notes.append(f"[command timed out after {limit_s:g} s and was interrupted]")
        if result.shell_restarted:
            notes.append(
                f"[the shell exited; a new shell was started in {self.shell.cwd} "
                "(variables and background jobs of the old one are gone)]"
            )
        if result.exit_status is not None:
            notes.append(f"[exit status: {result.exit_status}]")
        text = out if not out or out.endswith("\n") else out + "\n"
        return text + "\n".join(notes)

    def _apply(self, action: str) -> Transition:
        parsed = parse_action(action)
        if parsed.problem is not None:
            return Transition(
                observation=f"Invalid action: {parsed.problem}. {FORMAT}", action_valid=False
            )
        parts = []
        clock = self._clock
        if clock is not None and clock.spent:
            self._agent_timed_out = True  # spent before this action: it does not run
        elif self._lost is None and parsed.script.strip():
            own = self.command_timeout
            if parsed.script == self._oracle_script():
                own = self.task.max_agent_timeout_sec  # the oracle's: the budget alone
            limit_s = clock.command_timeout(own) if clock is not None else own
            if clock is not None:
                clock.begin()
            try:
                result = self.shell.run(parsed.script, limit_s)
            except SANDBOX_FAILURES as exc:
                # a container killed from outside, a dead engine: a Fault, raised here
                self._check_fault(exc)
                # a fork bomb that left no process slot, `rm -rf /`: the agent's doing;
                # the episode ends and the tests run in a fresh sandbox
                self._lose(str(exc))
            else:
                self._last_exit, self._last_timed_out = result.exit_status, result.timed_out
                parts.append(self._format_result(result, limit_s))
        if clock is not None:
            clock.mark()
            self._agent_timed_out = self._agent_timed_out or clock.spent
        if self._lost is not None:
            parts.append(f"[the sandbox was lost ({self._lost}); the episode is over]")
        elif self._agent_timed_out:
            parts.append(
                f"[the task's time budget of {self.task.max_agent_timeout_sec:g} s is used up "
                "(its agent timeout); the episode is over]"
            )
        elif not parsed.complete:
            return Transition(observation="\n".join(parts) or "(no output)")
        parts.append(self._run_tests())
        if self.tasks[self._task_id].steps and not self._steps_over:
            parts.append(self._next_step())
            if not self._steps_over:
                return Transition(observation="\n".join(parts))
        return Transition(
            observation="\n".join(parts),
            reward=1.0 if self._success_now() else 0.0,
            terminated=True,
            success=self._success_now(),
            score=self._score_now(),
        )

    def _oracle_script(self) -> str | None:
        """The script of the task's own solution (None: it has none), made once a task."""
        cache = self._oracle_scripts
        key = f"{self.task.id}\0{self._step_index}"
        if key not in cache:
            try:
                cache[key] = parse_action(self.oracle_action()).script
            except TaskError:
                cache[key] = None
        return cache[key]

    # ---------------------------------------------------------------- steps
    def _prepare_step(self) -> str | None:
        """As Harbor before a step's agent: the step's ``workdir/`` copied into the work
        dir and its ``setup.sh`` run there, then its healthcheck run until healthy; why the
        setup failed (None: it did not)."""
        from agentenvs.envs.terminal.images import tar_of

        step = self.tasks[self._task_id].steps[self._step_index]
        if step.workdir is not None:
            where = shlex.quote(self.shell.workdir)
            rc, out = self.shell.control(
                f"mkdir -p {where} && tar -x -C {where} --no-same-owner",
                stdin=tar_of([(step.workdir, "/")]),
            )
            if rc == 0 and (step.workdir / "setup.sh").is_file():
                rc, out = self.shell.control(f"cd {where} && bash setup.sh 2>&1", timeout=600)
            if rc != 0:
                text = out.decode("utf-8", errors="replace").strip()[-300:]
                return f"step {step.name!r}: its setup failed (status {rc}): {text}"
        if step.healthcheck is not None:  # unhealthy: a Fault, as the task's own
            from agentenvs.envs.terminal.healthcheck import wait_healthy

            wait_healthy(step.healthcheck, self.shell)
        return None

    def _next_step(self) -> str:
        """After a step's tests: the next step begins in the same state with its own
        instruction and budget, or the trial ends (the last step, Harbor's early stop, a
        lost sandbox); what the agent is told."""
        task = self.tasks[self._task_id]
        why = self._record_step()
        if why is None and self._lost is None and self._step_index + 1 < len(task.steps):
            self._step_index += 1
            self._tested, self._results, self._test_output = False, {}, ""
            self._harbor_reward, self._rewards, self._unmet = None, {}, []
            self._findings, self._problems, self._exposed = [], [], []
            self._verifier_timed_out = self._agent_timed_out = False
            try:
                why = self._prepare_step()
            except SANDBOX_FAILURES as exc:
                self._check_fault(exc)
                why = f"step {task.steps[self._step_index].name!r}: {exc}"
            if why is None:
                self._clock = self._new_clock(self.task)
                where = f"Step {self._step_index + 1} of {len(task.steps)}"
                return f"{where}:\n{self._prompt(self.task)}"
            step = task.steps[self._step_index]
            self._step_results.append(
                {
                    "name": step.name,
                    "rewards": None,
                    "success": False,
                    "score": 0.0,
                    "verifier_timed_out": False,
                }
            )
        return self._end_trial(why)

    def _end_trial(self, why: str | None) -> str:
        """The multi-step trial is over: its rewards, as the task's strategy makes them."""
        self._steps_over = True
        rewards = self._trial_rewards()
        shown = ", ".join(f"{k}={v:g}" for k, v in rewards.items()) if rewards else "none"
        return (
            (f"The trial stops: {why}.\n" if why else "")
            + f"Trial rewards ({self.task.multi_step_reward_strategy} of the steps): {shown}. "
            + ("Task resolved." if self._success_now() else "Task not resolved.")
        )

    def _check_fault(self, exc: BaseException) -> None:
        """Raise the Fault that ``exc`` is when it is not the agent's doing (asked of the
        runtime before the sandbox is touched again: closing a local shell kills it)."""
        fault = self.runtime().diagnose(exc)
        if fault is not None:
            self._abandon()
            raise fault from exc

    def _abandon(self) -> None:
        """After a fault: nothing of the episode left running, and only a reset can follow."""
        if self._shell is not None:
            self._shell.close()
            self._shell = None
        if self._runtime is not None:
            self._runtime.abandon()
        self._lost = "an infrastructure fault"
        self._done = True

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        try:
            return self._reset(seed=seed, options=options)
        except Fault:
            self._abandon()
            raise

    def restore(self, snapshot: Any) -> None:
        try:
            super().restore(snapshot)
        except Fault:
            self._abandon()
            raise

    def _lose(self, why: str) -> None:
        self._lost = (why.splitlines() or ["unknown"])[0][:200]
        if self._shell is not None:
            self._shell.close()
            self._shell = None

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        try:
            return self._step(action)
        except Fault:
            self._abandon()
            raise

    def _step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = super().step(action)
        if truncated and not self._tested:
            # as Terminal-Bench on an agent timeout: the tests still run
            summary = self._run_tests()
            if self.tasks[self._task_id].steps:
                self._record_step()
                summary += "\n" + self._end_trial(None)  # no turn is left for a later step
            self._success, self._score = self._success_now(), self._score_now()
            reward = 1.0 if self._success else 0.0
            observation = self._finish_observation(
                f"{observation}\n[turn budget exhausted]\n{summary}"
            )
            info = {**info, **self._info(action_valid=info[keys.ACTION_VALID])}
        if self.step_rewards:
            info[keys.STEP_REWARD] = self._step_reward(info[keys.ACTION_VALID])
        return observation, reward, terminated, truncated, info

    def _copy_grader(self) -> TerminalBenchEnv:
        """The env that grades copies of the state: the same tasks and settings, its own
        runtime, made once."""
        if self._copy_env is None:
            self._copy_env = TerminalBenchEnv(
                tasks_path=self.tasks_path,
                runtime=self.runtime_name,
                command_timeout=self.command_timeout,
                max_output_chars=self.max_output_chars,
                limits=self.limits,
                grading=self.grading,
                agent_clock=self.agent_clock,
                **self.docker_options,
            )
        return self._copy_env

    # ---------------------------------------------------------------- tests
    # running them and reading their verdict: TaskTests (verdict.py)
    def score_action(self, action: str) -> float:
        """Test pass fraction after ``action`` (tests run even without ``submit``); a
        fault raises :class:`Fault` (the env is then left for a reset, not restored)."""
        snap = self.snapshot()
        grading_steps, self.step_rewards = self.step_rewards, False  # the tests run below
        try:
            self.step(action)
            if not self._tested:
                self._run_tests()
            score = self._score_now()
        except Fault:
            self._abandon()
            raise
        except BaseException:
            self.restore(snap)
            raise
        finally:
            self.step_rewards = grading_steps
        self.restore(snap)
        return score

    def oracle_action(self) -> str:
        """The task's solution as one action, run as the official oracle runs it
        (``actions.oracle_action``)."""
        from agentenvs.envs.terminal.actions import oracle_action

        return oracle_action(self.task)

    # ---------------------------------------------------------------- errors
    def error_action(self, rng: np.random.Generator) -> str:
        rc, out = self.shell.control(
            "cd /app && find . -path ./.git -prune -o -path '*/.git' -prune -o -type f -print "
            "2>/dev/null | sort | head -200"
        )
        files = [f[2:] for f in out.decode(errors="replace").splitlines() if f.startswith("./")]
        kinds = ["typo"] + (["delete", "sed"] if files else [])
        kind = kinds[int(rng.integers(len(kinds)))]
        if kind == "typo":
            target = files[int(rng.integers(len(files)))] if files else "app"
            return f"```bash\ncat /app/{shlex.quote(target + '_old')} && ls /ap/\n```"
        target = shlex.quote(f"/app/{files[int(rng.integers(len(files)))]}")
        if kind == "delete":
            return f"```bash\nrm -f {target}\n```"
        return f"```bash\nsed -i 's/[0-9a-e]/X/g' {target}\n```"

    # ---------------------------------------------------------------- state
    @property
    def _state_dir(self) -> str:
        """The work dir whose files a snapshot holds (``/app`` when it is ``/``)."""
        workdir = self._shell.workdir if self._shell is not None else "/app"
        return workdir.rstrip("/") or "/app"

    def _files_tar(self) -> bytes:
        return read_work_dir(self.shell, self.runtime(), self._state_dir)

    def _state_key(self) -> str:
        if self._shell is None or self._lost is not None:
            return "lost"
        files = None
        known = getattr(self._runtime, "start_files", None)
        if known is not None and not self._tested:
            # a fresh container nothing ran in since it was hashed as a spare (the tests
            # run outside the shell, so a tested state is always read)
            files = known(self._shell, self._state_dir)
        return work_dir_key(self._shell, self._state_dir, self._tested, files)

    def _get_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "tested": self._tested,
            "results": dict(self._results),
            "harbor_reward": self._harbor_reward,
            "rewards": dict(self._rewards),
            "unmet": list(self._unmet),
            "test_output": self._test_output,
            "last_exit": self._last_exit,
            "last_timed_out": self._last_timed_out,
            "lost": self._lost,
            "findings": list(self._findings),
            "problems": list(self._problems),
            "exposed": list(self._exposed),
            "stopped": self._stopped,
            "fraction": self._fraction,
            "verifier_timed_out": self._verifier_timed_out,
            "agent_timed_out": self._agent_timed_out,
            "agent_used_s": self._clock.marked_s if self._clock is not None else 0.0,
        }
        if self._task_id is not None and self.tasks[self._task_id].steps:
            state["steps"] = {
                "index": self._step_index,
                "results": [dict(r) for r in self._step_results],
                "over": self._steps_over,
            }
        if self._lost is None and self._shell is not None:
            try:
                # a wrecked system (no base64, no sh) answers this at once, not at a timeout
                rc, _ = self.shell.control("true", timeout=30)
                if rc != 0:
                    raise SandboxError(f"the sandbox cannot run commands (status {rc})")
                cwd, exports = self.shell.shell_state()
                files = self._files_tar()
            except SANDBOX_FAILURES as exc:
                if not isinstance(exc, OverLimit):  # the copy's own refusal: the agent's files
                    self._check_fault(exc)
                # wrecked by the agent, not yet noticed by a step: the snapshot says so
                state["lost"] = (str(exc).splitlines() or ["unknown"])[0][:200]
            else:
                state.update(files=files, cwd=cwd, exports=exports, dir=self._state_dir)
        elif self._lost is None:
            state["lost"] = "no shell"
        return state

    #: a restore is checked whole first (the archive included): no read of /app before it
    restore_rollback: ClassVar[bool] = False

    def _check_state(self, state: Any, base: Mapping[str, Any]) -> None:
        check_state(state)

    def _set_state(self, state: Any) -> None:
        steps = state.get("steps", {"index": 0, "results": [], "over": False})
        if steps["index"] >= max(len(self.tasks[self._task_id].steps), 1):
            raise ValueError("the snapshot's step is not one of this task's")
        self._step_index = steps["index"]
        self._step_results = [dict(r) for r in steps["results"]]
        self._steps_over = steps["over"]
        task = self.task
        lost = state.get("lost")
        if lost is None:
            shell = self._new_session(task)
            where = state.get("dir", "/app")
            parent = where.rsplit("/", 1)[0] or "/"
            # the same state: -p keeps modes exactly (no umask), mtimes, symlinks and empty
            # dirs come with the tar, and as root (docker) owners are kept too
            owners = "--same-owner" if self.runtime_name == "docker" else "--no-same-owner"
            try:
                rc, out = shell.control(
                    f"find {shlex.quote(where)} -mindepth 1 -delete 2>/dev/null; "
                    f"tar -x -p {owners} --delay-directory-restore -C {shlex.quote(parent)}",
                    stdin=state["files"],
                    timeout=120,
                )
                if rc != 0:
                    raise SandboxError(f"cannot restore {where}: {out.decode(errors='replace')}")
                replay = "\n".join(
                    line
                    for line in state["exports"].splitlines()
                    if not line.startswith(
                        ("declare -x PWD=", "declare -x OLDPWD=", "declare -x SHLVL=")
                    )
                )
                shell.run(f"{replay}\ncd -- {shlex.quote(state['cwd'])}", timeout=30)
            except SANDBOX_FAILURES as exc:
                self._check_fault(exc)
                raise
        elif self._shell is not None:
            self._shell.close()
            self._shell = None
        self._tested = state["tested"]
        self._results = dict(state["results"])
        self._harbor_reward = state["harbor_reward"]
        self._rewards = dict(state.get("rewards", {}))
        self._unmet = list(state.get("unmet", []))
        self._test_output = state["test_output"]
        self._last_exit = state["last_exit"]
        self._last_timed_out = state["last_timed_out"]
        self._lost = lost
        self._findings = list(state["findings"])
        self._problems = list(state.get("problems", []))
        self._exposed = list(state.get("exposed", []))
        self._stopped = state["stopped"]
        self._fraction = float(state.get("fraction", 0.0))
        self._verifier_timed_out = bool(state.get("verifier_timed_out", False))
        self._agent_timed_out = bool(state.get("agent_timed_out", False))
        self._clock = self._new_clock(task, state.get("agent_used_s", 0.0))

    def _extra_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "runtime": self.runtime_name,
            "grading": self.grading,
            "timed_out": self._last_timed_out,
            "tests_passed": sum(self._results.values()),
            "tests_total": len(self._results),
            **({"sandbox_lost": self._lost} if self._lost is not None else {}),
        }
        if self._last_exit is not None:  # absent, not None: vector envs batch ints only
            info["exit_status"] = self._last_exit
        if self._task_id is not None:
            off = self.agent_clock == "off"
            info["agent_timeout_s"] = None if off else self.task.max_agent_timeout_sec
            info["agent_timed_out"] = self._agent_timed_out
        if self._tested:
            info["test_results"] = dict(self._results)
            info[keys.VERIFIER_TIMED_OUT] = self._verifier_timed_out
            info[keys.GRADING_FINDINGS] = list(self._findings)
            info["processes_stopped"] = self._stopped
            if self.grading == "safe":
                # what kept the verdict from a pass besides failed tests, and the modules
                # the tests imported from outside the verifier (code the agent could change)
                info["grading_problems"] = list(self._problems)
                info["grading_exposed"] = list(self._exposed)
            if self._rewards:
                info["rewards"] = dict(self._rewards)
        if self._unmet:
            info["offline_unmet"] = list(self._unmet)
        if self._task_id is not None and self.tasks[self._task_id].steps:
            info["step_index"] = self._step_index
            info["steps_total"] = len(self.tasks[self._task_id].steps)
            info["step_name"] = self.tasks[self._task_id].steps[self._step_index].name
            info["step_results"] = [dict(r) for r in self._step_results]
        if self._tested and self._runtime is not None and self.runtime_name == "docker":
            services = getattr(self._runtime, "service_status", None)
            if services:  # how the compose sidecars were when the tests started
                info["services"] = dict(services)
        if self._task_id is not None:
            standin = self._standin(self.task)
            if standin is not None:
                info["base_standin"] = standin
        return info

    def _standin(self, task: TerminalTask) -> str | None:
        """Where the image the task runs on differs from the base it names (None: nothing
        known differs)."""
        if self.runtime_name == "local":
            from agentenvs.envs.terminal.runtime_local import standin_difference

            return standin_difference(task)
        from agentenvs.envs.terminal.images import UnprovidableError

        try:
            return self.runtime().standin_note(task)
        except UnprovidableError:
            return None

    def _fork(self, k: int) -> list[TextEnv]:
        """The work dir is read once (one snapshot) and unpacked into ``k`` new sandboxes
        or containers at once, each with the shell's cwd and exported variables replayed;
        background processes are not carried over (as in a restore)."""
        return self._fork_by_restore(k, concurrency=min(k, FORK_CONCURRENCY))

    def held_resources(self) -> frozenset[str]:
        runtime = self._runtime
        if runtime is None:
            return frozenset()
        if self.runtime_name == "docker":
            return frozenset(f"container {c}" for c in runtime.container_ids)
        return frozenset({f"sandbox dir {runtime.box.workdir}"} if runtime.box.workdir else ())

    def close(self) -> None:
        if self._shell is not None:
            self._shell.close()
            self._shell = None
        if self._runtime is not None:
            self._runtime.close()
            self._runtime = None
        if self._copy_env is not None:
            self._copy_env.close()
            self._copy_env = None
        super().close()
