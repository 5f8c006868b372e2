"""Evaluation metrics with per-sentence sufficient statistics (see rerank.metrics.base)."""

from __future__ import annotations

from rerank.metrics.base import Metric
from rerank.metrics.registry import (METRIC_NAMES, QUALITY_METRICS, REGISTRY, MetricInfo, best_index, best_of, better,
                                     decimals, display_name, higher_is_better, improvement, metric_info, objective)
from rerank.metrics.sacre import BLEUMetric, CHRFMetric, LengthMetric, TERMetric


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


__all__ = ["Metric", "BLEUMetric", "CHRFMetric", "TERMetric", "LengthMetric", "METRIC_NAMES", "QUALITY_METRICS",
           "REGISTRY", "MetricInfo", "make_metric", "metric_info", "display_name", "higher_is_better", "decimals",
           "objective", "improvement", "better", "best_index", "best_of"]
