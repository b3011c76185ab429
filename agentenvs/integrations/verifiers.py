"""verifiers: any agentenvs env as a verifiers taskset with the env playing the user.

verifiers (``verifiers.v1``) loads a taskset by id: the id names an installed module that
exports its ``Taskset`` subclass (and optionally its ``Env`` subclass) in ``__all__``.
The module ``agentenvs_verifiers`` (shipped beside ``agentenvs``) re-exports this one,
so ``--env.taskset.id agentenvs_verifiers --env.taskset.env agentenvs/InterCodeSQL-v0``
or, in Python, ``vf.load_environment(AgentEnvsEnvConfig(taskset=AgentEnvsConfig(...)))``
runs it.

- ``AgentEnvsTaskset`` yields one task per (task id, seed): the system prompt as the
  task's ``system_prompt``, the task text as its ``prompt`` (the rules once), and the
  reset's ``task_id``/``seed``/``max_turns`` in ``info``. With ``budgets`` (BudgetMix)
  each task's ``max_turns`` is drawn from them (``agentenvs.integrations.process``); the
  rollouts of one task share it, and the trace's info records it (``agentenvs_max_turns``; ``None``: the env's own).
- ``AgentEnvsEnv.run`` resets the env host-side with those, then plays the user: each
  assistant reply is one env action, the observation comes back as the next user turn,
  and the episode ends when the env terminates or truncates. The summed env reward is
  recorded as ``agentenvs_reward``; success, score and turns go to the trace's info.
  The env is closed when the episode ends, failed or not.

Faults (``agentenvs.core.errors.Fault``: the env's infrastructure failed, not the
agent): a reset that faults is tried again on a fresh env (``RESET_TRIES`` times); a
reset that still faults, or a step that faults, ends the episode with ``EnvFault``, a
verifiers ``EnvError``: verifiers records it on the episode (``errors``, ``ok=False``,
resumed runs redo it) and no ``agentenvs_reward`` is recorded, so nothing scores it. A
retry rule retries such episodes: ``--env.retries.rules '[{"type": "EnvFault",
"max_retries": 3}]'``. Each fault is logged (``agentenvs.integrations``).

How many episodes. The taskset holds every (task id, seed) pair: all of the env's tasks
× ``seeds`` (``[0]``), e.g. InterCode-SQL's 143. An eval (``vf-eval``, ``run_eval``: they
pick tasks through ``Taskset.select``) plays the first ``eval_limit`` of them (5) unless
``-n``/``--select.limit`` says how many (``-n 143``: all of InterCode-SQL's), each
``-r``/``--num-rollouts`` times (1). The selection prints one line up front on stderr:
``agentenvs/InterCodeSQL-v0: running 5 of 143 tasks (143 task ids × 1 seed) × -r rollouts
each (default 1) = 5 episodes at -r 1; -n N for more (-n 143: all)``; then a log line per finished episode (``episode
3 of 5 done: ...``), shown by ``vf-eval --no-rich`` and kept in the run's ``eval.log``
(the dashboard counts them on screen). A trainer iterating the taskset itself
(``vf.load_environment(...).taskset``) gets every task.

Each env's blocking calls run on a thread of its own (``AsyncEnv``), so many episodes
share verifiers' event loop. ``play_episode`` is the loop itself, with the model's turn
as a coroutine argument; ``run`` hands it verifiers' interaction.

The player is verifiers' plain chat harness (``null``) in the ``subprocess`` runtime on
this host: each model turn runs verifiers' chat program, which reaches the model through
verifiers' interception server, so the trace records every request. verifiers prepares
that program's environment with ``uv`` (from the package index on first use, cached
afterwards); the ``integrations`` extra installs ``uv``, and ``AgentEnvsEnv.start`` puts
its directory on ``PATH`` when no ``uv`` is there.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from agentenvs.core.aio import AsyncEnv
from agentenvs.core.errors import Fault, MissingExtraError
from agentenvs.integrations.common import RESET_TRIES, log_fault, reset_with_retries, split_prompt

try:
    import verifiers.v1 as vf
    from pydantic import Field
    from verifiers.v1.errors import EnvError
    from verifiers.v1.harnesses.null import NullHarnessConfig
    from verifiers.v1.runtimes import SubprocessConfig
except ImportError as exc:
    raise MissingExtraError("verifiers", "integrations") from exc

logger = logging.getLogger(__name__)


class AgentEnvsConfig(vf.TasksetConfig):
    env: str = "agentenvs/FrozenLake-v0"
    """The agentenvs env id."""
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    """``gym.make`` keyword arguments of the env."""
    task_ids: list[str] | None = None
    """Tasks to play (default: every task of the env)."""
    seeds: list[int] = Field(default_factory=lambda: [0])
    """One task per (task id, seed)."""
    max_turns: int | None = None
    """Turn budget per episode (default: the env's)."""
    budgets: list[int] | None = None
    """BudgetMix: each task's budget drawn from these (not with ``max_turns``); every
    rollout of a task shares it."""
    budget_seed: int = 0
    """Seeds the budgets' draws (with each task's id and seed)."""
    eval_limit: int | None = Field(5, ge=1)
    """Tasks an eval plays when ``-n``/``--select.limit`` is not given: the first 5, so a
    first ``vf-eval`` is a handful of episodes (``None``: every task). Iterating the
    taskset itself (a trainer) is not limited."""


class AgentEnvsData(vf.TaskData):
    info: dict
    """The env id, its kwargs and the reset's task_id, seed and max_turns."""


class AgentEnvsTask(vf.Task[AgentEnvsData, vf.State, vf.TaskConfig]):
    pass


class AgentEnvsEnvConfig(vf.EnvConfig):
    # the env plays the user; the agent only chats (no shell, no code of its own), so
    # its chat program runs as a plain subprocess on this host (verifiers' own default
    # runtime is a remote sandbox)
    player: vf.AgentConfig = vf.AgentConfig(harness=NullHarnessConfig(id="null"),
                                            runtime=SubprocessConfig())


Turn = Callable[[str | None], Awaitable[str | None]]


class EnvFault(EnvError):
    """An agentenvs ``Fault`` ended the episode: its env's infrastructure failed, not the
    agent. ``record`` is the fault's record (kind, attribution, message, evidence)."""

    def __init__(self, fault: Fault, where: str) -> None:
        super().__init__(f"agentenvs fault ({fault.kind}, {fault.attribution}) in {where}: {fault}")
        self.record = fault.record()


async def play_episode(info: dict[str, Any], turn: Turn) -> dict[str, Any]:
    """One episode: ``turn(text)`` sends a user turn (``None``: the task prompt is already
    the model's) and returns the model's reply, or ``None`` when the model stopped."""
    import gymnasium as gym

    make = functools.partial(gym.make, info["env"], **info.get("env_kwargs", {}))
    options = {k: info[k] for k in ("task_id", "max_turns") if info.get(k) is not None}
    where = f"a verifiers episode of {info['env']} (task {info.get('task_id')}, seed {info.get('seed')})"
    env: AsyncEnv | None = None
    for number in range(1, RESET_TRIES + 1):
        try:
            env = await AsyncEnv.create(make)
            await env.areset(seed=info.get("seed"), options=options or None)
            break
        except Fault as fault:
            log_fault(fault, f"{where} (reset, try {number} of {RESET_TRIES})")
            if env is not None:
                await env.aclose()
                env = None
            if not fault.retryable or number == RESET_TRIES:
                raise EnvFault(fault, where) from fault
    assert env is not None
    outcome: dict[str, Any] = {"reward": 0.0, "success": False, "score": 0.0, "turns": 0, "stopped": None}
    try:
        reply = await turn(None)
        while True:
            if reply is None:
                outcome["stopped"] = "model"
                break
            try:
                observation, reward, terminated, truncated, step_info = await env.astep(reply)
            except Fault as fault:
                log_fault(fault, f"{where}, step {outcome['turns'] + 1}")
                raise EnvFault(fault, where) from fault
            outcome["reward"] += float(reward)
            outcome["turns"] += 1
            outcome["success"] = bool(step_info.get("success"))
            outcome["score"] = float(step_info.get("score") or 0.0)
            if terminated or truncated:
                outcome["stopped"] = "terminated" if terminated else "truncated"
                break
            reply = await turn(observation)
    finally:
        await env.aclose()
    return outcome


def ensure_uv_on_path() -> str | None:
    """Put the directory of the ``uv`` that the ``uv`` package installed on ``PATH`` when
    ``PATH`` has none (verifiers prepares its chat program with ``uv`` and would otherwise
    try to download one); returns the ``uv`` found, or ``None``."""
    found = shutil.which("uv")
    if found:
        return found
    try:
        from uv import find_uv_bin
    except ImportError:
        return None
    try:
        binary = find_uv_bin()
    except FileNotFoundError:
        return None
    directory = os.path.dirname(binary)
    os.environ["PATH"] = os.pathsep.join([directory, os.environ.get("PATH", "")]).rstrip(os.pathsep)
    logger.info("uv was not on PATH: using %s", binary)
    return binary


def follow_verifiers_logging() -> None:
    """Send this module's log lines where verifiers' CLIs send theirs (the console with
    ``--no-rich``, the run's ``eval.log``): their handlers on the ``verifiers.v1`` logger,
    at its level. Nothing changes where no such handler is set (a library caller's own
    logging configuration stands)."""
    library = logging.getLogger("verifiers.v1")
    handlers = [h for h in library.handlers if not isinstance(h, logging.NullHandler)]
    if not handlers:
        return
    for handler in handlers:
        if handler not in logger.handlers:
            logger.addHandler(handler)
    logger.setLevel(library.level)
    logger.propagate = False


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


class AgentEnvsEnv(vf.Env[AgentEnvsEnvConfig]):
    _planned: int = 0
    _finished: int = 0
    _started_at: float | None = None

    async def start(self) -> None:
        ensure_uv_on_path()
        follow_verifiers_logging()
        # an eval plans its episodes (slots) after this, so each eval counts from 0
        self._planned, self._finished, self._started_at = 0, 0, time.monotonic()

    def slots(self, task: Any, n: int = 1) -> list[Any]:
        planned = super().slots(task, n)
        self._planned += len(planned)
        return planned

    async def run_slot(self, slot: Any, *args: Any, **kwargs: Any) -> Any:
        episode = await super().run_slot(slot, *args, **kwargs)
        self._finished += 1
        elapsed = time.monotonic() - (self._started_at or time.monotonic())
        traces = list(episode.traces)
        info = traces[-1].info if traces else {}
        reward = traces[-1].rewards.get("agentenvs_reward") if traces else None
        what = (f"reward {reward.score:g} in {_plural(info.get('agentenvs_turns', 0), 'turn')}"
                if reward is not None else f"failed ({', '.join(e.type for e in episode.errors)})")
        logger.info("episode %d of %d done: %s %s (%.0f s in)", self._finished,
                    max(self._planned, self._finished), slot.task.data.name, what, elapsed)
        return episode

    async def run(self, task: AgentEnvsTask, agents: Any) -> None:
        async with agents.player.interaction(task) as interaction:

            async def turn(text: str | None) -> str | None:
                segment = await (interaction.turn() if text is None else interaction.turn(text))
                return None if segment.terminated else segment.last_reply

            outcome = await play_episode(task.data.info, turn)
            # recorded before the interaction closes, so verifiers' scoring and its
            # end-of-rollout log see the reward
            trace = interaction.trace
            trace.record_reward("agentenvs_reward", outcome["reward"], 1.0)
            trace.info.update({f"agentenvs_{k}": v for k, v in outcome.items() if k != "reward"})
            trace.info["agentenvs_max_turns"] = task.data.info.get("max_turns")


class AgentEnvsTaskset(vf.Taskset[AgentEnvsTask, AgentEnvsConfig]):
    def counts(self) -> tuple[int, int]:
        """``(task ids, seeds)``: the taskset holds their product of tasks."""
        config = self.config
        if config.task_ids is not None:
            ids = len(config.task_ids)
        else:
            import gymnasium as gym

            env = gym.make(config.env, **config.env_kwargs)
            try:
                ids = len(env.unwrapped.task_ids)  # type: ignore[attr-defined]
            finally:
                env.close()
        return ids, len(config.seeds)

    def select(self, config: Any) -> AgentEnvsTaskset:
        """verifiers' selection (``-n``, ``--select.*``), with ``eval_limit`` as the limit
        when none is given; says up front on stderr how many episodes that is."""
        limit = config.limit
        if limit is None and self.config.eval_limit is not None:
            limit = self.config.eval_limit
            config = config.model_copy(update={"limit": limit})
        view = super().select(config)
        follow_verifiers_logging()
        ids, seeds = self.counts()
        total = ids * seeds
        filtered = not (config.include.empty and config.exclude.empty)
        chosen = max(total - config.skip, 0) if not filtered else None
        if limit is not None:
            chosen = min(limit, chosen) if chosen is not None else None
        tasks = f"{chosen} of {total} tasks" if chosen is not None else f"up to {limit or total} of {total} tasks"
        per_rollout = f" = {_plural(chosen, 'episode')} at -r 1" if chosen is not None else ""
        more = f"; -n N for more (-n {total}: all)" if chosen is not None and chosen < total else ""
        print(f"{self.config.env}: running {tasks} ({_plural(ids, 'task id')} × {_plural(seeds, 'seed')})"
              f" × -r rollouts each (default 1){per_rollout}{more}", file=sys.stderr, flush=True)
        return view

    def load(self) -> Iterator[AgentEnvsTask]:
        from agentenvs.integrations.trl import task_rows

        config = self.config
        rows = task_rows(config.env, task_ids=config.task_ids, seeds=config.seeds,
                         max_turns=config.max_turns, budgets=config.budgets,
                         budget_seed=config.budget_seed, **config.env_kwargs)
        import gymnasium as gym

        holder: list[Any] = [gym.make(config.env, **config.env_kwargs)]

        def reset(seed: int, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
            if holder[0] is None:
                holder[0] = gym.make(config.env, **config.env_kwargs)
            return holder[0].reset(seed=seed, options=options)

        def discard() -> None:
            env, holder[0] = holder[0], None
            if env is not None:
                env.close()

        try:
            for row in rows:
                options = {"task_id": row["task_id"]}
                if row.get("max_turns") is not None:
                    options["max_turns"] = row["max_turns"]
                observation, info = reset_with_retries(
                    functools.partial(reset, row["seed"], options),
                    discard,
                    where=f"the taskset of {config.env} (task {row['task_id']})",
                )
                system, prompt = split_prompt(observation, info)
                yield AgentEnvsTask(
                    AgentEnvsData(
                        id=f"{row['task_id']}#{row['seed']}",
                        name=f"{config.env}:{row['task_id']}#{row['seed']}",
                        prompt=prompt,
                        system_prompt=system or None,
                        info={"env": config.env, "env_kwargs": dict(config.env_kwargs),
                              "task_id": row["task_id"], "seed": row["seed"],
                              "max_turns": row.get("max_turns")},
                    ),
                    config.task,
                )
        finally:
            discard()


__all__ = [
    "AgentEnvsConfig",
    "AgentEnvsData",
    "AgentEnvsEnv",
    "AgentEnvsEnvConfig",
    "AgentEnvsTask",
    "AgentEnvsTaskset",
    "EnvFault",
    "ensure_uv_on_path",
    "follow_verifiers_logging",
    "play_episode",
]
