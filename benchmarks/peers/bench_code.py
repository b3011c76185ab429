"""Code checking side by side: rLLM's code checker (the DeepCoder release's reward) vs
DeepCoder-MT's fast path (strict rules) and its ``rules="official"`` mode.

The same problems and programs on all three sides: the bundled DeepCoder-MT problems
(LiveCodeBench rows, stdin and call-based), each graded with its reference solution
(expected to pass), its known-wrong solution and its first mutant (expected to fail), and
the same problems written as TACO rows (``{inputs, outputs[, fn_name]}``, APPS-style
checker) and as PrimeIntellect rows (typed tests, the same APPS-style checker); the first ``--quirk-problems`` of each kind also with programs written here to
exercise the official checker's quirks (an exit or exception after a correct answer, deep
recursion, a rewrapped stdin; tuple, numpy and inner-tuple results), which count for the
agreement only. rLLM's side is its reward as DeepCoder's training calls it:
``rllm.rewards.code_reward.rllm_reward_fn_code(data_source, response, ground_truth)``
with the program in a fenced block; ours are the env's two graders on the same response.
The three sides grade each pair in turn, the side going first turning from pair to
pair. Prints the latency per (problem, program) of each side (p50 and total, per form),
the CPU time (rLLM: its process and the interpreters it starts; ours: this process, its
finished children and the live sandbox processes below it, from ``/proc``, whose own
reaped children count there), the ratios of p50s and of totals, and the verdict agreement between rLLM and ``rules="official"`` (they must
agree), listing any disagreement.

Where rLLM comes from: an installed ``rllm`` package, else a source tree given by
``--rllm-src PATH`` or ``$AGENTENVS_RLLM_SRC`` (a checkout of rllm-org/rllm; the DeepCoder
release is commit ``aba20b14``). rLLM publishes no distribution that pip installs here,
so without either the script says so and stops. The checker runs in an interpreter of
its own, ``--rllm-python`` or ``$AGENTENVS_RLLM_PYTHON`` (default: this one): at the
DeepCoder release it needs Python 3.10 or older and numpy, pandas and psutil, e.g.
``python3.10 -m venv V && V/bin/pip install numpy pandas psutil``. There
``rllm_code_peer.py`` imports only the checker's modules (``rllm.rewards.code_reward``
and what it imports); the ``__init__`` of ``rllm.tools`` and ``rllm.tools.code_tools``,
which import every tool's client library (e2b, search APIs), is not run: those two
packages are entered as plain namespaces over their real folders, so ``code_reward``'s
import of its remote code tool class (unused unless asked for) loads only that class's
own module.

rLLM runs programs on the host, unsandboxed (its own guard only blanks some ``os``
functions in the child process): this script gives it only the bundled programs, their
mutants and the harmless quirk programs written here, runs it with a temporary directory of its own as working and temporary
directory (its APPS checker writes and deletes ``input.txt``/``output.txt`` in the
working directory and leaves its temporary scripts behind), and removes that directory
afterwards. Our sides run in the ``local`` sandbox (or ``--sandbox docker``).

Usage: python benchmarks/peers/bench_code.py --rllm-src PATH --rllm-python PY310
       [--problems N] [--taco-problems N] [--pi-problems N] [--quirk-problems N]
       [--sandbox local]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentenvs.core.tasks import task_path
from agentenvs.envs.deepcoder import official
from agentenvs.envs.deepcoder.checker import NOT_RUN, judge
from agentenvs.envs.deepcoder.data import BUNDLED_FILE, WRONG_SOLUTIONS_FILE, CodeTask, parse_row
from agentenvs.envs.deepcoder.lcb import prepare_program
from agentenvs.envs.deepcoder.mutate import mutants
from agentenvs.sandbox import make_sandbox
from agentenvs.sandbox.base import Limits, PyCase

CHECKER = Path("rllm", "rewards", "code_reward.py")
#: packages between the checker and what it imports whose __init__ pulls every tool's
#: client library; entered as namespaces over their real folders instead
SKIP_INIT = ("rllm.tools", "rllm.tools.code_tools")


# ---------------------------------------------------------------------- finding rLLM
def find_rllm(src: str | None) -> tuple[Path | None, str]:
    """(folder to put on sys.path, how it was found) or (None, why not)."""
    spec = importlib.util.find_spec("rllm")
    if spec is not None and spec.submodule_search_locations:
        for loc in spec.submodule_search_locations:
            root = Path(loc).parent
            if (root / CHECKER).is_file():
                return root, f"installed package at {loc}"
    src = src or os.environ.get("AGENTENVS_RLLM_SRC")
    if not src:
        why = (
            "no 'rllm' package installed (rLLM publishes no distribution pip installs here) "
            "and no source tree given: pass --rllm-src PATH or set AGENTENVS_RLLM_SRC to a "
            "checkout of rllm-org/rllm (the DeepCoder release: commit aba20b14)"
        )
        if spec is not None:
            why = f"the installed 'rllm' package has no {CHECKER.as_posix()}; " + why
        return None, why
    root = Path(src).expanduser().resolve()
    if not (root / CHECKER).is_file():
        return None, f"{root} holds no {CHECKER.as_posix()} (is it a checkout of rllm-org/rllm?)"
    return root, f"source tree {root}{_revision(root)}"


def _revision(root: Path) -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=8", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return f" (commit {out.stdout.strip()})" if out.returncode == 0 and out.stdout.strip() else ""


class Peer:
    """``rllm_code_peer.py`` under the interpreter rLLM needs, in a scratch directory."""

    def __init__(self, python: str, root: Path, scratch: Path) -> None:
        env = dict(os.environ, TMPDIR=str(scratch))
        # rLLM's APPS checker starts `python3` from PATH per stdin test: rLLM's own
        # interpreter, which has the numpy and pandas its preamble imports
        env["PATH"] = os.pathsep.join([str(Path(python).parent), env.get("PATH", "")])
        env.pop("PYTHONPATH", None)
        self.proc = subprocess.Popen(
            [python, str(Path(__file__).with_name("rllm_code_peer.py")), str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=scratch,
            env=env,
        )
        self.hello = self._answer()

    def _answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            return {"error": f"the peer process ended (exit {self.proc.wait()})"}
        return json.loads(line)

    def grade(self, case: Case) -> dict[str, Any]:
        assert self.proc.stdin is not None
        request = {
            "data_source": case.data_source,
            "response": case.response,
            "ground_truth": case.ground_truth,
        }
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return self._answer()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.write("\n")
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# ---------------------------------------------------------------------- workload
@dataclass
class Case:
    """One (problem, program) pair in one source form, as both sides receive it."""

    form: str
    task: CodeTask
    program: str  # "reference", "wrong", "mutant"
    code: str
    data_source: str
    ground_truth: Any
    times: dict[str, float] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)
    verdicts: dict[str, bool] = field(default_factory=dict)
    detail: str = ""

    @property
    def response(self) -> str:
        return f"Here is my solution.\n\n```python\n{self.code}\n```\n"


def _bundled_rows() -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    path = task_path(*BUNDLED_FILE)
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    wrong: dict[str, list[str]] = {}
    for line in (path.parent / WRONG_SOLUTIONS_FILE).read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            wrong.setdefault(record["id"], []).append(record["source"])
    return rows, wrong


#: programs written here that exercise the official checker's documented quirks (see
#: docs/deepcoder.md): the reference with a twist that one grader accepts and another
#: does not. Harmless on purpose: rLLM runs them on the host.
STDIN_QUIRKS: dict[str, Callable[[str], str]] = {
    "exit(1) after": lambda ref: ref.rstrip("\n") + "\nimport sys\nsys.exit(1)\n",
    "raise after": lambda ref: ref.rstrip("\n") + "\nraise RuntimeError('after the answer')\n",
    "recursion 3000": lambda ref: (
        "def _depth(n):\n    return 0 if n == 0 else 1 + _depth(n - 1)\n\n\n_depth(3000)\n" + ref
    ),
    "stdin.buffer": lambda ref: (
        "import io\nimport sys\nsys.stdin = io.TextIOWrapper(sys.stdin.buffer)\n" + ref
    ),
}
CALL_QUIRKS: dict[str, str] = {
    "tuple result": "tuple(r) if isinstance(r, list) else r",
    "numpy int": "__import__('numpy').int64(r) if type(r) is int else r",
    "inner tuples": "[tuple(x) for x in r] if isinstance(r, list) and r and "
    "all(isinstance(x, list) for x in r) else r",
}


def _call_quirk(ref: str, func_name: str, convert: str) -> str:
    """The reference with its result passed through ``convert`` (of ``r``)."""
    target = f"Solution.{func_name}" if "class Solution" in ref else func_name
    return (
        f"{ref.rstrip()}\n\n\n_inner = {target}\n\n\n"
        f"def _outer(*args):\n    r = _inner(*args)\n    return {convert}\n\n\n"
        f"{target} = _outer\n"
    )


PLAIN = ("reference", "wrong", "mutant")


def _programs(task: CodeTask, wrong: list[str], quirks: bool) -> Iterator[tuple[str, str]]:
    reference = task.reference or ""
    yield "reference", reference
    if wrong:
        yield "wrong", wrong[0]
    for _, text in mutants(reference):
        yield "mutant", text
        break
    if not quirks:
        return
    if task.func_name is None:
        for name, make in STDIN_QUIRKS.items():
            yield name, make(reference)
    else:
        for name, convert in CALL_QUIRKS.items():
            yield name, _call_quirk(reference, task.func_name, convert)


def _lcb_tests(tests: list[dict[str, Any]], func_name: str | None) -> list[dict[str, Any]]:
    """LiveCodeBench tests as rLLM's data holds them: a functional test names its
    function in its own ``metadata`` (where rLLM's reward looks for it)."""
    if func_name is None:
        return tests
    return [{**t, "metadata": {**t.get("metadata", {}), "func_name": func_name}} for t in tests]


def _taco_tests(task: CodeTask) -> dict[str, Any]:
    """The same tests as a TACO row: stdin text, or argument lists and wrapped results."""
    if task.func_name is None:
        return {"inputs": [t.input for t in task.tests], "outputs": [t.output for t in task.tests]}
    return {
        "fn_name": task.func_name,
        "inputs": [list(t.args) for t in task.tests],
        "outputs": [[t.accepted[0]] for t in task.tests],
    }


def _pi_tests(task: CodeTask) -> list[dict[str, Any]]:
    """The same tests as a PrimeIntellect row: typed tests, a call's result wrapped."""
    if task.func_name is None:
        return [{"type": "stdin_stdout", "input": t.input, "output": t.output} for t in task.tests]
    return [
        {
            "type": "function_call",
            "fn_name": task.func_name,
            "input": list(t.args),
            "output": [t.accepted[0]],
        }
        for t in task.tests
    ]


def workload(
    per_kind: int, taco_per_kind: int, quirk_per_kind: int, pi_per_kind: int = 0
) -> list[Case]:
    rows, wrong = _bundled_rows()
    cases: list[Case] = []
    counts = {"stdin": 0, "call": 0}
    taco_counts = {"stdin": 0, "call": 0}
    pi_counts = {"stdin": 0, "call": 0}
    for row in rows:
        base = parse_row(row, f"{BUNDLED_FILE[1]}:{row['id']}", row["id"])
        kind = base.tests[0].kind
        want_lcb = per_kind <= 0 or counts[kind] < per_kind
        want_taco = taco_counts[kind] < taco_per_kind
        want_pi = pi_counts[kind] < pi_per_kind
        if not (want_lcb or want_taco or want_pi) or base.reference is None:
            continue
        quirks = counts[kind] < quirk_per_kind
        programs = list(_programs(base, wrong.get(base.id, []), quirks))
        if want_lcb:
            counts[kind] += 1
            tests = _lcb_tests(json.loads(row["tests"]), base.func_name)
            lcb_row = {**row, "tests": json.dumps(tests), "data_source": "livecodebench"}
            task = parse_row(lcb_row, f"{BUNDLED_FILE[1]}:{row['id']}", row["id"])
            for name, code in programs:
                cases.append(Case(f"LCB {kind}", task, name, code, "livecodebench", tests))
        if want_taco:
            taco_counts[kind] += 1
            tests = _taco_tests(base)
            taco_row = {**row, "tests": json.dumps(tests), "data_source": "taco"}
            task = parse_row(taco_row, f"{BUNDLED_FILE[1]}:{row['id']}", row["id"])
            for name, code in programs:
                cases.append(Case(f"TACO {kind}", task, name, code, "taco", tests))
        if want_pi:
            pi_counts[kind] += 1
            pi = _pi_tests(base)
            pi_row = {**row, "tests": json.dumps(pi), "data_source": "primeintellect"}
            task = parse_row(pi_row, f"{BUNDLED_FILE[1]}:{row['id']}", row["id"])
            for name, code in programs:
                cases.append(Case(f"PI {kind}", task, name, code, "primeintellect", pi))
    return cases


# ---------------------------------------------------------------------- the three sides
def strict_verdict(box: Any, task: CodeTask, response: str) -> tuple[bool, str]:
    """The env's default grader: the program run per test in the sandbox, stop at the
    first failure."""
    from agentenvs.envs.deepcoder.checker import extract_code

    code, _ = extract_code(response)
    if code is None:
        return False, "no code"
    program, offset = prepare_program(code)
    cases = [
        PyCase("stdin", stdin=t.input)
        if t.kind == "stdin"
        else PyCase("call", func=task.func_name or "", args=t.args)
        for t in task.tests
    ]
    runs = box.run_python_cases(program, cases, timeout_per_case=official.default_timeout(task))
    try:
        for test, run in zip(task.tests, runs, strict=False):
            outcome = judge(test, run, line_offset=offset)
            if not outcome.passed:
                return False, f"{outcome.verdict}: {outcome.error_message or ''}"[:160]
    finally:
        close = getattr(runs, "close", None)
        if close is not None:
            close()
    return True, ""


def official_verdict(box: Any, task: CodeTask, response: str) -> tuple[bool, str]:
    """``rules="official"``: what the env's official mode rewards."""
    code = official.extract_code(response)
    if code is None:
        return False, official.NO_CODE_MESSAGE
    outcomes = official.execute(box, task, code)
    if official.passed_all(task, outcomes):
        return True, ""
    failed = next((o for o in outcomes if not o.passed and o is not NOT_RUN), None)
    why = f"{failed.verdict}: {failed.error_message or ''}" if failed else "a test did not run"
    return False, why[:160]


def tree_cpu() -> float:
    """CPU seconds of this process, its reaped children, and every live process below it
    with the children each has reaped (the sandbox's worker and what it forks)."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    total = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    stats: dict[int, tuple[int, float]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            ticks = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
            stats[int(entry.name)] = (int(fields[1]), ticks / os.sysconf("SC_CLK_TCK"))
    below, todo = 0.0, [os.getpid()]
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    while todo:
        for child in children.get(todo.pop(), []):
            below += stats[child][1]
            todo.append(child)
    return total + below


def timed(fn: Callable[[], tuple[bool, str]]) -> tuple[bool, str, float, float]:
    c0, start = tree_cpu(), time.perf_counter()
    ok, why = fn()
    took = time.perf_counter() - start
    return ok, why, took, tree_cpu() - c0


# ---------------------------------------------------------------------- report
def report(cases: list[Case]) -> None:
    sides = ("rllm", "strict", "official")
    print(
        f"\n{'form':<11} {'programs':>8} | {'p50 ms: rLLM':>12} {'strict':>7} {'official':>8} | "
        f"{'total s: rLLM':>13} {'strict':>7} {'official':>8} | {'CPU s: rLLM':>11} "
        f"{'strict':>7} {'official':>8} | {'rLLM/strict':>11} {'rLLM/official':>13}"
    )
    forms = list(dict.fromkeys(c.form for c in cases)) + ["all"]
    for form in forms:
        group = [c for c in cases if form in ("all", c.form) and c.program in PLAIN]
        p50 = {s: statistics.median(c.times[s] for c in group) * 1e3 for s in sides}
        total = {s: sum(c.times[s] for c in group) for s in sides}
        used = {s: sum(c.cpu[s] for c in group) for s in sides}
        print(
            f"{form:<11} {len(group):>8} | {p50['rllm']:>12.0f} {p50['strict']:>7.0f} "
            f"{p50['official']:>8.0f} | {total['rllm']:>13.2f} {total['strict']:>7.2f} "
            f"{total['official']:>8.2f} | {used['rllm']:>11.2f} {used['strict']:>7.2f} "
            f"{used['official']:>8.2f} | "
            f"{p50['rllm'] / p50['strict']:>4.1f}x/{total['rllm'] / total['strict']:.1f}x "
            f"{p50['rllm'] / p50['official']:>6.1f}x/{total['rllm'] / total['official']:.1f}x"
        )
    print(
        "(reference, wrong and mutant programs; ratios: rLLM's p50/total over ours, above 1x "
        f"ours is faster; load average {os.getloadavg()[0]:.1f})"
    )
    print("\nVerdicts (pass/fail), rLLM vs rules='official' (must agree) and vs strict:")
    for form in forms:
        group = [c for c in cases if form in ("all", c.form)]
        agree = sum(c.verdicts["rllm"] == c.verdicts["official"] for c in group)
        strict_agree = sum(c.verdicts["rllm"] == c.verdicts["strict"] for c in group)
        passed = sum(c.verdicts["rllm"] for c in group)
        print(
            f"{form:<11} {agree:>3}/{len(group)} agree with official, "
            f"{strict_agree:>3}/{len(group)} with strict; rLLM passes {passed}"
        )
    for c in cases:
        if c.verdicts["rllm"] != c.verdicts["official"]:
            print(
                f"  DISAGREE {c.form} {c.task.id} {c.program}: rLLM "
                f"{'pass' if c.verdicts['rllm'] else 'fail'} ({c.detail or 'no message'}), "
                f"official {'pass' if c.verdicts['official'] else 'fail'}"
            )
    for c in cases:
        if c.verdicts["rllm"] != c.verdicts["strict"]:
            print(
                f"  strict differs (a documented strict rule): {c.form} {c.task.id} "
                f"{c.program}: rLLM {'pass' if c.verdicts['rllm'] else 'fail'}, strict "
                f"{'pass' if c.verdicts['strict'] else 'fail'}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rllm-src", help="a checkout of rllm-org/rllm (or $AGENTENVS_RLLM_SRC)")
    parser.add_argument(
        "--rllm-python",
        default=os.environ.get("AGENTENVS_RLLM_PYTHON", sys.executable),
        help="the interpreter rLLM's checker runs under: Python <= 3.10 with numpy, pandas "
        "and psutil (or $AGENTENVS_RLLM_PYTHON; default: this one)",
    )
    parser.add_argument(
        "--problems", type=int, default=8, help="LiveCodeBench problems of each kind (0: all)"
    )
    parser.add_argument(
        "--taco-problems",
        type=int,
        default=3,
        help="problems of each kind also written as TACO rows (rLLM starts an interpreter "
        "per stdin test there: seconds a program)",
    )
    parser.add_argument(
        "--pi-problems",
        type=int,
        default=3,
        help="problems of each kind also written as PrimeIntellect rows (typed tests)",
    )
    parser.add_argument(
        "--quirk-problems",
        type=int,
        default=2,
        help="problems of each kind also graded with programs written to exercise the "
        "official checker's quirks",
    )
    parser.add_argument("--sandbox", default="local")
    args = parser.parse_args()
    root, how = find_rllm(args.rllm_src)
    if root is None:
        print(f"rLLM code checker: skipped ({how})")
        return
    cases = workload(args.problems, args.taco_problems, args.quirk_problems, args.pi_problems)
    with tempfile.TemporaryDirectory(prefix="agentenvs-bench-rllm-") as scratch:
        peer = Peer(args.rllm_python, root, Path(scratch))
        try:
            if "error" in peer.hello:
                print(
                    f"rLLM code checker: skipped (its checker from {how} does not load under "
                    f"{args.rllm_python}: {peer.hello['error']}; at the DeepCoder release it "
                    "needs Python <= 3.10 with numpy, pandas and psutil: --rllm-python)"
                )
                return
            print(
                f"rLLM code checker: {how}, under Python {peer.hello['python']} "
                f"({args.rllm_python}); not run: {', '.join(n + '.__init__' for n in SKIP_INIT)}"
            )
            print(
                f"{len(cases)} (problem, program) pairs: the bundled problems' reference, "
                "known-wrong and mutant programs, and quirk programs; ours in the "
                f"{args.sandbox} sandbox"
            )
            run_all(peer, cases, args.sandbox)
        finally:
            peer.close()
    report(cases)


def run_all(peer: Peer, cases: list[Case], sandbox: str) -> None:
    with make_sandbox(sandbox, limits=Limits(memory_mb=4096, cpu_seconds=3600)) as box:
        # warm each side once (imports, the sandbox's worker) outside the figures
        first = cases[0]
        peer.grade(first)
        strict_verdict(box, first.task, first.response)
        official_verdict(box, first.task, first.response)
        official_why = ""
        for i, case in enumerate(cases):
            order = ("rllm", "strict", "official")
            for side in order[i % 3 :] + order[: i % 3]:  # who goes first turns
                if side == "rllm":
                    answer = peer.grade(case)
                    if "error" in answer:
                        raise SystemExit(f"rLLM's side failed on {case.task.id}: {answer['error']}")
                    case.verdicts["rllm"], case.times["rllm"] = answer["ok"], answer["seconds"]
                    case.cpu["rllm"] = answer["cpu"]
                    case.detail = answer["said"]
                else:
                    grade = strict_verdict if side == "strict" else official_verdict
                    ok, why, t, used = timed(lambda c=case, g=grade: g(box, c.task, c.response))
                    case.verdicts[side], case.times[side], case.cpu[side] = ok, t, used
                    if side == "official":
                        official_why = why
            if case.verdicts["official"] != case.verdicts["rllm"]:
                case.detail = f"{case.detail or 'no message'}; official: {official_why or 'pass'}"


if __name__ == "__main__":
    main()
