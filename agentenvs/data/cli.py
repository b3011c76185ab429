"""``agentenvs data fetch|list|info|verify``: the command-line face of ``agentenvs.data``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agentenvs.data import cache as _fetch
from agentenvs.data.registry import DATASETS, Dataset, GitRepository, HubDataset, get


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    data = sub.add_parser("data", help="fetch, list and describe official datasets")
    data.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="cache folder (default: $AGENTENVS_DATA_DIR or ~/.cache/agentenvs/data)",
    )
    verbs = data.add_subparsers(dest="data_command", required=True, metavar="VERB")
    fetch = verbs.add_parser(
        "fetch", help="download a dataset at its pinned revision and verify it"
    )
    fetch.add_argument("name")
    fetch.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="PATTERN",
        help="only files matching PATTERN (a folder or a glob; repeatable)",
    )
    fetch.add_argument("--force", action="store_true", help="download again even if cached")
    verbs.add_parser("list", help="the registered datasets and what is cached")
    info = verbs.add_parser("info", help="a dataset's source, files and how an env reads it")
    info.add_argument("name")
    verify = verbs.add_parser("verify", help="re-hash a cached dataset against its manifest")
    verify.add_argument("name")


def run(args: argparse.Namespace) -> int:
    root = args.cache_dir
    verb = args.data_command
    if verb == "fetch":
        found = _fetch.fetch(
            args.name,
            include=args.include,
            root=root,
            force=args.force,
            progress=lambda line: print(line, file=sys.stderr),
        )
        print(
            f"{found.name}@{found.revision}: {len(found.manifest['files'])} files in {found.path}"
        )
        _print_splits(found)
        return 0
    if verb == "list":
        cached = {(c.name, c.revision): c for c in _fetch.cached(root)}
        print(f"cache: {root or _fetch.cache_root()}")
        for name, dataset in sorted(DATASETS.items()):
            here = cached.get((name, dataset.source.revision))
            state = (
                f"cached ({len(here.manifest.get('files', {}))} files)" if here else "not cached"
            )
            print(f"{name:<24} {dataset.env_id:<28} {state}  {dataset.description}")
        others = [
            c
            for key, c in cached.items()
            if key[0] not in DATASETS or DATASETS[key[0]].source.revision != key[1]
        ]
        for c in others:
            print(f"{c.name:<24} (revision {c.revision}, not the registered one) {c.path}")
        return 0
    if verb == "info":
        dataset = get(args.name)
        print(f"{dataset.name}: {dataset.description}")
        print(f"source:   {_fetch.describe(dataset)}")
        print(f"env:      {dataset.env_id}")
        if dataset.homepage:
            print(f"homepage: {dataset.homepage}")
        if dataset.license:
            print(f"license:  {dataset.license}")
        found = _fetch.find(args.name, root)
        if found is None:
            target = _fetch.dataset_dir(dataset, root)
            print(f"download: {_download(dataset)}")
            print(f"cached:   no (agentenvs data fetch {dataset.name} puts it in {target})")
            print("splits, once fetched:")
            for split, inside in dataset.splits.items():
                path = str(target / inside)
                print(f"  {split}: gym.make({dataset.env_id!r}, tasks_path={path!r})")
            return 0
        files = found.manifest.get("files", {})
        size = sum(int(f.get("size", 0)) for f in files.values())
        complete = "" if found.manifest.get("complete") else " (a partial fetch)"
        print(
            f"cached:   {found.path}: {len(files)} files, {size / 1e6:.1f} MB{complete}, "
            f"fetched {found.manifest.get('fetched_at')}"
        )
        _print_splits(found)
        return 0
    if verb == "verify":
        problems = _fetch.verify(args.name, root=root)
        for line in problems:
            print(line)
        if not problems:
            print(f"{args.name}: every file matches its checksum")
        return 1 if problems else 0
    raise ValueError(f"unknown verb {verb!r}")


def _download(dataset: Dataset) -> str:
    """What fetching all of ``dataset`` downloads, as far as the registry knows."""
    source = dataset.source
    if isinstance(source, GitRepository):
        what = f"one commit of {source.url} (a shallow git fetch)"
    elif isinstance(source, HubDataset):
        what = f"every file of {', '.join(source.folders)}; --include fetches part"
    else:
        what = f"{len(source.files)} files"
    size = dataset.download_size or "size not recorded"
    return f"{size}: {what}"


def _print_splits(found: _fetch.CachedDataset) -> None:
    dataset = get(found.name)
    for split in dataset.splits:
        print(f"  {split}: gym.make({dataset.env_id!r}, tasks_path={found.tasks_path(split)!r})")
