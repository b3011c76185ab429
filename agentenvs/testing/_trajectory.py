"""Seeded trajectories, digests and result comparison shared by the contract checks.

Also the child-process side of the cross-process check: ``python -c`` runs
``child_main``, which reads a pickled job on stdin and writes a pickled result on
stdout. A fresh interpreter (not multiprocessing) keeps the check safe to call from a
user's script that has no ``if __name__ == "__main__"`` guard.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from agentenvs.core.env import TextEnv
from agentenvs.core.snapshot import Snapshot, restore_snapshot
from agentenvs.wrappers.record import json_safe

EnvTarget = str | Callable[..., gym.Env]

#: bad inputs mixed into trajectories (short ones: the long ones have their own check)
TRAJECTORY_BAD_ACTIONS: tuple[Any, ...] = ("", "\x00???", "\x00\x01\x1b[2J\x7f", None, 123)

CHILD_CODE = "from agentenvs.testing._trajectory import child_main; child_main()"


def make_env(target: EnvTarget, env_kwargs: Mapping[str, Any]) -> gym.Env:
    if isinstance(target, str):
        return gym.make(target, **env_kwargs)
    return target(**env_kwargs)


def target_name(target: EnvTarget) -> str:
    if isinstance(target, str):
        return target
    return getattr(target, "__qualname__", None) or repr(target)


def has_error_action(env: gym.Env) -> bool:
    """Whether ``env.unwrapped`` has an ``error_action(rng)`` (not TextEnv's placeholder)."""
    inner = env.unwrapped
    if not callable(getattr(inner, "error_action", None)):
        return False
    return not isinstance(inner, TextEnv) or type(inner).error_action is not TextEnv.error_action


def in_space(space: gym.Space[Any], value: Any) -> bool:
    """``space.contains(value)``, False where the space cannot even tell."""
    try:
        return bool(space.contains(value))
    except Exception:
        return False


class ActionSource:
    """A seeded stream of actions: the env's error actions, space samples and bad inputs.

    Error actions move the env through real states; samples and bad inputs exercise the
    invalid-action path. Equal seeds and equal env states give equal actions. An env
    without ``error_action`` gets a space sample instead; a plain ``gymnasium.Env`` (not a
    ``TextEnv``) only the bad inputs within its action space, the others a sample.
    """

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def __call__(self, env: gym.Env) -> Any:
        u = self.rng.random()
        if u < 0.55 and has_error_action(env):
            return env.unwrapped.error_action(self.rng)  # type: ignore[attr-defined]
        if u >= 0.8:
            bad = TRAJECTORY_BAD_ACTIONS
            if not isinstance(env.unwrapped, TextEnv):  # Gymnasium leaves the rest undefined
                bad = tuple(a for a in bad if in_space(env.action_space, a))
            if bad:
                return bad[int(self.rng.integers(len(bad)))]
        # reseed the space from our stream so the sample does not depend on its history
        env.action_space.seed(int(self.rng.integers(2**31)))
        return env.action_space.sample()


Record = tuple[Any, ...]


def run_trajectory(
    env: gym.Env,
    *,
    seed: int,
    options: Mapping[str, Any],
    steps: int,
    action_seed: int,
) -> list[Record]:
    """Reset with ``seed``, then take ``steps`` actions, resetting (unseeded) at episode end.

    Records are ``("reset", obs, info)`` and ``("step", action, obs, reward, terminated,
    truncated, info)``.
    """
    source = ActionSource(action_seed)
    obs, info = env.reset(seed=seed, options=dict(options))
    records: list[Record] = [("reset", obs, info)]
    for _ in range(steps):
        action = source(env)
        obs, reward, terminated, truncated, info = env.step(action)
        records.append(("step", action, obs, reward, terminated, truncated, info))
        if terminated or truncated:
            obs, info = env.reset()  # unseeded: the env's RNG carries on
            records.append(("reset", obs, info))
    return records


def replay(env: gym.Env, actions: Sequence[Any]) -> list[Record]:
    """Step ``actions`` in order; stop after the episode ends."""
    out: list[Record] = []
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        out.append(("step", action, obs, reward, terminated, truncated, info))
        if terminated or truncated:
            break
    return out


def branch(env: gym.Env, source: ActionSource, length: int) -> tuple[list[Any], list[Record]]:
    """Take up to ``length`` actions from ``source`` (stopping at episode end)."""
    actions: list[Any] = []
    out: list[Record] = []
    for _ in range(length):
        action = source(env)
        actions.append(action)
        obs, reward, terminated, truncated, info = env.step(action)
        out.append(("step", action, obs, reward, terminated, truncated, info))
        if terminated or truncated:
            break
    return actions, out


def canonical(value: Any) -> str:
    return json.dumps(json_safe(value), sort_keys=True, ensure_ascii=True)


def digest(value: Any) -> str:
    return hashlib.blake2b(canonical(value).encode(), digest_size=10).hexdigest()


def short(value: Any, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


_FIELDS = {
    "reset": ("event", "observation", "info"),
    "step": ("event", "action", "observation", "reward", "terminated", "truncated", "info"),
}


def record_diff(a: Record, b: Record) -> str | None:
    """Where two records differ, in words, or None when they are equal."""
    ca, cb = json_safe(a), json_safe(b)
    if ca == cb:
        return None
    labels = _FIELDS.get(a[0], tuple(str(i) for i in range(len(a))))
    if len(ca) != len(cb):
        return f"{short(a[0])} vs {short(b[0])}"
    for label, x, y in zip(labels, ca, cb, strict=False):
        if x == y:
            continue
        if isinstance(x, dict) and isinstance(y, dict):
            for key in sorted(set(x) | set(y)):
                vx, vy = x.get(key, "<missing>"), y.get(key, "<missing>")
                if vx != vy:
                    return f"info[{key!r}]: {short(vx)} != {short(vy)}"
        return f"{label}: {short(x)} != {short(y)}"
    return "records differ"


def first_divergence(a: Sequence[Record], b: Sequence[Record]) -> str | None:
    """The first record where two record lists differ, described; None when equal."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        diff = record_diff(x, y)
        if diff is not None:
            return f"record {i} ({x[0]}): {diff}"
    if len(a) != len(b):
        return f"lengths differ: {len(a)} records vs {len(b)}"
    return None


# ---------------------------------------------------------------- child process
def run_job(job: Mapping[str, Any]) -> dict[str, Any]:
    """What the child computes: trajectory digests, and a snapshot restored and replayed."""
    spec = job.get("spec")
    if spec is not None and spec.id not in gym.registry:
        gym.registry[spec.id] = spec
    env = make_env(job["target"], job["env_kwargs"])
    try:
        records = run_trajectory(
            env,
            seed=job["seed"],
            options=job["options"],
            steps=job["steps"],
            action_seed=job["action_seed"],
        )
        result: dict[str, Any] = {"trajectory": [digest(r) for r in records]}
    finally:
        env.close()
    if job.get("snapshot") is not None:
        fresh = make_env(job["target"], job["env_kwargs"])
        try:
            restore_snapshot(fresh, Snapshot.from_bytes(job["snapshot"]))
            result["replay"] = [digest(r) for r in replay(fresh, job["actions"])]
        finally:
            fresh.close()
    return result


def child_main() -> None:
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # env output must not corrupt the pickled result
    try:
        job = pickle.loads(sys.stdin.buffer.read())
        result = run_job(job)
    except BaseException:  # report anything, the parent turns it into a failure
        result = {"error": traceback.format_exc()}
    out.write(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
    out.flush()
