"""Evaluation metrics with per-sentence sufficient statistics (see rerank.metrics.base); the one
table of them, METRICS = {name: class} (the built-in ones and the plug-ins of the entry-point group
rerank.metrics), and `make_metric` are in rerank.metrics.registry."""

from __future__ import annotations

from rerank.metrics.base import Metric, MetricInfo
from rerank.metrics.comet import COMETMetric
from rerank.metrics.registry import (EVAL_METRIC_NAMES, METRIC_NAMES, METRICS, MODEL_METRICS, QUALITY_METRICS,
                                     REGISTRY, best_index, best_of, better, decimals, display_name, higher_is_better,
                                     improvement, make_metric, metric_info, objective)
from rerank.metrics.sacre import BLEUMetric, CHRFMetric, CHRFPlusMetric, LengthMetric, TERMetric

__all__ = ["Metric", "BLEUMetric", "CHRFMetric", "CHRFPlusMetric", "TERMetric", "LengthMetric", "COMETMetric",
           "METRICS", "MODEL_METRICS", "EVAL_METRIC_NAMES",
           "METRIC_NAMES", "QUALITY_METRICS", "REGISTRY", "MetricInfo", "make_metric", "metric_info", "display_name",
           "higher_is_better", "decimals", "objective", "improvement", "better", "best_index", "best_of"]
