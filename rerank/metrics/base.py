"""Common interface of the evaluation metrics.

Every metric turns (hypotheses, references) into per-sentence sufficient statistics once
(`sentence_stats`, shape n x k) and scores any sum of them (`score_from_stats`), vectorised
over leading batch axes, so randomisation and bootstrap trials score thousands of
pseudo-systems in one numpy call without re-reading text.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class Metric:
    """Base class: subclasses set `name`, `higher_is_better` and implement the two methods."""

    name = "metric"
    higher_is_better = True

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
