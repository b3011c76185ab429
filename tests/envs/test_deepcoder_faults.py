"""DeepCoderMT-v0: a sandbox that fails from outside raises Fault, never a verdict.

The faults are real and come from outside while the agent's program runs: SIGKILL from
the host to the local sandbox's bwrap or pid 1 (the case worker under strict rules, the
official runner's shell under official rules), ``docker kill`` of the Docker sandbox's
container. ``step`` and ``score_action`` raise ``Fault(kind='sandbox'|'container')``; the
verdict is not cached (the same program graded again gets its true verdict); the episode
re-run with its seed, as a runner re-runs a faulted one, equals a fault-free run;
nothing is left behind. The program's own ``kill -9 -1`` stays its verdict.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from _services import require_bwrap, require_docker

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.core.errors import INFRASTRUCTURE, Fault
from agentenvs.envs.deepcoder import env as deepcoder_env

FIXTURES = Path(__file__).parent / "deepcoder_fixtures"
TASK = "lcb-stdin"
# right on every test; slow enough that the fault lands while it runs
SLOW_RIGHT = (
    "```python\nimport time\ntime.sleep(1.5)\n"
    "n = int(input())\nprint(sum(map(int, input().split())))\n```"
)
WRECKER = "```python\nimport os\nos.system('kill -9 -1')\nprint(6)\n```"


def _children(pid: int) -> list[int]:
    """The children of process ``pid``, whichever of its threads started them."""
    kids = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids += [int(p) for p in f.read().split()]
        except OSError:
            continue
    return kids


def _bwraps() -> list[int]:
    found = []
    for kid in _children(os.getpid()):
        try:
            with open(f"/proc/{kid}/comm") as f:
                if f.read().strip() == "bwrap":
                    found.append(kid)
        except OSError:
            continue
    return found


def kill_local_when_running(target: str, delay: float = 0.5) -> threading.Thread:
    """SIGKILL from the host to the running sandbox's bwrap or pid 1, once the program
    has run ``delay`` seconds (bwrap's pid 1 has a child)."""

    def act() -> None:
        end = time.monotonic() + 60
        while time.monotonic() < end:
            for bwrap in _bwraps():
                pid1 = _children(bwrap)
                if pid1 and _children(pid1[0]):
                    time.sleep(delay)
                    os.kill(bwrap if target == "bwrap" else pid1[0], signal.SIGKILL)
                    return
            time.sleep(0.02)

    thread = threading.Thread(target=act, daemon=True)
    thread.start()
    return thread


@pytest.fixture(autouse=True)
def fresh_verdicts() -> Iterator[None]:
    """Verdicts are cached per process: each test starts and ends without any."""
    deepcoder_env._OUTCOMES.data.clear()
    yield
    deepcoder_env._OUTCOMES.data.clear()


def make(**kwargs: Any) -> gym.Env:
    return gym.make(
        "agentenvs/DeepCoderMT-v0",
        tasks_path=FIXTURES / "lcb.jsonl",
        timeout_per_test=10.0,
        **kwargs,
    )


def episode(env: gym.Env, actions: list[str]) -> list[tuple[Any, ...]]:
    obs, info = env.reset(seed=11, options={"task_id": TASK})
    record: list[tuple[Any, ...]] = [(obs, info.get("state_key"))]
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        record.append((obs, reward, terminated, truncated, info))
        if terminated or truncated:
            break
    return record


def assert_fault(exc: pytest.ExceptionInfo[Fault], kind: str) -> None:
    assert exc.value.kind == kind and exc.value.attribution == INFRASTRUCTURE
    assert exc.value.retryable and exc.value.evidence


def assert_no_sandbox_left() -> None:
    end = time.monotonic() + 30
    while _bwraps() and time.monotonic() < end:
        time.sleep(0.05)
    assert _bwraps() == []


@pytest.mark.bwrap
@pytest.mark.parametrize(
    ("rules", "target"),
    [("strict", "bwrap"), ("strict", "pid1"), ("official", "bwrap"), ("official", "pid1")],
)
def test_local_sandbox_killed_from_the_host_is_a_fault(rules: str, target: str) -> None:
    require_bwrap()
    actions = ["```python\nprint(0)\n```", SLOW_RIGHT]
    clean = make(rules=rules)
    try:
        expected = episode(clean, actions)
    finally:
        clean.close()
    assert expected[-1][1] == 1.0
    deepcoder_env._OUTCOMES.data.clear()
    env = make(rules=rules)
    try:
        env.reset(seed=11, options={"task_id": TASK})
        env.step(actions[0])
        killer = kill_local_when_running(target)
        with pytest.raises(Fault, match="killed from outside") as exc:
            env.step(actions[1])
        killer.join()
        assert_fault(exc, "sandbox")
        # the faulted turn is never judged: only a reset follows
        with pytest.raises(gym.error.ResetNeeded):
            env.step(actions[1])
        assert_no_sandbox_left()
        # score_action faults the same way, and leaves nothing cached
        env.reset(seed=11, options={"task_id": TASK})
        killer = kill_local_when_running(target)
        with pytest.raises(Fault):
            env.unwrapped.score_action(SLOW_RIGHT)
        killer.join()
        assert env.unwrapped.score_action(SLOW_RIGHT) == 1.0
        # the episode re-run with its seed is the fault-free one
        assert episode(env, actions) == expected
    finally:
        env.close()
    assert_no_sandbox_left()


@pytest.mark.bwrap
@pytest.mark.parametrize("rules", ["strict", "official"])
def test_local_programs_own_kill_is_its_verdict(rules: str) -> None:
    require_bwrap()
    env = make(rules=rules)
    try:
        env.reset(seed=11, options={"task_id": TASK})
        _, reward, terminated, _, info = env.step(WRECKER)
        assert (reward, terminated, info["success"]) == (0.0, False, False)
        assert env.unwrapped.score_action(WRECKER) == 0.0
        _, reward, *_ = env.step(SLOW_RIGHT)
        assert reward == 1.0
    finally:
        env.close()
    assert_no_sandbox_left()


@pytest.mark.docker
def test_docker_container_killed_from_outside_is_a_fault() -> None:
    require_docker()
    from agentenvs.sandbox.docker import DockerPool, DockerSandbox

    actions = ["```python\nprint(0)\n```", SLOW_RIGHT]
    pool = DockerPool(size=1)
    boxes = [DockerSandbox(pool=pool), DockerSandbox(pool=pool)]
    try:
        clean = make(sandbox=boxes[0])
        expected = episode(clean, actions)
        clean.close()
        deepcoder_env._OUTCOMES.data.clear()
        box = boxes[1]
        env = make(sandbox=box)
        env.reset(seed=11, options={"task_id": TASK})
        env.step(actions[0])
        cid = box.container_id
        timer = threading.Timer(
            1.0, subprocess.run, (["docker", "kill", cid],), {"capture_output": True}
        )
        timer.start()
        with pytest.raises(Fault) as exc:
            env.step(actions[1])
        timer.join()
        assert_fault(exc, "container")
        # a new container serves the re-run, which is the fault-free run
        assert episode(env, actions) == expected
        assert box.container_id != cid
        env.close()
        end = time.monotonic() + 30
        while cid in pool.container_ids and time.monotonic() < end:
            time.sleep(0.1)
        assert cid not in pool.container_ids
    finally:
        for box in boxes:
            box.close()
        ids = pool.container_ids
        pool.close()
    left = subprocess.run(
        ["docker", "ps", "-aq", "--no-trunc"], capture_output=True, text=True
    ).stdout.split()
    assert not set(ids + [cid]) & set(left)


@pytest.mark.bwrap
def test_error_action_search_through_a_fault_finds_the_fault_free_mutants(
    tmp_path: Path,
) -> None:
    require_bwrap()
    import json

    reference = (
        "import time\ntime.sleep(0.3)\nn = int(input())\nt = sum(map(int, input().split()))\n"
        "print(t if n > 0 else 0)\n"
    )
    row = {
        "id": "slow-sum",
        "problem": "Print the sum of n numbers.",
        "starter_code": "",
        "tests": json.dumps(
            [
                {"input": f"{n}\n{' '.join(['1'] * n)}\n", "output": f"{n}\n", "testtype": "stdin"}
                for n in (1, 2, 3)
            ]
        ),
        "metadata": json.dumps({"reference": reference}),
    }
    tasks = tmp_path / "slow.jsonl"
    tasks.write_text(json.dumps(row) + "\n")

    def error_actions(env: gym.Env) -> list[str]:
        env.reset(seed=5, options={"task_id": "slow-sum"})
        return [env.unwrapped.error_action(np.random.default_rng(s)) for s in range(4)]

    def forget() -> None:
        deepcoder_env._OUTCOMES.data.clear()
        deepcoder_env._ERROR_POOLS.data.clear()

    clean = gym.make("agentenvs/DeepCoderMT-v0", tasks_path=tasks)
    try:
        expected = error_actions(clean)
    finally:
        clean.close()
    forget()
    env = gym.make("agentenvs/DeepCoderMT-v0", tasks_path=tasks)
    try:
        env.reset(seed=5, options={"task_id": "slow-sum"})
        killer = kill_local_when_running("pid1", delay=0.1)
        with pytest.raises(Fault):
            env.unwrapped.error_action(np.random.default_rng(3))
        killer.join()
        assert error_actions(env) == expected
    finally:
        env.close()
        forget()
    assert_no_sandbox_left()
