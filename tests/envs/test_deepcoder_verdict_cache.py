"""DeepCoderMT-v0's per-process verdict cache never hands one row's verdict to another.

Verdicts are shared by every env of a process with equal keys, so a key must hold all a
verdict depends on: the row's source format (which picks the official checker and its
time limit), the rules, the limits and the comparison settings. The rows here are one
problem written in each source's format with the same id and tests; the expected
verdicts are the official checkers' (rLLM at the DeepCoder release): LiveCodeBench
compares the words of a line, the APPS checker (TACO, PrimeIntellect) lets a line of
differing words pass and ignores the exit code. Real programs in the local bubblewrap
sandbox (marker ``bwrap``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.envs.deepcoder.data import parse_row

PROBLEM = "Read an integer n. Print Yes if n is even, else No."
PAIRS = [("4\n", "Yes\n"), ("7\n", "No\n"), ("10\n", "Yes\n")]
FORMATS = ("lcb", "taco", "primeintellect")


def row(fmt: str, task_id: str) -> dict[str, str]:
    """The problem as the source ``fmt`` publishes it, under ``task_id``."""
    if fmt == "lcb":
        tests: object = [{"input": i, "output": o, "testtype": "stdin"} for i, o in PAIRS]
    elif fmt == "taco":
        tests = {"inputs": [i for i, _ in PAIRS], "outputs": [o for _, o in PAIRS]}
    else:
        tests = [{"type": "stdin_stdout", "input": i, "output": o} for i, o in PAIRS]
    return {"id": task_id, "problem": PROBLEM, "tests": json.dumps(tests)}


def write_rows(folder: Path, task_id: str) -> dict[str, Path]:
    paths = {}
    for fmt in FORMATS:
        path = folder / f"{fmt}.jsonl"
        path.write_text(json.dumps(row(fmt, task_id)) + "\n")
        paths[fmt] = path
    return paths


def block(code: str) -> str:
    return f"```python\n{code}```"


RIGHT_CODE = "n = int(input())\nprint('Yes' if n % 2 == 0 else 'No')\n"
SWAPPED_CODE = "n = int(input())\nprint('No' if n % 2 == 0 else 'Yes')\n"
RIGHT = block(RIGHT_CODE)
SWAPPED = block(SWAPPED_CODE)
SHOUTED = block("n = int(input())\nprint('YES' if n % 2 == 0 else 'NO')\n")
RAISES_AFTER = block(RIGHT_CODE + "raise ValueError('after')\n")
PROGRAMS = {"right": RIGHT, "swapped": SWAPPED, "shouted": SHOUTED, "raises": RAISES_AFTER}
#: the official verdicts: LiveCodeBench fails a wrong word and an exception; the APPS
#: checker passes a line of other words and ignores how the program ended
OFFICIAL = {
    "lcb": {"right": 1.0, "swapped": 0.0, "shouted": 0.0, "raises": 0.0},
    "taco": {"right": 1.0, "swapped": 1.0, "shouted": 1.0, "raises": 1.0},
    "primeintellect": {"right": 1.0, "swapped": 1.0, "shouted": 1.0, "raises": 1.0},
}


def test_the_rows_differ_only_in_their_format() -> None:
    tasks = [parse_row(row(fmt, "even"), fmt, "even") for fmt in FORMATS]
    assert [t.source_format for t in tasks] == list(FORMATS)
    first = tasks[0].tests
    for task in tasks[1:]:
        assert [(t.kind, t.input, t.output) for t in task.tests] == [
            (t.kind, t.input, t.output) for t in first
        ]


def step_reward(path: Path, program: str, **kwargs: object) -> float:
    env = gym.make("agentenvs/DeepCoderMT-v0", tasks_path=str(path), **kwargs)
    try:
        env.reset(seed=0)
        _, reward, *_ = env.step(program)
        return float(reward)
    finally:
        env.close()


@pytest.mark.bwrap
@pytest.mark.parametrize("order", [FORMATS, FORMATS[::-1]], ids=["lcb-first", "apps-first"])
def test_rows_differing_only_in_format_never_share_a_verdict(
    tmp_path: Path, order: tuple[str, ...]
) -> None:
    paths = write_rows(tmp_path, f"even-{order[0]}")
    rewards = {fmt: step_reward(paths[fmt], SWAPPED, rules="official") for fmt in order}
    # LiveCodeBench fails the swapped words whatever was graded before it, and the APPS
    # rows keep their own verdict: a wrong answer earns nothing on the LCB row
    assert rewards == {fmt: OFFICIAL[fmt]["swapped"] for fmt in order}


@pytest.mark.bwrap
@pytest.mark.parametrize("first", ["strict", "official"])
def test_rows_graded_under_other_rules_never_share_a_verdict(tmp_path: Path, first: str) -> None:
    paths = write_rows(tmp_path, f"even-rules-{first}")
    order = [first, "official" if first == "strict" else "strict"]
    rewards = {rules: step_reward(paths["taco"], SWAPPED, rules=rules) for rules in order}
    assert rewards == {"strict": 0.0, "official": 1.0}


@pytest.mark.bwrap
@pytest.mark.parametrize("first", ["tight", "loose"])
def test_rows_graded_under_other_limits_never_share_a_verdict(tmp_path: Path, first: str) -> None:
    paths = write_rows(tmp_path, f"even-limits-{first}")
    # 1 GiB of address space, reserved and never touched: a verdict that does not depend
    # on how fast the machine fills pages (a zeroed bytearray timed out on a loaded one)
    hungry = block("import mmap\nbuf = mmap.mmap(-1, 1 << 30)\n" + RIGHT_CODE)
    memory = {"tight": 512, "loose": 4096}
    order = [first, "loose" if first == "tight" else "tight"]
    rewards = {name: step_reward(paths["lcb"], hungry, memory_mb=memory[name]) for name in order}
    assert rewards == {"tight": 0.0, "loose": 1.0}
    sleepy = block("import time\ntime.sleep(1)\n" + RIGHT_CODE)
    timeouts = {"tight": 0.25, "loose": 60.0}
    rewards = {
        name: step_reward(paths["taco"], sleepy, timeout_per_test=timeouts[name]) for name in order
    }
    assert rewards == {"tight": 0.0, "loose": 1.0}


ALONE = """
import json, sys
import gymnasium as gym
import agentenvs

path, programs = sys.argv[1], json.loads(sys.argv[2])
env = gym.make("agentenvs/DeepCoderMT-v0", tasks_path=path, rules="official")
env.reset(seed=0)
print(json.dumps({name: env.unwrapped.score_action(p) for name, p in programs.items()}))
env.close()
"""


@pytest.mark.bwrap
def test_a_mixed_format_set_grades_as_each_format_alone(tmp_path: Path) -> None:
    paths = write_rows(tmp_path, "even-mixed")
    alone = {}
    for fmt in FORMATS:  # each in a process of its own: nothing cached before it
        out = subprocess.run(
            [sys.executable, "-c", ALONE, str(paths[fmt]), json.dumps(PROGRAMS)],
            capture_output=True,
            text=True,
            timeout=240,
            check=True,
        )
        alone[fmt] = json.loads(out.stdout.strip().splitlines()[-1])
    assert alone == OFFICIAL
    envs = {
        fmt: gym.make("agentenvs/DeepCoderMT-v0", tasks_path=str(paths[fmt]), rules="official")
        for fmt in FORMATS
    }
    try:
        for env in envs.values():
            env.reset(seed=0)
        together: dict[str, dict[str, float]] = {fmt: {} for fmt in FORMATS}
        for name, program in PROGRAMS.items():  # every format in turn, program by program
            for fmt, env in envs.items():
                together[fmt][name] = env.unwrapped.score_action(program)
    finally:
        for env in envs.values():
            env.close()
    assert together == alone


@pytest.mark.bwrap
def test_outcomes_of_a_task_with_an_id_the_env_knows(tmp_path: Path) -> None:
    paths = write_rows(tmp_path, "even-foreign")
    env = gym.make("agentenvs/DeepCoderMT-v0", tasks_path=str(paths["lcb"]))
    try:
        env.reset(seed=0)
        code = SWAPPED_CODE
        assert not any(o.passed for o in env.unwrapped.outcomes_of(code))
        # the same id, the expected words swapped: the swapped program is right there
        flipped = [
            {"input": i, "output": "No\n" if o == "Yes\n" else "Yes\n", "testtype": "stdin"}
            for i, o in PAIRS
        ]
        other = parse_row(
            {"id": "even-foreign", "problem": PROBLEM, "tests": json.dumps(flipped)}, "t", "x"
        )
        assert all(o.passed for o in env.unwrapped.outcomes_of(code, other))
        assert not any(o.passed for o in env.unwrapped.outcomes_of(code))
    finally:
        env.close()


def test_digests_are_equal_for_equal_loads_and_differ_for_any_difference(tmp_path: Path) -> None:
    from dataclasses import replace

    from agentenvs.envs.deepcoder.cache import task_digest
    from agentenvs.envs.deepcoder.data import load_tasks

    # two loads of one file share verdicts (eval workers, contract checks make many envs)
    first, second = load_tasks().tasks, load_tasks().tasks
    assert [task_digest(t) for t in first.values()] == [task_digest(t) for t in second.values()]
    paths = write_rows(tmp_path, "even-digest")
    digests = {fmt: task_digest(*load_tasks(paths[fmt]).tasks.values()) for fmt in FORMATS}
    assert len(set(digests.values())) == len(FORMATS)
    task = next(iter(first.values()))
    test = task.tests[0]
    variants = [task] + [
        replace(task, tests=(replace(test, raw_output=value), *task.tests[1:]))
        for value in (1, 1.0, True, "1", [1], (1,), {"1": 1}, {1: 1}, -0.0, 0.0)
    ]
    assert len({task_digest(t) for t in variants}) == len(variants)
