"""Every registered env id keeps the env contract (the shipped checker, all checks)."""

from __future__ import annotations

import importlib.util

import gymnasium as gym
import pytest
from _services import LOCAL_SANDBOX_ENVS, env_id_params

import agentenvs  # noqa: F401 - registers the env ids
from agentenvs.testing import check_env_contract


def _entry_module(env_id: str) -> str:
    entry_point = gym.spec(env_id).entry_point
    return entry_point.split(":")[0] if isinstance(entry_point, str) else ""


# the sandboxed envs' contract over their bundled tasks takes minutes: `make test-all`
# runs it; `make test` checks them on their test tasks (test_deepcoder.py,
# test_deepcoder_official.py, test_terminal.py::test_contract_local)
@pytest.mark.parametrize("env_id", env_id_params(long=LOCAL_SANDBOX_ENVS))
def test_registered_env_keeps_the_contract(env_id: str) -> None:
    module = _entry_module(env_id)
    try:
        missing = module != "" and importlib.util.find_spec(module) is None
    except ModuleNotFoundError:
        missing = True
    if missing:
        pytest.skip(f"{env_id}: its module {module} is not in this checkout")
    check_env_contract(env_id)
