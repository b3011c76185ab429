"""The bounded copy of a Terminal-Bench end state against the unbounded copy it replaced.

On the local runtime, the end state of ``word-frequency`` after its oracle (a normal task's
end state): the freeze's copy of the sandbox's writable dirs and a snapshot's copy of
``/app``, each as now (an fd walk measuring the tree first, then ``tar --sparse`` read up
to what was measured) and as before (``tar -c`` read whole). Both run in this process, in
the same sandbox, alternately; best of ``ROUNDS``. Prints the times and their ratio.

    .venv/bin/python benchmarks/bench_bounded_copy.py
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

from agentenvs.envs.terminal import runtime_local
from agentenvs.envs.terminal.env import TerminalBenchEnv

ROUNDS = 30


def unbounded_tar(args: list[str]) -> bytes:
    """The copy as it was: the host's ``tar -c`` read whole, no measure, no ``--sparse``."""
    return subprocess.run(
        ["tar", "-c", *args], stdin=subprocess.DEVNULL, capture_output=True, check=False
    ).stdout


def best_ms(fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(ROUNDS):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def main() -> None:
    env = TerminalBenchEnv(runtime="local", command_timeout=60)
    try:
        env.reset(options={"task_id": "word-frequency"})
        env.step(env.oracle_action())
        shell, runtime = env.shell, env.runtime()
        root = runtime_local._namespace_root(shell)
        state_args = [
            "--format=posix",
            "--numeric-owner",
            "--ignore-failed-read",
            "--anchored",
            "--exclude=./logs/verifier",
            "--exclude=logs/verifier",
            "-C",
            root,
            *runtime_local.STATE_DIRS,
        ]
        dir_args = [
            "--format=posix",
            "--pax-option=delete=atime,delete=ctime",
            "--sort=name",
            "--numeric-owner",
            "-C",
            root + "/",
            "app",
        ]
        cases = {
            "freeze (end state)": (
                lambda: runtime_local._read_state(shell),
                lambda: unbounded_tar(state_args),
            ),
            "snapshot (/app)": (
                lambda: runtime.read_dir(shell, "/app"),
                lambda: unbounded_tar(dir_args),
            ),
        }
        print(f"word-frequency end state, local runtime, best of {ROUNDS}")
        for name, (bounded, unbounded) in cases.items():
            size = len(bounded())
            new, old = best_ms(bounded), best_ms(unbounded)
            print(
                f"{name:20s} bounded {new:7.2f} ms  unbounded {old:7.2f} ms  "
                f"ratio {new / old:5.2f}x  ({size} bytes)"
            )
    finally:
        env.close()


if __name__ == "__main__":
    main()
