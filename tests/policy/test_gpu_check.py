"""``benchmarks/gpu_check.py`` on the CPU with the tiny model saved to a directory: every
part of it that does not need a GPU (the HF path, throughput, the sampling-against-scoring
check, the token-in/token-out check with sampled against scored log-probs, the one-line
skip without a GPU and the clear failures when it cannot run)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.py"


@pytest.fixture(scope="module")
def gpu_check() -> Any:
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def small(model_dir: Path, *extra: str) -> list[str]:
    return ["--model", str(model_dir), "--device", "cpu", "--states", "6", "--samples", "4",
            "--draws", "1500", "--max-new-tokens", "8", "--cpu-threads", "1",
            "--conversations", "3", "--turns", "3", *extra]


def test_the_hf_path_runs_and_reports_on_the_cpu(gpu_check: Any, tiny_model_dir: Path,
                                                capsys: Any) -> None:
    assert gpu_check.main(small(tiny_model_dir)) == 0
    out = capsys.readouterr().out
    assert "hf engine on cpu" in out and "loaded in" in out
    assert "sampling:" in out and "actions/s" in out and "tokens/s" in out
    assert "scoring:" in out and "sampling against scoring (1500 first tokens" in out
    assert "token-in/token-out: " in out and "sampled vs scored log-probs over" in out
    assert "all checks passed" in out


def test_logprobs_that_are_not_the_sampled_ones_are_caught(
    gpu_check: Any, tiny_model_dir: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sampler that draws from the right distribution but reports other log-probs (as an
    engine reporting them before a temperature would) passes the draw check and fails the
    token check."""
    import agentenvs.policy.hf as hf

    honest = hf.sample_next_tokens

    def misreported(logits: Any, generators: Any, temperature: float, top_p: float,
                    **kwargs: Any) -> Any:
        out = honest(logits, generators, temperature, top_p, **kwargs)
        if not kwargs.get("with_logprobs"):
            return out
        chosen, logprobs = out
        return chosen, logprobs - 0.01

    monkeypatch.setattr(hf, "sample_next_tokens", misreported)
    assert gpu_check.main(small(tiny_model_dir)) == 1
    out = capsys.readouterr().out
    assert "PROBLEM: sampled log-probs differ from the scored ones" in out
    assert "PROBLEM: token" not in out  # the draws themselves are honest


def test_prompts_rendered_anew_each_turn_are_caught(
    gpu_check: Any, tiny_model_dir: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentenvs.policy.tokens import TurnPrompts

    monkeypatch.setattr(TurnPrompts, "_chained", lambda self, conversation: None)
    assert gpu_check.main(small(tiny_model_dir)) == 1
    out = capsys.readouterr().out
    assert "do not start with the previous turn's prompt and sampled ids" in out


def test_sampling_that_strays_from_scoring_is_caught(
    gpu_check: Any, tiny_model_dir: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sampler that sharpens the distribution (as a hidden temperature or penalty
    would) fails the check."""
    import agentenvs.policy.hf as hf

    honest = hf.sample_next_tokens

    def sharpened(
        logits: Any, generators: Any, temperature: float, top_p: float, **kwargs: Any
    ) -> Any:
        return honest(logits * 2.0, generators, temperature, top_p, **kwargs)

    monkeypatch.setattr(hf, "sample_next_tokens", sharpened)
    assert gpu_check.main(small(tiny_model_dir)) == 1
    out = capsys.readouterr().out
    assert "PROBLEM: token" in out and "vs scored" in out


def test_it_says_why_it_cannot_run(gpu_check: Any, tiny_model_dir: Path, tmp_path: Path,
                                   capsys: Any) -> None:

    assert gpu_check.main(["--model", str(tmp_path / "nothing")]) == 2
    assert "no model directory" in capsys.readouterr().err
    assert gpu_check.main(["--model", str(tiny_model_dir), "--engine", "vllm", "--device", "cpu"]) == 2
    assert "vllm engine runs on CUDA only" in capsys.readouterr().err


def test_without_a_gpu_it_skips_in_one_line(tiny_model_dir: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device: the check runs rather than skips")
    began = time.perf_counter()
    done = subprocess.run([sys.executable, str(SCRIPT), "--model", str(tiny_model_dir)],
                          capture_output=True, text=True, timeout=240)
    took = time.perf_counter() - began
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu_check: skipped: no CUDA device"), lines
    print(f"gpu_check without a GPU: skipped in {took:.1f} s")
