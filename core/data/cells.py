"""Spreadsheet cells: the one escaping rule of every CSV/TSV export (OWASP's CSV injection advice).

A text cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is run as a formula by
spreadsheet programs; it is written with a leading ``'`` so it is shown as text. Numbers stay numbers. The
csv module quotes a cell holding the delimiter, a quote or a line break and doubles its quotes.
"""
from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: Any) -> Any:
    """``value`` as a spreadsheet shows it as text: a string starting with ``FORMULA_STARTS`` gets a leading ``'``."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_text(rows: Sequence[Mapping[str, Any]], fields: Sequence[str] | None = None, delimiter: str = ",") -> str:
    """Rows of flat dicts as CSV (``delimiter="\\t"``: TSV), every cell through ``safe_cell``; the columns are
    ``fields`` or those of the rows in first-seen order."""
    cols: list[str] = list(fields or [])
    if fields is None:
        for row in rows:
            cols.extend(c for c in row if c not in cols)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=cols, delimiter=delimiter, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: safe_cell(v) for k, v in row.items()})
    return buf.getvalue()
