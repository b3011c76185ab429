"""``agentenvs eval --envs``: every env into one folder, resumed as a whole, one summary page."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from agentenvs.cli import main
from agentenvs.eval.passk import pass_at_k
from agentenvs.eval.records import TRAJECTORIES_NAME, read_records, read_trajectories
from agentenvs.eval.suite import SUITE, full_data, select_envs, suite_names

SMALL = ["--tasks", "first:2", "--n", "2", "--budgets", "1,2", "--data", "bundled",
         "--no-progress", "--workers", "0"]


def _eval(out: Path, *extra: str, policy: str = "scripted/noisy", envs: str = "all") -> list[str]:
    return ["eval", "--policy", policy, "--envs", envs, "--out", str(out), *SMALL, *extra]


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("suite") / "every-env"
    assert main(_eval(out)) == 0
    return out


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("href", "src") and value:
                self.links.append(value)


def _links(page: Path) -> list[str]:
    parser = _Links()
    parser.feed(page.read_text())
    return parser.links


def test_every_env_has_its_run_folder_and_report(suite: Path) -> None:
    for name in suite_names():
        run = suite / name
        assert (run / "manifest.json").is_file(), name
        records = read_records(run / TRAJECTORIES_NAME)
        config = json.loads((run / "manifest.json").read_text())["config"]
        per_budget = 2 if config["mode"] == "rerun" else 1
        assert len(records) == 2 * 2 * per_budget, name
        assert (run / "report" / "passk.md").is_file(), name
    for name in ("index.html", "summary.md", "summary.json", "suite.json"):
        assert (suite / name).is_file()


def test_page_links_resolve_to_files_that_exist(suite: Path) -> None:
    links = _links(suite / "index.html")
    files = [link for link in links if not link.startswith("#")]
    # each env: its figure (linked and shown), its run folder, its full report
    assert len([f for f in files if f.endswith(".png")]) >= len(SUITE)
    assert {f.split("/")[0] for f in files if "/report/" in f} == set(suite_names())
    for link in files:
        assert not link.startswith(("/", "http:", "https:", "file:")), link
        assert (suite / link).exists(), link
    anchors = {link[1:] for link in links if link.startswith("#")}
    assert anchors == {f"env-{name}" for name in suite_names()}
    text = (suite / "index.html").read_text()
    assert all(f'id="{anchor}"' in text for anchor in anchors)


def _headline_from_records(run: Path) -> tuple[float, float, int, int]:
    """pass@1 and pass@n at the largest budget, from the records alone."""
    config = json.loads((run / "manifest.json").read_text())["config"]
    t, n = max(config["budgets"]), config["n"]
    counts: dict[str, int] = {}
    for record in read_trajectories(run / TRAJECTORIES_NAME):
        task = record["task_id"]
        if config["mode"] == "derive":
            first = record.get("first_success_turn") or 0
            hit = 0 < first <= t
        else:
            hit = record["budget"] == t and record["success"]
        counts[task] = counts.get(task, 0) + bool(hit)
    c = np.array([counts.get(task, 0) for task in config["task_ids"]])
    return float(pass_at_k(n, c, 1).mean()), float(pass_at_k(n, c, n).mean()), t, n


def test_page_numbers_are_those_of_the_records(suite: Path) -> None:
    summary = json.loads((suite / "summary.json").read_text())
    page = (suite / "index.html").read_text()
    md = (suite / "summary.md").read_text()
    seen = set()
    values = []
    for env in summary["envs"]:
        run = suite / env["run_dir"]
        p1, pk, t, n = _headline_from_records(run)
        head = env["headline"]
        assert head["t"] == t and head["pass_at_k"]["k"] == n
        assert head["pass_at_1"]["mean"] == pytest.approx(p1, abs=1e-12), env["name"]
        assert head["pass_at_k"]["mean"] == pytest.approx(pk, abs=1e-12), env["name"]
        values += [p1, pk]
        # the intervals are the report's own
        report = json.loads((run / "report" / "passk.json").read_text())["surface"]
        i, j = report["ks"].index(n), report["budgets"].index(t)
        assert head["pass_at_k"]["low"] == pytest.approx(report["low"][i][j])
        assert head["pass_at_k"]["high"] == pytest.approx(report["high"][i][j])
        d = head["decimals"]
        shown = f"{pk:.{d}f} [{report['low'][i][j]:.{d}f}, {report['high'][i][j]:.{d}f}]"
        assert shown in page and shown in md, (env["name"], shown)
        seen.add(env["name"])
    assert seen == set(suite_names())
    assert len(set(values)) > 1, "a slice where every figure is equal tests little"


def test_faults_are_counted_per_env(suite: Path) -> None:
    summary = json.loads((suite / "summary.json").read_text())
    for env in summary["envs"]:
        records = read_records(suite / env["run_dir"] / TRAJECTORIES_NAME)
        assert env["faults"]["attempts"] == len(records)
        assert env["faults"]["faults"] == 0 and env["faults"]["by_kind"] == {}
    assert f"none in {len(records)} attempts" in (suite / "index.html").read_text()


def test_a_second_run_resumes_without_running_an_episode(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = {n: (suite / n / TRAJECTORIES_NAME).read_bytes() for n in suite_names()}
    capsys.readouterr()
    assert main(_eval(suite)) == 0
    out = capsys.readouterr().out
    for name in suite_names():
        assert (suite / name / TRAJECTORIES_NAME).read_bytes() == before[name]
        assert re.search(rf"^{name}: (\d+) trajectories \(\1 already done, 0 run in", out, re.M), name
    assert re.search(r"total: \d+ episodes on 6 env\(s\), (\d+) already done", out)


def test_report_on_the_folder_draws_the_summary_again(suite: Path) -> None:
    before = json.loads((suite / "summary.json").read_text())
    (suite / "index.html").unlink()
    (suite / "summary.md").unlink()
    assert main(["report", str(suite)]) == 0
    assert (suite / "index.html").is_file() and (suite / "summary.md").is_file()
    after = json.loads((suite / "summary.json").read_text())
    assert [e["headline"] for e in after["envs"]] == [e["headline"] for e in before["envs"]]


def test_a_missing_service_is_one_line_and_the_rest_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # no Docker engine answers at this address: the docker runtime cannot start
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    out = tmp_path / "run"
    kwargs = json.dumps({"terminal": {"runtime": "docker"}})
    assert main(_eval(out, "--env-kwargs", kwargs, envs="bfcl,terminal")) == 0
    text = capsys.readouterr().out
    plan = text.split("total:")[0].splitlines()  # what is printed before any work
    skipped = [line for line in plan if "terminal" in line and "skipped" in line]
    assert len(skipped) == 1 and "docker" in skipped[0].lower(), text
    assert not (out / "terminal").exists()
    assert (out / "bfcl" / TRAJECTORIES_NAME).is_file()
    record = json.loads((out / "suite.json").read_text())
    status = {e["name"]: (e["status"], e["reason"]) for e in record["envs"]}
    assert status["bfcl"] == ("ran", None)
    assert status["terminal"][0] == "skipped" and "docker" in status["terminal"][1].lower()
    page = (out / "index.html").read_text()
    assert "skipped: " in page and 'href="bfcl/report/' in page


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--envs", "frozenlake,nosuch"], "unknown env 'nosuch'"),
        (["--envs", "sql", "--env", "agentenvs/BFCL-v0"], "not both"),
        (["--envs", "sql", "--policy", "frozenlake/oracle"], "--envs give a model policy"),
        (["--envs", "sql", "--env-kwargs", '{"nosuch": {}}'], "--env-kwargs"),
        ([], "--env ENV_ID (one env) or --envs"),
    ],
)
def test_usage_errors_are_one_line_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    policy = [] if "--policy" in argv else ["--policy", "scripted/reference"]
    assert main(["eval", *policy, *argv, "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and "\n" not in err, err
    assert not (tmp_path / "x").exists()


def test_env_names_aliases_and_ids_select_in_suite_order() -> None:
    chosen = select_envs("terminal,sql,agentenvs/FrozenLake-v0,bfcl_mt")
    assert [e.name for e in chosen] == ["frozenlake", "intercode_sql", "bfcl_multi_turn", "terminal"]
    assert [e.name for e in select_envs("all")] == suite_names()


def test_full_data_is_used_where_it_was_fetched(tmp_path: Path) -> None:
    from agentenvs.data.cache import MANIFEST
    from agentenvs.data.registry import get

    (deepcoder,) = select_envs("deepcoder")
    assert full_data(deepcoder, tmp_path) is None  # nothing fetched: the bundled slice
    folder = tmp_path / "deepcoder-preview" / get("deepcoder-preview").source.revision
    (folder / "codeforces").mkdir(parents=True)
    (folder / MANIFEST).write_text("{}")
    assert full_data(deepcoder, tmp_path) is None  # fetched, but not a split it runs
    (folder / "codeforces" / "test-00000-of-00001.parquet").write_bytes(b"")
    path, what = full_data(deepcoder, tmp_path)  # type: ignore[misc]
    assert path == str(folder / "codeforces" / "test-*.parquet") and "codeforces/test" in what
    (folder / "lcbv5").mkdir()
    (folder / "lcbv5" / "test-00000-of-00001.parquet").write_bytes(b"")
    assert "lcbv5/test" in full_data(deepcoder, tmp_path)[1]  # type: ignore[index]
