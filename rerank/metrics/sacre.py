"""BLEU, chrF, TER and the length ratio, with sacrebleu's numbers.

BLEU's statistics are the toolkit's one implementation of them, rerank.metrics.bleu.hypothesis_stats
(sacrebleu's tokenisers, closest reference length and clipping, computed as arrays; tests check
them against sacrebleu's own per-segment statistics). TER's are rerank.metrics.ter's (sacrebleu's
algorithm on token ids, in C; tests/test_ter.py checks them equal to sacrebleu's). chrF's come from
sacrebleu itself (read through rerank.metrics.sacre_stats, the only user of its private methods). So corpus scores
equal the `sacrebleu` CLI; only the final formulas are re-written in numpy so that they run over a
batch axis (randomisation/bootstrap trials). Tests compare both formulas on real data.
"""

from __future__ import annotations

import numpy as np
from sacrebleu.metrics import BLEU, CHRF, TER

from rerank.metrics.bleu import corpus_bleu, corpus_bleu_batch, hypothesis_stats, make_bleu, sentence_bleu_plus1
from rerank.metrics.base import Metric
from rerank.metrics.ter import segment_stats as ter_segment_stats
from rerank.metrics.ter import ter_fraction
from rerank.metrics.sacre_stats import clear_tokenizer_cache, corpus_segment_stats

# Sentences per sacrebleu call: it keeps the tokenised references (BLEU: their n-gram Counters) of a
# whole call alive, so statistics are extracted in chunks into one numpy array.
CHUNK = 2000


def segment_stats(metric, hyps, refs, k: int) -> np.ndarray:
    """(n, k) float64 statistics of hyps[i] against refs[j][i], extracted CHUNK sentences at a time."""
    n = len(hyps)
    out = np.empty((n, k))
    for start in range(0, n, CHUNK):
        end = min(n, start + CHUNK)
        part = corpus_segment_stats(metric, hyps[start:end], [stream[start:end] for stream in refs])
        out[start:end] = np.asarray(part, dtype=np.float64).reshape(end - start, k)
    clear_tokenizer_cache(metric)
    return out


class SacreMetric(Metric):
    """A metric whose signature is its sacrebleu object's (`self.sacre`), which says the number of
    references (nrefs): sacrebleu sets it when it scores, `signature_for` before any scoring."""

    sacre: BLEU | CHRF | TER

    def signature_for(self, n_refs: int) -> str:
        self.sacre.num_refs = n_refs
        return self.signature()


class BLEUMetric(SacreMetric):
    """Corpus BLEU as sacrebleu computes it (exp smoothing, the CLI default).

    Statistics per sentence: [sys_len, ref_len, correct_1..4, total_1..4] (sacrebleu's layout), from
    rerank.metrics.bleu.hypothesis_stats (one hypothesis per sentence), the same numbers the tuners
    and the oracle use. The sacrebleu object gives the signature. A single sentence's own score is
    BLEU+1 (Lin & Och 2004; plain BLEU is 0 for most single sentences), and kbmira tunes toward BLEU
    with its background BLEU of these statistics (`bleu_statistics`).
    """

    name, display = "bleu", "BLEU"
    options = ("tokenize", "lowercase")
    statistics_doc = "sacrebleu's `[sys_len, ref_len, correct_1..4, total_1..4]` (`rerank.metrics.bleu.hypothesis_stats`)"
    score_doc = "sacrebleu's formula, exp smoothing (`rerank.metrics.bleu.corpus_bleu_batch`)"
    sentence_label = "BLEU+1"
    bleu_statistics = True

    @classmethod
    def check_options(cls, **options):
        """An unknown tokenizer is an InputError naming the known ones."""
        make_bleu(options.get("tokenize") or BLEU.TOKENIZER_DEFAULT)

    def __init__(self, tokenize: str | None = None, lowercase: bool = False):
        self.check_options(tokenize=tokenize)
        self.sacre = BLEU(tokenize=tokenize, lowercase=lowercase, smooth_method="exp", force=True)
        self.tokenize, self.lowercase = tokenize or BLEU.TOKENIZER_DEFAULT, lowercase

    def sentence_stats(self, hyps, refs):
        return self.hypothesis_stats(hyps, np.arange(len(hyps) + 1), refs)

    def hypothesis_stats(self, hyps, offsets, refs, progress=False):
        """rerank.metrics.bleu.hypothesis_stats: the n-grams of whole lists counted at once."""
        self.sacre.num_refs = len(refs)  # for the signature, as sacrebleu's own statistics set it
        return hypothesis_stats(list(hyps), offsets, refs, self.tokenize, self.lowercase, progress=progress)

    def score_from_stats(self, stats):
        score = corpus_bleu_batch(stats)  # the project's vectorised sacrebleu formula (rerank.metrics.bleu)
        return score if np.ndim(score) else float(score)

    def corpus_from_stats(self, summed):
        """sacrebleu's own formula (rerank.metrics.bleu.corpus_bleu) of one vector."""
        return corpus_bleu(summed)

    def sentence_scores(self, stats, fraction=False):
        """Sentence BLEU+1 (rerank.metrics.bleu.sentence_bleu_plus1)."""
        plus1 = sentence_bleu_plus1(stats)
        return plus1 if fraction else 100.0 * plus1

    def signature(self):
        return "BLEU|" + str(self.sacre.get_signature())


class CHRFMetric(SacreMetric):
    """chrF (character n-grams; CHRFPlusMetric adds word n-grams) as sacrebleu computes it."""

    name, display = "chrf", "chrF"
    options = ("lowercase",)
    statistics_doc = "sacrebleu's `[hyp, ref, match]` per character order"
    score_doc = "sacrebleu's F-beta (beta = 2) with effective-order averaging"
    word_order = 0  # word n-gram orders besides the 6 character orders
    sacre: CHRF

    def __init__(self, lowercase: bool = False, word_order: int | None = None):
        self.sacre = CHRF(word_order=self.word_order if word_order is None else word_order, lowercase=lowercase)
        self.order = self.sacre.order
        self.beta = self.sacre.beta

    def sentence_stats(self, hyps, refs):
        return segment_stats(self.sacre, hyps, refs, 3 * self.order)

    def score_from_stats(self, stats):
        stats = np.asarray(stats, dtype=np.float64)
        shape = stats.shape[:-1]
        s = stats.reshape(shape + (self.order, 3))
        n_hyp, n_ref, n_match = s[..., 0], s[..., 1], s[..., 2]
        eps = 1e-16
        with np.errstate(divide="ignore", invalid="ignore"):
            prec = np.where(n_hyp > 0, n_match / np.where(n_hyp > 0, n_hyp, 1), eps)
            rec = np.where(n_ref > 0, n_match / np.where(n_ref > 0, n_ref, 1), eps)
            factor = self.beta ** 2
            eff = (n_hyp > 0) & (n_ref > 0)
            count = eff.sum(axis=-1)
            avg_p = np.where(count > 0, (prec * eff).sum(axis=-1) / np.maximum(count, 1), 0.0)
            avg_r = np.where(count > 0, (rec * eff).sum(axis=-1) / np.maximum(count, 1), 0.0)
            denom = factor * avg_p + avg_r
            score = np.where(avg_p + avg_r > 0,
                             100.0 * (1 + factor) * avg_p * avg_r / np.where(denom > 0, denom, 1.0), 0.0)
        return score if score.ndim else float(score)

    def signature(self):
        return ("chrF2++|" if self.sacre.word_order else "chrF2|") + str(self.sacre.get_signature())


class CHRFPlusMetric(CHRFMetric):
    """chrF++: chrF with word unigrams and bigrams (sacrebleu's word_order=2)."""

    name, display = "chrf++", "chrF++"
    statistics_doc = "sacrebleu's `[hyp, ref, match]` per character and word order"
    word_order = 2


class TERMetric(SacreMetric):
    """TER as sacrebleu computes it; lower is better. Statistics: [edits, ref_len], sacrebleu's numbers
    from rerank.metrics.ter (a C kernel on token ids); the sacrebleu object gives the signature."""

    name, display, higher_is_better = "ter", "TER", False
    scale = "0-100+ (edits per 100 reference words)"
    options = ("ter_case_sensitive",)
    statistics_doc = ("sacrebleu's `[edits, ref_len]` (tercom tokenisation, case-insensitive like the sacrebleu CLI; "
                      "`--ter-case-sensitive`)")
    score_doc = "100 · edits / ref_len"

    def __init__(self, normalized: bool = False, no_punct: bool = False, case_sensitive: bool = False):
        self.sacre = TER(normalized=normalized, no_punct=no_punct, case_sensitive=case_sensitive)  # the signature
        self.normalized, self.no_punct, self.case_sensitive = normalized, no_punct, case_sensitive

    @classmethod
    def from_options(cls, **options):
        """make_metric's `ter_case_sensitive` (sacrebleu's TER, like its CLI, ignores case by default)."""
        return cls(case_sensitive=bool(options.get("ter_case_sensitive", False)))

    def sentence_stats(self, hyps, refs):
        refs = [list(stream) for stream in refs]
        stats = ter_segment_stats(list(hyps), refs, normalized=self.normalized, no_punct=self.no_punct,
                                  case_sensitive=self.case_sensitive)  # streams of another length: ValueError
        # the signature's nrefs, as sacrebleu's own statistics set it (-1: it varies between sentences)
        counts = {sum(stream[i] is not None for stream in refs) for i in range(len(hyps))}
        self.sacre.num_refs = counts.pop() if len(counts) == 1 else -1
        return stats

    def score_from_stats(self, stats):
        stats = np.asarray(stats, dtype=np.float64)
        score = ter_fraction(stats[..., 0], stats[..., 1]) * 100.0
        return score if score.ndim else float(score)

    def signature(self):
        return "TER|" + str(self.sacre.get_signature())


class LengthMetric(Metric):
    """Length ratio 100 * hypothesis words / reference words, as MultEval's "Length" column.

    Words are BLEU's tokens; the reference length is BLEU's (closest reference).
    """

    name, display, quality = "length", "Length", False
    scale = "100 x output words / reference words"
    options = ("tokenize", "lowercase")
    statistics_doc = "`[hyp words, ref words]` (BLEU tokens, closest reference)"
    score_doc = "100 · hyp / ref, MultEval's \"Length\""

    def __init__(self, tokenize: str | None = None, lowercase: bool = False):
        self._bleu = BLEUMetric(tokenize=tokenize, lowercase=lowercase)

    def sentence_stats(self, hyps, refs):
        return self._bleu.sentence_stats(hyps, refs)[:, :2].copy()

    def score_from_stats(self, stats):
        stats = np.asarray(stats, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            score = np.where(stats[..., 1] > 0, 100.0 * stats[..., 0] / np.where(stats[..., 1] > 0, stats[..., 1], 1), 0.0)
        return score if score.ndim else float(score)

    def signature(self):
        return "Length|" + "|".join(f for f in self._bleu.signature().split("|")[2:] if not f.startswith(("eff", "smooth")))
