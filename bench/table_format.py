"""Reading a committed report and writing its numbers as BENCHMARKS.md's generated tables do: one format for
every table (``bench.tables``, ``bench.seed_tables``), each ending on the line that names its source."""
from __future__ import annotations

import json

from bench.reporting import REPORTS

__all__ = ["mean_sd", "num", "paired_line", "read_report", "seed_test_line", "source_line"]


def read_report(name: str) -> dict | None:
    """``bench/reports/<name>`` as a dict; None when it is not there."""
    path = REPORTS / name
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def num(value, digits: int = 4) -> str:
    """A number at ``digits`` decimals; a dash for a missing one."""
    return "—" if not isinstance(value, (int, float)) else f"{value:.{digits}f}"


def source_line(report: dict, file: str) -> str:
    """The line under a table: which report, the command, commit and machine that made it."""
    machine = report.get("machine")
    if isinstance(machine, dict):  # bench.measure.machine(): say the platform and the cores
        machine = f"{machine.get('platform', 'machine')}, {machine.get('usable_cores', '?')} cores"
    return f"Source: `bench/reports/{file}` (`{report['command']}`, commit {report['commit']}, {machine})."


def mean_sd(value, digits: int = 4) -> str:
    """``mean ± sd`` of a ``dev_decisions.spread`` dict (or a plain number, from a report before seeds)."""
    if isinstance(value, dict):
        return f"{value['mean']:.{digits}f} ± {value['sd']:.{digits}f}" if len(value["values"]) > 1 else num(value["mean"], digits)
    return num(value, digits)


def paired_line(test: dict | None) -> list[str]:
    """One sentence for a ``dev_decisions.paired`` result."""
    if not test:
        return []
    wins, ties, losses = test["wins_ties_losses"]
    return [f"Paired test, {test['comparison']}: mean difference {test['mean_difference']:+.5f} over "
            f"{test['queries']:,} queries (wins / ties / losses {wins} / {ties} / {losses}); randomization p = "
            f"{test['randomization_p']:.2g}, t-test p = {test['t_test_p']:.2g}.", ""]


def seed_test_line(t: dict) -> str:
    """One seed-level paired test (``bench.seed_tests.paired_by_seed``): the claim at the level of training runs."""
    p = "p n/a" if t.get("t_test_p") is None else f"p = {t['t_test_p']:.3f}"
    return (f"- {t['comparison']}: {t['mean_difference']:+.4f} ± {t['sd_difference']:.4f} "
            f"[{t['ci95'][0]:.4f}, {t['ci95'][1]:.4f}] (n = {t['n']} seeds: {', '.join(map(str, t['seeds']))}; "
            f"paired t-test, {p}, no correction: one comparison)")
