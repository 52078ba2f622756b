"""Cross-paper losses for the first-stage encoders: SDML, triplet loss, sampled softmax over cosine."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def squared_distances(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """All pairwise squared Euclidean distances ‖a_i − b_j‖², shape (N, M), clamped at 0."""
    d = (a * a).sum(-1, keepdim=True) - 2.0 * a @ b.T + (b * b).sum(-1).unsqueeze(0)
    return d.clamp_min(0.0)


def smoothed_targets(n: int, epsilon: float, device=None, dtype=torch.float32) -> torch.Tensor:
    """Bonadiman et al. (2019) §3.1, Eq. (4): p'(k|a) = (1 − ε) p(k|a) + ε / N (Figure 2)."""
    eye = torch.eye(n, device=device, dtype=dtype)
    return (1.0 - epsilon) * eye + epsilon / n  # Eq. (4)


class SDMLLoss(nn.Module):
    """Smoothed deep metric learning loss over a batch of N positive pairs.

    **Paper** Bonadiman, Kumar, Mittal: "Large Scale Question Paraphrase Retrieval with Smoothed Deep
    Metric Learning", W-NUT @ EMNLP 2019.

    **Implements** §3.1, Eq. (3) (softmax over negative squared Euclidean distances to the N candidates
    of the batch), Eq. (4) (label smoothing), KL-divergence training loss, batched as in Figure 2.

    .. math::
        \\hat p(a, i) = \\frac{e^{-\\|\\phi(q^a)-\\phi(q^i)\\|_2^2}}{\\sum_j^N e^{-\\|\\phi(q^a)-\\phi(q^j)\\|_2^2}},\\qquad
        p'(k|a) = (1-\\epsilon)\\,p(k|a) + \\epsilon/N,\\qquad
        \\mathcal L = \\tfrac1N \\sum_a \\mathrm{KL}(p'(\\cdot|a)\\,\\|\\,\\hat p(a,\\cdot))

    ``anchors`` = φ(q_{1,j}), ``candidates`` = φ(q_{2,j}); the gold candidate of anchor j is j;
    ``epsilon`` = ε.

    **Shape** anchors (N, n), candidates (N, n) -> scalar.

    **Deviations** none (KL averaged over anchors: ``reduction="batchmean"``).

    >>> loss = SDMLLoss(0.3)(torch.randn(4, 8), torch.randn(4, 8))
    """

    def __init__(self, epsilon: float = 0.3) -> None:
        super().__init__()
        self.epsilon = float(epsilon)

    def forward(self, anchors: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """§3.1 Eq. (3)-(4): KL(p' ‖ softmax(−‖a − c‖²))."""
        log_p = F.log_softmax(-squared_distances(anchors, candidates), dim=1)  # Eq. (3)
        target = smoothed_targets(anchors.shape[0], self.epsilon, anchors.device, log_p.dtype)  # Eq. (4)
        return F.kl_div(log_p, target, reduction="batchmean")


class TripletLoss(nn.Module):
    """Triplet loss with a margin, the baseline TL(Rand) of the SDML paper.

    **Paper** Schroff, Kalenichenko, Philbin: "FaceNet", CVPR 2015; as used in Bonadiman et al.,
    W-NUT 2019, §3 Eq. (2) and Tables 3-4 (EUC vs SSD distance).

    **Implements** Bonadiman et al. §3, Eq. (2).

    .. math::
        \\sum_i^N [\\,D(\\phi(q_i^a), \\phi(q_i^p)) - D(\\phi(q_i^a), \\phi(q_i^n)) + \\alpha\\,]_+

    ``distance="ssd"``: D = ‖x − y‖²₂ (Eq. (2), Schroff et al.); ``"euc"``: D = ‖x − y‖₂ (PyTorch's
    ``TripletMarginLoss``); ``margin`` = α.

    **Shape** anchor, positive, negative (N, n) -> scalar.

    **Deviations** mean over the batch instead of the sum (a constant factor).

    >>> TripletLoss(0.5, "ssd")(torch.randn(4, 8), torch.randn(4, 8), torch.randn(4, 8))
    """

    def __init__(self, margin: float = 0.5, distance: str = "ssd") -> None:
        super().__init__()
        if distance not in ("ssd", "euc"):
            raise ValueError(f"distance must be 'ssd' or 'euc', got {distance!r}")
        self.margin, self.distance = float(margin), distance

    def _d(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        ssd = ((x - y) ** 2).sum(-1)
        return ssd if self.distance == "ssd" else torch.sqrt(ssd + 1e-12)

    def forward(self, anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
        """§3 Eq. (2)."""
        return F.relu(self._d(anchor, positive) - self._d(anchor, negative) + self.margin).mean()  # Eq. (2)


class SampledSoftmaxLoss(nn.Module):
    """Softmax cross-entropy of each query's positive against in-batch and sampled hard negatives.

    **Paper** Cai, Fan, Guo, Zhang, Ding, Cheng: "A Discriminative Semantic Ranker for Question
    Retrieval", ICTIR 2021.

    **Implements** §3.3, Eq. (6) (softmax of the relevance scores over an approximation of the
    collection Q: the positive q^{h+}, the other queries' positives of the mini-batch and J negatives
    sampled from BM25's top-100) and Eq. (7) (negative log-likelihood).

    .. math::
        s^*(q^u, q^{h+}) = \\frac{\\exp(s(q^u, q^{h+})/\\tau)}{\\sum_{q^{h'} \\in Q}\\exp(s(q^u, q^{h'})/\\tau)},\\qquad
        \\mathcal L = -\\log\\prod s^*(q^u, q^{h+})

    s = cosine of L2-normalised vectors. ``queries`` = φ(q^u) (B, d), ``docs`` = [φ(q^{h+}_1..B); φ(negatives)]
    (B + J, d), the positive of query i is row i; ``mask`` (B, B + J) True where a candidate must not
    count as a negative (it is a paraphrase of the query, e.g. another pair of the same cluster).

    **Shape** queries (B, d), docs (B + J, d), mask (B, B + J) -> scalar.

    **Deviations** a temperature τ (``temperature``); the paper's Eq. (6) is τ = 1 (raw cosine), kept
    as the ``paper`` profile; smaller τ trains much faster on a CPU budget.

    >>> SampledSoftmaxLoss(0.05)(F.normalize(torch.randn(4, 8), dim=-1), F.normalize(torch.randn(6, 8), dim=-1))
    """

    def __init__(self, temperature: float = 1.0) -> None:
        super().__init__()
        self.temperature = float(temperature)

    def forward(self, queries: torch.Tensor, docs: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """§3.3 Eq. (6)-(7) over the sampled candidate set."""
        scores = queries @ docs.T / self.temperature  # s(q^u, q^h) (cosine) for every candidate
        if mask is not None:
            keep_gold = torch.zeros_like(mask)
            keep_gold[torch.arange(len(queries)), torch.arange(len(queries))] = True
            scores = scores.masked_fill(mask & ~keep_gold, float("-inf"))
        labels = torch.arange(len(queries), device=queries.device)
        return F.cross_entropy(scores, labels)  # Eq. (6)-(7): −log s*(q^u, q^{h+}), averaged
