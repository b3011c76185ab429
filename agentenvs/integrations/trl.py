"""TRL: any agentenvs env in ``GRPOTrainer``, through its environments mode or a rollout function.

Environments mode (``GRPOTrainer(environment_factory=...)``): TRL makes one object per
rollout, calls ``reset(**row)`` with the dataset row and appends the string it returns
to the prompt, exposes the object's public methods as tools (their type hints and
docstrings become the JSON schema the chat template shows) and calls them when the model
emits tool calls. ``for_trl(env_id)`` gives everything that needs:

- ``environment_factory``: objects whose only public methods are the env's actions as
  tools (FrozenLake ``move(direction)``, InterCode-SQL ``execute_sql(query)`` and
  ``submit()``, DeepCoder-MT ``run_tests(code)``, Terminal-Bench ``run_command(command)``
  and ``submit()``, any other env ``act(action)``). For ``agentenvs/BFCL-v0`` the tools
  are the task's own functions, one class per task (a dict factory, selected by the
  dataset's ``environment`` column), names with ``_`` for ``.`` (``underscore_to_dot``),
  parameters that are Python keywords renamed (``async`` → ``async_``) and mapped back,
  defaults kept in each parameter's description; the recorded calls are graded when
  the rollout is scored.
- ``dataset``: one row per (task, seed), so tasks × seeds rows (all the env's tasks unless
  ``task_ids`` names some: FrozenLake's 38 maps × ``seeds=range(256)`` are 9,728 rows): the
  system prompt as a system message, an empty user message that ``reset`` fills with the
  task, and ``task_id``/``seed``.
- Tool mode's text: the system prompt, the task and every tool's answer speak of the tools
  (FrozenLake: call ``move``), never of the text format of free-text actions (no
  ``<answer>`` tags, fenced blocks or ``submit`` replies): ``common.tool_mode_text``. An
  env whose one tool is ``act`` keeps its text format, which is ``act``'s argument.
- ``reward_funcs``: one function reading each rollout's env: the episode's summed reward.

What TRL leaves to the env, handled here:

- Per-rollout randomness: the G rollouts of a group get the same row (same seed), so
  after the common reset each object replaces the env's generator with a stream of its
  own (seeded by the row's seed and the object's index), as ``GroupEnv`` does: slips on
  FrozenLake differ between rollouts and a run replays exactly.
- Clean-up: TRL keeps its objects for the whole run and never closes them. By default
  each episode's env is closed once its reward is read (shell, sandbox, container,
  database released; the next reset makes a new one), and a finalizer closes whatever
  is still open when the object is collected or the process exits.
- Faults (``agentenvs.core.errors.Fault``: the env's infrastructure failed, not the
  agent): a reset that faults is tried again on a fresh env (``RESET_TRIES`` times); a
  rollout whose reset or step still faults is over (its tools answer ``FAULT_NOTICE``),
  its env is closed and its reward is ``None``, which TRL (1.x: ``GRPOTrainer``'s
  ``_calculate_rewards``) turns into NaN: the rollout is left out of its group's
  baseline and gets no advantage, where a 0 would have taught the policy that the fault
  was its failure. Each fault is a warning in the log (``agentenvs.integrations``), and
  the reward functions log ``agentenvs/faulted_rollouts`` (the batch's count) through
  TRL's ``log_metric`` and the fault's kind as the ``agentenvs_fault`` column of the
  completions table through ``log_extra``.
- Tool-call parsing is TRL's: it works with chat templates TRL recognises (Qwen, Llama
  3.1+, GLM, gpt-oss, ...), see ``trl.chat_template_utils.add_response_schema``.

Free-text actions without tools: ``make_rollout_func`` plays G rollouts of a row through
``GroupEnv`` with the trainer's model, multi-turn, and returns what
``GRPOTrainer(rollout_func=...)`` expects (prompt and completion ids, sampling
log-probabilities, an ``env_mask`` that excludes observation tokens from the loss, and
the episode rewards for ``reward_from_rollout``: ``None`` for a rollout whose group
faulted).
"""

from __future__ import annotations

import functools
import itertools
import json
import re
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import gymnasium as gym

from agentenvs.core.errors import Fault
from agentenvs.integrations.common import (
    ActionTool,
    action_tools,
    calls_action,
    is_bfcl_single_turn,
    log_fault,
    reseed_rollout,
    reset_with_retries,
    split_prompt,
    tool_mode_system_prompt,
    tool_mode_text,
)
from agentenvs.integrations.process import (
    BudgetSpec,
    budget_drawer,
    check_process_reward,
    process_return,
    step_records,
    step_rewards,
)
from agentenvs.integrations.tool_schemas import (
    ToolParam,
    make_tool_method,
    schema_hint,
    tool_params,
)

EPISODE_OVER = "The episode is over: no further actions are taken."
#: what the model is told once its rollout's env has faulted (the rollout is not scored)
FAULT_NOTICE = (
    "The environment failed (an infrastructure fault, not your doing): this episode is "
    "over and is not scored."
)


# ------------------------------------------------------------------ the env objects
_instances = itertools.count()


class AgentEnvsTRLEnv:
    """Base of the objects TRL makes per rollout (see the module docstring).

    Only the tool methods of subclasses are public; everything else starts with ``_``
    (TRL would expose any other public method as a tool).
    """

    _env_id: str = ""
    _env_kwargs: dict[str, Any] = {}
    _close_after_episode: bool = True

    def __init__(self) -> None:
        self._index = next(_instances)
        self._holder: list[gym.Env | None] = [None]
        self._finalizer = weakref.finalize(self, _close_held, self._holder)
        self._row_seed: int | None = None
        self._return = 0.0
        self._done = False
        self._scored = False
        self._fault: Fault | None = None
        self._calls: list[tuple[str, dict[str, Any]]] = []
        self._steps: list[tuple[str, str, float, bool, bool, dict[str, Any]]] = []
        self._max_turns: int | None = None

    # TRL: reset(**row) returns text appended to the prompt's last user message
    def reset(self, **row: Any) -> str:
        seed = row.get("seed")
        options = {k: row[k] for k in ("task_id", "max_turns") if row.get(k) is not None}
        self._row_seed = seed
        self._return = 0.0
        self._done = False
        self._scored = False
        self._fault = None
        self._calls = []
        self._steps = []

        def attempt() -> tuple[str, dict[str, Any]]:
            return self._env().reset(seed=None if seed is None else int(seed), options=options or None)

        try:
            observation, info = reset_with_retries(attempt, self._close, where=self._where())
        except Fault as fault:
            self._fault, self._done = fault, True
            self._close()
            return FAULT_NOTICE
        reseed_rollout(self._env(), None if seed is None else int(seed), self._index)
        self._info = info
        self._max_turns = info.get("max_turns")
        prompt = row.get("prompt")
        env = self._env()
        system, user = split_prompt(observation, info)
        # the dataset's prompt already carries the system prompt: hand over only the task
        if isinstance(prompt, list) and prompt and prompt[0].get("role") == "system":
            return tool_mode_text(self._env_id, env, user)
        if not system or not observation.startswith(system):
            return tool_mode_text(self._env_id, env, observation)
        system = tool_mode_system_prompt(self._env_id, env, system)
        return f"{system}\n\n{tool_mode_text(self._env_id, env, user)}"

    def _env(self) -> gym.Env:
        env = self._holder[0]
        if env is None:
            env = gym.make(self._env_id, **self._env_kwargs)
            self._holder[0] = env
        return env

    def _where(self) -> str:
        return f"TRL rollout {self._index} of {self._env_id} (row seed {self._row_seed})"

    def _act(self, action: str) -> str:
        if self._fault is not None:
            return FAULT_NOTICE
        if self._done:
            return EPISODE_OVER
        env = self._env()
        try:
            observation, reward, terminated, truncated, info = env.step(action)
        except Fault as fault:
            log_fault(fault, f"{self._where()}, step {len(self._steps) + 1}")
            self._fault, self._done = fault, True
            self._close()
            return FAULT_NOTICE
        self._return += float(reward)
        self._done = bool(terminated or truncated)
        self._steps.append((action, observation, float(reward), bool(terminated), bool(truncated), info))
        observation = tool_mode_text(self._env_id, env, observation)  # it speaks of the tools
        if self._done:
            outcome = "solved" if info.get("success") else "not solved"
            return f"{observation}\n\n[{EPISODE_OVER} Outcome: {outcome}.]"
        return observation

    def _record_call(self, name: str, arguments: dict[str, Any]) -> str:
        if self._fault is not None:
            return FAULT_NOTICE
        if self._done:
            return EPISODE_OVER
        self._calls.append((name, arguments))
        return f"Call {len(self._calls)} recorded: {name}({json.dumps(arguments)})."

    def _episode_return(self) -> float | None:
        """The episode's summed reward (grading recorded calls first), or ``None`` when its
        env faulted; then, by default, the env is closed."""
        if not self._scored:
            self._scored = True
            if self._holder[0] is not None and self._calls_graded_at_end() and not self._done:
                self._act(calls_action(self._calls))
        reward = None if self._fault is not None else self._return
        if self._close_after_episode:
            self._close()
        return reward

    def _calls_graded_at_end(self) -> bool:
        return False

    def _close(self) -> None:
        _close_held(self._holder)

    @property
    def _closed(self) -> bool:
        return self._holder[0] is None


def _close_held(holder: list[gym.Env | None]) -> None:
    env, holder[0] = holder[0], None
    if env is not None:
        env.close()


class _BFCLTaskEnv(AgentEnvsTRLEnv):
    def _calls_graded_at_end(self) -> bool:
        return True


def _action_method(tool: ActionTool) -> Callable[..., str]:
    params = [
        ToolParam(name, name, Literal[choices] if choices else str, desc, True)  # type: ignore[valid-type]
        for name, desc, choices in tool.params
    ]

    def run(self: AgentEnvsTRLEnv, arguments: dict[str, Any]) -> str:
        try:
            action = tool.template(**arguments)
        except (KeyError, TypeError) as exc:
            return f"Invalid call of {tool.name}: {exc}."
        return self._act(action)

    return make_tool_method(tool.name, tool.description, params, run)


def environment_class(
    env_id: str, *, close_after_episode: bool = True, **env_kwargs: Any
) -> type[AgentEnvsTRLEnv]:
    """The TRL environment class of a free-text env: its actions as tool methods."""
    if is_bfcl_single_turn(env_id):
        raise ValueError(f"{env_id} has tools per task: use for_trl(), which builds a class per task")
    gym.spec(env_id)
    attrs: dict[str, Any] = {
        "_env_id": env_id,
        "_env_kwargs": dict(env_kwargs),
        "_close_after_episode": close_after_episode,
    }
    for tool in action_tools(env_id):
        attrs[tool.name] = _action_method(tool)
    name = env_id.rsplit("/", 1)[-1].split("-v")[0] + "Env"
    return type(name, (AgentEnvsTRLEnv,), attrs)


def bfcl_task_class(
    env_id: str, task_id: str, tools: Sequence[dict[str, Any]], *, close_after_episode: bool = True,
    **env_kwargs: Any,
) -> type[AgentEnvsTRLEnv]:
    """A class whose tool methods are one BFCL task's functions; calls are recorded and
    graded together when the rollout is scored."""
    attrs: dict[str, Any] = {
        "_env_id": env_id,
        "_env_kwargs": dict(env_kwargs),
        "_close_after_episode": close_after_episode,
    }
    reserved = {"reset"} | {n for n in dir(AgentEnvsTRLEnv)}
    for spec in tools:
        fn = spec.get("function", spec)
        schema_name = str(fn["name"])
        attr = schema_name if schema_name.isidentifier() and schema_name not in reserved else None
        if attr is None:
            raise ValueError(
                f"BFCL function name {schema_name!r} of {task_id} cannot be a method name; "
                "make the env with underscore_to_dot=True"
            )

        def run(self: AgentEnvsTRLEnv, arguments: dict[str, Any], _name: str = schema_name) -> str:
            return self._record_call(_name, arguments)

        attrs[attr] = make_tool_method(
            schema_name, str(fn.get("description") or schema_name), tool_params(fn.get("parameters")), run
        )
    safe = re.sub(r"\W", "_", task_id)
    return type(f"BFCL_{safe}", (_BFCLTaskEnv,), attrs)


# ------------------------------------------------------------------ rewards and datasets
def agentenvs_reward(
    prompts: Any = None, completions: Any = None, environments: Any = None, **kwargs: Any
) -> list[float | None]:
    """TRL reward function: each rollout's episode reward, read from its env object;
    ``None`` (no reward: TRL leaves the rollout out) where the rollout's env faulted."""
    if environments is None:
        raise ValueError("agentenvs_reward reads the rollouts' envs: use it with environment_factory")
    rewards = [env._episode_return() for env in environments]
    faults = [env._fault.kind if env._fault is not None else None for env in environments]
    _log_faults(faults, kwargs)
    _log_budgets(environments, kwargs)
    return rewards


def process_reward_func(how: str = "mean", weight: float = 1.0) -> Callable[..., list[float | None]]:
    """A TRL reward function like ``agentenvs_reward`` that adds the steps' grades: each
    rollout's episode return plus ``weight`` times the ``sum`` or ``mean`` (``how``) of its
    steps' ``info["step_reward"]`` (``process.process_return``); ``None`` where the env
    faulted. A step without a grade (an env that cannot grade steps) is a ``ValueError``.
    Its name, which TRL logs, is ``agentenvs_process_reward_<how>``."""
    check_process_reward(how, weight)

    def reward(prompts: Any = None, completions: Any = None, environments: Any = None,
               **kwargs: Any) -> list[float | None]:
        if environments is None:
            raise ValueError("a process reward reads the rollouts' envs: use it with environment_factory")
        out: list[float | None] = []
        for env in environments:
            episode = env._episode_return()  # grades recorded calls first (a step of its own)
            if episode is None:
                out.append(None)
                continue
            graded = step_rewards([step[5] for step in env._steps], env._where())
            out.append(process_return(episode, graded, how=how, weight=weight))
        _log_faults([e._fault.kind if e._fault is not None else None for e in environments], kwargs)
        _log_budgets(environments, kwargs)
        return out

    reward.__name__ = reward.__qualname__ = f"agentenvs_process_reward_{how}"
    return reward


def _log_budgets(environments: Sequence[Any], kwargs: dict[str, Any]) -> None:
    """Each rollout's turn budget as the ``agentenvs_max_turns`` column of TRL's completions
    table, so the records of a BudgetMix run keep it."""
    log_extra = kwargs.get("log_extra")
    if callable(log_extra):
        log_extra("agentenvs_max_turns", [getattr(env, "_max_turns", None) for env in environments])


def _log_faults(kinds: Sequence[str | None], kwargs: dict[str, Any]) -> None:
    """The batch's faulted rollouts in TRL's metrics (``log_metric``) and completions
    table (``log_extra``), where the trainer passes them."""
    log_metric, log_extra = kwargs.get("log_metric"), kwargs.get("log_extra")
    if callable(log_metric):
        log_metric("agentenvs/faulted_rollouts", float(sum(k is not None for k in kinds)))
    if callable(log_extra):
        log_extra("agentenvs_fault", list(kinds))


@dataclass
class TRLSetup:
    """What ``GRPOTrainer`` takes, and where it came from.

    - ``environment_factory``: TRL's ``environment_factory`` (a class, one object per
      rollout; BFCL: a dict of classes, one per task, selected by the ``environment`` column).
    - ``dataset``: TRL's ``train_dataset``, a ``datasets.Dataset`` of ``rows``.
    - ``reward_funcs``: TRL's ``reward_funcs``.
    - ``rows``: the dataset's rows as dicts (``prompt``, ``task_id``, ``seed``, and
      ``max_turns`` where given), for code that reads them without ``datasets``.
    - ``env_id``: the env id the setup was made for (``for_trl``'s first argument), e.g. to
      build a tokenizer on its text (``agentenvs.integrations.tiny_model.tiny_qwen3``)."""

    environment_factory: Callable[[], AgentEnvsTRLEnv] | dict[str, Callable[[], AgentEnvsTRLEnv]]
    dataset: Any
    reward_funcs: list[Callable[..., list[float]]] = field(default_factory=lambda: [agentenvs_reward])
    rows: list[dict[str, Any]] = field(default_factory=list)
    env_id: str = ""


def task_rows(
    env_id: str,
    *,
    task_ids: Iterable[str] | None = None,
    seeds: Iterable[int] = (0,),
    max_turns: int | None = None,
    tools: bool = False,
    budgets: BudgetSpec | None = None,
    budget_seed: int = 0,
    **env_kwargs: Any,
) -> list[dict[str, Any]]:
    """One row per (task, seed), with the system prompt, the task's tools where it has
    some, and the reset's ``task_id``/``seed`` (``max_turns`` if given).

    Rows: every seed of ``seeds`` for every task of ``task_ids`` (default: all the env's
    tasks), task by task, so ``len(task_ids) * len(seeds)`` of them: FrozenLake's 38 maps ×
    ``seeds=range(256)`` give 9,728 rows; with ``task_ids=["8x8"]``, 256.

    ``tools``: the system prompt speaks of the env's tools (``tool_mode_system_prompt``),
    as ``for_trl``'s rows do; else of its text actions, as ``make_rollout_func``'s do.

    ``budgets`` (BudgetMix; not with ``max_turns``): each row's ``max_turns`` is drawn
    from them (a sequence of ints, a mapping ``{budget: weight}`` or ``f(rng)``), seeded by
    ``budget_seed``, the task id and the seed only (``agentenvs.integrations.process``).

    A reset that faults is logged and tried again on a fresh env (``reset_with_retries``);
    one that still faults is raised: a dataset is never built without its rows."""
    if budgets is not None and max_turns is not None:
        raise ValueError("give max_turns (one budget) or budgets (one drawn per row), not both")
    draw = budget_drawer(budgets, budget_seed) if budgets is not None else None
    holder: list[gym.Env | None] = [gym.make(env_id, **env_kwargs)]
    rows = []

    def env() -> gym.Env:
        if holder[0] is None:
            holder[0] = gym.make(env_id, **env_kwargs)
        return holder[0]

    try:
        ids = list(task_ids) if task_ids is not None else list(env().unwrapped.task_ids)  # type: ignore[attr-defined]
        for task_id in ids:
            for seed in seeds:
                options: dict[str, Any] = {"task_id": task_id}
                budget = draw(task_id, int(seed)) if draw is not None else max_turns
                if budget is not None:
                    options["max_turns"] = budget
                observation, info = reset_with_retries(
                    functools.partial(lambda s, o: env().reset(seed=s, options=o), int(seed), options),
                    functools.partial(_close_held, holder),
                    where=f"the dataset of {env_id} (task {task_id}, seed {seed})",
                )
                system, _ = split_prompt(observation, info)
                if tools:
                    system = tool_mode_system_prompt(env_id, env(), system)
                row: dict[str, Any] = {
                    "prompt": [{"role": "system", "content": system}, {"role": "user", "content": ""}],
                    "task_id": task_id,
                    "seed": int(seed),
                }
                if budget is not None:
                    row["max_turns"] = budget
                if info.get("tools"):
                    row["_tools"] = info["tools"]
                rows.append(row)
    finally:
        _close_held(holder)
    return rows


def for_trl(
    env_id: str,
    *,
    task_ids: Iterable[str] | None = None,
    seeds: Iterable[int] = (0,),
    max_turns: int | None = None,
    close_after_episode: bool = True,
    budgets: BudgetSpec | None = None,
    budget_seed: int = 0,
    process_reward: str | None = None,
    process_weight: float = 1.0,
    **env_kwargs: Any,
) -> TRLSetup:
    """Environment factory, task dataset and reward function for ``GRPOTrainer``.

    The dataset has one row per (task, seed): ``len(task_ids) * len(seeds)`` rows, all the
    env's tasks when ``task_ids`` is None (``task_rows``): FrozenLake's 38 maps ×
    ``seeds=range(256)`` give 9,728 rows. Its prompts, and everything the tools answer,
    speak of the tools (``tool_mode_text``).

    BudgetMix: ``budgets=[2, 4, 8]`` (instead of ``max_turns``) gives each row a budget
    drawn from them, seeded by ``budget_seed`` (``task_rows``); TRL repeats a row for each
    completion of its group, so a group shares its budget. ``show_budget=True`` (an env
    keyword) shows it to the agent. The completions table gets an ``agentenvs_max_turns``
    column. Process reward: ``process_reward="mean"`` (or ``"sum"``) makes the reward
    function ``process_reward_func(process_reward, process_weight)``: the return plus the
    steps' ``info["step_reward"]``, folded."""
    from datasets import Dataset

    if is_bfcl_single_turn(env_id):
        env_kwargs.setdefault("underscore_to_dot", True)
    check_process_reward(process_reward, process_weight)
    rows = task_rows(
        env_id, task_ids=task_ids, seeds=seeds, max_turns=max_turns, tools=True, budgets=budgets,
        budget_seed=budget_seed, **env_kwargs
    )
    factory: Any
    if is_bfcl_single_turn(env_id):
        factories: dict[str, Callable[[], AgentEnvsTRLEnv]] = {}
        for row in rows:
            task_id = row["task_id"]
            if task_id not in factories:
                factories[task_id] = bfcl_task_class(
                    env_id, task_id, row["_tools"], close_after_episode=close_after_episode, **env_kwargs
                )
            row["environment"] = task_id
        factory = factories
    else:
        factory = environment_class(env_id, close_after_episode=close_after_episode, **env_kwargs)
    for row in rows:
        row.pop("_tools", None)
    setup = TRLSetup(environment_factory=factory, dataset=Dataset.from_list(rows), rows=rows,
                     env_id=env_id)
    if process_reward is not None:
        setup.reward_funcs = [process_reward_func(process_reward, process_weight)]
    return setup


# ------------------------------------------------------------------ rollout_func over GroupEnv
def reward_from_rollout(
    prompts: Any = None, completions: Any = None, env_reward: Any = None, **kwargs: Any
) -> list[float | None]:
    """TRL reward function for ``make_rollout_func``: the episode rewards it returned
    (``None`` for a faulted rollout's)."""
    if env_reward is None:
        raise ValueError("reward_from_rollout reads 'env_reward' from make_rollout_func's output")
    faults = kwargs.get("env_fault") or [None] * len(env_reward)
    _log_faults(list(faults), kwargs)
    budgets = kwargs.get("env_max_turns")
    if budgets is not None and callable(kwargs.get("log_extra")):
        kwargs["log_extra"]("agentenvs_max_turns", list(budgets))
    return [None if r is None else float(r) for r in env_reward]


def _prompt_key(prompt: Any) -> str:
    if isinstance(prompt, list):
        return json.dumps([[m.get("role"), m.get("content")] for m in prompt])
    return json.dumps(prompt)


class _GroupSlot:
    """The ``GroupEnv`` of one rollout group, made and reset anew on each try."""

    def __init__(
        self, env_id: str, size: int, env_kwargs: dict[str, Any], seed: int, options: dict[str, Any]
    ) -> None:
        self.args = (env_id, size, env_kwargs, seed, options)
        self.group: Any = None
        self.infos: dict[str, dict[str, Any]] = {}

    def open(self) -> Any:
        from agentenvs.wrappers import GroupEnv

        env_id, size, env_kwargs, seed, options = self.args
        self.group = GroupEnv(env_id, group_size=size, **env_kwargs)
        _, self.infos = self.group.reset(seed=seed, options=options)
        return self.group

    def close(self) -> None:
        group, self.group = self.group, None
        if group is not None:
            group.close()


def make_rollout_func(
    env_id: str,
    *,
    task_ids: Iterable[str] | None = None,
    seeds: Iterable[int] = (0,),
    max_turns: int | None = None,
    max_new_tokens: int = 64,
    temperature: float = 1.0,
    budgets: BudgetSpec | None = None,
    budget_seed: int = 0,
    process_reward: str | None = None,
    process_weight: float = 1.0,
    **env_kwargs: Any,
) -> tuple[Callable[[list[Any], Any], dict[str, Any]], Any]:
    """``(rollout_func, dataset)`` for ``GRPOTrainer(rollout_func=..., train_dataset=dataset,
    reward_funcs=[reward_from_rollout])``: free-text multi-turn episodes, no tools.

    The dataset's prompts are the system prompt and the task. TRL hands the function its
    batch with each prompt repeated once per generation; each run of equal prompts is
    played as one ``GroupEnv`` group from the row's task and seed (each rollout on its own
    random stream). Every turn the trainer's model samples a reply for each live rollout
    (``max_new_tokens`` per turn), the env steps, and the observation is appended as the
    next user message in the chat template. Returned: ``prompt_ids``, ``completion_ids``
    (the model's turns and the observations between them, up to the trainer's
    ``max_completion_length``), ``logprobs`` (sampling log-probabilities; 0 for
    observation tokens), ``env_mask`` (1 for model tokens, 0 for observation tokens),
    ``env_reward`` (each episode's summed reward), ``env_fault`` (``None``, or the kind of
    the fault that ended the rollout) and ``env_steps``, each rollout's step records (the
    ``state_key`` each action was taken from, the step's reward and ``step_reward`` or
    None, and the ``[start, end)`` span of its model tokens in ``completion_ids``), which
    ``agentenvs.integrations.trl_gigpo.GiGPOTrainer`` turns into per-token advantages.

    A group whose reset faults is tried again on a fresh group (``RESET_TRIES`` times); a
    reset that still faults, or a step that faults, ends the group's live rollouts with
    ``env_reward`` ``None`` (rollouts that had already ended keep theirs), logged.

    ``budgets``/``budget_seed`` (BudgetMix) give each row its budget as ``task_rows`` does;
    rows whose prompts are equal (the budget hidden, one map) take turns, group by group,
    so every row's budget and seed is played. ``env_max_turns`` holds each rollout's
    budget (``reward_from_rollout`` logs it as the ``agentenvs_max_turns`` column).
    ``process_reward="mean"`` or ``"sum"`` makes ``env_reward`` the return plus
    ``process_weight`` times the fold of the steps' ``info["step_reward"]``.
    """
    import torch
    from datasets import Dataset


    check_process_reward(process_reward, process_weight)
    rows = task_rows(env_id, task_ids=task_ids, seeds=seeds, max_turns=max_turns, budgets=budgets,
                     budget_seed=budget_seed, **env_kwargs)
    probe = gym.make(env_id, **env_kwargs)
    by_key: dict[str, list[dict[str, Any]]] = {}
    turn_of: dict[str, int] = {}
    try:
        for row in rows:
            row.pop("_tools", None)
            options = {"task_id": row["task_id"]}
            if row.get("max_turns") is not None:
                options["max_turns"] = row["max_turns"]
            observation, info = probe.reset(seed=row["seed"], options=options)
            row["prompt"][1]["content"] = split_prompt(observation, info)[1]
            by_key.setdefault(_prompt_key(row["prompt"]), []).append(row)
    finally:
        probe.close()

    def render(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        tokenizer = trainer.processing_class
        model = trainer.accelerator.unwrap_model(trainer.model)
        limit = int(getattr(trainer.args, "max_completion_length", None) or 256)
        device = next(model.parameters()).device
        out: dict[str, list[Any]] = {
            k: []
            for k in ("prompt_ids", "completion_ids", "logprobs", "env_mask", "env_reward", "env_fault",
                      "env_max_turns", "env_steps")
        }
        i = 0
        while i < len(prompts):
            key = _prompt_key(prompts[i])
            j = i
            while j < len(prompts) and _prompt_key(prompts[j]) == key:
                j += 1
            candidates = by_key.get(key)
            if candidates is None:
                raise ValueError("a prompt that make_rollout_func's dataset does not hold")
            row = candidates[turn_of.get(key, 0) % len(candidates)]
            turn_of[key] = turn_of.get(key, 0) + 1
            options = {"task_id": row["task_id"]}
            if row.get("max_turns") is not None:
                options["max_turns"] = row["max_turns"]
            where = f"TRL rollout group of {env_id} (task {row['task_id']}, seed {row['seed']})"
            slot = _GroupSlot(env_id, j - i, env_kwargs, row["seed"], options)
            try:
                try:
                    group = reset_with_retries(slot.open, slot.close, where=where)
                except Fault as fault:
                    for _ in range(j - i):
                        out["prompt_ids"].append(render(tokenizer, row["prompt"]))
                        out["completion_ids"].append([tokenizer.eos_token_id])
                        out["logprobs"].append([0.0])
                        out["env_mask"].append([1])
                        out["env_reward"].append(None)
                        out["env_fault"].append(fault.kind)
                        out["env_max_turns"].append(row.get("max_turns"))
                        out["env_steps"].append(step_records(None, [], [], []))
                    i = j
                    continue
                agents = list(group.possible_agents)
                messages = {a: [dict(m) for m in row["prompt"]] for a in agents}
                prompt_ids = {a: render(tokenizer, messages[a]) for a in agents}
                ids = {a: [] for a in agents}
                logps = {a: [] for a in agents}
                mask = {a: [] for a in agents}
                total = dict.fromkeys(agents, 0.0)
                graded: dict[str, list[dict[str, Any]]] = {a: [] for a in agents}
                rewards_of: dict[str, list[float]] = {a: [] for a in agents}
                spans: dict[str, list[tuple[int, int]]] = {a: [] for a in agents}
                faulted: dict[str, str] = {}
                while group.agents:
                    live = [a for a in group.agents if len(ids[a]) < limit]
                    if not live:
                        break
                    actions = {}
                    starts = {a: len(ids[a]) for a in group.agents}
                    for a in group.agents:
                        if a not in live:
                            actions[a] = ""
                            continue
                        context = torch.tensor([prompt_ids[a] + ids[a]], device=device)
                        with torch.no_grad():
                            gen = model.generate(
                                input_ids=context, attention_mask=torch.ones_like(context),
                                # only the temperature shapes the draw (no top-k of the
                                # model's generation_config): the logprobs are then those
                                # the trainer computes for the same ids
                                do_sample=True, temperature=temperature, top_k=0, top_p=1.0,
                                max_new_tokens=max(1, min(max_new_tokens, limit - len(ids[a]))),
                                output_scores=True, return_dict_in_generate=True,
                                pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                            )
                        new = gen.sequences[0, context.shape[1] :].tolist()
                        for step, token in enumerate(new):
                            logps[a].append(float(torch.log_softmax(gen.scores[step][0].float(), -1)[token]))
                        ids[a] += new
                        mask[a] += [1] * len(new)
                        actions[a] = tokenizer.decode(new, skip_special_tokens=True).strip()
                    try:
                        observations, rewards, terms, truncs, step_infos = group.step(actions)
                    except Fault as fault:
                        log_fault(fault, f"{where}, a step")
                        faulted.update(dict.fromkeys(group.agents, fault.kind))
                        break
                    for a, text in actions.items():
                        total[a] += rewards[a]
                        graded[a].append(step_infos[a])
                        rewards_of[a].append(float(rewards[a]))
                        spans[a].append((starts[a], len(ids[a])))
                        if terms[a] or truncs[a]:
                            continue
                        # the observation as the template renders the next user turn
                        messages[a] += [{"role": "assistant", "content": text},
                                        {"role": "user", "content": observations[a]}]
                        full = render(tokenizer, messages[a])
                        done = prompt_ids[a] + ids[a]
                        extra = full[len(done):] if full[: len(done)] == done else tokenizer(
                            observations[a], add_special_tokens=False)["input_ids"]
                        room = max(limit - len(ids[a]), 0)
                        extra = extra[:room]
                        ids[a] += extra
                        logps[a] += [0.0] * len(extra)
                        mask[a] += [0] * len(extra)
                for a in agents:
                    out["prompt_ids"].append(prompt_ids[a])
                    out["completion_ids"].append(ids[a] or [tokenizer.eos_token_id])
                    out["logprobs"].append(logps[a] or [0.0])
                    out["env_mask"].append(mask[a] or [1])
                    reward: float | None = None if a in faulted else total[a]
                    if reward is not None and process_reward is not None:
                        folded = step_rewards(graded[a], where)
                        reward = process_return(reward, folded, how=process_reward, weight=process_weight)
                    out["env_reward"].append(reward)
                    out["env_fault"].append(faulted.get(a))
                    out["env_max_turns"].append(row.get("max_turns"))
                    out["env_steps"].append(
                        step_records(slot.infos.get(a), graded[a], rewards_of[a], spans[a])
                    )
            finally:
                slot.close()
            i = j
        return out

    return rollout_func, Dataset.from_list(rows)


__all__ = [
    "AgentEnvsTRLEnv",
    "TRLSetup",
    "ToolParam",
    "agentenvs_reward",
    "bfcl_task_class",
    "environment_class",
    "for_trl",
    "make_rollout_func",
    "make_tool_method",
    "process_reward_func",
    "reward_from_rollout",
    "schema_hint",
    "task_rows",
    "tool_params",
]
