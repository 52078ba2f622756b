"""One settings module: every QRS_* variable is read by core/settings.py only, typed, and listed in the README.

- no module of core, ui, pages, bench or app.py reads a QRS_* variable itself (``os.environ.get``,
  ``os.environ[...]``, ``os.getenv``, ``in os.environ``; the name as a literal or a module constant);
- the README's table lists exactly the variables the module knows;
- a malformed value fails with one line naming the variable, where the value is used, and nowhere else;
- a changed variable is seen by the next call (tests and the CLI set them at run time).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

SCANNED = ("core", "ui", "pages", "bench")


def _files() -> list[Path]:
    files = [ROOT / "app.py"]
    for folder in SCANNED:
        files += sorted((ROOT / folder).rglob("*.py"))
    return [f for f in files if f != ROOT / "core" / "settings.py"]


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ")


def qrs_reads(path: Path) -> list[str]:
    """``path:line name`` for every read of a QRS_* variable in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    constants = {t.id: n.value.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
                 and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
                 for t in n.targets if isinstance(t, ast.Name)}

    def qrs_name(node: ast.AST) -> str | None:
        value = node.value if isinstance(node, ast.Constant) else constants.get(getattr(node, "id", None))
        return value if isinstance(value, str) and value.startswith("QRS_") else None

    found = []
    for node in ast.walk(tree):
        arg = None
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in ("get", "pop") and _is_environ(func.value):
                arg = node.args[0]
            elif isinstance(func, ast.Attribute) and func.attr == "getenv":
                arg = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environ(node.value):
            arg = node.slice
        elif isinstance(node, ast.Compare) and any(_is_environ(c) for c in node.comparators):
            arg = node.left
        name = qrs_name(arg) if arg is not None else None
        if name:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    return found


def readme_variables() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Environment variables", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `(QRS_[A-Z0-9_]+)` \|", section, flags=re.M)


def test_no_module_outside_settings_reads_a_qrs_variable():
    reads = [line for path in _files() for line in qrs_reads(path)]
    assert reads == [], "read core.settings.settings() instead:\n" + "\n".join(reads)


def test_the_reader_check_sees_every_form(tmp_path, monkeypatch):
    monkeypatch.setattr(__import__(__name__, fromlist=["ROOT"]), "ROOT", tmp_path)
    path = tmp_path / "m.py"
    path.write_text('import os\nNAME = "QRS_X"\na = os.environ.get("QRS_A")\nb = os.environ[NAME]\n'
                    'c = os.getenv("QRS_C", "")\nd = "QRS_D" in os.environ\nos.environ["QRS_E"] = "set, not read"\n')
    assert [r.split()[1] for r in qrs_reads(path)] == ["QRS_A", "QRS_X", "QRS_C", "QRS_D"]


def test_the_readme_table_lists_every_variable_once():
    from core.settings import NAMES, VARIABLES

    listed = readme_variables()
    assert len(listed) == len(set(listed)), "a variable is listed twice"
    assert set(listed) == set(NAMES), (sorted(set(NAMES) - set(listed)), sorted(set(listed) - set(NAMES)))
    assert len(VARIABLES) == len(NAMES) >= 16


def test_every_variable_mentioned_in_the_code_is_known():
    """A QRS_* name written anywhere in core/ui/pages/app.py (docstrings, help texts) is one the module knows."""
    from core.settings import NAMES

    files = [ROOT / "app.py", *[f for d in ("core", "ui", "pages") for f in (ROOT / d).rglob("*.py")]]
    mentioned = {m for f in files for m in re.findall(r"QRS_[A-Z0-9_]*[A-Z0-9]", f.read_text(encoding="utf-8"))}
    assert mentioned <= NAMES, sorted(mentioned - NAMES)


def test_typed_values_and_defaults():
    from core.settings import DEFAULT_MAX_TEXT_CHARS, Settings

    s = Settings({"QRS_MILVUS_TIMEOUT": " 2.5 ", "QRS_MAX_TEXT_CHARS": "100", "QRS_AUTOBUILD": "0",
                  "QRS_VAR": "/tmp/v", "QRS_OWNERS": "a@lab, b@lab"})
    assert s.milvus_timeout == 2.5 and s.max_text_chars == 100 and s.autobuild is False
    assert s.var == Path("/tmp/v") and s.data is None and s.owners == "a@lab, b@lab"
    empty = Settings({})
    assert empty.max_text_chars == DEFAULT_MAX_TEXT_CHARS and empty.autobuild is True and empty.backend is None
    with pytest.raises(KeyError):
        empty.raw("QRS_NOT_A_SETTING")


@pytest.mark.parametrize("name, value, expected", [
    ("QRS_MILVUS_TIMEOUT", "abc", "QRS_MILVUS_TIMEOUT: must be a positive number of seconds, got 'abc'"),
    ("QRS_MILVUS_TIMEOUT", "-1", "QRS_MILVUS_TIMEOUT: must be a positive number of seconds, got '-1'"),
    ("QRS_DB_LOCK_TIMEOUT", "soon", "QRS_DB_LOCK_TIMEOUT: must be a number of seconds between 0 and 3600, got 'soon'"),
    ("QRS_MAX_TEXT_CHARS", "1e3", "QRS_MAX_TEXT_CHARS: must be a whole number of characters, got '1e3'"),
    ("QRS_AUTOBUILD", "maybe", "QRS_AUTOBUILD: must be 1 or 0, got 'maybe'"),
])
def test_a_malformed_value_is_one_line_where_it_is_used(name, value, expected):
    from core.settings import SettingsError, Settings

    s = Settings({name: value})
    prop = {"QRS_MILVUS_TIMEOUT": "milvus_timeout", "QRS_DB_LOCK_TIMEOUT": "db_lock_timeout",
            "QRS_MAX_TEXT_CHARS": "max_text_chars", "QRS_AUTOBUILD": "autobuild"}[name]
    with pytest.raises(SettingsError) as err:
        getattr(s, prop)
    assert str(err.value) == expected and "\n" not in str(err.value)
    assert s.var is None and s.milvus_uri == ""  # every other setting still reads


def test_milvus_timeout_abc_through_the_milvus_config(monkeypatch):
    from core.errors import StudioError
    from core.retrieval.milvus_client import milvus_config

    monkeypatch.setenv("QRS_MILVUS_URI", "http://127.0.0.1:1")
    monkeypatch.setenv("QRS_MILVUS_TIMEOUT", "abc")
    with pytest.raises(StudioError, match=r"^QRS_MILVUS_TIMEOUT: must be a positive number of seconds, got 'abc'$"):
        milvus_config()
    monkeypatch.setenv("QRS_MILVUS_TIMEOUT", "7")
    assert milvus_config().timeout == 7.0  # the changed value is seen by the next call


def test_paths_follow_qrs_var_at_run_time(monkeypatch, tmp_path):
    from core.paths import var_dir

    monkeypatch.setenv("QRS_VAR", str(tmp_path / "a"))
    assert var_dir() == tmp_path / "a"
    monkeypatch.setenv("QRS_VAR", str(tmp_path / "b"))
    assert var_dir() == tmp_path / "b" and var_dir().is_dir()
