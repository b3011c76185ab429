"""``agentenvs serve-model`` under a hostile client on loopback: what each attack costs the
server, and the latency of a small request beside a large one.

Runs the command as a subprocess (the tiny test model, one torch thread) from the source
tree ``--src`` (default: this checkout), so that the same script measures an older
checkout: ``python benchmarks/bench_serve_model_hostile.py --src /path/to/old``.

1. Threads (``/proc/<pid>/task``) with 300 half-open connections (a request begun, never
   finished), and whether a well-behaved request is answered meanwhile.
2. Memory (``VmRSS``) grown while a client sends 300 MB of a body announced as 2 GB.
3. Latency of a small request (one sample, 4 tokens) sent 0.5 s after a large one
   (16 samples, 512 tokens) started, and the large one's; then the small one alone.
4. The answer to ``n=200000``, ``max_tokens=10**12``, no key, and a foreign ``Origin``
   (5 s to answer: "no answer" means the server took the request on).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "policy"))
from tiny_lm import build_model, build_tokenizer  # noqa: E402

MESSAGES = [{"role": "user", "content": "Map:\nP_\n_G\nWhere do you go?"}]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


class Client:
    def __init__(self, port: int, key: str) -> None:
        self.port, self.key = port, key

    def ask(self, body: dict[str, Any] | None = None, *, timeout: float = 600,
            headers: dict[str, str] | None = None, key: bool = True) -> tuple[int | str, float]:
        start = time.perf_counter()
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        sent = {"Content-Type": "application/json", **(headers or {})}
        if key:
            sent["Authorization"] = f"Bearer {self.key}"
        payload = json.dumps(body or {"messages": MESSAGES, "max_tokens": 4}).encode()
        try:
            connection.request("POST", "/v1/chat/completions", payload, sent)
            response = connection.getresponse()
            response.read()
            return response.status, time.perf_counter() - start
        except (TimeoutError, OSError):
            return "no answer", time.perf_counter() - start
        finally:
            connection.close()


def half_open(pid: int, client: Client) -> None:
    before = threads(pid)
    sockets = []
    for _ in range(300):
        sock = socket.create_connection(("127.0.0.1", client.port), timeout=30)
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Le")
        sockets.append(sock)
    status, seconds = client.ask(timeout=60)
    during = threads(pid)
    for sock in sockets:
        sock.close()
    print(f"half-open x300: threads {before} -> {during}; a good request: {status} "
          f"in {seconds:.2f} s")


def lying_length(pid: int, client: Client) -> None:
    before = rss_mib(pid)
    sent = 0
    chunk = b"x" * (1 << 20)
    with socket.create_connection(("127.0.0.1", client.port), timeout=30) as sock:
        sock.sendall(
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{client.port}\r\n"
            f"Authorization: Bearer {client.key}\r\nContent-Length: {2 * 10**9}\r\n\r\n".encode()
        )
        try:
            while sent < 300 * len(chunk):
                sock.sendall(chunk)
                sent += len(chunk)
        except OSError:
            pass
        time.sleep(0.5)
        after = rss_mib(pid)
    status, _ = client.ask(timeout=60)
    print(f"Content-Length 2 GB: {sent >> 20} MiB sent, RSS {before:.0f} -> {after:.0f} MiB "
          f"(+{after - before:.0f}); a good request after: {status}")


def fairness(client: Client) -> None:
    big = {"messages": MESSAGES, "n": 16, "max_tokens": 512, "seed": 1}
    small = {"messages": MESSAGES, "n": 1, "max_tokens": 4, "seed": 1}
    alone = [client.ask(small)[1] for _ in range(3)]
    result: dict[str, float] = {}
    started = time.perf_counter()

    def run_big() -> None:
        client.ask(big)
        result["large"] = time.perf_counter() - started

    worker = threading.Thread(target=run_big)
    worker.start()
    time.sleep(0.5)
    status, seconds = client.ask(small)
    result["small_done_at"] = time.perf_counter() - started
    worker.join()
    print(f"small alone: {min(alone):.3f} s; beside a large one: {seconds:.2f} s ({status}), "
          f"done at {result['small_done_at']:.2f} s; the large one done at "
          f"{result['large']:.2f} s")


def caps(client: Client) -> None:
    for name, body in (("n=200000", {"messages": MESSAGES, "n": 200000}),
                       ("max_tokens=10**12", {"messages": MESSAGES, "max_tokens": 10**12})):
        status, seconds = client.ask(body, timeout=5)
        print(f"{name}: {status} in {seconds:.2f} s")
    print(f"no key: {client.ask(timeout=5, key=False)[0]}")
    print(f"Origin http://evil.example: "
          f"{client.ask(timeout=5, headers={'Origin': 'http://evil.example'})[0]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=ROOT, help="the source tree to serve from")
    args = parser.parse_args()
    key = secrets.token_urlsafe(24)
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer = build_tokenizer()
        build_model(tokenizer).save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        env = {**os.environ, "PYTHONPATH": str(args.src), "AGENTENVS_MODEL_API_KEY": key}
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentenvs.cli", "serve-model", "--model",
             f"hf:model={tmp},device=cpu,threads=1,max_new_tokens=8", "--port", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=args.src,
        )
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            port = int(line.rsplit(":", 1)[1].split("/")[0])
            client = Client(port, key)
            client.ask()  # warm-up
            print(f"source: {args.src}")
            half_open(proc.pid, client)
            lying_length(proc.pid, client)
            fairness(client)
            caps(client)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()


if __name__ == "__main__":
    main()
