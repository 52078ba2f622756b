"""What the campaign tests share: the people (an owner and a team of three annotators), a toy campaign's items
and spec, and the pages' environment: a pairs dataset with campaign "team" in the pages' database
(``page_env``), and a page under AppTest with the login configured (``app_page``)."""
from __future__ import annotations

from pathlib import Path

import pytest

from core.judging.campaign_records import CampaignSpec, ItemSpec, QuerySet
from core.judging.campaigns import CampaignStore

__all__ = ["DOCS", "OIDC_SECRETS", "OWNER", "PAIRS_NAME", "QUERIES", "TEAM", "app_page", "campaign_items",
           "campaign_spec", "page_env"]

OWNER = "olivia@lab"
TEAM = ("ann", "bob", "cat")
QUERIES = ("q1", "q2", "q3")
DOCS = ("d1", "d2")
PAIRS_NAME = f"pairs:{Path(__file__).resolve().parent / 'fixtures' / 'judg_pairs.tsv'}"
OIDC_SECRETS = {"redirect_uri": "http://127.0.0.1:8501/oauth2callback", "cookie_secret": "x" * 32,
                "client_id": "studio", "client_secret": "s", "server_metadata_url":
                "http://127.0.0.1:9/.well-known/openid-configuration"}


def campaign_items(queries=QUERIES, docs=DOCS) -> list[ItemSpec]:
    """Every (query, document) of a toy campaign, BM25 ranking the documents in order."""
    return [ItemSpec(q, f"query {q} text", d, f"doc {d} text", {"bm25": i + 1}) for q in queries
            for i, d in enumerate(docs)]


def campaign_spec(name: str = "c1", annotators=TEAM, overlap: int = 2) -> CampaignSpec:
    """A toy campaign on :data:`QUERIES` owned by :data:`OWNER`."""
    return CampaignSpec(name, "toy", QuerySet("list", ids=QUERIES), ("bm25",), 2, overlap, (OWNER,), tuple(annotators),
                        guidelines="2 = same question")


@pytest.fixture
def page_env(tmp_path, monkeypatch):
    """A pairs dataset and a campaign (overlap 2 of ann, bob, cat) in the pages' database."""
    from core.data.datasets import load_dataset
    from core.judging.campaign_pool import items_from_pool

    monkeypatch.setenv("QRS_VAR", str(tmp_path / "var"))
    monkeypatch.setenv("QRS_DB_URL", f"sqlite:///{tmp_path / 'var' / 'j.sqlite'}")
    monkeypatch.setenv("QRS_OWNERS", OWNER)
    for name in ("QRS_TRUSTED_HEADER", "QRS_USER"):
        monkeypatch.delenv(name, raising=False)
    ds = load_dataset(PAIRS_NAME)
    qids = list(ds.queries)[:3]
    docs = [d for d in ds.corpus if d not in qids][:2]
    spec = CampaignSpec("team", ds.name, QuerySet("list", ids=tuple(qids)), ("given",), 2, 2, (OWNER,), TEAM)
    cs = CampaignStore()
    cs.create(OWNER, spec, items_from_pool(ds, {q: docs for q in qids}))
    yield cs
    cs.close()


def app_page(page: str, user: dict | None, **secrets):
    """``pages/<page>`` under AppTest on the pairs dataset, the login configured, signed in as ``user`` (None: a
    visitor not logged in); ``secrets`` added to the page's secrets."""
    from tests.conftest import app_test

    at = app_test(f"pages/{page}")
    at.session_state["dataset"] = PAIRS_NAME
    at.secrets["auth"] = OIDC_SECRETS
    for k, v in secrets.items():
        at.secrets[k] = v
    at.user = user if user is not None else {"is_logged_in": False}
    return at
