"""BENCHMARKS.md's generated tables are exactly what the committed reports give, and the
paper rows (bench/paper_rows.json) read every value here from a report, never a typed number."""
from __future__ import annotations

import json
import re

import pytest

from tests.conftest import ROOT

NUMBER = r"(?<![\w.])\d+\.\d{1,4}(?:e-?\d+)?(?![\d])"  # "8.8e-09" is one number, not "8.8"
BASE_REPORTS = ("default_build.json", "query_forms.json", "text_pipeline.json", "dev_decisions.json",
                "determinism.json", "milvus_parity.json", "layers_measures_qqp.json", "frm_pairs.json")
OPTIONAL_REPORTS = ("layers_measures_qqp_paper_objective.json", "determinism_rerankers.json", "densetrans_ablations.json",
                    "densetrans_ablations_seed_tests.json", "sdml_losses.json", "sdml_losses_seed_tests.json",
                    "reproduce.json", "archive_cost.json", "archive_cost_large.json",
                    "archive_cost_driver.json", "archive_cost_driver_pool.json")  # rendered when present


def _floats(text: str) -> list[float]:
    """Every decimal number in ``text``, scientific notation included."""
    return [float(v) for v in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", text)]


def _rounded(values: list[float]) -> set[tuple[int, float]]:
    """(decimals, value rounded to them) for every value, 1 to 4 decimals (a '-' may be a hyphen:
    "Linux-6.18.44", "nltk-3.10.4", so both signs count)."""
    return {(d, round(s * v, d)) for v in values for s in (1, -1) for d in range(1, 5)}


def _generated_section() -> str:
    from bench.tables import BEGIN, END

    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    return text.split(BEGIN, 1)[1].split(END, 1)[0]


def _claims_section() -> str:
    from bench.tables import CLAIMS_BEGIN, CLAIMS_END

    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    return text.split(CLAIMS_BEGIN, 1)[1].split(CLAIMS_END, 1)[0]


def test_generated_section_matches_the_reports():
    from bench.tables import main

    assert main(["--check"]) == 0


@pytest.mark.parametrize("section_of", [_generated_section, _claims_section], ids=["tables", "claims"])
def test_every_number_of_the_generated_section_is_in_a_report(section_of):
    """Every number is a report's (the base tables' reports and every report a paper row points at), or the
    paper-rows manifest's own text: the papers' values as printed and its protocol descriptions (the values
    here are checked against their reports one by one in the next test)."""
    from bench.paper_rows import MANIFEST, referenced_reports

    section = section_of()
    reports_dir = ROOT / "bench" / "reports"
    names = list(BASE_REPORTS) + [n for n in (*OPTIONAL_REPORTS, *referenced_reports()) if n not in BASE_REPORTS]
    texts = [(reports_dir / name).read_text(encoding="utf-8") for name in BASE_REPORTS]  # these must exist
    texts += [(reports_dir / n).read_text(encoding="utf-8") for n in names[len(BASE_REPORTS):] if (reports_dir / n).is_file()]
    floats = _floats(" ".join(texts))
    values, exact = _rounded(floats), set(floats)
    values |= {(len(v.split(".")[1]), float(v)) for v in re.findall(NUMBER, MANIFEST.read_text(encoding="utf-8")) if "e" not in v}
    numbers = re.findall(NUMBER, section)
    assert numbers, "no numbers in the generated section"
    def in_reports(n: str) -> bool:  # "8.8e-09" exactly as a report has it; "0.9422" at its printed decimals
        if "e" in n:
            return float(n) in exact
        decimals = len(n.split(".")[1])
        return (decimals, round(float(n), decimals)) in values

    missing = [n for n in numbers if not in_reports(n)]
    assert not missing, f"numbers not found in any report: {missing[:10]}"
    json.loads((reports_dir / "query_forms.json").read_text(encoding="utf-8"))


def test_the_first_screen_is_the_claims_table():
    """BENCHMARKS.md opens with its answer: the generated claims table ends within the first 40 lines, one row
    per claim of bench/claims.json, every bundled paper among them."""
    from bench.claims import load_claims
    from bench.tables import CLAIMS_BEGIN, CLAIMS_END

    lines = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("# ") and CLAIMS_BEGIN in lines[:12] and CLAIMS_END in lines[:40]
    table = lines[lines.index(CLAIMS_BEGIN) + 1:lines.index(CLAIMS_END)]
    assert table[0].startswith("| paper | headline claim | paper | here | verdict | reproduce |")
    claims = load_claims()
    assert len(table) == 2 + len(claims)
    assert {c["paper"] for c in claims} >= {"densetrans-cai2021.md", "sdml-bonadiman2019.md", "tree-search-bert-guo.md",
                                           "frm-multiview-chong.md", "cnn-rerank-severyn2015.md"}
    headings = {line[3:] for line in lines if line.startswith("## ")}
    assert {c["section"] for c in claims} <= headings


def test_check_catches_a_stale_claims_table_and_a_stale_reproduce_account(tmp_path, monkeypatch):
    """A number edited in the claims table, or in docs/reproduce_run.md's generated part, fails --check."""
    from bench import tables

    (tmp_path / "docs").mkdir()
    monkeypatch.setattr(tables, "ROOT", tmp_path)
    monkeypatch.setattr(tables, "BENCHMARKS", tmp_path / "BENCHMARKS.md")
    monkeypatch.setattr(tables, "REPRODUCE_RUN", tmp_path / "docs" / "reproduce_run.md")
    benchmarks = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    reproduce = (ROOT / "docs" / "reproduce_run.md").read_text(encoding="utf-8")
    tables.BENCHMARKS.write_text(benchmarks, encoding="utf-8")
    tables.REPRODUCE_RUN.write_text(reproduce, encoding="utf-8")
    assert tables.main(["--check"]) == 0
    claims = _claims_section()
    tables.BENCHMARKS.write_text(benchmarks.replace(claims, claims.replace("R@100 0.9511", "R@100 0.9611")), encoding="utf-8")
    assert tables.main(["--check"]) == 1
    assert tables.main([]) == 0 and tables.main(["--check"]) == 0  # regenerated
    assert tables.BENCHMARKS.read_text(encoding="utf-8") == benchmarks
    tables.REPRODUCE_RUN.write_text(reproduce.replace("| 2,712 |", "| 2,713 |").replace("| 702 |", "| 703 |"), encoding="utf-8")
    assert tables.main(["--check"]) == 1


def test_a_claim_without_a_report_or_with_an_unknown_row_fails_or_reads_not_measured(tmp_path):
    from bench.claims import claims_table
    from bench.paper_rows import ManifestError

    claim = {"paper": "frm-multiview-chong.md", "claim": "c", "measure": "AUC", "verdict": "partly", "section": "FRM"}
    path = tmp_path / "claims.json"
    path.write_text(json.dumps({"claims": [{**claim, "here": {"report": "absent.json", "path": ["a"]}}]}), encoding="utf-8")
    assert "| not measured |" in claims_table(path)[-1]
    for bad in ({**claim}, {**claim, "row": {"where": "nowhere", "system": "FRM", "metric": "AUC"}},
                {**claim, "verdict": " "}, {**claim, "value": 0.9, "not_measured": "x"}):
        path.write_text(json.dumps({"claims": [bad]}), encoding="utf-8")
        with pytest.raises(ManifestError):
            claims_table(path)


def test_each_paper_rows_value_here_is_read_from_its_report():
    """The manifest is valid, every value here is the number its reference resolves to, and the generated
    section shows exactly that (or "not measured" when the report or key is missing)."""
    from bench.paper_rows import load_manifest, value_here

    rows = load_manifest()
    section = _generated_section()
    assert "### Paper rows" in section
    lines = [line for line in section.splitlines() if line.startswith("| ")]
    for row in rows:
        expected = value_here(row).replace("|", "\\|")
        matching = [line for line in lines
                    if f"| {row['system']} | {row['metric']} | {row['paper_value']} | {expected}" in line]
        assert matching, f"no generated row shows {row['system']} {row['metric']} here = {expected}"
    papers = {row["paper"] for row in rows}
    assert papers >= {"densetrans-cai2021.md", "sdml-bonadiman2019.md", "tree-search-bert-guo.md",
                      "frm-multiview-chong.md", "cnn-rerank-severyn2015.md"}


def test_trecqa_cnn_row_compares_the_paper_with_the_all_questions_convention():
    """The paper's .7329 / .7962 were scored by trec_eval over every question with candidates, unanswerable ones
    at 0: that number is the compared one; the answerable-only one is labelled a different convention."""
    from bench.paper_rows import load_manifest

    for values in ((".7329", ".7962"), (".7459", ".8078")):  # TRAIN and TRAIN-ALL
        rows = [r for r in load_manifest() if r["paper"] == "cnn-rerank-severyn2015.md" and r["paper_value"] in values]
        same = [r for r in rows if r["here"]["path"][3] == "all"]
        other = [r for r in rows if r["here"]["path"][3] == "answerable"]
        assert len(same) == 2 and len(other) == 2
        assert all(r["here"]["report"] == "experiment_trecqa-cnn.json" for r in rows)
        assert all("query set and unanswerable-question convention are the paper's" in r["like_for_like"] for r in same)
        assert all("different convention" in r["like_for_like"] and "different convention" in r["metric"] for r in other)


def _head_and_parent() -> tuple[str, str]:
    """HEAD and its parent (short ids); skips in a shallow clone, where HEAD has no parent."""
    import subprocess

    def rev(ref: str) -> str | None:
        out = subprocess.run(["git", "rev-parse", "--short", ref], cwd=ROOT, capture_output=True, text=True)
        return out.stdout.strip() if out.returncode == 0 else None

    head, parent = rev("HEAD"), rev("HEAD~1")
    if parent is None:
        pytest.skip("a shallow clone: HEAD has no parent commit here")
    return head, parent


def _row(**overrides) -> dict:
    row = {"paper": "cnn-rerank-severyn2015.md", "where": "Table 3", "system": "Our model", "here_system": "cnn-rerank",
           "dataset": "TrecQA", "metric": "MAP", "paper_value": ".7329", "paper_quote": "Our model\t.7329\t.7962",
           "here": {"report": "r.json", "path": ["eval", "map"]},
           "protocol": {k: "x" for k in ("scorer", "queries", "unanswerable", "ties", "training_data", "encoder", "build")},
           "like_for_like": "differs: everything"}
    row.update(overrides)
    return row


def _write(tmp_path, rows) -> object:
    path = tmp_path / "paper_rows.json"
    path.write_text(json.dumps({"rows": rows}), encoding="utf-8")
    return path


def test_a_row_whose_key_or_report_is_missing_renders_not_measured(tmp_path):
    from bench.paper_rows import paper_rows_table

    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "r.json").write_text(json.dumps({"eval": {"map": 0.71864}}), encoding="utf-8")
    manifest = _write(tmp_path, [
        _row(system="present"),
        _row(system="missing key", here={"report": "r.json", "path": ["eval", "mrr"]}),
        _row(system="missing report", here={"report": "absent.json", "path": ["eval", "map"]}),
        _row(system="no report at all", here=None, not_measured="never written"),
    ])
    lines = {line.split(" | ")[1]: line for line in paper_rows_table(manifest, reports) if line.startswith("| Table 3")}
    assert "| 0.7186 |" in lines["present"]
    for system in ("missing key", "missing report"):
        assert "| not measured |" in lines[system], lines[system]
        assert "0.7186" not in lines[system]
    assert "not measured (never written)" in lines["no report at all"]


def test_a_row_from_before_the_text_pipeline_or_a_gone_folder_reads_not_measured_on_this_build(tmp_path):
    from bench.paper_rows import NOT_ON_THIS_BUILD, paper_rows_table

    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "r.json").write_text(json.dumps({"eval": {"map": 0.71864}}), encoding="utf-8")
    protocol = {k: "x" for k in ("scorer", "queries", "unanswerable", "ties", "training_data", "encoder")}
    manifest = _write(tmp_path, [
        _row(system="old", protocol={**protocol, "build": "pre-pipeline build (whitespace tokens)"}),
        _row(system="gone", protocol={**protocol, "build": f"artifacts in {tmp_path / 'nothing'}".replace(str(tmp_path), "/tmp/qrs-gone")}),
        _row(system="current", protocol={**protocol, "build": "this build"}),
    ])
    lines = {line.split(" | ")[1]: line for line in paper_rows_table(manifest, reports) if line.startswith("| Table 3")}
    for system in ("old", "gone"):
        assert f"| {NOT_ON_THIS_BUILD} (" in lines[system] and "0.7186" not in lines[system], lines[system]
    assert "| 0.7186 |" in lines["current"]


def test_a_row_whose_report_predates_the_build_reads_not_measured_on_this_build(tmp_path, monkeypatch):
    """A report measured at a commit before the default build's describes models the build replaced."""
    from bench import reporting
    from bench.paper_rows import NOT_ON_THIS_BUILD, paper_rows_table

    head, parent = _head_and_parent()
    monkeypatch.setattr(reporting, "build_commit", lambda: head)
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "old.json").write_text(json.dumps({"commit": parent, "eval": {"map": 0.71864}}), encoding="utf-8")
    (reports / "new.json").write_text(json.dumps({"commit": head, "eval": {"map": 0.71864}}), encoding="utf-8")
    manifest = _write(tmp_path, [_row(system="older", here={"report": "old.json", "path": ["eval", "map"]}),
                                 _row(system="this build", here={"report": "new.json", "path": ["eval", "map"]})])
    lines = {line.split(" | ")[1]: line for line in paper_rows_table(manifest, reports) if line.startswith("| Table 3")}
    assert f"| {NOT_ON_THIS_BUILD} (its report old.json was measured at commit {parent}" in lines["older"]
    assert "| 0.7186 |" in lines["this build"]


def test_a_row_resting_on_a_choice_made_on_test_says_so(tmp_path):
    from bench.paper_rows import MANIFEST, ManifestError, load_manifest, paper_rows_table

    (tmp_path / "r.json").write_text(json.dumps({"eval": {"map": 0.71864}}), encoding="utf-8")
    manifest = _write(tmp_path, [_row(system="chosen", decided_on_test="pooling picked on test MAP"), _row(system="clean")])
    lines = {line.split(" | ")[1]: line for line in paper_rows_table(manifest, tmp_path) if line.startswith("| Table 3")}
    assert "**rests on a choice made on test**: pooling picked on test MAP" in lines["chosen"]
    assert "choice made on test" not in lines["clean"]
    with pytest.raises(ManifestError, match="decided_on_test"):
        paper_rows_table(_write(tmp_path, [_row(decided_on_test=" ")]), tmp_path)
    # the project's own rows: every measured DenseTrans and SDML row carries the choices its recipe rests on
    rows = load_manifest(MANIFEST)
    measured = [r for r in rows if r["here"] is not None and r["here_system"].startswith(("densetrans", "sdml-cnn"))]
    assert len(measured) >= 10 and all(r.get("decided_on_test") for r in measured)


def test_no_paper_row_claims_a_scorer_it_did_not_use():
    from bench.paper_rows import MANIFEST

    text = MANIFEST.read_text(encoding="utf-8")
    assert "before the trec_eval contract" not in text and "issue " not in text


def test_a_jsonl_report_is_read_through_selectors(tmp_path):
    from bench.paper_rows import ManifestError, paper_rows_table

    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "r.jsonl").write_text("\n".join(json.dumps(x) for x in (
        {"system": "tree", "split": "all", "map@20": 0.5}, {"system": "tree", "split": "test", "map@20": 0.61234},
        {"system": "tree", "split": "test", "map@20": 0.61234}, {"system": "x", "split": "dev", "map@20": 0.1},
        {"system": "x", "split": "dev", "map@20": 0.2})), encoding="utf-8")
    ok = _row(here={"report": "r.jsonl", "path": [{"system": "tree", "split": "test"}, "map@20"]})
    assert any("| 0.6123 |" in line for line in paper_rows_table(_write(tmp_path, [ok]), reports))
    ambiguous = _row(here={"report": "r.jsonl", "path": [{"system": "x"}, "map@20"]})
    with pytest.raises(ManifestError, match="disagree"):
        paper_rows_table(_write(tmp_path, [ambiguous]), reports)


@pytest.mark.parametrize("change, message", [
    ({"here": 0.7186}, "here must be"),
    ({"here": {"report": "r.json", "path": []}}, "non-empty list"),
    ({"here": {"report": "../r.json", "path": ["a"]}}, "file name under bench/reports"),
    ({"paper_value": 0.7329}, "non-empty string"),
    ({"paper_value": ".7330"}, "not in the quoted table row"),
    ({"like_for_like": False}, "like_for_like"),
    ({"like_for_like": "differs: "}, "like_for_like"),
    ({"protocol": {"scorer": "ranx"}}, "protocol must give"),
    ({"here": None}, "not_measured"),
    ({"value_here": 0.7186}, "unknown key"),
])
def test_a_malformed_manifest_fails_loudly(tmp_path, change, message):
    from bench.paper_rows import ManifestError, paper_rows_table

    with pytest.raises(ManifestError, match=message):
        paper_rows_table(_write(tmp_path, [_row(**change)]), tmp_path)


def test_a_path_ending_on_a_non_number_fails_loudly(tmp_path):
    from bench.paper_rows import ManifestError, paper_rows_table

    (tmp_path / "r.json").write_text(json.dumps({"eval": {"map": {"value": 0.7}}}), encoding="utf-8")
    with pytest.raises(ManifestError, match="not a number"):
        paper_rows_table(_write(tmp_path, [_row()]), tmp_path)


def test_paper_quotes_are_lines_of_the_papers():
    """Each quoted table row is verbatim in its paper (the papers live outside the repository: skipped there)."""
    from bench.paper_rows import check_quotes

    papers = next((p for p in (ROOT / "shared" / "papers", ROOT.parent / "shared" / "papers") if p.is_dir()), None)
    if papers is None:
        pytest.skip("the papers (shared/papers) are not available here")
    assert check_quotes(papers) == []


def test_a_query_forms_row_measured_before_the_build_reads_not_measured_on_this_build(monkeypatch):
    """A typed-vs-tokenized row of a commit older than the default build describes models the build replaced."""
    from bench import tables

    head, parent = _head_and_parent()
    from bench import reporting

    monkeypatch.setattr(reporting, "build_commit", lambda: head)
    monkeypatch.setattr(tables, "build_commit", lambda: head)
    assert tables.measured_before_build(parent) and tables.measured_before_build(None)
    assert not tables.measured_before_build(head) and not tables.measured_before_build(head + "+")
    row = {"system": "bm25", "kind": "first stage", "commit": parent}
    monkeypatch.setattr(tables, "read_report", lambda name: {"split": "test", "queries": 3,
                                                         "queries_whose_typed_form_differs": 3, "protocol": "p",
                                                         "rows": [row], "command": "c", "commit": head,
                                                         "machine": "m"})
    monkeypatch.setattr(tables, "reference_notes", lambda rows: [])
    text = "\n".join(tables.query_forms_table())
    assert f"| bm25 | first stage | not measured on this build (row of commit {parent}" in text


def test_reproduce_table_says_what_is_left(monkeypatch, tmp_path):
    """A clean clone's reproduction that spans sessions is shown as it stands: finished steps with their wall
    time, the steps left, and the steps rerun after an interruption."""
    from bench import tables
    from bench.reproduce_ledger import Record, write_progress
    from bench.reproduce_plan import Step

    plan = [Step("default-build", (("-m", "core", "build"),)), Step("tables", (("-m", "bench.tables"),))]
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_text(json.dumps(Record("default-build", ["python -m core build"], 2712.4, 0, "abc1234", "t", "run-2",
                                        [1.5], [2.0]).__dict__) + "\n", encoding="utf-8")
    (tmp_path / "started.jsonl").write_text("\n".join(json.dumps({"step": "default-build", "commit": "abc1234", "run": r})
                                                      for r in ("run-1", "run-2")) + "\n", encoding="utf-8")
    report = write_progress(plan, ledger, tmp_path / "reproduce.json", "abc1234")
    monkeypatch.setattr(tables, "read_report", lambda name: report if name == "reproduce.json" else None)
    text = "\n".join(tables.reproduce_table())
    assert "**not complete**: part(s) left: main, table3, sdml, frm" in text
    assert "not complete: 1 steps done, 1 left (tables); 45:12 (2,712 s)" in text
    assert "| default-build | abc1234 | 2,712 | 1.5 | yes |" in text and "NOT a clean clone" in text  # no built_before


def test_the_clean_clone_build_matches_the_default_build_but_for_timings():
    """BENCHMARKS.md says the clean clone's default build (make reproduce's first step) gave every system the
    same training and held-out figures as default_build.json: checked field by field, timings aside."""
    reports = ROOT / "bench" / "reports"
    clone = json.loads((reports / "reproduce_default_build.json").read_text(encoding="utf-8"))
    built = json.loads((reports / "default_build.json").read_text(encoding="utf-8"))
    timing = {"build_seconds", "seconds"}
    rows = {r["system"]: r for r in built["systems"]}
    assert len(clone["systems"]) == 14 and {r["system"] for r in clone["systems"]} == set(rows)
    for row in clone["systems"]:
        assert {k: v for k, v in row.items() if k not in timing} == \
            {k: v for k, v in rows[row["system"]].items() if k not in timing}, row["system"]
