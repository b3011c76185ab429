"""Write the bundled FrozenLake task list, ``tasks/frozenlake/tasks.json`` (deterministic).

Run ``python -m agentenvs.envs.frozenlake.make_tasks`` from a source checkout to
regenerate it, or with ``--check`` to verify that the file matches what it would write.
Tasks: Gymnasium's "4x4" and "8x8", then distinct seeded solvable random maps with at
least one hole (S top left, G bottom right), named by their generated ids, e.g.
``random:size=4,p=0.8,seed=0``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from agentenvs.envs.frozenlake.maps import (
    FIXED_MAPS,
    generate_solvable_map,
    random_id,
    shortest_path,
)

#: (size, p, how many maps): the generated part of the bundled list (the first seeds that
#: give a new map with a hole)
GENERATED: tuple[tuple[int, float, int], ...] = ((4, 0.8, 24), (6, 0.8, 12))
DEFAULT_OUT = Path(__file__).resolve().parents[3] / "tasks" / "frozenlake" / "tasks.json"


def build_tasks() -> dict[str, Any]:
    """The task list as a JSON-ready dict."""
    tasks: list[dict[str, Any]] = []
    for name, rows in FIXED_MAPS.items():
        tasks.append(
            {"id": name, "rows": list(rows), "source": "gymnasium MAPS",
             "shortest_path": shortest_path(rows)}
        )
    seen = set(FIXED_MAPS.values())
    for size, p, count in GENERATED:
        seed, kept = -1, 0
        while kept < count:
            seed += 1
            rows = generate_solvable_map(size, p, seed=seed)
            # distinct maps with at least one hole: a hole-free lake is no puzzle
            if rows in seen or "H" not in "".join(rows):
                continue
            seen.add(rows)
            kept += 1
            tasks.append(
                {"id": random_id(size, p, seed), "rows": list(rows),
                 "source": f"generate_solvable_map(size={size}, p={p}, seed={seed})",
                 "shortest_path": shortest_path(rows)}
            )
    return {
        "format": 1,
        "about": "FrozenLake maps: S start, F frozen, H hole, G goal. "
        "Written by agentenvs/envs/frozenlake/make_tasks.py.",
        "tasks": tasks,
    }


def render(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, ensure_ascii=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--check", action="store_true", help="only compare with --out")
    args = parser.parse_args(argv)
    text = render(build_tasks())
    if args.check:
        same = args.out.exists() and args.out.read_text(encoding="utf-8") == text
        print(f"{args.out}: {'up to date' if same else 'differs from the generator'}")
        return 0 if same else 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {len(json.loads(text)['tasks'])} tasks to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
