"""BFCL-v0: loaders, prompts and tools, grading, retries, near misses, snapshots, policies."""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from jsonschema import Draft202012Validator

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.core.errors import TaskError, UnknownTaskError
from agentenvs.envs.bfcl.ast_checker import check_reply
from agentenvs.envs.bfcl.data import (
    SINGLE_TURN_CATEGORIES,
    available_categories,
    gold_calls,
    installed_data_dir,
    load_tasks,
    task_tools,
)
from agentenvs.envs.bfcl.decode import Call
from agentenvs.envs.bfcl.env import BFCLEnv, reply_text
from agentenvs.policy.base import Conversation
from agentenvs.policy.registry import make_policy
from agentenvs.testing import check_env_contract

FIXTURES = Path(__file__).parent / "bfcl_fixtures"
BUNDLED = load_tasks()


def make(**kwargs) -> BFCLEnv:  # type: ignore[no-untyped-def]
    return BFCLEnv(tasks_path=FIXTURES, **kwargs)


# ---------------------------------------------------------------- the bundled data
@pytest.mark.parametrize("task", BUNDLED, ids=[t.id for t in BUNDLED])
def test_bundled_gold_passes_and_a_perturbed_answer_fails(task) -> None:  # type: ignore[no-untyped-def]
    env = BFCLEnv(categories=[task.category])
    env.reset(options={"task_id": task.id})
    gold = env.gold_reply()
    verdict = check_reply(gold, task.functions, task.ground_truth, task.category)
    assert verdict.valid, (gold, verdict)
    for seed in range(3):
        miss = env.error_action(np.random.default_rng(seed))
        assert not check_reply(miss, task.functions, task.ground_truth, task.category).valid, miss
    for tool in env.tools():
        Draft202012Validator.check_schema(tool["function"]["parameters"])


def test_bundled_data_covers_every_single_turn_category() -> None:
    assert {t.category for t in BUNDLED} == set(SINGLE_TURN_CATEGORIES)


def test_registered_env_keeps_the_contract_on_fixtures() -> None:
    ast_categories = [c for c in available_categories(FIXTURES) if "relevance" not in c]
    check_env_contract(
        "agentenvs/BFCL-v0",
        env_kwargs={"tasks_path": str(FIXTURES), "categories": ast_categories},
    )


def test_relevance_categories_keep_the_contract_but_grade_every_reply() -> None:
    # BFCL grades any reply to a relevance entry (an empty one is "no call"), so the
    # checks that expect blank replies to be refused do not apply there
    check_env_contract(
        "agentenvs/BFCL-v0",
        env_kwargs={"tasks_path": str(FIXTURES), "categories": ["irrelevance", "live_relevance"]},
        skip=("bad_actions", "budget_truncation"),
        check_processes=False,
    )


# ---------------------------------------------------------------- loading
def test_fixture_folder_loads_every_category_it_has() -> None:
    env = make()
    assert env.categories == [
        "simple_python",
        "simple_java",
        "simple_javascript",
        "multiple",
        "parallel",
        "irrelevance",
        "live_relevance",
    ]
    assert available_categories(FIXTURES) == env.categories
    only = make(categories="parallel")
    assert only.task_ids == ["parallel_0"]


def test_unknown_category_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown BFCL single-turn categories"):
        make(categories=["multi_turn_base"])


def test_unknown_task_id_is_refused() -> None:
    with pytest.raises(UnknownTaskError):
        make().reset(options={"task_id": "nope"})


def _write(folder: Path, name: str, rows: list) -> None:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")


GOOD_Q = {
    "id": "simple_python_0",
    "question": [[{"role": "user", "content": "hi"}]],
    "function": [{"name": "f", "parameters": {"type": "dict", "properties": {}}}],
}


@pytest.mark.parametrize(
    ("questions", "answers", "where", "field"),
    [
        (["{oops"], None, "BFCL_v4_simple_python.json:1", "line"),
        (
            [GOOD_Q, GOOD_Q],
            [{"id": "simple_python_0", "ground_truth": [{"f": {}}]}],
            "BFCL_v4_simple_python.json:2",
            "id",
        ),
        (
            [{**GOOD_Q, "question": "hi"}],
            [{"id": "simple_python_0", "ground_truth": [{"f": {}}]}],
            "BFCL_v4_simple_python.json:1",
            "question",
        ),
        (
            [{**GOOD_Q, "function": [{"name": "f"}]}],
            [{"id": "simple_python_0", "ground_truth": [{"f": {}}]}],
            "BFCL_v4_simple_python.json:1",
            "function[0].parameters.properties",
        ),
        ([GOOD_Q], [], "BFCL_v4_simple_python.json:1", "id"),
        (
            [GOOD_Q],
            [{"id": "simple_python_0", "ground_truth": [{"f": {"a": 1}}]}],
            "possible_answer/BFCL_v4_simple_python.json:1",
            "ground_truth[0].f.a",
        ),
    ],
    ids=["bad json", "duplicate id", "bad question", "bad doc", "no answer", "bad answer"],
)
def test_loader_errors_name_file_line_and_field(
    tmp_path: Path, questions: list, answers: list | None, where: str, field: str
) -> None:
    _write(tmp_path, "BFCL_v4_simple_python.json", questions)
    _write(tmp_path, "possible_answer/BFCL_v4_simple_python.json", answers or [])
    with pytest.raises(TaskError) as info:
        load_tasks(tmp_path, "simple_python")
    assert info.value.source.endswith(where)
    assert info.value.field == field


def test_missing_answer_file_is_reported(tmp_path: Path) -> None:
    _write(tmp_path, "BFCL_v4_simple_python.json", [GOOD_Q])
    with pytest.raises(TaskError, match="answers for simple_python not found"):
        load_tasks(tmp_path, "simple_python")


def test_installed_bfcl_eval_is_found_without_importing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "site" / "bfcl_eval"
    (package / "data" / "possible_answer").mkdir(parents=True)
    # importing this package would fail: the loader must only locate it
    (package / "__init__.py").write_text("raise RuntimeError('imported')\n")
    for path in FIXTURES.glob("BFCL_v4_parallel.json"):
        (package / "data" / path.name).write_text(path.read_text())
    answers = FIXTURES / "possible_answer" / "BFCL_v4_parallel.json"
    (package / "data" / "possible_answer" / answers.name).write_text(answers.read_text())
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    # other tests may have imported the real package (to compare with its checkers)
    for name in [n for n in sys.modules if n == "bfcl_eval" or n.startswith("bfcl_eval.")]:
        monkeypatch.delitem(sys.modules, name)
    assert installed_data_dir() == package / "data"
    env = BFCLEnv(tasks_path="bfcl-eval")
    assert env.task_ids == ["parallel_0"]
    assert "bfcl_eval" not in sys.modules


def test_missing_bfcl_eval_is_a_task_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata
    import importlib.util

    def not_found(name: str) -> None:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(importlib.metadata, "distribution", not_found)
    with pytest.raises(TaskError, match="not installed"):
        installed_data_dir()


# ---------------------------------------------------------------- prompt and tools
def test_first_observation_holds_instructions_docs_and_the_conversation() -> None:
    env = make()
    obs, info = env.reset(options={"task_id": "live_relevance_0-0-0"})
    assert "[func_name1(param1=value1" in obs
    assert '"name": "Hotels.search"' in obs
    assert obs.endswith("System: You are a travel assistant.\nUser: Find me a hotel.")
    assert info["system_prompt"] in obs
    assert info["category"] == "live_relevance" and info["language"] == "python"
    obs, _ = env.reset(options={"task_id": "simple_java_0"})
    assert "Java value" in obs and '"10L"' in obs


def test_tools_are_2020_12_schemas_with_converted_types() -> None:
    env = make()
    _, info = env.reset(options={"task_id": "simple_python_1"})
    (tool,) = info["tools"]
    assert tool["type"] == "function" and tool["function"]["name"] == "maps.plan_route"
    props = tool["function"]["parameters"]["properties"]
    assert props["start"] == {
        "type": "array",
        "items": {"type": "number"},
        "description": "Start coordinates.",
    }
    assert props["options"]["type"] == "object"
    assert props["options"]["properties"]["fast"] == {"type": "string"}
    assert tool["function"]["parameters"]["required"] == ["start", "end"]
    Draft202012Validator.check_schema(tool["function"]["parameters"])
    _, info = env.reset(options={"task_id": "simple_java_0"})
    java = info["tools"][0]["function"]["parameters"]["properties"]
    assert {p["type"] for p in java.values()} == {"string"}
    assert "Java long" in java["warehouseId"]["description"]


def test_tool_schema_sanitizes_what_2020_12_refuses() -> None:
    from agentenvs.envs.bfcl.data import tool_schema

    doc = {
        "name": "f",
        "parameters": {
            "type": "dict",
            "properties": {
                "a": {"type": "float", "required": True, "optional": False, "enum": "x"},
                "b": {"type": "tuple", "items": [{"type": "integer"}, {"type": "string"}]},
                "c": {"type": "Weird"},
                "d": {"type": "array"},
            },
        },
    }
    params = tool_schema(doc)["function"]["parameters"]
    Draft202012Validator.check_schema(params)
    assert params["properties"]["a"] == {"type": "number"}
    assert params["properties"]["b"]["prefixItems"][1] == {"type": "string"}
    assert params["properties"]["c"] == {"type": "string"}
    assert params["properties"]["d"] == {"type": "array", "items": {}}


def test_underscore_to_dot_shows_and_expects_underscored_names() -> None:
    env = make(underscore_to_dot=True)
    _, info = env.reset(options={"task_id": "simple_python_1"})
    assert info["tools"][0]["function"]["name"] == "maps_plan_route"
    assert "maps_plan_route(" in env.gold_reply()
    _, reward, terminated, _, _ = env.step(env.gold_reply())
    assert reward == 1.0 and terminated


# ---------------------------------------------------------------- grading and episodes
def test_gold_reply_is_rewarded_and_ends_the_episode() -> None:
    env = make()
    for task_id in env.task_ids:
        env.reset(options={"task_id": task_id})
        obs, reward, terminated, truncated, info = env.step(env.gold_reply())
        assert (reward, terminated, truncated) == (1.0, True, False), (task_id, obs)
        assert info["success"] is True and info["score"] == 1.0
        assert obs == "Correct." and info["verdict"]["valid"] is True


def test_wrong_reply_gets_the_checker_verdict() -> None:
    env = make()
    env.reset(options={"task_id": "simple_python_0"})
    obs, reward, terminated, _, info = env.step("[calculate_triangle_area(base=10, height=6)]")
    assert reward == 0.0 and terminated and info["success"] is False
    assert info["verdict"]["error_type"] == "value_error:others"
    assert obs.startswith("Not accepted (value_error:others)")
    assert info["num_calls"] == 1


def test_undecodable_reply_costs_a_turn_and_allows_a_retry() -> None:
    env = make()
    env.reset(options={"task_id": "simple_python_0"})
    obs, reward, terminated, truncated, info = env.step("The area is 25 square units.")
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["action_valid"] is False and "verdict" not in info and "num_calls" not in info
    assert "Could not read the reply as function calls" in obs and "e.g. [func_name(" in obs
    _, reward, terminated, _, info = env.step("[calculate_triangle_area(base=10, height=5)]")
    assert reward == 1.0 and terminated and info["turn"] == 2


def test_single_attempt_budget_truncates_on_an_undecodable_reply() -> None:
    env = make(max_turns=1)
    env.reset(options={"task_id": "simple_python_0"})
    _, reward, terminated, truncated, info = env.step("no idea")
    assert (reward, terminated, truncated, info["success"]) == (0.0, False, True, False)


def test_empty_list_is_graded_as_a_wrong_count() -> None:
    env = make()
    env.reset(options={"task_id": "parallel_0"})
    _, reward, terminated, _, info = env.step("[]")
    assert reward == 0.0 and terminated
    assert info["verdict"]["error_type"] == "parallel_function_checker_no_order:wrong_count"


def test_irrelevance_plain_text_passes_and_a_call_fails() -> None:
    env = make()
    env.reset(options={"task_id": "irrelevance_0"})
    _, reward, terminated, _, _ = env.step("None of these functions can tell who wrote Hamlet.")
    assert reward == 1.0 and terminated
    env.reset(options={"task_id": "irrelevance_0"})
    _, reward, terminated, _, info = env.step("[get_weather(city='Elsinore')]")
    assert reward == 0.0 and terminated
    assert info["verdict"]["error_type"] == "irrelevance_error:decoder_success"


def test_relevance_any_call_passes_officially_a_well_formed_one_strictly_and_text_fails() -> None:
    env = make(rules="official")
    env.reset(options={"task_id": "live_relevance_0-0-0"})
    _, reward, _, _, _ = env.step('[{"name": "Hotels.search", "arguments": {}}]')
    assert reward == 1.0
    env = make()  # strict: the required location is missing
    env.reset(options={"task_id": "live_relevance_0-0-0"})
    _, reward, _, _, info = env.step('[{"name": "Hotels.search", "arguments": {}}]')
    assert reward == 0.0 and info["verdict"]["error_type"] == "relevance_error:missing_required"
    env.reset(options={"task_id": "live_relevance_0-0-0"})
    _, reward, _, _, _ = env.step("[Hotels.search(location='Paris')]")
    assert reward == 1.0
    env.reset(options={"task_id": "live_relevance_0-0-0"})
    _, reward, terminated, _, info = env.step("Where would you like to stay?")
    assert reward == 0.0 and terminated
    assert info["verdict"]["error_type"] == "relevance_error:decoder_failed"


@pytest.mark.parametrize("task_id", ["simple_python_0", "simple_java_0", "multiple_0"])
def test_blank_or_control_character_replies_are_not_graded_in_ast_categories(
    task_id: str,
) -> None:
    env = make()
    for bad in ["", "  \n", "\x00???", "ok\x07", "\ud800"]:
        env.reset(options={"task_id": task_id})
        _, _, terminated, _, info = env.step(bad)
        assert not terminated and info["action_valid"] is False


@pytest.mark.parametrize(
    ("task_id", "passes"), [("irrelevance_0", True), ("live_relevance_0-0-0", False)]
)
def test_blank_or_garbled_relevance_replies_are_graded_as_no_call(
    task_id: str, passes: bool
) -> None:
    # BFCL decodes an empty reply as [] (no call): an irrelevance entry passes
    env = make()
    for reply in ["", "  \n", "\x00???", "ok\x07", "\ud800 \udfff"]:
        env.reset(options={"task_id": task_id})
        assert env.score_action(reply) == (1.0 if passes else 0.0)
        _, reward, terminated, _, info = env.step(reply)
        assert terminated and info["action_valid"] is True
        assert reward == (1.0 if passes else 0.0)


def test_java_and_javascript_replies() -> None:
    env = make()
    env.reset(options={"task_id": "simple_java_0"})
    gold = env.gold_reply()
    assert '"3000412L"' in gold and '"21.5f"' in gold and "Arrays.asList" in gold
    assert env.score_action(gold) == 1.0
    assert env.score_action(gold.replace("3000412L", "3000412")) == 0.0
    env.reset(options={"task_id": "simple_javascript_0"})
    gold = env.gold_reply()
    assert '"9007199254740993n"' in gold
    assert env.score_action(gold) == 1.0


# ---------------------------------------------------------------- scoring, errors, snapshots
def test_score_action_does_not_advance() -> None:
    env = make()
    env.reset(options={"task_id": "multiple_0"})
    key = env.state_key()
    assert env.score_action("[get_weather(city='paris', unit='celsius')]") == 1.0
    assert env.score_action("[get_stock_price(ticker='X')]") == 0.0
    assert env.score_action("not a call") == 0.0
    assert env.turn == 0 and env.state_key() == key


def test_error_actions_are_seeded_near_misses() -> None:
    env = make()
    for task_id in env.task_ids:
        env.reset(options={"task_id": task_id})
        seen = set()
        for seed in range(8):
            a = env.error_action(np.random.default_rng(seed))
            assert a == env.error_action(np.random.default_rng(seed))
            assert env.score_action(a) == 0.0, (task_id, a)
            seen.add(a)
        if env.task.ground_truth is not None:
            assert len(seen) > 1, task_id  # several kinds of mistakes


def test_snapshot_restores_a_graded_state() -> None:
    env = make()
    env.reset(options={"task_id": "simple_python_0"})
    snap = env.snapshot()
    _, r1, *_ = env.step("[calculate_triangle_area(base=1, height=5)]")
    done_key = env.state_key()
    env.restore(snap)
    assert env.state_key() != done_key and env.turn == 0
    fresh = make()
    fresh.restore(pickle.loads(pickle.dumps(snap)))
    _, r2, *_ = fresh.step("[calculate_triangle_area(base=1, height=5)]")
    assert r1 == r2 == 0.0 and fresh.state_key() == done_key


# ---------------------------------------------------------------- policies
def test_gold_and_noisy_policies() -> None:
    env = gym.make("agentenvs/BFCL-v0", tasks_path=str(FIXTURES))
    gold = make_policy("bfcl/gold")
    noisy = make_policy("bfcl/noisy:error_rate=1.0")
    for task_id in env.unwrapped.task_ids:
        obs, info = env.reset(options={"task_id": task_id})
        conv = Conversation.start(obs, info, env=env)
        ((good,),) = gold.sample([conv], seed=0)
        ((bad,),) = noisy.sample([conv], seed=0)
        assert env.unwrapped.score_action(good) == 1.0
        assert env.unwrapped.score_action(bad) == 0.0
    with pytest.raises(ValueError, match="error_rate"):
        make_policy("bfcl/noisy:error_rate=2")


def test_gold_calls_skip_optional_only_parameters() -> None:
    tasks = {t.id: t for t in load_tasks(FIXTURES)}
    (call,) = gold_calls(tasks["simple_python_0"])
    assert call.args == {"base": 10, "height": 5, "unit": "units"}
    calls = gold_calls(tasks["parallel_0"])
    assert [c.args for c in calls] == [{"city": "Paris"}, {"city": "Rome"}]
    assert reply_text(calls) == "[get_weather(city='Paris'), get_weather(city='Rome')]"
    assert task_tools(tasks["parallel_0"])[0]["function"]["name"] == "get_weather"


# ---------------------------------------------------------------- hostile replies
HOSTILE_VALUES = [
    "1" * 5000,  # beyond Python's int-digit limit
    "1" * 4200,  # within it, beyond float's range
    "[" * 5000 + "]" * 5000,
    "[" * 150 + "]" * 150,
    "(" * 5000 + "1" + ")" * 5000,
    "2**100000",
    "'\ud800'",
    "{'k': " * 150 + "1" + "}" * 150,
]
HOSTILE_REPLIES = [
    '[{"name": "f", "arguments": {"a": ' + "1" * 5000 + "}}]",
    '{"name": "f", "arguments": "{\\"a\\": ' + "1" * 5000 + '}"}',
    '[{"name": "f", "arguments": {"a": ' + "[" * 5000 + "]" * 5000 + "}}]",
    '[{"name": "f", "arguments": {"a": ' + "[" * 900 + "]" * 900 + "}}]",
    "[" * 100_000,
    "[f(**{'a': 1})]",
]


def hostile_replies(env: BFCLEnv) -> list[str]:
    """Gold replies with one value swapped for a hostile one, and hostile JSON calls."""
    out = list(HOSTILE_REPLIES)
    gold = env.gold_calls()
    for i, call in enumerate(gold):
        for param in call.args:
            calls = list(gold)
            calls[i] = Call(call.name, {**call.args, param: "HOSTILE_VALUE"})
            text = reply_text(calls, env.task.language)
            for value in HOSTILE_VALUES:
                out.append(text.replace("'HOSTILE_VALUE'", value).replace('"HOSTILE_VALUE"', value))
    return out


def _first_of_each_category(n: int) -> list[str]:
    seen: dict[str, int] = {}
    chosen = []
    for task in BUNDLED:
        seen[task.category] = seen.get(task.category, 0) + 1
        if seen[task.category] <= n:
            chosen.append(task.id)
    return chosen


@pytest.mark.parametrize("task_id", _first_of_each_category(2))
def test_hostile_replies_are_observations_never_exceptions(task_id: str) -> None:
    env = BFCLEnv(max_turns=2)
    env.reset(options={"task_id": task_id})
    for reply in hostile_replies(env):
        env.reset(options={"task_id": task_id})
        score = env.score_action(reply)
        obs, reward, terminated, _, info = env.step(reply)
        assert isinstance(obs, str) and obs
        assert score == reward
        if not info["action_valid"]:
            assert "Reply with function calls" in obs
