"""Per-test-case latency and DeepCoder-MT episodes/s, before and after the sandbox hardening.

Both versions of the code are measured in this one run, in alternating rounds (before,
after, before, after, ...: a machine whose load drifts weighs on both alike): the tree at
``--before`` (default: the commit just before the hardening, found
through git) is extracted to a temp dir with ``git archive`` and measured in a child
interpreter with that tree first on its path; the working tree is measured the same way.
Each measures:

- the fast path: ``run_python_cases`` with a simple stdin program (read two ints, print
  the sum), one warm worker forking per case; per case as the worker times it, and as the
  host sees it (the whole call over the cases, worker start included);
- ``python3`` per case: ``run(["python3", "-c", ...])``, a fresh bwrap + interpreter per
  case (the obvious alternative);
- the same fast path on the Docker backend, when an engine with the image is here;
- DeepCoder-MT episodes/s: ``reset`` + one ``step`` with the task's reference solution
  over the bundled tasks (local sandbox, then Docker).

Prints p50/p99 of each (the rounds' samples pooled, never the best round), side by side,
and the ratios: by the worker's own time the fast path should stay at least 10x faster
than a fresh interpreter per case; the host's view adds the call's own costs and moves
most with the machine's load.

    python benchmarks/bench_sandbox_cases.py [--before REV]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROUNDS = 3
N_CASES = 100
N_FRESH = 20
N_DOCKER = 50
N_EPISODES = 15
N_EPISODES_DOCKER = 8

MEASURE = r"""
import json, sys, time
from agentenvs.sandbox import PyCase, make_sandbox
from agentenvs.sandbox.local import local_available

SOURCE = "a, b = map(int, input().split())\nprint(a + b)\n"
n_cases, n_fresh, n_docker, n_eps, n_eps_docker = map(int, sys.argv[1:6])
out = {}


def fast_path(box, n):
    cases = [PyCase("stdin", stdin=f"{i} {2 * i}\n") for i in range(n)]
    list(box.run_python_cases(SOURCE, cases[:2]))  # warm the page cache
    start = time.perf_counter()
    got = list(box.run_python_cases(SOURCE, cases))
    total = time.perf_counter() - start
    assert [r.stdout for r in got] == [f"{3 * i}\n" for i in range(n)], got[:3]
    return {"worker": [r.duration_s for r in got], "host_per_case": total / n}


def episodes(backend, n):
    from agentenvs.envs.deepcoder.env import DeepCoderMTEnv

    env = DeepCoderMTEnv(sandbox=backend)
    try:
        ids = [t for t in env.task_ids if env.task_set.tasks[t].reference][:n]
        ids = (ids * (n // max(len(ids), 1) + 1))[:n]
        env.reset(options={"task_id": ids[0]})
        env.step("```python\n" + env.reference + "\n```")  # open the sandbox
        start = time.perf_counter()
        solved = 0
        for tid in ids:
            env.reset(options={"task_id": tid})
            # a fresh program text each time, so no result cache answers for the sandbox
            code = env.reference + f"\n# episode {time.perf_counter_ns()}\n"
            _, reward, *_ = env.step("```python\n" + code + "\n```")
            solved += reward == 1.0
        return {"eps_per_s": n / (time.perf_counter() - start), "solved": solved, "n": n}
    finally:
        env.close()


ok, why = local_available()
if ok:
    with make_sandbox("local") as box:
        out["local"] = fast_path(box, n_cases)
        fresh = []
        for i in range(n_fresh):
            start = time.perf_counter()
            r = box.run(["python3", "-c", SOURCE], stdin=f"{i} {i}\n")
            fresh.append(time.perf_counter() - start)
            assert r.stdout == f"{2 * i}\n", r
        out["fresh"] = fresh
    out["eps_local"] = episodes("local", n_eps)
else:
    out["local_skip"] = why
try:
    from agentenvs.sandbox.docker import docker_available
    ok, why = docker_available()
except ImportError as exc:
    ok, why = False, str(exc)
if ok:
    try:  # a tree whose Docker backend fails here still gives its local figures
        with make_sandbox("docker") as box:
            out["docker"] = fast_path(box, n_docker)
        out["eps_docker"] = episodes("docker", n_eps_docker)
    except Exception as exc:  # noqa: BLE001
        out.pop("docker", None)
        out["docker_skip"] = f"failed: {type(exc).__name__}: {str(exc)[:200]}"
else:
    out["docker_skip"] = why
print("RESULT " + json.dumps(out))
"""


def before_hardening() -> str:
    """The parent of the commit that added the local sandbox's seccomp filter."""
    added = subprocess.run(
        [
            "git",
            "-C",
            str(ROOT),
            "log",
            "--diff-filter=A",
            "--format=%H",
            "--",
            "agentenvs/sandbox/_seccomp.py",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if not added:
        raise SystemExit("cannot find the hardening commit; pass --before REV")
    return added[-1] + "^"


def measure(tree: Path) -> dict:
    args = [str(n) for n in (N_CASES, N_FRESH, N_DOCKER, N_EPISODES, N_EPISODES_DOCKER)]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, *args],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    raise SystemExit(f"measurement failed in {tree}:\n{out.stderr[-3000:]}")


def merge(runs: list[dict]) -> dict:
    """The rounds of one side as one result: samples pooled, episodes/s over all episodes."""
    out: dict = {}
    for run in runs:
        for key, value in run.items():
            if key in ("local", "docker"):
                slot = out.setdefault(key, {"worker": [], "host_per_case": []})
                slot["worker"] += value["worker"]
                slot["host_per_case"].append(value["host_per_case"])
            elif key == "fresh":
                out.setdefault("fresh", []).extend(value)
            elif key.startswith("eps_"):
                slot = out.setdefault(key, {"secs": 0.0, "solved": 0, "n": 0})
                slot["secs"] += value["n"] / value["eps_per_s"]
                slot["solved"] += value["solved"]
                slot["n"] += value["n"]
                slot["eps_per_s"] = slot["n"] / slot["secs"]
            else:
                out[key] = value
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--before", help="the revision to compare with (default: before the hardening)"
    )
    args = parser.parse_args()
    rev = args.before or before_hardening()
    label = subprocess.run(
        ["git", "-C", str(ROOT), "log", "-1", "--format=%h %s", rev],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="agentenvs-bench-before-") as tmp:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", rev, "agentenvs", "tasks"],
            capture_output=True,
            check=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        rounds: dict[str, list[dict]] = {"before": [], "after": []}
        for _ in range(ROUNDS):
            rounds["before"].append(measure(Path(tmp)))
            rounds["after"].append(measure(ROOT))
        results = {side: merge(runs) for side, runs in rounds.items()}
    print(f"before: {label[:90]}\nafter:  the working tree\n")
    print(f"{'per case (ms)':<44}{'before p50/p99':>18}{'after p50/p99':>18}")

    def row(name: str, get) -> dict[str, float]:  # noqa: ANN001
        cells, p50s = [], {}
        for side in ("before", "after"):
            values = get(results[side])
            if values is None:
                cells.append(f"{'n/a':>18}")
                continue
            p50, p99 = pct(values, 0.5) * 1e3, pct(values, 0.99) * 1e3
            p50s[side] = p50
            cells.append(f"{p50:9.2f}/{p99:8.2f}")
        print(f"{name:<44}{cells[0]:>18}{cells[1]:>18}")
        return p50s

    fast = row("local fast path (worker's own time)", lambda r: r.get("local", {}).get("worker"))
    host = row(
        "local fast path (host: call / cases)",
        lambda r: r["local"]["host_per_case"] if "local" in r else None,
    )
    fresh = row("local python3 per case (bwrap + interp.)", lambda r: r.get("fresh"))
    row("docker fast path (worker's own time)", lambda r: r.get("docker", {}).get("worker"))
    row(
        "docker fast path (host: call / cases)",
        lambda r: r["docker"]["host_per_case"] if "docker" in r else None,
    )
    print()
    for side in ("before", "after"):
        if side in fresh and side in fast:
            print(
                f"{side}: python3-per-case / fast path: {fresh[side] / fast[side]:5.1f}x "
                f"(worker's time), {fresh[side] / host[side]:5.1f}x (host's time)"
            )
    print()
    for key, name in (("eps_local", "local"), ("eps_docker", "docker")):
        cells = []
        for side in ("before", "after"):
            e = results[side].get(key)
            cells.append(
                "n/a" if e is None else f"{e['eps_per_s']:.2f} ({e['solved']}/{e['n']} solved)"
            )
        print(f"DeepCoder-MT episodes/s, {name:<7} before {cells[0]:<24} after {cells[1]}")
    for side in ("before", "after"):
        for key in ("local_skip", "docker_skip"):
            if key in results[side]:
                print(f"{side}: {key.split('_')[0]} skipped: {results[side][key]}")


if __name__ == "__main__":
    main()
