"""Common interface of the evaluation metrics.

Every metric turns (hypotheses, references) into per-sentence sufficient statistics once
(`sentence_stats`, shape n x k) and scores any sum of them (`score_from_stats`), vectorised
over leading batch axes, so randomisation and bootstrap trials score thousands of
pseudo-systems in one numpy call without re-reading text.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rerank.metrics.registry import MetricInfo, lookup


class Metric:
    """Base class: subclasses set `name` and implement the two methods.

    `info` (direction, display name, decimals) is the registry's entry for a built-in metric
    (rerank.metrics.registry); a metric outside the registry passes its own MetricInfo to
    `set_info`, or (a user's subclass) sets the class attribute `higher_is_better`.
    """

    name = "metric"
    _info: MetricInfo | None = None

    @property
    def info(self) -> MetricInfo:
        if self._info is not None:
            return self._info
        known = lookup(self.name)
        if known is not None:
            return known
        declared = next((c.__dict__["higher_is_better"] for c in type(self).__mro__
                         if "higher_is_better" in c.__dict__ and not isinstance(c.__dict__["higher_is_better"], property)),
                        True)
        return MetricInfo(self.name, self.name, bool(declared))

    def set_info(self, info: MetricInfo) -> None:
        self._info = info

    @property
    def higher_is_better(self) -> bool:
        return self.info.higher_is_better

    @property
    def decimals(self) -> int:
        return self.info.decimals

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
