"""Plugins installed while the app runs: found without a restart (an editable install's .pth included); a broken
plugin asked for by name says why it did not load, never "unknown system"."""
from __future__ import annotations

import importlib
import site
import sys

import pytest

from tests.conftest import app_test, run_main
from tests.user_system_env import TOY_MODULE, install_distribution, plugins  # noqa: F401  (plugins: a fixture)


@pytest.fixture
def site_dir(tmp_path, monkeypatch):
    """An empty site directory the interpreter knows (on sys.path, listed by ``site``): nothing installed yet."""
    from core import registry

    root = tmp_path / "site-packages"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(root)])
    monkeypatch.setattr(site, "getusersitepackages", lambda: str(tmp_path / "no-user-site"))
    registry.refresh()
    yield root
    for name in ("toy_qrs_plugin",):
        sys.modules.pop(name, None)
    importlib.invalidate_caches()
    registry.refresh()


def test_a_plugin_installed_while_running_appears_without_a_restart(built, site_dir, tmp_path):
    from core.registry import list_systems
    from core.user_systems import problems, refresh_if_changed

    assert "toy-overlap" not in {s.name for s in list_systems()}  # discovery ran: nothing there
    # an editable install: the metadata in site-packages, the code elsewhere through a .pth file
    source = tmp_path / "src"
    install_distribution(source, "toy-qrs-plugin", "toy_qrs_plugin", TOY_MODULE, "toy")
    (source / "toy-qrs-plugin-0.1.dist-info").rename(site_dir / "toy-qrs-plugin-0.1.dist-info")
    (site_dir / "__editable__.toy_qrs_plugin-0.1.pth").write_text(str(source) + "\n", encoding="utf-8")
    assert refresh_if_changed(force=True)
    assert "toy-overlap" in {s.name for s in list_systems()} and problems() == []
    assert not refresh_if_changed(force=True)  # nothing new: no rediscovery
    code, out, err = run_main("search", "--system", "toy-overlap", "How do I learn Python fast ?")
    assert code == 0 and "rank" in out, err


def test_models_page_shows_a_plugin_installed_after_the_app_started(built, site_dir):
    at = app_test("pages/6_Models.py").run()
    assert not at.exception
    install_distribution(site_dir, "toy-qrs-plugin", "toy_qrs_plugin", TOY_MODULE, "toy")
    at.run()
    assert not at.exception and not [w.value for w in at.warning if "toy" in w.value]
    assert any("toy-overlap" in str(df.value) for df in at.dataframe)


def test_a_broken_plugin_asked_by_name_gives_its_load_error(built, plugins):  # noqa: F811
    code, out, err = run_main("search", "--system", "broken", "How do I learn Python fast ?")
    assert code == 2
    assert "unknown system" not in err
    assert "did not load" in err and "not_a_module_anywhere" in err and "restart the app" in err
