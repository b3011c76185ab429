"""DeepCoder loaders: every source's test schema, file formats, bundled data, malformed input."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from agentenvs.core.errors import MissingExtraError, TaskError
from agentenvs.envs.deepcoder.data import load_tasks, parse_tests, public_count

FIXTURES = Path(__file__).parent / "deepcoder_fixtures"


def test_lcb_rows_stdin_and_functional() -> None:
    tasks = load_tasks(FIXTURES / "lcb.jsonl")
    stdin = tasks.tasks["lcb-stdin"]
    assert [t.kind for t in stdin.tests] == ["stdin"] * 4
    assert (stdin.tests[0].input, stdin.tests[0].output) == ("3\n1 2 3\n", "6\n")
    assert stdin.func_name is None and stdin.difficulty == "easy"
    assert stdin.reference.startswith("n = int(input())")
    call = tasks.tasks["lcb-call"]
    assert call.func_name == "order"
    assert call.starter_code.startswith("class Solution:")
    first = call.tests[0]
    assert (first.kind, first.args, first.accepted) == ("call", (2, 1), ([1, 2],))
    assert (first.input, first.output) == ("2\n1", "[1, 2]")
    # wrong_solutions.jsonl beside the file is read
    assert tasks.wrong_solutions["lcb-stdin"] == ["n = int(input())\nprint(n)\n"]


def test_taco_rows_decoded_or_string_and_unnamed() -> None:
    tasks = load_tasks(FIXTURES / "taco.json")
    assert list(tasks.tasks) == ["row-00000", "row-00001"]
    words = tasks.tasks["row-00000"]
    assert [t.input for t in words.tests] == ["abc\n", "hello"]  # a list of lines is joined
    assert [t.output for t in words.tests] == ["cba\n", "olleh"]
    add = tasks.tasks["row-00001"]
    assert add.func_name == "add"
    assert [t.args for t in add.tests] == [(1, 2), (0, 0), (-5, 5)]
    # TACO wraps the expected value in a list; the bare value is accepted too
    assert add.tests[0].accepted == ([3], 3)
    assert add.tests[2].accepted == (0,)


def test_primeintellect_rows() -> None:
    tasks = load_tasks(FIXTURES / "primeintellect.jsonl")
    stdin = tasks.tasks["pi-stdin"]
    assert [(t.kind, t.output) for t in stdin.tests] == [("stdin", "YES\n"), ("stdin", "NO\n")]
    call = tasks.tasks["pi-call"]
    assert call.func_name == "double"
    assert call.tests[0].args == (2,)
    assert call.tests[0].accepted == ([4], 4)


def test_the_bundled_problems_load() -> None:
    tasks = load_tasks()
    assert len(tasks.tasks) >= 20
    for task in tasks.tasks.values():
        assert task.reference, task.id
        assert len(task.tests) >= 5, task.id
        assert task.id in tasks.wrong_solutions, task.id
    kinds = {t.tests[0].kind for t in tasks.tasks.values()}
    assert kinds == {"stdin", "call"}


def test_a_folder_means_its_problems_jsonl(tmp_path: Path) -> None:
    rows = (FIXTURES / "lcb.jsonl").read_text()
    (tmp_path / "problems.jsonl").write_text(rows)
    assert list(load_tasks(tmp_path).tasks) == ["lcb-stdin", "lcb-call"]


def test_parquet_needs_pyarrow(tmp_path: Path) -> None:
    path = tmp_path / "rows.parquet"
    if importlib.util.find_spec("pyarrow") is None:
        path.write_bytes(b"PAR1")
        with pytest.raises(MissingExtraError, match=r"agentenvs\[parquet\]"):
            load_tasks(path)
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [json.loads(line) for line in (FIXTURES / "lcb.jsonl").read_text().splitlines()]
    pq.write_table(pa.Table.from_pylist(rows), path)
    assert list(load_tasks(path).tasks) == ["lcb-stdin", "lcb-call"]


def test_public_count() -> None:
    assert public_count(10, 3) == 3
    assert public_count(2, 3) == 2
    assert public_count(10, 0.25) == 3
    assert public_count(10, 0.01) == 1
    assert public_count(10, 1.0) == 10


# ------------------------------------------------------------------------ malformed input
def _row(**overrides):
    row = {
        "id": "t1",
        "problem": "p",
        "tests": json.dumps([{"input": "1\n", "output": "1\n", "testtype": "stdin"}]),
        "metadata": "{}",
    }
    row.update(overrides)
    return {k: v for k, v in row.items() if v is not None}


@pytest.mark.parametrize(
    ("row", "field", "problem"),
    [
        (_row(tests=None), "tests", "missing"),
        (_row(tests="[{not json"), "tests", "not valid JSON"),
        (_row(tests="[]"), "tests", "no tests"),
        (_row(tests=json.dumps([{"input": "1"}])), "tests[0].output", "missing"),
        (
            _row(tests=json.dumps([{"input": "1", "output": "1", "testtype": "weird"}])),
            "tests[0].testtype",
            "expected",
        ),
        (
            _row(tests=json.dumps([{"input": "1", "output": "1", "testtype": "functional"}])),
            "metadata.func_name",
            "names no function",
        ),
        (
            _row(
                tests=json.dumps([{"input": "{bad", "output": "1", "testtype": "functional"}]),
                metadata=json.dumps({"func_name": "f"}),
            ),
            "tests[0].input",
            "not valid JSON",
        ),
        (_row(tests=json.dumps({"inputs": ["1"], "outputs": []})), "tests", "1 inputs but 0"),
        (_row(tests=json.dumps({"inputs": ["1"]})), "tests.outputs", "missing"),
        (
            _row(tests=json.dumps({"inputs": [{}], "outputs": ["1"]})),
            "tests.inputs[0]",
            "expected text",
        ),
        (_row(problem=""), "problem", "missing"),
        (_row(metadata="[1]"), "metadata", "expected an object"),
        (_row(metadata="{oops"), "metadata", "not valid JSON"),
        (_row(metadata=json.dumps({"reference": 5})), "metadata.reference", "expected a string"),
        (_row(id=""), "id", "non-empty"),
    ],
)
def test_malformed_rows_name_file_line_and_field(tmp_path: Path, row, field, problem) -> None:
    path = tmp_path / "bad.jsonl"
    good = json.dumps(_row(id="t0"))
    path.write_text(good + "\n\n" + json.dumps(row) + "\n")
    with pytest.raises(TaskError) as err:
        load_tasks(path)
    assert err.value.source == f"{path}:3"
    assert err.value.field == field
    assert problem in err.value.problem


@pytest.mark.parametrize(
    ("name", "text", "source", "field"),
    [
        ("bad.jsonl", "{not json\n", "bad.jsonl:1", "json"),
        ("bad.jsonl", "[1, 2]\n", "bad.jsonl:1", "row"),
        ("bad.json", '{"rows": 5}', "bad.json", "rows"),
        ("bad.json", "[{]", "bad.json", "json"),
        ("empty.jsonl", "\n\n", "empty.jsonl", "rows"),
        ("dup.jsonl", json.dumps(_row()) + "\n" + json.dumps(_row()) + "\n", "dup.jsonl:2", "id"),
        ("rows.csv", "a,b\n", "rows.csv", "tasks_path"),
    ],
)
def test_malformed_files(tmp_path: Path, name, text, source, field) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(TaskError) as err:
        load_tasks(path)
    assert err.value.source == str(tmp_path / source)
    assert err.value.field == field


def test_missing_file_and_bad_wrong_solutions(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="no such file"):
        load_tasks(tmp_path / "nothing.jsonl")
    (tmp_path / "problems.jsonl").write_text(json.dumps(_row()) + "\n")
    (tmp_path / "wrong_solutions.jsonl").write_text(json.dumps({"id": "t1"}) + "\n")
    with pytest.raises(TaskError) as err:
        load_tasks(tmp_path / "problems.jsonl")
    assert err.value.field == "source"
    assert err.value.source.endswith("wrong_solutions.jsonl:1")


def test_mixed_kinds_are_refused() -> None:
    tests = [
        {"input": "1", "output": "1", "testtype": "stdin"},
        {"input": "1", "output": "1", "testtype": "functional"},
    ]
    with pytest.raises(TaskError, match="mixes"):
        parse_tests(tests, "x", func_name="f")


def test_codeforces_rows_without_testtype(tmp_path: Path) -> None:
    """rLLM's own codeforces.json: a JSON list of {problem, tests: [{input, output}]}."""
    rows = [
        {
            "problem": "Output the minimum of x and y, then the maximum.",
            "tests": [{"input": "2\n1 9\n8 4", "output": "1 9\n4 8"}],
        },
        {"problem": "Echo n.", "tests": json.dumps([{"input": "5\n", "output": "5\n"}])},
    ]
    path = tmp_path / "codeforces.json"
    path.write_text(json.dumps(rows))
    tasks = load_tasks(path)
    first = tasks.tasks["row-00000"]
    assert [(t.kind, t.input, t.output) for t in first.tests] == [
        ("stdin", "2\n1 9\n8 4", "1 9\n4 8")
    ]
    assert first.source_format == "lcb"
    assert tasks.tasks["row-00001"].tests[0].input == "5\n"


def test_function_name_on_each_test_and_data_source(tmp_path: Path) -> None:
    """rLLM's preprocessed LiveCodeBench rows carry metadata.func_name on every test."""
    tests = [
        {
            "input": "2\n1",
            "output": "[1, 2]",
            "testtype": "functional",
            "metadata": {"func_name": "order"},
        },
    ]
    row = {"id": "a", "problem": "p", "tests": json.dumps(tests), "data_source": "livecodebench"}
    taco = {"id": "b", "problem": "p", "tests": {"inputs": ["1\n"], "outputs": ["1\n"]}}
    pi = {
        "id": "c",
        "problem": "p",
        "tests": [{"type": "stdin_stdout", "input": "1", "output": "1"}],
    }
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in (row, taco, pi)))
    tasks = load_tasks(path).tasks
    assert tasks["a"].func_name == "order" and tasks["a"].source_format == "lcb"
    assert tasks["b"].source_format == "taco" and tasks["b"].tests[0].raw_input == "1\n"
    assert tasks["c"].source_format == "primeintellect"
    path.write_text(json.dumps(dict(row, data_source="nowhere")))
    with pytest.raises(TaskError, match="data_source"):
        load_tasks(path)


def test_official_parquet_layout_loads_every_source(tmp_path: Path) -> None:
    """A shard as the dataset publishes it: problem, tests and metadata as JSON strings."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = []
    for name in ("lcb.jsonl", "primeintellect.jsonl"):
        rows += [json.loads(line) for line in (FIXTURES / name).read_text().splitlines()]
    rows += json.loads((FIXTURES / "taco.json").read_text())

    def text(value: object) -> str:
        return value if isinstance(value, str) else json.dumps(value or {})

    table = pa.table(
        {
            "problem": [r.get("problem", r.get("question")) for r in rows],
            "tests": [text(r["tests"]) for r in rows],
            "metadata": [text(r.get("metadata")) for r in rows],
            "starter_code": [r.get("starter_code", "") for r in rows],
        }
    )
    path = tmp_path / "train-00000-of-00001.parquet"
    pq.write_table(table, path)
    tasks = load_tasks(path)
    assert len(tasks.tasks) == len(rows)
    assert {t.source_format for t in tasks.tasks.values()} == {"lcb", "primeintellect", "taco"}


def test_a_folder_of_shards_loads_in_name_order(tmp_path: Path) -> None:
    lines = (FIXTURES / "lcb.jsonl").read_text().splitlines()
    (tmp_path / "test-00001-of-00002.jsonl").write_text(lines[1] + "\n")
    (tmp_path / "test-00000-of-00002.jsonl").write_text(lines[0] + "\n")
    assert list(load_tasks(tmp_path).tasks) == ["lcb-stdin", "lcb-call"]


def test_rllm_training_rows_load_with_their_prompt(tmp_path: Path) -> None:
    """rLLM's preprocessed training rows: chat prompt, tests in reward_model.ground_truth."""
    import agentenvs  # noqa: F401
    from agentenvs.envs.deepcoder.env import DeepCoderMTEnv

    prompt = "Sum the numbers.\n\n### Format: Read the inputs from stdin ...\n### Answer:"
    tests = [
        {"input": "1 2\n", "output": "3\n", "testtype": "stdin", "metadata": {"func_name": None}}
    ]
    row = {
        "data_source": "codeforces",
        "prompt": [{"role": "user", "content": prompt}],
        "ability": "code",
        "reward_model": {"style": "rule", "ground_truth": json.dumps(tests)},
        "extra_info": {"split": "test", "index": 0},
    }
    path = tmp_path / "test_codeforces.json"
    path.write_text(json.dumps([row]))
    task = load_tasks(path).tasks["row-00000"]
    assert (task.problem, task.prompt_formatted, task.source_format) == (prompt, True, "lcb")
    assert task.tests[0].input == "1 2\n"
    env = DeepCoderMTEnv(tasks_path=path)
    # the row's own prompt is the task, shown as is after the system prompt (the one
    # reset-observation convention of every env)
    obs, info = env.reset(seed=0)
    assert obs == f"{info['system_prompt']}\n\n{prompt}"
    env.close()
