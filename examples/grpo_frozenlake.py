"""GRPO on text FrozenLake with a tiny torch policy: a fixed turn budget vs BudgetMix.

An example of plugging agentenvs into a trainer, not a claim about LLMs. The policy is a
small MLP that reads only the observation *text* (it parses the grid and the "[N turns
left]" line out of it) and answers with text (``<answer>Left</answer>``), so it meets the
env exactly where an LLM would. Training samples groups of K rollouts with ``GroupEnv``
(one task, one seed, one budget per group) and updates with group-relative advantages from
``agentenvs.eval.advantages`` (GiGPO by default: episode-level GRPO plus step-level
advantages over states shared within the group; ``--advantage grpo`` for plain GRPO) and
a PPO-style clipped objective without a KL term.

Two configurations are trained from the same initial weights:

- ``fixed``: every episode has T = 8 turns;
- ``budgetmix``: ``BudgetMix`` draws each group's budget from {3, ..., 12}.

The budget is shown to the agent (``show_budget=True``), so a policy can depend on it and
Pass@(K,T) must be measured with a separate run per budget (the runner's ``rerun``
mode). Both trained policies (and the untrained one) are then evaluated on held-out maps
with ``run_pass_at_k_t`` in this process; the exact oracle gives the best Pass@(K,T) any
policy can reach on the same tasks (``1 - (1 - V_T)^K`` per task).

Outputs under ``--out`` (default ``out/grpo_frozenlake``): the weights (``*.pt``), the
runner's run directories, ``grpo_frozenlake.json`` (training curves, Pass@(K,T) with
bootstrap CIs per configuration, the oracle) and ``grpo_frozenlake.png`` (Pass@(K,T)
against T for K = 1 and K = 4). ``--plot PATH`` writes the figure elsewhere too.

    python examples/grpo_frozenlake.py            # a few minutes on 2 CPU cores
    python examples/grpo_frozenlake.py --quick    # under a minute, for CI

Needs torch (``pip install torch``) and matplotlib (``pip install 'agentenvs[plot]'``).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

import agentenvs  # noqa: F401 - registers the env ids
from agentenvs.envs.frozenlake.maps import random_id
from agentenvs.eval.advantages import Trajectory, gigpo_advantages, grpo_advantages
from agentenvs.eval.records import stable_seed
from agentenvs.eval.report import load_run, run_surface
from agentenvs.eval.runner import EvalConfig, run_pass_at_k_t
from agentenvs.integrations.process import process_return, step_rewards
from agentenvs.policy.base import Conversation
from agentenvs.policy.registry import register_policy
from agentenvs.wrappers import BudgetMix
from agentenvs.wrappers.group import GroupEnv

ENV_ID = "agentenvs/FrozenLake-v0"
#: 4x4 seeded solvable maps, moves go the intended way with probability 0.8
ENV_KWARGS: dict[str, Any] = {"size": 4, "p": 0.8, "success_rate": 0.8, "show_budget": True}
MAP_SIZE, MAP_P = 4, 0.8
TRAIN_SEEDS = range(0, 5000)  # training maps; evaluation maps come from EVAL_SEED_START on
EVAL_SEED_START = 9000
FIXED_BUDGET = 8
MIX_BUDGETS = tuple(range(3, 13))
MOVES = ("Left", "Down", "Right", "Up")
POLICY_NAME = "examples/grpo-frozenlake"

# ---------------------------------------------------------------- reading the text
GRID_CHARS = frozenset("P_OGX√")
VIEW = 3  # the policy sees cells up to 3 away in each direction (7x7 around the player)
MAX_TURNS_FEATURE = 16  # "N turns left" as a one-hot over 1..16 (larger N reads as 16)
N_FEATURES = (2 * VIEW + 1) ** 2 * 3 + MAX_TURNS_FEATURE
_TURNS_LEFT = re.compile(r"\[(\d+) turns? left\]\s*$")


def features(observation: str) -> np.ndarray:
    """The policy's input, from the observation text alone.

    The grid is the last block of lines made only of grid symbols; around the player it
    becomes three 7x7 planes (hole, goal, off the map), plus the one-hot turns left when
    the env shows it.
    """
    lines = observation.rstrip().split("\n")
    turns_left = 0
    if lines and (match := _TURNS_LEFT.search(lines[-1])):
        turns_left = int(match.group(1))
        lines = lines[:-1]
    grid: list[str] = []
    for line in reversed(lines):
        if line and set(line) <= GRID_CHARS:
            grid.append(line)
        elif grid:
            break
    grid.reverse()
    out = np.zeros(N_FEATURES, dtype=np.float32)
    if turns_left:
        out[-MAX_TURNS_FEATURE + min(turns_left, MAX_TURNS_FEATURE) - 1] = 1.0
    player = next(((r, c) for r, row in enumerate(grid) for c, ch in enumerate(row) if ch in "PX√"), None)
    if player is None:  # no grid in the text: the turns-left feature is all there is
        return out
    side = 2 * VIEW + 1
    planes = out[: side * side * 3].reshape(3, side, side)
    for dr in range(-VIEW, VIEW + 1):
        for dc in range(-VIEW, VIEW + 1):
            r, c = player[0] + dr, player[1] + dc
            if not (0 <= r < len(grid) and 0 <= c < len(grid[r])):
                planes[2, dr + VIEW, dc + VIEW] = 1.0
            elif grid[r][c] == "O":
                planes[0, dr + VIEW, dc + VIEW] = 1.0
            elif grid[r][c] == "G":
                planes[1, dr + VIEW, dc + VIEW] = 1.0
    return out


def action_text(move: int) -> str:
    return f"<answer>{MOVES[move]}</answer>"


class PolicyNet(nn.Module):
    """Features of the observation text -> logits of the four moves."""

    def __init__(self, hidden: int = 64) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(N_FEATURES, hidden), nn.Tanh(), nn.Linear(hidden, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


# ---------------------------------------------------------------- the policy for the runner
class TrainedPolicy:
    """The trained net behind the ``Policy`` protocol: text in, sampled text moves out."""

    name = POLICY_NAME

    def __init__(self, weights: str, hidden: int = 64) -> None:
        self.net = PolicyNet(hidden)
        self.net.load_state_dict(torch.load(weights, weights_only=True))
        self.net.eval()

    def sample(
        self, conversations: Sequence[Conversation], n: int = 1, *, seed: int | None = None
    ) -> list[list[str]]:
        x = torch.from_numpy(np.stack([features(c.messages[-1]["content"]) for c in conversations]))
        with torch.no_grad():
            probs = torch.softmax(self.net(x), dim=-1).double().numpy()
        rng = np.random.default_rng(seed)
        return [[action_text(int(m)) for m in rng.choice(4, size=n, p=p / p.sum())] for p in probs]


def _register() -> None:
    # the runner builds policies from a spec string; point it at this file's class
    module = Path(__file__).stem if __name__ == "__main__" else __name__
    if str(Path(__file__).resolve().parent) not in sys.path:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
    register_policy(POLICY_NAME, f"{module}:TrainedPolicy")


# ---------------------------------------------------------------- training
@dataclass
class TrainConfig:
    name: str
    budgets: tuple[int, ...]  # one budget: fixed; several: BudgetMix over them
    iterations: int
    groups: int  # groups (tasks) per iteration
    group_size: int  # K rollouts per group
    advantage: str = "gigpo"
    step_weight: float = 1.0
    #: > 0: each episode's return gains this times the sum (or mean: ``process_how``) of its
    #: steps' oracle grades (``info["step_reward"]``), as TRL's ``process_reward=`` gives it
    process_weight: float = 0.0
    process_how: str = "sum"
    gamma: float = 0.95
    lr: float = 3e-3
    epochs: int = 2
    clip: float = 0.2
    entropy: float = 0.01
    hidden: int = 64
    seed: int = 0


def make_factory(budgets: Sequence[int]) -> Callable[[], gym.Env]:
    if len(budgets) == 1:
        return lambda: gym.make(ENV_ID, max_turns=budgets[0], **ENV_KWARGS)
    return lambda: BudgetMix(gym.make(ENV_ID, max_turns=max(budgets), **ENV_KWARGS), budgets=budgets)


def collect(
    net: PolicyNet, envs: list[GroupEnv], iteration: int, cfg: TrainConfig, rng: np.random.Generator
) -> tuple[list[list[Trajectory]], list[list[tuple[list[np.ndarray], list[int], list[float]]]]]:
    """One group per env, all stepped in lockstep so the net sees one batch per turn."""
    pending: dict[tuple[int, str], Any] = {}
    history: dict[tuple[int, str], dict[str, list]] = {}
    for g, env in enumerate(envs):
        task = random_id(MAP_SIZE, MAP_P, int(rng.choice(TRAIN_SEEDS)))
        obs, infos = env.reset(seed=stable_seed(cfg.seed, iteration, g), options={"task_id": task})
        for agent in env.agents:
            history[(g, agent)] = {"x": [], "a": [], "logp": [], "r": [], "infos": [infos[agent]]}
            pending[(g, agent)] = obs[agent]
    while pending:
        keys = list(pending)
        x = np.stack([features(pending[k]) for k in keys])
        with torch.no_grad():
            logp_all = torch.log_softmax(net(torch.from_numpy(x)), dim=-1).double().numpy()
        u = rng.random(len(keys))[:, None]
        moves = (u > np.cumsum(np.exp(logp_all), axis=1)).sum(axis=1).clip(0, 3)
        actions: dict[int, dict[str, str]] = {}
        for row, (g, agent) in enumerate(keys):
            h = history[(g, agent)]
            h["x"].append(x[row])
            h["a"].append(int(moves[row]))
            h["logp"].append(float(logp_all[row, moves[row]]))
            actions.setdefault(g, {})[agent] = action_text(int(moves[row]))
        pending = {}
        for g, group_actions in actions.items():
            obs, rewards, _, _, infos = envs[g].step(group_actions)
            for agent in group_actions:
                h = history[(g, agent)]
                h["r"].append(rewards[agent])
                h["infos"].append(infos[agent])
            for agent in envs[g].agents:  # still live
                pending[(g, agent)] = obs[agent]
    groups: list[list[Trajectory]] = []
    samples: list[list[tuple[list[np.ndarray], list[int], list[float]]]] = []
    for g, env in enumerate(envs):
        hs = [history[(g, agent)] for agent in env.possible_agents]
        groups.append([
            Trajectory.from_steps(
                h["infos"][0], h["infos"][1:], h["r"],
                process_return(sum(h["r"]), step_rewards(h["infos"][1:]), how=cfg.process_how,
                               weight=cfg.process_weight)
                if cfg.process_weight else None,
            )
            for h in hs
        ])
        samples.append([(h["x"], h["a"], h["logp"]) for h in hs])
    return groups, samples


def train(cfg: TrainConfig, init: dict[str, torch.Tensor], log: Callable[[str], None]) -> tuple[PolicyNet, dict[str, Any]]:
    torch.manual_seed(cfg.seed)
    net = PolicyNet(cfg.hidden)
    net.load_state_dict(init)
    optimizer = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    rng = np.random.default_rng(stable_seed("train", cfg.name, cfg.seed))
    factory = make_factory(cfg.budgets)
    envs = [GroupEnv(factory, group_size=cfg.group_size) for _ in range(cfg.groups)]
    curve: list[float] = []
    started = time.perf_counter()
    try:
        for iteration in range(cfg.iterations):
            groups, samples = collect(net, envs, iteration, cfg, rng)
            curve.append(float(np.mean([t.episode_return for g in groups for t in g])))
            xs, acts, old, advs = [], [], [], []
            for group, group_samples in zip(groups, samples, strict=True):
                if cfg.advantage == "gigpo":
                    adv = gigpo_advantages(group, step_weight=cfg.step_weight, gamma=cfg.gamma)
                else:
                    adv = grpo_advantages(group)
                for (x, a, logp), traj_adv in zip(group_samples, adv, strict=True):
                    xs += x
                    acts += a
                    old += logp
                    advs.append(traj_adv)
            x_t = torch.from_numpy(np.stack(xs))
            a_t = torch.tensor(acts)
            old_t = torch.tensor(old, dtype=torch.float32)
            adv_t = torch.from_numpy(np.concatenate(advs)).float()
            for _ in range(cfg.epochs):
                logp_all = torch.log_softmax(net(x_t), dim=-1)
                logp = logp_all.gather(1, a_t[:, None]).squeeze(1)
                ratio = torch.exp(logp - old_t)
                clipped = torch.clamp(ratio, 1 - cfg.clip, 1 + cfg.clip)
                # mean over every step of every trajectory (a token-level mean for one-token actions)
                surrogate = torch.minimum(ratio * adv_t, clipped * adv_t).mean()
                entropy = -(logp_all.exp() * logp_all).sum(-1).mean()
                loss = -(surrogate + cfg.entropy * entropy)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            if (iteration + 1) % max(1, cfg.iterations // 5) == 0:
                recent = float(np.mean(curve[-max(1, cfg.iterations // 10) :]))
                log(f"  {cfg.name}: iteration {iteration + 1}/{cfg.iterations}, mean success {recent:.3f}")
    finally:
        for env in envs:
            env.close()
    return net, {"success_per_iteration": curve, "seconds": time.perf_counter() - started}


# ---------------------------------------------------------------- evaluation
def evaluate(
    weights: Path, run_dir: Path, tasks: list[str], n: int, budgets: list[int], ks: list[int], hidden: int
) -> dict[str, Any]:
    config = EvalConfig(
        env_id=ENV_ID,
        policy=f"{POLICY_NAME}:weights={weights},hidden={hidden}",
        task_ids=tasks,
        n=n,
        budgets=budgets,
        mode="rerun",  # the budget is visible: one run per T
        seed=1,
        env_kwargs=ENV_KWARGS,
    )
    started = time.perf_counter()
    # the runner resumes a run dir with the same config, and the spec names the weights
    # file, not its contents: start afresh so retrained weights are never skipped
    shutil.rmtree(run_dir, ignore_errors=True)
    run_pass_at_k_t(config, run_dir, workers=0, progress=False)
    surface = run_surface(load_run(run_dir), ks=ks, n_boot=500, seed=0)
    return {**surface.to_dict(), "seconds": time.perf_counter() - started, "run_dir": str(run_dir)}


def oracle_surface(tasks: list[str], budgets: list[int], ks: list[int]) -> dict[str, Any]:
    """The best Pass@(K,T) of any policy: ``1 - (1 - V_T(start))^K``, averaged over tasks."""
    env = gym.make(ENV_ID, **ENV_KWARGS)
    values = np.zeros((len(tasks), len(budgets)))
    for i, task in enumerate(tasks):
        env.reset(options={"task_id": task})
        for j, t in enumerate(budgets):
            values[i, j] = env.unwrapped.optimal_success_probability(t, from_start=True)
    env.close()
    mean = [[float(np.mean(1 - (1 - values[:, j]) ** k)) for j in range(len(budgets))] for k in ks]
    return {"ks": ks, "budgets": budgets, "mean": mean}


# ---------------------------------------------------------------- the figure
LABELS = {"fixed": f"GRPO, fixed T={FIXED_BUDGET}", "budgetmix": "GRPO, BudgetMix T∈{3..12}"}
COLORS = {"fixed": "#1f77b4", "budgetmix": "#d62728", "untrained": "0.55", "oracle": "black"}


def plot(results: dict[str, Any], path: Path) -> None:
    from agentenvs.core.errors import require

    require("matplotlib", "plot")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    ks = results["eval"]["ks"]
    shown = [1, 4] if 4 in ks else [ks[0], ks[-1]]  # larger K saturates near 1 on these maps
    fig = Figure(figsize=(9, 3.6), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 2, sharey=True)
    for ax, k in zip(axes, shown, strict=True):
        ki = ks.index(k)
        budgets = results["eval"]["budgets"]
        ax.axvspan(min(MIX_BUDGETS), max(MIX_BUDGETS), color=COLORS["budgetmix"], alpha=0.06, lw=0,
                   label="BudgetMix training budgets")
        ax.axvline(FIXED_BUDGET, color=COLORS["fixed"], ls=":", lw=1, label="fixed training budget")
        oracle = results["oracle"]["mean"][ki]
        ax.plot(budgets, oracle, "--", color=COLORS["oracle"], lw=1, label="oracle (exact)")
        for name, style in (("untrained", ":"), ("fixed", "-"), ("budgetmix", "-")):
            surf = results["untrained"] if name == "untrained" else results["configs"][name]["pass_at_k_t"]
            label = "untrained" if name == "untrained" else LABELS[name]
            ax.plot(budgets, surf["mean"][ki], style, marker="o", ms=3, color=COLORS[name], label=label)
            if name != "untrained" and surf.get("low") is not None:
                ax.fill_between(budgets, surf["low"][ki], surf["high"][ki], color=COLORS[name], alpha=0.15, lw=0)
        ax.set_title(f"Pass@({k},T)", fontsize=10)
        ax.set_xlabel("turn budget T (visible to the agent)")
        ax.set_xticks(budgets)
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("Pass@(K,T) on held-out maps")
    axes[0].legend(fontsize=7, loc="lower right")
    fig.suptitle("Text FrozenLake 4x4 (slip 0.2), tiny MLP policy trained with GRPO/GiGPO", fontsize=10)
    fig.savefig(path, dpi=100)


# ---------------------------------------------------------------- main
@dataclass
class Size:
    iterations: int
    groups: int
    group_size: int
    eval_tasks: int
    eval_n: int


QUICK = Size(iterations=40, groups=8, group_size=8, eval_tasks=16, eval_n=8)
FULL = Size(iterations=300, groups=16, group_size=8, eval_tasks=100, eval_n=16)
EVAL_BUDGETS = [4, 6, 7, 8, 10, 12, 16]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small run for CI (< 1 minute)")
    parser.add_argument("--out", type=Path, default=Path("out/grpo_frozenlake"))
    parser.add_argument("--plot", type=Path, default=None, help="also write the figure here")
    parser.add_argument("--advantage", choices=("gigpo", "grpo"), default="gigpo")
    parser.add_argument("--iterations", type=int, default=None, help="override the run size")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    torch.set_num_threads(1)  # a 64-unit MLP: threads cost more than they give
    _register()
    size = QUICK if args.quick else FULL
    iterations = args.iterations or size.iterations
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    started = time.perf_counter()
    torch.manual_seed(args.seed)
    init = PolicyNet().state_dict()
    torch.save(init, out / "untrained.pt")
    configs = {
        "fixed": (FIXED_BUDGET,),
        "budgetmix": MIX_BUDGETS,
    }
    tasks = [random_id(MAP_SIZE, MAP_P, EVAL_SEED_START + i) for i in range(size.eval_tasks)]
    ks = [k for k in (1, 2, 4, 8, 16) if k <= size.eval_n]
    results: dict[str, Any] = {
        "note": (
            "A tiny MLP on a featurization of the observation text, trained with GRPO-style "
            "group advantages on text FrozenLake: an example of plugging agentenvs into a "
            "trainer, not a claim about LLMs."
        ),
        "env": {"id": ENV_ID, **ENV_KWARGS, "train_maps": f"seeds {TRAIN_SEEDS.start}..{TRAIN_SEEDS.stop - 1}"},
        "eval": {"tasks": len(tasks), "n": size.eval_n, "budgets": EVAL_BUDGETS, "ks": ks,
                 "mode": "rerun", "maps": f"seeds {EVAL_SEED_START}..{EVAL_SEED_START + len(tasks) - 1}"},
        "quick": bool(args.quick),
        "configs": {},
    }
    for name, budgets in configs.items():
        cfg = TrainConfig(
            name=name, budgets=budgets, iterations=iterations, groups=size.groups,
            group_size=size.group_size, advantage=args.advantage, seed=args.seed,
        )
        log(f"training {name} (budgets {list(budgets)}), {iterations} iterations")
        net, stats = train(cfg, init, log)
        weights = out / f"{name}.pt"
        torch.save(net.state_dict(), weights)
        log(f"evaluating {name}")
        surface = evaluate(weights, out / f"runs/{name}", tasks, size.eval_n, EVAL_BUDGETS, ks, cfg.hidden)
        results["configs"][name] = {
            "label": LABELS[name], "train": {**asdict(cfg), **stats}, "pass_at_k_t": surface,
        }
    log("evaluating the untrained policy and the oracle")
    results["untrained"] = evaluate(out / "untrained.pt", out / "runs/untrained", tasks, size.eval_n, EVAL_BUDGETS, ks, 64)
    results["oracle"] = oracle_surface(tasks, EVAL_BUDGETS, ks)
    results["seconds"] = time.perf_counter() - started
    (out / "grpo_frozenlake.json").write_text(json.dumps(results, indent=1) + "\n")
    plot(results, out / "grpo_frozenlake.png")
    if args.plot is not None:
        plot(results, args.plot)
    for k in sorted({ks[0], 4 if 4 in ks else ks[-1], ks[-1]}):
        ki = ks.index(k)
        log(f"Pass@({k},T) for T = {EVAL_BUDGETS}")
        for name in ("fixed", "budgetmix"):
            row = results["configs"][name]["pass_at_k_t"]["mean"][ki]
            log(f"  {name:10s} " + " ".join(f"{v:.2f}" for v in row))
        log(f"  {'untrained':10s} " + " ".join(f"{v:.2f}" for v in results["untrained"]["mean"][ki]))
        log(f"  {'oracle':10s} " + " ".join(f"{v:.2f}" for v in results["oracle"]["mean"][ki]))
    log(f"done in {results['seconds']:.0f} s; wrote {out / 'grpo_frozenlake.json'} and the figure")
    return results


if __name__ == "__main__":
    main()
