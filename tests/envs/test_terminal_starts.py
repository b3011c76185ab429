"""Docker runtime starts: spares sized to demand, each one a fresh start of its task."""

from __future__ import annotations

import gc
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentenvs.envs.terminal.env import TerminalBenchEnv
from agentenvs.envs.terminal.runtime_docker import RUNTIME_LABEL, spares_wanted

FIXTURES = Path(__file__).parent / "terminal_fixtures"
TASK = "harbor-count"
#: how long the tests wait for spares started in the background to settle
SETTLE_S = 120

A = ("image-a", "a", (), "", 1, "none", "/app")
B = ("image-b", "b", (), "", 1, "none", "/app")


# ---------------------------------------------------------------- demand, no engine
def test_one_session_wants_one_spare_of_its_key() -> None:
    assert spares_wanted([(100.0, A)], 100.0, 1.0, 8) == {A: 1}


def test_sessions_faster_than_a_start_want_more_spares() -> None:
    # four sessions 0.25 s apart, a start lasting 1 s: four expected while one starts
    sessions = [(100.0 + 0.25 * i, A) for i in range(5)]
    assert spares_wanted(sessions, 101.0, 1.0, 8) == {A: 4}
    assert spares_wanted(sessions, 101.0, 1.0, 3) == {A: 3}  # never past the limit


def test_a_key_no_longer_asked_for_fades_to_one() -> None:
    sessions = [(100.0 + 0.25 * i, A) for i in range(5)]
    assert spares_wanted(sessions, 200.0, 1.0, 8) == {A: 1}


def test_a_key_that_came_back_keeps_a_spare_a_single_one_does_not() -> None:
    sessions = [(100.0, A), (110.0, B), (120.0, A), (130.0, B), (140.0, A)]
    assert spares_wanted(sessions, 140.0, 1.0, 8) == {A: 1, B: 1}
    once = [(100.0, B), (110.0, A)]
    assert spares_wanted(once, 110.0, 1.0, 8) == {A: 1}
    # the latest key comes first when the limit cannot hold both
    assert spares_wanted(sessions[:-1], 130.0, 1.0, 1) == {B: 1}
    assert spares_wanted(sessions, 140.0, 1.0, 0) == {}


# ---------------------------------------------------------------- on the engine
def _labelled(token: str) -> list[str]:
    """Ids of the containers the engine lists with runtime ``token``'s label."""
    import docker

    client = docker.from_env()
    try:
        found = client.api.containers(all=True, filters={"label": f"{RUNTIME_LABEL}={token}"})
    finally:
        client.close()
    return [c["Id"] for c in found]


def _settled(env: TerminalBenchEnv) -> None:
    """Wait until the runtime's spares in the background are started (or given up)."""
    runtime = env.runtime()
    end = time.monotonic() + SETTLE_S
    while runtime.spares_starting():
        assert time.monotonic() < end, "spares still starting"
        time.sleep(0.1)


def _env(tasks_path: Path = FIXTURES, **docker: object) -> TerminalBenchEnv:
    env = TerminalBenchEnv(tasks_path=tasks_path, runtime="docker", command_timeout=60)
    env.docker_options.update(docker)
    return env


@pytest.fixture
def envs() -> Iterator[list[TerminalBenchEnv]]:
    made: list[TerminalBenchEnv] = []
    yield made
    for env in made:
        env.close()


on_docker = pytest.mark.docker("agentenvs/terminal:latest")


@on_docker
def test_concurrent_resets_get_distinct_fresh_containers(envs: list[TerminalBenchEnv]) -> None:
    envs.extend(_env() for _ in range(4))
    for env in envs:
        env.reset(options={"task_id": TASK})
        env.step("echo dirty > /app/left.txt")
    seen = {env.runtime()._current.id for env in envs}
    errors: list[BaseException] = []

    def reset(env: TerminalBenchEnv) -> None:
        try:
            env.reset(options={"task_id": TASK})
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=reset, args=(env,)) for env in envs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    now = [env.runtime()._current.id for env in envs]
    assert len(set(now)) == len(envs) and not set(now) & seen
    expected = (FIXTURES / TASK / "environment" / "files" / "data.txt").read_text()
    for env in envs:
        obs, *_ = env.step("cat /app/data.txt; ls /app")
        assert expected.strip().splitlines()[0] in obs
        assert "left.txt" not in obs  # the previous episode's write is not there


@on_docker
def test_no_spare_beyond_demand(envs: list[TerminalBenchEnv]) -> None:
    demand, off, none = _env(), _env(prestart="off"), _env(max_spares=0)
    envs.extend([demand, off, none])
    for env in envs:
        env.reset(options={"task_id": TASK})
        _settled(env)
    # one session so far: its container and one spare, never more
    assert len(_labelled(demand.runtime().token)) == 2
    assert len(_labelled(off.runtime().token)) == 1
    assert len(_labelled(none.runtime().token)) == 1


@on_docker
def test_close_removes_every_spare(envs: list[TerminalBenchEnv]) -> None:
    env = _env(max_spares=3)
    envs.append(env)
    for _ in range(4):  # back to back: faster than a start, so more than one spare
        env.reset(options={"task_id": TASK})
    _settled(env)
    token = env.runtime().token
    before = _labelled(token)
    assert len(before) >= 2
    env.close()
    assert _labelled(token) == []


@on_docker
def test_a_warm_reset_takes_a_ready_spare_and_starts_no_thread(
    envs: list[TerminalBenchEnv],
) -> None:
    env = _env()
    envs.append(env)
    env.reset(options={"task_id": TASK})
    env.reset(options={"task_id": TASK})  # the remover runs from the first session on
    _settled(env)
    runtime = env.runtime()
    counts = dict(runtime.session_starts)
    before = {t.ident for t in threading.enumerate()}
    env.reset(options={"task_id": TASK})
    started = [t.name for t in threading.enumerate() if t.ident not in before]
    # its next spares are queued for the process's starters, its removals for the remover
    assert not [name for name in started if name.startswith("agentenvs-tb-")]
    assert runtime.session_starts["spare"] == counts["spare"] + 1
    assert runtime.session_starts["opened"] == counts["opened"]
    _settled(env)
    assert [s for s in runtime._spares if isinstance(s[1], tuple)]  # the next one is ready


@on_docker
def test_the_background_collects_the_young_garbage_it_made_not_the_next_reset(
    envs: list[TerminalBenchEnv],
) -> None:
    # the engine requests of spare starts leave thousands of objects behind; the
    # collection they are due runs on a background thread once quiet, so the next
    # burst of resets does not run it
    env = _env()
    envs.append(env)
    env.reset(options={"task_id": TASK})
    _settled(env)
    seen: list[tuple[str, int]] = []

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append((threading.current_thread().name, info["generation"]))

    gc.callbacks.append(note)
    try:
        env.reset(options={"task_id": TASK})
        _settled(env)
        deadline = time.monotonic() + 30
        while not any(name.startswith("agentenvs-tb-") and gen >= 1 for name, gen in seen):
            assert time.monotonic() < deadline, seen
            time.sleep(0.05)
        gc.disable()  # a collector the user turned off is not run
        try:
            time.sleep(1.0)  # a collection begun before is over
            seen.clear()
            env.reset(options={"task_id": TASK})
            _settled(env)
            time.sleep(0.5)
            assert not [s for s in seen if s[0].startswith("agentenvs-tb-")]
        finally:
            gc.enable()
    finally:
        gc.callbacks.remove(note)


@on_docker
def test_changed_task_files_never_get_the_stale_spare(
    tmp_path: Path, envs: list[TerminalBenchEnv]
) -> None:
    tasks = tmp_path / "tasks"
    shutil.copytree(FIXTURES / TASK, tasks / TASK)
    first = _env(tasks)
    envs.append(first)
    first.reset(options={"task_id": TASK})
    _settled(first)
    spares = {s[1][0].id for s in first.runtime()._spares if isinstance(s[1], tuple)}
    assert spares  # a spare of the old files is ready
    (tasks / TASK / "environment" / "files" / "data.txt").write_text("changed\n")
    second = _env(tasks)  # the tasks read again, as a new run does
    envs.append(second)
    second.reset(options={"task_id": TASK})
    assert second.runtime()._current.id not in spares
    obs, *_ = second.step("cat /app/data.txt")
    assert "changed" in obs
    # and the first runtime's next session stays a fresh start of the image it had
    first.reset(options={"task_id": TASK})
    assert first.runtime()._current.image != second.runtime()._current.image


# ---------------------------------------------------------------- a warm reset's state key
def _warm(env: TerminalBenchEnv, task_id: str) -> dict[str, object]:
    """Reset ``env`` onto a spare prepared (and hashed) ahead; the reset's info."""
    env.reset(options={"task_id": task_id})
    _settled(env)
    _, info = env.reset(options={"task_id": task_id})
    return info


@on_docker
@pytest.mark.parametrize("task_id", [TASK, "tb1-greeting"])
def test_a_warm_resets_key_is_the_key_read_the_slow_way(
    envs: list[TerminalBenchEnv], task_id: str
) -> None:
    from agentenvs.envs.terminal.state import work_dir_key

    fast, slow = _env(), _env(start_keys=False)
    envs.extend([fast, slow])
    info = _warm(fast, task_id)
    shell, where = fast.shell, fast._state_dir
    hashed = fast.runtime().start_files(shell, where)
    assert hashed is not None  # the reset took a spare hashed ahead, untouched since
    raw = fast._state_key()
    # the same container read now, and another fresh container read at its reset
    assert raw == work_dir_key(shell, where, False)
    assert fast.runtime().start_files(shell, where) is None  # a command ran since
    assert info["state_key"] == _warm(slow, task_id)["state_key"]
    assert slow.runtime().start_files(slow.shell, slow._state_dir) is None
    # the next warm reset of the fast env gets its key ahead again, equal
    assert _warm(fast, task_id)["state_key"] == info["state_key"]


@on_docker
def test_a_warm_resets_key_changes_with_the_work_dir(envs: list[TerminalBenchEnv]) -> None:
    env = _env()
    envs.append(env)
    start = _warm(env, TASK)["state_key"]
    snap = env.snapshot()
    *_, info = env.step("echo more >> /app/data.txt")
    assert info["state_key"] != start
    env.restore(snap)  # a new container with the snapshot's files: read, and equal
    assert env.state_key() == start
    assert env.runtime().start_files(env.shell, env._state_dir) is None
    # a change made outside the agent's turns (the control channel) is seen too
    again = _warm(env, TASK)["state_key"]
    assert again == start
    rc, _ = env.shell.control("touch /app/extra.txt")
    assert rc == 0
    assert env.state_key() != start


# harbor-count's starting state is its files alone; tb1-greeting's Dockerfile runs setup.sh
@pytest.mark.parametrize(("task_id", "ahead"), [(TASK, True), ("tb1-greeting", False)])
def test_a_local_resets_key_is_read_once_and_stays_exact(task_id: str, ahead: bool) -> None:
    from agentenvs.envs.terminal.state import work_dir_key

    env = TerminalBenchEnv(tasks_path=FIXTURES, runtime="local", command_timeout=60)
    try:
        _, first = env.reset(options={"task_id": task_id})
        _, info = env.reset(options={"task_id": task_id})
        runtime, shell, where = env.runtime(), env.shell, env._state_dir
        known = runtime.start_files(shell, where)
        # the second session's files hashed at the first; never after a setup.sh
        assert (known is not None) == ahead
        assert info["state_key"] == first["state_key"]
        assert env._state_key() == work_dir_key(shell, where, False)  # read the slow way
        *_, changed = env.step("echo more >> /app/added.txt")
        assert changed["state_key"] != info["state_key"]
        assert runtime.start_files(env.shell, where) is None
    finally:
        env.close()
