"""A foreign env as a text env of the suite, restored by exact replay.

Most envs outside the suite have no snapshot: their state lives in objects the suite
cannot copy or check. What they do have is a seeded reset. :class:`ReplayTextEnv` keeps,
for the live episode, the seed its source was reset with and every action that reached
the source; its state is that record, and a restore is a replay: reset the source with
the seed, apply the actions again. Each step's result is recorded as a digest (the
observation, reward and ends the source returned), and a replay that gives another
result anywhere refuses the restore with ``SnapshotError`` saying where and that the env
is not replayable; the env is then exactly as it was before the restore. So snapshots,
``fork(k)`` and every analysis that branches (step quality, error states) work on any
env whose seeded reset and steps are deterministic, and refuse, with that reason, on one
whose are not.

A subclass says how to make a source (:meth:`_make_source`) and talk to it in text:
:meth:`_source_reset` (the first observation for a task id and a seed),
:meth:`_source_step` (one action's text), and the task ids. A replay runs on a spare
source, never the live one, which it replaces only once every step matched: a restore
that fails has changed nothing, whatever the source does. A restore costs one replay (a
reset and as many steps as the episode had); the record of an episode is a few bytes per
action.

Reset: the source's seed is drawn from the env's own generator (``reset(seed=...)``
seeds it), so equal seeds give equal episodes and different seeds different draws of the
source's randomness for the same task.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from agentenvs.core.env import TextEnv, Transition
from agentenvs.core.errors import SnapshotError

#: the seeds handed to a source's reset
SEED_BOUND = 2**31 - 1


@dataclass(frozen=True)
class SourceStep:
    """What the source did with one action, in the suite's terms.

    ``observation``: the text the agent reads next; ``reward``: the source's reward;
    ``terminated``: the source ended the episode; ``success``: whether it counts as
    solved (None: unchanged); ``score``: within [0, 1] (None: unchanged);
    ``action_valid``: False when the action was refused before it reached the source
    (it is then not recorded and costs only the turn); ``digest``: what a replay must
    reproduce (defaults to the observation, reward and end)."""

    observation: str
    reward: float = 0.0
    terminated: bool = False
    success: bool | None = None
    score: float | None = None
    action_valid: bool = True
    digest: str | None = None
    info: dict[str, Any] | None = None


def _digest(*parts: Any) -> str:
    h = hashlib.blake2b(digest_size=12)
    for part in parts:
        h.update(repr(part).encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


class ForeignTextEnv(TextEnv):
    """Base of every adapter of another package's env: what the ``foreign/random``
    policy plays (``random_action``)."""

    def random_action(self, rng: np.random.Generator) -> str:
        """A legal action drawn from ``rng`` (the ``foreign/random`` policy's move); by
        default ``error_action``, which adapters without an oracle draw at random."""
        return self.error_action(rng)


class ReplayTextEnv(ForeignTextEnv):
    """Base of the adapters: a source env, its episode record, restore by replay."""

    #: the record's layout: (seed, actions, digests)
    snapshot_version: ClassVar[int] = 1
    #: a restore replays on a spare source and changes the env only once it matched
    restore_rollback: ClassVar[bool] = False

    def __init__(
        self, *, value_policy: str | None = None, value_rollouts: int = 16, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        if value_policy is not None and not isinstance(value_policy, str):
            raise ValueError(f"value_policy must be a policy spec, got {value_policy!r}")
        if (
            isinstance(value_rollouts, bool)
            or not isinstance(value_rollouts, int)
            or value_rollouts < 1
        ):
            raise ValueError(f"value_rollouts must be a positive int, got {value_rollouts!r}")
        self.value_policy = value_policy
        self.value_rollouts = value_rollouts
        #: the last ``score_action``'s 95% interval (Wilson) when it was an estimate
        self.last_score_interval: tuple[float, float] | None = None
        self.source: Any = None
        self._spare: Any = None
        #: True while a restore replays on the spare source: a subclass whose steps give
        #: a ``digest`` of the source's raw result may skip building the text then
        self._replaying = False
        self._seed = 0
        self._actions: list[str] = []
        self._digests: list[str] = []
        self._key = ""

    # ------------------------------------------------------------ what a subclass gives
    def _make_source(self) -> Any:
        """A new source env (the live one, and a spare that replays run on)."""
        raise NotImplementedError

    def _source_reset(self, source: Any, task_id: str, seed: int) -> tuple[str, str]:
        """Reset ``source`` for ``task_id`` with ``seed``: (first observation, state key)."""
        raise NotImplementedError

    def _source_step(self, source: Any, action: str) -> tuple[SourceStep, str]:
        """Apply ``action`` to ``source``: (what it did, state key after it)."""
        raise NotImplementedError

    def _close_source(self, source: Any) -> None:
        """Release a source (its ``close()`` by default)."""
        close = getattr(source, "close", None)
        if close is not None:
            close()

    def close(self) -> None:
        for source in (self.source, self._spare):
            if source is not None:
                self._close_source(source)
        self.source = self._spare = None
        super().close()

    @property
    def source_name(self) -> str:
        """The source's name, for messages."""
        return type(self).__name__

    # ------------------------------------------------------------ the text env
    def _load_task(self, task_id: str, options: Mapping[str, Any]) -> str:
        seed = int(self.np_random.integers(SEED_BOUND))
        if self.source is None:
            self.source = self._make_source()
        observation, key = self._source_reset(self.source, task_id, seed)
        self._seed, self._actions, self._digests, self._key = seed, [], [], key
        self._digests.append(_digest("reset", observation))
        return observation

    def _apply(self, action: str) -> Transition:
        done, key = self._source_step(self.source, action)
        if done.action_valid:
            self._actions.append(action)
            self._digests.append(
                done.digest or _digest(done.observation, float(done.reward), bool(done.terminated))
            )
            self._key = key
        return Transition(
            observation=done.observation,
            reward=float(done.reward),
            terminated=bool(done.terminated),
            success=done.success,
            score=done.score,
            action_valid=done.action_valid,
            info=done.info,
        )

    def _get_state(self) -> dict[str, Any]:
        return {
            "seed": self._seed,
            "actions": tuple(self._actions),
            "digests": tuple(self._digests),
        }

    def _check_state(self, state: Any, base: Mapping[str, Any]) -> None:
        if not isinstance(state, dict) or set(state) != {"seed", "actions", "digests"}:
            raise ValueError("a replay state is a dict with seed, actions and digests")
        seed = state["seed"]
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < SEED_BOUND:
            raise ValueError(f"seed must be an int in [0, {SEED_BOUND}), got {seed!r}")
        actions, digests = state["actions"], state["digests"]
        if not isinstance(actions, tuple) or not all(isinstance(a, str) for a in actions):
            raise ValueError("actions must be a tuple of str")
        if not isinstance(digests, tuple) or not all(isinstance(d, str) for d in digests):
            raise ValueError("digests must be a tuple of str")
        if len(digests) != len(actions) + 1:
            raise ValueError("there must be one digest for the reset and one per action")
        if len(actions) > base["turn"]:
            raise ValueError(f"{len(actions)} actions recorded in {base['turn']} turns")

    def _set_state(self, state: dict[str, Any]) -> None:
        seed, actions, digests = state["seed"], state["actions"], state["digests"]
        if self._spare is None:
            self._spare = self._make_source()
        spare = self._spare
        observation, key = self._source_reset(spare, str(self._task_id), seed)
        if _digest("reset", observation) != digests[0]:
            raise self._not_replayable("the first observation after the seeded reset")
        self._replaying = True
        try:
            for i, action in enumerate(actions):
                done, key = self._source_step(spare, action)
                got = done.digest or _digest(
                    done.observation, float(done.reward), bool(done.terminated)
                )
                if not done.action_valid or got != digests[i + 1]:
                    raise self._not_replayable(f"the result of action {i + 1} of {len(actions)}")
        finally:
            self._replaying = False
        # the replay matched: the spare becomes the live source
        self.source, self._spare = spare, self.source
        self._seed, self._actions, self._digests, self._key = (
            seed,
            list(actions),
            list(digests),
            key,
        )

    def check_replayable(
        self, task_id: str | None = None, *, seed: int = 0, steps: int = 8
    ) -> None:
        """Raise ``SnapshotError`` (saying where) unless a short episode replays exactly:
        ``steps`` random legal actions from a seeded reset, then a restore of the record
        on a fresh env of the same arguments (in another process the same holds: nothing
        of the record is process-bound). The analyses that branch call this first, so a
        source that cannot be replayed is refused before any work, with the reason."""
        probe = self._sibling()
        other = self._sibling()
        try:
            options = {"task_id": task_id} if task_id is not None else None
            probe.reset(seed=seed, options=options)
            rng = np.random.default_rng(seed)
            for _ in range(steps):
                if probe.done:
                    break
                probe.step(probe.random_action(rng))
            other.restore(probe.snapshot())
            if other.state_key() != probe.state_key():
                raise self._not_replayable("the state after the replay")
        finally:
            probe.close()
            other.close()

    # ------------------------------------------------------------ action quality
    def score_action(self, action: str) -> float:
        """The action's quality from the current state, without advancing.

        Without ``value_policy``: the base's (the ``score`` after the action). With it
        (a scripted policy spec, e.g. ``foreign/random``): a Monte-Carlo estimate of the
        chance of success when the action is taken and ``value_policy`` plays on to the
        end of the episode's budget, over ``value_rollouts`` rollouts, each from a replay
        of the state after the action. The rollouts' randomness is seeded by the state
        and the action, so the same question gets the same answer. An estimate, not an
        oracle: its 95% interval (Wilson) is kept in ``last_score_interval``.
        """
        self.last_score_interval = None
        if self.value_policy is None:
            return super().score_action(action)
        from agentenvs.policy.base import Conversation
        from agentenvs.policy.registry import make_policy

        policy = make_policy(self.value_policy)
        snap = self.snapshot()
        seed = int(_digest("value", self.state_key(), self._turn, action)[:8], 16)
        rng = np.random.default_rng(seed)
        try:
            obs, _, terminated, truncated, info = self.step(action)
            if terminated or truncated:
                wins, n = int(bool(info.get("success"))), 1
            else:
                after = self.snapshot()
                wins, n = 0, self.value_rollouts
                for i in range(n):
                    if i:
                        self.restore(after)
                    conversation = Conversation.start(obs, info, env=self)
                    done = False
                    while not done:
                        move = policy.act(conversation, rng)
                        conversation.messages.append({"role": "assistant", "content": move})
                        o, _, terminated, truncated, end = self.step(move)
                        conversation.messages.append({"role": "user", "content": o})
                        done = terminated or truncated
                    wins += bool(end.get("success"))
        finally:
            self.restore(snap)
        self.last_score_interval = wilson_interval(wins, n)
        return wins / n

    def _not_replayable(self, where: str) -> SnapshotError:
        return SnapshotError(
            f"{self.source_name} is not replayable: {where} differs from the recorded one "
            "(its seeded reset and steps are not deterministic), so it cannot be restored, "
            "forked or branched from"
        )

    def _state_key(self) -> str:
        return self._key


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a success rate (95% by default)."""
    if n <= 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def seed_task_ids(n_tasks: int) -> list[str]:
    """The ids ``"0"`` .. ``str(n_tasks - 1)`` of an adapter whose task ``i`` is its source
    reset with ``seed=i``; ``n_tasks`` checked."""
    if isinstance(n_tasks, bool) or not isinstance(n_tasks, int) or not 1 <= n_tasks <= SEED_BOUND:
        raise ValueError(f"n_tasks must be an int in [1, {SEED_BOUND}], got {n_tasks!r:.80}")
    return [str(i) for i in range(n_tasks)]


def known_seed_task(task_id: object) -> tuple[str, ...]:
    """``(task_id,)`` when it names a seed task (a canonical decimal below ``SEED_BOUND``:
    any such id is accepted, listed or not), else ``()``."""
    ok = isinstance(task_id, str) and task_id.isascii() and task_id.isdigit()
    if ok and int(task_id) < SEED_BOUND and str(int(task_id)) == task_id:
        return (task_id,)
    return ()
