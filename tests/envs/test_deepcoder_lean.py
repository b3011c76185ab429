"""rules="official" on a lean warm server: programs that cannot tell numpy and pandas are
missing run on a server that never imported them (``agentenvs/envs/deepcoder/lean.py``);
every other program on the full one. Verdicts must not depend on the server.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from _services import require_bwrap

from agentenvs.envs.deepcoder import official
from agentenvs.envs.deepcoder.data import load_tasks
from agentenvs.envs.deepcoder.lean import fits_lean_server
from agentenvs.sandbox.base import Limits
from agentenvs.sandbox.local import LocalSandbox

LIMITS = Limits(memory_mb=4096, cpu_seconds=3600)

LEAN = {
    "plain": "n = int(input())\nprint(n * 2)",
    "fast input": (
        "import sys, os, io\n"
        "data = io.BytesIO(os.read(0, os.fstat(0).st_size)).readline\n"
        "sys.setrecursionlimit(10000)\n"
        "print(sum(map(int, sys.stdin.readline().split())))"
    ),
    "stdlib": (
        "from collections import Counter\nimport heapq, math\n"
        "class Solution:\n    def __init__(self):\n        self.k = 1\n"
        "    def f(self, xs: list) -> int:\n        return math.gcd(*Counter(xs).values())\n"
        "print('{} {}'.format(1, 2))"
    ),
    "open stdin": "print(open(0).read().split()[0])",
    "main guard": "def main():\n    print(1)\nif __name__ == '__main__':\n    main()",
}
FULL = {
    "imports numpy": "import numpy as np\nprint(np.sum([1]))",
    "imports pandas from": "from pandas import DataFrame",
    "uses the preloaded np": "print(np.arange(3).sum())",
    "uses the preloaded pd": "x = pd",
    "__import__": "m = __import__('num' + 'py')",
    "importlib": "import importlib\nm = importlib.import_module('numpy')",
    "sys.modules": "import sys\nprint(len(sys.modules))",
    "from sys import modules": "from sys import modules",
    "sys passed along": "import sys\nf = lambda m: m\nprint(f(sys))",
    "os beyond stdio": "import os\nprint(os.listdir('/proc/self'))",
    "os aliased": "import os as o\nprint(o.getpid())",
    "globals": "print(sorted(globals()))",
    "getattr": "import sys\nprint(getattr(sys, 'mod' + 'ules'))",
    "eval": "print(eval('1'))",
    "a dunder attribute": "print(().__class__.__base__.__subclasses__())",
    "a frame": "def g():\n    yield 1\nx = g()\nprint(sorted(x.gi_frame.f_globals))",
    "a built format string": "def f(): pass\nprint(('{0._' + '_globals__}').format(f))",
    "a string annotation": "def f(x: 'np.ndarray'): pass",
    "a dunder in a string": "import operator\ns = '__class__'",
    "a file by name": "print(open('/proc/self/maps').read())",
    "a module outside the list": "import gc\nprint(len(gc.get_objects()))",
    "a match on a dunder": "match 1:\n    case int(__class__=c):\n        print(c)",
    "a private attribute": "import random\nprint(random._inst)",
    "star import": "from math import *",
    "does not parse": "print(",
}


@pytest.mark.parametrize("name", list(LEAN))
def test_programs_that_cannot_tell_go_to_the_lean_server(name: str) -> None:
    assert fits_lean_server(LEAN[name]), name


@pytest.mark.parametrize("name", list(FULL))
def test_programs_that_could_tell_go_to_the_full_server(name: str) -> None:
    assert not fits_lean_server(FULL[name]), name


@pytest.fixture
def box() -> Iterator[LocalSandbox]:
    require_bwrap()
    with LocalSandbox(LIMITS) as sandbox:
        yield sandbox


def _kinds(box: LocalSandbox) -> set[str]:
    """Which servers the sandbox has idle: "lean" (no imports) and/or "full"."""
    return {"lean" if key[3] else "full" for key, group in box._warm._idle.items() if group}


@pytest.mark.bwrap
@pytest.mark.timeout(600)
def test_verdicts_are_the_same_on_both_servers(
    box: LocalSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every bundled task's reference and known-wrong solutions, on the lean server (where
    the scan sends them) and on the full one."""
    tasks = load_tasks()
    programs = [(t, t.reference) for t in tasks.tasks.values() if t.reference]
    programs += [(tasks.tasks[i], w) for i, ws in tasks.wrong_solutions.items() for w in ws[:1]]
    assert all(fits_lean_server(code) for _, code in programs[:8])
    lean = [official.execute(box, t, code) for t, code in programs]
    assert _kinds(box) == {"lean"}
    monkeypatch.setattr(official, "fits_lean_server", lambda code: False)
    full = [official.execute(box, t, code) for t, code in programs]
    assert "full" in _kinds(box)
    for (task, code), a, b in zip(programs, lean, full, strict=True):
        assert [o.verdict for o in a] == [o.verdict for o in b], (task.id, code)
        assert [o.output for o in a] == [o.output for o in b], (task.id, code)
    assert sum(official.passed_all(t, o) for (t, _), o in zip(programs, lean, strict=True)) >= 64


TACO = {
    "id": "taco-double",
    "problem": "Print twice n.",
    "tests": {"inputs": ["1\n", "21\n"], "outputs": ["2\n", "42\n"]},
}


@pytest.mark.bwrap
@pytest.mark.parametrize("kind", ["lcb-stdin", "lcb-call", "apps-stdin"])
def test_a_program_reaching_numpy_anyway_is_graded_on_the_full_server(
    box: LocalSandbox, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """Were the scan to let through a program that imports numpy, its first import of it
    ends the lean run and the program is graded from the start on the full server."""
    from agentenvs.envs.deepcoder.data import parse_row

    if kind == "apps-stdin":
        task = parse_row(TACO, "taco-double", "taco")
        reference = "print(2 * int(input()))"
    else:
        want_call = kind == "lcb-call"
        task = next(
            t
            for t in load_tasks().tasks.values()
            if t.reference and (t.tests[0].kind == "call") == want_call
        )
        reference = task.reference or ""
    sneaky = "import importlib\n_np = importlib.import_module('numpy')\n_np.zeros(1)\n"
    # lcb-call imports while the program loads, lcb-stdin in each test (its top level is
    # wrapped in a function), apps-stdin in the script's process; a program that only
    # defines such an import and never runs it stays on the lean server
    for code in (
        sneaky + reference,
        reference + "\ndef g():\n    " + sneaky.replace("\n", "\n    "),
    ):
        assert not fits_lean_server(code)
        full = official.execute(box, task, code)
        monkeypatch.setattr(official, "fits_lean_server", lambda code: True)
        lean = official.execute(box, task, code)
        monkeypatch.undo()
        assert [o.verdict for o in lean] == [o.verdict for o in full], code
        assert [o.output for o in lean] == [o.output for o in full], code
    assert official.passed_all(task, lean)
    assert _kinds(box) == {"lean", "full"}


VM = (
    "import os\n"
    "def serve(r, w):\n"
    "    os.read(r, 100)\n"
    "    with open('/proc/self/status') as f:\n"
    "        vm = [x for x in f if x.startswith('VmSize:')][0].split()[1]\n"
    "    os.write(w, vm.encode() + b'\\n')\n"
)


def _vm_kb(box: LocalSandbox, imports: tuple[str, ...], as_if: tuple[str, ...]) -> int:
    proc = box.spawn_warm(VM, "serve", imports, as_if)
    try:
        proc.write(b"go\n")
        got = b""
        deadline = time.monotonic() + 60
        while b"\n" not in got and not proc.eof and time.monotonic() < deadline:
            got += proc.read(1.0)
        return int(got)
    finally:
        proc.kill()


@pytest.mark.bwrap
@pytest.mark.timeout(300)
def test_a_lean_fork_has_the_address_space_a_full_one_has(box: LocalSandbox) -> None:
    """The memory limit (an address-space rlimit) leaves a lean server's program the room
    a full server's has: the lean fork reserves what numpy and pandas take."""
    full = _vm_kb(box, official.WARM_IMPORTS, ())
    lean = _vm_kb(box, official.LEAN_IMPORTS, official.WARM_IMPORTS)
    bare = _vm_kb(box, official.LEAN_IMPORTS, ())
    assert full - bare > 50 << 10  # numpy and pandas take room (tens of MB at least)
    assert abs(full - lean) < 8 << 10, (full, lean)
