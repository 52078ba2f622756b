"""DenseTrans: a densely connected Transformer encoder for first-stage question retrieval."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

VARIANTS = ("full", "-TopDense", "-AllDense", "+Concat")
POOLINGS = ("cls", "mean")


def layer_input_widths(d_model: int, n_layers: int, variant: str = "full") -> list[int]:
    """Width of the input of each encoding layer (= its output width; a Transformer layer keeps width).

    ``full``: layer ℓ reads [E⁰; …; E^{ℓ−1}] (Eq. (5)), so widths are d, 2d, 4d, … for ℓ = 1, 2, 3.
    ``-TopDense``: layers 1..N−1 as ``full``, layer N reads only E^{N−1} (Eq. (4)).
    ``-AllDense`` / ``+Concat``: Eq. (4) everywhere (width d).
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown DenseTrans variant {variant!r}; known: {', '.join(VARIANTS)}")
    out_widths = [d_model]  # E^0
    inputs = []
    for ell in range(1, n_layers + 1):
        dense = variant == "full" or (variant == "-TopDense" and ell < n_layers)
        width = sum(out_widths) if dense else out_widths[-1]
        inputs.append(width)
        out_widths.append(width)
    return inputs


class DenseTrans(nn.Module):
    """Densely connected Transformer (DenseTrans) question encoder; cosine relevance.

    **Paper** Cai, Fan, Guo, Zhang, Ding, Cheng: "A Discriminative Semantic Ranker for Question
    Retrieval", ICTIR 2021.

    **Implements** §3.2.1 input layer (token + learned absolute position embeddings, ``[CLS]`` pooling
    token), §3.2.2 post-LN Transformer encoding layers (Eq. (2) multi-head self-attention, Eq. (3) FFN,
    Eq. (4)), §3.2.3 dense connectivity (Eq. (5)), Eq. (1) dual encoder with ψ = cosine; ablations of
    §4.4.1: ``-TopDense``, ``-AllDense``, ``+Concat``.

    .. math::
        E^\\ell = SA_\\ell([E^0; E^1; \\dots; E^{\\ell-1}]),\\qquad
        s(q^u, q^h) = \\cos(\\phi(q^u), \\phi(q^h)),\\ \\phi(q) = E^N_{[CLS]}

    ``n_layers`` = N, ``n_heads`` = H, ``d_model`` = width of E⁰; ``emb_dim`` is the width of the
    (pretrained) token vectors, projected linearly to ``d_model`` when they differ.

    **Shape** ids (B, L) with ``[CLS]`` first, 0 = padding -> (B, d_rep); d_rep = 4·d_model for
    ``full`` with N = 3, d_model for ``-AllDense``, 2·d_model for ``-TopDense``, (N+1)·d_model for
    ``+Concat``.

    **Deviations** token vectors: GloVe 6B 50-d or MiniLM WordPiece (FastText 300-d unavailable offline)
    with a projection to ``d_model`` (divisible by H); FFN width ``ffn_ratio``·width (not given in the
    paper; 4 as in Vaswani et al.). ``position_std`` > 0 initialises the position embeddings from
    N(0, position_std²) (BERT uses 0.02) instead of PyTorch's N(0, 1), which is ~4× the scale of the
    projected GloVe vectors and drowns the words in E⁰ (measured in bench/reports/first_stage.md).
    ``pooling="mean"`` (not the paper's; measured there) averages the non-padding rows of E^N instead of
    taking its ``[CLS]`` row.

    >>> m = DenseTrans(vocab_size=100, d_model=12, n_heads=6)
    >>> m.encode(torch.tensor([[1, 5, 7, 0]])).shape
    torch.Size([1, 48])
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int = 300,
        n_layers: int = 3,
        n_heads: int = 6,
        dropout: float = 0.1,
        max_len: int = 31,
        ffn_ratio: int = 4,
        emb_dim: int | None = None,
        variant: str = "full",
        pad_id: int = 0,
        pretrained: torch.Tensor | None = None,
        position_std: float = 0.0,
        pooling: str = "cls",
    ) -> None:
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"unknown pooling {pooling!r}; known: {', '.join(POOLINGS)}")
        self.pooling = pooling
        emb_dim = emb_dim or d_model
        self.variant, self.pad_id, self.n_layers = variant, pad_id, n_layers
        self.token = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_id)
        if pretrained is not None:
            with torch.no_grad():
                self.token.weight.copy_(pretrained)
                self.token.weight[pad_id].zero_()
        self.project = nn.Linear(emb_dim, d_model) if emb_dim != d_model else nn.Identity()
        self.position = nn.Embedding(max_len, d_model)  # learned absolute positions (§3.2.1)
        if position_std:
            nn.init.normal_(self.position.weight, std=position_std)
        self.dropout = nn.Dropout(dropout)
        self.widths = layer_input_widths(d_model, n_layers, variant)
        for w in self.widths:
            if w % n_heads:
                raise ValueError(f"layer width {w} is not divisible by {n_heads} heads")
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(w, n_heads, ffn_ratio * w, dropout, activation="relu",
                                       batch_first=True, norm_first=False)  # post-LN as in §3.2.2
            for w in self.widths
        )
        self.d_model = d_model
        self.rep_dim = (n_layers + 1) * d_model if variant == "+Concat" else self.widths[-1]

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """§3.2.1: E⁰ = token + position embeddings, (B, L, d_model)."""
        pos = torch.arange(ids.shape[1], device=ids.device).clamp_max(self.position.num_embeddings - 1)
        return self.dropout(self.project(self.token(ids)) + self.position(pos)[None])

    def layer_outputs(self, ids: torch.Tensor) -> list[torch.Tensor]:
        """[E⁰, E¹, …, E^N], each (B, L, width)."""
        pad = ids.eq(self.pad_id)
        outs = [self.embed(ids)]
        for ell, layer in enumerate(self.layers, start=1):
            dense = self.variant == "full" or (self.variant == "-TopDense" and ell < self.n_layers)
            x = torch.cat(outs, dim=-1) if dense else outs[-1]  # Eq. (5) (dense) or Eq. (4)
            outs.append(layer(x, src_key_padding_mask=pad))
        return outs

    def _pool(self, out: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """(B, L, w) -> (B, w): the ``[CLS]`` row (§3.2.1), or the mean over non-padding positions."""
        if self.pooling == "cls":
            return out[:, 0]
        keep = ids.ne(self.pad_id).unsqueeze(-1).to(out.dtype)
        return (out * keep).sum(1) / keep.sum(1).clamp_min(1.0)

    def encode(self, ids: torch.Tensor) -> torch.Tensor:
        """φ(q): the pooled last layer (``+Concat``: every layer), unnormalised; paper: the ``[CLS]`` vector."""
        outs = self.layer_outputs(ids)
        if self.variant == "+Concat":
            return torch.cat([self._pool(o, ids) for o in outs], dim=-1)
        return self._pool(outs[-1], ids)

    def layer_vectors(self, ids: torch.Tensor) -> list[torch.Tensor]:
        """The pooled vector (``[CLS]`` by default) after the input layer and after each layer (N + 1 tensors)."""
        return [self._pool(o, ids) for o in self.layer_outputs(ids)]

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """L2-normalised φ(q) (B, d_rep), so a dot product is Eq. (1)'s cosine ψ."""
        return F.normalize(self.encode(ids), dim=-1)

    def score(self, q_ids: torch.Tensor, d_ids: torch.Tensor) -> torch.Tensor:
        """§3.1 Eq. (1): s(q^u, q^h) = cos(φ(q^u), φ(q^h)) for aligned rows."""
        return (self(q_ids) * self(d_ids)).sum(-1)  # Eq. (1)
