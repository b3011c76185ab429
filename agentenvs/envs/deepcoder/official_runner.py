"""The in-sandbox runner behind ``rules="official"``: rLLM's in-process checkers, one test at a time.

This file runs *inside* a sandbox (``python3 -c <this file>``) and uses the standard
library only (plus the numpy/pandas imports that the official preamble itself makes). It
reproduces how the checkers of rLLM at the DeepCoder release run a program in the
evaluator's own process:

- ``lcb_stdin`` (LiveCodeBench, Codeforces): a trailing top-level
  ``if __name__ == '__main__':`` is unwrapped, imports are hoisted and every other
  statement is wrapped in one function (so ``global`` in a helper names a global that
  does not exist), the preamble imports come first; each test calls that function with
  ``sys.stdin`` a ``StringIO`` of the input and ``open`` mocked to read it, ``sys.stdout``
  captured (``os.write(1, ...)`` is not), ``SystemExit`` swallowed (``sys.exit(1)`` after
  a correct answer passes) and an alarm of ``timeout`` seconds.
- ``lcb_call`` (LiveCodeBench functional): the program runs after the preamble; when its
  text contains ``class Solution`` (even in a comment) one ``Solution()`` instance serves
  every test.
- ``taco_call`` (TACO and PrimeIntellect call-based tests): as ``lcb_call`` but with the
  APPS preamble and the module's globals in a plain dict (``__name__`` is not
  ``"__main__"``), and the destructive-function guard applied after loading.
- ``apps_stdin`` (TACO and PrimeIntellect stdin tests): the APPS checker runs the
  program as a fresh ``python3`` script per test; here each test runs in a fork of this
  runner (the preamble's modules already imported, the random generators reseeded) as
  ``__main__`` with the test's stdin, its stdout collected whatever its exit status,
  stderr discarded; the fork holds none of the runner's pipes.

Protocol (one JSON document a line; answers are framed lines on the original stdout):
the host writes ``{"mode", "code", "fn", "timeout"}`` and reads ``{"ready": true}`` or
``{"setup_error": str}``; then, one test at a time, it writes ``{"stdin": str}`` or
``{"args": [encoded...]}`` and reads ``{"stdout"?, "value"?, "error"}`` where ``error`` is
None, ``"timeout"`` or ``"exception: Type: message"``. Every request carries a random
``"id"`` that its answer echoes; the host takes no other frame as the answer (frames a
program writes ahead of time to any fd it finds answer nothing). The next test's input is written
only after the previous answer arrived, so a program sees only the inputs of tests that
already ran (as in the official single-process run). Values travel in the tagged JSON of
``encode``/``decode`` below, which keeps tuples, non-string keys, sets and numpy scalars
apart; anything else arrives as an opaque ``{"__x": type}`` that equals nothing.

The program's own file descriptors 0, 1 and 2 point at ``/dev/null`` while it runs: what
it writes there is lost, as in the official harness. The verdict is never decided here:
the host compares what arrives with the expected output, which never enters the sandbox.
"""

from __future__ import annotations

import ast
import io
import json
import os
import signal
import sys
import types
from typing import Any
from unittest import mock

FRAME_PREFIX = "\x1eAGENTENVS-OFFICIAL "
#: captured stdout beyond this is an "output limit" error (the official checker has no cap)
MAX_OUTPUT_CHARS = 16 << 20

#: the preamble rLLM's checkers put before every program (its BASE_IMPORTS): the same
#: names, numpy and pandas included; no recursion limit is set
LCB_IMPORTS = "\n".join(
    [
        "from itertools import accumulate, chain, combinations, count, permutations, "
        "product, groupby, islice, repeat",
        "from copy import deepcopy",
        "from string import ascii_lowercase, ascii_uppercase",
        "from math import floor, log2, log10, sqrt, comb, gcd, ceil, inf, isqrt, factorial, "
        "atan2, pi",
        "from collections import defaultdict, deque, Counter",
        "from bisect import bisect, bisect_left, bisect_right, insort",
        "from heapq import heappush, heappop, heapify, merge, nlargest, nsmallest, heapreplace",
        "from functools import reduce, cache, lru_cache, cmp_to_key",
        "from random import randrange, shuffle",
        "from operator import itemgetter, sub, xor, or_",
        "from re import search as re_search",
        "from os.path import commonprefix",
        "from typing import List, Tuple, Dict, Set, Optional, Union, Any, Callable, Iterable, "
        "Iterator, Generator, Deque",
        "import copy",
        "import string",
        "import math",
        "import collections",
        "import bisect",
        "import heapq",
        "import functools",
        "import random",
        "import itertools",
        "import operator",
        "import re",
        "import datetime",
        "from time import time",
        "import numpy as np",
        "import pandas as pd",
        "from math import log, prod",
        "from collections import OrderedDict",
        "from itertools import zip_longest, cycle, pairwise",
        "from functools import partial",
        "from operator import iand",
        "import sys",
        "import io, os",
        "",
    ]
)

#: the preamble's lines that import numpy and pandas: left out for a program on a lean
#: warm server (``agentenvs/envs/deepcoder/lean.py`` says which programs may go there)
HEAVY_LINES = ("import numpy as np", "import pandas as pd")


def preamble(text: str, lean: bool) -> str:
    """``text`` (``LCB_IMPORTS``, ``APPS_IMPORTS``), without ``HEAVY_LINES`` when ``lean``."""
    if not lean:
        return text
    return "\n".join(line for line in text.split("\n") if line not in HEAVY_LINES)


#: how an APPS script's process on a lean server ends when it reaches numpy or pandas
LEAN_MISS_STATUS = 86


class _HeavyTrap:
    """On a lean server, the first import of numpy or pandas ends the program: the host
    then grades it again on the full server (an answer ``{"lean_miss": true}``), so a
    program the scan let through by mistake is graded as the full server grades it."""

    def __init__(self) -> None:
        self.send: Any = None
        self.request_id: Any = None
        self.in_script = False

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name.split(".")[0] not in ("numpy", "pandas"):
            return None
        if self.in_script:  # an APPS script's own process: its runner tells the host
            os._exit(LEAN_MISS_STATUS)
        try:
            self.send({"lean_miss": True, "id": self.request_id})
        finally:
            os._exit(0)


_TRAP = _HeavyTrap()


#: the APPS checker's own imports, put before the preamble (call-based) or before the
#: first statement (stdin scripts)
APPS_IMPORTS = "\n".join(
    [
        "import sys",
        "import time",
        "import itertools",
        "from itertools import accumulate, product, permutations, combinations",
        "import collections",
        "from collections import Counter, OrderedDict, deque, defaultdict, ChainMap",
        "from functools import lru_cache",
        "import math",
        "from math import sqrt, sin, cos, tan, ceil, fabs, floor, gcd, exp, log, log2",
        "import fractions",
        "from typing import List, Tuple",
        "import numpy as np",
        "import random",
        "import heapq",
        "from heapq import *",
        "",
    ]
)


# ----------------------------------------------------------------------------- values
def encode(value: Any, depth: int = 0) -> Any:
    """``value`` as tagged JSON: lists stay lists; tuples, dicts, sets, bytes, complex and
    non-finite floats are tagged; numpy scalars become Python ones; others are opaque."""
    if depth > 200:
        raise RecursionError("value nested too deeply")
    if value is None or isinstance(value, bool | str):
        return value if type(value) in (bool, str) or value is None else str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        value = float(value)
        if value != value or value in (float("inf"), float("-inf")):
            return {"__f": repr(value)}
        return value
    if isinstance(value, list):
        return [encode(v, depth + 1) for v in value]
    if isinstance(value, tuple):
        return {"__t": [encode(v, depth + 1) for v in value]}
    if isinstance(value, dict):
        return {"__d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if isinstance(value, set | frozenset):
        tag = "__s" if isinstance(value, set) else "__fs"
        return {tag: [encode(v, depth + 1) for v in value]}
    if isinstance(value, bytes):
        return {"__b": value.hex()}
    if isinstance(value, complex):
        return {"__c": [value.real, value.imag]}
    numpy = sys.modules.get("numpy")
    if (
        numpy is not None
        and isinstance(value, numpy.generic)
        and not isinstance(value, numpy.void | numpy.ndarray)
    ):
        return encode(value.item(), depth + 1)
    return {"__x": type(value).__name__}


class Opaque:
    """A value that could not cross the sandbox boundary: it equals nothing."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"<{self.type_name} object>"


def decode(data: Any) -> Any:
    """The inverse of ``encode`` (opaque values become ``Opaque``)."""
    if isinstance(data, list):
        return [decode(v) for v in data]
    if not isinstance(data, dict):
        return data
    if len(data) == 1:
        ((tag, body),) = data.items()
        if tag == "__t":
            return tuple(decode(v) for v in body)
        if tag == "__d":
            return {_hashable(decode(k)): decode(v) for k, v in body}
        if tag == "__s":
            return {_hashable(decode(v)) for v in body}
        if tag == "__fs":
            return frozenset(_hashable(decode(v)) for v in body)
        if tag == "__b":
            return bytes.fromhex(body)
        if tag == "__c":
            return complex(body[0], body[1])
        if tag == "__f":
            return float(body)
        if tag == "__x":
            return Opaque(str(body))
    return Opaque("dict")  # a plain JSON object is never produced by encode


def _hashable(value: Any) -> Any:
    try:
        hash(value)
    except TypeError:
        return Opaque(type(value).__name__)
    return value


# ----------------------------------------------------------------------------- programs
def unwrap_main_guard(code: str) -> str:
    """A last top-level ``if __name__ == '__main__':`` replaced by its body."""
    try:
        tree = ast.parse(code)
        last = tree.body[-1]
        if isinstance(last, ast.If) and ast.unparse(last.test).strip() == "__name__ == '__main__'":
            return ast.unparse(tree.body[:-1]) + "\n" + ast.unparse(last.body)
    except Exception:  # noqa: BLE001 - unparsable code runs as it is
        pass
    return code


def wrap_in_function(code: str, imports_text: str = LCB_IMPORTS) -> str:
    """Imports hoisted, every other top-level statement inside ``wrapped_function``."""
    try:
        tree = ast.parse(code)
        imports = [s for s in tree.body if isinstance(s, ast.Import | ast.ImportFrom)]
        others = [s for s in tree.body if not isinstance(s, ast.Import | ast.ImportFrom)]
        func = ast.FunctionDef(
            name="wrapped_function",
            args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
            body=others,
            decorator_list=[],
            lineno=-1,
        )
        return imports_text + "\n" + ast.unparse(imports) + "\n" + ast.unparse(func)
    except Exception:  # noqa: BLE001 - as officially: the code is then run unchanged
        return code


class TimeoutException(Exception):
    """Raised by the per-test alarm (its name is what the official checker looks for)."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise TimeoutException


def _alarm(seconds: float) -> None:
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.0))


def _error_of(exc: BaseException) -> str:
    if "timeoutexception" in repr(exc).lower():
        return "timeout"
    text = str(exc)
    name = type(exc).__name__
    return f"exception: {name}: {text}" if text else f"exception: {name}"


def guard(*, exit_too: bool, memory_bytes: int | None) -> None:
    """The official checkers' guard against destructive calls: these become None."""
    if memory_bytes is not None:
        import resource

        for limit in (resource.RLIMIT_AS, resource.RLIMIT_DATA, resource.RLIMIT_STACK):
            try:
                _, hard = resource.getrlimit(limit)
                cap = memory_bytes if hard == resource.RLIM_INFINITY else min(hard, memory_bytes)
                resource.setrlimit(limit, (cap, hard))
            except (ValueError, OSError):
                pass
    import builtins
    import shutil
    import subprocess

    if exit_too:
        builtins.exit = None
    builtins.quit = None
    builtins.help = None
    os.environ["OMP_NUM_THREADS"] = "1"
    for name in (
        "kill system putenv remove removedirs rmdir fchdir setuid fork forkpty killpg "
        "rename renames truncate replace unlink fchmod fchown chmod chown chroot lchflags "
        "lchmod lchown getcwd chdir"
    ).split():
        setattr(os, name, None)
    shutil.rmtree = shutil.move = shutil.chown = None
    subprocess.Popen = None
    for name in ("ipdb", "joblib", "resource", "psutil", "tkinter"):
        sys.modules[name] = None  # type: ignore[assignment]


class Program:
    """One program loaded as the official checker loads it, ready to run tests."""

    def __init__(self, mode: str, code: str, fn: str, timeout: float, lean: bool = False) -> None:
        self.mode = mode
        self.timeout = timeout
        lcb = preamble(LCB_IMPORTS, lean)
        if mode == "lcb_stdin":
            guard(exit_too=False, memory_bytes=None)
            source = wrap_in_function(unwrap_main_guard(code), lcb)
            self.target = self._load(source, "wrapped_function", module=True)
        elif mode == "lcb_call":
            guard(exit_too=False, memory_bytes=None)
            self.target = self._load(lcb + "\n\n" + code, fn, module=True)
        elif mode == "apps_stdin":
            try:
                self.target = compile(code, "<solution>", "exec", dont_inherit=True)
            except Exception as exc:  # noqa: BLE001 - officially: the script fails to start
                self.target = None
                self.compile_error = _error_of(exc)
        elif mode == "taco_call":
            source = preamble(APPS_IMPORTS, lean) + lcb + "\n" + code
            self.target = self._load(source, fn, module=False)
            guard(exit_too=True, memory_bytes=4 << 30)
        else:
            raise ValueError(f"unknown mode {mode!r}")

    def _load(self, source: str, name: str, *, module: bool) -> Any:
        holder: Any = types.ModuleType("tmp_sol", "")
        namespace: dict[str, Any] = holder.__dict__ if module else {}
        _alarm(self.timeout)
        try:
            # "<string>": the name exec() gives, as in the official error messages
            exec(compile(source, "<string>", "exec", dont_inherit=True), namespace)
            owner: Any = holder if module else types.SimpleNamespace(**namespace)
            if "class Solution" in source:  # the official test: the text, comments included
                owner = owner.Solution()
        finally:
            _alarm(0)
        target = getattr(owner, name, None)
        if target is None:
            # the official grader then unpacks None: this is the message it reports
            raise TypeError("cannot unpack non-iterable NoneType object")
        return target

    def run_stdin(self, text: str) -> dict[str, Any]:
        captured = io.StringIO()
        saved = sys.stdout
        error = None
        with (
            mock.patch("builtins.open", mock.mock_open(read_data=text)),
            mock.patch("sys.stdin", io.StringIO(text)),
        ):
            sys.stdout = captured
            _alarm(self.timeout)
            try:
                self.target()
            except SystemExit:
                pass
            except Exception as exc:  # noqa: BLE001 - the program's own errors are results
                error = _error_of(exc)
            finally:
                _alarm(0)
                sys.stdout = saved
        text = captured.getvalue()
        if len(text) > MAX_OUTPUT_CHARS:
            return {"stdout": "", "error": "output limit"}
        return {"stdout": text, "error": error}

    def run_script(self, text: str, private: tuple[int, ...]) -> dict[str, Any]:
        """One test of ``apps_stdin``: a fork runs the script; ``private`` are the runner's
        own descriptors, closed in the fork."""
        if self.target is None:  # nothing printed, as a script that does not compile
            return {"stdout": "", "error": self.compile_error}
        stdin_fd = os.memfd_create("stdin", 0)
        data = text.encode("utf-8", "surrogateescape")
        view = memoryview(data)
        while view:
            view = view[os.write(stdin_fd, view) :]
        os.lseek(stdin_fd, 0, os.SEEK_SET)
        out_r, out_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the program's process
            try:
                os.setpgid(0, 0)
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, signal.SIG_DFL)
                os.dup2(stdin_fd, 0)
                os.dup2(out_w, 1)
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, 2)
                for fd in (*private, stdin_fd, out_r, out_w, null):
                    if fd > 2:
                        os.close(fd)
                sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
                sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
                sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
                sys.argv = ["solution.py"]
                _TRAP.in_script = True
                import random

                random.seed()
                numpy = sys.modules.get("numpy")
                if numpy is not None:
                    numpy.random.seed()
                exec(self.target, {"__name__": "__main__", "__builtins__": __builtins__})
            except BaseException:  # noqa: BLE001 - like a script's traceback: stdout still counts
                pass
            finally:
                try:
                    sys.stdout.flush()
                except BaseException:  # noqa: BLE001
                    pass
                os._exit(0)
        os.close(out_w)
        os.close(stdin_fd)
        chunks: list[bytes] = []
        size = 0
        deadline = _monotonic() + self.timeout
        error = None
        try:
            import select

            while True:
                left = deadline - _monotonic()
                if left <= 0:
                    error = "timeout"
                    break
                ready, _, _ = select.select([out_r], [], [], left)
                if not ready:
                    continue
                chunk = os.read(out_r, 1 << 16)
                if not chunk:
                    break
                size += len(chunk)
                if size > MAX_OUTPUT_CHARS:
                    error = "output limit"
                    break
                chunks.append(chunk)
        finally:
            os.close(out_r)
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                _, status = os.waitpid(pid, 0)
            except ChildProcessError:
                status = 0
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == LEAN_MISS_STATUS:
            return {"lean_miss": True}  # graded again on the full server
        stdout = b"".join(chunks).decode("utf-8", "replace")
        return {"stdout": "" if error else stdout, "error": error}

    def run_call(self, args: list[Any]) -> dict[str, Any]:
        _alarm(self.timeout)
        try:
            value = self.target(*args)
        except Exception as exc:  # noqa: BLE001
            return {"error": _error_of(exc)}
        finally:
            _alarm(0)
        try:
            return {"value": encode(value), "error": None}
        except RecursionError:
            return {"value": {"__x": type(value).__name__}, "error": None}


def _monotonic() -> float:
    import time

    return time.monotonic()


def _not_dumpable() -> None:
    """Other processes of the sandbox's user (a test's fork) cannot read this one's memory."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass


def main() -> None:
    serve(os.dup(0), os.dup(1))


def serve(request_fd: int, answer_fd: int) -> None:
    """Answer the host's requests read from ``request_fd`` on ``answer_fd``: what ``main``
    does on the process's stdin and stdout, and what a fork of the warm server
    (``agentenvs/sandbox/forkserver.py``, which preloads this file) does on its own pipes."""
    _not_dumpable()
    requests = os.fdopen(request_fd, "r", encoding="utf-8")
    answers = answer_fd
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    write = os.write

    def send(obj: dict[str, Any]) -> None:
        data = (FRAME_PREFIX + json.dumps(obj) + "\n").encode("utf-8", "backslashreplace")
        view = memoryview(data)
        while view:
            view = view[write(answers, view) :]

    signal.signal(signal.SIGALRM, _on_alarm)
    setup = json.loads(requests.readline())
    lean = bool(setup.get("lean"))
    # loaded before any alarm runs (the official evaluator has numpy loaded already), so
    # that a slow first import is never charged to the program; a lean program's
    # preamble leaves them out, and only their presence is checked
    missing = []
    for name in ("numpy", "pandas"):
        try:
            if not lean:
                __import__(name)
            else:
                import importlib.util  # a lean program cannot see what is imported

                if importlib.util.find_spec(name) is None:
                    missing.append(name)
        except ImportError:
            missing.append(name)
    if lean:
        _TRAP.send, _TRAP.request_id = send, setup.get("id")
        sys.meta_path.insert(0, _TRAP)  # type: ignore[arg-type]
    if missing:  # every program would fail: say why instead
        names = " and ".join(missing)
        send({"fatal": f"the sandbox's python3 cannot import {names}", "id": setup.get("id")})
        return
    try:
        program = Program(
            setup["mode"], setup["code"], setup.get("fn") or "", setup["timeout"], lean
        )
    except BaseException as exc:  # noqa: BLE001 - a program that cannot load fails every test
        send({"setup_error": _error_of(exc), "id": setup.get("id")})
        return
    send({"ready": True, "id": setup.get("id")})
    for line in requests:
        request = json.loads(line)
        _TRAP.request_id = request.get("id")
        try:
            if "stdin" in request and program.mode == "apps_stdin":
                answer = program.run_script(request["stdin"], (requests.fileno(), answers))
            elif "stdin" in request:
                answer = program.run_stdin(request["stdin"])
            else:
                answer = program.run_call([decode(a) for a in request["args"]])
        except BaseException as exc:  # noqa: BLE001 - e.g. KeyboardInterrupt from the program
            answer = {"error": _error_of(exc)}
        # the request's id, which did not exist before it arrived: frames the program
        # wrote ahead of time (to any fd it found) answer no request
        send({**answer, "id": request.get("id")})


if __name__ == "__main__":
    main()
