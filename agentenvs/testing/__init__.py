"""The env contract checker, shipped so users can check their own envs.

    from agentenvs.testing import check_env_contract
    report = check_env_contract("agentenvs/FrozenLake-v0")   # raises ContractError on failure
    print(report)

In a pytest suite: ``test_envs = contract_test("mypkg/MyEnv-v0")`` or call
``assert_env_contract`` inside a test.
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
