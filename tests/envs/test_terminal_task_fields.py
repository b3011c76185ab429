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
from agentenvs.core.errors import Fault, TaskError
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


# ------------------------------------------- env, users, build limit, healthcheck, image
def _fields_task(root: Path, name: str, toml: str, *, test_sh: str = CHECK) -> Path:
    return _harbor(root, name, test_sh, toml=toml)


def _with_user(task: Path, table: str, user: str) -> None:
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace(f"[{table}]\n", f'[{table}]\nuser = "{user}"\n'))


def test_env_tables_resolve_from_the_host_as_harbor_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AE_FIELD_SET", "from-host")
    monkeypatch.setenv("AE_FIELD_EMPTY", "")
    monkeypatch.delenv("AE_FIELD_UNSET", raising=False)
    task = load_task(
        _fields_task(
            tmp_path,
            "envs",
            '\n[environment.env]\nA = "${AE_FIELD_SET}"\nB = "${AE_FIELD_UNSET:-fallback}"\n'
            'C = "${AE_FIELD_EMPTY:-fallback}"\nD = "literal ${AE_FIELD_SET}"\n'
            '\n[verifier.env]\nV = "${AE_FIELD_SET:-x}"\n',
        )
    )
    # a whole ${VAR} is the host's; a default only for an unset one; anything else literal
    assert dict(task.environment_env) == {
        "A": "from-host",
        "B": "fallback",
        "C": "",
        "D": "literal ${AE_FIELD_SET}",
    }
    assert dict(task.verifier_env) == {"V": "from-host"}


@pytest.mark.parametrize("table", ["environment", "verifier"])
def test_an_unset_variable_refuses_the_task_naming_file_and_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: str
) -> None:
    monkeypatch.delenv("AE_FIELD_UNSET", raising=False)
    where = _fields_task(tmp_path, "unset", f'\n[{table}.env]\nKEY = "${{AE_FIELD_UNSET}}"\n')
    with pytest.raises(TaskError) as caught:
        load_task(where)
    said = str(caught.value)
    assert str(where / "task.toml") in said and f"{table}.env.KEY" in said
    assert "${AE_FIELD_UNSET} is not set" in said


def test_users_build_limit_and_healthcheck_are_read(tmp_path: Path) -> None:
    task = load_task(
        _fields_task(
            tmp_path,
            "read",
            "\n[environment]\nbuild_timeout_sec = 42.0\n[environment.healthcheck]\n"
            'command = "true"\nretries = 5\ninterval_sec = 0.5\n',
        )
    )
    assert task.build_timeout_sec == 42.0 and task.agent_user is None
    assert task.healthcheck is not None
    assert (task.healthcheck.command, task.healthcheck.retries) == ("true", 5)
    assert (task.healthcheck.interval_sec, task.healthcheck.timeout_sec) == (0.5, 30.0)
    plain = load_task(_fields_task(tmp_path, "plain", ""))
    assert plain.build_timeout_sec == 600.0 and plain.healthcheck is None
    text = (tmp_path / "plain" / "task.toml").read_text()
    (tmp_path / "plain" / "task.toml").write_text(
        text.replace("[agent]\n", '[agent]\nuser = "nobody"\n').replace(
            "[verifier]\n", "[verifier]\nuser = 1000\n"
        )
    )
    users = load_task(tmp_path / "plain")
    assert (users.agent_user, users.verifier_user) == ("nobody", "1000")
    bad = _fields_task(tmp_path, "bad", "\n[environment.healthcheck]\nretries = 2\n")
    with pytest.raises(TaskError, match=r"environment\.healthcheck\.command"):
        load_task(bad)


@pytest.fixture(scope="module")
def field_tasks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("harbor-fields")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AE_FIELD_TOKEN", "from-host")
        _fields_task(
            root,
            "env-vars",
            '\n[environment.env]\nTOKEN = "${AE_FIELD_TOKEN}"\n'
            '\n[verifier.env]\nVERIFY_ONLY = "${AE_FIELD_MISSING:-v}"\n',
            test_sh='[ "$TOKEN/$VERIFY_ONLY" = from-host/v ] && echo 1 > /logs/verifier/reward.txt '
            "|| echo 0 > /logs/verifier/reward.txt\n",
        )
        # healthy at its second try (the first leaves a mark)
        _fields_task(
            root,
            "healthy-later",
            "\n[environment.healthcheck]\n"
            'command = "test -f /tmp/hc || { touch /tmp/hc; exit 1; }"\n'
            "interval_sec = 0\nretries = 3\n",
        )
        _fields_task(
            root,
            "unhealthy",
            '\n[environment.healthcheck]\ncommand = "echo not-yet; exit 1"\n'
            "interval_sec = 0\nretries = 2\n",
        )
        _with_user(_fields_task(root, "agent-nobody", ""), "agent", "nobody")
        _with_user(_fields_task(root, "verifier-other", ""), "verifier", "nobody")
        _fields_task(root, "memory-512", "\n[environment]\nmemory_mb = 512\ncpus = 0.5\n")
        yield root


@pytest.fixture(scope="module", params=RUNTIMES)
def fields_env(request: pytest.FixtureRequest, field_tasks: Path) -> Iterator[TerminalBenchEnv]:
    made = TerminalBenchEnv(
        tasks_path=field_tasks, runtime=request.param, command_timeout=ROOMY_S, max_turns=4
    )
    yield made
    made.close()


def test_env_reaches_the_commands_and_verifier_env_only_the_tests(
    fields_env: TerminalBenchEnv,
) -> None:
    fields_env.reset(options={"task_id": "env-vars"})
    obs, *_ = fields_env.step('echo "$TOKEN/${VERIFY_ONLY:-none}"')
    assert "from-host/none" in obs, obs
    obs, reward, term, _, info = fields_env.step("submit")
    assert term and reward == 1.0, obs


def test_the_healthcheck_runs_until_healthy_before_the_first_action(
    fields_env: TerminalBenchEnv,
) -> None:
    fields_env.reset(options={"task_id": "healthy-later"})
    obs, *_ = fields_env.step("test -f /tmp/hc && echo marked")
    assert "marked" in obs, obs  # its first try ran (and failed) before the agent's turn


def test_an_unhealthy_environment_is_a_fault_not_a_score(fields_env: TerminalBenchEnv) -> None:
    with pytest.raises(Fault, match=r"unhealthy.*retries = 2") as caught:
        fields_env.reset(options={"task_id": "unhealthy"})
    assert "not-yet" in caught.value.evidence


def test_a_verifier_user_is_refused_with_the_reason(fields_env: TerminalBenchEnv) -> None:
    if fields_env.runtime_name == "docker":  # run as that user: see below
        assert "verifier-other" not in fields_env.unsupported_tasks
        return
    why = fields_env.unsupported_tasks["verifier-other"]  # the local runtime's one user
    assert "[verifier] user = 'nobody'" in why
    with pytest.raises(TaskError, match="user"):
        fields_env.reset(options={"task_id": "verifier-other"})


#: the tests say who runs them through pytest (under safe grading the verifier's own,
#: its verdict on the channel): 1 for nobody, 0 for anyone else
WHO_RUNS = (
    "python3 -m pytest -p no:cacheprovider /tests/test_who.py -rA "
    "&& echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n"
)
TEST_WHO = "import getpass\n\n\ndef test_who():\n    assert getpass.getuser() == 'nobody'\n"


@pytest.mark.docker("agentenvs/terminal:latest")
@pytest.mark.parametrize("grading", ["safe", "official"])
def test_docker_runs_the_tests_as_the_verifier_user(tmp_path: Path, grading: str) -> None:
    for task_id in ("verifier-nobody", "verifier-default"):  # default: the image's, root
        (_harbor(tmp_path, task_id, WHO_RUNS) / "tests" / "test_who.py").write_text(TEST_WHO)
    _with_user(tmp_path / "verifier-nobody", "verifier", "nobody")
    env = TerminalBenchEnv(
        tasks_path=tmp_path, runtime="docker", grading=grading, command_timeout=ROOMY_S
    )
    try:
        assert env.unsupported_tasks == {}
        seen = {}
        for task_id in ("verifier-nobody", "verifier-default"):
            env.reset(options={"task_id": task_id})
            obs, reward, term, _, info = env.step("submit")
            assert term and info.get("grading_findings", []) == [], obs
            seen[task_id] = (reward, info["tests_passed"])
        assert seen == {"verifier-nobody": (1.0, 1), "verifier-default": (0.0, 0)}
        # the agent's shell is still root's after the tests ran as nobody
        env.reset(options={"task_id": "verifier-nobody"})
        obs, *_ = env.step("id -un")
        assert obs.split()[0] == "root", obs
    finally:
        env.close()


@pytest.mark.bwrap
def test_the_local_runtime_refuses_an_agent_user(field_tasks: Path) -> None:
    env = TerminalBenchEnv(tasks_path=field_tasks, runtime="local")
    try:
        why = env.unsupported_tasks["agent-nobody"]
    finally:
        env.close()
    assert "[agent] user = 'nobody'" in why and "one user" in why


@pytest.mark.bwrap
def test_the_local_sandbox_is_held_to_the_tasks_memory_and_cpus(field_tasks: Path) -> None:
    env = TerminalBenchEnv(tasks_path=field_tasks, runtime="local", command_timeout=ROOMY_S)
    try:
        env.reset(options={"task_id": "memory-512"})
        cgroup = env.runtime().box._cgroup
        if cgroup is None:
            pytest.skip("no delegated cgroup here: the per-process rlimits hold")
        found = _host_cgroup(cgroup.dirs)
        assert found["memory"] == 512 << 20, found
        if "cpu" in found:
            assert found["cpu"] == 0.5, found
        env.reset(options={"task_id": "env-vars"})  # declares nothing: the sandbox's own
        assert _host_cgroup(cgroup.dirs)["memory"] == cgroup.memory_mb << 20
    finally:
        env.close()


def _host_cgroup(dirs: dict[str, str]) -> dict[str, float]:
    out: dict[str, float] = {}
    if "" in dirs:
        out["memory"] = int(Path(dirs[""], "memory.max").read_text())
        cpu = Path(dirs[""], "cpu.max")
        if cpu.exists():
            quota, period = cpu.read_text().split()
            out["cpu"] = int(quota) / int(period) if quota != "max" else 0.0
        return out
    out["memory"] = int(Path(dirs["memory"], "memory.limit_in_bytes").read_text())
    if "cpu" in dirs:
        quota = int(Path(dirs["cpu"], "cpu.cfs_quota_us").read_text())
        out["cpu"] = quota / int(Path(dirs["cpu"], "cpu.cfs_period_us").read_text())
    return out


@pytest.mark.docker("agentenvs/terminal:latest")
def test_docker_runs_the_agent_as_the_tasks_user(field_tasks: Path) -> None:
    env = TerminalBenchEnv(tasks_path=field_tasks, runtime="docker", command_timeout=ROOMY_S)
    try:
        env.reset(options={"task_id": "agent-nobody"})
        obs, *_ = env.step("id -un")
        assert obs.strip().splitlines()[0] == "nobody", obs
    finally:
        env.close()


@pytest.fixture
def build_tasks(tmp_path: Path) -> Path:
    slow = _harbor(tmp_path, "slow-build", CHECK, toml="\n[environment]\nbuild_timeout_sec = 3\n")
    (slow / "environment" / "Dockerfile").write_text(DOCKERFILE + "RUN sleep 120\n")
    # a prebuilt image beside a Dockerfile that would leave a mark
    both = _harbor(
        tmp_path,
        "prebuilt",
        CHECK,
        toml='\n[environment]\ndocker_image = "agentenvs/terminal:latest"\n',
    )
    (both / "environment" / "Dockerfile").write_text(
        DOCKERFILE + "RUN echo built > /app/built.txt\n"
    )
    return tmp_path


@pytest.mark.docker("agentenvs/terminal:latest")
def test_a_build_past_its_limit_is_refused_naming_it(build_tasks: Path) -> None:
    env = TerminalBenchEnv(tasks_path=build_tasks, runtime="docker", command_timeout=ROOMY_S)
    try:
        with pytest.raises(TaskError, match=r"limit of 3 s \(\[environment\] build_timeout_sec\)"):
            env.reset(options={"task_id": "slow-build"})
    finally:
        env.close()


@pytest.mark.docker("agentenvs/terminal:latest")
@pytest.mark.parametrize("force_build", [False, True])
def test_a_prebuilt_image_is_run_unless_the_build_is_forced(
    build_tasks: Path, force_build: bool
) -> None:
    import gymnasium as gym

    import agentenvs  # noqa: F401 - registers the ids

    env = gym.make(
        "agentenvs/TerminalBench-v0",
        tasks_path=build_tasks,
        runtime="docker",
        command_timeout=ROOMY_S,
        force_build=force_build,
    )
    try:
        env.reset(options={"task_id": "prebuilt"})
        obs, *_ = env.step("cat /app/built.txt 2>/dev/null || echo absent")
        assert obs.split()[0] == ("built" if force_build else "absent"), obs
    finally:
        env.close()


@pytest.mark.docker("agentenvs/terminal:latest")
@pytest.mark.parametrize("force_build", [False, True])
def test_check_tasks_judges_what_will_run_the_image_or_the_dockerfile(
    tmp_path: Path, force_build: bool
) -> None:
    # an image that is nowhere beside a Dockerfile that builds offline
    absent = _harbor(
        tmp_path,
        "prebuilt-absent",
        CHECK,
        toml='\n[environment]\ndocker_image = "agentenvs/no-such-prebuilt:1"\n',
    )
    # an image that is here beside a Dockerfile that needs the network
    present = _harbor(
        tmp_path,
        "prebuilt-present",
        CHECK,
        toml='\n[environment]\ndocker_image = "agentenvs/terminal:latest"\n',
    )
    (present / "environment" / "Dockerfile").write_text(
        DOCKERFILE + "RUN curl -fsSL https://example.org/tool.tgz -o /tmp/tool.tgz\n"
    )
    assert (absent / "environment" / "Dockerfile").is_file()
    env = TerminalBenchEnv(
        tasks_path=tmp_path, runtime="docker", offline=True, force_build=force_build
    )
    try:
        refused = env.check_tasks()
    finally:
        env.close()
    if force_build:  # the Dockerfiles are judged: their steps, not the images
        assert set(refused) == {"prebuilt-present"}, refused
        assert (
            "the download https://example.org/tool.tgz (Dockerfile line 4)"
            in (refused["prebuilt-present"])
        )
    else:  # the images are judged: one is here, one cannot be pulled offline
        assert set(refused) == {"prebuilt-absent"}, refused
        assert "'agentenvs/no-such-prebuilt:1'" in refused["prebuilt-absent"]
        assert "[environment] docker_image" in refused["prebuilt-absent"]
