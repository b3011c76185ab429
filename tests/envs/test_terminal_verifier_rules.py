"""The verifier's parts that need no sandbox: its judge, its count of the task's tests,
the launcher's pytest arguments, the channel's refusal of a process that is not the
verifier's pytest, links into the tests, and the overlay walk on trees of any shape."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentenvs.envs.terminal.grading_docker import _overlay_changes
from agentenvs.envs.terminal.verifier import rules
from agentenvs.envs.terminal.verifier.channel import Session, VerdictChannel, resolve_in
from agentenvs.envs.terminal.verifier.tree import FILES

TESTS = {
    "test_outputs.py": b"import os\n\ndef test_a():\n    pass\n\n"
    b"class TestB:\n    def test_c(self):\n        pass\n\n    def helper(self):\n        pass\n"
    b"\ndef helper():\n    pass\n",
}


def _session(*events: dict, pid: int = 1) -> Session:
    s = Session(pid)
    s.events = [{"ev": "start", "nonce": "n"}, *events]
    return s


def _report(nodeid: str, outcome: str = "passed", when: str = "call") -> dict:
    return {"ev": "report", "nodeid": nodeid, "when": when, "outcome": outcome}


def _judge(*sessions: Session, **kw: object) -> rules.Verdict:
    counted = rules.count_tests(TESTS)
    return rules.judge(sessions, counted, rules.digests(TESTS), **kw)  # type: ignore[arg-type]


FILES_EVENT = {
    "ev": "collected",
    "items": [],
    "files": {"/tests/test_outputs.py": rules.digests(TESTS)["test_outputs.py"]},
}
FINISH = {"ev": "finish", "exitstatus": 0, "tampered": [], "exposed": []}


def test_count_tests_reads_functions_and_methods_only() -> None:
    assert rules.count_tests(TESTS) == {"test_outputs.py": {"test_a", "TestB::test_c"}}
    assert rules.count_tests({"helpers.py": b"def test_x(): pass"}) == {}


def test_every_counted_test_passed_in_a_finished_session_is_a_pass() -> None:
    done = _session(
        FILES_EVENT,
        _report("test_outputs.py::test_a"),
        _report("test_outputs.py::TestB::test_c[1]"),
        FINISH,
    )
    verdict = _judge(done)
    assert verdict.passed and verdict.results == {"test_a": True, "TestB::test_c[1]": True}


@pytest.mark.parametrize(
    ("sessions", "why"),
    [
        # a test of the task never reported
        ([_session(FILES_EVENT, _report("test_outputs.py::test_a"), FINISH)], "not reported"),
        # pytest killed before its finish
        (
            [
                _session(
                    FILES_EVENT,
                    _report("test_outputs.py::test_a"),
                    _report("test_outputs.py::TestB::test_c"),
                )
            ],
            "did not finish",
        ),
        # no session at all (the script never ran the verifier's pytest)
        ([], "no test of the task ran"),
        # a failure in one session is not undone by a pass in another
        (
            [
                _session(
                    FILES_EVENT,
                    _report("test_outputs.py::test_a", "failed"),
                    _report("test_outputs.py::TestB::test_c"),
                    FINISH,
                ),
                _session(
                    FILES_EVENT,
                    _report("test_outputs.py::test_a"),
                    _report("test_outputs.py::TestB::test_c"),
                    FINISH,
                    pid=2,
                ),
            ],
            "",
        ),
    ],
)
def test_what_keeps_a_verdict_from_a_pass(sessions: list[Session], why: str) -> None:
    verdict = _judge(*sessions)
    assert not verdict.passed
    assert why in " ".join(verdict.problems)


def test_tampering_and_foreign_files_are_findings() -> None:
    changed = {**FILES_EVENT, "files": {"/tests/test_outputs.py": "0" * 64, "/app/t.py": "x"}}
    tampered = {**FINISH, "tampered": ["pytest_runtest_logreport"]}
    verdict = _judge(
        _session(
            changed,
            _report("test_outputs.py::test_a"),
            _report("test_outputs.py::TestB::test_c"),
            tampered,
        )
    )
    said = " ".join(verdict.findings)
    assert "other contents" in said and "not the task's" in said and "reporting" in said
    assert "not the verifier's pytest" in " ".join(
        _judge(refused=["pid 9: not the verifier's launcher"]).findings
    )


def test_links_into_the_tests_are_followed_as_the_kernel_would() -> None:
    links = {"/app/out": "/tmp/a", "/tmp/a": "../tests/expected", "/app/ok": "data/x"}
    assert rules.links_into(links) == ["/app/out is a link into the tests' files (/tests/expected)",
                                       "/tmp/a is a link into the tests' files (/tests/expected)"]  # fmt: skip
    assert rules.links_into({"/a": "/b", "/b": "/a"}) == []  # a loop ends


def test_pytest_arguments_load_nothing_from_outside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    # a package whose parent would run if a submodule of it were looked up
    (tmp_path / "evilpkg").mkdir()
    (tmp_path / "evilpkg" / "__init__.py").write_text("raise SystemExit('ran')\n")
    (tmp_path / "evilpkg" / "mod.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.path.insert(0, str(FILES))
    try:
        import boot  # the launcher, as the sandbox runs it

        monkeypatch.setattr(boot, "TESTS", str(tests))
        args = boot.pytest_args(
            ["-p", "evil", "-pevil2", "-p", "evilpkg.mod", "-c", "/app/p.ini", "--rootdir=/",
             "--pyargs", "-o", "addopts=-p evil", "-o", "pythonpath=/app",
             "-p", "no:cacheprovider", f"{tests}/test_x.py", "-rA"]
        )  # fmt: skip
    finally:
        sys.path.remove(str(FILES))
        sys.modules.pop("boot", None)
    assert "evilpkg" not in sys.modules and "evilpkg.mod" not in args
    assert "evil" not in args and "evil2" not in args and "--pyargs" not in args
    assert "-c" not in args and "--rootdir=/" not in args and "addopts=-p evil" not in args
    assert "pythonpath=/app" not in args
    assert args[:4] == ["-p", "agentenvs_verdict", "-p", "no:cacheprovider"]
    assert f"--rootdir={tests}" in args and f"--confcutdir={tests}" in args
    assert args[-2:] == [f"{tests}/test_x.py", "-rA"]


def test_the_channel_refuses_a_process_that_is_not_the_verifiers_pytest(tmp_path: Path) -> None:
    channel = VerdictChannel(tmp_path, python="/nonexistent/python3", boot="/v/boot.py",
                             trusted=lambda pid, maps: None)  # fmt: skip
    try:
        forged = [{"ev": "start", "nonce": "x"}, FINISH]
        code = (
            "import json, socket, sys\n"
            "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
            # the refusal closes the connection, perhaps before the forgery is all sent
            "try:\n"
            f"    s.sendall(b''.join(json.dumps(e).encode() + b'\\n' for e in {forged!r}))\n"
            "    s.settimeout(5)\n"
            "    s.recv(10)\n"
            "except OSError:\n    pass\n"
        )
        subprocess.run([sys.executable, "-c", code, channel.path], timeout=60, check=True)
    finally:
        channel.close()
    assert channel.sessions == []
    assert any("not the verifier's launcher" in r for r in channel.refused)


def test_the_channel_bounds_a_session(tmp_path: Path) -> None:
    session = Session(1)
    channel = VerdictChannel(tmp_path, python="p", boot="b", trusted=lambda pid, maps: None)
    channel.close()
    assert not channel._take(session, b"not json", "n") and "not JSON" in (session.problem or "")
    session = Session(1)
    assert not channel._take(session, json.dumps({"ev": "start", "nonce": "other"}).encode(), "n")
    session = Session(1)
    assert channel._take(session, json.dumps({"ev": "start", "nonce": "n"}).encode(), "n")
    assert channel._take(session, json.dumps(FINISH).encode(), "n")
    assert not channel._take(session, json.dumps(FINISH).encode(), "n")  # after the finish


def test_resolve_in_follows_absolute_links_inside_the_root(tmp_path: Path) -> None:
    (tmp_path / "usr" / "bin").mkdir(parents=True)
    (tmp_path / "usr" / "bin" / "python3.13").write_text("")
    (tmp_path / "venv").mkdir()
    os.symlink("/usr/bin/python3.13", tmp_path / "venv" / "python3")
    os.symlink("python3", tmp_path / "venv" / "python")
    assert resolve_in(str(tmp_path), "/venv/python") == "/usr/bin/python3.13"


def _deep(root: Path, name: str, depth: int) -> None:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = sub
        os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    finally:
        os.close(fd)


def test_the_overlay_walk_reads_any_depth_and_path_length(tmp_path: Path) -> None:
    upper, lower = tmp_path / "upper", tmp_path / "lower"
    (upper / "app").mkdir(parents=True)
    (lower / "app").mkdir(parents=True)
    (lower / "app" / "old").write_text("x")
    (upper / "app" / "old").write_text("y")
    _deep(upper / "app", "d", 1200)
    _deep(upper / "app", "a" * 250, 20)  # paths past PATH_MAX
    os.symlink("/tests/x", upper / "app" / "l")
    links: dict[str, str] = {}
    try:
        found = _overlay_changes(str(upper), [str(lower)], links)
    finally:  # rm's walk is iterative (shutil.rmtree, pytest's clean-up, are not)
        subprocess.run(["rm", "-rf", str(upper / "app" / "d"), str(upper / "app" / ("a" * 250))],
                       check=True, timeout=120)  # fmt: skip
    assert found is not None
    paths = dict(found)
    assert paths["/app/old"] == "C" and paths["/app/l"] == "A"
    assert any(p.endswith("/d/f") and p.count("/d") == 1200 for p in paths)
    assert any(p.endswith("/f") and len(p) > 5000 for p in paths)
    assert links == {"/app/l": "/tests/x"}


def test_a_pytest_that_never_collected_reports_nothing_either_way() -> None:
    """``pytest --version`` (or one ended before collecting) neither fails nor passes."""
    version_only = _session()
    done = _session(
        FILES_EVENT,
        _report("test_outputs.py::test_a"),
        _report("test_outputs.py::TestB::test_c"),
        FINISH,
        pid=2,
    )
    assert _judge(version_only, done).passed
    assert not _judge(version_only).passed
