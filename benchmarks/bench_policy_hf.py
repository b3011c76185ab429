"""HFPolicy throughput on CPU with the tiny test model: actions sampled and scored per second,
one sequence per forward pass (batch 1) against 16 (batch 16).

64 actions: 4 samples (16 new tokens at most) from each of 16 FrozenLake first states,
then the 64 (state, action) pairs scored, each history+action in full (batch 1 vs 16),
and at batch 16 with the 4 actions of a state sharing one pass over its history. One torch thread (on a small shared machine,
more threads only add synchronisation for a model this size). Each setting runs twice,
interleaved; the best time counts. Batched and one-by-one scores must agree (1e-5).
The model is random, so its texts are garbage; only the speed matters here.

Then conversations of 4, 16 and 64 turns (one conversation, <= 8 new tokens a turn, a
short observation after each), driven token-in/token-out (``conversation="tokens"``,
with and without the drift check) against re-rendering the template every turn
(``"template"``): seconds per conversation and the ratios, in one run, best of 2.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import gymnasium as gym
import torch

import agentenvs  # noqa: F401 - registers the env ids
from agentenvs.policy.base import Conversation
from agentenvs.policy.hf import HFPolicy
from agentenvs.policy.tokens import CONVERSATION_MODES

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "policy"))
from tiny_lm import build_model, build_tokenizer  # noqa: E402

STATES, SAMPLES, NEW_TOKENS, REPEATS = 16, 4, 16, 2


def first_states(count: int) -> list[Conversation]:
    env = gym.make("agentenvs/FrozenLake-v0")
    conversations = []
    for seed in range(count):
        observation, info = env.reset(seed=seed)
        conversations.append(Conversation.start(observation, info))
    env.close()
    return conversations


def main() -> None:
    torch.set_num_threads(1)
    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    states = first_states(STATES)
    policies = {
        size: HFPolicy(
            model, tokenizer, max_new_tokens=NEW_TOKENS, batch_size=size, share_prefix=False
        )
        for size in (1, 16)
    }
    sharing = HFPolicy(model, tokenizer, max_new_tokens=NEW_TOKENS, batch_size=16)
    policies[16].sample(states[:2], 2, seed=0)  # warm-up: first calls pay for lazy set-up
    sample_s: dict[int, list[float]] = {1: [], 16: []}
    score_s: dict[int, list[float]] = {1: [], 16: []}
    shared_s: list[float] = []
    scores = {}
    for _ in range(REPEATS):
        for size, policy in policies.items():
            start = time.perf_counter()
            actions = policy.sample(states, SAMPLES, seed=1)
            sample_s[size].append(time.perf_counter() - start)
            pairs = [(conv, a) for conv, acts in zip(states, actions, strict=True) for a in acts]
            start = time.perf_counter()
            scores[size] = policy.score([c for c, _ in pairs], [a for _, a in pairs])
            score_s[size].append(time.perf_counter() - start)
        start = time.perf_counter()
        scores["shared"] = sharing.score([c for c, _ in pairs], [a for _, a in pairs])
        shared_s.append(time.perf_counter() - start)
    for one, batched, shared in zip(scores[1], scores[16], scores["shared"], strict=True):
        tolerance = 1e-5 * max(1.0, len(one.token_logprobs))
        assert abs(one.total - batched.total) < tolerance
        assert abs(one.total - shared.total) < tolerance
    actions = STATES * SAMPLES
    prompt_len = sum(len(policies[1].formatter.prompt_ids(c)) for c in states) / STATES
    print(
        f"HFPolicy on CPU, tiny Llama ({sum(p.numel() for p in model.parameters())} params), "
        f"{STATES} FrozenLake states (~{prompt_len:.0f}-token prompts) x {SAMPLES} samples, "
        f"<= {NEW_TOKENS} new tokens, 1 torch thread, best of {REPEATS}"
    )
    rate = {}
    for what, times in (("sampled", sample_s), ("scored", score_s)):
        rate[what] = {size: actions / min(t) for size, t in times.items()}
        print(
            f"  actions {what}/s: batch 1 {rate[what][1]:8.1f}   batch 16 {rate[what][16]:8.1f}"
            f"   ratio {rate[what][16] / rate[what][1]:.1f}x"
        )
    shared_rate = actions / min(shared_s)
    print(
        f"  actions scored/s, batch 16, {SAMPLES} actions per history sharing its pass: "
        f"{shared_rate:8.1f}   ({shared_rate / rate['scored'][16]:.1f}x batch 16, "
        f"{shared_rate / rate['scored'][1]:.1f}x batch 1)"
    )

    conversation_modes(model, tokenizer)


def play_turns(policy: HFPolicy, turns: int) -> float:
    """Seconds to sample one conversation of ``turns`` turns."""
    conversation = first_states(1)[0]
    start = time.perf_counter()
    for turn in range(turns):
        (sample,) = policy.sample_tokens([conversation], 1, seed=turn)[0]
        conversation.add_turn(sample.text, f"Turn {turn + 1}: you are at (1, 2).", sample)
    return time.perf_counter() - start


def conversation_modes(model: object, tokenizer: object) -> None:
    modes = {
        "tokens": HFPolicy(model, tokenizer, max_new_tokens=8, conversation="tokens"),
        "tokens, no drift check": HFPolicy(
            model, tokenizer, max_new_tokens=8, conversation="tokens", check_drift=False
        ),
        "template": HFPolicy(model, tokenizer, max_new_tokens=8, conversation="template"),
    }
    assert set(CONVERSATION_MODES) <= set(modes)
    print("  one conversation, <= 8 new tokens a turn: seconds per conversation")
    for turns in (4, 16, 64):
        best = {name: min(play_turns(p, turns) for _ in range(REPEATS)) for name, p in modes.items()}
        template = best["template"]
        cells = "   ".join(
            f"{name} {t:6.2f} s ({template / t:.2f}x)" for name, t in best.items() if name != "template"
        )
        print(f"    {turns:2d} turns: template {template:6.2f} s   {cells}")


if __name__ == "__main__":
    main()
