"""Every error a user can make about a model is one line on stderr, exit status 2, before
any worker starts or any run folder is written (``agentenvs.policy.preflight``); a model
that passes those checks and still fails to load in a worker is reported as such, with
the worker's error, while a worker killed as it loads stays a lost worker; and a failed
start leaves nothing that blocks the corrected command.

Each case runs the real command in a subprocess, with its own empty Hugging Face cache
and the hub out of reach (offline, or a closed loopback port)."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

FROZENLAKE = "agentenvs/FrozenLake-v0"
#: the checks of a model's files run once the hf extra is there (without it the refusal
#: names the extra first: test_a_missing_extra_names_what_to_install)
NEEDS_HF = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None,
    reason="could not import torch or transformers: pip install 'agentenvs[hf]'",
)
REPO = Path(__file__).resolve().parents[2]


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "AGENTENVS_"))}
    env.pop("TRANSFORMERS_OFFLINE", None)
    env.update(
        HF_HOME=str(tmp_path / "hf-home"),  # an empty cache: nothing is found there
        HF_HUB_OFFLINE="1",
        PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path), str(REPO)])),
    )
    env.update(extra)
    return env


def _cli(
    args: list[str], tmp_path: Path, *, prelude: str = "", **env: str
) -> subprocess.CompletedProcess[str]:
    """``agentenvs ARGS`` in a subprocess run in ``tmp_path/cwd`` (``prelude``: Python run
    first, e.g. to hide a module)."""
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    code = f"{prelude}\nimport sys\nfrom agentenvs.cli import main\nsys.exit(main())"
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=cwd, env=_env(tmp_path, **env),
        capture_output=True, text=True, timeout=240,
    )


def _refusal(proc: subprocess.CompletedProcess[str]) -> str:
    """Exit status 2 and one line on stderr, no traceback: that line."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    return lines[0]


def _eval(out: str, policy: str, *extra: str) -> list[str]:
    return ["eval", "--env", FROZENLAKE, "--policy", policy, "--tasks", "first:1", "--n", "1",
            "--budgets", "1,2", "--workers", "1", "--no-progress", "--out", out, *extra]


def _write_tokenizer(folder: Path, size: int) -> None:
    """A tokenizer.json of ``size`` tokens (the file only: what the checks read)."""
    vocab = {f"t{i}": i for i in range(size)}
    data = {"version": "1.0", "added_tokens": [], "model": {"type": "BPE", "vocab": vocab,
                                                            "merges": []}}
    (folder / "tokenizer.json").write_text(json.dumps(data))
    (folder / "tokenizer_config.json").write_text("{}")


def _model_folder(path: Path, *, vocab: int = 64, weights: bool = True) -> Path:
    """A folder laid out as save_pretrained writes one; the weights file is not a real
    one, so a loader fails on it (the checks do not read weights)."""
    path.mkdir(parents=True)
    config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": vocab,
              "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
              "num_attention_heads": 1, "num_key_value_heads": 1}
    (path / "config.json").write_text(json.dumps(config))
    if weights:
        (path / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00not-json")
    _write_tokenizer(path, vocab)
    return path


# ---------------------------------------------------------------- models and tokenizers
@NEEDS_HF
def test_a_model_path_that_does_not_exist(tmp_path: Path) -> None:
    line = _refusal(_cli(_eval("run", "hf:model=/nonexistent/model"), tmp_path))
    assert line.startswith("agentenvs eval: error: --policy hf:model=/nonexistent/model: ")
    assert "model path /nonexistent/model does not exist" in line
    assert list((tmp_path / "cwd").iterdir()) == []  # no run folder: no worker started


@NEEDS_HF
def test_a_folder_that_is_not_a_model(tmp_path: Path) -> None:
    plain = tmp_path / "checkpoints"
    _model_folder(plain / "step-100")
    line = _refusal(_cli(_eval("run", f"hf:model={plain}"), tmp_path))
    assert f"{plain} has no config.json, so it is not a model folder" in line
    assert "step-100" in line  # the subfolder that is one
    bare = _model_folder(tmp_path / "bare", weights=False)
    line = _refusal(_cli(_eval("run", f"hf:model={bare}"), tmp_path))
    assert "has a config.json but no weights" in line
    file = tmp_path / "model.bin"
    file.write_bytes(b"x")
    line = _refusal(_cli(_eval("run", f"hf:model={file}"), tmp_path))
    assert "is a file, not a model folder" in line
    assert list((tmp_path / "cwd").iterdir()) == []


@NEEDS_HF
def test_a_tokenizer_larger_than_the_model_embedding(tmp_path: Path) -> None:
    model = _model_folder(tmp_path / "model", vocab=64)
    other = tmp_path / "other-tokenizer"
    other.mkdir()
    _write_tokenizer(other, 200)
    line = _refusal(_cli(_eval("run", f"hf:model={model},tokenizer={other}"), tmp_path))
    assert "the tokenizer" in line and "has 200 tokens" in line
    assert "embeddings for 64 (config.json vocab_size)" in line
    assert "do not belong together" in line
    assert list((tmp_path / "cwd").iterdir()) == []


@NEEDS_HF
@pytest.mark.parametrize("hub", ["offline", "closed-port"])
def test_a_hub_id_that_is_not_cached_and_the_hub_out_of_reach(tmp_path: Path, hub: str) -> None:
    env = (
        {"HF_HUB_OFFLINE": "1"} if hub == "offline"
        else {"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": f"http://127.0.0.1:{_closed_port()}"}
    )
    line = _refusal(_cli(_eval("run", "hf:model=Qwen/Qwen3-0.6B"), tmp_path, **env))
    assert "model 'Qwen/Qwen3-0.6B' was not found locally and the hub cannot be reached" in line
    assert "local path" in line and "HF_HOME" in line
    assert ("HF_HUB_OFFLINE is set" in line) == (hub == "offline")
    assert list((tmp_path / "cwd").iterdir()) == []


@NEEDS_HF
def test_a_hub_id_in_the_local_cache_passes_offline(tmp_path: Path) -> None:
    snapshot = tmp_path / "hf-home" / "hub" / "models--Org--tiny" / "snapshots" / ("a" * 40)
    _model_folder(snapshot)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("a" * 40)
    code = ("from agentenvs.policy.preflight import check_model_policy; "
            "check_model_policy('hf:model=Org/tiny'); print('passed')")
    proc = subprocess.run([sys.executable, "-c", code], env=_env(tmp_path), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "passed", proc.stderr[-2000:]
    # the same id, not cached: refused
    line = _refusal(_cli(_eval("run", "hf:model=Org/tiny2"), tmp_path))
    assert "model 'Org/tiny2' was not found locally" in line


@pytest.mark.parametrize(
    ("policy", "hidden", "extra"),
    [pytest.param("hf:model=/m", "transformers", "hf", marks=NEEDS_HF), ("hf:model=/m", "torch", "hf"),
     ("vllm:model=/m", "vllm", "vllm")],
)
def test_a_missing_extra_names_what_to_install(
    tmp_path: Path, policy: str, hidden: str, extra: str
) -> None:
    # the module is made unimportable for the command's process alone
    proc = _cli(_eval("run", policy), tmp_path, prelude=f"import sys; sys.modules[{hidden!r}] = None")
    line = _refusal(proc)
    assert f"{hidden!r}" in line and "not installed" in line
    assert f"pip install 'agentenvs[{extra}]'" in line
    assert list((tmp_path / "cwd").iterdir()) == []


# ---------------------------------------------------------------- OpenAI-compatible servers
@pytest.fixture
def model_server() -> Iterator[str]:
    """A server listing one model, ``served-model``, to requests with key ``right-key``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the handler's name
            if self.headers.get("Authorization") != "Bearer right-key":
                self.send_response(401)
                self.end_headers()
                return
            body = json.dumps({"object": "list", "data": [{"id": "served-model"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_an_endpoint_that_refuses_the_connection(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    line = _refusal(_cli(_eval("run", f"openai:base_url={url},model=m"), tmp_path))
    assert f"cannot reach the model server at {url} (connection refused)" in line
    assert list((tmp_path / "cwd").iterdir()) == []


def test_an_endpoint_key_missing_or_wrong_and_a_model_it_does_not_serve(
    tmp_path: Path, model_server: str
) -> None:
    spec = f"openai:base_url={model_server},model=served-model"
    line = _refusal(_cli(_eval("run", spec), tmp_path))
    assert "needs a key (HTTP 401) and none is set" in line
    line = _refusal(_cli(_eval("run", spec), tmp_path, AGENTENVS_MODEL_API_KEY="wrong-key"))
    assert "refused the key (HTTP 401)" in line and "wrong-key" not in line
    line = _refusal(_cli(_eval("run", f"openai:base_url={model_server},model=served-modle"),
                         tmp_path, AGENTENVS_MODEL_API_KEY="right-key"))
    assert "does not serve model 'served-modle'; did you mean 'served-model'?" in line
    assert list((tmp_path / "cwd").iterdir()) == []


# ---------------------------------------------------------------- the other commands
@NEEDS_HF
def test_likelihood_and_serve_model_check_their_models_too(tmp_path: Path) -> None:
    run = tmp_path / "cwd" / "run"
    proc = _cli(_eval(str(run), "frozenlake/random", "--workers", "0"), tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = _refusal(_cli(["likelihood", str(run), "--model-a", "hf:model=/nonexistent",
                          "--out", "lk"], tmp_path))
    assert line.startswith("agentenvs likelihood: error: --model-a hf:model=/nonexistent: ")
    assert "does not exist" in line and not (tmp_path / "cwd" / "lk").exists()
    line = _refusal(_cli(["serve-model", "--model", "hf:model=Org/not-cached", "--port", "0"],
                         tmp_path))
    assert line.startswith("agentenvs serve-model: error: --model hf:model=Org/not-cached: ")
    assert "not found locally and the hub cannot be reached" in line


# ---------------------------------------------------------------- a load that fails in a worker
PLUGIN = textwrap.dedent(
    """
    import multiprocessing
    import os
    import signal

    from agentenvs.envs.frozenlake.env import format_action
    from agentenvs.policy.base import ScriptedPolicy
    from agentenvs.policy.registry import register_policy


    class LoadsOnlyHere(ScriptedPolicy):
        '''Builds in the command's process; in a worker it fails as a model load can.'''

        conditions_on_budget = False

        def __init__(self, failure: str = "raise") -> None:
            if multiprocessing.parent_process() is None:
                return
            if failure == "kill":  # the OOM killer's way: nothing is reported
                os.kill(os.getpid(), signal.SIGKILL)
            raise OSError("weights file shard-2 is truncated\\n(expected 4096 bytes)")

        def act(self, conversation, rng):
            return format_action(1)


    register_policy("plugin/loads-only-here", f"{__name__}:LoadsOnlyHere")
    """
)


def test_a_failed_load_in_a_worker_is_one_line_and_the_corrected_command_runs(
    tmp_path: Path,
) -> None:
    (tmp_path / "load_plugin.py").write_text(PLUGIN)
    proc = _cli(_eval("run", "plugin/loads-only-here", "--import", "load_plugin"), tmp_path)
    line = _refusal(proc)
    assert "policy plugin/loads-only-here failed to load: OSError: weights file shard-2 is " \
        "truncated (expected 4096 bytes)" in line
    assert "worker processes died" not in line
    run = tmp_path / "cwd" / "run"
    assert not (run / "trajectories.jsonl").exists() or not (run / "trajectories.jsonl").read_text()
    # the corrected command, another policy, into the same folder
    proc = _cli(_eval("run", "frozenlake/random"), tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = (run / "trajectories.jsonl").read_text().splitlines()
    assert len(records) == 2 and all(json.loads(r)["policy"] == "frozenlake/random" for r in records)
    assert json.loads((run / "manifest.json").read_text())["config"]["policy"] == "frozenlake/random"


def test_a_worker_killed_while_loading_stays_a_lost_worker(tmp_path: Path) -> None:
    (tmp_path / "load_plugin.py").write_text(PLUGIN)
    proc = _cli(_eval("run", "plugin/loads-only-here:failure=kill", "--import", "load_plugin",
                      "--max-fault-retries", "0", "--fault-backoff", "0"), tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "died" in proc.stderr and "failed to load" not in proc.stderr
    faults = (tmp_path / "cwd" / "run" / "faults.jsonl").read_text().splitlines()
    assert [json.loads(f)["fault"]["kind"] for f in faults] == ["worker"]


def test_a_model_folder_that_fails_to_load_in_a_worker(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    pytest.importorskip("torch")
    model = _model_folder(tmp_path / "model")  # passes the checks; its weights do not load
    line = _refusal(_cli(_eval("run", f"hf:model={model},device=cpu"), tmp_path))
    assert f"policy hf:model={model},device=cpu failed to load: " in line
    assert "worker processes died" not in line


def test_a_folder_with_trajectories_of_another_policy_is_refused(tmp_path: Path) -> None:
    proc = _cli(_eval("run", "frozenlake/random", "--workers", "0"), tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = _refusal(_cli(_eval("run", "frozenlake/oracle", "--workers", "0"), tmp_path))
    assert "run holds 2 trajectories of policy 'frozenlake/random'; this run asks policy " \
        "'frozenlake/oracle'" in line
    assert "give a new --out" in line
    assert len((tmp_path / "cwd" / "run" / "trajectories.jsonl").read_text().splitlines()) == 2
