"""A key given to the ``openai`` policy is never written down: ``agentenvs eval`` against a
real ``agentenvs serve-model`` on loopback (a tiny model built from a config), the key
given inline (``api_key=``), by environment (``api_key_env=``) and by file
(``api_key_file=``); every file the run wrote, and its stdout and stderr, are searched
for the key. A run whose every trajectory faults (its fault records hold the spec) is
searched too."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "policy"))

from served_model import ServedModel  # noqa: E402
from tiny_lm import build_model, build_tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedModel]:
    path = tmp_path_factory.mktemp("tiny-llama")
    tokenizer = build_tokenizer()
    build_model(tokenizer).save_pretrained(path)
    tokenizer.save_pretrained(path)
    with ServedModel(path, options="max_new_tokens=4") as server:
        yield server


def _eval(policy: str, out: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentenvs.cli", "eval", "--env", "agentenvs/FrozenLake-v0",
         "--policy", policy, "--tasks", "first:2", "--n", "2", "--budgets", "2",
         "--workers", "1", "--out", str(out), *extra],
        capture_output=True, text=True, env=env, timeout=500,
    )


def _holding(key: str, out: Path, run: subprocess.CompletedProcess[str]) -> list[str]:
    """The files under ``out`` (and the streams) that hold ``key``."""
    found = [str(p) for p in sorted(out.rglob("*")) if p.is_file() and key.encode() in p.read_bytes()]
    found += [name for name, text in (("stdout", run.stdout), ("stderr", run.stderr)) if key in text]
    return found


def _env_without_keys() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if k not in ("AGENTENVS_MODEL_API_KEY", "OPENAI_API_KEY")}


def test_an_inline_key_is_used_and_never_written(served: ServedModel, tmp_path: Path) -> None:
    out = tmp_path / "run"
    key = served.api_key
    run = _eval(f"openai:base_url={served.url},model=tiny,api_key={key}", out,
                _env_without_keys())
    assert run.returncode == 0, run.stderr[-3000:]
    lines = (out / "trajectories.jsonl").read_text().splitlines()
    assert len(lines) == 4  # the key was sent: the server answered every turn
    assert _holding(key, out, run) == []
    assert "api_key=***" in (out / "manifest.json").read_text()
    # said once: the key stays visible in the process list unless setproctitle hides it
    try:
        import setproctitle  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        assert "process list" in run.stderr


@pytest.mark.parametrize("how", ["env", "file"])
def test_a_key_by_environment_or_file_is_never_written(
    served: ServedModel, tmp_path: Path, how: str
) -> None:
    out = tmp_path / "run"
    env = _env_without_keys()
    if how == "env":
        env["MY_MODEL_KEY"] = served.api_key
        where = "api_key_env=MY_MODEL_KEY"
    else:
        path = tmp_path / "key"
        path.write_text(served.api_key + "\n")
        path.chmod(0o600)
        where = f"api_key_file={path}"
    run = _eval(f"openai:base_url={served.url},model=tiny,{where}", out, env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert len((out / "trajectories.jsonl").read_text().splitlines()) == 4
    assert _holding(served.api_key, out, run) == []


def test_a_world_readable_key_file_is_refused(served: ServedModel, tmp_path: Path) -> None:
    path = tmp_path / "key"
    path.write_text(served.api_key + "\n")
    path.chmod(0o644)
    out = tmp_path / "run"
    run = _eval(f"openai:base_url={served.url},model=tiny,api_key_file={path}", out,
                _env_without_keys())
    assert run.returncode != 0 and "chmod 600" in run.stderr
    assert served.api_key not in run.stderr + run.stdout


class _FailingServer(BaseHTTPRequestHandler):
    """Lists the model ``tiny`` (so the command's check before the run passes), then
    answers every request with HTTP 500: each trajectory faults."""

    def do_GET(self) -> None:  # noqa: N802 - the handler's name
        body = b'{"object": "list", "data": [{"id": "tiny"}]}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(500)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_fault_records_of_a_failing_run_hold_no_key(tmp_path: Path) -> None:
    key = secrets.token_urlsafe(24)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FailingServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    out = tmp_path / "run"
    try:
        run = _eval(
            f"openai:base_url=http://127.0.0.1:{server.server_address[1]}/v1,model=tiny,"
            f"api_key={key},max_retries=0",
            out, _env_without_keys(), "--max-fault-retries", "0",
        )
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
    assert run.returncode != 0
    assert (out / "faults.jsonl").read_text().strip()  # the spec is in its records
    assert _holding(key, out, run) == []
    # a server nobody listens on is refused before the run, in a line without the key
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    refused = _eval(f"openai:base_url=http://127.0.0.1:{port}/v1,model=tiny,api_key={key}",
                    tmp_path / "refused", _env_without_keys())
    assert refused.returncode == 2 and "cannot reach the model server" in refused.stderr
    assert key not in refused.stderr + refused.stdout and not (tmp_path / "refused").exists()


def test_an_inline_key_is_masked_in_argv_the_name_and_the_repr() -> None:
    import warnings

    from agentenvs.policy.credentials import hide_argv
    from agentenvs.policy.registry import make_policy

    key = secrets.token_urlsafe(24)
    spec = f"openai:base_url=http://127.0.0.1:9/v1,model=m,api_key={key}"
    argv = ["agentenvs", "eval", "--policy", spec, "--api-key", key, f"--api-key={key}"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert hide_argv(argv)
    assert not any(key in arg for arg in argv)
    assert argv[3] == "openai:base_url=http://127.0.0.1:9/v1,model=m,api_key=***"
    try:
        import setproctitle  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        assert any("process list" in str(w.message) for w in caught)
    policy = make_policy(spec)
    assert policy.api_key == key  # used, never shown
    assert key not in policy.name and key not in repr(policy)
