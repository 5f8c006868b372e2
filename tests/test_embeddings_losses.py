"""Hinge ranking losses on tiny inputs whose values were worked out by hand."""

import pytest
import torch

from rerank.embeddings.losses import mlmme_loss, pair_loss

pytestmark = pytest.mark.neural

A = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
B = torch.tensor([[0.8, 0.6], [0.0, 1.0], [1.0, 0.0]])
# scores a_i.b_j = [[.8, 0, 1], [.6, 1, 0], [.96, .8, .6]], positives (.8, 1, .6), margin .2
# a_i vs wrong b_j: (0, .4 | 0, 0 | .56, .4); b_i vs wrong a_j: (0, .36 | 0, 0 | .6, 0)


def test_sum_of_all_in_batch_negatives():
    assert pair_loss(A, B, 0.2, "sum").item() == pytest.approx((0.4 + 0.56 + 0.4 + 0.36 + 0.6) / 3)


def test_max_violation_takes_hardest_negative_per_direction():
    # rows: .4, 0, .56 ; columns: .36, 0, .6
    assert pair_loss(A, B, 0.2, "max").item() == pytest.approx((0.4 + 0.56 + 0.36 + 0.6) / 3)


def test_random_negatives_given_explicitly():
    neg_b = B.roll(-1, 0)[:, None, :]  # item i is contrasted with b_{i+1} and a_{i+1}
    neg_a = A.roll(-1, 0)[:, None, :]
    assert pair_loss(A, B, 0.2, "random", neg_a=neg_a, neg_b=neg_b).item() == pytest.approx((0.56 + 0.6) / 3, abs=1e-6)


def test_same_image_items_are_not_negatives():
    groups = torch.tensor([0, 1, 0])  # items 0 and 2 show the same image
    assert pair_loss(A, B, 0.2, "sum", groups=groups).item() == pytest.approx(0.4 / 3)


def test_margin_zero_and_perfect_alignment_give_zero():
    eye = torch.eye(3)
    for mode in ("sum", "max"):
        assert pair_loss(eye, eye, 0.2, mode).item() == 0.0


def test_mlmme_combines_multimodal_and_multilingual_terms():
    vec = {"image": A, "en": B, "de": A.flip(0)}
    beta = 0.3
    loss, parts = mlmme_loss(vec, ["en", "de"], beta, 0.2, "sum")
    mm = pair_loss(A, B, 0.2, "sum") + pair_loss(A, A.flip(0), 0.2, "sum")
    ml = pair_loss(B, A.flip(0), 0.2, "sum")
    assert loss.item() == pytest.approx(beta * mm.item() + (1 - beta) * ml.item())
    assert parts["mm"] == pytest.approx(mm.item()) and parts["ml"] == pytest.approx(ml.item())
    text_only, parts = mlmme_loss({"en": B, "de": A}, ["en", "de"], 0.0, 0.2, "max")
    assert text_only.item() == pytest.approx(pair_loss(B, A, 0.2, "max").item()) and parts["mm"] == 0.0


def test_bad_mode_and_missing_inputs():
    with pytest.raises(ValueError, match="unknown contrastive mode"):
        pair_loss(A, B, 0.2, "hardest")
    with pytest.raises(ValueError, match="needs neg_a"):
        pair_loss(A, B, 0.2, "random")
    with pytest.raises(ValueError, match="image vectors"):
        mlmme_loss({"en": A, "de": B}, ["en", "de"], 0.5, 0.2, "sum")
