"""Fixtures for the model-policy tests: the tiny model and tokenizer of ``tiny_lm``
(skipped where the ``hf`` extra is missing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def tiny_tokenizer() -> Any:
    # skipped, not failed, where the hf extra is not installed
    for module in ("torch", "transformers", "tokenizers"):
        pytest.importorskip(module)
    from tiny_lm import build_tokenizer

    return build_tokenizer()


@pytest.fixture(scope="session")
def tiny_model(tiny_tokenizer: Any) -> Any:
    from tiny_lm import build_model

    return build_model(tiny_tokenizer)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory, tiny_model: Any, tiny_tokenizer: Any) -> Path:
    path = tmp_path_factory.mktemp("tiny-llama")
    tiny_model.save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def hf_policy(tiny_model: Any, tiny_tokenizer: Any) -> Any:
    from agentenvs.policy.hf import HFPolicy

    return HFPolicy(tiny_model, tiny_tokenizer, max_new_tokens=12, batch_size=4)


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread() -> Any:
    """One intra-op thread: for a model this small, synchronising threads costs far more
    than the matmuls (20x slower on a busy 2-core machine)."""
    try:
        import torch
    except ImportError:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
