"""Every env at once: the Pass@(K,T) evaluation of one policy on each benchmark.

``agentenvs eval --policy P --envs all --out DIR`` runs, for each env of ``SUITE``, an
ordinary run directory ``DIR/<name>/`` (``agentenvs.eval.runner``), then the report of
each (``DIR/<name>/report/``) and one summary page over them all
(``agentenvs.eval.summary_page``). ``DIR/suite.json`` records what was planned and what
became of each env (ran, skipped and why, failed and why), so ``agentenvs report DIR``
can draw the summary again.

Each env runs with defaults that suit it (``SUITE``): the bundled task slice, or the full
official set where ``agentenvs data fetch`` has cached it (``SuiteEnv.dataset``); the
budgets up to the env's own turn limit; samples per task as the demo takes them. The
mode is ``derive`` wherever the runner accepts it for this policy and env (one run at the
largest budget stands for all), else ``rerun``: the same rule every time, so a second
call resumes each run where it stopped.

Before any work, each env is built and reset once on its first task: an env whose
service is missing (no Docker engine for a docker runtime, no MySQL server, no
namespaces for the local sandbox) is skipped with one line saying why; nothing stops
half-way for it. A run that fails later (a fault past its retries) is reported the same
way and the next env still runs.

``scripted/reference`` and ``scripted/noisy`` stand for each env's own scripted policy
(the oracle or the gold answer; a policy that errs and recovers), for checking the
pipeline without a model.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentenvs.core.errors import (
    AgentEnvsError,
    MissingExtraError,
    SandboxError,
    ServiceUnavailable,
)

SUITE_NAME = "suite.json"
#: per-env scripted policy families: each names a policy of every env of ``SUITE``
SCRIPTED_FAMILIES = ("scripted/reference", "scripted/noisy")


@dataclass(frozen=True)
class SuiteEnv:
    """One env of the every-env evaluation and its defaults."""

    name: str
    env_id: str
    budgets: tuple[int, ...]
    n: int
    #: the bundled slice (``all``, ``first:N``); full data runs every task
    tasks: str
    reference: str
    noisy: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    #: an ``agentenvs data`` dataset and the splits to run, the first cached one wins
    dataset: str | None = None
    splits: tuple[str, ...] = ()


SUITE: tuple[SuiteEnv, ...] = (
    # the demo's settings: the ice slips 20% of the time so 16 turns finish most maps
    SuiteEnv(
        name="frozenlake", env_id="agentenvs/FrozenLake-v0",
        budgets=(2, 4, 6, 8, 10, 12, 14, 16), n=16, tasks="all",
        env_kwargs={"success_rate": 0.8},
        reference="frozenlake/oracle", noisy="frozenlake/noisy:error_rate=0.25,recover=0.9",
    ),
    # up to the env's 10 turns (InterCode's own limit); derive makes the extra budgets free
    SuiteEnv(
        name="intercode_sql", env_id="agentenvs/InterCodeSQL-v0",
        budgets=(1, 2, 3, 4, 6, 8, 10), n=16, tasks="all", aliases=("sql", "intercode"),
        reference="intercode_sql/gold", noisy="intercode_sql/noisy:error_rate=0.2",
    ),
    # the demo's slice: every test of a program runs in the local sandbox
    SuiteEnv(
        name="deepcoder", env_id="agentenvs/DeepCoderMT-v0",
        budgets=(1, 2, 3, 4), n=8, tasks="first:12", aliases=("deepcoder_mt",),
        reference="deepcoder/reference", noisy="deepcoder/buggy-then-fix:fix_rate=0.8",
        dataset="deepcoder-preview", splits=("lcbv5/test", "codeforces/test"),
    ),
    SuiteEnv(
        name="bfcl", env_id="agentenvs/BFCL-v0",
        budgets=(1, 2, 3), n=16, tasks="all",
        reference="bfcl/gold", noisy="bfcl/noisy:error_rate=0.2",
    ),
    SuiteEnv(
        name="bfcl_multi_turn", env_id="agentenvs/BFCLMultiTurn-v0",
        budgets=(4, 8, 12, 16, 24), n=16, tasks="all", aliases=("bfcl_mt",),
        reference="bfcl_mt/gold", noisy="bfcl_mt/noisy:error_rate=0.1",
    ),
    # the costliest env: the task's tests run at every episode's end, in rerun mode (the
    # env checks success when the budget runs out); one, three and ten turns
    SuiteEnv(
        name="terminal", env_id="agentenvs/TerminalBench-v0",
        budgets=(1, 3, 10), n=2, tasks="first:10", aliases=("terminal_bench", "tb"),
        reference="terminal/solution", noisy="terminal/noisy:error_rate=0.2",
        dataset="terminal-bench", splits=("core",),
    ),
)


class SuiteError(AgentEnvsError, ValueError):
    """An every-env evaluation that cannot go ahead as asked (one line, before any work)."""


def suite_names() -> list[str]:
    return [e.name for e in SUITE]


def select_envs(spec: str) -> list[SuiteEnv]:
    """The envs of ``all`` or a comma list of names, aliases or env ids, in suite order."""
    from agentenvs.core.suggest import did_you_mean

    wanted = [part.strip() for part in spec.split(",") if part.strip()]
    if not wanted:
        raise SuiteError("--envs names no env")
    if wanted == ["all"]:
        return list(SUITE)
    lookup: dict[str, SuiteEnv] = {}
    for env in SUITE:
        for key in (env.name, env.env_id, env.env_id.split("/")[-1], *env.aliases):
            lookup[key.lower()] = env
    chosen: list[SuiteEnv] = []
    for name in wanted:
        env = lookup.get(name.lower())
        if env is None:
            raise SuiteError(
                f"--envs: unknown env {name!r}{did_you_mean(name, list(lookup))} "
                f"(choose 'all' or from {', '.join(suite_names())})"
            )
        if env not in chosen:
            chosen.append(env)
    return [env for env in SUITE if env in chosen]


def policy_for(spec: str, env: SuiteEnv) -> str:
    """The policy spec to run on ``env``: the spec itself, or the env's own policy of a
    ``scripted/...`` family."""
    if spec == "scripted/reference":
        return env.reference
    if spec == "scripted/noisy":
        return env.noisy
    return spec


def full_data(env: SuiteEnv, root: Path | None = None) -> tuple[str, str] | None:
    """``(tasks_path, description)`` of the first split of the env's dataset that is
    cached with its files, or None (run the bundled slice)."""
    if env.dataset is None:
        return None
    from agentenvs.data.cache import find

    found = find(env.dataset, root)
    if found is None:
        return None
    for split in env.splits:
        path = Path(found.tasks_path(split))
        # a folder, a file, or a glob over the shards (a partial fetch may lack a split)
        if path.exists() or (path.parent.is_dir() and any(path.parent.glob(path.name))):
            return str(path), f"{env.dataset} {split} (agentenvs data)"
    return None


@dataclass
class EnvPlan:
    """What the suite does with one env: its run config, or why it is skipped."""

    env: SuiteEnv
    policy: str
    run_dir: Path
    data: str
    config: Any = None  # an EvalConfig; None when skipped
    #: why the env does not run (one line), and whether a missing service is the reason
    skip: str | None = None
    service_missing: bool = False
    done: int = 0

    @property
    def episodes(self) -> int:
        return 0 if self.config is None else len(self.config.work())

    def to_dict(self) -> dict[str, Any]:
        cfg = self.config
        return {
            "name": self.env.name,
            "env_id": self.env.env_id,
            "policy": self.policy if cfg is None else cfg.shown_policy,
            "run_dir": self.env.name,
            "data": self.data,
            "tasks": 0 if cfg is None else len(cfg.task_ids),
            "n": None if cfg is None else cfg.n,
            "budgets": None if cfg is None else list(cfg.budgets),
            "mode": None if cfg is None else cfg.mode,
            "episodes": self.episodes,
            "status": "skipped" if self.skip else "planned",
            "reason": self.skip,
        }


def _probe(env_id: str, env_kwargs: dict[str, Any], task_id: str) -> Any:
    """Build and reset the env once: what a missing service raises, it raises here."""
    import gymnasium as gym

    env = gym.make(env_id, **env_kwargs)
    try:
        env.reset(seed=0, options={"task_id": task_id})
        return env
    except BaseException:
        env.close()
        raise


def plan_suite(
    policy: str,
    envs: Sequence[SuiteEnv],
    out: Path,
    *,
    tasks: str | None = None,
    n: int | None = None,
    budgets: Sequence[int] | None = None,
    mode: str | None = None,
    seed: int = 0,
    env_kwargs: Mapping[str, dict[str, Any]] | None = None,
    show_budget: bool = False,
    data: str = "auto",
    record_tokens: bool = False,
    data_root: Path | None = None,
) -> list[EnvPlan]:
    """Each env's run config, checked against the env (built and reset once) and against
    a run already in ``out/<name>``. A missing service makes a skipped plan; settings
    that cannot work (a task id an env lacks, ``derive`` where it is invalid, a run
    folder of other settings) raise ``SuiteError`` before anything runs."""
    from agentenvs.eval.records import (
        MANIFEST_NAME,
        TRAJECTORIES_NAME,
        dumps_line,
        read_trajectories,
    )
    from agentenvs.eval.runner import (
        EvalConfig,
        RunConfigError,
        _policy_for_checks,
        check_mode,
        record_key,
        resolve_tasks,
    )

    if data not in ("auto", "bundled"):
        raise SuiteError(f"data must be 'auto' or 'bundled', got {data!r}")
    plans = []
    for env in envs:
        spec = policy_for(policy, env)
        kwargs = dict(env.env_kwargs)
        source = "bundled tasks"
        full = full_data(env, data_root) if data == "auto" else None
        if full is not None:
            kwargs["tasks_path"], source = full
        kwargs.update((env_kwargs or {}).get(env.name, {}))
        if show_budget:
            kwargs["show_budget"] = True
        plan = EnvPlan(env=env, policy=spec, run_dir=out / env.name, data=source)
        plans.append(plan)
        task_spec = tasks or (env.tasks if full is None else "all")
        try:
            task_ids = resolve_tasks(env.env_id, task_spec, kwargs)
            probe = _probe(env.env_id, kwargs, task_ids[0])
        except (ServiceUnavailable, SandboxError, MissingExtraError) as exc:
            plan.skip, plan.service_missing = _one_line(exc), True
            continue
        except (RunConfigError, KeyError) as exc:
            raise SuiteError(f"{env.name}: {_one_line(exc)}") from None
        except Exception as exc:  # noqa: BLE001 - any env that cannot start: say why, go on
            plan.skip = f"cannot start: {type(exc).__name__}: {_one_line(exc)}"
            continue
        try:
            checked = _policy_for_checks(spec)
            config = EvalConfig(
                env_id=env.env_id, policy=spec, task_ids=task_ids, n=n or env.n,
                budgets=budgets or env.budgets, mode=mode or "derive", seed=seed,
                env_kwargs=kwargs, record_tokens=record_tokens,
            )
            try:
                check_mode(config, probe, checked)
            except RunConfigError as exc:
                if mode is not None:
                    raise SuiteError(f"{env.name}: {_one_line(exc)}") from None
                config.mode = "rerun"
        finally:
            probe.close()
        manifest = plan.run_dir / MANIFEST_NAME
        if manifest.exists():
            stored = json.loads(manifest.read_text())["config"]
            wanted = json.loads(dumps_line(config.manifest_dict()))
            differ = sorted(k for k in set(stored) | set(wanted) if stored.get(k) != wanted.get(k))
            if differ:
                raise SuiteError(
                    f"{plan.run_dir} holds a run with other settings (it differs in "
                    f"{', '.join(differ)}); rerun with the options it was made with, or "
                    "choose another --out"
                )
            keys = {item.key for item in config.work()}
            done = {record_key(r) for r in read_trajectories(plan.run_dir / TRAJECTORIES_NAME)}
            plan.done = len(done & keys)
        plan.config = config
    return plans


def _one_line(exc: BaseException) -> str:
    from agentenvs.core.suggest import one_line

    message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
    return str(one_line(message))


def plan_lines(plans: Sequence[EnvPlan], policy: str) -> list[str]:
    """What will run, as lines for a terminal: one per env, then the total."""
    from agentenvs.policy.credentials import redact_spec

    lines = [f"every-env evaluation of {redact_spec(policy)}:"]
    total = done = 0
    width = max(len(p.env.name) for p in plans)
    for plan in plans:
        if plan.config is None:
            lines.append(f"  {plan.env.name:<{width}}  skipped: {plan.skip}")
            continue
        cfg = plan.config
        budgets = ",".join(map(str, cfg.budgets))
        resumed = f", {plan.done} already done" if plan.done else ""
        shown_kwargs = {k: v for k, v in cfg.env_kwargs.items() if k != "tasks_path"}
        lines.append(
            f"  {plan.env.name:<{width}}  {len(cfg.task_ids)} tasks ({plan.data}) x "
            f"{cfg.n} samples, budgets {budgets} turns, {cfg.mode} mode: {plan.episodes} "
            f"episodes{resumed}; {cfg.shown_policy}"
            + (f"; env kwargs {json.dumps(shown_kwargs)}" if shown_kwargs else "")
        )
        total += plan.episodes
        done += plan.done
    ran = sum(p.config is not None for p in plans)
    lines.append(
        f"  total: {total} episodes on {ran} env(s)"
        + (f", {done} already done" if done else "")
    )
    return lines


@dataclass
class EnvOutcome:
    """What became of one env: ``ran`` (with the runner's summary), ``skipped`` or ``failed``."""

    plan: EnvPlan
    status: str
    reason: str | None = None
    summary: Any = None  # a RunSummary


def run_suite(
    plans: Sequence[EnvPlan],
    *,
    executor: Any,
    progress: bool = True,
    chunk_size: int | None = None,
    faults: dict[str, Any] | None = None,
    say: Callable[[str], None] = print,
) -> list[EnvOutcome]:
    """Run (or resume) each planned env on ``executor``; a run that fails is one line
    and the next env runs."""
    from agentenvs.eval.faults import fault_line
    from agentenvs.eval.runner import run_pass_at_k_t

    outcomes = []
    for plan in plans:
        if plan.config is None:
            outcomes.append(EnvOutcome(plan, "skipped", plan.skip))
            continue
        try:
            summary = run_pass_at_k_t(
                plan.config, plan.run_dir, executor=executor, progress=progress,
                chunk_size=chunk_size, **(faults or {}),
            )
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # noqa: BLE001 - one env's failure never stops the others
            reason = f"{type(exc).__name__}: {_one_line(exc)}"
            say(f"{plan.env.name}: failed: {reason} (run the same command again to resume)")
            outcomes.append(EnvOutcome(plan, "failed", reason))
            continue
        say(
            f"{plan.env.name}: {summary.total} trajectories ({summary.already_done} already "
            f"done, {summary.ran} run in {summary.seconds:.1f} s); {fault_line(summary.faults)}"
        )
        outcomes.append(EnvOutcome(plan, "ran", None, summary))
    return outcomes


def write_suite_record(
    out: Path, policy: str, outcomes: Sequence[EnvOutcome], seconds: float | None = None
) -> Path:
    """``out/suite.json``: the policy and each env's plan and fate. Envs of an earlier
    call that this one did not name are kept."""
    from agentenvs.eval.records import write_json_atomic
    from agentenvs.policy.credentials import redact_spec

    path = out / SUITE_NAME
    envs: dict[str, Any] = {}
    if path.exists():
        envs = {e["name"]: e for e in read_suite_record(out)["envs"]}
    for outcome in outcomes:
        entry = outcome.plan.to_dict()
        entry["status"], entry["reason"] = outcome.status, outcome.reason
        envs[outcome.plan.env.name] = entry
    order = {name: i for i, name in enumerate(suite_names())}
    record = {
        "format": 1,
        "policy": redact_spec(policy),
        "envs": sorted(envs.values(), key=lambda e: order.get(e["name"], len(order))),
    }
    if seconds is not None:
        record["seconds"] = round(seconds, 1)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, record)
    return path


def is_suite_dir(path: str | Path) -> bool:
    return (Path(path) / SUITE_NAME).is_file()


def read_suite_record(out: str | Path) -> dict[str, Any]:
    path = Path(out) / SUITE_NAME
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SuiteError(f"{path}: cannot read the suite record ({exc})") from exc
    if not isinstance(record, dict) or not isinstance(record.get("envs"), list):
        raise SuiteError(f"{path}: not an agentenvs suite record")
    return record
