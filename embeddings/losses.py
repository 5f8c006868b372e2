"""Pairwise ranking (hinge) losses of Calixto & Liu (2017), eqs. 1-3, with three ways to pick
contrastive examples:

- "sum": every other item in the batch (VSE, Kiros et al. 2014);
- "max": only the hardest in-batch negative (VSE++ max-violation, Faghri et al. 2017);
- "random": given negatives, resampled from the training set each epoch (the paper);
- "infonce": not a hinge but the softmax cross-entropy of each positive against every in-batch
  item at a temperature (InfoNCE, the contrastive loss of CLIP and of LaBSE's translation
  ranking), both directions; `margin` is unused.

All vectors are assumed L2-normalised, so dot products are cosines. Every loss is summed over
contrastive examples and both directions, and averaged over the positive pairs.
"""

from __future__ import annotations

import itertools

import torch

from rerank.embeddings.config import MODES  # the contrastive modes


def pair_loss(a: torch.Tensor, b: torch.Tensor, margin: float, mode: str,
              neg_a: torch.Tensor | None = None, neg_b: torch.Tensor | None = None,
              groups: torch.Tensor | None = None, temperature: float = 0.05) -> torch.Tensor:
    """Hinge loss for positive pairs (a_i, b_i), both directions.

    a, b: (B, d). For mode "random", neg_a / neg_b: (B, m, d) contrastive items for a_i's partner
    b_i and for b_i's partner a_i. `groups` (B,) marks items from the same image: in-batch pairs
    within a group are not used as negatives (they are not wrong matches).
    """
    pos = (a * b).sum(-1)
    if mode == "random":
        if neg_a is None or neg_b is None:
            raise ValueError("mode 'random' needs neg_a and neg_b")
        s_ab = torch.einsum("bd,bmd->bm", a, neg_b)   # a_i against wrong b
        s_ba = torch.einsum("bd,bmd->bm", b, neg_a)   # b_i against wrong a
        cost = (margin - pos[:, None] + s_ab).clamp(min=0).sum(1) + (margin - pos[:, None] + s_ba).clamp(min=0).sum(1)
        return cost.mean()
    if mode not in MODES:
        raise ValueError(f"unknown contrastive mode {mode!r}: expected one of {', '.join(MODES)}")
    scores = a @ b.t()                                 # scores[i, j] = a_i . b_j
    if groups is None:
        groups = torch.arange(a.shape[0], device=a.device)
    same = groups[:, None] == groups[None, :]
    if mode == "infonce":
        # the other items of a positive's own group are not wrong matches: left out of its softmax
        logits = (scores / temperature).masked_fill(same & ~torch.eye(len(a), dtype=torch.bool, device=a.device),
                                                    float("-inf"))
        target = torch.arange(len(a), device=a.device)
        return torch.nn.functional.cross_entropy(logits, target) + torch.nn.functional.cross_entropy(logits.t(), target)
    cost_b = (margin - pos[:, None] + scores).clamp(min=0).masked_fill(same, 0.0)  # a_i vs b_j
    cost_a = (margin - pos[None, :] + scores).clamp(min=0).masked_fill(same, 0.0)  # a_j vs b_i
    if mode == "sum":
        total = cost_b.sum() + cost_a.sum()
    else:
        total = cost_b.max(1).values.sum() + cost_a.max(0).values.sum()
    return total / a.shape[0]


def _rows(a: str, b: str, vectors: dict, groups, mode: str, masks: list) -> tuple:
    """The vectors of keys a and b and the groups of the rows where every mask holds (all rows
    when every mask is None or all true); rows left out need an in-batch contrastive mode."""
    masks = [m for m in masks if m is not None and not bool(m.all())]
    if not masks:
        return vectors[a], vectors[b], groups
    if mode == "random":
        raise ValueError("rows without an image or a language need an in-batch contrastive mode (sum or max)")
    keep = masks[0]
    for m in masks[1:]:
        keep = keep & m
    return vectors[a][keep], vectors[b][keep], None if groups is None else groups[keep]


def mlmme_loss(vectors: dict, languages: list[str], beta: float, margin: float, mode: str,
               negatives: dict | None = None, groups: torch.Tensor | None = None,
               with_image: torch.Tensor | None = None, present: dict | None = None,
               temperature: float = 0.05) -> tuple[torch.Tensor, dict]:
    """beta * R_MM + (1 - beta) * R_ML.

    R_MM sums pair_loss(image, sentence_k) over languages; R_ML sums pair_loss(v_k, v_l) over
    language pairs k < l. `vectors` maps "image" and each language to (B, d) tensors; for mode
    "random", `negatives` maps the same keys to (B, m, d). `with_image` (B,) bool: the rows that
    have an image (caption-caption rows such as pseudo-pairs have none): R_MM uses only them
    (in-batch modes). `present` maps a language to the (B,) bool rows that have a caption in it
    (disjoint halves): each term uses only the rows that have both of its sides; a term without
    rows is 0. `temperature` is that of mode "infonce". Returns (loss, {"mm":..., "ml":...}).
    """
    zero = next(iter(vectors.values())).new_zeros(())
    neg, present = negatives or {}, present or {}
    r_mm = zero
    if beta > 0:
        if "image" not in vectors:
            raise ValueError("beta > 0 needs image vectors")
        for lang in languages:
            img, sent, g = _rows("image", lang, vectors, groups, mode, [with_image, present.get(lang)])
            if len(img):
                r_mm = r_mm + pair_loss(img, sent, margin, mode, neg.get("image"), neg.get(lang), g, temperature)
    r_ml = zero
    if beta < 1:
        for k, l in itertools.combinations(languages, 2):
            a, b, g = _rows(k, l, vectors, groups, mode, [present.get(k), present.get(l)])
            if len(a):
                r_ml = r_ml + pair_loss(a, b, margin, mode, neg.get(k), neg.get(l), g, temperature)
    loss = beta * r_mm + (1 - beta) * r_ml
    return loss, {"mm": float(r_mm.detach()), "ml": float(r_ml.detach())}
