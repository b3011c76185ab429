"""Plausible wrong SQL for error injection, made from a task's gold query and schema.

Each kind of mistake is one a model makes: a misspelt column or table, a syntax slip,
a flipped or dropped condition, a join without its condition, a wrong sort direction.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import sqlglot
from sqlglot import expressions as exp

MISTAKE_KINDS = (
    "unknown_column",
    "unknown_table",
    "syntax",
    "wrong_condition",
    "wrong_join",
    "wrong_order",
    "wrong_column",
)
SEMANTIC_KINDS = frozenset({"wrong_condition", "wrong_join", "wrong_order", "wrong_column"})

_FLIPS: dict[type[exp.Expression], type[exp.Expression]] = {
    exp.EQ: exp.NEQ,
    exp.NEQ: exp.EQ,
    exp.GT: exp.LTE,
    exp.GTE: exp.LT,
    exp.LT: exp.GTE,
    exp.LTE: exp.GT,
}


def _misspell(name: str, taken: set[str], rng: np.random.Generator) -> str:
    options = [
        name + "s",
        name.rstrip("s") if name.endswith("s") else name + "_name",
        name + "_id",
        name[:-1],
    ]
    options = [o for o in options if o and o.lower() not in taken]
    return options[int(rng.integers(len(options)))] if options else name + "_x"


def _pick(nodes: Sequence[exp.Expression], rng: np.random.Generator) -> exp.Expression | None:
    return nodes[int(rng.integers(len(nodes)))] if nodes else None


def _unknown_column(
    tree: exp.Expression, tables: Mapping[str, Sequence[str]], rng: np.random.Generator
) -> exp.Expression | None:
    columns = [c for c in tree.find_all(exp.Column) if c.name]
    target = _pick(columns, rng)
    if target is None:
        return None
    taken = {c.lower() for cols in tables.values() for c in cols}
    target.set("this", exp.to_identifier(_misspell(target.name, taken, rng)))
    return tree


def _unknown_table(
    tree: exp.Expression, tables: Mapping[str, Sequence[str]], rng: np.random.Generator
) -> exp.Expression | None:
    target = _pick([t for t in tree.find_all(exp.Table) if t.name], rng)
    if target is None:
        return None
    taken = {t.lower() for t in tables}
    target.set("this", exp.to_identifier(_misspell(target.name, taken, rng)))
    return tree


def _wrong_condition(
    tree: exp.Expression, tables: Mapping[str, Sequence[str]], rng: np.random.Generator
) -> exp.Expression | None:
    comparisons = [c for c in tree.find_all(*_FLIPS) if c.find_ancestor(exp.Where, exp.Having)]
    target = _pick(comparisons, rng)
    if target is not None:
        target.replace(
            _FLIPS[type(target)](this=target.this.copy(), expression=target.expression.copy())
        )
        return tree
    where = tree.find(exp.Where)
    if where is not None:
        where.pop()
        return tree
    return None


def _wrong_join(
    tree: exp.Expression, tables: Mapping[str, Sequence[str]], rng: np.random.Generator
) -> exp.Expression | None:
    joins = [j for j in tree.find_all(exp.Join) if j.args.get("on") is not None]
    target = _pick(joins, rng)
    if target is None:
        return None
    target.set("on", None)  # a join without its condition: every pairing of rows
    return tree


def _wrong_order(
    tree: exp.Expression, tables: Mapping[str, Sequence[str]], rng: np.random.Generator
) -> exp.Expression | None:
    target = _pick(list(tree.find_all(exp.Ordered)), rng)
    if target is None:
        return None
    desc = not target.args.get("desc")
    target.set("desc", desc)
    target.set("nulls_first", not desc)  # the dialects' default, so no NULLS clause is written
    return tree


def _wrong_column(
    tree: exp.Expression, tables: Mapping[str, Sequence[str]], rng: np.random.Generator
) -> exp.Expression | None:
    select = tree if isinstance(tree, exp.Select) else tree.find(exp.Select)
    if select is None:
        return None
    plain = [e for e in select.expressions if isinstance(e, exp.Column)]
    target = _pick(plain, rng)
    if target is None:
        return None
    by_name = {t.lower(): cols for t, cols in tables.items()}
    pool = sorted(
        {c for cols in by_name.values() for c in cols if c.lower() != target.name.lower()}
    )
    for table in tree.find_all(exp.Table):
        cols = [c for c in by_name.get(table.name.lower(), []) if c.lower() != target.name.lower()]
        if cols and (not target.table or target.table.lower() in {table.alias_or_name.lower()}):
            pool = cols
            break
    if not pool:
        return None
    target.set("this", exp.to_identifier(pool[int(rng.integers(len(pool)))]))
    return tree


_TREE_MISTAKES: dict[str, Callable[..., exp.Expression | None]] = {
    "unknown_column": _unknown_column,
    "unknown_table": _unknown_table,
    "wrong_condition": _wrong_condition,
    "wrong_join": _wrong_join,
    "wrong_order": _wrong_order,
    "wrong_column": _wrong_column,
}


def _syntax_slip(sql: str, rng: np.random.Generator) -> str:
    slips = [
        (re.compile(r"\bSELECT\b", re.I), "SELCT"),
        (re.compile(r"\bFROM\b", re.I), "FORM"),
        (re.compile(r"\bFROM\b", re.I), ", FROM"),
        (re.compile(r"\bWHERE\b", re.I), "WHER"),
        (re.compile(r"\bGROUP BY\b", re.I), "GROUP"),
        (re.compile(r"\bORDER BY\b", re.I), "ORDER"),
    ]
    usable = [(p, r) for p, r in slips if p.search(sql)]
    if not usable:
        return sql + " )"
    pattern, replacement = usable[int(rng.integers(len(usable)))]
    return pattern.sub(replacement, sql, count=1)


@functools.lru_cache(maxsize=4096)
def _parse(gold: str) -> exp.Expression | None:
    """The gold query's tree (None: sqlglot cannot parse it), parsed once: an episode
    draws many mistakes of one query, and parsing costs several times a copy."""
    try:
        return sqlglot.parse_one(gold, read="sqlite")
    except sqlglot.errors.ParseError:
        return None


def wrong_query(
    gold: str,
    tables: Mapping[str, Sequence[str]],
    rng: np.random.Generator,
    *,
    dialect: str = "sqlite",
    kinds: Sequence[str] = MISTAKE_KINDS,
) -> tuple[str, str]:
    """A (kind, SQL) mistake for a task whose answer is ``gold`` (SQLite dialect).

    Kinds are tried in an order drawn from ``rng``; the first that applies to this
    query wins. The SQL is written in ``dialect``.
    """
    order = [kinds[int(i)] for i in rng.permutation(len(kinds))]
    for kind in order:
        if kind == "syntax":
            translated = gold
            if dialect != "sqlite":
                try:
                    translated = sqlglot.transpile(gold, read="sqlite", write=dialect)[0]
                except sqlglot.errors.ParseError:
                    pass
            return kind, _syntax_slip(translated, rng)
        parsed = _parse(gold)
        if parsed is None:
            continue
        changed = _TREE_MISTAKES[kind](parsed.copy(), tables, rng)  # mistakes edit in place
        if changed is not None:
            return kind, changed.sql(dialect=dialect)
    table = next(iter(tables), "records")
    return "unknown_table", f"SELECT * FROM {table}_archive"
