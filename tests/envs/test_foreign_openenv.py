"""OpenEnv environments as text envs of the suite: in process, and behind OpenEnv's own
server (``create_app``, one WebSocket session per source) reached with its own client.

openenv-core ships no env, so the source is a small OpenEnv ``Environment`` written here
(a number to guess, drawn by the seeded reset); the server, client, models and
serialisation are OpenEnv's own, nothing of them mocked.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip(
    "openenv.core.env_server", reason="OpenEnv is not installed: pip install 'agentenvs[ecosystem]'"
)
uvicorn = pytest.importorskip("uvicorn", reason="uvicorn serves the OpenEnv app")

from openenv.core.env_server.http_server import create_app  # noqa: E402
from openenv.core.env_server.interfaces import Environment  # noqa: E402
from openenv.core.env_server.types import Action, Observation, State  # noqa: E402

import agentenvs  # noqa: E402,F401 - registers the ids
from agentenvs.core.errors import Fault  # noqa: E402
from agentenvs.envs.foreign.openenv_env import OpenEnvTextEnv  # noqa: E402
from agentenvs.testing import check_env_contract  # noqa: E402

ENV_ID = "agentenvs/OpenEnv-v0"


class GuessAction(Action):
    guess: int


class GuessObservation(Observation):
    message: str = ""
    attempts_left: int = 0


class GuessNumberEnvironment(Environment[GuessAction, GuessObservation, State]):
    """Guess a number in 1..``high`` drawn by the seeded reset; told higher or lower."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, high: int = 32, attempts: int = 8) -> None:
        super().__init__()
        self.high, self.attempts = high, attempts
        self._state = State(episode_id="", step_count=0)
        self.target = 1
        self.left = attempts

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> GuessObservation:
        self.target = int(np.random.default_rng(seed).integers(1, self.high + 1))
        self.left = self.attempts
        self._state = State(episode_id=episode_id or "", step_count=0)
        return GuessObservation(
            message=f"Guess my number, 1 to {self.high}.", attempts_left=self.left
        )

    def step(self, action: GuessAction, timeout_s: float | None = None, **kwargs: Any):  # noqa: ANN201
        self._state.step_count += 1
        self.left -= 1
        if action.guess == self.target:
            return GuessObservation(
                message="Right!", attempts_left=self.left, done=True, reward=1.0
            )
        hint = "higher" if action.guess < self.target else "lower"
        return GuessObservation(
            message=f"{action.guess} is wrong: go {hint}.",
            attempts_left=self.left,
            done=self.left <= 0,
            reward=0.0,
        )

    @property
    def state(self) -> State:
        return self._state


CLASS_PATH = f"{__name__}:GuessNumberEnvironment"


class _Server:
    """OpenEnv's app for the env, served by uvicorn on a loopback port in a thread."""

    def __init__(self, app: Any = None) -> None:
        if app is None:
            app = create_app(
                GuessNumberEnvironment, GuessAction, GuessObservation, max_concurrent_envs=64
            )
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        config = uvicorn.Config(app, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "the OpenEnv server did not start"
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.sock.close()


@pytest.fixture(scope="module")
def server() -> Iterator[_Server]:
    s = _Server()
    yield s
    s.stop()


def _kwargs(where: str, server: _Server | None) -> dict[str, Any]:
    if where == "remote":
        assert server is not None
        return {"base_url": server.url, "n_tasks": 10}
    return {"env_class": CLASS_PATH, "n_tasks": 10}


@pytest.fixture(params=["in-process", "remote"])
def kwargs(request: pytest.FixtureRequest) -> dict[str, Any]:
    if request.param == "remote":
        return _kwargs("remote", request.getfixturevalue("server"))
    return _kwargs("in-process", None)


def test_the_contract_holds(kwargs: dict[str, Any]) -> None:
    check_env_contract(ENV_ID, env_kwargs=kwargs, steps=20)


def _solve(env: OpenEnvTextEnv, task: str) -> dict[str, Any]:
    """Bisect on the env's own hints, read from the text."""
    obs, info = env.reset(seed=0, options={"task_id": task})
    assert "Guess my number" in obs and "attempts_left" in obs
    lo, hi = 1, 32
    while True:
        guess = (lo + hi) // 2
        obs, reward, terminated, truncated, info = env.step(f"<answer>{guess}</answer>")
        if terminated or truncated:
            return {"reward": reward, "terminated": terminated, **info}
        if "go higher" in obs:
            lo = guess + 1
        else:
            assert "go lower" in obs
            hi = guess - 1


def test_a_solved_episode_scores_1(kwargs: dict[str, Any]) -> None:
    env = gym.make(ENV_ID, **kwargs).unwrapped
    for task in ("0", "3"):
        end = _solve(env, task)
        assert end["terminated"] and end["reward"] == 1.0
        assert end["success"] is True and end["score"] == 1.0
    env.close()


def test_actions_as_text_or_json_and_a_refused_one_costs_the_turn(kwargs: dict[str, Any]) -> None:
    env = gym.make(ENV_ID, **kwargs).unwrapped
    env.reset(seed=0, options={"task_id": "1"})
    obs, _, _, _, info = env.step('{"guess": 40}')
    assert info["action_valid"] and "40 is wrong: go lower" in obs
    assert '"attempts_left": 7' in obs and "Reward: 0" in obs
    obs, _, _, _, info = env.step("forty")  # the model refuses it: never reaches the env
    assert info["action_valid"] is False and env.turn == 2
    assert "Invalid action" in obs and "'guess'" in obs
    obs, _, _, _, info = env.step('{"guess": 1, "colour": "red"}')
    assert info["action_valid"] is False
    obs, *_ = env.step("0")
    assert '"attempts_left": 6' in obs  # the refused ones cost no attempt of the source
    env.close()


def test_a_restore_replays_the_remote_sessions(server: _Server) -> None:
    env = gym.make(ENV_ID, **_kwargs("remote", server)).unwrapped
    env.reset(seed=2, options={"task_id": "4"})
    env.step("16")
    snap = env.snapshot()
    seen = [env.step(g)[0] for g in ("8", "24")]
    other = gym.make(ENV_ID, **_kwargs("remote", server)).unwrapped
    other.restore(type(snap).from_bytes(snap.to_bytes()))
    assert [other.step(g)[0] for g in ("8", "24")] == seen
    (child,) = env.fork(1)
    assert child.state_key() == env.state_key()
    for e in (env, other, child):
        e.close()


def test_an_unreachable_or_dead_server_is_a_fault_not_an_outcome() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()  # nothing listens there
    with pytest.raises(Fault) as caught:
        OpenEnvTextEnv(base_url=url)
    assert caught.value.kind == "env-server" and caught.value.attribution == "infrastructure"
    # a server that goes away mid-episode
    own = _Server()
    env = OpenEnvTextEnv(base_url=own.url)
    env.reset(seed=0)
    env.step("5")
    own.stop()
    with pytest.raises(Fault) as caught:
        env.step("6")
    assert caught.value.attribution == "infrastructure" and caught.value.retryable
    env.close()


class _BreaksOn13(GuessNumberEnvironment):
    def step(self, action: GuessAction, timeout_s: float | None = None, **kwargs: Any):  # noqa: ANN201
        if action.guess == 13:
            raise ZeroDivisionError("13 breaks the env")
        return super().step(action)


def test_a_server_error_is_a_fault_and_says_whose_it_may_be() -> None:
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

    # the env raised on the server while stepping: the answer cannot tell whose fault
    own = _Server(create_app(_BreaksOn13, GuessAction, GuessObservation, max_concurrent_envs=4))
    try:
        env = OpenEnvTextEnv(base_url=own.url)
        env.reset(seed=0)
        assert env.step("12")[4]["action_valid"] is True
        with pytest.raises(Fault, match="13 breaks the env") as caught:
            env.step("13")
        assert caught.value.attribution == "unknown" and not caught.value.retryable
        env.close()
    finally:
        own.stop()
    # a server that answers 500
    broken = FastAPI()
    broken.get("/schema")(lambda: JSONResponse({"detail": "down"}, status_code=503))
    own = _Server(broken)
    try:
        with pytest.raises(Fault, match="answered 503") as caught:
            OpenEnvTextEnv(base_url=own.url)
        assert caught.value.attribution == "infrastructure"
    finally:
        own.stop()


def test_certify_runs(kwargs: dict[str, Any], tmp_path: Path) -> None:
    from agentenvs.testing.certify import certify

    cert = certify(ENV_ID, env_kwargs=kwargs, fuzz_episodes=2, probe_tasks=2, contract_steps=10)
    assert {r.part for r in cert.rows} == {"contract", "fuzz", "reward gaming"}
    assert cert.holds, cert.markdown()
    js, md = cert.write(tmp_path)
    assert js.is_file() and md.is_file()


def test_random_play_in_pass_at_k_t(kwargs: dict[str, Any], tmp_path: Path) -> None:
    from agentenvs.eval.report import load_run
    from agentenvs.eval.runner import EvalConfig, run_pass_at_k_t

    config = EvalConfig(
        env_id=ENV_ID,
        policy="foreign/random",
        task_ids=["0", "1"],
        n=2,
        budgets=[4, 8],
        env_kwargs=kwargs,
    )
    run_pass_at_k_t(config, tmp_path / "run", workers=0, progress=False)
    assert load_run(tmp_path / "run").n_records == 2 * 2 * 2


def test_a_class_that_is_no_openenv_env_is_refused() -> None:
    with pytest.raises(ValueError, match="not an OpenEnv Environment"):
        OpenEnvTextEnv(env_class="collections:OrderedDict")
    with pytest.raises(ValueError, match="exactly one"):
        OpenEnvTextEnv()
    env = OpenEnvTextEnv(env_class=GuessNumberEnvironment, env_kwargs={"high": 4})
    assert env.action_field == "guess"
    env.close()
