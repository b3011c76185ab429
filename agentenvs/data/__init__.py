"""Official datasets at pinned revisions: ``agentenvs data fetch|list|info NAME``.

    from agentenvs.data import fetch, tasks_path
    fetch("deepcoder-preview", include=["codeforces/*"])
    env = gym.make("agentenvs/DeepCoderMT-v0",
                   tasks_path=tasks_path("deepcoder-preview", "codeforces/test"))

Entries live in ``agentenvs.data.registry`` (one ``register(Dataset(...))`` each); files are
verified against their checksums and cached under the user's cache dir (see
``agentenvs.data.cache``). Nothing here is imported by ``import agentenvs``.
"""

from __future__ import annotations

from agentenvs.data.cache import (
    CachedDataset,
    cache_root,
    cached,
    fetch,
    find,
    hub_endpoint,
    plan,
    tasks_path,
    verify,
)
from agentenvs.data.registry import (
    DATASETS,
    DataError,
    Dataset,
    GitRepository,
    HubDataset,
    RemoteFile,
    UrlFiles,
    get,
    register,
)

__all__ = [
    "DATASETS",
    "CachedDataset",
    "DataError",
    "Dataset",
    "GitRepository",
    "HubDataset",
    "RemoteFile",
    "UrlFiles",
    "cache_root",
    "cached",
    "fetch",
    "find",
    "get",
    "hub_endpoint",
    "plan",
    "register",
    "tasks_path",
    "verify",
]
