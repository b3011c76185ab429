"""``agentenvs serve-model`` speaks OpenAI's API as the official ``openai`` client reads
it: the real command on a free loopback port, a tiny model built from a config.

Streaming and plain answers agree for greedy decoding; ``n``, ``stop``, ``max_tokens``,
usage counts, log-probs and vLLM's token extensions equal what the local model computes;
a tool call a (memorising) model writes comes back as ``tool_calls`` and round-trips;
a bad request is a 400 in OpenAI's error shape naming its field.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from served_model import ServedModel

openai = pytest.importorskip("openai")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

MESSAGES = [
    {"role": "system", "content": "You are playing FrozenLake."},
    {"role": "user", "content": "Map:\nP_\n_G\nWhere do you go?"},
]


@pytest.fixture(scope="module")
def served(tiny_model_dir: Path) -> Iterator[ServedModel]:
    with ServedModel(tiny_model_dir, options="max_new_tokens=16") as server:
        yield server


@pytest.fixture(scope="module")
def client(served: ServedModel) -> Any:
    return openai.OpenAI(base_url=served.url, api_key=served.api_key, max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def local(tiny_model: Any, tiny_tokenizer: Any) -> Any:
    """The same model in this process, to check what the server computed."""
    from agentenvs.policy.hf import HFPolicy

    return HFPolicy(tiny_model, tiny_tokenizer, max_new_tokens=16)


def _prompt_ids(tokenizer: Any, messages: list[dict[str, Any]]) -> list[int]:
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _stream(client: Any, **kwargs: Any) -> tuple[dict[int, str], dict[int, str], Any]:
    texts: dict[int, str] = {}
    reasons: dict[int, str] = {}
    usage = None
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        assert chunk.object == "chat.completion.chunk"
        for choice in chunk.choices:
            texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
            if choice.finish_reason:
                reasons[choice.index] = choice.finish_reason
        if chunk.usage is not None:
            assert not chunk.choices
            usage = chunk.usage
    return texts, reasons, usage


def test_streamed_and_plain_answers_agree_for_greedy_decoding(client: Any, served: ServedModel) -> None:
    plain = client.chat.completions.create(model="tiny", messages=MESSAGES, temperature=0, n=2)
    texts, reasons, usage = _stream(client, model="tiny", messages=MESSAGES, temperature=0, n=2,
                                    stream_options={"include_usage": True})
    assert plain.object == "chat.completion"
    assert [c.message.content for c in plain.choices] == [texts[0], texts[1]]
    assert plain.choices[0].message.content  # the tiny model says something
    assert [c.finish_reason for c in plain.choices] == [reasons[0], reasons[1]]
    assert usage == plain.usage
    # the raw stream: events of chunks, the usage chunk last, then the terminal event
    body = json.dumps({"model": "tiny", "messages": MESSAGES, "temperature": 0, "n": 2, "stream": True,
                       "stream_options": {"include_usage": True}}).encode()
    request = urllib.request.Request(f"{served.url}/chat/completions", data=body,
                                     headers={"Content-Type": "application/json",
                                              "Authorization": f"Bearer {served.api_key}"})
    with urllib.request.urlopen(request, timeout=120) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        events = [e for e in response.read().decode().split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]"
    last = json.loads(events[-2].removeprefix("data: "))
    assert last["choices"] == [] and last["usage"]["total_tokens"] == usage.total_tokens
    finish = json.loads(events[-3].removeprefix("data: "))
    assert finish["choices"][0]["finish_reason"] == reasons[1]


def test_a_streamed_answer_without_usage_has_no_usage_chunk(client: Any) -> None:
    texts, reasons, usage = _stream(client, model="tiny", messages=MESSAGES, temperature=0)
    assert usage is None and texts[0] and reasons[0] in ("stop", "length")


def test_n_choices_are_seeded_and_counted_exactly(client: Any, tiny_tokenizer: Any) -> None:
    ask = dict(model="tiny", messages=MESSAGES, n=3, temperature=1.0, seed=7,
               extra_body={"return_token_ids": True})
    first = client.chat.completions.create(**ask)
    assert [c.index for c in first.choices] == [0, 1, 2]
    again = client.chat.completions.create(**ask)
    assert [c.message.content for c in again.choices] == [c.message.content for c in first.choices]
    other = client.chat.completions.create(**{**ask, "seed": 8})
    assert [c.message.content for c in other.choices] != [c.message.content for c in first.choices]
    prompt = _prompt_ids(tiny_tokenizer, MESSAGES)
    assert first.model_extra["prompt_token_ids"] == prompt
    assert first.usage.prompt_tokens == len(prompt)
    token_ids = [c.model_extra["token_ids"] for c in first.choices]
    assert first.usage.completion_tokens == sum(map(len, token_ids))
    assert first.usage.total_tokens == len(prompt) + sum(map(len, token_ids))
    for choice, ids in zip(first.choices, token_ids, strict=True):
        assert tiny_tokenizer.decode(ids, skip_special_tokens=True) == choice.message.content


def test_stop_cuts_the_text_before_the_stop_string(client: Any) -> None:
    greedy = client.chat.completions.create(model="tiny", messages=MESSAGES, temperature=0)
    text = greedy.choices[0].message.content
    stop = text[len(text) // 2 : len(text) // 2 + 2]
    assert stop.strip() and text.find(stop) > 0
    for value in (stop, [stop, "never-in-the-text"]):
        stopped = client.chat.completions.create(model="tiny", messages=MESSAGES, temperature=0, stop=value)
        assert stopped.choices[0].message.content == text[: text.find(stop)]
        assert stopped.choices[0].finish_reason == "stop"
    texts, reasons, _ = _stream(client, model="tiny", messages=MESSAGES, temperature=0, stop=[stop])
    assert texts[0] == text[: text.find(stop)] and reasons[0] == "stop"


def test_max_tokens_and_max_completion_tokens_bound_the_answer(client: Any) -> None:
    for field in ("max_tokens", "max_completion_tokens"):
        answer = client.chat.completions.create(model="tiny", messages=MESSAGES, temperature=0,
                                                **{field: 3}, extra_body={"return_token_ids": True})
        assert answer.usage.completion_tokens == len(answer.choices[0].model_extra["token_ids"]) == 3
        assert answer.choices[0].finish_reason == "length"
    # unset: the served spec's max_new_tokens=16, as /v1/models says
    [card] = client.models.list().data
    assert card.id == "tiny" and card.model_extra["sampling_defaults"]["max_tokens"] == 16
    unset = client.chat.completions.create(model="tiny", messages=MESSAGES, temperature=0)
    assert unset.usage.completion_tokens <= 16


def test_logprobs_are_the_models_own_in_openais_shape(client: Any, local: Any, tiny_tokenizer: Any) -> None:
    answer = client.chat.completions.create(
        model="tiny", messages=MESSAGES, temperature=0, logprobs=True, top_logprobs=3,
        extra_body={"return_token_ids": True},
    )
    [choice] = answer.choices
    ids = choice.model_extra["token_ids"]
    entries = choice.logprobs.content
    assert len(entries) == len(ids) == answer.usage.completion_tokens
    prompt = _prompt_ids(tiny_tokenizer, MESSAGES)
    [expected] = local.token_logprobs([prompt + ids], [len(prompt)])
    assert [e.logprob for e in entries] == pytest.approx(expected, abs=1e-4)
    for entry, token in zip(entries, ids, strict=True):
        assert entry.token == tiny_tokenizer.decode([token])
        assert len(entry.top_logprobs) == 3
        values = [t.logprob for t in entry.top_logprobs]
        assert values == sorted(values, reverse=True)
        assert entry.top_logprobs[0].token == entry.token  # greedy: the most likely token
        assert entry.logprob == pytest.approx(values[0])
    # streamed, each chunk carries its token's entry
    chunks = client.chat.completions.create(model="tiny", messages=MESSAGES, temperature=0,
                                            logprobs=True, stream=True)
    streamed = [e.logprob for c in chunks for ch in c.choices if ch.logprobs for e in ch.logprobs.content]
    assert streamed == pytest.approx([e.logprob for e in entries], abs=1e-6)


def test_completions_take_token_ids_and_name_tokens_by_id(client: Any, local: Any) -> None:
    prompt = _prompt_ids(local.tokenizer, MESSAGES)
    answer = client.completions.create(
        model="tiny", prompt=prompt, max_tokens=5, temperature=0, logprobs=2, n=2,
        extra_body={"return_token_ids": True, "return_tokens_as_token_ids": True},
    )
    assert len(answer.choices) == 2
    greedy = local.generate([prompt], 1, temperature=0.0, max_new_tokens=5)[0][0]
    for choice in answer.choices:
        extra = choice.model_extra
        assert extra["prompt_token_ids"] == prompt
        assert extra["token_ids"][: len(greedy.token_ids)] == list(greedy.token_ids)
        assert choice.text == greedy.text
        assert choice.logprobs.tokens == [f"token_id:{t}" for t in extra["token_ids"]]
        for token, top in zip(choice.logprobs.tokens, choice.logprobs.top_logprobs, strict=True):
            assert token in top and len(top) >= 2  # the token itself and the top 2
    assert answer.usage.prompt_tokens == len(prompt)


def _error(served: ServedModel, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(f"{served.url}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json",
                                              "Authorization": f"Bearer {served.api_key}"})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=60)
    return caught.value.code, json.loads(caught.value.read())


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "tiny", "messages": MESSAGES, "temperature": 5}, "temperature"),
        ({"model": "tiny", "messages": MESSAGES, "n": 0}, "n"),
        ({"model": "tiny", "messages": []}, "messages"),
        ({"model": "tiny", "messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role"),
        ({"model": "tiny", "messages": MESSAGES, "stop": 3}, "stop"),
        ({"model": "tiny", "messages": MESSAGES, "top_logprobs": 2}, "top_logprobs"),
        ({"model": "tiny", "messages": MESSAGES, "stream_options": {"include_usage": True}},
         "stream_options"),
        ({"model": "tiny", "messages": MESSAGES, "presence_penalty": 1.0}, "presence_penalty"),
    ],
)
def test_a_bad_request_is_a_400_in_openais_shape(
    served: ServedModel, client: Any, body: dict[str, Any], param: str
) -> None:
    status, answer = _error(served, "/chat/completions", body)
    assert status == 400
    assert set(answer) == {"error"}
    assert answer["error"]["type"] == "invalid_request_error"
    assert answer["error"]["param"] == param and answer["error"]["message"]
    with pytest.raises(openai.BadRequestError) as caught:  # and the client raises it as such
        client.chat.completions.create(**body)
    assert caught.value.status_code == 400 and caught.value.body["param"] == param


def test_an_unknown_route_is_a_404(served: ServedModel) -> None:
    status, answer = _error(served, "/embeddings", {"input": "hi"})
    assert status == 404 and answer["error"]["message"]


# ---------------------------------------------------------------- tool calls
TOOLS = [{"type": "function", "function": {
    "name": "move", "description": "Move one square.",
    "parameters": {"type": "object", "properties": {"direction": {"type": "string"}},
                   "required": ["direction"]}}}]
CALL = '<tool_call>\n{"name": "move", "arguments": {"direction": "Left"}}\n</tool_call>'
AFTER = "Moved left."


@pytest.fixture(scope="module")
def tool_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Qwen3 (TRL's example: Qwen3's template, ``<tool_call>`` a special token)
    trained until it answers the task with a ``move`` call, and the call's result with
    ``AFTER``: the server's parsing is under test, not the model."""
    import importlib.util

    import torch

    from agentenvs.policy.base import Conversation
    from agentenvs.policy.chat import ChatFormatter
    from agentenvs.policy.serve_protocol import read_messages

    example = Path(__file__).resolve().parents[2] / "examples" / "trl_grpo.py"
    spec = importlib.util.spec_from_file_location("trl_grpo_example_tools", example)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tokenizer = module.build_tokenizer([m["content"] for m in MESSAGES] + [CALL, AFTER] * 20
                                       + [json.dumps(TOOLS)] * 5)
    model = module.build_model(tokenizer, 0)
    formatter = ChatFormatter(tokenizer)
    call_message = {"role": "assistant", "content": "", "tool_calls": [{
        "id": "call_0", "type": "function",
        "function": {"name": "move", "arguments": json.dumps({"direction": "Left"})}}]}
    turns = [
        (MESSAGES, CALL),
        ([*MESSAGES, call_message, {"role": "tool", "tool_call_id": "call_0", "content": "Map:\nP_"}],
         AFTER),
    ]
    examples = []
    for messages, answer in turns:
        prompt = formatter.prompt_ids(Conversation(messages=read_messages({"messages": messages}),
                                                   tools=TOOLS))
        examples.append((prompt, formatter.encode(answer + "<|im_end|>")))
    optim = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(150):
        for prompt, answer in examples:
            ids = torch.tensor([prompt + answer])
            labels = torch.tensor([[-100] * len(prompt) + answer])
            loss = model(input_ids=ids, labels=labels).loss
            optim.zero_grad()
            loss.backward()
            optim.step()
    model.eval()
    path = tmp_path_factory.mktemp("tool-qwen3")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_a_tool_call_round_trips_through_the_client(tool_model_dir: Path) -> None:
    with ServedModel(tool_model_dir, options="max_new_tokens=48") as served:
        client = openai.OpenAI(base_url=served.url, api_key=served.api_key, max_retries=0, timeout=120)
        first = client.chat.completions.create(model="tiny", messages=MESSAGES, tools=TOOLS, temperature=0)
        [choice] = first.choices
        assert choice.finish_reason == "tool_calls", choice.message.content
        assert choice.message.content is None
        [call] = choice.message.tool_calls
        assert call.type == "function" and call.function.name == "move"
        assert json.loads(call.function.arguments) == {"direction": "Left"}
        # streamed: the same call as tool-call deltas
        chunks = list(client.chat.completions.create(model="tiny", messages=MESSAGES, tools=TOOLS,
                                                     temperature=0, stream=True))
        deltas = [d for c in chunks for ch in c.choices for d in (ch.delta.tool_calls or [])]
        assert [(d.index, d.function.name, d.function.arguments) for d in deltas] == [
            (0, "move", call.function.arguments)]
        assert chunks[-1].choices[0].finish_reason == "tool_calls"
        # tool_choice "none": the model's text, as it wrote it
        text = client.chat.completions.create(model="tiny", messages=MESSAGES, tools=TOOLS,
                                              temperature=0, tool_choice="none")
        assert text.choices[0].finish_reason == "stop" and not text.choices[0].message.tool_calls
        # the call and its result go back; the template renders them and the model answers
        history = [*MESSAGES, choice.message.model_dump(exclude_none=True),
                   {"role": "tool", "tool_call_id": call.id, "content": "Map:\nP_"}]
        second = client.chat.completions.create(model="tiny", messages=history, tools=TOOLS, temperature=0)
        assert second.choices[0].message.content == AFTER
        assert second.choices[0].finish_reason == "stop"


# ---------------------------------------------------------------- the openai policy
def test_the_openai_policy_takes_the_served_defaults_unless_given(served: ServedModel, client: Any) -> None:
    from agentenvs.policy.base import Conversation
    from agentenvs.policy.hf import derive_seed
    from agentenvs.policy.registry import make_policy

    seed = derive_seed(3, 0) % 2**31  # what the policy sends for sample(..., seed=3)

    def sampled(max_tokens: int) -> Any:
        return client.chat.completions.create(model="tiny", messages=MESSAGES, seed=seed,
                                              max_tokens=max_tokens).choices[0]

    at_16, at_256 = sampled(16), sampled(256)
    assert at_16.finish_reason == "length" and at_256.message.content != at_16.message.content
    conversation = Conversation(messages=[dict(m) for m in MESSAGES])
    policy = make_policy(f"openai:base_url={served.url},model=tiny,top_p=1.0")
    settings = policy.sampling_settings()
    assert settings["max_tokens"] == 16 and settings["temperature"] == 1.0 and settings["stop"] == []
    assert settings["source"] == {"max_tokens": "server", "temperature": "server",
                                  "top_p": "argument", "stop": "server"}
    assert policy.sample([conversation], 1, seed=3) == [[at_16.message.content]]
    given = make_policy(f"openai:base_url={served.url},model=tiny,max_new_tokens=4")
    assert given.sampling_settings()["source"]["max_tokens"] == "argument"
    assert given.sample([conversation], 1, seed=3) == [[sampled(4).message.content]]


def test_a_server_without_defaults_leaves_the_built_in_ones() -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from agentenvs.policy.openai_compat import DEFAULT_SAMPLING, OpenAICompatPolicy

    class NoModels(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.send_error(404)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), NoModels)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        policy = OpenAICompatPolicy(f"http://127.0.0.1:{server.server_address[1]}/v1", "m", top_p=0.5)
        settings = policy.sampling_settings()
        assert settings["max_tokens"] == DEFAULT_SAMPLING["max_tokens"] == 256
        assert settings["top_p"] == 0.5 and settings["source"]["max_tokens"] == "default"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_eval_records_the_effective_sampling_settings_in_its_manifest(
    served: ServedModel, tmp_path: Path
) -> None:
    from agentenvs.cli import main

    out = tmp_path / "run"
    code = main(["eval", "--env", "agentenvs/FrozenLake-v0", "--policy",
                 f"openai:base_url={served.url},model=tiny,top_p=0.9", "--tasks", "first:1",
                 "--n", "1", "--budgets", "1", "--workers", "0", "--no-progress", "--out", str(out)])
    assert code == 0
    manifest = json.loads((out / "manifest.json").read_text())
    sampling = manifest["sampling"]
    assert {k: sampling[k] for k in ("max_tokens", "temperature", "top_p", "stop", "n")} == {
        "max_tokens": 16, "temperature": 1.0, "top_p": 0.9, "stop": [], "n": 1}
    assert sampling["source"]["max_tokens"] == "server" and sampling["source"]["top_p"] == "argument"
    assert sampling["seed"]["run"] == 0
    assert len((out / "trajectories.jsonl").read_text().splitlines()) == 1
