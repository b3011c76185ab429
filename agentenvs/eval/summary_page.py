"""The summary of an every-env evaluation: ``DIR/index.html``, ``DIR/summary.md``, ``DIR/summary.json``.

``write_summary(DIR)`` reads ``DIR/suite.json`` (``agentenvs.eval.suite``), writes each
env's report (``agentenvs.eval.report.write_report`` into ``DIR/<env>/report/``) and,
from those reports' surfaces, one page for all envs:

- per env, the headline figures at the largest budget T: pass@1 and pass@K for the
  largest K of the report (K = n), each with the report's bootstrap interval over tasks;
- the report's Pass@(K,T) figure (``<env>/report/passk.png``, linked, not copied);
- the faults, counted and classified by kind and by attribution (infrastructure or
  unknown), and the share of attempts they took; faults are never scored;
- step quality: not computed, since it compares two policies from the same states
  (``agentenvs step-quality``); the page gives the command per env;
- a link to each env's full report (``<env>/report/index.html`` where the report
  writes one, else ``passk.md``);
- skipped and failed envs, each with its one-line reason.

Links are relative, so the folder can be moved or served as it is. ``summary.md`` has
the same figures for a terminal; ``summary.json`` the same numbers, full precision.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentenvs.eval.suite import read_suite_record

INDEX_NAME = "index.html"
SUMMARY_MD = "summary.md"
SUMMARY_JSON = "summary.json"


def _cell(surface: Any, k: int, t: int) -> dict[str, Any]:
    import numpy as np

    i = int(np.flatnonzero(surface.ks == k)[0])
    j = int(np.flatnonzero(surface.budgets == t)[0])
    cell: dict[str, Any] = {"k": int(k), "t": int(t), "mean": float(surface.mean[i, j])}
    if surface.low is not None and surface.high is not None:
        cell["low"], cell["high"] = float(surface.low[i, j]), float(surface.high[i, j])
    return cell


def headline(surface: Any) -> dict[str, Any]:
    """pass@1 and pass@K_max at the largest budget of a report's surface."""
    from agentenvs.eval.printing import table_decimals

    t = int(surface.budgets.max())
    return {
        "t": t,
        "pass_at_1": _cell(surface, 1, t) if 1 in surface.ks else None,
        "pass_at_k": _cell(surface, int(surface.ks.max()), t),
        "decimals": table_decimals(surface),
        "confidence": surface.confidence,
        "tasks": surface.n_tasks,
    }


def fault_classes(run_dir: Path) -> dict[str, int]:
    """Faults of a run by attribution (``infrastructure``, ``unknown``), from its
    trajectories' retried faults and its ``faults.jsonl``."""
    from agentenvs.eval.faults import FAULTS_NAME, iter_fault_lines
    from agentenvs.eval.records import TRAJECTORIES_NAME, read_trajectories

    counts: Counter[str] = Counter()
    for record in read_trajectories(run_dir / TRAJECTORIES_NAME):
        counts.update(str(f.get("attribution", "unknown")) for f in record.get("faults") or [])
    for line in iter_fault_lines(run_dir / FAULTS_NAME):
        faults = [line["fault"]] if line.get("type") == "worker" else line.get("faults") or []
        counts.update(str(f.get("attribution", "unknown")) for f in faults)
    return dict(sorted(counts.items()))


def _report_link(report_dir: Path, out: Path) -> str | None:
    for name in ("index.html", "passk.md"):
        if (report_dir / name).is_file():
            return (report_dir / name).relative_to(out).as_posix()
    return None


def collect(out: Path, *, n_boot: int = 1000, seed: int = 0, plots: bool = True) -> dict[str, Any]:
    """Write each env's report and gather the summary's numbers (``summary.json``)."""
    from agentenvs.eval.records import MANIFEST_NAME
    from agentenvs.eval.report import load_run, write_report

    record = read_suite_record(out)
    envs = []
    for entry in record["envs"]:
        item = dict(entry)
        run_dir = out / entry["run_dir"]
        item["report"] = item["figure"] = item["headline"] = None
        if (run_dir / MANIFEST_NAME).is_file():
            try:
                result = write_report(run_dir, n_boot=n_boot, seed=seed, plots=plots)
            except Exception as exc:  # noqa: BLE001 - one report's trouble is that env's line
                item["report_error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
            else:
                if result.surface is not None:
                    item["headline"] = headline(result.surface)
                figure = result.out_dir / "passk.png"
                if figure.is_file():
                    item["figure"] = figure.relative_to(out).as_posix()
                item["report"] = _report_link(result.out_dir, out)
            data = load_run(run_dir)
            item["trajectories"] = data.n_records
            item["faults"] = {
                key: data.faults[key]
                for key in ("attempts", "faults", "rate", "faulted", "worker_losses", "by_kind")
            }
            item["faults"]["by_attribution"] = fault_classes(run_dir)
        envs.append(item)
    return {"policy": record["policy"], "seconds": record.get("seconds"), "envs": envs,
            "n_boot": n_boot, "seed": seed}


# ---------------------------------------------------------------- text
def _number(cell: dict[str, Any] | None, decimals: int) -> str:
    if cell is None:
        return "–"
    from agentenvs.eval.printing import format_number

    text = format_number(cell["mean"], decimals)
    if "low" in cell:
        text += f" [{format_number(cell['low'], decimals)}, {format_number(cell['high'], decimals)}]"
    return text


def _faults_text(faults: dict[str, Any] | None) -> str:
    if not faults:
        return "–"
    if not faults["faults"]:
        return f"none in {faults['attempts']} attempts"
    kinds = ", ".join(f"{k} {v}" for k, v in faults["by_kind"].items())
    who = ", ".join(f"{k} {v}" for k, v in faults["by_attribution"].items())
    text = f"{faults['faults']} in {faults['attempts']} attempts ({faults['rate']:.1%}; {kinds}"
    text += f"; {who})" if who else ")"
    if faults["faulted"]:
        text += f"; {faults['faulted']} out of retries"
    return text


def _status_text(env: dict[str, Any]) -> str:
    if env["status"] == "skipped":
        return f"skipped: {env['reason']}"
    if env["status"] == "failed":
        return f"failed: {env['reason']} (run the same command again to resume)"
    if env.get("report_error"):
        return f"no report: {env['report_error']}"
    if env["headline"] is None:
        return "no task has a finished sample at every budget yet"
    return ""


def _k_label(env: dict[str, Any]) -> str:
    head = env.get("headline")
    return "pass@K" if head is None else f"pass@{head['pass_at_k']['k']}"


def summary_markdown(summary: dict[str, Any]) -> str:
    lines = [
        f"# Every-env evaluation: {summary['policy']}",
        "",
        "Pass@(K,T) at each env's largest budget T, with 95% bootstrap intervals over "
        "tasks in brackets; K = n is the most samples per task. Faults are retried and "
        "never scored.",
        "",
        "| env | tasks × n | T | pass@1 | pass@K | faults | report |",
        "|---|---|---|---|---|---|---|",
    ]
    notes = []
    for env in summary["envs"]:
        head = env.get("headline")
        status = _status_text(env)
        if status:
            notes.append(f"- {env['name']}: {status}")
        if head is None:
            state = env["status"] if env["status"] != "ran" else "no data"
            lines.append(f"| {env['name']} | {state} | – | – | – | {_faults_text(env.get('faults'))} | "
                         f"{env.get('report') or '–'} |")
            continue
        d = head["decimals"]
        lines.append(
            f"| {env['name']} | {head['tasks']} × {env['n']} | {head['t']} | "
            f"{_number(head['pass_at_1'], d)} | {_k_label(env)} = {_number(head['pass_at_k'], d)} | "
            f"{_faults_text(env.get('faults'))} | {env.get('report') or '–'} |"
        )
    if notes:
        lines += ["", *notes]
    lines += [
        "",
        "Step quality is not computed: it compares two policies from the same states "
        "(`agentenvs step-quality --run DIR/<env> --a POLICY --b OTHER --out OUT`).",
    ]
    return "\n".join(lines) + "\n"


_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 72rem; margin: 2rem auto; padding: 0 1rem;
       color: #222; }
table { border-collapse: collapse; margin: 1rem 0; }
th, td { border: 1px solid #ccc; padding: 0.3rem 0.6rem; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
.num { font-variant-numeric: tabular-nums; white-space: nowrap; }
.note { color: #555; }
.skip { color: #8a4b00; }
img { max-width: 100%; border: 1px solid #eee; }
section { margin-top: 2.5rem; }
code { background: #f4f4f4; padding: 0 0.2rem; }
"""


def _link(href: str | None, text: str) -> str:
    if href is None:
        return html.escape(text)
    return f'<a href="{html.escape(href, quote=True)}">{html.escape(text)}</a>'


def summary_html(summary: dict[str, Any]) -> str:
    e = html.escape
    policy = e(str(summary["policy"]))
    rows = []
    sections = []
    for env in summary["envs"]:
        head = env.get("headline")
        anchor = f"env-{env['name']}"
        status = _status_text(env)
        if head is not None:
            d = head["decimals"]
            figures = (
                f'<td class="num">{head["tasks"]} × {env["n"]}</td><td class="num">{head["t"]}</td>'
                f'<td class="num">{e(_number(head["pass_at_1"], d))}</td>'
                f'<td class="num">{e(_k_label(env))} = {e(_number(head["pass_at_k"], d))}</td>'
            )
        else:
            figures = '<td colspan="4" class="skip">' + e(status) + "</td>"
        rows.append(
            f'<tr><td><a href="#{anchor}">{e(env["name"])}</a></td>{figures}'
            f"<td>{e(_faults_text(env.get('faults')))}</td>"
            f"<td>{_link(env.get('report'), 'full report') if env.get('report') else '–'}</td></tr>"
        )
        body = [f'<section id="{anchor}"><h2>{e(env["name"])} <small>({e(env["env_id"])})</small></h2>']
        if env.get("budgets"):
            body.append(
                f"<p>{e(str(env['policy']))}; {env['tasks']} tasks ({e(env['data'])}), n = "
                f"{env['n']} samples per task, budgets {e(', '.join(map(str, env['budgets'])))} "
                f"turns, {e(str(env['mode']))} mode; run folder "
                f"{_link(env['run_dir'] + '/', env['run_dir'] + '/')}.</p>"
            )
        if status:
            body.append(f'<p class="skip">{e(status)}</p>')
        if head is not None:
            d = head["decimals"]
            conf = f"{head['confidence']:.0%}"
            body.append(
                f"<p>At T = {head['t']} turns: pass@1 = <span class=\"num\">"
                f"{e(_number(head['pass_at_1'], d))}</span>, {e(_k_label(env))} = "
                f"<span class=\"num\">{e(_number(head['pass_at_k'], d))}</span> ({conf} "
                f"bootstrap intervals over {head['tasks']} tasks).</p>"
            )
        if env.get("figure"):
            body.append(
                f'<p><a href="{e(env["figure"], quote=True)}"><img src="{e(env["figure"], quote=True)}" '
                f'alt="Pass@(K,T) of {e(env["name"])}"></a></p>'
            )
        if env.get("faults") is not None:
            body.append(f"<p>Faults: {e(_faults_text(env['faults']))}.</p>")
        if env["status"] != "skipped":
            body.append(
                '<p class="note">Step quality: not computed (it compares two policies from the '
                f"same states): <code>agentenvs step-quality --run {e(env['run_dir'])} --a POLICY "
                "--b OTHER --out OUT</code>.</p>"
            )
        if env.get("report"):
            body.append(f"<p>{_link(env['report'], 'Full report')}</p>")
        body.append("</section>")
        sections.append("\n".join(body))
    seconds = summary.get("seconds")
    took = f" The evaluation took {seconds:.0f} s." if seconds is not None else ""
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Every-env evaluation: {policy}</title>
<style>{_STYLE}</style>
</head>
<body>
<h1>Every-env evaluation: {policy}</h1>
<p class="note">Pass@(K,T) at each env's largest budget T: pass@1 and pass@K for K = n
samples per task, with 95% bootstrap intervals over tasks in brackets. Faults (a sandbox,
a container, a database, a model server that failed) are retried with the same seed and
never scored; the counts below say how many there were and of what kind.{took}</p>
<table>
<tr><th>env</th><th>tasks × n</th><th>T</th><th>pass@1</th><th>pass@K</th><th>faults</th><th>report</th></tr>
{chr(10).join(rows)}
</table>
{chr(10).join(sections)}
<p class="note">Written by <code>agentenvs report</code> from {_link(SUMMARY_JSON, SUMMARY_JSON)};
the same figures for a terminal in {_link(SUMMARY_MD, SUMMARY_MD)}.</p>
</body>
</html>
"""


def write_summary(
    out: str | Path, *, n_boot: int = 1000, seed: int = 0, plots: bool = True
) -> list[Path]:
    """Each env's report, then ``index.html``, ``summary.md`` and ``summary.json`` in ``out``."""
    out = Path(out)
    summary = collect(out, n_boot=n_boot, seed=seed, plots=plots)
    paths = [out / INDEX_NAME, out / SUMMARY_MD, out / SUMMARY_JSON]
    paths[0].write_text(summary_html(summary))
    paths[1].write_text(summary_markdown(summary))
    paths[2].write_text(json.dumps(summary, indent=2) + "\n")
    return paths


def summary_files(out: Path) -> Sequence[Path]:
    return [out / name for name in (INDEX_NAME, SUMMARY_MD, SUMMARY_JSON)]
