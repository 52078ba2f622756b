"""SDML-CNN: the convolutional question encoder of Bonadiman et al. (2019)."""
from __future__ import annotations

import torch
from torch import nn


class SDMLCNN(nn.Module):
    """Convolutional sentence encoder φ: embeddings → conv(win) → tanh → global max pool → linear.

    **Paper** Bonadiman, Kumar, Mittal: "Large Scale Question Paraphrase Retrieval with Smoothed Deep
    Metric Learning", W-NUT @ EMNLP 2019.

    **Implements** §2.1.1 steps 1-3 and Eq. (1); trained with ``models.losses.SDMLLoss`` (§3.1, Eq. (3)-(4))
    or ``TripletLoss`` (§3, Eq. (2)); questions are compared by squared Euclidean distance (§2.1.2).

    .. math::
        h_i^{win} = \\tanh(W x_{i-win/2 : i+win/2} + b),\\qquad
        \\hat h = \\max_i h_i^{win},\\qquad \\phi(q) = W_p\\, \\hat h

    ``emb_dim`` = e_dim (300), ``window`` = win (5), ``channels`` = c_dim, ``out_dim`` = n (300);
    ``vocab_size`` = capped vocabulary + m hashing-trick bins (built by ``core.data.tokenizers.WordVocab``).

    **Shape** ids (B, L), 0 = padding -> (B, out_dim), unnormalised.

    **Deviations** c_dim is not given in the paper; 300 filters of width 5 (``same`` padding).

    >>> SDMLCNN(vocab_size=50, emb_dim=8, channels=6, out_dim=4)(torch.tensor([[3, 4, 0]])).shape
    torch.Size([1, 4])
    """

    def __init__(
        self,
        vocab_size: int,
        emb_dim: int = 300,
        window: int = 5,
        channels: int = 300,
        out_dim: int = 300,
        pad_id: int = 0,
    ) -> None:
        super().__init__()
        self.pad_id = pad_id
        self.embedding = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_id)  # step 1 (random init, §4.2)
        self.conv = nn.Conv1d(emb_dim, channels, window, padding=window // 2)  # step 2
        self.project = nn.Linear(channels, out_dim, bias=False)  # W_p ∈ R^{n × c_dim}
        self.out_dim = out_dim

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """§2.1.1: φ(q) for a batch of padded id rows."""
        x = self.embedding(ids).transpose(1, 2)  # (B, e_dim, L)
        h = torch.tanh(self.conv(x))  # Eq. (1)
        h = h.masked_fill(ids.eq(self.pad_id).unsqueeze(1), float("-inf"))
        pooled = h.max(dim=-1).values  # step 3: global max pooling over positions
        pooled = torch.where(torch.isfinite(pooled), pooled, torch.zeros_like(pooled))
        return self.project(pooled)
