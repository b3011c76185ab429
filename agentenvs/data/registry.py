"""Official datasets: where each lives, at which revision, with which checksums, for which env.

An entry is a ``Dataset``: a name, a source pinned to a revision, the env it feeds and the
``tasks_path`` to pass for each of its splits. Three source kinds:

- ``HubDataset``: a dataset repository on the hub at a commit; the file list and each
  file's SHA-256 (its LFS object id; a git blob id for small files) come from the hub's
  tree API at that commit, and any checksum written in the entry must agree with them.
- ``UrlFiles``: plain files at fixed URLs, each with its SHA-256.
- ``GitRepository``: a git repository at a commit (the commit id is the checksum: the
  checkout is refused unless ``HEAD`` is exactly it).

Adding a dataset is one ``register(Dataset(...))`` call, e.g.::

    register(Dataset(
        name="terminal-bench-core",
        description="Terminal-Bench 1.0 tasks",
        source=GitRepository(url="https://github.com/<owner>/<repo>.git", commit="<40 hex>"),
        env_id="agentenvs/TerminalBench-v0",
        splits={"core": "tasks"},
    ))
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from agentenvs.core.errors import AgentEnvsError

_SHA1 = re.compile(r"[0-9a-f]{40}")
_SHA256 = re.compile(r"[0-9a-f]{64}")


class DataError(AgentEnvsError):
    """A dataset that cannot be fetched, verified or found."""


@dataclass(frozen=True)
class HubDataset:
    """Folders of a hub dataset repository at a pinned commit."""

    repo: str
    revision: str
    folders: tuple[str, ...]
    #: checksums known in advance (path -> SHA-256); the hub's own must agree
    sha256: Mapping[str, str] = field(default_factory=dict)
    kind: str = "hub"

    def __post_init__(self) -> None:
        if not _SHA1.fullmatch(self.revision):
            raise ValueError(
                f"{self.repo}: revision must be a full commit id, got {self.revision!r}"
            )
        for path, digest in self.sha256.items():
            if not _SHA256.fullmatch(digest):
                raise ValueError(f"{self.repo}: {path}: not a SHA-256: {digest!r}")


@dataclass(frozen=True)
class RemoteFile:
    path: str
    url: str
    sha256: str


@dataclass(frozen=True)
class UrlFiles:
    """Files at fixed URLs, each with its SHA-256."""

    files: tuple[RemoteFile, ...]
    revision: str = "pinned"
    kind: str = "files"

    def __post_init__(self) -> None:
        for f in self.files:
            if not _SHA256.fullmatch(f.sha256):
                raise ValueError(f"{f.path}: not a SHA-256: {f.sha256!r}")


@dataclass(frozen=True)
class GitRepository:
    """A git repository checked out at one commit."""

    url: str
    commit: str
    kind: str = "git"

    def __post_init__(self) -> None:
        if not _SHA1.fullmatch(self.commit):
            raise ValueError(f"{self.url}: commit must be a full commit id, got {self.commit!r}")

    @property
    def revision(self) -> str:
        return self.commit


Source = HubDataset | UrlFiles | GitRepository


@dataclass(frozen=True)
class Dataset:
    """One official dataset: its pinned source and how an env reads it.

    ``splits`` maps a split name to the ``tasks_path`` inside the dataset's cache folder
    (a file, a folder or a glob pattern) that ``gym.make(env_id, tasks_path=...)`` takes.
    ``download_size``: what fetching all of it downloads, as ``agentenvs data info`` shows
    it before a fetch (``"about 10 GB"``); empty where it is not recorded.
    """

    name: str
    description: str
    source: Source
    env_id: str
    splits: Mapping[str, str]
    homepage: str = ""
    license: str = ""
    download_size: str = ""


DATASETS: dict[str, Dataset] = {}


def register(dataset: Dataset) -> Dataset:
    if dataset.name in DATASETS:
        raise ValueError(f"dataset {dataset.name!r} is already registered")
    DATASETS[dataset.name] = dataset
    return dataset


def get(name: str) -> Dataset:
    try:
        return DATASETS[name]
    except KeyError:
        known = ", ".join(sorted(DATASETS)) or "none"
        raise DataError(f"unknown dataset {name!r}; known: {known}") from None


# ---------------------------------------------------------------------- entries
#: DeepCoder-Preview-Dataset at the commit of its last published change
DEEPCODER_REVISION = "177913a7bd43791646ef6a43645caa3c871ab3db"

register(
    Dataset(
        name="deepcoder-preview",
        description=(
            "DeepCoder-Preview-Dataset: LiveCodeBench v5, TACO, PrimeIntellect (train) and "
            "LiveCodeBench v5, Codeforces (test), in the published parquet shards"
        ),
        source=HubDataset(
            repo="agentica-org/DeepCoder-Preview-Dataset",
            revision=DEEPCODER_REVISION,
            folders=("lcbv5", "taco", "primeintellect", "codeforces"),
            sha256={
                "taco/train-00000-of-00004.parquet": (
                    "6e666b446c9feb6232f29a5c843883caba108398981ea25c3c72f02ebdda7eb6"
                ),
                "taco/train-00001-of-00004.parquet": (
                    "594adb3eaea2b813e1b42ca88890e5bf9e70a64b43d11d27d56554ce4a0bd889"
                ),
                "taco/train-00002-of-00004.parquet": (
                    "b9c8fb5788bc3b80ce31a78b9ef7e57ee1231d1d4c423d157b7a3b9a9901e481"
                ),
                "taco/train-00003-of-00004.parquet": (
                    "920c612796225d328e4291a8c825bea516c170eb16d97c8bab043026686af14b"
                ),
            },
        ),
        env_id="agentenvs/DeepCoderMT-v0",
        splits={
            "lcbv5/train": "lcbv5/train-*.parquet",
            "lcbv5/test": "lcbv5/test-*.parquet",
            "taco/train": "taco/train-*.parquet",
            "primeintellect/train": "primeintellect/train-*.parquet",
            "codeforces/test": "codeforces/test-*.parquet",
        },
        homepage="https://huggingface.co/datasets/agentica-org/DeepCoder-Preview-Dataset",
        license="MIT",
        download_size="about 10 GB",
    )
)

#: Terminal-Bench 1.0 (``terminal-bench-core`` 0.1.1): the commit its registry pins, on the
#: repository's ``dataset/terminal-bench-core/v0.1.x`` branch; TB1 task folders in ``tasks/``
TERMINAL_BENCH_REVISION = "91e10457b5410f16c44364da1a34cb6de8c488a5"
#: Terminal-Bench 2.0: the commit Harbor's registry pins; Harbor task folders at the top
TERMINAL_BENCH_2_REVISION = "69671fbaac6d67a7ef0dfec016cc38a64ef7a77c"

register(
    Dataset(
        name="terminal-bench",
        description=(
            "Terminal-Bench 1.0 (terminal-bench-core 0.1.1): TB1 task folders (task.yaml, "
            "Dockerfile, run-tests.sh, tests/, solution.sh)"
        ),
        source=GitRepository(
            url="https://github.com/laude-institute/terminal-bench.git",
            commit=TERMINAL_BENCH_REVISION,
        ),
        env_id="agentenvs/TerminalBench-v0",
        splits={"core": "tasks"},
        homepage="https://github.com/laude-institute/terminal-bench",
    )
)

register(
    Dataset(
        name="terminal-bench-2",
        description=(
            "Terminal-Bench 2.0: Harbor task folders (task.toml, instruction.md, "
            "environment/, tests/test.sh, solution/)"
        ),
        source=GitRepository(
            url="https://github.com/laude-institute/terminal-bench-2.git",
            commit=TERMINAL_BENCH_2_REVISION,
        ),
        env_id="agentenvs/TerminalBench-v0",
        splits={"all": "."},
        homepage="https://github.com/laude-institute/terminal-bench-2",
    )
)
