"""The env contract checker, shipped so users can check their own envs.

    from agentenvs.testing import check_env_contract
    report = check_env_contract("agentenvs/FrozenLake-v0")   # raises ContractError on failure
    print(report)

In a pytest suite: ``test_envs = contract_test("mypkg/MyEnv-v0")`` or call
``assert_env_contract`` inside a test.

Any ``gymnasium.Env`` can be checked: the checks that need a part of the suite's
interface it lacks (snapshots, ``error_action``, the info keys, ...) are reported as not
applicable, each saying what is missing (``strict=True`` fails them instead).
"""

from agentenvs.testing.contract import (
    CHECKS,
    CheckResult,
    ContractError,
    ContractReport,
    FileProbe,
    assert_env_contract,
    check_env_contract,
    contract_test,
)

__all__ = [
    "CHECKS",
    "CheckResult",
    "ContractError",
    "ContractReport",
    "FileProbe",
    "assert_env_contract",
    "check_env_contract",
    "contract_test",
]
