"""``agentenvs data``: fetching official datasets at pinned revisions, for real, on loopback.

A small hub runs on 127.0.0.1 (``http.server``): it answers the tree API and serves files
at ``/datasets/<repo>/resolve/<revision>/<path>`` in the DeepCoder-Preview layout, from
parquet shards the tests write in the official row format. Git sources are fetched from a
bare repository served by ``git daemon`` on loopback.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest
from _git_daemon import serve_git

from agentenvs.cli import main as cli_main
from agentenvs.data import (
    DATASETS,
    DataError,
    Dataset,
    GitRepository,
    HubDataset,
    RemoteFile,
    UrlFiles,
    fetch,
    register,
    tasks_path,
    verify,
)
from agentenvs.data.registry import DEEPCODER_REVISION
from agentenvs.envs.deepcoder.data import load_tasks

FIXTURES = Path(__file__).parent.parent / "envs" / "deepcoder_fixtures"
REPO = "agentica-org/DeepCoder-Preview-Dataset"
REV = "1" * 40


def rows_of(name: str) -> list[dict[str, Any]]:
    text = (FIXTURES / name).read_text()
    if name.endswith(".json"):
        return json.loads(text)
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def parquet_bytes(rows: list[dict[str, Any]], tmp: Path) -> bytes:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    def text(value: Any) -> str:
        return value if isinstance(value, str) else json.dumps(value or {})

    table = pa.table(
        {
            "problem": [r["problem"] for r in rows],
            "tests": [text(r["tests"]) for r in rows],
            "metadata": [text(r.get("metadata")) for r in rows],
        }
    )
    path = tmp / "shard.parquet"
    pq.write_table(table, path)
    return path.read_bytes()


class Hub:
    """Files by (repo, revision, path); requests counted; some can be served corrupted."""

    def __init__(self) -> None:
        self.files: dict[tuple[str, str, str], bytes] = {}
        self.corrupt: set[str] = set()
        self.downloads: list[str] = []
        self.page_size = 2

    def listing(self, repo: str, rev: str, folder: str) -> list[dict[str, Any]]:
        out = []
        for (r, v, path), data in sorted(self.files.items()):
            if (r, v) == (repo, rev) and path.startswith(folder + "/"):
                entry: dict[str, Any] = {"type": "file", "path": path, "size": len(data)}
                if path.endswith(".parquet"):
                    entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data)}
                    entry["oid"] = "0" * 40
                else:
                    blob = hashlib.sha1(f"blob {len(data)}\0".encode() + data).hexdigest()
                    entry["oid"] = blob
                out.append(entry)
        return out


@pytest.fixture()
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[Hub]:
    state = Hub()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            url = urlparse(self.path)
            parts = unquote(url.path).strip("/").split("/")
            if parts[:2] == ["api", "datasets"] and "tree" in parts:
                at = parts.index("tree")
                repo, rev, folder = "/".join(parts[2:at]), parts[at + 1], "/".join(parts[at + 2 :])
                if not any((r, v) == (repo, rev) for r, v, _ in state.files):
                    return self.send_error(404, "Revision not found")
                entries = state.listing(repo, rev, folder)
                page = int(
                    dict(q.split("=") for q in url.query.split("&") if "=" in q).get("page", 0)
                )
                chunk = entries[page * state.page_size : (page + 1) * state.page_size]
                self.send_response(200)
                if (page + 1) * state.page_size < len(entries):
                    nxt = f"http://{self.headers['Host']}{url.path}?recursive=true&page={page + 1}"
                    self.send_header("Link", f'<{nxt}>; rel="next"')
                body = json.dumps(chunk).encode()
            elif parts[0] == "datasets" and "resolve" in parts:
                at = parts.index("resolve")
                repo, rev, path = "/".join(parts[1:at]), parts[at + 1], "/".join(parts[at + 2 :])
                data = state.files.get((repo, rev, path))
                if data is None:
                    return self.send_error(404, "Entry not found")
                state.downloads.append(path)
                body = data[:-1] + b"!" if path in state.corrupt else data
                self.send_response(200)
            elif parts[0] == "plain":
                data = state.files.get(("plain", "-", "/".join(parts[1:])))
                if data is None:
                    return self.send_error(404)
                body = data
                self.send_response(200)
            else:
                return self.send_error(404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    monkeypatch.setenv("AGENTENVS_HUB_ENDPOINT", state.url)  # type: ignore[attr-defined]
    yield state
    server.shutdown()
    server.server_close()


@pytest.fixture()
def scratch_registry() -> Iterator[list[str]]:
    added: list[str] = []
    yield added
    for name in added:
        DATASETS.pop(name, None)


def publish_deepcoder(hub: Hub, tmp: Path, rev: str = REV) -> None:
    lcb = rows_of("lcb.jsonl")
    hub.files[(REPO, rev, "lcbv5/test-00000-of-00002.parquet")] = parquet_bytes(lcb[:1], tmp)
    hub.files[(REPO, rev, "lcbv5/test-00001-of-00002.parquet")] = parquet_bytes(lcb[1:], tmp)
    hub.files[(REPO, rev, "lcbv5/train-00000-of-00001.parquet")] = parquet_bytes(lcb, tmp)
    hub.files[(REPO, rev, "taco/train-00000-of-00001.parquet")] = parquet_bytes(
        rows_of("taco.json"), tmp
    )
    hub.files[(REPO, rev, "primeintellect/train-00000-of-00001.parquet")] = parquet_bytes(
        rows_of("primeintellect.jsonl"), tmp
    )
    codeforces = [{"problem": "Echo n.", "tests": [{"input": "5\n", "output": "5\n"}]}]
    hub.files[(REPO, rev, "codeforces/test.json")] = json.dumps(codeforces).encode()
    hub.files[(REPO, rev, "README.md")] = b"# card"


def deepcoder_like(name: str, rev: str = REV, **pinned: str) -> Dataset:
    return Dataset(
        name=name,
        description="test copy of the DeepCoder-Preview layout",
        source=HubDataset(
            REPO, rev, ("lcbv5", "taco", "primeintellect", "codeforces"), sha256=pinned
        ),
        env_id="agentenvs/DeepCoderMT-v0",
        splits={
            "lcbv5/test": "lcbv5/test-*.parquet",
            "taco/train": "taco/train-*.parquet",
            "primeintellect/train": "primeintellect/train-*.parquet",
            "codeforces/test": "codeforces/test.json",
        },
    )


# ---------------------------------------------------------------------- hub datasets
def test_fetch_verifies_caches_and_feeds_the_env(
    hub: Hub, tmp_path: Path, scratch_registry: list[str]
) -> None:
    publish_deepcoder(hub, tmp_path)
    register(deepcoder_like("dc-test"))
    scratch_registry.append("dc-test")
    root = tmp_path / "cache"
    got = fetch("dc-test", root=root)
    assert got.path == root / "dc-test" / REV
    assert sorted(got.manifest["files"]) == [
        "codeforces/test.json",
        "lcbv5/test-00000-of-00002.parquet",
        "lcbv5/test-00001-of-00002.parquet",
        "lcbv5/train-00000-of-00001.parquet",
        "primeintellect/train-00000-of-00001.parquet",
        "taco/train-00000-of-00001.parquet",
    ]  # the listing came in pages of two; README.md is outside the folders
    for path, record in got.manifest["files"].items():
        assert record["sha256"] == hashlib.sha256((got.path / path).read_bytes()).hexdigest()
    assert not list(got.path.rglob("*.part"))
    # every split loads through the path the registry gives
    lcb = load_tasks(tasks_path("dc-test", "lcbv5/test", root=root))
    assert list(lcb.tasks) == ["row-00000", "row-00001"]  # two shards, in name order
    formats = {
        split: {t.source_format for t in load_tasks(got.tasks_path(split)).tasks.values()}
        for split in ("taco/train", "primeintellect/train", "codeforces/test")
    }
    assert formats == {
        "taco/train": {"taco"},
        "primeintellect/train": {"primeintellect"},
        "codeforces/test": {"lcb"},
    }
    import gymnasium as gym

    import agentenvs  # noqa: F401

    env = gym.make("agentenvs/DeepCoderMT-v0", tasks_path=got.tasks_path("lcbv5/test"))
    obs, info = env.reset(seed=0)
    assert "### Format:" in obs and info["tests_total"] >= 1
    env.close()
    # a second fetch downloads nothing; verify re-hashes
    before = len(hub.downloads)
    fetch("dc-test", root=root)
    assert len(hub.downloads) == before
    assert verify("dc-test", root=root) == []
    (got.path / "codeforces/test.json").write_text("[]")
    assert verify("dc-test", root=root) == [
        "codeforces/test.json: sha256 differs from the manifest"
    ]
    fetch("dc-test", root=root, force=True)
    assert verify("dc-test", root=root) == []


def test_a_corrupted_download_is_refused_and_left_nowhere(
    hub: Hub, tmp_path: Path, scratch_registry: list[str]
) -> None:
    publish_deepcoder(hub, tmp_path)
    register(deepcoder_like("dc-corrupt"))
    scratch_registry.append("dc-corrupt")
    hub.corrupt.add("taco/train-00000-of-00001.parquet")
    root = tmp_path / "cache"
    with pytest.raises(DataError, match="taco/train-00000-of-00001.parquet: checksum mismatch"):
        fetch("dc-corrupt", root=root)
    folder = root / "dc-corrupt" / REV
    assert not (folder / "taco").exists() or not list((folder / "taco").iterdir())
    assert not (folder / ".agentenvs-manifest.json").exists()
    hub.corrupt.clear()  # the next fetch completes, keeping what was already verified
    fetch("dc-corrupt", root=root)
    assert verify("dc-corrupt", root=root) == []


def test_pinned_checksums_must_agree_with_the_hub(
    hub: Hub, tmp_path: Path, scratch_registry: list[str]
) -> None:
    publish_deepcoder(hub, tmp_path)
    register(deepcoder_like("dc-pinned", **{"taco/train-00000-of-00001.parquet": "0" * 64}))
    scratch_registry.append("dc-pinned")
    with pytest.raises(DataError, match="differs from the pinned"):
        fetch("dc-pinned", root=tmp_path / "cache")
    assert not hub.downloads


def test_the_registered_deepcoder_entry_against_a_loopback_hub(hub: Hub, tmp_path: Path) -> None:
    """The real entry: its pinned TACO checksums reject files that are not the published
    ones, and the other folders fetch at the pinned revision."""
    publish_deepcoder(hub, tmp_path, rev=DEEPCODER_REVISION)
    shard = "taco/train-00000-of-00004.parquet"
    hub.files[(REPO, DEEPCODER_REVISION, shard)] = parquet_bytes(rows_of("taco.json"), tmp_path)
    root = tmp_path / "cache"
    with pytest.raises(DataError, match="differs from the pinned"):
        fetch("deepcoder-preview", root=root, include=[shard])
    del hub.files[(REPO, DEEPCODER_REVISION, shard)]
    with pytest.raises(DataError, match="not on the hub"):  # pinned shards must all be there
        fetch("deepcoder-preview", root=root, include=["taco"])
    got = fetch("deepcoder-preview", root=root, include=["codeforces/*", "lcbv5/test-*"])
    assert got.path == root / "deepcoder-preview" / DEEPCODER_REVISION
    assert got.manifest["complete"] is False
    assert len(load_tasks(got.tasks_path("lcbv5/test")).tasks) == 2


def test_unknown_names_revisions_and_offline_machines(
    hub: Hub, tmp_path: Path, scratch_registry: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(DataError, match="unknown dataset 'nope'"):
        fetch("nope", root=tmp_path)
    register(deepcoder_like("dc-missing", rev="2" * 40))
    scratch_registry.append("dc-missing")
    with pytest.raises(DataError, match="HTTP 404"):
        fetch("dc-missing", root=tmp_path)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("AGENTENVS_HUB_ENDPOINT", f"http://127.0.0.1:{port}")
    with pytest.raises(DataError, match="cannot connect"):
        fetch("dc-missing", root=tmp_path)
    with pytest.raises(ValueError, match="full commit id"):
        HubDataset(REPO, "main", ("x",))


def test_files_at_fixed_urls(hub: Hub, tmp_path: Path, scratch_registry: list[str]) -> None:
    data = b'{"rows": []}'
    hub.files[("plain", "-", "a/b.json")] = data
    url = hub.url + "/plain/a/b.json"  # type: ignore[attr-defined]
    good = RemoteFile("b.json", url, hashlib.sha256(data).hexdigest())
    register(
        Dataset("plain-ok", "one file", UrlFiles((good,)), "agentenvs/BFCL-v0", {"all": "b.json"})
    )
    register(
        Dataset(
            "plain-bad",
            "one file, wrong checksum",
            UrlFiles((RemoteFile("b.json", url, "f" * 64),)),
            "agentenvs/BFCL-v0",
            {"all": "b.json"},
        )
    )
    scratch_registry += ["plain-ok", "plain-bad"]
    got = fetch("plain-ok", root=tmp_path)
    assert (got.path / "b.json").read_bytes() == data
    with pytest.raises(DataError, match="checksum mismatch"):
        fetch("plain-bad", root=tmp_path)


# ---------------------------------------------------------------------- git
def _git(*args: str, cwd: Path) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@localhost",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@localhost",
        "HOME": str(cwd),
        "PATH": "/usr/bin:/bin",
    }
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture()
def git_daemon(tmp_path: Path) -> Iterator[tuple[str, list[str]]]:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    src = tmp_path / "src"
    src.mkdir()
    _git("init", "-q", "-b", "main", cwd=src)
    commits = []
    for version in ("one", "two"):
        (src / "tasks" / "hello").mkdir(parents=True, exist_ok=True)
        (src / "tasks" / "hello" / "task.yaml").write_text(f"instruction: say {version}\n")
        _git("add", "-A", cwd=src)
        _git("commit", "-q", "-m", version, cwd=src)
        commits.append(_git("rev-parse", "HEAD", cwd=src))
    served = tmp_path / "served"
    served.mkdir()
    _git("clone", "-q", "--bare", str(src), str(served / "tasks.git"), cwd=tmp_path)
    with serve_git(served) as url:
        yield f"{url}/tasks.git", commits


def test_a_git_repository_at_a_pinned_commit(
    git_daemon: tuple[str, list[str]], tmp_path: Path, scratch_registry: list[str]
) -> None:
    url, (first, second) = git_daemon
    register(
        Dataset(
            "git-first",
            "tasks at the first commit",
            GitRepository(url, first),
            "agentenvs/TerminalBench-v0",
            {"all": "tasks"},
        )
    )
    register(
        Dataset(
            "git-wrong",
            "a commit the server does not have",
            GitRepository(url, "3" * 40),
            "agentenvs/TerminalBench-v0",
            {"all": "tasks"},
        )
    )
    scratch_registry += ["git-first", "git-wrong"]
    root = tmp_path / "cache"
    got = fetch("git-first", root=root)
    assert (got.path / "tasks/hello/task.yaml").read_text() == "instruction: say one\n"
    assert not (got.path / ".git").exists()
    assert got.tasks_path("all") == str(got.path / "tasks")
    assert "tasks/hello/task.yaml" in got.manifest["files"]
    assert verify("git-first", root=root) == []
    with pytest.raises(DataError, match="git-wrong|not found|fetch"):
        fetch("git-wrong", root=root)
    assert second != first


# ---------------------------------------------------------------------- the command
def test_the_data_command(
    hub: Hub, tmp_path: Path, scratch_registry: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    publish_deepcoder(hub, tmp_path)
    register(deepcoder_like("dc-cli"))
    scratch_registry.append("dc-cli")
    cache = str(tmp_path / "cache")
    assert cli_main(["data", "--cache-dir", cache, "info", "dc-cli"]) == 0
    assert "cached:   no" in capsys.readouterr().out
    assert cli_main(["data", "--cache-dir", cache, "fetch", "dc-cli", "--include", "lcbv5"]) == 0
    out = capsys.readouterr().out
    assert "dc-cli@" + REV + ": 3 files" in out
    assert "lcbv5/test: gym.make('agentenvs/DeepCoderMT-v0', tasks_path=" in out
    assert cli_main(["data", "--cache-dir", cache, "list"]) == 0
    out = capsys.readouterr().out
    assert "deepcoder-preview" in out and "dc-cli" in out and "cached (3 files)" in out
    assert cli_main(["data", "--cache-dir", cache, "info", "dc-cli"]) == 0
    assert "(a partial fetch)" in capsys.readouterr().out
    assert cli_main(["data", "--cache-dir", cache, "verify", "dc-cli"]) == 0
    assert cli_main(["data", "--cache-dir", cache, "fetch", "nope"]) == 2
    assert "unknown dataset" in capsys.readouterr().err
