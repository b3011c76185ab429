"""The verifier's pytest plugin: every outcome, on the grader's channel and nowhere else.

Loaded by the verifier's launcher into every pytest the tests start (plugin autoload is
off). At configure it connects to the grader's socket (the grader checks, from outside,
that the process is the verifier's pytest and answers with a nonce), makes the process
undumpable (no other process can then open its descriptors through ``/proc`` or trace
it), and from then on writes one JSON line per event: the session's start (with the
nonce), what was collected (with a digest of each test file as read), each phase of each
test, and the finish with its exit status. Standard library only.

What the tests import runs inside this process: such code could write here too. The
plugin checks at the finish that the hooks reporting outcomes and its own writer are the
ones it started with, and names the modules imported from outside the verifier, the
standard library and the tests (``exposed``), so the grader can say which verdicts rest
on code the agent could have changed.
"""

import hashlib
import json
import os
import socket
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
VERIFIER = os.path.dirname(HERE)
SOCKET = os.path.join(VERIFIER, "channel", "verdict.sock")

_dumps = json.dumps
_state = {"send": None, "sock": None, "hooks": None, "finished": False}


def _undumpable():
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except Exception:  # noqa: BLE001 - no ctypes: the grader sees no difference
        pass


def _write(event):
    send = _state["send"]
    if send is None:
        return
    try:
        send((_dumps(event, default=str) + "\n").encode("utf-8", "replace"))
    except OSError:
        _state["send"] = None


def _hook_ids(config):
    hook = config.pluginmanager.hook
    found = {}
    for name in (
        "pytest_runtest_logreport",
        "pytest_runtest_makereport",
        "pytest_report_teststatus",
    ):
        caller = getattr(hook, name, None)
        impls = caller.get_hookimpls() if caller is not None else []
        found[name] = [id(getattr(i, "function", None)) for i in impls]
    found["send"] = id(_state["send"])
    found["write"] = id(globals()["_write"])
    return found


def pytest_configure(config):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(60)
        sock.connect(SOCKET)
        line = b""
        while not line.endswith(b"\n") and len(line) < 256:
            chunk = sock.recv(1)
            if not chunk:
                break
            line += chunk
        sock.settimeout(None)
    except OSError as exc:
        sys.stderr.write(f"agentenvs verifier: no channel to the grader ({exc})\n")
        sock.close()
        return
    words = line.decode("ascii", "replace").split()
    if len(words) != 2 or words[0] != "ok":
        sys.stderr.write("agentenvs verifier: the grader refused this session\n")
        sock.close()
        return
    _undumpable()
    _state["sock"] = sock
    _state["send"] = sock.sendall
    _write(
        {
            "ev": "start",
            "nonce": words[1],
            "pid": os.getpid(),
            "args": [str(a) for a in config.invocation_params.args],
            "rootdir": str(config.rootpath),
        }
    )
    _state["hooks"] = None  # read once every plugin is registered (session start)


def pytest_sessionstart(session):
    if _state["send"] is not None:
        _state["hooks"] = _hook_ids(session.config)


def pytest_collectreport(report):
    if report.failed:
        _write(
            {"ev": "collecterror", "nodeid": report.nodeid, "text": str(report.longrepr)[-2000:]}
        )


def _digest(path):
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def pytest_collection_finish(session):
    files = {}
    items = []
    for item in session.items:
        path = str(getattr(item, "path", None) or item.fspath)
        if path not in files:
            files[path] = _digest(path)
        items.append([item.nodeid, path])
    _write({"ev": "collected", "items": items, "files": files})


def pytest_runtest_logreport(report):
    _write(
        {
            "ev": "report",
            "nodeid": report.nodeid,
            "when": report.when,
            "outcome": report.outcome,
            "xfail": hasattr(report, "wasxfail"),
        }
    )


def _within(path, root):
    return path == root or path.startswith(root.rstrip("/") + "/")


def _exposed():
    """Top-level modules loaded from outside the verifier, the standard library (its site
    dirs excluded) and the tests: code of the end state that ran in this process."""
    stdlib = os.path.dirname(os.__file__)
    tests = os.path.realpath("/tests")
    found = set()
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if not path:
            continue
        real = os.path.realpath(path)
        if _within(real, VERIFIER) or _within(real, tests):
            continue
        if _within(real, stdlib) and "-packages" not in real:
            continue
        found.add(name.split(".", 1)[0])
    return sorted(found)


def pytest_sessionfinish(session, exitstatus):
    if _state["send"] is None or _state["finished"]:
        return
    _state["finished"] = True
    tampered = []
    before = _state["hooks"]
    if before is not None:
        now = _hook_ids(session.config)
        tampered = sorted(k for k in before if before[k] != now.get(k))
    _write(
        {
            "ev": "finish",
            "exitstatus": int(exitstatus),
            "tampered": tampered,
            "exposed": _exposed(),
        }
    )
    try:
        _state["sock"].close()
    except OSError:
        pass
    _state["send"] = None
