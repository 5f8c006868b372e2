"""The one table of the metrics: name, direction (higher or lower is better), display name and
decimals, and the helpers every "keep the best" or "improvement over" site reads direction from.

Built-in metrics are listed in `REGISTRY`; a metric outside it (segment scores read with
`--segment-scores NAME=FILE`, a user's `Metric` subclass) carries its own `MetricInfo`, exposed
as `Metric.info` like the built-ins'. Every helper takes a metric as a registered name, a
`MetricInfo` or an object with an `info` attribute (a `rerank.metrics.Metric`, a tuning metric):

    better(a, b, "ter")          # a is strictly better than b (a < b for TER)
    best_index([48.2, 47.9], m)  # index of the best value, the first of equal ones
    objective(value, m)          # the value oriented so that higher is better (-TER)
    improvement(new, old, m)     # how much better new is than old (TER: old - new)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar, Union

import numpy as np

T = TypeVar("T")


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


_BUILTIN = (
    MetricInfo("bleu", "BLEU"),
    MetricInfo("meteor", "METEOR"),
    MetricInfo("ter", "TER", higher_is_better=False, scale="0-100+ (edits per 100 reference words)"),
    MetricInfo("chrf", "chrF"),
    MetricInfo("chrf++", "chrF++"),
    MetricInfo("length", "Length", scale="100 x output words / reference words", quality=False),
)
REGISTRY: dict[str, MetricInfo] = {m.name: m for m in _BUILTIN}
METRIC_NAMES: tuple[str, ...] = tuple(REGISTRY)                              # every built-in metric
QUALITY_METRICS: tuple[str, ...] = tuple(m.name for m in _BUILTIN if m.quality)  # those a tuner can optimise

MetricLike = Union[str, MetricInfo, object]


def lookup(name: str) -> MetricInfo | None:
    """The registry's entry of a built-in metric (case-insensitive), else None."""
    return REGISTRY.get(name.lower()) if isinstance(name, str) else None


def metric_info(metric: MetricLike) -> MetricInfo:
    """The MetricInfo of a registered name, a MetricInfo, or an object with an `info` attribute.

    Raises ValueError for a name the registry does not know: its direction would be a guess."""
    if isinstance(metric, MetricInfo):
        return metric
    if isinstance(metric, str):
        info = lookup(metric)
        if info is None:
            raise ValueError(f"unknown metric {metric!r} (known: {', '.join(METRIC_NAMES)}); the direction of "
                             "other metrics comes with them (a Metric's or a segment-score metric's info)")
        return info
    info = getattr(metric, "info", None)
    if isinstance(info, MetricInfo):
        return info
    raise TypeError(f"not a metric: {metric!r}")


def display_name(metric: MetricLike) -> str:
    """"BLEU", "TER", "chrF++"...; a name the registry does not know is shown as it is."""
    if isinstance(metric, str) and lookup(metric) is None:
        return metric
    return metric_info(metric).display


def higher_is_better(metric: MetricLike) -> bool:
    return metric_info(metric).higher_is_better


def decimals(metric: MetricLike) -> int:
    if isinstance(metric, str) and lookup(metric) is None:
        return 2
    return metric_info(metric).decimals


def objective(value, metric: MetricLike):
    """The value (a number or an array) oriented so that higher is better: TER -> -TER."""
    sign = metric_info(metric).sign
    return sign * value if np.ndim(value) == 0 else sign * np.asarray(value, dtype=np.float64)


def from_objective(value, metric: MetricLike):
    """The inverse of `objective`: the metric's own value."""
    return objective(value, metric)


def improvement(new, old, metric: MetricLike):
    """How much better `new` is than `old` (positive: better): new - old, or old - new for TER."""
    return metric_info(metric).sign * (new - old)


def better(a: float, b: float, metric: MetricLike) -> bool:
    """a is strictly better than b under the metric's direction."""
    return bool(improvement(a, b, metric) > 0)


def best_index(values: Sequence[float] | np.ndarray, metric: MetricLike) -> int:
    """Index of the best value (the lowest for TER), the first of equal ones; ValueError when empty."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        raise ValueError("best_index of no values")
    return int(np.argmax(objective(values, metric)))


def best_of(items: Iterable[T], metric: MetricLike, key: Callable[[T], float]) -> T:
    """The item whose key(item) is best under the metric's direction, the first of equal ones."""
    items = list(items)
    return items[best_index([key(x) for x in items], metric)]


def rank(values: Sequence[float] | np.ndarray, metric: MetricLike) -> np.ndarray:
    """Indices from the best value to the worst (stable: equal values keep their order)."""
    return np.argsort(-objective(np.asarray(values, dtype=np.float64), metric), kind="stable")
