"""TerminalBench-v0 test runs on the local runtime: pytest's copy with its bytecode vs without.

The local runtime shows the sandbox pytest from a read-only copy of this interpreter's
packages. Without their ``__pycache__`` (as the copy was first made), every test run
compiled pytest's ~130 modules before it could collect a test; with it, the sandbox's
``python3`` loads them. This measures ``run_tests()`` of solved tasks both ways, in
alternating rounds of one run (the same sandbox settings, the only difference the bound
copy), and prints the medians and their ratio. Exits 0 with a note where the local
sandbox is unavailable.

Usage: python benchmarks/bench_terminal_tests.py [--tasks N] [--rounds R]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from agentenvs.envs.terminal import runtime_local
from agentenvs.envs.terminal.env import TerminalBenchEnv
from agentenvs.sandbox.local import LocalSandbox, local_available


def without_bytecode(pylib: str, parent: str) -> str:
    """A copy of ``pylib`` without its ``__pycache__`` dirs: the copy as first made."""
    dest = Path(parent) / "pylib-without-bytecode"
    shutil.copytree(pylib, dest, ignore=shutil.ignore_patterns("__pycache__"))
    for path in [dest, *dest.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    dest.parent.chmod(0o755)
    return str(dest)


def solved_env(pylib: str | None, task_id: str) -> TerminalBenchEnv:
    """An env on ``task_id`` with the oracle's changes made; its sandbox binds ``pylib``
    (None: the runtime's own copy) as pytest's packages."""
    env = TerminalBenchEnv(command_timeout=60)
    runtime = env.runtime()
    if pylib is not None:
        runtime.box.close()
        binds = {runtime_local.offline_dir(): runtime_local.offline.MOUNT, pylib: runtime_local.PYLIB}
        runtime.box = LocalSandbox(env.limits, tmpfs=runtime_local.TMPFS_MB, ro_binds=binds)
    env.reset(seed=0, options={"task_id": task_id})
    env.step(env.oracle_action())
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=4, help="the first N bundled tasks")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    ok, why = local_available()
    if not ok:
        print(f"note: the local sandbox is unavailable here ({why}); skipped")
        return
    pylib = runtime_local.pytest_dir()
    assert pylib is not None, "pytest is not installed in this interpreter"
    with tempfile.TemporaryDirectory(prefix="bench-terminal-tests-") as tmp:
        old_lib = without_bytecode(pylib, tmp)
        task_ids = list(TerminalBenchEnv().task_ids)[: args.tasks]
        times: dict[str, list[float]] = {"with bytecode": [], "without (old)": []}
        envs = {
            "with bytecode": [solved_env(None, t) for t in task_ids],
            "without (old)": [solved_env(old_lib, t) for t in task_ids],
        }
        try:
            for env in envs["with bytecode"] + envs["without (old)"]:
                results, _, output = env.run_tests()  # warm-up; the oracle passes
                assert results and all(results.values()), output[-2000:]
            for _ in range(args.rounds):
                for name, group in envs.items():
                    start = time.perf_counter()
                    for env in group:
                        env.run_tests()
                    times[name].append((time.perf_counter() - start) / len(group))
        finally:
            for group in envs.values():
                for env in group:
                    env.close()
    new, old = (statistics.median(times[k]) for k in ("with bytecode", "without (old)"))
    print(f"test run of a solved task (median of {args.rounds} rounds x {len(task_ids)} tasks):")
    print(f"  pytest's copy with its bytecode    {new * 1000:8.1f} ms")
    print(f"  without its bytecode (the old way) {old * 1000:8.1f} ms")
    print(f"ratio old/new: {old / new:.2f}x")


if __name__ == "__main__":
    main()
