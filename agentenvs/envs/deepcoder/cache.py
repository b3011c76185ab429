"""The per-process caches of DeepCoder-MT's verdicts, and what keeps their entries apart.

A cached verdict is shared by every env of the process whose key is equal, so the key
holds everything the verdict depends on: the env's settings (backend, rules, limits,
comparison settings), the task's per-test time limit, and ``task_digest``: the whole
task, its ``source_format`` (which picks the official checker) and every test as the
file holds it included. Two tasks that differ in anything never share a verdict; the
price is only that tasks equal in all but a field that happens not to matter are
graded once each.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from agentenvs.envs.deepcoder.data import CodeTask


class LRU:
    """A bounded mapping that forgets the least recently used entry first."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.data: OrderedDict[Any, Any] = OrderedDict()

    def get(self, key: Any) -> Any:
        value = self.data.get(key)
        if value is not None:
            self.data.move_to_end(key)
        return value

    def put(self, key: Any, value: Any) -> None:
        self.data[key] = value
        self.data.move_to_end(key)
        while len(self.data) > self.size:
            self.data.popitem(last=False)


def canonical(value: Any) -> Any:
    """``value`` as JSON that tells apart what ``==`` or a type check could tell apart:
    each value tagged with its type (``1``, ``1.0``, ``True`` and ``"1"`` differ, as do a
    list and a tuple, ``-0.0`` and ``0.0``, ``{"1": x}`` and ``{1: x}``); dataclasses by
    their fields. Unequal values never give equal results."""
    kind = type(value)
    name = f"{kind.__module__}.{kind.__qualname__}"
    if value is None or kind in (bool, int, str):
        return [name, value]
    if kind is float:
        return [name, repr(value)]  # repr keeps -0.0, nan and inf apart
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [
            name,
            [[f.name, canonical(getattr(value, f.name))] for f in dataclasses.fields(value)],
        ]
    if isinstance(value, list | tuple):
        return [name, [canonical(v) for v in value]]
    if isinstance(value, Mapping):
        return [name, [[canonical(k), canonical(v)] for k, v in value.items()]]
    if isinstance(value, set | frozenset):
        return [name, sorted(json.dumps(canonical(v)) for v in value)]
    return [name, repr(value)]


def task_digest(task: CodeTask) -> str:
    """A hash of the whole task: every field, its tests with their raw values and its
    source format."""
    raw = json.dumps(canonical(task), ensure_ascii=False, separators=(",", ":"))
    return hashlib.blake2b(raw.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
