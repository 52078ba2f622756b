"""Security: loopback-only server by default, untrusted text never rendered as markdown/HTML, no unsafe
deserialisation. (SQL injection into the judgment store: tests/test_judgments.py and test_robustness.py.)
"""
from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
import urllib.request

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT

UI_FILES = [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py")), *sorted((ROOT / "ui").glob("*.py"))]
CODE_FILES = UI_FILES + sorted((ROOT / "core").rglob("*.py")) + sorted((ROOT / "models").rglob("*.py"))


# ----------------------------------------------------------------------------- binding
def test_config_binds_loopback_and_keeps_protections():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    server = config.get("server", {})
    assert server.get("address") == "127.0.0.1"
    assert server.get("enableXsrfProtection", True) is True
    assert server.get("enableCORS", True) is True
    assert config.get("browser", {}).get("gatherUsageStats") is False
    text = (ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8")
    assert "0.0.0.0" in text and "reverse proxy" in text  # how to expose it deliberately is documented


def test_make_run_passes_loopback_address():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^run:.*?\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe, "no run target in the Makefile"
    launches = [line for line in recipe.group(1).splitlines() if "streamlit run" in line]
    assert launches, recipe.group(1)
    for line in launches:
        assert re.search(r"--server\.address[ =]127\.0\.0\.1\b", line), line
        assert "0.0.0.0" not in line


def _listening(port: int) -> list[str]:
    """Local addresses (hex, /proc/net/tcp*) in LISTEN state on ``port``."""
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = open(table, encoding="ascii").read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            address, hex_port = cols[1].split(":")
            if int(hex_port, 16) == port and cols[3] == "0A":  # 0A = LISTEN
                out.append(address)
    return out


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="needs Linux /proc/net/tcp")
def test_server_started_without_flags_listens_on_loopback_only(tmp_path):
    """`streamlit run serve.py` (what `make run` serves: app.py with the judging panel's commit endpoint, under
    uvicorn) with no --server.address binds 127.0.0.1 (from .streamlit/config.toml)."""
    from tests.e2e.conftest import free_port

    port = free_port()
    env = {**os.environ, "QRS_VAR": str(tmp_path / "var"), "QRS_AUTOBUILD": "0"}
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "serve.py", "--server.port", str(port),
                             "--server.fileWatcherType", "none"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not _listening(port):
            assert proc.poll() is None, "streamlit exited"
            time.sleep(0.2)
        addresses = _listening(port)
        assert addresses, "the server never listened"
        loopback = {"0100007F", "00000000000000000000000001000000"}  # 127.0.0.1, ::1
        assert set(addresses) <= loopback, addresses
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=30) as r:  # noqa: S310
            assert r.read().decode().strip() == "ok"
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()


# ----------------------------------------------------------------------------- static checks
def _calls(path):
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            owner = ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""
            yield node, owner, name, {k.arg: k.value for k in node.keywords}


def _constants(path) -> set[str]:
    """Module-level names bound once to a plain string literal (no formatting, nothing from outside)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    bound = [t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)]
    return {t.id for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
            and isinstance(n.value.value, str) for t in n.targets if isinstance(t, ast.Name) and bound.count(t.id) == 1}


@pytest.mark.parametrize("path", UI_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_raw_html_in_the_ui(path):
    constants = _constants(path)
    for node, owner, name, kwargs in _calls(path):
        where = f"{path.relative_to(ROOT)}:{node.lineno}"
        unsafe = kwargs.get("unsafe_allow_html")
        assert unsafe is None or (isinstance(unsafe, ast.Constant) and unsafe.value is False), where
        # st.html only with a module constant (the keyboard-focus script of ui/keys.py): never with data
        fixed = len(node.args) == 1 and isinstance(node.args[0], ast.Name) and node.args[0].id in constants
        assert not (owner == "st" and name == "html" and not fixed), f"{where}: st.html renders raw HTML"
        assert not (owner.endswith("components") and name == "html"), f"{where}: components.html"


@pytest.mark.parametrize("path", CODE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_unsafe_deserialisation(path):
    for node, owner, name, kwargs in _calls(path):
        where = f"{path.relative_to(ROOT)}:{node.lineno}"
        if owner == "torch" and name == "load":
            value = kwargs.get("weights_only")
            assert isinstance(value, ast.Constant) and value.value is True, f"{where}: torch.load without weights_only=True"
        if owner in ("pickle", "cPickle", "dill", "joblib") and name in ("load", "loads"):
            raise AssertionError(f"{where}: {owner}.{name} on artifacts")
        if name == "load" and owner in ("np", "numpy"):
            value = kwargs.get("allow_pickle")
            assert value is None or (isinstance(value, ast.Constant) and value.value is False), where
        if name in ("eval", "exec") and not owner:
            raise AssertionError(f"{where}: {name}()")


# ----------------------------------------------------------------------------- untrusted collection text
EVIL = [
    "<script>alert('x')</script> how do I cook rice ?",
    "**bold** [click](javascript:alert(1)) how do I cook pasta ?",
    "![pixel](http://127.0.0.1:9/track.png) $x^2$ how do I cook beans ?",
    "<img src=x onerror=alert(1)> how do I cook eggs ?",
]


@pytest.fixture
def evil_dataset(tmp_path, fresh_var):
    """An imported pairs dataset whose questions are markup/HTML, with its BM25 index."""
    from core.data.datasets import load_dataset
    from core.data.imports import import_dataset
    from core.retrieval import bm25

    path = tmp_path / "evil.tsv"
    path.write_text("".join(f"1\t{EVIL[i]}\t{EVIL[i + 1]}\n" for i in range(0, len(EVIL), 2))
                    + f"0\t{EVIL[0]}\t{EVIL[3]}\n", encoding="utf-8")
    name = import_dataset("pairs", path, "evil")
    ds = load_dataset(name)
    bm25.build(ds)
    return ds


def test_compare_shows_untrusted_collection_text_verbatim_and_escaped(evil_dataset):
    ds = evil_dataset
    at = AppTest.from_file(str(ROOT / "pages" / "1_Compare.py"), default_timeout=120)
    at.query_params["dataset"] = ds.name
    at.run()
    at.text_input(key="compare.query").input("how do I cook").run()
    assert not at.exception, at.exception
    shown = [q for df in at.dataframe if "question" in df.value.columns for q in df.value["question"]]
    assert sorted(shown) == sorted(ds.display(d) for d in ds.corpus)
    assert {s for s in shown} == set(EVIL)  # verbatim: no escaping artefacts in the values, nothing dropped
    rendered = " ".join(m.value for m in at.markdown) + " ".join(c.value for c in at.caption)
    for text in EVIL:
        assert text not in rendered
    assert "<script>" not in rendered and "javascript:" not in rendered and "onerror" not in rendered


def test_annotate_shows_untrusted_candidates_as_text(evil_dataset, monkeypatch, tmp_path):
    ds = evil_dataset
    monkeypatch.setenv("QRS_DB_URL", f"sqlite:///{tmp_path / 'j.sqlite'}")
    at = AppTest.from_file(str(ROOT / "pages" / "4_Annotate.py"), default_timeout=120)
    at.session_state["dataset"] = ds.name
    at.run()
    at.text_input(key="annotate.annotator").input("Eve").run()
    next(b for b in at.button if b.label == "Add dataset queries").click().run()
    assert not at.exception, at.exception
    from tests.panel_driver import panel_data

    shown = [i[f] for i in panel_data(at, "annotate.panel")["items"] for f in ("query", "text")]
    assert any(t in EVIL for t in shown), shown  # handed to the panel as data: it writes them with textContent
    rendered = " ".join(m.value for m in at.markdown) + " ".join(c.value for c in at.caption)
    assert not any(t in rendered for t in EVIL) and "<script>" not in rendered
