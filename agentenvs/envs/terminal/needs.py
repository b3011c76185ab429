"""What a task needs that this machine cannot give, predicted without building its image.

Used by ``TerminalBenchEnv.check_tasks`` on the docker runtime. The prediction follows
what the build and the tests would meet, in order:

- **Base images** (``images.plan_bases``), and the images of the compose file's other
  services (or their Dockerfiles' bases): each ``FROM`` is present in the engine, or
  (offline) stood in for by an image of the image map that is built here, or (online)
  known to the registry it would be pulled from (its manifest is asked for; an engine that
  pulls but gives its containers no network builds offline from the pulled base, so that
  base is pulled, once, to read what it has). A registry that does not answer, limits the rate or refuses the credentials
  is an infrastructure fault (a ``registry`` :class:`~agentenvs.core.errors.Fault` is
  raised); its answer that it has no such image is the task's need.
- **Build-time packages, offline**: the offline build serves ``apt-get install`` from the
  Debian packages installed in the base image (plus the tools the stand-ins replace) and
  ``pip install`` from the Python distributions of the base image and the wheelhouse
  (``agentenvs.envs.terminal.offline``); a package named in a ``RUN`` step that neither
  has is named.
- **Tests that need the network**, when the tests have none (offline, or
  ``network="none"``): a download (``curl``/``wget``/``git clone``) in the test scripts
  beyond what the stand-ins serve (the uv installer, loopback), a package that the tests
  install (``pip install``, ``uv add``, ``uvx --with``) that is neither in the image's
  reach nor in the wheelhouse, and a test module that calls a host (``requests``,
  ``urllib``, ``httpx`` ... with a non-loopback URL).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from agentenvs.envs.terminal import images
from agentenvs.envs.terminal.data import TerminalTask, _dockerfile_steps, expand, parse_from

#: apt packages the offline stand-ins replace (``offline/shim.py`` PROVIDED_PACKAGES)
STAND_IN_PACKAGES = frozenset({"curl", "wget", "ca-certificates", "python3-pip", "pipx"})
_LOOPBACK = re.compile(r"^(?:localhost|127\.\d+\.\d+\.\d+|\[::1\]|0\.0\.0\.0)$")
_URL = re.compile(r"""\b(?:https?|git|ftp)://([A-Za-z0-9.\-\[\]:]+)[^\s'"`)]*""")
_UV_INSTALLER = re.compile(r"/uv/(?:[^/\s]+/)?install\.sh")
_NET_MODULES = re.compile(
    r"^\s*(?:import\s+(?:[\w.]+\s*,\s*)*|from\s+)"
    r"(requests|httpx|aiohttp|urllib\.request|urllib3|http\.client)\b",
    re.M,
)
_SEPARATORS = {"&&", "||", ";", "|", "&", ")", "("}


def wheel_versions_of(wheels: Iterable[Path]) -> dict[str, frozenset[str]]:
    """Distribution → versions of a list of wheel files (pip's normalized names)."""
    found: dict[str, set[str]] = {}
    for path in wheels:
        parts = path.name.split("-")
        if len(parts) >= 2:
            found.setdefault(normalize(parts[0]), set()).add(parts[1])
    return {k: frozenset(v) for k, v in found.items()}


def wheel_fits(filename: str, python: str | None) -> bool:
    """Whether a wheel installs on CPython ``python`` ("3.13"; None: pure wheels only),
    from its file name's tags (the platform is this machine's: the wheelhouse is)."""
    parts = filename.removesuffix(".whl").split("-")
    if len(parts) < 5:
        return False
    pys, abi = parts[-3].split("."), parts[-2]
    if any(p in ("py3", "py2") or p.startswith("py3") for p in pys) and abi == "none":
        return True
    if python is None:
        return False
    minor = int(python.split(".")[1]) if "." in python else -1
    here = f"cp3{minor}"
    if here in pys:
        return True
    return abi == "abi3" and any(
        p.startswith("cp3") and p[3:].isdigit() and int(p[3:]) <= minor for p in pys
    )


def normalize(name: str) -> str:
    """A distribution's name as pip compares names."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement(word: str) -> str | None:
    """The distribution a pip requirement names (None: a path, URL or option)."""
    if word.startswith(("-", ".", "/", "~")) or "://" in word or word.endswith((".whl", ".txt")):
        return None
    m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)", word)
    return normalize(m.group(1)) if m else None


def _commands(script: str) -> Iterable[list[str]]:
    """Simple commands of a shell text (continuations joined, split at ``&& ; |``)."""
    text = script.replace("\\\n", " ")
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        try:
            words = shlex.split(line, posix=True)
        except ValueError:
            words = line.split()
        current: list[str] = []
        for word in words:
            if word in _SEPARATORS or word.endswith(";"):
                if word.endswith(";") and word != ";":
                    current.append(word[:-1])
                if current:
                    yield current
                current = []
            else:
                current.append(word)
        if current:
            yield current


def _strip_prefix(cmd: list[str]) -> list[str]:
    """``sudo``, ``env A=1``, ``python -m`` and assignments in front of a command dropped."""
    while cmd and (cmd[0] in ("sudo", "env", "exec", "time") or re.match(r"^\w+=", cmd[0])):
        cmd = cmd[1:]
    if len(cmd) >= 3 and Path(cmd[0]).name.startswith("python") and cmd[1] == "-m":
        cmd = cmd[2:]
    return cmd


def apt_installs(script: str) -> list[str]:
    """Debian packages that ``apt-get install``/``apt install`` lines of ``script`` name."""
    found: list[str] = []
    for cmd in _commands(script):
        cmd = _strip_prefix(cmd)
        if not cmd or Path(cmd[0]).name not in ("apt-get", "apt"):
            continue
        words = [w for w in cmd[1:] if not w.startswith("-")]
        if words and words[0] == "install":
            found += [re.split(r"[=:]", w, maxsplit=1)[0] for w in words[1:] if "$" not in w]
    return found


def pip_installs(script: str) -> list[str]:
    """Distributions that ``pip install``, ``uv add``/``uv pip install`` and
    ``uvx --with`` of ``script`` name (paths, files and URLs left out)."""
    return [name for name, _ in pip_requirements(script)]


def pip_requirements(script: str) -> list[tuple[str, str | None]]:
    """(distribution, the version an ``==`` pins or None) of what :func:`pip_installs`
    finds."""
    found: list[tuple[str, str | None]] = []
    for cmd in _commands(script):
        cmd = _strip_prefix(cmd)
        if not cmd:
            continue
        tool = Path(cmd[0]).name
        args = cmd[1:]
        if tool in ("pip", "pip3") and args[:1] == ["install"]:
            args = args[1:]
        elif tool == "uv" and args[:1] == ["add"]:
            args = args[1:]
        elif tool == "uv" and args[:2] == ["pip", "install"]:
            args = args[2:]
        elif tool == "uvx":
            args = [a for i, a in enumerate(args) if i and args[i - 1] in ("-w", "--with")]
        else:
            continue
        skip = False
        for word in args:
            if skip:
                skip = False
                continue
            if word in ("-r", "--requirement", "-c", "-e", "--editable", "-i", "--index-url"):
                skip = True
                continue
            name = _requirement(word)
            if name is not None:
                pin = re.search(r"==\s*([^\s;,\[]+)$", word)
                found.append((name, pin.group(1) if pin else None))
    return found


def downloads(script: str) -> list[str]:
    """URLs that ``curl``/``wget``/``git clone`` lines of ``script`` fetch from a host
    other than loopback, the uv installer (served by the stand-ins) left out."""
    urls: list[str] = []
    for cmd in _commands(script):
        cmd = _strip_prefix(cmd)
        if not cmd:
            continue
        tool = Path(cmd[0]).name
        if tool not in ("curl", "wget") and not (tool == "git" and cmd[1:2] == ["clone"]):
            continue
        for word in cmd[1:]:
            m = _URL.search(word)
            if m and not _LOOPBACK.match(m.group(1).rsplit(":", 1)[0]):
                if not _UV_INSTALLER.search(m.group(0)):
                    urls.append(m.group(0))
    return urls


def host_calls(source: str) -> list[str]:
    """Non-loopback URLs in a Python module that imports an HTTP client."""
    if not _NET_MODULES.search(source):
        return []
    return [
        m.group(0)
        for m in _URL.finditer(source)
        if not _LOOPBACK.match(m.group(1).rsplit(":", 1)[0])
    ]


def test_texts(task: TerminalTask) -> list[tuple[Path, str]]:
    """The test runner and the text files of ``tests/`` (up to 1 MB each)."""
    paths = [task.path / task.test_script]
    if task.tests_dir.is_dir():
        paths += sorted(p for p in task.tests_dir.rglob("*") if p.is_file())
    out = []
    for p in paths:
        try:
            if p.stat().st_size <= 1 << 20:
                out.append((p, p.read_text()))
        except (OSError, UnicodeDecodeError):
            continue
    return out


def stage_runs(task: TerminalTask, build_args: dict[str, str]) -> list[tuple[str, list[str]]]:
    """(base image as written, RUN scripts) per stage of the task's Dockerfile."""
    stages: list[tuple[str, list[str]]] = []
    if not task.dockerfile.is_file():
        return stages
    scope = dict(build_args)
    for word, rest in _dockerfile_steps(task.dockerfile):
        if word == "ARG":
            for item in rest.split():
                key, eq, value = item.partition("=")
                scope.setdefault(key, expand(value.strip('"'), scope) if eq else "")
        elif word == "FROM":
            stages.append((parse_from(rest, scope)[0], []))
        elif word == "RUN" and stages:
            stages[-1][1].append(rest)
    return stages


class DockerNeeds:
    """Predicts the unmet needs of tasks on one docker runtime (base images' contents are
    read once each)."""

    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime
        self._contents: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
        self._pulls: dict[str, str] = {}
        #: the major.minor of each read image's Python (None: it has none)
        self._pythons: dict[str, str | None] = {}

    def wheels(self) -> frozenset[str]:
        """Distributions the wheelhouse holds (normalized names)."""
        where = self.runtime.wheelhouse
        if where is None or not Path(where).is_dir():
            return frozenset()
        return frozenset(normalize(p.name.split("-", 1)[0]) for p in Path(where).glob("*.whl"))

    def _pulled(self, plan: images.BasePlan) -> str:
        """The local name of a base pulled for reading (a registry fault is raised)."""
        if plan.written not in self._pulls:
            self._pulls[plan.written] = self.runtime._pull_base(plan)
        return self._pulls[plan.written]

    def contents(self, image: str) -> tuple[frozenset[str], frozenset[str]]:
        """(installed Debian packages, Python distributions) of a local image, read by a
        throwaway container without network."""
        if image not in self._contents:
            script = (
                "dpkg-query -W -f='${Package} ${Status}\\n' 2>/dev/null | "
                "awk '/install ok installed/ {print $1}'; echo @@; "
                "for py in python3 python; do command -v $py >/dev/null 2>&1 && { $py -c "
                '\'import importlib.metadata as m, sys; print("@py%d.%d" % sys.version_info[:2]); '
                'print(chr(10).join(d.metadata["Name"] '
                'or "" for d in m.distributions()))\' 2>/dev/null; break; }; done; true'
            )
            out = self.runtime.client.containers.run(
                image,
                ["/bin/sh", "-c", script],
                entrypoint=[],
                network_mode="none",
                remove=True,
                stdout=True,
                stderr=False,
            )
            debs, _, dists = out.decode(errors="replace").partition("@@")
            words = dists.split()
            self._pythons[image] = next((w[3:] for w in words if w.startswith("@py")), None)
            self._contents[image] = (
                frozenset(w.split(":", 1)[0] for w in debs.split()),
                frozenset(normalize(w) for w in words if not w.startswith("@py")),
            )
        return self._contents[image]

    def _registry_has(self, plan: images.BasePlan) -> str | None:
        """Why ``plan``'s image cannot be pulled (None: its registry knows it); raises the
        registry's fault when the registry failed. A name pulled through the configured
        registry is asked of its own registry too where that one lacks it, as a pull does."""
        why = None
        for name in dict.fromkeys((plan.use, plan.written)):
            try:
                self.runtime.client.api.inspect_distribution(name)
                return None
            except Exception as exc:  # noqa: BLE001 - the engine's answer is read below
                fault = self.runtime._build_fault(exc, str(exc), online=True, image=name)
                if fault is not None:
                    raise fault from exc
                where = self.runtime._registry_name(name)
                said = " ".join(str(exc).split())[:200]
                why = f"base image {plan.written!r} cannot be pulled from {where}: {said}"
        return why

    def unmet(self, task: TerminalTask) -> str | None:
        """What ``task`` needs that this machine cannot give (None: nothing)."""
        runtime = self.runtime
        try:
            plans = runtime.plan(task)
        except images.UnprovidableError as exc:
            return str(exc)
        for service in task.services:
            # a compose sidecar's image (or its Dockerfile's bases), had as a base image is
            try:
                service_plans = runtime.service_plan(task, service)
            except images.UnprovidableError as exc:
                return str(exc)
            for plan in service_plans:
                if plan.how == "pull":
                    why = self._registry_has(plan)
                    if why is not None:
                        if service.image:
                            why = why.replace("base image", "image", 1)
                        return f"the second container ({service.name}): {why}"
        for plan in plans:
            if plan.how == "pull":
                why = self._registry_has(plan)
                if why is not None:
                    return why
        offline = runtime.networkless
        wheels = self.wheels()
        build_wheels = runtime.build_wheels(task)
        needs: list[str] = []
        by_written = {p.written: p for p in plans}
        debs: set[str] = set()
        dists: set[str] = set()
        for written, runs in stage_runs(task, {"BASE_IMAGE": runtime.base_image}):
            plan = by_written.get(written)
            if plan is None or plan.how == "stage":
                continue
            read = None
            if plan.how != "pull":
                read = plan.use
            elif offline:
                # an engine that pulls but builds offline serves the RUN steps from the
                # pulled base: pulled here (once per image) to read what it has
                read = self._pulled(plan)
            # an online build fetches what it needs
            base_debs, base_dists = self.contents(read) if read else (frozenset(), frozenset())
            # binary wheels install only on the Python they were built for
            python = self._pythons.get(read) if read else None
            built_with = wheel_versions_of(w for w in build_wheels if wheel_fits(w.name, python))
            debs, dists = set(base_debs), set(base_dists)
            image = plan.written if plan.how != "mapped" else f"{plan.use}, for {plan.written}"
            for run in runs:
                for p in apt_installs(run):
                    if offline and p not in STAND_IN_PACKAGES and p not in debs:
                        needs.append(f"the Debian package {p!r} (not in {image})")
                    debs.add(p)
                for name, pin in pip_requirements(run):
                    # the stand-in pip keeps what the image has (a pin it differs from is
                    # noted, not refused) and installs the rest from the build's wheels
                    have = built_with.get(name, frozenset())
                    if offline and name not in dists and (not have or (pin and pin not in have)):
                        why = f" (the wheelhouse has {', '.join(sorted(have))})" if have else ""
                        spec = f"{name}=={pin}" if pin and have else name
                        needs.append(f"the Python package {spec!r} at build time{why}")
                    dists.add(name)
        if not task.dockerfile.is_file() and plans and plans[0].how in ("local", "mapped"):
            base_debs, base_dists = self.contents(plans[0].use)
            debs, dists = set(base_debs), set(base_dists)

        _, _, tests_online = network_plan(task, offline=offline, network=runtime.network)
        if not tests_online:
            needs += self._test_network(task, debs, dists | wheels)
        if not needs:
            return None
        unique = list(dict.fromkeys(needs))
        where = (
            "offline"
            if runtime.offline
            else "with no network in the containers"
            if offline
            else "without network"
        )
        return f"needs {where}: " + "; ".join(unique)

    def _test_network(
        self, task: TerminalTask, debs: set[str], reach: set[str] | frozenset[str]
    ) -> list[str]:
        needs: list[str] = []
        for path, text in test_texts(task):
            rel = path.relative_to(task.path).as_posix()
            if path.suffix == ".py":
                needs += [f"the host of {u} (called by {rel})" for u in host_calls(text)]
                continue
            needs += [f"the download {u} (in {rel})" for u in downloads(text)]
            needs += [
                f"the Debian package {p!r} at test time (in {rel}, not in the image)"
                for p in apt_installs(text)
                if p not in STAND_IN_PACKAGES and p not in debs
            ]
            needs += [
                f"the Python package {p!r} at test time (in {rel}, not in the wheelhouse)"
                for p in pip_installs(text)
                if p not in reach
            ]
        return needs


def unmet_on_docker(runtime: Any, tasks: Iterable[TerminalTask], *, build: bool) -> dict[str, str]:
    """{task id: unmet need} of ``tasks`` on a docker runtime: predicted, or with ``build``
    found by building each image (a build that fails is the task's need)."""
    from agentenvs.core.errors import SandboxError

    predict = DockerNeeds(runtime)
    found: dict[str, str] = {}
    for task in tasks:
        try:
            if build:
                runtime.image(task)
                why = None
            else:
                why = predict.unmet(task)
        except (images.UnprovidableError, SandboxError) as exc:
            why = str(exc)
        if why is not None:
            found[task.id] = why
    return found


NETWORKS = ("task", "tests-only", "none")
#: the engine's network for containers that may reach the internet
ONLINE_NETWORK = "bridge"


def network_plan(task: TerminalTask, *, offline: bool, network: str) -> tuple[str, bool, bool]:
    """(container network mode, agent has network, tests have network).

    The official harnesses give both phases the internet unless a Harbor task says
    otherwise; ``network="tests-only"`` keeps the agent off it, ``"none"`` (and any
    offline run) gives it to neither.
    """
    if network not in NETWORKS:
        raise ValueError(f"network must be one of {NETWORKS}, got {network!r}")
    if offline or network == "none":
        return "none", False, False
    agent = task.agent_network and network == "task"
    tests = task.verifier_network
    return (ONLINE_NETWORK if agent or tests else "none"), agent, tests
