"""verifiers environments as text envs of the suite (replay restore).

verifiers (0.4, ``verifiers.v1``) splits an environment in three: a ``Taskset`` (tasks,
each a ``Task`` whose ``@vf.reward`` hooks score a finished ``Trace``), an ``Env`` whose
``run(task, agents)`` is the multi-turn rollout (it opens ``agents.<seat>.interaction(task)``
and plays ``await interaction.turn(message)``: each turn sends the env's message and returns
the agent's reply as a ``Segment``), and the agents, each a harness program that calls a
model. A taskset is named by its module (``taskset="my_taskset"``, exporting its
``Taskset`` and, for multi-turn play, its ``Env`` in ``__all__``), as verifiers' own loaders
read it; a taskset with no ``Env`` of its own plays one turn (``SingleAgentEnv``).

:class:`VerifiersTextEnv` runs the env's real ``setup``, ``run`` and ``finalize`` and the
task's real scoring, with the suite's agent in the env's one seat in place of verifiers'
harness and model: each ``turn`` the env plays is an observation (a bare opening turn: the
task's system prompt and prompt), the agent's action is the reply the turn returns, and
the exchange is kept on a verifiers ``Trace`` (user and sampled assistant messages) that
the rewards read. The rollout runs on an event loop of the source's own, driven from the
env's calls, so nothing runs between steps. A reply inside ``<answer>...</answer>`` is what
the tag holds; a reply that is empty, holds control characters or is not UTF-8 text is an
invalid action that costs the turn and never reaches the env.

Ends: the env's ``run`` returning ends the episode; it is then scored: each interaction's
trace by its task's ``score`` when the interaction closes (as a verifiers rollout is),
then the env's ``finalize``. ``reward`` is the seat's trace reward (the sum of its weighted
rewards) on the last step, 0 before; ``score`` is that reward clipped to [0, 1]; ``success``:
a reward of at least ``success_reward`` (1.0). A seat's ``max_turns`` (its
``AgentConfig``) ends its exchange as verifiers does (a terminated ``Segment``); the
suite's turn budget truncates the episode. An env whose ``run`` raises fails the episode,
which verifiers does not score: a :class:`~agentenvs.core.errors.Fault` attributed
``unknown`` (the exception does not say whether the reply or the env was at fault).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import numpy as np

from agentenvs.core.env import short_repr
from agentenvs.core.errors import UNKNOWN, Fault
from agentenvs.envs.foreign.replay import ReplayTextEnv, SourceStep, _digest

EXTRA_HINT = "pip install 'agentenvs[ecosystem]'"
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S | re.I)


def _import_verifiers() -> Any:
    try:
        import verifiers.v1 as vf
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise ImportError(f"VerifiersTextEnv needs verifiers (0.4): {EXTRA_HINT}") from exc
    return vf


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for part in content or []:
        text = getattr(part, "text", None)
        if text is None and isinstance(part, Mapping):
            text = part.get("text")
        if text:
            parts.append(str(text))
    return "\n".join(parts)


def _messages_text(messages: Any) -> str:
    if messages is None:
        return ""
    if isinstance(messages, str):
        return messages
    out = []
    for message in messages:
        role = getattr(message, "role", None) or (
            message.get("role") if isinstance(message, Mapping) else "user"
        )
        content = getattr(message, "content", None)
        if content is None and isinstance(message, Mapping):
            content = message.get("content")
        text = _content_text(content)
        out.append(text if role == "user" else f"[{role}] {text}")
    return "\n\n".join(t for t in out if t)


#: C0 controls but tab, newline and carriage return; DEL; the replacement character
_NOT_TEXT = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffd]")


def reply_problem(reply: str) -> str | None:
    """Why ``reply`` is no reply a model could give (None when it is one): empty, control
    characters or undecodable bytes, a lone surrogate."""
    if not reply:
        return "the reply is empty"
    try:
        reply.encode("utf-8")
    except UnicodeEncodeError:
        return "the reply is not UTF-8 text (a lone surrogate)"
    if _NOT_TEXT.search(reply):
        return "the reply holds control characters or undecodable bytes"
    return None


class _EpisodeEnded(Exception):
    """Raised into a turn whose episode the suite ended (the rollout is abandoned)."""


class _Interaction:
    """One seat's exchange: verifiers' ``Interaction`` surface (``turn``, ``trace``) with
    the suite's agent as the replying side."""

    def __init__(self, seat: _Seat, task: Any, trace: Any) -> None:
        self.seat, self.task, self.trace = seat, task, trace
        self.turns = 0
        self._last: int | None = None
        system = getattr(task.data, "system_prompt", None)
        if system:
            self._append(seat.vf.SystemMessage(content=system))

    def _append(self, message: Any, sampled: bool = False) -> None:
        vf = self.seat.vf
        node = vf.MessageNode(parent=self._last, message=message, sampled=sampled)
        self.trace.nodes.append(node)
        self._last = len(self.trace.nodes) - 1

    async def turn(self, message: str | Any = None) -> Any:
        vf = self.seat.vf
        limit = self.seat.max_turns
        if limit is not None and self.turns >= limit:
            self.trace.stop("max_turns")
            return vf.Segment(messages=[], terminated=True)
        if message is None and self.turns == 0:
            message = self.task.data.prompt  # a prompted task speaks first
        if isinstance(message, str):
            self._append(vf.UserMessage(content=message))
        else:
            for m in message or ():
                self._append(m)
        # the first turn shows all the agent was given (system prompt, prompt, message)
        shown = [n.message for n in self.trace.nodes] if self.turns == 0 else message
        text = _messages_text(shown) or "(no message: your next reply)"
        reply = await self.seat.source.ask(text)
        self.turns += 1
        answer = vf.AssistantMessage(content=reply)
        self._append(answer, sampled=True)
        return vf.Segment(messages=[answer])


class _Seat:
    """The env's seat the suite's agent plays: verifiers' ``Agent`` surface that envs
    use (``interaction``, ``run``, ``trainable``)."""

    def __init__(self, source: _Source, name: str, config: Any) -> None:
        self.source, self.name, self.config = source, name, config
        self.vf = source.vf
        self.trainable = True
        self.max_turns = getattr(config, "max_turns", None)

    @contextlib.asynccontextmanager
    async def interaction(self, task: Any, **_: Any) -> AsyncIterator[_Interaction]:
        vf = self.vf
        trace = vf.Trace(
            task=vf.TraceTask(type=type(task).__name__, data=task.data),
            agent=vf.AgentInfo(config=self.config, name=self.name, trainable=self.trainable),
        )
        session = _Interaction(self, task, trace)
        try:
            yield session
        finally:
            if trace.stop_condition is None:
                trace.stop_condition = "user_closed"
            trace.is_completed = True
            trace.ok = True
            await task.score(trace)
            self.source.traces.append(trace)

    async def run(self, task: Any, **kwargs: Any) -> Any:
        async with self.interaction(task, **kwargs) as session:
            await session.turn()
        return session.trace


class _Source:
    """One rollout of a verifiers env at a time, on an event loop of its own."""

    def __init__(self, owner: VerifiersTextEnv) -> None:
        self.vf = owner._vf
        self.owner = owner
        self.loop = asyncio.new_event_loop()
        self.episode: asyncio.Task[Any] | None = None
        self.traces: list[Any] = []
        self.replies = 0
        self._event: asyncio.Future[Any] | None = None
        self._action: asyncio.Future[str] | None = None

    # the env's side (runs on the loop)
    async def ask(self, text: str) -> str:
        assert self._event is not None
        self._action = self.loop.create_future()
        self._event.set_result(text)
        return await self._action

    async def _play(self, task: Any) -> None:
        vf, env = self.vf, self.owner.vf_env
        agents = vf.Agents(env.config, lambda name, spec: _Seat(self, name, spec))
        await env.setup(agents)
        await env.run(task, agents)
        if not self.traces:
            raise ValueError(f"{type(env).__name__}.run() ran no agent")
        episode = vf.Episode(
            env=vf.EnvInfo(id=env.config.env_id),
            task=vf.TraceTask(type=type(task).__name__, data=task.data),
            traces=list(self.traces),
            ok=True,
        )
        await env.finalize(task, episode)

    async def _next(self) -> str | None:
        """The next turn's text, or None once the rollout ended."""
        assert self._event is not None and self.episode is not None
        await asyncio.wait({self._event, self.episode}, return_when=asyncio.FIRST_COMPLETED)
        if self._event.done():
            return self._event.result()
        self.episode.result()  # the rollout's own exception, if it raised
        return None

    # the suite's side
    def _drive(self) -> str | None:
        try:
            return self.loop.run_until_complete(self._next())
        except Fault:
            raise
        except Exception as exc:
            raise Fault(
                f"the verifiers env {self.owner.source_name} failed its rollout: "
                f"{type(exc).__name__}: {exc}"[:500],
                kind="other",
                attribution=UNKNOWN,
                evidence=f"{type(self.owner.vf_env).__name__}.run() raised {type(exc).__name__}",
                retryable=False,
            ) from exc

    def start(self, task: Any) -> str | None:
        self._abandon()
        self.traces = []
        self.replies = 0
        self._event = self.loop.create_future()
        self.episode = self.loop.create_task(self._play(task))
        return self._drive()

    def reply(self, action: str) -> str | None:
        assert self._action is not None
        self.replies += 1
        self._event = self.loop.create_future()
        self._action.set_result(action)
        return self._drive()

    def reward(self) -> float:
        return float(sum(t.reward for t in self.traces))

    def _abandon(self) -> None:
        if self.episode is not None and not self.episode.done():
            if self._action is not None and not self._action.done():
                self._action.set_exception(_EpisodeEnded())
            self.episode.cancel()
            with contextlib.suppress(BaseException):
                self.loop.run_until_complete(self.episode)
        self.episode = None

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self._abandon()
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()


class VerifiersTextEnv(ReplayTextEnv):
    """A verifiers taskset and its env's multi-turn rollout, played in text.

    Arguments: ``taskset`` (the taskset's module, as verifiers' ``--env.taskset.id``);
    ``taskset_kwargs`` (its config's fields); ``env_kwargs`` (the env config's other
    fields); ``n_tasks`` (the first tasks of the taskset, ids ``"0"``, ``"1"``, ...);
    ``success_reward`` (1.0). The module docstring says how turns, ends and scores map.
    """

    default_max_turns = 20

    def __init__(
        self,
        *,
        taskset: str | None = None,
        taskset_kwargs: Mapping[str, Any] | None = None,
        env_kwargs: Mapping[str, Any] | None = None,
        n_tasks: int = 100,
        success_reward: float = 1.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not isinstance(taskset, str) or not taskset:
            raise ValueError(f"taskset must name a verifiers taskset module, got {taskset!r}")
        if isinstance(n_tasks, bool) or not isinstance(n_tasks, int) or n_tasks < 1:
            raise ValueError(f"n_tasks must be a positive int, got {short_repr(n_tasks)}")
        if not isinstance(success_reward, int | float) or not success_reward > 0:
            raise ValueError(f"success_reward must be a number > 0, got {success_reward!r}")
        self._vf = vf = _import_verifiers()
        from verifiers.v1.utils.generic import concrete_type
        from verifiers.v1.utils.loaders import environment_class

        self.taskset = taskset
        self.success_reward = float(success_reward)
        try:
            env_cls = environment_class(taskset)
            config_cls = concrete_type(env_cls, vf.EnvConfig, origin=vf.Env) or vf.EnvConfig
            config = config_cls(
                **dict(env_kwargs or {}), taskset={"id": taskset, **dict(taskset_kwargs or {})}
            )
            self.vf_env = env_cls(config)
        except (ImportError, AttributeError, TypeError, ValueError) as exc:
            raise ValueError(
                f"taskset {taskset!r}: not a verifiers taskset here ({type(exc).__name__}: "
                f"{str(exc)[:300]})"
            ) from None
        seats = list(self.vf_env._agent_specs)
        if len(seats) != 1:
            raise ValueError(
                f"{env_cls.__name__} has seats {seats}: the suite's agent plays an env of one seat"
            )
        self._tasks = list(itertools.islice(iter(self.vf_env.taskset), n_tasks))
        if not self._tasks:
            raise ValueError(f"taskset {taskset!r} has no task")
        self._task_list = [str(i) for i in range(len(self._tasks))]

    @property
    def source_name(self) -> str:
        return f"verifiers:{self.taskset}"

    @property
    def task_ids(self) -> Sequence[str]:
        return self._task_list

    def _known_task(self, task_id: Any) -> Sequence[str]:
        return (task_id,) if task_id in self._task_list else ()

    # ------------------------------------------------------------ the source
    def _make_source(self) -> Any:
        return _Source(self)

    def _source_reset(self, source: Any, task_id: str, seed: int) -> tuple[str, str]:
        text = source.start(self._tasks[int(task_id)])
        if text is None:  # a rollout that ended before its first turn
            return self._end_text(source, "The episode is over."), _digest("end", 0)
        return text, _digest("turn", 0, text)

    def _end_text(self, source: Any, head: str) -> str:
        return f"{head}\nReward: {source.reward():g}" if head else f"Reward: {source.reward():g}"

    def _source_step(self, source: Any, action: str) -> tuple[SourceStep, str]:
        found = _ANSWER.findall(action)
        reply = (found[-1] if found else action).strip()
        problem = reply_problem(reply)
        if problem is not None:
            message = f"Invalid action: {problem}; reply with text."
            return SourceStep(observation=message, action_valid=False), self._key
        text = source.reply(reply)
        if text is not None:
            return SourceStep(observation=text), _digest("turn", source.replies, text)
        reward = source.reward()
        step = SourceStep(
            observation=self._end_text(source, "The episode is over."),
            reward=reward,
            terminated=True,
            success=reward >= self.success_reward,
            score=min(max(reward, 0.0), 1.0),
        )
        return step, _digest("end", source.replies)

    def error_action(self, rng: np.random.Generator) -> str:
        return str(int(rng.integers(100)))

    def _extra_info(self) -> dict[str, Any]:
        return {"source": self.source_name}
