"""Any Gymnasium env with discrete actions as a text env of the suite (replay restore)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from agentenvs.core.env import short_repr
from agentenvs.envs.foreign.replay import (
    ReplayTextEnv,
    SourceStep,
    _digest,
    known_seed_task,
    seed_task_ids,
)

#: the move names of Gymnasium's toy-text envs, by the id's name (before the version)
ACTION_NAMES: dict[str, tuple[str, ...]] = {
    "FrozenLake": ("Left", "Down", "Right", "Up"),
    "FrozenLake8x8": ("Left", "Down", "Right", "Up"),
    "Taxi": ("South", "North", "East", "West", "Pickup", "Dropoff"),
    "CliffWalking": ("Up", "Right", "Down", "Left"),
    "Blackjack": ("Stick", "Hit"),
}
#: which ends count as solved, by the id's name: "positive" (ended with a reward above 0,
#: the default) or "terminated" (any end the source calls terminal: Taxi ends only on a
#: right drop-off, CliffWalking only at the goal)
SUCCESS_RULES: dict[str, str] = {"Taxi": "terminated", "CliffWalking": "terminated"}

_SGR = re.compile(r"\x1b\[([0-9;]*)m(.*?)\x1b\[0m", re.S)
_ANY_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_COLORS = {0: "gray", 1: "red", 2: "green", 3: "yellow", 4: "blue", 5: "magenta", 6: "cyan"}
_COLORS.update({7: "white", 8: "crimson"})
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S | re.I)


def plain_text(text: str) -> str:
    """``text`` with terminal colours made words: a span Gymnasium colours
    (``utils.colorize``) becomes ``<red>x</red>``, a highlighted one ``<on-red>x</on-red>``,
    so nothing the colour said is lost; any other escape is dropped."""

    def tag(m: re.Match[str]) -> str:
        codes = [int(c) for c in m.group(1).split(";") if c.isdigit()]
        names = [
            ("on-" if c >= 40 else "") + _COLORS[c % 10]
            for c in codes
            if 30 <= c <= 38 or 40 <= c <= 48
        ]
        if not names:
            return m.group(2)
        return f"<{names[0]}>{m.group(2)}</{names[0]}>"

    return _ANY_ESCAPE.sub("", _SGR.sub(tag, text))


class GymnasiumTextEnv(ReplayTextEnv):
    """A Gymnasium env with a ``Discrete`` action space, played in text.

    Built from any registered Gymnasium id (``env_id``, with ``env_kwargs`` for its
    ``gym.make``). The observation is the source's ``ansi`` rendering where it has one
    (colours as ``<red>x</red>`` tags, :func:`plain_text`), else the ``repr`` of its
    observation, then the reward of the last action and, at the end, that the episode is
    over. An action names one move: its number (``start`` to ``start + n - 1``) or, for
    the toy-text envs, its name (:data:`ACTION_NAMES`, any case), alone or inside
    ``<answer>...</answer>``; anything else is an invalid action that costs the turn and
    says the format.

    Tasks: ``n_tasks`` ids ``"0"``, ``"1"``, ... (any decimal id below 2**31 is accepted):
    task ``i`` is the source reset with ``seed=i`` (its start: Taxi's positions, a
    Blackjack deal). Within a task, the source's randomness in steps (FrozenLake's slips)
    is drawn from a seed of the episode's own (``ReplayTextEnv``), so samples of one task
    differ and equal ``reset(seed=...)`` calls give equal episodes.

    Ends: the source's ``terminated`` ends the episode; its own time limit (a
    ``TimeLimit`` truncation) ends it too, said in the observation; the suite's turn
    budget truncates as in every env. ``success``: the end counts as solved by
    :data:`SUCCESS_RULES` (default: terminated with a reward above 0); ``score`` is 1.0
    for a solved episode, else 0.0. ``reward`` is the source's own.

    ``state_key`` is the source's observation (the state of these MDPs); ``snapshot`` /
    ``restore`` / ``fork`` replay the episode (``ReplayTextEnv``). ``error_action`` is a
    move drawn at random: without an oracle the env cannot tell a mistake from a good
    move, so it has no ``score_action``.
    """

    default_max_turns: ClassVar[int] = 20

    @classmethod
    def calls_wait(cls, **kwargs: Any) -> bool:
        return False  # the toy-text sources are in-process arithmetic

    def __init__(
        self,
        *,
        env_id: str = "FrozenLake-v1",
        env_kwargs: Mapping[str, Any] | None = None,
        n_tasks: int = 100,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        task_list = seed_task_ids(n_tasks)
        self.env_id = str(env_id)
        self.env_kwargs = dict(env_kwargs or {})
        try:
            spec = gym.spec(self.env_id)
            modes = spec_render_modes(self.env_id)
        except (gym.error.Error, ImportError, AttributeError) as exc:
            raise ValueError(f"env_id {self.env_id!r}: not a Gymnasium env here ({exc})") from None
        make_kwargs = dict(self.env_kwargs)
        self._ansi = "ansi" in modes and "render_mode" not in make_kwargs
        if self._ansi:
            make_kwargs["render_mode"] = "ansi"
        self._make_kwargs = make_kwargs
        self.source = self._make_source()
        space = self.source.action_space
        if not isinstance(space, gym.spaces.Discrete):
            self.source.close()
            raise ValueError(
                f"{self.env_id} has a {type(space).__name__} action space; a text env needs "
                "a Discrete one (each move a number or a name)"
            )
        self._start, self._n = int(space.start), int(space.n)
        name = spec.name
        names = ACTION_NAMES.get(name)
        self.action_names: tuple[str, ...] | None = (
            names if names is not None and len(names) == self._n else None
        )
        self._rule = SUCCESS_RULES.get(name, "positive")
        self._n_tasks = n_tasks
        self._task_list = task_list

    @property
    def source_name(self) -> str:
        return self.env_id

    @property
    def task_ids(self) -> Sequence[str]:
        return self._task_list

    def _known_task(self, task_id: Any) -> Sequence[str]:
        return known_seed_task(task_id)

    # ------------------------------------------------------------ the source
    def _make_source(self) -> Any:
        return gym.make(self.env_id, **self._make_kwargs)

    def _text(self, source: Any, observation: Any) -> str:
        if self._ansi:
            rendered = source.render()
            if isinstance(rendered, str):
                return plain_text(rendered).strip("\n")
        return f"Observation: {observation!r}"

    def _source_reset(self, source: Any, task_id: str, seed: int) -> tuple[str, str]:
        observation, _ = source.reset(seed=int(task_id))
        # the task fixed the start; the episode's own seed draws what happens next
        source.unwrapped.np_random = np.random.Generator(np.random.PCG64(seed))
        text = f"{self._text(source, observation)}\n{self.action_format()}"
        return text, _digest(observation, False)

    def _source_step(self, source: Any, action: str) -> tuple[SourceStep, str]:
        move = self.parse_action(action)
        if isinstance(move, str):
            return SourceStep(observation=move, action_valid=False), self._key
        observation, reward, terminated, truncated, _ = source.step(move)
        reward = float(reward)
        ended = bool(terminated or truncated)
        # what a replay must reproduce: the source's raw result (its text follows from it)
        digest = _digest("step", observation, reward, bool(terminated), bool(truncated))
        if self._replaying:  # only the digest is read: no rendering
            return SourceStep("", reward, ended, digest=digest), _digest(observation, ended)
        lines = [self._text(source, observation), f"Reward: {reward:g}"]
        if truncated and not terminated:
            lines.append("The episode is over: the env's own time limit ended it.")
        elif terminated:
            lines.append("The episode is over.")
        solved = bool(terminated) and (self._rule == "terminated" or reward > 0)
        done = SourceStep(
            observation="\n".join(lines),
            reward=reward,
            terminated=ended,
            success=solved if ended else None,
            score=(1.0 if solved else 0.0) if ended else None,
            digest=digest,
        )
        return done, _digest(observation, ended)

    # ------------------------------------------------------------ actions
    def action_format(self) -> str:
        first = self._start
        if self.action_names is not None:
            moves = ", ".join(f"{first + i} ({n})" for i, n in enumerate(self.action_names))
            example = self.action_names[0]
        else:
            moves = f"{first} to {first + self._n - 1}"
            example = str(first)
        return f"Answer with one move: {moves}, e.g. <answer>{example}</answer>."

    def parse_action(self, text: str) -> int | str:
        """The move ``text`` names, or a message saying why it names none."""
        found = _ANSWER.findall(text)
        word = (found[-1] if found else text).strip().strip(".!`'\"").strip()
        if self.action_names is not None:
            for i, name in enumerate(self.action_names):
                if word.lower() == name.lower():
                    return self._start + i
        try:
            move = int(word)
        except ValueError:
            move = None
        if move is not None and self._start <= move < self._start + self._n:
            return move
        return f"Invalid action: {short_repr(word, 40)} names no move. {self.action_format()}"

    def error_action(self, rng: np.random.Generator) -> str:
        i = int(rng.integers(self._n))
        name = self.action_names[i] if self.action_names is not None else str(self._start + i)
        return f"<answer>{name}</answer>"

    def _extra_info(self) -> dict[str, Any]:
        return {"source": self.env_id}


def spec_render_modes(env_id: str) -> list[str]:
    """The render modes an id's env class declares (without making one)."""
    spec = gym.spec(env_id)
    entry = spec.entry_point
    if callable(entry):
        cls = entry
    else:
        module, _, attr = str(entry).partition(":")
        cls = getattr(__import__(module, fromlist=[attr]), attr)
    return list(getattr(cls, "metadata", {}).get("render_modes", []))
