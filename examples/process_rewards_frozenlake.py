"""The paper's training recipes in miniature on text FrozenLake: trajectory-reward GRPO,
BudgetMix, an exact process reward (the oracle's grade of every step) and GiGPO.

Four configurations train the same tiny MLP policy of ``grpo_frozenlake.py`` (it reads the
observation text, answers ``<answer>Left</answer>``) from the same initial weights, with
group-relative advantages and a PPO-style clipped objective:

- ``grpo``: GRPO on the episode's success, every episode T = 8 turns;
- ``budgetmix``: the same, each group's budget drawn from {3, ..., 12} (``BudgetMix``);
- ``oracle_q``: GRPO on the success plus the sum of the steps' ``info["step_reward"]``
  (the oracle's advantage ``Q_t(s, a) - V_t(s)`` of each action), T = 8; ``oracle_q_mean``
  the same with their mean;
- ``gigpo``: GiGPO (episode advantage plus the step advantage over equal states), T = 8.

Each is then measured as the paper measures: Pass@(K,T) on held-out maps over budgets
(``run_pass_at_k_t``, one run per T since the budget is visible), and step quality from
the same states: from every state the untrained policy visits on those maps, 16 moves of
each policy scored by the exact oracle (``Q`` for the turns left) and compared pair by
pair with 16 of the untrained policy's (``compare_scores``), with bootstrap intervals over
maps. The figure (``process_rewards_frozenlake.png``) shows Pass@(1,T) and Pass@(4,T)
against T and the step-quality comparison; ``process_rewards_frozenlake.json`` and
``.md`` hold the numbers.

    python examples/process_rewards_frozenlake.py            # minutes on 2 CPU cores
    python examples/process_rewards_frozenlake.py --quick    # a minute or two, for CI

With a real model: ``--trl --model PATH`` trains the three recipes TRL's ``GRPOTrainer``
takes by one argument of ``for_trl`` (``grpo``; ``budgets=`` for BudgetMix;
``process_reward="sum"`` for the oracle's grades; GiGPO needs advantages per token, which
``GRPOTrainer`` computes itself) and reports Pass@(1,T) over budgets from TRL's own
evaluation (``trainer.evaluate`` on rows of each budget). ``--model tiny`` builds the
2-layer model of ``trl_grpo.py`` from a config (no download), as the CPU test does; a GPU
is used when there is one.

Needs torch and matplotlib (``pip install 'agentenvs[plot]'``); ``--trl`` needs the
``integrations`` extra.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import grpo_frozenlake as base  # noqa: E402 - the policy, collection and training loop

from agentenvs.eval.records import stable_seed  # noqa: E402
from agentenvs.eval.step_quality import compare_scores  # noqa: E402

N_ACTIONS = 16  # moves sampled per policy from each state, as the paper does
CONFIGS: dict[str, dict[str, Any]] = {
    "grpo": {"budgets": (base.FIXED_BUDGET,), "advantage": "grpo"},
    "budgetmix": {"budgets": base.MIX_BUDGETS, "advantage": "grpo"},
    "oracle_q": {"budgets": (base.FIXED_BUDGET,), "advantage": "grpo", "process_weight": 1.0},
    "oracle_q_mean": {"budgets": (base.FIXED_BUDGET,), "advantage": "grpo", "process_weight": 1.0,
                      "process_how": "mean"},
    "gigpo": {"budgets": (base.FIXED_BUDGET,), "advantage": "gigpo"},
}
LABELS = {
    "untrained": "untrained",
    "grpo": f"GRPO, trajectory reward, T={base.FIXED_BUDGET}",
    "budgetmix": "GRPO, BudgetMix T∈{3..12}",
    "oracle_q": "GRPO + oracle-Q process reward (sum)",
    "oracle_q_mean": "GRPO + oracle-Q process reward (mean)",
    "gigpo": "GiGPO (step groups by state)",
}
COLORS = {"untrained": "0.55", "grpo": "#1f77b4", "budgetmix": "#d62728", "oracle_q": "#2ca02c", "oracle_q_mean": "#8c564b",
          "gigpo": "#9467bd", "oracle": "black"}  # fmt: skip


@dataclass
class Size:
    iterations: int
    groups: int
    group_size: int
    eval_tasks: int
    eval_n: int
    budgets: tuple[int, ...]
    n_boot: int


QUICK = Size(iterations=12, groups=6, group_size=6, eval_tasks=6, eval_n=4, budgets=(4, 8, 12), n_boot=200)
FULL = Size(iterations=200, groups=16, group_size=8, eval_tasks=60, eval_n=16, budgets=(4, 6, 8, 10, 12, 16),
            n_boot=1000)  # fmt: skip


# ---------------------------------------------------------------- step quality
def visited_states(tasks: list[str], weights: Path, seed: int) -> list[tuple[str, int, Any, str]]:
    """``(task, turn, snapshot, observation)`` of every state one episode of the policy in
    ``weights`` visits on each map with T = ``FIXED_BUDGET``."""
    policy = base.TrainedPolicy(str(weights))
    env = gym.make(base.ENV_ID, max_turns=base.FIXED_BUDGET, **base.ENV_KWARGS)
    out = []
    for i, task in enumerate(tasks):
        observation, _ = env.reset(seed=stable_seed(seed, "states", i), options={"task_id": task})
        done = False
        while not done:
            out.append((task, env.unwrapped.turn, env.unwrapped.snapshot(), observation))
            action = _sample(policy, observation, 1, stable_seed(seed, "walk", task, len(out)))[0]
            observation, _, terminated, truncated, _ = env.step(action)
            done = terminated or truncated
    env.close()
    return out


def _sample(policy: base.TrainedPolicy, observation: str, n: int, seed: int) -> list[str]:
    from agentenvs.policy.base import Conversation

    conversation = Conversation(messages=[{"role": "user", "content": observation}])
    return policy.sample([conversation], n, seed=seed)[0]


def step_quality(
    states: list[tuple[str, int, Any, str]], weights: dict[str, Path], n_boot: int, seed: int
) -> dict[str, Any]:
    """Per policy: its mean oracle regret ``V - Q`` over ``N_ACTIONS`` sampled moves from
    each state, and against the untrained policy P(better), P(worse) over pairs of moves
    (the paper's "picks the better action"), each with a 95% bootstrap interval over maps."""
    env = gym.make(base.ENV_ID, max_turns=base.FIXED_BUDGET, **base.ENV_KWARGS)
    policies = {name: base.TrainedPolicy(str(path)) for name, path in weights.items()}
    scores: dict[str, list[list[float]]] = {name: [] for name in policies}
    best: list[float] = []
    for number, (_, _, snapshot, observation) in enumerate(states):
        env.unwrapped.restore(snapshot)
        q = env.unwrapped.q_values()
        best.append(float(q.max()))
        for name, policy in policies.items():
            actions = _sample(policy, observation, N_ACTIONS, stable_seed(seed, "sq", number, name))
            scores[name].append([float(env.unwrapped.score_action(a)) for a in actions])
    env.close()
    maps = sorted({task for task, *_ in states})
    of_state = np.array([maps.index(task) for task, *_ in states])
    rng = np.random.default_rng(seed)
    draws = rng.integers(len(maps), size=(n_boot, len(maps)))
    weights_b = np.stack([np.bincount(d, minlength=len(maps))[of_state] for d in draws]).astype(float)

    def with_ci(values: np.ndarray) -> dict[str, float]:
        boot = (weights_b @ values) / np.maximum(weights_b.sum(axis=1), 1e-12)
        low, high = np.percentile(boot, [2.5, 97.5])
        return {"mean": float(values.mean()), "low": float(low), "high": float(high)}

    out: dict[str, Any] = {"states": len(states), "maps": len(maps), "n_actions": N_ACTIONS, "policies": {}}
    for name in policies:
        regret = np.array([b - np.mean(s) for b, s in zip(best, scores[name], strict=True)])
        entry: dict[str, Any] = {"regret": with_ci(regret)}
        if name != "untrained":
            pairs = [compare_scores(s, u) for s, u in zip(scores[name], scores["untrained"], strict=True)]
            entry["better"] = with_ci(np.array([p[0] for p in pairs]))
            entry["worse"] = with_ci(np.array([p[1] for p in pairs]))
            entry["better_of_decided"] = float(
                sum(p[0] for p in pairs) / max(sum(p[0] + p[1] for p in pairs), 1e-12)
            )
        out["policies"][name] = entry
    return out


# ---------------------------------------------------------------- the figure and table
def plot(results: dict[str, Any], path: Path) -> None:
    from agentenvs.core.errors import require

    require("matplotlib", "plot")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    ks, budgets = results["eval"]["ks"], results["eval"]["budgets"]
    shown = [k for k in (1, 4) if k in ks] or [ks[0]]
    fig = Figure(figsize=(13, 4.4), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(shown) + 1, width_ratios=[1] * len(shown) + [1.3])
    names = ["untrained", *CONFIGS]
    for ax, k in zip(axes, shown, strict=False):
        ki = ks.index(k)
        ax.plot(budgets, results["oracle"]["mean"][ki], "--", color=COLORS["oracle"], lw=1, label="oracle (exact)")
        for name in names:
            surf = results["pass_at_k_t"][name]
            ax.plot(budgets, surf["mean"][ki], ":" if name == "untrained" else "-", marker="o", ms=3,
                    color=COLORS[name], label=LABELS[name])
            if name != "untrained" and surf.get("low") is not None:
                ax.fill_between(budgets, surf["low"][ki], surf["high"][ki], color=COLORS[name], alpha=0.12, lw=0)
        ax.axvline(base.FIXED_BUDGET, color="0.7", ls=":", lw=1)
        ax.set_title(f"Pass@({k},T), held-out maps (95% CI bands)", fontsize=9)
        ax.set_xlabel("turn budget T (visible)")
        ax.set_xticks(budgets)
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("Pass@(K,T)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=4, fontsize=7)
    ax = axes[-1]
    sq = results["step_quality"]["policies"]
    trained = list(CONFIGS)
    y = np.arange(len(trained))
    for offset, (metric, label, color) in enumerate(
        (("better", "picks the better move", "#2ca02c"), ("worse", "picks the worse move", "#d62728"))
    ):
        means = [sq[n][metric]["mean"] for n in trained]
        err = [[sq[n][metric]["mean"] - sq[n][metric]["low"] for n in trained],
               [sq[n][metric]["high"] - sq[n][metric]["mean"] for n in trained]]
        ax.barh(y + (offset - 0.5) * 0.38, means, height=0.36, xerr=err, color=color, alpha=0.75, label=label,
                error_kw={"lw": 1})
    ax.set_yticks(y, [LABELS[n] for n in trained], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of move pairs vs the untrained policy (rest: ties)")
    n_states = results["step_quality"]["states"]
    ax.set_title(f"step quality from the same {n_states} states, {N_ACTIONS} moves each", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3, axis="x")
    fig.suptitle("Text FrozenLake 4x4 (slip 0.2), tiny MLP: trajectory GRPO vs BudgetMix vs process rewards",
                 fontsize=10)
    fig.savefig(path, dpi=100)


def _ci(entry: dict[str, float]) -> str:
    return f"{entry['mean']:.3f} [{entry['low']:.3f}, {entry['high']:.3f}]"


def table(results: dict[str, Any]) -> str:
    """The results as markdown: Pass@(1,T) and Pass@(K_max,T) with intervals, then step quality."""
    ks, budgets = results["eval"]["ks"], results["eval"]["budgets"]
    lines = []
    for k in sorted({ks[0], ks[-1]}):
        ki = ks.index(k)
        lines += [f"Pass@({k},T) on {results['eval']['tasks']} held-out maps, n = {results['eval']['n']} "
                  "(95% bootstrap CI):", "",
                  "| policy | " + " | ".join(f"T={t}" for t in budgets) + " |",
                  "|---|" + "---|" * len(budgets)]  # fmt: skip
        for name in ["untrained", *CONFIGS]:
            s = results["pass_at_k_t"][name]
            cells = [f"{s['mean'][ki][j]:.3f}" + (f" [{s['low'][ki][j]:.2f}, {s['high'][ki][j]:.2f}]"
                                                  if s.get("low") is not None else "")
                     for j in range(len(budgets))]  # fmt: skip
            lines.append(f"| {LABELS[name]} | " + " | ".join(cells) + " |")
        oracle = results["oracle"]["mean"][ki]
        lines += ["| oracle (exact) | " + " | ".join(f"{v:.3f}" for v in oracle) + " |", ""]
    sq = results["step_quality"]
    lines += [f"Step quality from the same {sq['states']} states ({sq['maps']} maps, the untrained policy's "
              f"visits at T={base.FIXED_BUDGET}), {sq['n_actions']} moves per policy per state:", "",
              "| policy | mean regret V−Q | P(better than untrained) | P(worse) | better / (better+worse) |",
              "|---|---|---|---|---|"]  # fmt: skip
    for name in ["untrained", *CONFIGS]:
        e = sq["policies"][name]
        if name == "untrained":
            lines.append(f"| {LABELS[name]} | {_ci(e['regret'])} | – | – | – |")
        else:
            lines.append(f"| {LABELS[name]} | {_ci(e['regret'])} | {_ci(e['better'])} | {_ci(e['worse'])} | "
                         f"{e['better_of_decided']:.3f} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- the MLP path
def run_mlp(args: argparse.Namespace, size: Size, log: Any) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    base._register()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(args.seed)
    init = base.PolicyNet().state_dict()
    torch.save(init, out / "untrained.pt")
    weights = {"untrained": out / "untrained.pt"}
    budgets = list(size.budgets)
    tasks = [base.random_id(base.MAP_SIZE, base.MAP_P, base.EVAL_SEED_START + i) for i in range(size.eval_tasks)]
    ks = [k for k in (1, 2, 4, 8, 16) if k <= size.eval_n]
    results: dict[str, Any] = {
        "env": {"id": base.ENV_ID, **base.ENV_KWARGS},
        "eval": {"tasks": len(tasks), "n": size.eval_n, "budgets": budgets, "ks": ks, "mode": "rerun"},
        "size": asdict(size), "quick": bool(args.quick), "train": {}, "pass_at_k_t": {},
    }  # fmt: skip
    for name, spec in CONFIGS.items():
        cfg = base.TrainConfig(name=name, iterations=size.iterations, groups=size.groups,
                               group_size=size.group_size, seed=args.seed, **spec)  # fmt: skip
        log(f"training {name}: {spec}")
        net, stats = base.train(cfg, init, log)
        weights[name] = out / f"{name}.pt"
        torch.save(net.state_dict(), weights[name])
        results["train"][name] = {**asdict(cfg), "seconds": stats["seconds"],
                                  "final_success": float(np.mean(stats["success_per_iteration"][-5:]))}  # fmt: skip
    for name, path in weights.items():
        log(f"Pass@(K,T) of {name}")
        results["pass_at_k_t"][name] = base.evaluate(path, out / f"runs/{name}", tasks, size.eval_n, budgets, ks, 64)
    results["oracle"] = base.oracle_surface(tasks, budgets, ks)
    log("step quality from the untrained policy's states")
    states = visited_states(tasks, weights["untrained"], args.seed)
    results["step_quality"] = step_quality(states, weights, size.n_boot, args.seed)
    return results


# ---------------------------------------------------------------- the TRL path
def run_trl(args: argparse.Namespace, log: Any) -> dict[str, Any]:
    """The three recipes through TRL's GRPOTrainer with a real (or tiny) model."""
    import random
    import tempfile

    import torch
    import trl_grpo
    from trl import GRPOConfig, GRPOTrainer

    from agentenvs.integrations.trl import agentenvs_reward, for_trl

    on_gpu = torch.cuda.is_available()
    budgets = [2, 4, 6] if args.quick else [2, 4, 6, 8, 12]
    env_kwargs = {"size": 4, "p": 0.8, "show_budget": True}
    train_ids = [base.random_id(4, 0.8, s) for s in range(4 if args.quick else 64)]
    eval_ids = [base.random_id(4, 0.8, base.EVAL_SEED_START + i) for i in range(2 if args.quick else 32)]
    recipes = {
        "grpo": {"max_turns": 6},
        "budgetmix": {"budgets": budgets},
        "oracle_q": {"max_turns": 6, "process_reward": "sum"},
    }
    steps = args.trl_steps or (1 if args.quick else 100)
    results: dict[str, Any] = {"trl": True, "model": args.model, "gpu": on_gpu, "steps": steps,
                               "budgets": budgets, "recipes": {}}  # fmt: skip
    for name, recipe in recipes.items():
        setup = for_trl(base.ENV_ID, task_ids=train_ids, seeds=range(2), **recipe, **env_kwargs)
        if args.model == "tiny":
            corpus = [m["content"] for r in setup.rows for m in r["prompt"]]
            corpus += trl_grpo.demonstration(setup, random.Random(1)) * 4
            tokenizer = trl_grpo.build_tokenizer(corpus)
            model = trl_grpo.build_model(tokenizer, args.seed)
            trl_grpo.warm_up(model, tokenizer, setup, 20 if args.quick else 120, args.seed)
        else:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(args.model)
            model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype="auto")
        with tempfile.TemporaryDirectory(prefix="agentenvs-trl-") as tmp:
            config = GRPOConfig(
                output_dir=tmp, max_steps=steps, per_device_train_batch_size=4, num_generations=4,
                per_device_eval_batch_size=4, num_generations_eval=4,
                max_completion_length=64 if args.model == "tiny" else 512,
                learning_rate=5e-5 if args.model == "tiny" else 1e-6,
                logging_steps=1, report_to=[], use_cpu=not on_gpu, bf16=on_gpu, save_strategy="no",
                seed=args.seed, max_tool_calling_iterations=max(budgets), beta=0.0,
            )  # fmt: skip
            trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=config,
                                  train_dataset=setup.dataset, reward_funcs=setup.reward_funcs,
                                  environment_factory=setup.environment_factory)  # fmt: skip
            log(f"TRL {name}: {recipe}, {steps} GRPO steps")
            trainer.train()
            per_budget = {}
            trainer.reward_funcs = [agentenvs_reward]  # evaluated on success alone
            for t in budgets:  # Pass@(1,T): the success rate of TRL's own eval rollouts at T
                evalset = for_trl(base.ENV_ID, task_ids=eval_ids, seeds=range(1), max_turns=t, **env_kwargs)
                metrics = trainer.evaluate(eval_dataset=evalset.dataset)
                per_budget[t] = float(metrics["eval_reward"])
            results["recipes"][name] = {"recipe": {k: v for k, v in recipe.items()}, "steps": trainer.state.global_step,
                                        "eval_reward_per_budget": per_budget}  # fmt: skip
    return results


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small run for CI (a minute or two)")
    parser.add_argument("--out", type=Path, default=Path("out/process_rewards_frozenlake"))
    parser.add_argument("--plot", type=Path, default=None, help="also write the figure here")
    parser.add_argument("--iterations", type=int, default=None, help="override the run size")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trl", action="store_true", help="train through TRL's GRPOTrainer instead")
    parser.add_argument("--model", default="tiny", help="with --trl: a model path, or 'tiny' (built here)")
    parser.add_argument("--trl-steps", type=int, default=None, help="with --trl: GRPO steps per recipe")
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    started = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.trl:
        results = run_trl(args, log)
        results["seconds"] = time.perf_counter() - started
        (args.out / "process_rewards_trl.json").write_text(json.dumps(results, indent=1) + "\n")
        print(json.dumps(results), flush=True)
        return results
    size = QUICK if args.quick else FULL
    if args.iterations:
        size.iterations = args.iterations
    results = run_mlp(args, size, log)
    results["seconds"] = time.perf_counter() - started
    (args.out / "process_rewards_frozenlake.json").write_text(json.dumps(results, indent=1) + "\n")
    markdown = table(results)
    (args.out / "process_rewards_frozenlake.md").write_text(markdown)
    plot(results, args.out / "process_rewards_frozenlake.png")
    if args.plot is not None:
        plot(results, args.plot)
    log(markdown)
    log(f"done in {results['seconds']:.0f} s; wrote {args.out}")
    return results


if __name__ == "__main__":
    main()
