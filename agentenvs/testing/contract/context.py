"""What every check is given: the env under test and the run's settings (``Context``),
what the env offers of the suite's interface beyond ``gymnasium.Env`` (``Capabilities``),
and small helpers the checks share."""

from __future__ import annotations

import contextlib
import pickle
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from agentenvs.core import info as keys
from agentenvs.core.env import TextEnv
from agentenvs.core.snapshot import take_snapshot
from agentenvs.testing._trajectory import EnvTarget, has_error_action, make_env

#: a str action that no env accepts and that must not end an episode
INVALID_ACTION = "\x00???"


@dataclass(frozen=True)
class FileProbe:
    """How the ``file_modes`` check reaches the files of an env that has them.

    ``options``: reset options (e.g. the task); ``setup``: actions that make files with
    unusual modes, an empty dir, a symlink, old mtimes; ``disturb``: actions that change
    them again; ``listing``: an action whose observation lists the files with their
    modes, types, link targets and mtimes (it may cost a turn; it must not change the
    files). Terminal-Bench's is ``agentenvs.envs.terminal`` tests' ``FILE_PROBE``.
    """

    options: Mapping[str, Any]
    setup: tuple[str, ...]
    disturb: tuple[str, ...]
    listing: str


# ---------------------------------------------------------------- capabilities
#: what each capability is, for a plain ``gymnasium.Env`` that lacks it
PLAIN_NEEDS: dict[str, str] = {
    "snapshot": "env.unwrapped.snapshot() and env.unwrapped.restore(snapshot)",
    "fork": "env.unwrapped.fork(k), k independent envs at the current state",
    "turn_state": "env.unwrapped.turn, env.unwrapped.done and env.unwrapped.state_key()",
    "error_action": "env.unwrapped.error_action(rng)",
    "score_action": "env.unwrapped.score_action(action)",
    "info_keys": "the info keys " + ", ".join(keys.STANDARD_KEYS) + " on reset and every step",
    "budget_option": "reset(options={'max_turns': T}) reported in info['max_turns']",
    "task_id_option": "reset(options={'task_id': ...}) reported in info['task_id']",
    "turn_rules": (
        "the suite's turn rules (every action, even one that is not a str, is a turn reported "
        "in info['action_valid']; step() after the end raises gymnasium.error.ResetNeeded)"
    ),
}

#: what a TextEnv subclass still writes itself to have the capability
_TEXTENV_NOTES = {
    "snapshot": "TextEnv builds snapshot() and restore() on the env's _get_state() and _set_state()",
    "score_action": "TextEnv's steps a snapshot",
    "fork": "TextEnv builds fork(k) on snapshot() and restore()",
    "error_action": "each env writes its own error_action(rng), TextEnv's subclasses too",
}

#: the info key whose presence says a plain env offers the capability itself
_INFO_EVIDENCE = {
    "info_keys": keys.STANDARD_KEYS,
    "budget_option": (keys.MAX_TURNS,),
    "task_id_option": (keys.TASK_ID,),
    "turn_rules": (keys.ACTION_VALID,),
}


def _overrides(inner: TextEnv, *names: str) -> bool:
    """Whether the env's class implements every one of TextEnv's hooks ``names``."""
    return all(getattr(type(inner), n) is not getattr(TextEnv, n) for n in names)


@dataclass(frozen=True)
class Capabilities:
    """What an env offers of the suite's interface. ``missing`` maps each capability it
    lacks to what would provide it; ``suite`` is True for subclasses of ``TextEnv``."""

    suite: bool = True
    env_class: str = ""
    missing: Mapping[str, str] = field(default_factory=dict)

    def has(self, name: str) -> bool:
        return name not in self.missing

    def lacking(self, names: tuple[str, ...]) -> tuple[str, ...]:
        """The capabilities of ``names`` the env lacks."""
        return tuple(n for n in names if n in self.missing)

    def needs(self, names: tuple[str, ...]) -> str:
        """What the env lacks of ``names`` and how to get it, in words ("" if nothing)."""
        lacking = self.lacking(names)
        if not lacking:
            return ""
        text = "needs " + "; ".join(self.missing[n] for n in lacking)
        if self.suite:  # the texts name the hooks to implement
            return text
        notes = [_TEXTENV_NOTES[n] for n in lacking if n in _TEXTENV_NOTES]
        if lacking == ("error_action",):
            return f"{text} ({notes[0]})"
        it = "it" if len(lacking) == 1 else "them"
        text += f"; subclass agentenvs.core.TextEnv to get {it}"
        return f"{text} ({'; '.join(notes)})" if notes else text

    @classmethod
    def of(cls, env: gym.Env, reset_info: Any) -> Capabilities:
        """The capabilities of ``env``; ``reset_info`` is its reset info (for a plain env,
        whose info keys say what it offers; None when the reset failed)."""
        inner = env.unwrapped
        name = type(inner).__name__
        missing: dict[str, str] = {}
        if isinstance(inner, TextEnv):
            # TextEnv owns the loop, the budget and the info keys; these hooks are the env's
            snapshot = _overrides(inner, "_get_state", "_set_state") or _overrides(
                inner, "snapshot", "restore"
            )
            if not snapshot:
                missing["snapshot"] = (
                    f"{name} to implement _get_state() and _set_state() (TextEnv builds "
                    "snapshot() and restore() on them)"
                )
            if not (snapshot or _overrides(inner, "_fork")):
                missing["fork"] = (
                    f"{name} to implement _get_state() and _set_state() (TextEnv's fork "
                    "restores a snapshot into new envs) or _fork(k)"
                )
            if not has_error_action(env):
                missing["error_action"] = f"{name} to implement error_action(rng)"
            if not (snapshot or _overrides(inner, "score_action")):
                missing["score_action"] = (
                    f"{name} to implement score_action(action), or _get_state() and "
                    "_set_state() for TextEnv's, which steps a snapshot"
                )
            return cls(suite=True, env_class=name, missing=missing)
        if not (callable(getattr(inner, "snapshot", None)) and callable(getattr(inner, "restore", None))):
            missing["snapshot"] = PLAIN_NEEDS["snapshot"]
        if not callable(getattr(inner, "fork", None)):
            missing["fork"] = PLAIN_NEEDS["fork"]
        if not (
            hasattr(inner, "turn") and hasattr(inner, "done") and callable(getattr(inner, "state_key", None))
        ):
            missing["turn_state"] = PLAIN_NEEDS["turn_state"]
        for method in ("error_action", "score_action"):
            if not callable(getattr(inner, method, None)):
                missing[method] = PLAIN_NEEDS[method]
        info = reset_info if isinstance(reset_info, Mapping) else {}
        for capability, evidence in _INFO_EVIDENCE.items():
            if not any(k in info for k in evidence):
                missing[capability] = PLAIN_NEEDS[capability]
        return cls(suite=False, env_class=name, missing=missing)


# ---------------------------------------------------------------- the context
@dataclass
class Context:
    target: EnvTarget
    env_kwargs: Mapping[str, Any]
    seed: int
    steps: int
    options: Mapping[str, Any]
    check_processes: bool
    process_timeout: float
    file_probe: FileProbe | None = None
    capabilities: Capabilities = field(default_factory=Capabilities)
    envs: list[gym.Env] = field(default_factory=list)

    def make(self) -> gym.Env:
        env = make_env(self.target, self.env_kwargs)
        self.envs.append(env)
        return env

    def reset(self, env: gym.Env, **overrides: Any) -> tuple[str, dict[str, Any]]:
        return env.reset(seed=self.seed, options={**self.options, **overrides})

    def close_all(self) -> None:
        for env in self.envs:
            with contextlib.suppress(Exception):
                env.close()
        self.envs.clear()

    def detect_capabilities(self) -> None:
        """Look at one env (and, for a plain env, one reset's info) to see what it offers.

        An env that cannot be made is assumed to offer everything: the checks then report
        what goes wrong.
        """
        try:
            env = self.make()
            info = None
            if not isinstance(env.unwrapped, TextEnv):
                with contextlib.suppress(Exception):
                    info = self.reset(env)[1]
            self.capabilities = Capabilities.of(env, info)
        except Exception:
            self.capabilities = Capabilities()
        finally:
            self.close_all()

    def has(self, capability: str) -> bool:
        return self.capabilities.has(capability)


# ---------------------------------------------------------------- helpers
def hint(traceback_text: str) -> str:
    """A known cause for a crash, recognised from its traceback."""
    if "env_data_reuse_passive_checker" in traceback_text:
        # gymnasium's PassiveEnvChecker (added by gym.make) assumes a reset came first
        return (
            " [gym.make's PassiveEnvChecker cannot step an env restored from a snapshot "
            "without a reset first; register the id with disable_env_checker=True]"
        )
    if "Cannot call env.step() before calling env.reset()" in traceback_text:
        # OrderEnforcing's message (the base env words its own ResetNeeded differently)
        return (
            " [gym.make's OrderEnforcing refuses a step on an env restored from a snapshot "
            "without a reset first; register the id with order_enforce=False]"
        )
    return ""


def rng_state(env: gym.Env) -> Any:
    rng = getattr(env.unwrapped, "_np_random", None)
    return None if rng is None else rng.bit_generator.state


def live_state(env: gym.Env) -> Any:
    """What must not change: the whole snapshot (wrappers too) as comparable bytes."""
    snap = take_snapshot(env)
    return pickle.dumps(snap, protocol=pickle.HIGHEST_PROTOCOL)
