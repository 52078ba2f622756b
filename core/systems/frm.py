"""The registration of frm (FRM); its code: ``core.rerank.frm``."""
from __future__ import annotations

from core.system_spec import Recipe, SystemSpec
from core.systems import INTERPOLATION_NOTE

REGISTRATION = SystemSpec(
    "frm", "reranker", "FRM", "core.rerank.frm",
    "frm-multiview-chong.md §3 (keyword importance, multi-level keyword sets, multi-view matching)",
    variants=("-m_mlp", "-m_att", "-m_lm", "FRM-1", "FRM-TFIDF", "one-level", "two-level", "three-level",
              "kw-loss"), minilm_derived=True,
    deviation="the paper's loss (Eq. 18 only) at CPU size: all-MiniLM-L6-v2 frozen (paper: BERT "
              "fine-tuned), new layers at lr 1e-3 (paper: 2e-5), 3-epoch cap with dev ROC AUC early "
              "stopping on 1,000 dev pairs; on QQP 15,871 training pairs of the cluster-disjoint split "
              "(the paper's whole recipe: `--profile paper`); "
              + INTERPOLATION_NOTE.format(partner="the zero-shot MiniLM pair scorer (its reference)"),
    recipe_label="paper loss, Eq. 18",
    recipes=(Recipe("kw-loss", "+ keyword-agreement loss",
                    "the project's earlier recipe: Eq. (18) plus a keyword-agreement loss that is not in "
                    "the paper (weight 1); over five training seeds its mean dev pair AUC is above Eq. "
                    "(18) alone's by a margin the seed-level test does not separate from zero "
                    "(bench/reports/dev_decisions.json); FRM's explanation of choice (its w(k, q) passes the "
                    "held-out faithfulness and plausibility checks, the paper loss's does not: "
                    "bench/reports/keyword_faithfulness.json; the Keywords page's default across every "
                    "system: bench/reports/explain_faithfulness.json); otherwise as the default: all-MiniLM-L6-v2 "
                    "frozen (paper: BERT fine-tuned), new layers at lr 1e-3, 3-epoch cap; "
                    + INTERPOLATION_NOTE.format(partner="the zero-shot MiniLM pair scorer (its reference)"),
                    default_build="FRM's explanation of choice (decision rule of "
                                  "bench/keyword_faithfulness.py, on dev pairs)"),),
    family="reranker", reference="minilm-pairs", explains_keywords=True,
    order=100,
)
