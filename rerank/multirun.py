"""Several runs of a tuner: R runs with seeds seed..seed+R-1, the run kept (the best tuning score in
the metric's direction: the lowest TER), and resuming from run files.

`tune_runs(data, tuner, settings, ...)` is the one implementation behind the Python API's
`rerank.tune`, which `rerank tune` calls. `TuneSettings` holds what a run's result depends on
besides its inputs; `reuse_record` is the one whitelist of what a run file must match to be reused.
With an `output` path, run r is written to OUTPUT.runR.json (one run: OUTPUT itself) when it ends,
with that record (settings, package version, inputs' sha256) in its "meta"; a later call with the
same record reuses those files, and removes the files an earlier call with another record left (so
the files never mix two invocations), then writes OUTPUT = the kept run. Notes and warnings go to
the `logging` logger of this module; nothing is printed.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, is_dataclass, replace
from typing import Any

import numpy as np

from rerank import __version__
from rerank.errors import InputError
from rerank.metrics.base import MetricInfo
from rerank.nbest import NBestList
from rerank.metrics.registry import MetricLike, best_index, metric_info, metric_names
from rerank.options import ANY, MAX_RUNS, NAMES, NONNEGATIVE_INT, POSITIVE_INT, PROBABILITY, at_most, check_options, option
from rerank.progress import Progress
from rerank.selection import DIRECTIONS, RULES, parse_select, selection_summary
from rerank.tuning import Tuner, TuningData, degenerate, normalize as rescale, weight_shares
from rerank.weights import read_weights, write_weights

log = logging.getLogger(__name__)
NORMALIZE = ("none", "l1", "max")   # TuneSettings.normalize: the output weights' rescaling


@dataclass(frozen=True)
class TuneSettings:
    """What a tuning does, besides its inputs: `runs` runs of the tuner plug-in `tuner` with seeds
    seed..seed+runs-1, optimising `metric` (BLEU with sacrebleu's `tokenize` and `lowercase`; METEOR's
    language `lang`; `column:NAME`, an n-best column, lower is better for the columns in `lower_better`;
    an interpolation `bleu=0.5,column:comet=0.5`: rerank.tuning.objective_metric), changing only
    `tune_features` (empty: all) minus `fix`, and rescaling the
    weights by `normalize` (none, l1: sum |w| = 1, max: max |w| = 1). `tuner_options`: the tuner's
    `Options`, a mapping of its fields, or None (its defaults); the tuner checks them.

    A field that is wrong whatever the data is refused here (InputError)."""

    tuner: str = option("mira", "tuning algorithm: an installed tuner plug-in (above)")
    metric: str = option("bleu", f"what to optimise: {', '.join(metric_names(quality=True, builtin=True))} (TER is "
                         "minimised), or an installed metric plug-in; column:NAME, the mean over the sentences of the chosen hypotheses' "
                         "n-best column NAME (e.g. COMET scores joined with `rerank add-feature`; it needs no "
                         "references, and is the objective, never a feature: it gets no weight); or an "
                         "interpolation as Moses' interpolated scorer, METRIC=W,METRIC=W (bleu=0.5,column:comet=0.5: "
                         "sum of W x each component on its own scale, BLEU 0-100, a column as it is, each oriented "
                         "by its direction, so higher is better; weights >= 0, not all 0)", metavar="METRIC",
                         group="metric")
    runs: int = option(1, "independent runs with seeds seed..seed+R-1; R > 1 writes OUTPUT.run1.json .. runR.json "
                       f"for the optimizer-instability report of `rerank eval` (at most {MAX_RUNS:,})",
                       check=at_most(POSITIVE_INT, MAX_RUNS))
    seed: int = option(1, "random seed of the first run", check=NONNEGATIVE_INT)
    tokenize: str = option("13a", "BLEU tokeniser as sacrebleu -tok, as `rerank eval` and `rerank oracle` (none for "
                           "text tokenised like its references)", group="metric")
    lowercase: bool = option(False, "case-insensitive BLEU", default_text="case-sensitive", group="metric")
    lang: str = option("en", "target language for METEOR", group="metric")
    tune_features: tuple[str, ...] = option((), "tune only these features; the others stay at their start value",
                                            flag="--tune", dest="tune_features", check=NAMES, metavar="F1,F2", default_text="all")
    fix: tuple[str, ...] = option((), "keep these features at their start value", check=NAMES, metavar="F1,F2")
    normalize: str = option("none", "rescale the output weights (sum |w| = 1 or max |w| = 1; ranking unchanged)",
                            choices=NORMALIZE)
    tuner_options: Any = option(None, "the tuner's Options (each tuner's own flags)", check=ANY, cli=False)
    lower_better: tuple[str, ...] = option((), "these columns of --metric are better when lower", check=NAMES,
                                           metavar="NAME[,NAME]", default_text="a column is better when higher",
                                           group="metric")
    sentences: str | None = option(None, "tune on sentences A..B only (0-based, inclusive; the references are cut "
                                   "the same way)", metavar="A-B", default_text="all")
    select: str | None = option(None, "choose the tuner's settings from its grid (--grid) by K-fold cross-validation "
                                "over the dev sentences, then refit on all of them with the choice (docs/tuning.md)",
                                metavar="cv:K", default_text="no selection", group="selection")
    grid: tuple[str, ...] = option((), "the values of one tuner option for --select to search (repeat for several "
                                   "options; replaces the tuner's declared values of KEY)", many=True,
                                   metavar="KEY=V1,V2", default_text="the tuner's declared grid", group="selection")
    select_features: bool = option(False, "selection of the tuned columns by the same cross-validation (the "
                                   "folds of --select, else cv:5; --select-direction, --select-rule)",
                                   default_text="tune every column", group="selection")
    select_direction: str = option("backward", "with --select-features: backward (from every column, a column goes "
                                   "unless it passes the rule; sees columns that help only together) or forward (from "
                                   "--keep, a column joins when it passes the rule)", choices=DIRECTIONS,
                                   group="selection")
    select_rule: str = option("paired", "with --select-features: when a column passes; paired: the pooled held-out "
                              "outputs (each dev sentence picked by the fold fit that did not see it) score higher "
                              "with it, by the paired approximate randomisation test at --select-alpha; fold-sd: its "
                              "mean gain over the folds is larger than the gain's sd over the folds",
                              choices=RULES, group="selection")
    select_alpha: float = option(0.05, "the level of --select-rule paired (two-sided p below it)", check=PROBABILITY, metavar="A",
                                 group="selection")
    keep: tuple[str, ...] = option((), "with --select-features: the columns always tuned (the decoder's own scores), "
                                   "where the selection starts", check=NAMES, metavar="F1,F2", default_text="none",
                                   group="selection")

    NORMALIZE = NORMALIZE
    # What a run's result depends on: a run file is reused only when these match (and the inputs,
    # the start weights and the package version). `runs` is not among them: run r of 3 is run r of 5.
    REUSE = ("tuner", "metric", "seed", "tokenize", "lowercase", "lang", "tune_features", "fix", "normalize",
             "tuner_options", "lower_better", "select", "grid", "select_features", "keep", "select_direction",
             "select_rule", "select_alpha")

    def __post_init__(self) -> None:
        from rerank.metrics.bleu import make_bleu
        from rerank.metrics.registry import check_objective_options

        for name in ("tune_features", "fix", "lower_better", "keep"):
            value = getattr(self, name)
            object.__setattr__(self, name, NAMES.convert(value) if isinstance(value, str) else tuple(value or ()))
        grid = self.grid   # one KEY=V1,V2, a list of them, or a mapping of KEY to its values
        if isinstance(grid, Mapping):
            grid = tuple(f"{k}={','.join(str(v) for v in (vs if isinstance(vs, (list, tuple)) else [vs]))}"
                         for k, vs in grid.items())
        object.__setattr__(self, "grid", (grid,) if isinstance(grid, str) else tuple(grid or ()))
        check_options(self, as_keywords=True)
        if self.sentences is not None:
            sentence_range(self.sentences)  # its syntax, before any file is read
        parse_select(self.select)  # its syntax, before any file is read
        make_bleu(self.tokenize, self.lowercase)  # an unknown tokenizer, before any file is read
        check_objective_options(self.metric, lower_better=self.lower_better,  # before any file is read
                                features={"tune_features": self.tune_features, "fix": self.fix, "keep": self.keep})

    @classmethod
    def make(cls, settings: TuneSettings | None = None, **keywords: Any) -> TuneSettings:
        """`settings` (default: the defaults) with `keywords` replaced: its fields by name, any other
        keyword into `tuner_options` (mira: epochs=10, C=0.01, ...), which the tuner checks."""
        settings = settings or cls()
        names = {f.name for f in fields(cls)}
        own = {k: v for k, v in keywords.items() if k in names}
        extra = {k: v for k, v in keywords.items() if k not in names}
        if extra:
            base = settings.tuner_options if own.get("tuner_options") is None else own["tuner_options"]
            own["tuner_options"] = {**options_record(base), **extra}
        return replace(settings, **own) if own else settings

    @property
    def metric_display(self) -> str:
        """How the objective is named in print: BLEU, TER, column:COMET, 0.5*BLEU+0.5*column:comet."""
        from rerank.metrics.registry import objective_display

        return objective_display(self.metric)

    def cut(self, nbest: NBestList, refs: list[list[str]] | None) -> tuple[NBestList, list[list[str]] | None]:
        """The list and the reference streams cut to `sentences` (all of them when None)."""
        if self.sentences is None:
            return nbest, refs
        lo, hi = sentence_range(self.sentences, nbest.n_sentences)
        keep = np.arange(lo, hi + 1)
        return nbest.select_sentences(keep), None if refs is None else [[stream[i] for i in keep] for stream in refs]

    def reuse_record(self) -> dict:
        """The fields of REUSE as JSON values (the tuner's options as a dict of their fields);
        `lang` only where a metric of the objective takes it (METEOR's, or a plug-in's that declares it)."""
        from rerank.metrics.registry import metric_class, objective_metrics

        reads_lang = any("lang" in getattr(metric_class(name), "options", ()) for name in objective_metrics(self.metric))
        record = {name: getattr(self, name) for name in self.REUSE if name != "lang" or reads_lang}
        record["tuner_options"] = options_record(self.tuner_options)
        record["tune_features"], record["fix"] = list(self.tune_features), list(self.fix)
        record["lower_better"] = list(self.lower_better)
        record["grid"], record["keep"] = list(self.grid), list(self.keep)
        return json.loads(json.dumps(record, default=str))


def sentence_range(text: str, n: int | None = None) -> tuple[int, int]:
    """(A, B) of a sentence range "A-B" (0-based, inclusive; "A" is A-A), within `n` sentences when given."""
    try:
        a, _, b = text.partition("-")
        lo, hi = int(a), int(b) if b else int(a)
    except (ValueError, AttributeError):
        raise InputError(f"sentences {text!r}: expected A-B (0-based, inclusive)", option="sentences") from None
    if lo < 0 or hi < lo or (n is not None and hi >= n):
        raise InputError(f"sentences {text!r}: out of range" + (f" for {n} sentences" if n is not None else ""),
                         option="sentences")
    return lo, hi


def run_seeds(seed: int, runs: int) -> list[int]:
    """The seeds of R independent runs: seed, seed + 1, ..., seed + R - 1 (run r has seed + r - 1)."""
    if runs < 1:
        raise ValueError(f"runs must be at least 1, got {runs}")
    return [seed + r for r in range(runs)]


@dataclass
class TuneEvents:
    """How a tuning reports while it runs (`rerank.tune`): `progress` (bars or callbacks,
    rerank.progress), `on_start(data)` with the prepared tuning data (rerank.tuning.TuningData)
    before the first run, `on_run(run)` as each run ends or is reused, `verbose(line)` with the
    tuner's per-epoch lines (default: the logger, at INFO)."""

    progress: Progress = False
    on_start: Callable[[TuningData], None] | None = None
    on_run: Callable[[TuneRun], None] | None = None
    verbose: Callable[[str], None] | None = None


@dataclass
class TuneRun:
    """One tuning run: its tuned score (the metric's own value: TER, not -TER) and weights."""

    run: int                        # 1-based
    seed: int
    score: float                    # tuning score of the weights kept (after rescaling)
    initial_score: float
    weights: dict[str, float]       # feature name -> weight, in the n-best's column order
    curve: list = field(default_factory=list)   # [(step, score)]
    meta: dict = field(default_factory=dict)    # as written in the run's weights file
    path: str | None = None         # the run's weights file, when written
    reused: bool = False            # read back from `path` (same settings and inputs)


@dataclass
class TuneResult:
    """R tuning runs and the one kept: the best tuning score in the metric's direction."""

    weights: dict[str, float]       # the kept run's weights, name -> value
    runs: list[TuneRun]
    best: int                       # index in `runs` of the kept run (0-based; `best_run.run` is 1-based)
    metric: str
    output: str | None = None       # the kept run's weights file, when written
    tuner: str = ""                 # the tuner plug-in's name
    step_name: str = "step"         # the x axis of its tuning curves
    info: MetricInfo | None = None  # the metric's direction and name in print (default: the registry's for `metric`)

    @property
    def metric_info(self) -> MetricInfo:
        return self.info if self.info is not None else metric_info(self.metric)

    @property
    def best_run(self) -> TuneRun:
        return self.runs[self.best]

    @property
    def scores(self) -> list[float]:
        return [r.score for r in self.runs]

    @property
    def score(self) -> float:
        return self.best_run.score

    def summary(self) -> str:
        """One line: the runs' mean and sd, and the run kept (with several runs), as `rerank tune` prints it."""
        name, best = self.metric_info.display, self.best_run
        if len(self.runs) == 1:
            return f"{name} initial {best.initial_score:.2f} -> tuned {best.score:.2f} (seed {best.seed})"
        scores = np.array(self.scores)
        which = "highest" if self.metric_info.higher_is_better else "lowest"
        return (f"{len(self.runs)} runs: {name} mean {scores.mean():.2f}, sd {scores.std(ddof=1):.2f}; "
                f"best run {best.run} ({which} {name}, {best.score:.2f})")

    def selection_summary(self) -> str | None:
        """One line of what `--select`/`--select-features` chose (the kept run's record), or None without selection."""
        selection = self.best_run.meta.get("selection")
        return selection_summary(selection) if selection else None

    def plot(self, path: str) -> None:
        """PNG of every run's tuning curve and the kept run's weights (as weight shares)."""
        from rerank.tuning_plot import plot_tuning

        kept = self.best_run
        names = list(self.weights)
        plot_tuning(path, [(f"run {x.run}", x.curve) for x in self.runs], names,
                    np.array([self.weights[n] for n in names]), metric=self.metric_info.display, tuner=self.tuner,
                    step_name=self.step_name, higher_is_better=self.metric_info.higher_is_better,
                    shares=kept.meta.get("weight_shares"),
                    run_label=f"run {kept.run}" + (f" (kept of {len(self.runs)})" if len(self.runs) > 1 else ""))


def best_run(runs: Sequence[TuneRun], metric: MetricLike) -> int:
    """Index of the run with the best tuned score in the metric's direction, the first of equal ones."""
    return best_index([r.score for r in runs], metric)


# ---- run files ------------------------------------------------------------------------------------

def run_paths(output: str, runs: int) -> list[str]:
    """The weights file of each run: OUTPUT itself for one run, else OUTPUT.run1.json .. runR.json."""
    if runs == 1:
        return [output]
    stem, ext = os.path.splitext(output)
    return [f"{stem}.run{r}{ext or '.json'}" for r in range(1, runs + 1)]


def tune_meta(path: str) -> dict | None:
    """The meta of a weights file a tuning run wrote (one run or the best of runs), else None."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    meta = data.get("meta") if isinstance(data, dict) else None
    return meta if isinstance(meta, dict) and "tuner" in meta and "run" in meta else None


def stale_runs(output: str, runs: int) -> list[str]:
    """OUTPUT.runK files an earlier tuning wrote that this one does not (K > runs; all for one run)."""
    stem, ext = os.path.splitext(output)
    ext = ext or ".json"
    number = re.compile(re.escape(stem) + r"\.run(\d+)" + re.escape(ext) + "$")
    found = [(int(m.group(1)), path) for path in glob.glob(glob.escape(stem) + ".run*" + glob.escape(ext))
             if (m := number.match(path))]
    return [path for k, path in sorted(found) if k > (runs if runs > 1 else 0) and tune_meta(path) is not None]


def _reusable(path: str, r: int, settings: dict, feature_names: list[str]) -> TuneRun | None:
    """The run in `path` if it was written with these settings and inputs, else None."""
    meta = tune_meta(path)
    if meta is None or meta.get("settings") != settings or meta.get("run") != r or "best_of_runs" in meta:
        return None
    weights = read_weights(path)
    if sorted(weights) != sorted(feature_names):
        return None
    seed, initial_score = meta.get("seed"), meta.get("initial_score")
    if seed is None or initial_score is None:  # not a run's file (every run writes both): tune it again
        return None
    return TuneRun(r, seed, meta["tuned_score"], initial_score,
                   {name: weights[name] for name in feature_names}, meta.get("curve", []), meta, path, reused=True)


def _clear_stale(output: str, runs: int, paths: list[str], reused: dict) -> None:
    """Remove the files of an earlier tuning that this one replaces, before it starts, so that an
    interruption never leaves runs of two invocations side by side."""
    doomed = stale_runs(output, runs)
    if runs > 1:
        doomed += [p for r, p in enumerate(paths, start=1) if r not in reused and tune_meta(p) is not None]
        if len(reused) < runs and tune_meta(output) is not None:
            doomed.append(output)
    for path in doomed:
        os.unlink(path)
    if doomed:
        log.warning(f"note: removed {', '.join(doomed)}: written by an earlier tune with other settings, inputs or "
                    "number of runs")


# ---- tuning ---------------------------------------------------------------------------------------

def options_record(options: Any) -> dict:
    """A tuner's options as weights.json records them (a dataclass of options or a dict)."""
    return asdict(options) if is_dataclass(options) and not isinstance(options, type) else dict(options or {})


def _one_run(data: TuningData, tuner: Tuner, settings: TuneSettings, options: Any, w0: np.ndarray, r: int, seed: int,
             progress: Progress, verbose: Callable[[str], None] | None) -> TuneRun:
    """Run r with `seed`; its weights rescaled by `settings.normalize` and scored as they will be applied."""
    tuner_name, runs, how = settings.tuner, settings.runs, settings.normalize
    label = f"run {r}: " if runs > 1 else ""
    res = tuner.tune(data, w0, seed=seed, options=options, progress=progress,
                     log=(lambda msg: verbose(label + msg)) if verbose else None)
    w = rescale(res.weights, how, data.tuned)
    score = data.evaluate(w)  # the score of the weights kept (rescaling can move a near-tie), as `rerank apply` ranks
    shares = weight_shares(data, w)
    alone = degenerate({n: v for n, v, t in zip(shares, shares.values(), data.tuned) if t})
    if alone:
        log.warning(f"warning: {label}the tuned weights are degenerate: {alone} holds {100 * shares[alone]:.0f}% of "
                    "the weighted within-list spread, so the other features barely change the ranking (Moses users "
                    "know this as 'all weight on one feature'; try other seeds, another step-size cap C, or rescaling that "
                    "feature)")
    meta = {"tuner": tuner_name, "seed": seed, "run": r, "runs": runs,
            "tuned_features": [n for n, t in zip(data.feature_names, data.tuned) if t],
            "fixed_features": [n for n, t in zip(data.feature_names, data.tuned) if not t],
            "normalize": how, "options": options_record(options), "hypotheses": data.nbest.n_hyps,
            "duplicates_merged": data.n_input_hyps - data.nbest.n_hyps, "initial_score": res.initial_score,
            "tuned_score": score, "curve": res.curve, "weight_shares": shares, **res.extra}
    return TuneRun(r, seed, score, res.initial_score, dict(zip(data.feature_names, w.tolist())), res.curve, meta)


def tune_runs(data: TuningData, tuner: Tuner, settings: TuneSettings, *, w0: np.ndarray | None = None,
              output: str | None = None, inputs: dict[str, str] | None = None, meta: dict | None = None,
              progress: Progress = False, verbose: Callable[[str], None] | None = None,
              on_run: Callable[[TuneRun], None] | None = None) -> TuneResult:
    """`settings.runs` runs of `tuner` (the plug-in `settings.tuner`) on `data` with seeds
    seed..seed+R-1 (`run_seeds`) from `w0` (default 0), and the run kept (`best_run`).

    `output`: write each run's weights file (`run_paths`) when it ends, with `meta` and per-run
    fields in its "meta", then OUTPUT = the kept run. With `inputs` (a digest of each input), an
    earlier run file whose record (`TuneSettings.reuse_record`, the start weights, the version and
    `inputs`) is equal is reused instead of tuned again. `on_run(run)` is called as each run ends
    (or is reused); `verbose(message)` receives the tuner's per-epoch lines.
    """
    options = tuner.make_options(settings.tuner_options)
    w0 = np.zeros(len(data.feature_names)) if w0 is None else np.asarray(w0, dtype=np.float64)
    runs, tuner_name = settings.runs, settings.tuner
    record = None
    if inputs is not None:
        record = {"options": {**settings.reuse_record(), "tuner_options": options_record(options), "init": w0.tolist()},
                  "version": __version__, "inputs": inputs}
        record = json.loads(json.dumps(record, default=str))  # as a run file reads back (tuples are lists)
    paths: list[str | None] = [None] * runs
    reused: dict[int, TuneRun] = {}
    if output:
        files = run_paths(output, runs)
        paths = list(files)
        if runs > 1 and record is not None:
            reused = {r: run for r, path in enumerate(files, start=1)
                      if (run := _reusable(path, r, record, data.feature_names)) is not None}
        _clear_stale(output, runs, files, reused)
    results = []
    for r, (path, s) in enumerate(zip(paths, run_seeds(settings.seed, runs)), start=1):
        if r in reused:
            run = reused[r]
            log.info(f"run {r}: reused {path} (same settings and inputs)")
        else:
            run = _one_run(data, tuner, settings, options, w0, r, s, progress, verbose)
            run.meta = {**(meta or {}), **run.meta, "settings": record}
            if path:
                write_weights(path, run.weights, run.meta)
                run.path = path
            log.info(f"run {r}: {data.metric.display} initial {run.initial_score:.2f} -> tuned "
                     f"{run.score:.2f} ({tuner_name}, seed {s})")
        results.append(run)
        if on_run is not None:
            on_run(run)
    best = best_run(results, data.metric)
    if output and runs > 1:
        kept = results[best]  # its own meta, with this call's inputs and record (a reused run was tuned by another)
        write_weights(output, kept.weights, {**kept.meta, **(meta or {}), "runs": runs, "best_of_runs": kept.path,
                                             "tuned_scores": [x.score for x in results]})
    return TuneResult(dict(results[best].weights), results, best, data.metric.name, output, tuner_name,
                      tuner.step_name, data.metric.info)
