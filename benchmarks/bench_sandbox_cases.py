"""Per-test-case latency of the sandbox fast path against starting an interpreter per case.

A simple stdin program (read two ints, print the sum) over 200 cases, three ways:

- fast path: ``run_python_cases`` in one local (bubblewrap) sandbox, a warm worker that
  forks per case (the per-case time is the worker's own measure; the call's total,
  worker start included, is printed too);
- ``python3`` per case: ``run(["python3", "-c", ...])`` in the same sandbox, a fresh
  bwrap + interpreter per case, timed from the host;
- ``docker run`` per case (fewer cases; they are slow), when a Docker engine with the
  sandbox image is available, else a note says why it was skipped.

Prints p50/p99 of each and the ratios measured in this run.
"""

from __future__ import annotations

import shutil
import subprocess
import time

from agentenvs.sandbox import PyCase, make_sandbox
from agentenvs.sandbox.local import local_available

SOURCE = "a, b = map(int, input().split())\nprint(a + b)\n"
N_CASES = 200
N_DOCKER = 20


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def show(name: str, secs: list[float]) -> tuple[float, float]:
    p50, p99 = pct(secs, 0.50) * 1e3, pct(secs, 0.99) * 1e3
    print(f"  {name:<34} p50 {p50:8.2f} ms   p99 {p99:8.2f} ms   (n={len(secs)})")
    return p50, p99


def docker_per_case(stdins: list[str]) -> list[float] | str:
    """Seconds per ``docker run --rm -i`` of the program, or why it cannot run."""
    try:
        from agentenvs.sandbox.docker import DEFAULT_IMAGE, docker_available
    except ImportError as exc:
        return f"docker backend not importable ({exc})"
    ok, why = docker_available()
    if not ok:
        return why
    if shutil.which("docker") is None:
        return "no docker CLI on PATH"
    argv = ["docker", "run", "--rm", "-i", "--network", "none", DEFAULT_IMAGE]
    argv += ["python3", "-c", SOURCE]
    secs = []
    for stdin in stdins:
        start = time.perf_counter()
        out = subprocess.run(argv, input=stdin.encode(), capture_output=True, timeout=120)
        secs.append(time.perf_counter() - start)
        assert out.stdout.decode() == f"{sum(map(int, stdin.split()))}\n", out.stderr
    return secs


def main() -> None:
    ok, why = local_available()
    if not ok:
        print(f"local sandbox unavailable: {why}")
        return
    stdins = [f"{i} {2 * i}\n" for i in range(N_CASES)]
    cases = [PyCase("stdin", stdin=s) for s in stdins]
    with make_sandbox("local") as box:
        list(box.run_python_cases(SOURCE, cases[:2]))  # warm the page cache
        start = time.perf_counter()
        results = list(box.run_python_cases(SOURCE, cases))
        total = time.perf_counter() - start
        assert [r.stdout for r in results] == [f"{3 * i}\n" for i in range(N_CASES)]
        fast = [r.duration_s for r in results]

        fresh = []
        for stdin in stdins:
            start = time.perf_counter()
            r = box.run(["python3", "-c", SOURCE], stdin=stdin)
            fresh.append(time.perf_counter() - start)
            assert r.stdout == f"{sum(map(int, stdin.split()))}\n", r

    print(f"Per-case latency, {N_CASES} simple stdin cases (read two ints, print the sum)")
    f50, f99 = show("fast path (fork per case)", fast)
    print(
        f"  {'fast path, whole call / case':<34} {total / N_CASES * 1e3:8.2f} ms"
        f"   (worker start included: {total * 1e3:.0f} ms for {N_CASES})"
    )
    p50, p99 = show("python3 per case (bwrap + interp.)", fresh)
    print(f"  ratio python3-per-case / fast path: p50 {p50 / f50:6.1f}x   p99 {p99 / f99:6.1f}x")
    docker = docker_per_case(stdins[:N_DOCKER])
    if isinstance(docker, str):
        print(f"  docker run per case: skipped ({docker})")
        return
    d50, d99 = show("docker run per case", docker)
    print(f"  ratio docker-run-per-case / fast path: p50 {d50 / f50:6.0f}x   p99 {d99 / f99:6.0f}x")


if __name__ == "__main__":
    main()
