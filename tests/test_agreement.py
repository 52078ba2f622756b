"""Cohen's and Fleiss' kappa against textbook values, agreement over the judgment store, and Krippendorff's alpha
(hand-checked, against the krippendorff package, and over a campaign with missing ratings and "can't judge")."""
from __future__ import annotations

from datetime import datetime

import numpy as np
import pytest

from core.judging.agreement import agreement, cohen_kappa, fleiss_kappa
from core.judging.judgments import JudgmentStore
from core.judging.label_records import Judgment

# Fleiss' kappa, worked example of Wikipedia "Fleiss' kappa" (10 subjects, 14 raters, 5 categories):
# P̄ = 0.378, P̄e = 0.213, κ = 0.210.
FLEISS_EXAMPLE = [
    [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
]


def test_fleiss_textbook_example():
    assert fleiss_kappa(FLEISS_EXAMPLE) == pytest.approx(0.20993, abs=5e-5)


def test_fleiss_perfect_and_validation():
    assert fleiss_kappa([[3, 0], [0, 3], [3, 0]]) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        fleiss_kappa([[2, 1], [1, 1]])  # unequal raters per item


def test_cohen_textbook_example():
    # Wikipedia "Cohen's kappa": 50 proposals, both yes 20, A yes/B no 5, A no/B yes 10, both no 15:
    # p_o = 0.70, p_e = 0.50, κ = 0.40.
    a = [1] * 20 + [1] * 5 + [0] * 10 + [0] * 15
    b = [1] * 20 + [0] * 5 + [1] * 10 + [0] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)


def test_fleiss_two_raters_matches_scotts_pi_not_cohen():
    # Fleiss' kappa with two raters is Scott's pi (pooled marginals): p_yes = 55/100, p_e = 0.505
    a = [1] * 20 + [1] * 5 + [0] * 10 + [0] * 15
    b = [1] * 20 + [0] * 5 + [1] * 10 + [0] * 15
    counts = np.zeros((50, 2), dtype=int)
    for i, (x, y) in enumerate(zip(a, b)):
        counts[i, x] += 1
        counts[i, y] += 1
    p_yes = (25 + 30) / 100
    p_e = p_yes**2 + (1 - p_yes) ** 2
    assert fleiss_kappa(counts) == pytest.approx((0.7 - p_e) / (1 - p_e))


def _j(annotator: str, doc: str, label: int) -> Judgment:
    return Judgment(annotator, "toy", "a query", "q1", doc, label, None, {}, datetime(2024, 1, 1))


def test_agreement_two_annotators_is_cohen_with_disagreements():
    js = [_j("a", "d1", 2), _j("b", "d1", 2), _j("a", "d2", 0), _j("b", "d2", 1), _j("a", "d3", 1), _j("b", "d3", 1),
          _j("a", "d4", 0)]  # d4 has only one rater: not shared
    res = agreement(js)
    assert res.method == "cohen" and res.items == 3
    assert res.kappa == pytest.approx(cohen_kappa([2, 0, 1], [2, 1, 1], [0, 1, 2]))
    assert res.observed == pytest.approx(2 / 3)
    assert [(d["doc_id"], d["a"], d["b"]) for d in res.disagreements] == [("d2", 0, 1)]


def test_agreement_three_annotators_is_fleiss_from_the_store(tmp_path):
    store = JudgmentStore(f"sqlite:///{tmp_path / 'k.sqlite'}")
    labels = {"d1": (2, 2, 2), "d2": (0, 1, 0), "d3": (1, 1, 2), "d4": (0, 0, 0)}
    for doc, per in labels.items():
        for name, label in zip(("ann", "bea", "cy"), per):
            store.set_label(name, "toy", "a query", doc, doc, label)
    res = agreement(store.judgments("toy"))
    counts = [[per.count(c) for c in range(3)] for per in labels.values()]
    assert res.method == "fleiss" and res.items == 4
    assert res.kappa == pytest.approx(fleiss_kappa(counts))
    assert sorted(d["doc_id"] for d in res.disagreements) == ["d2", "d3"]
    two = agreement(store.judgments("toy"), ["ann", "cy"])
    assert two.method == "cohen"
    assert two.kappa == pytest.approx(cohen_kappa([2, 0, 1, 0], [2, 0, 2, 0], [0, 1, 2]))


def test_agreement_needs_two_annotators():
    res = agreement([_j("a", "d1", 1)])
    assert res.kappa is None and res.disagreements == []


def test_krippendorff_alpha_hand_checked_and_against_the_package():
    import krippendorff
    import numpy as np

    from core.judging.agreement import krippendorff_alpha

    # 2 coders, 4 units: coincidences o00=2, o01=o10=1, o11=4; n0=3, n1=5, n=8 -> α = 1 - 7*2/(2*3*5) = 8/15
    assert krippendorff_alpha([[0, 0, 1, 1], [0, 1, 1, 1]]) == pytest.approx(8 / 15)
    # A: 0 1 2, B: 0 2 2 on the scale 0..2. Nominal: Do = 2/6, De = 22/30 -> α = 6/11.
    # Ordinal δ²(1,2) = 4, δ²(0,1) = 2.25, δ²(0,2) = 12.25: Do = 8/6, De = 6 -> α = 7/9.
    assert krippendorff_alpha([[0, 1, 2], [0, 2, 2]], "nominal", [0, 1, 2]) == pytest.approx(6 / 11)
    assert krippendorff_alpha([[0, 1, 2], [0, 2, 2]], "ordinal", [0, 1, 2]) == pytest.approx(7 / 9)
    # Krippendorff (2011) "Computing Krippendorff's alpha-reliability", 4 coders x 12 units with missing values
    nan = np.nan
    data = [[1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan], [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
            [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan], [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan]]
    assert krippendorff_alpha(data, "nominal") == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha(data, "ordinal") == pytest.approx(
        krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal"))
    assert krippendorff_alpha([[1, 1], [1, 1]]) is None  # one value only: undefined
    assert krippendorff_alpha([[1, nan], [nan, 2]]) is None  # nothing pairable


def test_campaign_agreement_with_missing_ratings_and_cant_judge():
    from datetime import datetime, timezone

    from core.judging.agreement import campaign_agreement, krippendorff_alpha
    from core.judging.agreement import CampaignLabel

    now = datetime.now(timezone.utc)
    rows = [  # (item, query, annotator, label); overlap 2 of 3 annotators; item 4 has a can't judge
        (1, "q1", "ann", 2), (1, "q1", "bob", 2), (2, "q1", "ann", 0), (2, "q1", "bob", 1),
        (3, "q2", "bob", 1), (3, "q2", "cat", 1), (4, "q2", "bob", 0), (4, "q2", "cat", None),
        (5, "q3", "cat", 2), (5, "q3", "ann", 0),
    ]
    labels = [CampaignLabel(i, q, f"d{i}", a, lab, None if lab is not None else "foreign language", None, now)
              for i, q, a, lab in rows]
    res = campaign_agreement(labels, max_label=2)
    assert res.annotators == ["ann", "bob", "cat"] and res.items == 4 and res.ratings == 8  # item 4: one rating
    nan = float("nan")
    matrix = [[2, 0, nan, 0], [2, 1, 1, nan], [nan, nan, 1, 2]]
    assert res.alpha_nominal == pytest.approx(krippendorff_alpha(matrix, "nominal", [0, 1, 2]))
    assert res.alpha_ordinal == pytest.approx(krippendorff_alpha(matrix, "ordinal", [0, 1, 2]))
    # Fleiss over the 4 two-rating items: counts per category [0,0,2], [1,1,0], [0,2,0], [1,0,1]
    from core.judging.agreement import fleiss_kappa
    assert res.fleiss == pytest.approx(fleiss_kappa([[0, 0, 2], [1, 1, 0], [0, 2, 0], [1, 0, 1]]))
    assert (res.fleiss_items, res.fleiss_raters) == (4, 2)
    pairs = {c["pair"]: (c["items"], c["kappa"]) for c in res.cohen}
    assert pairs["ann / bob"][0] == 2 and pairs["ann / cat"][0] == 1 and pairs["bob / cat"][0] == 1
    assert res.per_query["q2"].items == 1 and res.per_query["q2"].alpha_nominal is None  # one item, one value
    assert res.per_query["q1"].alpha_nominal == pytest.approx(krippendorff_alpha([[2, 0], [2, 1]], "nominal", [0, 1, 2]))
