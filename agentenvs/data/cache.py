"""Fetching, verifying and caching official datasets.

The cache is ``$AGENTENVS_DATA_DIR`` or ``$XDG_CACHE_HOME/agentenvs/data`` (default
``~/.cache/agentenvs/data``); a dataset lives in ``<cache>/<name>/<revision>/`` with a
``.agentenvs-manifest.json`` listing every file, its size and SHA-256, written last, so a folder
without a manifest is an unfinished fetch. Files are streamed into ``*.part`` files,
hashed on the way, and renamed into place only when their checksum matches; a fetch
that is interrupted resumes by skipping the files already verified.

The hub's address is ``$AGENTENVS_HUB_ENDPOINT`` (else ``$HF_ENDPOINT``, else the public
hub); the tests point it at a loopback server that serves files in the hub's layout.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentenvs.data.registry import (
    DataError,
    Dataset,
    GitRepository,
    HubDataset,
    UrlFiles,
    get,
)

DEFAULT_HUB = "https://huggingface.co"
MANIFEST = ".agentenvs-manifest.json"
DATA_SUFFIXES = (".parquet", ".json", ".jsonl", ".csv", ".tsv", ".txt", ".sql", ".db")
_CHUNK = 1 << 20
_TIMEOUT_S = 60.0

Progress = Callable[[str], None]


def cache_root() -> Path:
    explicit = os.environ.get("AGENTENVS_DATA_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "agentenvs" / "data"


def hub_endpoint() -> str:
    return (
        os.environ.get("AGENTENVS_HUB_ENDPOINT") or os.environ.get("HF_ENDPOINT") or DEFAULT_HUB
    ).rstrip("/")


def dataset_dir(dataset: Dataset, root: Path | None = None) -> Path:
    return (root or cache_root()) / dataset.name / dataset.source.revision


@dataclass(frozen=True)
class PlannedFile:
    """One file to fetch: where it goes, where it comes from, how it is checked."""

    path: str
    url: str
    size: int | None
    #: ("sha256", hex) or ("git-blob-sha1", hex)
    digest: tuple[str, str]


# ---------------------------------------------------------------------- HTTP
def _open(url: str, timeout: float = _TIMEOUT_S) -> Any:
    request = urllib.request.Request(url, headers={"User-Agent": "agentenvs-data"})
    token = os.environ.get("HF_TOKEN")
    if token and url.startswith(hub_endpoint()):
        request.add_header("Authorization", f"Bearer {token}")
    try:
        return urllib.request.urlopen(request, timeout=timeout)  # noqa: S310 - http(s) only
    except urllib.error.HTTPError as exc:
        raise DataError(f"{url}: HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise DataError(f"{url}: cannot connect ({reason}); is this machine online?") from exc


def _next_link(header: str | None) -> str | None:
    for part in (header or "").split(","):
        if 'rel="next"' in part and "<" in part and ">" in part:
            return part[part.index("<") + 1 : part.index(">")]
    return None


def _hub_listing(source: HubDataset, folder: str) -> list[dict[str, Any]]:
    base = hub_endpoint()
    repo = urllib.parse.quote(source.repo, safe="/")
    url: str | None = (
        f"{base}/api/datasets/{repo}/tree/{source.revision}/"
        f"{urllib.parse.quote(folder, safe='/')}?recursive=true"
    )
    entries: list[dict[str, Any]] = []
    while url:
        with _open(url) as response:
            try:
                page = json.loads(response.read().decode("utf-8"))
            except (ValueError, UnicodeDecodeError) as exc:
                raise DataError(f"{url}: the listing is not JSON: {exc}") from exc
            url = _next_link(response.headers.get("Link"))
        if not isinstance(page, list):
            raise DataError(f"{source.repo}@{source.revision}: {folder}: unexpected listing")
        entries += [e for e in page if isinstance(e, dict) and e.get("type") == "file"]
    return entries


def plan(dataset: Dataset, include: Sequence[str] = ()) -> list[PlannedFile]:
    """The files a fetch of ``dataset`` brings (those matching any ``include`` pattern)."""
    source = dataset.source
    planned: list[PlannedFile] = []
    if isinstance(source, HubDataset):
        base = hub_endpoint()
        repo = urllib.parse.quote(source.repo, safe="/")
        for folder in source.folders:
            for entry in _hub_listing(source, folder):
                path = str(entry.get("path", ""))
                if not path.endswith(DATA_SUFFIXES) or not _wanted(path, include):
                    continue
                lfs = entry.get("lfs") if isinstance(entry.get("lfs"), dict) else None
                if lfs and lfs.get("oid"):
                    digest = ("sha256", str(lfs["oid"]))
                elif entry.get("oid"):
                    digest = ("git-blob-sha1", str(entry["oid"]))
                else:
                    raise DataError(f"{source.repo}: {path}: the hub lists no checksum")
                known = source.sha256.get(path)
                if known is not None and digest != ("sha256", known):
                    raise DataError(
                        f"{source.repo}@{source.revision}: {path}: the hub's checksum "
                        f"{digest[1]} differs from the pinned {known}"
                    )
                url = f"{base}/datasets/{repo}/resolve/{source.revision}/" + urllib.parse.quote(
                    path
                )
                size = entry.get("size")
                planned.append(
                    PlannedFile(path, url, size if isinstance(size, int) else None, digest)
                )
        missing = [p for p in source.sha256 if _wanted(p, include)]
        missing = [p for p in missing if p not in {f.path for f in planned}]
        if missing:
            raise DataError(f"{source.repo}@{source.revision}: not on the hub: {missing}")
    elif isinstance(source, UrlFiles):
        planned = [
            PlannedFile(f.path, f.url, None, ("sha256", f.sha256))
            for f in source.files
            if _wanted(f.path, include)
        ]
    else:
        raise DataError(f"{dataset.name}: a git repository has no file list; fetch it whole")
    if not planned:
        raise DataError(f"{dataset.name}: no files match {list(include)}")
    return planned


def _wanted(path: str, include: Sequence[str]) -> bool:
    return not include or any(
        fnmatch.fnmatch(path, pattern) or path.startswith(pattern.rstrip("/") + "/")
        for pattern in include
    )


class _Hasher:
    def __init__(self, kind: str, size: int | None) -> None:
        self.kind = kind
        if kind == "sha256":
            self.h = hashlib.sha256()
        elif kind == "git-blob-sha1":
            if size is None:
                raise DataError("a git blob checksum needs the file size")
            self.h = hashlib.sha1(f"blob {size}\0".encode())  # noqa: S324 - git's object id
        else:
            raise DataError(f"unknown checksum kind {kind!r}")

    def update(self, data: bytes) -> None:
        self.h.update(data)

    def hexdigest(self) -> str:
        return self.h.hexdigest()


def _file_digest(path: Path, kind: str, size: int | None) -> str:
    hasher = _Hasher(kind, path.stat().st_size if size is None else size)
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            hasher.update(chunk)
    return hasher.hexdigest()


def _download(item: PlannedFile, target: Path) -> int:
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(target.name + ".part")
    kind, want = item.digest
    hasher = _Hasher(kind, item.size)
    sha256 = hashlib.sha256()
    size = 0
    with _open(item.url) as response, part.open("wb") as out:
        for chunk in iter(lambda: response.read(_CHUNK), b""):
            out.write(chunk)
            hasher.update(chunk)
            sha256.update(chunk)
            size += len(chunk)
    if item.size is not None and size != item.size:
        part.unlink(missing_ok=True)
        raise DataError(f"{item.path}: got {size} bytes, expected {item.size} ({item.url})")
    got = hasher.hexdigest()
    if got != want:
        part.unlink(missing_ok=True)
        raise DataError(f"{item.path}: checksum mismatch: got {kind} {got}, expected {want}")
    os.replace(part, target)
    return size


# ---------------------------------------------------------------------- git
def _git(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0")
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=3600
    )


def _fetch_git(source: GitRepository, target: Path, progress: Progress) -> dict[str, Any]:
    if shutil.which("git") is None:
        raise DataError("fetching a git repository needs the git command")
    work = Path(tempfile.mkdtemp(prefix=".git-", dir=target.parent))
    try:
        for args in (["init", "-q"], ["remote", "add", "origin", source.url]):
            done = _git(args, work)
            if done.returncode:
                raise DataError(f"git {' '.join(args)}: {done.stderr.strip()}")
        progress(f"git fetch {source.url} {source.commit}")
        done = _git(["fetch", "-q", "--depth", "1", "origin", source.commit], work)
        if done.returncode:  # servers that refuse a commit by id: every branch and tag
            done = _git(
                ["fetch", "-q", "--tags", "origin", "+refs/heads/*:refs/remotes/origin/*"], work
            )
            if done.returncode:
                raise DataError(f"git fetch {source.url}: {done.stderr.strip()}")
        done = _git(["-c", "advice.detachedHead=false", "checkout", "-q", source.commit], work)
        if done.returncode:
            raise DataError(
                f"{source.url}: commit {source.commit} not found: {done.stderr.strip()}"
            )
        head = _git(["rev-parse", "HEAD"], work).stdout.strip()
        if head != source.commit:
            raise DataError(f"{source.url}: checked out {head}, expected {source.commit}")
        tree = _git(["ls-tree", "-r", "HEAD"], work).stdout
        shutil.rmtree(work / ".git")
        if target.exists():
            shutil.rmtree(target)
        os.replace(work, target)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    files = {}
    for line in tree.splitlines():
        meta, _, path = line.partition("\t")
        parts = meta.split()
        if len(parts) == 3 and parts[1] == "blob":
            files[path] = {"git-blob-sha1": parts[2]}
    return files


# ---------------------------------------------------------------------- the API
@dataclass(frozen=True)
class CachedDataset:
    name: str
    revision: str
    path: Path
    manifest: dict[str, Any]

    def tasks_path(self, split: str) -> str:
        dataset = get(self.name)
        if split not in dataset.splits:
            raise DataError(f"{self.name}: no split {split!r}; splits: {sorted(dataset.splits)}")
        return str(self.path / dataset.splits[split])


def read_manifest(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / MANIFEST).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def fetch(
    name: str,
    *,
    include: Sequence[str] = (),
    root: Path | None = None,
    progress: Progress | None = None,
    force: bool = False,
) -> CachedDataset:
    """Fetch ``name`` (or the files matching ``include``) into the cache and verify it."""
    say = progress or (lambda _: None)
    dataset = get(name)
    target = dataset_dir(dataset, root)
    target.parent.mkdir(parents=True, exist_ok=True)
    source = dataset.source
    started = time.time()
    old = read_manifest(target) or {}
    if isinstance(source, GitRepository):
        if old.get("complete") and not force:
            say(f"{name}: already cached at {target}")
            return CachedDataset(name, source.revision, target, old)
        files = _fetch_git(source, target, say)
    else:
        files = dict(old.get("files", {})) if not force else {}
        for item in plan(dataset, include):
            dest = target / item.path
            kind, want = item.digest
            if dest.is_file() and files.get(item.path, {}).get(kind) == want:
                say(f"{item.path}: cached")
                continue
            if dest.is_file() and _file_digest(dest, kind, item.size) == want:
                say(f"{item.path}: present and verified")
            else:
                say(f"{item.path}: downloading")
                _download(item, dest)
            record = {kind: want, "size": dest.stat().st_size}
            if kind != "sha256":
                record["sha256"] = _file_digest(dest, "sha256", None)
            files[item.path] = record
    manifest = {
        "name": name,
        "kind": source.kind,
        "revision": source.revision,
        "source": _describe(dataset),
        "env_id": dataset.env_id,
        "splits": dict(dataset.splits),
        "files": files,
        "complete": isinstance(source, GitRepository) or not include,
        "fetched_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds": round(time.time() - started, 3),
    }
    (target / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return CachedDataset(name, source.revision, target, manifest)


def verify(name: str, *, root: Path | None = None) -> list[str]:
    """Re-hash every cached file of ``name``; the problems found (empty when all is well)."""
    dataset = get(name)
    target = dataset_dir(dataset, root)
    manifest = read_manifest(target)
    if manifest is None:
        return [f"{name}: not cached in {target}"]
    problems = []
    for path, record in manifest.get("files", {}).items():
        file = target / path
        if not file.is_file():
            problems.append(f"{path}: missing")
            continue
        kind = "sha256" if "sha256" in record else "git-blob-sha1"
        if kind in record and _file_digest(file, kind, None) != record[kind]:
            problems.append(f"{path}: {kind} differs from the manifest")
    return problems


def cached(root: Path | None = None) -> list[CachedDataset]:
    """Every dataset in the cache (of every revision), with its manifest."""
    base = root or cache_root()
    found = []
    for manifest_file in sorted(base.glob(f"*/*/{MANIFEST}")):
        manifest = read_manifest(manifest_file.parent)
        if manifest is not None:
            found.append(
                CachedDataset(
                    str(manifest.get("name", manifest_file.parent.parent.name)),
                    str(manifest.get("revision", manifest_file.parent.name)),
                    manifest_file.parent,
                    manifest,
                )
            )
    return found


def find(name: str, root: Path | None = None) -> CachedDataset | None:
    """The cached copy of ``name`` at its registered revision, if any."""
    dataset = get(name)
    target = dataset_dir(dataset, root)
    manifest = read_manifest(target)
    return (
        None if manifest is None else CachedDataset(name, dataset.source.revision, target, manifest)
    )


def tasks_path(name: str, split: str, root: Path | None = None) -> str:
    """What to pass as ``tasks_path=`` for ``split`` of the cached ``name``."""
    found = find(name, root)
    if found is None:
        raise DataError(f"{name} is not cached; run: agentenvs data fetch {name}")
    return found.tasks_path(split)


def _describe(dataset: Dataset) -> str:
    source = dataset.source
    if isinstance(source, HubDataset):
        return f"hub dataset {source.repo}@{source.revision} ({', '.join(source.folders)})"
    if isinstance(source, GitRepository):
        return f"git {source.url}@{source.commit}"
    return f"{len(source.files)} files at fixed URLs"


def describe(dataset: Dataset) -> str:
    return _describe(dataset)
