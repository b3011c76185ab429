"""Offline stand-ins for the tools that Terminal-Bench's test bootstraps download with.

Run inside a task's sandbox (any python3, standard library only) as ``shim.py TOOL
ARGS...``, through the small wrappers in ``bin/`` that come first on PATH when a task
runs offline. Each tool does what the bootstrap wants from it with what the image
already has, or from a local wheelhouse, and says clearly what it cannot provide:

- ``curl``/``wget``: the uv installer script (``.../uv/.../install.sh``) is answered with
  a script that installs these stand-ins of ``uv``/``uvx`` into ``~/.local/bin`` (with the
  ``env`` file the official installer writes); loopback URLs go to the real tool; any
  other download fails as a machine without network fails (curl exit 6).
- ``uv``: ``venv``/``init``/``sync``/``add``/``pip install``/``run``/``tool run``; ``uvx``.
  Virtual environments see the image's packages (``--system-site-packages``); a
  requirement is met when its distribution is installed (any version: a pin is noted,
  not enforced) or installable from the wheelhouse (``AGENTENVS_WHEELHOUSE``).
- ``pip``/``pip3``: ``install`` as above, other subcommands and an ``install --no-index``
  (whose sources are the task's own files) go to the real pip.
- ``apt-get``/``apt``: ``update``/``clean`` succeed; ``install`` succeeds when every
  package is installed in the image (or is one of these stand-ins), else fails naming
  the missing ones.

What could not be provided is appended to ``$AGENTENVS_OFFLINE_LOG`` (one line each), so
the env can report it beside the verdict.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BIN = HERE / "bin"
LOG = os.environ.get("AGENTENVS_OFFLINE_LOG", "/tmp/agentenvs-offline.log")
WHEELHOUSE = os.environ.get("AGENTENVS_WHEELHOUSE", "/opt/agentenvs/wheelhouse")
#: packages these stand-ins replace, for apt-get install
PROVIDED_PACKAGES = {"curl", "wget", "ca-certificates", "python3-pip", "pipx"}
UV_VERSION = "uv 0.7.13 (agentenvs offline stand-in)"
#: where Debian's python3-* packages live
DIST_PACKAGES = Path("/usr/lib/python3/dist-packages")
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def say(text: str) -> None:
    print(f"agentenvs offline: {text}", file=sys.stderr)


def unmet(what: str) -> None:
    """Report something the bootstrap needs that cannot be provided offline."""
    say(f"cannot provide {what} without network")
    try:
        with open(LOG, "a", encoding="utf-8") as f:
            f.write(what + "\n")
    except OSError:
        pass


def real_tool(name: str) -> str | None:
    """The first ``name`` on PATH that is not one of these stand-ins."""
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if not d:
            continue
        candidate = Path(d) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            try:
                if candidate.resolve().parent in (BIN, HERE):
                    continue
            except OSError:
                continue
            return str(candidate)
    return None


# ---------------------------------------------------------------- python environments
def requirement_name(req: str) -> str | None:
    """The distribution name of a requirement string (``pytest==8.4.1`` -> ``pytest``)."""
    req = req.strip()
    if not req or req.startswith(("#", "-")) or "://" in req or req.startswith((".", "/")):
        return None
    m = _NAME.match(req)
    return m.group(1) if m else None


def read_requirements(path: str) -> list[str]:
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        unmet(f"requirements file {path}")
        return []
    out = []
    for line in lines:
        line = line.split(" #", 1)[0].strip()
        if line.startswith(("-r ", "--requirement ")):
            out += read_requirements(str(Path(path).parent / line.split(None, 1)[1]))
        elif line and not line.startswith(("#", "-")):
            out.append(line)
    return out


#: the verifier's tree when these stand-ins serve the tests of a safe grading (None:
#: the agent's session or an official grading); see :func:`verifier_mode`
VERIFIER: Path | None = None


def verifier_mode(root: str) -> None:
    """Serve the verifier: its own Python for every environment, venvs that are made
    afresh (never one found in place), wheels unpacked by this code (never the image's
    pip or its configuration), and the verifier's commands in the uv installer."""
    global VERIFIER, BIN
    VERIFIER = Path(root)
    BIN = VERIFIER / "bin"


def _mark() -> str:
    return os.environ.get("AGENTENVS_VERIFIER_MARK", "")


def _marked(venv: Path) -> bool:
    try:
        text = (venv / "pyvenv.cfg").read_text(errors="replace")
    except OSError:
        return False
    return bool(_mark()) and f"agentenvs-verifier = {_mark()}" in text


def python_of(venv: Path | None) -> str:
    if VERIFIER is not None:
        if venv is not None and _marked(venv):
            return str(venv / "bin" / "python")
        return str(VERIFIER / "bin" / "python3")
    if venv is not None and (venv / "bin" / "python").exists():
        return str(venv / "bin" / "python")
    return real_tool("python3") or sys.executable


def has_distribution(python: str, name: str) -> str | None:
    """The installed version of ``name`` seen by ``python`` (None: not installed)."""
    code = (
        "import importlib.metadata as m, sys\n"
        "try: print(m.version(sys.argv[1]))\n"
        "except m.PackageNotFoundError: sys.exit(1)\n"
    )
    r = subprocess.run([python, "-c", code, name], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


def _wheel_for(req: str) -> Path | None:
    """A pure-Python wheel of the wheelhouse meeting ``req`` (its name and ``==`` pin)."""
    name = (requirement_name(req) or "").lower().replace("-", "_").replace(".", "_")
    pinned = re.search(r"==\s*([^\s;,]+)", req)
    best = None
    for wheel in sorted(Path(WHEELHOUSE).glob("*.whl")):
        parts = wheel.name[:-4].split("-")
        if len(parts) < 5 or parts[0].lower().replace(".", "_") != name:
            continue
        if parts[-1] != "any" or parts[-2] != "none":
            continue
        if pinned and parts[1] != pinned.group(1):
            continue
        best = wheel
    return best


def _unpack_wheel(req: str, venv: Path | None) -> bool:
    """The verifier's install: a pure wheel of the wheelhouse unpacked into the venv's
    site dir (or the verifier's installs), no installer, no configuration read."""
    import zipfile

    wheel = _wheel_for(req)
    if wheel is None:
        return False
    if venv is not None:
        target = (
            venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
        )
    else:
        target = Path(os.environ.get("AGENTENVS_VERIFIER_INSTALLS", str(Path.home() / "site")))
    target.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as z:
        for member in z.namelist():
            dest = (target / member).resolve()
            if not str(dest).startswith(str(target.resolve()) + os.sep):
                say(f"{wheel.name}: refused the entry {member!r}")
                return False
        z.extractall(target)
    return True


def from_wheelhouse(python: str, req: str, venv: Path | None = None) -> bool:
    if not Path(WHEELHOUSE).is_dir():
        return False
    if VERIFIER is not None:
        return _unpack_wheel(req, venv)
    pip = [python, "-m", "pip"]
    if subprocess.run([*pip, "--version"], capture_output=True).returncode != 0:
        system = real_tool("python3") or sys.executable
        pip = [system, "-m", "pip", "--python", python]
    r = subprocess.run(
        [
            *pip,
            "install",
            "-q",
            "--no-index",
            "--find-links",
            WHEELHOUSE,
            "--break-system-packages",
            "--disable-pip-version-check",
            req,
        ],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        sys.stderr.write(r.stdout + r.stderr)
    return r.returncode == 0


def ensure(python: str, reqs: list[str], venv: Path | None = None) -> bool:
    """Make every requirement importable by ``python``; False when one cannot be."""
    ok = True
    for req in reqs:
        name = requirement_name(req)
        if name is None:
            unmet(f"the requirement {req!r} (not a package name)")
            ok = False
            continue
        version = has_distribution(python, name)
        if version is None and from_wheelhouse(python, req, venv):
            version = has_distribution(python, name)
        if version is None:
            unmet(f"the Python package {req!r}")
            ok = False
            continue
        pinned = re.search(r"==\s*([^\s;,]+)", req)
        if pinned and pinned.group(1) != version:
            say(f"{name} {version} from the image stands in for {req}")
        if venv is not None:
            console_scripts(python, name, venv)
    return ok


def console_scripts(python: str, name: str, venv: Path) -> None:
    """Wrappers in the venv's bin for ``name``'s commands (the image's packages have
    theirs in /usr/bin, run by the system interpreter)."""
    code = (
        "import importlib.metadata as m, sys\n"
        "for e in m.distribution(sys.argv[1]).entry_points:\n"
        "    if e.group == 'console_scripts': print(e.name, e.value)\n"
    )
    r = subprocess.run([python, "-c", code, name], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        script, _, value = line.partition(" ")
        module, _, attr = value.partition(":")
        target = venv / "bin" / script
        if target.exists() or not module or "/" in script:
            continue
        attr = attr.strip() or "main"
        target.write_text(
            f"#!{venv}/bin/python\nimport importlib, sys\n"
            f"sys.argv[0] = {script!r}\n"
            f"fn = importlib.import_module({module.strip()!r})\n"
            f"for part in {attr!r}.split('.'):\n"
            "    fn = getattr(fn, part)\n"
            "sys.exit(fn())\n"
        )
        target.chmod(0o755)


def _verifier_venv(path: Path) -> Path:
    """A venv of the verifier's Python, made afresh unless this grading made it: what
    was at ``path`` before (a venv the agent prepared) goes."""
    import shutil

    if _marked(path):
        return path
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
    assert VERIFIER is not None
    bin_dir = path / "bin"
    bin_dir.mkdir(parents=True)
    (path / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages").mkdir(
        parents=True
    )
    (path / "pyvenv.cfg").write_text(
        f"home = {VERIFIER / 'bin'}\ninclude-system-site-packages = true\n"
        f"agentenvs-verifier = {_mark()}\n"
    )
    venv = shlex.quote(str(path.resolve()))
    for name in ("python", "python3", "pytest", "py.test"):
        target = shlex.quote(
            str(
                VERIFIER / "bin" / name.replace("python", "python3", 1)
                if name.startswith("python")
                else VERIFIER / "bin" / name
            )
        )
        (bin_dir / name).write_text(f'#!/bin/sh\nVIRTUAL_ENV={venv} exec {target} "$@"\n')
        (bin_dir / name).chmod(0o755)
    for name in ("pip", "pip3", "uv", "uvx"):
        (bin_dir / name).write_text(
            f'#!/bin/sh\nVIRTUAL_ENV={venv} exec {shlex.quote(str(VERIFIER / "bin" / name))} "$@"\n'
        )
        (bin_dir / name).chmod(0o755)
    (bin_dir / "activate").write_text(
        f'VIRTUAL_ENV={venv}\nexport VIRTUAL_ENV\nPATH="$VIRTUAL_ENV/bin:$PATH"\nexport PATH\n'
        "deactivate () { :; }\n"
    )
    return path


def make_venv(path: Path) -> Path:
    if VERIFIER is not None:
        return _verifier_venv(path)
    if not (path / "bin" / "python").exists():
        system = real_tool("python3") or sys.executable
        r = subprocess.run(
            [system, "-m", "venv", "--system-site-packages", "--without-pip", str(path)],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            sys.stderr.write(r.stdout + r.stderr)
            raise SystemExit(1)
    return path


def project_venv() -> Path:
    """The venv uv would use here: $VIRTUAL_ENV, else the project's .venv."""
    active = os.environ.get("UV_PROJECT_ENVIRONMENT") or os.environ.get("VIRTUAL_ENV")
    if VERIFIER is not None:
        # the verifier's own (a venv found in the work dir is the agent's: never used)
        if active and _marked(Path(active)):
            return Path(active)
        name = re.sub(r"[^A-Za-z0-9._-]", "_", str(Path.cwd())) or "root"
        return make_venv(Path.home() / "venvs" / name)
    return make_venv(Path(active) if active else Path.cwd() / ".venv")


def project_dependencies() -> list[str]:
    path = Path.cwd() / "pyproject.toml"
    if not path.is_file():
        return []
    try:
        import tomllib
    except ImportError:  # python < 3.11
        return []
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, ValueError):
        return []
    deps = list(data.get("project", {}).get("dependencies", []))
    for group in data.get("dependency-groups", {}).values():
        deps += [d for d in group if isinstance(d, str)]
    return deps


def run_in(venv: Path | None, argv: list[str]) -> int:
    if not argv:
        say("nothing to run")
        return 2
    env = dict(os.environ)
    if venv is not None:
        env["VIRTUAL_ENV"] = str(venv)
        env["PATH"] = f"{venv}/bin{os.pathsep}{env.get('PATH', '')}"
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        say(f"cannot run {argv[0]}: {exc}")
    return 127


# ---------------------------------------------------------------- uv
#: uv options that take a value (the rest are flags)
_UV_VALUED = {
    "--python",
    "-p",
    "--with",
    "-w",
    "--with-requirements",
    "--with-editable",
    "--project",
    "--directory",
    "--index-url",
    "-i",
    "--extra-index-url",
    "--index",
    "--find-links",
    "-f",
    "--cache-dir",
    "--python-preference",
    "--color",
    "--extra",
    "--group",
    "--env-file",
    "--constraint",
    "-c",
    "--override",
    "--prerelease",
    "--resolution",
    "--config-file",
    "--python-platform",
    "--requirement",
    "-r",
    "--from",
    "--only-group",
    "--package",
}


def _split(args: list[str], stop_at_command: bool) -> tuple[dict[str, list[str]], list[str]]:
    opts: dict[str, list[str]] = {}
    rest: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            rest += args[i + 1 :]
            break
        if a.startswith("-") and (not stop_at_command or not rest):
            key, eq, value = a.partition("=")
            if key in _UV_VALUED and not eq:
                value = args[i + 1] if i + 1 < len(args) else ""
                i += 1
            opts.setdefault(key, []).append(value)
        elif stop_at_command and not a.startswith("-"):
            rest += args[i:]
            break
        else:
            rest.append(a)
        i += 1
    return opts, rest


def _with(opts: dict[str, list[str]]) -> list[str]:
    given = opts.get("--with", []) + opts.get("-w", [])
    reqs = [r for v in given for r in v.split(",") if r.strip()]
    for f in opts.get("--with-requirements", []):
        reqs += read_requirements(f)
    return reqs


def _chdir(opts: dict[str, list[str]]) -> None:
    for key in ("--directory", "--project"):
        for d in opts.get(key, []):
            os.chdir(d)


def uv(args: list[str]) -> int:
    opts, rest = _split(args, stop_at_command=True)
    if "--version" in opts or "-V" in opts or rest == ["version"]:
        print(UV_VERSION)
        return 0
    if not rest:
        say("usage: uv COMMAND (venv, init, add, sync, pip install, run, tool run)")
        return 2
    cmd, args = rest[0], rest[1:]
    if cmd in ("self", "cache") or (cmd == "python" and args[:1] in (["install"], ["pin"])):
        return 0
    if cmd == "tool" and args[:1] == ["run"]:
        return uvx(args[1:])
    if cmd == "tool" and args[:1] == ["install"]:
        o, r = _split(args[1:], stop_at_command=False)
        return 0 if ensure(python_of(None), r + _with(o)) else 1
    if cmd == "pip":
        return pip(args, uv_venv=True)
    opts2, rest2 = _split(args, stop_at_command=cmd == "run")
    for k, v in opts2.items():
        opts.setdefault(k, []).extend(v)
    _chdir(opts)
    if cmd == "venv":
        target = Path(rest2[0]) if rest2 else Path(".venv")
        make_venv(target)
        print(f"Creating virtual environment at: {target}")
        return 0
    if cmd == "init":
        target = Path(rest2[0]) if rest2 else Path.cwd()
        target.mkdir(parents=True, exist_ok=True)
        pyproject = target / "pyproject.toml"
        if not pyproject.exists():
            name = re.sub(r"[^A-Za-z0-9._-]", "-", target.resolve().name) or "project"
            pyproject.write_text(
                f'[project]\nname = "{name}"\nversion = "0.1.0"\ndependencies = []\n'
            )
        return 0
    if cmd in ("add", "sync", "lock"):
        venv = project_venv()
        reqs = list(rest2) if cmd == "add" else project_dependencies()
        for f in opts.get("-r", []) + opts.get("--requirement", []):
            reqs += read_requirements(f)
        return 0 if ensure(python_of(venv), reqs, venv) else 1
    if cmd == "run":
        no_project = "--no-project" in opts or "--isolated" in opts
        venv = None if no_project and not os.environ.get("VIRTUAL_ENV") else project_venv()
        reqs = _with(opts)
        if venv is not None and not no_project:
            reqs = project_dependencies() + reqs
        if reqs and not ensure(python_of(venv), reqs, venv):
            return 1
        return run_in(venv, rest2)
    unmet(f"uv {cmd}")
    return 2


def uvx(args: list[str]) -> int:
    opts, rest = _split(args, stop_at_command=True)
    if not rest:
        say("usage: uvx COMMAND")
        return 2
    package = (opts.get("--from") or [rest[0]])[0]
    name = requirement_name(package.split("@", 1)[0]) or package
    command = rest[0].split("@", 1)[0].split("==", 1)[0]
    if not ensure(python_of(None), [name, *_with(opts)]):
        return 1
    return run_in(None, [command, *rest[1:]])


# ---------------------------------------------------------------- pip
_PIP_VALUED = {
    "-r",
    "--requirement",
    "-c",
    "--constraint",
    "-i",
    "--index-url",
    "--extra-index-url",
    "-f",
    "--find-links",
    "--target",
    "-t",
    "--prefix",
    "--root",
    "--python",
    "-e",
    "--editable",
    "--cache-dir",
    "--trusted-host",
    "--progress-bar",
    "--platform",
    "--python-version",
    "--implementation",
    "--abi",
    "--only-binary",
    "--no-binary",
    "--src",
    "--upgrade-strategy",
    "--log",
    "--timeout",
    "--retries",
    "--proxy",
}


def _distribution_managed() -> bool:
    """Whether the distribution installed Python packages pip cannot uninstall (their
    metadata has no RECORD)."""
    try:
        return any(
            not (info / "RECORD").exists() for info in DIST_PACKAGES.glob("*.dist-info")
        )
    except OSError:
        return False


def pip(args: list[str], uv_venv: bool = False) -> int:
    # anything but an install, and an install that reads no index (its sources are the
    # command's own files and --find-links: nothing of it needs the network), is the
    # image's own pip's to do as written; the verifier never runs the image's pip
    own_sources = VERIFIER is None and args[:1] == ["install"] and "--no-index" in args
    if not args or args[0] != "install" or own_sources:
        real = real_tool("pip3") or real_tool("pip")
        if real is None:
            say("pip is not installed in the image")
            return 1
        # packages the distribution installed (no RECORD: pip cannot replace them, e.g.
        # the Debian pytest and pluggy of the stand-in bases, which python:3.X images do
        # not have) are left in place and the wheels installed beside them
        extra = ["--ignore-installed"] if own_sources and _distribution_managed() else []
        os.execv(real, [real, *args, *extra])
    reqs: list[str] = []
    i, args = 0, args[1:]
    system = False
    while i < len(args):
        a = args[i]
        key, eq, value = a.partition("=")
        if key in _PIP_VALUED:
            if not eq:
                i += 1
                value = args[i] if i < len(args) else ""
            if key in ("-r", "--requirement"):
                reqs += read_requirements(value)
            elif key in ("-e", "--editable"):
                unmet(f"an editable install of {value}")
                return 1
        elif a == "--system":
            system = True
        elif not a.startswith("-"):
            if a.startswith((".", "/")) and Path(a).exists():
                unmet(f"building the local project {a}")
                return 1
            reqs.append(a)
        i += 1
    venv: Path | None = None
    if os.environ.get("VIRTUAL_ENV"):
        venv = Path(os.environ["VIRTUAL_ENV"])
    elif uv_venv and not system and (Path.cwd() / ".venv").exists():
        venv = Path.cwd() / ".venv"
    if VERIFIER is not None and venv is not None and not _marked(venv):
        venv = None  # a venv the verifier did not make is not one it installs into
    return 0 if ensure(python_of(venv), reqs, venv) else 1


# ---------------------------------------------------------------- apt
def installed_deb(name: str) -> bool:
    try:
        r = subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", name], capture_output=True, text=True
        )
    except OSError:
        return False
    return r.returncode == 0 and "install ok installed" in r.stdout


def apt(args: list[str]) -> int:
    words = [a for a in args if not a.startswith("-")]
    if not words:
        return 0
    cmd, pkgs = words[0], words[1:]
    if cmd in ("update", "clean", "autoclean", "autoremove", "upgrade", "dist-upgrade"):
        return 0
    if cmd == "install":
        missing = []
        for pkg in pkgs:
            name = re.split(r"[=:]", pkg, maxsplit=1)[0]
            if name in PROVIDED_PACKAGES or installed_deb(name):
                continue
            missing.append(name)
        if missing:
            for name in missing:
                unmet(f"the Debian package {name!r}")
            print(f"E: Unable to locate package {missing[0]} (offline: not in the image)")
            return 100
        return 0
    real = real_tool("apt-get")
    if real is None:
        return 100
    os.execv(real, [real, *args])
    return 100


# ---------------------------------------------------------------- downloads
_UV_INSTALLER = re.compile(r"/uv/(?:[^/]+/)?install\.sh$")
_LOOPBACK = re.compile(
    r"^(?:[a-z]+://)?(?:localhost|127\.\d+\.\d+\.\d+|\[::1\]|0\.0\.0\.0)(?:[:/]|$)"
)


def installer_script() -> str:
    """What the uv installer would do: uv and uvx in ~/.local/bin, and its env file."""
    tool = shlex.quote(str(BIN))
    return f"""#!/bin/sh
set -e
dest="${{XDG_BIN_HOME:-$HOME/.local/bin}}"
mkdir -p "$dest"
ln -sf {tool}/uv "$dest/uv"
ln -sf {tool}/uvx "$dest/uvx"
cat > "$dest/env" <<EOF
#!/bin/sh
case ":\\${{PATH}}:" in *:"$dest":*) ;; *) export PATH="$dest:\\$PATH" ;; esac
EOF
mkdir -p "$HOME/.cargo"
cp "$dest/env" "$HOME/.cargo/env"
echo "installing to $dest (offline stand-in of uv)"
"""


def download(tool: str, args: list[str]) -> int:
    urls = [a for a in args if re.match(r"^[a-z]+://", a) or _LOOPBACK.match(a)]
    if urls and all(_LOOPBACK.match(u) or u.startswith("file://") for u in urls):
        real = real_tool(tool)
        if real is None:
            say(f"{tool} is not installed in the image")
            return 127
        os.execv(real, [real, *args])
    for url in urls:
        if _UV_INSTALLER.search(url.split("?", 1)[0]):
            out = None
            for flag in ("-o", "--output", "-O"):
                if flag in args and args.index(flag) + 1 < len(args):
                    out = args[args.index(flag) + 1]
            if tool == "wget" and out is None:
                out = "-" if "-O-" in args or "-qO-" in args else "install.sh"
            script = installer_script()
            if out in (None, "-"):
                sys.stdout.write(script)
            else:
                Path(out).write_text(script)
            return 0
    for url in urls or ["(no URL)"]:
        unmet(f"the download {url}")
    print(f"{tool}: (6) Could not resolve host (offline)", file=sys.stderr)
    return 6 if tool == "curl" else 4


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        say("usage: shim.py TOOL ARGS...")
        return 2
    tool, args = Path(argv[1]).name, argv[2:]
    if tool == "uv":
        return uv(args)
    if tool == "uvx":
        return uvx(args)
    if tool in ("pip", "pip3"):
        return pip(args)
    if tool in ("apt-get", "apt"):
        return apt(args)
    if tool in ("curl", "wget"):
        return download(tool, args)
    say(f"no stand-in for {tool}")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
