"""Plausible bugs for a correct program: one small AST mutation each.

Mutation kinds (one site changed per mutant):

- ``compare``: flip a comparison (``<`` <-> ``<=``, ``>`` <-> ``>=``, ``==`` <-> ``!=``).
- ``off_by_one``: an argument of ``range(...)`` or a subscript index gets ``+ 1`` / ``- 1``.
- ``arith``: swap ``+`` and ``-`` (also in ``+=``/``-=``).
- ``constant``: an integer constant ``c`` becomes ``c + 1`` (``0`` -> ``1``, ``1`` -> ``2``).
- ``bool_op``: ``and`` <-> ``or``; ``min`` <-> ``max``.
- ``drop_line``: a simple statement (assignment, augmented assignment, expression) is
  removed from a block that keeps at least one statement.

``mutation_sites(source)`` lists every applicable site in a fixed order;
``apply_mutation(source, site)`` returns the mutant's text (via ``ast.unparse``, so
comments are gone). Which mutants actually fail a test is for the caller to check.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

KINDS = ("compare", "off_by_one", "arith", "constant", "bool_op", "drop_line")

_COMPARE_FLIP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
}
_ARITH_SWAP: dict[type[ast.operator], type[ast.operator]] = {ast.Add: ast.Sub, ast.Sub: ast.Add}
_DROPPABLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)
_BLOCKS = ("body", "orelse", "finalbody")


@dataclass(frozen=True)
class MutationSite:
    """Where and how to mutate: the node's index in ``ast.walk`` order, and the change.

    ``detail`` picks among variants: which comparison operator; for ``off_by_one``,
    ``2 * argument + (0 for +1, 1 for -1)``; for ``drop_line``, ``block << 16 | position``.
    """

    kind: str
    node: int
    detail: int = 0

    def describe(self) -> str:
        return f"{self.kind}@{self.node}.{self.detail}"


def _is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def _sites_of(index: int, node: ast.AST) -> Iterator[MutationSite]:
    if isinstance(node, ast.Compare):
        for j, op in enumerate(node.ops):
            if type(op) in _COMPARE_FLIP:
                yield MutationSite("compare", index, j)
    elif isinstance(node, ast.BinOp | ast.AugAssign) and type(node.op) in _ARITH_SWAP:
        yield MutationSite("arith", index)
    elif isinstance(node, ast.BoolOp):
        yield MutationSite("bool_op", index)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id == "range" and node.args:
            for j in range(min(len(node.args), 2)):
                yield MutationSite("off_by_one", index, 2 * j)
                yield MutationSite("off_by_one", index, 2 * j + 1)
        elif node.func.id in ("min", "max"):
            yield MutationSite("bool_op", index)
    elif isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Slice | ast.Tuple):
        if isinstance(node.ctx, ast.Load):
            yield MutationSite("off_by_one", index, 0)
            yield MutationSite("off_by_one", index, 1)
    elif (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int)
        and not isinstance(node.value, bool)
        and 0 <= node.value <= 1000
    ):
        yield MutationSite("constant", index)
    for field in _BLOCKS:
        block = getattr(node, field, None)
        if not isinstance(block, list) or len(block) < 2:
            continue
        for j, stmt in enumerate(block):
            if isinstance(stmt, _DROPPABLE) and not _is_docstring(stmt):
                yield MutationSite("drop_line", index, (_BLOCKS.index(field) << 16) | j)


def mutation_sites(source: str) -> list[MutationSite]:
    """Every mutation site of ``source`` in a fixed order (empty if it does not parse)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return []
    sites: list[MutationSite] = []
    for index, node in enumerate(ast.walk(tree)):
        # an import mutated or dropped is a NameError, not a plausible logic bug
        if isinstance(node, ast.Import | ast.ImportFrom):
            continue
        sites.extend(_sites_of(index, node))
    return sites


def _shift(expr: ast.expr, delta: int) -> ast.expr:
    op: ast.operator = ast.Add() if delta > 0 else ast.Sub()
    return ast.BinOp(left=expr, op=op, right=ast.Constant(1))


def apply_mutation(source: str, site: MutationSite) -> str | None:
    """The text of ``source`` with ``site`` mutated, or None if the site does not apply."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return None
    nodes = list(ast.walk(tree))
    if site.node >= len(nodes):
        return None
    node = nodes[site.node]
    kind = site.kind
    if kind == "compare" and isinstance(node, ast.Compare) and site.detail < len(node.ops):
        flip = _COMPARE_FLIP.get(type(node.ops[site.detail]))
        if flip is None:
            return None
        node.ops[site.detail] = flip()
    elif kind == "arith" and isinstance(node, ast.BinOp | ast.AugAssign):
        swap = _ARITH_SWAP.get(type(node.op))
        if swap is None:
            return None
        node.op = swap()
    elif kind == "bool_op" and isinstance(node, ast.BoolOp):
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif kind == "bool_op" and isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        node.func = ast.Name(id="max" if node.func.id == "min" else "min", ctx=ast.Load())
    elif kind == "constant" and isinstance(node, ast.Constant) and isinstance(node.value, int):
        node.value = node.value + 1
    elif kind == "off_by_one" and isinstance(node, ast.Call):
        arg, sign = divmod(site.detail, 2)
        if arg >= len(node.args):
            return None
        node.args[arg] = _shift(node.args[arg], 1 if sign == 0 else -1)
    elif kind == "off_by_one" and isinstance(node, ast.Subscript):
        node.slice = _shift(node.slice, 1 if site.detail == 0 else -1)  # type: ignore[arg-type]
    elif kind == "drop_line":
        field = _BLOCKS[(site.detail >> 16) & 0xF]
        position = site.detail & 0xFFFF
        block = getattr(node, field, None)
        if not isinstance(block, list) or position >= len(block) or len(block) < 2:
            return None
        del block[position]
    else:
        return None
    ast.fix_missing_locations(tree)
    try:
        mutant = ast.unparse(tree)
    except (ValueError, RecursionError):
        return None
    original = ast.unparse(ast.parse(source))
    return None if mutant == original else mutant


def mutants(source: str, order: list[int] | None = None) -> Iterator[tuple[MutationSite, str]]:
    """``(site, mutant text)`` for each site (in ``order`` if given), distinct texts only."""
    sites = mutation_sites(source)
    seen: set[str] = set()
    for i in order if order is not None else range(len(sites)):
        if i >= len(sites):
            continue
        text = apply_mutation(source, sites[i])
        if text is None or text in seen:
            continue
        seen.add(text)
        yield sites[i], text


__all__ = ["KINDS", "MutationSite", "apply_mutation", "mutants", "mutation_sites"]
