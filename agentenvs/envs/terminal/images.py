"""Which image a task's ``FROM`` gets, online and offline, and the offline build context.

Online (an engine that can pull), a Dockerfile is built as written. Offline (an
air-gapped cluster, or these machines), every ``FROM`` must resolve to an image the
engine already has: the image itself when present, else its local equivalent from the
image map (official base names -> images built offline by ``sandboxes/build_images.sh``,
Debian 13 "trixie" giving Python 3.13 as the official ``python:3.13`` and t-bench
images have). Then the build context is the task's own, plus the offline stand-ins of
``agentenvs.envs.terminal.offline`` at ``/opt/agentenvs/offline``, and its Dockerfile is
the task's with only two kinds of edits: each ``FROM`` names the resolved image (its
``--platform`` dropped: the local image is native), and ``RUN`` steps run through the
stand-ins (a ``SHELL`` that puts them first on PATH), so ``apt-get install curl`` or
``pip install pytest`` at build time are served from the image or refused by name.

Registries: the engine's ``--registry-mirror`` applies to Docker Hub names only, so with a
registry configured (``AGENTENVS_REGISTRY``, or the docker runtime's ``registry=``) a name
on another registry is pulled through it by prefix (:func:`via_registry`:
``ghcr.io/org/img:tag`` -> ``<registry>/ghcr.io/org/img:tag``) and tagged locally with the
name the Dockerfile writes (where it lacks the image, the name's own registry is asked, as
the engine's mirror falls back to Docker Hub). A failed pull is told apart (:func:`pull_problem`): a registry
that did not answer, refused the credentials or limits the rate is the infrastructure's;
its answer that it has no such image is the task's.
"""

from __future__ import annotations

import fnmatch
import hashlib
import io
import json
import re
import tarfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agentenvs.envs.terminal import offline
from agentenvs.envs.terminal.data import (
    TerminalTask,
    _dockerfile_steps,
    base_userland,
    expand,
    normalize,
    parse_from,
)
from agentenvs.envs.terminal.dockerfile import parse

PYTHON_313 = "agentenvs/tb-python:3.13"
DEBIAN_13 = "agentenvs/tb-debian:13"
#: official base image names (globs over ``name:tag``, any registry host) -> the
#: local image with the same tools, built offline. Ubuntu bases get Debian 13's userland
#: (same tools, apt, bash; another libc version and Python 3.13): see docs/terminal.md.
DEFAULT_IMAGE_MAP: dict[str, str] = {
    "python:3.13": PYTHON_313,
    "python:3.13-*": PYTHON_313,
    "python:3.13.*": PYTHON_313,
    "laude-institute/t-bench/python-3-13:*": PYTHON_313,
    "laude-institute/t-bench/ubuntu-24-04:*": DEBIAN_13,
    "ubuntu:24.04": DEBIAN_13,
    "ubuntu:noble*": DEBIAN_13,
    "debian:trixie*": DEBIAN_13,
    "debian:13*": DEBIAN_13,
    # the nearest local image, where none matches exactly: what differs is stated
    # (standin_note), and a task whose files name the Python it asked for is refused
    # (python_named)
    **{
        f"{name}{rest}": PYTHON_313
        for name in ("python:3.1[0-2]", "python:3.[89]")
        for rest in ("", "-*", ".*")
    },
    "laude-institute/t-bench/python-3-1[0-2]:*": PYTHON_313,
    "laude-institute/t-bench/python-3-[89]:*": PYTHON_313,
    "laude-institute/t-bench/ubuntu-22-04:*": DEBIAN_13,
    "ubuntu:22.04": DEBIAN_13,
    "ubuntu:jammy*": DEBIAN_13,
    "debian:bookworm*": DEBIAN_13,
    "debian:12*": DEBIAN_13,
}
#: what the local images give (Python ``major.minor``, distribution)
LOCAL_USERLAND: dict[str, tuple[str, str]] = {
    PYTHON_313: ("3.13", "Debian 13"),
    DEBIAN_13: ("3.13", "Debian 13"),
}


#: the facts of the images the stand-ins replace, and of the stand-ins (a data file)
STANDINS_MANIFEST = Path(__file__).with_name("standins.toml")
#: the tools the manifest compares, in the order differences are said
MANIFEST_TOOLS = ("python3", "pip", "pytest", "uv", "curl")
_manifest: dict[str, Any] | None = None


def manifest() -> dict[str, Any]:
    """``standins.toml``, read once: ``image`` (a list of facts with ``match`` patterns)
    and ``standin`` (facts by stand-in image)."""
    global _manifest
    if _manifest is None:
        import tomllib

        _manifest = tomllib.loads(STANDINS_MANIFEST.read_text())
    return _manifest


def image_facts(image: str) -> dict[str, Any] | None:
    """The manifest's facts of official image ``image`` (None: it has none)."""
    name = normalize(image)
    for entry in manifest().get("image", []):
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in entry["match"]):
            return dict(entry)
    return None


def standin_facts(use: str) -> dict[str, Any] | None:
    """The manifest's facts of the project's stand-in image ``use`` (None: not one)."""
    found = manifest().get("standin", {}).get(use)
    return dict(found) if found is not None else None


def fact_differences(written: str, have: Mapping[str, Any], *, workdir_applied: bool) -> list[str]:
    """What a stand-in with the facts ``have`` differs in from the official ``written``,
    by the manifest (tools present in one and not the other; the workdir unless the
    stand-in is given the real one: ``workdir_applied``)."""
    want = image_facts(written)
    if want is None:
        return []
    said = []
    if not workdir_applied and have.get("workdir") != want.get("workdir"):
        said.append(f"work dir {have.get('workdir')} for {want.get('workdir')}")
    if have.get("user") != want.get("user"):
        said.append(f"user {have.get('user')} for {want.get('user')}")
    tools, real = have.get("tools", {}), want.get("tools", {})
    extra = [t for t in MANIFEST_TOOLS if tools.get(t) and real.get(t) is False]
    missing = [t for t in MANIFEST_TOOLS if real.get(t) and tools.get(t) is False]
    if extra:
        said.append(f"{', '.join(extra)} present (the real image has none)")
    if missing:
        said.append(f"{', '.join(missing)} absent (the real image has it)")
    return said


class UnprovidableError(Exception):
    """Something a task needs that cannot be had on this machine (the message says what)."""


#: the hosts of Docker Hub (a name with no host is on it), the registry the engine mirrors
DOCKER_HUB = ("docker.io", "index.docker.io", "registry-1.docker.io")


def registry_host(image: str) -> str:
    """The registry ``image`` is pulled from as written: its host, or ``docker.io``."""
    parts = image.strip().split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        return parts[0]
    return "docker.io"


def _local_host(host: str) -> bool:
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    return name in ("localhost", "[::1]") or name.startswith("127.")


def via_registry(image: str, registry: str | None) -> str:
    """The name to pull ``image`` by when ``registry`` (``host[:port]``, optionally with a
    path) stands in for the registries the engine does not mirror.

    Docker Hub names stay as written (the engine's mirror serves them), and so do names
    already on ``registry`` or on a loopback host; any other host's name gets the prefix:
    ``ghcr.io/org/img:tag`` -> ``127.0.0.1:5000/ghcr.io/org/img:tag``.
    """
    registry = (registry or "").strip().rstrip("/")
    for scheme in ("http://", "https://"):
        registry = registry.removeprefix(scheme)
    if not registry:
        return image
    host = registry_host(image)
    if host in DOCKER_HUB or _local_host(host) or image.startswith(registry + "/"):
        return image
    return f"{registry}/{image}"


#: (what the engine's pull error says, why the pull failed) when the registry was not the
#: image's answer: the task cannot be blamed, so the pull is a ``registry`` Fault
PULL_PROBLEMS: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        ("toomanyrequests", "too many requests", "http 429", " 429 "),
        "the registry is limiting the rate of pulls (429 too many requests)",
    ),
    (
        (
            "no basic auth credentials",
            "unauthorized",
            "authentication required",
            "denied: requested access",
            "forbidden",
        ),
        "the registry refused the credentials (unauthorized)",
    ),
    (
        (
            "context deadline exceeded",
            "i/o timeout",
            "tls handshake timeout",
            "client.timeout exceeded",
            "timeout awaiting response headers",
            "read timed out",
            "(pull_timeout_s)",  # images_docker.PullTimeout: the project's own deadline
        ),
        "the registry did not answer in time",
    ),
    (
        (
            "dial tcp",
            "no such host",
            "connection refused",
            "connection reset",
            "network is unreachable",
            "temporary failure in name resolution",
            "503 service unavailable",
            "502 bad gateway",
            "unexpected eof",
        ),
        "the registry could not be reached",
    ),
)


def pull_problem(error: str) -> str | None:
    """Why a pull failed when it is the registry's doing (None: the registry answered that
    it has no such image, or the error is not a pull's).

    Docker Hub's "pull access denied ..., repository does not exist or may require 'docker
    login'" is its answer for a missing repository, so it stays the task's.
    """
    text = error.lower()
    if "non-zero code" in text:  # a RUN step's own failure: the Dockerfile's
        return None
    for markers, why in PULL_PROBLEMS:
        if any(m in text for m in markers):
            if why.endswith("(unauthorized)") and "repository does not exist" in text:
                return None
            return why
    return None


def map_image(image: str, image_map: Mapping[str, str]) -> str | None:
    """The local equivalent of ``image`` from ``image_map`` (None: no entry)."""
    name = normalize(image)
    for pattern, target in image_map.items():
        if fnmatch.fnmatchcase(name, normalize(pattern)):
            return target
    return None


@dataclass(frozen=True)
class BasePlan:
    """How one ``FROM`` image is had: ``how`` is local, pull, mapped or stage; ``note``
    says what a mapped image differs in (None: nothing known)."""

    written: str
    use: str
    how: str
    note: str | None = None


def standin_note(written: str, use: str) -> str | None:
    """Where local image ``use`` differs from the official ``written`` it stands in for,
    in words (None: nothing known differs, or ``use`` is not one of the project's)."""
    have = LOCAL_USERLAND.get(use)
    if have is None:
        return None
    python, distro = have
    want_python, want_distro = base_userland(written)
    said = []
    if want_python is not None and want_python != python:
        said.append(f"Python {python} for {want_python}")
    # python:3.X names no Debian release (its tags move between them): only the family
    if want_distro != distro and not (want_distro == "Debian" and distro.startswith("Debian")):
        said.append(f"{distro} for {want_distro}")
    facts = standin_facts(use)
    if facts is not None:  # the build gives the stand-in the real image's WORKDIR
        said.extend(fact_differences(written, facts, workdir_applied=True))
    if not said:
        return None
    return f"base {normalize(written)} stood in for by {use}: " + ", ".join(said)


#: the files of a task read for the Python version it names (the Dockerfile's folder,
#: the tests, the runner, the solution), and how much of each
_VERSION_FILE_BYTES = 1 << 20
_VERSION_SUFFIXES = {"", ".py", ".sh", ".txt", ".toml", ".cfg", ".ini", ".yaml", ".yml"}


def python_named(task: TerminalTask, minor: str) -> str | None:
    """Where the task's own files name Python ``minor`` (``3.12``: ``python3.12``,
    ``python 3.12``, ``py312``, ``cp312``, ``python_version >= "3.12"``, ``--python-version
    3.12``, ``requires-python = ">=3.12"``), as
    ``file: 'text'``; None: nowhere. A task whose tests or build name the version its
    base ships depends on it, and another version cannot stand in for it."""
    dotted = re.escape(minor)
    bare = minor.replace(".", "")
    pattern = re.compile(
        rf"(?i)(?:python[ _-]?v?{dotted}|(?:py|cp){bare}"
        rf"|(?:python[ _-]version|requires[_-]python)\W+{dotted})(?![\d])"
    )
    roots = [task.context, task.tests_dir]
    files = [task.dockerfile, task.path / task.test_script]
    if task.solution:
        files.append(task.path / task.solution)
    for root in roots:
        if root.is_dir():
            files.extend(sorted(p for p in root.rglob("*") if p.suffix in _VERSION_SUFFIXES))
    for path in dict.fromkeys(files):
        try:
            if not path.is_file():
                continue
            with path.open("rb") as handle:
                text = handle.read(_VERSION_FILE_BYTES).decode("utf-8", errors="replace")
        except OSError:
            continue
        found = pattern.search(text)
        if found is not None:
            return f"{path.relative_to(task.path)}: {found.group(0)!r}"
    return None


def plan_bases(
    task: TerminalTask,
    *,
    online: bool,
    present: Callable[[str], bool],
    image_map: Mapping[str, str],
    build_args: Mapping[str, str] | None = None,
    registry: str | None = None,
) -> list[BasePlan]:
    """Each ``FROM`` of the task's Dockerfile (or its prebuilt image), resolved; a base
    to pull is pulled by its name through ``registry`` (:func:`via_registry`).

    Raises :class:`UnprovidableError` naming the image that is neither on this machine,
    nor pullable (``online``), nor in the map.
    """
    froms: list[str] = []
    stages: set[str] = set()
    if task.dockerfile.is_file():
        scope = dict(build_args or {})
        for word, rest in _dockerfile_steps(task.dockerfile):
            if word == "ARG":
                for item in rest.split():
                    key, eq, value = item.partition("=")
                    scope.setdefault(key, expand(value.strip('"'), scope) if eq else "")
            elif word == "FROM":
                image, _, name = parse_from(rest, scope)
                froms.append(image)
                if name:
                    stages.add(name)
    else:
        froms.append(task.docker_image or task.base_image)
    plans = []
    for image in froms:
        if image in stages or image == "scratch":
            plans.append(BasePlan(image, image, "stage"))
        elif present(image):
            plans.append(BasePlan(image, image, "local"))
        elif online:
            plans.append(BasePlan(image, via_registry(image, registry), "pull"))
        else:
            mapped = map_image(image, image_map)
            if mapped is None:
                raise UnprovidableError(
                    f"base image {image!r} is not on this machine and has no local "
                    "equivalent in the image map (offline)"
                )
            if not present(mapped):
                raise UnprovidableError(
                    f"base image {image!r} maps to {mapped!r}, which is not built here "
                    "(run sandboxes/build_images.sh)"
                )
            note = standin_note(image, mapped)
            want_python = base_userland(image)[0]
            have_python = LOCAL_USERLAND.get(mapped, (want_python, ""))[0]
            if want_python is not None and want_python != have_python:
                named = python_named(task, want_python)
                if named is not None:
                    raise UnprovidableError(
                        f"base image {image!r} has no exact offline stand-in ({note}), and "
                        f"the task names Python {want_python} ({named})"
                    )
            plans.append(BasePlan(image, mapped, "mapped", note))
    return plans


def prebuilt_view(task: TerminalTask) -> TerminalTask:
    """``task`` as its ``docker_image`` alone: the image Harbor runs when a task names
    one beside its Dockerfile (unless told to build: ``force_build``)."""
    return replace(
        task,
        dockerfile=Path("/nonexistent-agentenvs-prebuilt/Dockerfile"),
        base_image=task.docker_image or task.base_image,
        platform=None,
    )


def as_run(task: TerminalTask, *, force_build: bool) -> TerminalTask:
    """``task`` as its image is had: a ``docker_image`` beside a Dockerfile is run as it
    is, its Dockerfile unread (:func:`prebuilt_view`), unless ``force_build`` (Harbor's
    ``--force-build``) builds the Dockerfile instead."""
    if task.docker_image and task.dockerfile.is_file() and not force_build:
        return prebuilt_view(task)
    return task


def offline_dockerfile(
    task: TerminalTask, plans: list[BasePlan], build_args: Mapping[str, str] | None = None
) -> str:
    """The task's Dockerfile with resolved ``FROM`` images and RUN through the stand-ins."""
    wrapper = f"{offline.MOUNT}/bin/offline-sh"
    prelude = f'COPY .agentenvs-offline {offline.MOUNT}\nSHELL ["{wrapper}", "/bin/sh", "-c"]'
    if not task.dockerfile.is_file():
        return f"FROM {plans[0].use}\n{prelude}\n{_real_workdir(plans[0])}"
    used = {p.written: p for p in plans}
    text = task.dockerfile.read_text(errors="replace")
    raw = text.splitlines()
    steps = parse(text)
    # Docker's parser gives each step's first line; a step's text runs to the next one's
    # (continuations, comments and here-document bodies kept as written, so the escape
    # directive above them still reads them)
    out = raw[: steps[0].line - 1] if steps else raw
    scope = dict(build_args or {})
    for i, step in enumerate(steps):
        end = steps[i + 1].line - 1 if i + 1 < len(steps) else len(raw)
        lines = raw[step.line - 1 : end]
        if step.instruction == "ARG":
            for item in step.rest.split():
                key, eq, value = item.partition("=")
                scope.setdefault(key, expand(value.strip('"'), scope) if eq else "")
            out += lines
        elif step.instruction == "FROM":
            image, _, name = parse_from(step.arguments_text, scope)
            plan = used.get(image)
            target = plan.use if plan is not None else image
            out.append(f"FROM {target}" + (f" AS {name}" if name else ""))
            if plan is None or plan.how != "stage":
                out.append(prelude)
            if plan is not None and (workdir := _real_workdir(plan)):
                out.append(workdir.rstrip("\n"))
            out += _trailing_blanks(lines)
        elif step.instruction == "SHELL":
            try:
                argv = json.loads(step.rest)
            except ValueError:
                argv = None
            if isinstance(argv, list) and all(isinstance(a, str) for a in argv):
                out.append(f"SHELL {json.dumps([wrapper, *argv])}")
            else:
                out += lines
        else:
            out += lines
    return "\n".join(out) + "\n"


def _trailing_blanks(lines: list[str]) -> list[str]:
    """The empty and comment lines that end a step's text (after its last line)."""
    k = len(lines)
    while k > 1 and (not lines[k - 1].strip() or lines[k - 1].strip().startswith("#")):
        k -= 1
    return lines[k:]


def _real_workdir(plan: BasePlan) -> str:
    """A ``WORKDIR`` line giving a stand-in the work dir of the image it replaces (the
    manifest's), where they differ; "" otherwise."""
    if plan.how != "mapped":
        return ""
    want, have = image_facts(plan.written), standin_facts(plan.use)
    if want is None or have is None or want.get("workdir") == have.get("workdir"):
        return ""
    return f"WORKDIR {want['workdir']}\n"


def offline_wrapper() -> str:
    """``offline-sh``: RUN steps of an offline build run with the stand-ins first."""
    env = offline.environment()
    exports = "".join(f"export {k}={v}\n" for k, v in env.items() if k != "AGENTENVS_OFFLINE_LOG")
    return (
        "#!/bin/sh\n# RUN steps of an offline build: the stand-ins come first on PATH\n"
        f'export PATH="{offline.MOUNT}/bin:$PATH"\n{exports}'
        "export AGENTENVS_OFFLINE_LOG=/tmp/agentenvs-offline-build.log\n"
        # a build given the build-time wheels: pip finds them there (and the tests do not)
        f"if [ -d {offline.BUILD_WHEELHOUSE} ]; then export AGENTENVS_WHEELHOUSE="
        f"{offline.BUILD_WHEELHOUSE} PIP_FIND_LINKS={offline.BUILD_WHEELHOUSE}; fi\n"
        'exec "$@"\n'
    )


def offline_files() -> dict[str, tuple[bytes, int]]:
    """The stand-ins as (content, mode) by path under the mount point."""
    files: dict[str, tuple[bytes, int]] = {}
    root = offline.ROOT
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            rel = path.relative_to(root).as_posix()
            files[rel] = (path.read_bytes(), 0o755 if rel.startswith("bin/") else 0o644)
    files["bin/offline-sh"] = (offline_wrapper().encode(), 0o755)
    return files


def offline_digest() -> str:
    h = hashlib.blake2b(digest_size=8)
    for rel, (data, mode) in offline_files().items():
        h.update(f"{rel}\0{mode}\0".encode() + data)
    return h.hexdigest()


def _add_offline(tar: tarfile.TarFile, prefix: str, wheels: Sequence[Path] = ()) -> None:
    for d in (prefix, f"{prefix}/bin", *([f"{prefix}/wheelhouse"] if wheels else [])):
        info = tarfile.TarInfo(d)
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(info)
    for rel, (data, mode) in offline_files().items():
        info = tarfile.TarInfo(f"{prefix}/{rel}")
        info.size, info.mode = len(data), mode
        tar.addfile(info, io.BytesIO(data))
    for wheel in wheels:
        info = tarfile.TarInfo(f"{prefix}/wheelhouse/{wheel.name}")
        # fixed metadata: the layer is the same in every build that gets these wheels
        info.size, info.mode = wheel.stat().st_size, 0o644
        with wheel.open("rb") as f:
            tar.addfile(info, f)


def build_context(
    task: TerminalTask, dockerfile_text: str | None, wheels: Sequence[Path] = ()
) -> tuple[io.BytesIO, str]:
    """The task's build context as a tar (and the Dockerfile's name in it); with
    ``dockerfile_text``, that Dockerfile and the stand-ins are added (and ``wheels``, the
    build-time wheels, under the stand-ins' ``wheelhouse/``)."""
    buf = io.BytesIO()
    context = task.context
    name = task.dockerfile.relative_to(context).as_posix() if task.dockerfile.is_file() else ""
    with tarfile.open(fileobj=buf, mode="w:", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(context.rglob("*")):
            tar.add(path, arcname=path.relative_to(context).as_posix(), recursive=False)
        if dockerfile_text is not None:
            name = ".agentenvs.Dockerfile"
            data = dockerfile_text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
            _add_offline(tar, ".agentenvs-offline", wheels)
    buf.seek(0)
    return buf, name


_TAG_CHARS = re.compile(r"[^a-z0-9._-]+")


def task_image_name(task: TerminalTask) -> str:
    return _TAG_CHARS.sub("-", task.id.lower()).strip("._-") or "task"


def image_digest(parts: list[str]) -> str:
    return hashlib.blake2b("\0".join(parts).encode(), digest_size=8).hexdigest()


def context_digest(path: Path) -> str:
    h = hashlib.blake2b(digest_size=12)
    if path.is_dir():
        for p in sorted(path.rglob("*")):
            if p.is_file():
                h.update(str(p.relative_to(path)).encode() + b"\0")
                h.update(p.read_bytes())
    return h.hexdigest()


def tar_of(pairs: list[tuple[Path, str]]) -> bytes:
    """A tar of host paths (files or dirs' contents), each placed under a sandbox path."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:", format=tarfile.PAX_FORMAT) as tar:
        for src, dest in pairs:
            dest = dest.lstrip("/")
            if src.is_dir():
                for p in sorted(src.rglob("*")):
                    tar.add(p, arcname=f"{dest}/{p.relative_to(src)}".lstrip("/"), recursive=False)
            else:
                tar.add(src, arcname=dest, recursive=False)
    return buf.getvalue()
