"""Severyn & Moschitti CNN pair reranker: two sentence ConvNets, bilinear similarity, join, hidden, softmax.

**Paper** Aliaksei Severyn, Alessandro Moschitti. "Learning to Rank Short Text Pairs with Convolutional
Deep Neural Networks", SIGIR 2015 (cnn-rerank-severyn2015.md).

**Implements** §3.1 sentence model (Eq. 1 wide convolution, ReLU, max pooling); §3.2.1 Eq. (2)
x_sim = x_qᵀ M x_d; §3.2.4 join layer [x_q; x_sim; x_d; x_feat]; §3.2.2 hidden layer; §3.2.3 softmax;
§3.3 Eq. (3) cross-entropy + L2 (``l2_penalty``: 1e-5 on convolutions, 1e-4 elsewhere, §4.1).

.. math::
    x_{join} = [x_q^T; x_q^T M x_d; x_d^T; x_{feat}^T],\\quad
    p(y | q, d) = softmax(W_s\\, \\alpha(W_h x_{join} + b_h) + b_s)

Symbols → arguments: word indices of q and d = ``q_ids``, ``d_ids`` (B, T) with 0 = padding;
x_feat = ``feats`` (B, 4) or None.

**Shape** ids (B, T); logits (B, 2).

**Deviations** static GloVe 6B 50-d instead of the authors' word2vec 50-d (unknown words U[−0.25, 0.25]);
hidden activation ReLU (the paper writes α()); dropout before the softmax layer (p = 0.5).

>>> model = CNNPairReranker(CNNConfig(), embeddings)   # embeddings: (|V|, 50) float tensor
>>> logits = model(q_ids, d_ids, feats)                  # (B, 2)
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class CNNConfig:
    """Paper defaults (§4.1): filter width 5, 100 feature maps, dropout 0.5, L2 1e-5 conv / 1e-4 others."""

    width: int = 5
    feature_maps: int = 100
    dropout: float = 0.5
    use_features: bool = True
    n_features: int = 4
    l2_conv: float = 1e-5
    l2_other: float = 1e-4


class SentenceCNN(nn.Module):
    """§3.1: wide convolution (pad m − 1 zeros both sides, Eq. 1) + bias, ReLU, max pooling over time."""

    def __init__(self, dim: int, cfg: CNNConfig) -> None:
        super().__init__()
        self.width = cfg.width
        self.conv = nn.Conv1d(dim, cfg.feature_maps, cfg.width, padding=cfg.width - 1)

    def forward(self, emb: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``emb`` (B, T, d), ``mask`` (B, T) → (B, feature_maps)."""
        emb = emb * mask[..., None]
        c = F.relu(self.conv(emb.transpose(1, 2)))  # Eq. (1), wide: length T + m − 1
        length = mask.sum(1)
        valid = torch.arange(c.shape[2], device=c.device)[None, :] < (length + self.width - 1)[:, None]
        return (c * valid[:, None, :]).amax(2)  # max pooling over valid positions (ReLU ≥ 0)


class CNNPairReranker(nn.Module):
    """Two sentence ConvNets → x_sim (Eq. 2) → join → hidden → softmax (§3.2)."""

    def __init__(self, cfg: CNNConfig, embeddings: torch.Tensor) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding.from_pretrained(embeddings.float(), freeze=True, padding_idx=0)  # static W (§4.2)
        dim = embeddings.shape[1]
        self.cnn_q = SentenceCNN(dim, cfg)
        self.cnn_d = SentenceCNN(dim, cfg)
        self.M = nn.Parameter(torch.empty(cfg.feature_maps, cfg.feature_maps))
        nn.init.xavier_uniform_(self.M)
        join = 2 * cfg.feature_maps + 1 + (cfg.n_features if cfg.use_features else 0)
        self.hidden = nn.Linear(join, join)  # §4.1: hidden size = size of x_join
        self.drop = nn.Dropout(cfg.dropout)
        self.out = nn.Linear(join, 2)

    def similarity(self, x_q: torch.Tensor, x_d: torch.Tensor) -> torch.Tensor:
        """Severyn & Moschitti (SIGIR'15) §3.2.1, Eq. (2): x_qᵀ M x_d."""
        return ((x_q @ self.M) * x_d).sum(-1)  # Eq. (2)

    def forward(self, q_ids: torch.Tensor, d_ids: torch.Tensor, feats: torch.Tensor | None = None) -> torch.Tensor:
        x_q = self.cnn_q(self.embed(q_ids), (q_ids > 0).float())
        x_d = self.cnn_d(self.embed(d_ids), (d_ids > 0).float())
        parts = [x_q, self.similarity(x_q, x_d)[:, None], x_d]
        if self.cfg.use_features:
            parts.append(feats)
        x_join = torch.cat(parts, -1)  # §3.2.4 join layer
        h = F.relu(self.hidden(x_join))  # §3.2.2
        return self.out(self.drop(h))  # §3.2.3 softmax logits

    def l2_penalty(self) -> torch.Tensor:
        """λ‖θ‖² of Eq. (3): 1e-5 for convolution parameters, 1e-4 for the others (static W excluded)."""
        conv = sum((p ** 2).sum() for n, p in self.named_parameters() if n.startswith("cnn_") and p.requires_grad)
        other = sum((p ** 2).sum() for n, p in self.named_parameters() if not n.startswith("cnn_") and p.requires_grad)
        return self.cfg.l2_conv * conv + self.cfg.l2_other * other


def cnn_loss(model: CNNPairReranker, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Eq. (3): summed cross-entropy of the mini-batch + λ‖θ‖²."""
    return F.cross_entropy(logits, labels.long(), reduction="sum") + model.l2_penalty()  # Eq. (3)
