"""bench/results.json -> bench/results.md (markdown tables; every figure also stays in the JSON)."""
from __future__ import annotations


def _table(rows: list[dict], columns: list[str]) -> str:
    if not rows:
        return "_(nothing)_\n"
    out = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    for r in rows:
        out.append("| " + " | ".join("" if r.get(c) is None else str(r.get(c)) for c in columns) + " |")
    return "\n".join(out) + "\n"


def _skipped(section: dict) -> str:
    if "skipped" not in section:
        return ""
    value = section["skipped"]
    if isinstance(value, dict):
        return "".join(f"- skipped `{k}`: {v}\n" for k, v in value.items()) + "\n"
    return f"_Skipped: {value}_\n\n"


def to_markdown(r: dict) -> str:
    m = r["machine"]
    s = r["sections"]
    lines = [f"# Benchmark results ({'QUICK smoke run' if r['quick'] else 'full run'})", "",
             f"`{r['command'].strip()}` · dataset `{r['dataset']}` · {r['started']} → {r.get('finished', '')}", "",
             "## Machine", "",
             f"- CPU: {m['cpu_model']} · {m['usable_cores']} usable of {m['logical_cores']} logical cores · "
             f"RAM {m['ram_gb']} GB · torch threads {m['torch_threads']} · CUDA {m['cuda']}",
             f"- load average at start {m['load_average_start']}, at end {m.get('load_average_end')} "
             "(a load above the core count means the machine was shared: timings are noisy)",
             f"- {m['platform']} · Python {m['python']} · " + ", ".join(f"{k} {v}" for k, v in m["versions"].items()),
             "", "QQP protocol: every query is in the collection and is removed from its own ranking.", ""]
    if r["quick"]:
        lines += ["> Quick run: small samples and the 100k synthetic collection only; see `python -m bench` for the "
                  "full figures.", ""]
    if "error" in s.get("latency", {}) or "latency" in s:
        lat = s["latency"]
        lines += ["## Warm query latency per system", ""]
        if "error" in lat:
            lines.append(f"error: {lat['error']}\n")
        else:
            rows = [{"system": k, **v} for k, v in lat["systems"].items()]
            lines += [f"{lat['queries']} sampled dataset queries, k = {lat['k']}; {lat['note']}.", "",
                      _table(rows, ["system", "kind", "p50_ms", "p95_ms", "mean_ms", "n", "what", "error"]),
                      _skipped(lat)]
    if "compare" in s:
        c = s["compare"]
        lines += ["## The Compare page's whole query", ""]
        if "error" in c:
            lines.append(f"error: {c['error']}\n")
        else:
            lines += [f"Systems: {', '.join(c['choices'])} (FRM included: {c['frm_included']}). "
                      f"**p50 {c.get('p50_ms')} ms**, p95 {c.get('p95_ms')} ms over {c.get('n')} queries; goal ≤ "
                      f"{c['goal_p50_ms']} ms p50 → {'met' if c['meets_goal'] else 'NOT met'}. {c['note']}.", "",
                      _table([{"system": k, **v} for k, v in c["per_system"].items()], ["system", "p50_ms", "p95_ms"])]
            if c.get("excluded"):
                lines += [f"- left out: `{k}` — {v}" for k, v in c["excluded"].items()] + [""]
            if c.get("errors"):
                lines += [f"- `{k}`: {v}" for k, v in c["errors"].items()] + [""]
    if "bm25" in s:
        b = s["bm25"]
        lines += ["## BM25: bm25s vs rank-bm25", ""]
        if "error" in b:
            lines.append(f"error: {b['error']}\n")
        else:
            rows = [{**row, "bm25s_single_p50_ms": row["bm25s_single"].get("p50_ms")} for row in b["rows"]]
            lines += [f"{b['queries']}. Goal: {b['goal']} → at 500k: "
                      f"{'not measured (quick run)' if b['meets_goal_500k'] is None else ('met' if b['meets_goal_500k'] else 'NOT met')}. "
                      f"{b['note']}.", "",
                      _table(rows, ["collection", "synthetic", "bm25s_index_s", "bm25s_batched_qps", "bm25s_single_p50_ms",
                                    "rank_bm25_index_s", "rank_bm25_queries", "rank_bm25_ms_per_query",
                                    "rank_bm25_qps_extrapolated", "speedup_batched_vs_rank_bm25",
                                    "speedup_single_vs_rank_bm25", "peak_rss_mb"])]
    if "encode" in s:
        e = s["encode"]
        lines += ["## MiniLM encode throughput", ""]
        lines.append(_skipped(e) if "skipped" in e else (f"error: {e['error']}\n" if "error" in e else
                     f"**{e['questions_per_s']} questions/s** ({e['questions']} questions in {e['seconds']} s, "
                     f"{e['torch_threads']} torch threads, batch {e['batch_size']}, max length {e['max_length']}; "
                     f"{e['note']}).\n"))
    if "builds" in s:
        bl = s["builds"]
        lines += ["## Index and model build times", ""]
        if "error" in bl:
            lines.append(f"error: {bl['error']}\n")
        else:
            cols = sorted({k for v in bl["systems"].values() for k in v} - {"profile"})
            lines += [bl["note"] + ".", "", _table([{"system": k, **v} for k, v in bl["systems"].items()],
                                                   ["system", "profile", *cols]), _skipped(bl)]
    if "ann" in s:
        a = s["ann"]
        lines += ["## Exact vs faiss vs tree (MiniLM vectors)", ""]
        if "skipped" in a or "error" in a:
            lines.append(_skipped(a) or f"error: {a['error']}\n")
        else:
            lines += [f"{a['vectors']:,} vectors × {a['dim']}, {a['queries']} queries. {a['note']}.", "",
                      _table(a["points"], ["method", "param", "distance_computations", "recall@10", "ms_per_query",
                                           "build_s"]), "", "Best recall@10 within each budget:", ""]
            methods = sorted({k for row in a["at_equal_budget"] for k in row} - {"budget_distance_computations"})
            rows = [{"budget": row["budget_distance_computations"],
                     **{mth: (f"{v['recall@10']} ({v['param']}, {v['ms_per_query']} ms)" if v else "—")
                        for mth, v in row.items() if mth in methods}} for row in a["at_equal_budget"]]
            lines.append(_table(rows, ["budget", *methods]))
    if "coldstart" in s:
        cs = s["coldstart"]
        lines += ["## Cold start to a usable Compare page", ""]
        if "skipped" in cs or "error" in cs:
            lines.append(_skipped(cs) or f"error: {cs['error']}\n")
        else:
            lines.append(f"{cs['what']}: server healthy after {cs['server_healthy_s']} s, **first result after "
                         f"{cs['compare_result_s']} s** (goal ≤ {cs['goal_s']} s → {'met' if cs['meets_goal'] else 'NOT met'}); "
                         f"a warm page load with a new query: {cs.get('warm_page_load_s')} s. Artifacts: `{cs['artifacts']}`.\n")
    if "ab" in s:
        ab = s["ab"]
        lines += ["## Today's code against this code (same run, same machine)", ""]
        if "skipped" in ab or "error" in ab:
            lines.append(_skipped(ab) or f"error: {ab['error']}\n")
        else:
            sm = ab["summary"]
            lines += [f"Today's code: {ab['baseline_tree']}; this code: {ab['current_tree']}. "
                      f"{ab['rounds']} round(s), each a fresh process per tree, the trees alternating; medians over "
                      "rounds. " + ("Each tree reads the artifacts its own build wrote (the older code cannot read "
                                    "the newer checkpoints)" if ab.get("baseline_artifacts", "shared") != "shared"
                                    else "Same artifacts") + ", same sampled queries and questions.", "",
                      _table([
                          {"measure": "Compare page whole query, p50 warm (ms)", "today": sm["compare_p50_ms_base"],
                           "this code": sm["compare_p50_ms_new"], "ratio": sm["compare_speedup"],
                           "goal": f"≥ {sm['goals']['compare_speedup']}× faster"},
                          {"measure": "MiniLM encoding (questions/s)", "today": sm["encode_qps_base"],
                           "this code": sm["encode_qps_new"], "ratio": sm["encode_speedup"],
                           "goal": f"≥ {sm['goals']['encode_speedup']}×"},
                          {"measure": "MiniLM encoding, opt-in int8 backend (questions/s)", "today": sm["encode_qps_base"],
                           "this code": sm.get("encode_qps_new_int8"),
                           "ratio": round(sm["encode_qps_new_int8"] / sm["encode_qps_base"], 2)
                           if sm.get("encode_qps_new_int8") and sm["encode_qps_base"] else None,
                           "goal": "QRS_MINILM_BACKEND=onnx-int8 (not the default)"},
                      ], ["measure", "today", "this code", "ratio", "goal"]),
                      f"Compare choices: {', '.join(ab['compare']['choices'])} ("
                      + ("FRM reranks BM25's top 20; " if "frm" in ab["compare"]["choices"] else
                         "FRM was not built in this artifacts folder, so it is not in the figure; ")
                      + "each query removed from its own ranking).", ""]
            rows = []
            for side in ("base", "new"):
                for i, row in enumerate(ab["compare"][side]):
                    rows.append({"tree": side, "round": i + 1, "p50_ms": row.get("p50_ms"), "p95_ms": row.get("p95_ms"),
                                 "n": row.get("n"), **{f"{k} p50": round(v, 1) for k, v in
                                                       row.get("per_system_p50_ms", {}).items()},
                                 "error": str(row.get("error") or row.get("errors") or "")[:120]})
            cols = ["tree", "round", "p50_ms", "p95_ms", "n"] + sorted({k for r_ in rows for k in r_ if k.endswith(" p50")}) + ["error"]
            lines += [_table(rows, cols)]
            rows = [{"tree": side, "round": i + 1, **{k: (round(v, 1) if isinstance(v, float) else v) for k, v in row.items()}}
                    for side in ("base", "new", "new_int8") for i, row in enumerate(ab["encode"].get(side, []))]
            lines += [_table(rows, ["tree", "round", "questions", "seconds", "questions_per_s", "backend", "torch_threads",
                                    "error"])]
    if "first_view" in s:
        fv = s["first_view"]
        lines += ["## Error Analysis: the default first view", ""]
        if "error" in fv and "total_s" not in fv:
            lines.append(f"error: {fv['error']}\n")
        else:
            lines.append(f"{fv['what']}. Split `{fv['split']}` ({fv['queries']:,} queries with a relevant item), systems "
                         f"{', '.join(fv['systems'])}: **{fv['total_s']:.1f} s** in all (imports and data "
                         f"{fv['import_and_data_s']:.1f} s, runs {fv['runs_s']:.1f} s); goal ≤ {fv['goal_s']} s → "
                         f"{'met' if fv['meets_goal'] else 'NOT met'}. MAP@100: "
                         + ", ".join(f"{k} {v:.4f}" for k, v in fv["map@100"].items()) + "\n")
            warm = fv.get("started_server") or {}
            if warm.get("view_s") is not None:
                lines.append(f"On a started server (the app warms ranx's numba code in a background thread at start: "
                             f"{warm['warm_up_s']:.1f} s, off the page's path; imports and the dataset already loaded): "
                             f"the same view takes **{warm['view_s']:.1f} s** (runs {warm['runs_s']:.1f} s); goal ≤ "
                             f"{fv['goal_s']} s → {'met' if fv.get('started_server_meets_goal') else 'NOT met'}.\n")
    kept = {k: v["from_run"] for k, v in s.items() if isinstance(v, dict) and v.get("from_run")}
    if kept:
        lines += ["Sections kept from earlier runs (`--keep`): " + "; ".join(f"{k} from {v}" for k, v in kept.items()), ""]
    lines += ["## Peak memory (RSS of the bench process after each section)", "",
              _table([{"after": k, **v} for k, v in r["memory"].items()], ["after", "peak_rss_mb", "rss_mb"]),
              "Section wall times: " + ", ".join(f"{k} {v.get('section_seconds')} s" for k, v in s.items()), ""]
    return "\n".join(lines)
