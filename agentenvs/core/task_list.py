"""A list of task ids in one string, as ``agentenvs eval --tasks`` takes it.

Ids are separated by commas, but a comma followed by ``KEY=VALUE`` (a name, ``=``, a
value: no ``:`` before the ``=``) continues the id before it. So every id the envs
accept survives whole: FrozenLake's ``random:size=8,p=0.8,seed=3`` (whose fields are all
``KEY=VALUE``, in any order, spaces allowed), its ``desc:SFFF/FHFH/FFFH/HFFG`` (no
comma), and the plain ids of the other envs (no comma). ``TASK_LIST_RULE`` says this in
one line, for help texts.
"""

from __future__ import annotations

import re

#: how a task list is split, for help texts and error messages
TASK_LIST_RULE = (
    "ids separated by commas; a comma followed by KEY=VALUE continues the id before it, "
    "so random:size=8,p=0.8,seed=3 is one id"
)

_FIELD = re.compile(r"\s*[A-Za-z_][A-Za-z0-9_]*\s*=")


def split_task_ids(text: str) -> list[str]:
    """The ids of a task list (see the module doc), each stripped of surrounding space;
    empty items are dropped. ``"4x4,random:size=8,p=0.8,seed=3,desc:SG"`` gives
    ``["4x4", "random:size=8,p=0.8,seed=3", "desc:SG"]``."""
    ids: list[str] = []
    for piece in text.split(","):
        if ids and _FIELD.match(piece):
            ids[-1] = f"{ids[-1]},{piece}"
        else:
            ids.append(piece)
    return [i.strip() for i in ids if i.strip()]
