"""``agentenvs serve-model`` as a subprocess on a free loopback port, for the tests that
speak to the real server: the protocol tests and the integrations' tests.

Every server of a test process takes one key, ``TEST_KEY``, through
``AGENTENVS_MODEL_API_KEY``; opening one sets that variable here too, so the ``openai``
policy of the tests sends it, as a user's would."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

KEY_ENV = "AGENTENVS_MODEL_API_KEY"
#: the key of this process's servers
TEST_KEY = secrets.token_urlsafe(24)


class ServedModel:
    """``agentenvs serve-model --model hf:model=DIR,...`` until ``close()``: ``url`` is its
    ``/v1`` base URL, ``name`` the model name it answers to."""

    def __init__(
        self, model_dir: Path | str, name: str = "tiny", options: str = "",
        args: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.api_key = TEST_KEY
        os.environ[KEY_ENV] = TEST_KEY
        spec = f"hf:model={model_dir},device=cpu,threads=1{',' + options if options else ''}"
        self.spec = spec
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agentenvs.cli", "serve-model", "--model", spec,
             "--port", "0", "--name", name, *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, KEY_ENV: TEST_KEY},
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # blocks until the server is up (or the command failed)
        if not line.startswith("serving "):
            self.proc.kill()
            _, err = self.proc.communicate(timeout=60)
            raise RuntimeError(f"serve-model did not start: {line!r} {err[-3000:]}")
        self.url = line.split(" at ", 1)[1].strip()
        self.proc.stdout.readline()  # "use it as: openai:..."
        self.proc.stdout.readline()  # "api key: ..."

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
