"""The GPU check of the model policies: one model, loaded once, from a local path.

    python benchmarks/gpu_check.py --model /path/to/model [--engine hf|vllm] [--device cuda]

On FrozenLake states met by oracle rollouts (histories of different lengths) it:

1. samples ``--samples`` actions for each of ``--states`` states and reports
   generated tokens/s and actions/s;
2. scores every sampled action (log-probabilities of its tokens, end of turn included)
   and reports scored actions/s and tokens/s;
3. checks that sampling follows the distribution that scoring computes: ``--draws``
   first tokens drawn for one prompt against the probabilities that the scoring path
   gives the 20 most likely tokens (each within 5 standard errors, plus 0.01);
4. checks that a seeded call, repeated with the same batch, gives the same actions, and
   that every score is finite and at most 0;
5. drives ``--conversations`` FrozenLake conversations of ``--turns`` turns token-in,
   token-out (``sample_tokens``, temperature 1): each turn's prompt must start with the
   previous turn's prompt and sampled ids, and the log-probs the engine reports for its
   sampled ids must equal those the HF scoring path gives the same ids (with ``--engine
   vllm``, an HF copy of the model on the same GPU scores what vLLM drew), within the
   tolerances of the device's precision (mean and largest difference per token).

It runs the engine asked for (``hf``: transformers, bf16 on cuda; ``vllm``: one offline
engine, and the HF scorer for check 5) on one device, and stops each phase early when the
``--time-limit`` (default 170 s) would be passed, saying so, so a 0.5B-parameter model
fits in under 3 minutes on one GPU. Without a CUDA device it skips in one line and exit
status 0 (``--device cpu`` runs the HF path on the CPU); it fails clearly, with exit
status 2 and the reason, when it cannot run: no model at the path, or the engine's package
missing. Exit status 1 if a check fails, 0 when all pass.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import gymnasium as gym

import agentenvs  # noqa: F401 - registers the env ids and policies
from agentenvs.policy.base import Conversation
from agentenvs.policy.registry import make_policy


class CannotRun(Exception):
    """The check cannot run here (exit status 2, with the reason)."""


class Skipped(Exception):
    """The check has nothing to run on here: no CUDA device (exit status 0, one line)."""


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


def build(args: argparse.Namespace) -> Any:
    """The one policy of the check, or ``CannotRun`` saying why not."""
    if not os.path.isdir(args.model):
        raise CannotRun(f"no model directory at {args.model!r}: pass a local path (--model)")
    try:
        import torch
    except ImportError as exc:
        raise CannotRun(f"torch is not installed ({exc}): pip install 'agentenvs[hf]'") from exc
    if args.device == "cuda" and not torch.cuda.is_available():
        raise Skipped(
            "no CUDA device (torch.cuda.is_available() is False); this is a GPU check "
            "(--device cpu runs the HF path on the CPU)"
        )
    if args.engine == "vllm":
        if args.device != "cuda":
            raise CannotRun("the vllm engine runs on CUDA only")
        try:
            import vllm  # noqa: F401
        except ImportError as exc:
            raise CannotRun(f"vllm is not installed ({exc}): pip install 'agentenvs[vllm]'") from exc
        return make_policy(
            f"vllm:model={args.model},max_new_tokens={args.max_new_tokens}",
            engine_kwargs={"max_model_len": args.max_model_len, "seed": 0},
        )
    dtype = "bfloat16" if args.device == "cuda" else "float32"
    spec = (f"hf:model={args.model},device={args.device},dtype={dtype},"
            f"max_new_tokens={args.max_new_tokens},batch_size={args.batch_size}")
    return make_policy(spec, **({"threads": args.cpu_threads} if args.cpu_threads else {}))


class Clock:
    """The time left of ``--time-limit``, for phases that stop early rather than overrun."""

    def __init__(self, limit: float) -> None:
        self.deadline = time.perf_counter() + limit

    def left(self) -> float:
        return self.deadline - time.perf_counter()


def _sync(policy: Any) -> None:
    device = str(getattr(policy, "device", ""))
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def _token_count(policy: Any, texts: list[str]) -> int:
    return sum(len(policy.tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts)


def throughput(policy: Any, states: list[Conversation], samples: int, clock: Clock) -> dict[str, Any]:
    """Sample then score, in batches of states, until done or out of time."""
    policy.sample(states[:1], 1, seed=0)  # warm-up: kernels, allocator, engine graphs
    _sync(policy)
    actions: list[list[str]] = []
    sample_s = 0.0
    step = max(1, min(len(states), 16))
    for start in range(0, len(states), step):
        if clock.left() < 90:  # keep time for scoring and the checks
            print(f"  time limit: sampled {len(actions)} of {len(states)} states")
            break
        began = time.perf_counter()
        actions += policy.sample(states[start : start + step], samples, seed=1 + start)
        _sync(policy)
        sample_s += time.perf_counter() - began
    done = states[: len(actions)]
    pairs = [(c, a) for c, acts in zip(done, actions, strict=True) for a in acts]
    scores = []
    score_s = 0.0
    chunk = max(1, samples * 4)
    for start in range(0, len(pairs), chunk):
        if clock.left() < 60:
            print(f"  time limit: scored {len(scores)} of {len(pairs)} actions")
            break
        part = pairs[start : start + chunk]
        began = time.perf_counter()
        scores += policy.score([c for c, _ in part], [a for _, a in part])
        _sync(policy)
        score_s += time.perf_counter() - began
    texts = [a for _, a in pairs]
    sampled_tokens = _token_count(policy, texts)
    scored_tokens = sum(len(s.token_logprobs) for s in scores)
    return {
        "actions": actions,
        "scores": scores,
        "actions_per_s": len(pairs) / sample_s if sample_s else float("nan"),
        "tokens_per_s": sampled_tokens / sample_s if sample_s else float("nan"),
        "scored_actions_per_s": len(scores) / score_s if score_s else float("nan"),
        "scored_tokens_per_s": scored_tokens / score_s if score_s else float("nan"),
    }


def first_token_sampler(policy: Any) -> tuple[Callable[[list[int], int, int], list[Any]], Callable]:
    """(draw n first tokens for a prompt, log-probs of given next tokens by the scoring path)."""
    if hasattr(policy, "llm"):  # vLLM
        from vllm import SamplingParams

        from agentenvs.policy.vllm import NEUTRAL_SAMPLING

        def draw(prompt: list[int], n: int, seed: int) -> list[Any]:
            params = SamplingParams(n=n, max_tokens=1, temperature=1.0, top_p=1.0, seed=seed,
                                    **NEUTRAL_SAMPLING)
            (out,) = policy.llm.generate([{"prompt_token_ids": prompt}], params, use_tqdm=False)
            return [c.token_ids[0] if c.token_ids else "end" for c in out.outputs]

        def scored(prompt: list[int], tokens: list[int]) -> list[float]:
            params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=1)
            outs = policy.llm.generate([{"prompt_token_ids": [*prompt, t]} for t in tokens],
                                       params, use_tqdm=False)
            return [float(o.prompt_logprobs[len(prompt)][t].logprob) for o, t in zip(outs, tokens, strict=True)]

        return draw, scored

    def draw_hf(prompt: list[int], n: int, seed: int) -> list[Any]:
        (gens,) = policy.generate([prompt], n, seed=seed, max_new_tokens=1, temperature=1.0, top_p=1.0)
        return [g.token_ids[0] if g.token_ids else "end" for g in gens]

    def scored_hf(prompt: list[int], tokens: list[int]) -> list[float]:
        values = policy.token_logprobs([[*prompt, t] for t in tokens], [len(prompt)] * len(tokens))
        return [v[0] for v in values]

    return draw_hf, scored_hf


def top_candidates(policy: Any, prompt: list[int], count: int) -> list[int]:
    """The ``count`` most likely next tokens (raw logits), to check draws against."""
    if hasattr(policy, "llm"):
        from vllm import SamplingParams

        params = SamplingParams(max_tokens=1, temperature=0.0, logprobs=count)
        (out,) = policy.llm.generate([{"prompt_token_ids": prompt}], params, use_tqdm=False)
        return list(out.outputs[0].logprobs[0])[:count]
    import torch

    ids = torch.tensor([prompt], device=policy.device)
    with torch.inference_mode():
        logits = policy.model(input_ids=ids).logits[0, -1].float()
    return [int(t) for t in logits.topk(count).indices.tolist()]


def sampling_matches_scoring(policy: Any, state: Conversation, draws: int) -> list[str]:
    """Problems found when comparing ``draws`` first tokens with the scored probabilities."""
    draw, scored = first_token_sampler(policy)
    prompt = policy.formatter.prompt_ids(state)
    candidates = top_candidates(policy, prompt, 20)
    probs = dict(zip(candidates, (math.exp(v) for v in scored(prompt, candidates)), strict=True))
    counts = Counter(draw(prompt, draws, 7))
    problems = []
    for token in sorted(probs, key=probs.get, reverse=True)[:5]:
        p = probs[token]
        seen = counts.get(token, 0) / draws
        allowed = 5 * math.sqrt(p * (1 - p) / draws) + 0.01
        print(f"  token {token!r:>8}: drawn {seen:.4f}, scored {p:.4f}")
        if abs(seen - p) > allowed:
            problems.append(f"token {token}: drawn {seen:.4f} vs scored {p:.4f} (allowed ±{allowed:.4f})")
    outside = 1 - sum(probs.values())
    seen_outside = sum(c for t, c in counts.items() if t not in probs) / draws
    if seen_outside > outside + 5 * math.sqrt(max(outside, 1e-6) / draws) + 0.01:
        problems.append(f"{seen_outside:.4f} of draws outside the 20 most likely tokens "
                        f"(scored mass there {outside:.4f})")
    return problems


def hf_scorer(policy: Any, args: argparse.Namespace) -> Any:
    """What scores sampled ids for check 5: the policy itself on the HF engine, else an HF
    copy of the model on the same device."""
    if not hasattr(policy, "llm"):
        return policy
    return make_policy(f"hf:model={args.model},device={args.device},dtype=bfloat16,"
                       f"batch_size={args.batch_size}")


#: (mean, largest) per-token |sampled - scored| log-prob allowed: float32 on the CPU agrees
#: to rounding; bf16 kernels (a KV-cache decode against a full forward, vLLM's against HF's)
#: move log-probs by a few hundredths
LOGPROB_TOLERANCE = {"cpu": (1e-4, 1e-3), "cuda": (0.05, 0.5)}


def tokens_check(policy: Any, scorer: Any, conversations: int, turns: int, device: str,
                 clock: Clock) -> tuple[dict[str, Any], list[str]]:
    """Token-in/token-out conversations on FrozenLake, then the sampled log-probs against
    the scorer's for the same ids: (figures, problems)."""
    envs = [gym.make("agentenvs/FrozenLake-v0") for _ in range(conversations)]
    convs = []
    for seed, env in enumerate(envs):
        observation, info = env.reset(seed=seed)
        convs.append(Conversation.start(observation, info, env=env.unwrapped))
    problems: list[str] = []
    samples: list[Any] = []
    chained = broken = 0
    live = list(range(conversations))
    for turn in range(1, turns + 1):
        if not live or clock.left() < 15:
            if live:
                print(f"  time limit: {turn - 1} of {turns} turns")
            break
        rows = policy.sample_tokens([convs[i] for i in live], 1, seed=100 + turn)
        still = []
        for i, (sample,) in zip(live, rows, strict=True):
            before = convs[i].last_sample()
            if before is not None:
                context = (*before.prompt_ids, *before.completion_ids)
                if sample.prompt_ids[: len(context)] == context and sample.prompt_from == "tokens":
                    chained += 1
                else:
                    broken += 1
            if not sample.completion_ids or sample.logprobs is None:
                problems.append(f"turn {turn}: a sample without ids or log-probs")
            samples.append(sample)
            observation, _, terminated, truncated, _ = envs[i].step(sample.text)
            convs[i].add_turn(sample.text, observation, sample)
            if not (terminated or truncated):
                still.append(i)
        live = still
    for env in envs:
        env.close()
    if broken:
        problems.append(f"{broken} of {chained + broken} later turns' prompts do not start with "
                        "the previous turn's prompt and sampled ids (not token-in/token-out)")
    scored = [s for s in samples if s.completion_ids and s.logprobs is not None]
    differences: list[float] = []
    for start in range(0, len(scored), 16):
        part = scored[start : start + 16]
        values = scorer.token_logprobs([[*s.prompt_ids, *s.completion_ids] for s in part],
                                       [len(s.prompt_ids) for s in part])
        for sample, row in zip(part, values, strict=True):
            differences += [abs(a - b) for a, b in zip(sample.logprobs, row, strict=True)]
    mean = sum(differences) / len(differences) if differences else float("nan")
    largest = max(differences, default=float("nan"))
    figures = {"turns": len(samples), "chained": chained, "tokens": len(differences),
               "mean": mean, "max": largest, "drifted": sum(s.drift is not None for s in samples)}
    allowed_mean, allowed_max = LOGPROB_TOLERANCE["cpu" if device == "cpu" else "cuda"]
    if not differences:
        problems.append("no sampled log-probs to compare with the scorer's")
    elif mean > allowed_mean or largest > allowed_max:
        problems.append(f"sampled log-probs differ from the scored ones: mean {mean:.2e}, "
                        f"largest {largest:.2e} per token (allowed {allowed_mean:g}, "
                        f"{allowed_max:g})")
    return figures, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a local model directory (weights, tokenizer)")
    parser.add_argument("--engine", choices=("hf", "vllm"), default="hf")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--states", type=int, default=64)
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--draws", type=int, default=2000, help="first tokens drawn for the check")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=64, help="HF sequences per forward pass")
    parser.add_argument("--max-model-len", type=int, default=4096, help="vLLM context length")
    parser.add_argument("--cpu-threads", type=int, default=None, help="torch threads on the CPU")
    parser.add_argument("--conversations", type=int, default=8, help="token-in/token-out conversations")
    parser.add_argument("--turns", type=int, default=4, help="turns of each")
    parser.add_argument("--time-limit", type=float, default=170.0, help="seconds for the whole check")
    args = parser.parse_args(argv)
    clock = Clock(args.time_limit)
    try:
        started = time.perf_counter()
        policy = build(args)
        load_s = time.perf_counter() - started
    except Skipped as exc:
        print(f"gpu_check: skipped: {exc}")
        return 0
    except CannotRun as exc:
        print(f"gpu_check: cannot run: {exc}", file=sys.stderr)
        return 2
    where = args.device
    if args.device == "cuda":
        import torch

        where = f"cuda ({torch.cuda.get_device_name(0)})"
    print(f"{args.engine} engine on {where}: {args.model} loaded in {load_s:.1f} s")
    states = oracle_states(args.states)
    lengths = sorted(len(s.messages) for s in states)
    print(f"{len(states)} FrozenLake states from oracle rollouts, {lengths[0]}-{lengths[-1]} messages")

    problems: list[str] = []
    out = throughput(policy, states, args.samples, clock)
    print(f"sampling: {out['actions_per_s']:.1f} actions/s, {out['tokens_per_s']:.0f} tokens/s "
          f"({args.samples} samples per state, at most {args.max_new_tokens} tokens each)")
    print(f"scoring:  {out['scored_actions_per_s']:.1f} actions/s, "
          f"{out['scored_tokens_per_s']:.0f} tokens/s")
    counts = [len(a) for a in out["actions"]]
    if any(c != args.samples for c in counts):
        problems.append("wrong number of samples")
    if not all(math.isfinite(s.total) and s.total <= 0 for s in out["scores"]):
        problems.append("non-finite or positive log-probs")
    if out["actions"]:
        # the same seeded call with the same batch: kernels see the same shapes
        again = policy.sample(states[: min(16, len(states))], args.samples, seed=1)
        if again != out["actions"][: len(again)]:
            problems.append("a seeded call, repeated with the same batch, gave other actions")
    if clock.left() > 10:
        print(f"sampling against scoring ({args.draws} first tokens of one prompt):")
        problems += sampling_matches_scoring(policy, states[-1], args.draws)
    else:
        problems.append("no time left for the sampling-against-scoring check")
    if clock.left() > 20:
        scorer = hf_scorer(policy, args)
        figures, found = tokens_check(policy, scorer, args.conversations, args.turns,
                                      args.device, clock)
        print(f"token-in/token-out: {figures['turns']} turns, {figures['chained']} later turns "
              f"built from the previous ids ({figures['drifted']} where the template would "
              f"differ); sampled vs scored log-probs over {figures['tokens']} tokens: mean "
              f"{figures['mean']:.2e}, largest {figures['max']:.2e}"
              f"{' (HF scorer)' if scorer is not policy else ''}")
        problems += found
    else:
        problems.append("no time left for the token-in/token-out check")
    total = args.time_limit - clock.left()
    print(f"checks done in {total:.1f} s")
    for problem in problems:
        print(f"PROBLEM: {problem}")
    print("all checks passed" if not problems else f"{len(problems)} check(s) failed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
