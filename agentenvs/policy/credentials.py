"""API keys: made, kept in a private file, read from where they are kept, and never
written down where a run writes.

- ``new_api_key`` and ``write_key_file``: the key ``agentenvs serve-model`` makes when
  none is given, kept in a file only its user can read (``0600``, in a ``0700`` directory
  of this user's: ``$XDG_RUNTIME_DIR/agentenvs`` or ``/tmp/agentenvs-<uid>``).
- ``resolve_api_key``: the key a client sends, from the spec's ``api_key`` (inline: it
  works, but is shown as ``***``), ``api_key_env=NAME`` or ``api_key_file=PATH``, else
  ``AGENTENVS_MODEL_API_KEY``, else ``OPENAI_API_KEY``.
- ``redact_spec`` and ``redact``: a policy spec with its secret values as ``***``; any
  text (or JSON-like data) with every secret this process has seen replaced by ``***``.
  Run manifests, fault records, logs and error messages go through them.
- ``hide_argv``: a secret given on the command line taken out of ``sys.argv`` and, where
  ``setproctitle`` is installed, out of the process list.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

#: the spec keys whose values are secrets
SECRET_KEYS = frozenset({"api_key"})
#: what a secret is shown as
MASK = "***"
#: the environment variable a key for ``agentenvs serve-model`` is read from (both sides)
KEY_ENV = "AGENTENVS_MODEL_API_KEY"
#: read after ``KEY_ENV`` by clients (OpenAI's own name)
OPENAI_KEY_ENV = "OPENAI_API_KEY"
#: secrets shorter than this are masked in specs but not searched for in free text (a
#: two-letter key would mask every word holding its letters)
MIN_SEARCHED = 8

_seen: set[str] = set()
_seen_lock = threading.Lock()


def remember_secret(value: str | None) -> None:
    """Mask ``value`` wherever ``redact`` looks from now on (in this process)."""
    if value and len(value) >= MIN_SEARCHED:
        with _seen_lock:
            _seen.add(value)


def new_api_key() -> str:
    """A new random key (32 bytes, URL-safe text)."""
    key = secrets.token_urlsafe(32)
    remember_secret(key)
    return key


# ---------------------------------------------------------------- files
def runtime_path() -> Path:
    """Where this user's private directory for keys and tokens is (``$XDG_RUNTIME_DIR/
    agentenvs`` where that is this user's, else ``/tmp/agentenvs-UID``); not made here."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and Path(base).is_dir() and os.stat(base).st_uid == os.getuid():
        return Path(base) / "agentenvs"
    return Path("/tmp") / f"agentenvs-{os.getuid()}"


def runtime_dir() -> Path:
    """This user's private directory for keys (made ``0700`` where missing; refused
    where another user owns it or others may enter it)."""
    path = runtime_path()
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        pass
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise PermissionError(f"{path} is not a directory of this user's: keys are not kept there")
    if info.st_mode & 0o077:
        raise PermissionError(
            f"{path} may be entered by other users (mode {stat.S_IMODE(info.st_mode):o}): "
            "keys are not kept there; make it 0700"
        )
    return path


def write_key_file(key: str, name: str) -> Path:
    """Write ``key`` to ``runtime_dir()/name`` readable by this user alone (``0600``),
    replacing an older file of that name."""
    path = runtime_dir() / name
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(key + "\n")
    return path


def read_key_file(path: str | os.PathLike[str]) -> str:
    """The key in a file (its first line); refused where others may read the file."""
    path = Path(path).expanduser()
    info = path.stat()
    if info.st_mode & 0o077:
        raise PermissionError(
            f"the key file {path} may be read by other users (mode "
            f"{stat.S_IMODE(info.st_mode):o}): chmod 600 it"
        )
    lines = path.read_text().strip().splitlines()
    key = lines[0].strip() if lines else ""
    if not key:
        raise ValueError(f"the key file {path} is empty")
    remember_secret(key)
    return key


def resolve_api_key(
    api_key: str | None = None, api_key_env: str | None = None, api_key_file: str | None = None
) -> str | None:
    """The key a client sends: ``api_key``, else the variable ``api_key_env`` names, else
    the file ``api_key_file``, else ``AGENTENVS_MODEL_API_KEY``, else ``OPENAI_API_KEY``
    (``None``: no key). Given more than one way, refused."""
    given = [v for v in (api_key, api_key_env, api_key_file) if v is not None]
    if len(given) > 1:
        raise ValueError("give the key one way: api_key, api_key_env or api_key_file")
    if api_key is not None:
        remember_secret(api_key)
        return api_key
    if api_key_env is not None:
        api_key_env = str(api_key_env)
        value = os.environ.get(api_key_env)
        if not value:
            raise ValueError(f"api_key_env={api_key_env}: that environment variable is not set")
        remember_secret(value)
        return value
    if api_key_file is not None:
        return read_key_file(api_key_file)
    for name in (KEY_ENV, OPENAI_KEY_ENV):
        value = os.environ.get(name)
        if value:
            remember_secret(value)
            return value
    return None


# ---------------------------------------------------------------- redaction
def redact_spec(spec: str) -> str:
    """``spec`` with the values of its secret keys as ``***`` (a spec's other values, and
    a text that is not a spec, unchanged)."""
    if not isinstance(spec, str) or ":" not in spec:
        return spec
    name, _, rest = spec.partition(":")
    parts = []
    for part in rest.split(","):
        key, sep, value = part.partition("=")
        if sep and key.strip() in SECRET_KEYS:
            remember_secret(value.strip())
            part = f"{key}={MASK}"
        parts.append(part)
    return f"{name}:{','.join(parts)}"


def without_secrets(spec: str) -> str:
    """``spec`` without its secret parts (``api_key=...`` left out, not masked), for a
    message whose text goes on after the spec: ``redact`` would take that text for the
    value of a masked key at the spec's end."""
    if not isinstance(spec, str) or ":" not in spec:
        return spec
    name, _, rest = spec.partition(":")
    kept = [p for p in rest.split(",") if p.partition("=")[0].strip() not in SECRET_KEYS]
    return f"{name}:{','.join(kept)}" if kept else name


def redact(value: Any) -> Any:
    """``value`` (text, or lists and dicts of it) with every secret seen as ``***`` and
    specs' secret values masked."""
    if isinstance(value, str):
        text = redact_spec(value) if "api_key=" in value else value
        with _seen_lock:
            known = sorted(_seen, key=len, reverse=True)
        for secret in known:
            if secret in text:
                text = text.replace(secret, MASK)
        return text
    if isinstance(value, dict):
        return {redact(k): redact(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact(v) for v in value)
    return value


def redact_bytes(data: bytes) -> bytes:
    """Encoded text (a JSON line) with every secret seen, as written or JSON-escaped, as
    ``***``: one pass a secret, cheap enough for every line a run writes."""
    if not _seen:
        return data  # no secret in this process: nothing to look for
    with _seen_lock:
        known = sorted(_seen, key=len, reverse=True)
    for secret in known:
        forms = {secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}
        for form in (f.encode() for f in forms):
            if form in data:
                data = data.replace(form, MASK.encode())
    return data


def holds_secret(spec: str) -> bool:
    """Whether a spec gives a secret inline."""
    return redact_spec(spec) != spec


def hide_argv(argv: list[str] | None = None) -> bool:
    """Mask inline secrets in ``sys.argv`` (``--api-key VALUE``, specs' ``api_key=``) and,
    with ``setproctitle`` installed, in the process title others see; without it, warn
    that they stay visible in the process list. True where something was masked."""
    argv = sys.argv if argv is None else argv
    masked, hide_next = [], False
    for arg in argv:
        if hide_next:
            remember_secret(arg)
            masked.append(MASK)
            hide_next = False
        elif arg == "--api-key":
            masked.append(arg)
            hide_next = True
        elif arg.startswith("--api-key="):
            remember_secret(arg.partition("=")[2])
            masked.append(f"--api-key={MASK}")
        else:
            masked.append(redact_spec(arg) if "api_key=" in arg else arg)
    if masked == argv:
        return False
    argv[:] = masked
    try:
        import setproctitle  # type: ignore[import-not-found]
    except ImportError:
        warnings.warn(
            "a key given on the command line stays visible in the process list (any local "
            f"user may read it): give it by environment ({KEY_ENV}, or api_key_env=NAME in "
            "a spec) or by file (api_key_file=PATH)",
            stacklevel=2,
        )
    else:
        setproctitle.setproctitle(" ".join(masked))
    return True
