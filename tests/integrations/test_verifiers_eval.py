"""verifiers end to end: episodes run by verifiers' own eval runner (what ``vf-eval`` runs)
through ``AgentEnvsEnv``, its player agent, the ``null`` chat harness in a subprocess, the
interception server and the trace, against a scripted model served over HTTP on loopback.

The model is not under test: a small OpenAI-compatible server answers each chat
completion with the next reply of a script chosen by the task's prompt. Each episode is
then replayed in process with ``gym.make`` (same task, seed and actions), and what
verifiers recorded must equal it: the reward, the user turns the model saw, the system
prompt once. Every env the run made must be closed afterwards, with no env thread left.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401 - registers the ids

pytest.importorskip("verifiers.v1", reason="could not import verifiers: pip install 'agentenvs[integrations]'")

import verifiers.v1 as vf  # noqa: E402
from verifiers.v1.cli.eval.runner import run_eval  # noqa: E402
from verifiers.v1.cli.output import output_path  # noqa: E402
from verifiers.v1.configs.cli.eval import EvalConfig  # noqa: E402
from verifiers.v1.utils.loaders import load_taskset  # noqa: E402
from verifiers.v1.utils.trace_store import TRACES_FILE  # noqa: E402

from agentenvs.integrations.verifiers import AgentEnvsConfig, AgentEnvsEnvConfig  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

TASKSET_ID = "agentenvs_verifiers"
UNSCRIPTED = "(no scripted reply)"


class ScriptedModel:
    """An OpenAI-compatible ``/v1/chat/completions`` endpoint on 127.0.0.1 that plays a
    script: the reply to a conversation is ``scripts[first user message][k]``, k the
    number of assistant messages already in it. Streams (SSE) when asked to. Every
    request body is kept with the session header verifiers sends (the trace id)."""

    def __init__(self, scripts: dict[str, list[str]]) -> None:
        self.scripts = scripts
        self.requests: list[tuple[str | None, dict[str, Any]]] = []
        self._lock = threading.Lock()
        model = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with model._lock:
                    model.requests.append((self.headers.get("X-Session-ID"), body))
                if not self.path.endswith("/chat/completions"):
                    self.send_error(404)
                    return
                text = model.reply(body["messages"])
                base = {"id": "scripted", "created": 0, "model": body.get("model", "scripted")}
                usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
                if body.get("stream"):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    chunk = {**base, "object": "chat.completion.chunk"}
                    for event in (
                        {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text},
                                               "finish_reason": None}]},
                        {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                        {**chunk, "choices": [], "usage": usage},
                    ):
                        self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
                    self.wfile.write(b"data: [DONE]\n\n")
                    return
                out = json.dumps({**base, "object": "chat.completion", "usage": usage, "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, name="scripted-model", daemon=True)

    def reply(self, messages: list[dict[str, Any]]) -> str:
        prompt = next((m["content"] for m in messages if m["role"] == "user"), None)
        done = sum(m["role"] == "assistant" for m in messages)
        script = self.scripts.get(prompt, [])
        return script[done] if done < len(script) else UNSCRIPTED

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> ScriptedModel:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [])


def _env_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("agentenvs-env-")]


def _children() -> list[int]:
    """Live child processes of this process (the chat programs verifiers launches)."""
    mine = str(os.getpid())
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[1] == mine and fields[0] != "Z":  # fields: state, ppid, ...
            found.append(int(entry))
    return found


@pytest.fixture
def uv_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """verifiers prepares its chat program with ``uv``: ``AgentEnvsEnv.start`` finds the
    one of the ``uv`` package (``integrations`` extra) when ``PATH`` has none; whatever
    it adds to ``PATH`` is undone after the test."""
    pytest.importorskip("uv", reason="could not import uv: pip install 'agentenvs[integrations]'")
    monkeypatch.setenv("PATH", os.environ.get("PATH", ""))


@pytest.fixture
def made_envs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    """Every env ``gym.make`` builds while the test runs, and whether it was closed."""
    made: list[dict[str, Any]] = []
    real_make = gym.make

    def tracking_make(env_id: Any, *args: Any, **kwargs: Any) -> gym.Env:
        env = real_make(env_id, *args, **kwargs)
        record = {"id": env_id, "closed": False}
        made.append(record)
        real_close = env.close

        def close() -> None:
            record["closed"] = True
            real_close()

        env.close = close  # type: ignore[method-assign]
        return env

    monkeypatch.setattr(gym, "make", tracking_make)
    yield made


def _sql_scripts(tasks: list[Any]) -> dict[str, list[str]]:
    """A wrong query, the gold query, submit; the last task submits a wrong answer."""
    probe = gym.make("agentenvs/InterCodeSQL-v0")
    scripts = {}
    for i, task in enumerate(tasks):
        info = task.data.info
        probe.reset(seed=info["seed"], options={"task_id": info["task_id"]})
        final = "SELECT 1 WHERE 0" if i == len(tasks) - 1 else probe.unwrapped.gold_query
        scripts[task.data.prompt] = ["SELECT * FROM no_such_table", f"```sql\n{final}\n```", "submit"]
    probe.close()
    return scripts


FROZENLAKE_MOVES = [f"<answer>{m}</answer>" for m in ("Right", "Right", "Down", "Down", "Down", "Right")]


def _replay(info: dict[str, Any], script: list[str]) -> dict[str, Any]:
    """The same episode in process: reset with the task's arguments, play the script."""
    env = gym.make(info["env"], **info.get("env_kwargs", {}))
    options = {k: info[k] for k in ("task_id", "max_turns") if info.get(k) is not None}
    observation, reset_info = env.reset(seed=info["seed"], options=options)
    total, observations, actions = 0.0, [], []
    step_info: dict[str, Any] = {}
    for action in script:
        obs, reward, terminated, truncated, step_info = env.step(action)
        total += float(reward)
        actions.append(action)
        observations.append(obs)
        if terminated or truncated:
            break
    env.close()
    return {"reset": observation, "system": reset_info["system_prompt"], "reward": total,
            "observations": observations, "actions": actions, "success": bool(step_info.get("success"))}


def test_verifiers_eval_runs_real_episodes_equal_to_in_process_ones(
    tmp_path: Path, uv_on_path: None, made_envs: list[dict[str, Any]]
) -> None:
    every_sql_task = AgentEnvsConfig(id=TASKSET_ID, env="agentenvs/InterCodeSQL-v0", seeds=[0])
    sql = AgentEnvsConfig(id=TASKSET_ID, env="agentenvs/InterCodeSQL-v0", seeds=[0],
                          task_ids=[t.data.info["task_id"] for t in load_taskset(every_sql_task).take(3)])
    lake = AgentEnvsConfig(id=TASKSET_ID, env="agentenvs/FrozenLake-v0", task_ids=["4x4"], seeds=[0, 1],
                           max_turns=len(FROZENLAKE_MOVES))
    scripts = _sql_scripts(list(load_taskset(sql)))
    scripts.update({t.data.prompt: FROZENLAKE_MOVES for t in load_taskset(lake)})
    threads_before = {t.ident for t in _env_threads()}
    # children of earlier tests in this process (a sandbox helper, a server) are not ours
    children_before = set(_children())

    with ScriptedModel(scripts) as model:
        configs = [
            EvalConfig(env=AgentEnvsEnvConfig(taskset=taskset), model="scripted", push=False, rich=None,
                       client=vf.EvalClientConfig(base_url=model.base_url, api_key_var="AGENTENVS_TEST_KEY"),
                       output_dir=tmp_path, max_concurrent=3)
            for taskset in (sql, lake)
        ]

        async def run_all() -> list[list[vf.Episode]]:
            return [await run_eval(config) for config in configs]

        runs = asyncio.run(run_all())

    # verifiers' output on disk is the same record as the returned episodes
    for config, episodes in zip(configs, runs, strict=True):
        lines = (output_path(config) / TRACES_FILE).read_text().splitlines()
        saved = {e["id"]: e for e in map(json.loads, lines)}
        assert len(saved) == len(episodes) == len(list(load_taskset(config.env.taskset)))
        for episode in episodes:
            assert episode.ok, episode.errors
            [trace] = saved[episode.id]["traces"]
            assert trace["rewards"]["agentenvs_reward"]["score"] == episode.traces[0].rewards["agentenvs_reward"].score

    by_session: dict[str | None, list[dict[str, Any]]] = defaultdict(list)
    for session, body in model.requests:
        by_session[session].append(body)
    rewards = []
    for episode in (e for episodes in runs for e in episodes):
        [trace] = episode.traces
        info = trace.task.data.info
        script = scripts[trace.task.data.prompt]
        expected = _replay(info, script)
        messages = [(m.role, _text(m.content)) for m in trace.branches[-1].messages]
        # the system prompt once, as the system message; the task text alone is the first user turn
        assert [m for m in messages if m[0] == "system"] == [("system", expected["system"])]
        assert messages[0] == ("system", expected["system"])
        assert expected["reset"] == f"{expected['system']}\n\n{messages[1][1]}"
        # each reply was one env action; each observation came back as the next user turn
        assert [text for role, text in messages if role == "assistant"] == expected["actions"]
        assert [text for role, text in messages[1:] if role == "user"][1:] == expected["observations"][:-1]
        assert UNSCRIPTED not in [text for _, text in messages]
        # what the model endpoint was sent is that conversation, turn by turn
        sent = by_session[trace.id]
        assert len(sent) == len(expected["actions"])
        for k, body in enumerate(sent):
            seen = [(m["role"], _text(m["content"])) for m in body["messages"]]
            assert seen == messages[: 2 + 2 * k]
            assert sum(role == "system" for role, _ in seen) == 1
            assert not any(expected["system"] in text for role, text in seen if role == "user")
        # the reward verifiers recorded is the in-process episode's
        assert trace.rewards["agentenvs_reward"].score == expected["reward"]
        assert trace.info["agentenvs_turns"] == len(expected["actions"])
        assert trace.info["agentenvs_success"] == expected["success"]
        assert trace.stop_condition == "user_closed"
        rewards.append((info["env"], expected["reward"]))
    assert sorted(r for env, r in rewards if env.endswith("SQL-v0")) == [0.0, 1.0, 1.0]

    # every env was closed, no env thread and no chat program is left
    played = [r for r in made_envs if r["id"] in ("agentenvs/InterCodeSQL-v0", "agentenvs/FrozenLake-v0")]
    assert len(played) >= len(rewards)
    assert all(r["closed"] for r in played), played
    for thread in _env_threads():
        if thread.ident not in threads_before:
            thread.join(timeout=60)
    assert {t.ident for t in _env_threads()} <= threads_before
    deadline = time.monotonic() + 120  # a chat program may still be exiting
    while set(_children()) - children_before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert set(_children()) - children_before == set()


def test_uv_of_the_extra_is_put_on_path_when_path_has_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uv = pytest.importorskip("uv", reason="could not import uv: pip install 'agentenvs[integrations]'")
    from agentenvs.integrations.verifiers import ensure_uv_on_path

    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH without uv
    found = ensure_uv_on_path()
    assert found == uv.find_uv_bin()
    assert os.environ["PATH"].split(os.pathsep) == [os.path.dirname(found), str(tmp_path)]
    assert ensure_uv_on_path() == found  # already there: PATH is left alone
    assert os.environ["PATH"].split(os.pathsep) == [os.path.dirname(found), str(tmp_path)]


def test_a_player_turn_limit_ends_the_episode_through_verifiers_and_closes_the_env(
    tmp_path: Path, uv_on_path: None, made_envs: list[dict[str, Any]]
) -> None:
    # "Up" along the top row never reaches a hole or the goal: only the limit can end it
    lake = AgentEnvsConfig(id=TASKSET_ID, env="agentenvs/FrozenLake-v0", task_ids=["4x4"], seeds=[3])
    [task] = list(load_taskset(lake))
    script = ["<answer>Up</answer>"] * 10
    with ScriptedModel({task.data.prompt: script}) as model:
        env = AgentEnvsEnvConfig(taskset=lake, player={"max_turns": 2})
        config = EvalConfig(env=env, model="scripted", push=False, rich=None, output_dir=tmp_path,
                            client=vf.EvalClientConfig(base_url=model.base_url, api_key_var="AGENTENVS_TEST_KEY"))
        [episode] = asyncio.run(run_eval(config))
    [trace] = episode.traces
    expected = _replay(task.data.info, script[:2])
    assert trace.info["agentenvs_stopped"] == "model"  # verifiers ended the exchange, not the env
    assert trace.info["agentenvs_turns"] == 2
    assert trace.rewards["agentenvs_reward"].score == expected["reward"] == 0.0
    users = [_text(m.content) for m in trace.branches[-1].messages if m.role == "user"]
    assert users[1:] == expected["observations"][:1]
    assert len(model.requests) == 2
    played = [r for r in made_envs if r["id"] == "agentenvs/FrozenLake-v0"]
    assert played and all(r["closed"] for r in played)


def test_a_faulted_episode_is_recorded_failed_and_unscored_by_verifiers(
    tmp_path: Path, uv_on_path: None
) -> None:
    from test_integration_faults import FAULTY_ID, PLANS, Plan

    PLANS["verifiers-eval"] = plan = Plan(steps=[2] * 8)  # every env faults at its second step
    try:
        lake = AgentEnvsConfig(id=TASKSET_ID, env=FAULTY_ID, task_ids=["4x4"], seeds=[0],
                               env_kwargs={"plan": "verifiers-eval", "is_slippery": False})
        [task] = list(load_taskset(lake))
        script = ["<answer>Right</answer>"] * 4
        with ScriptedModel({task.data.prompt: script}) as model:
            config = EvalConfig(env=AgentEnvsEnvConfig(taskset=lake), model="scripted", push=False,
                                rich=None, output_dir=tmp_path,
                                client=vf.EvalClientConfig(base_url=model.base_url,
                                                           api_key_var="AGENTENVS_TEST_KEY"))
            [episode] = asyncio.run(run_eval(config))
        assert not episode.ok
        assert [e.type for e in episode.errors] == ["EnvFault"]
        assert "agentenvs fault (container, infrastructure)" in episode.errors[0].message
        assert all("agentenvs_reward" not in trace.rewards for trace in episode.traces)
        assert len(model.requests) == 2  # the fault came at the second step: no third turn
        assert plan.faults == 1 and plan.closed == plan.made
    finally:
        PLANS.pop("verifiers-eval", None)


DOCS = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"
DOC_BASE_URL = "http://127.0.0.1:8000/v1"


def _documented_vf_eval() -> list[str]:
    """The ``vf-eval`` command of docs/integrations.md, as a reader would paste it."""
    import shlex

    lines, pending, in_bash = [], "", False
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_bash = line.strip() == "```bash"
            continue
        if not in_bash:
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    [command] = [c.strip() for c in lines if c.strip().startswith("vf-eval ")]
    return shlex.split(command)


def test_the_documented_vf_eval_command_plays_a_handful_of_episodes_and_says_how_many(
    tmp_path: Path, uv_on_path: None
) -> None:
    import subprocess
    import sys

    argv = _documented_vf_eval()
    assert DOC_BASE_URL in argv and "--no-push" in argv
    env_id = argv[argv.index("--env.taskset.env") + 1]
    every_task = load_taskset(AgentEnvsConfig(id=TASKSET_ID, env=env_id))
    total = len(list(every_task))  # iterated by a trainer: every task, no eval limit
    default = AgentEnvsConfig.model_fields["eval_limit"].default
    assert total > default
    first = list(every_task.take(default))
    scripts = _sql_scripts(first) if env_id.endswith("SQL-v0") else {}
    bin_dir = Path(sys.executable).parent
    with ScriptedModel(scripts) as model:
        argv[argv.index(DOC_BASE_URL)] = model.base_url
        done = subprocess.run(
            [str(bin_dir / argv[0]), *argv[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=600,
            env={**os.environ, "AGENTENVS_MODEL_API_KEY": "a-test-key",
                 "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"},
        )
    assert done.returncode == 0, done.stderr[-4000:]
    # the count comes first, before any episode runs, with the way to ask for more
    said = [line for line in done.stderr.splitlines() if line.startswith(f"{env_id}: running ")]
    assert said == [
        f"{env_id}: running {default} of {total} tasks ({total} task ids × 1 seed) × -r rollouts each "
        f"(default 1) = {default} episodes at -r 1; -n N for more (-n {total}: all)"
    ], done.stderr[-4000:]
    [run_dir] = (tmp_path / "outputs").iterdir()
    episodes = [json.loads(line) for line in (run_dir / TRACES_FILE).read_text().splitlines()]
    assert sorted(e["traces"][0]["task"]["data"]["name"] for e in episodes) == sorted(t.data.name for t in first)
    if scripts:  # the gold query of every task but the last, then submit
        rewards = sorted(e["traces"][0]["rewards"]["agentenvs_reward"]["score"] for e in episodes)
        assert rewards == [0.0] + [1.0] * (default - 1)
    # a line per finished episode, in the run's log (and on the console with --no-rich)
    log = (run_dir / "logs" / "latest" / "eval.log").read_text()
    assert [f"episode {k} of {default} done" in log for k in range(1, default + 1)] == [True] * default
