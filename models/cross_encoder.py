"""A BERT cross-encoder whose head reads the two questions' token outputs (segment mean pooling).

nn.Module only (no I/O); ``core/rerank/cross_encoder.py`` loads the weights, trains and serves it.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class SegmentPoolCrossEncoder(nn.Module):
    """Interaction-based pair scorer: joint encoding of both questions, a head over each question's tokens.

    **Paper**: Tong Guo, Huilin Gao, "Revisiting Semantic Representation and Tree Search for Similar
    Question Retrieval", arXiv 2019.

    **Implements**: §3.2 interaction-based method (Fig. 3, Algorithm 2 lines 1-5): the pair is encoded
    together as "[CLS] q1 [SEP] q2 [SEP]" (every token attends to both questions) and trained with
    (binary) cross-entropy; the score s(q1, q2) is used in the tree search of §3.4.

    .. math::
        H = \\mathrm{BERT}([CLS], q_1, [SEP], q_2, [SEP]), \\quad
        u = \\mathrm{mean}_{t \\in \\mathrm{seg}_0} H_t, \\quad v = \\mathrm{mean}_{t \\in \\mathrm{seg}_1} H_t

        s(q_1, q_2) = a \\cos(u, v) + w^\\top [\\,|u - v|;\\ u \\odot v\\,] + b, \\quad
        p(\\mathrm{similar}) = \\sigma(s)

    Symbols: seg_0 / seg_1 -> tokens with ``token_type_ids`` 0 / 1 (q1 with [CLS] and its [SEP]; q2 with
    the last [SEP]); a -> ``head.scale``; w -> ``head.linear.weight``; b -> ``head.linear.bias``.

    **Shape**: input_ids, attention_mask, token_type_ids (B, L) -> scores (B,).

    **Deviations**: the paper classifies the [CLS] output with a fresh softmax layer. Here the head
    reads the two segments' mean token outputs (the pooling all-MiniLM-L6-v2 was trained with) and
    starts as a scaled cosine (w = 0), so the untrained model already ranks pairs, where a fresh [CLS]
    head starts at chance (measured in bench/reports/tree_bert.md). One logit
    with binary cross-entropy = the paper's two-class softmax on the margin z_1 - z_0.

    Example::

        ce = SegmentPoolCrossEncoder(AutoModel.from_pretrained(path))
        s = ce(ids, mask, types)
    """

    def __init__(self, backbone: nn.Module, scale: float = 10.0, offset: float = -8.0) -> None:
        super().__init__()
        self.backbone = backbone
        d = backbone.config.hidden_size
        self.head = nn.ModuleDict({"linear": nn.Linear(2 * d, 1)})
        self.head["scale"] = _Scalar(scale)
        nn.init.zeros_(self.head["linear"].weight)
        nn.init.constant_(self.head["linear"].bias, offset)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor) -> torch.Tensor:
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask,
                               token_type_ids=token_type_ids).last_hidden_state
        real = attention_mask.bool()
        second = token_type_ids.bool() & real
        first = ~token_type_ids.bool() & real
        u = _masked_mean(hidden, first)
        v = _masked_mean(hidden, second)
        features = torch.cat([(u - v).abs(), u * v], dim=-1)
        return self.head["scale"].value * F.cosine_similarity(u, v, dim=-1) + self.head["linear"](features).squeeze(-1)


class _Scalar(nn.Module):
    """One learnable scalar (the cosine's scale a)."""

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = nn.Parameter(torch.tensor(float(value)))


def _masked_mean(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp_min(1.0)
