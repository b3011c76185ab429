"""The env contract checker: ``check_env_contract(env_id_or_factory)``.

Runs Gymnasium's ``check_env`` on the unwrapped env, then every rule of the agentenvs
contract, each as a named check on fresh envs, so one broken rule does not hide another.
Every failure is collected; ``ContractError`` lists them all.

Any ``gymnasium.Env`` can be checked. The checks that need a part of the suite's
interface (``runner.REQUIRES``: snapshots, ``error_action``, ``score_action``, the budget
and task options, the info keys, the turn rules) are reported as not applicable, saying
what is missing, for an env that lacks it; ``strict=True`` counts them as failures. A
plain env (not a ``TextEnv``) still gets ``gymnasium_check_env``, ``seed_determinism``,
``cross_process``, ``no_history_leak``, ``bad_actions`` (the inputs within its action
space must not crash it) and ``close``.

Checks (names as reported), by module:

``basic`` (any env)

- ``gymnasium_check_env``: Gymnasium's own checker (render modes too, for a registered id).
- ``seed_determinism``: the same seed and options give the same first observation and
  the same trajectory (two envs, and the same env run again).
- ``cross_process``: the same trajectory in a fresh interpreter (its own hash seed)
  gives the same digests, and a pickled snapshot restored there steps the same (where
  the env has snapshots).
- ``no_history_leak``: after long episodes, a reset with a seed gives what a fresh env
  gives, observation, info and the steps after.
- ``bad_actions``: empty, 1 MB, random-bytes, control-character and non-str actions give
  an observation with ``action_valid`` False, never an exception, and cost one turn;
  without the suite's turn rules, the inputs within the action space step without an
  exception to an observation within the observation space.
- ``close``: ``close()`` twice is fine.

``episode`` (the suite's episode rules)

- ``info_keys``: every standard info key, with its type, on reset and every step;
  ``turn`` counts steps, ``turns_left = max_turns - turn``, ``score`` within [0, 1].
- ``budget_truncation``: with ``options={"max_turns": T}`` and invalid actions, the
  episode is truncated exactly at turn T, never terminated, with ``turns_left`` 0.
- ``step_after_end``: stepping before reset or after the episode ended raises
  ``gymnasium.error.ResetNeeded``.
- ``task_id_option``: ``options={"task_id": ...}`` selects that task; an unknown id raises.
- ``atomic_reset``: resets that raise (unknown task id, bad budgets, unknown or
  malformed options, bad seeds) leave the live episode exactly as it was: the same
  snapshot, and the same results for the next steps.

``snapshots``

- ``snapshot_roundtrip``: at random points, snapshot, step, restore, step again:
  identical results (twice over), with turn, state key and RNG put back.
- ``snapshot_pickle``: a snapshot through ``to_bytes``/``from_bytes`` restores into a
  fresh env (never reset, or reset elsewhere) and steps identically.
- ``atomic_restore``: corrupted snapshots (flipped or missing bytes, tampered base
  fields, foreign or truncated env states, a leaf of the state changed) raise only
  ``SnapshotError``, and the env is then exactly as it was; bytes never restore silently.
- ``file_modes``: for envs with files, given a ``FileProbe``: modes, empty dirs,
  symlinks and mtimes survive a restore, in the same env and in a fresh one.

``forks``

- ``fork_equivalence``: ``fork(k)``'s children start at the parent's turn, state key and
  RNG, and play the same actions as the parent restored from a snapshot taken at the
  fork.
- ``fork_independence``: stepping or restoring one child changes neither its siblings
  nor the parent, stepping the parent changes no child, and no two of them hold the same
  outside resource (``held_resources()``: containers, databases, sandbox dirs).
- ``fork_close``: a child plays on after a sibling and the parent closed; closing every
  child (twice) releases what they held: no resource named, no sandbox dir, no process.

``probes``

- ``score_action``: returns a finite number and does not advance the env (an error
  action, an invalid one and the empty one scored in turn, one a step).
- ``error_action``: returns a str, the same one for equally seeded generators, and does
  not touch the env.
"""

from agentenvs.testing.contract.context import INVALID_ACTION, Capabilities, FileProbe
from agentenvs.testing.contract.report import CheckResult, ContractError, ContractReport
from agentenvs.testing.contract.runner import (
    CHECKS,
    REQUIRES,
    assert_env_contract,
    check_env_contract,
    contract_test,
)

# the snapshot corruptions, under the names the fuzz tests import them by
from agentenvs.testing.contract.snapshots import corrupted_snapshots as _corrupted_snapshots
from agentenvs.testing.contract.snapshots import flip_bytes as _flip_bytes

__all__ = [
    "CHECKS",
    "INVALID_ACTION",
    "REQUIRES",
    "Capabilities",
    "CheckResult",
    "ContractError",
    "ContractReport",
    "FileProbe",
    "_corrupted_snapshots",
    "_flip_bytes",
    "assert_env_contract",
    "check_env_contract",
    "contract_test",
]
