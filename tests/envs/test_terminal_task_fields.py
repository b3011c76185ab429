"""TerminalBench-v0 honours a task's own timeouts and resources: a verifier timeout is
its own outcome (``info["verifier_timed_out"]``, a failure apart from failed tests), the
agent's wall-clock budget (``[agent] timeout_sec`` / ``max_agent_timeout_sec``) bounds the
episode and is the oracle's timeout, and on Docker each container gets the task's
``[environment] memory_mb``/``cpus``, while what the host cannot give (more memory than it
has, a GPU) is refused up front, naming the need."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentenvs.core import info as keys
from agentenvs.core.errors import TaskError
from agentenvs.envs.terminal.data import load_task
from agentenvs.envs.terminal.env import TerminalBenchEnv
from agentenvs.eval.runner import DEFAULT_INFO_KEYS

#: a command timeout no command of these tests comes near, however loaded the machine
ROOMY_S = 60
#: the verifier timeout of the slow tasks: their tests sleep far past it
VERIFIER_S = 2
#: the slow solution sleeps past a command timeout of COMMAND_S, well within AGENT_S
COMMAND_S = 1
SOLUTION_SLEEP_S = 3
AGENT_S = 120

DOCKERFILE = "ARG BASE_IMAGE=agentenvs/terminal:latest\nFROM ${BASE_IMAGE}\nWORKDIR /app\n"


def _harbor(
    root: Path,
    name: str,
    test_sh: str,
    *,
    toml: str = "",
    solve: str = "echo done > /app/out.txt\n",
) -> Path:
    """A Harbor task folder that the local runtime reproduces too."""
    task = root / name
    (task / "environment").mkdir(parents=True)
    (task / "environment" / "Dockerfile").write_text(DOCKERFILE)
    (task / "tests").mkdir()
    (task / "tests" / "test.sh").write_text("#!/bin/bash\nmkdir -p /logs/verifier\n" + test_sh)
    (task / "solution").mkdir()
    (task / "solution" / "solve.sh").write_text("#!/bin/bash\n" + solve)
    (task / "instruction.md").write_text(f"Write done to /app/out.txt ({name}).\n")
    (task / "task.toml").write_text(
        f'version = "1.0"\n\n[verifier]\ntimeout_sec = 30.0\n\n[agent]\ntimeout_sec = {AGENT_S}.0\n'
        + toml
    )
    return task


def _set(task: Path, table: str, line: str) -> None:
    """Replace ``table``'s ``timeout_sec`` line in the task's task.toml with ``line``."""
    toml = task / "task.toml"
    text = toml.read_text()
    head, _, rest = text.partition(f"[{table}]\n")
    _, _, tail = rest.partition("\n")
    toml.write_text(f"{head}[{table}]\n{line}\n{tail}")


#: the reward the tests write once out.txt is right
CHECK = "if grep -qx done /app/out.txt 2>/dev/null; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("task-fields")
    # writes a passing reward, then sleeps past its verifier timeout
    slow = _harbor(root, "slow-verifier", CHECK + "sleep 120\n")
    _set(slow, "verifier", f"timeout_sec = {VERIFIER_S}.0")
    _harbor(root, "quick-verifier", CHECK)
    # TB1: a pytest test that sleeps past max_test_timeout_sec
    tb1 = root / "tb1-slow-verifier"
    (tb1 / "tests").mkdir(parents=True)
    (tb1 / "tests" / "test_outputs.py").write_text(
        "import time\n\n\ndef test_first():\n    assert True\n\n\n"
        "def test_sleeps():\n    time.sleep(120)\n"
    )
    (tb1 / "run-tests.sh").write_text(
        "#!/bin/bash\ncd /app\npython3 -m pytest -p no:cacheprovider $TEST_DIR/test_outputs.py -rA\n"
    )
    (tb1 / "Dockerfile").write_text(DOCKERFILE)
    (tb1 / "task.yaml").write_text(
        f"instruction: Nothing to do.\ndifficulty: easy\nmax_test_timeout_sec: {VERIFIER_S}\n"
        f"max_agent_timeout_sec: {AGENT_S}\n"
    )
    # a solution slower than the command timeout, well within the agent's budget
    _harbor(
        root,
        "slow-solution",
        CHECK,
        solve=f"sleep {SOLUTION_SLEEP_S}\necho done > /app/out.txt\n",
    )
    # an agent budget shorter than any command of the test
    short = _harbor(root, "short-budget", CHECK)
    _set(short, "agent", "timeout_sec = 2.0")
    # resources
    _harbor(root, "memory-3g", CHECK, toml="\n[environment]\nmemory_mb = 3072\ncpus = 2\n")
    _harbor(root, "memory-huge", CHECK, toml="\n[environment]\nmemory_mb = 1000000000\n")
    _harbor(root, "cpus-many", CHECK, toml="\n[environment]\ncpus = 4096\n")
    _harbor(root, "needs-gpu", CHECK, toml="\n[environment]\ngpus = 1\n")
    return root


# ---------------------------------------------------------------- task.toml reading
def test_resources_are_read_with_harbors_defaults_and_legacy_sizes(tasks: Path) -> None:
    task = load_task(tasks / "memory-3g")
    assert (task.memory_mb, task.cpus, task.gpus) == (3072, 2.0, 0)
    plain = load_task(tasks / "quick-verifier")
    assert (plain.memory_mb, plain.cpus, plain.gpus, plain.storage_mb) == (None, None, 0, None)
    assert plain.max_agent_timeout_sec == AGENT_S
    assert load_task(tasks / "slow-verifier").max_test_timeout_sec == VERIFIER_S
    gpu = load_task(tasks / "needs-gpu")
    assert gpu.gpus == 1 and any("gpus" in p and "GPU" in p for p in gpu.problems)
    legacy = _harbor(tasks.parent / "legacy", "legacy", CHECK)
    toml = legacy / "task.toml"
    toml.write_text(toml.read_text() + '\n[environment]\nmemory = "3G"\nstorage = "512M"\n')
    found = load_task(legacy)
    assert (found.memory_mb, found.storage_mb) == (3072, 512)


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("memory_mb = -1", "environment.memory_mb"),
        ('memory = "lots"', "environment.memory"),
        ("cpus = 0", "environment.cpus"),
        ("gpus = -2", "environment.gpus"),
        ("gpus = true", "environment.gpus"),
    ],
)
def test_bad_resources_name_the_field(tmp_path: Path, line: str, field: str) -> None:
    task = _harbor(tmp_path, "bad", CHECK, toml=f"\n[environment]\n{line}\n")
    with pytest.raises(TaskError, match=field.replace(".", r"\.")):
        load_task(task)


def test_only_a_kill_at_the_limit_is_a_timeout() -> None:
    from agentenvs.envs.terminal.verdict import killed_at_limit

    assert killed_at_limit(137, "137", 2.5, 2.0)  # timeout -s KILL, at the limit
    assert killed_at_limit(None, "", 0.1, 2.0)  # no answer: the session's own limit
    # a script whose pytest was SIGKILLed by a program of its own, early: a failure
    assert not killed_at_limit(137, "137", 0.5, 2.0)
    assert not killed_at_limit(1, "1", 2.5, 2.0)


def test_the_run_records_keep_the_verifier_timeout() -> None:
    assert keys.VERIFIER_TIMED_OUT in DEFAULT_INFO_KEYS


# ---------------------------------------------------------------- behaviour, both runtimes
RUNTIMES = [
    pytest.param("local", marks=pytest.mark.bwrap),
    pytest.param("docker", marks=pytest.mark.docker("agentenvs/terminal:latest")),
]


@pytest.fixture(scope="module", params=RUNTIMES)
def env(request: pytest.FixtureRequest, tasks: Path) -> Iterator[TerminalBenchEnv]:
    made = TerminalBenchEnv(
        tasks_path=tasks, runtime=request.param, command_timeout=ROOMY_S, max_turns=4
    )
    yield made
    made.close()


@pytest.mark.parametrize("grading", ["safe", "official"])
@pytest.mark.parametrize("task_id", ["slow-verifier", "tb1-slow-verifier"])
def test_a_verifier_timeout_is_its_own_failure(
    env: TerminalBenchEnv, grading: str, task_id: str
) -> None:
    env.grading = grading
    if env.runtime_name == "docker":
        env.close()  # the docker runtime fills verifier mounts for safe grading only
    try:
        env.reset(options={"task_id": task_id})
        if task_id == "slow-verifier":
            env.step(env.oracle_action())  # the reward it writes says solved
        obs, reward, term, _, info = env.step("submit")
    finally:
        env.grading = "safe"
        if env.runtime_name == "docker":
            env.close()
    assert term and reward == 0.0 and not info["success"] and info["score"] == 0.0
    assert info[keys.VERIFIER_TIMED_OUT] is True, obs
    assert f"timed out after {VERIFIER_S} s" in obs and "verifier timeout" in obs
    assert "Reward: 1" not in obs  # what it wrote before the stop is no verdict


def test_a_failed_test_is_not_a_timeout(env: TerminalBenchEnv) -> None:
    env.reset(options={"task_id": "quick-verifier"})
    _, reward, term, _, info = env.step("submit")
    assert term and reward == 0.0 and info[keys.VERIFIER_TIMED_OUT] is False
    env.reset(options={"task_id": "quick-verifier"})
    _, info = env.step(env.oracle_action())[3:]
    assert keys.VERIFIER_TIMED_OUT not in info  # nothing graded yet
    obs, reward, term, _, info = env.step("submit")
    assert reward == 1.0 and info["success"] and info[keys.VERIFIER_TIMED_OUT] is False, obs


def test_the_oracle_runs_under_the_agent_timeout(env: TerminalBenchEnv) -> None:
    env.command_timeout = COMMAND_S
    try:
        env.reset(options={"task_id": "slow-solution"})
        # a command of the policy's is interrupted at the command timeout
        obs, *_, info = env.step(f"sleep {SOLUTION_SLEEP_S}; echo done > /app/out.txt")
        assert info["timed_out"] and info["agent_timeout_s"] == AGENT_S, obs
        # the task's own solution, slower than that, runs to its end
        env.reset(options={"task_id": "slow-solution"})
        obs, *_, info = env.step(env.oracle_action())
        assert not info["timed_out"], obs
        obs, reward, *_, info = env.step("submit")
        assert reward == 1.0 and info["success"], obs
    finally:
        env.command_timeout = ROOMY_S


def test_the_agent_budget_ends_the_episode(env: TerminalBenchEnv) -> None:
    _, info = env.reset(options={"task_id": "short-budget"})
    obs, reward, term, trunc, info = env.step("sleep 100; echo never")
    # interrupted at the budget's end (or, on a machine slow to reset, never started)
    assert "never" not in obs and term and not trunc, obs
    assert info["agent_timed_out"] is True and info["agent_timeout_s"] == 2
    assert "time budget of 2 s is used up" in obs
    assert info["tests_total"] == 0 and info[keys.VERIFIER_TIMED_OUT] is False
    assert reward == 0.0  # the tests ran: out.txt was never written


def test_a_clock_of_commands_does_not_count_the_policys_thinking(tasks: Path) -> None:
    # the short-budget task gives the agent 2 s; the policy "thinks" 2.5 s between two
    # quick commands: under "wall" the budget is spent, under "commands" it is not
    for counting, spent in (("wall", True), ("commands", False)):
        env = TerminalBenchEnv(tasks_path=tasks, command_timeout=ROOMY_S, agent_clock=counting)
        try:
            env.reset(options={"task_id": "short-budget"})
            env.step("true")
            time.sleep(2.5)
            obs, _, term, _, info = env.step("echo hello")
            assert info["agent_timed_out"] is spent, (counting, obs)
            assert term is spent and ("hello" in obs) is not spent, (counting, obs)
        finally:
            env.close()


def test_a_clock_off_has_no_time_budget(tasks: Path) -> None:
    env = TerminalBenchEnv(tasks_path=tasks, command_timeout=ROOMY_S, agent_clock="off")
    try:
        env.reset(options={"task_id": "short-budget"})
        obs, _, term, _, info = env.step("sleep 2.5; echo woke")
        assert "woke" in obs and not term and info["agent_timed_out"] is False, obs
        assert info["agent_timeout_s"] is None
    finally:
        env.close()
    with pytest.raises(ValueError, match="agent_clock must be one of"):
        TerminalBenchEnv(tasks_path=tasks, agent_clock="cpu")


def test_the_agent_budget_survives_a_snapshot(env: TerminalBenchEnv) -> None:
    env.reset(options={"task_id": "quick-verifier"})
    env.step("true")
    snap = env.snapshot()
    assert snap.state["agent_used_s"] > 0
    env.restore(snap)
    *_, info = env.step("true")
    assert info["agent_timed_out"] is False and info["agent_timeout_s"] == AGENT_S


def test_a_gpu_task_is_refused_up_front(env: TerminalBenchEnv) -> None:
    why = env.unsupported_tasks["needs-gpu"]
    assert "1 GPU" in why and "[environment] gpus" in why
    with pytest.raises(TaskError, match="GPU"):
        env.reset(options={"task_id": "needs-gpu"})


# ---------------------------------------------------------------- docker resources
@pytest.fixture(scope="module")
def docker_env(tasks: Path) -> Iterator[TerminalBenchEnv]:
    made = TerminalBenchEnv(tasks_path=tasks, runtime="docker", command_timeout=ROOMY_S)
    yield made
    made.close()


CGROUP = (
    "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes; "
    "cat /sys/fs/cgroup/cpu.max 2>/dev/null || "
    "echo $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)"
)


@pytest.mark.docker("agentenvs/terminal:latest")
def test_a_container_gets_the_tasks_memory_and_cpus(docker_env: TerminalBenchEnv) -> None:
    docker_env.reset(options={"task_id": "memory-3g"})
    obs, *_ = docker_env.step(CGROUP)
    lines = obs.splitlines()
    assert lines[0] == str(3 * 1024**3), obs  # exactly the task's 3 GiB, no slack
    quota, period = (int(x) for x in lines[1].split())
    assert quota == 2 * period, obs
    # a task that declares nothing keeps the runtime's limits
    docker_env.reset(options={"task_id": "quick-verifier"})
    obs, *_ = docker_env.step(CGROUP)
    limits = docker_env.limits
    assert obs.splitlines()[0] == str((limits.memory_mb + 256) * 1024**2), obs


@pytest.mark.docker("agentenvs/terminal:latest")
@pytest.mark.parametrize(
    ("task_id", "need"), [("memory-huge", "memory_mb"), ("cpus-many", "[environment] cpus")]
)
def test_more_than_the_host_has_is_refused_naming_the_need(
    docker_env: TerminalBenchEnv, task_id: str, need: str
) -> None:
    with pytest.raises(TaskError, match=r"needs .* and this Docker host has") as caught:
        docker_env.reset(options={"task_id": task_id})
    assert need in str(caught.value)
    assert need in docker_env.unsupported_tasks[task_id]
    assert task_id not in docker_env.task_ids


@pytest.mark.docker("agentenvs/terminal:latest")
def test_check_tasks_finds_what_the_host_cannot_give(tasks: Path) -> None:
    env = TerminalBenchEnv(tasks_path=tasks, runtime="docker")
    try:
        found = env.check_tasks()
    finally:
        env.close()
    assert "memory_mb" in found["memory-huge"] and "[environment] cpus" in found["cpus-many"]
    assert "gpus" in found["needs-gpu"]
    assert "memory-3g" not in found and "quick-verifier" not in found


@pytest.mark.bwrap
def test_a_run_record_says_the_verifier_timed_out(tasks: Path) -> None:
    from agentenvs.envs.terminal.policies import SolutionPolicy
    from agentenvs.eval.runner import WorkItem, run_episode

    env = TerminalBenchEnv(tasks_path=tasks, command_timeout=ROOMY_S)
    try:
        records = {
            task_id: run_episode(
                env,
                SolutionPolicy(),
                WorkItem(task_id=task_id, sample=0, budget=3, seed=0),
                info_keys=DEFAULT_INFO_KEYS,
            )
            for task_id in ("slow-verifier", "quick-verifier")
        }
    finally:
        env.close()
    slow, quick = (records[t]["steps"][-1]["info"] for t in ("slow-verifier", "quick-verifier"))
    assert slow[keys.VERIFIER_TIMED_OUT] is True and slow[keys.SUCCESS] is False
    assert quick[keys.VERIFIER_TIMED_OUT] is False and quick[keys.SUCCESS] is True
    # the step before the tests ran has no verdict to report
    assert keys.VERIFIER_TIMED_OUT not in records["slow-verifier"]["steps"][0]["info"]
