"""The ``openai`` policy returns tokens as sampled, against ``agentenvs serve-model`` itself
(the real command on a free loopback port, the tiny model saved to a directory): its ids
and log-probs equal what the ``hf`` policy scores for the same ids, its turns are
token-in/token-out, ``agentenvs eval --record-tokens`` records the ids and ``agentenvs
likelihood`` scores them on tokens. A server without vLLM's token extensions (as OpenAI's
own) gets text only, said once, and in the run's manifest.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from served_model import ServedModel

from agentenvs.eval.records import read_manifest, read_records, read_step_tokens, read_trajectories
from agentenvs.policy.base import Conversation, TokenPolicy
from agentenvs.policy.openai_compat import OpenAICompatPolicy

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

OBSERVATIONS = ["Invalid action. Map:\nP_\n_G", "Map:\n_P\n_G", "Map:\n__\nPG"]


@pytest.fixture(scope="module")
def served(tiny_model_dir: Path) -> Iterator[ServedModel]:
    with ServedModel(tiny_model_dir, options="max_new_tokens=8") as server:
        yield server


@pytest.fixture(scope="module")
def local(tiny_model: Any, tiny_tokenizer: Any) -> Any:
    """The same model in this process, to score what the server drew."""
    from agentenvs.policy.hf import HFPolicy

    return HFPolicy(tiny_model, tiny_tokenizer, max_new_tokens=8)


def start() -> Conversation:
    return Conversation.start("Map:\nP_\n_G", {"system_prompt": "You are playing FrozenLake."})


def largest_difference(local: Any, samples: list[Any]) -> float:
    """The largest |sampled - scored| log-prob over every drawn token of ``samples``."""
    scored = local.token_logprobs(
        [[*s.prompt_ids, *s.completion_ids] for s in samples],
        [len(s.prompt_ids) for s in samples],
    )
    return max(
        abs(a - b)
        for s, values in zip(samples, scored, strict=True)
        for a, b in zip(s.logprobs, values, strict=True)
    )


def test_token_prompts_give_the_ids_and_logprobs_the_hf_policy_scores(
    served: ServedModel, tiny_model_dir: Path, local: Any
) -> None:
    policy = OpenAICompatPolicy(served.url, served.name, tokenizer=str(tiny_model_dir))
    assert isinstance(policy, TokenPolicy) and policy.temperature == 1.0
    conversations = [start() for _ in range(3)]
    every: list[Any] = []
    for turn, observation in enumerate(OBSERVATIONS):
        rows = policy.sample_tokens(conversations, 2, seed=turn)
        for conversation, row in zip(conversations, rows, strict=True):
            for sample in row:
                assert sample.completion_ids and sample.logprobs is not None
                assert len(sample.logprobs) == len(sample.completion_ids)
                assert sample.vocab == local.formatter.vocab_fingerprint
                assert sample.logprob_kind == "raw"  # the server's, before temperature
                text = local.tokenizer.decode(list(sample.completion_ids), skip_special_tokens=True)
                assert text == sample.text
            first = row[0]
            if turn == 0:
                assert first.prompt_from == "template"
                assert list(first.prompt_ids) == local.formatter.prompt_ids(conversation)
            else:  # turn t+1's prompt starts with turn t's prompt and completion
                before = conversation.samples[-1]
                assert first.prompt_from == "tokens" and first.drift_checked
                context = (*before.prompt_ids, *before.completion_ids)
                assert first.prompt_ids[: len(context)] == context
            every += row
            conversation.add_turn(first.text, observation, first)
    assert policy.token_note is None  # the server gave every id
    difference = largest_difference(local, every)
    print(f"openai vs hf: {len(every)} samples, largest log-prob difference {difference:.2e}")
    assert difference < 1e-4


def test_chat_requests_record_the_servers_prompt_ids(
    served: ServedModel, tiny_model_dir: Path, local: Any
) -> None:
    for options in ({"tokenizer": str(tiny_model_dir), "conversation": "template"}, {}):
        policy = OpenAICompatPolicy(served.url, served.name, **options)
        conversation = start()
        conversation.add_turn("<answer>Up</answer>", OBSERVATIONS[0])
        samples = policy.sample_tokens([conversation], 3, seed=5)[0]
        for sample in samples:
            assert sample.prompt_from == "template" and not sample.drift_checked
            assert list(sample.prompt_ids) == local.formatter.prompt_ids(conversation)
            assert sample.completion_ids and sample.logprobs is not None
        assert largest_difference(local, samples) < 1e-4
        if options:
            assert samples[0].vocab == local.formatter.vocab_fingerprint
            assert policy.token_note is None
        else:  # no tokenizer here: no fingerprint, and the policy says why it uses chat
            assert samples[0].vocab == ""
            assert "tokenizer" in (policy.token_note or "")


def eval_run(policy: str, out: Path, *extra: str) -> None:
    from agentenvs.cli import main

    code = main(
        [
            "eval",
            "--env",
            "agentenvs/FrozenLake-v0",
            "--policy",
            policy,
            "--tasks",
            "4x4",
            "--n",
            "2",
            "--budgets",
            "3",
            "--workers",
            "0",
            "--out",
            str(out),
            "--no-progress",
            "--record-tokens",
            *extra,
        ]
    )
    assert code == 0


def test_eval_records_the_ids_and_likelihood_scores_them_on_tokens(
    served: ServedModel, tiny_model_dir: Path, tmp_path: Path
) -> None:
    from agentenvs.cli import main

    spec = f"openai:base_url={served.url},model={served.name},tokenizer={tiny_model_dir}"
    eval_run(spec, tmp_path / "run")
    records = read_trajectories(tmp_path / "run" / "trajectories.jsonl")
    steps = 0
    for record in records:
        assert record["token_space"]["logprobs"] == "raw"
        context: list[int] = []
        for index, tokens in enumerate(read_step_tokens(record)):
            assert tokens is not None and tokens.logprobs is not None
            assert tokens.prompt_ids[: len(context)] == context
            assert tokens.prompt_from == ("template" if index == 0 else "tokens")
            context = tokens.context
            steps += 1
    manifest = read_manifest(tmp_path / "run")
    assert manifest["tokens"]["recorded"] == steps and manifest["tokens"]["text_only"] == 0
    print(f"records with tokens through openai: {len(records)} trajectories, {steps} steps")
    assert steps > len(records)  # multi-turn

    code = main(
        [
            "likelihood",
            str(tmp_path / "run"),
            "--model-a",
            f"hf:model={tiny_model_dir}",
            "--out",
            str(tmp_path / "scored"),
            "--no-plots",
            "--no-progress",
        ]
    )
    assert code == 0
    results = read_records(tmp_path / "scored" / "results.jsonl")
    assert results and all(r["scored_on_a"] == "tokens" for r in results)
    by_key = {(r["task_id"], r["sample"]): r for r in records}
    for result in results:
        sampled = [
            sum(s.logprobs) for s in read_step_tokens(by_key[(result["task_id"], result["sample"])])
        ]
        assert result["logp_a"] == pytest.approx(sampled, abs=1e-3)


# ---------------------------------------------------------------- servers without the extensions
class PlainChatServer:
    """A chat endpoint that answers text only: ``refuse`` as OpenAI's API does (a 400
    naming an unknown argument), else ignoring the extension fields; no ``/completions``."""

    def __init__(self, refuse: bool) -> None:
        self.bodies: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                self.answer(404, {"error": {"message": "no such route"}})

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.bodies.append({"path": self.path, **body})
                unknown = [
                    k for k in ("return_token_ids", "return_tokens_as_token_ids") if k in body
                ]
                if not self.path.endswith("/chat/completions"):
                    self.answer(404, {"error": {"message": "This is a chat model"}})
                elif refuse and unknown:
                    message = f"Unrecognized request argument supplied: {unknown[0]}"
                    self.answer(
                        400, {"error": {"message": message, "type": "invalid_request_error"}}
                    )
                else:
                    choices = [
                        {
                            "index": i,
                            "message": {"role": "assistant", "content": "<answer>Down</answer>"},
                            "finish_reason": "stop",
                        }
                        for i in range(body.get("n", 1))
                    ]
                    self.answer(200, {"object": "chat.completion", "choices": choices})

            def answer(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.parametrize("refuse", [True, False], ids=["refuses-the-fields", "ignores-them"])
def test_a_server_without_the_extensions_gives_text_and_the_manifest_says_so(
    refuse: bool, tiny_model_dir: Path, tmp_path: Path
) -> None:
    server = PlainChatServer(refuse)
    try:
        # with a tokenizer, tokens mode asks /completions first; the 404 sends it to chat
        spec = f"openai:base_url={server.url},model=m,tokenizer={tiny_model_dir},max_retries=0"
        eval_run(spec, tmp_path / "run")
    finally:
        server.close()
    records = read_trajectories(tmp_path / "run" / "trajectories.jsonl")
    assert records and all("token_space" not in r for r in records)
    steps = [s for r in records for s in r["steps"]]
    assert steps and all(s["tokens"] is None for s in steps)
    tokens = read_manifest(tmp_path / "run")["tokens"]
    assert tokens["recorded"] == 0 and tokens["text_only"] == len(steps)
    assert "text only" in tokens["note"]
    paths = [b["path"] for b in server.bodies]
    assert paths.count("/v1/completions") == 1  # asked once, then chat from there on
    chat = [b for b in server.bodies if b["path"].endswith("/chat/completions")]
    if refuse:  # refused once by name, then never sent again
        assert "return_token_ids" in chat[0]
        assert all("return_token_ids" not in b for b in chat[1:])
    else:
        assert all(b.get("return_token_ids") is True for b in chat)


def test_the_refusal_is_said_once(tiny_model_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    server = PlainChatServer(refuse=True)
    try:
        policy = OpenAICompatPolicy(server.url, "m", conversation="template", max_retries=0)
        with caplog.at_level("WARNING", logger="agentenvs.policy.openai_compat"):
            for seed in range(3):
                (row,) = policy.sample_tokens([start()], 2, seed=seed)
                assert [s.text for s in row] == ["<answer>Down</answer>"] * 2
                assert all(not s.prompt_ids and not s.completion_ids for s in row)
    finally:
        server.close()
    assert "refused vLLM's token extensions" in (policy.token_note or "")
    said = [r for r in caplog.records if "token" in r.getMessage()]
    assert len(said) == 1


def test_vllm_shapes_ids_named_in_logprobs_and_stop_strings(tiny_tokenizer: Any) -> None:
    """vLLM's answers as it shapes them: ids only as ``token_id:N`` log-prob tokens, and a
    stop string whose tokens it keeps in ``token_ids`` (cut after what the text needs)."""
    from agentenvs.policy.openai_tokens import choice_tokens, served_sample
    from agentenvs.policy.tokens import TurnPrompt

    ids = tiny_tokenizer("<answer>Left</answer> STOP here", add_special_tokens=False)["input_ids"]
    values = [-0.5 - i for i in range(len(ids))]
    named = {"tokens": [f"token_id:{i}" for i in ids], "token_logprobs": values}
    assert choice_tokens({"text": "x", "logprobs": named}, chat=False) == (ids, values)
    text = "<answer>Left</answer>"
    choice = {
        "text": text,
        "token_ids": ids,
        "logprobs": named,
        "finish_reason": "stop",
        "stop_reason": " STOP",
    }
    sample = served_sample(
        choice,
        text,
        TurnPrompt((1, 2), "template"),
        None,
        chat=False,
        tokenizer=tiny_tokenizer,
        vocab="v",
        stop=[" STOP"],
        end_ids=[2],
    )
    kept = len(sample.completion_ids)
    assert tiny_tokenizer.decode(list(sample.completion_ids)) == text
    assert sample.completion_ids == tuple(ids[:kept]) and kept < len(ids)
    assert sample.logprobs == tuple(values[:kept])
