"""GEM's envs as text envs of the suite: the contract, a solved game, exact replay, and
GEM's global generators kept apart from the process's.

The sources are GEM's own game envs, made by ``gem.make`` with their registered ids.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip(
    "gem",
    reason="GEM is not installed: pip install --no-deps gem-llm (with 'agentenvs[ecosystem]')",
)

import agentenvs  # noqa: E402,F401 - registers the ids
from agentenvs.envs.foreign.gem_env import GEMTextEnv  # noqa: E402
from agentenvs.testing import check_env_contract  # noqa: E402

ENV_ID = "agentenvs/GEM-v0"
GUESS = {"env_id": "game:GuessTheNumber-v0-hard", "n_tasks": 20}


@pytest.mark.parametrize("source", ["game:GuessTheNumber-v0-hard", "game:Mastermind-v0-easy"])
def test_the_contract_holds(source: str) -> None:
    check_env_contract(ENV_ID, env_kwargs={"env_id": source, "n_tasks": 20}, steps=20)


def _bisect(env: GEMTextEnv, task: str) -> tuple[float, bool, dict]:
    obs, _ = env.reset(seed=1, options={"task_id": task})
    lo, hi = map(int, re.search(r"between (\d+) and (\d+)", obs).groups())
    while True:
        guess = (lo + hi) // 2
        obs, reward, terminated, truncated, info = env.step(f"My guess: \\boxed{{{guess}}}")
        if terminated or truncated:
            return reward, terminated, info
        if f"higher than {guess}" in obs:
            lo = guess + 1
        else:
            assert f"lower than {guess}" in obs, obs
            hi = guess - 1


def test_a_solved_game_scores_1() -> None:
    env = gym.make(ENV_ID, **GUESS).unwrapped
    for task in ("0", "7"):
        reward, terminated, info = _bisect(env, task)  # 1..50 in at most 6 of its 7 turns
        assert terminated and reward == 1.0
        assert info["success"] is True and info["score"] == 1.0
    env.close()


def test_a_reply_without_an_answer_costs_the_turn_not_the_episode() -> None:
    env = GEMTextEnv(**GUESS)
    env.reset(seed=0, options={"task_id": "3"})
    obs, _, terminated, _, info = env.step("I think it is seven")
    assert info["action_valid"] is False and not terminated and "\\boxed" in obs
    obs, _, _, _, info = env.step("<answer>7</answer>")  # made \boxed{7}
    assert info["action_valid"] is True and "you guessed 7" in obs
    env.close()


def test_a_task_is_the_same_game_and_the_process_generators_are_untouched() -> None:
    random.seed(123)
    np.random.seed(123)
    expected = (random.random(), np.random.random())
    random.seed(123)
    np.random.seed(123)
    a, b = GEMTextEnv(**GUESS), GEMTextEnv(**GUESS)
    a.reset(seed=0, options={"task_id": "5"})
    b.reset(seed=9, options={"task_id": "5"})
    assert a.source.env.game_number == b.source.env.game_number
    assert (random.random(), np.random.random()) == expected
    snap = a.snapshot()
    seen = [a.step(f"\\boxed{{{g}}}")[0] for g in (10, 40)]
    c = GEMTextEnv(**GUESS)
    c.restore(snap)
    assert [c.step(f"\\boxed{{{g}}}")[0] for g in (10, 40)] == seen
    for e in (a, b, c):
        e.close()


def test_certify_runs(tmp_path: Path) -> None:
    from agentenvs.testing.certify import certify

    cert = certify(ENV_ID, env_kwargs=GUESS, fuzz_episodes=2, probe_tasks=2, contract_steps=10)
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
        env_kwargs=GUESS,
    )
    run_pass_at_k_t(config, tmp_path / "run", workers=0, progress=False)
    assert load_run(tmp_path / "run").n_records == 2 * 2 * 2


def test_an_unknown_id_is_refused() -> None:
    with pytest.raises(ValueError, match="not a GEM env"):
        GEMTextEnv(env_id="game:Nope-v0")
