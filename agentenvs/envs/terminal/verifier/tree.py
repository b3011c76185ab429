"""The verifier's tree: the code that runs the tests, made by the project on the host.

Laid out on the host and shown to the grading session read-only at :data:`MOUNT` (bound
into the local sandbox the grader opens after the freeze; on Docker, a directory bound
into the task's container when it is made, empty until the freeze):

- ``boot.py``: the launcher every verifier Python starts with (``files/boot.py``);
- ``pylib/``: pytest and what it imports, the plugins the verifier provides (from the
  project's wheelhouse, e.g. ``pytest-json-ctrf``), and the verdict plugin;
- ``offline/shim.py``: the offline stand-ins, in their verifier mode;
- ``bin/``: ``python3``, ``pytest``, ``uv``, ``uvx``, ``pip``, ``curl``, ``wget``,
  ``apt-get``, ... as small ``sh`` scripts that start the given interpreter isolated
  (``-I -S``) on ``boot.py``;
- ``channel/``: where the grader's socket appears (see ``channel.py``);
- ``pytest.ini``: an empty configuration, used when the task's tests bring none.

Nothing in it is ever written by a process of the sandbox or container.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import os
import shlex
import shutil
import subprocess
import threading
import zipfile
from pathlib import Path

from agentenvs.envs.terminal.data import DEFAULT_PATH
from agentenvs.sandbox._leftovers import owned_mkdtemp

#: where the grading session sees the tree
MOUNT = "/opt/agentenvs/verifier"
FILES = Path(__file__).resolve().parent / "files"
#: commands of the verifier's bin: name -> boot.py mode words
COMMANDS: dict[str, tuple[str, ...]] = {
    "python": ("python",),
    "python3": ("python",),
    "pytest": ("pytest",),
    "py.test": ("pytest",),
    **{
        tool: ("tool", tool)
        for tool in ("uv", "uvx", "pip", "pip3", "curl", "wget", "apt-get", "apt")
    },
}

_lock = threading.Lock()
_pylibs: dict[str, str] = {}

#: pytest and what it imports, copied for the sandbox's python3
PYTEST_PACKAGES = (
    "pytest",
    "_pytest",
    "pluggy",
    "iniconfig",
    "packaging",
    "py",
    "exceptiongroup",
    "tomli",
    "pygments",  # pytest 9 imports it at start-up
)

_pylib_lock = threading.Lock()
_pylib: str | None = None


def pytest_dir() -> str | None:
    """A world-readable copy of pytest's packages (made once per process), or None."""
    global _pylib
    with _pylib_lock:
        if _pylib is not None:
            return _pylib
        if importlib.util.find_spec("pytest") is None:
            return None
        root = owned_mkdtemp("agentenvs-pylib-")  # swept by a later start if we are killed
        atexit.register(shutil.rmtree, root, True)
        for name in PYTEST_PACKAGES:
            spec = importlib.util.find_spec(name)
            if spec is None or spec.origin is None:
                continue
            origin = Path(spec.origin)
            if spec.submodule_search_locations is not None:  # a package (maybe compiled)
                # __pycache__ too: the copy is read-only inside, so without its bytecode
                # every test run would compile pytest anew (most of its start-up time)
                shutil.copytree(origin.parent, Path(root) / name)
            else:
                shutil.copy2(origin, root)
                cached = importlib.util.cache_from_source(str(origin))
                if os.path.exists(cached):
                    dest = Path(root) / "__pycache__"
                    dest.mkdir(exist_ok=True)
                    shutil.copy2(cached, dest)
        # their metadata too: pytest and pluggy read their own versions (each package is
        # its own distribution but _pytest and py, which are pytest's; looked up by name,
        # as packages_distributions() would read the records of every installed one)
        import importlib.metadata as md

        for name in PYTEST_PACKAGES:
            try:
                path = getattr(md.distribution(name), "_path", None)
            except md.PackageNotFoundError:
                continue
            if path is not None and Path(path).is_dir():
                shutil.copytree(path, Path(root) / Path(path).name, dirs_exist_ok=True)
        _compile_for_sandbox(root)
        for d, _, files in os.walk(root):
            os.chmod(d, 0o755)
            for f in files:
                os.chmod(os.path.join(d, f), 0o644)
        # pytest's console script, last on PATH: the uv stand-ins run `pytest` by name
        launcher = Path(root) / "bin" / "pytest"
        launcher.parent.mkdir(mode=0o755)
        launcher.write_text('#!/bin/sh\nexec python3 -m pytest "$@"\n')
        launcher.chmod(0o755)
        _pylib = root
        return root


def _compile_for_sandbox(root: str) -> None:
    """Bytecode of ``root`` for the sandbox's own ``python3`` (the host's, on the image's
    PATH), when its version differs from this interpreter's: the copied caches match
    source mtimes (``copy2``), so ``compileall`` skips what is already current."""
    python = shutil.which("python3", path=DEFAULT_PATH)
    if python is None:
        return
    # a failure only costs speed: the sandbox then compiles in memory, as before
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(
            [python, "-m", "compileall", "-q", root],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={"PATH": DEFAULT_PATH},
            timeout=120,
            check=False,
        )


def readable(root: str | Path) -> None:
    """World-readable (dirs traversable, executables kept executable): the sandbox's
    user, or a container's, reads the tree."""
    os.chmod(root, 0o755)
    for d, dirs, files in os.walk(root):
        for name in dirs:
            os.chmod(os.path.join(d, name), 0o755)
        for name in files:
            path = os.path.join(d, name)
            if not os.path.islink(path):
                os.chmod(path, 0o755 if os.stat(path).st_mode & 0o100 else 0o644)


def _unpack_wheels(wheelhouse: Path, dest: Path) -> bool:
    """The pure-Python wheels of a wheelhouse unpacked into ``dest`` (False: none)."""
    wheels = [w for w in sorted(wheelhouse.glob("*.whl")) if w.name.endswith("-none-any.whl")]
    names = {w.name.split("-", 1)[0].lower() for w in wheels}
    if "pytest" not in names:
        return False
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as z:
            for member in z.namelist():
                target = (dest / member).resolve()
                if not str(target).startswith(str(dest.resolve()) + os.sep):
                    raise ValueError(f"{wheel}: an entry outside the wheel's root: {member!r}")
            z.extractall(dest)
    return True


def pylib(wheelhouse: Path | None) -> str:
    """``pylib/``, made once per process and wheelhouse: the wheelhouse's pure wheels
    (the official harnesses' pins) where there is one, else a copy of this interpreter's
    pytest; then the verdict plugin."""
    from agentenvs.sandbox._leftovers import owned_mkdtemp

    key = str(wheelhouse or "")
    with _lock:
        if key in _pylibs:
            return _pylibs[key]
        # one per process, like pytest's copy (swept by a later start if we are killed)
        root = Path(owned_mkdtemp("agentenvs-pylib-"))
        atexit.register(shutil.rmtree, root, True)
        dest = root / "pylib"
        dest.mkdir()
        if wheelhouse is None or not wheelhouse.is_dir() or not _unpack_wheels(wheelhouse, dest):
            copy = pytest_dir()
            if copy is None:
                raise RuntimeError("pytest is not installed in this interpreter")
            shutil.copytree(copy, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns("bin"))
        shutil.copy2(FILES / "pylib" / "agentenvs_verdict.py", dest)
        readable(root)
        _pylibs[key] = str(dest)
        return str(dest)


def wrapper(python: str, words: tuple[str, ...], mount: str = MOUNT) -> str:
    """A ``bin/`` command: the interpreter, isolated, on the launcher."""
    args = " ".join(shlex.quote(w) for w in words)
    return (
        "#!/bin/sh\n"
        f'exec {shlex.quote(python)} -I -S {shlex.quote(mount + "/boot.py")} {args} "$@"\n'
    )


def lay_out(dest: Path, python: str, wheelhouse: Path | None, *, link: bool = False) -> Path:
    """The tree at ``dest`` (made, or emptied first) for ``python``, the interpreter path
    inside the sandbox. ``link``: hard links to the shared ``pylib`` where the filesystem
    allows (a container's tree is laid out per grading)."""
    lib = Path(pylib(wheelhouse))
    dest.mkdir(parents=True, exist_ok=True)
    for entry in list(dest.iterdir()):
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    if link:
        try:
            shutil.copytree(lib, dest / "pylib", copy_function=os.link)
        except OSError:
            shutil.rmtree(dest / "pylib", ignore_errors=True)
            shutil.copytree(lib, dest / "pylib")
    else:
        shutil.copytree(lib, dest / "pylib")
    shutil.copy2(FILES / "boot.py", dest / "boot.py")
    (dest / "pytest.ini").write_text("[pytest]\n")
    offline = dest / "offline"
    offline.mkdir()
    shutil.copy2(FILES.parent.parent / "offline" / "shim.py", offline / "shim.py")
    bin_dir = dest / "bin"
    bin_dir.mkdir()
    for name, words in COMMANDS.items():
        (bin_dir / name).write_text(wrapper(python, words))
        (bin_dir / name).chmod(0o755)
    (dest / "channel").mkdir()
    if wheelhouse is not None and wheelhouse.is_dir():
        (dest / "wheelhouse").mkdir()
        for wheel in wheelhouse.glob("*.whl"):
            target = dest / "wheelhouse" / wheel.name
            try:
                if not link:
                    raise OSError
                os.link(wheel, target)
            except OSError:
                shutil.copy2(wheel, target)
    readable(dest)
    return dest


def container_dirs() -> str:
    """A host dir for one container's verifier mounts: ``v/`` (the tree, laid out at the
    freeze) and ``tests/``, both empty until then; removed with the container."""
    from agentenvs.sandbox._leftovers import owned_mkdtemp

    root = Path(owned_mkdtemp("agentenvs-box-"))
    (root / "v").mkdir()
    (root / "tests").mkdir()
    readable(root)
    return str(root)
