"""reasoning-gym's generators as multi-turn text envs of the suite.

reasoning-gym (``reasoning-gym``, the ``ecosystem`` extra) makes procedural datasets:
``create_dataset(name, seed=..., size=...)`` gives a dataset whose entry ``i`` (a
question, an answer, metadata) is a pure function of the name, its config, the seed and
``i``, and whose ``score_answer(answer, entry)`` grades an answer in [0, 1].
:class:`ReasoningGymEnv` makes each entry a task the agent may answer several times:
every answer is graded by the dataset's own ``score_answer``, a wrong one gets feedback
and the episode goes on until an answer is right or the budget ends.

The episode's state is the adapter's own (the best grade so far), so a snapshot is that
number and a restore needs no replay of the answers; it also holds a digest of the
entry, and a restore that generates another entry for the task id is refused.

Not every generator is a function of its seed alone (reasoning-gym 0.1.25, entries 0-2
with seed 0 compared in processes of different hash seeds): those of
:data:`HASH_SEED_DEPENDENT` give other entries under another ``PYTHONHASHSEED`` (set it,
for the worker processes of a run too, to use them), and ``list_functions``
(:data:`NOT_REPRODUCIBLE`) others from one run to the next. Making an env of one of them
warns.
"""

from __future__ import annotations

import hashlib
import math
import re
import warnings
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from agentenvs.core.env import Transition, short_repr
from agentenvs.core.errors import SnapshotError
from agentenvs.envs.foreign.replay import ForeignTextEnv

EXTRA_HINT = "pip install 'agentenvs[ecosystem]'"

_ANSWER = re.compile(r"<answer>\s?(.*?)\s?</answer>", re.S)
_NUMBER = re.compile(r"-?\d+")
#: entries kept per env (generating one costs from microseconds to milliseconds)
_CACHE_SIZE = 256
#: generators whose entries depend on the process's hash seed (iteration over sets)
HASH_SEED_DEPENDENT = frozenset(
    {"isomorphic_strings", "knight_swap", "polynomial_multiplication", "ransom_note", "word_ladder"}
)
#: generators whose entries differ from one run to the next whatever the seeds
NOT_REPRODUCIBLE = frozenset({"list_functions"})


def _import_reasoning_gym() -> Any:
    try:
        import reasoning_gym
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise ImportError(f"ReasoningGymEnv needs reasoning-gym: {EXTRA_HINT}") from exc
    return reasoning_gym


def extract_answer(text: str) -> str | None:
    """The last ``<answer>...</answer>`` of ``text``, stripped (reasoning-gym's own
    convention), or None when there is none."""
    found = _ANSWER.findall(text)
    return found[-1].strip() if found else None


class ReasoningGymEnv(ForeignTextEnv):
    """Questions of reasoning-gym's generators, answered until right.

    Description:
        ``dataset`` names one generator (``"leg_counting"``) or several; each is made
        with ``create_dataset(name, seed=seed, size=size, **config.get(name, {}))``.

    Action Space:
        Free text with the answer in ``<answer>...</answer>`` (the last one counts, as
        reasoning-gym's own ``extract_answer`` reads it); text without one is an invalid
        action that costs the turn and says the format. ``<answer></answer>`` is an
        answer (an empty one).

    Observation Space:
        First the entry's question and the answer format; after each answer, its grade
        and, while it is not right, that the agent may answer again.

    Starting State:
        Task ids are ``"<name>/<index>"`` for ``index`` in ``range(size)``: the entry
        ``index`` of that generator's dataset. The task fixes everything; an episode
        draws nothing.

    Rewards:
        The rise of the best grade: an answer graded above every earlier one earns the
        difference, so an episode's rewards add up to its score.

    Episode End:
        An answer graded 1 (right) ends the episode (``success``); the turn budget
        truncates. ``score`` is the best grade so far, in [0, 1].

    Information:
        ``source`` (``"reasoning-gym"``) and ``dataset`` (the task's generator); never
        the answer. ``state_key`` is the best grade. ``error_action`` is a plausible
        wrong answer: a number off by a few for a numeric answer, else the answer of
        another entry of the same generator.

    Arguments:
        dataset, config (per generator name: its config's arguments), seed (of the
        datasets, default 0), size (entries per generator, default 100), and the base
        env's arguments.

    Version History:
        v0: first version.
    """

    default_max_turns: ClassVar[int] = 4

    @classmethod
    def calls_wait(cls, **kwargs: Any) -> bool:
        return False  # generating and grading an entry are in-process computations

    def __init__(
        self,
        *,
        dataset: str | Sequence[str] = "leg_counting",
        config: Mapping[str, Mapping[str, Any]] | None = None,
        seed: int = 0,
        size: int = 100,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        names = [dataset] if isinstance(dataset, str) else list(dataset)
        if not names or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
            raise ValueError(f"dataset must be a name or distinct names, got {short_repr(dataset)}")
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"size must be a positive int, got {short_repr(size)}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"seed must be an int, got {short_repr(seed)}")
        config = dict(config or {})
        stray = set(config) - set(names)
        if stray:
            raise ValueError(f"config names generators not in dataset: {sorted(stray)}")
        rg = _import_reasoning_gym()
        from reasoning_gym.factory import DATASETS

        unknown = [n for n in names if n not in DATASETS]
        if unknown:
            raise ValueError(f"unknown reasoning-gym generator(s) {unknown}")
        for name in names:
            if name in NOT_REPRODUCIBLE:
                warnings.warn(
                    f"reasoning-gym's {name} gives other entries from one run to the next: "
                    "its tasks cannot be reproduced, its snapshots are refused elsewhere",
                    stacklevel=2,
                )
            elif name in HASH_SEED_DEPENDENT:
                warnings.warn(
                    f"reasoning-gym's {name} gives other entries under another hash seed: "
                    "set PYTHONHASHSEED (for every process of a run) to reproduce its tasks",
                    stacklevel=2,
                )
        self.datasets: dict[str, Any] = {
            name: rg.create_dataset(name, seed=seed, size=size, **dict(config.get(name, {})))
            for name in names
        }
        self.size = size
        self._task_list = [f"{name}/{i}" for name in names for i in range(size)]
        self._entries: OrderedDict[tuple[str, int], dict[str, Any]] = OrderedDict()
        self._name = names[0]
        self._index = 0
        self._best = 0.0

    # ------------------------------------------------------------ tasks
    @property
    def task_ids(self) -> Sequence[str]:
        return self._task_list

    def _known_task(self, task_id: Any) -> Sequence[str]:
        parsed = self._parse(task_id)
        return (task_id,) if parsed is not None else ()

    def _parse(self, task_id: Any) -> tuple[str, int] | None:
        if not isinstance(task_id, str):
            return None
        name, _, index = task_id.rpartition("/")
        if name not in self.datasets or not (index.isascii() and index.isdigit()):
            return None
        i = int(index)
        return (name, i) if i < self.size and str(i) == index else None

    def entry(self, name: str, index: int) -> dict[str, Any]:
        """Entry ``index`` of generator ``name`` (question, answer, metadata)."""
        key = (name, index)
        found = self._entries.get(key)
        if found is None:
            found = self.datasets[name][index]
            self._entries[key] = found
            if len(self._entries) > _CACHE_SIZE:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(key)
        return found

    @property
    def current_entry(self) -> dict[str, Any]:
        """The live task's entry (its ``answer`` too: for scripted policies and tests)."""
        return self.entry(self._name, self._index)

    # ------------------------------------------------------------ the episode
    def _load_task(self, task_id: str, options: Mapping[str, Any]) -> str:
        name, index = self._parse(task_id)  # type: ignore[misc]  # checked by reset
        question = str(self.entry(name, index)["question"]).strip()
        self._name, self._index, self._best = name, index, 0.0
        return f"{question}\n\n{self.action_format()}"

    def _apply(self, action: str) -> Transition:
        answer = extract_answer(action)
        if answer is None:
            return Transition(
                observation=f"Invalid action: no <answer>...</answer> in it. {self.action_format()}",
                action_valid=False,
            )
        entry = self.current_entry
        grade = self._grade(answer, entry)
        gain = max(grade - self._best, 0.0)
        self._best = max(self._best, grade)
        if grade >= 1.0:
            return Transition(
                observation=f"Correct: {short_repr(answer, 60)} is the answer.",
                reward=gain,
                terminated=True,
                success=True,
                score=1.0,
            )
        return Transition(
            observation=(
                f"Not correct: {short_repr(answer, 60)} is graded {grade:.2f} of 1 "
                f"(best so far {self._best:.2f}). Answer again."
            ),
            reward=gain,
            success=False,
            score=self._best,
        )

    def _grade(self, answer: str, entry: dict[str, Any]) -> float:
        """The dataset's own grade of ``answer``, within [0, 1] (a grader that raises or
        returns no number grades 0: the answer is what it could not read)."""
        try:
            grade = float(self.datasets[self._name].score_answer(answer, entry))
        except Exception:
            return 0.0
        return min(max(grade, 0.0), 1.0) if math.isfinite(grade) else 0.0

    def _entry_digest(self, name: str, index: int) -> str:
        entry = self.entry(name, index)
        text = repr((entry.get("question"), entry.get("answer")))
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()

    def _get_state(self) -> dict[str, Any]:
        return {"best": self._best, "entry": self._entry_digest(self._name, self._index)}

    def _check_state(self, state: Any, base: Mapping[str, Any]) -> None:
        if not isinstance(state, dict) or set(state) != {"best", "entry"}:
            raise ValueError("a ReasoningGym state is a dict with the best grade and the entry")
        best = state["best"]
        if isinstance(best, bool) or not isinstance(best, float | int) or not 0.0 <= best <= 1.0:
            raise ValueError(f"best must be a number in [0, 1], got {short_repr(best)}")
        name, index = self._parse(base["task_id"])  # type: ignore[misc]  # checked before
        if state["entry"] != self._entry_digest(name, index):
            raise SnapshotError(
                f"reasoning-gym's {name} generates another entry {index} here than where the "
                "snapshot was taken (its entries depend on the hash seed or are not "
                "reproducible), so it cannot be restored"
            )

    def _set_state(self, state: dict[str, Any]) -> None:
        name, index = self._parse(self._task_id)  # type: ignore[misc]  # checked by restore
        self._name, self._index, self._best = name, index, float(state["best"])

    def _state_key(self) -> str:
        return repr(self._best)

    # ------------------------------------------------------------ actions
    def action_format(self) -> str:
        return (
            "Give your answer inside <answer>...</answer>, e.g. <answer>42</answer>; "
            "a wrong answer is graded and you may answer again."
        )

    def error_action(self, rng: np.random.Generator) -> str:
        answer = str(self.current_entry.get("answer", ""))
        if _NUMBER.fullmatch(answer.strip()):
            offset = int(rng.integers(1, 10)) * (1 if rng.random() < 0.5 else -1)
            return f"<answer>{int(answer) + offset}</answer>"
        if self.size > 1:
            other = (self._index + 1 + int(rng.integers(self.size - 1))) % self.size
            wrong = str(self.entry(self._name, other).get("answer", ""))
            if wrong != answer:
                return f"<answer>{wrong}</answer>"
        return f"<answer>{answer[::-1]}x</answer>"

    def _extra_info(self) -> dict[str, Any]:
        return {"source": "reasoning-gym", "dataset": self._name}
