"""TerminalBench-v0 on the local runtime: layouts, the persistent shell, timeouts,
snapshots, and the bundled tasks with and without their solutions."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from agentenvs.core.errors import TaskError
from agentenvs.envs.terminal.data import load_task, load_tasks
from agentenvs.envs.terminal.env import TerminalBenchEnv
from agentenvs.envs.terminal.grading import AGENT_PROCESSES_TAG, GRADINGS
from agentenvs.testing import FileProbe

FIXTURES = Path(__file__).parent / "terminal_fixtures"

pytestmark = pytest.mark.bwrap  # skipped with the reason where bubblewrap cannot run
#: a command timeout no command of these tests comes near, however loaded the machine;
#: the tests of timeouts set TRIP_S, which their commands (sleep 100, a loop) always exceed
ROOMY_S = 30
TRIP_S = 3


@pytest.fixture
def fixture_env() -> Iterator[TerminalBenchEnv]:
    env = TerminalBenchEnv(tasks_path=FIXTURES, command_timeout=ROOMY_S, max_turns=6)
    yield env
    env.close()


def test_both_layouts_load() -> None:
    tasks = load_tasks(FIXTURES)
    tb1, harbor = tasks["tb1-greeting"], tasks["harbor-count"]
    assert tb1.layout == "tb1" and tb1.runs_setup and tb1.max_test_timeout_sec == 30
    assert tb1.max_agent_timeout_sec == 360  # the default
    assert harbor.layout == "harbor" and harbor.max_agent_timeout_sec == 120
    assert harbor.test_script == "tests/test.sh" and "wc -l" in (harbor.solution or "")


def test_broken_task_names_file_and_field(tmp_path: Path) -> None:
    task = tmp_path / "bad"
    task.mkdir()
    (task / "task.yaml").write_text("difficulty: easy\n")
    with pytest.raises(TaskError, match=r"task\.yaml.*instruction"):
        load_task(task)
    (task / "task.yaml").write_text("instruction: x\nmax_test_timeout_sec: -1\n")
    (task / "Dockerfile").write_text("FROM x\n")
    (task / "run-tests.sh").write_text("pytest\n")
    (task / "tests").mkdir()
    with pytest.raises(TaskError, match="max_test_timeout_sec"):
        load_task(task)


def test_unsupported_tasks_are_listed_and_refused(tmp_path: Path) -> None:
    for name, docker, tests in [
        ("apt-task", "FROM ${BASE_IMAGE}\nRUN apt-get install -y jq\n", "pytest"),
        # a base the local runtime does not stand in for (Debian/Ubuntu with Python it does)
        ("ubuntu", "FROM alpine:3.20\nWORKDIR /app\n", "pytest"),
        ("net-tests", "FROM ${BASE_IMAGE}\n", "curl -LsSf https://astral.sh/uv/install.sh | sh"),
        ("needs", "FROM ${BASE_IMAGE}\n", "pytest"),
    ]:
        d = tmp_path / name
        (d / "tests").mkdir(parents=True)
        tags = "tags: ['needs:no-such-binary-xyz']\n" if name == "needs" else ""
        (d / "task.yaml").write_text(f"instruction: do it\n{tags}")
        (d / "Dockerfile").write_text(docker)
        (d / "run-tests.sh").write_text(tests)
    env = TerminalBenchEnv(tasks_path=tmp_path)
    try:
        why = env.unwrapped.unsupported_tasks
        # a test bootstrap that downloads is served offline, not refused
        assert set(why) == {"apt-task", "ubuntu", "needs"}
        assert "RUN 'apt-get install -y jq'" in why["apt-task"]
        assert "alpine:3.20" in why["ubuntu"] and "no-such-binary-xyz" in why["needs"]
        with pytest.raises(TaskError, match="alpine:3.20"):
            env.reset(options={"task_id": "ubuntu"})
    finally:
        env.close()


def test_bad_folders_are_listed_and_the_rest_load(tmp_path: Path) -> None:
    import shutil

    shutil.copytree(FIXTURES / "tb1-greeting", tmp_path / "good")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "task.yaml").write_text("instruction: [unclosed\n")
    (tmp_path / "no-image").mkdir()
    (tmp_path / "no-image" / "task.toml").write_text("[verifier]\ntimeout_sec = 5\n")
    (tmp_path / "no-image" / "instruction.md").write_text("do it\n")
    env = gym.make("agentenvs/TerminalBench-v0", tasks_path=tmp_path)
    try:
        bad = env.unwrapped.invalid_tasks
        assert set(bad) == {"broken", "no-image"}
        assert "task.yaml" in bad["broken"] and "not valid YAML" in bad["broken"]
        assert "Dockerfile" in bad["no-image"]
        assert list(env.unwrapped.tasks) == ["good"]
    finally:
        env.close()


def test_no_runnable_task_says_why(tmp_path: Path) -> None:
    d = tmp_path / "ubuntu"
    (d / "tests").mkdir(parents=True)
    (d / "task.yaml").write_text("instruction: do it\n")
    (d / "Dockerfile").write_text("FROM ubuntu:24.04\n")
    (d / "run-tests.sh").write_text("pytest\n")
    env = TerminalBenchEnv(tasks_path=tmp_path)
    try:
        with pytest.raises(TaskError, match=r"no task can run on the local runtime.*ubuntu:24\.04"):
            env.reset()
    finally:
        env.close()


def test_tb1_fixture_solved_and_unsolved(fixture_env: TerminalBenchEnv) -> None:
    obs, info = fixture_env.reset(options={"task_id": "tb1-greeting"})
    assert "hello, world" in obs and "```bash" in obs and info["score"] == 0.0
    obs, reward, term, trunc, info = fixture_env.step("cat greeting.txt extra/made.txt")
    assert "TODO" in obs and "made" in obs and "[exit status: 0]" in obs
    obs, reward, term, trunc, info = fixture_env.step("submit")
    assert term and reward == 0.0 and not info["success"]
    assert info["score"] == 0.5 and info["test_results"] == {
        "test_greeting": False,
        "test_setup_ran": True,
    }
    fixture_env.reset(options={"task_id": "tb1-greeting"})
    fixture_env.step(f"```bash\n{fixture_env.task.solution}\n```")
    _, reward, term, _, info = fixture_env.step("submit")
    assert term and reward == 1.0 and info["success"] and info["score"] == 1.0


def test_real_layout_fixture_locally(fixture_env: TerminalBenchEnv) -> None:
    # FROM --platform + ENV PATH=...:$PATH + the official uv bootstrap, served offline
    fixture_env.command_timeout = 60
    obs, _ = fixture_env.reset(options={"task_id": "tb1-uv-env"})
    obs, *_ = fixture_env.step('echo "$PATH"; echo "$GREETING_STYLE"')
    assert obs.startswith("/opt/tools/bin:/usr/local/sbin:") and "formal" in obs
    _, reward, term, _, info = fixture_env.step("submit")
    assert (
        term
        and not info["success"]
        and info["test_results"]
        == {
            "test_greeting": False,
            "test_tests_see_the_image_environment": True,
        }
    )
    fixture_env.reset(options={"task_id": "tb1-uv-env"})
    obs, *_ = fixture_env.step(fixture_env.oracle_action())
    _, reward, term, _, info = fixture_env.step("submit")
    assert term and reward == 1.0 and info["success"], fixture_env._test_output


def test_oracle_files_where_the_harnesses_put_them(fixture_env: TerminalBenchEnv) -> None:
    fixture_env.reset(options={"task_id": "tb1-greeting"})
    obs, *_ = fixture_env.step(fixture_env.oracle_action() + "\n```bash\nls /oracle\n```")
    assert "solution.sh" in obs and "[exit status: 0]" in obs
    fixture_env.reset(options={"task_id": "harbor-count"})
    obs, *_ = fixture_env.step(
        fixture_env.oracle_action() + "\n```bash\nls /solution; cat /app/count.txt\n```"
    )
    assert "solve.sh" in obs and "3" in obs


@pytest.mark.parametrize(
    "action",
    [
        '{"commands": ' + "[" * 100_000 + "]" * 100_000 + "}",
        '{"commands": [], "n": ' + "1" * 5000 + "}",
        '{"commands": [{"keystrokes": "ls\\ud800\\n"}]}',
    ],
)
def test_unreadable_actions_spend_a_turn(fixture_env: TerminalBenchEnv, action: str) -> None:
    fixture_env.reset(options={"task_id": "tb1-greeting"})
    obs, _, term, _, info = fixture_env.step(action)
    assert not info["action_valid"] and not term and "Invalid action" in obs
    assert fixture_env.score_action(action) == 0.5  # the starting state's pass fraction


def test_harbor_fixture_reward_file(fixture_env: TerminalBenchEnv) -> None:
    fixture_env.reset(options={"task_id": "harbor-count"})
    _, reward, term, _, info = fixture_env.step("submit")
    assert term and reward == 0.0 and info["score"] == 0.0
    fixture_env.reset(options={"task_id": "harbor-count"})
    _, reward, term, _, info = fixture_env.step(
        f"```bash\n{fixture_env.task.solution}\n```\nsubmit"
    )
    assert term and reward == 1.0 and info["success"]


def test_persistent_shell(fixture_env: TerminalBenchEnv) -> None:
    fixture_env.reset(options={"task_id": "tb1-greeting"})
    fixture_env.step("cd /app/extra && export GREETING=hi && LOCAL=1")
    obs, *_ = fixture_env.step('echo "$PWD $GREETING $LOCAL"')
    assert "/app/extra hi 1" in obs
    fixture_env.step("sleep 300 &")
    obs, *_ = fixture_env.step("jobs")
    assert "sleep 300" in obs and "Running" in obs
    obs, *_ = fixture_env.step("exit 4")
    assert "new shell was started in /app/extra" in obs
    obs, *_ = fixture_env.step("pwd")
    assert "/app/extra" in obs


def test_timeout_interrupts_only_the_command(fixture_env: TerminalBenchEnv) -> None:
    fixture_env.command_timeout = TRIP_S
    fixture_env.reset(options={"task_id": "tb1-greeting"})
    fixture_env.step("sleep 200 & echo started")
    obs, *_, info = fixture_env.step("echo before; sleep 100; echo never")
    assert "before" in obs and "never" not in obs and "timed out" in obs
    assert info["timed_out"] and info["exit_status"] == 130
    obs, *_ = fixture_env.step("jobs; echo still-here")
    assert "sleep 200" in obs and "still-here" in obs
    obs, *_ = fixture_env.step("while true; do :; done")
    assert "timed out" in obs and "new shell" in obs
    obs, *_ = fixture_env.step("echo alive")
    assert "alive" in obs


def test_output_truncation_is_said(fixture_env: TerminalBenchEnv) -> None:
    fixture_env.max_output_chars = 1000
    fixture_env.reset(options={"task_id": "tb1-greeting"})
    obs, *_ = fixture_env.step("seq 1 100000")
    assert "output truncated" in obs and obs.startswith("1\n2\n") and "100000" in obs


def test_contained_fork_bomb_and_disk_fill(fixture_env: TerminalBenchEnv) -> None:
    fixture_env.reset(options={"task_id": "tb1-greeting"})
    obs, *_ = fixture_env.step("head -c 2G /dev/zero > /app/big; ls -la /app/big | wc -l")
    assert "[exit status" in obs
    obs, *_ = fixture_env.step("rm -f /app/big; echo ok")
    assert "ok" in obs
    fixture_env.command_timeout = TRIP_S  # the bomb's commands are stopped when they time out
    obs, _, term, _, info = fixture_env.step("b(){ b|b& }; b")
    # contained, whichever way the bomb goes: the shell survives, or the bomb takes it and
    # a new shell is started, or it takes the sandbox and the episode ends as a failure.
    # The bomb's processes wait out fork retries before they die, so its end is awaited
    # (a minute at most) rather than expected by the next step
    deadline = time.monotonic() + 60
    while not term and "survived" not in obs and time.monotonic() < deadline:
        if obs.count("fork: retry") or "a new shell was started" in obs:
            time.sleep(0.5)
        obs, _, term, _, info = fixture_env.step("echo survived")
    if term:
        assert "sandbox was lost" in obs and not info["success"]
    else:
        assert "survived" in obs.splitlines()


def test_snapshot_restore_replays_equal(fixture_env: TerminalBenchEnv) -> None:
    fixture_env.reset(options={"task_id": "tb1-greeting"})
    fixture_env.step("cd extra && export K=v && echo data > new.txt")
    snap = fixture_env.snapshot()
    key = fixture_env.state_key()
    first = fixture_env.step("echo $K $PWD; ls; cat new.txt; rm new.txt")
    fixture_env.restore(snap)
    assert fixture_env.state_key() == key
    second = fixture_env.step("echo $K $PWD; ls; cat new.txt; rm new.txt")
    assert first[0] == second[0] and first[4] == second[4]
    # into a fresh env too
    other = TerminalBenchEnv(tasks_path=FIXTURES, command_timeout=ROOMY_S, max_turns=6)
    try:
        other.restore(snap)
        third = other.step("echo $K $PWD; ls; cat new.txt; rm new.txt")
        assert third[0] == first[0]
    finally:
        other.close()


def test_error_action_and_score_action(fixture_env: TerminalBenchEnv) -> None:
    fixture_env.reset(options={"task_id": "tb1-greeting"})
    solution = f"```bash\n{fixture_env.task.solution}\n```"
    key = fixture_env.state_key()
    assert fixture_env.score_action(solution) == 1.0
    assert fixture_env.score_action("echo nothing") == 0.5
    assert fixture_env.state_key() == key and fixture_env.turn == 0
    actions = {fixture_env.error_action(np.random.default_rng(s)) for s in range(12)}
    assert len(actions) > 1
    assert all(a.startswith("```bash") for a in actions)
    assert any("rm -f /app/" in a for a in actions)


def test_budget_runs_the_tests(fixture_env: TerminalBenchEnv) -> None:
    fixture_env.reset(options={"task_id": "tb1-greeting", "max_turns": 1})
    obs, reward, term, trunc, info = fixture_env.step(f"```bash\n{fixture_env.task.solution}\n```")
    assert trunc and not term and reward == 1.0 and info["success"]
    assert "turn budget exhausted" in obs


def test_registered_with_policies() -> None:
    import agentenvs  # noqa: F401
    from agentenvs.policy.registry import make_policy

    env = gym.make("agentenvs/TerminalBench-v0", tasks_path=FIXTURES)
    try:
        assert isinstance(env.unwrapped, TerminalBenchEnv)
        assert make_policy("terminal/noisy:error_rate=0.5").error_rate == 0.5
    finally:
        env.close()


#: the contract's file_modes check: modes, an empty dir, a symlink, old mtimes
FILE_PROBE = FileProbe(
    options={"task_id": "tb1-greeting"},
    setup=(
        "cd /app && mkdir -p probe/empty && printf x > probe/a && printf y > probe/b "
        "&& chmod 777 probe/a && chmod 666 probe/b && chmod 700 probe/empty "
        "&& ln -s a probe/link && touch -h -d @1000000000 probe/a probe/link",
    ),
    disturb=("cd /app && chmod 755 probe/a && chmod 644 probe/b && rmdir probe/empty",),
    listing="cd /app && find probe -printf '%p %M %y %l %s %U:%G %T@\\n' | sort",
)


def test_contract_local() -> None:
    from agentenvs.testing import check_env_contract

    check_env_contract(
        "agentenvs/TerminalBench-v0",
        env_kwargs={"tasks_path": str(FIXTURES), "command_timeout": ROOMY_S},
        options={"task_id": "tb1-greeting"},
        steps=4,
        file_probe=FILE_PROBE,
    )


BUNDLED_TASKS = load_tasks()
BUNDLED = sorted(BUNDLED_TASKS)


@pytest.fixture(scope="module")
def bundled_envs() -> Iterator[dict[str, TerminalBenchEnv]]:
    envs = {g: TerminalBenchEnv(command_timeout=60, max_turns=3, grading=g) for g in GRADINGS}
    yield envs
    for env in envs.values():
        env.close()


def _grading_for(task_id: str) -> str:
    """Safe grading, but for tasks whose tests check the agent's own running processes."""
    return "official" if AGENT_PROCESSES_TAG in BUNDLED_TASKS[task_id].tags else "safe"


@pytest.mark.slow
@pytest.mark.parametrize("task_id", BUNDLED)
def test_bundled_task_solution_passes_and_nothing_fails(
    bundled_envs: dict[str, TerminalBenchEnv], task_id: str
) -> None:
    bundled_env = bundled_envs[_grading_for(task_id)]
    if _grading_for(task_id) == "official" and task_id not in bundled_env.unsupported_tasks:
        assert "safe grading stops" in bundled_envs["safe"].unsupported_tasks[task_id]
    if task_id in bundled_env.unsupported_tasks:
        pytest.skip(bundled_env.unsupported_tasks[task_id])
    bundled_env.reset(options={"task_id": task_id})
    _, reward, term, _, info = bundled_env.step("submit")
    assert term and not info["success"], "the tests pass without a solution"
    bundled_env.reset(options={"task_id": task_id})
    obs, *_ = bundled_env.step(f"```bash\n{bundled_env.task.solution}\n```")
    _, reward, term, _, info = bundled_env.step("submit")
    assert term and info["success"] and reward == 1.0, (obs, info)


#: modes (777, 666, 600, a sticky dir), an empty dir, a symlink, a dangling symlink, mtimes
MODES_SETUP = (
    "cd /app && mkdir -p perm/empty perm/sticky && echo x > perm/open && echo y > perm/shared "
    "&& echo z > perm/secret && chmod 777 perm/open && chmod 666 perm/shared "
    "&& chmod 600 perm/secret && chmod 1777 perm/sticky && chmod 700 perm/empty "
    "&& ln -s open perm/link && ln -s missing perm/dangling "
    "&& touch -d '2001-02-03 04:05:06' perm/open perm/empty && umask 077"
)
MODES_PROBE = "cd /app/perm && find . -printf '%p %m %y %l %T@\\n' | sort"


@pytest.mark.parametrize("fresh_env", [False, True])
def test_restore_keeps_modes_links_empty_dirs_mtimes(
    fixture_env: TerminalBenchEnv, fresh_env: bool
) -> None:
    fixture_env.reset(options={"task_id": "tb1-greeting"})
    fixture_env.step(MODES_SETUP)
    before, *_ = fixture_env.step(MODES_PROBE)
    assert "./open 777 f" in before and "./shared 666" in before and "./secret 600" in before
    assert (
        "./sticky 1777 d" in before and "./empty 700 d" in before and "./link 777 l open" in before
    )
    snap = fixture_env.snapshot()
    fixture_env.step("chmod -R 700 /app/perm; rm -rf /app/perm/empty /app/perm/link")
    target = (
        TerminalBenchEnv(tasks_path=FIXTURES, command_timeout=ROOMY_S) if fresh_env else fixture_env
    )
    try:
        target.restore(snap)
        after, *_ = target.step(MODES_PROBE)
    finally:
        if fresh_env:
            target.close()
    assert after == before


def test_oracle_of_solution_yaml_and_harbor_solution_env(tmp_path: Path) -> None:
    import shutil

    tb1 = tmp_path / "tb1-yaml"
    shutil.copytree(FIXTURES / "tb1-greeting", tb1)
    (tb1 / "solution.sh").unlink()
    (tb1 / "solution.yaml").write_text(
        "- command: cd /app\n  min_timeout_sec: 1\n  block: true\n  append_enter: true\n"
        "- command: echo 'hello, world' > greeting.txt\n  min_timeout_sec: 1\n"
    )
    harbor = tmp_path / "harbor-env"
    shutil.copytree(FIXTURES / "harbor-count", harbor)
    (harbor / "task.toml").write_text(
        (harbor / "task.toml").read_text() + '\n[solution.env]\nCOUNT_FILE = "/app/count.txt"\n'
    )
    (harbor / "solution" / "solve.sh").write_text('wc -l < /app/data.txt > "$COUNT_FILE"\n')
    env = TerminalBenchEnv(tasks_path=tmp_path, command_timeout=10)
    try:
        for task_id in ("tb1-yaml", "harbor-env"):
            env.reset(options={"task_id": task_id})
            env.step(env.oracle_action())
            _, reward, term, _, info = env.step("submit")
            assert term and reward == 1.0 and info["success"], (task_id, env._test_output)
    finally:
        env.close()
