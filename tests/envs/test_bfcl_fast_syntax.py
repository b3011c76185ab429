"""The plain-form reader of BFCL's Python call syntax agrees with the ``ast`` decoder.

:func:`agentenvs.envs.bfcl.fast_syntax.plain_calls` may decline any text (``None``: the
``ast`` decoder reads it), but what it reads must be exactly what ``ast`` reads: the same
names, and values of the same types, equal, in the same order.
"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from agentenvs.envs.bfcl import decode
from agentenvs.envs.bfcl.fast_syntax import plain_calls


def _same(a: Any, b: Any) -> bool:
    """Equal values of the same types at every depth (``1``, ``1.0`` and ``True`` differ;
    so do ``0.0`` and ``-0.0``), dict keys in the same order."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (
            a == b and math.copysign(1, a) == math.copysign(1, b)
        )
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return len(a) == len(b) and all(
            _same(k1, k2) and _same(a[k1], b[k2]) for k1, k2 in zip(a, b, strict=True)
        )
    return bool(a == b)


def _agrees(source: str) -> bool:
    """Whether ``plain_calls`` declines ``source`` or reads it as ``ast`` does."""
    fast = plain_calls(source)
    if fast is None:
        return True
    slow = decode._decode_python_ast(source)  # must not raise: the text is valid
    return _same([(c.name, c.args) for c in slow], fast)


PLAIN = [
    "[]",
    "[f()]",
    "[f(a=1)]",
    '[get_weather(city="Paris", days=3, units=["C"])]',
    "[a.b.c(x='y', z=None)]",
    "[a . b(x=1)]",
    "[f(a=1,), g(b=2),]",
    "[f(a=-0.0, b=-0, c=1e5, d=2E-3, e=1.5e+2, f=1e400)]",
    "[f(a=(1, 2), b=(1,), c=(), d=(3), e=((4)))]",
    "[f(a={'k': [1, {'j': (2, 'x')}], 2: None, 1.5: True}, b={})]",
    "[f(a={1: 'a', True: 'b', 1.0: 'c'})]",
    "[f(a=celsius, b=match, c=_, d=True, e=False)]",
    "[f(\n\ta = 1 ,\n b=\t'x'\n)]",
    "[f(a='caf\u00e9 \u4e2d \U0001f600 \t tab')]",
    '[f(a="it\'s", b=\'say "hi"\')]',
]
NOT_PLAIN = [
    "[f(1)]",  # positional
    "[f(a=1, a=2)]",  # a parameter twice
    "[f(a='x\\ny')]",  # an escape
    "[f(a=r'x')]",
    "[f(a='x' 'y')]",
    "[f(a=+5)]",
    "[f(a=- 5)]",
    "[f(a=1+2)]",
    "[f(a=g(b=1))]",
    "[f(a=x[0])]",
    "[f(a={1, 2})]",
    "[f(a=...)]",
    "[f(a=1_000)]",
    "[f(a=0x10)]",
    "[f(a=007)]",
    "[f(a=1j)]",
    "[f(a=.5)]",
    "[f(a=5.)]",
    "[f(a=1) # c\n]",
    "[f(a=1)\r]",
    "[f(a={[1]: 2})]",
    "[True.f(a=1)]",
    "[f(from=1)]",
    "[caf\u00e9(a=1)]",
    "[f(a='\x00')]",
    "[f(a='\ud800')]",
    "[f(a=1)][0]",
    "[f(a=1) g(b=2)]",
    "[1]",
    "[f(a=1)",
    "[f(a=" + "[" * 40 + "]" * 40 + ")]",  # nested deeper than the plain form goes
]


@pytest.mark.parametrize("source", PLAIN)
def test_plain_replies_are_read_as_ast_reads_them(source: str) -> None:
    assert plain_calls(source) is not None
    assert _agrees(source)


@pytest.mark.parametrize("source", NOT_PLAIN)
def test_other_replies_are_left_to_ast(source: str) -> None:
    assert plain_calls(source) is None


def test_every_character_in_a_string_as_ast_reads_it() -> None:
    # the characters a string may hold: ASCII, Latin-1, the surrogates' edges, a sample
    # of the rest (the full range, 2 x 1.1M texts, was checked once: no difference)
    points = list(range(0x250)) + list(range(0xD7F0, 0xE010)) + [0x2028, 0x2029, 0xFEFF]
    points += random.Random(0).sample(range(0x250, 0x110000), 3000)
    for quote in "'\"":
        for point in points:
            assert _agrees(f"[f(a={quote}x{chr(point)}y{quote}, b=1)]"), hex(point)


_ATOMS = [
    "0", "7", "-3", "12", "1.5", "-0.0", "2e3", "1E-2", "01", "00", "1_0", "0x1", "1j",
    "'s'", '"t"', "''", "'it''s'", "'a\\'b'", "True", "False", "None", "x", "match",
    "if", "not", "...", "+1", "- 1", "f()", "f(a=1)", "x[0]", "{1, 2}",
]  # fmt: skip
_JOINERS = [",", ", ", " ,", ",\n", ",,", " ", ""]


def _random_value(rng: random.Random, depth: int = 0) -> str:
    roll = rng.random()
    if depth > 3 or roll < 0.55:
        return rng.choice(_ATOMS)
    items = [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    joined = rng.choice(_JOINERS).join(items) + rng.choice(["", "", ","])
    if roll < 0.7:
        return f"[{joined}]"
    if roll < 0.85:
        return f"({joined})"
    pairs = [f"{_random_value(rng, depth + 1)}: {v}" for v in items]
    return "{" + rng.choice(_JOINERS).join(pairs) + "}"


def test_random_replies_agree_with_ast() -> None:
    rng = random.Random(1)
    read = 0
    for _ in range(4000):
        calls = []
        for _ in range(rng.randint(0, 3)):
            params = rng.sample(["a", "b", "c", "from", "_x", "a"], rng.randint(0, 3))
            args = rng.choice(_JOINERS).join(f"{p}={_random_value(rng)}" for p in params)
            name = rng.choice(["f", "g.h", "m . n", "True.x", "x2"])
            calls.append(f"{name}({args})")
        source = "[" + rng.choice([", ", ",", " , "]).join(calls) + rng.choice(["", ","]) + "]"
        assert _agrees(source), source
        read += plain_calls(source) is not None
    assert read > 500  # the generator reaches the plain form often enough to test it
