"""GPU check of HFPolicy: sample 16 actions for each of 64 FrozenLake states and score them,
on cuda when there is one, and on the CPU, with throughputs and the cuda/CPU ratio.

    python benchmarks/gpu_check.py [--model PATH] [--states 64] [--samples 16]

Without ``--model`` the tiny random Llama of the tests is built from its config (no
download). The states are those met by rolling out ``frozenlake/oracle`` over seeded
maps (first states and later ones, so histories have different lengths). Without a GPU
it says so and runs the CPU path only. With both, it also reports how far the cuda
scores are from the CPU ones (bf16 on cuda by default, so not bit-equal). Exit status
1 if any check fails (wrong counts, non-finite scores, a seeded call not reproduced).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch

import agentenvs  # noqa: F401 - registers the env ids and policies
from agentenvs.policy.base import Conversation
from agentenvs.policy.hf import HFPolicy
from agentenvs.policy.registry import make_policy

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "policy"))


def oracle_states(count: int) -> list[Conversation]:
    """Conversations at the states an oracle rollout passes through."""
    env = gym.make("agentenvs/FrozenLake-v0")
    oracle = make_policy("frozenlake/oracle")
    states: list[Conversation] = []
    seed = 0
    while len(states) < count:
        observation, info = env.reset(seed=seed)
        conv = Conversation.start(observation, info, env=env.unwrapped)
        done, turn = False, 0
        while not done and len(states) < count:
            states.append(Conversation(messages=[dict(m) for m in conv.messages], tools=conv.tools))
            turn += 1
            (action,) = oracle.sample([conv], 1, seed=seed * 1000 + turn)[0]
            observation, _, terminated, truncated, _ = env.step(action)
            conv.add_turn(action, observation)
            done = terminated or truncated
        seed += 1
    env.close()
    return states


def build(model_path: str | None, device: str, batch_size: int, max_new: int) -> HFPolicy:
    if model_path:
        return HFPolicy(model_path, device=device, max_new_tokens=max_new, batch_size=batch_size)
    from tiny_lm import build_model, build_tokenizer

    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    dtype = "bfloat16" if device == "cuda" else "float32"
    return HFPolicy(
        model, tokenizer, device=device, dtype=dtype, max_new_tokens=max_new, batch_size=batch_size
    )


def run(policy: HFPolicy, states: list[Conversation], samples: int) -> dict[str, Any]:
    policy.sample(states[:2], 2, seed=0)  # warm-up (kernels, allocator)
    sync = torch.cuda.synchronize if policy.device.startswith("cuda") else (lambda: None)
    sync()
    start = time.perf_counter()
    actions = policy.sample(states, samples, seed=1)
    sync()
    sample_s = time.perf_counter() - start
    pairs = [(c, a) for c, acts in zip(states, actions, strict=True) for a in acts]
    start = time.perf_counter()
    scores = policy.score([c for c, _ in pairs], [a for _, a in pairs])
    sync()
    score_s = time.perf_counter() - start
    problems = []
    if [len(a) for a in actions] != [samples] * len(states):
        problems.append("wrong number of samples")
    if not all(math.isfinite(s.total) and s.total <= 0 for s in scores):
        problems.append("non-finite or positive log-probs")
    if policy.sample(states[:4], samples, seed=1) != actions[:4]:
        problems.append("a seeded call was not reproduced")
    return {
        "actions": actions,
        "scores": scores,
        "sampled_per_s": len(pairs) / sample_s,
        "scored_per_s": len(pairs) / score_s,
        "problems": problems,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="model path or name (default: tiny, random)")
    parser.add_argument("--states", type=int, default=64)
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument(
        "--cpu-threads",
        type=int,
        default=None,
        help="torch CPU threads (default: 1 for the tiny model, whose matmuls are too small "
        "to share; torch's own default for a real model)",
    )
    args = parser.parse_args()
    threads = args.cpu_threads or (torch.get_num_threads() if args.model else 1)
    torch.set_num_threads(threads)

    states = oracle_states(args.states)
    lengths = sorted(len(s.messages) for s in states)
    print(f"{len(states)} FrozenLake states from oracle rollouts, {lengths[0]}-{lengths[-1]} messages")
    devices = ["cuda", "cpu"] if torch.cuda.is_available() else ["cpu"]
    if devices == ["cpu"]:
        print("no GPU (torch.cuda.is_available() is False): running the CPU path only")
    else:
        print(f"GPU: {torch.cuda.get_device_name(0)}")
    results = {}
    for device in devices:
        batch = 256 if device == "cuda" else 16
        policy = build(args.model, device, batch, args.max_new_tokens)
        results[device] = out = run(policy, states, args.samples)
        print(
            f"{device:>4} ({policy.model.dtype}, batch {batch}"
            + (f", {threads} threads" if device == "cpu" else "")
            + f"): {args.states} states x "
            f"{args.samples} samples: {out['sampled_per_s']:9.1f} actions sampled/s, "
            f"{out['scored_per_s']:9.1f} actions scored/s"
            + (f"  PROBLEMS: {out['problems']}" if out["problems"] else "")
        )
        del policy
    if "cuda" in results:
        gpu, cpu = results["cuda"], results["cpu"]
        print(
            f"cuda/cpu: sampling {gpu['sampled_per_s'] / cpu['sampled_per_s']:.1f}x, "
            f"scoring {gpu['scored_per_s'] / cpu['scored_per_s']:.1f}x"
        )
        # the CPU's own actions scored on both devices: same tokens, different precision
        pairs = [(c, a) for c, acts in zip(states, cpu["actions"], strict=True) for a in acts][:64]
        on_gpu = build(args.model, "cuda", 64, args.max_new_tokens).score(
            [c for c, _ in pairs], [a for _, a in pairs]
        )
        diffs = [
            abs(g.total - c.total) / max(len(c.token_logprobs), 1)
            for g, c in zip(on_gpu, cpu["scores"][:64], strict=True)
        ]
        print(f"per-token |log p| difference cuda vs cpu: max {max(diffs):.4f}, mean {sum(diffs) / len(diffs):.4f}")
    return 1 if any(r["problems"] for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
