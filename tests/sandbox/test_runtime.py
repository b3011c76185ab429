"""The local sandbox's Python: the runtime the project provisions, and nothing of the host's."""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import agentenvs
from agentenvs.core.errors import SandboxError
from agentenvs.sandbox import make_sandbox, runtime


@pytest.fixture
def bare_root(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A cache root of its own holding the interpreter only (no packages installed)."""
    # under the system temp dir, traversable by the uid the sandbox runs as
    root = Path(tempfile.mkdtemp(prefix="agentenvs-rt-test-"))
    root.chmod(0o755)
    monkeypatch.setenv(runtime.ROOT_ENV, str(root))
    monkeypatch.setenv(runtime.INSTALL_ENV, "0")
    runtime.forget()
    try:
        yield root
    finally:
        monkeypatch.undo()
        runtime.forget()
        shutil.rmtree(root, ignore_errors=True)


def _inside(code: str) -> dict:
    box = make_sandbox("local")
    try:
        out = box.run(["python3", "-c", code], timeout=120)
    finally:
        box.close()
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_the_default_runtime_holds_the_pinned_packages() -> None:
    rt = runtime.sandbox_runtime()
    assert rt.packages == runtime.PACKAGES, rt.missing_reason
    assert rt.version == ".".join(map(str, sys.version_info[:3]))
    info = runtime.runtime_info()
    assert info["prefix"] == rt.prefix and info["packages"] == runtime.PACKAGES
    for d in (rt.prefix, rt.site):
        assert d is not None
        assert json.loads((Path(d) / runtime.MANIFEST).read_text())["python"] == rt.version


@pytest.mark.bwrap
def test_the_sandbox_sees_the_runtime_and_not_the_host_python(local_box: object) -> None:
    code = """
import json, os, sys
import numpy, pandas
try:
    import agentenvs
    found = agentenvs.__file__
except ImportError:
    found = None
print(json.dumps({"prefix": sys.prefix, "base": sys.base_prefix, "path": sys.path,
                  "numpy": numpy.__version__, "pandas": pandas.__version__,
                  "agentenvs": found, "exe": sys.executable,
                  "visible": {p: os.path.exists(p) for p in PATHS}}))
"""
    host = {
        *site.getsitepackages(),
        sysconfig.get_path("purelib"),
        sysconfig.get_path("stdlib"),
        os.path.dirname(agentenvs.__file__),
        os.path.realpath(sys.executable),
    }
    if site.ENABLE_USER_SITE and site.getusersitepackages():
        host.add(site.getusersitepackages())
    # the system's own tree is bound read-only (its Python is the distribution's, not ours)
    host = {p for p in host if not p.startswith("/usr/") or "agentenvs" in p}
    seen = _inside(code.replace("PATHS", repr(sorted(host))))
    assert seen["prefix"] == seen["base"] == runtime.SANDBOX_PREFIX
    assert all(p == "" or p.startswith(runtime.SANDBOX_PREFIX) for p in seen["path"]), seen["path"]
    assert (seen["numpy"], seen["pandas"]) == (runtime.PACKAGES["numpy"], runtime.PACKAGES["pandas"])
    assert seen["agentenvs"] is None
    assert not any(seen["visible"].values()), seen["visible"]


@pytest.mark.bwrap
def test_without_packages_strict_programs_run_and_official_rules_say_why(
    bare_root: Path,
) -> None:
    from agentenvs.envs.deepcoder import official
    from agentenvs.envs.deepcoder.data import parse_row

    rt = runtime.sandbox_runtime()
    assert rt.site is None and rt.packages == {}
    assert "agentenvs sandbox provision" in rt.missing_reason
    assert rt.prefix.startswith(str(bare_root))
    box = make_sandbox("local")
    try:
        out = box.run(["python3", "-c", "import json, sys; print(sys.prefix)"], timeout=120)
        assert out.returncode == 0 and out.stdout.strip() == runtime.SANDBOX_PREFIX
        no_numpy = box.run(["python3", "-c", "import numpy"], timeout=120)
        assert no_numpy.returncode != 0 and "No module named 'numpy'" in no_numpy.stderr
        tests = [{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}]
        task = parse_row({"problem": "Add.", "tests": json.dumps(tests)}, "t", "sum")
        with pytest.raises(SandboxError, match="lacks them: not installed.*sandbox provision"):
            official.execute(box, task, "a, b = map(int, input().split())\nprint(a + b)")
    finally:
        box.close()


def test_a_build_is_shared_and_an_unfinished_one_is_rebuilt(bare_root: Path) -> None:
    # two processes at once build one interpreter copy; no temporary dir is left
    code = (
        "from agentenvs.sandbox import runtime; "
        "print(runtime.provision(install=False).prefix)"
    )
    env = {**os.environ}
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(2)
    ]
    prefixes = {p.communicate(timeout=240)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert len(prefixes) == 1
    names = sorted(p.name for p in bare_root.iterdir() if p.name != ".lock")
    assert names == [Path(prefixes.pop()).name]
    # a build killed before its manifest was written does not pass for a finished one
    interp = runtime.interpreter_dir(bare_root)
    (interp / runtime.MANIFEST).unlink()
    shutil.rmtree(interp / "lib")
    rt = runtime.provision(install=False)
    assert (Path(rt.prefix) / runtime.MANIFEST).is_file()
    assert (Path(rt.prefix) / "lib" / f"python{rt.short_version}" / "os.py").is_file()


def test_the_cli_shows_the_runtime() -> None:
    from agentenvs.cli import main

    assert main(["sandbox", "info"]) == 0


@pytest.mark.bwrap
def test_deepcoder_reports_its_runtime_on_reset() -> None:
    import gymnasium as gym

    env = gym.make("agentenvs/DeepCoderMT-v0")
    try:
        _, info = env.reset(seed=0)
    finally:
        env.close()
    assert info["sandbox_runtime"]["packages"] == runtime.PACKAGES
    assert info["sandbox_runtime"]["python"] == ".".join(map(str, sys.version_info[:3]))


@pytest.mark.bwrap
@pytest.mark.skipif(os.geteuid() != 0, reason="installs a copy of the package under /usr/local")
def test_a_system_wide_install_and_its_task_data_stay_out_of_view() -> None:
    # the package as `pip install` into a plain system interpreter lays it out: code and
    # bundled tasks under /usr/local/lib/..., a tree the sandbox binds read-only
    repo = Path(agentenvs.__file__).parent.parent
    prefix = Path(tempfile.mkdtemp(prefix="agentenvs-sysinstall-", dir="/usr/local/lib"))
    try:
        pkg = prefix / "agentenvs"
        shutil.copytree(Path(agentenvs.__file__).parent, pkg,
                        ignore=shutil.ignore_patterns("__pycache__"))
        if not (pkg / "_tasks").exists():
            shutil.copytree(repo / "tasks", pkg / "_tasks")
        prefix.chmod(0o755)
        problems = pkg / "_tasks" / "deepcoder" / "problems.jsonl"
        assert problems.is_file()
        code = f"""
import json, os
from agentenvs.sandbox import make_sandbox
import agentenvs
assert agentenvs.__file__.startswith({str(prefix)!r}), agentenvs.__file__
box = make_sandbox("local")
try:
    out = box.run(["python3", "-c", "import os, sys; print(os.path.exists(sys.argv[1]), "
                   "os.listdir(sys.argv[2]))", {str(problems)!r}, {str(pkg)!r}], timeout=120)
finally:
    box.close()
print(out.stdout.strip() + "|" + out.stderr.strip())
"""
        env = {**os.environ, "PYTHONPATH": str(prefix)}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=env, cwd="/", timeout=240)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "False []|", out.stdout
    finally:
        shutil.rmtree(prefix, ignore_errors=True)


def test_a_killed_build_leaves_no_temporary_dir_behind(bare_root: Path) -> None:
    # what a build killed before its rename leaves: a dot-named dir the next build removes
    stale = bare_root / f".{runtime.interpreter_dir(bare_root).name}.abc123"
    (stale / "lib").mkdir(parents=True)
    rt = runtime.provision(install=False)
    assert not stale.exists()
    assert rt.sandbox_site.startswith(runtime.SANDBOX_PREFIX + "/")
    manifest = json.loads((Path(rt.prefix) / runtime.MANIFEST).read_text())
    assert manifest["site_dir"] == rt.sandbox_site
