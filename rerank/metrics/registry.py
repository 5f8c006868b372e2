"""The one table of the metrics, METRICS = {name: class}, and the helpers every "keep the best" or
"improvement over" site reads direction from.

A built-in metric is one class in rerank/metrics/ (a `rerank.metrics.base.Metric` that carries its
name, display name, direction, decimals and the `make_metric` options it takes as class
attributes) plus one entry in BUILTIN; a plug-in metric is such a class registered in the
entry-point group `rerank.metrics` (docs/plugins.md). METRICS is both, a `rerank.plugins.Registry`
read on first use, so that importing this module scans no entry points and a built-in name is found
without the scan. `make_metric`, REGISTRY (name -> MetricInfo), METRIC_NAMES, QUALITY_METRICS and
EVAL_METRIC_NAMES (views of the table, plug-ins included), the command line's checks and the docs'
metrics table (the built-in metrics) all read it.

A metric outside it (segment scores read with `--segment-scores NAME=FILE`, a user's `Metric`
object) carries its own `MetricInfo`, exposed as `Metric.info` like the built-ins'. Every helper
takes a metric as a registered name, a `MetricInfo` or an object with an `info` attribute (a
`rerank.metrics.Metric`, a tuning metric):

    better(a, b, "ter")          # a is strictly better than b (a < b for TER)
    best_index([48.2, 47.9], m)  # index of the best value, the first of equal ones
    objective(value, m)          # the value oriented so that higher is better (-TER)
    improvement(new, old, m)     # how much better new is than old (TER: old - new)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, Union

import numpy as np

from rerank.errors import InputError
from rerank.metrics.base import Metric, MetricInfo
from rerank.metrics.bertscore import BERTScoreMetric
from rerank.metrics.bleurt import BLEURTMetric
from rerank.metrics.comet import COMETMetric
from rerank.metrics.meteor import MeteorMetric
from rerank.metrics.metricx import MetricXMetric
from rerank.metrics.sacre import BLEUMetric, CHRFMetric, CHRFPlusMetric, LengthMetric, TERMetric
from rerank.plugins import PluginError, Registry

T = TypeVar("T")


BUILTIN: dict[str, type[Metric]] = {
    "bleu": BLEUMetric,
    "meteor": MeteorMetric,
    "ter": TERMetric,
    "chrf": CHRFMetric,
    "chrf++": CHRFPlusMetric,
    "length": LengthMetric,
}
# Metrics that score with a user's model and need the source sentences besides the references:
# `rerank eval`/`report` and `rerank.evaluate` take them (with the model's options, EvalOptions),
# the tuners and the oracle do not (a model score is tuned toward as an n-best column instead).
MODEL_METRICS: dict[str, type[Metric]] = {"comet": COMETMetric, "bertscore": BERTScoreMetric, "bleurt": BLEURTMetric,
                                          "metricx": MetricXMetric}
OPTIONS: frozenset[str] = frozenset(o for cls in BUILTIN.values() for o in cls.options)  # every make_metric option


def _check_plugin(name: str, entry: Any) -> None:
    """A plug-in metric is a Metric subclass named as its entry point, in lower case (names are
    matched case-insensitively), with no character of the objective syntax (`column:NAME`,
    `bleu=0.5,ter=0.5`), not the model metric's name, and taking only make_metric's options."""
    where = f"plug-in metric {name!r} of rerank.metrics"
    if not (isinstance(entry, type) and issubclass(entry, Metric)):
        raise PluginError(f"{where} is not a rerank.metrics.base.Metric subclass: {entry!r}")
    if entry.name != name:
        raise PluginError(f"{where}: its class {entry.__name__} is named {entry.name!r}; the entry point's name "
                          "must be the class's `name`")
    if name != name.lower() or not name.strip() or any(c in name for c in ",=: ") or name in MODEL_METRICS:
        raise PluginError(f"{where}: a metric's name is lower case, without ',', '=', ':' or spaces, and not "
                          f"{', '.join(MODEL_METRICS)}")
    unknown = sorted(set(entry.options) - OPTIONS)
    if unknown:
        raise PluginError(f"{where} takes the option {unknown[0]!r}, which make_metric does not have "
                          f"(known: {', '.join(sorted(OPTIONS))})")


PLUGINS: Registry[type[Metric]] = Registry("rerank.metrics", "metric", builtin=lambda: BUILTIN, check=_check_plugin)


def metric_class(name: object) -> type[Metric] | None:
    """The class of the text metric `name` (case-insensitive), built-in or a plug-in, else None; a
    built-in name is found without the plug-ins' entry-point scan."""
    if not isinstance(name, str):
        return None
    key = name.lower()
    return BUILTIN.get(key) or PLUGINS.table().get(key)


def metric_names(*, quality: bool = False, models: bool = False, builtin: bool = False) -> tuple[str, ...]:
    """The metrics' names in table order: every text metric (built-in, then plug-ins; `builtin`:
    the built-in ones only, what a help text lists without loading plug-ins), only the quality
    scores (`quality`: what a tuner and an oracle take), then the model metrics (`models`: what
    evaluation takes by name)."""
    table = BUILTIN if builtin else PLUGINS.table()
    names = tuple(name for name, cls in table.items() if cls.quality or not quality)
    return names + tuple(MODEL_METRICS) if models else names


class _Names(Sequence[str]):
    """A tuple of `metric_names(**selection)`, read on every use, so that plug-ins count and importing
    the module loads none; `in` a built-in name loads none either."""

    def __init__(self, **selection: bool) -> None:
        self._selection = selection

    def _names(self, builtin: bool = False) -> tuple[str, ...]:
        return metric_names(**self._selection, builtin=builtin)

    def __contains__(self, name: object) -> bool:
        return name in self._names(builtin=True) or name in self._names()

    def __getitem__(self, index):
        return self._names()[index]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def __add__(self, other: Iterable[str]) -> tuple[str, ...]:
        return self._names() + tuple(other)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, (tuple, list, _Names)) and self._names() == tuple(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._names())


class _Table(Mapping[str, T]):
    """name -> what `of` gives for the class of every text metric (METRICS: the class itself,
    REGISTRY: its MetricInfo), read on every use; a built-in name is found without the scan."""

    def __init__(self, of: Callable[[type[Metric]], T]) -> None:
        self._of = of

    def __getitem__(self, name: str) -> T:
        cls = BUILTIN.get(name) or PLUGINS.table()[name]
        return self._of(cls)

    def __contains__(self, name: object) -> bool:
        return name in BUILTIN or name in PLUGINS

    def __iter__(self) -> Iterator[str]:
        return iter(PLUGINS.table())

    def __len__(self) -> int:
        return len(PLUGINS.table())


METRICS: Mapping[str, type[Metric]] = _Table(lambda cls: cls)        # every text metric: built-in, plug-ins
REGISTRY: Mapping[str, MetricInfo] = _Table(lambda cls: cls.class_info())  # by name (a model metric's info
# travels with its object, as segment scores' do, so that a user's segment scores named comet keep their own name)
METRIC_NAMES: Sequence[str] = _Names()                      # every text metric
QUALITY_METRICS: Sequence[str] = _Names(quality=True)       # a tuner's and an oracle's choices
EVAL_METRIC_NAMES: Sequence[str] = _Names(models=True)      # what evaluation takes by name

MetricLike = Union[str, MetricInfo, object]


def _class_and_options(name: str, options: Mapping[str, Any]) -> tuple[type[Metric], dict[str, Any]]:
    """The class of metric `name` and the options of `options` it declares; an option no metric
    takes (a misspelling) or an unknown name is an InputError naming the known ones."""
    unknown = sorted(set(options) - OPTIONS)
    if unknown:
        raise InputError(f"make_metric: unknown option {unknown[0]!r} (known: {', '.join(sorted(OPTIONS))})")
    cls = metric_class(name)
    if cls is None:
        raise InputError(f"unknown metric {name!r} (known: {', '.join(METRIC_NAMES)})")
    return cls, {k: v for k, v in options.items() if k in cls.options}


def make_metric(name: str, **options: Any) -> Metric:
    """The metric `name` (case-insensitive) of METRICS, built-in or a plug-in, given the options its
    class declares (`Metric.options`) out of `options`: one set of options (lang, tokenize,
    lowercase, ter_case_sensitive, meteor_options) serves every metric, each takes what it needs.
    Defaults equal the sacrebleu CLI's (TER is case-insensitive there). An unknown name is an
    InputError naming the known ones; so is an option no metric takes (a misspelling)."""
    cls, declared = _class_and_options(name, options)
    return cls.from_options(**declared)


def is_quality(metric: object) -> bool:
    """Whether a metric (a name, a MetricInfo or an object with `info`) is a quality score, which gets
    significance marks and a direction (False for length, a plug-in's `quality = False` too); a name
    that is no registered metric (segment scores) is one."""
    if isinstance(metric, str):
        cls = metric_class(metric)
        return bool(getattr(cls, "quality", True))
    info = getattr(metric, "info", metric)
    return bool(getattr(info, "quality", True))


def quality_in(table: object, metric: str) -> bool:
    """`is_quality` of a table's metric `metric`: its object when the table keeps it (`metric_objects`),
    else by the name (a table read back, or built by hand)."""
    return is_quality(getattr(table, "metric_objects", {}).get(metric, metric))


def check_metric_options(name: str, **options: Any) -> None:
    """`make_metric`'s checks that need no data, without making the metric: the name, the options'
    names and what the class refuses before any data is read (`Metric.check_options`: BLEU's
    tokenizer), so that a command stops before it reads a large file."""
    cls, declared = _class_and_options(name, options)
    cls.check_options(**declared)


COLUMN_PREFIX = "column:"


def parse_objective(spec: str, option: str = "metric") -> tuple[str, str]:
    """What a metric option names: ("metric", NAME) for a quality metric of the table (QUALITY_METRICS,
    plug-ins included, case-insensitive: "TER" gives "ter"), ("column", NAME) for `column:NAME`, a
    per-hypothesis score in the n-best list's own column NAME (case kept). Anything else is an
    InputError about `option` (the keyword, which the command line says as its flag) naming the
    known choices. Whether the column exists is the caller's to check, against its list."""
    def known() -> str:
        return f"known: {', '.join(QUALITY_METRICS)}, or {COLUMN_PREFIX}NAME for an n-best column"

    if not isinstance(spec, str):
        raise InputError(f"{option} must be a metric name ({known()}), not {type(spec).__name__}", option=option)
    if spec[:len(COLUMN_PREFIX)].lower() == COLUMN_PREFIX:
        name = spec[len(COLUMN_PREFIX):]
        if not name.strip():
            raise InputError(f"{option} {spec!r}: {COLUMN_PREFIX}NAME needs the column's NAME", option=option)
        return "column", name
    if spec.strip().lower() in QUALITY_METRICS:
        return "metric", spec.strip().lower()
    raise InputError(f"{option} {spec!r} is not a metric ({known()})", option=option)


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
                         "metric column:NAME with lower_better NAME)", option="lower_better", mentions=("lower_better",))
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


def column_signature(name: str, lower_better: bool = False) -> str:
    """The signature of the n-best column `name` as a metric (a tuning objective, an oracle's)."""
    return f"{COLUMN_PREFIX}{name} (mean over sentences, {'lower' if lower_better else 'higher'} is better)"


def objective_signature(spec: str, lower_better: Sequence[str] = (), tokenize: str = "13a", lowercase: bool = False,
                        lang: str = "en", n_refs: int = 1) -> str:
    """The signature of a tuning objective, as a weights file records it: a metric's for `n_refs`
    references (`Metric.signature_for`: sacrebleu's, as `rerank eval` prints it), a column's
    (`column_signature`; `lower_better` names the columns whose lower values are better), or for an
    interpolation its components' with their weights joined by ` + `."""
    components = parse_interpolation(spec)

    def one(kind: str, name: str) -> str:
        if kind == "metric":
            return make_metric(name, lang=lang, tokenize=tokenize, lowercase=lowercase).signature_for(n_refs)
        return column_signature(name, name in lower_better)

    if len(components) == 1 and "=" not in spec:
        return one(components[0][1], components[0][2])
    return " + ".join(f"{w:g} * {one(kind, name)}" for w, kind, name in components)


def lookup(name: str) -> MetricInfo | None:
    """The registry's entry of a metric of the table (case-insensitive), else None."""
    cls = metric_class(name)
    return None if cls is None else cls.class_info()


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
    """The metrics table of docs/evaluation.md (between its `metrics-table` markers): the built-in
    metrics (BUILTIN, MODEL_METRICS)."""
    rows = ["| metric (`--metrics`) | better | statistics | score | options |", "|---|---|---|---|---|"]
    for name, cls in {**BUILTIN, **MODEL_METRICS}.items():
        info = cls.class_info()
        better_side = info.direction if info.quality else "(not a quality score)"
        options = ", ".join(f"`{o}`" for o in cls.options) or getattr(cls, "options_doc", "none")
        rows.append(f"| {info.display} (`{name}`) | {better_side} | {cls.statistics_doc} | {cls.score_doc} | {options} |")
    return "\n".join(rows) + "\n"
