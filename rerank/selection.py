"""Choosing a tuner's settings and the feature columns by K-fold cross-validation over the dev
sentences (`rerank tune --select cv:K`, `--select-features`; docs/tuning.md).

Folds: the dev sentences are shuffled once by `numpy.random.default_rng(seed)` and sentence i of
the permutation goes to fold i mod K, so the folds differ in size by at most one sentence and are
the same for every grid point and every feature set of one call (paired comparisons). Whole
sentences go to one fold: a list's hypotheses are never split.

Each fold's fit tunes on the other K-1 folds and scores the weights on the held-out one with the
corpus metric (the metric's own value: BLEU, TER); a setting's CV score is the mean over the folds,
with the sd over the folds. The folds are cut out of the prepared tuning data once
(`CrossValidation`): the per-hypothesis metric statistics, the merged duplicates and the feature
matrix are computed for the whole dev set and sliced, never recomputed, and a (settings, columns)
pair already scored is not fitted again.

- Settings (`select_settings`): every point of the tuner's declared grid (`Tuner.grid`, or the
  `--grid KEY=V1,V2` given) is scored; the best mean in the metric's direction wins, the first of
  equal ones (the grid's order).
- Columns (`select_features`), `direction` "backward" (the default) or "forward". "forward": from the `keep` columns, at each step every
  remaining candidate is added in turn, the best by CV mean is taken, and it joins only when the
  set with it beats the set without it by the rule. Selection stops at the first step whose best
  candidate fails. "backward": from `keep` plus every candidate, at each step every candidate still
  in is removed in turn, the removal with the best CV mean is taken, and the column goes unless the
  set with it beats the set without it by the rule; selection stops at the first column that stays.
  Backward sees columns that help only together (a channel model beside a language model), which
  forward misses when neither helps alone.
- The rule (`rule`, default "paired"), oriented so that higher is better, "with" against "without":
  - "fold-sd": the per-fold gains d_k (with's fold scores minus without's) have mean(d) > sd(d)
    (ddof 1): the gain is larger than its own fold-to-fold spread (t > sqrt(K));
  - "paired": the pooled held-out outputs (each dev sentence's pick by the weights of the fit that
    did not see it, so one output per sentence over the whole dev set) are compared by the paired
    approximate randomisation test (rerank.significance, PAIRED_TRIALS trials, the call's seed): the
    pooled corpus score of "with" is higher and the two-sided p < `alpha`. Its false-positive rate is
    that of the test: a column without signal joins (forward) or stays (backward) in about alpha/2
    of cases.

Every fold fit is one run with the call's first seed; `--runs` applies to the refit on the whole
dev set with the choice (rerank.multirun.tune_runs). This module is of the core: it knows tuners
only through rerank.tuning.Tuner.
"""

from __future__ import annotations

import itertools
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, is_dataclass, replace
from typing import Any

import numpy as np

from rerank.errors import InputError
from rerank.metrics.base import Metric
from rerank.options import _check_of
from rerank.progress import Progress, progress_bar
from rerank.significance import approximate_randomization
from rerank.tuning import Tuner, TuningData

log = logging.getLogger(__name__)

__all__ = ["parse_select", "parse_grid", "grid_points", "fold_ids", "subset", "CrossValidation", "FoldScores",
           "FeatureRule", "select_settings", "select_features", "check_selection", "run_selection", "selection_summary"]

_SELECT = re.compile(r"^cv:(\d+)$")
DEFAULT_FOLDS = 5   # --select-features without --select
DIRECTIONS = ("forward", "backward")
RULES = ("fold-sd", "paired")
PAIRED_TRIALS = 2000   # the paired rule's randomisation trials (p's Monte Carlo sd about 0.005 at p = 0.05)


def parse_select(text: str | None) -> int | None:
    """The number of folds K of a `select` value "cv:K" (None: no selection); K >= 2, else InputError."""
    if text is None:
        return None
    match = _SELECT.match(str(text).strip())
    if not match:
        raise InputError(f"select {text!r}: expected cv:K, K-fold cross-validation over the dev sentences (e.g. cv:5)",
                         option="select")
    k = int(match.group(1))
    if k < 2:
        raise InputError(f"select {text!r}: cross-validation needs at least 2 folds", option="select")
    return k


def _value_text(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def parse_grid(entries: Sequence[str], tuner: type[Tuner] | Tuner) -> dict[str, tuple]:
    """The grid to search: the tuner's declared `grid` with each `KEY=V1,V2` of `entries` replacing
    (or adding) KEY's values, each value checked as the tuner's option KEY checks it. An entry
    without '=', without values, or whose KEY is no option of the tuner is an InputError (option grid)."""
    options = {f.name: f for f in fields(tuner.Options)}
    grid = {k: tuple(v) for k, v in getattr(tuner, "grid", {}).items()}
    for entry in entries:
        key, eq, values = str(entry).partition("=")
        key = key.strip()
        if not eq or not values.strip():
            raise InputError(f"grid {entry!r}: expected KEY=V1,V2 (an option of the tuner and its values)", option="grid")
        if key not in options:
            raise InputError(f"grid {entry!r}: unknown grid key {key!r} (the tuner's options: {', '.join(options) or 'none'})",
                             option="grid")
        check = _check_of(options[key])
        parsed = []
        for text in values.split(","):
            text = text.strip()
            try:
                value = check.convert(text) if check is not None else text
            except ValueError:
                raise InputError(f"grid {entry!r}: {text!r} is not {check.noun if check else 'a value'} "
                                 f"for {key}", option="grid") from None
            refused = check.refused(value) if check is not None else None
            if refused is not None:
                raise InputError(f"grid {entry!r}: {key} must be {refused}, got {text}", option="grid")
            parsed.append(value)
        grid[key] = tuple(dict.fromkeys(parsed))
    return grid


def grid_points(grid: Mapping[str, Sequence]) -> list[dict[str, Any]]:
    """Every combination of the grid's values, the first key varying slowest (itertools.product)."""
    keys = list(grid)
    return [dict(zip(keys, values)) for values in itertools.product(*(grid[k] for k in keys))]


def fold_ids(n_sentences: int, k: int, seed: int) -> np.ndarray:
    """The fold (0..k-1) of each sentence: a seeded permutation dealt round-robin (module doc)."""
    if k < 2 or k > n_sentences:
        raise InputError(f"select cv:{k}: {k} folds for {n_sentences} dev sentences (K must be 2 .. the number of "
                         "sentences)", option="select")
    order = np.random.default_rng(seed).permutation(n_sentences)
    folds = np.empty(n_sentences, dtype=np.int64)
    folds[order] = np.arange(n_sentences) % k
    return folds


def subset(data: TuningData, sentences: np.ndarray) -> TuningData:
    """The tuning data of some sentences (in the given order), sliced from `data`: the same rows'
    features and metric statistics, nothing recomputed."""
    sentences = np.asarray(sentences, dtype=np.int64)
    starts, ends = data.offsets[sentences], data.offsets[sentences + 1]
    rows = np.concatenate([np.arange(s, e) for s, e in zip(starts, ends)]) if len(sentences) else np.zeros(0, np.int64)
    metric = data.metric
    sliced = replace(metric, stats=metric.stats[rows], sentence=None if metric.sentence is None else metric.sentence[rows])
    nbest = data.nbest.select_sentences(sentences)
    return TuningData(nbest, data.kept_rows[rows], sliced, data.tuned.copy(), nbest.n_hyps)


@dataclass
class FoldScores:
    """One setting's cross-validation: the held-out score of every fold (the metric's own value) and
    the weights each fold's fit found."""

    scores: np.ndarray        # (K,)
    weights: np.ndarray       # (K, F)
    sign: float = 1.0         # +1 when higher is better (an oriented score is sign * value)
    pooled: np.ndarray | None = None   # (n_sentences, k): each dev sentence's held-out pick's statistics

    @property
    def mean(self) -> float:
        return float(self.scores.mean())

    @property
    def sd(self) -> float:
        return float(self.scores.std(ddof=1)) if len(self.scores) > 1 else 0.0

    @property
    def oriented(self) -> np.ndarray:
        return self.sign * self.scores

    def record(self) -> dict:
        return {"mean": self.mean, "sd": self.sd, "folds": self.scores.tolist()}


def _options_key(options: Any) -> str:
    record = asdict(options) if is_dataclass(options) and not isinstance(options, type) else dict(options or {})
    return json.dumps(record, sort_keys=True, default=str)


class CrossValidation:
    """K-fold cross-validation of one tuner on prepared tuning data (the module doc): the folds'
    training and held-out data are sliced once; `score(options, tuned)` fits each fold (one run,
    seed `seed`, from `w0`) and scores its held-out fold, remembered per (options, tuned columns)."""

    def __init__(self, data: TuningData, tuner: Tuner, k: int, seed: int, w0: np.ndarray | None = None,
                 say: Callable[[str], None] | None = None, progress: Progress = False):
        self.data, self.tuner, self.k, self.seed = data, tuner, k, seed
        self.w0 = np.zeros(len(data.feature_names)) if w0 is None else np.asarray(w0, dtype=np.float64)
        self.folds = fold_ids(data.nbest.n_sentences, k, seed)
        everything = np.arange(data.nbest.n_sentences)
        self.train = [subset(data, everything[self.folds != f]) for f in range(k)]
        self.held = [subset(data, everything[self.folds == f]) for f in range(k)]
        assert data.metric.info is not None
        self.sign = float(data.metric.info.sign)
        self.fits = 0   # fold fits run (not remembered ones)
        self._seen: dict[tuple[str, bytes], FoldScores] = {}
        self._say = say or (lambda _: None)
        self.progress = progress   # a bar per scored setting, its fold fits (rerank.progress)

    def score(self, options: Any, tuned: np.ndarray) -> FoldScores:
        """The CV scores of the tuner with `options`, tuning the columns of the mask `tuned` (the
        others stay at their start weights)."""
        tuned = np.asarray(tuned, dtype=bool)
        key = (_options_key(options), tuned.tobytes())
        if key in self._seen:
            return self._seen[key]
        scores, weights = np.zeros(self.k), np.zeros((self.k, len(self.w0)))
        pooled = np.zeros((self.data.nbest.n_sentences, self.data.stats.shape[1]))
        with progress_bar(self.progress if tuned.any() else False, "cross-validation", self.k, unit="fold") as bar:
            for f in range(self.k):
                held = self.held[f]
                if tuned.any():
                    train = replace(self.train[f], tuned=tuned)
                    out = self.tuner.tune(train, self.w0, seed=self.seed, options=options)
                    w = np.asarray(out.weights, dtype=np.float64)
                    self.fits += 1
                else:
                    w = self.w0
                rows = held.best_rows(w)
                weights[f], scores[f] = w, held.metric.value(held.stats[rows].sum(axis=0))
                pooled[self.folds == f] = held.stats[rows]   # held's sentences are in dev order
                bar.update(1)
        found = FoldScores(scores, weights, self.sign, pooled)
        self._seen[key] = found
        return found


@dataclass
class GridChoice:
    """`select_settings`' result: every point with its CV scores, and the chosen one."""

    grid: dict[str, tuple]
    points: list[dict]
    scores: list[FoldScores]
    best: int

    @property
    def chosen(self) -> dict:
        return self.points[self.best]

    def record(self) -> dict:
        return {"grid": {k: list(v) for k, v in self.grid.items()},
                "points": [{"settings": p, **s.record()} for p, s in zip(self.points, self.scores)],
                "chosen": self.chosen, "chosen_fold_weights": self.scores[self.best].weights.tolist()}


def select_settings(cv: CrossValidation, base: Any, grid: Mapping[str, Sequence], tuned: np.ndarray) -> GridChoice:
    """Score every point of `grid` (each the tuner's options `base` with the point's values) and
    choose the best CV mean in the metric's direction (the first of equal ones)."""
    points = grid_points(grid)
    base_record = json.loads(_options_key(base))
    found = []
    for point in points:
        options = cv.tuner.make_options({**base_record, **point})
        scores = cv.score(options, tuned)
        cv._say(f"cv {', '.join(f'{k}={_value_text(v)}' for k, v in point.items())}: {scores.mean:.2f} "
                f"(sd {scores.sd:.2f})")
        found.append(scores)
    means = [s.mean for s in found]
    best = cv.data.metric.best_index(means)
    return GridChoice({k: tuple(v) for k, v in grid.items()}, points, found, best)


class _Objective(Metric):
    """The tuning objective as a Metric (its `score_from_stats`), for the paired test: higher is better."""

    name = "objective"

    def __init__(self, objective: Callable[[np.ndarray], np.ndarray]):
        self._objective = objective

    def score_from_stats(self, stats: np.ndarray) -> np.ndarray | float:
        return self._objective(stats)


@dataclass(frozen=True)
class FeatureRule:
    """How `select_features` searches and when a column counts (module doc): `direction` forward or
    backward, `rule` fold-sd or paired, `alpha` the paired rule's level, `seed` its randomisation's."""

    direction: str = "backward"
    rule: str = "paired"
    alpha: float = 0.05
    seed: int = 1

    def __post_init__(self) -> None:
        if self.direction not in DIRECTIONS or self.rule not in RULES or not 0 < self.alpha < 1:
            raise ValueError(f"a FeatureRule of {self.direction!r}, {self.rule!r}, alpha {self.alpha}")

    def describe(self) -> str:
        if self.rule == "fold-sd":
            test = "mean(per-fold gain) > sd(per-fold gain)"
        else:
            test = (f"pooled held-out gain > 0 and paired approximate randomisation p < {self.alpha:g} "
                    f"({PAIRED_TRIALS} trials, seed {self.seed})")
        return f"{self.direction}: a column counts when {test}"

    def beats(self, cv: CrossValidation, with_: FoldScores, without: FoldScores) -> dict:
        """Whether the set `with_` beats `without` by the rule, with the numbers it went by."""
        gain = with_.oriented - without.oriented
        mean, sd = float(gain.mean()), float(gain.std(ddof=1))
        found: dict[str, Any] = {"gain_mean": mean, "gain_sd": sd}
        if self.rule == "fold-sd":
            found["beats"] = bool(mean > sd and mean > 0)
            return found
        assert with_.pooled is not None and without.pooled is not None
        metric = cv.data.metric
        pooled = cv.sign * (metric.value(with_.pooled.sum(axis=0)) - metric.value(without.pooled.sum(axis=0)))
        test = approximate_randomization(_Objective(metric.objective), without.pooled, with_.pooled,
                                         trials=PAIRED_TRIALS, seed=self.seed)
        found.update(pooled_gain=float(pooled), p=float(test.p_value),
                     beats=bool(pooled > 0 and test.p_value < self.alpha))
        return found


@dataclass
class FeatureChoice:
    """`select_features`' result: the columns kept, and each step's candidates with their CV scores."""

    selected: list[str]
    steps: list[dict] = field(default_factory=list)
    scores: FoldScores | None = None   # the CV scores of the final set
    rule: FeatureRule = field(default_factory=FeatureRule)

    def record(self) -> dict:
        return {"method": self.rule.direction, "rule": self.rule.describe(), "test": self.rule.rule,
                "selected": self.selected, "steps": self.steps,
                "fold_weights": None if self.scores is None else self.scores.weights.tolist()}


def select_features(cv: CrossValidation, options: Any, keep: Sequence[str], candidates: Sequence[str],
                    fixed: np.ndarray, rule: FeatureRule | None = None) -> FeatureChoice:
    """Forward or backward selection (module doc, `rule`) from the `keep` columns over `candidates`,
    tuning with `options`; `fixed`: the mask of the columns held at their start weights whatever is
    chosen."""
    rule = rule or FeatureRule()
    names = cv.data.feature_names
    index = {n: i for i, n in enumerate(names)}

    def mask(columns: Sequence[str]) -> np.ndarray:
        m = np.zeros(len(names), dtype=bool)
        m[[index[c] for c in columns]] = True
        return m & ~fixed

    left = [c for c in candidates if c not in keep]
    chosen = list(keep) + (left if rule.direction == "backward" else [])
    if rule.direction == "backward":
        left = []
    current = cv.score(options, mask(chosen))
    steps: list[dict] = []
    cv._say(f"features {', '.join(chosen) or '(none tuned)'}: {current.mean:.2f} (sd {current.sd:.2f})")
    best_of = cv.data.metric.best_index
    while True:
        movable = left if rule.direction == "forward" else [c for c in chosen if c not in keep]
        if not movable:
            break
        if rule.direction == "forward":
            tried = {c: cv.score(options, mask(chosen + [c])) for c in movable}
        else:
            tried = {c: cv.score(options, mask([x for x in chosen if x != c])) for c in movable}
        best = movable[best_of([tried[c].mean for c in movable])]
        with_, without = (tried[best], current) if rule.direction == "forward" else (current, tried[best])
        verdict = rule.beats(cv, with_, without)
        change = verdict["beats"] if rule.direction == "forward" else not verdict["beats"]
        steps.append({"base": list(chosen), "base_score": current.record(),
                      "candidates": {c: s.record() for c, s in tried.items()}, "best": best, **verdict,
                      ("joined" if rule.direction == "forward" else "removed"): change})
        evidence = (f"pooled gain with it {verdict['pooled_gain']:+.2f}, p {verdict['p']:.3f}" if "p" in verdict else
                    f"gain with it {verdict['gain_mean']:+.2f}, sd {verdict['gain_sd']:.2f} over the folds")
        forward = rule.direction == "forward"
        cv._say(f"{'+' if forward else '-'} {best}: {'with' if forward else 'without'} it {tried[best].mean:.2f} "
                f"({evidence}): " + (("joins" if forward else "goes") if change else
                                     ("left out" if forward else "stays") + "; selection stops"))
        if not change:
            break
        if rule.direction == "forward":
            chosen.append(best)
            left.remove(best)
        else:
            chosen.remove(best)
        current = tried[best]
    return FeatureChoice(chosen, steps, current, rule)


@dataclass
class SelectionPlan:
    """What a `select` / `select_features` call will do, checked before any file is read."""

    folds: int | None        # K of --select cv:K (None: no settings search)
    grid: dict[str, tuple]   # the grid searched (empty without --select)
    features: bool           # --select-features
    keep: tuple[str, ...]
    rule: FeatureRule = field(default_factory=FeatureRule)   # how --select-features searches and decides

    @property
    def active(self) -> bool:
        return self.folds is not None or self.features

    @property
    def k(self) -> int:
        return self.folds if self.folds is not None else DEFAULT_FOLDS


def check_selection(settings: Any, tuner: Tuner) -> SelectionPlan:
    """The selection `settings` (a TuneSettings) asks of `tuner`, checked without data: `select`'s
    syntax, the grid's keys and values, `keep` against `fix`, and that `grid`/`keep` go with a selection."""
    folds = parse_select(settings.select)
    if settings.grid and folds is None:
        raise InputError("grid is searched by select cv:K; give select too", option="grid", mentions=("select",))
    if settings.keep and not settings.select_features:
        raise InputError("keep names the columns select_features starts from; give select_features too",
                         option="keep", mentions=("select_features",))
    defaults = {f.name: f.default for f in fields(settings)}
    asked = [k for k in ("select_direction", "select_rule", "select_alpha") if getattr(settings, k) != defaults[k]]
    if asked and not settings.select_features:
        raise InputError(f"{asked[0]} says how select_features searches; give select_features too",
                         option=asked[0], mentions=("select_features",))
    if settings.select_alpha != defaults["select_alpha"] and settings.select_rule != "paired":
        raise InputError("select_alpha is the level of the paired rule; give select_rule paired too",
                         option="select_alpha", mentions=("select_rule",))
    both = [n for n in settings.keep if n in settings.fix]
    if both:
        raise InputError(f"keep {', '.join(both)}: a kept column is tuned, a fixed one is not (fix names it too)",
                         option="keep", mentions=("fix",))
    grid = parse_grid(settings.grid, tuner) if folds is not None else {}
    if folds is not None and not grid:
        raise InputError(f"tuner {settings.tuner} declares no grid to select from; give grid KEY=V1,V2",
                         option="select", mentions=("grid",))
    base = tuner.make_options(settings.tuner_options)
    for point in grid_points(grid):   # every point is a valid set of options
        tuner.make_options({**json.loads(_options_key(base)), **point})
    rule = FeatureRule(settings.select_direction, settings.select_rule, settings.select_alpha, settings.seed)
    return SelectionPlan(folds, grid, bool(settings.select_features), tuple(settings.keep), rule)


def run_selection(data: TuningData, tuner: Tuner, plan: SelectionPlan, settings: Any, w0: np.ndarray | None,
                  say: Callable[[str], None] | None = None, cv: CrossValidation | None = None,
                  progress: Progress = False) -> tuple[TuningData, Any, dict]:
    """(the tuning data with the chosen columns tuned, the chosen tuner options, the record for the
    weights file): feature selection first (with the given options) when asked, then the grid
    search on the chosen columns. `cv`: a CrossValidation of this data, tuner, K and seed to reuse
    (its remembered fits serve several selections on one list, e.g. a study's feature sets)."""
    say = say or log.info
    k = plan.k
    if k > data.nbest.n_sentences:
        raise InputError(f"select cv:{k}: {k} folds for {data.nbest.n_sentences} dev sentences (K must be 2 .. the "
                         "number of sentences)", option="select")
    unknown = [n for n in plan.keep if n not in data.feature_names]
    if unknown:
        raise InputError(f"keep: unknown features {', '.join(unknown)} (n-best has: {', '.join(data.feature_names)})",
                         option="keep")
    untuned = [n for n in plan.keep if not data.tuned[data.feature_names.index(n)]]
    if untuned:
        raise InputError(f"keep: {', '.join(untuned)} not among the tuned features (tune_features leaves them out)",
                         option="keep")
    if cv is None:
        cv = CrossValidation(data, tuner, k, settings.seed, w0, say, progress)
    elif cv.k != k or cv.seed != settings.seed or cv.data.nbest is not data.nbest:
        raise ValueError("the CrossValidation given is of other data, folds or seed")
    fits_before = cv.fits
    options = tuner.make_options(settings.tuner_options)
    tuned = data.tuned.copy()
    record: dict[str, Any] = {"method": f"cv:{k}", "folds": k, "fold_seed": settings.seed, "columns": list(data.feature_names),
                              "fold_sizes": np.bincount(cv.folds, minlength=k).tolist(),
                              "score": "the held-out fold's corpus metric, mean and sd (ddof 1) over the folds"}
    if plan.features:
        candidates = [n for n, t in zip(data.feature_names, data.tuned) if t]
        choice = select_features(cv, options, plan.keep, candidates, ~data.tuned, plan.rule)
        tuned = np.array([n in choice.selected for n in data.feature_names]) & data.tuned
        if not tuned.any():
            raise InputError(f"select_features kept no column to tune (none passed the rule: {plan.rule.describe()}); give keep "
                             "F1,F2 for the columns always tuned", option="select_features", mentions=("keep",))
        record["features"] = {**choice.record(), "keep": list(plan.keep)}
    if plan.folds is not None:
        chosen = select_settings(cv, options, plan.grid, tuned)
        options = tuner.make_options({**json.loads(_options_key(options)), **chosen.chosen})
        record["settings"] = chosen.record()
    record["fold_fits"] = cv.fits - fits_before
    return replace(data, tuned=tuned), options, record


def selection_summary(record: Mapping) -> str:
    """One line of what a selection chose (as `rerank tune` prints it)."""
    parts = []
    if "features" in record:
        parts.append(f"columns {', '.join(record['features']['selected'])}")
    if "settings" in record:
        best = next(p for p in record["settings"]["points"] if p["settings"] == record["settings"]["chosen"])
        parts.append(f"{', '.join(f'{k}={_value_text(v)}' for k, v in record['settings']['chosen'].items())} "
                     f"(CV {best['mean']:.2f}, sd {best['sd']:.2f}, of {len(record['settings']['points'])} points)")
    return f"{record['method']} chose " + "; ".join(parts) + f" ({record['fold_fits']} fold fits)"
