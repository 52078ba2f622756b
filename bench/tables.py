"""BENCHMARKS.md's generated tables, rendered from bench/reports/*.json only (issue 20 item 7).

Every number in the section between the ``generated`` markers of BENCHMARKS.md comes from a committed
report (with the command, commit and machine that made it); ``python -m bench.tables`` rewrites the
section, ``--check`` fails when the file and the reports disagree (tests/test_benchmarks_tables.py runs it).
``make reproduce`` re-runs the reports on a clean default build, then this.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

try:
    from bench.paper_rows import paper_rows_table
except ImportError:  # run as a script: python bench/tables.py
    from paper_rows import paper_rows_table

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ROOT / "bench" / "reports"
BENCHMARKS = ROOT / "BENCHMARKS.md"
BEGIN, END = "<!-- generated:begin (python -m bench.tables; edit the reports, not this section) -->", "<!-- generated:end -->"


def _report(name: str) -> dict | None:
    path = REPORTS / name
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _num(value, digits: int = 4) -> str:
    return "—" if not isinstance(value, (int, float)) else f"{value:.{digits}f}"


def _source(report: dict, file: str) -> str:
    return f"Source: `bench/reports/{file}` (`{report['command']}`, commit {report['commit']}, {report['machine']})."


def text_pipeline_table() -> list[str]:
    r = _report("text_pipeline.json")
    if r is None:
        return []
    out = ["### The text pipeline: tokenizers measured on every QQP question", "",
           f"{r['data']}; pipeline version `{r['pipeline_version']}`. Speed: {r.get('load', 'load not stated')}.", "",
           "| tokenizer | typed form = CoreNLP tokens | token F1 vs CoreNLP | raw = tokenized input | questions/s |",
           "|---|---|---|---|---|"]
    for row in r["rows"]:
        out.append(f"| {row['tokenizer']} | {_num(row['typed_equals_corenlp'])} | {_num(row['token_f1_vs_corenlp'])} | "
                   f"{_num(row['typed_equals_tokenized_input'])} | {row['questions_per_second']:,} |")
    return out + ["", _source(r, "text_pipeline.json"), ""]


def query_forms_table() -> list[str]:
    r = _report("query_forms.json")
    if r is None:
        return []
    out = ["### Typed vs tokenized queries (every system, one runner)", "",
           f"QQP {r['split']} split, {r['queries']:,} queries ({r['queries_whose_typed_form_differs']:,} of them read "
           f"differently when typed); {r['protocol']}.", "",
           "| system | kind | R@100 tokenized | R@100 typed | H@1 tokenized | H@1 typed | MRR@100 tokenized | MRR@100 typed |",
           "|---|---|---|---|---|---|---|---|"]
    for row in r["rows"]:
        if "error" in row:
            out.append(f"| {row['system']} | {row['kind']} | not built: {row['error']} |||||| ")
            continue
        t, y = row["tokenized"], row["typed"]
        out.append(f"| {row['system']} | {row['kind']} | {_num(t['recall@100'])} | {_num(y['recall@100'])} | "
                   f"{_num(t['hit_rate@1'])} | {_num(y['hit_rate@1'])} | {_num(t['mrr@100'])} | {_num(y['mrr@100'])} |")
    return out + ["", _source(r, "query_forms.json"), ""]


def default_build_table() -> list[str]:
    r = _report("default_build.json")
    if r is None:
        return []
    out = ["### The default build: time, how training stopped, best dev against the reference", "",
           f"Wall time {r.get('wall') or 'not recorded'}; text pipeline `{r['text_pipeline']}`; machine load: {r['load']}.", "",
           "| system | state | build s | dev metric | best dev (step) | reference | reference dev | stopped | below reference |",
           "|---|---|---|---|---|---|---|---|---|"]
    for row in r["systems"]:
        t = row.get("training") or {}
        best = f"{_num(t.get('best_dev'))} ({t.get('best_step')})" if t else "—"
        out.append(f"| {row['system']} | {row['state']} | {_num(row.get('build_seconds'), 1)} | {t.get('dev_metric') or '—'} | "
                   f"{best} | {t.get('reference') or '—'} | {_num(t.get('reference_dev'))} | {t.get('stopped') or '—'} | "
                   f"{'**yes**' if t.get('below_reference') else ('no' if t else '—')} |")
    notes = sorted({row["note"] for row in r["systems"] if row.get("note")})
    out += [""] + [f"- {n}" for n in notes]
    return out + ["", _source(r, "default_build.json"), ""]


def render() -> str:
    """The generated section (markers included)."""
    lines = [BEGIN, "## Generated from bench/reports (this commit's default build)", ""]
    lines += default_build_table() + query_forms_table() + text_pipeline_table()
    lines += paper_rows_table()
    return "\n".join(lines + [END])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail if BENCHMARKS.md's section differs from the reports")
    args = ap.parse_args(argv)
    text = BENCHMARKS.read_text(encoding="utf-8")
    section = render()
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        new = head + section + rest.split(END, 1)[1]
    else:
        first_section = text.find("\n## ")
        new = text[:first_section + 1] + section + "\n\n" + text[first_section + 1:] if first_section >= 0 else text + section
    if args.check:
        if new != text:
            print("BENCHMARKS.md's generated section is not what bench/reports gives: run python -m bench.tables",
                  file=sys.stderr)
            return 1
        return 0
    BENCHMARKS.write_text(new, encoding="utf-8")
    print("BENCHMARKS.md: generated section rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
