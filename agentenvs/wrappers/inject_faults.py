"""InjectFaults: raise an infrastructure ``Fault`` at the env boundary, at a given rate.

For measuring how runs ride out faults (``benchmarks/bench_faults.py``) on envs whose
infrastructure cannot be broken from outside here (FrozenLake, BFCL). The fault is raised
*before* the inner env sees the call, so the env is untouched and a retry with the same
seed replays the same episode; a fault-free run and a run that rode out the faults give
the same trajectories.

Whether an attempt faults is decided from (``seed``, the reset seed, how many times this
process reset that seed through an ``InjectFaults`` with this seed and rate): a retry is
a new draw, so with a rate below 1 every trajectory eventually runs through, and the
same run in the same processes injects the same faults. A faulting attempt faults at its
reset or at one of its steps, drawn uniformly from the reset and the budget's steps (an
episode that ends before that step runs through).

``gym.make(INJECT_FAULTS_ID, env_id=..., rate=0.1, env_kwargs={...})`` builds a wrapped
env (the id is registered when this module is imported; the runner's workers import it
through ``"agentenvs.wrappers.inject_faults:agentenvs/InjectFaults-v0"``).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any

import gymnasium as gym

from agentenvs.core.errors import FAULT_KINDS, Fault

INJECT_FAULTS_ID = "agentenvs/InjectFaults-v0"
#: the env id under which the runner's worker processes find it (gym.make imports this module)
INJECT_FAULTS_SPEC = f"{__name__}:{INJECT_FAULTS_ID}"

#: resets per (seed, rate, reset seed) in this process: the attempt number of each
_ATTEMPTS: Counter[tuple[int, float, int | None]] = Counter()


def _draw(*parts: Any) -> int:
    raw = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "little")


class InjectFaults(gym.Wrapper[str, str, str, str]):
    """Raise ``Fault(kind=kind)`` at a reset or a step of a share ``rate`` of attempts.

    Arguments:
        rate: the chance that an attempt (a reset and its steps) faults, in [0, 1).
        seed: seeds the draws, apart from the env's own random stream.
        kind: the ``Fault``'s kind (one of ``FAULT_KINDS``).
    """

    def __init__(
        self, env: gym.Env[str, str], *, rate: float, seed: int = 0, kind: str = "other"
    ) -> None:
        super().__init__(env)
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate < 1:
            raise ValueError(f"rate must be a number in [0, 1), got {rate!r}")
        if kind not in FAULT_KINDS:
            raise ValueError(f"kind must be one of {FAULT_KINDS}, got {kind!r}")
        self.rate = float(rate)
        self.fault_seed = int(seed)
        self.kind = kind
        self._fault_turn: int | None = None
        self._turn = 0
        self.injected = 0

    def _fault(self, where: str) -> Fault:
        self.injected += 1
        return Fault(
            f"injected fault at {where} (InjectFaults, rate {self.rate})",
            kind=self.kind,
            evidence="InjectFaults raised it before the env saw the call",
        )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        key = (self.fault_seed, self.rate, seed)
        attempt = _ATTEMPTS[key]
        _ATTEMPTS[key] += 1
        self._fault_turn = None
        if _draw(self.fault_seed, seed, attempt) / 2**64 < self.rate:
            budget = int((options or {}).get("max_turns") or self.env.unwrapped.max_turns)
            turn = _draw(self.fault_seed, seed, attempt, "turn") % (budget + 1)
            if turn == 0:
                raise self._fault("reset")
            self._fault_turn = turn
        observation, info = self.env.reset(seed=seed, options=options)
        self._turn = 0
        return observation, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._turn += 1
        if self._turn == self._fault_turn:
            self._fault_turn = None
            raise self._fault(f"step {self._turn}")
        return self.env.step(action)


def make_faulty_env(
    env_id: str,
    rate: float,
    seed: int = 0,
    kind: str = "other",
    env_kwargs: dict[str, Any] | None = None,
) -> InjectFaults:
    """``gym.make(env_id, **env_kwargs)`` wrapped in ``InjectFaults``."""
    return InjectFaults(gym.make(env_id, **(env_kwargs or {})), rate=rate, seed=seed, kind=kind)


if INJECT_FAULTS_ID not in gym.registry:
    gym.register(INJECT_FAULTS_ID, entry_point=make_faulty_env, order_enforce=False)
