"""What a cgroup per local sandbox costs: sandbox start, a command, a test case.

Both arms run in this one process, in alternating rounds (a machine whose load drifts
weighs on both alike): ``cgroup`` makes each sandbox's cgroup (memory, pids, CPU) and
joins every process to it before bwrap runs; ``rlimits`` is the same sandbox with the
per-process limits alone (what ``AGENTENVS_CGROUP=off`` chooses). Each round measures:

- ``start``: ``LocalSandbox()`` + its first ``run(["true"])`` + ``close()`` (a reset of a
  DeepCoder-MT or Terminal-Bench episode that opens a sandbox pays this);
- ``run``: one ``run(["true"])`` in an open sandbox (a Terminal-Bench command's floor);
- ``case``: one test case through the warm worker (``run_python_cases``, DeepCoder-MT's
  grading path), per case over a batch.

Prints the median of each and the ratio cgroup / rlimits.

    python benchmarks/bench_sandbox_cgroup.py [--rounds N]
"""

from __future__ import annotations

import argparse
import statistics
import time

from agentenvs.sandbox import _cgroup
from agentenvs.sandbox.base import Limits, PyCase
from agentenvs.sandbox.local import LocalSandbox

SOURCE = "a, b = map(int, input().split())\nprint(a + b)\n"


def measure(n_start: int, n_run: int, n_cases: int) -> dict[str, float]:
    starts = []
    for _ in range(n_start):
        t = time.perf_counter()
        box = LocalSandbox(Limits())
        box.run(["true"])
        box.close()
        starts.append(time.perf_counter() - t)
    box = LocalSandbox(Limits())
    try:
        box.run(["true"])
        runs = []
        for _ in range(n_run):
            t = time.perf_counter()
            box.run(["true"])
            runs.append(time.perf_counter() - t)
        cases = [PyCase("stdin", stdin=f"{i} {i}\n") for i in range(n_cases)]
        list(box.run_python_cases(SOURCE, cases[:2]))
        t = time.perf_counter()
        got = list(box.run_python_cases(SOURCE, cases))
        per_case = (time.perf_counter() - t) / n_cases
        assert [r.stdout for r in got] == [f"{2 * i}\n" for i in range(n_cases)]
    finally:
        box.close()
    return {"start": statistics.median(starts), "run": statistics.median(runs), "case": per_case}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    found = _cgroup.hierarchy()
    if found.version == 0:
        raise SystemExit(f"no cgroup for sandboxes on this host: {found.why}")
    off = _cgroup._Hierarchy(0, {}, "measured without")
    results: dict[str, list[dict[str, float]]] = {"cgroup": [], "rlimits": []}
    for _ in range(args.rounds):
        for arm, h in (("rlimits", off), ("cgroup", found)):
            _cgroup._hierarchy_cache = h
            box = LocalSandbox(Limits())
            assert (box.scope.kind == "rlimits") == (arm == "rlimits"), box.scope
            box.close()
            results[arm].append(measure(8, 20, 100))
    _cgroup._hierarchy_cache = found
    print(f"cgroup v{found.version}, {args.rounds} alternating rounds (medians of the rounds)")
    print(f"{'':8} {'rlimits':>12} {'cgroup':>12} {'ratio':>7}")
    for key, unit in (("start", "ms"), ("run", "ms"), ("case", "ms")):
        a = statistics.median(r[key] for r in results["rlimits"]) * 1e3
        b = statistics.median(r[key] for r in results["cgroup"]) * 1e3
        print(f"{key:8} {a:10.2f}{unit} {b:10.2f}{unit} {b / a:6.2f}x")


if __name__ == "__main__":
    main()
