"""BERT bi-encoder (three poolings), BERT cross-encoder and the cosine-MSE loss of Guo & Gao.

nn.Modules and losses only (no I/O): the backbone is passed in (``transformers.AutoModel``), the
system modules (``core/retrieval/bert.py``, ``core/rerank/cross_encoder.py``) load weights and data.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

POOLINGS = ("cls", "mean", "max")


def pool(hidden: torch.Tensor, mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """Guo & Gao §3.2 (representation-based), the three poolings: [CLS] output, mean, max over tokens.

    ``hidden`` (B, L, d), ``mask`` (B, L) with 1 for real tokens -> (B, d).
    """
    if pooling == "cls":
        return hidden[:, 0]  # 1. output of the [CLS] token
    m = mask.unsqueeze(-1).to(hidden.dtype)
    if pooling == "mean":
        return (hidden * m).sum(1) / m.sum(1).clamp_min(1.0)  # 2. mean of the last-layer outputs
    if pooling == "max":
        return hidden.masked_fill(m == 0, torch.finfo(hidden.dtype).min).max(1).values  # 3. max pooling
    raise ValueError(f"unknown pooling {pooling!r}; known: {', '.join(POOLINGS)}")


class BertBiEncoder(nn.Module):
    """Siamese BERT sentence encoder with [CLS] / mean / max pooling (representation-based method).

    **Paper**: Tong Guo, Huilin Gao, "Revisiting Semantic Representation and Tree Search for Similar
    Question Retrieval", arXiv 2019.

    **Implements**: §3.2 representation-based method (Fig. 2, Algorithm 1 lines 1-11): one BERT encodes
    each question "[CLS] w_1 ... w_n [SEP]" separately; a pooling gives the sentence embedding u.

    .. math::
        u = \\mathrm{pool}(\\mathrm{BERT}([CLS], w_1, \\dots, w_n, [SEP]))

    Symbols: w_i -> ``input_ids``; pool -> ``pooling`` ("cls", "mean", "max"); u -> returned vector.

    **Shape**: input_ids, attention_mask (B, L) -> (B, d) (d = 384 for MiniLM).

    **Deviations**: backbone all-MiniLM-L6-v2 (6 layers, 384-d; pre-trained on data that includes Quora
    duplicates) instead of BERT-base (12 layers, 768-d).

    Example::

        enc = BertBiEncoder(AutoModel.from_pretrained(path), pooling="mean")
        u = enc(ids, mask)
    """

    def __init__(self, backbone: nn.Module, pooling: str = "mean") -> None:
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"unknown pooling {pooling!r}; known: {', '.join(POOLINGS)}")
        self.backbone, self.pooling = backbone, pooling

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return pool(hidden, attention_mask, self.pooling)

    def encode_unpadded(self, input_ids: torch.Tensor) -> torch.Tensor:
        """u for a batch of equally long rows (no padding): the attention mask is all ones, so it is left
        out and attention runs unmasked (same u as ``forward`` with a mask of ones)."""
        hidden = self.backbone(input_ids=input_ids).last_hidden_state
        return pool(hidden, torch.ones(input_ids.shape, dtype=hidden.dtype, device=hidden.device), self.pooling)

    def encode_layers(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, pooling: str) -> list[torch.Tensor]:
        """Sentence vectors from every hidden state (embeddings + each layer): list of (B, d)."""
        out = self.backbone(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
        return [pool(h, attention_mask, pooling) for h in out.hidden_states]

    def score(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """§3.2: cosine u·v / (‖u‖‖v‖)."""
        return F.cosine_similarity(u, v, dim=-1)


class CosineMSELoss(nn.Module):
    """Mean squared error between the cosine of two sentence embeddings and the 0/1 label.

    **Paper**: Guo & Gao, arXiv 2019.

    **Implements**: §3.2 representation-based fine-tuning loss (unnumbered equation; "Eq. (1)" here).

    .. math::
        loss = MSE(u \\cdot v / (\\|u\\| \\|v\\|), y)

    Symbols: u -> ``u``, v -> ``v``, y -> ``labels`` (1 similar, 0 not).

    **Shape**: u, v (B, d); labels (B,) -> scalar.

    **Deviations**: none.

    Example::

        loss = CosineMSELoss()(enc(a_ids, a_mask), enc(b_ids, b_mask), labels.float())
    """

    def forward(self, u: torch.Tensor, v: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(F.cosine_similarity(u, v, dim=-1), labels.to(u.dtype))  # Eq. (1)


class BertCrossEncoder(nn.Module):
    """BERT sentence-pair classifier (interaction-based method): a linear head on the [CLS] output.

    **Paper**: Guo & Gao, arXiv 2019.

    **Implements**: §3.2 interaction-based method (Fig. 3, Algorithm 2 line 5): the pair is encoded as
    "[CLS] q1 [SEP] q2 [SEP]" and classified with cross-entropy; the similarity score used in the tree
    search (§3.4) is the logit margin of the "similar" class.

    .. math::
        p(y \\mid q_1, q_2) = \\mathrm{softmax}(W h_{[CLS]} + b), \\quad s(q_1, q_2) = z_1 - z_0

    Symbols: h_[CLS] -> last hidden state of token 0; W, b -> ``head``; z -> logits.

    **Shape**: input_ids, attention_mask, token_type_ids (B, L) -> logits (B, 2).

    **Deviations**: backbone all-MiniLM-L6-v2 (pre-trained on data that includes Quora duplicates);
    dropout 0.1 before the head as in BERT's classifier.

    Example::

        ce = BertCrossEncoder(AutoModel.from_pretrained(path))
        logits = ce(ids, mask, types)
    """

    def __init__(self, backbone: nn.Module, num_labels: int = 2, dropout: float = 0.1) -> None:
        super().__init__()
        self.backbone = backbone
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(backbone.config.hidden_size, num_labels)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor | None = None
    ) -> torch.Tensor:
        hidden = self.backbone(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).last_hidden_state
        return self.head(self.dropout(hidden[:, 0]))  # softmax(W h_[CLS] + b) via cross-entropy

    def score(self, logits: torch.Tensor) -> torch.Tensor:
        """Similarity used for ranking: logit margin z_1 - z_0 (monotone in p(similar))."""
        return logits[:, 1] - logits[:, 0]
