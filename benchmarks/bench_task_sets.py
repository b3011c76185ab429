"""Published Terminal-Bench task sets played through on the Docker runtime.

For each dataset folder (a folder of task folders, TB1 or Harbor layout): what
``agentenvs check-tasks`` accepts, refuses and finds invalid; then, for the accepted tasks
(``--limit N`` a set: a sample drawn with ``--seed``), the task's own solution played and
an empty episode (no action, then the tests) under both gradings, ``safe`` and
``official``. A good task passes with its solution and fails empty. ``--refused N`` also
plays N refused tasks a set, with no prediction in the way, to see whether the refusal
was needed (a refused task whose solution passes and empty episode fails would have run).

Each task is played in a child process under a wall limit (``--task-wall``); its
episodes are written as they end, so a task stopped at the limit keeps what it did. Every
task's record is a JSON line in ``--out``; a rerun skips the tasks already there.

    python benchmarks/bench_task_sets.py /data/tb1-set /data/harbor-set \
        --out runs.jsonl --limit 10 --seed 0 --refused 3 --offline yes

prints, per set, the counts and rates below, the predictions against the builds, and
the commonest refusals. Load matters only to the times (``uptime`` is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

GRADINGS = ("safe", "official")
#: episodes of a task: its solution, and nothing
EPISODES = ("solution", "empty")
#: actions a multi-step episode may take before it is cut
MAX_ACTIONS = 40
#: seconds a child gets to close its containers after SIGTERM
GRACE_S = 30
#: characters of an episode's last observation kept in its record
TAIL = 600


# ---------------------------------------------------------------- one task (the child)
def play_task(folder: Path, task_id: str, offline: bool | None, emit: Any) -> None:
    """Both episodes of ``task_id`` under each grading; ``emit(record)`` after each."""
    from agentenvs.core.errors import Fault, TaskError
    from agentenvs.envs.terminal.env import TerminalBenchEnv

    for grading in GRADINGS:
        env = TerminalBenchEnv(
            tasks_path=folder, runtime="docker", grading=grading, offline=offline
        )
        try:
            if task_id not in env.tasks:
                why = env.invalid_tasks.get(task_id, "no such task")
                emit({"grading": grading, "episode": "load", "error": f"invalid: {why}"})
                return
            if task_id in env.unsupported_tasks:  # refused when the tasks load: not built
                emit({"grading": grading, "episode": "load",
                      "error": f"refused at load: {env.unsupported_tasks[task_id]}"})
                continue
            for episode in EPISODES:
                start = time.monotonic()
                record: dict[str, Any] = {"grading": grading, "episode": episode}
                try:
                    record.update(_episode(env, task_id, episode))
                except TaskError as exc:
                    record["error"] = f"refused: {exc}"
                except Fault as exc:
                    record["error"] = f"fault ({exc.kind}): {exc}"
                except Exception as exc:  # noqa: BLE001 - the record says what it was
                    record["error"] = f"{type(exc).__name__}: {exc}"
                record["seconds"] = round(time.monotonic() - start, 2)
                record["error"] = _short(record.get("error") or "") or None
                emit(record)
                if record["error"] and record["error"].startswith("refused"):
                    break  # the image or the start failed: the other episode would too
        finally:
            env.close()


def _episode(env: Any, task_id: str, episode: str) -> dict[str, Any]:
    start = time.monotonic()
    env.reset(options={"task_id": task_id})
    found: dict[str, Any] = {"reset_s": round(time.monotonic() - start, 2)}
    acted = tested = 0.0
    observation, info, done, actions = "", {}, False, 0
    while not done and actions < MAX_ACTIONS:
        if episode == "solution":
            try:
                action = env.unwrapped.oracle_action()
            except Exception as exc:  # noqa: BLE001 - TaskError: no solution script
                return {**found, "error": f"no solution: {exc}"}
            t = time.monotonic()
            observation, _, done, truncated, info = env.step(action)
            acted += time.monotonic() - t
            actions += 1
            done = done or truncated
            if done:
                break
        t = time.monotonic()
        observation, _, done, truncated, info = env.step("submit")
        tested += time.monotonic() - t
        actions += 1
        done = done or truncated
    found.update(
        success=bool(info.get("success")),
        score=info.get("score"),
        act_s=round(acted, 2),
        tests_s=round(tested, 2),
        actions=actions,
        ended=done,
    )
    for key in ("verifier_timed_out", "agent_timed_out", "offline_unmet", "grading_findings",
                "grading_problems", "step_results"):
        if info.get(key):
            found[key] = info[key]
    found["tail"] = observation[-TAIL:]
    return found


def _short(error: str) -> str:
    """An error without colour codes or the build's log after its reason."""
    error = re.sub(r"\x1b\[[0-9;]*m", "", error)
    return error.split("\nStep 1/")[0][:TAIL]


def _child(args: argparse.Namespace) -> int:
    """``--play FOLDER TASK``: one JSON line per episode on stdout."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # close() runs on the way out
    folder, task_id = Path(args.play[0]), args.play[1]

    def emit(record: dict[str, Any]) -> None:
        print(json.dumps(record, default=str), flush=True)

    play_task(folder, task_id, _offline(args.offline), emit)
    return 0


# ---------------------------------------------------------------- the sets (the parent)
def _offline(flag: str) -> bool | None:
    return {"auto": None, "yes": True, "no": False}[flag]


def check_set(folder: Path, offline: bool | None) -> dict[str, Any]:
    """``check-tasks`` of one folder: {task: (verdict, reason)}, and the error that stopped
    it (every task folder is then ``unchecked``)."""
    from agentenvs.envs.terminal.survey import survey

    start = time.monotonic()
    try:
        (found,) = survey([folder], runtime="docker", offline=offline)
    except Exception as exc:  # noqa: BLE001 - a survey that fails is itself a figure
        folders = sorted(
            p.name for p in folder.iterdir()
            if (p / "task.yaml").is_file() or (p / "task.toml").is_file()
        )
        why = f"{type(exc).__name__}: {exc}"
        return {"verdicts": {t: ("unchecked", why) for t in folders}, "error": why,
                "seconds": time.monotonic() - start}
    verdicts: dict[str, tuple[str, str | None]] = {}
    for task in found.accepted:
        verdicts[task] = ("accepted", found.stood_in.get(task))
    for task, why in found.refused.items():
        verdicts[task] = ("refused", why)
    for task, why in found.invalid.items():
        verdicts[task] = ("invalid", why)
    return {"verdicts": verdicts, "error": found.error, "seconds": time.monotonic() - start}


def choose(verdicts: dict[str, tuple[str, Any]], limit: int | None, refused: int,
           seed: int) -> list[str]:
    """The tasks to play: the accepted (``limit`` of them, drawn), ``refused`` refused ones
    (drawn); for a set check-tasks could not survey, ``limit`` of all."""
    rng = random.Random(seed)

    def draw(pool: list[str], n: int | None) -> list[str]:
        pool = sorted(pool)
        return pool if n is None or n >= len(pool) else sorted(rng.sample(pool, n))

    of = {v: [t for t, (w, _) in verdicts.items() if w == v] for v in
          ("accepted", "refused", "unchecked")}
    return draw(of["accepted"], limit) + draw(of["refused"], refused) + draw(
        of["unchecked"], limit
    )


def run_child(folder: Path, task_id: str, offline: str, wall_s: float) -> dict[str, Any]:
    """Play one task in a child process under ``wall_s``; its episodes, what stopped it."""
    cmd = [sys.executable, __file__, "--play", str(folder), task_id, "--offline", offline]
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    episodes: list[dict[str, Any]] = []
    err: list[str] = []

    def read_out() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            try:
                episodes.append(json.loads(line))
            except ValueError:
                pass

    def read_err() -> None:
        err.extend(proc.stderr)  # type: ignore[union-attr,arg-type]

    readers = [threading.Thread(target=read_out), threading.Thread(target=read_err)]
    for r in readers:
        r.start()
    stopped = None
    try:
        proc.wait(timeout=wall_s)
    except subprocess.TimeoutExpired:
        stopped = f"the wall limit of {wall_s:g} s"
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    for r in readers:
        r.join()
    if stopped is None and proc.returncode != 0:
        stopped = f"status {proc.returncode}: " + "".join(err)[-TAIL:]
    return {"episodes": episodes, "stopped": stopped,
            "seconds": round(time.monotonic() - start, 1)}


def done_tasks(out: Path) -> set[tuple[str, str]]:
    if not out.is_file():
        return set()
    return {(r["set"], r["task"]) for r in _records(out) if r.get("kind") == "play"}


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]


# ---------------------------------------------------------------- the figures
def _verdicts(play: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e["grading"], e["episode"]): e for e in play["episodes"]}


def task_outcome(play: dict[str, Any]) -> dict[str, Any]:
    """What a played task showed: per grading, whether it ran, its solution passed, its
    empty episode failed."""
    eps = _verdicts(play)
    out: dict[str, Any] = {}
    for g in GRADINGS:
        sol, empty = eps.get((g, "solution")), eps.get((g, "empty"))
        ran = bool(sol) and not sol.get("error") and sol.get("ended")
        out[g] = {
            "ran": ran,
            "no_solution": bool(sol and (sol.get("error") or "").startswith("no solution")),
            "passes": bool(ran and sol.get("success")),
            "empty_fails": bool(empty and not empty.get("error") and empty.get("ended")
                                and not empty.get("success")),
            "empty_ran": bool(empty and not empty.get("error") and empty.get("ended")),
        }
    return out


def _built(play: dict[str, Any]) -> bool:
    """The image built and the task started (a reset went through, in any episode)."""
    return any("reset_s" in e for e in play["episodes"])


def summarize(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    checks: dict[str, dict[str, Any]] = {}
    plays: dict[str, dict[str, dict[str, Any]]] = {}
    for r in records:  # the latest of each wins
        if r.get("kind") == "check":
            checks[r["set"]] = r
        elif r.get("kind") == "play":
            plays.setdefault(r["set"], {})[r["task"]] = r
    sets: dict[str, dict[str, Any]] = {}
    for name, check in checks.items():
        verdicts = check["verdicts"]
        count = Counter(v for v, _ in verdicts.values())
        played = plays.get(name, {})
        acc = {t: p for t, p in played.items() if verdicts.get(t, ["?"])[0] == "accepted"}
        ref = {t: p for t, p in played.items() if verdicts.get(t, ["?"])[0] == "refused"}
        unc = {t: p for t, p in played.items() if verdicts.get(t, ["?"])[0] == "unchecked"}
        row: dict[str, Any] = {"folders": len(verdicts), "counts": dict(count),
                               "error": check.get("error"), "repo": check.get("repo"),
                               "played": len(acc), "unchecked_played": len(unc)}
        outcomes = {t: task_outcome(p) for t, p in {**acc, **unc}.items()}
        row["no_solution"] = sorted(t for t, o in outcomes.items() if o["safe"]["no_solution"])
        for g in GRADINGS:
            row[f"passes_{g}"] = sum(o[g]["passes"] for o in outcomes.values())
            row[f"empty_fails_{g}"] = sum(o[g]["empty_fails"] for o in outcomes.values())
            row[f"good_{g}"] = sum(
                o[g]["passes"] and o[g]["empty_fails"] for o in outcomes.values()
            )
        both = [o for o in outcomes.values()  # the tasks that ran under both gradings
                if all(o[g]["ran"] and o[g]["empty_ran"] for g in GRADINGS)]
        row["both_ran"] = len(both)
        row["gradings_agree"] = sum(
            o["safe"]["passes"] == o["official"]["passes"]
            and o["safe"]["empty_fails"] == o["official"]["empty_fails"]
            for o in both
        )
        row["accepted_not_built"] = sorted(t for t, p in acc.items() if not _built(p))
        row["accepted_cut"] = sorted(t for t, p in acc.items() if p.get("stopped"))
        row["refused_played"] = len(ref)
        row["refused_built"] = sorted(t for t, p in ref.items() if _built(p))
        row["refused_would_run"] = sorted(
            t for t, p in ref.items()
            if (o := task_outcome(p))["safe"]["passes"] and o["safe"]["empty_fails"]
        )
        row["unchecked_built"] = sorted(t for t, p in unc.items() if _built(p))
        reasons = Counter(
            _kind(why) for v, why in verdicts.values() if v in ("refused", "invalid") and why
        )
        row["reasons"] = reasons.most_common(3)
        row["failures"] = {t: _why_failed(p) for t, p in {**acc, **unc}.items()
                           if t not in row["no_solution"]
                           and not all(o_g["passes"] and o_g["empty_fails"]
                                       for o_g in task_outcome(p).values())}
        sets[name] = row
    return sets


def _kind(reason: str) -> str:
    from agentenvs.envs.terminal.survey import reason_kind

    return reason_kind(reason)[:110]


def _why_failed(play: dict[str, Any]) -> str:
    """One line: where a played task went wrong first."""
    if play.get("stopped"):
        return f"stopped at {play['stopped'][:160]}"
    for e in play["episodes"]:
        if e.get("error"):
            return f"{e['grading']} {e['episode']}: {e['error'][:200]}"
    for e in play["episodes"]:
        wrong = e.get("success") if e["episode"] == "empty" else not e.get("success")
        if wrong:
            extra = "; ".join(
                f"{k}={e[k]}" for k in ("verifier_timed_out", "agent_timed_out",
                                         "offline_unmet", "grading_findings",
                                         "grading_problems") if e.get(k)
            )
            verdict = "passed" if e.get("success") else "failed"
            tail = " ".join(e.get("tail", "").split())[-200:]
            return f"{e['grading']} {e['episode']} {verdict} ({extra or tail})"
    return "?"


def _rate(n: int, d: int) -> str:
    return f"{n}/{d}" if d else "—"


def markdown(sets: dict[str, dict[str, Any]]) -> str:
    lines = [
        "| set | folders | accepted / refused / invalid | played | solution passes "
        "(safe / official) | empty fails (safe / official) | both (safe / official) "
        "| gradings agree (of those run under both) | accepted, not built | refused that ran / played |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in sets.items():
        c = r["counts"]
        checked = (
            f"{c.get('accepted', 0)} / {c.get('refused', 0)} / {c.get('invalid', 0)}"
            if not c.get("unchecked") else f"check-tasks failed ({c['unchecked']} unchecked)"
        )
        n = r["played"] + r["unchecked_played"]
        m = n - len(r["no_solution"])  # the solution rates count the tasks that have one
        lines.append(
            f"| {name} | {r['folders']} | {checked} | {n} "
            f"| {_rate(r['passes_safe'], m)} / {_rate(r['passes_official'], m)} "
            f"| {_rate(r['empty_fails_safe'], n)} / {_rate(r['empty_fails_official'], n)} "
            f"| {_rate(r['good_safe'], m)} / {_rate(r['good_official'], m)} "
            f"| {_rate(r['gradings_agree'], r['both_ran'])} "
            f"| {len(r['accepted_not_built'])} "
            f"| {len(r['refused_would_run'])} / {r['refused_played']} |"
        )
    for name, r in sets.items():
        lines.append(f"\n**{name}**" + (f" (check-tasks: {r['error'][:200]})" if r["error"]
                                         else ""))
        for kind, k in r["reasons"]:
            lines.append(f"- refused/invalid {k}×: {kind.replace('|', '/')}")
        if r["refused_built"]:
            lines.append(f"- refused but built: {', '.join(r['refused_built'])}"
                         f" (of them, solution passes and empty fails: "
                         f"{', '.join(r['refused_would_run']) or 'none'})")
        if r["unchecked_played"]:
            lines.append(f"- unchecked, built: {len(r['unchecked_built'])} of "
                         f"{r['unchecked_played']} played")
        if r["no_solution"]:
            lines.append(f"- played with no solution (empty episode only): "
                         f"{', '.join(r['no_solution'])}")
        for task, why in sorted(r["failures"].items()):
            lines.append(f"- {task}: {why.replace('|', '/')}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folders", nargs="*", type=Path, help="dataset folders (TB1 or Harbor)")
    p.add_argument("--out", type=Path, default=Path("task_sets.jsonl"),
                   help="per-task records (JSON lines); tasks already there are skipped")
    p.add_argument("--limit", type=int, default=None,
                   help="accepted tasks played a set (a sample drawn with --seed)")
    p.add_argument("--refused", type=int, default=0,
                   help="refused tasks played a set, to check the refusals")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--task-wall", type=float, default=300.0,
                   help="seconds a task's four episodes may take, build included")
    p.add_argument("--jobs", type=int, default=1, help="tasks played at once")
    p.add_argument("--offline", choices=("auto", "yes", "no"), default="yes")
    p.add_argument("--table-only", action="store_true", help="print the table of --out")
    p.add_argument("--play", nargs=2, metavar=("FOLDER", "TASK"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.play:
        return _child(args)
    if not args.table_only:
        print(f"uptime: {os.popen('uptime').read().strip()}", flush=True)
        done = done_tasks(args.out)
        todo: list[tuple[Path, str]] = []
        with args.out.open("a") as out:
            for folder in args.folders:
                check = check_set(folder, _offline(args.offline))
                out.write(json.dumps({"kind": "check", "set": folder.name,
                                      "path": str(folder), "offline": args.offline,
                                      **check}, default=str) + "\n")
                out.flush()
                print(f"{folder.name}: checked in {check['seconds']:.1f} s", flush=True)
                picked = choose(check["verdicts"], args.limit, args.refused, args.seed)
                todo += [(folder, t) for t in picked if (folder.name, t) not in done]
        lock = threading.Lock()

        def one(item: tuple[Path, str]) -> None:
            folder, task = item
            played = run_child(folder, task, args.offline, args.task_wall)
            with lock, args.out.open("a") as out:
                out.write(json.dumps({"kind": "play", "set": folder.name, "task": task,
                                      **played}, default=str) + "\n")
            ok = {f"{e['grading']}/{e['episode']}": e.get("success", (e.get("error") or "")[:80])
                  for e in played["episodes"]}
            print(f"{folder.name}/{task}: {played['seconds']} s {ok} "
                  f"{played['stopped'] or ''}", flush=True)

        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            list(pool.map(one, todo))
    print(markdown(summarize(_records(args.out))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
