"""Common interface of the evaluation metrics, and what every table, tuner and report knows about one.

Every metric turns (hypotheses, references) into per-sentence sufficient statistics once
(`sentence_stats`, shape n x k) and scores any sum of them (`score_from_stats`), vectorised
over leading batch axes, so randomisation and bootstrap trials score thousands of
pseudo-systems in one numpy call without re-reading text.

A metric class carries its own description as class attributes (name, display name, direction,
decimals, scale, whether it is a quality score, the `make_metric` options it takes, and the two
lines the docs' metrics table shows); rerank.metrics.registry's METRICS lists the built-in classes
and the plug-ins (entry-point group `rerank.metrics`) and derives everything else from them.

Whatever the tuners, the oracle and the report do differently for one metric is a method or an
attribute here, which a subclass overrides (BLEU does: rerank.metrics.sacre.BLEUMetric), so that no
caller tests a metric's name: `hypothesis_stats` (the statistics of whole n-best lists),
`sentence_scores` (a hypothesis's own score: BLEU+1 for BLEU), `sentence_label`, `corpus_from_stats`
(the exact corpus value), `signature_for` (the signature before any scoring), `check_options` (the
options refused before any data is read) and `bleu_statistics` (kbmira's background BLEU).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rerank.progress import Progress


@dataclass(frozen=True)
class MetricInfo:
    """What every table, tuner and report needs to know about a metric besides its formula."""

    name: str                    # as on the command line: bleu, ter, chrf++, or a segment-score NAME
    display: str                 # as printed: BLEU, TER, chrF++
    higher_is_better: bool = True
    decimals: int = 2            # shown after the point
    scale: str = "0-100"         # the range of a corpus score, for help texts and axis labels
    quality: bool = True         # False for length: not a quality score (no marks, no direction arrows)

    @property
    def sign(self) -> float:
        """+1.0 for higher-is-better metrics, -1.0 for lower-is-better ones."""
        return 1.0 if self.higher_is_better else -1.0

    @property
    def direction(self) -> str:
        return "higher" if self.higher_is_better else "lower"

    @property
    def arrow(self) -> str:
        """"↑" or "↓" (empty for a metric that is not a quality score)."""
        return "" if not self.quality else "\u2191" if self.higher_is_better else "\u2193"


INFO_FIELDS = ("name", "display", "higher_is_better", "decimals", "scale", "quality")


class Metric:
    """Base class: subclasses set the class attributes below and implement the two methods.

    `info` is the MetricInfo of these attributes: one object per class (so a built-in metric's
    `info` is the registry's entry), or the instance's own where an instance sets one of them
    (segment scores read from a file know their name and direction only then).
    """

    name: str = "metric"         # the name make_metric, --metrics and --metric take
    display: str | None = None   # as printed (default: the name)
    higher_is_better: bool = True
    decimals: int = 2
    scale: str = "0-100"
    quality: bool = True         # a quality score (a tuner can optimise it; tables mark significance)
    options: tuple[str, ...] = ()  # the make_metric options the class takes (`from_options`)
    statistics_doc: str = ""     # the docs' metrics table: the per-sentence statistics ...
    score_doc: str = ""          # ... and the score computed from their sum
    sentence_label: str | None = None  # the name of `sentence_scores` where it is not the metric's own ("BLEU+1")
    bleu_statistics: bool = False  # statistics in BLEU's layout (rerank.metrics.bleu): kbmira's background BLEU reads them

    @classmethod
    def check_options(cls, **options: Any) -> None:
        """Refuse (InputError), before any data is read, the `make_metric` options the class declares
        (`options`: only those are passed) that it cannot take; by default none is refused."""

    @classmethod
    def from_options(cls, **options: Any) -> Metric:
        """An instance from the `make_metric` options the class declares in `options` (only those
        are passed); a class whose constructor names them otherwise overrides this."""
        return cls(**options)

    @classmethod
    def class_info(cls) -> MetricInfo:
        """The MetricInfo of the class attributes, the same object at every call."""
        return _class_info(cls)

    @property
    def info(self) -> MetricInfo:
        if any(field in vars(self) for field in INFO_FIELDS):
            return MetricInfo(self.name, self.display or self.name, bool(self.higher_is_better), self.decimals,
                              self.scale, self.quality)
        return _class_info(type(self))

    def sentence_stats(self, hyps: Sequence[str], refs: Sequence[Sequence[str]]) -> np.ndarray:
        """Per-sentence statistics, float64 array (len(hyps) x k).

        `refs` is a list of reference streams: refs[j][i] is reference j of sentence i.
        """
        raise NotImplementedError

    def prepare(self, texts: Sequence[str]) -> None:
        """Optional: see all hypotheses and references before `sentence_stats` (METEOR loads its
        paraphrase entries for their vocabulary once instead of once per system)."""

    def score_from_stats(self, stats: np.ndarray) -> np.ndarray | float:
        """Corpus score from summed statistics; `stats[..., k]` gives scores of shape `stats.shape[:-1]`."""
        raise NotImplementedError

    def corpus_score(self, hyps: Sequence[str], refs: Sequence[Sequence[str]]) -> float:
        return float(self.score_from_stats(self.sentence_stats(hyps, refs).sum(axis=0)))

    def corpus_from_stats(self, summed: np.ndarray) -> float:
        """The corpus score of one summed statistics vector, exactly (what is printed and recorded);
        `score_from_stats` by default, a metric with a faster batch formula gives its exact one."""
        return float(self.score_from_stats(summed))

    def hypothesis_stats(self, hyps: Sequence[str], offsets: np.ndarray, refs: Sequence[Sequence[str]],
                         progress: Progress = False) -> np.ndarray:
        """The statistics (n_hyps x k, float64) of every hypothesis of n-best lists against its
        sentence's references: `hyps` list by list, `offsets` the lists' bounds (n_sentences + 1),
        refs[j][i] reference j of sentence i. By default `sentence_stats` with each row's references
        repeated; BLEU counts whole lists at once."""
        sentence = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets).astype(np.int64))
        return np.asarray(self.sentence_stats(list(hyps), expand_refs(refs, sentence)), dtype=np.float64)

    def sentence_scores(self, stats: np.ndarray, fraction: bool = False) -> np.ndarray:
        """Each row's own sentence-level score (n,) from its statistics (n, k), as the metric is
        oriented (TER stays TER), on the corpus score's scale or divided by 100 (`fraction`): what the
        oracle picks by, the tuners' sentence-level gains and the report's changed sentences. By
        default the metric of the row alone (`score_from_stats`)."""
        score = np.asarray(self.score_from_stats(np.asarray(stats, dtype=np.float64)), dtype=np.float64)
        return score / 100.0 if fraction else score

    def signature(self) -> str:
        raise NotImplementedError

    def signature_for(self, n_refs: int) -> str:
        """The signature for `n_refs` references per sentence before any scoring (the tuning
        objective's in a weights file): `signature()` by default; sacrebleu's metrics name the number."""
        return self.signature()


def expand_refs(refs: Sequence[Sequence[str]], sentence_of_row: np.ndarray) -> list[list[str]]:
    """Reference streams repeated so that stream k has one entry per hypothesis row."""
    rows = sentence_of_row.tolist()
    return [[stream[i] for i in rows] for stream in refs]


class MeanOfSegments(Metric):
    """A metric whose statistics are [segment score, 1] per sentence ([0, 0]: a sentence that does
    not count) and whose corpus score is their mean: segment scores read from a file, COMET."""

    def score_from_stats(self, stats):
        stats = np.asarray(stats, dtype=np.float64)
        counted = stats[..., 1] > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            score = np.where(counted, stats[..., 0] / np.where(counted, stats[..., 1], 1.0), 0.0)
        return score if score.ndim else float(score)


class SourcedSegments(MeanOfSegments):
    """A MeanOfSegments metric of a model that scores (source, hypothesis, reference) triples
    (COMET, MetricX): each distinct triple of every system and run scored once
    (`prepare_systems`, before the tables ask for statistics) by `score_triples`, a sentence's
    segment score the mean over its references (those not None). Subclasses set `sources` (one
    per sentence) and implement score_triples(triples) -> scores."""

    sources: list[str]
    _scores: dict[tuple[str, str, str], float]

    def score_triples(self, triples: list[tuple[str, str, str]]) -> np.ndarray:
        raise NotImplementedError

    def _triples(self, hyps: Sequence[str], refs: Sequence[Sequence[str]]) -> list[tuple[str, str, str]]:
        from rerank.errors import InputError

        if len(hyps) != len(self.sources):
            raise InputError(f"{self.display}: {len(hyps)} hypotheses but {len(self.sources)} source sentences")
        return [(src, hyp, stream[i]) for i, (src, hyp) in enumerate(zip(self.sources, hyps))
                for stream in refs if stream[i] is not None]

    def prepare_systems(self, runs: Sequence[Sequence[str]], refs: Sequence[Sequence[str]]) -> None:
        """Score every distinct (source, hypothesis, reference) of `runs` once."""
        import logging

        todo = list(dict.fromkeys(t for hyps in runs for t in self._triples(hyps, refs) if t not in self._scores))
        if todo:
            logging.getLogger(type(self).__module__).info(
                "%s: %d distinct (source, hypothesis, reference) triples", self.display, len(todo))
            self._scores.update(zip(todo, np.asarray(self.score_triples(todo)).tolist()))

    def sentence_stats(self, hyps, refs):
        self.prepare_systems([hyps], refs)
        out = np.zeros((len(hyps), 2))
        for i, (src, hyp) in enumerate(zip(self.sources, hyps)):
            values = [self._scores[(src, hyp, stream[i])] for stream in refs if stream[i] is not None]
            if values:
                out[i] = (float(np.mean(values)), 1.0)
        return out


_CLASS_INFO: dict[type, MetricInfo] = {}  # one MetricInfo per class, so that `info is metric_info(name)`


def _class_info(cls: type[Metric]) -> MetricInfo:
    info = _CLASS_INFO.get(cls)
    if info is None:
        info = _CLASS_INFO[cls] = MetricInfo(cls.name, cls.display or cls.name, bool(cls.higher_is_better),
                                             cls.decimals, cls.scale, cls.quality)
    return info
