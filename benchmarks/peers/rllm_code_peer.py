"""rLLM's code reward, driven in an interpreter of its own for ``bench_code.py``.

rLLM at the DeepCoder release needs Python 3.10 or older (its ``pyext2`` module reads
``inspect.getargspec``, removed in 3.11) and numpy, pandas and psutil, so
``bench_code.py`` starts this file under the interpreter given by ``--rllm-python``
(working and temporary directory: a temporary directory of the benchmark's own). It
imports ``rllm.rewards.code_reward`` from ROOT (what that imports included), entering
``rllm.tools`` and ``rllm.tools.code_tools`` as namespaces over their real folders, so
their ``__init__``, which imports every tool's client library (e2b, search APIs), does
not run. Then each JSON line ``{"data_source", "response", "ground_truth"}`` on stdin is
graded by ``rllm_reward_fn_code`` as DeepCoder's training calls it; it answers one JSON
line ``{"ok", "seconds", "said"}`` (``said``: what rLLM printed meanwhile). An empty
line ends it. The first line it writes says which checker it loaded, or why it could not.

Usage: rllm_code_peer.py ROOT
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import importlib.util
import io
import json
import os
import resource
import sys
import time
from pathlib import Path

SKIP_INIT = ("rllm.tools", "rllm.tools.code_tools")


def _namespace(root: Path, name: str) -> None:
    spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
    spec.submodule_search_locations = [str(root.joinpath(*name.split(".")))]
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    setattr(sys.modules[parent], child, module)


def cpu() -> float:
    """CPU time of this process and its finished children (the interpreters it starts)."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    root = Path(sys.argv[1]).resolve()
    # answers go to a copy of stdout; what rLLM (or a program it runs) writes to fd 1
    # goes to stderr instead
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.path.insert(0, str(root))
    try:
        importlib.import_module("rllm")
        for name in SKIP_INIT:
            _namespace(root, name)
        checker = importlib.import_module("rllm.rewards.code_reward")
    except Exception as exc:  # noqa: BLE001 - reported to the benchmark as the reason
        answers.write(json.dumps({"error": f"{type(exc).__name__}: {exc}"}) + "\n")
        return
    answers.write(json.dumps({"loaded": checker.__file__, "python": sys.version.split()[0]}))
    answers.write("\n")
    for line in sys.stdin:
        if not line.strip():
            break
        case = json.loads(line)
        said = io.StringIO()
        c0, start = cpu(), time.perf_counter()
        with contextlib.redirect_stdout(said):
            ok = checker.rllm_reward_fn_code(
                case["data_source"], case["response"], case["ground_truth"]
            )
        seconds, used = time.perf_counter() - start, cpu() - c0
        text = said.getvalue().strip().replace("\n", " | ")[:300]
        answers.write(
            json.dumps({"ok": bool(ok), "seconds": seconds, "cpu": used, "said": text}) + "\n"
        )


if __name__ == "__main__":
    main()
