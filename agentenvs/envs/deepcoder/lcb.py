"""LiveCodeBench's conventions, as rLLM uses them for DeepCoder: the prompt that asks for a
program, and the program as it runs (its prelude of imports and recursion limit).
"""

from __future__ import annotations

import ast
import builtins
import re

#: LiveCodeBench's prompts (lcb_runner/prompts/code_generation.py), as rLLM uses them
LCB_SYSTEM_MESSAGE = (
    "You are an expert Python programmer. You will be given a question (problem specification) "
    "and will generate a correct Python program that matches the specification and passes all "
    "tests."
)
LCB_FORMAT_WITH_STARTER = (
    "You will use the following starter code to write the solution to the problem and enclose "
    "your code within delimiters."
)
LCB_FORMAT_WITHOUT_STARTER = (
    "Read the inputs from stdin solve the problem and write the answer to stdout (do not "
    "directly test on the sample inputs). Enclose your code within delimiters as follows. "
    "Ensure that when the python program runs, it reads the inputs, runs the algorithm and "
    "writes output to STDOUT."
)

#: LiveCodeBench runs every program after these imports (LeetCode-style code uses ``List``
#: or ``deque`` without importing them) and a raised recursion limit
STAR_PRELUDE = (
    "from string import *; from re import *; from datetime import *; "
    "from collections import *; from heapq import *; from bisect import *; from copy import *; "
    "from math import *; from random import *; from statistics import *; "
    "from itertools import *; from functools import *; from operator import *; "
    "from io import *; from sys import *; from json import *; from builtins import *; "
    "from typing import *; import string, re, datetime, collections, heapq, bisect, copy, "
    "math, random, statistics, itertools, functools, operator, io, sys, json\n"
)
RECURSION_PRELUDE = "import sys; sys.setrecursionlimit(50000)\n"
_FUTURE = re.compile(r"^from __future__ import [^\n]*$", re.M)
_BUILTIN_NAMES = frozenset(dir(builtins))


def free_names(code: str) -> set[str] | None:
    """Names ``code`` reads but never binds and that are not builtins (None: no parse)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    loaded: set[str] = set()
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.add(node.rest)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            bound.update(node.names)
    return loaded - bound - _BUILTIN_NAMES


def prepare_program(code: str) -> tuple[str, int]:
    """The program as it runs, and how many lines come before the agent's first line.

    As LiveCodeBench: the recursion limit is raised, and the star imports of
    ``STAR_PRELUDE`` come first, but only when the code reads a name it never binds
    (they cost ~7 ms a test; a program that binds every name it uses runs the same
    without them). ``from __future__`` lines move to the top (blanked where they were).
    """
    free = free_names(code)
    prelude = RECURSION_PRELUDE
    if free is None or free:
        prelude = STAR_PRELUDE + prelude
    futures = _FUTURE.findall(code)
    if futures:
        code = _FUTURE.sub("", code)
        prelude = "\n".join(futures) + "\n" + prelude
    return prelude + code, prelude.count("\n")


def lcb_prompt(problem: str, starter_code: str) -> str:
    """rLLM's ``fetch_live_code_bench_system_prompt`` without the system message."""
    text = problem.rstrip("\n") + "\n\n"
    if starter_code:
        text += f"### Format: {LCB_FORMAT_WITH_STARTER}\n```python\n{starter_code}\n```\n\n"
    else:
        text += f"### Format: {LCB_FORMAT_WITHOUT_STARTER}\n```python\n# YOUR CODE HERE\n```\n\n"
    return text + "### Answer: (use the provided format with backticks)\n\n"
