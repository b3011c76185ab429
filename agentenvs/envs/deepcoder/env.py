"""``agentenvs/DeepCoderMT-v0``: solve a competitive-programming problem over several turns."""

from __future__ import annotations

import hashlib
import itertools
import math
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from agentenvs.core import info as keys
from agentenvs.core.env import TextEnv, Transition
from agentenvs.core.errors import Fault, SnapshotError
from agentenvs.core.info import STEP_REWARD
from agentenvs.envs.deepcoder import official
from agentenvs.envs.deepcoder.cache import LRU, task_digest
from agentenvs.envs.deepcoder.checker import (
    HIDDEN_FAILED_MESSAGE,
    NOT_RUN,
    SUCCESS_MESSAGE,
    TestOutcome,
    code_digest,
    code_fingerprint,
    extract_code,
    format_feedback,
    judge,
)
from agentenvs.envs.deepcoder.data import CodeTask, TaskSet, load_tasks, public_count
from agentenvs.envs.deepcoder.lcb import LCB_SYSTEM_MESSAGE, lcb_prompt, prepare_program
from agentenvs.envs.deepcoder.mutate import mutants, mutation_sites
from agentenvs.sandbox import sweep_leftovers
from agentenvs.sandbox.base import Limits, PyCase, Sandbox

#: error actions: how many verified mutants to keep per task, how many to try at most,
#: and the per-test time limits while verifying: every candidate runs under the first,
#: those that time out run again under the second (both capped by the task's own), and
#: only a timeout there drops one. A mutant is kept on whether it finishes a test within
#: 2 s, not on the host's load at the time: a program taking 0.3 s a test, near the first
#: limit on a loaded host, stays in the pool on any host, and an injected error never
#: costs a step more than 2 s a test.
ERROR_POOL_SIZE = 4
ERROR_MAX_TRIES = 24
VERIFY_TIMEOUT = 0.5
RECHECK_TIMEOUT = 2.0
#: results kept per process, shared by every env with the same tasks and settings
OUTCOME_CACHE_SIZE = 4096


# Per process, shared by envs with equal tasks and settings (contract checks, eval workers
# and step-quality runs make many envs): results are a function of (task, program,
# settings), keyed by all of them (``cache``), so sharing only saves sandbox runs.
_OUTCOMES = LRU(OUTCOME_CACHE_SIZE)
_OWN_SANDBOXES = itertools.count()
_ERROR_POOLS = LRU(1024)
_ERROR_SEARCH_LOCK = threading.RLock()


class _MutantSearch:
    """How far the search for failing mutants of one task's reference has got."""

    def __init__(self, task: CodeTask) -> None:
        reference = task.reference or ""
        order = _stable_order(task.id, len(mutation_sites(reference)))
        self.candidates: Iterator[str] = (text for _, text in mutants(reference, order))
        self.found: list[str] = []
        self.tried = 0
        self.exhausted = not reference


def _stable_order(task_id: str, n: int) -> list[int]:
    seed = int.from_bytes(hashlib.blake2b(task_id.encode(), digest_size=8).digest(), "little")
    return [int(i) for i in np.random.default_rng(seed).permutation(n)]


class DeepCoderMTEnv(TextEnv):
    """Write a Python program for a competitive-programming problem, with test feedback.

    ## Description
    DeepCoder-MT: a DeepCoder-Preview problem (LiveCodeBench, Codeforces, TACO or
    PrimeIntellect/SYNTHETIC-1) solved over several turns, as rLLM's legacy multi-turn
    code agent plays it. Each turn the agent answers with a program; the env runs it in
    a sandbox on every test of the problem, grades each test as DeepCoder's official
    checker does (LiveCodeBench's rules, 6 s per test), and replies with the failures
    on the *public* tests (the first ``public_tests`` tests; the rest are hidden). The
    problem is solved when the program passes every test, public and hidden.

    ## Action Space
    ``FreeText``. The program is the **last** fenced code block tagged ``python`` (or
    ``py``, ``python3``) or untagged, as the official checker extracts it; blocks in other
    languages are ignored. An answer without such a block (or with only an empty one)
    is an invalid action: the turn is spent, nothing else changes
    (``action_valid=False``) and the observation says so. Stdin problems read stdin and
    print; call-based problems define the starter code's function (a ``class Solution``
    method or a plain function), which is called with each test's arguments.

    ## Observation Space
    ``FreeText``. First: the problem, then ``### Format:`` with the starter code (or
    ``# YOUR CODE HERE`` for stdin problems) and ``### Answer:``, LiveCodeBench's prompt
    as rLLM builds it; the system message is ``info["system_prompt"]``. After a program:
    rLLM's feedback, "Here are the results on the public test cases:" then, for each
    failing public test (at most ``max_feedback_tests``), ``### Test i failed`` with
    ``Input``, ``Expected``, ``Actual`` and ``Error message`` (each cut to 300
    characters), then a request to fix the code and output the final code. When every
    public test passes but a hidden one fails, a message saying so; when all pass,
    rLLM's "Congratulations!" message. Verdicts: ``Wrong Answer`` (with the first
    differing line), ``Time Limit Exceeded``, ``Runtime Error: <exception>`` (with the
    traceback's tail), ``Compilation Error: ...``.

    ## Starting State
    A task drawn with ``self.np_random`` (or ``reset(options={"task_id": ...})``), no
    program yet, score 0.

    ## Rewards
    1 on the turn the program passes every test, else 0 (DeepCoder's reward: all tests
    or nothing). ``info["score"]`` carries partial credit for shaping (e.g. rLLM's
    ``raw + coeff * (raw - prev_raw)``).

    ## Episode End
    ``terminated`` when a program passes every test (public and hidden); ``truncated``
    when the turn budget runs out first.

    ## Information
    The standard keys: ``success`` (the last program passed every test), ``score`` (the
    fraction of *all* tests the last program passed; 0 before any program; an invalid
    action keeps it), ``state_key`` (a hash of the task, the last program's normalized
    code, comments and layout ignored, and which tests it passes: no turn count, no
    earlier attempts). Every step's info has ``step_reward``
    (``agentenvs.core.info.STEP_REWARD``): the change in that pass rate the step made,
    ``score`` after it minus ``score`` before it, the first step's baseline being 0 (no
    program yet), so an episode's step rewards sum to its last program's pass rate; an
    invalid action's is 0. Also ``tests_passed``/``tests_total``,
    ``public_passed``/``public_total`` and ``difficulty``; steps add ``code_found`` and,
    after a program, ``test_results`` (pass/fail of every test, hidden ones included:
    for the trainer, not the agent). ``info["system_prompt"]`` on reset, and with the local
    sandbox ``info["sandbox_runtime"]``: the Python programs run under (the project's
    provisioned prefix, its version and numpy/pandas versions; see
    ``agentenvs.sandbox.runtime``); ``info["sandbox_limits"]``: what bounds the sandbox
    as a whole (a cgroup locally, the container on Docker; ``scope`` ``"process"`` with the
    reason where the host gives no cgroup and only the per-process rlimits hold).

    Scoring and errors. ``score_action(action)`` is the pass rate of the action's
    program on all tests (0 without a program), from the current state without
    advancing; results are cached per process by the program's text, the whole task (its
    source format and raw tests included), its time limit and the settings (rules,
    limits, comparison), so 16 candidates from one state cost 16 sandbox runs at most
    (one warm worker each; ``score_actions`` runs them concurrently). ``error_action(rng)`` is
    the task's reference solution with one seeded AST mutation (a flipped comparison,
    an off-by-one, ``+``/``-`` swapped, a changed constant, ``and``/``or`` or
    ``min``/``max`` swapped, a dropped line) that was run and fails at least one test
    without timing out (each test within 2 s, checked at 0.5 s first and again at 2 s
    for those over: the pool does not depend on the host's load); up to four such
    mutants are found per task (in a fixed order, cached) and ``rng`` picks one. Tasks without a reference or a failing mutant fall
    back to a bundled wrong solution, then to a stub program.

    Faults. A sandbox that fails from outside while a program runs (killed, stopped or
    removed from outside, unable to start, an engine that fails; see
    ``agentenvs.sandbox.faults``) raises :class:`~agentenvs.core.errors.Fault` out of
    ``step``, ``score_action`` and ``score_actions``: never a verdict, nothing cached.
    After a fault in ``step`` only ``reset`` may follow. What the program does to itself
    (its timeout, memory, ``kill -9 -1``) stays its verdict.

    ``snapshot()`` holds the attempts so far, the last feedback and the per-test results
    (plus the base's turn, budget and RNG). Programs keep no files between turns (each
    run starts from the same empty work dir), so no sandbox files are saved; a snapshot
    restores into any env made with the same settings.

    ## Arguments
    All keyword-only.
    - ``tasks_path``: a ``.jsonl``/``.json``/``.parquet`` file of DeepCoder rows in any
      source's test schema (see ``agentenvs.envs.deepcoder.data``), a folder of shards or
      a glob such as the official splits that ``agentenvs data fetch deepcoder-preview``
      caches (``agentenvs data info deepcoder-preview`` prints one per split); default:
      the bundled ``tasks/deepcoder/problems.jsonl``.
    - ``sandbox``: ``"local"`` (bubblewrap namespaces, default), ``"docker"``, ``"auto"``,
      or a ``Sandbox`` instance (then the caller owns it). The env opens one sandbox on
      first use and closes it in ``close()``; with ``"docker"`` it asks the engine when
      made, and raises ``ServiceUnavailable`` (saying what to install) where none answers.
    - ``public_tests`` (3): how many tests are public: a count, or a fraction (float) of
      each task's tests; at least one.
    - ``rules`` (``"strict"``): ``"official"`` grades as rLLM's checkers at the DeepCoder
      release do, quirks included (``agentenvs.envs.deepcoder.official``; the table of
      every rule, official against strict, is ``docs/deepcoder.md``): the last fenced
      block of any language runs; LiveCodeBench/Codeforces programs run in one process
      per program (wrapped in a function, stdin a ``StringIO``, ``SystemExit`` ignored,
      numpy/pandas preloaded, one shared ``Solution``), TACO/PrimeIntellect ones by the
      APPS rules on their 15 longest tests at 12 s each (a call-based row with more than
      15 loses its function name there and is graded as a stdin script, as officially);
      the first failure stops the run; ``success`` needs every selected test; the
      feedback shows the public tests as ``CompetitionCodingAgent`` picks them (inputs
      found in the statement, else the first two) and says "Congratulations!" whenever
      those pass. ``public_tests``,
      ``early_stop`` and ``float_tolerance`` do not apply; ``tests_total`` and ``score``
      count the selected tests.
    - ``timeout_per_test`` (6.0 s, the official limit; under official rules the default is
      each source's own, 6 s or 12 s), ``memory_mb`` (4096, the official
      cap), ``limits`` (a ``Limits`` for everything else; its CPU limit is raised to
      cover the timeout).
    - ``early_stop`` (False): stop at the first failing test, as the official checker
      does (tests not run count as failed in ``score``). Off by default so that the
      feedback can show every failing public test and ``score`` is a true pass rate.
    - ``max_feedback_tests`` (2, rLLM's ``max_tests``): failing tests shown per turn.
    - ``float_tolerance`` (None): LiveCodeBench compares numbers exactly (as
      ``Decimal``); a float allows that relative/absolute difference instead.
    - ``parallel``: how many programs ``score_actions``/``outcomes_of_many`` and the
      error-action search run at once (default: up to 4 with the local backend, else 1).
    - ``max_turns`` (4), ``show_budget``, ``render_mode``, ``max_action_chars``: as in
      ``TextEnv``.

    ## Version History
    - v0: initial version.
    """

    default_max_turns: ClassVar[int] = 4
    #: figures over all tests, hidden ones included (``state_key`` hashes which pass)
    hidden_info_keys = frozenset(
        {"score", "tests_passed", "tests_total", "test_results", "step_reward", "state_key"}
    )
    snapshot_version: ClassVar[int] = 1

    def __init__(
        self,
        *,
        tasks_path: str | Path | None = None,
        sandbox: str | Sandbox = "local",
        public_tests: int | float = 3,
        timeout_per_test: float | None = None,
        rules: str = "strict",
        memory_mb: int | None = None,
        early_stop: bool = False,
        max_feedback_tests: int | None = 2,
        float_tolerance: float | None = None,
        limits: Limits | None = None,
        parallel: int | None = None,
        max_turns: int | None = None,
        show_budget: bool = False,
        render_mode: str | None = None,
        max_action_chars: int = 1 << 20,
    ) -> None:
        super().__init__(
            max_turns=max_turns,
            show_budget=show_budget,
            render_mode=render_mode,
            max_action_chars=max_action_chars,
        )
        if isinstance(public_tests, bool) or not isinstance(public_tests, int | float):
            raise ValueError(f"public_tests must be a count or a fraction, got {public_tests!r}")
        if isinstance(public_tests, float) and not 0.0 < public_tests <= 1.0:
            raise ValueError(f"a fraction of public tests must be in (0, 1], got {public_tests}")
        if isinstance(public_tests, int) and public_tests < 1:
            raise ValueError(f"public_tests must be at least 1, got {public_tests}")
        if rules not in official.RULES:
            raise ValueError(f"rules must be one of {official.RULES}, got {rules!r}")
        if timeout_per_test is not None and not timeout_per_test > 0:
            raise ValueError(f"timeout_per_test must be positive, got {timeout_per_test!r}")
        if max_feedback_tests is not None and max_feedback_tests < 1:
            raise ValueError(f"max_feedback_tests must be >= 1 or None, got {max_feedback_tests}")
        if float_tolerance is not None and not float_tolerance >= 0:
            raise ValueError(f"float_tolerance must be >= 0 or None, got {float_tolerance!r}")
        if isinstance(sandbox, str):
            from agentenvs.sandbox import BACKENDS

            if sandbox not in BACKENDS:
                raise ValueError(f"sandbox must be one of {BACKENDS} or a Sandbox, got {sandbox!r}")
        elif not isinstance(sandbox, Sandbox):
            raise ValueError(f"sandbox must be a backend name or a Sandbox, got {sandbox!r}")
        self.task_set: TaskSet = load_tasks(tasks_path)
        # no local sandbox of this process shows these files, nor the folders holding
        # them, where a system dir it shows would (the package's own tasks always are)
        from agentenvs.sandbox.local import hide_from_sandboxes

        files = self.task_set.files
        hide_from_sandboxes(*files, *{os.path.dirname(f) for f in files})
        self._task_ids = list(self.task_set.tasks)
        self.public_tests = public_tests
        self.rules = rules
        self.official = rules == "official"
        #: an explicit limit, or None for each source's official one (official rules)
        self._explicit_timeout = None if timeout_per_test is None else float(timeout_per_test)
        self.timeout_per_test = self._explicit_timeout or official.LCB_TIMEOUT
        self.early_stop = bool(early_stop)
        self.max_feedback_tests = max_feedback_tests
        self.float_tolerance = float_tolerance
        if parallel is not None and (isinstance(parallel, bool) or int(parallel) < 1):
            raise ValueError(f"parallel must be a positive integer or None, got {parallel!r}")
        if parallel is None:  # the local backend is thread-safe; others run one at a time
            parallel = min(4, os.cpu_count() or 1) if sandbox == "local" else 1
        self.parallel = int(parallel)
        base_limits = limits or Limits(memory_mb=4096)
        self.limits = replace(
            base_limits,
            memory_mb=int(memory_mb) if memory_mb is not None else base_limits.memory_mb,
            # official rules run every test of a program in one process: its CPU limit is
            # only a backstop behind the per-test wall-clock limits
            cpu_seconds=max(
                base_limits.cpu_seconds,
                3600 if self.official else math.ceil(self.timeout_per_test) + 1,
            ),
        )
        self._sandbox_spec = sandbox
        self._sandbox: Sandbox | None = sandbox if isinstance(sandbox, Sandbox) else None
        self._owns_sandbox = not isinstance(sandbox, Sandbox)
        if self._owns_sandbox:  # what killed processes left, swept before any code runs
            sweep_leftovers(str(sandbox))
        if sandbox == "docker":  # no engine: fail here, not at the first action
            from agentenvs.sandbox.docker_pool import DockerPool

            DockerPool.shared().client  # noqa: B018 - pings the engine (ServiceUnavailable)
        # caches (never part of the state: they only save work)
        # a caller's own sandbox may behave like no other: its results are not shared
        backend = sandbox if isinstance(sandbox, str) else f"own-{next(_OWN_SANDBOXES)}"
        self._settings_key = (
            backend,
            self.rules,
            self._explicit_timeout,
            self.timeout_per_test,
            self.early_stop,
            self.float_tolerance,
            self.limits,
        )
        # by the task itself, not its id: ``outcomes_of`` takes any task
        self._task_digests: dict[CodeTask, str] = {}
        self._cases: dict[CodeTask, tuple[PyCase, ...]] = {}
        # the episode's state
        self._attempts: list[str] = []
        self._outcomes: tuple[TestOutcome, ...] | None = None
        self._feedback = ""

    # ---------------------------------------------------------------- tasks and prompts
    @property
    def task_ids(self) -> Sequence[str]:
        return self._task_ids

    def _known_task(self, task_id: Any) -> Mapping[str, CodeTask]:
        return self.task_set.tasks

    @property
    def task(self) -> CodeTask:
        if self._task_id is None:
            raise RuntimeError("no task yet: call reset() first")
        return self.task_set.tasks[self._task_id]

    @property
    def n_public(self) -> int:
        return public_count(len(self.task.tests), self.public_tests)

    @property
    def reference(self) -> str | None:
        """The current task's reference solution, when the data has one."""
        return self.task.reference

    @property
    def attempts(self) -> tuple[str, ...]:
        """The programs submitted so far this episode."""
        return tuple(self._attempts)

    @property
    def test_outcomes(self) -> tuple[TestOutcome, ...] | None:
        """Every test's verdict for the last program (None before the first one)."""
        return self._outcomes

    def system_prompt(self) -> str:
        return LCB_SYSTEM_MESSAGE

    def action_format(self) -> str:
        return (
            "Answer with your complete program in a ```python ... ``` block (the last one is run)."
        )

    def _load_task(self, task_id: str, options: Mapping[str, Any]) -> str:
        task = self.task_set.tasks[task_id]
        self._attempts = []
        self._outcomes = None
        self._feedback = ""
        # the suite's convention: the first observation is the system prompt, a blank
        # line, then the task (chat formatting sends the two as system and user messages)
        return f"{self.system_prompt()}\n\n{self._question(task)}"

    def _reset_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {keys.SYSTEM_PROMPT: self.system_prompt()}
        rt = getattr(self._sandbox, "runtime", None)  # the runtime a given sandbox binds
        if rt is not None:
            info["sandbox_runtime"] = rt.info()
        elif self._sandbox_spec == "local":
            from agentenvs.sandbox.runtime import runtime_info

            info["sandbox_runtime"] = runtime_info()  # provisioned once per machine
        if isinstance(self._sandbox_spec, str) and self._sandbox_spec != "auto":
            from agentenvs.sandbox import limits_info

            info["sandbox_limits"] = limits_info(self._sandbox_spec, self.limits)
        return info

    def _extra_info(self) -> dict[str, Any]:
        if self._task_id is None:
            return {}
        task = self.task
        outcomes = self._outcomes
        passed = [o.passed for o in outcomes] if outcomes is not None else [False] * len(task.tests)
        if self.official:
            chosen = official.selected(task)
            public = official.public_indices(task, self._question(task), chosen)
            return {
                "tests_passed": sum(passed[i] for i in chosen),
                "tests_total": len(chosen),
                "public_passed": sum(passed[i] for i in public),
                "public_total": len(public),
                "difficulty": task.difficulty,
            }
        n_public = self.n_public
        return {
            "tests_passed": sum(passed),
            "tests_total": len(passed),
            "public_passed": sum(passed[:n_public]),
            "public_total": n_public,
            "difficulty": task.difficulty,
        }

    # ---------------------------------------------------------------- running programs
    def sandbox(self) -> Sandbox:
        """The env's sandbox, opened on first use."""
        if self._sandbox is None:
            from agentenvs.sandbox import make_sandbox

            assert isinstance(self._sandbox_spec, str)
            self._sandbox = make_sandbox(self._sandbox_spec, limits=self.limits)
        return self._sandbox

    def _cases_of(self, task: CodeTask) -> tuple[PyCase, ...]:
        cases = self._cases.get(task)
        if cases is None:
            cases = tuple(
                PyCase("stdin", stdin=t.input)
                if t.kind == "stdin"
                else PyCase("call", func=task.func_name or "", args=t.args)
                for t in task.tests
            )
            self._cases[task] = cases
        return cases

    def _execute(
        self,
        task: CodeTask,
        code: str,
        *,
        timeout: float,
        stop_on_failure: bool,
        stop_on_timeout: bool = False,
    ) -> tuple[TestOutcome, ...]:
        """Run ``code`` on the task's tests in order; tests not reached are ``NOT_RUN``."""
        if self.official:
            return official.execute(self.sandbox(), task, code, timeout=timeout)
        outcomes: list[TestOutcome] = []
        program, offset = prepare_program(code)
        runs = self.sandbox().run_python_cases(
            program, self._cases_of(task), timeout_per_case=timeout
        )
        try:
            for test, run in zip(task.tests, runs, strict=False):
                outcome = judge(test, run, float_tolerance=self.float_tolerance, line_offset=offset)
                outcomes.append(outcome)
                if (stop_on_failure and not outcome.passed) or (
                    stop_on_timeout and outcome.timed_out
                ):
                    break
        finally:
            close = getattr(runs, "close", None)
            if close is not None:
                close()
        outcomes.extend([NOT_RUN] * (len(task.tests) - len(outcomes)))
        return tuple(outcomes)

    def _run_many(
        self, task: CodeTask, codes: Sequence[str], **options: Any
    ) -> list[tuple[TestOutcome, ...]]:
        """``_execute`` for each program, up to ``parallel`` at once (one worker each)."""
        if self.parallel <= 1 or len(codes) <= 1:
            return [self._execute(task, code, **options) for code in codes]
        self.sandbox()  # open it here, not in several threads at once
        with ThreadPoolExecutor(min(self.parallel, len(codes))) as pool:
            return list(pool.map(lambda code: self._execute(task, code, **options), codes))

    def _key_of(self, task: CodeTask, code: str) -> tuple[Any, ...]:
        return self._cache_key(task, code_digest(code))

    def _cache_key(self, task: CodeTask, *parts: str) -> tuple[Any, ...]:
        """What a verdict on ``task`` depends on: the settings, the task's time limit (under
        official rules its source's) and the whole task, its source format included."""
        digest = self._task_digests.get(task)
        if digest is None:
            digest = self._task_digests[task] = task_digest(task)
        return (self._settings_key, self._timeout_for(task), digest, *parts)

    def _early_stopped(self, outcomes: tuple[TestOutcome, ...]) -> tuple[TestOutcome, ...]:
        for i, outcome in enumerate(outcomes):
            if not outcome.passed:
                return outcomes[: i + 1] + (NOT_RUN,) * (len(outcomes) - i - 1)
        return outcomes

    def outcomes_of(self, code: str, task: CodeTask | None = None) -> tuple[TestOutcome, ...]:
        """Every test's verdict for ``code`` on ``task`` (the current one by default), cached."""
        task = task or self.task
        key = self._key_of(task, code)
        cached = _OUTCOMES.get(key)
        if cached is not None:
            return cached
        outcomes = self._execute(
            task, code, timeout=self._timeout_for(task), stop_on_failure=self.early_stop
        )
        _OUTCOMES.put(key, outcomes)
        return outcomes

    def _timeout_for(self, task: CodeTask) -> float:
        """The per-test limit for ``task``: the configured one, or its source's official."""
        if self.official and self._explicit_timeout is None:
            return official.default_timeout(task)
        return self.timeout_per_test

    def _question(self, task: CodeTask) -> str:
        if task.prompt_formatted:
            return task.problem
        return lcb_prompt(task.problem, task.starter_code)

    def _extract(self, action: str) -> tuple[str | None, str]:
        if self.official:
            code = official.extract_code(action)
            return code, "" if code is not None else official.NO_CODE_MESSAGE
        return extract_code(action)

    def _solved(self, task: CodeTask, outcomes: Sequence[TestOutcome]) -> bool:
        if self.official:
            return official.passed_all(task, outcomes)
        return all(o.passed for o in outcomes)

    def _rate(self, task: CodeTask, outcomes: Sequence[TestOutcome]) -> float:
        if self.official:
            chosen = official.selected(task)
            return sum(outcomes[i].passed for i in chosen) / len(chosen)
        return sum(o.passed for o in outcomes) / len(outcomes)

    # ---------------------------------------------------------------- actions
    def _apply(self, action: str) -> Transition:
        code, problem = self._extract(action)
        if code is None:
            return Transition(
                observation=problem,
                action_valid=False,
                info={"code_found": False, STEP_REWARD: 0.0},
            )
        task = self.task
        outcomes = self.outcomes_of(code)
        self._attempts.append(code)
        self._outcomes = outcomes
        success = self._solved(task, outcomes)
        n_public = self.n_public
        if self.official:
            observation = official.feedback(
                task, outcomes, self._question(task), max_failures=self.max_feedback_tests
            )
        elif success:
            observation = SUCCESS_MESSAGE
        elif all(o.passed for o in outcomes[:n_public]):
            observation = HIDDEN_FAILED_MESSAGE
        else:
            observation = format_feedback(
                task.tests[:n_public], outcomes[:n_public], max_failures=self.max_feedback_tests
            )
        self._feedback = observation
        rate = self._rate(task, outcomes)
        return Transition(
            observation=observation,
            reward=1.0 if success else 0.0,
            terminated=success,
            success=success,
            score=rate,
            info={
                "code_found": True,
                "test_results": [o.passed for o in outcomes],
                # the score before this step is the last program's rate (0 before any)
                STEP_REWARD: rate - self._score,
            },
        )

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        try:
            observation, reward, terminated, truncated, info = super().step(action)
            # an action the base refused (too long, not a str) changed nothing either
            info.setdefault(STEP_REWARD, 0.0)
            return observation, reward, terminated, truncated, info
        except Fault:
            # the turn was never judged: only a reset may follow (the episode is re-run)
            self._done = True
            raise

    def score_action(self, action: str) -> float:
        """The pass rate of ``action``'s program on all tests (0 without a program).

        Runs from the current state without advancing: the env's state is untouched.
        Equal programs are run once (cached by their text).
        """
        if not isinstance(action, str) or len(action) > self.max_action_chars:
            return 0.0
        code, _ = self._extract(action)
        return 0.0 if code is None else self._pass_rate(code)

    def outcomes_of_many(
        self, codes: Sequence[str], task: CodeTask | None = None
    ) -> list[tuple[TestOutcome, ...]]:
        """``outcomes_of`` for each program: those not seen before run concurrently (up to
        ``parallel`` at once, one warm worker each), equal ones once."""
        task = task or self.task
        todo = list(dict.fromkeys(c for c in codes if _OUTCOMES.get(self._key_of(task, c)) is None))
        results = self._run_many(
            task, todo, timeout=self._timeout_for(task), stop_on_failure=self.early_stop
        )
        for code, outcomes in zip(todo, results, strict=True):
            _OUTCOMES.put(self._key_of(task, code), outcomes)
        return [self.outcomes_of(code, task) for code in codes]

    def score_actions(self, actions: Sequence[str]) -> list[float]:
        """``score_action`` for each of ``actions``, new programs run concurrently."""
        codes: list[str | None] = []
        for action in actions:
            ok = isinstance(action, str) and len(action) <= self.max_action_chars
            codes.append(self._extract(action)[0] if ok else None)
        self.outcomes_of_many([c for c in codes if c is not None])
        return [0.0 if c is None else self._pass_rate(c) for c in codes]

    def _pass_rate(self, code: str) -> float:
        return self._rate(self.task, self.outcomes_of(code))

    # ---------------------------------------------------------------- error actions
    def _mutant_search(self, task: CodeTask) -> _MutantSearch:
        key = self._cache_key(task, "error pool")
        search = _ERROR_POOLS.get(key)
        if search is None:
            search = _MutantSearch(task)
            _ERROR_POOLS.put(key, search)
        return search

    def _verified_mutants(self, task: CodeTask, want: int) -> list[str]:
        """The first ``want`` mutants (in the task's fixed order) that fail a test without
        timing out; fewer when the search runs out. Progress is kept between calls.

        Candidates are verified a batch at a time, concurrently; each is judged on its
        own, so the list found does not depend on the batch sizes.
        """
        # the search is shared by the process's envs, which may live on several threads
        # (the async face): one thread advances it at a time
        with _ERROR_SEARCH_LOCK:
            return self._verified_mutants_locked(task, want)

    def _verified_mutants_locked(self, task: CodeTask, want: int) -> list[str]:
        search = self._mutant_search(task)
        while len(search.found) < want and not search.exhausted:
            batch: list[str] = []
            while len(batch) < want - len(search.found) and search.tried < ERROR_MAX_TRIES:
                mutant = next(search.candidates, None)
                if mutant is None:
                    break
                search.tried += 1
                batch.append(mutant)
            if not batch:
                search.exhausted = True
                break
            try:
                results = self._verify(task, batch)
            except BaseException:
                # a Fault (or any error) judged none of them: they are tried again next
                # time, so the mutants found never depend on a fault
                search.candidates = itertools.chain(batch, search.candidates)
                search.tried -= len(batch)
                raise
            for mutant, outcomes in zip(batch, results, strict=True):
                if any(o.timed_out for o in outcomes):
                    continue
                # strict rules stop early here only on a timeout; official ones always do
                if not self.official and any(o.verdict == NOT_RUN.verdict for o in outcomes):
                    continue
                if self._solved(task, outcomes):
                    continue  # an equivalent mutant: not a bug on these tests
                search.found.append(mutant)
                # the full run is what a step would compute: keep it
                view = self._early_stopped(outcomes) if self.early_stop else outcomes
                _OUTCOMES.put(self._key_of(task, mutant), view)
        return search.found[:want]

    def _verify(self, task: CodeTask, batch: list[str]) -> list[tuple[TestOutcome, ...]]:
        """Each mutant's outcomes under ``VERIFY_TIMEOUT``, and for those that timed out
        there, under ``RECHECK_TIMEOUT`` (each capped by the task's limit)."""
        limit = self._timeout_for(task)
        options = {"stop_on_failure": False, "stop_on_timeout": True}
        results = self._run_many(task, batch, timeout=min(limit, VERIFY_TIMEOUT), **options)
        again = [i for i, outcomes in enumerate(results) if any(o.timed_out for o in outcomes)]
        if again and min(limit, RECHECK_TIMEOUT) > min(limit, VERIFY_TIMEOUT):
            slow = self._run_many(
                task, [batch[i] for i in again], timeout=min(limit, RECHECK_TIMEOUT), **options
            )
            for i, outcomes in zip(again, slow, strict=True):
                results[i] = outcomes
        return results

    def error_pool(self, task: CodeTask | None = None) -> list[str]:
        """Every buggy program ``error_action`` can return for ``task``: up to
        ``ERROR_POOL_SIZE`` verified mutants of its reference, else its wrong solutions,
        else a stub program."""
        task = task or self.task
        return self._verified_mutants(task, ERROR_POOL_SIZE) or self._fallbacks(task)

    def _fallbacks(self, task: CodeTask) -> list[str]:
        return list(self.task_set.wrong_solutions.get(task.id, ())) or [self._stub(task)]

    @staticmethod
    def _stub(task: CodeTask) -> str:
        if task.func_name:
            return f"def {task.func_name}(*args):\n    return None\n"
        return "import sys\n\ndata = sys.stdin.read().split()\nprint(data[0] if data else 0)\n"

    def error_action(self, rng: np.random.Generator) -> str:
        """A plausible buggy program (see the class docstring), chosen with ``rng``."""
        task = self.task
        # one draw, then only as many mutants verified as that draw needs: the answer
        # depends on the rng alone, whatever earlier calls already verified
        k = int(rng.integers(ERROR_POOL_SIZE))
        pool = self._verified_mutants(task, k + 1) or self._fallbacks(task)
        code = pool[k] if k < len(pool) else pool[k % len(pool)]
        return f"```python\n{code.rstrip()}\n```"

    # ---------------------------------------------------------------- state
    def _state_key(self) -> str:
        if not self._attempts or self._outcomes is None:
            return "-"
        bits = "".join("1" if o.passed else "0" for o in self._outcomes)
        return f"{code_fingerprint(self._attempts[-1])}|{bits}"

    def _get_state(self) -> dict[str, Any]:
        return {
            "attempts": tuple(self._attempts),
            "outcomes": self._outcomes,
            "feedback": self._feedback,
        }

    def _check_state(self, state: Any, base: Mapping[str, Any]) -> None:
        if not isinstance(state, dict) or set(state) != {"attempts", "outcomes", "feedback"}:
            raise SnapshotError(
                "a DeepCoderMT-v0 state is a dict with attempts, outcomes, feedback"
            )
        attempts, outcomes = state["attempts"], state["outcomes"]
        if not isinstance(attempts, tuple) or not all(isinstance(a, str) for a in attempts):
            raise SnapshotError("attempts must be a tuple of str")
        if not isinstance(state["feedback"], str):
            raise SnapshotError("feedback must be a str")
        task = self.task_set.tasks[base["task_id"]]
        if outcomes is not None and (
            not isinstance(outcomes, tuple)
            or len(outcomes) != len(task.tests)
            or not all(isinstance(o, TestOutcome) for o in outcomes)
        ):
            raise SnapshotError(
                f"outcomes must be None or {len(task.tests)} test outcomes of task {task.id!r}"
            )

    def _set_state(self, state: Any) -> None:
        if not isinstance(state, dict) or not {"attempts", "outcomes", "feedback"} <= set(state):
            raise SnapshotError("not a DeepCoderMT-v0 snapshot state")
        if self._task_id not in self.task_set.tasks:
            raise SnapshotError(f"task {self._task_id!r} is not in this env's tasks")
        outcomes = state["outcomes"]
        if outcomes is not None and len(outcomes) != len(self.task.tests):
            raise SnapshotError(
                f"snapshot has {len(outcomes)} test results but task {self._task_id!r} has "
                f"{len(self.task.tests)} tests: restore into an env with the same tasks"
            )
        self._attempts = list(state["attempts"])
        self._outcomes = outcomes
        self._feedback = state["feedback"]

    def _fork(self, k: int) -> list[TextEnv]:
        # the state is the attempts and their verdicts, in process: copied
        return self._fork_by_copy(k)

    def _detach(self) -> None:
        if self._owns_sandbox:  # a child makes its own sandbox when it first runs code
            self._sandbox = None

    def close(self) -> None:
        if self._sandbox is not None and self._owns_sandbox:
            self._sandbox.close()
            self._sandbox = None
        super().close()
