"""The Python the local sandbox runs: a runtime the project provisions, not the host's.

Programs in the local sandbox run under a Python prefix made for it, so what they can
import is the same on every machine and nothing of the host's Python install shows
through (not its site-packages, not the user's site, not this package or its task data):

- ``python-<version>-<machine>/``: this interpreter's binary, its shared ``libpython``
  when it has one, and its standard library without ``site-packages``, the test suites,
  IDLE, Tk and ensurepip (about 45 MB). Made from the running interpreter by a copy, so
  it needs no network.
- ``site-<abi>-<digest>/``: exactly what DeepCoder's official checker preloads
  for every program, :data:`PACKAGES` at the versions pinned there, installed with this
  interpreter's pip (``--target``, wheels only, byte-compiled). It needs the package
  index once; where it cannot be had the sandbox runs the bare standard library (strict
  rules need nothing more) and :func:`runtime_info` says why.

Both live under :func:`cache_root` and are built once per machine: under a file lock,
into a temporary dir that lands by rename, with ``manifest.json`` written last, so any
number of processes share one copy and a killed build leaves nothing that passes for a
finished one. ``agentenvs sandbox provision`` (run by ``make``) builds them ahead of use;
``agentenvs sandbox info`` prints the paths and versions. Inside the sandbox the
interpreter is ``/opt/agentenvs/python/bin/python3.X`` (``python3`` on ``PATH``), and
both dirs are bound read-only.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentenvs.core.errors import SandboxError

#: what DeepCoder's official checker imports before every program, at pinned versions
PACKAGES: dict[str, str] = {"numpy": "2.3.5", "pandas": "2.3.3"}
#: env var: where runtimes are kept (default: see :func:`cache_root`)
ROOT_ENV = "AGENTENVS_SANDBOX_RUNTIME_DIR"
#: env var: ``0`` never installs the packages (an offline machine: the bare stdlib)
INSTALL_ENV = "AGENTENVS_SANDBOX_PACKAGES"
#: where the runtime is mounted inside the sandbox
SANDBOX_PREFIX = "/opt/agentenvs/python"
MANIFEST = "manifest.json"
# stdlib parts no program under test needs (about 190 MB of 230 MB for a full build)
_STDLIB_SKIP = (
    "site-packages",
    "dist-packages",
    "test",
    "tests",
    "idlelib",
    "tkinter",
    "turtledemo",
    "ensurepip",
    "config-*",
    "*.opt-1.pyc",
    "*.opt-2.pyc",
)
_PIP_TIMEOUT_S = 900
_LAYOUT = 3  # bumped when the interpreter dir's layout changes


@dataclass(frozen=True)
class Runtime:
    """A provisioned sandbox Python: host dirs to bind and what they hold."""

    prefix: str  # host dir bound at SANDBOX_PREFIX
    version: str  # e.g. "3.11.7"
    libdir_needed: bool  # a shared libpython: LD_LIBRARY_PATH must name <prefix>/lib
    site: str | None = None  # host dir bound over the prefix's site-packages, or None
    packages: dict[str, str] = field(default_factory=dict)  # installed name -> version
    missing_reason: str = ""  # why PACKAGES are not there, when they are not
    # where the packages are mounted inside: the first site dir the interpreter's own
    # ``site`` module gives the prefix (Debian's looks in ``local/lib/.../dist-packages``)
    sandbox_site: str = ""

    @property
    def short_version(self) -> str:
        return ".".join(self.version.split(".")[:2])

    @property
    def sandbox_python(self) -> str:
        """The interpreter's path inside the sandbox."""
        return f"{SANDBOX_PREFIX}/bin/python{self.short_version}"


    def info(self) -> dict[str, Any]:
        """Paths and versions, as ``info`` and ``agentenvs sandbox info`` show them."""
        out: dict[str, Any] = {
            "python": self.version,
            "prefix": self.prefix,
            "site": self.site,
            "packages": dict(self.packages),
            "pinned": dict(PACKAGES),
        }
        if self.missing_reason:
            out["missing"] = self.missing_reason
        return out


# ----------------------------------------------------------------------------- locations
@functools.lru_cache(maxsize=1)
def sandbox_site_dir() -> str:
    """The site dir the interpreter adds for :data:`SANDBOX_PREFIX`, asked of the base
    interpreter itself (a venv's answer differs, and distributions patch ``site``)."""
    code = "import site, sys; print(site.getsitepackages([sys.argv[1]])[0])"
    try:
        out = subprocess.run(
            [_base_executable(), "-I", "-S", "-c", code, SANDBOX_PREFIX],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        path = out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        path = ""
    if not path.startswith(SANDBOX_PREFIX + "/"):
        v = sys.version_info
        path = f"{SANDBOX_PREFIX}/lib/python{v.major}.{v.minor}/site-packages"
    return path


def cache_root() -> Path:
    """``$AGENTENVS_SANDBOX_RUNTIME_DIR``, else the user's cache dir; for root a system dir.

    The sandbox runs as ``nobody`` when the host process is root, and ``nobody`` cannot
    enter ``/root``: root's runtimes live in ``/var/cache/agentenvs`` (mode 0755).
    """
    if os.environ.get(ROOT_ENV):
        return Path(os.environ[ROOT_ENV])
    if os.geteuid() == 0:
        return Path("/var/cache/agentenvs/sandbox-python")
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "agentenvs" / "sandbox-python"


def _machine() -> str:
    return platform.machine() or "unknown"


def _base_executable() -> str:
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def interpreter_dir(root: Path | None = None) -> Path:
    v = sys.version_info
    tag = f"{sys.implementation.name}{v.major}.{v.minor}.{v.micro}-{_machine()}"
    # the source interpreter and this layout's version: a new layout builds anew
    digest = hashlib.sha256(f"{_base_executable()}\0{_LAYOUT}".encode()).hexdigest()[:8]
    return (root or cache_root()) / f"python-{tag}-{digest}"


def site_dir(root: Path | None = None, packages: dict[str, str] | None = None) -> Path:
    pins = packages if packages is not None else PACKAGES
    v = sys.version_info
    abi = sysconfig.get_config_var("SOABI") or f"py{v.major}{v.minor}-{_machine()}"
    digest = hashlib.sha256(json.dumps(pins, sort_keys=True).encode()).hexdigest()[:10]
    return (root or cache_root()) / f"site-{abi}-{digest}"


# ----------------------------------------------------------------------------- building
@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    made = [p for p in [root, *root.parents] if not p.exists()]
    root.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:  # the sandbox runs as nobody: it must traverse what we made
        for p in made:
            with contextlib.suppress(OSError):
                p.chmod(0o755)
    with open(root / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _world_readable(root: Path) -> None:
    for d, _, files in os.walk(root):
        os.chmod(d, 0o755)
        for f in files:
            path = os.path.join(d, f)
            if os.path.islink(path):
                continue
            mode = os.stat(path).st_mode
            os.chmod(path, 0o755 if mode & 0o111 else 0o644)


def _read_manifest(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((path / MANIFEST).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _land(tmp: Path, final: Path, manifest: dict[str, Any]) -> None:
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True), "utf-8")
    _world_readable(tmp)
    if final.exists():  # an incomplete earlier build (no manifest): replace it
        shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)


def _build_interpreter(final: Path) -> None:
    exe = _base_executable()
    short = f"{sys.version_info.major}.{sys.version_info.minor}"
    stdlib = Path(sysconfig.get_path("stdlib"))
    if not (stdlib / "os.py").is_file():
        raise SandboxError(f"this interpreter's standard library was not found at {stdlib}")
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        (tmp / "bin").mkdir()
        shutil.copy2(exe, tmp / "bin" / f"python{short}")
        shared = bool(sysconfig.get_config_var("Py_ENABLE_SHARED"))
        if shared:
            soname = sysconfig.get_config_var("INSTSONAME") or ""
            libdir = Path(sysconfig.get_config_var("LIBDIR") or "")
            lib = libdir / soname
            if soname and lib.is_file():
                (tmp / "lib").mkdir(exist_ok=True)
                shutil.copy2(lib, tmp / "lib" / soname)
            else:
                shared = False  # linked statically after all (e.g. Debian's python3)
        dest = tmp / "lib" / f"python{short}"
        shutil.copytree(stdlib, dest, symlinks=True, ignore=shutil.ignore_patterns(*_STDLIB_SKIP))
        # lib-dynload may sit outside the stdlib dir (platstdlib): bring it in
        dynload = Path(sysconfig.get_path("platstdlib")) / "lib-dynload"
        if dynload.is_dir() and not (dest / "lib-dynload").is_dir():
            shutil.copytree(dynload, dest / "lib-dynload")
        # the mount point of the packages, where this interpreter's site module looks
        site_rel = os.path.relpath(sandbox_site_dir(), SANDBOX_PREFIX)
        (tmp / site_rel).mkdir(parents=True, exist_ok=True)
        _land(
            tmp,
            final,
            {
                "kind": "interpreter",
                "python": platform.python_version(),
                "source": exe,
                "libpython_shared": shared,
                "site_dir": sandbox_site_dir(),  # asked once, at build time
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            },
        )
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _installed_versions(site: Path, names: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    want = {n.lower().replace("-", "_"): n for n in names}
    for meta in site.glob("*.dist-info"):
        dist, _, version = meta.name[: -len(".dist-info")].partition("-")
        key = dist.lower().replace("-", "_")
        if key in want:
            found[want[key]] = version
    return found


def _build_site(final: Path, packages: dict[str, str]) -> None:
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        argv = [
            sys.executable, "-m", "pip", "install", "--target", str(tmp), "--only-binary=:all:",
            "--no-input", "--disable-pip-version-check", "--no-warn-script-location", "-q",
            *(f"{name}=={version}" for name, version in packages.items()),
        ]  # fmt: skip
        try:
            out = subprocess.run(
                argv, capture_output=True, text=True, timeout=_PIP_TIMEOUT_S, stdin=subprocess.DEVNULL
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise SandboxError(f"pip could not be run ({exc})") from exc
        if out.returncode != 0:
            tail = "\n".join((out.stderr or out.stdout).strip().splitlines()[-6:])
            raise SandboxError(f"pip install {' '.join(argv[-len(packages):])} failed: {tail}")
        shutil.rmtree(tmp / "bin", ignore_errors=True)  # console scripts name host paths
        for tests in [*tmp.glob("*/tests"), *tmp.glob("*/*/tests")]:
            shutil.rmtree(tests, ignore_errors=True)  # the packages' own test suites
        versions = _installed_versions(tmp, list(packages))
        wrong = {n: versions.get(n) for n, v in packages.items() if versions.get(n) != v}
        if wrong:
            raise SandboxError(f"pip installed other versions than pinned: {wrong}")
        _land(
            tmp,
            final,
            {
                "kind": "site",
                "python": platform.python_version(),
                "packages": versions,
                "all": _installed_versions(tmp, [p.name.split("-")[0] for p in tmp.glob("*.dist-info")]),
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            },
        )
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def provision(*, install: bool | None = None, root: Path | None = None) -> Runtime:
    """The sandbox runtime, building what is missing (once per machine; shared, locked).

    ``install``: whether to install :data:`PACKAGES` when they are not there yet (default:
    yes unless ``$AGENTENVS_SANDBOX_PACKAGES=0``). A failed install is not an error: the
    runtime comes back without them and says why in ``missing_reason``.
    """
    root = root or cache_root()
    if install is None:
        install = os.environ.get(INSTALL_ENV, "1") not in ("0", "false", "no")
    interp = interpreter_dir(root)
    site = site_dir(root)
    with _locked(root):
        # under the lock, a temporary build dir is what a killed build left: remove it
        for stale in root.iterdir():
            if stale.name.startswith(".") and stale.is_dir() and not stale.is_symlink():
                shutil.rmtree(stale, ignore_errors=True)
        meta = _read_manifest(interp)
        if meta is None:
            _build_interpreter(interp)
            meta = _read_manifest(interp) or {}
        reason = ""
        if _read_manifest(site) is None:
            if not install:
                reason = f"not installed (${INSTALL_ENV}=0); run `agentenvs sandbox provision`"
            else:
                try:
                    _build_site(site, dict(PACKAGES))
                except SandboxError as exc:
                    reason = f"{exc}; run `agentenvs sandbox provision` where the index is reachable"
    site_meta = _read_manifest(site)
    return Runtime(
        prefix=str(interp),
        version=str(meta.get("python", platform.python_version())),
        libdir_needed=bool(meta.get("libpython_shared")),
        sandbox_site=str(meta.get("site_dir") or sandbox_site_dir()),
        site=str(site) if site_meta else None,
        packages=dict(site_meta.get("packages", {})) if site_meta else {},
        missing_reason=reason,
    )


_lock = threading.Lock()


@functools.lru_cache(maxsize=4)
def _cached(root: str) -> Runtime:
    return provision(root=Path(root))


def sandbox_runtime() -> Runtime:
    """:func:`provision` once per process and cache root (what the local sandbox binds)."""
    with _lock:
        return _cached(str(cache_root()))


def forget() -> None:
    """Drop the per-process cache (after ``provision`` built what was missing)."""
    with _lock:
        _cached.cache_clear()


def runtime_info() -> dict[str, Any]:
    """Paths and versions of the sandbox runtime this process uses."""
    return sandbox_runtime().info()
