"""Error states: the step-quality comparison after an injected mistake, and recovery.

An error state is an ordinary state whose next action was replaced by the env's own
``error_action(rng)`` (stepped through the env, so the agent sees its result); states
where that action ends the episode are skipped (see ``agentenvs.eval.states``). From
each error state, as from ordinary ones, both policies sample 16 actions that are scored
and compared pairwise (``agentenvs.eval.step_quality``); then each policy *continues*
``continuations`` times to the end of the episode with the budget that is left, and the
share of successful continuations is its recovery rate. Rollout j of policy A and
rollout j of policy B share the env's random stream (common random numbers), so their
difference is paired and less noisy.

An injected error is an error: its regret by the env's own scoring (FrozenLake: the
exact oracle's ``max_a Q(s, a) - Q(s, injected)``; DeepCoder-MT: one minus the program's
pass rate, so it fails a test or does not run) is above ``REGRET_TOL`` (1e-9). Candidates
that are not are drawn again, up to ``MAX_ERROR_DRAWS``; a state with none gives no error
state (see ``agentenvs.wrappers.inject_error``). Each error state records its
``error_regret`` and ``error_redraws``, and the summary's ``injected_errors``
(``injected_error_summary``) gives their count, least and mean regret, the candidates
rejected and the states skipped (``no_error``: every action as good as the best;
``ended``: the error ended the episode).

``run_error_states`` analyses ordinary and error states in one run and draws them side
by side (``error_states.png``), the shape of the paper's bar charts.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentenvs.core.regret import REGRET_TOL
from agentenvs.eval.states import continuation_successes, injected_error_summary
from agentenvs.eval.step_quality import (
    ERROR_DRAWS_NAME,
    AnalysisResult,
    StepQualityConfig,
    run_step_quality,
)
from agentenvs.wrappers.inject_error import MAX_ERROR_DRAWS

DEFAULT_CONTINUATIONS = 8

__all__ = [
    "DEFAULT_CONTINUATIONS",
    "ERROR_DRAWS_NAME",
    "MAX_ERROR_DRAWS",
    "REGRET_TOL",
    "continuation_successes",
    "error_states_config",
    "injected_error_summary",
    "run_error_states",
]


def error_states_config(
    env_id: str,
    policy_a: str,
    policy_b: str,
    *,
    continuations: int = DEFAULT_CONTINUATIONS,
    continue_kinds: Sequence[str] = ("error",),
    **kwargs: Any,
) -> StepQualityConfig:
    """A step-quality config over ordinary and error states, with continuation rollouts."""
    return StepQualityConfig(
        env_id=env_id,
        policy_a=policy_a,
        policy_b=policy_b,
        kinds=("ordinary", "error"),
        continuations=continuations,
        continue_kinds=tuple(continue_kinds),
        **kwargs,
    )


def run_error_states(
    config: StepQualityConfig, out_dir: str | Path, **kwargs: Any
) -> AnalysisResult:
    """``run_step_quality`` for a config that includes error states (see the module doc)."""
    if "error" not in config.kinds:
        raise ValueError("an error-state analysis needs 'error' among the config's kinds")
    return run_step_quality(config, out_dir, **kwargs)
