"""BLEU/chrF/TER/length statistics and vectorised scores against sacrebleu (CLI and classes)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sacrebleu.metrics import BLEU, CHRF, TER

from rerank.errors import InputError
from rerank.metrics import make_metric
from rerank.metrics.sacre_stats import corpus_segment_stats

DATA = os.path.join(os.path.dirname(__file__), "data", "eval")


def lines(name):
    with open(os.path.join(DATA, name), encoding="utf-8") as fh:
        return fh.read().splitlines()


def sacrebleu_stats(bleu: BLEU, hyp: str, refs: list[str]) -> list[int]:
    """sacrebleu's public statistics of one segment: [sys_len, ref_len, correct 1-4, total 1-4]."""
    score = bleu.sentence_score(hyp, refs)
    return [score.sys_len, score.ref_len, *score.counts, *score.totals]


def sacrebleu_cli(ref, hyp, *extra):
    exe = os.path.join(os.path.dirname(sys.executable), "sacrebleu")
    out = subprocess.run([exe, os.path.join(DATA, ref), "-i", os.path.join(DATA, hyp), "-m", "bleu", "chrf", "ter",
                          "-w", "6", "-f", "json", *extra], check=True, capture_output=True, text=True).stdout
    return {d["name"]: d["score"] for d in json.loads(out)}


@pytest.mark.parametrize("lang,hyp", [("de", "cap1.de"), ("de", "good.de.run1"), ("en", "cap2.en")])
def test_scores_equal_sacrebleu_cli(lang, hyp):
    ref = lines(f"ref.{lang}")
    hyps = lines(hyp)
    cli = sacrebleu_cli(f"ref.{lang}", hyp)
    for name, key in (("bleu", "BLEU"), ("chrf", "chrF2"), ("ter", "TER")):
        metric = make_metric(name)
        stats = metric.sentence_stats(hyps, [ref])
        assert stats.shape[0] == len(hyps)
        assert metric.score_from_stats(stats.sum(0)) == pytest.approx(cli[key], abs=5e-6)


def test_lowercase_and_tokenize_none_follow_cli():
    ref, hyps = lines("ref.en"), lines("cap1.en")
    cli = sacrebleu_cli("ref.en", "cap1.en", "-lc", "-tok", "none")
    metric = make_metric("bleu", tokenize="none", lowercase=True)
    assert metric.corpus_score(hyps, [ref]) == pytest.approx(cli["BLEU"], abs=5e-6)
    assert "tok:none" in metric.signature() and "case:lc" in metric.signature()


def test_batched_scores_equal_sacrebleu_formula():
    """Random sub-corpora (as in bootstrap trials) scored in one call equal sacrebleu's per-call scores."""
    ref, hyps = lines("ref.de"), lines("cap1.de")
    rng = np.random.default_rng(0)
    masks = rng.integers(0, 2, size=(50, len(hyps))).astype(float)
    masks[0] = 0  # empty corpus
    masks[1, :] = 0
    masks[1, 3] = 1  # a single short sentence (orders without n-grams)
    for name, cls in (("bleu", BLEU()), ("chrf", CHRF()), ("ter", TER())):
        metric = make_metric(name)
        stats = metric.sentence_stats(hyps, [ref])
        batch = metric.score_from_stats(masks @ stats)
        expect = [cls._compute_score_from_stats(list(row)).score for row in masks @ stats]
        np.testing.assert_allclose(batch, expect, atol=1e-9)


def test_multiple_references_and_length_ratio():
    ref1, ref2, hyps = lines("ref.en"), lines("cap3.en"), lines("cap1.en")
    bleu = make_metric("bleu")
    assert bleu.corpus_score(hyps, [ref1, ref2]) == pytest.approx(BLEU().corpus_score(hyps, [ref1, ref2]).score)
    length = make_metric("length")
    stats = length.sentence_stats(hyps, [ref1])
    expect = 100.0 * sum(len(BLEU().tokenizer(h).split()) for h in hyps) / sum(len(BLEU().tokenizer(r).split()) for r in ref1)
    assert length.score_from_stats(stats.sum(0)) == pytest.approx(expect)


def test_ter_is_lower_is_better_and_unknown_metric():
    assert make_metric("ter").higher_is_better is False
    with pytest.raises(InputError, match="unknown metric"):
        make_metric("rouge")


@pytest.mark.parametrize("tokenize", ["13a", "none"])
def test_private_statistics_equal_the_public_api(tokenize):
    """rerank.metrics.sacre_stats is the only caller of sacrebleu's private methods (pinned < 2.7 in
    pyproject.toml): its per-segment statistics must be what sacrebleu's public sentence_score and
    corpus_score report, so an upgrade that changes those methods fails here."""
    hyps = lines("cap1.en")[:12]
    refs = [lines("ref.en")[:12], lines("cap3.en")[:12]]
    bleu = BLEU(tokenize=tokenize)
    corpus = np.asarray(corpus_segment_stats(bleu, hyps, refs)).sum(axis=0)
    public = bleu.corpus_score(hyps, refs)
    assert corpus.tolist() == [public.sys_len, public.ref_len, *public.counts, *public.totals]
    assert corpus.tolist() == np.sum([sacrebleu_stats(bleu, h, [r[i] for r in refs]) for i, h in enumerate(hyps)],
                                     axis=0).tolist()
    ter = TER()
    edits, ref_len = np.asarray(corpus_segment_stats(ter, hyps, refs)).sum(axis=0)
    public = ter.corpus_score(hyps, refs)
    assert (edits, ref_len) == (public.num_edits, pytest.approx(public.ref_length))
    for word_order in (0, 2):   # chrF has no public statistics: compare the scores they give
        chrf = CHRF(word_order=word_order)
        stats = np.asarray(corpus_segment_stats(chrf, hyps, refs), dtype=float)
        metric = make_metric("chrf++" if word_order else "chrf")
        assert metric.score_from_stats(stats.sum(0)) == pytest.approx(chrf.corpus_score(hyps, refs).score, abs=1e-9)
        for i in (0, 5):
            expect = chrf.sentence_score(hyps[i], [r[i] for r in refs]).score
            assert metric.score_from_stats(stats[i]) == pytest.approx(expect, abs=1e-9)


def test_sacrebleu_logger_is_left_to_the_process():
    """The library drops sacrebleu's tokenised-period warning only during its own statistics calls:
    the logger's level and filters are untouched afterwards, and sacrebleu's warnings to other code
    (here one logged by the script itself) still reach the handlers."""
    import subprocess
    import sys

    script = (
        "import logging\n"
        "from rerank.metrics import make_metric\n"
        "import rerank.evaluation, rerank.significance\n"
        "m = make_metric('bleu')\n"
        "m.sentence_stats(['ein Hund .'] * 150, [['ein Hund .'] * 150])\n"
        "lg = logging.getLogger('sacrebleu')\n"
        "assert lg.level == logging.NOTSET and not lg.filters, (lg.level, lg.filters)\n"
        "lg.warning('a warning of the script')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "a warning of the script" in done.stderr and "tokenized period" not in done.stderr


WORDS = ["a", "A", "dog", "Dog", "runs", "run", "the", "The", "5,300", "3.5", "U.S.", "-", "--", ".", ",", "'s",
         "don't", "(", ")", "\"", "&amp;", "über", "ÜBER", "naïve", "x-ray", "1.", "e.g.", "?!", "\t", "\u00a0", ""]


def _text(draw_words):
    return " ".join(draw_words)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), tokenize=st.sampled_from(["13a", "none", "intl", "char"]), lowercase=st.booleans(),
       n_refs=st.integers(1, 3))
def test_hypothesis_stats_equal_sacrebleus_per_segment_statistics(data, tokenize, lowercase, n_refs):
    """rerank.metrics.bleu.hypothesis_stats (arrays over blocks of whole lists) gives sacrebleu's own
    statistics of every hypothesis: lengths, the closest reference length, clipped matches."""
    from rerank.metrics.bleu import hypothesis_stats

    text = st.lists(st.sampled_from(WORDS), max_size=9).map(_text) | st.text(max_size=12)
    sizes = data.draw(st.lists(st.integers(0, 5), min_size=1, max_size=6))
    hyps = [data.draw(text) for _ in range(sum(sizes))]
    refs = [[data.draw(text) for _ in sizes] for _ in range(n_refs)]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    got = hypothesis_stats(hyps, offsets, refs, tokenize, lowercase)
    bleu = BLEU(tokenize=tokenize, lowercase=lowercase)
    expect = np.zeros((len(hyps), 10))
    for i in range(len(sizes)):
        lo, hi = offsets[i], offsets[i + 1]
        if hi > lo:
            expect[lo:hi] = [sacrebleu_stats(bleu, h, [stream[i] for stream in refs]) for h in hyps[lo:hi]]
    np.testing.assert_array_equal(got, expect)


def test_hypothesis_stats_on_real_lists_in_several_blocks(monkeypatch):
    """The Joshua n-best lists with 4 references, cut into blocks of a few lists: sacrebleu's numbers."""
    from rerank.metrics import bleu as B
    from rerank.formats import read_nbest, read_references

    folder = os.path.join(os.path.dirname(__file__), "data", "joshua10")
    nbest = read_nbest(os.path.join(folder, "nbest.joshua"))
    refs = read_references([os.path.join(folder, f"ref.{k}") for k in range(4)], nbest.n_sentences)
    monkeypatch.setattr(B, "BLOCK_HYPS", 20)  # 82 hypotheses: blocks of two to four lists
    got = B.hypothesis_stats(nbest.hyps, nbest.offsets, refs)
    bleu = BLEU()
    for i in range(nbest.n_sentences):
        lo, hi = nbest.offsets[i], nbest.offsets[i + 1]
        assert got[lo:hi].tolist() == [sacrebleu_stats(bleu, h, [r[i] for r in refs]) for h in nbest.hyps[lo:hi]]


def test_the_eval_metric_reads_the_one_bleu_implementation():
    """BLEU's eval statistics are rerank.metrics.bleu.hypothesis_stats with one hypothesis per
    sentence, and both are sacrebleu's own per-segment statistics (two references, -lc)."""
    from rerank.metrics.bleu import hypothesis_stats

    rng = np.random.default_rng(5)
    words = [w for w in WORDS if w.strip()]
    hyps, ref1, ref2 = ([" ".join(rng.choice(words, size=rng.integers(0, 12))) for _ in range(60)] for _ in range(3))
    metric = make_metric("bleu", tokenize="13a", lowercase=True)
    got = metric.sentence_stats(hyps, [ref1, ref2])
    np.testing.assert_array_equal(got, hypothesis_stats(hyps, np.arange(61), [ref1, ref2], "13a", True))
    expect = corpus_segment_stats(BLEU(tokenize="13a", lowercase=True), hyps, [ref1, ref2])
    np.testing.assert_array_equal(got, np.asarray(expect, dtype=np.float64))
    assert "nrefs:2" in metric.signature()
