"""fork(k) and fork_env: children at the parent's state, independent, wrappers re-made."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest
from _toy_env import LineWalkEnv

import agentenvs  # noqa: F401 - registers the env ids
from agentenvs.core.errors import SnapshotError
from agentenvs.core.fork import fork_env
from agentenvs.core.snapshot import restore_snapshot, take_snapshot
from agentenvs.testing import CHECKS, check_env_contract
from agentenvs.wrappers.budget import BudgetMix
from agentenvs.wrappers.inject_error import InjectError
from agentenvs.wrappers.record import RecordEpisode

FORK_CHECKS = {"fork_equivalence", "fork_independence", "fork_close"}


def _play(env: gym.Env, actions: list[str]) -> list[tuple]:
    """The actions' results, up to the end of the episode."""
    out = []
    for action in actions:
        out.append(env.step(action)[:4])
        if out[-1][2] or out[-1][3]:
            break
    return out


@pytest.mark.parametrize("env_id", ["agentenvs/FrozenLake-v0", "agentenvs/BFCL-v0"])
def test_children_play_as_the_restored_parent(env_id: str) -> None:
    env = gym.make(env_id, max_turns=8)
    env.reset(seed=3)
    if "Frozen" in env_id:
        env.step("Down")
        actions = ["Right", "Down", "Right"]
    else:  # a graded reply ends the episode
        actions = [env.unwrapped.gold_reply()]
    snap = take_snapshot(env)
    kids = env.unwrapped.fork(4)
    # a slippery lake draws from the RNG: equal results need each child's own copy of it
    played = [_play(kid, actions) for kid in kids]
    restore_snapshot(env, snap)
    expected = _play(env, actions)
    assert played == [expected] * 4
    assert len({id(k.unwrapped.np_random) for k in kids}) == 4


def test_a_child_changes_nothing_else_and_outlives_its_parent() -> None:
    env = gym.make("agentenvs/FrozenLake-v0", max_turns=10)
    env.reset(seed=0)
    a, b = env.unwrapped.fork(2)
    key, turn = env.unwrapped.state_key(), env.unwrapped.turn
    a.step("Right")
    a.step("Down")
    assert (env.unwrapped.state_key(), env.unwrapped.turn) == (key, turn)
    assert (b.state_key(), b.turn) == (key, turn)
    env.close()
    a.close()
    assert b.step("Down")[4]["turn"] == turn + 1


def test_the_generic_path_builds_siblings_with_the_constructor_arguments() -> None:
    env = LineWalkEnv(max_turns=5, show_budget=True)  # no fast path: restore into siblings
    env.reset(seed=1, options={"task_id": "line-7"})
    kids = env.fork(3)
    assert all(type(k) is LineWalkEnv and k.max_turns == 5 and k.show_budget for k in kids)
    snap = env.snapshot()
    got = [_play(k, ["left", "right", "right"]) for k in kids]
    env.restore(snap)
    assert got == [_play(env, ["left", "right", "right"])] * 3


def test_wrappers_are_made_again_around_each_child_in_their_state() -> None:
    env = InjectError(BudgetMix(LineWalkEnv(), [3, 5, 7], seed=2), turn=2, seed=4)
    env.reset(seed=5, options={"task_id": "line-7"})
    env.step("\x00")  # an invalid action: a turn spent, the walker where it was
    snap = take_snapshot(env)
    kids = fork_env(env, 3)
    for kid in kids:
        assert isinstance(kid, InjectError) and isinstance(kid.env, BudgetMix)
        assert kid.env.env is kid.unwrapped and kid.unwrapped is not env.unwrapped
        assert take_snapshot(kid).wrappers == snap.wrappers
    before = take_snapshot(env).wrappers
    played = _play(kids[0], ["right", "left"])  # the injection at turn 2 happens in the child
    assert take_snapshot(env).wrappers == before
    assert take_snapshot(kids[1]).wrappers == before
    kids[0].reset(seed=9)  # the child's wrapper streams are its own copies
    assert take_snapshot(kids[1]).wrappers == before
    assert _play(kids[2], ["right", "left"]) == played


def test_a_recording_wrapper_refuses_and_no_child_is_left(tmp_path: Path) -> None:
    inner = LineWalkEnv()
    closed: list[int] = []
    original = LineWalkEnv.close

    def counting_close(self: LineWalkEnv) -> None:
        closed.append(id(self))
        original(self)

    env = RecordEpisode(inner, tmp_path / "run.jsonl")
    env.reset(seed=0)
    LineWalkEnv.close = counting_close  # type: ignore[method-assign]
    try:
        with pytest.raises(SnapshotError, match="cannot be forked"):
            fork_env(env, 2)
    finally:
        LineWalkEnv.close = original  # type: ignore[method-assign]
    assert len(set(closed)) == 2 and id(inner) not in closed
    env.close()


def test_bad_counts_and_unstarted_envs_are_refused() -> None:
    env = gym.make("agentenvs/FrozenLake-v0")
    with pytest.raises(SnapshotError, match="reset"):
        env.unwrapped.fork(2)
    env.reset(seed=0)
    for k in (0, -1, True, 2.0, 10**6):
        with pytest.raises(ValueError, match="fork"):
            env.unwrapped.fork(k)


class SharedListEnv(LineWalkEnv):
    """Broken on purpose: its children share the parent's visited list."""

    def _load_task(self, task_id, options):  # type: ignore[no-untyped-def]
        self._visited = []
        return super()._load_task(task_id, options)

    def _apply(self, action):  # type: ignore[no-untyped-def]
        self._visited.append(action)
        return super()._apply(action)

    def _get_state(self):  # type: ignore[no-untyped-def]
        return {**super()._get_state(), "visited": tuple(self._visited)}

    def _set_state(self, state):  # type: ignore[no-untyped-def]
        super()._set_state({k: v for k, v in state.items() if k != "visited"})
        self._visited = list(state["visited"])

    def _state_key(self) -> str:
        return f"{super()._state_key()}|{len(self._visited)}"

    def _fork(self, k):  # type: ignore[no-untyped-def]
        kids = []
        for _ in range(k):
            kid = self._shallow_child()  # the list is not copied: stepping one shows in all
            kids.append(kid)
        return kids


def test_the_contract_catches_children_that_share_state() -> None:
    report = check_env_contract(
        SharedListEnv, raise_on_failure=False, check_processes=False, skip=set(CHECKS) - FORK_CHECKS
    )
    assert "fork_independence" in report.failure_names
    assert "changed" in report.result("fork_independence").detail


def test_the_contract_passes_a_toy_env() -> None:
    report = check_env_contract(
        LineWalkEnv, raise_on_failure=False, check_processes=False, skip=set(CHECKS) - FORK_CHECKS
    )
    assert all(report.result(n).passed for n in FORK_CHECKS), report.summary()
