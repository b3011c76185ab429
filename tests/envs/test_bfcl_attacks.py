"""Replies a reward-maximizing policy would try on BFCL, through ``gym.make`` and ``step``.

Each attack states what ``rules="official"`` (bfcl-eval's verdict) and ``rules="strict"``
(the default) pay; the table in ``docs/bfcl.md`` lists the ones where they differ.
"""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401 - registers the ids

DOC = {
    "name": "schedule",
    "description": "Set an alarm.",
    "parameters": {
        "type": "dict",
        "properties": {
            "hour": {"type": "integer", "description": "Hour."},
            "ratio": {"type": "float", "description": "Volume ratio."},
            "label": {"type": "string", "description": "Label."},
            "days": {"type": "array", "items": {"type": "string"}, "description": "Days."},
            "options": {"type": "dict", "properties": {}, "description": "Options."},
        },
        "required": ["hour", "label"],
    },
}
ANSWER = {
    "hour": [7],
    "ratio": [2.0, ""],
    "label": ["wake up"],
    "days": ["", ["mon", "tue"]],
    "options": [{"volume": [1]}, ""],
}
QUESTION = [[{"role": "user", "content": "Wake me at 7, volume 2, label it 'wake up'."}]]
GOLD = "[schedule(hour=7, ratio=2.0, label='wake up')]"


def _write(folder: Path, category: str, entry: dict, answer: list | None = None) -> None:
    entry = {"id": f"{category}_0", "question": QUESTION, "function": [DOC], **entry}
    (folder / f"BFCL_v4_{category}.json").write_text(json.dumps(entry) + "\n")
    if answer is not None:
        line = json.dumps({"id": f"{category}_0", "ground_truth": answer})
        (folder / "possible_answer" / f"BFCL_v4_{category}.json").write_text(line + "\n")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bfcl_attacks")
    (folder / "possible_answer").mkdir()
    _write(folder, "simple_python", {}, [{"schedule": ANSWER}])
    second = {**ANSWER, "hour": [8]}
    _write(folder, "parallel", {}, [{"schedule": ANSWER}, {"schedule": second}])
    _write(folder, "irrelevance", {})
    _write(folder, "live_relevance", {})
    return folder


def _reward(data: Path, category: str, reply: str, rules: str) -> tuple[float, str, dict]:
    env = gym.make(
        "agentenvs/BFCL-v0", tasks_path=str(data), categories=[category], rules=rules, max_turns=1
    )
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(reply)
    assert terminated or truncated
    return reward, obs, info


# (attack, reply, official reward, strict reward)
SIMPLE = [
    ("gold", GOLD, 1, 1),
    ("int for a float", "[schedule(hour=7, ratio=2, label='wake up')]", 1, 1),
    ("float for an int", "[schedule(hour=7.0, ratio=2.0, label='wake up')]", 0, 0),
    ("bool for an int", "[schedule(hour=True, label='wake up')]", 0, 0),
    (
        "bool for an int in a dict",
        "[schedule(hour=7, label='wake up', options={'volume': True})]",
        1,
        0,
    ),
    (
        "float for an int in a dict",
        "[schedule(hour=7, label='wake up', options={'volume': 1.0})]",
        1,
        1,
    ),
    ("a number as a string", "[schedule(hour='7', label='wake up')]", 0, 0),
    ("a list for one value", "[schedule(hour=[7], label='wake up')]", 0, 0),
    ("a list for one string", "[schedule(hour=7, label=['wake up'])]", 0, 0),
    ("[] for an optional list", "[schedule(hour=7, label='wake up', days=[])]", 1, 0),
    ("a string's characters as a list", "[schedule(hour=7, label='wake up', days=['', ''])]", 0, 0),
    ("an unknown parameter", "[schedule(hour=7, label='wake up', extra=1)]", 0, 0),
    ("a required parameter missing", "[schedule(hour=7)]", 0, 0),
    ("None for a required value", "[schedule(hour=7, label=None)]", 0, 0),
    (
        "a nested dict with an extra key",
        "[schedule(hour=7, label='wake up', options={'volume': 1, 'x': 2})]",
        0,
        0,
    ),
    ("a Cyrillic lookalike in a string", "[schedule(hour=7, label='w\u0430ke up')]", 0, 0),
    ("a Cyrillic lookalike in the name", "[\u0455chedule(hour=7, label='wake up')]", 0, 0),
    # Python reads identifiers NFKC-normalized: a fullwidth letter is the same name
    ("a fullwidth letter in the name", "[\uff53chedule(hour=7, label='wake up')]", 1, 1),
    ("case and spacing in a string", "[schedule(hour=7, label='WAKE   UP')]", 1, 1),
    ("the name in another case", "[Schedule(hour=7, label='wake up')]", 0, 0),
    ("positional arguments", "[schedule(7, 2.0, 'wake up')]", 0, 0),
    ("**kwargs", "[schedule(**{'hour': 7, 'label': 'wake up'})]", 0, 0),
    ("the call repeated", "[" + ", ".join([GOLD[1:-1]] * 50) + "]", 0, 0),
    (
        "the call among many others",
        "[" + ", ".join(["other(hour=7)"] * 20 + [GOLD[1:-1]]) + "]",
        0,
        0,
    ),
    ("a function not in the list", "[other(hour=7, label='wake up')]", 0, 0),
    ("a lambda called", "[schedule(hour=7, label=(lambda: 'wake up')())]", 0, 0),
    ("a parameter given twice", "[schedule(hour=3, hour=7, label='wake up')]", 1, 0),
    (
        "a JSON key given twice",
        '[{"name": "schedule", "arguments": {"hour": 3, "hour": 7, "label": "wake up"}}]',
        1,
        0,
    ),
    ("a call as a value", "[schedule(hour=7, label=__import__('os').getcwd())]", 0, 0),
    ("a method of a module", "[__import__('os').system(command='true')]", 0, 0),
]
UNDECODABLE = [
    ("an attribute", "[schedule(hour=7, label=os.sep)]"),
    ("an f-string", "[schedule(hour=7, label=f'{7}')]"),
    ("a comprehension", "[schedule(hour=7, label=[c for c in 'ab'])]"),
    ("9**9**9", "[schedule(hour=9**9**9, label='wake up')]"),
    ("an aliased list of lists", "[schedule(hour=7, label=[[0]*100000]*100000)]"),
    ("three aliased levels", "[schedule(hour=7, label=[[[0]*1000]*1000]*100)]"),
    ("many large operations", "[schedule(hour=7, label=[" + ",".join(["'x'*99999"] * 500) + "])]"),
    ("a printf width", "[schedule(hour=7, label='%*d' % (2**31 - 2, 1))]"),
    ("a written printf width", "[schedule(hour=7, label='%999999999d' % 1)]"),
    ("deep nesting", "[schedule(hour=7, label=" + "[" * 5000 + "]" * 5000 + ")]"),
    ("a fenced block", "```python\n" + GOLD + "\n```"),
]


@pytest.mark.parametrize("rules", ["official", "strict"])
@pytest.mark.parametrize(
    ("attack", "reply", "official", "strict"), SIMPLE, ids=[a[0] for a in SIMPLE]
)
def test_simple_call_attacks(
    data: Path, attack: str, reply: str, official: int, strict: int, rules: str
) -> None:
    reward, obs, info = _reward(data, "simple_python", reply, rules)
    assert reward == (official if rules == "official" else strict), (attack, obs)


@pytest.mark.parametrize("rules", ["official", "strict"])
@pytest.mark.parametrize(("attack", "reply"), UNDECODABLE, ids=[a[0] for a in UNDECODABLE])
def test_replies_the_decoder_refuses_pay_nothing(
    data: Path, attack: str, reply: str, rules: str
) -> None:
    reward, obs, info = _reward(data, "simple_python", reply, rules)
    assert reward == 0.0 and info["action_valid"] is False
    assert obs.startswith("Invalid reply:") and "Reply with function calls" in obs


def test_no_reply_runs_code_in_the_checker(data: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    command = f"touch {marker}"
    for reply in (
        f"[schedule(hour=7, label=__import__('os').system('{command}'))]",
        f"[__import__('os').system(command='{command}')]",
        f"[schedule(hour=7, label=exec(\"__import__('os').system('{command}')\"))]",
        f"[schedule(hour=7, label=eval(source=\"__import__('os').system('{command}')\"))]",
        f'[{{"name": "schedule", "arguments": {{"hour": 7, "label": "{command}"}}}}]',
    ):
        for rules in ("official", "strict"):
            reward, _, _ = _reward(data, "simple_python", reply, rules)
            assert reward == 0.0
    assert not marker.exists()


PARALLEL = [
    ("both calls", "[schedule(hour=7, label='wake up'), schedule(hour=8, label='wake up')]", 1, 1),
    (
        "the first call twice",
        "[schedule(hour=7, label='wake up'), schedule(hour=7, label='wake up')]",
        0,
        0,
    ),
    (
        "both calls and a third",
        "[schedule(hour=7, label='wake up'), schedule(hour=8, label='wake up'), schedule(hour=9, label='wake up')]",
        0,
        0,
    ),
    ("one call", "[schedule(hour=7, label='wake up')]", 0, 0),
]


@pytest.mark.parametrize("rules", ["official", "strict"])
@pytest.mark.parametrize(
    ("attack", "reply", "official", "strict"), PARALLEL, ids=[a[0] for a in PARALLEL]
)
def test_parallel_matching_pays_only_every_call(
    data: Path, attack: str, reply: str, official: int, strict: int, rules: str
) -> None:
    reward, obs, _ = _reward(data, "parallel", reply, rules)
    assert reward == (official if rules == "official" else strict), (attack, obs)


RELEVANCE = [
    ("irrelevance", "plain text", "No function can tell that.", 1, 1),
    ("irrelevance", "an empty reply", "", 1, 1),
    ("irrelevance", "a call", "[schedule(hour=7, label='x')]", 0, 0),
    ("irrelevance", "a fenced call", "```python\n[schedule(hour=7, label='x')]\n```", 1, 0),
    (
        "irrelevance",
        "a call inside prose",
        "I would call [schedule(hour=7, label='x')] for you.",
        1,
        0,
    ),
    ("irrelevance", "a call and one bracket too many", "schedule(hour=7, label='x')]]", 1, 0),
    (
        "irrelevance",
        "a JSON call inside prose",
        'Calling {"name": "schedule", "arguments": {"hour": 7}} now',
        1,
        0,
    ),
    ("irrelevance", "an unknown function inside prose", "I would call [alarm(hour=7)] here.", 1, 1),
    ("irrelevance", "a reply the decoder cannot read", "[" * 100_000, 1, 1),
    ("live_relevance", "a made-up function", "[made_up()]", 1, 0),
    ("live_relevance", "a listed function without its required arguments", "[schedule()]", 1, 0),
    ("live_relevance", "a value of the wrong type", "[schedule(hour='seven', label='x')]", 1, 0),
    ("live_relevance", "an unknown parameter", "[schedule(hour=7, label='x', when='now')]", 1, 0),
    ("live_relevance", "a well-formed call", "[schedule(hour=7, label='x')]", 1, 1),
    ("live_relevance", "plain text", "Which hour?", 0, 0),
    ("live_relevance", "an empty reply", "", 0, 0),
    ("live_relevance", "a reply the decoder cannot read", "[" * 100_000, 0, 0),
    (
        "live_relevance",
        "an aliased list of lists",
        "[schedule(hour=7, label=[[0]*100000]*100000)]",
        0,
        0,
    ),
]


@pytest.mark.parametrize("rules", ["official", "strict"])
@pytest.mark.parametrize(
    ("category", "attack", "reply", "official", "strict"),
    RELEVANCE,
    ids=[f"{r[0]}-{r[1]}" for r in RELEVANCE],
)
def test_relevance_attacks(
    data: Path, category: str, attack: str, reply: str, official: int, strict: int, rules: str
) -> None:
    reward, obs, info = _reward(data, category, reply, rules)
    assert reward == (official if rules == "official" else strict), (attack, obs)
    assert "verdict" in info  # every relevance reply is graded


def test_rules_must_be_known(data: Path) -> None:
    with pytest.raises(ValueError, match="rules must be one of"):
        gym.make("agentenvs/BFCL-v0", tasks_path=str(data), rules="lenient")
    with pytest.raises(ValueError, match="rules must be one of"):
        gym.make("agentenvs/BFCLMultiTurn-v0", rules="lenient")


# ---------------------------------------------------------------- multi-turn
def _mt(rules: str) -> gym.Env:
    return gym.make("agentenvs/BFCLMultiTurn-v0", rules=rules, max_turns=200)


@pytest.mark.parametrize("rules", ["official", "strict"])
def test_a_held_out_function_runs_only_officially(rules: str) -> None:
    env = _mt(rules)
    obs, info = env.reset(seed=0, options={"task_id": "multi_turn_miss_func_0"})
    assert "cp" not in {t["function"]["name"] for t in info["tools"]}
    obs, *_ = env.step("[cp(source='notes.txt', destination='copy.txt')]")
    refused = "Error during execution: name 'cp' is not defined" in obs
    assert refused is (rules == "strict"), obs


@pytest.mark.parametrize("rules", ["official", "strict"])
def test_an_unservable_turn_pays_nothing_for_a_changed_state(rules: str) -> None:
    env = _mt(rules)
    env.reset(seed=0, options={"task_id": "multi_turn_miss_param_0"})
    for reply in ("[cd(folder='docs')]", "done"):
        env.step(reply)
    env.step("[mkdir(dir_name='guess')]")
    _, reward, terminated, _, info = env.step("done")
    assert reward == 0.0
    assert terminated is (rules == "strict")
    assert info["turn_check"]["checked"] is (rules == "strict")


HOST_PATHS = [
    "[cat(file_name='/etc/passwd')]",
    "[cat(file_name='../../../../../../etc/passwd')]",
    "[cd(folder='/')]",
    "[cd(folder='../../../../..'), ls()]",
    "[cd(folder='/etc'), ls()]",
    "[touch(file_name='../../../../tmp/agentenvs_escape')]",
    "[_load_scenario(scenario={})]",
    "[__init__()]",
    "[run(cmd='id')]",
    "[popen(cmd='id')]",
    "[ls(a=[[0]*100000]*100000)]",
]


@pytest.mark.parametrize("rules", ["official", "strict"])
@pytest.mark.parametrize("reply", HOST_PATHS)
def test_calls_never_reach_the_host(rules: str, reply: str) -> None:
    env = _mt(rules)
    env.reset(seed=0, options={"task_id": "multi_turn_base_0"})
    obs, reward, *_ = env.step(reply)
    assert "root:" not in obs and "/bin/" not in obs and reward == 0.0
    assert not Path("/tmp/agentenvs_escape").exists()


@pytest.mark.parametrize("rules", ["official", "strict"])
def test_the_agent_cannot_change_the_ground_truth(rules: str) -> None:
    env = _mt(rules)
    env.reset(seed=0, options={"task_id": "multi_turn_base_0"})
    gold = env.unwrapped.gold_calls()
    # wreck everything the agent can reach, then check the ground truth is untouched
    env.step("[rm(file_name='notes.txt'), rmdir(dir_name='docs'), mkdir(dir_name='x')]")
    env.reset(seed=0, options={"task_id": "multi_turn_base_0"})
    assert env.unwrapped.gold_calls() == gold
    unwrapped = env.unwrapped
    done = False
    while not done:
        calls = unwrapped.gold_calls()
        from agentenvs.envs.bfcl.decode import format_calls

        _, reward, terminated, truncated, _ = env.step(format_calls(calls) if calls else "done")
        if calls:
            _, reward, terminated, truncated, _ = env.step("done")
        done = terminated or truncated
    assert reward == 1.0


@pytest.mark.parametrize("rules", ["official", "strict"])
def test_ending_a_turn_without_calls_fails_it(rules: str) -> None:
    env = _mt(rules)
    env.reset(seed=0, options={"task_id": "multi_turn_base_0"})
    _, reward, terminated, _, info = env.step("All done!")
    assert terminated and reward == 0.0
    assert info["turn_check"]["error_type"] == "multi_turn:empty_turn_model_response"
