#!/usr/bin/env python3
"""Validate the bundled BFCL single-turn data (standard library only).

The files follow the official BFCL v4 layout: ``BFCL_v4_<category>.json`` holds
one question record per line (JSON Lines despite the suffix) and
``possible_answer/BFCL_v4_<category>.json`` the matching ground truth, except for
the relevance categories, which have none.

Checks:

* every line parses; records have exactly the official keys; ids are unique,
  numbered 0..n-1 in file order and styled like the official ones
  (``simple_python_3``, ``live_simple_3-2-0``);
* questions are one turn of ``{"role", "content"}`` messages ending with a user
  message;
* function docs are well formed: ``parameters.type == "dict"``, every property
  has a type known for the entry's language and a description, arrays carry
  ``items.type``, ``required`` names existing properties, enums and defaults
  have the declared type, names are unique within an entry;
* answer files list exactly the question ids, in the same order; every call in
  a ground truth names a function of the entry, every parameter exists in that
  function's doc, every required parameter is present and may not be omitted
  (no ``""``), every property of the called function is listed (so a model
  passing an optional argument is judged, never rejected as unexpected),
  omittable parameters with a default list that default, candidates are unique
  after the official string normalisation and match the doc type (Python: the
  JSON type; Java/JavaScript: the value the official type converter yields,
  e.g. a Java ``long`` is an int, a JavaScript ``Bigint`` an int), string
  candidates of enum parameters are enum members;
* values that the official Java/JavaScript converters split naively (commas in
  list elements, ``)`` in HashMap values, ``:`` or ``,`` in JS dict values) are
  rejected; Java ``Array`` may not hold strings or chars (the converter keeps
  their quotes) -- use ``ArrayList`` for those; Java ``HashMap`` and ``char``
  parameters are not used: the official Java parser drops the body of
  ``new HashMap<>() {{ put(..); }}`` and the char converter's pattern never
  matches, so no answer could pass;
* per category: simple -> 1 function and 1 call; multiple -> at least 2
  functions and 1 call; parallel -> 1 function (non-live) and at least 2 calls;
  parallel_multiple -> at least 2 functions and at least 2 calls to at least 2
  distinct functions; irrelevance/live_irrelevance/live_relevance have no
  answer file;
* irrelevance and live_irrelevance questions share no word with the names of
  the offered functions or their parameters (so the functions are plainly
  unrelated), live_relevance questions share at least one.

Usage: python tasks/bfcl/check_data.py   (exit status 1 on any problem)
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ANSWERS = HERE / "possible_answer"

# category -> minimum number of entries
CATEGORIES = {
    "simple_python": 30,
    "simple_java": 12,
    "simple_javascript": 10,
    "multiple": 18,
    "parallel": 15,
    "parallel_multiple": 15,
    "irrelevance": 15,
    "live_simple": 12,
    "live_multiple": 10,
    "live_parallel": 5,
    "live_parallel_multiple": 5,
    "live_irrelevance": 10,
    "live_relevance": 5,
}
MIN_TOTAL = 160
# official categories outside this single-turn set; their files are not checked here
OTHER_OFFICIAL = ("multi_turn_", "web_search", "memory", "format_sensitivity")
NO_ANSWER = {"irrelevance", "live_irrelevance", "live_relevance"}
IRRELEVANT = {"irrelevance", "live_irrelevance"}

PY_TYPES = {"string", "integer", "float", "boolean", "array", "tuple", "dict", "any"}
JAVA_TYPES = {
    "byte",
    "short",
    "integer",
    "long",
    "float",
    "double",
    "boolean",
    "char",
    "String",
    "Array",
    "ArrayList",
    "HashMap",
    "any",
}
JS_TYPES = {"String", "integer", "float", "Bigint", "Boolean", "array", "dict", "any"}
ROLES = {"system", "user", "assistant"}
INT_RANGES = {"byte": (-128, 127), "short": (-32768, 32767)}

STOPWORDS = set(
    """
a an the and or of to in on for with by at from into is are was were be been it its this that these those
what which who whom whose how when where why can could would should will shall may might must do does did
me my mine i you your we our us they them their he she his her get set give make find show tell please
about as if than then so not no yes any all some each per via up down out over under
""".split()
)


def language(category: str) -> str:
    if category == "simple_java":
        return "java"
    if category == "simple_javascript":
        return "javascript"
    return "python"


def type_names(lang: str) -> set[str]:
    return {"python": PY_TYPES, "java": JAVA_TYPES, "javascript": JS_TYPES}[lang]


def standardize(s: str) -> str:
    """The official AST checker's string normalisation."""
    return re.sub(r"[ ,./\-_*^]", "", s).lower().replace("'", '"')


def is_int(v) -> bool:
    return type(v) is int


def is_number(v) -> bool:
    return type(v) in (int, float)


def words(text: str) -> set[str]:
    text = re.sub(r"([a-z])([A-Z])", r"\1 \2", text)
    out = set()
    for w in re.findall(r"[A-Za-z]+", text.lower()):
        if len(w) >= 4 and w not in STOPWORDS:
            out.add(w[:5])  # crude stem
    return out


class Checker:
    def __init__(self) -> None:
        self.errors: list[str] = []

    def err(self, where: str, msg: str) -> None:
        self.errors.append(f"{where}: {msg}")

    # ---------------------------------------------------------------- docs
    def check_schema(self, where: str, name: str, spec, lang: str) -> None:
        if not isinstance(spec, dict):
            self.err(where, f"property {name!r} is not an object")
            return
        t = spec.get("type")
        if t not in type_names(lang):
            self.err(where, f"property {name!r} has type {t!r}, not a {lang} type")
            return
        if not isinstance(spec.get("description"), str) or not spec["description"].strip():
            self.err(where, f"property {name!r} lacks a description")
        unknown = set(spec) - {
            "type",
            "description",
            "items",
            "enum",
            "default",
            "properties",
            "required",
        }
        if unknown:
            self.err(where, f"property {name!r} has unknown keys {sorted(unknown)}")
        if lang == "java" and t in ("HashMap", "char"):
            self.err(
                where, f"property {name!r}: Java {t} cannot be matched by the official pipeline"
            )
        if t in ("array", "tuple", "Array", "ArrayList"):
            items = spec.get("items")
            if not isinstance(items, dict) or items.get("type") not in type_names(lang):
                self.err(where, f"property {name!r} of type {t} needs items.type")
            elif lang == "java" and t == "Array" and items["type"] in ("String", "char", "any"):
                self.err(
                    where, f"property {name!r}: Java Array of {items['type']} -- use ArrayList"
                )
        elif "items" in spec:
            self.err(where, f"property {name!r} of type {t} has items")
        if "properties" in spec:
            if t != "dict":
                self.err(where, f"property {name!r} of type {t} has properties")
            else:
                for sub, subspec in spec["properties"].items():
                    self.check_schema(where, f"{name}.{sub}", subspec, lang)
                for r in spec.get("required", []):
                    if r not in spec["properties"]:
                        self.err(where, f"property {name!r} requires unknown key {r!r}")
        if "enum" in spec:
            enum = spec["enum"]
            if not isinstance(enum, list) or not enum:
                self.err(where, f"property {name!r}: enum must be a non-empty list")
            else:
                for v in enum:
                    if not self.value_ok(v, spec, lang, nested=False):
                        self.err(
                            where, f"property {name!r}: enum value {v!r} does not match type {t}"
                        )
        if "default" in spec:
            d = spec["default"]
            ok = (
                d is None
                or (t in ("array", "tuple", "Array", "ArrayList") and isinstance(d, list))
                or (t in ("dict", "HashMap") and isinstance(d, dict))
                or self.value_ok(d, spec, lang, nested=False)
            )
            if not ok:
                self.err(where, f"property {name!r}: default {d!r} does not match type {t}")

    def check_function(self, where: str, fn, lang: str) -> None:
        if not isinstance(fn, dict) or set(fn) != {"name", "description", "parameters"}:
            self.err(where, "function doc must have exactly name, description, parameters")
            return
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", fn["name"]):
            self.err(where, f"bad function name {fn['name']!r}")
        if not isinstance(fn["description"], str) or not fn["description"].strip():
            self.err(where, f"{fn['name']}: empty description")
        params = fn["parameters"]
        if not isinstance(params, dict) or params.get("type") != "dict":
            self.err(where, f"{fn['name']}: parameters.type must be 'dict'")
            return
        if set(params) != {"type", "properties", "required"}:
            self.err(
                where, f"{fn['name']}: parameters must have exactly type, properties, required"
            )
            return
        props = params["properties"]
        if not isinstance(props, dict):
            self.err(where, f"{fn['name']}: properties must be an object")
            return
        for pname, spec in props.items():
            self.check_schema(f"{where} {fn['name']}", pname, spec, lang)
        req = params["required"]
        if not isinstance(req, list) or len(set(req)) != len(req):
            self.err(where, f"{fn['name']}: required must be a list without repeats")
            return
        for r in req:
            if r not in props:
                self.err(where, f"{fn['name']}: required {r!r} is not a property")
            elif "default" in props[r]:
                self.err(where, f"{fn['name']}: required {r!r} has a default")

    # -------------------------------------------------------------- values
    def value_ok(self, v, spec, lang: str, nested: bool = True) -> bool:
        """Is ``v`` a plausible (converted) value for a parameter of ``spec``?"""
        t = spec["type"]
        if isinstance(v, bool) and t not in ("boolean", "Boolean", "any"):
            return False
        if t in ("string", "String", "char"):
            return isinstance(v, str) and (t != "char" or len(v) == 1)
        if t == "any":
            return isinstance(v, str)
        if t in ("integer", "long", "byte", "short", "Bigint"):
            if not is_int(v):
                return False
            lo, hi = INT_RANGES.get(t, (None, None))
            return lo is None or lo <= v <= hi
        if t in ("float", "double"):
            return is_number(v)
        if t in ("boolean", "Boolean"):
            return isinstance(v, bool)
        if t in ("array", "tuple", "Array", "ArrayList"):
            if not isinstance(v, list):
                return False
            if not nested:
                return True
            item = spec.get("items", {})
            if item.get("type") in ("dict", "HashMap"):
                return all(self.dict_ok(e, item, lang) for e in v)
            return all(self.value_ok(e, item, lang) for e in v)
        if t in ("dict", "HashMap"):
            return self.dict_ok(v, spec, lang) if nested else isinstance(v, dict)
        return False

    def dict_ok(self, v, spec, lang: str) -> bool:
        """A dict candidate: each key maps to a list of acceptable values."""
        if not isinstance(v, dict) or not v:
            return False
        sub = spec.get("properties")
        for key, cands in v.items():
            if not isinstance(cands, list) or not cands:
                return False
            if sub is not None:
                if key not in sub:
                    return False
                if key in spec.get("required", []) and "" in cands:
                    return False
                for cand in cands:
                    if cand != "" and not self.value_ok(cand, sub[key], lang):
                        return False
            else:
                for cand in cands:
                    if isinstance(cand, (dict, list)) or cand is None:
                        return False
        return True

    def converter_safe(self, where: str, v, spec, lang: str) -> None:
        t = spec["type"]
        if lang == "java" and t == "ArrayList":
            for e in v:
                if isinstance(e, str) and ("," in e or ")" in e):
                    self.err(where, f"ArrayList element {e!r} would be split by the converter")
        if lang == "java" and t == "HashMap":
            for key, cands in v.items():
                if '"' in key:
                    self.err(where, f"HashMap key {key!r} contains a quote")
                for cand in cands:
                    if isinstance(cand, str) and (")" in cand or '"' in cand):
                        self.err(where, f"HashMap value {cand!r} would break the converter")
        if lang == "javascript" and t == "array":
            for e in v:
                if isinstance(e, str) and ("," in e or "[" in e or "]" in e):
                    self.err(where, f"array element {e!r} would be split by the converter")
        if lang == "javascript" and t == "dict":
            for cands in v.values():
                for cand in cands:
                    if isinstance(cand, str) and re.search(r"[,:{}\[\]'\"]", cand):
                        self.err(where, f"dict value {cand!r} would break the converter")

    def check_param(self, where: str, pname: str, cands, spec, required: bool, lang: str) -> None:
        w = f"{where} param {pname!r}"
        if not isinstance(cands, list) or not cands:
            self.err(w, "candidates must be a non-empty list")
            return
        if "" in cands and required:
            self.err(w, 'required parameter marked omittable with ""')
        real = [c for c in cands if c != ""]
        if not real and required:
            self.err(w, "no acceptable value")
        if "" in cands and "default" in spec and spec["default"] not in (None, ""):
            d = spec["default"]
            if not any(self.same(d, c) for c in real):
                self.err(w, f"omittable but its default {d!r} is not an accepted value")
        seen = []
        for c in real:
            key = standardize(c) if isinstance(c, str) else json.dumps(c, sort_keys=True)
            if key in seen:
                self.err(w, f"duplicate candidate {c!r} (after normalisation)")
            seen.append(key)
            if c is None:
                self.err(w, 'null candidate (use "" for an omittable parameter)')
                continue
            if not self.value_ok(c, spec, lang):
                self.err(w, f"candidate {c!r} does not match type {spec['type']}")
                continue
            if "enum" in spec and isinstance(c, str):
                if standardize(c) not in {
                    standardize(e) for e in spec["enum"] if isinstance(e, str)
                }:
                    self.err(w, f"candidate {c!r} not in enum {spec['enum']}")
            if isinstance(c, (list, dict)):
                self.converter_safe(w, c, spec, lang)
            if isinstance(c, str) and not c.strip():
                self.err(w, "blank string candidate")

    @staticmethod
    def same(a, b) -> bool:
        if isinstance(a, str) and isinstance(b, str):
            return standardize(a) == standardize(b)
        if is_number(a) and is_number(b) and not isinstance(a, bool) and not isinstance(b, bool):
            return float(a) == float(b)
        return a == b

    # ------------------------------------------------------------ entries
    def check_question(self, where: str, rec, category: str) -> list:
        if not isinstance(rec, dict) or set(rec) != {"id", "question", "function"}:
            self.err(where, "record must have exactly id, question, function")
            return []
        q = rec["question"]
        if not (isinstance(q, list) and len(q) == 1 and isinstance(q[0], list) and q[0]):
            self.err(where, "question must be a list holding exactly one non-empty turn")
        else:
            turn = q[0]
            for m in turn:
                if (
                    not isinstance(m, dict)
                    or set(m) != {"role", "content"}
                    or m.get("role") not in ROLES
                    or not isinstance(m.get("content"), str)
                    or not m["content"].strip()
                ):
                    self.err(where, f"bad message {m!r}")
            if isinstance(turn[-1], dict) and turn[-1].get("role") != "user":
                self.err(where, "the turn must end with a user message")
        funcs = rec["function"]
        if not isinstance(funcs, list) or not funcs:
            self.err(where, "function must be a non-empty list")
            return []
        lang = language(category)
        for fn in funcs:
            self.check_function(where, fn, lang)
        names = [fn.get("name") for fn in funcs if isinstance(fn, dict)]
        if len(set(names)) != len(names):
            self.err(where, "duplicate function names")
        n = len(funcs)
        if (
            category
            in ("simple_python", "simple_java", "simple_javascript", "live_simple", "parallel")
            and n != 1
        ):
            self.err(where, f"{category} entries offer exactly 1 function, got {n}")
        if (
            category in ("multiple", "live_multiple", "parallel_multiple", "live_parallel_multiple")
            and n < 2
        ):
            self.err(where, f"{category} entries offer at least 2 functions, got {n}")
        return funcs

    def check_relevance(self, where: str, rec, category: str) -> None:
        text = " ".join(m["content"] for m in rec["question"][0] if m["role"] == "user")
        fwords = set()
        for fn in rec["function"]:
            fwords |= words(fn["name"].replace(".", " ").replace("_", " "))
            for pname in fn["parameters"]["properties"]:
                fwords |= words(pname.replace("_", " "))
        shared = words(text) & fwords
        if category in IRRELEVANT and shared:
            self.err(where, f"question shares words {sorted(shared)} with the offered functions")
        if category == "live_relevance" and not shared:
            self.err(where, "question shares no word with the offered functions")

    def check_answer(self, where: str, ans, funcs, category: str) -> None:
        if not isinstance(ans, dict) or set(ans) != {"id", "ground_truth"}:
            self.err(where, "answer must have exactly id, ground_truth")
            return
        gt = ans["ground_truth"]
        if not isinstance(gt, list) or not gt:
            self.err(where, "ground_truth must be a non-empty list")
            return
        lang = language(category)
        by_name = {fn["name"]: fn for fn in funcs if isinstance(fn, dict) and "name" in fn}
        called = []
        for call in gt:
            if not isinstance(call, dict) or len(call) != 1:
                self.err(where, f"each call must be a one-key object, got {call!r}")
                continue
            ((fname, params),) = call.items()
            called.append(fname)
            fn = by_name.get(fname)
            if fn is None:
                self.err(where, f"ground truth calls {fname!r}, which is not offered")
                continue
            if not isinstance(params, dict):
                self.err(where, f"{fname}: parameters must be an object")
                continue
            props = fn["parameters"]["properties"]
            req = fn["parameters"]["required"]
            for pname, cands in params.items():
                if pname not in props:
                    self.err(where, f"{fname}: ground-truth parameter {pname!r} not in the doc")
                    continue
                self.check_param(f"{where} {fname}", pname, cands, props[pname], pname in req, lang)
            for r in req:
                if r not in params:
                    self.err(
                        where, f"{fname}: required parameter {r!r} missing from the ground truth"
                    )
            for pname in props:
                if pname not in params:
                    self.err(where, f"{fname}: property {pname!r} not listed in the ground truth")
        n = len(gt)
        if "parallel" in category:
            if n < 2:
                self.err(where, f"{category} needs at least 2 calls, got {n}")
            if "multiple" in category and len(set(called)) < 2:
                self.err(where, f"{category} needs calls to at least 2 distinct functions")
        elif n != 1:
            self.err(where, f"{category} needs exactly 1 call, got {n}")

    # --------------------------------------------------------------- files
    def read_jsonl(self, path: Path) -> list:
        rows = []
        if not path.exists():
            self.err(str(path.relative_to(HERE)), "missing")
            return rows
        text = path.read_text(encoding="utf-8")
        if not text.endswith("\n"):
            self.err(path.name, "file must end with a newline")
        for i, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                self.err(f"{path.name}:{i}", "blank line")
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                self.err(f"{path.name}:{i}", f"invalid JSON: {exc}")
        return rows

    def run(self) -> dict[str, int]:
        counts = {}
        all_ids: set[str] = set()
        for category, minimum in CATEGORIES.items():
            qpath = HERE / f"BFCL_v4_{category}.json"
            apath = ANSWERS / f"BFCL_v4_{category}.json"
            questions = self.read_jsonl(qpath)
            counts[category] = len(questions)
            if len(questions) < minimum:
                self.err(qpath.name, f"{len(questions)} entries, expected at least {minimum}")
            live = category.startswith("live_")
            funcs_by_id = {}
            ids = []
            for idx, rec in enumerate(questions):
                rid = rec.get("id") if isinstance(rec, dict) else None
                where = f"{category}[{idx}] {rid}"
                pattern = rf"{category}_{idx}-\d+-\d+" if live else rf"{category}_{idx}"
                if not isinstance(rid, str) or not re.fullmatch(pattern, rid):
                    self.err(where, f"id must match {pattern}")
                if rid in all_ids:
                    self.err(where, "duplicate id")
                all_ids.add(rid)
                ids.append(rid)
                funcs = self.check_question(where, rec, category)
                funcs_by_id[rid] = funcs
                if (
                    category in NO_ANSWER
                    and funcs
                    and not any(e.startswith(where) for e in self.errors)
                ):
                    self.check_relevance(where, rec, category)
            if category in NO_ANSWER:
                if apath.exists():
                    self.err(
                        str(apath.relative_to(HERE)),
                        f"{category} has no ground truth; remove the file",
                    )
                continue
            answers = self.read_jsonl(apath)
            aids = [a.get("id") if isinstance(a, dict) else None for a in answers]
            if aids != ids:
                self.err(
                    str(apath.relative_to(HERE)),
                    "ids differ from the question file (or are out of order)",
                )
            for ans in answers:
                rid = ans.get("id") if isinstance(ans, dict) else None
                if rid in funcs_by_id:
                    self.check_answer(f"{category} answer {rid}", ans, funcs_by_id[rid], category)

        def unknown(path: Path) -> bool:
            cat = path.name[len("BFCL_v4_") : -len(".json")]
            return cat not in CATEGORIES and not cat.startswith(OTHER_OFFICIAL)

        stray = sorted(p.name for p in HERE.glob("BFCL_v4_*.json") if unknown(p))
        stray += sorted(
            "possible_answer/" + p.name for p in ANSWERS.glob("BFCL_v4_*.json") if unknown(p)
        )
        for s in stray:
            self.err(s, "unknown category file")
        total = sum(counts.values())
        if total < MIN_TOTAL:
            self.err("total", f"{total} entries, expected at least {MIN_TOTAL}")
        return counts


def main() -> int:
    checker = Checker()
    counts = checker.run()
    for category, n in counts.items():
        print(f"{category:24s} {n:4d}")
    print(f"{'total':24s} {sum(counts.values()):4d}")
    if checker.errors:
        for e in checker.errors:
            print("ERROR", e)
        print(f"{len(checker.errors)} problem(s)")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
