#!/usr/bin/env python3
"""Validate the bundled InterCode-SQL task data.

Checks, for every ``databases/<db>.sql`` script and every line of ``tasks.jsonl``:

* the script runs in SQLite with foreign keys enforced (parents inserted first),
  has 3-6 tables with 10-60 rows each, uses only INTEGER/REAL/TEXT columns,
  INTEGER keys, lowercase snake_case identifiers that are not reserved words,
  REAL values with at most two decimals, and text values whose order is the same
  under binary (SQLite) and case-insensitive (MariaDB default) collation;
* every task has the expected fields, a known db, a ``db_tables`` equal to the
  db's schema, and a gold query that is a single portable SELECT (no ``||``,
  double quotes, backticks, IFNULL, date functions, ``/``, ``LIMIT a, b``,
  LIMIT without ORDER BY, ...);
* every gold query runs, returns at least one row, returns the same rows when
  the tables are reloaded in reverse and shuffled physical order (in the same
  order when the query has a top-level ORDER BY), never returns unrounded
  floats, and never rounds a value that sits on a half-way point;
* when ``sqlglot`` is importable: every script and gold query transpiles from
  the ``sqlite`` to the ``mysql`` dialect, GROUP BY queries select only grouped
  columns or aggregates, set-operation branches carry no ORDER BY/LIMIT,
  AVG/SUM/arithmetic that yields floats is wrapped in ROUND, and no two different
  rows tie on the ORDER BY keys inside the window the query returns.

Usage: python tasks/intercode_sql/check_tasks.py   (exit status 1 on any problem)
"""

from __future__ import annotations

import collections
import json
import math
import random
import re
import sqlite3
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DB_DIR = HERE / "databases"
TASKS = HERE / "tasks.jsonl"

HARDNESS = ("easy", "medium", "hard", "extra")
MIN_TABLES, MAX_TABLES = 3, 6
MIN_ROWS, MAX_ROWS = 10, 60
MIN_DATABASES, MIN_TASKS = 5, 130

# Reserved words / keywords of MySQL 8, MariaDB 10.x and SQLite that must not be
# used as table or column names (plus a few non-reserved keywords best avoided).
RESERVED = set(
    """
    abort accessible action add after all alter always analyze and as asc attach autoincrement
    before begin between bigint binary blob both by call cascade case cast change char character
    check collate column commit condition conflict constraint continue convert create cross
    cube cume_dist current current_date current_role current_time current_timestamp current_user cursor
    database databases date datetime day day_hour day_microsecond day_minute day_second dec decimal declare
    default deferrable deferred delayed delete dense_rank desc describe deterministic detach
    distinct distinctrow div do double drop dual each else elseif empty enclosed end escape escaped
    except exclude exclusive exists exit explain fail false fetch filter first first_value float float4
    float8 following for force foreign from full fulltext function generated get glob grant group
    grouping groups having high_priority hour hour_microsecond hour_minute hour_second if ignore
    immediate in index indexed infile initially inner inout insensitive insert instead int int1 int2
    int3 int4 int8 integer intersect interval into is isnull iterate join json_table key keys kill
    lag last last_value lateral lead leading leave left level like limit linear lines load
    localtime localtimestamp lock long longblob longtext loop low_priority match materialized
    maxvalue mediumblob mediumint mediumtext middleint minute minute_microsecond minute_second mod
    modifies month natural no no_write_to_binlog not nothing notnull nth_value ntile null nulls
    numeric of offset on optimize optimizer_costs option optionally or order others out outer outfile
    over partition percent_rank plan position pragma preceding precision primary procedure purge
    query raise range rank read read_write reads real recursive references regexp reindex release
    rename repeat replace require resignal restrict return returning revoke right rlike role rollback
    row row_number rows savepoint schema schemas second second_microsecond select sensitive separator
    set show signal smallint spatial specific sql sql_big_result sql_calc_found_rows
    sql_small_result sqlexception sqlstate sqlwarning ssl starting status stored straight_join
    system table temp temporary terminated then ties time timestamp tinyblob tinyint tinytext to
    trailing transaction trigger true type undo union unique unlock unsigned unbounded update usage
    use user using utc_date utc_time utc_timestamp vacuum value values varbinary varchar varcharacter
    varying view virtual week when where while window with without write xor year year_month zerofill
    """.split()
)

IDENT_RE = re.compile(r"^[a-z][a-z0-9_]*$")
ID_RE = re.compile(r"^([a-z][a-z0-9_]*)-(\d{3})$")

# Constructs that behave differently (or do not exist) in SQLite vs MySQL/MariaDB.
FORBIDDEN_SQL = [
    (re.compile(r"\|\|"), "'||' concatenation"),
    (re.compile(r'"'), "double quotes"),
    (re.compile(r"`"), "backticks"),
    (re.compile(r"\bautoincrement\b|\bauto_increment\b", re.I), "AUTOINCREMENT"),
    (
        re.compile(
            r"\b(ifnull|iif|nullif|instr|substr|substring|group_concat|printf|format|typeof|"
            r"date|datetime|julianday|strftime|now|curdate|unixepoch|concat|length|"
            r"char_length|cast|convert|if|glob|regexp|random|rand|total|ltrim|rtrim|trim)\s*\(",
            re.I,
        ),
        "dialect-specific function",
    ),
    (re.compile(r"\b(true|false)\b", re.I), "boolean literal"),
    (re.compile(r"\blimit\s+\d+\s*,", re.I), "LIMIT a, b"),
    (re.compile(r"\bwithout\s+rowid\b", re.I), "WITHOUT ROWID"),
]
GOLD_ONLY_FORBIDDEN = [
    (re.compile(r"/"), "division (integer division differs between engines)"),
    (re.compile(r";"), "semicolon / multiple statements"),
    (re.compile(r"\bnulls\s+(first|last)\b", re.I), "NULLS FIRST/LAST"),
    (
        re.compile(r"\b(insert|update|delete|drop|create|alter|replace|pragma|attach)\b", re.I),
        "non-SELECT statement",
    ),
]

problems: list[str] = []


def fail(msg: str) -> None:
    problems.append(msg)


def strip_sql_strings_and_comments(sql: str) -> str:
    """Blank out single-quoted literals and -- comments so lint regexes see only code."""
    out, i, n = [], 0, len(sql)
    while i < n:
        c = sql[i]
        if c == "'":
            j = i + 1
            while j < n:
                if sql[j] == "'" and j + 1 < n and sql[j + 1] == "'":
                    j += 2
                    continue
                if sql[j] == "'":
                    break
                j += 1
            out.append("''")
            i = j + 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def lint_sql(sql: str, where: str, gold: bool) -> None:
    code = strip_sql_strings_and_comments(sql)
    rules = FORBIDDEN_SQL + (GOLD_ONLY_FORBIDDEN if gold else [])
    for rx, what in rules:
        if rx.search(code):
            fail(f"{where}: forbidden construct: {what}")
    if gold:
        if not re.match(r"\s*select\b", code, re.I):
            fail(f"{where}: gold must be a single SELECT")
        if re.search(r"\blimit\b", code, re.I) and not re.search(r"\border\s+by\b", code, re.I):
            fail(f"{where}: LIMIT without ORDER BY")
        if re.search(r"\boffset\b", code, re.I) and not re.search(r"\blimit\b", code, re.I):
            fail(f"{where}: OFFSET without LIMIT")


# --------------------------------------------------------------------------- databases


def load(script: str, fk: bool = True) -> sqlite3.Connection:
    con = sqlite3.connect(":memory:")
    if fk:
        con.execute("PRAGMA foreign_keys = ON")
    con.executescript(script)
    return con


def table_names(con: sqlite3.Connection) -> list[str]:
    rows = con.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
    ).fetchall()
    return [r[0] for r in rows]


def schema_of(con: sqlite3.Connection) -> dict[str, list[str]]:
    return {t: [c[1] for c in con.execute(f"PRAGMA table_info({t})")] for t in table_names(con)}


def ci_key(s: str) -> str:
    # MariaDB's default utf8mb4_general_ci compares (ASCII) strings case-insensitively,
    # like comparing their upper-cased forms.
    return s.upper()


def check_database(db: str, script: str) -> sqlite3.Connection | None:
    where = f"databases/{db}.sql"
    if not IDENT_RE.match(db):
        fail(f"{where}: database name must be lowercase snake_case")
    lint_sql(script, where, gold=False)
    try:
        con = load(script, fk=True)
    except sqlite3.Error as e:
        fail(f"{where}: SQLite error while loading: {e}")
        return None
    violations = con.execute("PRAGMA foreign_key_check").fetchall()
    if violations:
        fail(f"{where}: foreign key violations: {violations[:5]}")
    tables = table_names(con)
    if not MIN_TABLES <= len(tables) <= MAX_TABLES:
        fail(f"{where}: {len(tables)} tables (want {MIN_TABLES}-{MAX_TABLES})")
    for t in tables:
        tw = f"{where}: table {t}"
        if not IDENT_RE.match(t) or t in RESERVED:
            fail(f"{tw}: bad or reserved table name")
        cols = list(con.execute(f"PRAGMA table_info({t})"))
        fks = list(con.execute(f"PRAGMA foreign_key_list({t})"))
        key_cols = {c[1] for c in cols if c[5]} | {fk[3] for fk in fks}
        for _cid, cname, ctype, _notnull, _default, _pk in cols:
            if not IDENT_RE.match(cname) or cname in RESERVED:
                fail(f"{tw}: bad or reserved column name {cname!r}")
            if ctype not in ("INTEGER", "REAL", "TEXT"):
                fail(f"{tw}.{cname}: type {ctype!r} (use INTEGER, REAL or TEXT)")
            if cname in key_cols and ctype != "INTEGER":
                fail(
                    f"{tw}.{cname}: key columns must be INTEGER (MySQL cannot index TEXT without a length)"
                )
        if not any(c[5] for c in cols):
            fail(f"{tw}: no primary key")
        n = con.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
        if not MIN_ROWS <= n <= MAX_ROWS:
            fail(f"{tw}: {n} rows (want {MIN_ROWS}-{MAX_ROWS})")
        names = [c[1] for c in cols]
        data = con.execute(f"SELECT * FROM {t}").fetchall()
        for ci, (_cid, cname, ctype, *_rest) in enumerate(cols):
            values = [r[ci] for r in data if r[ci] is not None]
            for v in values:
                if ctype == "REAL" and not isinstance(v, (int, float)):
                    fail(f"{tw}.{cname}: non-numeric value {v!r}")
                elif ctype == "REAL" and abs(round(v, 2) - v) > 1e-9:
                    fail(f"{tw}.{cname}: REAL value {v!r} has more than two decimals")
                elif ctype == "INTEGER" and not isinstance(v, int):
                    fail(f"{tw}.{cname}: non-integer value {v!r}")
                elif ctype == "TEXT":
                    if not isinstance(v, str):
                        fail(f"{tw}.{cname}: non-text value {v!r}")
                        continue
                    if v != v.strip() or not v or not v.isascii() or "\\" in v:
                        fail(
                            f"{tw}.{cname}: text value {v!r} must be non-empty trimmed ASCII without backslashes"
                        )
                    if cname.endswith("_date") and not re.match(r"^\d{4}-\d{2}-\d{2}$", v):
                        fail(f"{tw}.{cname}: date {v!r} is not YYYY-MM-DD")
            if ctype == "TEXT":
                distinct = sorted(set(v for v in values if isinstance(v, str)))
                by_ci = collections.defaultdict(set)
                for v in distinct:
                    by_ci[ci_key(v)].add(v)
                clashes = [sorted(s) for s in by_ci.values() if len(s) > 1]
                if clashes:
                    fail(f"{tw}.{cname}: values differing only in case: {clashes[:3]}")
                if distinct != sorted(distinct, key=ci_key):
                    bad = [
                        (a, b)
                        for a in distinct
                        for b in distinct
                        if a < b and ci_key(a) > ci_key(b)
                    ]
                    fail(f"{tw}.{cname}: binary and case-insensitive order differ, e.g. {bad[:3]}")
            unique_name = (
                cname.endswith(("_name", "_title", "_code", "_number")) or cname == "title"
            ) and cname not in ("first_name", "last_name")
            if unique_name and len(set(values)) != len(values):
                dup = [v for v, k in collections.Counter(values).items() if k > 1]
                fail(f"{tw}.{cname}: duplicate names {dup[:5]}")
        if "first_name" in names and "last_name" in names:
            fi, li = names.index("first_name"), names.index("last_name")
            pairs = collections.Counter((r[fi], r[li]) for r in data)
            dup = [p for p, k in pairs.items() if k > 1]
            if dup:
                fail(f"{tw}: duplicate (first_name, last_name) pairs {dup[:5]}")
    return con


def reloaded(con: sqlite3.Connection, order: str, seed: int = 0) -> sqlite3.Connection:
    """Copy of ``con`` whose tables have no rowid alias and rows in another physical order."""
    alt = sqlite3.connect(":memory:")
    rng = random.Random(seed)
    for t in table_names(con):
        ddl = con.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (t,)
        ).fetchone()[0]
        alt.execute(re.sub(r"INTEGER PRIMARY KEY", "INT PRIMARY KEY", ddl))
        rows = con.execute(f"SELECT * FROM {t}").fetchall()
        rows = rows[::-1] if order == "reverse" else rng.sample(rows, len(rows))
        if rows:
            marks = ", ".join("?" * len(rows[0]))
            alt.executemany(f"INSERT INTO {t} VALUES ({marks})", rows)
    alt.commit()
    return alt


# --------------------------------------------------------------------------- sqlglot checks


def load_sqlglot():
    try:
        import sqlglot  # noqa: F401
        from sqlglot import exp  # noqa: F401

        return sqlglot
    except ImportError:
        return None


def transpile_check(sqlglot, sql: str, where: str) -> list | None:
    try:
        trees = sqlglot.parse(sql, read="sqlite")
        out = [t.sql(dialect="mysql") for t in trees if t is not None]
    except Exception as e:  # sqlglot raises several error types
        fail(f"{where}: sqlglot sqlite->mysql transpilation failed: {e}")
        return None
    if not out:
        fail(f"{where}: sqlglot produced nothing")
    return [t for t in trees if t is not None]


def grouped_or_aggregated(exp, node, grouped, grouped_cols, grouped_names) -> bool:
    """True when every column of ``node`` is grouped, aggregated or inside a subquery."""
    node = node.this if isinstance(node, exp.Alias) else node
    if node.sql() in grouped:
        return True
    for col in node.find_all(exp.Column):
        cur, nested = col, False
        while cur is not node and cur is not None:
            cur = cur.parent
            if isinstance(cur, (exp.AggFunc, exp.Subquery, exp.Select)):
                nested = True
                break
        if nested or col.sql() in grouped_cols:
            continue
        if not col.table and col.name in grouped_names:
            continue
        return False
    return True


def ast_checks(sqlglot, tree, where: str, float_cols: set[int]) -> None:
    exp = sqlglot.exp
    if not isinstance(tree, (exp.Select, exp.Union, exp.Intersect, exp.Except)):
        fail(f"{where}: gold is not a SELECT / set operation")
        return
    # ORDER BY / LIMIT inside set-operation branches
    for setop in tree.find_all(exp.Union, exp.Intersect, exp.Except):
        for side in (setop.left, setop.right):
            if isinstance(side, exp.Select) and (side.args.get("order") or side.args.get("limit")):
                fail(f"{where}: ORDER BY/LIMIT inside a set-operation branch")
    # ONLY_FULL_GROUP_BY
    for sel in tree.find_all(exp.Select):
        group = sel.args.get("group")
        aggs_in_select = any(p.find(exp.AggFunc) for p in sel.expressions)
        if not group and not aggs_in_select:
            continue
        grouped = {g.sql() for g in (group.expressions if group else [])}
        grouped_cols = {
            g.sql() for g in (group.expressions if group else []) if isinstance(g, exp.Column)
        }
        grouped_names = {
            g.name for g in (group.expressions if group else []) if isinstance(g, exp.Column)
        }

        def ok(node, grouped=grouped, grouped_cols=grouped_cols, grouped_names=grouped_names):
            return grouped_or_aggregated(exp, node, grouped, grouped_cols, grouped_names)

        for p in sel.expressions:
            if isinstance(p, exp.Star) or not ok(p):
                fail(f"{where}: selects {p.sql()!r} that is neither grouped nor aggregated")
        having = sel.args.get("having")
        if having is not None and not ok(having.this):
            fail(f"{where}: HAVING uses a column that is neither grouped nor aggregated")
        order = sel.args.get("order")
        if group and order is not None:
            aliases = {p.alias for p in sel.expressions if isinstance(p, exp.Alias)}
            for o in order.expressions:
                term = o.this
                if isinstance(term, exp.Column) and not term.table and term.name in aliases:
                    continue
                if not ok(term):
                    fail(f"{where}: ORDER BY {term.sql()!r} is neither grouped nor aggregated")
    # float-producing projections must be rounded
    top = tree
    while isinstance(top, (exp.Union, exp.Intersect, exp.Except)):
        top = top.left
    if isinstance(top, exp.Select):
        for i, p in enumerate(top.expressions):
            inner = p.this if isinstance(p, exp.Alias) else p
            risky = inner.find(exp.Avg, exp.Sum, exp.Mul, exp.Div, exp.Add, exp.Sub)
            if risky is not None and i in float_cols and not isinstance(inner, exp.Round):
                fail(
                    f"{where}: float-valued projection {p.sql()!r} must be wrapped in ROUND(..., 2)"
                )


def order_ties(sqlglot, tree, con: sqlite3.Connection) -> str | None:
    """Return a description of rows that tie on the ORDER BY keys but differ, if any.

    Reloading the tables in another order cannot expose every tie (GROUP BY output is
    often sorted by the grouping key), so re-run the query without LIMIT/OFFSET with the
    ORDER BY keys appended to the projection and compare neighbouring rows.
    """
    exp = sqlglot.exp
    if not isinstance(tree, exp.Select) or tree.args.get("order") is None:
        return None
    keys = [o.this for o in tree.args["order"].expressions]
    projections = list(tree.expressions)
    width = len(projections)

    def to_int(node):
        if node is None:
            return None
        value = node.expression if isinstance(node, (exp.Limit, exp.Offset)) else node
        try:
            return int(value.sql())
        except (ValueError, AttributeError):
            return None

    limit, offset = to_int(tree.args.get("limit")), to_int(tree.args.get("offset")) or 0
    probe = tree.copy()
    probe.set("limit", None)
    probe.set("offset", None)
    probe.set("expressions", [p.copy() for p in projections] + [k.copy() for k in keys])
    try:
        rows = con.execute(probe.sql(dialect="sqlite")).fetchall()
    except sqlite3.Error as e:
        return f"could not probe ORDER BY ties: {e}"
    end = len(rows) if limit is None else min(len(rows), offset + limit)
    for i in range(max(0, offset - 1), end):
        if i + 1 >= len(rows):
            break
        a, b = rows[i], rows[i + 1]
        if a[width:] == b[width:] and a[:width] != b[:width]:
            return f"rows {a[:width]} and {b[:width]} tie on the ORDER BY keys"
    return None


# --------------------------------------------------------------------------- tasks


def fmt(row) -> str:
    return repr(tuple(row))


class HalfwayRound:
    def __init__(self) -> None:
        self.hits: list[float] = []

    def __call__(self, x, n=0):
        if x is None:
            return None
        scaled = float(x) * 10 ** int(n)
        frac = scaled - math.floor(scaled)
        if abs(frac - 0.5) < 0.002:
            self.hits.append(x)
        return round(float(x), int(n))


def main() -> int:
    sqlglot = load_sqlglot()
    scripts = {p.stem: p.read_text(encoding="utf-8") for p in sorted(DB_DIR.glob("*.sql"))}
    if len(scripts) < MIN_DATABASES:
        fail(f"only {len(scripts)} databases (want >= {MIN_DATABASES})")
    cons, schemas, alts = {}, {}, {}
    for db, script in scripts.items():
        con = check_database(db, script)
        if con is None:
            continue
        cons[db], schemas[db] = con, schema_of(con)
        alts[db] = [
            reloaded(con, "reverse"),
            reloaded(con, "shuffle", seed=7),
            reloaded(con, "shuffle", seed=11),
        ]
        if sqlglot is not None:
            transpile_check(sqlglot, script, f"databases/{db}.sql")

    tasks = []
    for ln, line in enumerate(TASKS.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            fail(f"tasks.jsonl:{ln}: blank line")
            continue
        try:
            tasks.append((ln, json.loads(line)))
        except json.JSONDecodeError as e:
            fail(f"tasks.jsonl:{ln}: bad JSON: {e}")
    if len(tasks) < MIN_TASKS:
        fail(f"only {len(tasks)} tasks (want >= {MIN_TASKS})")

    seen_ids, seen_queries, seen_gold = set(), set(), set()
    by_hardness, by_db = collections.Counter(), collections.Counter()
    n_rows = collections.Counter()
    for ln, t in tasks:
        where = f"tasks.jsonl:{ln} ({t.get('id')})"
        keys = {"id", "db", "query", "gold", "hardness", "db_tables"}
        if set(t) != keys:
            fail(f"{where}: keys {sorted(t)} (want {sorted(keys)})")
            continue
        if not all(
            isinstance(t[k], str) and t[k].strip() == t[k] and t[k] for k in keys - {"db_tables"}
        ):
            fail(f"{where}: id/db/query/gold/hardness must be non-empty trimmed strings")
            continue
        m = ID_RE.match(t["id"])
        if not m or m.group(1) != t["db"]:
            fail(f"{where}: id must look like '<db>-NNN'")
        if t["id"] in seen_ids:
            fail(f"{where}: duplicate id")
        seen_ids.add(t["id"])
        if t["query"] in seen_queries:
            fail(f"{where}: duplicate question")
        seen_queries.add(t["query"])
        if t["gold"] in seen_gold:
            fail(f"{where}: duplicate gold query")
        seen_gold.add(t["gold"])
        if t["hardness"] not in HARDNESS:
            fail(f"{where}: hardness {t['hardness']!r}")
        by_hardness[t["hardness"]] += 1
        by_db[t["db"]] += 1
        db = t["db"]
        if db not in cons:
            fail(f"{where}: unknown or broken db {db!r}")
            continue
        if t["db_tables"] != schemas[db]:
            fail(f"{where}: db_tables does not match the schema of {db}")
        gold = t["gold"]
        lint_sql(gold, where, gold=True)
        con = cons[db]
        try:
            cur = con.execute(gold)
            rows = cur.fetchall()
        except sqlite3.Error as e:
            fail(f"{where}: SQLite error: {e}")
            continue
        n_rows[t["id"]] = len(rows)
        if not rows:
            fail(f"{where}: gold returns no rows")
        if any(v is None for r in rows for v in r):
            fail(f"{where}: gold returns NULL values")
        float_cols = set()
        for r in rows:
            for i, v in enumerate(r):
                if isinstance(v, float):
                    float_cols.add(i)
                    if abs(round(v, 2) - v) > 1e-9:
                        fail(f"{where}: unrounded float {v!r} in result")
                        break
        if re.search(r"\bround\s*\(", gold, re.I):
            half = HalfwayRound()
            con.create_function("chk_round", -1, half)
            con.execute(re.sub(r"\bround\s*\(", "chk_round(", gold, flags=re.I)).fetchall()
            if half.hits:
                fail(
                    f"{where}: ROUND of a half-way value {half.hits[:3]} (engines may round differently)"
                )
        tree = None
        if sqlglot is not None:
            trees = transpile_check(sqlglot, gold, where)
            if trees is not None and len(trees) != 1:
                fail(f"{where}: gold must be exactly one statement")
            elif trees:
                tree = trees[0]
                ast_checks(sqlglot, tree, where, float_cols)
        if tree is not None:
            tie = order_ties(sqlglot, tree, con)
            if tie:
                fail(f"{where}: order not fully determined: {tie}")
        ordered = (
            tree.args.get("order") is not None
            if tree is not None
            else bool(re.search(r"\border\s+by\b[^()]*$", gold, re.I))
        )
        for alt in alts[db]:
            try:
                alt_rows = alt.execute(gold).fetchall()
            except sqlite3.Error as e:
                fail(f"{where}: SQLite error on reloaded db: {e}")
                break
            same = (
                list(map(fmt, rows)) == list(map(fmt, alt_rows))
                if ordered
                else sorted(map(fmt, rows)) == sorted(map(fmt, alt_rows))
            )
            if not same:
                fail(f"{where}: result depends on physical row order (ties in ORDER BY / LIMIT?)")
                break

    print(f"databases: {len(cons)}")
    for db, con in cons.items():
        counts = {
            t: con.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in table_names(con)
        }
        print(
            f"  {db}: {len(counts)} tables, {sum(counts.values())} rows "
            f"({', '.join(f'{k}={v}' for k, v in counts.items())}); {by_db[db]} tasks"
        )
    print(
        f"tasks: {len(tasks)}  "
        + "  ".join(
            f"{h}={by_hardness[h]} ({100 * by_hardness[h] / max(1, len(tasks)):.0f}%)"
            for h in HARDNESS
        )
    )
    single = sum(1 for k in n_rows.values() if k == 1)
    print(f"gold result sizes: {single} single-row, {len(n_rows) - single} multi-row")
    print(
        f"sqlglot: {'checked (' + sqlglot.__version__ + ')' if sqlglot else 'not installed, transpilation skipped'}"
    )
    if problems:
        print(f"\n{len(problems)} problem(s):", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
