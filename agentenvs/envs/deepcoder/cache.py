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

import hashlib
import pickle
import secrets
from collections import OrderedDict
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


def task_digest(task: CodeTask) -> str:
    """A hash of the whole task: every field, its tests with their raw values and its
    source format, as pickle writes them (types kept: ``1``, ``1.0``, ``True`` and ``"1"``
    differ, as do a list and a tuple, ``{"1": x}`` and ``{1: x}``). Unequal tasks never
    hash alike; a task pickle cannot write gets a digest of its own, shared by nothing."""
    try:
        data = pickle.dumps(task, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - an unpicklable value in a hand-made task
        return f"unshared-{secrets.token_hex(16)}"
    return hashlib.blake2b(data, digest_size=16).hexdigest()
