"""verifiers environments as text envs of the suite: a taskset and its env's multi-turn
rollout (``vf.Env.run`` playing ``interaction.turn``), scored by the task's own rewards.

This module is itself the verifiers taskset the tests play (verifiers names a taskset by
its module and reads its ``Taskset`` and ``Env`` from ``__all__``): a number to find in
a few turns, told higher or lower, from a tiny in-memory dataset. Its ``run``, its
rewards, ``Task.score``, ``Trace``, ``Agents`` and the loaders are verifiers' own.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

vf = pytest.importorskip(
    "verifiers.v1", reason="verifiers is not installed: pip install 'agentenvs[ecosystem]'"
)

import agentenvs  # noqa: E402,F401 - registers the ids
from agentenvs.core.errors import Fault  # noqa: E402
from agentenvs.envs.foreign.verifiers_env import VerifiersTextEnv  # noqa: E402
from agentenvs.testing import check_env_contract  # noqa: E402

__all__ = ["FindTaskset", "FindEnv"]

#: the tiny dataset: (target, turns)
ROWS = [(11, 6), (3, 6), (27, 6), (18, 6)]


class FindData(vf.TaskData):
    target: int
    turns: int


class FindTask(vf.Task[FindData, vf.State, vf.TaskConfig]):
    @vf.reward(weight=1.0)
    async def found(self, trace: vf.Trace) -> float:
        """The rubric: 1 when the last reply is the number."""
        return float(trace.last_reply == str(self.data.target))

    @vf.reward(weight=0.0)
    async def turns_used(self, trace: vf.Trace) -> float:
        return float(trace.num_turns)


class FindConfig(vf.TasksetConfig):
    high: int = 32


class FindTaskset(vf.Taskset[FindTask, FindConfig]):
    def load(self) -> list[FindTask]:
        return [
            FindTask(
                FindData(
                    name=f"find-{t}",
                    prompt=f"Find my number, 1 to {self.config.high}. Reply with a number.",
                    system_prompt="You are playing a guessing game.",
                    target=t,
                    turns=n,
                ),
                self.config.task,
            )
            for t, n in ROWS
        ]


class FindEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig()


class FindEnv(vf.Env[FindEnvConfig]):
    """The env answers each reply until the number is found or the turns run out."""

    async def run(self, task: FindTask, agents: vf.Agents) -> None:
        async with agents.player.interaction(task) as talk:
            segment = await talk.turn()
            for left in range(task.data.turns - 1, -1, -1):  # replies left after this one
                if segment.terminated:
                    break
                reply = segment.last_reply
                if re.fullmatch(r"\d{1,6}", reply) and int(reply) == task.data.target:
                    talk.trace.info["found"] = True
                    break
                if not left:
                    break
                if not re.fullmatch(r"\d{1,6}", reply):
                    segment = await talk.turn("That is not a number. Reply with a number.")
                else:
                    hint = "higher" if int(reply) < task.data.target else "lower"
                    segment = await talk.turn(f"{reply} is wrong: go {hint}.")


ENV_ID = "agentenvs/Verifiers-v0"
KWARGS = {"taskset": __name__}


def test_the_contract_holds() -> None:
    check_env_contract(ENV_ID, env_kwargs=KWARGS, steps=20)


def _bisect(env: VerifiersTextEnv, task: str) -> tuple[float, bool, dict[str, Any]]:
    obs, _ = env.reset(seed=0, options={"task_id": task})
    assert "[system] You are playing a guessing game." in obs and "Find my number" in obs
    lo, hi = 1, 32
    while True:
        guess = (lo + hi) // 2
        obs, reward, terminated, truncated, info = env.step(f"<answer>{guess}</answer>")
        if terminated or truncated:
            return reward, terminated, info
        lo, hi = (guess + 1, hi) if "go higher" in obs else (lo, guess - 1)


def test_a_solved_episode_is_scored_1_by_the_tasks_own_rubric() -> None:
    env = gym.make(ENV_ID, **KWARGS).unwrapped
    for task in ("0", "2"):
        reward, terminated, info = _bisect(env, task)
        assert terminated and reward == 1.0
        assert info["success"] is True and info["score"] == 1.0
        (trace,) = env.source.traces
        assert trace.rewards["found"].score == 1.0 and trace.info["found"] is True
        assert trace.last_reply == str(ROWS[int(task)][0])
    env.close()


def test_running_out_of_the_envs_turns_scores_0() -> None:
    env = VerifiersTextEnv(**KWARGS)
    env.reset(seed=0, options={"task_id": "1"})
    for i in range(6):
        obs, reward, terminated, _, info = env.step("30")
        assert terminated == (i == 5)
    assert reward == 0.0 and info["success"] is False and info["score"] == 0.0
    assert "The episode is over" in obs
    env.close()


def test_a_restore_replays_the_rollout() -> None:
    env = VerifiersTextEnv(**KWARGS)
    env.reset(seed=0, options={"task_id": "3"})
    env.step("10")
    snap = env.snapshot()
    seen = [env.step(g)[0] for g in ("20", "hello")]
    other = VerifiersTextEnv(**KWARGS)
    other.restore(type(snap).from_bytes(snap.to_bytes()))
    assert [other.step(g)[0] for g in ("20", "hello")] == seen
    assert "not a number" in seen[1]
    env.close()
    other.close()


class _Crashing(FindEnv):
    async def run(self, task: FindTask, agents: vf.Agents) -> None:
        async with agents.player.interaction(task) as talk:
            segment = await talk.turn()
            raise RuntimeError(f"the env broke on {segment.last_reply!r}")


def test_a_rollout_that_raises_is_a_fault_not_an_outcome() -> None:
    env = VerifiersTextEnv(**KWARGS)
    env.vf_env.__class__ = _Crashing  # the same env, its run replaced by one that raises
    env.reset(seed=0)
    with pytest.raises(Fault, match="the env broke on '5'") as caught:
        env.step("5")
    assert caught.value.attribution == "unknown"
    env.close()


def test_certify_runs(tmp_path: Path) -> None:
    from agentenvs.testing.certify import certify

    cert = certify(ENV_ID, env_kwargs=KWARGS, fuzz_episodes=2, probe_tasks=2, contract_steps=10)
    assert {r.part for r in cert.rows} == {"contract", "fuzz", "reward gaming"}
    assert cert.holds, cert.markdown()
    js, md = cert.write(tmp_path)
    assert js.is_file() and md.is_file()


def test_random_play_in_pass_at_k_t(tmp_path: Path) -> None:
    from agentenvs.eval.report import load_run
    from agentenvs.eval.runner import EvalConfig, run_pass_at_k_t

    config = EvalConfig(
        env_id=ENV_ID,
        policy="foreign/random",
        task_ids=["0", "1"],
        n=2,
        budgets=[3, 6],
        env_kwargs=KWARGS,
    )
    run_pass_at_k_t(config, tmp_path / "run", workers=0, progress=False)
    assert load_run(tmp_path / "run").n_records == 2 * 2 * 2


def test_a_module_that_is_no_taskset_is_refused() -> None:
    with pytest.raises(ValueError, match="not a verifiers taskset"):
        VerifiersTextEnv(taskset="json")
