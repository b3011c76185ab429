"""Multi-turn BFCL data: the bundled files, malformed input, and the official-backend loader."""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from agentenvs.core.errors import MissingExtraError, TaskError
from agentenvs.core.tasks import task_path
from agentenvs.envs.bfcl.multi_turn import official
from agentenvs.envs.bfcl.multi_turn.data import load_tasks
from agentenvs.envs.bfcl.multi_turn.env import END_TURN_REPLY, BFCLMultiTurnEnv

BUNDLED = task_path("bfcl", "multi_turn")


def test_bundled_data() -> None:
    tasks = load_tasks()
    counts: dict[str, int] = {}
    for entry in tasks.entries.values():
        counts[entry.category] = counts.get(entry.category, 0) + 1
        assert entry.id.startswith(f"multi_turn_{entry.category}_")
        assert len(entry.ground_truth) == entry.n_turns
        assert entry.long_context == (entry.category == "long_context")
    assert counts == {"base": 10, "miss_func": 5, "miss_param": 5, "long_context": 4}
    for entry in tasks.entries.values():
        empty = [t for t, calls in enumerate(entry.ground_truth) if not calls]
        if entry.category in ("miss_func", "miss_param"):
            assert len(empty) == 1
        else:
            assert empty == []
        for turn, names in entry.missed_functions.items():
            assert entry.question[turn] == ()
            assert entry.ground_truth[turn - 1] == ()
            assert {c.name for c in entry.ground_truth[turn]} <= set(names)
    assert set(load_tasks(categories="miss_func").entries) == {
        f"multi_turn_miss_func_{i}" for i in range(5)
    }


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    shutil.copytree(BUNDLED, root)
    return root


def _rewrite(path: Path, line: int, change) -> None:  # noqa: ANN001
    lines = path.read_text().splitlines()
    record = json.loads(lines[line - 1])
    change(record)
    lines[line - 1] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")


BASE = "BFCL_v4_multi_turn_base.json"
MISS_FUNC = "BFCL_v4_multi_turn_miss_func.json"


@pytest.mark.parametrize(
    ("file", "line", "change", "field"),
    [
        (BASE, 2, lambda r: r.pop("question"), "question"),
        (
            BASE,
            3,
            lambda r: r.update(involved_classes=["NoSuchAPI"], initial_config={}),
            "involved_classes",
        ),
        (BASE, 1, lambda r: r["question"][0].append({"role": "user"}), "question[0][1]"),
        (BASE, 1, lambda r: r.update(initial_config={"FileSystemAPI": []}), "initial_config"),
        (BASE, 4, lambda r: r["question"].append([]), "question[3]"),
        (
            MISS_FUNC,
            1,
            lambda r: r.update(missed_function={"2": ["copy_all"]}),
            "missed_function['2']",
        ),
        (
            MISS_FUNC,
            2,
            lambda r: r.update(missed_function={"0": ["send_message"]}),
            "missed_function",
        ),
        (BASE, 5, lambda r: r.update(excluded_function=[1]), "excluded_function"),
    ],
)
def test_malformed_entries_name_file_line_and_field(
    tmp_path: Path,
    file: str,
    line: int,
    change,
    field: str,  # noqa: ANN001
) -> None:
    root = _copy(tmp_path)
    _rewrite(root / file, line, change)
    with pytest.raises(TaskError) as caught:
        load_tasks(root)
    assert caught.value.source == f"{root / file}:{line}"
    assert caught.value.field == field


def test_malformed_answers_docs_and_json(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    answers = root / "possible_answer" / BASE
    _rewrite(answers, 2, lambda r: r["ground_truth"][1].append("cd(folder="))
    with pytest.raises(TaskError) as caught:
        load_tasks(root)
    assert (caught.value.source, caught.value.field) == (f"{answers}:2", "ground_truth[1][2]")

    root = _copy(tmp_path / "b")
    answers = root / "possible_answer" / BASE
    _rewrite(answers, 3, lambda r: r["ground_truth"].pop())
    with pytest.raises(TaskError, match="2 turns of ground truth for 3") as caught:
        load_tasks(root)
    assert caught.value.source == f"{answers}:3"

    root = _copy(tmp_path / "c")
    doc = root / "func_doc" / "TicketingAPI.json"
    _rewrite(doc, 4, lambda r: r["parameters"].update(type="object"))
    with pytest.raises(TaskError) as caught:
        load_tasks(root)
    assert (caught.value.source, caught.value.field) == (f"{doc}:4", "parameters.type")

    root = _copy(tmp_path / "d")
    entries = root / BASE
    entries.write_text(entries.read_text() + "{not json\n")
    with pytest.raises(TaskError) as caught:
        load_tasks(root)
    assert (caught.value.source, caught.value.field) == (f"{entries}:11", "json")

    root = _copy(tmp_path / "e")
    (root / "possible_answer" / BASE).write_text("")
    with pytest.raises(TaskError, match="no ground truth"):
        load_tasks(root)

    with pytest.raises(TaskError, match="categories"):
        load_tasks(BUNDLED, categories=["web_search"])


# ---------------------------------------------------------------------- official backends
FAKE_BACKEND = """
import time

from bfcl_eval.eval_checker.multi_turn_eval.func_source_code.long_context import GREETING


class Node:
    # a linked node with a private timestamp, like the official file system's
    def __init__(self, name, parent=None):
        self.name = name
        self.parent = parent
        self.children = []
        self._stamp = time.perf_counter_ns()

    def __eq__(self, other):
        return isinstance(other, Node) and (self.name, self.children) == (other.name, other.children)


class GorillaFileSystem:
    def __init__(self):
        self.cwd = "/"
        self.files = {}
        self.root = Node("/")
        self.root.children.append(Node("home", self.root))
        self._log = []

    def _load_scenario(self, scenario, long_context=False):
        self.files = dict(scenario.get("files", {}))
        if long_context:
            self.files["filler.txt"] = GREETING

    def touch(self, file_name):
        self.files.setdefault(file_name, "")
        return None

    def cat(self, file_name):
        if file_name not in self.files:
            return {"error": "cat: no such file"}
        return {"file_content": self.files[file_name]}
"""

FAKE_DOCS = [
    {
        "name": "touch",
        "description": "Create a file.",
        "parameters": {
            "type": "dict",
            "properties": {"file_name": {"type": "string", "description": "name"}},
            "required": ["file_name"],
        },
    },
    {
        "name": "cat",
        "description": "Read a file.",
        "parameters": {
            "type": "dict",
            "properties": {"file_name": {"type": "string", "description": "name"}},
            "required": ["file_name"],
        },
    },
]


@pytest.fixture
def fake_bfcl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """A bfcl_eval package layout whose __init__ must never run."""
    package = tmp_path / "site" / "bfcl_eval"
    backends = package.joinpath(*official.BACKEND_SUBDIR)
    backends.mkdir(parents=True)
    (package / "__init__.py").write_text(
        "raise RuntimeError('the bfcl_eval package was imported')\n"
    )
    for folder in (
        package / "eval_checker",
        package / "eval_checker" / "multi_turn_eval",
        backends,
    ):
        (folder / "__init__.py").write_text("raise RuntimeError('a package __init__ ran')\n")
    (backends / "long_context.py").write_text("GREETING = 'filler from the long-context module'\n")
    (backends / "gorilla_file_system.py").write_text(textwrap.dedent(FAKE_BACKEND))
    docs = package.joinpath(*official.DOC_SUBDIR)
    docs.mkdir(parents=True)
    (docs / "gorilla_file_system.json").write_text("".join(json.dumps(d) + "\n" for d in FAKE_DOCS))
    monkeypatch.setenv(official.PACKAGE_DIR_ENV, str(package))
    # other tests may have imported the real package (to compare with its checkers)
    for name in [n for n in sys.modules if n == "bfcl_eval" or n.startswith("bfcl_eval.")]:
        monkeypatch.delitem(sys.modules, name)
    yield package
    sys.modules.pop(official.MODULE_PREFIX + "gorilla_file_system", None)


def test_loader_runs_only_the_backend_module(fake_bfcl: Path) -> None:
    cls = official.official_class("GorillaFileSystem")
    assert cls.__module__ == official.MODULE_PREFIX + "gorilla_file_system"
    assert not any(name == "bfcl_eval" or name.startswith("bfcl_eval.") for name in sys.modules)
    instance = cls()
    instance._load_scenario({"files": {"a": "x"}}, long_context=True)
    assert instance.files["filler.txt"] == "filler from the long-context module"
    assert official.official_class("GorillaFileSystem") is cls  # cached
    assert official.doc_path("GorillaFileSystem").is_file()


def test_official_entries_run_on_the_loaded_backend(fake_bfcl: Path, tmp_path: Path) -> None:
    root = tmp_path / "official_data"
    (root / "possible_answer").mkdir(parents=True)
    entry = {
        "id": "multi_turn_long_context_0",
        "question": [
            [{"role": "user", "content": "Create notes.txt"}],
            [{"role": "user", "content": "Show filler.txt"}],
        ],
        "initial_config": {"GorillaFileSystem": {"files": {"a.txt": "A"}}},
        "path": ["GorillaFileSystem.touch", "GorillaFileSystem.cat"],
        "involved_classes": ["GorillaFileSystem"],
        "excluded_function": [],
    }
    answer = {
        "id": entry["id"],
        "ground_truth": [["touch(file_name='notes.txt')"], ["cat(file_name='filler.txt')"]],
    }
    (root / "BFCL_v4_multi_turn_long_context.json").write_text(json.dumps(entry) + "\n")
    (root / "possible_answer" / "BFCL_v4_multi_turn_long_context.json").write_text(
        json.dumps(answer) + "\n"
    )
    env = BFCLMultiTurnEnv(tasks_path=root)
    _, info = env.reset(seed=0)
    assert {t["function"]["name"] for t in info["tools"]} == {"touch", "cat"}
    env.step("touch(file_name='notes.txt')")
    env.step(END_TURN_REPLY)
    snap = env.snapshot()
    obs, _, _, _, _ = env.step("cat(file_name='filler.txt')")
    assert "filler from the long-context module" in obs
    _, reward, terminated, _, info = env.step(END_TURN_REPLY)
    assert terminated and reward == 1.0 and info["success"]
    env.restore(snap)  # official instances pickle too
    assert env.score_action("cat(file_name='filler.txt')") == 1.0
    # state keys skip private fields and survive reference cycles
    other = BFCLMultiTurnEnv(tasks_path=root)
    other.reset(seed=0)
    env.reset(seed=0)
    assert env.state_key() == other.state_key()


def test_official_classes_without_bfcl_eval_name_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(official.PACKAGE_DIR_ENV, raising=False)
    monkeypatch.setattr(official.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(MissingExtraError, match=r"agentenvs\[bfcl\]"):
        official.official_class("TwitterAPI")
    root = tmp_path / "official_data"
    (root / "possible_answer").mkdir(parents=True)
    entry = {
        "id": "multi_turn_base_0",
        "question": [[{"role": "user", "content": "Post"}]],
        "initial_config": {},
        "involved_classes": ["TwitterAPI"],
    }
    (root / "BFCL_v4_multi_turn_base.json").write_text(json.dumps(entry) + "\n")
    (root / "possible_answer" / "BFCL_v4_multi_turn_base.json").write_text(
        json.dumps({"id": "multi_turn_base_0", "ground_truth": [["post_tweet(content='x')"]]})
        + "\n"
    )
    with pytest.raises(MissingExtraError, match="bfcl-eval"):
        load_tasks(root)


def test_installed_data_folder(fake_bfcl: Path) -> None:
    data = fake_bfcl / "data"
    shutil.copy(BUNDLED / "BFCL_v4_multi_turn_base.json", data)
    (data / "possible_answer").mkdir()
    shutil.copy(
        BUNDLED / "possible_answer" / "BFCL_v4_multi_turn_base.json", data / "possible_answer"
    )
    tasks = load_tasks("bfcl-eval")
    assert tasks.origin == str(data) and len(tasks.entries) == 10
