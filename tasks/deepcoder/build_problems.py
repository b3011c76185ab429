#!/usr/bin/env python3
"""Build and check the bundled DeepCoder-style programming problems.

Every problem lives in ``src/dc_NNN.py`` as a small module with:

* ``ID`` (``"dc-NNN"``), ``KIND`` (``"stdin"``, ``"function"`` or ``"method"``),
  ``DIFFICULTY`` (``"easy"``, ``"medium"`` or ``"hard"``);
* ``STATEMENT``: the Markdown statement without its example (the example is
  appended from the first test, with the output produced by the reference);
* ``STARTER`` and ``FUNC_NAME`` for call-based problems (``"function"``: a plain
  ``def``; ``"method"``: a method of ``class Solution``);
* ``REFERENCE``: the reference solution source, ``WRONG``: a deliberately
  wrong solution (an off-by-one, a missed edge case, ...);
* ``inputs(rng)``: the test inputs, from a ``random.Random`` seeded with the id.
  stdin problems return strings; call-based problems return lists of arguments.

Building runs the reference on every input in a fresh subprocess (stdin problems
with the input on standard input; call-based problems by executing the source,
calling ``Solution().<name>`` or ``<name>`` with the decoded arguments and
printing the JSON of the result, so tuples become lists) and writes, in id order
with sorted keys:

* ``problems.jsonl``: ``{"id", "problem", "tests", "starter_code", "metadata"}``
  in the DeepCoder-Preview row format: ``tests`` is a JSON string of
  ``[{"input", "output", "testtype"}]`` (LiveCodeBench style; functional inputs
  are newline-separated JSON arguments, outputs the JSON of the return value),
  ``metadata`` a JSON string of ``{"func_name", "difficulty", "reference"}``;
* ``wrong_solutions.jsonl``: ``{"id", "source"}``.

``--check`` rebuilds in memory and verifies that the files on disk are
up to date, that every JSON string decodes, ids are unique, each problem has at
least 10 tests, every reference passes all its tests (stdin: line by line after
stripping, same line count; call-based: ``==`` after a JSON round trip) within
1 s per test, and every wrong solution fails at least one test.

Usage:
    python tasks/deepcoder/build_problems.py            # write the files
    python tasks/deepcoder/build_problems.py --check    # verify (exit 1 on any problem)
    python tasks/deepcoder/build_problems.py --only dc-003 dc-010 --check
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import random
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.dont_write_bytecode = True  # keep src/ free of __pycache__

HERE = Path(__file__).resolve().parent
SRC = HERE / "src"
PROBLEMS = HERE / "problems.jsonl"
WRONG = HERE / "wrong_solutions.jsonl"
PY = sys.executable
RUN_TIMEOUT_S = 20.0
MAX_REFERENCE_S = 1.0
MIN_TESTS = 10
MAX_ROW_BYTES = {"easy": 25_000, "medium": 30_000, "hard": 80_000}
MAX_FILE_BYTES = 2_000_000
KINDS = ("stdin", "function", "method")
DIFFICULTIES = ("easy", "medium", "hard")

CALL_RUNNER = r"""
import json, sys
payload = json.loads(sys.stdin.read())
ns = {"__name__": "solution"}
exec(compile(payload["source"], "<solution>", "exec"), ns)
args = [json.loads(line) for line in payload["input"].split("\n")]
name = payload["func_name"]
cls = ns.get("Solution")
fn = getattr(cls(), name) if cls is not None and hasattr(cls, name) else ns[name]
sys.stdout.write(json.dumps(fn(*args)))
"""


# ---------------------------------------------------------------- loading

def load_defs(only: set[str] | None = None) -> list:
    defs = []
    for path in sorted(SRC.glob("dc_*.py")):
        spec = importlib.util.spec_from_file_location(f"_deepcoder_{path.stem}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        if only and mod.ID not in only:
            continue
        defs.append(mod)
    defs.sort(key=lambda m: m.ID)
    return defs


def param_names(mod) -> list[str]:
    tree = ast.parse(mod.STARTER + "pass\n")
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == mod.FUNC_NAME:
            names = [a.arg for a in node.args.args]
            return names[1:] if mod.KIND == "method" else names
    raise ValueError(f"{mod.ID}: starter does not define {mod.FUNC_NAME}")


def encode_inputs(mod) -> list[str]:
    rng = random.Random(f"deepcoder:{mod.ID}")
    raw = mod.inputs(rng)
    if mod.KIND == "stdin":
        return [s if s.endswith("\n") else s + "\n" for s in raw]
    return ["\n".join(json.dumps(arg) for arg in args) for args in raw]


# ---------------------------------------------------------------- running

def run(source: str, kind: str, func_name: str | None, inp: str):
    """Returns (stdout or None, error text, seconds)."""
    t0 = time.perf_counter()
    try:
        if kind == "stdin":
            proc = subprocess.run([PY, "-c", source], input=inp, capture_output=True,
                                  text=True, timeout=RUN_TIMEOUT_S)
        else:
            payload = json.dumps({"source": source, "func_name": func_name, "input": inp})
            proc = subprocess.run([PY, "-c", CALL_RUNNER], input=payload, capture_output=True,
                                  text=True, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, "timeout", time.perf_counter() - t0
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        return None, proc.stderr.strip()[-500:], dt
    return proc.stdout, "", dt


def same_output(kind: str, expected: str, actual: str | None) -> bool:
    if actual is None:
        return False
    if kind == "stdin":
        e = expected.strip().split("\n")
        a = actual.strip().split("\n")
        return len(e) == len(a) and all(x.strip() == y.strip() for x, y in zip(e, a))
    try:
        return json.loads(expected) == json.loads(actual)
    except ValueError:
        return False


def pmap(fn, items):
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        return list(pool.map(fn, items))


# ---------------------------------------------------------------- building

def render_example(mod, test: dict) -> str:
    if mod.KIND == "stdin":
        return ("**Example**\n\nInput:\n\n```\n" + test["input"].rstrip("\n") + "\n```\n\n"
                "Output:\n\n```\n" + test["output"].rstrip("\n") + "\n```\n")
    args = test["input"].split("\n")
    call = ", ".join(f"{n} = {a}" for n, a in zip(param_names(mod), args))
    return ("**Example**\n\n```\nInput: " + call + "\nOutput: " + test["output"] + "\n```\n")


def build(defs) -> tuple[list[dict], list[dict], dict]:
    """Returns (problem rows, wrong rows, {id: max reference seconds}); raises on a failing reference."""
    jobs = []
    for mod in defs:
        for i, inp in enumerate(encode_inputs(mod)):
            jobs.append((mod, i, inp))
    results = pmap(lambda j: run(j[0].REFERENCE, j[0].KIND, getattr(j[0], "FUNC_NAME", None), j[2]), jobs)
    tests: dict[str, list] = {m.ID: [] for m in defs}
    slowest: dict[str, float] = {m.ID: 0.0 for m in defs}
    for (mod, i, inp), (out, err, dt) in zip(jobs, results):
        if out is None:
            raise RuntimeError(f"{mod.ID} test {i}: reference failed: {err}")
        if mod.KIND != "stdin":
            out = json.dumps(json.loads(out))
        testtype = "stdin" if mod.KIND == "stdin" else "functional"
        tests[mod.ID].append({"input": inp, "output": out, "testtype": testtype})
        slowest[mod.ID] = max(slowest[mod.ID], dt)
    rows, wrong = [], []
    for mod in defs:
        func_name = None if mod.KIND == "stdin" else mod.FUNC_NAME
        problem = mod.STATEMENT.strip() + "\n\n" + render_example(mod, tests[mod.ID][0])
        meta = {"func_name": func_name, "difficulty": mod.DIFFICULTY,
                "reference": mod.REFERENCE.strip("\n") + "\n"}
        rows.append({
            "id": mod.ID,
            "problem": problem,
            "tests": json.dumps(tests[mod.ID], sort_keys=True),
            "starter_code": "" if mod.KIND == "stdin" else mod.STARTER,
            "metadata": json.dumps(meta, sort_keys=True),
        })
        wrong.append({"id": mod.ID, "source": mod.WRONG.strip("\n") + "\n"})
    return rows, wrong, slowest


def dumps_jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rows)


# ---------------------------------------------------------------- checking

def check(defs, rows, wrong, slowest, partial: bool) -> tuple[list[str], dict[str, int]]:
    errors = []
    if not partial:
        for path, rs in ((PROBLEMS, rows), (WRONG, wrong)):
            if not path.exists() or path.read_text(encoding="utf-8") != dumps_jsonl(rs):
                errors.append(f"{path.name} is not up to date (run build_problems.py)")
    ids = [r["id"] for r in rows]
    total = len(dumps_jsonl(rows).encode("utf-8"))
    if total > MAX_FILE_BYTES:
        errors.append(f"problems.jsonl would be {total} bytes (> {MAX_FILE_BYTES})")
    if len(set(ids)) != len(ids):
        errors.append("duplicate ids")
    by_id = {m.ID: m for m in defs}
    jobs = []
    for row in rows:
        mod = by_id[row["id"]]
        try:
            tests = json.loads(row["tests"])
            meta = json.loads(row["metadata"])
        except ValueError as exc:
            errors.append(f"{row['id']}: JSON string does not decode: {exc}")
            continue
        if mod.KIND not in KINDS or meta["difficulty"] not in DIFFICULTIES:
            errors.append(f"{row['id']}: bad kind or difficulty")
        size = len(dumps_jsonl([row]).encode("utf-8"))
        if size > MAX_ROW_BYTES.get(meta["difficulty"], 0):
            errors.append(f"{row['id']}: row is {size} bytes (limit for {meta['difficulty']})")
        if len(tests) < MIN_TESTS:
            errors.append(f"{row['id']}: only {len(tests)} tests")
        if len({t['input'] for t in tests}) != len(tests):
            errors.append(f"{row['id']}: duplicate test inputs")
        if mod.KIND != "stdin":
            n_params = len(param_names(mod))
            if not (mod.REFERENCE.count(f"def {mod.FUNC_NAME}(") == 1):
                errors.append(f"{row['id']}: reference does not define {mod.FUNC_NAME} once")
            for t in tests:
                if len(t["input"].split("\n")) != n_params:
                    errors.append(f"{row['id']}: a test has the wrong number of arguments")
                    break
            if (mod.KIND == "method") != mod.STARTER.startswith("class Solution:"):
                errors.append(f"{row['id']}: starter does not match kind")
        if mod.KIND == "stdin" and "stdin.buffer" in meta["reference"]:
            # LiveCodeBench-style graders swap sys.stdin for a StringIO, which has no .buffer
            errors.append(f"{row['id']}: reference reads sys.stdin.buffer")
        if slowest[row["id"]] > MAX_REFERENCE_S:
            errors.append(f"{row['id']}: reference took {slowest[row['id']]:.2f}s on a test")
        for i, t in enumerate(tests):
            jobs.append((row["id"], i, t, meta["reference"], "ref"))
            jobs.append((row["id"], i, t, WRONG_SRC[row["id"]], "wrong"))

    def go(job):
        pid, i, t, source, role = job
        mod = by_id[pid]
        out, err, _ = run(source, mod.KIND, getattr(mod, "FUNC_NAME", None), t["input"])
        return same_output(mod.KIND, t["output"], out), err

    results = pmap(go, jobs)
    wrong_failed = {r["id"]: 0 for r in rows}
    for (pid, i, t, _, role), (ok, err) in zip(jobs, results):
        if role == "ref" and not ok:
            errors.append(f"{pid} test {i}: reference fails its own test {err[:200]}")
        if role == "wrong" and not ok:
            wrong_failed[pid] += 1
    for pid, n in wrong_failed.items():
        if n == 0:
            errors.append(f"{pid}: wrong solution passes every test")
    return errors, wrong_failed


WRONG_SRC: dict[str, str] = {}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="verify instead of writing")
    ap.add_argument("--only", nargs="*", help="restrict to these ids (never writes)")
    args = ap.parse_args()
    only = set(args.only) if args.only else None
    defs = load_defs(only)
    t0 = time.perf_counter()
    rows, wrong, slowest = build(defs)
    for w in wrong:
        WRONG_SRC[w["id"]] = w["source"]
    if not args.check:
        if only:
            print("--only never writes; add --check")
            return 2
        PROBLEMS.write_text(dumps_jsonl(rows), encoding="utf-8")
        WRONG.write_text(dumps_jsonl(wrong), encoding="utf-8")
        print(f"wrote {len(rows)} problems to {PROBLEMS.name} ({PROBLEMS.stat().st_size} bytes) "
              f"and {WRONG.name} in {time.perf_counter() - t0:.1f}s")
        return 0
    errors, wrong_failed = check(defs, rows, wrong, slowest, partial=bool(only))
    kinds: dict[str, int] = {}
    diffs: dict[str, int] = {}
    n_tests = 0
    for mod, row in zip(defs, rows):
        kinds[mod.KIND] = kinds.get(mod.KIND, 0) + 1
        diffs[mod.DIFFICULTY] = diffs.get(mod.DIFFICULTY, 0) + 1
        n_tests += len(json.loads(row["tests"]))
    worst = max(slowest, key=slowest.get) if slowest else None
    print(f"problems: {len(rows)}  tests: {n_tests}  kinds: {kinds}  difficulty: {diffs}")
    if worst:
        print(f"slowest reference test: {worst} {slowest[worst]:.3f}s (subprocess included)")
    print(f"wrong solutions failing >=1 test: {sum(1 for n in wrong_failed.values() if n)}/{len(rows)}")
    if PROBLEMS.exists() and not only:
        print(f"{PROBLEMS.name}: {PROBLEMS.stat().st_size} bytes")
    for e in errors:
        print("ERROR:", e)
    print("OK" if not errors else f"{len(errors)} error(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
