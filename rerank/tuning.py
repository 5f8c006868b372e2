"""The tuner interface: tuning data (merged duplicates, metric statistics, tuned/fixed features)
and the `Tuner` base class that tuner plug-ins (entry-point group `rerank.tuners`) implement.

Everything a tuner needs is computed once here: the feature matrix, per-hypothesis metric
sufficient statistics (BLEU by default, any metric of rerank.metrics.registry.METRICS), CSR offsets, and
which columns are tuned. Evaluating a weight vector on the whole tuning set is then one
matrix-vector product, a segment arg-max and a sum of statistic rows.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from dataclasses import dataclass, field

import numpy as np

from rerank.dedup import distinct_bytes, distinct_rows
from rerank.errors import InputError
from rerank.metrics.base import Metric
from rerank.metrics.registry import MetricInfo, best_index, better, make_metric, metric_info, objective
from rerank.nbest import NBestList
from rerank.options import Configurable
from rerank.progress import Progress
from rerank.weights import best_rows

log = logging.getLogger(__name__)


def merge_duplicates(nbest: NBestList, strings: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Rows to keep: the first of every group of hypotheses of one sentence that share both the
    string and the whole feature vector (such rows are indistinguishable to every tuner).

    Hypotheses that share only the string, or only the features, all stay. Rows are compared by
    their bytes (rerank.dedup), so -0.0 and 0.0 are different features. `strings`: the list's
    `unique_strings`, when the caller has them.
    """
    _, pair = unique_strings(nbest) if strings is None else strings
    return distinct_rows(nbest.features, salt=pair)[1]


def kept_strings(strings: tuple[np.ndarray, np.ndarray], kept: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`unique_strings` of the list cut to the rows `kept` (ascending, holding the first row of every
    distinct string, as `merge_duplicates` keeps them), from the whole list's: the same numbers."""
    leads, ids = strings
    return np.searchsorted(kept, leads), ids[kept]


@dataclass
class TuningMetric:
    """What a tuner optimises: per-hypothesis statistics and two corpus numbers, named apart.

    - `objective(stats (..., k)) -> (...)`: vectorised, oriented so that higher is better (-TER for
      TER): what tuners maximise and compare inside;
    - `value(summed) -> float`: the metric's own value (TER, not -TER): what is printed, recorded in
      weights.json and equal to `rerank eval`'s number.

    `info` is the metric's registry entry (direction, display name; rerank.metrics.registry):
    `better`, `best_index` compare values by it. `scorer` is the Metric of a metric objective (made
    from `name` when not given), whose `sentence_scores` are its sentence-level objective.
    """

    name: str
    stats: np.ndarray
    objective: Callable[[np.ndarray], np.ndarray]
    exact: Callable[[np.ndarray], float] | None = None  # exact scalar scorer of the value, if different
    info: MetricInfo | None = None                       # default: the registry's entry for `name`
    # For a column or an interpolated objective: each hypothesis's sentence-level objective (higher
    # is better, on the objective's own scale), what MIRA's gains and PRO's pairs use; None for a
    # metric (its scorer's sentence_scores).
    sentence: np.ndarray | None = None
    columns: tuple[str, ...] = ()                        # n-best columns the objective reads (never features)
    components: list = field(default_factory=list)       # [{"weight", "metric" or "column", "higher_is_better"}]
    scorer: Metric | None = None                         # a metric objective's Metric (default: make_metric(name))
    # The unit of the sentence-level objective, what PRO's gap threshold is a fraction of: 1 for a
    # metric (its sentence score as a fraction), a column's spread (`column_spread`), an
    # interpolation's sum_k w_k x its components' (100 for a metric in points).
    scale: float = 1.0

    def __post_init__(self) -> None:
        if self.info is None:
            self.info = metric_info(self.name)
        if self.scorer is None and self.sentence is None:
            self.scorer = make_metric(self.name)

    def sentence_scores(self, fraction: bool = False) -> np.ndarray:
        """Each hypothesis's sentence-level objective, higher is better: a metric's own sentence
        score (`Metric.sentence_scores`: BLEU+1 for BLEU, the metric of the sentence alone otherwise)
        oriented (-TER), in points or as a fraction (`fraction`); `sentence` for a column or an
        interpolation, on the objective's own scale."""
        if self.sentence is not None:
            return self.sentence
        assert self.info is not None and self.scorer is not None  # set by __post_init__
        return self.info.sign * self.scorer.sentence_scores(self.stats, fraction)

    @property
    def display(self) -> str:
        """The metric's name in print: BLEU, TER, column:COMET, 0.5*BLEU+0.5*column:comet."""
        assert self.info is not None  # set by __post_init__
        return self.info.display

    def value(self, summed: np.ndarray) -> float:
        """The metric's own value (e.g. TER, not -TER) for one summed statistics vector."""
        if self.exact is not None:
            return float(self.exact(summed))
        return self.value_of(float(self.objective(summed)))

    def value_of(self, objective: float) -> float:
        """The metric's own value of an objective (TER of -TER)."""
        assert self.info is not None  # set by __post_init__
        return float(self.info.sign * objective)

    def better(self, a: float, b: float) -> bool:
        """Value a is strictly better than value b (a < b for TER)."""
        return better(a, b, self.info)

    def best_index(self, values: Sequence[float] | np.ndarray) -> int:
        """Index of the best of these values, the first of equal ones."""
        return best_index(values, self.info)


def unique_strings(nbest: NBestList) -> tuple[np.ndarray, np.ndarray]:
    """(rows, inverse): the first row of every distinct (sentence, string) pair, and for every row
    the index of its pair in `rows`. Decoders often emit one string with several derivations;
    text statistics are computed once per pair. Strings are compared by their UTF-8 bytes, in the
    n-best list's buffer (rerank.dedup)."""
    buffer, offsets = nbest.hyps.raw()
    ids, leads = distinct_bytes(buffer, offsets[:-1], np.diff(offsets), salt=nbest.sentence_of_hyp)
    return leads, ids


def bleu_metric(nbest: NBestList, refs: Sequence[Sequence[str]], tokenize: str = "13a", lowercase: bool = False,
                progress: Progress = False) -> TuningMetric:
    """Corpus BLEU exactly as sacrebleu computes it (and as `rerank eval` reports it)."""
    return named_metric("bleu", nbest, refs, tokenize, lowercase, progress=progress)


def named_metric(name: str, nbest: NBestList, refs: Sequence[Sequence[str]], tokenize: str = "13a", lowercase: bool = False,
                 lang: str = "en", progress: Progress = False,
                 strings: tuple[np.ndarray, np.ndarray] | None = None) -> TuningMetric:
    """Any metric of `rerank.metrics` (BLEU, TER, chrF, chrF++, METEOR, a plug-in), per hypothesis
    (`row_stats`, `strings` its distinct strings if known), its objective oriented by its direction
    and its value its exact corpus score (`Metric.corpus_from_stats`: sacrebleu's own formula for BLEU)."""
    metric = make_metric(name, lang=lang, tokenize=tokenize, lowercase=lowercase)  # bad names: InputError
    info = metric.info
    return TuningMetric(name, row_stats(metric, nbest, refs, progress, strings),
                        lambda s: objective(metric.score_from_stats(s), info), exact=metric.corpus_from_stats,
                        info=info, scorer=metric)


def column_metric(nbest: NBestList, name: str, lower_better: bool = False) -> TuningMetric:
    """The n-best list's column `name` as a tuning metric: statistics [value, 1] per hypothesis, so
    the summed statistics of the chosen hypotheses give the mean value over the sentences (the
    value; the objective is the mean, negated when `lower_better`); the sentence-level objective of
    a hypothesis is its (oriented) value."""
    check_objective_column(nbest, name)
    values = np.asarray(nbest.column(name), dtype=np.float64)
    sign = -1.0 if lower_better else 1.0
    info = MetricInfo(f"column:{name}", f"column:{name}", not lower_better, 4, "the column's")

    def column_objective(s: np.ndarray) -> np.ndarray:
        s = np.asarray(s, dtype=np.float64)
        return sign * s[..., 0] / np.maximum(s[..., 1], 1.0)

    stats = np.column_stack([values, np.ones_like(values)])
    return TuningMetric(f"column:{name}", stats, column_objective, info=info, sentence=sign * values, columns=(name,),
                        components=[{"weight": 1.0, "column": name, "higher_is_better": not lower_better}],
                        scale=column_spread(values))


def column_spread(values: np.ndarray) -> float:
    """A column's range without its extreme 1% on either side (the 1st to the 99th percentile of its
    values; the whole range if that is 0, and 1 for a constant column): what a gap threshold of a
    fraction of the metric's 0-1 range becomes on the column's own scale."""
    lo, hi = np.percentile(values, [1.0, 99.0])
    spread = float(hi - lo) or float(np.ptp(values))
    return spread if spread > 0 and np.isfinite(spread) else 1.0


def check_objective_column(nbest: NBestList, name: str) -> None:
    """InputError (option metric) unless `name` is a column of the list with a finite value everywhere."""
    if name not in nbest.feature_names:
        columns = nbest.feature_names
        listed = ", ".join(columns[:30]) + (f", ... ({len(columns)} in all)" if len(columns) > 30 else "")
        raise InputError(f"metric column:{name}: the n-best list has no column {name!r} (its columns: {listed or 'none'})",
                         option="metric")
    values = nbest.column(name)
    bad = np.flatnonzero(~np.isfinite(values))
    if len(bad):
        raise InputError(f"metric column:{name}: {len(bad)} hypotheses have no finite value "
                         f"(first: row {int(bad[0])}, {values[bad[0]]})", option="metric")


def objective_metric(spec: str, nbest: NBestList, refs: Sequence[Sequence[str]] | None, *,
                     lower_better: Sequence[str] = (), tokenize: str = "13a", lowercase: bool = False, lang: str = "en",
                     progress: Progress = False, strings: tuple[np.ndarray, np.ndarray] | None = None) -> TuningMetric:
    """The tuning metric of an objective (`rerank.metrics.registry.parse_interpolation`): a built-in
    metric (`named_metric`), a column `column:NAME` (`column_metric`, lower is better for the names
    in `lower_better`), or an interpolation `bleu=0.5,column:comet=0.5`, as Moses' interpolated
    scorer: the statistics are the components' side by side, the objective is sum_k w_k objective_k
    (each oriented by its own direction, on its own scale: BLEU 0-100, a column as it is), higher is
    better, and its value is that objective; the sentence-level objective is sum_k w_k times the
    component's on the scale of its corpus value (`TuningMetric.sentence_scores`: BLEU+1 in points
    for BLEU, -TER for TER, a column as it is). `strings`: `unique_strings` of `nbest`, if known."""
    from rerank.metrics.registry import check_objective_options, parse_interpolation

    components = parse_interpolation(spec)
    columns = check_objective_options(spec, lower_better=lower_better)
    if any(kind == "metric" for _, kind, _ in components) and refs is None:
        raise InputError(f"refs are needed for the metric {spec!r} (only column:NAME needs none)", option="refs")
    parts = [named_metric(name, nbest, refs or [], tokenize, lowercase, lang, progress, strings) if kind == "metric"
             else column_metric(nbest, name, name in lower_better) for _, kind, name in components]
    if len(components) == 1 and "=" not in spec:
        return parts[0]
    weights = [w for w, _, _ in components]
    bounds = np.cumsum([0] + [p.stats.shape[1] for p in parts]).tolist()

    def interpolated(s: np.ndarray) -> np.ndarray:
        s = np.asarray(s, dtype=np.float64)
        total = np.zeros(s.shape[:-1])
        for w, p, a, b in zip(weights, parts, bounds[:-1], bounds[1:]):
            if w:
                total = total + w * np.asarray(p.objective(s[..., a:b]), dtype=np.float64)
        return total

    name = ",".join(f"{'' if kind == 'metric' else 'column:'}{n}={w:g}" for w, kind, n in components)
    info = MetricInfo(name, "+".join(f"{w:g}*{p.info.display}" for w, p in zip(weights, parts)), True, 4,  # type: ignore[union-attr]
                      "mixed")
    sentence = sum(w * p.sentence_scores() for w, p in zip(weights, parts))
    described = [{"weight": w, kind: n, "higher_is_better": p.info.higher_is_better}  # type: ignore[union-attr]
                 for (w, kind, n), p in zip(components, parts)]
    scale = sum(w * (p.scale if p.sentence is not None else 100.0) for w, p in zip(weights, parts))  # metrics in points
    return TuningMetric(name, np.hstack([p.stats for p in parts]), interpolated, info=info,
                        sentence=np.asarray(sentence, dtype=np.float64), columns=tuple(columns), components=described,
                        scale=float(scale))


def row_stats(metric: Metric, nbest: NBestList, refs: Sequence[Sequence[str]], progress: Progress = False,
              strings: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """A `rerank.metrics.Metric`'s statistics (n_hyps x k, float64) of every hypothesis against its
    sentence's references (`Metric.hypothesis_stats`), computed once per distinct (sentence, string)
    pair (`unique_strings`; `strings`: those, when the caller has them)."""
    rows, inverse = unique_strings(nbest) if strings is None else strings
    offsets = np.searchsorted(nbest.sentence_of_hyp[rows], np.arange(nbest.n_sentences + 1), side="left")
    stats = metric.hypothesis_stats([nbest.hyps[int(r)] for r in rows], offsets, refs, progress)
    return np.asarray(stats, dtype=np.float64)[inverse]


@dataclass
class TuningData:
    """An n-best list ready for tuning (duplicates merged), with its metric statistics."""

    nbest: NBestList          # the merged list
    kept_rows: np.ndarray     # row of each kept hypothesis in the input list
    metric: TuningMetric
    tuned: np.ndarray         # bool (F,): which columns the tuner may change
    n_input_hyps: int

    @property
    def feature_names(self) -> list[str]:
        return self.nbest.feature_names

    @property
    def features(self) -> np.ndarray:
        return self.nbest.features

    @property
    def offsets(self) -> np.ndarray:
        return self.nbest.offsets

    @property
    def stats(self) -> np.ndarray:
        return self.metric.stats

    def best_rows(self, w: np.ndarray) -> np.ndarray:
        """The model 1-best rows, ranked as `rerank apply` ranks them (rerank.weights.best_rows)."""
        return best_rows(self.nbest, w)

    def evaluate(self, w: np.ndarray) -> float:
        """The metric's own corpus value (TER, not -TER) of the model 1-best under weights w (first
        index wins ties); compare two with `self.metric.better`."""
        return self.metric.value(self.stats[self.best_rows(w)].sum(axis=0))

    def objective(self, w: np.ndarray) -> float:
        """The corpus objective (higher is better: -TER for TER) of the model 1-best under w."""
        return float(self.metric.objective(self.stats[self.best_rows(w)].sum(axis=0)))

    def sentence_objectives(self) -> np.ndarray:
        """Each hypothesis's own sentence-level score as a fraction, oriented so that higher is
        better: BLEU+1 (Lin & Och 2004) for BLEU, else the metric on that sentence alone (-TER); a
        column's or an interpolation's on the objective's own scale (`TuningMetric.sentence_scores`)."""
        return self.metric.sentence_scores(fraction=True)

    def oracle_rows(self) -> np.ndarray:
        """Each list's best hypothesis by its sentence-level score in the metric's direction
        (`sentence_objectives`: BLEU+1 for BLEU, the lowest sentence TER for TER), as the oracle
        picks (rerank.oracles.oracle_rows); ties go to the earlier hypothesis."""
        from rerank.oracles import oracle_rows

        return oracle_rows(self.sentence_objectives(), self.offsets)

    def oracle(self) -> float:
        """The metric's corpus value of the oracle picks (`oracle_rows`)."""
        return self.metric.value(self.stats[self.oracle_rows()].sum(axis=0))


def prepare(nbest: NBestList, refs: Sequence[Sequence[str]] | None, *, metric: str = "bleu",
            tune: Sequence[str] | None = None, fix: Sequence[str] | None = None, progress: Progress = False,
            source: str = "n-best", **scoring: Any) -> TuningData:
    """Check the input, merge exact duplicates and compute per-hypothesis statistics once.

    `metric`: a built-in metric, `column:NAME` or an interpolation (`objective_metric`); the columns
    it reads are the objective, not features: they are left out of the tuned list (and so of the
    weights and the model score). `refs` may be None when every component is a column. `scoring`:
    how the objective scores (`objective_metric`'s keywords: tokenize, lowercase, lang, lower_better)."""
    from rerank.metrics.registry import check_objective_options

    columns = check_objective_options(metric, features={"tune": tune or [], "fix": fix or []})
    if nbest.n_sentences == 0:
        raise InputError("the n-best list is empty", source)
    empty = np.flatnonzero(nbest.sizes == 0)
    if len(empty):
        raise InputError(f"{len(empty)} sentences have no hypotheses (first: sentence {int(empty[0])}); "
                         "every reference line needs an n-best list", source)
    for name in columns:
        check_objective_column(nbest, name)
    if not [n for n in nbest.feature_names if n not in columns]:
        raise InputError("the n-best list has no features to tune" + (f" besides the objective's column "
                         f"{', '.join(columns)}" if columns else ""), source)
    for k, stream in enumerate(refs or []):
        if len(stream) != nbest.n_sentences:
            raise InputError(f"reference set {k + 1} has {len(stream)} lines for {nbest.n_sentences} n-best sentences")
    names = [n for n in nbest.feature_names if n not in columns]
    tuned = np.ones(len(names), dtype=bool)
    for option, listed in (("features to tune", tune), ("features to fix", fix)):
        unknown = [n for n in listed or [] if n not in names]
        if unknown:
            raise InputError(f"{option}: unknown features {', '.join(unknown)} (n-best has: {', '.join(names)})")
    if tune:
        tuned[:] = False
        tuned[[names.index(n) for n in tune]] = True
    if fix:
        tuned[[names.index(n) for n in fix]] = False
    if not tuned.any():
        raise InputError("no feature left to tune (every feature is fixed)")

    strings = unique_strings(nbest)
    kept = merge_duplicates(nbest, strings)
    merged = nbest if len(kept) == nbest.n_hyps else _take_rows(nbest, kept)
    tuned_list = merged.select_features(names) if columns else merged  # the objective's columns are no features
    if merged.sizes.max() < 2:
        raise InputError("every sentence has a single (distinct) hypothesis: there is nothing to choose between, "
                         "so no weights can be tuned", source)
    spread = _varies_within_sentence(tuned_list)
    if not spread[tuned].any():
        raise InputError("all tuned features are equal across the hypotheses of every sentence "
                         f"({', '.join(np.array(names)[tuned])}): no weights can change the ranking", source)
    useless = [n for n, t, s in zip(names, tuned, spread) if t and not s]
    if useless:
        log.warning("warning: %s: features constant within every list (their weights cannot matter): %s",
                    source, ", ".join(useless))
    stats_metric = objective_metric(metric, merged, refs, progress=progress, strings=kept_strings(strings, kept),
                                    **scoring)
    return TuningData(tuned_list, kept, stats_metric, tuned, nbest.n_hyps)


def _take_rows(nbest: NBestList, rows: np.ndarray) -> NBestList:
    sentence = nbest.sentence_of_hyp[rows]
    offsets = np.searchsorted(sentence, np.arange(nbest.n_sentences + 1), side="left").astype(np.int64)
    scores = None if nbest.scores is None else nbest.scores[rows]
    return NBestList(offsets, nbest.hyps.take(rows), nbest.features[rows], list(nbest.feature_names),
                     list(nbest.groups), scores)


def _varies_within_sentence(nbest: NBestList) -> np.ndarray:
    """Per feature: does it take more than one value inside at least one sentence's list?"""
    starts = nbest.offsets[:-1]
    hi = np.maximum.reduceat(nbest.features, starts, axis=0)
    lo = np.minimum.reduceat(nbest.features, starts, axis=0)
    return np.asarray((hi > lo).any(axis=0))


def normalize(w: np.ndarray, how: str, tuned: np.ndarray) -> np.ndarray:
    """Rescale output weights (ranking is unchanged): 'l1' to sum |w| = 1, 'max' to max |w| = 1.

    With fixed features the scale matters, so only 'none' is allowed then.
    """
    if how == "none":
        return w
    if not tuned.all():
        raise InputError(f"normalizing the weights ({how}) would rescale fixed features; keep them as they are "
                         "(normalize none) when some features are fixed", option="normalize")
    norm = np.abs(w).sum() if how == "l1" else np.abs(w).max()
    return w / norm if norm > 0 else w


def weight_shares(data: TuningData, w: np.ndarray) -> dict[str, float]:
    """How much each feature decides the ranking: |w_k| times feature k's mean spread (max - min)
    within a list, as a share of the sum over features. Raw weights are not comparable across
    features of different scales; these shares are."""
    starts = data.offsets[:-1]
    spread = (np.maximum.reduceat(data.features, starts, axis=0) - np.minimum.reduceat(data.features, starts, axis=0))
    influence = np.abs(np.asarray(w, dtype=np.float64)) * spread.mean(axis=0)
    total = influence.sum()
    return {n: float(v / total) if total > 0 else 0.0 for n, v in zip(data.feature_names, influence)}


def degenerate(shares: dict[str, float], threshold: float = 0.95) -> str | None:
    """The feature holding at least `threshold` of the weighted spread, if any (with several tuned features)."""
    top = max(shares, key=lambda name: shares[name], default=None)
    return top if top is not None and len(shares) > 1 and shares[top] >= threshold else None


@dataclass
class TunerOutput:
    """What one `Tuner.tune` call returns (one run; rerank.multirun.TuneResult gathers several)."""

    weights: np.ndarray
    initial_score: float          # the metric's own value (TER, not -TER) at the start weights
    tuned_score: float            # ... and at the returned weights
    curve: list = field(default_factory=list)   # [(step, score)] for the tuning plot
    extra: dict = field(default_factory=dict)   # recorded in weights.json "meta"


class Tuner(Configurable):
    """Base class of tuner plug-ins: `rerank tune --tuner NAME` instantiates the class registered
    under NAME in the entry-point group `rerank.tuners`.

    A tuner declares its options as a dataclass (`Options`, each field made with
    `rerank.options.option`: default, help, check) and tunes weights on TuningData from start
    weights w0 with an instance of it; no command line is involved, so a script calls
    `KBMiraTuner().tune(data, w0, seed=1, options=KBMiraOptions(epochs=20))`. `tune` also takes a
    mapping of the fields (as weights.json records them) or None (defaults): `make_options`.

    The options interface is `rerank.options.Configurable`, the same as a feature's: on the
    command line `add_arguments` adds the flags generated from `Options` (under `option_prefix`)
    to `rerank tune` and `options_from_args(args)` reads them back; weights.json records
    `dataclasses.asdict` of them.
    """

    description = ""                 # one line for `rerank tune --help`
    metrics: Sequence[str] = ("bleu",)     # metrics it can optimise (rerank.metrics names; QUALITY_METRICS: all)
    step_name = "step"               # x axis of the tuning curve
    requires: tuple[str, ...] = ()   # modules of an optional extra it needs (e.g. "sklearn")
    # The settings `rerank tune --select cv:K` searches: option name -> values (every combination
    # is scored; rerank.selection). Small: each point costs K fits on (K-1)/K of the dev set.
    grid: Mapping[str, Sequence[Any]] = {}

    def tune(self, data: TuningData, w0: np.ndarray, *, seed: int = 1, options: Any = None, progress: Progress = False,
             log: Callable[[str], None] | None = None) -> TunerOutput:
        """Tuned weights from w0; `progress` as in rerank.progress, `log` called with one line per step."""
        raise NotImplementedError
