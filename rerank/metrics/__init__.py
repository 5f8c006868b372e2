"""Evaluation metrics with per-sentence sufficient statistics (see rerank.metrics.base)."""

from __future__ import annotations

from rerank.metrics.base import Metric
from rerank.metrics.sacre import BLEUMetric, CHRFMetric, LengthMetric, TERMetric

METRIC_NAMES = ("bleu", "meteor", "ter", "chrf", "chrf++", "length")


def make_metric(name: str, lang: str = "en", tokenize: str | None = None, lowercase: bool = False,
                ter_case_sensitive: bool = False, meteor_options: dict | None = None) -> Metric:
    """Build a metric by name; defaults equal the sacrebleu CLI's (TER is case-insensitive there).

 Raises ValueError for unknown names (the CLI turns it into exit 2)."""
    key = name.lower()
    if key == "bleu":
        return BLEUMetric(tokenize=tokenize, lowercase=lowercase)
    if key == "chrf":
        return CHRFMetric(lowercase=lowercase)
    if key == "chrf++":
        return CHRFMetric(word_order=2, lowercase=lowercase)
    if key == "ter":
        return TERMetric(case_sensitive=ter_case_sensitive)
    if key == "length":
        return LengthMetric(tokenize=tokenize, lowercase=lowercase)
    if key == "meteor":
        from rerank.metrics.meteor import make_meteor

        return make_meteor(lang, **(meteor_options or {}))
    raise ValueError(f"unknown metric {name!r} (known: {', '.join(METRIC_NAMES)})")


__all__ = ["Metric", "BLEUMetric", "CHRFMetric", "TERMetric", "LengthMetric", "METRIC_NAMES", "make_metric"]
