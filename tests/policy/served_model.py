"""``agentenvs serve-model`` as a subprocess on a free loopback port, for the tests that
speak to the real server: the protocol tests and the integrations' tests."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path


class ServedModel:
    """``agentenvs serve-model --model hf:model=DIR,...`` until ``close()``: ``url`` is its
    ``/v1`` base URL, ``name`` the model name it answers to."""

    def __init__(self, model_dir: Path | str, name: str = "tiny", options: str = "") -> None:
        self.name = name
        spec = f"hf:model={model_dir},device=cpu,threads=1{',' + options if options else ''}"
        self.spec = spec
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agentenvs.cli", "serve-model", "--model", spec,
             "--port", "0", "--name", name],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # blocks until the server is up (or the command failed)
        if not line.startswith("serving "):
            self.proc.kill()
            _, err = self.proc.communicate(timeout=60)
            raise RuntimeError(f"serve-model did not start: {line!r} {err[-3000:]}")
        self.url = line.split(" at ", 1)[1].strip()
        self.proc.stdout.readline()  # "use it as: openai:..."

    @property
    def root(self) -> str:
        """The server's address without ``/v1``."""
        return self.url.removesuffix("/v1")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.communicate(timeout=60)

    def __enter__(self) -> ServedModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
