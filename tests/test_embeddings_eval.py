"""Ranking metrics and the STS reader on hand-made inputs."""

import numpy as np
import pytest

from rerank.embeddings.evaluate import image_sentence_ranks, paired_ranks, read_sts, recall_summary, sts_pearson
from rerank.errors import InputError

pytestmark = pytest.mark.neural


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


class FixedVectors:
    """An encoder stand-in that returns given vectors for given sentences."""

    def __init__(self, vectors: dict):
        self.vectors = vectors

    def encode(self, sentences, lang, device="cpu", empty="error"):
        return np.array([self.vectors[s] for s in sentences])


def test_sts_pearson_of_known_vectors(tmp_path):
    p = tmp_path / "sts.tsv"
    p.write_text("4\ta\tb\n3\tc\td\n\tno\tgold\n1\te\tf\n", encoding="utf-8")
    enc = FixedVectors({"a": [1.0, 0.0], "b": [1.0, 0.0], "c": [1.0, 0.0], "d": [0.6, 0.8], "e": [1.0, 0.0],
                        "f": [0.0, 1.0]})
    # 5 cos = (5, 3, 0) against gold (4, 3, 1); both means 8/3, deviations (7, 1, -8)/3 and
    # (4, 1, -5)/3: r = (28 + 1 + 40) / sqrt((49 + 1 + 64) * (16 + 1 + 25)) = 69 / sqrt(4788)
    result = sts_pearson(enc, str(p))
    assert result["n"] == 3 and result["pearson"] == pytest.approx(69 / 4788 ** 0.5, abs=1e-12)
    assert result["pearson"] == pytest.approx(0.997176, abs=1e-6)


def test_sts_files_are_read_like_every_text_input(tmp_path):
    """A byte-order mark, CRLF and gzip are fine; bytes that are not UTF-8 are named by line."""
    import gzip

    from rerank.embeddings.evaluate import read_sts
    from rerank.errors import InputError

    text = "4.5\ta man runs\ta man is running\r\n\tno gold\tskipped\r\n1.0\ta dog\ta cat\r\n"
    (tmp_path / "sts.tsv").write_bytes(b"\xef\xbb\xbf" + text.encode())
    with gzip.open(tmp_path / "sts.tsv.gz", "wt", encoding="utf-8") as f:
        f.write(text)
    for name in ("sts.tsv", "sts.tsv.gz"):
        s1, s2, gold = read_sts(str(tmp_path / name))
        assert s1 == ["a man runs", "a dog"] and s2 == ["a man is running", "a cat"] and gold.tolist() == [4.5, 1.0]
    (tmp_path / "bad.tsv").write_bytes(b"1.0\ta\tb\n2.0\t\xff\tc\n")
    with pytest.raises(InputError, match=r"bad.tsv:2: not UTF-8"):
        read_sts(str(tmp_path / "bad.tsv"))
    (tmp_path / "inf.tsv").write_text("inf\ta\tb\n")
    with pytest.raises(InputError, match=r"inf.tsv:1: gold score 'inf' is not finite"):
        read_sts(str(tmp_path / "inf.tsv"))
