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
position and segment embeddings and reads the [CLS] output; BM25 enters as log(1 + BM25).

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

    def forward(self, cls: torch.Tensor, kw: torch.Tensor, idf_bucket: torch.Tensor, pos: torch.Tensor,
                stop: torch.Tensor) -> torch.Tensor:
        """Importance w(k_i, q) ∈ (0, 1) for every keyword, shape (B, L)."""
        e_cls = cls[:, None, :].expand_as(kw)
        embf = F.relu(self.emb_mlp(torch.cat([e_cls, kw, self.coa(e_cls, kw)], -1)))  # Eq. (4)
        ef_in = torch.cat([self.idf_emb(idf_bucket), self.pos_emb(pos), stop[..., None]], -1)
        ef = F.relu(self.ef_mlp(ef_in))  # Eq. (6)
        return torch.sigmoid(self.joint(torch.cat([embf, ef], -1))).squeeze(-1)  # Eq. (7), Eq. (3)


def level_masks(importance: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Multi-level keyword sets (§3.2) as masks (B, levels = L, L): level m keeps the n − m most important.

    Ties are broken by position (the later keyword is removed first), as ``core.keywords.keyword_sets``.
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
    closest larger); rule 3 pairs single-keyword levels; rule 4 drops the rest. ``core.keywords.assign_pairs``
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
    """m_att, Eq. (13)-(15): multi-head attention over "[CLS] q̂ [SEP] d̂", FFN, LayerNorm; [CLS] output."""

    def __init__(self, cfg: FRMConfig) -> None:
        super().__init__()
        d = cfg.att_dim
        self.proj = nn.Linear(cfg.hidden, d)
        self.special = nn.Parameter(torch.randn(2, d) * 0.02)  # [CLS], [SEP]
        self.position = nn.Embedding(cfg.max_keywords + 2, d)
        self.segment = nn.Embedding(2, d)
        self.attn = nn.MultiheadAttention(d, cfg.att_heads, batch_first=True)  # dropout sits before FC layers
        self.ffn = nn.Sequential(nn.Linear(d, 2 * d), nn.ReLU(), nn.Dropout(cfg.dropout), nn.Linear(2 * d, d))
        self.norm = nn.LayerNorm(d)

    def forward(self, kw_q: torch.Tensor, kw_d: torch.Tensor, set_q: torch.Tensor, set_d: torch.Tensor,
                pair_batch: torch.Tensor) -> torch.Tensor:
        """``set_q`` (P, Lq), ``set_d`` (P, Ld) keyword-set masks of P pairs of batch rows ``pair_batch``."""
        lq, ld = kw_q.shape[1], kw_d.shape[1]
        dev = kw_q.device
        tq = self.proj(kw_q) + self.position(torch.arange(lq, device=dev) + 1) + self.segment.weight[0]
        td = self.proj(kw_d) + self.position(torch.arange(ld, device=dev) + 1) + self.segment.weight[1]
        cls = (self.special[0] + self.position.weight[0] + self.segment.weight[0]).expand(len(pair_batch), 1, -1)
        sep = (self.special[1] + self.position.weight[0] + self.segment.weight[1]).expand(len(pair_batch), 1, -1)
        seq = torch.cat([cls, tq[pair_batch], sep, td[pair_batch]], 1)  # L: "[CLS] q̂ [SEP] d̂"
        ones = torch.ones(len(pair_batch), 1, dtype=torch.bool, device=dev)
        keep = torch.cat([ones, set_q, ones, set_d], 1)
        head, _ = self.attn(seq, seq, seq, key_padding_mask=~keep, need_weights=False)  # Eq. (13)-(14)
        out = self.norm(head + self.ffn(head))  # Eq. (15)
        return out[:, 0]


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
            w = self.importance_net(side["cls"], side["kw"], side["idf_bucket"], side["pos"], side["stop"])
        return w * mask

    # ------------------------------------------------------------------ views
    def views(self, batch: dict[str, dict[str, torch.Tensor] | torch.Tensor]) -> dict[str, torch.Tensor]:
        """Everything the forward pass computes: importances, levels, pairs, weights, per-pair views, E."""
        q, d = dict(batch["q"]), dict(batch["d"])
        for side in (q, d):
            side["cls"], side["kw"] = self.input_drop(side["cls"]), self.input_drop(side["kw"])
        wq, wd = self.importance(q), self.importance(d)
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
                                        "valid": valid, "pair_w": pair_w}
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
            wlm = torch.einsum("bmi,bij,bmj->bm", mqf * wq[:, None, :], eq, mdf * wd[:, None, :])  # Eq. (17)
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
