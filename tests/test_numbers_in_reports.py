"""Measured numbers live in bench/reports and BENCHMARKS.md only: no docstring or comment of core, ui, pages
or models carries a measured-looking figure (a decimal with three or more places, or a percentage with
decimals). Hyper-parameters (learning rates, margins, τ) have fewer places and are not flagged; a number a
paper prints is allowed on a line that cites it ("Eq.", "paper", "§", "Table"), and ``ALLOWED`` names the few
thresholds written in prose."""
from __future__ import annotations

import ast
import io
import re
import tokenize

from tests.conftest import ROOT

PACKAGES = ("core", "ui", "pages", "models")
MEASURED = re.compile(r"(?<![\w.\-])(?:\d*\.\d{3,}|\d+\.\d+ ?%)(?![\w.])")
CITES = re.compile(r"Eq\.|paper|§|Table")
ALLOWED = {"0.001"}  # the p-value display cut and the faster-backend tolerance: thresholds, not results


def _prose(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment line and every docstring line of a module."""
    out = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
           if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body and \
                isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            out += [(body[0].lineno + i, line) for i, line in enumerate(body[0].value.value.splitlines())]
    return out


def measured_figures(source: str) -> list[tuple[int, str]]:
    """(line, number) of each measured-looking figure in the module's comments and docstrings."""
    return sorted((line, m.group()) for line, text in _prose(source) if not CITES.search(text)
            for m in MEASURED.finditer(text) if m.group() not in ALLOWED)


def test_no_measured_number_in_docstrings_or_comments():
    found = [f"{path.relative_to(ROOT)}:{line}: {number}" for pkg in PACKAGES
             for path in sorted((ROOT / pkg).rglob("*.py")) if "alembic" not in path.parts
             for line, number in measured_figures(path.read_text(encoding="utf-8"))]
    assert found == [], ("measured figures belong in bench/reports and BENCHMARKS.md; say what and why, and point "
                         "to the report:\n" + "\n".join(found))


def test_the_scan_flags_a_figure_and_spares_hyper_parameters_and_cited_values():
    source = ('"""Best dev ROC AUC 0.8987 against 0.8956; 99.6 % agree.\n\nlr 2e-5, margin 0.3, τ 0.05, 1e-5."""\n'
              "x = 1  # the paper's Table 2 prints 0.9707\n"
              "y = 2  # kept 0.9513 on test\n")
    assert [n for _, n in measured_figures(source)] == ["0.8956", "0.8987", "99.6 %", "0.9513"]
