"""Harbor's multi-step tasks (``[[steps]]``) play as one episode of several instructions:
each submit runs that step's tests, the observation says the step's result and gives the
next step's instruction in the same state; the trial's score follows the task's
``multi_step_reward_strategy`` as Harbor computes it, and stops where Harbor stops."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentenvs.core.errors import Fault, TaskError
from agentenvs.envs.terminal.data import load_task
from agentenvs.envs.terminal.env import TerminalBenchEnv
from agentenvs.envs.terminal.steps import TaskStep, stops_after, trial_rewards

FIXTURES = Path(__file__).parent / "terminal_steps_fixtures"
TWO_STEPS = FIXTURES / "harbor-two-steps"

RUNTIMES = [
    pytest.param("local", marks=pytest.mark.bwrap),
    pytest.param("docker", marks=pytest.mark.docker("agentenvs/tb-python:3.13")),
]


def _variant(root: Path, name: str, *, head: str = "", step_one: str = "") -> Path:
    """A copy of the two-step fixture, ``head`` put before its first table and
    ``step_one`` into its first step's table."""
    task = root / name
    shutil.copytree(TWO_STEPS, task)
    text = (task / "task.toml").read_text()
    text = text.replace(
        'multi_step_reward_strategy = "mean"\n', head or 'multi_step_reward_strategy = "mean"\n'
    )
    text = text.replace('name = "write"\n', f'name = "write"\n{step_one}')
    (task / "task.toml").write_text(text)
    return task


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("steps")
    shutil.copytree(TWO_STEPS, root / "two-steps")
    _variant(root, "two-steps-final", head='multi_step_reward_strategy = "final"\n')
    _variant(root, "two-steps-gated", step_one="min_reward = 1.0\n")
    # step 1's tests write no reward file: no verifier result, the trial stops (Harbor)
    broken = _variant(root, "two-steps-no-reward")
    (broken / "steps" / "write" / "tests" / "test.sh").write_text("#!/bin/bash\ntrue\n")
    return root


@pytest.fixture(scope="module", params=RUNTIMES)
def env(request: pytest.FixtureRequest, tasks: Path) -> Iterator[TerminalBenchEnv]:
    made = TerminalBenchEnv(
        tasks_path=tasks, runtime=request.param, command_timeout=60, max_turns=6
    )
    yield made
    made.close()


def test_steps_load_with_their_files_and_timeouts() -> None:
    task = load_task(TWO_STEPS)
    assert [s.name for s in task.steps] == ["write", "extend"]
    assert task.instruction.startswith("Write the word `alpha`")
    write, extend = task.steps
    assert write.tests_dir == TWO_STEPS / "steps/write/tests"
    assert extend.solution_path == TWO_STEPS / "steps/extend/solution/solve.sh"
    assert write.workdir is None and extend.workdir == TWO_STEPS / "steps/extend/workdir"
    assert (write.agent_timeout_sec, write.test_timeout_sec) == (None, None)
    assert (extend.agent_timeout_sec, extend.test_timeout_sec) == (90.0, 30.0)
    assert task.multi_step_reward_strategy == "mean" and task.problems == ()


def test_a_step_without_its_instruction_is_named(tmp_path: Path) -> None:
    task = _variant(tmp_path, "t")
    (task / "steps" / "extend" / "instruction.md").unlink()
    with pytest.raises(TaskError, match="extend"):
        load_task(task)


def test_the_reward_strategies_are_harbors() -> None:
    # mean: per key over the steps with a result, a key a step lacks counts 0 there;
    # a step without a result is left out of the denominator
    got = trial_rewards("mean", [{"a": 1.0, "b": 1.0}, None, {"a": 0.0}])
    assert got == {"a": 0.5, "b": 0.5}
    # final: the last step run's result as it is, none when it gave none
    assert trial_rewards("final", [{"reward": 1.0}, {"reward": 0.25}]) == {"reward": 0.25}
    assert trial_rewards("final", [{"reward": 1.0}, None]) is None
    assert trial_rewards("mean", [None]) is None
    gate = TaskStep(name="s", instruction="x", min_reward=(("reward", 1.0),))
    assert stops_after(gate, {"reward": 1.0}) is None
    assert "below its min_reward" in (stops_after(gate, {"reward": 0.5}) or "")
    assert "below its min_reward" in (stops_after(gate, {"other": 1.0}) or "")  # missing: -inf
    assert "no verifier result" in (stops_after(TaskStep(name="s", instruction="x"), None) or "")


@pytest.mark.parametrize("runtime_env", RUNTIMES)
def test_the_solution_passes_each_step_and_an_empty_trial_fails(
    runtime_env: str, tasks: Path
) -> None:
    env = TerminalBenchEnv(tasks_path=tasks, runtime=runtime_env, command_timeout=60, max_turns=6)
    try:
        obs, info = env.reset(options={"task_id": "two-steps"})
        assert "Write the word `alpha`" in obs and "append one line" not in obs
        assert (info["step_index"], info["steps_total"], info["step_results"]) == (0, 2, [])
        env.step(env.oracle_action())
        obs, reward, term, _, info = env.step("submit")
        assert not term and reward == 0.0, obs
        assert "Step 1 (write) passed." in obs and "Step 2 of 2" in obs
        assert "append one line" in obs  # the next instruction
        assert info["step_index"] == 1 and info["step_results"][0]["rewards"] == {"reward": 1.0}
        env.step(env.oracle_action())  # step 2's own solution
        obs, reward, term, _, info = env.step("submit")
        assert term and reward == 1.0 and info["success"] and info["score"] == 1.0, obs
        assert [r["rewards"] for r in info["step_results"]] == [{"reward": 1.0}] * 2

        env.reset(options={"task_id": "two-steps"})
        obs, _, term, _, info = env.step("submit")
        assert not term and "Step 1 (write) failed." in obs
        obs, reward, term, _, info = env.step("submit")
        assert term and reward == 0.0 and not info["success"] and info["score"] == 0.0
    finally:
        env.close()


def _pass_one_fail_two(env: TerminalBenchEnv, task_id: str) -> tuple[str, float, bool, dict]:
    env.reset(options={"task_id": task_id})
    env.step(env.oracle_action())
    obs, _, term, _, info = env.step("submit")
    assert not term, obs
    obs, reward, term, _, info = env.step("echo 7 >> /app/notes.txt\nsubmit")
    return obs, reward, term, info


def test_step_one_passes_step_two_fails_mean(env: TerminalBenchEnv) -> None:
    obs, reward, term, info = _pass_one_fail_two(env, "two-steps")
    assert term and "Step 2 (extend) failed." in obs
    assert [r["rewards"] for r in info["step_results"]] == [{"reward": 1.0}, {"reward": 0.0}]
    assert info["score"] == 0.5 and not info["success"] and reward == 0.0
    assert "Trial rewards (mean of the steps): reward=0.5" in obs


def test_step_one_passes_step_two_fails_final(env: TerminalBenchEnv) -> None:
    obs, reward, term, info = _pass_one_fail_two(env, "two-steps-final")
    assert term and info["score"] == 0.0 and not info["success"]
    assert "Trial rewards (final of the steps): reward=0" in obs


def test_a_min_reward_not_met_stops_the_trial(env: TerminalBenchEnv) -> None:
    env.reset(options={"task_id": "two-steps-gated"})
    obs, reward, term, _, info = env.step("submit")
    assert term and reward == 0.0 and "below its min_reward 1" in obs
    assert len(info["step_results"]) == 1 and info["step_index"] == 0
    # without the gate the same failure goes on to step 2
    env.reset(options={"task_id": "two-steps"})
    _, _, term, _, _ = env.step("submit")
    assert not term


def test_a_step_without_a_verifier_result_stops_the_trial(env: TerminalBenchEnv) -> None:
    env.reset(options={"task_id": "two-steps-no-reward"})
    env.step(env.oracle_action())
    obs, reward, term, _, info = env.step("submit")
    assert term and "gave no verifier result" in obs
    assert info["step_results"][0]["rewards"] is None and info["score"] == 0.0


def test_a_snapshot_mid_trial_restores_the_step(env: TerminalBenchEnv) -> None:
    env.reset(options={"task_id": "two-steps"})
    env.step(env.oracle_action())
    env.step("submit")
    snap = env.snapshot()
    env.step(env.oracle_action())
    first = env.step("submit")
    assert first[2] and first[4]["success"]
    env.restore(snap)
    assert env.task.step_tests_dir is not None and env.task.step_tests_dir.parent.name == "extend"
    assert env._info(action_valid=True)["step_index"] == 1
    env.step(env.oracle_action())
    again = env.step("submit")
    assert again[0] == first[0] and again[1:3] == first[1:3]
    assert again[4]["step_results"] == first[4]["step_results"]


@pytest.mark.bwrap
def test_the_turn_budget_ends_the_trial_at_its_step(tasks: Path) -> None:
    env = TerminalBenchEnv(tasks_path=tasks, runtime="local", command_timeout=60, max_turns=2)
    try:
        env.reset(options={"task_id": "two-steps"})
        env.step(env.oracle_action())
        # the last turn: step 1 passes, step 2 begins with no turn left, and its tests run
        obs, reward, term, trunc, info = env.step("submit")
        assert trunc and "[turn budget exhausted]" in obs
        assert [r["rewards"] for r in info["step_results"]] == [{"reward": 1.0}, {"reward": 0.0}]
        assert info["score"] == 0.5 and not info["success"] and reward == 0.0
        assert "Trial rewards (mean of the steps): reward=0.5" in obs
    finally:
        env.close()


def _step_tables(root: Path, name: str, extend: str, *, task_verifier: str = "") -> Path:
    """A copy of the two-step fixture with ``extend`` put under its second step's
    ``[steps.verifier]`` table (its last) and ``task_verifier`` under the task's."""
    task = _variant(root, name)
    toml = task / "task.toml"
    text = toml.read_text().replace(
        "[verifier]\ntimeout_sec = 60.0\n", f"[verifier]\ntimeout_sec = 60.0\n{task_verifier}"
    )
    toml.write_text(text + extend)
    return task


@pytest.mark.parametrize("runtime_env", RUNTIMES)
def test_a_steps_verifier_env_and_healthcheck_are_applied(runtime_env: str, tmp_path: Path) -> None:
    task = _step_tables(
        tmp_path,
        "step-tables",
        'env = { WHO = "extend" }\n\n[steps.healthcheck]\n'
        'command = "test -f /app/.step-ready && touch /app/.healthy"\n'
        "interval_sec = 0.1\nretries = 2\n",
        task_verifier='env = { WHO = "task", KEEP = "kept" }\n',
    )
    # each step's tests say which variables they were given
    for step, want in (("write", "task kept"), ("extend", "extend kept")):
        (task / "steps" / step / "tests" / "test.sh").write_text(
            "#!/bin/bash\nmkdir -p /logs/verifier\n"
            f'[ "$WHO $KEEP" = "{want}" ] && echo 1 > /logs/verifier/reward.txt '
            "|| echo 0 > /logs/verifier/reward.txt\n"
        )
    loaded = load_task(task)
    assert loaded.steps[1].verifier_env == (("WHO", "extend"),)
    assert loaded.steps[1].healthcheck.retries == 2 and loaded.steps[0].healthcheck is None
    # a second task whose step 2 never becomes healthy
    _step_tables(
        tmp_path,
        "step-unhealthy",
        '\n[steps.healthcheck]\ncommand = "false"\ninterval_sec = 0.1\nretries = 1\n',
    )
    env = TerminalBenchEnv(
        tasks_path=tmp_path, runtime=runtime_env, command_timeout=60, max_turns=6
    )
    try:
        env.reset(options={"task_id": "step-tables"})
        obs, *_ = env.step("test -e /app/.healthy && echo early || echo none")
        assert obs.split()[0] == "none", obs  # step 1 has no healthcheck
        obs, _, term, _, info = env.step("submit")
        assert not term and info["step_results"][0]["rewards"] == {"reward": 1.0}, obs
        obs, *_ = env.step("test -e /app/.healthy && echo ran || echo none")
        assert obs.split()[0] == "ran", obs  # after step 2's setup, before its agent
        obs, reward, term, _, info = env.step("submit")
        assert term and [r["rewards"] for r in info["step_results"]] == [{"reward": 1.0}] * 2

        env.reset(options={"task_id": "step-unhealthy"})
        with pytest.raises(Fault, match="unhealthy"):
            env.step("submit")
    finally:
        env.close()


@pytest.mark.bwrap
def test_a_steps_users_and_artifacts_are_refused_with_the_reason(tmp_path: Path) -> None:
    _step_tables(tmp_path, "step-user", 'user = "nobody"\n')
    task = _step_tables(tmp_path, "step-artifacts", "")
    toml = task / "task.toml"
    toml.write_text(
        toml.read_text().replace(
            'name = "extend"\n', 'name = "extend"\nartifacts = ["/app/notes.txt"]\n'
        )
    )
    env = TerminalBenchEnv(tasks_path=tmp_path, runtime="local")
    try:
        assert "steps[1].verifier.user = 'nobody'" in env.unsupported_tasks["step-user"]
        assert "opened once per trial" in env.unsupported_tasks["step-user"]
        assert "steps[1].artifacts" in env.unsupported_tasks["step-artifacts"]
        with pytest.raises(TaskError, match="once per trial"):
            env.reset(options={"task_id": "step-user"})
    finally:
        env.close()
