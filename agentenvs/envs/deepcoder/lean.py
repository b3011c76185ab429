"""Which programs the official rules may run on a lean warm server (no numpy, no pandas).

Officially every program runs after a preamble that imports numpy as ``np`` and pandas as
``pd``. A lean server has neither imported, so a fork costs what a bare interpreter's
does; its programs run the preamble without those two lines. That is only the same
grading for a program that cannot tell the difference, and this module decides it from
the program's syntax alone, erring towards the full server:

- it parses, and it imports only modules of ``MODULES`` (the standard library's pure
  computation modules, ``sys``, ``os`` and ``io`` for input and output);
- it never names ``np``, ``pd``, ``numpy`` or ``pandas`` (as a name, an attribute, an
  import or a word inside a string, which annotations and format strings may evaluate);
- it has no way to look at what the process holds: no builtin that reflects or
  evaluates (``REFLECTIVE``: ``eval``, ``getattr``, ``globals``, ``__import__``, ...),
  no double-underscore name or attribute (``__class__``, ``__globals__``,
  ``__subclasses__``; ``__name__`` and ``__init__`` aside), no attribute that starts
  with an underscore or reaches a frame (``gi_frame``, ``f_globals``), no string holding
  ``__`` (``"__main__"`` aside), no ``str.format`` on anything but a literal;
  ``sys``, ``os`` and ``io`` are used only through attributes of ``ATTRIBUTES`` (reading
  and writing the standard streams, the recursion limit), and ``open`` only on a
  descriptor number.

What remains different is the address space, which the lean server's forks reserve as the
full server's imports take it (``LocalSandbox.spawn_warm``'s ``as_if_imported``), and
time. A program that imports numpy in a way this scan did not see still works: the
import runs in its own process.
"""

from __future__ import annotations

import ast
import re

#: modules a lean program may import (their top-level name)
MODULES = frozenset(
    "array bisect calendar cmath collections copy dataclasses datetime decimal enum "
    "fractions functools heapq io itertools math numbers operator os queue random re "
    "statistics string sys time typing".split()
)
#: the only attributes of these modules a lean program may use (fast input and output)
ATTRIBUTES = {
    "sys": frozenset(
        "stdin stdout stderr setrecursionlimit getrecursionlimit maxsize exit argv "
        "float_info set_int_max_str_digits".split()
    ),
    "os": frozenset("read write fstat linesep sep".split()),
    "io": frozenset("BytesIO StringIO".split()),
}
#: names (builtins and module attributes) that evaluate text or reach a process's insides
REFLECTIVE = frozenset(
    "eval exec compile globals locals vars getattr setattr delattr hasattr dir breakpoint "
    "help memoryview importlib get_type_hints Formatter attrgetter methodcaller "
    "format_map modules gi_frame cr_frame ag_frame gi_code f_globals f_locals f_back "
    "f_builtins f_code tb_frame tb_next co_consts".split()
)
_HEAVY = re.compile(r"\b(np|pd|numpy|pandas)\b")
_DUNDER_OK = frozenset({"__name__", "__init__"})


def fits_lean_server(code: str) -> bool:
    """Whether ``code`` is graded the same without numpy and pandas preloaded (see above)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    modules: dict[str, str] = {}  # a name bound to a restricted module -> which
    try:
        return all(_fits(node, modules) for node in ast.walk(tree)) and _module_uses(tree, modules)
    except RecursionError:
        return False


def _fits(node: ast.AST, modules: dict[str, str]) -> bool:
    if isinstance(node, ast.Import):
        for alias in node.names:
            top = alias.name.split(".")[0]
            if top not in MODULES or alias.name != top:
                return False
            if top in ATTRIBUTES:
                modules[alias.asname or top] = top
        return True
    if isinstance(node, ast.ImportFrom):
        top = (node.module or "").split(".")[0]
        if node.level or top not in MODULES or node.module != top:
            return node.module == "__future__" and not node.level
        allowed = ATTRIBUTES.get(top)
        return all(
            a.name != "*" and (allowed is None or a.name in allowed) and _plain(a.name)
            for a in node.names
        )
    if isinstance(node, ast.Name):
        return _plain(node.id) and (not node.id.startswith("__") or node.id in _DUNDER_OK)
    if isinstance(node, ast.Attribute):
        return _plain(node.attr) and (not node.attr.startswith("_") or node.attr in _DUNDER_OK)
    if isinstance(node, ast.arg | ast.keyword):
        name = node.arg
        return name is None or (_plain(name) and not name.startswith("__"))
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return not _HEAVY.fullmatch(node.name)
    if isinstance(node, ast.alias):
        return True
    if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
        text = node.value if isinstance(node.value, str) else node.value.decode("latin-1")
        return ("__" not in text or text == "__main__") and not _HEAVY.search(text)
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and func.id == "open":
            first = node.args[0] if node.args else None
            return isinstance(first, ast.Constant) and type(first.value) is int
        if isinstance(func, ast.Attribute) and func.attr == "format":
            # a format string reaches attributes ("{0.gi_frame}"): only a literal one
            return isinstance(func.value, ast.Constant) and isinstance(func.value.value, str)
    if isinstance(node, ast.MatchClass):
        return all(_plain(a) and not a.startswith("_") for a in node.kwd_attrs)
    if isinstance(node, ast.MatchAs | ast.MatchStar):
        return node.name is None or (_plain(node.name) and not node.name.startswith("__"))
    if isinstance(node, ast.Global | ast.Nonlocal):
        return all(_plain(n) and not n.startswith("__") for n in node.names)
    return True


def _plain(name: str) -> bool:
    return name not in REFLECTIVE and not _HEAVY.fullmatch(name)


def _module_uses(tree: ast.AST, modules: dict[str, str]) -> bool:
    """``sys``, ``os`` and ``io`` only as ``module.allowed_attribute``; no other use of
    their names (passed as a value, rebound, read as a whole)."""
    if not modules:
        return True
    as_value: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            which = modules.get(node.value.id)
            if which is not None:
                if node.attr not in ATTRIBUTES[which]:
                    return False
                as_value.add(id(node.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in modules and id(node) not in as_value:
            return False
    return True
