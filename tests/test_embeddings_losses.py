"""Hinge ranking losses on tiny inputs whose values were worked out by hand; InfoNCE against its
definition written out with logarithms, and its limits."""

import math

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


def _infonce_by_hand(a, b, t, skip=lambda i, j: False):
    """-log softmax of each positive, rows (a_i against every b_j) plus columns (b_j against every a_i)."""
    s = (a @ b.t()).tolist()
    n, total = len(s), 0.0
    for i in range(n):
        row = [math.exp(s[i][j] / t) for j in range(n) if j == i or not skip(i, j)]
        col = [math.exp(s[j][i] / t) for j in range(n) if j == i or not skip(j, i)]
        total += -math.log(math.exp(s[i][i] / t) / sum(row)) - math.log(math.exp(s[i][i] / t) / sum(col))
    return total / n


def test_infonce_is_the_two_way_softmax_cross_entropy():
    for t in (0.05, 0.5, 2.0):
        assert pair_loss(A, B, 0.2, "infonce", temperature=t).item() == pytest.approx(_infonce_by_hand(A, B, t), rel=1e-5)
    groups = torch.tensor([0, 1, 0])   # items 0 and 2 share an image: out of each other's softmax
    same = lambda i, j: groups[i] == groups[j]  # noqa: E731
    assert pair_loss(A, B, 0.2, "infonce", groups=groups, temperature=0.5).item() == \
        pytest.approx(_infonce_by_hand(A, B, 0.5, same), rel=1e-5)


def test_infonce_limits_and_direction():
    eye = torch.eye(4)
    # perfect alignment: the loss vanishes as the temperature falls; at a huge temperature every
    # item is equally likely, log(n) per direction
    assert pair_loss(eye, eye, 0.0, "infonce", temperature=0.01).item() < 1e-12
    assert pair_loss(eye, eye, 0.0, "infonce", temperature=1e6).item() == pytest.approx(2 * math.log(4), rel=1e-5)
    # swapping two partners raises it; it does not depend on the margin or on the batch order
    swapped = eye[[1, 0, 2, 3]]
    assert pair_loss(eye, swapped, 0.2, "infonce", temperature=0.1) > pair_loss(eye, eye, 0.2, "infonce", temperature=0.1)
    perm = torch.tensor([2, 0, 1])
    assert pair_loss(A[perm], B[perm], 0.0, "infonce").item() == pytest.approx(pair_loss(A, B, 5.0, "infonce").item(), rel=1e-6)


def test_bad_mode_and_missing_inputs():
    with pytest.raises(ValueError, match="unknown contrastive mode"):
        pair_loss(A, B, 0.2, "hardest")
    with pytest.raises(ValueError, match="needs neg_a"):
        pair_loss(A, B, 0.2, "random")
    with pytest.raises(ValueError, match="image vectors"):
        mlmme_loss({"en": A, "de": B}, ["en", "de"], 0.5, 0.2, "sum")
