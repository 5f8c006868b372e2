"""Ranking metrics and the STS reader on hand-made inputs."""

import numpy as np
import pytest

from embeddings.evaluate import image_sentence_ranks, paired_ranks, read_sts, recall_summary
from rerank.errors import InputError


def test_paired_ranks_and_recalls():
    q = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    items = np.array([[0.0, 1.0], [0.0, 1.0], [0.6, 0.8]])
    # query 0: gold 0 (score 0) ranks below item 2 (0.6) -> 2; item 1 ties (0) in its favour
    # query 1: gold 1 (1.0), item 0 ties -> 1; query 2: gold 2 (1.0), best -> 1
    assert paired_ranks(q, items).tolist() == [2, 1, 1]
    r = recall_summary(np.array([1, 2, 6, 11]))
    assert (r["r1"], r["r5"], r["r10"], r["medr"], r["n"]) == (25.0, 50.0, 75.0, 4.0, 4)


def test_image_sentence_ranks_two_captions_per_image():
    images = np.array([[1.0, 0.0], [0.0, 1.0]])
    captions = np.array([[0.0, 1.0], [0.9, 0.1],    # image 0: its second caption is the best match
                         [0.8, 0.2], [0.7, 0.3]])   # image 1: both captions lean towards image 0
    i2t, t2i = image_sentence_ranks(images, captions, 2)
    # image 0 scores: [0, .9, .8, .7] -> best correct .9 is rank 1
    # image 1 scores: [1, .1, .2, .3] -> best correct .3 is beaten by 1.0 -> rank 2
    assert i2t.tolist() == [1, 2]
    # caption 0 (of image 0): scores (0, 1) -> rank 2; caption 1: (.9, .1) -> 1;
    # caption 2 (of image 1): (.8, .2) -> 2; caption 3: (.7, .3) -> 2
    assert t2i.tolist() == [2, 1, 2, 2]


def test_read_sts_skips_rows_without_gold(tmp_path):
    p = tmp_path / "s.tsv"
    p.write_text("3.5\tA dog.\tA hound.\n\tNo gold.\tSkipped.\n0\tA cat.\tA car.\n", encoding="utf-8")
    s1, s2, gold = read_sts(str(p))
    assert s1 == ["A dog.", "A cat."] and s2 == ["A hound.", "A car."] and gold.tolist() == [3.5, 0.0]
    p.write_text("x\ta\tb\n", encoding="utf-8")
    with pytest.raises(InputError, match=":1: gold score 'x' is not a number"):
        read_sts(str(p))
    p.write_text("1\tonly two\n", encoding="utf-8")
    with pytest.raises(InputError, match="expected 3 tab-separated fields"):
        read_sts(str(p))
