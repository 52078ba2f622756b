"""Bag-of-words dual encoder: the mean of word vectors, optionally followed by a linear layer."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class DualEncoder(nn.Module):
    """Mean of word embeddings (+ a linear layer), cosine relevance: DenseTrans's DualEncoder baseline.

    **Paper** Gillick, Presta, Tomar: "End-to-end retrieval in continuous space", 2018, as the
    DualEncoder baseline of Cai et al., "A Discriminative Semantic Ranker for Question Retrieval",
    ICTIR 2021, §4.2.1 ("uses an average over word embeddings to represent the input questions").

    **Implements** φ(q) = W · mean_{w ∈ q} e_w + b, ψ = cosine (Eq. (1) of Cai et al.); trained with
    Eq. (6)-(7) (in-batch softmax). ``linear=False`` and frozen GloVe vectors give the untrained
    ``glove-mean`` reference.

    .. math::
        \\phi(q) = W\\,\\frac{1}{|q|}\\sum_{w\\in q} e_w + b,\\qquad s(q^u, q^h) = \\cos(\\phi(q^u), \\phi(q^h))

    Ids in ``ignore_ids`` (padding, and ``[UNK]`` for the GloVe-only vocabulary) do not count in the
    mean; a question with no counted word gets the zero vector.

    **Shape** ids (B, L) -> (B, out_dim).

    **Deviations** the paper's DualEncoder uses a multi-task loss (in-batch cross-entropy, sampled
    softmax, triplet); here only Eq. (6)-(7) of Cai et al. (in-batch softmax). The linear layer is
    initialised to the identity (so the untrained model is the plain mean of its word vectors), not
    PyTorch's default random init.

    >>> m = DualEncoder(10, emb_dim=4)
    >>> m(torch.tensor([[3, 4, 0]])).shape
    torch.Size([1, 4])
    """

    def __init__(self, vocab_size: int, emb_dim: int = 50, pad_id: int = 0, pretrained: torch.Tensor | None = None,
                 linear: bool = True, ignore_ids: tuple[int, ...] = ()) -> None:
        super().__init__()
        self.token = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_id)
        if pretrained is not None:
            with torch.no_grad():
                self.token.weight.copy_(pretrained)
                self.token.weight[pad_id].zero_()
        self.linear = nn.Linear(emb_dim, emb_dim) if linear else nn.Identity()
        if linear:
            with torch.no_grad():
                self.linear.weight.copy_(torch.eye(emb_dim))
                self.linear.bias.zero_()
        self.pad_id = pad_id
        self.ignore_ids = tuple(sorted({pad_id, *ignore_ids}))

    def mean(self, ids: torch.Tensor) -> torch.Tensor:
        """(1/|q|) Σ e_w over counted words, (B, emb_dim)."""
        keep = torch.ones_like(ids, dtype=torch.bool)
        for i in self.ignore_ids:
            keep &= ids.ne(i)
        w = keep.unsqueeze(-1).to(self.token.weight.dtype)
        return (self.token(ids) * w).sum(1) / w.sum(1).clamp_min(1.0)

    def encode(self, ids: torch.Tensor) -> torch.Tensor:
        """φ(q), unnormalised."""
        return self.linear(self.mean(ids))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """L2-normalised φ(q), so a dot product is the cosine ψ."""
        return F.normalize(self.encode(ids), dim=-1)
