"""`rerank tune`: tune feature weights on an n-best list with k-best MIRA, MERT or PRO."""

from __future__ import annotations

import glob
import json
import os
import re
import sys
import time
from typing import NamedTuple

import numpy as np

from rerank import __version__, plugins
from rerank.bleu import bleu_signature, make_bleu
from rerank.cliargs import (add_nbest_positional, add_quiet, nbest_inputs, nonnegative_int, positive_int, resolve_nbest,
                            show_progress)
from rerank.commands._common import FORMAT_HELP, add_nbest_input, load_nbest
from rerank.errors import InputError
from rerank.formats import read_references
from rerank.metrics import make_metric
from rerank.metrics.registry import QUALITY_METRICS, best_of, display_name, metric_info
from rerank.outputs import check_outputs, file_digest
from rerank.tuning import degenerate, normalize, prepare, weight_shares
from rerank.tuning_plot import plot_tuning
from rerank.weights import read_weights, weight_vector, write_weights

METRICS = QUALITY_METRICS
# options that do not change a run's result (a run file written with other values is reused)
NOT_SETTINGS = ("output", "plot", "verbose", "quiet", "func", "command", "runs", "nbest_option")


def add_parser(subparsers):
    tuners = plugins.tuners()
    p = subparsers.add_parser(
        "tune", help="tune feature weights (" + ", ".join(tuners) + ")",
        description="Tune the feature weights of a reranker on an n-best list and its references with one "
        "of the installed tuners (entry-point group rerank.tuners): "
        + "; ".join(f"{name}: {cls.description}" for name, cls in tuners.items())
        + ". The BLEU is sacrebleu's corpus BLEU, equal to `rerank eval`'s for the same 1-best and "
        "tokenisation. " + FORMAT_HELP,
        epilog="Example: rerank tune dev.nbest --ref dev.ref --tuner mira --runs 3 -o w.json "
        "(writes w.run1.json .. w.run3.json, each when its run ends, and w.json = the run with the best tuning "
        "score in the metric's direction (the lowest TER), with the same metadata, at the end). Run again after an interruption: a run file with the same "
        "settings and inputs (sha256 recorded in its meta) is reused, and said so; the others are removed first "
        "and redone, as are run files beyond --runs and the old w.json, so the files never mix two invocations.",
    )
    add_nbest_positional(p)
    add_nbest_input(p, positional=False)
    p.add_argument("-r", "--ref", action="append", required=True, metavar="REF", help="reference file (repeat for several)")
    p.add_argument("-o", "--output", required=True, help="output weights (JSON; the run config is in its \"meta\")")
    p.add_argument("--tuner", choices=list(tuners), default="mira" if "mira" in tuners else next(iter(tuners), None),
                   help="tuning algorithm (default: %(default)s)")
    p.add_argument("--runs", type=positive_int, default=1, help="independent runs with seeds seed..seed+R-1; R > 1 writes "
                   "OUTPUT.run1.json .. runR.json for the optimizer-instability report of `rerank eval` "
                   "(default: %(default)s)")
    p.add_argument("--seed", type=nonnegative_int, default=1, help="random seed of the first run (default: %(default)s)")
    p.add_argument("--init", metavar="WEIGHTS", help="starting weights (JSON or Moses lines; default: all zero as kbmira)")
    p.add_argument("--tune", dest="tune_features", metavar="F1,F2",
                   help="tune only these features; the others stay at their start value (default: all)")
    p.add_argument("--fix", metavar="F1,F2", help="keep these features at their start value (default: none)")
    p.add_argument("--normalize", choices=["none", "l1", "max"], default="none",
                   help="rescale the output weights (sum |w| = 1 or max |w| = 1; ranking unchanged; default: %(default)s)")
    p.add_argument("--sentences", metavar="A-B", help="tune on sentences A..B only (0-based, inclusive; the references "
                   "are cut the same way; default: all)")
    m = p.add_argument_group("metric")
    m.add_argument("--metric", choices=METRICS, default="bleu", help="metric to optimise (the tuner must support it; "
                   "TER is minimised; default: %(default)s)")
    m.add_argument("--tokenize", default="13a", help="BLEU tokeniser as sacrebleu -tok, as `rerank eval` and `rerank "
                   "oracle` (default: %(default)s; none for text tokenised like its references)")
    m.add_argument("--lowercase", action="store_true", help="case-insensitive BLEU (default: case-sensitive)")
    m.add_argument("--lang", default="en", help="target language for METEOR (default: %(default)s)")
    for name, cls in tuners.items():
        cls().add_arguments(p.add_argument_group(name))
    o = p.add_argument_group("output")
    o.add_argument("-v", "--verbose", action="store_true", help="print the tuning metric per epoch / iteration "
                   "(default: only the result of each run)")
    o.add_argument("--plot", metavar="PNG", help="draw the tuning curve and the final weights (default: no plot)")
    add_quiet(o)
    p.set_defaults(func=run)


def _names(text: str | None) -> list[str] | None:
    return [n.strip() for n in text.split(",") if n.strip()] if text else None


def _sentence_range(text: str, n: int) -> np.ndarray:
    try:
        a, _, b = text.partition("-")
        lo, hi = int(a), int(b) if b else int(a)
    except ValueError:
        raise InputError(f"--sentences {text!r}: expected A-B (0-based, inclusive)") from None
    if not 0 <= lo <= hi < n:
        raise InputError(f"--sentences {text!r}: out of range for {n} sentences")
    return np.arange(lo, hi + 1)


def run_paths(output: str, runs: int) -> list[str]:
    if runs == 1:
        return [output]
    stem, ext = os.path.splitext(output)
    return [f"{stem}.run{r}{ext or '.json'}" for r in range(1, runs + 1)]


def _tuner(args):
    """The chosen tuner plug-in, after checking that it optimises --metric and the tokenizer's name."""
    tuner = plugins.tuners()[args.tuner]()
    if args.metric not in tuner.metrics:
        raise InputError(f"--tuner {args.tuner} optimises {', '.join(tuner.metrics)}, not {args.metric}")
    make_bleu(args.tokenize, args.lowercase)  # checks the tokenizer name before reading big files
    return tuner


def _inputs(args):
    """(n-best list, reference streams, start weights), cut to --sentences."""
    nbest, _ = load_nbest(args, args.nbest)
    refs = read_references(args.ref)
    if len(refs[0]) != nbest.n_sentences:
        raise InputError(f"{len(refs[0])} reference lines for {nbest.n_sentences} n-best sentences in {args.nbest}",
                         args.ref[0])
    if args.sentences:
        keep = _sentence_range(args.sentences, nbest.n_sentences)
        nbest = nbest.select_sentences(keep)
        refs = [[stream[i] for i in keep] for stream in refs]
    w0 = np.zeros(len(nbest.feature_names))
    if args.init:
        w0 = weight_vector(read_weights(args.init), nbest.feature_names, source=args.init)
    return nbest, refs, w0


class RunResult(NamedTuple):
    score: float          # the tuned score: the metric's own value (TER, not -TER)
    path: str             # the run's weights file
    weights: np.ndarray   # in the n-best's column order
    curve: list
    run: int
    meta: dict            # as written in the run's weights file


def metric_signature(metric: str, tokenize: str, lowercase: bool, lang: str, n_refs: int) -> str:
    """The metric's sacrebleu (or METEOR) signature for these settings, as `rerank eval` prints it."""
    if metric == "bleu":
        return "BLEU|" + bleu_signature(tokenize, lowercase, n_refs)
    scorer = make_metric(metric, lang=lang, tokenize=tokenize, lowercase=lowercase)
    if metric != "meteor":
        scorer.corpus_score(["x"], [["x"]] * n_refs)  # sacrebleu knows the number of references only then
    return scorer.signature()


def _settings(args) -> dict:
    """What a run's result depends on: the options (not --runs, not the outputs), the package
    version and the inputs' sha256 (None for standard input)."""
    options = {k: v for k, v in sorted(vars(args).items()) if k not in NOT_SETTINGS and not callable(v)}
    digests = {path: file_digest(path) for path in dict.fromkeys(nbest_inputs(args) + args.ref + [args.init]) if path}
    return json.loads(json.dumps({"options": options, "version": __version__, "inputs": digests}, default=str))


def _tune_meta(path: str) -> dict | None:
    """The meta of a weights file `rerank tune` wrote (one run or the best of runs), else None."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    meta = data.get("meta") if isinstance(data, dict) else None
    return meta if isinstance(meta, dict) and "tuner" in meta and "run" in meta else None


def stale_runs(output: str, runs: int) -> list[str]:
    """OUTPUT.runK files an earlier `rerank tune` wrote that this one does not (K > runs; all for one run)."""
    stem, ext = os.path.splitext(output)
    ext = ext or ".json"
    number = re.compile(re.escape(stem) + r"\.run(\d+)" + re.escape(ext) + "$")
    found = [(int(m.group(1)), path) for path in glob.glob(glob.escape(stem) + ".run*" + glob.escape(ext))
             if (m := number.match(path))]
    return [path for k, path in sorted(found) if k > (runs if runs > 1 else 0) and _tune_meta(path) is not None]


def _reusable(path: str, r: int, settings: dict, feature_names: list[str]) -> RunResult | None:
    """The run in `path` if it was written with these settings and inputs, else None."""
    meta = _tune_meta(path)
    if meta is None or meta.get("settings") != settings or meta.get("run") != r or "best_of_runs" in meta:
        return None
    weights = read_weights(path)
    if sorted(weights) != sorted(feature_names):
        return None
    w = np.array([weights[name] for name in feature_names])
    return RunResult(meta["tuned_score"], path, w, meta.get("curve", []), r, meta)


def _clear_stale(args, paths: list[str], reused: dict) -> None:
    """Remove the files of an earlier tune that this one replaces, before it starts, so that an
    interruption never leaves runs of two invocations side by side."""
    doomed = stale_runs(args.output, args.runs)
    if args.runs > 1:
        doomed += [p for r, p in enumerate(paths, start=1) if r not in reused and _tune_meta(p) is not None]
        if len(reused) < args.runs and _tune_meta(args.output) is not None:
            doomed.append(args.output)
    for path in doomed:
        os.unlink(path)
    if doomed:
        print(f"note: removed {', '.join(doomed)}: written by an earlier tune with other settings, inputs or "
              "--runs", file=sys.stderr)


def _tune_run(args, tuner, data, w0, r: int, path: str, metric: str, settings: dict) -> RunResult:
    """One run with seed seed + r - 1, written to `path` with its config when it ends."""
    seed = args.seed + r - 1
    label = f"run {r}: " if args.runs > 1 else ""
    res = tuner.tune(data, w0, seed=seed, options=tuner.options(args), progress=show_progress(args),
                     log=(lambda msg: print(label + msg, file=sys.stderr)) if args.verbose else None)
    curve, initial = res.curve, res.initial_score
    w = normalize(res.weights, args.normalize, data.tuned)
    best = data.evaluate(w)  # the score of the weights written (rescaling can move a near-tie), as `rerank apply` ranks
    print(f"{label}{metric} initial {initial:.2f} -> tuned {best:.2f} ({args.tuner}, seed {seed})")
    shares = weight_shares(data, w)
    alone = degenerate({n: v for n, v, t in zip(shares, shares.values(), data.tuned) if t})
    if alone:
        print(f"warning: {label}the tuned weights are degenerate: {alone} holds {100 * shares[alone]:.0f}% of the "
              "weighted within-list spread, so the other features barely change the ranking (Moses users know "
              "this as 'all weight on one feature'; try other seeds, --C, or rescaling that feature)", file=sys.stderr)
    meta = {
        "tuner": args.tuner, "seed": seed, "run": r, "runs": args.runs, "command": sys.argv,
        "nbest": os.path.abspath(args.nbest), "references": [os.path.abspath(x) for x in args.ref],
        "sentences": args.sentences, "metric": args.metric, "tokenize": args.tokenize, "lowercase": args.lowercase,
        "signature": metric_signature(args.metric, args.tokenize, args.lowercase, args.lang, len(args.ref)),
        "init": args.init, "tuned_features": [n for n, t in zip(data.feature_names, data.tuned) if t],
        "fixed_features": [n for n, t in zip(data.feature_names, data.tuned) if not t],
        "normalize": args.normalize, "options": tuner.options(args),
        "hypotheses": data.nbest.n_hyps, "duplicates_merged": data.n_input_hyps - data.nbest.n_hyps,
        "initial_score": initial, "tuned_score": best, "curve": curve, "weight_shares": shares, **res.extra,
        "settings": settings,
    }
    write_weights(path, dict(zip(data.feature_names, w.tolist())), meta)
    return RunResult(best, path, w, curve, r, meta)


def best_run(results: list[RunResult], metric: str) -> RunResult:
    """The run with the best tuned score in the metric's direction (the lowest TER), the first of equal ones."""
    return best_of(results, metric, key=lambda x: x.score)


def _write_best_of_runs(args, feature_names: list[str], results: list[RunResult], metric: str) -> None:
    """OUTPUT = the run with the best tuning score, with that run's metadata, and the spread of the runs."""
    best = best_run(results, args.metric)
    meta = {**best.meta, "command": sys.argv, "runs": args.runs, "best_of_runs": best.path,
            "tuned_scores": [x.score for x in results]}
    write_weights(args.output, dict(zip(feature_names, best.weights.tolist())), meta)
    scores = np.array([x.score for x in results])
    which = "highest" if metric_info(args.metric).higher_is_better else "lowest"
    print(f"{args.runs} runs: {metric} mean {scores.mean():.2f}, sd {scores.std(ddof=1):.2f}; "
          f"best run {best.run} ({which} {metric}, {best.score:.2f}) copied to {args.output}")


def _runs(args, tuner, data, w0, paths: list[str], metric: str) -> list[RunResult]:
    """Every run: reused from its file when that has the same settings and inputs, else tuned."""
    settings = _settings(args)
    reused = {}
    if args.runs > 1 and None not in settings["inputs"].values():  # standard input cannot be compared
        reused = {r: run for r, path in enumerate(paths, start=1)
                  if (run := _reusable(path, r, settings, data.feature_names)) is not None}
    _clear_stale(args, paths, reused)
    results = []
    for r, path in enumerate(paths, start=1):
        if r in reused:
            meta = reused[r].meta
            print(f"run {r}: reused {path} (same settings and inputs): {metric} initial "
                  f"{meta['initial_score']:.2f} -> tuned {meta['tuned_score']:.2f} ({args.tuner}, seed {meta['seed']})")
            results.append(reused[r])
        else:
            results.append(_tune_run(args, tuner, data, w0, r, path, metric, settings))
    return results


def run(args) -> int:
    resolve_nbest(args)
    tuner = _tuner(args)
    paths = run_paths(args.output, args.runs)
    check_outputs([args.output, *(paths if args.runs > 1 else []), args.plot, *stale_runs(args.output, args.runs)],
                  [*nbest_inputs(args), *args.ref, args.init])
    start = time.time()
    nbest, refs, w0 = _inputs(args)
    data = prepare(nbest, refs, metric=args.metric, tokenize=args.tokenize, lowercase=args.lowercase,
                   tune=_names(args.tune_features), fix=_names(args.fix), lang=args.lang,
                   progress=show_progress(args), source=args.nbest)
    if args.normalize != "none" and not data.tuned.all():
        raise InputError(f"--normalize {args.normalize} would rescale fixed features; use --normalize none with --fix/--tune")
    metric = display_name(args.metric)
    merged = data.n_input_hyps - data.nbest.n_hyps
    print(f"tuning set: {nbest.n_sentences} sentences, {data.nbest.n_hyps} hypotheses"
          + (f" ({merged} exact duplicates merged)" if merged else "")
          + f", {int(data.tuned.sum())} of {len(data.feature_names)} features tuned", file=sys.stderr)
    results = _runs(args, tuner, data, w0, paths, metric)
    if args.runs > 1:
        _write_best_of_runs(args, data.feature_names, results, metric)
    if args.plot:
        plot_tuning(args.plot, [(f"run {x.run}", x.curve) for x in results], data.feature_names,
                    best_run(results, args.metric).weights, metric=metric, tuner=args.tuner,
                    step_name=tuner.step_name, higher_is_better=metric_info(args.metric).higher_is_better)
    print(f"done in {time.time() - start:.1f}s", file=sys.stderr)
    return 0
