"""BENCHMARKS.md's tables of the studies over training seeds: FRM on the QQP test pairs, and each recipe study
(``bench.recipe_seeds``) with its per-query and seed-level paired tests."""
from __future__ import annotations

from bench.reporting import build_commit, measured_before_build
from bench.table_format import mean_sd, num, paired_line, read_report, seed_test_line, source_line

__all__ = ["frm_pairs_table", "recipe_seeds_table"]


def frm_pairs_table() -> list[str]:
    """FRM on the held-out test pairs (Table 4's Acc and AUC) and its keyword importance against IDF, per recipe
    over its seeds, with the references and paired bootstrap AUC differences."""
    r = read_report("frm_pairs.json")
    if r is None:
        return []
    out = ["### FRM on the QQP test pairs: Acc, AUC and keyword importance against IDF", "",
           f"{r['pairs']:,} held-out test pairs ({r['positives']:,} paraphrases), {r['questions']:,} distinct questions; "
           f"{r['protocol']}. Spearman = w(k, q) (Eq. 7) against IDF over the test questions' keywords (pooled, and "
           "the mean per question); mean ± sd over the seeds.", "",
           "| FRM | keyword-loss weight | seeds | Acc | AUC | Spearman(w, IDF) pooled | per question | mean w: stop words | "
           "mean w: content words |", "|---|---|---|---|---|---|---|---|---|"]
    for name, row in r["systems"].items():
        if "auc" not in row:
            out.append(f"| {name} | {row['keyword_loss_weight']:g} | none trained | — | — | — | — | — | — |")
            continue
        out.append(f"| {name} | {row['keyword_loss_weight']:g} | {', '.join(map(str, row['seeds_trained']))} | "
                   f"{mean_sd(row['acc'])} | {mean_sd(row['auc'])} | {mean_sd(row['spearman_idf'])} | "
                   f"{mean_sd(row['spearman_idf_per_question'])} | {mean_sd(row['mean_w_stop'])} | {mean_sd(row['mean_w_content'])} |")
    for name, ref in r["references"].items():
        out.append(f"| {name} (reference) | — | — | — | {num(ref['auc'])} | — | — | — | — |")
    out.append("")
    notes = [f"{ref['note']}" for ref in r["references"].values() if "Quora" in ref.get("note", "")]
    out += [f"Reference note: {notes[0]}; FRM reads MiniLM's token vectors too.", ""] if notes else []
    for label, t in r["paired"].items():
        p = f"p < 1/{t['resamples']:,}" if t["p"] == 0 else f"p = {t['p']:.3f}"
        out.append(f"- AUC {label}: {t['auc_diff']:+.4f} [{t['ci95'][0]:.4f}, {t['ci95'][1]:.4f}] "
                   f"(paired bootstrap over the test pairs, {t['resamples']:,} resamples, seed-mean probabilities; {p})")
    for t in r.get("seed_tests", {}).values():
        out.append(seed_test_line(t))
    return out + ["", source_line(r, "frm_pairs.json"), ""]


LABELS = {"recall@100": "R@100", "mrr@100": "MRR@100", "map@100": "MAP@100", "ndcg@10": "NDCG@10",
          "hit_rate@1": "H@1", "hit_rate@10": "H@10"}


def recipe_seeds_table(file: str, title: str) -> list[str]:
    """A ``bench.recipe_seeds`` report: mean ± sd over training seeds per variant, the per-query paired tests on the
    seed means, and the seed-level tests of ``bench.seed_tests`` (``<report>_seed_tests.json``) with their CIs."""
    r = read_report(file)
    if r is None:
        return []
    stale = (["**Not measured on this build**: these models were trained at commit "
              f"{r.get('commit')}, before the default build of {build_commit()}; the paper rows read \"not measured on "
              "this build\" until `make reproduce`'s seed steps (seeds 13-17 on this commit, then "
              f"`python -m bench.recipe_seeds {r.get('study', 'densetrans-ablations')} --seeds 13 14 15 16 17` and "
              "`python -m bench.seed_tests`) rewrite this report.", ""] if measured_before_build(r.get("commit")) else [])
    measures = [m for m in LABELS if any(m in row for row in r["variants"].values())]
    out = [f"### {title}", "", *stale,
           f"QQP test split, {r['queries']:,} queries against the {r['collection']:,}-question collection; {r['protocol']}. "
           "Mean ± sd over the trained seeds.", "",
           "| variant | seeds | " + " | ".join(LABELS[m] for m in measures) + " |", "|---|---|" + "---|" * len(measures)]
    for variant, row in r["variants"].items():
        if not row.get("seeds_trained"):
            out.append(f"| {variant} | none trained |" + " — |" * len(measures))
            continue
        out.append(f"| {variant} | {', '.join(map(str, row['seeds_trained']))} | "
                   + " | ".join(mean_sd(row[m]) for m in measures) + " |")
    missing = [f"{v} seed {run['seed']}" for v, row in r["variants"].items() for run in row["runs"] if "not_trained" in run]
    out += ["", *([f"Not trained (listed with their commands in the report): {', '.join(missing)}.", ""] if missing else [])]
    for test in r["paired"].values():
        out += paired_line(test)[:1]
    seeds = read_report(file.replace(".json", "_seed_tests.json"))
    if seeds and seeds.get("source_commit") == r.get("commit"):
        out += ["", f"Across training seeds ({seeds['unit']}; {seeds['test']}, {seeds['correction']}; "
                    f"{seeds['seeds_note']}), {seeds['metric']}:", ""]
        out += [f"- {t['step']}: {t['mean_difference']:+.4f}, 95 % CI [{t['ci95'][0]:+.4f}, {t['ci95'][1]:+.4f}], "
                f"Holm p {t['p_holm']:.2g}" for t in seeds["steps"]]
    return out + ["", source_line(r, file), ""]
