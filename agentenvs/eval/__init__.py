"""Evaluation: the Pass@(K,T) estimator, the trajectory runner and the reports.

Only the estimator (numpy) loads here; the runner (multiprocessing, tqdm) and the
reports (matplotlib, lazily) are imported from their modules when needed.
"""

from agentenvs.eval.passk import (
    PassSurface,
    bootstrap_pass_at_k_t,
    difference_surface,
    estimate_surface,
    pass_at_k,
    pass_at_k_t,
    success_counts,
    survival_table,
)

__all__ = [
    "PassSurface",
    "bootstrap_pass_at_k_t",
    "difference_surface",
    "estimate_surface",
    "pass_at_k",
    "pass_at_k_t",
    "success_counts",
    "survival_table",
]
