"""``agentenvs likelihood`` scores recorded token ids as sampled, and text otherwise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentenvs.eval.records import read_records, read_step_tokens, read_trajectories

pytest.importorskip("torch")


def run(model_dir: Path, out: Path, *extra: str) -> None:
    from agentenvs.cli import main

    code = main(
        [
            "eval",
            "--env",
            "agentenvs/FrozenLake-v0",
            "--policy",
            f"hf:model={model_dir},max_new_tokens=8",
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
            *extra,
        ]
    )
    assert code == 0


def test_recorded_tokens_are_scored_as_sampled(
    tiny_model_dir: Path, tmp_path: Path, capsys: Any
) -> None:
    from agentenvs.eval.likelihood import LikelihoodConfig, run_likelihood, summary_markdown

    run(tiny_model_dir, tmp_path / "tokens", "--record-tokens")
    run(tiny_model_dir, tmp_path / "text")
    assert "token-built prompts" in capsys.readouterr().out
    spec = f"hf:model={tiny_model_dir}"
    for name, way in (("tokens", "tokens"), ("text", "text")):
        config = LikelihoodConfig([str(tmp_path / name)], spec)
        result = run_likelihood(config, tmp_path / f"scored-{name}", progress=False, plots=False)
        results = read_records(tmp_path / f"scored-{name}" / "results.jsonl")
        assert results and all(r["scored_on_a"] == way for r in results)
        assert result.summary["scored_on"]["a"][way] == len(results)
        said = (
            f"{len(results)} trajectories on their recorded token ids"
            if way == "tokens"
            else f"{len(results)} on re-tokenized text"
        )
        assert said in summary_markdown(result.summary)
    # scored on tokens, each action's log-prob is the sampler's (temperature 1)
    records = {
        (r["task_id"], r["sample"]): r
        for r in read_trajectories(tmp_path / "tokens" / "trajectories.jsonl")
    }
    for result in read_records(tmp_path / "scored-tokens" / "results.jsonl"):
        steps = read_step_tokens(records[(result["task_id"], result["sample"])])
        sampled = [sum(s.logprobs) for s in steps if s is not None and s.logprobs]
        assert result["logp_a"] == pytest.approx(sampled, abs=1e-3)
