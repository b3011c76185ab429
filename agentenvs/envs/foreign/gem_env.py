"""GEM's envs as text envs of the suite (replay restore).

GEM (the ``gem-llm`` package, import name ``gem``) is a suite of text envs for LLM agents:
games (GuessTheNumber, Mastermind, Minesweeper, Wordle, Sudoku, TowerofHanoi, ...),
math, code and QA, each a ``gem.Env`` made by ``gem.make(env_id)`` whose ``reset(seed)``
returns the instructions and whose ``step(text)`` returns ``(observation, reward,
terminated, truncated, info)``. Answers go inside ``\\boxed{...}``.

GEM's envs draw from Python's global ``random``, which their reset seeds (with numpy's
legacy global generator). Every call into a source runs with ``random``'s state swapped
for the source's own (under a lock; numpy's too around make and reset), so the live
source and the spare a replay runs on never draw from each other's stream, and a GEM
env moves neither generator for the rest of the process.

gem-llm pins ``reasoning-gym==0.1.23`` (and ``nltk==3.9.1``) while the ``ecosystem``
extra pins ``reasoning-gym==0.1.25``, so it is not in that extra; its game envs import
and run with the extra's versions (``pip install --no-deps gem-llm``).
"""

from __future__ import annotations

import contextlib
import io
import random
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from agentenvs.envs.foreign.replay import (
    SEED_BOUND,
    ReplayTextEnv,
    SourceStep,
    _digest,
    known_seed_task,
    seed_task_ids,
)

INSTALL_HINT = "pip install --no-deps gem-llm (with the 'ecosystem' extra's reasoning-gym)"
#: the reward GEM's games give for a solved episode (``LanguageGameReward.success_reward``)
SUCCESS_REWARD = 1.0

_LOCK = threading.RLock()
_BOXED = re.compile(r"\\boxed\{[^{}]*\}")
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S | re.I)


def _import_gem() -> Any:
    try:
        import gem
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise ImportError(f"GEMTextEnv needs GEM: {INSTALL_HINT}") from exc
    return gem


@contextlib.contextmanager
def _generators(state: list[Any], numpy: bool = True) -> Iterator[None]:
    """Python's ``random`` (and with ``numpy``, numpy's global generator) hold ``state``
    (a pair) while the block runs, and keep what it drew there; what the env prints is
    dropped. Steps leave numpy's out: GEM seeds it in reset, but none of its envs draws
    from it (gem-llm 0.1.0), and its state costs 0.14 ms a swap (a step that did draw
    from it would not replay, and be refused as such)."""
    with _LOCK:
        outside = (random.getstate(), np.random.get_state() if numpy else None)
        random.setstate(state[0])
        if numpy:
            np.random.set_state(state[1])
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                yield
        finally:
            state[0] = random.getstate()
            random.setstate(outside[0])
            if numpy:
                state[1] = np.random.get_state()
                np.random.set_state(outside[1])


def _fresh_state(seed: int) -> list[Any]:
    return [random.Random(seed).getstate(), np.random.RandomState(seed).get_state()]


class _Source:
    """A GEM env and the state of the global generators it draws from."""

    def __init__(self, env_id: str, env_kwargs: Mapping[str, Any]) -> None:
        gem = _import_gem()
        self.state = _fresh_state(0)
        with _generators(self.state):  # some envs reset (and draw) when made
            self.env = gem.make(env_id, **env_kwargs)

    def reset(self, task: int, seed: int) -> tuple[str, dict[str, Any]]:
        with _generators(self.state):
            observation, info = self.env.reset(seed=task)
        # the task fixed the start; the episode's own seed draws what happens next
        self.state = _fresh_state(seed)
        return str(observation), dict(info or {})

    def step(self, action: str) -> tuple[Any, ...]:
        with _generators(self.state, numpy=False):
            return tuple(self.env.step(action))

    def sample(self, seed: int) -> str | None:
        """GEM's own random action, drawn from ``seed`` (the source's stream untouched)."""
        state = _fresh_state(seed)
        try:
            with _generators(state):
                return str(self.env.sample_random_action())
        except NotImplementedError:
            return None

    def close(self) -> None:
        close = getattr(self.env, "close", None)
        if close is not None:
            close()


class GEMTextEnv(ReplayTextEnv):
    """A GEM env, played in text.

    Description:
        ``env_id`` is a GEM id (``"game:GuessTheNumber-v0-easy"``,
        ``"game:Mastermind-v0-easy"``, ...; ``env_kwargs`` override its registered
        arguments), made by ``gem.make``.

    Action:
        The answer inside ``\\boxed{...}`` as GEM reads it, or inside
        ``<answer>...</answer>`` (made ``\\boxed{...}`` here). Text with neither is an
        invalid action that costs the turn and says the format: GEM itself ends the
        episode on a reply it cannot parse (reward -0.1), a rule the suite's contract does
        not allow (an invalid action must not end the episode). A boxed answer the game
        cannot read (``\\boxed{abc}`` for a number) reaches it and ends as GEM says.

    Observation:
        GEM's observation (the instructions at the start), its ``suffix`` (what to do
        next), and after each step the reward; at the end, that the episode is over.

    Tasks:
        ``n_tasks`` ids ``"0"``, ``"1"``, ...: task ``i`` is the env reset with ``seed=i``
        (the number to guess, the code, the board); the source's randomness after the
        reset is drawn from the episode's own seed.

    Ends and score:
        GEM's ``terminated`` or ``truncated`` (its own turn limit) ends the episode; the
        suite's budget truncates it too. ``success``: the episode ended with GEM's success
        reward (1.0); ``score``: the final reward clipped to [0, 1] (GEM's partial credit,
        e.g. GuessTheNumber's closeness when its turns run out). ``reward`` is GEM's.
    """

    default_max_turns: ClassVar[int] = 20

    @classmethod
    def calls_wait(cls, **kwargs: Any) -> bool:
        return not str(kwargs.get("env_id", "game:")).startswith("game:")

    def __init__(
        self,
        *,
        env_id: str = "game:GuessTheNumber-v0-easy",
        env_kwargs: Mapping[str, Any] | None = None,
        n_tasks: int = 100,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        task_list = seed_task_ids(n_tasks)
        gem = _import_gem()
        from gem.envs.registration import ENV_REGISTRY

        self.env_id = str(env_id)
        if self.env_id not in ENV_REGISTRY:
            raise ValueError(f"env_id {self.env_id!r} is not a GEM env ({gem.__name__}.make)")
        self.env_kwargs = dict(env_kwargs or {})
        self._task_list = task_list
        self.source = self._make_source()

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
        return _Source(self.env_id, self.env_kwargs)

    def _source_reset(self, source: Any, task_id: str, seed: int) -> tuple[str, str]:
        observation, info = source.reset(int(task_id), seed)
        text = "\n".join(
            part for part in (observation.strip(), str(info.get("suffix", "")).strip()) if part
        )
        return f"{text}\n{self.action_format()}", _digest(observation, False)

    def _source_step(self, source: Any, action: str) -> tuple[SourceStep, str]:
        move = self.parse_action(action)
        if move is None:
            message = f"Invalid action: no \\boxed{{...}} answer. {self.action_format()}"
            return SourceStep(observation=message, action_valid=False), self._key
        observation, reward, terminated, truncated, info = source.step(move)
        reward = float(reward)
        ended = bool(terminated or truncated)
        lines = [str(observation).strip()]
        if not ended and isinstance(info, Mapping) and info.get("suffix"):
            lines.append(str(info["suffix"]).strip())
        lines.append(f"Reward: {reward:g}")
        if ended:
            lines.append("The episode is over.")
        step = SourceStep(
            observation="\n".join(lines),
            reward=reward,
            terminated=ended,
            success=(reward >= SUCCESS_REWARD) if ended else None,
            score=min(max(reward, 0.0), 1.0) if ended else None,
        )
        return step, _digest(observation, ended)

    # ------------------------------------------------------------ actions
    def action_format(self) -> str:
        return "Answer inside \\boxed{...}, e.g. \\boxed{3}, or <answer>3</answer>."

    def parse_action(self, text: str) -> str | None:
        """The text GEM reads (with its ``\\boxed{...}``), or None when it has none."""
        if _BOXED.search(text):
            return text
        found = _ANSWER.findall(text)
        if found:
            inner = found[-1].strip()
            return inner if _BOXED.search(inner) else f"\\boxed{{{inner}}}"
        return None

    def random_action(self, rng: np.random.Generator) -> str:
        """GEM's own random action (``sample_random_action``), drawn from ``rng``."""
        sampled = self.source.sample(int(rng.integers(SEED_BOUND)))
        return sampled if sampled is not None else self.error_action(rng)

    def error_action(self, rng: np.random.Generator) -> str:
        return f"\\boxed{{{int(rng.integers(10))}}}"

    def _extra_info(self) -> dict[str, Any]:
        return {"source": self.env_id}
