"""The base text env: turn budget, info keys, snapshot plumbing and bad-input handling.

A benchmark env subclasses ``TextEnv`` and implements only what differs: how a task is
loaded (``_load_task``), what an action does (``_apply``), its own state for snapshots
(``_get_state``/``_set_state``), its ``state_key`` and its ``error_action``.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from agentenvs.core import info as keys
from agentenvs.core.errors import Fault, SnapshotError, UnknownTaskError
from agentenvs.core.fork import copy_rng, copy_space
from agentenvs.core.rng import BIT_GENERATORS, rng_from_state, seeded_rng
from agentenvs.core.snapshot import Snapshot
from agentenvs.core.spaces import FreeText


def check_options(options: Any) -> None:
    """``reset``'s ``options`` must be a mapping or None: anything else is a TypeError
    that names the argument (not an AttributeError from deep inside an env)."""
    if options is not None and not isinstance(options, Mapping):
        raise TypeError(
            f"reset(options=...) must be a dict (a mapping) or None, got "
            f"{type(options).__name__} {options!r:.80}"
        )


def _checking_options(reset: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(reset)
    def checked_reset(self: Any, *args: Any, **kwargs: Any) -> Any:
        check_options(kwargs.get("options"))
        return reset(self, *args, **kwargs)

    checked_reset._checks_options = True  # type: ignore[attr-defined]
    return checked_reset


DEFAULT_MAX_CHARS = 1 << 20
#: the largest turn budget any env accepts (info's turn counts must fit an int64)
MAX_BUDGET = 2**63 - 1
_BASE_FIELDS = frozenset(
    {"task_id", "turn", "episode_max_turns", "done", "success", "score", "last_obs", "rng"}
)


def short_repr(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters (values in messages may be huge)."""
    try:
        text = repr(value)
    except Exception:  # a repr that raises (or recurses) still gets named
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _describe(exc: BaseException) -> str:
    text = str(exc)
    text = text if len(text) <= 300 else f"{text[:297]}..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@dataclass
class Transition:
    """What one action did, as a benchmark env reports it to the base env.

    ``success`` and ``score`` are the values *after* the action; ``None`` keeps the
    previous values (an invalid action changes nothing).
    """

    observation: str
    reward: float = 0.0
    terminated: bool = False
    action_valid: bool = True
    success: bool | None = None
    score: float | None = None
    info: dict[str, Any] = field(default_factory=dict)


#: ``state_key`` memo (raw key -> hash): small envs revisit the same states all the time
_STATE_KEYS: dict[str, str] = {}
_STATE_KEYS_MAX = 1 << 14


class TextEnv(gym.Env[str, str]):
    """Base of every agentenvs env: a ``gymnasium.Env[str, str]`` with a turn budget.

    Arguments common to every env:
        max_turns: the turn budget (an episode is truncated after this many steps); a
            single episode can override it with ``reset(options={"max_turns": T})``.
        show_budget: append "N turns left" to every observation.
        render_mode: ``"ansi"`` (``render()`` returns the last observation) or ``"human"``.
        max_action_chars: longer actions are rejected as invalid (the turn is spent).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "human"], "render_fps": 1}
    #: bump when the layout of ``_get_state()`` changes, so stale snapshots are refused
    snapshot_version: ClassVar[int] = 1
    default_max_turns: ClassVar[int] = 10

    #: option names a subclass accepts in ``reset(options=...)`` besides task_id/max_turns
    extra_options: ClassVar[frozenset[str]] = frozenset()
    #: read the env's state (``_get_state``) before a restore, to put it back if
    #: ``_set_state`` fails half-way; envs whose ``_set_state`` cannot fail after
    #: ``_check_state`` passed (or whose state is costly to read) set this False
    restore_rollback: ClassVar[bool] = True
    #: info keys whose values the agent must not see (a pass rate over hidden tests):
    #: the agent-facing servers (MCP, ORS) never send them; trainers read them in process
    hidden_info_keys: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # a subclass that overrides reset (to catch its faults, to read an option first)
        # still gets the options check before its own code reads them
        super().__init_subclass__(**kwargs)
        reset = cls.__dict__.get("reset")
        if reset is not None and not getattr(reset, "_checks_options", False):
            cls.reset = _checking_options(reset)  # type: ignore[method-assign]

    @classmethod
    def calls_wait(cls, **kwargs: Any) -> bool:
        """Whether a call of an env built with ``kwargs`` may take long: wait on a sandbox,
        a shell or a server, or run a statement up to a time limit of seconds. The async
        face runs an env whose calls are all short computations on the event loop's thread
        (``agentenvs.core.aio``); by default an env is assumed to take long."""
        return True

    def __new__(cls, *args: Any, **kwargs: Any) -> TextEnv:
        # the constructor's arguments, so a fork can build siblings (``_sibling``)
        self = super().__new__(cls)
        self._init_args = (args, dict(kwargs))
        return self

    def __init__(
        self,
        *,
        max_turns: int | None = None,
        show_budget: bool = False,
        render_mode: str | None = None,
        max_action_chars: int = DEFAULT_MAX_CHARS,
        max_observation_chars: int = DEFAULT_MAX_CHARS,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}"
            )
        self.max_turns = self._check_budget(
            self.default_max_turns if max_turns is None else max_turns
        )
        self.show_budget = bool(show_budget)
        self.render_mode = render_mode
        self.max_action_chars = int(max_action_chars)
        self.action_space = FreeText(self.max_action_chars)
        self.observation_space = FreeText(max_observation_chars)
        self._task_id: str | None = None
        self._turn = 0
        self._episode_max_turns = self.max_turns
        self._done = False
        self._success = False
        self._score = 0.0
        self._last_obs = ""

    # ---------------------------------------------------------------- subclass hooks
    @property
    def task_ids(self) -> Sequence[str]:
        """Every task id this env can load."""
        raise NotImplementedError

    def _load_task(self, task_id: str, options: Mapping[str, Any]) -> str:
        """Set up ``task_id`` (drawing from ``self.np_random``) and return the first observation."""
        raise NotImplementedError

    def _apply(self, action: str) -> Transition:
        """Carry out one action (already a ``str`` within the length limit)."""
        raise NotImplementedError

    def _get_state(self) -> Any:
        """The benchmark's own state, picklable and self-contained."""
        raise NotImplementedError

    def _set_state(self, state: Any) -> None:
        """Load a state from ``_get_state`` (the base fields, task id included, are set).

        Validate first (``_check_state`` runs before), then change the env: if this
        raises, the base puts the env back (see ``restore_rollback``).
        """
        raise NotImplementedError

    def _check_state(self, state: Any, base: Mapping[str, Any]) -> None:
        """Raise (any exception) if ``state`` is not a valid state for the snapshot's base
        fields ``base`` (``task_id``, ``turn``, ``episode_max_turns``..., already checked);
        change nothing. Called by ``restore`` before anything is changed, so a malformed
        snapshot is refused without touching the env.
        """

    def _check_reset(self, task_id: str, max_turns: int, options: Mapping[str, Any]) -> None:
        """Raise if this episode cannot be played as asked (e.g. a budget the env cannot
        honour, a bad value of an extra option); change nothing. Called by ``reset`` before
        anything is changed. ``_load_task`` too must validate before it changes the env.
        """

    def _state_key(self) -> str:
        """A string equal for equal underlying states (no turn count, no history)."""
        raise NotImplementedError

    def error_action(self, rng: np.random.Generator) -> str:
        """A plausible wrong action for the current state, drawn from ``rng``."""
        raise NotImplementedError

    def _extra_info(self) -> dict[str, Any]:
        """Benchmark-specific info keys, added to every info dict."""
        return {}

    def _reset_info(self) -> dict[str, Any]:
        """Keys only the reset info carries (system prompt, tools)."""
        return {}

    # ---------------------------------------------------------------- gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode. Everything is validated first: a reset that raises leaves the
        env exactly as it was (the live episode, its turn, budget and RNG)."""
        check_options(options)
        options = dict(options or {})
        unknown = set(options) - {"task_id", "max_turns"} - self.extra_options
        if unknown:
            allowed = sorted({"task_id", "max_turns"} | self.extra_options)
            raise ValueError(
                f"unknown reset option(s) {sorted(map(repr, unknown))}; allowed: {allowed}"
            )
        budget = self._check_budget(options.get("max_turns", self.max_turns))
        task_id = options.get("task_id")
        if task_id is not None:
            self._check_task_id(task_id)
        # a seed puts a new generator in place: the old one is left as it is, only its
        # object is kept to put back (reading its state costs more than the rest)
        saved = self._save_base(rng_state=seed is None)
        try:
            if seed is not None:  # Gymnasium's seeding (``super().reset``), built for less
                self._np_random, self._np_random_seed = seeded_rng(seed)
            if task_id is None:
                ids = self.task_ids
                task_id = ids[int(self.np_random.integers(len(ids)))]
            task_id = str(task_id)
            self._check_reset(task_id, budget, options)
            self._task_id = task_id
            self._episode_max_turns = budget
            self._turn = 0
            self._done = False
            self._success = False
            self._score = 0.0
            observation = self._load_task(task_id, options)
        except BaseException:
            self._restore_base(saved)
            raise
        observation = self._finish_observation(observation)
        info = self._info(action_valid=True)
        info.update(self._reset_info())
        return observation, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._task_id is None or self._done:
            raise gym.error.ResetNeeded(
                "the episode is over (or never started): call reset() before step()"
            )
        self._turn += 1
        text, problem = self._coerce_action(action)
        if problem is not None:
            transition = self._refused(problem)
        else:
            transition = self._apply(text)
        if transition.success is not None:
            self._success = bool(transition.success)
        if transition.score is not None:
            self._score = float(transition.score)
        terminated = bool(transition.terminated)
        truncated = not terminated and self._turn >= self._episode_max_turns
        self._done = terminated or truncated
        observation = self._finish_observation(transition.observation)
        info = self._info(action_valid=transition.action_valid)
        if transition.info:
            info.update(transition.info)
        return observation, float(transition.reward), terminated, truncated, info

    def _refused(self, problem: str) -> Transition:
        """The turn of an action refused before it reached ``_apply`` (not a str, too long):
        ``problem`` says why. An env whose infos carry per-step keys adds them here."""
        return Transition(observation=problem, action_valid=False)

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self._last_obs
        if self.render_mode == "human":
            print(self._last_obs)
        return None

    # ---------------------------------------------------------------- contract extras
    @property
    def task_id(self) -> str | None:
        return self._task_id

    @property
    def turn(self) -> int:
        return self._turn

    @property
    def turns_left(self) -> int:
        return max(self._episode_max_turns - self._turn, 0)

    @property
    def episode_max_turns(self) -> int:
        return self._episode_max_turns

    @property
    def done(self) -> bool:
        return self._done

    def state_key(self) -> str:
        """Short hash of (task, underlying state): equal states give equal keys."""
        raw = f"{self._task_id}\x00{self._state_key()}"
        key = _STATE_KEYS.get(raw)
        if key is None:
            key = hashlib.blake2b(raw.encode(), digest_size=8).hexdigest()
            if len(_STATE_KEYS) >= _STATE_KEYS_MAX:  # a bounded memo: states of big envs vary
                _STATE_KEYS.clear()
            _STATE_KEYS[raw] = key
        return key

    def snapshot(self) -> Snapshot:
        """Everything the agent can change, picklable, restorable into a fresh env."""
        if self._task_id is None:
            raise SnapshotError("nothing to snapshot: call reset() first")
        base = {
            "task_id": self._task_id,
            "turn": self._turn,
            "episode_max_turns": self._episode_max_turns,
            "done": self._done,
            "success": self._success,
            "score": self._score,
            "last_obs": self._last_obs,
            "rng": self.np_random.bit_generator.state,
        }
        return Snapshot(
            env_class=self._class_name(),
            version=self.snapshot_version,
            base=base,
            state=self._get_state(),
        )

    def restore(self, snapshot: Snapshot) -> None:
        """Put the env back exactly as it was when ``snapshot`` was taken.

        All or nothing: a snapshot that is not one of this env (class, version), is
        malformed or inconsistent, or that the env cannot load raises ``SnapshotError``,
        and the env is then exactly as it was before the call. A ``Fault`` (the
        infrastructure failed while loading it) is raised as it is.
        """
        base = self._checked_base(snapshot)
        try:
            self._check_state(snapshot.state, base)
        except SnapshotError:
            raise
        except Exception as exc:
            raise SnapshotError(f"the snapshot's env state is not valid: {_describe(exc)}") from exc
        saved = self._save_base()
        prior = self._rollback_state() if self.restore_rollback else None
        try:
            self._np_random = rng_from_state(base["rng"], self._np_random)
            self._task_id = base["task_id"]
            self._turn = base["turn"]
            self._episode_max_turns = base["episode_max_turns"]
            self._done = base["done"]
            self._success = base["success"]
            self._score = base["score"]
            self._last_obs = base["last_obs"]
            self._set_state(snapshot.state)
        except BaseException as exc:
            self._restore_base(saved)
            if prior is not None and self._task_id is not None:
                try:
                    self._set_state(prior)
                except Exception as again:
                    self._task_id = None  # neither state is whole: only a reset can follow
                    raise SnapshotError(
                        f"cannot restore the snapshot ({_describe(exc)}) nor put the env back "
                        f"({_describe(again)}): reset() it"
                    ) from exc
            # a Fault (the infrastructure failed, not the snapshot) stays one
            if isinstance(exc, SnapshotError | Fault) or not isinstance(exc, Exception):
                raise
            raise SnapshotError(f"cannot restore the snapshot: {_describe(exc)}") from exc

    # ---------------------------------------------------------------- forking
    def fork(self, k: int) -> list[TextEnv]:
        """``k`` envs at exactly this env's state, each independent (see ``core.fork``).

        Each child is as a fresh env of the same constructor arguments restored from
        ``snapshot()`` would be: the same turn, budget, RNG, task and the benchmark's
        state (attempts, database, files); stepping, restoring or closing one changes
        neither the others nor this env, which may be closed first. All or nothing: on
        an error every child made so far is closed, and this env is as it was.
        """
        from agentenvs.core.fork import check_fork_count

        k = check_fork_count(k)
        if self._task_id is None:
            raise SnapshotError("nothing to fork: call reset() first")
        return self._fork(k)

    def _fork(self, k: int) -> list[TextEnv]:
        """Make the ``k`` children of ``fork`` (the episode is live). The generic path:
        ``_fork_by_restore``; envs with a cheaper copy of their state override this."""
        return self._fork_by_restore(k)

    def _fork_by_restore(self, k: int, *, concurrency: int = 1) -> list[TextEnv]:
        """One snapshot, ``k`` envs built as this one was (``_sibling``), each restored
        from it; ``concurrency`` of them at once (for restores that wait on a sandbox)."""
        from agentenvs.core.fork import close_quietly, run_concurrently

        snap = self.snapshot()
        children: list[TextEnv] = []

        def make(_: int) -> TextEnv:
            child = self._sibling()
            children.append(child)  # list.append is atomic: closed on failure either way
            child.restore(snap)
            return child

        try:
            return run_concurrently(make, range(k), concurrency)
        except BaseException:
            close_quietly(children)
            raise

    def _sibling(self) -> TextEnv:
        """A new env of this class built with this env's constructor arguments (never
        reset), with this env's spec."""
        args, kwargs = self.__dict__.get("_init_args", ((), {}))
        child = type(self)(*args, **kwargs)
        child.spec = self.spec
        return child

    def _fork_by_copy(self, k: int) -> list[TextEnv]:
        """``k`` shallow copies, each with its own RNG, spaces and the benchmark's state
        (``_set_state(_get_state())``), after ``_detach`` dropped what a child must not
        share: for envs whose whole state lives in this process."""
        from agentenvs.core.fork import close_quietly

        children: list[TextEnv] = []
        try:
            for _ in range(k):
                child = self._shallow_child()
                child._detach()
                children.append(child)
                child._set_state(self._get_state())
        except BaseException:
            close_quietly(children)
            raise
        return children

    def _shallow_child(self) -> TextEnv:
        """A shallow copy of this env with its own RNG (in this env's state) and spaces;
        everything else is shared until the caller's ``_detach``."""
        # the instance dict copied as it is: ``copy.copy`` would go through __reduce_ex__
        child = object.__new__(type(self))
        child.__dict__.update(self.__dict__)
        child._np_random = copy_rng(self.np_random)
        child.action_space = copy_space(self.action_space)
        child.observation_space = copy_space(self.observation_space)
        return child

    def _detach(self) -> None:
        """Called on a fresh shallow copy made by ``_fork_by_copy``: replace every
        resource the copy shares with its parent but must own (a sandbox it would close,
        a database it would write), so that closing either leaves the other whole."""

    def held_resources(self) -> frozenset[str]:
        """Names of what this env holds outside the process right now (containers,
        databases, sandbox dirs): empty once closed, and never shared with a fork."""
        return frozenset()

    def score_action(self, action: str) -> float:
        """The quality of ``action`` from the current state, without advancing.

        By default: the ``score`` the env reports after the action, found by stepping a
        snapshot and restoring it. Envs with an oracle override this (FrozenLake: Q*).
        """
        snap = self.snapshot()
        try:
            _, _, _, _, info = self.step(action)
            return float(info[keys.SCORE])
        finally:
            self.restore(snap)

    # ---------------------------------------------------------------- atomicity
    def _save_base(self, *, rng_state: bool = True) -> tuple[Any, ...]:
        """The base's fields and RNG (its state too, unless ``rng_state`` is False: draws
        advance it in place)."""
        rng = self._np_random
        rng_saved = None if rng is None or not rng_state else rng.bit_generator.state
        return (
            rng,
            rng_saved,
            self._np_random_seed,
            self._task_id,
            self._turn,
            self._episode_max_turns,
            self._done,
            self._success,
            self._score,
            self._last_obs,
        )

    def _restore_base(self, saved: tuple[Any, ...]) -> None:
        (
            rng,
            rng_saved,
            self._np_random_seed,
            self._task_id,
            self._turn,
            self._episode_max_turns,
            self._done,
            self._success,
            self._score,
            self._last_obs,
        ) = saved
        if rng_saved is not None:
            rng.bit_generator.state = rng_saved
        self._np_random = rng

    def _rollback_state(self) -> Any:
        """The env's state to put back if a restore fails half-way (None: nothing to keep)."""
        if self._task_id is None:
            return None
        try:
            return self._get_state()
        except Exception:  # a state that cannot be read (e.g. a lost sandbox) is not kept
            return None

    def _check_task_id(self, task_id: Any) -> None:
        if not isinstance(task_id, str):
            raise UnknownTaskError(
                f"task_id must be a str, got {type(task_id).__name__} for {type(self).__name__}"
            )
        try:
            known = task_id in self._known_task(task_id)
        except Exception:  # an id the env cannot even look up is not one of its tasks
            known = False
        if not known:
            raise UnknownTaskError(f"unknown task_id {short_repr(task_id)} for {type(self).__name__}")

    def _checked_base(self, snapshot: Any) -> dict[str, Any]:
        """The snapshot's base fields, each checked; ``SnapshotError`` names the first bad one."""
        if not isinstance(snapshot, Snapshot):
            raise SnapshotError(f"expected a Snapshot, got {type(snapshot).__name__}")
        if snapshot.env_class != self._class_name():
            raise SnapshotError(
                f"snapshot of {short_repr(snapshot.env_class)} cannot be restored into "
                f"{self._class_name()}"
            )
        if snapshot.version != self.snapshot_version:
            raise SnapshotError(
                f"snapshot version {short_repr(snapshot.version)} != env's {self.snapshot_version}"
            )
        base = snapshot.base
        if not isinstance(base, dict) or set(base) != _BASE_FIELDS:
            found = sorted(map(str, base)) if isinstance(base, dict) else type(base).__name__
            raise SnapshotError(f"snapshot base must have the fields {sorted(_BASE_FIELDS)}, got {found}")

        def bad(field: str, why: str) -> SnapshotError:
            return SnapshotError(f"snapshot field {field!r} {why}, got {short_repr(base[field])}")

        try:
            self._check_task_id(base["task_id"])
        except UnknownTaskError as exc:
            raise SnapshotError(f"snapshot field 'task_id': {exc}") from None
        for name in ("turn", "episode_max_turns"):
            value = base[name]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise bad(name, "must be a non-negative int")
        try:
            self._check_budget(base["episode_max_turns"])
        except ValueError as exc:
            raise SnapshotError(f"snapshot field 'episode_max_turns': {exc}") from None
        if base["turn"] > base["episode_max_turns"]:
            raise bad("turn", f"must not exceed episode_max_turns={base['episode_max_turns']}")
        for name in ("done", "success"):
            if not isinstance(base[name], bool):
                raise bad(name, "must be a bool")
        score = base["score"]
        if isinstance(score, bool) or not isinstance(score, float | int) or not math.isfinite(score):
            raise bad("score", "must be a finite number")
        if not isinstance(base["last_obs"], str):
            raise bad("last_obs", "must be a str")
        if base["turn"] == base["episode_max_turns"] and not base["done"]:
            raise bad("done", "must be True when the budget is spent")
        rng = base["rng"]
        # the fields themselves are checked by the generator's setter, the first change
        # restore makes (and undoes on failure)
        if type(rng) is not dict or rng.get("bit_generator") not in BIT_GENERATORS:
            raise bad("rng", "must be the state of a numpy bit generator")
        return base

    # ---------------------------------------------------------------- helpers
    def _known_task(self, task_id: Any) -> Sequence[str] | set[str]:
        """Task ids to validate against; envs with generated tasks override this."""
        return self.task_ids

    def _class_name(self) -> str:
        # cached per class: snapshots are taken on hot paths (search, step scoring)
        cls = type(self)
        name = cls.__dict__.get("_snapshot_class_name")
        if name is None:
            name = f"{cls.__module__}.{cls.__qualname__}"
            cls._snapshot_class_name = name  # type: ignore[attr-defined]
        return name

    @staticmethod
    def _check_budget(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise ValueError(f"max_turns must be a positive integer, got {short_repr(value)}")
        if value > MAX_BUDGET:
            raise ValueError(
                f"max_turns must be at most {MAX_BUDGET} (turn counts go into int64 arrays), "
                f"got {short_repr(value)}"
            )
        return int(value)

    def _coerce_action(self, action: Any) -> tuple[str, str | None]:
        if type(action) is str and len(action) <= self.max_action_chars:  # the usual case
            return action, None
        if isinstance(action, bytes):
            action = action.decode("utf-8", errors="replace")
        if not isinstance(action, str):
            return "", (
                f"Invalid action: expected text, got {type(action).__name__}. "
                f"{self.action_format()}"
            )
        if len(action) > self.max_action_chars:
            return "", (
                f"Invalid action: {len(action)} characters is over the limit of "
                f"{self.max_action_chars}. {self.action_format()}"
            )
        return action, None

    def action_format(self) -> str:
        """One line telling the agent what a valid action looks like."""
        return ""

    def _finish_observation(self, observation: str) -> str:
        if self.show_budget and not self._done:
            left = self.turns_left
            observation = f"{observation}\n[{left} turn{'s' if left != 1 else ''} left]"
        self._last_obs = observation
        return observation

    def _info(self, *, action_valid: bool) -> dict[str, Any]:
        turn, budget = self._turn, self._episode_max_turns
        # one dict, the env's keys last (as ``update`` would put them)
        return {
            keys.TASK_ID: self._task_id,
            keys.TURN: turn,
            keys.MAX_TURNS: budget,
            keys.TURNS_LEFT: budget - turn if budget > turn else 0,
            keys.SUCCESS: self._success,
            keys.SCORE: self._score,
            keys.ACTION_VALID: bool(action_valid),
            keys.STATE_KEY: self.state_key(),
            **self._extra_info(),
        }
