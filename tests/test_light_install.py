"""The light install: `pip install agentenvs` (and `make demo`, which adds the plot extra)
holds everything `import agentenvs` and the demo import, and a request that needs an extra
that is missing gets one line naming it, before any work.

What is imported is read from ``sys.modules`` in a fresh interpreter and traced to the
distributions that ship it; those must be in the closure of the core dependencies and the
plot extra as pyproject.toml lists them (no venv is built: too slow for a test)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
LIGHT_EXTRAS = ("plot",)


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(requirements: list[str]) -> set[str]:
    """The distributions ``requirements`` pull in on some platform (installed ones: a
    requirement for another Python or system counts, one of an extra does not)."""
    seen: set[str] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        if req.marker is not None and "extra" in str(req.marker):
            continue
        name = normalize(req.name)
        if name in seen:
            continue
        seen.add(name)
        try:
            todo.extend(Requirement(r) for r in metadata.requires(req.name) or ())
        except metadata.PackageNotFoundError:
            continue
    return seen


def light_distributions() -> set[str]:
    project = PYPROJECT["project"]
    reqs = list(project["dependencies"])
    for extra in LIGHT_EXTRAS:
        reqs += project["optional-dependencies"][extra]
    return closure(reqs) | {"agentenvs"}


def modules_imported(code: str, tmp_path: Path) -> dict[str, list[str]]:
    """Top-level modules that ``code`` imports (beyond what the interpreter had at start)
    or finds with ``importlib.util.find_spec`` (to copy, as Terminal-Bench copies pytest into
    the sandbox), each with the distributions that ship it; those of no distribution (the
    interpreter's own, synthetic ones) are left out."""
    script = (
        "import importlib.util, json, sys\n"
        "before = set(sys.modules)\n"
        "found = set()\n"
        "_find_spec = importlib.util.find_spec\n"
        "def find_spec(name, package=None):\n"
        "    spec = _find_spec(name, package)\n"
        "    if spec is not None:\n"
        "        found.add(name)\n"
        "    return spec\n"
        "importlib.util.find_spec = find_spec\n"
        f"{code}\n"
        "new = {m.split('.')[0] for m in (set(sys.modules) - before) | found}\n"
        "print('MODULES', json.dumps(sorted(new - set(sys.stdlib_module_names))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=240,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = [ln for ln in done.stdout.splitlines() if ln.startswith("MODULES ")][-1]
    names = json.loads(line.removeprefix("MODULES "))
    owners = metadata.packages_distributions()
    return {m: [normalize(d) for d in owners[m]] for m in names if m in owners}


#: modules a light dependency imports only if they happen to be installed (inside
#: ``try: ... except ImportError``), so a fuller environment shows them and a light one
#: does without: Pillow (matplotlib's) reads XMP with defusedxml when it is there
OPTIONAL_IMPORTS = {"defusedxml": "PIL.Image", "orjson": "agentenvs.eval.records"}


def outside_light(imported: dict[str, list[str]]) -> dict[str, list[str]]:
    allowed = light_distributions()
    return {
        m: dists
        for m, dists in imported.items()
        if not set(dists) & allowed and m not in OPTIONAL_IMPORTS
    }


def test_the_optional_imports_allowed_are_optional_in_their_importer() -> None:
    # each allowed module is imported under an ImportError guard by the module named
    import importlib.util

    for module, importer in OPTIONAL_IMPORTS.items():
        spec = importlib.util.find_spec(importer)
        assert spec is not None and spec.origin is not None, importer
        text = Path(spec.origin).read_text()
        at = text.find(f"from {module} import")
        at = at if at != -1 else text.index(f"import {module}")
        guard = text.rfind("try:", 0, at)
        assert guard != -1 and "except ImportError" in text[at : at + 300], (module, importer)


def test_light_set_is_what_the_brief_names() -> None:
    names = {normalize(Requirement(r).name) for r in PYPROJECT["project"]["dependencies"]}
    # the heavy ones are extras, never core
    for heavy in ("torch", "transformers", "ray", "pyarrow", "matplotlib", "docker", "pymysql",
                  "pettingzoo", "fastapi", "gradio"):
        assert heavy not in names
    assert {"gymnasium", "numpy", "sqlglot", "jsonschema"} <= names


def test_import_pulls_only_core(tmp_path: Path) -> None:
    imported = modules_imported("import agentenvs", tmp_path)
    assert "gymnasium" in imported  # the check sees third-party modules at all
    assert outside_light(imported) == {}


def test_demo_pulls_only_core_and_plot(tmp_path: Path) -> None:
    """The demo's whole path on one task per env (its runs, reports and figures), in this
    process (--workers 0), as `make demo` runs it but smaller."""
    code = (
        "from agentenvs.cli import main\n"
        "rc = main(['demo', '--out', 'demo', '--tasks', 'first:1', '--n', '1',"
        " '--workers', '0', '--no-progress'])\n"
        "assert rc == 0, rc\n"
    )
    imported = modules_imported(code, tmp_path)
    assert {"matplotlib", "sqlglot", "pytest"} <= imported.keys()
    assert outside_light(imported) == {}
    assert list((tmp_path / "demo").glob("*/report/*.png")), "the demo drew no figure"


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on PATH")
def test_make_demo_installs_only_the_light_set(tmp_path: Path) -> None:
    def dry_run(target: str) -> list[str]:
        done = subprocess.run(
            ["make", "-n", target, f"VENV={tmp_path / 'venv'}"], cwd=ROOT,
            capture_output=True, text=True, timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return [ln for ln in done.stdout.splitlines() if " pip install " in ln and " -e " in ln]

    (demo_line,) = dry_run("demo")
    assert demo_line.endswith(f"-e '.[{','.join(LIGHT_EXTRAS)}]'"), demo_line
    (test_line,) = dry_run("test")
    extras = set(test_line.rsplit("[", 1)[1].rstrip("]'").split(","))
    assert {"test", "plot", "mysql", "docker", "bfcl"} <= extras


# ----------------------------------------------------------- a missing extra: one line, first
REFUSE = """
import sys
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {names!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Refuse())
for _m in list(sys.modules):
    if _m.split('.')[0] in {names!r}:
        del sys.modules[_m]
"""


def run_without(names: set[str], code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = REFUSE.format(names=names) + "if __name__ == '__main__':\n" + "".join(
        f"    {line}\n" for line in code.splitlines()
    )
    path = tmp_path / "refusing.py"
    path.write_text(script)
    return subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, timeout=240, cwd=tmp_path
    )


def cli_without(names: set[str], argv: list[str], tmp_path: Path) -> str:
    """The CLI's stderr with ``names`` unimportable; it must exit 2 having written nothing."""
    done = run_without(
        names, f"from agentenvs.cli import main\nsys.exit(main({argv!r}))", tmp_path
    )
    assert done.returncode == 2, (done.stdout[-2000:], done.stderr[-2000:])
    assert not (tmp_path / "out").exists(), "work started before the refusal"
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("names", "argv", "extra"),
    [
        ({"torch", "transformers"},
         ["eval", "--env", "agentenvs/FrozenLake-v0", "--policy", "hf:model=/nowhere"], "hf"),
        ({"vllm"}, ["eval", "--env", "agentenvs/FrozenLake-v0", "--policy", "vllm:model=/nowhere"],
         "vllm"),
        ({"ray"}, ["eval", "--env", "agentenvs/FrozenLake-v0", "--policy", "frozenlake/oracle",
                   "--backend", "ray"], "ray"),
        ({"docker"}, ["eval", "--env", "agentenvs/TerminalBench-v0", "--env-kwargs",
                      '{"runtime": "docker"}', "--policy", "terminal/solution"], "docker"),
        ({"docker"}, ["eval", "--env", "agentenvs/DeepCoderMT-v0", "--env-kwargs",
                      '{"sandbox": "docker"}', "--policy", "deepcoder/reference"], "docker"),
        ({"pymysql"}, ["eval", "--env", "agentenvs/InterCodeSQL-v0", "--env-kwargs",
                       '{"backend": "mysql", "mysql_url": "mysql://root@127.0.0.1:9/"}',
                       "--policy", "intercode_sql/gold"], "mysql"),
        ({"matplotlib"}, ["demo"], "plot"),
        ({"matplotlib"}, ["step-quality", "--env", "agentenvs/FrozenLake-v0", "--reference",
                          "frozenlake/oracle", "--a", "frozenlake/oracle", "--b",
                          "frozenlake/random"], "plot"),
    ],
    ids=["hf", "vllm", "ray", "terminal-docker", "deepcoder-docker", "mysql", "demo-plot",
         "analysis-plot"],
)
def test_missing_extra_is_one_line_before_work(
    names: set[str], argv: list[str], extra: str, tmp_path: Path
) -> None:
    line = cli_without(names, [*argv, "--out", "out"], tmp_path)
    assert f"pip install 'agentenvs[{extra}]'" in line, line


def test_parquet_tasks_need_the_parquet_extra(tmp_path: Path) -> None:
    (tmp_path / "rows.parquet").write_bytes(b"PAR1")
    line = cli_without(
        {"pyarrow"},
        ["eval", "--env", "agentenvs/DeepCoderMT-v0", "--env-kwargs",
         json.dumps({"tasks_path": str(tmp_path / "rows.parquet")}),
         "--policy", "deepcoder/reference", "--out", "out"],
        tmp_path,
    )
    assert "pip install 'agentenvs[parquet]'" in line, line


def test_analysis_without_plot_runs_with_no_plots(tmp_path: Path) -> None:
    """--no-plots needs no matplotlib: the refusal above is for the figures only."""
    done = run_without(
        {"matplotlib"},
        "from agentenvs.cli import main\n"
        "sys.exit(main(['step-quality', '--env', 'agentenvs/FrozenLake-v0', '--reference',"
        " 'frozenlake/oracle', '--a', 'frozenlake/oracle', '--b', 'frozenlake/random',"
        " '--states', '2', '--actions', '1', '--workers', '0', '--no-plots', '--no-progress',"
        " '--out', 'out']))",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize(
    ("names", "statement", "extra"),
    [
        ({"pettingzoo"}, "from agentenvs.wrappers import GroupEnv", "pettingzoo"),
        ({"skyrl_gym"}, "import agentenvs.integrations.skyrl", "integrations"),
        ({"verifiers"}, "import agentenvs.integrations.verifiers", "integrations"),
    ],
    ids=["GroupEnv", "skyrl", "verifiers"],
)
def test_an_adapter_without_its_framework_names_the_extra(
    names: set[str], statement: str, extra: str, tmp_path: Path
) -> None:
    done = run_without(
        names,
        "import agentenvs\n"
        "from agentenvs.core.errors import MissingExtraError\n"
        "try:\n"
        f"    {statement}\n"
        "except MissingExtraError as exc:\n"
        "    print(exc)\n"
        "else:\n"
        "    sys.exit('imported without its framework')\n",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"pip install 'agentenvs[{extra}]'" in done.stdout
