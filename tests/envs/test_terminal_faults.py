"""TerminalBench-v0 tells the agent's failures from the infrastructure's: real faults
injected from outside the sandbox (``docker kill``/``docker rm -f`` of the episode's
container, SIGKILL of the local sandbox's bwrap or pid 1 from the host) raise ``Fault``
out of ``step`` (during a command and during grading) and leave nothing behind, the next
reset works; what the agent does to its own sandbox (its container's init killed from
inside, its shell supervisor killed, ``rm -rf /``, a fork bomb) stays a scored 0."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import gymnasium as gym
import pytest

from agentenvs.core.errors import Fault
from agentenvs.envs.terminal.env import TerminalBenchEnv

FIXTURES = Path(__file__).parent / "terminal_fixtures"
#: a command timeout no command of these tests comes near: the faults end them first
ROOMY_S = 120
#: what the agent runs while the fault is injected (found by its command line)
MARKER = "sleep 4242"
#: a test that waits until the fault ends it, added to a copy of tb1-greeting
SLOW_TEST = "\n\ndef test_waits_for_the_fault():\n    import time\n\n    time.sleep(4242)\n"
#: how long a helper waits for what it looks for before the test gives up on it
WAIT_S = 120


@pytest.fixture(scope="module")
def slow_tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixtures, plus ``tb1-slow-tests``: tb1-greeting whose tests wait to be ended."""
    root = tmp_path_factory.mktemp("terminal-faults")
    shutil.copytree(FIXTURES / "tb1-greeting", root / "tb1-greeting")
    slow = root / "tb1-slow-tests"
    shutil.copytree(FIXTURES / "tb1-greeting", slow)
    tests = slow / "tests" / "test_outputs.py"
    tests.write_text(tests.read_text() + SLOW_TEST)
    task = slow / "task.yaml"
    task.write_text(
        task.read_text().replace("max_test_timeout_sec: 30", "max_test_timeout_sec: 600")
    )
    return root


def _when(found: Callable[[], object], act: Callable[[object], None]) -> threading.Thread:
    """A thread that waits until ``found()`` gives something, then ``act``s on it."""
    done = threading.Event()

    def work() -> None:
        while not done.wait(0.2):
            what = found()
            if what:
                act(what)
                return

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.done = done  # type: ignore[attr-defined]
    return thread


def _stop(thread: threading.Thread) -> None:
    thread.done.set()  # type: ignore[attr-defined]
    thread.join(timeout=30)


def _solve_and_submit(env: TerminalBenchEnv) -> float:
    env.reset(options={"task_id": "tb1-greeting"})
    env.step(env.oracle_action())
    _, reward, terminated, _, info = env.step("submit")
    assert terminated and info["success"]
    return reward


# ----------------------------------------------------------------------------- docker
def _client():  # noqa: ANN202 - the docker SDK's client
    import docker

    return docker.from_env()


def _running_in(env: TerminalBenchEnv, needle: str) -> str | None:
    """The id of this env's container that runs a process whose command line has
    ``needle``, as the engine lists them (``docker top``)."""
    client = _client()
    try:
        for cid in env.runtime().container_ids:
            try:
                listed = client.api.top(cid).get("Processes") or []
            except Exception:  # noqa: BLE001 - a spare being removed
                continue
            if any(needle in " ".join(p) for p in listed):
                return cid
    finally:
        client.close()
    return None


def _listed(cid: str) -> bool:
    client = _client()
    try:
        return bool(client.api.containers(all=True, filters={"id": cid}))
    finally:
        client.close()


def _wait_gone(cid: str) -> None:
    done = threading.Event()
    for _ in range(WAIT_S * 5):
        if not _listed(cid):
            return
        done.wait(0.2)
    raise AssertionError(f"container {cid[:12]} is still listed")


def _kill(cid: object) -> None:
    client = _client()
    try:
        client.api.kill(str(cid))
    finally:
        client.close()


def _remove(cid: object) -> None:
    client = _client()
    try:
        client.api.remove_container(str(cid), force=True)
    finally:
        client.close()


@pytest.fixture
def docker_env(slow_tasks: Path) -> Iterator[TerminalBenchEnv]:
    env = TerminalBenchEnv(
        tasks_path=slow_tasks, runtime="docker", command_timeout=ROOMY_S, max_turns=6
    )
    yield env
    env.close()


#: each fault, and what the engine's events show of it (rm -f kills, then destroys)
DOCKER_FAULTS = {
    "docker kill": (_kill, ("kill (signal 9)",)),
    "docker rm -f": (_remove, ("kill (signal 9)", "destroy")),
}


@pytest.mark.docker("agentenvs/terminal:latest")
@pytest.mark.parametrize("fault", sorted(DOCKER_FAULTS))
def test_docker_container_ended_from_outside_during_a_step(
    docker_env: TerminalBenchEnv, fault: str
) -> None:
    act, said = DOCKER_FAULTS[fault]
    docker_env.reset(options={"task_id": "tb1-greeting"})
    box: list[str] = []
    killer = _when(lambda: _running_in(docker_env, MARKER), lambda c: (box.append(c), act(c)))
    try:
        with pytest.raises(Fault) as caught:
            docker_env.step(MARKER)
    finally:
        _stop(killer)
    assert caught.value.kind == "container" and caught.value.attribution == "infrastructure"
    assert any(event in caught.value.evidence for event in said), caught.value.evidence
    assert caught.value.record()["kind"] == "container"
    with pytest.raises(gym.error.ResetNeeded):  # never a scored outcome: only a reset follows
        docker_env.step("submit")
    _wait_gone(box[0])  # nothing left behind
    assert _solve_and_submit(docker_env) == 1.0  # the next reset works


@pytest.mark.docker("agentenvs/terminal:latest")
@pytest.mark.parametrize("fault", sorted(DOCKER_FAULTS))
def test_docker_container_ended_from_outside_during_grading(
    docker_env: TerminalBenchEnv, fault: str
) -> None:
    act, said = DOCKER_FAULTS[fault]
    docker_env.reset(options={"task_id": "tb1-slow-tests"})
    docker_env.step(docker_env.oracle_action())
    box: list[str] = []
    killer = _when(lambda: _running_in(docker_env, "pytest"), lambda c: (box.append(c), act(c)))
    try:
        with pytest.raises(Fault) as caught:
            docker_env.step("submit")
    finally:
        _stop(killer)
    assert caught.value.kind == "container" and caught.value.attribution == "infrastructure"
    assert any(event in caught.value.evidence for event in said), caught.value.evidence
    _wait_gone(box[0])
    assert _solve_and_submit(docker_env) == 1.0


@pytest.mark.docker("agentenvs/terminal:latest")
def test_docker_score_action_raises_the_fault(docker_env: TerminalBenchEnv) -> None:
    docker_env.reset(options={"task_id": "tb1-greeting"})
    killer = _when(lambda: _running_in(docker_env, MARKER), _kill)
    try:
        with pytest.raises(Fault) as caught:
            docker_env.score_action(MARKER)
    finally:
        _stop(killer)
    assert caught.value.kind == "container"
    assert _solve_and_submit(docker_env) == 1.0


@pytest.mark.docker("agentenvs/terminal:latest")
def test_docker_registry_that_does_not_answer_is_a_fault_not_a_broken_task(
    tmp_path: Path,
) -> None:
    task = tmp_path / "tb1-unreachable-base"
    shutil.copytree(FIXTURES / "tb1-greeting", task)
    # a registry no resolver knows (.invalid never resolves): the pull cannot reach it
    lines = (task / "Dockerfile").read_text().splitlines()
    kept = [line for line in lines if not line.startswith(("ARG", "FROM"))]
    (task / "Dockerfile").write_text("\n".join(["FROM registry.invalid/agentenvs/none:1", *kept]))
    env = TerminalBenchEnv(tasks_path=tmp_path, runtime="docker", offline=False)
    try:
        with pytest.raises(Fault) as caught:
            env.reset(options={"task_id": "tb1-unreachable-base"})
        assert caught.value.kind == "registry" and caught.value.attribution == "infrastructure"
        assert "registry.invalid" in caught.value.evidence
        # not refused as the task's: the next reset tries again
        assert "tb1-unreachable-base" not in env.unsupported_tasks
        assert env.runtime().container_ids == []
    finally:
        env.close()


#: what the agent does to its own container: an outcome (scored 0), never a Fault
AGENT_WRECKS = {
    # root signals docker-init, which forwards SIGTERM: the container stops from inside
    "kill -TERM 1": "kill -TERM 1; sleep 30",
    "rm -rf /": "rm -rf / --no-preserve-root; echo gone",
    "fork bomb": "b(){ b|b& }; b",
}


@pytest.mark.docker("agentenvs/terminal:latest")
@pytest.mark.parametrize("wreck", sorted(AGENT_WRECKS))
def test_docker_what_the_agent_does_to_its_container_is_scored(
    docker_env: TerminalBenchEnv, wreck: str
) -> None:
    docker_env.command_timeout = 10 if wreck == "fork bomb" else ROOMY_S
    docker_env.reset(options={"task_id": "tb1-greeting", "max_turns": 3})
    _, reward, term, trunc, info = docker_env.step(AGENT_WRECKS[wreck])
    while not (term or trunc):
        _, reward, term, trunc, info = docker_env.step("echo still here")
    assert reward == 0.0 and not info["success"] and "test_results" in info
    assert _solve_and_submit(docker_env) == 1.0


@pytest.mark.docker("agentenvs/terminal:latest")
def test_docker_kill_from_inside_ends_the_episode_as_lost(docker_env: TerminalBenchEnv) -> None:
    docker_env.reset(options={"task_id": "tb1-greeting"})
    docker_env.step(docker_env.oracle_action())  # solved, then the agent stops its container
    obs, reward, term, _, info = docker_env.step("kill -TERM 1; sleep 30")
    assert term and reward == 0.0 and "sandbox was lost" in obs
    assert "fresh sandbox of the task's image" in obs


# ----------------------------------------------------------------------------- local
def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _is_bwrap(pid: int) -> bool:
    return os.path.basename(_cmdline(pid).split(" ", 1)[0]) == "bwrap"


def _local_sandbox_running(needle: str) -> tuple[int, int] | None:
    """(bwrap's pid, its pid 1's) of this process's sandbox that runs ``needle``, from the
    host's /proc."""
    for bwrap in _children(os.getpid()):
        if not _is_bwrap(bwrap):
            continue
        inits = _children(bwrap)
        todo, seen = list(inits), set()
        while todo:
            pid = todo.pop()
            if pid in seen:
                continue
            seen.add(pid)
            if needle in _cmdline(pid):
                return bwrap, inits[0]
            todo += _children(pid)
    return None


def _sigkill(which: str) -> Callable[[object], None]:
    def act(found: object) -> None:
        bwrap, init = found  # type: ignore[misc]
        os.kill(bwrap if which == "bwrap" else init, 9)

    return act


def _no_sandbox_left() -> None:
    left = [p for p in _children(os.getpid()) if _is_bwrap(p)]
    assert not left, f"sandboxes left running: {left}"


@pytest.fixture
def local_env(slow_tasks: Path) -> Iterator[TerminalBenchEnv]:
    env = TerminalBenchEnv(tasks_path=slow_tasks, command_timeout=ROOMY_S, max_turns=6)
    yield env
    env.close()


@pytest.mark.bwrap
@pytest.mark.parametrize("which", ["bwrap", "pid 1"])
def test_local_sandbox_sigkilled_from_the_host_during_a_step(
    local_env: TerminalBenchEnv, which: str
) -> None:
    local_env.reset(options={"task_id": "tb1-greeting"})
    killer = _when(lambda: _local_sandbox_running(MARKER), _sigkill(which))
    try:
        with pytest.raises(Fault) as caught:
            local_env.step(MARKER)
    finally:
        _stop(killer)
    assert caught.value.kind == "sandbox" and caught.value.attribution == "infrastructure"
    who = "bwrap" if which == "bwrap" else "the sandbox's pid 1"
    assert f"{who} was killed by signal 9" in caught.value.evidence
    with pytest.raises(gym.error.ResetNeeded):
        local_env.step("submit")
    _no_sandbox_left()
    assert _solve_and_submit(local_env) == 1.0


@pytest.mark.bwrap
def test_local_sandbox_sigkilled_from_the_host_during_grading(local_env: TerminalBenchEnv) -> None:
    local_env.reset(options={"task_id": "tb1-slow-tests"})
    local_env.step(local_env.oracle_action())
    killer = _when(lambda: _local_sandbox_running("pytest"), _sigkill("pid 1"))
    try:
        with pytest.raises(Fault) as caught:
            local_env.step("submit")
    finally:
        _stop(killer)
    assert caught.value.kind == "sandbox"
    _no_sandbox_left()
    assert _solve_and_submit(local_env) == 1.0


#: what the agent does to its own local sandbox: scored, never a Fault
LOCAL_WRECKS = {
    # the shell's supervisor (its bash's grandparent) killed: pid 1 then exits by itself
    "supervisor killed": "kill -9 $(cut -d' ' -f4 /proc/$PPID/stat); sleep 30",
    "signals to pid 1": "kill -KILL 1; kill -TERM 1; kill -HUP 1; echo alive",
    "fork bomb": "b(){ b|b& }; b",
    "kill -9 -1": "kill -9 -1",
}


@pytest.mark.bwrap
@pytest.mark.parametrize("wreck", sorted(LOCAL_WRECKS))
def test_local_what_the_agent_does_to_its_sandbox_is_scored(
    local_env: TerminalBenchEnv, wreck: str
) -> None:
    local_env.command_timeout = 10 if wreck == "fork bomb" else ROOMY_S
    local_env.reset(options={"task_id": "tb1-greeting", "max_turns": 3})
    local_env.step(local_env.oracle_action())
    obs, reward, term, trunc, info = local_env.step(LOCAL_WRECKS[wreck])
    if wreck == "signals to pid 1":
        assert "alive" in obs and not term  # pid 1 ignores what the agent sends it
    while not (term or trunc):
        obs, reward, term, trunc, info = local_env.step("submit")
    assert "test_results" in info
    if wreck == "supervisor killed":
        assert "sandbox was lost" in obs and reward == 0.0
    _no_sandbox_left_but_current(local_env)


def _no_sandbox_left_but_current(env: TerminalBenchEnv) -> None:
    """At most the sandbox of the env's current shell runs."""
    left = [p for p in _children(os.getpid()) if _is_bwrap(p)]
    assert len(left) <= 1, f"sandboxes left running: {left}"


@pytest.mark.docker("agentenvs/terminal:latest")
def test_docker_an_engine_failure_on_a_container_the_agent_filled_is_the_agents(
    docker_env: TerminalBenchEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent can fill the host's disk through its container's writable layer, and the
    engine's calls then fail for lack of space: past the bound, such a failure is the
    agent's. (The bound is lowered here; the engine measures the layer for real.)"""
    import docker

    from agentenvs.envs.terminal import faults

    monkeypatch.setattr(faults, "AGENT_DISK_MB", 40)
    docker_env.reset(options={"task_id": "tb1-greeting"})
    runtime = docker_env.runtime()
    box = runtime._current
    failure = docker.errors.APIError("write /var/lib/docker/...: no space left on device")
    assert isinstance(runtime.diagnose(failure, box), Fault)  # a small layer: the engine's
    docker_env.step("```bash\nhead -c 60000000 /dev/zero > /app/fill\n```")
    assert runtime.diagnose(failure, box) is None  # 60 MB written: the agent's


def test_a_broken_pipe_to_the_shell_is_not_an_engine_request_that_failed() -> None:
    """Writing to an exec whose process ended (a fork bomb took the shell's supervisor)
    breaks the pipe: the far end closed, the agent's doing when the engine answers and no
    action came from outside. A reset or refused connection is the engine's."""
    from agentenvs.core.errors import SandboxError
    from agentenvs.envs.terminal.faults import engine_call_failed

    def raised(cause: BaseException) -> SandboxError:
        try:
            try:
                raise cause
            except OSError as exc:
                raise SandboxError(f"the process has exited: {exc}") from exc
        except SandboxError as err:
            return err

    assert not engine_call_failed(raised(BrokenPipeError(32, "Broken pipe")))
    assert engine_call_failed(raised(ConnectionResetError(104, "Connection reset by peer")))
    assert engine_call_failed(raised(ConnectionRefusedError(111, "Connection refused")))
