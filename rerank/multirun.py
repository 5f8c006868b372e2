"""Several runs of a tuner: R runs with seeds seed..seed+R-1, the run kept (the best tuning score in
the metric's direction: the lowest TER), and resuming from run files.

`tune_runs(data, tuner, ...)` is the one implementation behind `rerank tune --runs R` and the
Python API's `rerank.tune`. With an `output` path, run r is written to OUTPUT.runR.json (one run:
OUTPUT itself) when it ends, with its settings (options, package version, inputs' sha256) in its
"meta"; a later call with the same settings reuses those files, and removes the files an earlier
call with other settings left (so the files never mix two invocations), then writes OUTPUT = the
kept run. Notes and warnings go to the `logging` logger of this module; nothing is printed.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from rerank.metrics.registry import best_index, display_name, metric_info
from rerank.tuning import Tuner, TuningData, degenerate, normalize as rescale, weight_shares
from rerank.weights import read_weights, write_weights

log = logging.getLogger(__name__)


def run_seeds(seed: int, runs: int) -> list[int]:
    """The seeds of R independent runs: seed, seed + 1, ..., seed + R - 1 (run r has seed + r - 1)."""
    if runs < 1:
        raise ValueError(f"runs must be at least 1, got {runs}")
    return [seed + r for r in range(runs)]


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
        name, best = display_name(self.metric), self.best_run
        if len(self.runs) == 1:
            return f"{name} initial {best.initial_score:.2f} -> tuned {best.score:.2f} (seed {best.seed})"
        scores = np.array(self.scores)
        which = "highest" if metric_info(self.metric).higher_is_better else "lowest"
        return (f"{len(self.runs)} runs: {name} mean {scores.mean():.2f}, sd {scores.std(ddof=1):.2f}; "
                f"best run {best.run} ({which} {name}, {best.score:.2f})")


def best_run(runs: Sequence[TuneRun], metric: str) -> int:
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

def options_record(options) -> dict:
    """A tuner's options as weights.json records them (a dataclass of options or a dict)."""
    from dataclasses import asdict, is_dataclass

    return asdict(options) if is_dataclass(options) and not isinstance(options, type) else dict(options or {})


def _one_run(data: TuningData, tuner: Tuner, tuner_name: str, w0: np.ndarray, r: int, seed: int, runs: int,
             options: dict, how: str, progress: bool, verbose: Callable[[str], None] | None) -> TuneRun:
    """Run r with `seed`; its weights rescaled by `how` and scored as they will be applied."""
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


def tune_runs(data: TuningData, tuner: Tuner, *, tuner_name: str, runs: int = 1, seed: int = 1,
              w0: np.ndarray | None = None, options=None, normalize: str = "none",
              output: str | None = None, settings: dict | None = None, meta: dict | None = None,
              progress: bool = False, verbose: Callable[[str], None] | None = None,
              on_run: Callable[[TuneRun], None] | None = None) -> TuneResult:
    """R runs of `tuner` on `data` with seeds seed..seed+R-1 (`run_seeds`) from `w0` (default 0), and
    the run kept (`best_run`).

    `output`: write each run's weights file (`run_paths`) when it ends, with `meta` and per-run
    fields in its "meta", then OUTPUT = the kept run; with `settings` (what a run's result
    depends on, e.g. options, version and input digests), an earlier run file with equal settings
    is reused instead of tuned again. `on_run(run)` is called as each run ends (or is reused);
    `verbose(message)` receives the tuner's per-epoch lines.
    """
    if normalize != "none" and not data.tuned.all():
        raise ValueError(f"normalize={normalize!r} would rescale fixed features; use normalize='none' when some "
                         "features are fixed")
    w0 = np.zeros(len(data.feature_names)) if w0 is None else np.asarray(w0, dtype=np.float64)
    paths: list[str | None] = [None] * runs
    reused: dict[int, TuneRun] = {}
    if output:
        files = run_paths(output, runs)
        paths = list(files)
        if runs > 1 and settings is not None and None not in settings.get("inputs", {}).values():
            reused = {r: run for r, path in enumerate(files, start=1)
                      if (run := _reusable(path, r, settings, data.feature_names)) is not None}
        _clear_stale(output, runs, files, reused)
    results = []
    for r, (path, s) in enumerate(zip(paths, run_seeds(seed, runs)), start=1):
        if r in reused:
            run = reused[r]
            log.info(f"run {r}: reused {path} (same settings and inputs)")
        else:
            run = _one_run(data, tuner, tuner_name, w0, r, s, runs, options, normalize, progress, verbose)
            run.meta = {**(meta or {}), **run.meta, "settings": settings}
            if path:
                write_weights(path, run.weights, run.meta)
                run.path = path
            log.info(f"run {r}: {display_name(data.metric.name)} initial {run.initial_score:.2f} -> tuned "
                     f"{run.score:.2f} ({tuner_name}, seed {s})")
        results.append(run)
        if on_run is not None:
            on_run(run)
    best = best_run(results, data.metric.name)
    if output and runs > 1:
        kept = results[best]  # its own meta (a reused run's has the command that tuned it: say this one's)
        now = {"command": meta["command"]} if meta and "command" in meta else {}
        write_weights(output, kept.weights, {**kept.meta, **now, "runs": runs, "best_of_runs": kept.path,
                                             "tuned_scores": [x.score for x in results]})
    return TuneResult(dict(results[best].weights), results, best, data.metric.name, output)
