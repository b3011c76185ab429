"""DeepCoderMT-v0: episode flow, feedback, hidden tests, snapshots, scoring, error actions.

Flow tests run on a scripted stand-in sandbox (the program text names the outputs it
"prints"), so they need no namespaces; tests that run real programs use the local
bubblewrap sandbox (marker ``bwrap``) and skip with the reason where it is unavailable.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from _services import require_bwrap, require_docker

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.core.snapshot import Snapshot
from agentenvs.envs.deepcoder.checker import HIDDEN_FAILED_MESSAGE, NO_CODE_MESSAGE
from agentenvs.envs.deepcoder.env import DeepCoderMTEnv
from agentenvs.envs.deepcoder.lcb import RECURSION_PRELUDE, STAR_PRELUDE, prepare_program
from agentenvs.policy.base import Conversation
from agentenvs.policy.registry import make_policy
from agentenvs.sandbox.base import CaseRun, FilesSnapshot, PyCase, RunResult, Sandbox
from agentenvs.testing import check_env_contract

FIXTURES = Path(__file__).parent / "deepcoder_fixtures"


class ScriptedSandbox(Sandbox):
    """Runs nothing: a program ``OUT = ["6", "5", ...]`` "prints" those lines in turn
    (one per test); ``ERR = "timeout"`` fails every case with that error."""

    backend = "scripted"

    def __init__(self) -> None:
        self.runs = 0

    def run_python_cases(
        self, source: str, cases: Sequence[PyCase], *, timeout_per_case: float = 6.0
    ) -> Iterator[CaseRun]:
        self.runs += 1
        outputs: list[str] = []
        error = None
        for line in source.splitlines():
            if line.startswith("OUT ="):
                outputs = json.loads(line.partition("=")[2])
            if line.startswith("ERR ="):
                error = json.loads(line.partition("=")[2])
        for i, _ in enumerate(cases):
            if error:
                yield CaseRun(stdout="", error=error)
            else:
                yield CaseRun(stdout=outputs[i] + "\n" if i < len(outputs) else "")

    def run(self, command, *, stdin=b"", timeout=10.0, env=None, cwd="/work") -> RunResult:
        raise NotImplementedError

    def write_file(self, path: str, data: bytes | str, *, mode: int = 0o644) -> None:
        raise NotImplementedError

    def read_file(self, path: str) -> bytes:
        raise NotImplementedError

    def snapshot_files(self) -> FilesSnapshot:
        return FilesSnapshot()

    def restore_files(self, snapshot: FilesSnapshot) -> None:
        pass

    def reset(self) -> None:
        pass

    def close(self) -> None:
        pass


# lcb-stdin's tests print 6, 5, 0, 4; the first 2 are public
RIGHT = '```python\nOUT = ["6", "5", "0", "4"]\n```'
PUBLIC_ONLY = '```python\nOUT = ["6", "5", "0", "9"]\n```'
WRONG = '```python\nOUT = ["6", "7", "1", "1"]\n```'


def scripted_env(**kwargs) -> DeepCoderMTEnv:
    kwargs.setdefault("public_tests", 2)
    env = DeepCoderMTEnv(tasks_path=FIXTURES / "lcb.jsonl", sandbox=ScriptedSandbox(), **kwargs)
    env.reset(seed=0, options={"task_id": "lcb-stdin"})
    return env


@pytest.fixture(scope="module")
def bundled() -> Iterator[DeepCoderMTEnv]:
    require_bwrap()
    env = DeepCoderMTEnv(sandbox="local")
    yield env
    env.close()


# ------------------------------------------------------------------------ prompts
def test_first_observation_is_the_lcb_prompt() -> None:
    env = DeepCoderMTEnv(tasks_path=FIXTURES / "lcb.jsonl", sandbox=ScriptedSandbox())
    obs, info = env.reset(seed=0, options={"task_id": "lcb-stdin"})
    assert obs.startswith(info["system_prompt"] + "\n\n")  # the system prompt, then the task
    question = obs[len(info["system_prompt"]) + 2 :]
    assert question.startswith(
        "Print the sum of n numbers.\n\n### Format: Read the inputs from stdin"
    )
    assert "```python\n# YOUR CODE HERE\n```\n\n### Answer: (use the provided format" in obs
    assert info["system_prompt"].startswith("You are an expert Python programmer.")
    assert (info["tests_total"], info["public_total"], info["tests_passed"]) == (4, 3, 0)
    obs, _ = env.reset(options={"task_id": "lcb-call"})
    assert "### Format: You will use the following starter code" in obs
    assert "```python\nclass Solution:\n    def order(self" in obs


# ------------------------------------------------------------------------ episode flow
def test_no_code_is_an_invalid_turn() -> None:
    env = scripted_env()
    key = env.state_key()
    obs, reward, terminated, truncated, info = env.step("I would sum the numbers.")
    assert obs.startswith(NO_CODE_MESSAGE)
    assert (reward, terminated, truncated, info["action_valid"]) == (0.0, False, False, False)
    assert info["turn"] == 1 and info["code_found"] is False
    assert env.state_key() == key and env.attempts == ()


def test_fail_feedback_then_fix_terminates_with_success() -> None:
    env = scripted_env()
    obs, reward, terminated, truncated, info = env.step(WRONG)
    assert obs.startswith("Here are the results on the public test cases:\n### Test 2 failed\n")
    assert "  Input: 1\n5\n\n  Expected: 5\n\n  Actual: 7\n\n\n  Error message: Wrong Answer" in obs
    assert "### Test 1" not in obs and "### Test 3" not in obs  # passing / hidden
    assert (reward, terminated, truncated, info["success"]) == (0.0, False, False, False)
    assert info["score"] == 0.25 and info["test_results"] == [True, False, False, False]
    assert (info["public_passed"], info["public_total"]) == (1, 2)
    obs, reward, terminated, truncated, info = env.step("Fixed:\n" + RIGHT)
    assert obs.startswith("Congratulations!")
    assert (reward, terminated, truncated, info["success"], info["score"]) == (
        1.0,
        True,
        False,
        True,
        1.0,
    )
    assert len(env.attempts) == 2
    with pytest.raises(gym.error.ResetNeeded):
        env.step(RIGHT)


def test_hidden_tests_matter() -> None:
    env = scripted_env()
    obs, reward, terminated, _, info = env.step(PUBLIC_ONLY)
    assert obs == HIDDEN_FAILED_MESSAGE
    assert (reward, terminated, info["success"], info["score"]) == (0.0, False, False, 0.75)
    assert (info["public_passed"], info["tests_passed"]) == (2, 3)
    assert env.score_action(PUBLIC_ONLY) == 0.75 and env.score_action(RIGHT) == 1.0


def test_the_budget_truncates() -> None:
    env = scripted_env(max_turns=2, show_budget=True)
    obs, *_ = env.step(WRONG)
    assert obs.endswith("[1 turn left]")
    _, _, terminated, truncated, info = env.step(WRONG)
    assert (terminated, truncated, info["turns_left"]) == (False, True, 0)


def test_early_stop_counts_tests_not_run_as_failed() -> None:
    env = scripted_env(early_stop=True, public_tests=1.0)
    obs, _, _, _, info = env.step(WRONG)
    assert info["score"] == 0.25
    assert obs.count("### Test") == 1  # tests after the first failure were not run


def test_runtime_errors_and_timeouts_in_feedback() -> None:
    env = scripted_env()
    obs, *_ = env.step('```python\nERR = "timeout"\n```')
    assert obs.count("Error message: Time Limit Exceeded") == 2
    assert "Actual" not in obs


def test_results_are_cached_by_program_text() -> None:
    env = scripted_env()
    box = env.sandbox()
    runs = box.runs
    assert env.score_actions([WRONG, WRONG, "no code", RIGHT]) == [0.25, 0.25, 0.0, 1.0]
    env.step(WRONG)
    assert box.runs == runs + 2


# ------------------------------------------------------------------------ state
def test_state_key_is_code_and_pass_set_without_history() -> None:
    a, b = scripted_env(), scripted_env()
    start = a.state_key()
    a.step(WRONG)
    a.step("no code")
    b.step(WRONG.replace("\n```", "\n# the same program, another comment\n```"))
    assert a.state_key() == b.state_key() != start
    b.step(PUBLIC_ONLY)
    assert a.state_key() != b.state_key()


def test_snapshot_restore_is_exact_and_picklable() -> None:
    env = scripted_env()
    env.step(WRONG)
    snap = env.snapshot()
    first = env.step(PUBLIC_ONLY)
    env.restore(Snapshot.from_bytes(snap.to_bytes()))
    assert env.attempts == (WRONG.split("\n", 1)[1].rsplit("```", 1)[0],)
    assert env.turn == 1 and env.test_outcomes[1].passed is False
    assert env.step(PUBLIC_ONLY) == first
    fresh = DeepCoderMTEnv(
        tasks_path=FIXTURES / "lcb.jsonl", sandbox=ScriptedSandbox(), public_tests=2
    )
    fresh.restore(snap)
    assert fresh.step(PUBLIC_ONLY) == first


# ------------------------------------------------------------------------ programs
def test_prelude_only_when_the_code_reads_unbound_names() -> None:
    program, offset = prepare_program("import sys\nprint(sys.stdin.read())\n")
    assert program.startswith(RECURSION_PRELUDE) and offset == 1
    program, offset = prepare_program("def f(a: List[int]) -> int:\n    return 0\n")
    assert program.startswith(STAR_PRELUDE) and offset == 2
    program, offset = prepare_program("from __future__ import annotations\nx: List = 1\n")
    assert program.startswith("from __future__ import annotations\n" + STAR_PRELUDE)
    assert offset == 3 and program.endswith("\nx: List = 1\n")


def test_error_action_without_reference_falls_back_to_a_stub() -> None:
    env = DeepCoderMTEnv(tasks_path=FIXTURES / "taco.json", sandbox=ScriptedSandbox())
    env.reset(seed=0, options={"task_id": "row-00001"})
    action = env.error_action(np.random.default_rng(0))
    assert action == "```python\ndef add(*args):\n    return None\n```"
    env.reset(seed=0, options={"task_id": "row-00000"})
    assert "sys.stdin.read()" in env.error_action(np.random.default_rng(0))


def test_constructor_checks_its_arguments() -> None:
    for bad in ({"public_tests": 0}, {"public_tests": 1.5}, {"timeout_per_test": 0}):
        with pytest.raises(ValueError):
            DeepCoderMTEnv(tasks_path=FIXTURES / "lcb.jsonl", sandbox="local", **bad)
    with pytest.raises(ValueError, match="sandbox"):
        DeepCoderMTEnv(tasks_path=FIXTURES / "lcb.jsonl", sandbox="vm")


# ------------------------------------------------------------------------ real runs
@pytest.mark.bwrap
def test_every_bundled_reference_passes_and_wrong_solution_fails(bundled) -> None:
    env = bundled
    for task_id in env.task_ids:
        env.reset(options={"task_id": task_id})
        task = env.task
        wrong = env.task_set.wrong_solutions[task_id]
        results = env.outcomes_of_many([task.reference, *wrong])
        assert all(o.passed for o in results[0]), (task_id, results[0])
        for outcomes in results[1:]:
            assert not all(o.passed for o in outcomes), task_id


@pytest.mark.bwrap
def test_real_programs_verdicts(bundled) -> None:
    # roomy for the programs that end at once; only the endless loop reaches it
    env = DeepCoderMTEnv(tasks_path=FIXTURES / "lcb.jsonl", sandbox="local", timeout_per_test=2.0)
    try:
        env.reset(options={"task_id": "lcb-stdin"})
        obs, *_ = env.step("```python\nn = int(input())\nprint(1 // (n - 1))\n```")
        assert "Error message: Runtime Error: ZeroDivisionError: integer division" in obs
        assert 'File "<solution>", line 2' in obs  # the prelude's lines are not counted
        obs, *_ = env.step("```python\nwhile True:\n    pass\n```")
        assert "Error message: Time Limit Exceeded" in obs
        env.reset(options={"task_id": "lcb-call"})
        # LeetCode style: List without an import, a tuple for a list
        code = (
            "class Solution:\n    def order(self, a: int, b: int) -> List[int]:\n"
            "        return (min(a, b), max(a, b))\n"
        )
        _, reward, terminated, _, _ = env.step(f"```python\n{code}```")
        assert (reward, terminated) == (1.0, True)
    finally:
        env.close()


@pytest.mark.bwrap
def test_error_action_fails_a_test_and_is_seeded(bundled) -> None:
    env = bundled
    for task_id in ("dc-001", "dc-033"):
        env.reset(seed=1, options={"task_id": task_id})
        actions = {env.error_action(np.random.default_rng(seed)) for seed in range(6)}
        assert len(actions) > 1
        for action in actions:
            assert env.score_action(action) < 1.0
            assert env.error_action(np.random.default_rng(3)) == env.error_action(
                np.random.default_rng(3)
            )
        _, _, terminated, _, info = env.step(sorted(actions)[0])
        assert not terminated and info["action_valid"] and not info["success"]


@pytest.mark.bwrap
def test_a_reference_slower_than_the_first_check_still_gives_mutants(tmp_path: Path) -> None:
    # each test takes 0.6 s, over the search's first limit (0.5 s): its mutants are judged
    # again under the second (2 s) and kept, so the pool is not the host's load's doing
    reference = "import time\ntime.sleep(0.6)\nn = int(input())\nprint(n * 2)\n"
    row = {
        "id": "slow-double",
        "problem": "Print twice n.",
        "starter_code": "",
        "tests": json.dumps(
            [{"input": f"{n}\n", "output": f"{2 * n}\n", "testtype": "stdin"} for n in (1, 5)]
        ),
        "metadata": json.dumps({"reference": reference}),
    }
    tasks = tmp_path / "slow.jsonl"
    tasks.write_text(json.dumps(row) + "\n")
    env = DeepCoderMTEnv(tasks_path=tasks, sandbox="local")
    try:
        env.reset(seed=0, options={"task_id": "slow-double"})
        pool = env.error_pool()
        assert pool and all("time.sleep" in code for code in pool), pool
        for code in pool:
            assert not all(o.passed for o in env.outcomes_of(code))
            assert not any(o.timed_out for o in env.outcomes_of(code))
    finally:
        env.close()


@pytest.mark.bwrap
def test_scoring_sixteen_candidates_from_one_state(bundled) -> None:
    env = bundled
    env.reset(seed=0, options={"task_id": "dc-014"})
    env.step(env.error_action(np.random.default_rng(0)))
    key, turn = env.state_key(), env.turn
    rng = np.random.default_rng(7)
    reference = f"```python\n{env.reference}\n```"
    candidates = [env.error_action(rng) for _ in range(12)] + [reference] * 2
    candidates += [reference.replace("\n```", "\n# variant\n```"), "no code"]
    scores = env.score_actions(candidates)  # how fast: benchmarks/bench_deepcoder.py
    assert scores[12] == scores[13] == scores[14] == 1.0 and scores[15] == 0.0
    assert all(s < 1.0 for s in scores[:12])
    assert (env.state_key(), env.turn) == (key, turn)


@pytest.mark.bwrap
def test_scripted_policies(bundled) -> None:
    env = bundled
    obs, info = env.reset(seed=0, options={"task_id": "dc-040", "max_turns": 3})
    reference = make_policy("deepcoder/reference")
    conversation = Conversation.start(obs, info, env=env)
    *_, terminated, _, info = env.step(reference.sample([conversation], seed=0)[0][0])
    assert terminated and info["success"] and info["turn"] == 1
    fixer = make_policy("deepcoder/buggy-then-fix:fix_rate=1.0")
    obs, info = env.reset(seed=0, options={"task_id": "dc-040", "max_turns": 3})
    conversation = Conversation.start(obs, info, env=env)
    for turn in (1, 2):
        action = fixer.sample([conversation], seed=turn)[0][0]
        obs, _, terminated, _, info = env.step(action)
        conversation.add_turn(action, obs)
    assert terminated and info["success"] and info["turn"] == 2


@pytest.mark.docker
def test_docker_backend_runs_the_reference() -> None:
    require_docker()
    env = DeepCoderMTEnv(sandbox="docker")
    try:
        env.reset(seed=0, options={"task_id": "dc-033"})
        _, reward, terminated, _, _ = env.step(f"```python\n{env.reference}\n```")
        assert (reward, terminated) == (1.0, True)
        assert env.score_action(env.error_action(np.random.default_rng(0))) < 1.0
    finally:
        env.close()


@pytest.mark.bwrap
def test_contract_on_one_task_with_early_stop() -> None:
    require_bwrap()
    check_env_contract(
        "agentenvs/DeepCoderMT-v0",
        options={"task_id": "dc-035"},
        env_kwargs={"early_stop": True, "public_tests": 0.5},
        steps=10,
        check_processes=False,  # the registry-wide contract test runs it
    )


@pytest.mark.docker
def test_contract_on_docker() -> None:
    require_docker()
    check_env_contract(
        "agentenvs/DeepCoderMT-v0",
        options={"task_id": "dc-035"},
        env_kwargs={"sandbox": "docker", "early_stop": True, "public_tests": 0.5},
        steps=10,
    )
