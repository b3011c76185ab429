"""``agentenvs certify``: a certificate that says what holds, and each fault of a broken
env found with a reproducer that shows it again.

The broken envs are the suite's FrozenLake with one defect each (a crash on a NUL byte,
a reward for the empty action, a thread left running after close, a step that hangs);
the healthy ones are FrozenLake itself and Gymnasium's Taxi through its adapter.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401
from agentenvs.core.env import Transition
from agentenvs.envs.frozenlake.env import FrozenLakeEnv
from agentenvs.testing.certify import FAILS, FINDING, HOLDS, certify


class CrashOnNul(FrozenLakeEnv):
    def _apply(self, action: str) -> Transition:
        if "\x00" in action:
            raise RuntimeError("the parser met a NUL byte")
        return super()._apply(action)


class RewardsSilence(FrozenLakeEnv):
    def _apply(self, action: str) -> Transition:
        if not action.strip():
            return Transition("Solved!", reward=1.0, terminated=True, success=True, score=1.0)
        return super()._apply(action)


_LEFT: list[threading.Thread] = []


class LeavesAThread(FrozenLakeEnv):
    def close(self) -> None:
        stop = threading.Event()
        t = threading.Thread(target=stop.wait, args=(30,), daemon=True)
        t.start()
        _LEFT.append(t)
        super().close()


class HangsOnShell(FrozenLakeEnv):
    def _apply(self, action: str) -> Transition:
        if "$(" in action:
            time.sleep(5)
        return super()._apply(action)


BROKEN = {
    "certify-test/CrashOnNul-v0": CrashOnNul,
    "certify-test/RewardsSilence-v0": RewardsSilence,
    "certify-test/LeavesAThread-v0": LeavesAThread,
    "certify-test/HangsOnShell-v0": HangsOnShell,
}
for _id, _cls in BROKEN.items():
    if _id not in gym.registry:
        gym.register(_id, entry_point=_cls, order_enforce=False, disable_env_checker=True)


def _rows(cert, part: str) -> dict[str, object]:  # noqa: ANN001
    return {r.check: r for r in cert.rows if r.part == part}


@pytest.mark.parametrize(
    ("env", "kwargs"),
    [("agentenvs/FrozenLake-v0", {}), ("agentenvs/GymnasiumText-v0", {"env_id": "Taxi-v4"})],
)
def test_a_healthy_env_holds_and_the_certificate_says_so(
    env: str, kwargs: dict, tmp_path: Path
) -> None:
    cert = certify(env, env_kwargs=kwargs, fuzz_episodes=4, probe_tasks=2)
    assert cert.holds, cert.markdown()
    assert {r.part for r in cert.rows} == {"contract", "fuzz", "reward gaming"}
    js, md = cert.write(tmp_path)
    data = json.loads(js.read_text())
    assert data["holds"] is True and data["counts"] == cert.counts()
    assert len(data["rows"]) == len(cert.rows)
    text = md.read_text()
    assert "verdict: **holds**" in text and "| fuzz | hostile actions | holds |" in text


def test_a_crash_on_a_hostile_action_fails_with_a_reproducer_that_crashes_again() -> None:
    cert = certify("certify-test/CrashOnNul-v0", fuzz_episodes=30, probe_tasks=1)
    assert not cert.holds
    crash = _rows(cert, "fuzz")["crash"]
    assert crash.status == FAILS and "NUL" in crash.detail
    repro = crash.reproducer
    env = gym.make("certify-test/CrashOnNul-v0")
    env.reset(seed=repro["seed"])
    with pytest.raises(RuntimeError, match="NUL byte"):
        for action in repro["actions"]:
            env.step(action)
    env.close()
    # the contract's own bad-actions check sees it too
    assert _rows(cert, "contract")["bad_actions"].status == FAILS


def test_a_reward_for_saying_nothing_is_a_finding() -> None:
    cert = certify("certify-test/RewardsSilence-v0", fuzz_episodes=2, probe_tasks=3)
    probe = _rows(cert, "reward gaming")
    assert probe["empty action"].status == FINDING
    assert "success 3/3" in probe["empty action"].detail
    assert probe["format only"].status == HOLDS  # "<answer></answer>" is not blank


def test_a_thread_left_after_close_is_reported() -> None:
    cert = certify("certify-test/LeavesAThread-v0", fuzz_episodes=2, probe_tasks=1)
    left = _rows(cert, "fuzz")["nothing left after close"]
    assert left.status == FAILS and "threads" in left.detail


def test_a_step_past_the_call_limit_is_a_hang_not_a_wait(tmp_path: Path) -> None:
    # in a process of its own: the call limit uses the main thread's timer, which the
    # test runner's own timeout holds in this one
    code = (
        "import sys, json\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "import test_certify\n"
        "from agentenvs.testing.certify import certify\n"
        "c = certify('certify-test/HangsOnShell-v0', fuzz_episodes=40, probe_tasks=1, call_limit_s=1.0)\n"
        "print(json.dumps([[r.part, r.check, r.status, r.detail] for r in c.rows]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {(p, c): (s, d) for p, c, s, d in json.loads(done.stdout.strip().splitlines()[-1])}
    assert rows[("fuzz", "hang")][0] == FAILS
    assert "CallTimeout" in rows[("fuzz", "hang")][1]
    assert rows[("fuzz", "no hang")][0] == FAILS


def test_the_command_exits_0_when_it_holds_1_when_not_2_on_a_bad_env(tmp_path: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "agentenvs.cli", "certify", *args],
            capture_output=True,
            text=True,
            timeout=600,
        )

    ok = run(
        "gymnasium:FrozenLake-v1",
        "--fuzz-episodes",
        "2",
        "--probe-tasks",
        "1",
        "--out",
        str(tmp_path / "c"),
    )
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert (tmp_path / "c" / "certificate.md").is_file()
    assert "GymnasiumText-v0" in ok.stdout and '"env_id": "FrozenLake-v1"' in ok.stdout
    bad = run("gymnasium:NoSuchEnv-v0")
    assert (
        bad.returncode == 2 and "NoSuchEnv-v0" in bad.stderr and len(bad.stderr.splitlines()) == 1
    )
