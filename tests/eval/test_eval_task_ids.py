"""``--tasks`` takes every task id the Python API takes, whole: FrozenLake's
``random:size=N,p=P,seed=K`` (keys in any order, spaces allowed) and ``desc:ROW/...``
ids survive the comma list, an eval run plays exactly those maps, and a bad id is
refused in one line that names it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.cli import main
from agentenvs.core.task_list import split_task_ids
from agentenvs.envs.frozenlake.maps import FIXED_MAPS, generate_solvable_map

ENV = "agentenvs/FrozenLake-v0"
#: one id of every form FrozenLake's reset takes (see agentenvs.envs.frozenlake.maps)
IDS_AND_MAPS: list[tuple[str, tuple[str, ...]]] = [
    ("4x4", FIXED_MAPS["4x4"]),
    ("8x8", FIXED_MAPS["8x8"]),
    ("random:size=4,p=0.8,seed=0", generate_solvable_map(4, 0.8, seed=0)),  # a bundled id
    ("random:size=8,p=0.8,seed=3", generate_solvable_map(8, 0.8, seed=3)),
    ("random:seed=5,size=5,p=0.7", generate_solvable_map(5, 0.7, seed=5)),  # keys reordered
    ("random: p=0.9 , seed=12 ,size=3", generate_solvable_map(3, 0.9, seed=12)),  # spaces
    ("random:size=6,p=1,seed=0", generate_solvable_map(6, 1.0, seed=0)),  # an integer p
    ("desc:SFFF/FHFH/FFFH/HFFG", ("SFFF", "FHFH", "FFFH", "HFFG")),
    ("desc:SG", ("SG",)),
    ("desc:SHG/FFF", ("SHG", "FFF")),
]
TILE_OF = {"P": "S", "_": "F", "O": "H", "G": "G"}


def accepted_by_the_api(task_id: str) -> bool:
    env = gym.make(ENV)
    try:
        env.reset(seed=0, options={"task_id": task_id})
        return True
    except Exception:  # noqa: BLE001 - refused, whatever the error
        return False
    finally:
        env.close()


def map_in(observation: str) -> tuple[str, ...]:
    """The map an initial observation shows, in S/F/H/G (the player stands on S)."""
    grid = observation.split("Map:\n", 1)[1].strip().splitlines()
    return tuple("".join(TILE_OF[c] for c in row) for row in grid)


def test_every_form_is_an_id_the_python_api_accepts() -> None:
    for task_id, _ in IDS_AND_MAPS:
        assert accepted_by_the_api(task_id), task_id


def test_a_comma_list_of_ids_splits_back_into_them() -> None:
    ids = [t for t, _ in IDS_AND_MAPS]
    assert split_task_ids(",".join(ids)) == ids
    assert split_task_ids(" , ".join(ids)) == [t.strip() for t in ids]
    rng = np.random.default_rng(0)
    for _ in range(50):  # any order, any subset
        chosen = [ids[i] for i in rng.permutation(len(ids))[: int(rng.integers(1, len(ids)))]]
        assert split_task_ids(",".join(chosen)) == chosen
    # the other envs' ids have no comma: a plain list, as before
    assert split_task_ids("university-001,dc-002, simple_python_0") == [
        "university-001", "dc-002", "simple_python_0",
    ]
    assert split_task_ids("a,,b,") == ["a", "b"]


def test_eval_plays_the_maps_the_ids_name(tmp_path: Path) -> None:
    ids = [t for t, _ in IDS_AND_MAPS]
    out = tmp_path / "run"
    code = main([
        "eval", "--env", ENV, "--policy", "frozenlake/oracle", "--tasks", ",".join(ids),
        "--n", "1", "--budgets", "3", "--workers", "0", "--no-progress", "--out", str(out),
    ])
    assert code == 0
    records = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    played = {r["task_id"]: map_in(r["initial_observation"]) for r in records}
    assert played == {t.strip(): rows for t, rows in IDS_AND_MAPS}
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["task_ids"] == [t.strip() for t in ids]


def test_the_command_line_entry_point_keeps_a_random_id_whole(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "agentenvs.cli", "eval", "--env", ENV, "--policy", "frozenlake/oracle",
         "--tasks", "random:size=8,p=0.8,seed=3,desc:SFFF/FHFH/FFFH/HFFG", "--n", "1",
         "--budgets", "2", "--workers", "0", "--no-progress", "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert sorted(r["task_id"] for r in records) == [
        "desc:SFFF/FHFH/FFFH/HFFG", "random:size=8,p=0.8,seed=3",
    ]
    for r in records:
        assert len(map_in(r["initial_observation"])) == (8 if r["task_id"].startswith("r") else 4)


@pytest.mark.parametrize(
    ("tasks", "bad"),
    [
        ("4x4,random:size=8,p=0.8", "random:size=8,p=0.8"),  # no seed
        ("random:size=8,p=0.8,seed=3,p=0.5", "random:size=8,p=0.8,seed=3,p=0.5"),  # p twice
        ("desc:SFXF", "desc:SFXF"),  # a tile that is none
        ("desc:SF/F", "desc:SF/F"),  # rows of unequal length
        ("8x8,4x5", "4x5"),
    ],
)
def test_a_bad_id_is_refused_in_one_line_naming_it(
    tasks: str, bad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert not accepted_by_the_api(bad)
    out = tmp_path / "run"
    code = main([
        "eval", "--env", ENV, "--policy", "frozenlake/oracle", "--tasks", tasks, "--n", "1",
        "--budgets", "2", "--workers", "0", "--no-progress", "--out", str(out),
    ])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert f"[{bad!r}]" in err
    assert not out.exists()


def test_the_help_states_the_rule(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "a comma followed by KEY=VALUE continues the id before it" in text
    assert "random:size=8,p=0.8,seed=3 is one id" in text
