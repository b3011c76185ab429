"""RecordEpisode: exact file contents, JSON-safe values, whole lines, close, snapshots."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _toy_env import LineWalkEnv

from agentenvs.core.snapshot import Snapshot, restore_snapshot, take_snapshot
from agentenvs.wrappers import BudgetMix, InjectError, RecordEpisode, json_safe, read_records

TESTS_DIR = Path(__file__).resolve().parent.parent


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_rejects_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError):
        RecordEpisode(LineWalkEnv(), tmp_path)
    with pytest.raises(FileNotFoundError):
        RecordEpisode(LineWalkEnv(), tmp_path / "missing" / "x.jsonl")
    with pytest.raises(TypeError):
        RecordEpisode(LineWalkEnv(), 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        RecordEpisode(LineWalkEnv(), tmp_path / "x.jsonl", flush_every_step=1)  # type: ignore[arg-type]


def test_file_is_opened_lazily(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    env = RecordEpisode(LineWalkEnv(), path)
    assert not path.exists()
    env.close()
    assert not path.exists()


def test_records_every_reset_and_step_exactly(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    env = RecordEpisode(LineWalkEnv(max_turns=2), path)
    plain = LineWalkEnv(max_turns=2)
    expected = []
    for episode, seed in enumerate((3, 4)):
        obs, info = env.reset(seed=seed, options={"task_id": "line-7"})
        ref_obs, ref_info = plain.reset(seed=seed, options={"task_id": "line-7"})
        assert (obs, info) == (ref_obs, ref_info)
        expected.append(
            {
                "event": "reset",
                "episode": episode,
                "turn": 0,
                "seed": seed,
                "options": {"task_id": "line-7"},
                "observation": obs,
                "info": info,
            }
        )
        for turn, action in enumerate(("right", None), start=1):
            obs, reward, terminated, truncated, info = env.step(action)
            assert (obs, reward, terminated, truncated, info) == plain.step(action)
            expected.append(
                {
                    "event": "step",
                    "episode": episode,
                    "turn": turn,
                    "action": action,
                    "observation": obs,
                    "reward": reward,
                    "terminated": terminated,
                    "truncated": truncated,
                    "info": info,
                }
            )
            if terminated or truncated:
                break
    assert lines(path) == expected
    env.close()
    env.close()  # idempotent
    assert lines(path) == expected


def test_appends_to_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    for _ in range(2):
        env = RecordEpisode(LineWalkEnv(), path)
        env.reset(seed=0)
        env.step("right")
        env.close()
    assert [r["event"] for r in lines(path)] == ["reset", "step"] * 2


def test_values_are_made_json_safe(tmp_path: Path) -> None:
    assert json_safe(np.float32(0.5)) == 0.5
    assert json_safe(np.int64(3)) == 3 and json_safe(np.bool_(True)) is True
    assert json_safe(float("nan")) == "nan" and json_safe(float("-inf")) == "-inf"
    assert json_safe(np.arange(3)) == [0, 1, 2]
    assert json_safe(b"\xffok") == "\ufffdok"
    assert json_safe({1: (2, {3})}) == {"1": [2, [3]]}
    assert json_safe(object()).startswith("<object object")

    path = tmp_path / "run.jsonl"
    env = RecordEpisode(LineWalkEnv(), path)
    env.reset(seed=0)
    env.step("\ud800 lone surrogate")  # not encodable as UTF-8; must still be written
    env.step(["a", np.int8(2)])
    records = lines(path)
    assert records[1]["action"] == "\ud800 lone surrogate"
    assert records[2]["action"] == ["a", 2]
    assert path.read_bytes().isascii()


def test_buffered_mode_writes_at_episode_end_and_close(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    env = RecordEpisode(LineWalkEnv(max_turns=3), path, flush_every_step=False)
    env.reset(seed=0)
    env.step("stay")
    assert not path.exists()
    env.step("stay")
    env.step("stay")  # truncated: the episode's lines are written
    assert len(lines(path)) == 4
    env.reset(seed=1)
    env.step("stay")
    assert len(lines(path)) == 4
    env.close()
    assert len(lines(path)) == 6


def test_buffered_lines_are_written_at_exit(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    code = (
        "from _toy_env import LineWalkEnv\n"
        "from agentenvs.wrappers import RecordEpisode\n"
        f"env = RecordEpisode(LineWalkEnv(), {str(path)!r}, flush_every_step=False)\n"
        "env.reset(seed=0); env.step('stay')\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=TESTS_DIR, check=True, timeout=60)
    assert [r["event"] for r in lines(path)] == ["reset", "step"]


def test_a_killed_process_leaves_only_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    code = (
        "import sys\n"
        "from _toy_env import LineWalkEnv\n"
        "from agentenvs.wrappers import RecordEpisode\n"
        f"env = RecordEpisode(LineWalkEnv(max_turns=1000), {str(path)!r})\n"
        "env.reset(seed=0)\n"
        "big = 'x' * 200_000\n"
        "print('ready', flush=True)\n"
        "while True:\n"
        "    env.step(big)\n"
        "    if env.unwrapped.done: env.reset()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], cwd=TESTS_DIR, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        while not path.exists() or path.stat().st_size < 2_000_000:
            assert proc.poll() is None
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    data = path.read_bytes()
    complete, _, torn = data.rpartition(b"\n")
    # every terminated line is whole; only a line being written at the kill may be cut
    records = [json.loads(line) for line in complete.splitlines()]
    assert len(records) > 5
    assert read_records(path) == records
    # appending again starts on a fresh line, so the new records stay whole
    env = RecordEpisode(LineWalkEnv(), path)
    env.reset(seed=0)
    env.close()
    again = read_records(path)
    assert again[: len(records)] == records and again[-1]["event"] == "reset"
    if torn:
        assert path.read_bytes().count(b"\n") == len(records) + 2


def test_state_survives_snapshot_and_restore(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    env = RecordEpisode(LineWalkEnv(max_turns=6), path)
    env.reset(seed=0)
    env.reset(seed=1)
    env.step("stay")
    snap = env.snapshot()
    assert snap.wrappers[0][1] == {"episode": 1, "turn": 1}
    env.step("stay")
    env.step("stay")
    env.restore(snap)
    env.step("stay")
    events = [(r["event"], r["episode"], r["turn"]) for r in lines(path)]
    assert events == [
        ("reset", 0, 0),
        ("reset", 1, 0),
        ("step", 1, 1),
        ("step", 1, 2),
        ("step", 1, 3),
        ("restore", 1, 1),
        ("step", 1, 2),
    ]
    # the branch after the restore repeats the same step
    records = lines(path)
    assert records[6]["observation"] == records[3]["observation"]
    assert records[6]["info"] == records[3]["info"]


def test_full_wrapper_chain_round_trips_into_a_fresh_chain(tmp_path: Path) -> None:
    def chain(path: Path) -> RecordEpisode:
        env = BudgetMix(LineWalkEnv(), [3, 5, 7], seed=1)
        env = InjectError(env, probability=0.4, seed=2)
        return RecordEpisode(env, path)

    env = chain(tmp_path / "a.jsonl")
    env.reset(seed=8)
    env.step("right")
    snap = Snapshot.from_bytes(take_snapshot(env).to_bytes())
    assert [name.rsplit(".", 1)[1] for name, _ in snap.wrappers] == [
        "RecordEpisode",
        "InjectError",
        "BudgetMix",
    ]

    def play(e: RecordEpisode) -> list:
        out = []
        for _ in range(12):
            obs, reward, terminated, truncated, info = e.step("right")
            out.append((obs, reward, terminated, truncated, info))
            if terminated or truncated:
                out.append(e.reset())
        return out

    expected = play(env)
    fresh = chain(tmp_path / "b.jsonl")
    restore_snapshot(fresh, snap)
    assert play(fresh) == expected
    a = [r for r in lines(tmp_path / "a.jsonl") if r["event"] == "step"][1:]
    b = [r for r in lines(tmp_path / "b.jsonl") if r["event"] == "step"]
    assert a == b


def test_a_torn_last_line_is_skipped_and_not_appended_to(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_bytes(b'{"event": "reset"}\n{"event": "st')
    assert read_records(path) == [{"event": "reset"}]
    env = RecordEpisode(LineWalkEnv(), path)
    env.reset(seed=0)
    env.close()
    assert [r["event"] for r in read_records(path)] == ["reset", "reset"]
    assert path.read_bytes().splitlines()[1] == b'{"event": "st'
