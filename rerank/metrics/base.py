"""Common interface of the evaluation metrics, and what every table, tuner and report knows about one.

Every metric turns (hypotheses, references) into per-sentence sufficient statistics once
(`sentence_stats`, shape n x k) and scores any sum of them (`score_from_stats`), vectorised
over leading batch axes, so randomisation and bootstrap trials score thousands of
pseudo-systems in one numpy call without re-reading text.

A metric class carries its own description as class attributes (name, display name, direction,
decimals, scale, whether it is a quality score, the `make_metric` options it takes, and the two
lines the docs' metrics table shows); rerank.metrics.registry's METRICS lists the built-in classes
and derives everything else from them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


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

    def signature(self) -> str:
        raise NotImplementedError


class MeanOfSegments(Metric):
    """A metric whose statistics are [segment score, 1] per sentence ([0, 0]: a sentence that does
    not count) and whose corpus score is their mean: segment scores read from a file, COMET."""

    def score_from_stats(self, stats):
        stats = np.asarray(stats, dtype=np.float64)
        counted = stats[..., 1] > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            score = np.where(counted, stats[..., 0] / np.where(counted, stats[..., 1], 1.0), 0.0)
        return score if score.ndim else float(score)


_CLASS_INFO: dict[type, MetricInfo] = {}  # one MetricInfo per class, so that `info is metric_info(name)`


def _class_info(cls: type[Metric]) -> MetricInfo:
    info = _CLASS_INFO.get(cls)
    if info is None:
        info = _CLASS_INFO[cls] = MetricInfo(cls.name, cls.display or cls.name, bool(cls.higher_is_better),
                                             cls.decimals, cls.scale, cls.quality)
    return info
