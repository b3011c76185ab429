"""Replaying InterCode's recorded trajectories (``agentenvs.envs.intercode_sql.replay``).

The results files are written here in the layout InterCode's multi-turn experiments
write (``task_id``, ``query``, ``turn_history`` of actions, observations, rewards and
valid_action), over the questions and Spider dump that ship in ``intercode-bench``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("sqlglot")

from agentenvs.core.errors import TaskError  # noqa: E402
from agentenvs.envs.intercode_sql.replay import RETRY_PREFIX, main, replay  # noqa: E402


def _tasks():
    from agentenvs.envs.intercode_sql.data import intercode_package_files, load_tasks

    try:
        questions, dump = intercode_package_files()
    except ImportError as exc:
        pytest.skip(str(exc))
    return load_tasks(questions, dump)


def _record(index: int, task, turns: list[tuple[str, str, float]]) -> dict:
    return {
        "environment": "ic_sql",
        "dataset": "./data/spider/dev_spider.json",
        "task_id": index,
        "query": task.question,
        "turn_history": {
            "actions": [a for a, _, _ in turns],
            "observations": [o for _, o, _ in turns],
            "rewards": [r for _, _, r in turns],
            "valid_action": [not o.startswith("Error") for _, o, _ in turns],
        },
        "summary": {"max_reward": max(r for _, _, r in turns), "turns_taken": len(turns)},
        "hardness": task.hardness,
    }


def _results(tmp_path: Path) -> Path:
    tasks = list(_tasks().tasks.values())
    records = {}
    for index, task in enumerate(tasks[:6]):
        records[str(index)] = _record(
            index,
            task,
            [
                ("SELECT * FROM no_such_table", "Error executing query: no such table", 0.0),
                ("I think the answer is obvious", RETRY_PREFIX + "\n\nYour response should be", 0),
                ("SELECT 'not an answer'", "[('not an answer',)]", 0.0),
                (task.gold, "[...]", 1.0),
            ],
        )
    path = tmp_path / "ic_sql_multiturn_model_10_turns.json"
    path.write_text(json.dumps(records))
    return path


@pytest.fixture(params=["sqlite", pytest.param("mysql", marks=pytest.mark.mysql)])
def backend(request: pytest.FixtureRequest) -> dict:
    if request.param == "sqlite":
        return {"backend": "sqlite"}
    return {"backend": "mysql", "mysql_url": request.getfixturevalue("mysql_url")}


def test_recorded_rewards_agree_turn_by_turn(tmp_path: Path, backend: dict) -> None:
    report = replay([_results(tmp_path)], "intercode-bench", **backend)
    assert report.ok, report.disagreements
    assert (report.episodes, report.turns, report.no_code_turns) == (6, 24, 6)


def test_a_reward_that_differs_is_reported_with_its_turn(tmp_path: Path, backend: dict) -> None:
    path = _results(tmp_path)
    data = json.loads(path.read_text())
    data["2"]["turn_history"]["rewards"][3] = 0.5  # the gold scored less than 1
    data["4"]["turn_history"]["rewards"][0] = 1.0  # an error scored 1
    path.write_text(json.dumps(data))
    report = replay([path], "intercode-bench", **backend)
    assert not report.ok
    assert [(d.index, d.turn, d.recorded, d.ours) for d in report.disagreements] == [
        (2, 3, 0.5, 1.0),
        (4, 0, 1.0, 0.0),
    ]
    # episode 4's best reward is 1 on both sides all the same
    assert (report.turns_agree, report.episodes_agree) == (22, 5)


def test_sort_order_scaling_is_what_separates_official_from_iou(
    tmp_path: Path, backend: dict
) -> None:
    """A result in the wrong order: InterCode's released reward scales the IoU by Kendall's
    tau, the earlier one (``rules="iou"``) does not."""
    tasks = _tasks()
    index, task = next(
        (i, t)
        for i, t in enumerate(tasks.tasks.values())
        if "ORDER BY" in t.gold.upper() and "LIMIT" not in t.gold.upper()
    )
    reverse = task.gold.rstrip().rstrip(";")
    reverse = (
        reverse + " DESC"
        if not reverse.upper().endswith(("DESC", "ASC"))
        else reverse.rsplit(" ", 1)[0] + (" ASC" if reverse.upper().endswith("DESC") else " DESC")
    )
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"0": _record(index, task, [(reverse, "[...]", 1.0)])}))
    assert replay([path], "intercode-bench", rules="iou", **backend).ok  # same rows: IoU 1
    official = replay([path], "intercode-bench", rules="official", **backend)
    assert not official.ok and official.disagreements[0].ours < 1.0


def test_files_that_are_not_recorded_trajectories_name_file_and_field(tmp_path: Path) -> None:
    path = _results(tmp_path)
    data = json.loads(path.read_text())
    del data["1"]["turn_history"]["rewards"]
    path.write_text(json.dumps(data))
    # which record and field is wrong does not depend on the backend
    with pytest.raises(TaskError, match=r"record 1\.turn_history\.rewards"):
        replay([path], "intercode-bench", backend="sqlite")
    data = json.loads(_results(tmp_path).read_text())
    data["3"]["query"] = "a question of another file"
    path.write_text(json.dumps(data))
    with pytest.raises(TaskError, match=r"record 3\.query.*question file"):
        replay([path], "intercode-bench", backend="sqlite")
    assert main([str(path), "--tasks", "intercode-bench", "--backend", "sqlite"]) == 2


def test_the_command_exits_1_on_a_disagreement(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    path = _results(tmp_path)
    assert main([str(path), "--tasks", "intercode-bench", "--backend", "sqlite"]) == 0
    data = json.loads(path.read_text())
    data["0"]["turn_history"]["rewards"][2] = 0.25
    path.write_text(json.dumps(data))
    assert main([str(path), "--tasks", "intercode-bench", "--backend", "sqlite"]) == 1
    out = capsys.readouterr().out
    assert "23/24 turns" in out and "task 0 turn 2: recorded 0.25, ours 0.0" in out
