"""rerank.metrics.ter: TER statistics of the C kernel and of the Python fallback equal sacrebleu's exactly."""

import os
import random
import shlex
import shutil
import subprocess
import sys
import sysconfig
from itertools import product
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sacrebleu.metrics import TER
from sacrebleu.metrics import lib_ter

from rerank.metrics import make_metric, ter
from rerank.metrics.sacre_stats import corpus_segment_stats

DATA = Path(__file__).parent / "data" / "ter"
BACKENDS = ["python", pytest.param("c", marks=pytest.mark.skipif(ter._kernel is None, reason="C kernel not built"))]
OPTIONS = ("case_sensitive", "normalized", "no_punct", "asian_support")


def sacre_stats(hyps, refs, **options):
    """sacrebleu's TER(**options)._extract_corpus_statistics (through the project's one caller of it)."""
    return np.asarray(corpus_segment_stats(TER(**options), hyps, refs), dtype=np.float64)


def both_backends(hyps, refs, **options):
    """segment_stats of every built backend, checked equal to sacrebleu's statistics."""
    want = sacre_stats(hyps, refs, **options).reshape(-1, 2)
    for backend in ("python", "c") if ter._kernel is not None else ("python",):
        got = ter.segment_stats(hyps, refs, backend=backend, **options)
        assert got.dtype == np.float64 and got.shape == (len(hyps), 2)
        np.testing.assert_array_equal(got, want, err_msg=f"backend {backend}")


def pair_edits(hyp_words, ref_words):
    """edit_counts of one pair of word lists under every built backend (all equal), and sacrebleu's."""
    ids, offsets = ter.WordIds()([hyp_words, ref_words])
    got = {b: int(ter.edit_counts(ids, offsets, [0], [1], backend=b)[0])
           for b in (("python", "c") if ter._kernel is not None else ("python",))}
    return got, lib_ter.translation_edit_rate(hyp_words, ref_words)[0]


# -- random text ----------------------------------------------------------------------------------

WORDS = st.sampled_from(["a", "b", "c", "the", "The", "dog", "dog.", "a,", "x"])
SENTENCE = st.lists(WORDS, max_size=18).map(" ".join)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), n=st.integers(1, 4), k=st.integers(1, 3))
def test_small_vocabulary_with_several_and_missing_references(data, n, k):
    """Repeated words invite shifts; empty sides and None references (dropped per sentence) included."""
    hyps = data.draw(st.lists(SENTENCE, min_size=n, max_size=n))
    refs = [data.draw(st.lists(SENTENCE, min_size=n, max_size=n)) for _ in range(k)]
    for i in range(n):  # some references missing, never all of a sentence's
        for stream in refs[1:]:
            if data.draw(st.booleans()):
                stream[i] = None
    both_backends(hyps, refs)


PIECES = list("aAbB .,!?;:\"()'s-0123&") + ["&amp;", "&quot;", "\n-", "\n", "\t", "日本", "語", "カタカナ", "ひら", "。",
                                             "、", "，", "！", "「", "」", "한", "Ü", "ß", "ﬁ"]
TEXT = st.lists(st.sampled_from(PIECES), max_size=25).map("".join)


@pytest.mark.parametrize("flags", list(product([False, True], repeat=4)), ids=lambda f: "".join("TF"[not x] for x in f))
@settings(max_examples=8, deadline=None)
@given(hyps=st.lists(TEXT, min_size=2, max_size=2), refs=st.lists(TEXT, min_size=2, max_size=2))
def test_unicode_punctuation_and_every_option(flags, hyps, refs):
    """CJK, full-width and ASCII punctuation, XML escapes, case: every combination of TER's options."""
    both_backends(hyps, [refs], **dict(zip(OPTIONS, flags)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_references_are_tokenised_twice_as_sacrebleu_does(backend):
    """sacrebleu's TER tokenises each reference twice (_cache_references, then _extract_reference_info);
    `normalized` is not idempotent: "'s" before a comma, a period or a tab splits off only in the second
    pass, ".,1" becomes ". , 1". Hypotheses are tokenised once."""
    texts = ["the dog's, tail", "a man's. 3.5 .,1 ok", "it's\tdone", "plain words ."]
    for options in ({"normalized": True}, {"normalized": True, "no_punct": True}, {"normalized": True, "case_sensitive": True}):
        stats = ter.segment_stats(texts, [texts], backend=backend, **options)
        np.testing.assert_array_equal(stats, sacre_stats(texts, [texts], **options))
        assert stats[:3, 0].min() > 0  # the same text as hypothesis and reference: not the same words
        I, J = np.arange(4).repeat(4), np.tile(np.arange(4), 4)
        scorer = TER(**options)
        assert ter.pair_ter(texts, I, J, backend=backend, **options).tolist() == \
            [scorer.sentence_score(texts[i], [texts[j]]).score / 100 for i, j in zip(I, J)]


def random_pair(rng, n, m, vocab):
    """A reference of m words and a hypothesis of n words: a perturbed copy (shifts, drops, repeats)."""
    ref = [rng.choice(vocab) for _ in range(m)]
    hyp = list(ref)
    while len(hyp) > n:
        del hyp[rng.randrange(len(hyp))]
    while len(hyp) < n:
        hyp.insert(rng.randrange(len(hyp) + 1), rng.choice(vocab))
    for _ in range(rng.randint(1, 5)):
        a, size = rng.randrange(len(hyp)), rng.randint(1, 8)
        block = hyp[a:a + size]
        del hyp[a:a + size]
        b = rng.randrange(len(hyp) + 1)
        hyp[b:b] = block
    return hyp, ref


def long_case(seed):
    """60-75 words of 3-6 types (seeds 13 and 18 reach the candidate cap after more than one round)."""
    rng = random.Random(seed)
    n, vocab = rng.randint(55, 75), list("abcdef"[:rng.randint(3, 6)])
    return random_pair(rng, n, n - rng.randint(-5, 5), vocab)


def test_long_sentences_reach_the_distance_size_and_candidate_limits(monkeypatch):
    """Long sentences of few types: shifts of up to 10 words over at most 50 positions, and the cap of 1000
    candidates per sentence, counted over its rounds, the round that reaches it dropped (sacrebleu's
    _shift is watched to show that the cap was reached, and in a later round)."""
    rounds = []
    shift = lib_ter._shift

    def watched(*args):
        out = shift(*args)
        rounds.append(out[2])
        return out

    monkeypatch.setattr(lib_ter, "_shift", watched)
    cases = [long_case(13), long_case(18), random_pair(random.Random(1), 120, 110, list("abcdefgh")),
             random_pair(random.Random(2), 200, 190, list("abcdefghijklmnopqrstu"))]
    capped_later = 0
    for hyp, ref in cases:
        rounds.clear()
        got, want = pair_edits(hyp, ref)
        assert set(got.values()) == {want}, (len(hyp), len(ref), got, want)
        capped_later += len(rounds) > 1 and rounds[-1] >= lib_ter._MAX_SHIFT_CANDIDATES
    assert capped_later == 2


@pytest.mark.parametrize("n, m", [(1, 160), (2, 301), (3, 400), (160, 1), (301, 3), (0, 57), (57, 0), (52, 1)])
def test_extreme_length_ratios_widen_the_beam(n, m):
    """m/n/2 > 25 widens the beam to ceil(m/n/2 + 25); the long side is mostly the short side's words."""
    rng = random.Random(n * 1000 + m)
    vocab = list("abcd")
    hyp, ref = [rng.choice(vocab) for _ in range(n)], [rng.choice(vocab) for _ in range(m)]
    got, want = pair_edits(hyp, ref)
    assert set(got.values()) == {want}, got


# -- real text ------------------------------------------------------------------------------------

def real_text(lang):
    return (DATA / f"val.200.{lang}").read_text(encoding="utf-8").splitlines()


def perturb(lines, seed):
    """System-like outputs: words dropped, repeated, swapped, blocks moved, a few lines shuffled."""
    rng = random.Random(seed)
    out = []
    for line in lines:
        words = line.split()
        for _ in range(rng.randint(0, 3)):
            if not words:
                break
            op, a = rng.random(), rng.randrange(len(words))
            if op < 0.25:
                del words[a]
            elif op < 0.5:
                words.insert(a, words[a])
            elif op < 0.75:
                b = rng.randrange(len(words))
                words[a], words[b] = words[b], words[a]
            else:
                block = words[a:a + rng.randint(1, 4)]
                del words[a:a + len(block)]
                b = rng.randrange(len(words) + 1)
                words[b:b] = block
        out.append(" ".join(words))
    for _ in range(5):
        i, j = rng.randrange(len(out)), rng.randrange(len(out))
        out[i], out[j] = out[j], out[i]
    return out


@pytest.mark.parametrize("lang", ["en", "de"])
def test_multi30k_with_perturbed_outputs(lang):
    refs = real_text(lang)
    hyps = perturb(refs, 1)
    second = perturb(refs, 2)
    second[3] = None
    both_backends(hyps, [refs])
    both_backends(hyps, [refs, second], case_sensitive=True)
    both_backends(hyps[:40], [refs[:40]], normalized=True, no_punct=True)


def test_the_metric_uses_these_statistics_and_keeps_its_signature():
    refs = real_text("en")[:50]
    hyps = perturb(refs, 3)
    metric = make_metric("ter")
    np.testing.assert_array_equal(metric.sentence_stats(hyps, [refs]), sacre_stats(hyps, [refs]))
    scorer = TER()
    corpus = scorer.corpus_score(hyps, [refs]).score
    assert metric.signature() == "TER|" + str(scorer.get_signature())
    sensitive = make_metric("ter", ter_case_sensitive=True)
    np.testing.assert_array_equal(sensitive.sentence_stats(hyps, [refs]), sacre_stats(hyps, [refs], case_sensitive=True))
    other = list(refs)
    other[1] = None
    metric.sentence_stats(hyps, [refs, other])
    scorer.corpus_score(hyps, [refs, other])
    assert metric.signature() == "TER|" + str(scorer.get_signature())  # nrefs:var
    assert metric.score_from_stats(metric.sentence_stats(hyps, [refs]).sum(axis=0)) == pytest.approx(corpus, abs=1e-9)


# -- pair_ter and edit_counts ------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_pair_ter_is_sentence_score_over_100(backend):
    texts = real_text("de")[:12] + perturb(real_text("de")[:12], 4) + ["", "   ", "Ein Hund ."]
    rng = np.random.default_rng(0)
    I, J = rng.integers(0, len(texts), 150), rng.integers(0, len(texts), 150)
    got = ter.pair_ter(texts, I, J, backend=backend)
    scorer = TER()
    want = [scorer.sentence_score(texts[i], [texts[j]]).score / 100 for i, j in zip(I, J)]
    assert got.tolist() == want  # bit for bit


@pytest.mark.parametrize("backend", BACKENDS)
def test_edit_counts_do_not_depend_on_order_or_duplicates(backend):
    rng = random.Random(5)
    seqs = [[rng.choice("abcde") for _ in range(rng.randint(0, 25))] for _ in range(12)]
    ids, offsets = ter.WordIds()(seqs)
    H = np.array([rng.randrange(12) for _ in range(80)])
    R = np.array([rng.randrange(12) for _ in range(80)])
    whole = ter.edit_counts(ids, offsets, H, R, backend=backend)
    one_by_one = [int(ter.edit_counts(ids, offsets, [h], [r], backend=backend)[0]) for h, r in zip(H, R)]
    assert whole.dtype == np.int64 and whole.tolist() == one_by_one
    assert whole.tolist() == [lib_ter.translation_edit_rate(seqs[h], seqs[r])[0] for h, r in zip(H, R)]
    order = np.array(rng.sample(range(80), 80))
    assert ter.edit_counts(ids, offsets, H[order], R[order], backend=backend).tolist() == whole[order].tolist()
    assert ter.edit_counts(ids, offsets, [], [], backend=backend).shape == (0,)
    with pytest.raises(IndexError):
        ter.edit_counts(ids, offsets, [0], [12], backend=backend)


@pytest.mark.skipif(ter._kernel is None, reason="C kernel not built")
def test_the_kernel_refuses_what_it_cannot_read_safely():
    """Callers of rerank.metrics._ter itself: integer buffers of the right size only, and an `out` that
    shares memory with the offsets (a pair's edit count becoming a later pair's offset) is an error,
    not a read past the arrays."""
    kernel = ter._kernel
    ids = np.arange(20, dtype=np.int32)
    offsets = np.array([0, 5, 5, 20], dtype=np.int64)
    one = (np.array([0]), np.array([2]), np.zeros(1, dtype=np.int64))
    for bad_ids, bad_offsets in ((ids.astype(np.float32), offsets), (ids, offsets.astype(np.float64)),
                                 (ids.astype(">i4"), offsets), (ids.reshape(4, 5), offsets)):
        with pytest.raises(TypeError, match="native"):
            kernel.edit_counts(bad_ids, bad_offsets, *one)
    kernel.edit_counts(ids.astype(np.uint32), offsets, *one)  # signed or not, the values are checked
    with pytest.raises(ValueError, match="changed during the call"):
        kernel.edit_counts(ids, offsets, np.array([2, 1]), np.array([1, 0]), offsets[1:3])


def test_word_ids_keep_their_table_between_calls():
    words = ter.WordIds()
    ids1, off1 = words([["a", "b"], [], ["b", "c"]])
    ids2, off2 = words([["c", "a", "d"]])
    assert ids1.dtype == np.int32 and off1.dtype == np.int64
    assert ids1.tolist() == [0, 1, 1, 2] and off1.tolist() == [0, 2, 2, 4]
    assert ids2.tolist() == [2, 0, 3] and off2.tolist() == [0, 3]
    assert ter.tokenize(["The dog,  ran.  \n"], normalized=True) == [["the", "dog", ",", "ran", "."]]


def test_bad_input():
    with pytest.raises(ValueError, match="reference stream"):
        ter.segment_stats(["a", "b"], [["a"]])
    with pytest.raises(ValueError, match="no reference"):
        ter.segment_stats(["a", "b"], [["a", None]])
    with pytest.raises(ValueError, match="backend"):
        ter.segment_stats(["a"], [["a"]], backend="fortran")
    assert ter.segment_stats([], [[]]).shape == (0, 2)


# -- the build ------------------------------------------------------------------------------------

def test_the_c_kernel_is_built_wherever_a_c_compiler_is():
    """An install with a C compiler builds rerank.metrics._ter (optional=True would hide a broken build)."""
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")[:1] or ["cc"]
    if shutil.which(cc[0]) is None:
        pytest.skip(f"no C compiler ({cc[0]}): the Python fallback serves")
    assert ter._kernel is not None, "a C compiler is here but rerank.metrics._ter is not built: pip install -e ."
    assert os.environ.get("RERANK_TER_BACKEND") == "python" or ter.BACKEND == "c"


def test_the_environment_variable_forces_the_fallback():
    code = "from rerank.metrics import ter; print(ter.BACKEND)"
    env = dict(os.environ, RERANK_TER_BACKEND="python")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "python"
