"""The verifier's launcher: every Python the tests start through the verifier runs here.

Started as ``PYTHON -I -S boot.py MODE ARGS...`` by the wrappers in the verifier's ``bin``
(standard library only: it runs under the task image's interpreter or the host's). ``-I
-S`` leaves out every environment variable, the user site, the current directory and
``site`` itself, so no ``.pth`` file, ``sitecustomize`` or ``usercustomize`` runs. The
search path is then built here, in this order: the verifier's own packages (pytest and
the plugins it provides), the standard library, the task's declared ``PYTHONPATH``, the
verifier's venv (one the verifier made in this grading), the interpreter's site dirs, the
agent's user site, the verifier's installs, and last the current directory. Site dirs
are added as paths: a ``.pth`` file's path lines count, its ``import`` lines never run.
So the agent's packages stay importable by the tests, and nothing of the agent's can
shadow the runner or the standard library.

Modes: ``python`` (the interpreter's command line), ``pytest`` (pytest with the
verifier's plugin, autoload off, its arguments checked), ``tool NAME`` (the offline
stand-ins: uv, uvx, pip, curl, wget, apt-get).
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PYLIB = os.path.join(HERE, "pylib")
#: the plugin that writes the verdict on the grader's channel
PLUGIN = "agentenvs_verdict"
#: pytest options whose value names a module or a file pytest loads
_VALUED = {
    "-p",
    "-c",
    "--config-file",
    "--rootdir",
    "--confcutdir",
    "-o",
    "--override-ini",
    "--basetemp",
    "-k",
    "-m",
    "--deselect",
    "--ignore",
    "--ignore-glob",
    "--junitxml",
    "--junit-xml",
    "--ctrf",
    "--durations",
    "--maxfail",
    "--tb",
    "-r",
    "--import-mode",
    "-W",
    "--pythonwarnings",
    "--log-level",
    "--log-file",
    "--log-cli-level",
    "--capture",
    "--color",
    "--timeout",
}


def _env(name, default=""):
    return os.environ.get(name, default)


#: where the grader puts the task's tests (read-only); fixed: a variable could be set by
#: any process that starts the launcher
TESTS = "/tests"


def tests_dir():
    return os.path.realpath(TESTS)


def _site_dirs():
    """The interpreter's own site dirs, as ``site`` would name them (without running it)."""
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    out = []
    for prefix in dict.fromkeys([sys.prefix, sys.exec_prefix, "/usr/local", "/usr"]):
        out += [
            os.path.join(prefix, "lib", version, "site-packages"),
            os.path.join(prefix, "lib", version, "dist-packages"),
            os.path.join(prefix, "lib", "python3", "dist-packages"),
            os.path.join(prefix, "lib64", version, "site-packages"),
        ]
    return out


def _venv_dirs():
    """The site dir of the active venv, when the verifier made it in this grading."""
    venv = _env("VIRTUAL_ENV")
    mark = _env("AGENTENVS_VERIFIER_MARK")
    if not venv or not mark:
        return []
    try:
        with open(os.path.join(venv, "pyvenv.cfg"), encoding="utf-8") as f:
            if ("agentenvs-verifier = " + mark) not in f.read():
                return []
    except OSError:
        return []
    return [
        os.path.join(
            venv, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}", "site-packages"
        )
    ]


def _add(path, seen):
    path = os.path.abspath(path)
    if path in seen or not os.path.isdir(path):
        return
    seen.add(path)
    sys.path.append(path)


def _add_sitedir(path, seen):
    """A site dir and the path lines of its ``.pth`` files; no line is executed."""
    if not os.path.isdir(path) or os.path.abspath(path) in seen:
        return
    _add(path, seen)
    try:
        names = sorted(n for n in os.listdir(path) if n.endswith(".pth") and not n.startswith("."))
    except OSError:
        return
    for name in names:
        try:
            with open(os.path.join(path, name), encoding="utf-8", errors="replace") as f:
                lines = f.read(1 << 16).splitlines()
        except OSError:
            continue
        for line in lines:
            line = line.rstrip()
            if not line or line.startswith("#") or line.startswith(("import ", "import\t")):
                continue
            _add(os.path.join(path, line), seen)


def build_path():
    """sys.path, in the order the module docstring gives."""
    stdlib = [p for p in sys.path if p and os.path.abspath(p) != os.path.abspath(HERE)]
    sys.path[:] = []
    seen = set()
    _add(PYLIB, seen)
    for p in stdlib:
        _add(p, seen)
    for p in _env("AGENTENVS_VERIFIER_PYTHONPATH").split(os.pathsep):
        if p:
            _add(p, seen)
    for p in _venv_dirs():
        _add_sitedir(p, seen)
    for p in _site_dirs():
        _add_sitedir(p, seen)
    home = _env("AGENTENVS_AGENT_HOME", "/root")
    _add_sitedir(
        os.path.join(
            home,
            ".local",
            "lib",
            f"python{sys.version_info[0]}.{sys.version_info[1]}",
            "site-packages",
        ),
        seen,
    )
    installs = _env("AGENTENVS_VERIFIER_INSTALLS")
    if installs:
        _add_sitedir(installs, seen)
    try:
        _add(os.getcwd(), seen)
    except OSError:
        pass


# ---------------------------------------------------------------- pytest
def _under(path, root):
    path = os.path.realpath(path)
    return path == root or path.startswith(root.rstrip("/") + "/")


def _allowed_plugin(name):
    """A ``-p`` module the verifier lets pytest load: ``no:...``, pytest's own, the
    verifier's packages, or a module of the task's tests."""
    if name.startswith("no:") or name == PLUGIN:
        return True
    import importlib.util

    # the top-level package only: finding a submodule would import (run) its parents
    top = name.split(":", 1)[-1].split(".", 1)[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError, AttributeError):
        return False
    origin = getattr(spec, "origin", None) if spec is not None else None
    if origin in (None, "built-in", "frozen"):
        return origin is not None
    return _under(origin, PYLIB) or _under(origin, tests_dir())


def _provided_plugins():
    """The pytest plugins (entry point modules) the verifier's packages provide."""
    import importlib.metadata as md

    found = []
    for dist in md.distributions(path=[PYLIB]):
        for ep in dist.entry_points:
            if ep.group == "pytest11" and ep.value not in found:
                found.append(ep.value.split(":", 1)[0])
    return found


def pytest_args(args):
    """The arguments pytest runs with: the task's, less what would load code from outside
    the verifier and the task's tests, then the verifier's plugins and configuration."""
    tests = tests_dir()
    out = []
    dropped = []
    i = 0
    while i < len(args):
        a = args[i]
        key, eq, value = a.partition("=") if a.startswith("--") else (a, "", "")
        if a.startswith("-p") and a != "-p" and not a.startswith("--"):
            key, value, eq = "-p", a[2:], "="
        if key in _VALUED and not eq:
            value = args[i + 1] if i + 1 < len(args) else ""
            i += 1
        i += 1
        if key == "-p":
            if _allowed_plugin(value):
                out += ["-p", value]
            else:
                dropped.append("-p " + value)
            continue
        if key in ("-c", "--config-file", "--rootdir", "--confcutdir"):
            if value and _under(value, tests):
                out.append(key + "=" + value)
            else:
                dropped.append(key + " " + value)
            continue
        if key in ("-o", "--override-ini"):
            # (pythonpath puts dirs first on sys.path: the runner's imports would follow)
            if value.split("=", 1)[0].strip() in ("addopts", "required_plugins", "pythonpath"):
                dropped.append(key + " " + value)
                continue
        if key == "--pyargs":
            dropped.append(key)
            continue
        if key in _VALUED:
            out.append(key + "=" + value if key.startswith("--") else key)
            if not key.startswith("--"):
                out.append(value)
            continue
        out.append(a)
    if dropped:
        sys.stderr.write("agentenvs verifier: ignored " + ", ".join(dropped) + "\n")
    # no cache: the tests' dir is read-only, and a cache the agent left is not read
    extra = ["-p", PLUGIN, "-p", "no:cacheprovider"]
    for name in _provided_plugins():
        extra += ["-p", name]
    given = " ".join(out)
    if "-c" not in out and "--config-file=" not in given:
        configs = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
        own = [c for c in configs if os.path.isfile(os.path.join(tests, c))]
        extra.append(
            "--config-file=" + os.path.join(tests if own else HERE, own[0] if own else "pytest.ini")
        )
    if "--rootdir=" not in given:
        extra.append("--rootdir=" + tests)
    if "--confcutdir=" not in given:
        extra.append("--confcutdir=" + tests)
    return extra + out


def run_pytest(args):
    os.environ.pop("PYTEST_ADDOPTS", None)
    os.environ.pop("PYTEST_PLUGINS", None)
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    sys.argv = ["pytest"] + list(args)
    import pytest

    return pytest.main(pytest_args(list(args)))


# ---------------------------------------------------------------- python's command line
_FLAGS_WITH_VALUE = ("-W", "-X", "--check-hash-based-pycs")


def run_python(args):
    """What ``python ARGS`` does: ``-c``, ``-m``, a script, ``-`` or stdin (flags that change
    isolation are ignored: the verifier's interpreter is always isolated)."""
    import runpy

    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-V", "--version"):
            sys.stdout.write("Python {}.{}.{}\n".format(*sys.version_info[:3]))
            return 0
        if a == "-c":
            code = args[i + 1] if i + 1 < len(args) else ""
            sys.argv = ["-c"] + args[i + 2 :]
            main = {"__name__": "__main__", "__builtins__": __builtins__}
            exec(compile(code, "<string>", "exec"), main)  # noqa: S102 - python -c
            return 0
        if a.startswith("-c") and len(a) > 2:
            return run_python(["-c", a[2:]] + args[i + 1 :])
        if a == "-m" or (a.startswith("-m") and len(a) > 2):
            module = a[2:] if len(a) > 2 else (args[i + 1] if i + 1 < len(args) else "")
            rest = args[i + 1 :] if len(a) > 2 else args[i + 2 :]
            if module == "pytest" or module == "py.test":
                return run_pytest(rest)
            sys.argv = [module] + rest
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            return 0
        if a in _FLAGS_WITH_VALUE:
            i += 2
            continue
        if a == "-" or not a.startswith("-"):
            if a == "-":
                sys.argv = ["-"] + args[i + 1 :]
                code = sys.stdin.read()
                exec(compile(code, "<stdin>", "exec"), {"__name__": "__main__"})  # noqa: S102
                return 0
            sys.argv = args[i:]
            sys.path.insert(0, os.path.dirname(os.path.abspath(a)))
            runpy.run_path(a, run_name="__main__")
            return 0
        i += 1
    sys.stderr.write("agentenvs verifier: no interactive interpreter\n")
    return 2


def main(argv):
    build_path()
    mode, args = (argv[1] if len(argv) > 1 else "python"), argv[2:]
    if mode == "pytest":
        return run_pytest(args)
    if mode == "tool":
        sys.path.insert(0, os.path.join(HERE, "offline"))
        import shim

        shim.verifier_mode(HERE)
        return shim.main(["shim.py"] + args)
    return run_python(args)


if __name__ == "__main__":
    code = main(sys.argv)
    sys.exit(code if isinstance(code, int) else 0)
