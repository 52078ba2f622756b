"""BENCHMARKS.md's generated tables, rendered from bench/reports/*.json only.

Every number in the sections between the ``generated`` markers comes from a committed report (with the
command, commit and machine that made it): BENCHMARKS.md's opening claims table (``bench.claims``), its
tables section, and the account of ``make reproduce`` in docs/reproduce_run.md. ``python -m bench.tables``
rewrites them, ``--check`` fails when a file and the reports disagree (tests/test_benchmarks_tables.py runs
it). ``make reproduce`` re-runs the reports on a clean default build, then this.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.archive_cost_table import archive_cost_table
from bench.claims import claims_table
from bench.paper_rows import paper_rows_table
from bench.reporting import build_commit, measured_before_build
from bench.seed_tables import frm_pairs_table, recipe_seeds_table
from bench.table_format import mean_sd, num, paired_line, read_report, seed_test_line, source_line

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "BENCHMARKS.md"
REPRODUCE_RUN = ROOT / "docs" / "reproduce_run.md"
BEGIN, END = "<!-- generated:begin (python -m bench.tables; edit the reports, not this section) -->", "<!-- generated:end -->"
CLAIMS_BEGIN = "<!-- claims:begin (python -m bench.tables; edit bench/claims.json and the reports, not this table) -->"
CLAIMS_END = "<!-- claims:end -->"


def text_pipeline_table() -> list[str]:
    r = read_report("text_pipeline.json")
    if r is None:
        return []
    out = ["### The text pipeline: tokenizers measured on every QQP question", "",
           f"{r['data']}; pipeline version `{r['pipeline_version']}`. Speed: {r.get('load', 'load not stated')}.", "",
           "| tokenizer | typed form = CoreNLP tokens | token F1 vs CoreNLP | raw = tokenized input | questions/s |",
           "|---|---|---|---|---|"]
    for row in r["rows"]:
        out.append(f"| {row['tokenizer']} | {num(row['typed_equals_corenlp'])} | {num(row['token_f1_vs_corenlp'])} | "
                   f"{num(row['typed_equals_tokenized_input'])} | {row['questions_per_second']:,} |")
    return out + ["", source_line(r, "text_pipeline.json"), ""]


def query_forms_table() -> list[str]:
    r = read_report("query_forms.json")
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
        if measured_before_build(row.get("commit")):
            out.append(f"| {row['system']} | {row['kind']} | not measured on this build (row of commit "
                       f"{row.get('commit')}, before the build of {build_commit()}; regenerate: python -m "
                       f"bench.query_forms --update --systems {row['system']}) |||||| ")
            continue
        t, y = row["tokenized"], row["typed"]
        out.append(f"| {row['system']} | {row['kind']} | {num(t['recall@100'])} | {num(y['recall@100'])} | "
                   f"{num(t['hit_rate@1'])} | {num(y['hit_rate@1'])} | {num(t['mrr@100'])} | {num(y['mrr@100'])} |")
    out += [""] + reference_notes(r["rows"])
    return out + ["", source_line(r, "query_forms.json"), ""]


def reference_notes(rows: list[dict]) -> list[str]:
    """One line per learned system measured on this build: its held-out H@1 and MRR@100 against its reference's,
    computed from the rows, by the rule of ``core.analysis.held_out`` (below when either is lower)."""
    from core.analysis.held_out import HeldOutVerdict
    from core.registry import reference_of

    by_name = {row["system"]: row for row in rows if "error" not in row and not measured_before_build(row.get("commit"))}
    notes = []
    for system in by_name:  # a variant (name@variant) has its base system's reference
        reference = reference_of(system)  # the registration's reference (SYSTEM@...: its base system's)
        if reference is None or reference not in by_name:
            continue
        verdicts = {form: HeldOutVerdict(system, reference, "test", 0, by_name[system][form], by_name[reference][form])
                    for form in ("tokenized", "typed")}
        mine, ref = verdicts["tokenized"].scores, verdicts["tokenized"].reference_scores
        typed, ref_typed = verdicts["typed"].scores, verdicts["typed"].reference_scores
        notes.append(f"- {system} {verdicts['tokenized'].word} its reference {reference} on held-out queries (tokenized): "
                     f"H@1 {num(mine['hit_rate@1'])} vs {num(ref['hit_rate@1'])}, "
                     f"MRR@100 {num(mine['mrr@100'])} vs {num(ref['mrr@100'])}"
                     + (f"; typed, it **is below**: H@1 {num(typed['hit_rate@1'])} vs {num(ref_typed['hit_rate@1'])}, "
                        f"MRR@100 {num(typed['mrr@100'])} vs {num(ref_typed['mrr@100'])}." if verdicts["typed"].below
                        else "."))
    return notes


def default_build_table() -> list[str]:
    r = read_report("default_build.json")
    if r is None:
        return []
    out = ["### The default build: time, how training stopped, best dev against the reference", "",
           f"Wall time {r.get('wall') or 'not recorded'}; text pipeline `{r['text_pipeline']}`; machine load: {r['load']}. "
           "Rows marked (variant) are the papers' recipes and the ablations, built afterwards beside other work: not part "
           "of the wall time.", "",
           "| system | state | build s | dev metric | best dev (step) | reference | reference dev | stopped | "
           "below reference on dev | held-out test H@1 vs reference | below reference on held-out |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    rows = r["systems"] + [{**row, "system": f"{row['system']} (variant" + (
        f", built at {row['carried_from']}, before this build: other models than this build's)"
        if row.get("carried_from") and measured_before_build(row["carried_from"]) else ")")}
        for row in r.get("variants", [])]
    for row in rows:
        t = row.get("training") or {}
        h = row.get("held_out") or {}
        best = f"{num(t.get('best_dev'))} ({t.get('best_step')})" if t else "—"
        held = (f"{num(h['scores']['hit_rate@1'])} vs {h['reference']} {num(h['reference_scores']['hit_rate@1'])}"
                if h else "—")
        out.append(f"| {row['system']} | {row['state']} | {num(row.get('build_seconds'), 1)} | {t.get('dev_metric') or '—'} | "
                   f"{best} | {t.get('reference') or '—'} | {num(t.get('reference_dev'))} | {t.get('stopped') or '—'} | "
                   f"{'**yes**' if t.get('below_reference') else ('no' if t else '—')} | {held} | "
                   f"{'**yes**' if h.get('below_reference') else ('no' if h else '—')} |")
    out.append("")
    for row in r.get("variants", []):
        curve = (row.get("training") or {}).get("curve") or []
        if curve:
            out.append(f"- {row['system']} (variant) dev curve (step, {row['training']['dev_metric']}): "
                       + ", ".join(f"({step}, {num(dev)})" for step, dev in curve))
    notes = sorted({row["note"] for row in r["systems"] if row.get("note")})
    out += [""] + [f"- {n}" for n in notes]
    return out + ["", source_line(r, "default_build.json"), ""]


def dev_decisions_table() -> list[str]:
    """Choices re-decided on dev: the rule, the dev numbers (mean ± sd over seeds), what
    it picks, what is served, and a paired test of the margin."""
    r = read_report("dev_decisions.json")
    if r is None:
        return []
    d = r["decisions"]
    out = ["### Choices re-decided on dev", "",
           f"QQP {r['split']} split, {r['queries']:,} queries against the {r['collection']:,}-question collection; "
           f"{r['protocol']}. Margins below .01 need more than one run (issue 20 item 6): each number is the mean ± sd "
           "over the seeds where the choice has a random part, and each choice has a paired test over the dev queries.", ""]
    if "tree-k" in d:
        t = d["tree-k"]
        seeds = t["rows"][0].get("seeds")
        out += [f"**Tree K** (rule: {t['rule']}): chosen K = {t['chosen_K']}, served K = {t['served_K']}"
                f" ({'the same' if t['served_is_chosen'] else '**differs**'})"
                + (f"; k-means seeds {', '.join(map(str, seeds))}" if seeds else "") + ".", "",
                "| K | beam | MAP@20 | P@1 | MRR@20 | distance computations / query |", "|---|---|---|---|---|---|"]
        for row in t["rows"]:
            comps = row["distance_computations_per_query"]
            comps = f"{comps['mean']:,.1f}" if isinstance(comps, dict) else f"{comps:,}"
            out.append(f"| {row['K']} | {row['beam']} | {mean_sd(row['map@20'])} | {mean_sd(row['precision@1'])} | "
                       f"{mean_sd(row['mrr@20'])} | {comps} |")
        out += [""] + paired_line(t.get("paired_test"))
    if "int8" in d:
        t = d["int8"]
        out += [f"**MiniLM int8** (rule: {t['rule']}): Δ MAP@100 = {t['delta_map@100']:+.5f}; int8 "
                f"{'may be the default' if t['int8_within_tolerance'] else 'stays opt-in'}"
                + (f". Seeds: {t['seeds']}" if t.get("seeds") else "") + ".", "",
                "| encoder | MAP@100 | R@100 | H@1 |", "|---|---|---|---|"]
        out += [f"| {name} | {num(row['map@100'], 5)} | {num(row['recall@100'], 5)} | {num(row['hit_rate@1'], 5)} |"
                for name, row in t["rows"].items()]
        out += [""] + paired_line(t.get("paired_test"))
    if "frm-keyword-loss" in d:
        t = d["frm-keyword-loss"]
        out += [f"**FRM's keyword-agreement loss** (rule: {t['rule']}): "
                + ("**kept**: `frm@kw-loss` (built by the default build) is the recipe dev prefers; `frm` keeps Eq. (18) "
                   "alone, the paper's recipe under the paper's name (Table 4 rows)" if t["keep_keyword_loss"]
                   else "**dropped**: the default is Eq. (18) alone") + ".", "",
                "| FRM | served as | seeds | best dev AUC | best step | stopped | dev H@1 over BM25 top 20 | dev MRR@20 |",
                "|---|---|---|---|---|---|---|---|"]
        for label, row in t["rows"].items():
            h1 = next(v for k, v in row.items() if k.endswith("hit_rate@1"))
            mrr = next(v for k, v in row.items() if k.endswith("mrr@20"))
            listed = lambda v: ", ".join(map(str, v)) if isinstance(v, list) else str(v)  # noqa: E731
            out.append(f"| {label} | {row['variant']} | {listed(row.get('seeds', '—'))} | {mean_sd(row['dev_auc_best'])} | "
                       f"{listed(row['best_step'])} | {listed(row['stopped'])} | {mean_sd(h1)} | {mean_sd(mrr)} |")
        out += [""] + paired_line(t.get("paired_test"))
        out += [seed_test_line(t["seed_test"]), ""] if t.get("seed_test") else []
    parts = "; ".join(f"{name}: `{part['command']}`, commit {part['commit']}" for name, part in d.items()
                      if part.get("command"))
    return out + [f"Source: `bench/reports/dev_decisions.json`, each part as last run ({parts}; {r['machine']}).", ""]


def layers_table() -> list[str]:
    """Figure 3 (densetrans-cai2021.md §4.4.1): per recipe and negative sampler, the verdict computed from the CIs."""
    out = []
    for file, recipe in (("layers_measures_qqp.json", "project recipe (mean, τ .05)"),
                         ("layers_measures_qqp_paper_objective.json", "paper objective ([CLS], τ 1)")):
        r = read_report(file)
        if r is None:
            continue
        if not out:
            out = ["### Layers: Figure 3, DenseTrans against −AllDense", "",
                   "Per-layer AUC P(cos⁺ > cos⁻) and the paper's mean |log cos⁺ − log cos⁻| over triples whose cosines "
                   "are both positive (the others excluded and counted, never clipped); paired bootstrap 95% CIs of "
                   "DenseTrans − (−AllDense) at the last layer. Verdict rule: reproduced = −AllDense falls with depth, "
                   "DenseTrans rises and the last-layer CI lies above 0; partly reproduced = the last-layer CI lies above 0 "
                   "without both trends; not reproduced = the last-layer CI does not lie above 0. The trends are in "
                   "the columns on the right (layer 0 → last layer).", "",
                   "| recipe | negatives | triples | measure | last-layer difference [95% CI] | verdict | "
                   "excluded at the last layer (DenseTrans / −AllDense) | DenseTrans rises | −AllDense falls |",
                   "|---|---|---|---|---|---|---|---|---|"]
        pair = r.get("figure3_pair", ["densetrans", "densetrans:-AllDense"])
        for negatives, block in r["by_negatives"].items():
            f3 = block["figure3"]
            if "verdict" in f3:
                out.append(f"| {recipe} | {negatives} | {block['triples']} | — | — | {f3['verdict']} | — | — | — |")
                continue
            a, b = block["curves"][pair[0]], block["curves"][pair[1]]
            for m, v in f3.items():
                d = v["last_layer_difference"]
                out.append(f"| {recipe} | {negatives} | {block['triples']} | {m} | {num(d[0])} [{num(d[1])}, "
                           f"{num(d[2])}] | {v['verdict']} | {a['excluded'][-1]} / {b['excluded'][-1]} | "
                           f"{'yes' if v['densetrans_rises_with_depth'] else 'no'} | "
                           f"{'yes' if v['allDense_falls_with_depth'] else 'no'} |")
        models = r.get("figure3_pair_models") or {}
        described = [f"`{source}`: {m['pooling']} pooling, τ {m['temperature']:g}, dropout {m['dropout']:g}, d {m['d_model']}; "
                     f"best dev {m['dev_metric']} {num(m['best_dev'])} at step {m['best_step']} ({m['stopped']})"
                     + (" — the served checkpoint is the **untrained** model" if m.get("untrained") else "")
                     for source, m in models.items() if m.get("pooling")]
        if described:
            out += ["", "The pair: " + "; ".join(described) + "."]
        out += ["", source_line(r, file), ""]
    return out


def determinism_table() -> list[str]:
    """Two builds of one commit, one beside CPU burners: identical weights and test numbers or not (first stages in
    determinism.json, the trained rerankers in determinism_rerankers.json when present)."""
    out: list[str] = []
    for file in ("determinism.json", "determinism_rerankers.json"):
        r = read_report(file)
        if r is None:
            continue
        if not out:
            out = ["### Two builds of one commit", ""]
        out += [f"First: {r['first_build']}. Second: {r['second_build']}.", "",
                "| system | identical weights | identical test numbers | identical learning curve | test number (first / second) |",
                "|---|---|---|---|---|"]
        for system, row in r["results"].items():
            t1, t2 = (row["first"].get("test") or {}), (row["second"].get("test") or {})
            key = next((k for k in ("recall@100", "test_roc_auc") if k in t1), None)
            shown = (f"{key}: {num(t1.get(key))} / {num(t2.get(key))}" if key else
                     "not recorded by the build (identical weights give identical rankings)")
            out.append(f"| {system} | {'yes' if row['identical_weights'] else '**no**'} | "
                       f"{'yes' if row['identical_test_numbers'] else '**no**'} | "
                       f"{'yes' if row['identical_curve'] else '**no**'} | {shown} |")
        out += ["", source_line(r, file), ""]
    return out


def milvus_parity_table() -> list[str]:
    """The same systems served by faiss/bm25s and by Milvus on the QQP test queries."""
    r = read_report("milvus_parity.json")
    if r is None:
        return []
    out = ["### Milvus parity on the QQP test queries", "",
           f"{r['collection']:,} questions, k = {r['k']}; {r['self_match']}; {r['ties']}.", "",
           "| served | queries | overlap@10 | identical top-10 lists | max score difference at the same rank |",
           "|---|---|---|---|---|"]
    for name, row in r["results"].items():
        out.append(f"| {name} | {row['queries']:,} | {row['overlap@10']:.5f} | {row['identical_top10_lists']:,} | "
                   f"{row['max_abs_score_diff_at_same_rank']:.1g} |")
    return out + ["", source_line(r, "milvus_parity.json"), ""]


def reproduce_table() -> list[str]:
    """``make reproduce`` from clean clones: each part's finished steps with their wall time (``bench.reproduce``'s
    ledgers), what is left, the sum, and any earlier whole-plan attempt."""
    r = read_report("reproduce.json")
    if r is None:
        return []
    parts = r.get("parts") or {}
    state = ("**complete**" if r["complete"] else
             f"**not complete**: part(s) left: {', '.join(r['parts_left']) or 'none'}")
    if r.get("code_changes"):
        state += f"; the parts' commits differ in code ({'; '.join(r['code_changes'][:5])})"
    out = ["### `make reproduce` from a clean clone", "",
           f"The plan (`python -m bench.reproduce --list`) runs in parts, each from a clean clone on 2 cores in one "
           f"working session (`make reproduce PART=...`): {state}. Sum of the finished steps' wall times: "
           f"{r['total_wall']} ({round(r['total_seconds']):,} s); longest part {r['longest_part_wall']}. "
           f"{r['note'][0].upper()}{r['note'][1:]}.", ""]
    for name, part in parts.items():
        done = "complete" if part["complete"] else \
            f"not complete: {part['steps_done']} steps done, {len(part['steps_left'])} left ({', '.join(part['steps_left'])})"
        out += [f"Part **{name}** at commit {part['commit']} ({part['cpus']} cores"
                f"{', ' + ' / '.join(part['cpus_seen']) if part.get('cpus_seen') else ''}, "
                f"{ {True: 'a clean clone', False: 'NOT a clean clone: var/ held systems'}.get(part.get('clean_clone'), 'nothing finished yet')}, "
                f"{part['runs']} run(s)): {done}; {part['total_wall']} ({round(part['total_seconds']):,} s).", "",
                "| step | commit | wall (s) | load average at start | rerun after an interruption |",
                "|---|---|---|---|---|"]
        out += [f"| {step['step']} | {step.get('commit', part['commit'])} | {round(step['seconds']):,} | "
                f"{step['load_start'][0]} | {'yes' if step['after_interruption'] else 'no'} |" for step in part["steps"]]
        out.append("")
        if part.get("superseded"):
            out += ["Superseded (a later run of the step replaced it, with the plan's changed commands; not in the "
                    "sums): " + "; ".join(f"{s['step']} at {s['commit']}, {round(s['seconds']):,} s ("
                                          f"`{'; '.join(s['commands'])}`)" for s in part["superseded"]) + ".", ""]
    for old in r.get("earlier") or []:
        out += [f"Earlier: {old['what']} at commit {old['commit']}: {old['steps_done']} steps in {old['total_wall']} ("
                + ", ".join(f"{s['step']} {s['wall']}" for s in old["steps"]) + f"). {old['why']}", ""]
    return out + [source_line(r, "reproduce.json"), ""]


def render() -> str:
    """The generated section (markers included)."""
    lines = [BEGIN, "## Generated from bench/reports (this commit's default build)", ""]
    lines += default_build_table() + query_forms_table() + dev_decisions_table() + frm_pairs_table() + determinism_table()
    lines += recipe_seeds_table("densetrans_ablations.json", "DenseTrans ablations (Table 3) over seeds")
    lines += recipe_seeds_table("sdml_losses.json", "SDML against its triplet-loss baselines (Table 4) over seeds")
    lines += layers_table() + milvus_parity_table() + text_pipeline_table() + archive_cost_table()
    lines += paper_rows_table()
    return "\n".join(lines + [END])


def render_claims() -> str:
    """BENCHMARKS.md's opening claims table (markers included)."""
    return "\n".join([CLAIMS_BEGIN, *claims_table(), CLAIMS_END])


def render_reproduce() -> str:
    """docs/reproduce_run.md's generated section (markers included)."""
    return "\n".join([BEGIN, *reproduce_table(), END])


def sections() -> list[tuple[Path, str, str, str]]:
    """Every generated section: (file, begin marker, end marker, its text now)."""
    return [(BENCHMARKS, CLAIMS_BEGIN, CLAIMS_END, render_claims()), (BENCHMARKS, BEGIN, END, render()),
            (REPRODUCE_RUN, BEGIN, END, render_reproduce())]


def rewritten(text: str, begin: str, end: str, section: str) -> str | None:
    """``text`` with the part between ``begin`` and ``end`` replaced by ``section``; None without the markers."""
    if begin not in text or end not in text.split(begin, 1)[1]:
        return None
    head, rest = text.split(begin, 1)
    return head + section + rest.split(end, 1)[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail if a generated section differs from the reports")
    args = ap.parse_args(argv)
    texts = {path: path.read_text(encoding="utf-8") for path, *_ in sections()}
    new = dict(texts)
    for path, begin, end, section in sections():
        out = rewritten(new[path], begin, end, section)
        if out is None:
            print(f"{path.relative_to(ROOT)} lacks the markers {begin} ... {end}", file=sys.stderr)
            return 2
        new[path] = out
    stale = [path for path in texts if new[path] != texts[path]]
    names = ", ".join(str(path.relative_to(ROOT)) for path in stale)
    if args.check:
        if stale:
            print(f"{names}: a generated section is not what bench/reports gives: run python -m bench.tables",
                  file=sys.stderr)
            return 1
        return 0
    for path in stale:
        path.write_text(new[path], encoding="utf-8")
    print(f"generated sections rewritten: {names or 'none changed'}")
    return 0


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
