"""FrozenLake maps: Gymnasium's two fixed maps, validation, a seeded solvable-map generator,
task-id forms and the bundled task list.

A map is a tuple of equal-length row strings over ``S`` (start, exactly one), ``F``
(frozen), ``H`` (hole) and ``G`` (goal, at least one), as in Gymnasium.

Task ids:

- ``"4x4"``, ``"8x8"``: Gymnasium's fixed maps.
- ``"random:size=N,p=P,seed=K"``: the map ``generate_solvable_map(N, P, seed=K)`` (keys in
  any order); bundled task data pins some of them, any other is generated on demand.
- ``"desc:ROW/ROW/..."``: the map spelled out, e.g. ``"desc:SFFF/FHFH/FFFH/HFFG"``.

The env's ``map_name=`` and ``reset(options={"task_id": ...})`` accept every form.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Sequence
from functools import cache, lru_cache
from typing import Any

import numpy as np

from agentenvs.core.errors import TaskError
from agentenvs.core.tasks import task_path

Rows = tuple[str, ...]

#: Gymnasium 1.4's ``MAPS`` (the same layouts, so results compare with FrozenLake-v1)
FIXED_MAPS: dict[str, Rows] = {
    "4x4": ("SFFF", "FHFH", "FFFH", "HFFG"),
    "8x8": (
        "SFFFFFFF",
        "FFFFFFFF",
        "FFFHFFFF",
        "FFFFFHFF",
        "FFFHFFFF",
        "FHHFFFHF",
        "FHFFHFHF",
        "FFFHFFFG",
    ),
}

MAX_SIDE = 64
TILES = frozenset("SFHG")
RANDOM_PREFIX = "random:"
DESC_PREFIX = "desc:"
TASKS_FILE = ("frozenlake", "tasks.json")
#: the id forms, for error messages (the bundled ids are of the first two forms)
MAP_ID_FORMS = (
    "a map id is '4x4' or '8x8' (Gymnasium's maps), 'random:size=N,p=P,seed=K' (the seeded "
    f"solvable N x N map, keys in any order, N in [2, {MAX_SIDE}], P in (0, 1], K >= 0; "
    "the bundled ids are of this form) or 'desc:ROW/ROW/...' (the rows spelled out in S, F, "
    "H, G, e.g. 'desc:SFFF/FHFH/FFFH/HFFG')"
)


def validate_rows(rows: Sequence[str], source: str = "desc") -> Rows:
    """Check a map and return it as a tuple of rows; raise ``ValueError`` on a bad map."""
    if isinstance(rows, str) or not isinstance(rows, Sequence) or not rows:
        raise ValueError(f"{source}: a map is a non-empty list of row strings, got {rows!r}")
    out = tuple(rows)
    if not all(isinstance(r, str) for r in out):
        raise ValueError(f"{source}: every row must be a str")
    ncol = len(out[0])
    if ncol == 0 or any(len(r) != ncol for r in out):
        raise ValueError(f"{source}: rows must be non-empty and of equal length")
    if len(out) > MAX_SIDE or ncol > MAX_SIDE:
        raise ValueError(f"{source}: maps are at most {MAX_SIDE}x{MAX_SIDE}")
    text = "".join(out)
    bad = set(text) - TILES
    if bad:
        raise ValueError(f"{source}: unknown tile(s) {sorted(bad)}; tiles are S, F, H, G")
    if text.count("S") != 1:
        raise ValueError(f"{source}: a map needs exactly one start tile S")
    if "G" not in text:
        raise ValueError(f"{source}: a map needs at least one goal tile G")
    return out


def shortest_path(rows: Rows) -> int | None:
    """Fewest moves from S to a G avoiding holes (ignoring slips), or None if unreachable."""
    nrow, ncol = len(rows), len(rows[0])
    flat = "".join(rows)
    start = flat.index("S")
    dist = {start: 0}
    queue = deque([start])
    while queue:
        s = queue.popleft()
        r, c = divmod(s, ncol)
        for dr, dc in ((0, -1), (1, 0), (0, 1), (-1, 0)):
            nr, nc = r + dr, c + dc
            if 0 <= nr < nrow and 0 <= nc < ncol:
                n = nr * ncol + nc
                if n in dist or flat[n] == "H":
                    continue
                if flat[n] == "G":
                    return dist[s] + 1
                dist[n] = dist[s] + 1
                queue.append(n)
    return None


def is_solvable(rows: Rows) -> bool:
    """True when some hole-free path leads from S to a goal."""
    return shortest_path(rows) is not None


def generate_solvable_map(
    size: int, p: float, *, seed: int | None = None, rng: np.random.Generator | None = None
) -> Rows:
    """A ``size`` x ``size`` map, each cell frozen with probability ``p``, S at the top left
    and G at the bottom right (as Gymnasium's ``generate_random_map``), resampled until
    solvable.

    The draws come from ``rng``, or from ``np.random.default_rng(seed)``, so a seed gives
    the same map on every platform and in every process.
    """
    if isinstance(size, bool) or not isinstance(size, int | np.integer) or not 2 <= size <= MAX_SIDE:
        raise ValueError(f"size must be an integer in [2, {MAX_SIDE}], got {size!r}")
    if not isinstance(p, int | float) or not 0.0 < float(p) <= 1.0:
        raise ValueError(f"p (the probability of a frozen cell) must be in (0, 1], got {p!r}")
    if rng is None:
        if seed is None:
            raise ValueError("give a seed or an rng: maps are always drawn reproducibly")
        rng = np.random.default_rng(seed)
    size = int(size)
    for _ in range(100_000):
        frozen = rng.random((size, size)) < p
        grid = np.where(frozen, "F", "H")
        grid[0, 0] = "S"
        grid[-1, -1] = "G"
        rows = tuple("".join(row) for row in grid)
        if is_solvable(rows):
            return rows
    raise ValueError(f"no solvable {size}x{size} map found with p={p}; raise p")


def parse_random_id(task_id: str) -> tuple[int, float, int] | None:
    """``"random:size=5,p=0.8,seed=3"`` -> ``(5, 0.8, 3)``; None if not of that form."""
    if not task_id.startswith(RANDOM_PREFIX) or len(task_id) > 200:
        return None
    fields: dict[str, str] = {}
    for part in task_id[len(RANDOM_PREFIX) :].split(","):
        key, sep, value = part.partition("=")
        if not sep or key.strip() in fields:
            return None
        fields[key.strip()] = value.strip()
    if set(fields) != {"size", "p", "seed"}:
        return None
    try:
        size, p, seed = int(fields["size"]), float(fields["p"]), int(fields["seed"])
    except ValueError:
        return None
    if not 2 <= size <= MAX_SIDE or not 0.0 < p <= 1.0 or seed < 0:
        return None
    return size, p, seed


def random_id(size: int, p: float, seed: int) -> str:
    """The canonical id of a generated map."""
    return f"{RANDOM_PREFIX}size={int(size)},p={float(p)!r},seed={int(seed)}"


def desc_id(rows: Rows) -> str:
    return DESC_PREFIX + "/".join(rows)


@cache
def bundled_tasks() -> dict[str, Rows]:
    """Task id -> map, read once per process from ``tasks/frozenlake/tasks.json``."""
    path = task_path(*TASKS_FILE)
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
        records = data["tasks"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise TaskError(str(path), "tasks", f"unreadable task list: {exc}") from exc
    tasks: dict[str, Rows] = {}
    for i, record in enumerate(records):
        try:
            tasks[str(record["id"])] = validate_rows(record["rows"], f"tasks[{i}]")
        except (KeyError, TypeError, ValueError) as exc:
            raise TaskError(str(path), f"tasks[{i}]", str(exc)) from exc
    return tasks


def rows_for_id(task_id: Any) -> Rows | None:
    """The map a task id names (bundled, fixed, generated or spelled out); None if none."""
    if not isinstance(task_id, str):
        return None
    fixed = FIXED_MAPS.get(task_id)
    if fixed is not None:
        return fixed
    bundled = bundled_tasks().get(task_id)
    if bundled is not None:
        return bundled
    parsed = parse_random_id(task_id)
    if parsed is not None:
        return _generated(*parsed)
    if task_id.startswith(DESC_PREFIX) and len(task_id) <= MAX_SIDE * (MAX_SIDE + 1) + 8:
        try:
            return validate_rows(task_id[len(DESC_PREFIX) :].split("/"), "task id")
        except ValueError:
            return None
    return None


def map_id_problem(task_id: Any) -> str | None:
    """Why ``task_id`` names no map, in a few words; None when it names one."""
    if not isinstance(task_id, str):
        return f"a map id is a str, got {type(task_id).__name__}"
    if rows_for_id(task_id) is not None:
        return None
    if task_id.startswith(DESC_PREFIX):
        if len(task_id) > MAX_SIDE * (MAX_SIDE + 1) + 8:
            return f"maps are at most {MAX_SIDE}x{MAX_SIDE}"
        try:
            validate_rows(task_id[len(DESC_PREFIX) :].split("/"))
        except ValueError as exc:
            return str(exc)
    if task_id.startswith(RANDOM_PREFIX):
        return "a generated map's id needs size, p and seed, each once and in range"
    return "no such map"


@lru_cache(maxsize=4096)  # a bounded cache: random task pools are large
def _generated(size: int, p: float, seed: int) -> Rows:
    return generate_solvable_map(size, p, seed=seed)
