"""The project's BFCL verdicts against bfcl-eval's own, on official entries and perturbed replies.

Single-turn: for every entry of the chosen categories, a set of reply texts in the
leaderboard's prompting format (the gold reply; two near misses from the env's
``error_action``; in Python categories the gold calls without brackets and with
re-typed values, in Java/JavaScript the gold calls with every value written as bare
source, such as ``pageNo=3`` or ``sa=new InetSocketAddress("192.168.1.10", 8080)``; in
relevance categories also an empty reply and a plain-text refusal). Each reply goes
through ``BFCL-v0``'s ``step`` (``max_turns=1``, reward 1 = accepted) and through
bfcl-eval's decoder and checker (:mod:`agentenvs.envs.bfcl.reference`); the verdicts
must be equal.

Multi-turn: for every entry, trajectories of replies per user turn (the gold calls in
one reply per turn, the gold calls one reply each, and perturbed ones: a wrong value, a
dropped call, a repeated call, reversed calls, a turn with no call, or a call in a turn
whose request cannot be served). Each trajectory is played through
``BFCLMultiTurn-v0`` (success = every turn passed) and given to bfcl-eval's
``multi_turn_checker``; the verdicts must be equal.

Step limit: for every entry, trajectories that reach BFCL's limit of 20 steps with calls
in a user turn (:func:`step_limit_plans`), played through the env and through
bfcl-eval's own inference loop and evaluation runner with a model that says the same
replies, since the limit acts there, before the checker.

``python -m agentenvs.envs.bfcl.agreement`` runs both over the installed bfcl-eval's full
data and prints the figures (see ``--help``).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentenvs.envs.bfcl.ast_checker import check_reply
from agentenvs.envs.bfcl.data import SINGLE_TURN_CATEGORIES, BfclTask
from agentenvs.envs.bfcl.decode import Call, format_calls, format_calls_source
from agentenvs.envs.bfcl.env import BFCLEnv, reply_text
from agentenvs.envs.bfcl.reference import (
    official_multi_turn,
    official_multi_turn_run,
    official_single_turn,
)

__all__ = [
    "Agreement",
    "compare_multi_turn",
    "compare_single_turn",
    "compare_step_limit",
    "multi_turn_plans",
    "official_entry",
    "step_limit_plans",
    "single_turn_replies",
]


@dataclass
class Agreement:
    """Counts of equal verdicts, by category, and the cases that differ."""

    cases: int = 0
    agree: int = 0
    by_category: dict[str, list[int]] = field(default_factory=dict)  # [cases, agree]
    accepted: int = 0  # cases the official checker accepts
    disagreements: list[dict[str, Any]] = field(default_factory=list)
    entries: int = 0
    entries_all_agree: int = 0

    def add(self, category: str, ours: bool, theirs: bool, detail: dict[str, Any]) -> bool:
        same = ours == theirs
        self.cases += 1
        self.agree += same
        self.accepted += theirs
        counts = self.by_category.setdefault(category, [0, 0])
        counts[0] += 1
        counts[1] += same
        if not same:
            self.disagreements.append({"category": category, "ours": ours, **detail})
        return same

    @property
    def rate(self) -> float:
        return self.agree / self.cases if self.cases else 1.0


# ------------------------------------------------------------------ single-turn replies
def _retyped(value: Any, rng: np.random.Generator) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, float):
        return int(value) if value.is_integer() else round(value, 1)
    if isinstance(value, str):
        choice = int(rng.integers(3))
        return (value.upper(), value + ".", value.replace(" ", "_"))[choice]
    if isinstance(value, list):
        return tuple(_retyped(v, rng) for v in value)
    if isinstance(value, dict):
        return {k: _retyped(v, rng) for k, v in value.items()}
    return value


def single_turn_replies(
    env: BFCLEnv, task: BfclTask, rng: np.random.Generator
) -> list[tuple[str, str]]:
    """``(kind, reply)`` pairs for one entry (the env is reset to it)."""
    env.reset(options={"task_id": task.id})
    out = [("gold", env.gold_reply())]
    out += [("near_miss", env.error_action(rng)) for _ in range(2)]
    gold = env.gold_calls()
    if task.language == "python":
        if gold:
            out.append(("no_brackets", format_calls(gold)[1:-1]))
            retyped = [Call(c.name, _retyped(c.args, rng)) for c in gold]
            out.append(("retyped", reply_text(retyped)))
    elif gold:
        bare = ", ".join(f"{p}={v}" for p, v in gold[0].args.items())
        out.append(("bare_source", f"[{gold[0].name}({bare})]"))
        out.append(("quoted_source", format_calls_source(gold[:1])))
    if "relevance" in task.category:
        out.append(("empty", ""))
        out.append(("text", "None of these functions can do that."))
    return out


def compare_single_turn(
    tasks_path: str = "bfcl-eval",
    categories: Sequence[str] | None = None,
    *,
    per_category: int | None = None,
    seed: int = 0,
    underscore_to_dot: bool = False,
) -> Agreement:
    """Compare verdicts on every entry (or ``per_category`` drawn ones) of ``categories``.

    ``underscore_to_dot``: names shown and expected with ``_`` for ``.``, against the
    official checker run for a model so configured.
    """
    env = BFCLEnv(
        tasks_path=tasks_path,
        categories=categories,
        max_turns=1,
        underscore_to_dot=underscore_to_dot,
        rules="official",
    )
    rng = np.random.default_rng(seed)
    tasks = list(env.tasks.values())
    if per_category is not None:
        tasks = _sample(tasks, per_category, rng)
    report = Agreement()
    for task in tasks:
        report.entries += 1
        all_same = True
        for kind, reply in single_turn_replies(env, task, rng):
            env.reset(options={"task_id": task.id})
            _, reward, *_ = env.step(reply)
            theirs = official_single_turn(
                reply,
                copy.deepcopy(task.functions),
                copy.deepcopy(task.ground_truth),
                task.category,
                underscore_to_dot=underscore_to_dot,
            )
            detail = {"id": task.id, "kind": kind, "reply": reply[:300]}
            detail["official_error"] = theirs.error_type
            all_same &= report.add(task.category, reward == 1.0, theirs.valid, detail)
        report.entries_all_agree += all_same
    return report


def _sample(tasks: list[Any], per_category: int, rng: np.random.Generator) -> list[Any]:
    by_category: dict[str, list[Any]] = {}
    for task in tasks:
        by_category.setdefault(task.category, []).append(task)
    chosen = []
    for group in by_category.values():
        picks = rng.choice(len(group), size=min(per_category, len(group)), replace=False)
        chosen += [group[int(i)] for i in sorted(picks)]
    return chosen


# ------------------------------------------------------------------ multi-turn plans
END_REPLY = "I have done what you asked."
STEP_LIMIT = 20  # BFCL's MAXIMUM_STEP_LIMIT
MUTATIONS = ("value", "drop_call", "repeat_call", "reverse", "skip_turn", "call_unservable")


def _wrong(value: Any, rng: np.random.Generator) -> Any:
    from agentenvs.envs.bfcl.multi_turn.env import _wrong_value

    return _wrong_value(value, rng)


def multi_turn_plans(env: Any, rng: np.random.Generator) -> list[tuple[str, list[list[str]]]]:
    """``(kind, replies per user turn)`` for the env's current entry (reset to it)."""
    entry = env.entry
    turns = [[env._keyword_call(c) for c in turn] for turn in entry.ground_truth]

    def plan(calls_per_turn: Iterable[list[Call]], split: bool = False) -> list[list[str]]:
        out = []
        for calls in calls_per_turn:
            if not calls:
                out.append([END_REPLY])
            elif split:
                # one call a step, within BFCL's limit of steps per user turn (beyond it
                # the leaderboard's inference force-terminates the entry)
                head, rest = calls[: STEP_LIMIT - 1], calls[STEP_LIMIT - 1 :]
                steps = [format_calls([c]) for c in head] + ([format_calls(rest)] if rest else [])
                out.append(steps + [END_REPLY])
            else:
                out.append([format_calls(calls), END_REPLY])
        return out

    plans = [("gold", plan(turns)), ("gold_split", plan(turns, split=True))]
    with_calls = [t for t, calls in enumerate(turns) if calls]
    without = [t for t, calls in enumerate(turns) if not calls]
    kinds = list(MUTATIONS if without else MUTATIONS[:-1])
    for kind in (kinds[int(i)] for i in rng.choice(len(kinds), size=2, replace=False)):
        mutated = [list(calls) for calls in turns]
        if kind == "call_unservable":
            t = without[int(rng.integers(len(without)))]
            donor = [c for calls in turns for c in calls]
            if not donor:
                continue
            mutated[t] = [donor[int(rng.integers(len(donor)))]]
        else:
            if not with_calls:
                continue
            t = with_calls[int(rng.integers(len(with_calls)))]
            calls = mutated[t]
            i = int(rng.integers(len(calls)))
            if kind == "value":
                if not calls[i].args:
                    continue
                param = sorted(calls[i].args, key=str)[int(rng.integers(len(calls[i].args)))]
                args = dict(calls[i].args)
                args[param] = _wrong(args[param], rng)
                calls[i] = Call(calls[i].name, args)
            elif kind == "drop_call":
                del calls[i]
            elif kind == "repeat_call":
                calls.insert(i, calls[i])
            elif kind == "reverse":
                calls.reverse()
            elif kind == "skip_turn":
                mutated[t] = []
        plans.append((kind, plan(mutated)))
    return plans


#: a call that changes nothing on any backend (no such function): it fills steps up to
#: the limit without touching the state
FILLER_REPLY = "[no_such_function()]"
LIMIT_KINDS = (
    "last_turn_over_limit",
    "last_turn_at_limit",
    "last_turn_fillers_over_limit",
    "earlier_turn_over_limit",
)


def _steps_with_calls(calls: Sequence[Call], n_steps: int) -> list[str]:
    """``calls`` in exactly ``n_steps`` replies with calls: one call a step (the rest in
    the last when there are more), then :data:`FILLER_REPLY` steps."""
    head, rest = list(calls[: n_steps - 1]), list(calls[n_steps - 1 :])
    steps = [format_calls([c]) for c in head] + ([format_calls(rest)] if rest else [])
    return steps + [FILLER_REPLY] * (n_steps - len(steps))


def step_limit_plans(env: Any) -> list[tuple[str, list[list[str]]]]:
    """``(kind, replies per user turn)`` at BFCL's step limit for the env's current entry:
    the gold calls, one reply a turn, except in one turn, which gets the gold calls spread
    over more steps than the limit allows (``*_over_limit``: the turn never handed back) or
    exactly as many as it allows and then a reply without calls (``last_turn_at_limit``);
    also a last turn of nothing but :data:`FILLER_REPLY` steps beyond the limit (the
    turn is checked, so it fails unless its ground truth is empty).
    ``earlier_turn_over_limit`` (the first turn) is left out of single-turn entries.
    """
    entry = env.entry
    turns = [[env._keyword_call(c) for c in turn] for turn in entry.ground_truth]
    gold = [[format_calls(calls), END_REPLY] if calls else [END_REPLY] for calls in turns]
    last = len(turns) - 1
    plans = [
        ("last_turn_over_limit", {last: _steps_with_calls(turns[last], STEP_LIMIT + 1)}),
        ("last_turn_at_limit", {last: _steps_with_calls(turns[last], STEP_LIMIT) + [END_REPLY]}),
        ("last_turn_fillers_over_limit", {last: _steps_with_calls([], STEP_LIMIT + 1)}),
    ]
    if last > 0:
        plans.append(("earlier_turn_over_limit", {0: _steps_with_calls(turns[0], STEP_LIMIT + 1)}))
    return [(kind, [changed.get(t, g) for t, g in enumerate(gold)]) for kind, changed in plans]


def _play(env: Any, task_id: str, replies: list[list[str]]) -> bool:
    env.reset(options={"task_id": task_id})
    info: dict[str, Any] = {}
    for turn in replies:
        for reply in turn:
            _, _, terminated, truncated, info = env.step(reply)
            if terminated or truncated:
                return bool(info.get("success"))
    return bool(info.get("success"))


def compare_multi_turn(
    tasks_path: str = "bfcl-eval",
    categories: Sequence[str] | None = None,
    *,
    ids: Sequence[str] | None = None,
    per_category: int | None = None,
    seed: int = 0,
    replays: int = 1,
) -> Agreement:
    """Compare verdicts on every entry (or ``ids``, or ``per_category`` drawn ones).

    ``replays`` > 1 plays each trajectory that many times in the same env (the verdict
    must not change: ground truth must not be altered by a replay).
    """
    from agentenvs.envs.bfcl.multi_turn.env import BFCLMultiTurnEnv

    env = BFCLMultiTurnEnv(
        tasks_path=tasks_path, categories=categories, max_turns=10_000, rules="official"
    )
    rng = np.random.default_rng(seed)
    entries = list(env.task_set.entries.values())
    if ids is not None:
        wanted = set(ids)
        entries = [e for e in entries if e.id in wanted]
    if per_category is not None:
        entries = _sample(entries, per_category, rng)
    report = Agreement()
    for entry in entries:
        report.entries += 1
        env.reset(options={"task_id": entry.id})
        record = {
            "id": entry.id,
            "initial_config": copy.deepcopy(dict(entry.initial_config)),
            "involved_classes": list(entry.involved_classes),
        }
        all_same = True
        for kind, replies in multi_turn_plans(env, rng):
            theirs = official_multi_turn(replies, record, entry.ground_truth_text)
            for replay in range(replays):
                ours = _play(env, entry.id, replies)
                detail = {"id": entry.id, "kind": kind, "replay": replay}
                detail["official_error"] = theirs.error_type
                all_same &= report.add(entry.category, ours, theirs.valid, detail)
        report.entries_all_agree += all_same
    return report


def compare_step_limit(
    tasks_path: str = "bfcl-eval",
    categories: Sequence[str] | None = None,
    *,
    ids: Sequence[str] | None = None,
    per_category: int | None = None,
    seed: int = 0,
) -> Agreement:
    """Compare verdicts on the :func:`step_limit_plans` of every entry (or ``ids``, or
    ``per_category`` drawn ones).

    The official verdict comes from bfcl-eval's own inference loop and evaluation runner
    fed the same replies (:func:`~agentenvs.envs.bfcl.reference.official_multi_turn_run`),
    since what the limit does is decided there, before the checker.
    """
    from agentenvs.envs.bfcl.multi_turn.env import BFCLMultiTurnEnv

    env = BFCLMultiTurnEnv(
        tasks_path=tasks_path, categories=categories, max_turns=10_000, rules="official"
    )
    rng = np.random.default_rng(seed)
    entries = list(env.task_set.entries.values())
    if ids is not None:
        wanted = set(ids)
        entries = [e for e in entries if e.id in wanted]
    if per_category is not None:
        entries = _sample(entries, per_category, rng)
    report = Agreement()
    for entry in entries:
        report.entries += 1
        env.reset(options={"task_id": entry.id})
        record = official_entry(entry)
        all_same = True
        for kind, replies in step_limit_plans(env):
            theirs = official_multi_turn_run(replies, record, entry.ground_truth_text)
            ours = _play(env, entry.id, replies)
            detail = {"id": entry.id, "kind": kind, "official_error": theirs.error_type}
            all_same &= report.add(kind, ours, theirs.valid, detail)
        report.entries_all_agree += all_same
    return report


def official_entry(entry: Any) -> dict[str, Any]:
    """A multi-turn entry as bfcl-eval's inference loop and checker read it."""
    return {
        "id": entry.id,
        "question": [list(messages) for messages in entry.question],
        "initial_config": copy.deepcopy(dict(entry.initial_config)),
        "involved_classes": list(entry.involved_classes),
        "missed_function": {str(t): list(names) for t, names in entry.missed_functions.items()},
    }


# ------------------------------------------------------------------ command line
def _print(title: str, report: Agreement, seconds: float) -> None:
    print(
        f"{title}: {report.agree}/{report.cases} verdicts equal ({100 * report.rate:.1f}%), "
        f"{report.entries_all_agree}/{report.entries} entries with every verdict equal; "
        f"official accepts {report.accepted}; {seconds:.0f} s"
    )
    for category, (cases, agree) in report.by_category.items():
        print(f"  {category:<28} {agree:6d}/{cases:<6d}")
    for case in report.disagreements[:20]:
        print(f"  DIFFERS: {case}")


def _time_graders(tasks_path: str, categories: Sequence[str], seed: int, rounds: int = 6) -> None:
    """Replies a second through the env (reset + step) and through bfcl-eval's
    decoder + checker, on the same sample of replies (300 entries): on first sight (a fresh
    env meets each task: its tools' schema check and prompt included), then steady: the
    median of ``rounds`` rounds, the graders taking turns (the side going first turns each
    round), wall and CPU time."""
    env = BFCLEnv(tasks_path=tasks_path, categories=categories, max_turns=1, rules="official")
    rng = np.random.default_rng(seed)
    tasks = [t for t in env.tasks.values()]
    picks = rng.choice(len(tasks), size=min(300, len(tasks)), replace=False)
    cases = [
        (t, r) for t in (tasks[int(i)] for i in picks) for _, r in single_turn_replies(env, t, rng)
    ]
    task, reply = cases[0]
    official_single_turn(reply, task.functions, task.ground_truth, task.category)  # its imports
    env = BFCLEnv(tasks_path=tasks_path, categories=categories, max_turns=1, rules="official")

    def ours() -> None:
        for task, reply in cases:
            env.reset(options={"task_id": task.id})
            env.step(reply)

    def theirs() -> None:
        for task, reply in cases:
            official_single_turn(reply, task.functions, task.ground_truth, task.category)

    def grader() -> None:  # ours without the env: the same work as theirs
        for task, reply in cases:
            check_reply(reply, task.functions, task.ground_truth, task.category)

    def rate(fn: Any) -> tuple[float, float]:
        """Replies a second, wall and CPU (this process's CPU time: both sides run here)."""
        start, cpu = time.perf_counter(), time.process_time()
        fn()
        return len(cases) / (time.perf_counter() - start), len(cases) / (time.process_time() - cpu)

    first = {"ours": rate(ours)[0], "theirs": rate(theirs)[0]}
    sides = [("ours", ours), ("theirs", theirs), ("grader", grader)]
    walls: dict[str, list[float]] = {name: [] for name, _ in sides}
    cpus: dict[str, list[float]] = {name: [] for name, _ in sides}
    for i in range(rounds):
        for name, fn in sides[i % len(sides) :] + sides[: i % len(sides)]:  # the first turns
            wall, cpu = rate(fn)
            walls[name].append(wall)
            cpus[name].append(cpu)
    steady = {name: statistics.median(v) for name, v in walls.items()}
    steady_cpu = {name: statistics.median(v) for name, v in cpus.items()}
    for name, got in (("first sight", first), (f"steady, median of {rounds} rounds", steady)):
        print(
            f"  speed on {len(cases)} replies, {name}: env reset + step {got['ours']:.0f}/s, "
            f"bfcl-eval decode + check {got['theirs']:.0f}/s (ratio {got['ours'] / got['theirs']:.2f})"
        )
    print(
        f"  steady by CPU time: env reset + step {steady_cpu['ours']:.0f}/s, bfcl-eval "
        f"{steady_cpu['theirs']:.0f}/s (ratio {steady_cpu['ours'] / steady_cpu['theirs']:.2f})"
    )
    print(
        f"  the same work as bfcl-eval's (check_reply, no env): {steady['grader']:.0f}/s "
        f"(ratio {steady['grader'] / steady['theirs']:.2f}; by CPU time "
        f"{steady_cpu['grader'] / steady_cpu['theirs']:.2f})"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--tasks", default="bfcl-eval", help="BFCL data folder (default: bfcl-eval's)"
    )
    parser.add_argument("--single-turn", nargs="*", default=list(SINGLE_TURN_CATEGORIES))
    parser.add_argument("--multi-turn", nargs="*", default=None, help="categories (default: all)")
    parser.add_argument("--skip-multi-turn", action="store_true")
    parser.add_argument("--per-category", type=int, default=None, help="sample entries")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--underscore-to-dot", action="store_true", help="names with _ for . (single-turn)"
    )
    args = parser.parse_args(argv)
    failed = False
    if args.single_turn:
        start = time.perf_counter()
        single = compare_single_turn(
            args.tasks,
            args.single_turn,
            per_category=args.per_category,
            seed=args.seed,
            underscore_to_dot=args.underscore_to_dot,
        )
        _print("single-turn text replies", single, time.perf_counter() - start)
        kinds = Counter(d["kind"] for d in single.disagreements)
        if kinds:
            print(f"  disagreements by reply kind: {dict(kinds)}")
        failed |= single.agree != single.cases
        _time_graders(args.tasks, args.single_turn, args.seed)
    if not args.skip_multi_turn:
        start = time.perf_counter()
        multi = compare_multi_turn(
            args.tasks, args.multi_turn, per_category=args.per_category, seed=args.seed
        )
        _print("multi-turn trajectories", multi, time.perf_counter() - start)
        failed |= multi.agree != multi.cases
        start = time.perf_counter()
        limit = compare_step_limit(
            args.tasks, args.multi_turn, per_category=args.per_category, seed=args.seed
        )
        _print("multi-turn trajectories at the step limit", limit, time.perf_counter() - start)
        failed |= limit.agree != limit.cases
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
