"""What a model policy's spec needs, checked in the calling process before any worker
starts or any run folder is written, each refusal one line (``ModelCheckError``).

``check_model_policy(spec)`` for the model policies (``hf``, ``vllm``, ``openai``):

- the extra it imports is installed (``torch``/``transformers`` for ``hf``, ``vllm`` for
  ``vllm``, ``transformers`` for an ``openai`` spec with ``tokenizer=``), found without
  importing it;
- a model given as a path is a folder with ``config.json`` (valid JSON) and weights
  (``*.safetensors``, ``*.bin``, ``*.pt``, ``*.pth``, ``*.h5``, ``*.msgpack``), and its
  tokenizer (the folder's, or ``tokenizer=``) has tokenizer files;
- a hub id is in the local cache (config and weights), or the hub answers for it within
  ``timeout`` seconds: one request, never the minutes of retries a load would take. With
  ``HF_HUB_OFFLINE`` set it must be cached;
- the tokenizer fits the model: a tokenizer with more tokens than the model's embedding
  has rows (``vocab_size`` in ``config.json``) would sample ids the model has no row for.
  Read from ``tokenizer.json`` (or ``vocab.json``), so nothing heavy is imported; a
  tokenizer in another format is not counted. A tokenizer without a chat template is not
  refused: the policies render such a model's prompts with a plain ChatML fallback
  (``agentenvs.policy.chat``);
- an ``openai`` endpoint answers ``GET /v1/models`` within ``timeout`` seconds (a
  connection refused or no answer: refused), accepts the key (401/403: the key is
  missing or wrong) and lists the model (a server that lists none, or has no such
  route, is taken at its word).

These checks read files and ask one question of a server; they load no weights, so a
model that passes can still fail to load (memory, a corrupt file, code it needs): the
runner reports that as the model failing to load, with the worker's error
(``agentenvs.eval.runner.PolicyLoadError``).
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import os
import re
import socket
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from agentenvs.core.suggest import UsageError, did_you_mean, one_line
from agentenvs.policy.credentials import without_secrets
from agentenvs.policy.registry import parse_policy_spec

#: seconds the hub or an endpoint has to answer the one question asked of it
DEFAULT_TIMEOUT = 5.0
#: the files a model folder holds its weights in
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".h5", ".msgpack")
#: a hub id as the hub spells them: ``name`` or ``owner/name``
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}(/[\w.-]{1,96})?$")
#: what each model policy imports when it is built: (module, extra)
EXTRAS = {
    "hf": (("torch", "hf"), ("transformers", "hf")),
    "vllm": (("vllm", "vllm"), ("transformers", "hf")),
}


class ModelCheckError(UsageError):
    """A model policy that cannot work as given: the message is one line saying what is
    wrong and how to put it right."""


def check_model_policy(spec: str, option: str = "--policy", *, timeout: float = DEFAULT_TIMEOUT) -> None:
    """Refuse, with a one-line ``ModelCheckError`` starting with ``option``, a model
    policy spec whose model, tokenizer, extra or endpoint cannot work (see the module
    docstring); any other spec passes untouched."""
    name, kwargs = parse_policy_spec(spec)
    try:
        if name in EXTRAS:
            for module, extra in EXTRAS[name]:
                require_installed(module, extra, f"policy {name}")
            model = kwargs.get("model")
            if isinstance(model, str | int | float) and not isinstance(model, bool):
                tokenizer = kwargs.get("tokenizer")
                check_model_source(
                    str(model), None if tokenizer is None else str(tokenizer), timeout=timeout
                )
        elif name == "openai":
            if kwargs.get("tokenizer") is not None:
                require_installed("transformers", "hf", "policy openai with tokenizer=")
                check_tokenizer_source(str(kwargs["tokenizer"]), timeout=timeout)
            check_endpoint(kwargs, timeout=timeout)
    except ModelCheckError as exc:
        raise ModelCheckError(f"{option} {without_secrets(spec)}: {exc}") from None


def require_installed(module: str, extra: str, what: str) -> None:
    """Refuse where ``module`` cannot be imported (looked up, not imported)."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ModelCheckError(
            f"{what} needs {module!r}, which is not installed here: "
            f"pip install 'agentenvs[{extra}]'"
        )


# ---------------------------------------------------------------- models and tokenizers
def check_model_source(model: str, tokenizer: str | None = None, *, timeout: float) -> None:
    """A model path or hub id that a worker can load, and its tokenizer."""
    folder = _local_folder(model, "model")
    local = folder is not None
    if folder is None:
        folder = _hub_folder(model, timeout=timeout)
    if folder is not None:
        _check_model_folder(folder)
    if tokenizer is not None:
        tokenizer_folder = check_tokenizer_source(tokenizer, timeout=timeout)
    else:
        tokenizer_folder = folder
        if folder is not None and local:  # a hub cache may hold the weights alone
            _check_tokenizer_folder(folder, "model")
    if folder is not None and tokenizer_folder is not None:
        _check_vocab(folder, tokenizer_folder)


def check_tokenizer_source(tokenizer: str, *, timeout: float) -> Path | None:
    """A tokenizer path or hub id: its folder where it is local (or cached), else None."""
    folder = _local_folder(tokenizer, "tokenizer")
    if folder is not None:
        _check_tokenizer_folder(folder, "tokenizer")
        return folder
    return _hub_folder(tokenizer, timeout=timeout, what="tokenizer")


def _looks_like_path(ref: str) -> bool:
    return ref.startswith(("/", ".", "~")) or not _HUB_ID.match(ref)


def _local_folder(ref: str, what: str) -> Path | None:
    """The folder ``ref`` names on this machine; None where ``ref`` is a hub id that is no
    local path. A path that does not exist, or is a file, is refused."""
    path = Path(ref).expanduser()
    if path.is_dir():
        return path
    if path.exists():
        raise ModelCheckError(
            f"{what} {ref} is a file, not a model folder (a folder with config.json, the "
            "weights and the tokenizer, as save_pretrained writes it)"
        )
    if not _looks_like_path(ref):
        return None
    parent = path.parent
    while not parent.is_dir() and parent != parent.parent:
        parent = parent.parent
    raise ModelCheckError(
        f"{what} path {ref} does not exist (the closest folder that does: {parent}); give "
        "the folder save_pretrained wrote, or a hub id such as Qwen/Qwen3-0.6B"
    )


def _check_model_folder(folder: Path) -> None:
    config = folder / "config.json"
    if not config.is_file():
        inside = sorted(p.name for p in folder.iterdir() if (p / "config.json").is_file())
        fix = (
            f"give one of its subfolders that is: {', '.join(inside[:4])}" if inside
            else "give the folder save_pretrained wrote"
        )
        raise ModelCheckError(f"{folder} has no config.json, so it is not a model folder: {fix}")
    _read_json(config)
    if not any(p.name.endswith(WEIGHT_SUFFIXES) for p in folder.iterdir()):
        raise ModelCheckError(
            f"{folder} has a config.json but no weights (*.safetensors or *.bin): not a "
            "saved model (save it with save_pretrained, or give the folder that holds them)"
        )


def _check_tokenizer_folder(folder: Path, what: str) -> None:
    names = [p.name for p in folder.iterdir()]
    if not any("token" in n or "vocab" in n or n.endswith((".model", ".tiktoken")) for n in names):
        fix = "give tokenizer=PATH" if what == "model" else "give the tokenizer's folder"
        raise ModelCheckError(
            f"{what} folder {folder} holds no tokenizer (no tokenizer.json, "
            f"tokenizer_config.json or vocabulary file): {fix}"
        )


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelCheckError(f"{path} cannot be read as JSON: {one_line(exc)}") from None


def model_vocab_size(folder: Path) -> int | None:
    """Rows of the model's input embedding as its ``config.json`` gives them (None: it
    does not say)."""
    config = _read_json(folder / "config.json")
    for part in (config, config.get("text_config") or {}, config.get("llm_config") or {}):
        value = part.get("vocab_size") if isinstance(part, dict) else None
        if isinstance(value, int) and value > 0:
            return value
    return None


def tokenizer_size(folder: Path) -> int | None:
    """One past the largest token id of the tokenizer in ``folder`` (its vocabulary and
    added tokens), from ``tokenizer.json`` or ``vocab.json`` + ``added_tokens.json``;
    None where it is in another format."""
    ids: list[int] = []
    fast = folder / "tokenizer.json"
    if fast.is_file():
        data = _read_json(fast)
        vocab = (data.get("model") or {}).get("vocab")
        if isinstance(vocab, dict):
            ids += [v for v in vocab.values() if isinstance(v, int)]
        elif isinstance(vocab, list):  # unigram: a list of (piece, score)
            ids.append(len(vocab) - 1)
        ids += [t["id"] for t in data.get("added_tokens") or [] if isinstance(t.get("id"), int)]
    elif (folder / "vocab.json").is_file():
        vocab = _read_json(folder / "vocab.json")
        ids += [v for v in vocab.values() if isinstance(v, int)]
        added = folder / "added_tokens.json"
        if added.is_file():
            ids += [v for v in _read_json(added).values() if isinstance(v, int)]
    return max(ids) + 1 if ids else None


def _check_vocab(model_folder: Path, tokenizer_folder: Path) -> None:
    rows, tokens = model_vocab_size(model_folder), tokenizer_size(tokenizer_folder)
    if rows is not None and tokens is not None and tokens > rows:
        raise ModelCheckError(
            f"the tokenizer ({tokenizer_folder}) has {tokens} tokens but the model "
            f"({model_folder}) has embeddings for {rows} (config.json vocab_size): they do "
            "not belong together; give the model's own tokenizer (tokenizer=PATH)"
        )


# ---------------------------------------------------------------- the hub
def _offline() -> bool:
    return any(
        os.environ.get(name, "").strip().lower() in ("1", "on", "yes", "true")
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def _hub_folder(ref: str, *, timeout: float, what: str = "model") -> Path | None:
    """The cached snapshot folder of hub id ``ref`` where its config (model) or
    tokenizer files are cached; else None once the hub says it has ``ref``. Refused where
    neither can be told: not cached and the hub unreachable, offline, or without it."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        raise ModelCheckError(
            f"{what} {ref} is no local folder, and loading it from the hub needs "
            "huggingface_hub: pip install 'agentenvs[hf]', or give a local path"
        ) from None
    for filename in ("config.json", "tokenizer_config.json", "tokenizer.json"):
        cached = try_to_load_from_cache(ref, filename)
        if isinstance(cached, str):
            folder = Path(cached).parent
            has_weights = any(p.name.endswith(WEIGHT_SUFFIXES) for p in folder.iterdir())
            if what == "tokenizer" or has_weights:
                return folder
            break  # the config alone: the weights must come from the hub
    fix = (
        f"give a local path ({what}=/path/to/folder), point HF_HOME at a cache that holds "
        "it, or run where the hub can be reached"
    )
    if _offline():
        raise ModelCheckError(
            f"{what} {ref!r} was not found locally and the hub cannot be reached "
            f"(HF_HUB_OFFLINE is set): {fix} (and unset HF_HUB_OFFLINE)"
        )
    from huggingface_hub import HfApi

    try:
        HfApi().model_info(ref, timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - the hub client's errors vary by version
        status = getattr(getattr(exc, "response", None), "status_code", None)
        kind = type(exc).__name__
        if kind == "RepositoryNotFoundError" or status == 404:
            raise ModelCheckError(
                f"{what} {ref!r} is neither a local folder nor a model on the hub (or it is "
                "private: set HF_TOKEN); check the name or give a local path"
            ) from None
        if kind == "GatedRepoError" or status in (401, 403):
            raise ModelCheckError(
                f"{what} {ref!r} is gated or private on the hub (HTTP {status}): accept its "
                "terms and set HF_TOKEN, or give a local path"
            ) from None
        raise ModelCheckError(
            f"{what} {ref!r} was not found locally and the hub cannot be reached "
            f"({kind}: {one_line(exc)[:160]}): {fix}"
        ) from None
    return None


# ---------------------------------------------------------------- OpenAI-compatible servers
def check_endpoint(kwargs: dict[str, Any], *, timeout: float) -> None:
    """One ``GET {base_url}/models``: the server answers, takes the key, serves the model."""
    from agentenvs.policy.credentials import resolve_api_key

    base_url, model = str(kwargs.get("base_url", "")), str(kwargs.get("model", ""))
    if not base_url.startswith(("http://", "https://")):
        raise ModelCheckError(f"base_url must be an http(s) URL, got {base_url!r}")
    try:
        key = resolve_api_key(
            kwargs.get("api_key"), kwargs.get("api_key_env"), kwargs.get("api_key_file")
        )
    except (ValueError, OSError) as exc:
        raise ModelCheckError(one_line(exc)) from None
    base = base_url.rstrip("/")
    base = base if base.endswith("/v1") else f"{base}/v1"
    headers = {"Accept": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(f"{base}/models", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read(4 << 20)
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            if key:
                raise ModelCheckError(
                    f"the model server at {base} refused the key (HTTP {exc.code}): check "
                    "the key in api_key_env, api_key_file or AGENTENVS_MODEL_API_KEY"
                ) from None
            raise ModelCheckError(
                f"the model server at {base} needs a key (HTTP {exc.code}) and none is set: "
                "give api_key_env=NAME or api_key_file=PATH, or set AGENTENVS_MODEL_API_KEY"
            ) from None
        if exc.code in (404, 405, 501):
            return  # no model listing on this server: its first request will tell
        raise ModelCheckError(
            f"the model server at {base} answered HTTP {exc.code} to GET /models: is it "
            "up and is base_url its OpenAI-compatible root?"
        ) from None
    except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, socket.timeout | TimeoutError):
            why = f"no answer within {timeout:g} s"
        elif isinstance(reason, ConnectionRefusedError):
            why = "connection refused"
        else:
            why = one_line(reason)
        raise ModelCheckError(
            f"cannot reach the model server at {base} ({why}): start it (e.g. agentenvs "
            "serve-model) or fix base_url"
        ) from None
    try:
        listing = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return  # not a listing: the first request will tell
    entries = listing.get("data") if isinstance(listing, dict) else None
    served = [str(e.get("id")) for e in entries or [] if isinstance(e, dict) and e.get("id")]
    if served and model not in served:
        raise ModelCheckError(
            f"the model server at {base} does not serve model {model!r}"
            f"{did_you_mean(model, served)} (it serves: {', '.join(served[:8])})"
        )
