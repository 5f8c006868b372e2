"""The one table of the metrics, METRICS = {name: class}, and the helpers every "keep the best" or
"improvement over" site reads direction from.

A built-in metric is one class in rerank/metrics/ (a `rerank.metrics.base.Metric` that carries its
name, display name, direction, decimals and the `make_metric` options it takes as class
attributes) plus one entry in METRICS. `make_metric`, REGISTRY (name -> MetricInfo), METRIC_NAMES,
QUALITY_METRICS, the command line's metric choices and the docs' metrics table all read it.

A metric outside it (segment scores read with `--segment-scores NAME=FILE`, a user's `Metric`
subclass) carries its own `MetricInfo`, exposed as `Metric.info` like the built-ins'. Every helper
takes a metric as a registered name, a `MetricInfo` or an object with an `info` attribute (a
`rerank.metrics.Metric`, a tuning metric):

    better(a, b, "ter")          # a is strictly better than b (a < b for TER)
    best_index([48.2, 47.9], m)  # index of the best value, the first of equal ones
    objective(value, m)          # the value oriented so that higher is better (-TER)
    improvement(new, old, m)     # how much better new is than old (TER: old - new)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar, Union

import numpy as np

from rerank.errors import InputError
from rerank.metrics.base import Metric, MetricInfo
from rerank.metrics.comet import COMETMetric
from rerank.metrics.meteor import MeteorMetric
from rerank.metrics.sacre import BLEUMetric, CHRFMetric, CHRFPlusMetric, LengthMetric, TERMetric

T = TypeVar("T")


METRICS: dict[str, type[Metric]] = {
    "bleu": BLEUMetric,
    "meteor": MeteorMetric,
    "ter": TERMetric,
    "chrf": CHRFMetric,
    "chrf++": CHRFPlusMetric,
    "length": LengthMetric,
}
METRIC_NAMES: tuple[str, ...] = tuple(METRICS)                                      # every built-in metric
QUALITY_METRICS: tuple[str, ...] = tuple(name for name, cls in METRICS.items() if cls.quality)  # a tuner's choices

# Metrics that score with a user's model and need the source sentences besides the references:
# `rerank eval`/`report` and `rerank.evaluate` take them (with the model's options, EvalOptions),
# the tuners and the oracle do not (a model score is tuned toward as an n-best column instead).
MODEL_METRICS: dict[str, type[Metric]] = {"comet": COMETMetric}
EVAL_METRIC_NAMES: tuple[str, ...] = METRIC_NAMES + tuple(MODEL_METRICS)          # what evaluation takes by name
# by name: the text metrics only (a model metric's info travels with its object, as segment scores'
# do, so that a user's segment scores named comet keep their own name)
REGISTRY: dict[str, MetricInfo] = {name: cls.class_info() for name, cls in METRICS.items()}

MetricLike = Union[str, MetricInfo, object]
OPTIONS: frozenset[str] = frozenset(o for cls in METRICS.values() for o in cls.options)  # every make_metric option


def make_metric(name: str, **options: Any) -> Metric:
    """The built-in metric `name` (case-insensitive) from METRICS, given the options its class
    declares (`Metric.options`) out of `options`: one set of options (lang, tokenize, lowercase,
    ter_case_sensitive, meteor_options) serves every metric, each takes what it needs. Defaults
    equal the sacrebleu CLI's (TER is case-insensitive there). An unknown name is an InputError
    naming the known ones; an option no metric takes is a TypeError (a misspelling)."""
    unknown = sorted(set(options) - OPTIONS)
    if unknown:
        raise InputError(f"make_metric: unknown option {unknown[0]!r} (known: {', '.join(sorted(OPTIONS))})")
    cls = METRICS.get(name.lower()) if isinstance(name, str) else None
    if cls is None:
        raise InputError(f"unknown metric {name!r} (known: {', '.join(METRIC_NAMES)})")
    return cls.from_options(**{k: v for k, v in options.items() if k in cls.options})


COLUMN_PREFIX = "column:"


def parse_objective(spec: str, option: str = "metric") -> tuple[str, str]:
    """What a metric option names: ("metric", NAME) for a built-in quality metric (QUALITY_METRICS,
    case-insensitive: "TER" gives "ter"), ("column", NAME) for `column:NAME`, a per-hypothesis score
    in the n-best list's own column NAME (case kept). Anything else is an InputError about `option`
    (the keyword, which the command line says as its flag) naming the known choices. Whether the
    column exists is the caller's to check, against its list."""
    known = f"known: {', '.join(QUALITY_METRICS)}, or {COLUMN_PREFIX}NAME for an n-best column"
    if not isinstance(spec, str):
        raise InputError(f"{option} must be a metric name ({known}), not {type(spec).__name__}", option=option)
    if spec[:len(COLUMN_PREFIX)].lower() == COLUMN_PREFIX:
        name = spec[len(COLUMN_PREFIX):]
        if not name.strip():
            raise InputError(f"{option} {spec!r}: {COLUMN_PREFIX}NAME needs the column's NAME", option=option)
        return "column", name
    if spec.strip().lower() in QUALITY_METRICS:
        return "metric", spec.strip().lower()
    raise InputError(f"{option} {spec!r} is not a metric ({known})", option=option)


def parse_interpolation(spec: str, option: str = "metric") -> list[tuple[float, str, str]]:
    """The components of a tuning objective as [(weight, kind, name)], kind and name as
    `parse_objective` gives them. A single metric or column (`bleu`, `column:COMET`) is one component
    of weight 1; an interpolation, as Moses' interpolated scorer, is `SPEC=W,SPEC=W,...`
    (`bleu=0.5,column:comet=0.5`): every component needs its weight (a finite number >= 0), not all
    weights may be 0, and no component may repeat. Anything else is an InputError about `option`."""
    if not isinstance(spec, str) or "=" not in spec:
        kind, name = parse_objective(spec, option)
        return [(1.0, kind, name)]
    components: list[tuple[float, str, str]] = []
    for part in spec.split(","):
        what, eq, weight_text = part.strip().rpartition("=")
        if not eq or not what.strip():
            raise InputError(f"{option} {spec!r}: an interpolation is METRIC=WEIGHT,METRIC=WEIGHT,... "
                             f"(e.g. bleu=0.5,{COLUMN_PREFIX}comet=0.5); {part.strip()!r} is not METRIC=WEIGHT",
                             option=option)
        try:
            weight = float(weight_text)
        except ValueError:
            raise InputError(f"{option} {spec!r}: the weight of {what.strip()} is {weight_text.strip()!r}, not a number",
                             option=option) from None
        if not np.isfinite(weight) or weight < 0:
            raise InputError(f"{option} {spec!r}: the weight of {what.strip()} is {weight_text.strip()}; "
                             "interpolation weights must be finite numbers >= 0", option=option)
        kind, name = parse_objective(what.strip(), option)
        if any((kind, name) == (k, n) for _, k, n in components):
            raise InputError(f"{option} {spec!r}: {what.strip()} is given twice", option=option)
        components.append((weight, kind, name))
    if not any(weight > 0 for weight, _, _ in components):
        raise InputError(f"{option} {spec!r}: every interpolation weight is 0; give at least one a positive weight",
                         option=option)
    return components


def objective_columns(spec: str, option: str = "metric") -> list[str]:
    """The n-best columns a tuning objective reads (`parse_interpolation`), in its order."""
    return [name for _, kind, name in parse_interpolation(spec, option) if kind == "column"]


def check_objective_options(spec: str, *, lower_better: Sequence[str] = (),
                            features: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """The n-best columns a tuning objective reads, after the checks of the options beside it: every
    `lower_better` name is one of them, and none is among the features an option (`features`:
    {option: names}, e.g. tune, fix) tunes or fixes, since the objective is no feature. InputErrors
    name the option."""
    columns = objective_columns(spec)
    stray = [n for n in lower_better if n not in columns]
    if stray:
        raise InputError(f"lower_better {', '.join(stray)}: not a column of the metric {spec!r} (give "
                         "metric column:NAME with lower_better NAME)", option="lower_better")
    for option, listed in (features or {}).items():
        clash = [n for n in listed if n in columns]
        if clash:
            raise InputError(f"{option} {', '.join(clash)}: the column of the tuning metric {spec!r} is the "
                             "objective, not a feature to tune or fix", option=option)
    return columns


def objective_metrics(spec: str, option: str = "metric") -> list[str]:
    """The built-in metrics (which need references) a tuning objective reads, in its order."""
    return [name for _, kind, name in parse_interpolation(spec, option) if kind == "metric"]


def objective_display(spec: str, option: str = "metric") -> str:
    """How a tuning objective is named in print: BLEU, TER, column:COMET, or for an
    interpolation `0.5*BLEU+0.5*column:comet`."""
    components = parse_interpolation(spec, option)
    if len(components) == 1 and "=" not in spec:
        weight, kind, name = components[0]
        return display_name(name) if kind == "metric" else COLUMN_PREFIX + name
    return "+".join(f"{weight:g}*" + (display_name(name) if kind == "metric" else COLUMN_PREFIX + name)
                    for weight, kind, name in components)


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




def markdown_table() -> str:
    """The metrics table of docs/evaluation.md (between its `metrics-table` markers), from METRICS
    and MODEL_METRICS."""
    rows = ["| metric (`--metrics`) | better | statistics | score | options |", "|---|---|---|---|---|"]
    for name, cls in {**METRICS, **MODEL_METRICS}.items():
        info = cls.class_info()
        better_side = info.direction if info.quality else "(not a quality score)"
        options = ", ".join(f"`{o}`" for o in cls.options) or getattr(cls, "options_doc", "none")
        rows.append(f"| {info.display} (`{name}`) | {better_side} | {cls.statistics_doc} | {cls.score_doc} | {options} |")
    return "\n".join(rows) + "\n"
