"""FRM: fine-grained matching network with multi-level keyword sets and multi-view matching.

**Paper** Li Chong, Denghao Ma, Yueguo Chen. "Multi-view Semantic Matching of Question retrieval using
Fine-grained Semantic Representations" (frm-multiview-chong.md), 2023.

**Implements** §3.1 Eq. (2); §3.2 ImNN Eq. (3)-(7) and multi-level keyword sets; §3.3.1 comparable
pairs (rules 1-4, vectorised); §3.3.2 Eq. (8)-(17); §3.3.3 loss Eq. (18).

.. math::
    f(q, d) = \\sigma(MLP(E(S(q, d))))\\qquad
    E(S) = \\frac{\\sum_i w(S_i)\\, mv(S_i)}{\\sum_i w(S_i)}\\qquad
    mv = m_{mlp} \\oplus m_{att} \\oplus m_{lm}

Symbols → arguments: ``E_{CLS}`` = ``cls`` (B, H); ``E_{k_i}`` = ``kw`` (B, L, H) (mean of the keyword's
WordPiece vectors); ``EIDF`` = ``idf_bucket``; ``EPOS`` = ``pos``; ``ESW`` = ``stop``; BM25 document
weights = ``bm25w``; keyword equality ``a(k_i, k_j)`` = ``eq`` (B, Lq, Ld).

**Shape** keyword features (B, L[, H]); output logits (B,).

**Deviations** backbone all-MiniLM-L6-v2 (H = 384) instead of BERT-base; in the ``quick`` profile it is
frozen and its vectors cached (``KeywordEncoder`` is fine-tuned only in the ``paper`` profile); hidden
sizes are not given in the paper (``FRMConfig``); m_att embeds the keyword vectors with a linear map plus
position and segment embeddings (N(0, 0.02) and LayerNorm, as BERT) and reads the [CLS] output; BM25
enters as log(1 + BM25).

``wlm_norm="mean"``: in Eq. (17) each importance is divided by its question's mean importance. Eq. (8),
(9) and (12) are ratios of importances (scaling every w(k, q) by c changes nothing); Eq. (17) is the only
place where the absolute level counts, and the matching loss used it as a gain: with the literal Eq. (17)
nearly all test questions' keyword importances saturated at 1 within a few hundred steps (float32 ties, so
the keyword sets fell back to position order). With the ratio no importance saturates, the spread within a
question grows and content words rank above stop words, at the same test AUC. Centring the Eq. (7) logits per
question with the literal Eq. (17) (``importance_center``) also removed the saturation but learned the
opposite order (against IDF), so it is not used. Measurements: bench/reports/rerankers.md.

``keyword_agreement_loss`` (weight ``FRMTrainConfig.keyword_loss``: 0 by default since the dev decision, 1 in the ``kw-loss`` recipe, 0 in
``paper``): the matching loss alone left the sign of the learned importance to chance (stop words could end above
content words, against IDF); the term turned that order the right way at a similar test AUC (the figures:
bench/reports/rerankers.md).

>>> model = FRM(FRMConfig())
>>> logits = model(batch)            # dict of tensors from core.rerank.frm
>>> loss = frm_loss(logits, labels)  # Eq. (18)
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class FRMConfig:
    """FRM hyper-parameters; paper defaults where the paper gives them (K = 100 × 64-d, dropout 0.3)."""

    hidden: int = 384  # backbone width (MiniLM)
    idf_buckets: int = 100  # §3.2: K = 100
    idf_dim: int = 64  # §3.2: 64-d bucket embeddings
    pos_tags: int = 64
    pos_dim: int = 16
    mlp_dim: int = 128  # widths of the 3-layer MLPs (not given in the paper)
    match_dim: int = 64  # m_mlp output
    att_dim: int = 64  # m_att width
    att_heads: int = 4
    max_keywords: int = 32
    dropout: float = 0.3  # §4.1.4
    use_mlp: bool = True  # ablation FRM - m_mlp
    use_att: bool = True  # ablation FRM - m_att
    use_lm: bool = True  # ablation FRM - m_lm
    importance: str = "learned"  # "learned" | "one" (FRM-1) | "tfidf" (FRM-TFIDF)
    max_levels: int = 0  # 0 = all levels; 1/2/3 = FRM-one/two/three level
    wlm_norm: str = "mean"  # "mean" = Eq. (17) importances divided by their question mean; "none" = the paper literally
    importance_center: bool = False  # centre Eq. (7) logits per question before the sigmoid (measured, not used)
    att_embed: str = "bert"  # m_att input: "bert" = N(0, 0.02) position/segment + LayerNorm; "n01" = old N(0, 1)

    @property
    def view_dims(self) -> dict[str, int]:
        dims = {"m_mlp": self.match_dim, "m_att": self.att_dim, "m_lm": 3}
        use = {"m_mlp": self.use_mlp, "m_att": self.use_att, "m_lm": self.use_lm}
        return {k: v for k, v in dims.items() if use[k]}


def mlp3(d_in: int, d_hidden: int, d_out: int, dropout: float, input_dropout: bool = True) -> nn.Sequential:
    """Three fully-connected layers with ReLU, dropout before each layer (§4.1.4).

    ``input_dropout=False`` when the input is made of vectors that were already dropped out once
    (``FRM.views`` drops the MiniLM vectors a single time instead of in every sub-net: same regulariser,
    a third of the CPU cost)."""
    return nn.Sequential(
        nn.Dropout(dropout if input_dropout else 0.0), nn.Linear(d_in, d_hidden), nn.ReLU(),
        nn.Dropout(dropout), nn.Linear(d_hidden, d_hidden), nn.ReLU(),
        nn.Dropout(dropout), nn.Linear(d_hidden, d_out),
    )


class CoA(nn.Module):
    """Co-action features, Eq. (5): ReLU(w_o [a ⊕ b ⊕ |a − b|] + b_o)."""

    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.lin = nn.Linear(3 * d_in, d_out)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return F.relu(self.lin(torch.cat([a, b, (a - b).abs()], -1)))  # Eq. (5)


class ImportanceNet(nn.Module):
    """ImNN, Eq. (3)-(7): EmbNN (E_CLS, E_k, CoA) ⊕ EFNN (IDF bucket, POS, stop word) → JINN → sigmoid."""

    def __init__(self, cfg: FRMConfig) -> None:
        super().__init__()
        h = cfg.mlp_dim
        self.coa = CoA(cfg.hidden, h)
        self.emb_mlp = mlp3(2 * cfg.hidden + h, h, h, cfg.dropout, input_dropout=False)
        self.idf_emb = nn.Embedding(cfg.idf_buckets, cfg.idf_dim)
        self.pos_emb = nn.Embedding(cfg.pos_tags, cfg.pos_dim, padding_idx=0)
        self.ef_mlp = mlp3(cfg.idf_dim + cfg.pos_dim + 1, h, h, cfg.dropout)
        self.joint = mlp3(2 * h, h, 1, cfg.dropout)

    def logits(self, cls: torch.Tensor, kw: torch.Tensor, idf_bucket: torch.Tensor, pos: torch.Tensor,
               stop: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """JINN output before the sigmoid (B, L); with ``mask`` only real keywords are computed (0 elsewhere)."""
        if mask is not None:  # per-keyword network: skip the padding rows
            rows = mask.nonzero(as_tuple=True)
            out = torch.zeros(mask.shape, dtype=kw.dtype, device=kw.device)
            out[rows] = self.logits(cls[rows[0]], kw[rows][:, None], idf_bucket[rows][:, None],
                                    pos[rows][:, None], stop[rows][:, None])[:, 0]
            return out
        e_cls = cls[:, None, :].expand_as(kw)
        embf = F.relu(self.emb_mlp(torch.cat([e_cls, kw, self.coa(e_cls, kw)], -1)))  # Eq. (4)
        ef_in = torch.cat([self.idf_emb(idf_bucket), self.pos_emb(pos), stop[..., None]], -1)
        ef = F.relu(self.ef_mlp(ef_in))  # Eq. (6)
        return self.joint(torch.cat([embf, ef], -1)).squeeze(-1)  # Eq. (7) before its sigmoid

    def forward(self, cls: torch.Tensor, kw: torch.Tensor, idf_bucket: torch.Tensor, pos: torch.Tensor,
                stop: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Importance w(k_i, q) ∈ (0, 1) for every keyword, shape (B, L): Eq. (7), Eq. (3)."""
        return torch.sigmoid(self.logits(cls, kw, idf_bucket, pos, stop, mask))


def level_masks(importance: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Multi-level keyword sets (§3.2) as masks (B, levels = L, L): level m keeps the n − m most important.

    Ties are broken by position (the later keyword is removed first), as ``core.data.keywords.keyword_sets``.
    """
    b, length = importance.shape
    pos = torch.arange(length, device=importance.device)
    key = torch.where(mask, -importance.detach(), torch.full_like(importance, float("inf")))
    # stable sort on (−importance, position): sort by position is the input order, so stable argsort works
    order = torch.sort(key, dim=1, stable=True).indices
    rank = torch.empty_like(order)
    rank.scatter_(1, order, pos.expand(b, length))
    n = mask.sum(1)
    sizes = n[:, None] - pos[None, :]  # (B, levels)
    return (rank[:, None, :] < sizes[:, :, None]) & mask[:, None, :]


def assign_levels(n_q: torch.Tensor, n_d: torch.Tensor, levels_q: int, levels_d: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Comparable pairs (§3.3.1 rules 1-4), vectorised: for each q level m the paired d level and validity.

    Rules 1+2 together pick the deepest d level whose ratio is ≥ q's ratio (equal if one exists, else the
    closest larger); rule 3 pairs single-keyword levels; rule 4 drops the rest. ``core.data.keywords.assign_pairs``
    is the readable reference (the tests check both agree).
    """
    m = torch.arange(levels_q, device=n_q.device)
    n = torch.arange(levels_d, device=n_q.device)
    size_q = n_q[:, None] - m[None, :]  # (B, M): q level m keeps n_q - m keywords
    size_d = n_d[:, None] - n[None, :]  # (B, N): d level n keeps n_d - n keywords
    ok = (size_d[:, None, :] * n_q[:, None, None] >= size_q[:, :, None] * n_d[:, None, None]) & (size_d[:, None, :] > 0)
    assigned = ok.sum(-1) - 1
    assigned = torch.where(size_q == 1, (n_d - 1)[:, None].expand_as(assigned), assigned)
    valid = (size_q >= 1) & (n_d[:, None] >= 1) & (assigned >= 0)
    return assigned.clamp(min=0), valid


class AttentionMatch(nn.Module):
    """m_att, Eq. (13)-(15): multi-head attention over "[CLS] q̂ [SEP] d̂", FFN, LayerNorm; [CLS] output.

    The input L is proj(E_k) + position + segment embeddings. ``att_embed="bert"`` (default) initialises the
    position/segment embeddings from N(0, 0.02) and layer-normalises the sum, as BERT does; ``"n01"`` is the
    earlier N(0, 1) initialisation, whose position noise (norm ≈ 8) swamped the projected keyword vectors
    (norm ≈ 1-2) so that m_att started as a function of positions only (measured in bench/reports/rerankers.md).
    Only the [CLS] row of Eq. (15) is used, so only the [CLS] query is computed (same output, a T-th of
    the attention and FFN cost); attention is ``F.scaled_dot_product_attention`` with a key mask.
    """

    def __init__(self, cfg: FRMConfig) -> None:
        super().__init__()
        d = cfg.att_dim
        self.heads = cfg.att_heads
        self.proj = nn.Linear(cfg.hidden, d)
        self.special = nn.Parameter(torch.randn(2, d) * 0.02)  # [CLS], [SEP]
        self.position = nn.Embedding(cfg.max_keywords + 2, d)
        self.segment = nn.Embedding(2, d)
        self.embed_norm: nn.Module = nn.Identity()
        if cfg.att_embed == "bert":
            nn.init.normal_(self.position.weight, std=0.02)
            nn.init.normal_(self.segment.weight, std=0.02)
            self.embed_norm = nn.LayerNorm(d)
        self.q_proj, self.kv_proj = nn.Linear(d, d), nn.Linear(d, 2 * d)  # W_Q, [W_K, W_V] of all heads
        self.out_proj = nn.Linear(d, d)  # W_o, Eq. (14)
        self.ffn = nn.Sequential(nn.Linear(d, 2 * d), nn.ReLU(), nn.Dropout(cfg.dropout), nn.Linear(2 * d, d))
        self.norm = nn.LayerNorm(d)

    def embed(self, kw: torch.Tensor, segment: int) -> torch.Tensor:
        """proj(E_k) + position (1..L) + segment embedding of one side's keywords (B, L, d)."""
        pos = torch.arange(kw.shape[1], device=kw.device) + 1
        return self.proj(kw) + self.position(pos) + self.segment.weight[segment]

    def forward(self, kw_q: torch.Tensor, kw_d: torch.Tensor, set_q: torch.Tensor, set_d: torch.Tensor,
                pair_batch: torch.Tensor, rows_q: torch.Tensor | None = None,
                rows_d: torch.Tensor | None = None) -> torch.Tensor:
        """``set_q`` (P, Lq), ``set_d`` (P, Ld) keyword-set masks of P pairs of batch rows ``pair_batch``;
        ``kw_q``/``kw_d`` hold unique texts when ``rows_q``/``rows_d`` map batch rows to them."""
        p = len(pair_batch)
        iq = pair_batch if rows_q is None else rows_q[pair_batch]
        idd = pair_batch if rows_d is None else rows_d[pair_batch]
        # every step before the attention scores is position-wise, so the keys/values of each text's keywords
        # are computed once per text and gathered per comparable pair (same result as on the whole sequence)
        kv_q = self.kv_proj(self.embed_norm(self.embed(kw_q, 0)))
        kv_d = self.kv_proj(self.embed_norm(self.embed(kw_d, 1)))
        cls = self.embed_norm(self.special[0] + self.position.weight[0] + self.segment.weight[0])
        sep = self.embed_norm(self.special[1] + self.position.weight[0] + self.segment.weight[1])
        kv_cls, kv_sep = self.kv_proj(cls), self.kv_proj(sep)
        kv = torch.cat([kv_cls.expand(p, 1, -1), kv_q[iq], kv_sep.expand(p, 1, -1), kv_d[idd]], 1)  # "[CLS] q̂ [SEP] d̂"
        ones = torch.ones(p, 1, dtype=torch.bool, device=kv.device)
        keep = torch.cat([ones, set_q, ones, set_d], 1)
        h, dh = self.heads, cls.shape[-1] // self.heads
        k, v = kv.view(p, -1, 2, h, dh).permute(2, 0, 3, 1, 4)  # (P, heads, T, dh)
        q = self.q_proj(cls).view(1, h, 1, dh).expand(p, -1, -1, -1)  # the [CLS] query only
        att = F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :])  # Eq. (13)
        head = self.out_proj(att.transpose(1, 2).reshape(p, -1))  # Eq. (14)
        return self.norm(head + self.ffn(head))  # Eq. (15), [CLS] row


class FRM(nn.Module):
    """Fine-grained matching network: ImNN importance → keyword sets → comparable pairs → multi-view
    matching (Eq. 10) → weighted aggregation (Eq. 8) → MLP + sigmoid (Eq. 2)."""

    def __init__(self, cfg: FRMConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.importance_net = ImportanceNet(cfg) if cfg.importance == "learned" else None
        self.input_drop = nn.Dropout(cfg.dropout)  # dropout on the MiniLM vectors, once per forward
        if cfg.use_mlp:
            self.ks_coa = CoA(cfg.hidden, cfg.mlp_dim)
            self.mlp_match = nn.Linear(2 * cfg.hidden + cfg.mlp_dim, cfg.match_dim)
        if cfg.use_att:
            self.att_match = AttentionMatch(cfg)
        d_in = sum(cfg.view_dims.values())
        self.final = nn.Sequential(  # Eq. (2): m × n × 1 MLP, ReLU, ReLU, sigmoid (in the loss / score)
            nn.Dropout(cfg.dropout), nn.Linear(d_in, cfg.mlp_dim), nn.ReLU(),
            nn.Dropout(cfg.dropout), nn.Linear(cfg.mlp_dim, cfg.match_dim), nn.ReLU(),
            nn.Linear(cfg.match_dim, 1),
        )

    # ------------------------------------------------------------------ importance
    def importance(self, side: dict[str, torch.Tensor]) -> torch.Tensor:
        """w(k, q) for every keyword (B, L): ImNN (Eq. 7), all ones (FRM-1) or scaled tf·idf (FRM-TFIDF)."""
        mask = side["mask"]
        if self.cfg.importance == "one":
            w = torch.ones_like(side["stop"])
        elif self.cfg.importance == "tfidf":
            w = side["tfidf"]
        else:
            z = self.importance_net.logits(side["cls"], side["kw"], side["idf_bucket"], side["pos"], side["stop"], mask)
            if self.cfg.importance_center:  # deviation: relative importance within the question
                n = mask.sum(1, keepdim=True).clamp(min=1)
                z = z - (z * mask).sum(1, keepdim=True) / n
            w = torch.sigmoid(z)  # Eq. (7)
        return w * mask

    # ------------------------------------------------------------------ views
    def views(self, batch: dict[str, dict[str, torch.Tensor] | torch.Tensor]) -> dict[str, torch.Tensor]:
        """Everything the forward pass computes: importances, levels, pairs, weights, per-pair views, E."""
        q, d = dict(batch["q"]), dict(batch["d"])
        for side in (q, d):
            side["cls"], side["kw"] = self.input_drop(side["cls"]), self.input_drop(side["kw"])
        wq, wd = self.importance(q), self.importance(d)
        # a side may hold each text once plus "rows" (batch row -> text): importance is computed per text
        if "rows" in q:
            rows = q.pop("rows")
            q, wq = {k: v[rows] for k, v in q.items()}, wq[rows]
        if "rows" in d:
            rows = d.pop("rows")
            d, wd = {k: v[rows] for k, v in d.items()}, wd[rows]
        mq_all, md_all = level_masks(wq, q["mask"]), level_masks(wd, d["mask"])
        n_q, n_d = q["mask"].sum(1), d["mask"].sum(1)
        levels = mq_all.shape[1]
        assigned, valid = assign_levels(n_q, n_d, levels, md_all.shape[1])
        if self.cfg.max_levels:
            valid = valid & (torch.arange(levels, device=valid.device) < self.cfg.max_levels)[None]
        md = torch.gather(md_all, 1, assigned[:, :, None].expand(-1, -1, md_all.shape[2]))  # (B, M, Ld)
        mqf, mdf = mq_all.float(), md.float()
        nqf, ndf = n_q.clamp(min=1).float()[:, None], n_d.clamp(min=1).float()[:, None]
        sum_q = (mqf * wq[:, None, :]).sum(-1)
        sum_d = (mdf * wd[:, None, :]).sum(-1)
        pair_w = (sum_q / nqf) * (sum_d / ndf) * valid  # Eq. (9)
        out: dict[str, torch.Tensor] = {"w_q": wq, "w_d": wd, "set_q": mq_all, "set_d": md, "assigned": assigned,
                                        "valid": valid, "pair_w": pair_w, "mask_q": q["mask"], "mask_d": d["mask"]}
        b, m = valid.shape
        views = []
        if self.cfg.use_mlp:
            ks_q = torch.einsum("bml,bl,blh->bmh", mqf, wq, q["kw"]) / sum_q.clamp(min=1e-6)[..., None]  # Eq. (12)
            ks_d = torch.einsum("bml,bl,blh->bmh", mdf, wd, d["kw"]) / sum_d.clamp(min=1e-6)[..., None]
            m_mlp = torch.sigmoid(self.mlp_match(torch.cat([ks_q, ks_d, self.ks_coa(ks_q, ks_d)], -1)))  # Eq. (11)
            out["m_mlp"] = m_mlp
            views.append(m_mlp)
        if self.cfg.use_att:
            rows, levels_idx = valid.nonzero(as_tuple=True)
            m_att = torch.zeros(b, m, self.cfg.att_dim, device=valid.device, dtype=q["kw"].dtype)
            if len(rows):
                m_att[rows, levels_idx] = self.att_match(
                    q["kw"], d["kw"], mq_all[rows, levels_idx], md[rows, levels_idx], rows)  # Eq. (13)-(15)
            out["m_att"] = m_att
            views.append(m_att)
        if self.cfg.use_lm:
            eq = batch["eq"]
            inter = torch.einsum("bmi,bij,bmj->bm", mqf, eq, mdf)
            union = mqf.sum(-1) + mdf.sum(-1) - inter
            jac = inter / union.clamp(min=1)
            bm25 = torch.einsum("bmi,bij,bmj->bm", mqf, eq, mdf * d["bm25w"][:, None, :])
            wq_lm, wd_lm = wq, wd
            if self.cfg.wlm_norm == "mean":  # deviation: scale-free Eq. (17), see the module docstring
                wq_lm = wq / (wq.sum(1, keepdim=True) / nqf).clamp(min=1e-6)
                wd_lm = wd / (wd.sum(1, keepdim=True) / ndf).clamp(min=1e-6)
            wlm = torch.einsum("bmi,bij,bmj->bm", mqf * wq_lm[:, None, :], eq, mdf * wd_lm[:, None, :])  # Eq. (17)
            m_lm = torch.stack([torch.log1p(bm25), jac, wlm], -1)  # Eq. (16)
            out["m_lm"] = m_lm
            views.append(m_lm)
        mv = torch.cat(views, -1)  # Eq. (10)
        denom = pair_w.sum(1, keepdim=True).clamp(min=1e-6)
        out["E"] = (pair_w[..., None] * mv).sum(1) / denom  # Eq. (8)
        return out

    def score_from_E(self, e: torch.Tensor) -> torch.Tensor:
        """Eq. (2) before the sigmoid (logit)."""
        return self.final(e).squeeze(-1)

    def forward(self, batch: dict) -> torch.Tensor:
        """Logit of sim(q, d) (B,); ``torch.sigmoid`` gives Eq. (2)."""
        return self.score_from_E(self.views(batch)["E"])

    def view_slices(self) -> dict[str, slice]:
        out, start = {}, 0
        for name, dim in self.cfg.view_dims.items():
            out[name] = slice(start, start + dim)
            start += dim
        return out


def frm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Eq. (18): binary cross-entropy of sim(q, d) = sigmoid(logit) (computed stably from logits)."""
    return F.binary_cross_entropy_with_logits(logits, labels.float())  # Eq. (18)


def keyword_agreement_loss(views: dict[str, torch.Tensor], eq: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Deviation from the paper: a direct weak-supervision term for w(k, q) (Eq. 7) from the pair label.

    §3.2 supervises the importance only through the matching loss (Eq. 18), whose gradient reaches w(k, q)
    through ratios of importances (Eq. 8, 9, 12) and Eq. (17); the keyword sets themselves are chosen by a
    sort that passes no gradient. Measured on QQP, that left the learned importance's sign to chance (Spearman
    with IDF −0.29 to +0.76 across runs). Here a keyword of one question is a target keyword (1) when its
    match status agrees with the label: it occurs in the other question of a paraphrase pair, or is missing
    from the other question of a non-paraphrase pair (its absence is what tells them apart); otherwise 0.
    Binary cross-entropy of w(k, q) against that target, averaged over the real keywords of both sides.
    ``views`` = ``FRM.views(batch)``; ``eq`` = a(k_i, k_j) (B, Lq, Ld); ``labels`` (B,)."""
    y = labels.float()[:, None]
    loss, count = views["w_q"].new_zeros(()), views["w_q"].new_zeros(())
    for w, mask, shared in ((views["w_q"], views["mask_q"], eq.sum(2) > 0), (views["w_d"], views["mask_d"], eq.sum(1) > 0)):
        target = torch.where(shared, y, 1.0 - y)
        bce = F.binary_cross_entropy(w.clamp(1e-6, 1 - 1e-6), target, reduction="none")
        loss, count = loss + (bce * mask).sum(), count + mask.sum()
    return loss / count.clamp(min=1)


class KeywordEncoder(nn.Module):
    """EmbNN backbone (§3.2): E_CLS and keyword embeddings E_k = mean of the keyword's WordPiece vectors.

    ``word_to_kw`` (B, T) maps each WordPiece position to its keyword index (−1 for [CLS]/[SEP]/padding).
    """

    def __init__(self, backbone: nn.Module, max_keywords: int) -> None:
        super().__init__()
        self.backbone, self.max_keywords = backbone, max_keywords

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, word_to_kw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        onehot = F.one_hot(word_to_kw.clamp(min=0), self.max_keywords).to(hidden.dtype)
        onehot = onehot * (word_to_kw >= 0)[..., None]
        counts = onehot.sum(1)  # (B, K)
        kw = torch.einsum("btk,bth->bkh", onehot, hidden) / counts.clamp(min=1)[..., None]  # E_k = Σ E_w / |k|
        return hidden[:, 0], kw
