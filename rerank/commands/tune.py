"""`rerank tune`: tune feature weights on an n-best list with k-best MIRA, MERT or PRO."""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from rerank import plugins
from rerank.cliargs import nbest_inputs
from rerank.commands._common import FORMAT_HELP, add_nbest_input, load_nbest
from rerank.errors import InputError
from rerank.formats import read_references
from rerank.outputs import check_outputs
from rerank.tuning import normalize, prepare
from rerank.tuning_plot import plot_tuning
from rerank.weights import read_weights, weight_vector, write_weights

METRICS = ("bleu", "ter", "chrf", "chrf++", "meteor")


def add_parser(subparsers):
    tuners = plugins.tuners()
    p = subparsers.add_parser(
        "tune", help="tune feature weights (" + ", ".join(tuners) + ")",
        description="Tune the feature weights of a reranker on an n-best list and its references with one "
        "of the installed tuners (entry-point group rerank.tuners): "
        + "; ".join(f"{name}: {cls.description}" for name, cls in tuners.items())
        + ". The BLEU is sacrebleu's corpus BLEU, equal to `rerank eval`'s for the same 1-best and "
        "tokenisation. " + FORMAT_HELP,
        epilog="Example: rerank tune --nbest dev.nbest --ref dev.ref --tuner mira --runs 3 -o w.json "
        "(writes w.run1.json .. w.run3.json and w.json = the run with the best tuning score).",
    )
    p.add_argument("--nbest", required=True, help="tuning n-best list")
    add_nbest_input(p, positional=False)
    p.add_argument("-r", "--ref", action="append", required=True, metavar="REF", help="reference file (repeat for several)")
    p.add_argument("-o", "--output", required=True, help="output weights (JSON; the run config is in its \"meta\")")
    p.add_argument("--tuner", choices=list(tuners), default="mira" if "mira" in tuners else next(iter(tuners), None),
                   help="tuning algorithm (default: %(default)s)")
    p.add_argument("--runs", type=int, default=1, help="independent runs with seeds seed..seed+R-1; R > 1 writes "
                   "OUTPUT.run1.json .. runR.json for the optimizer-instability report of `rerank eval` (default 1)")
    p.add_argument("--seed", type=int, default=1, help="random seed of the first run (default 1)")
    p.add_argument("--init", metavar="WEIGHTS", help="starting weights (JSON or Moses lines; default: all zero as kbmira)")
    p.add_argument("--tune", dest="tune_features", metavar="F1,F2", help="tune only these features; the others stay at their start value")
    p.add_argument("--fix", metavar="F1,F2", help="keep these features at their start value")
    p.add_argument("--normalize", choices=["none", "l1", "max"], default="none",
                   help="rescale the output weights (sum |w| = 1 or max |w| = 1; ranking unchanged; default none)")
    p.add_argument("--sentences", metavar="A-B", help="tune on sentences A..B only (0-based, inclusive; the references are cut the same way)")
    m = p.add_argument_group("metric")
    m.add_argument("--metric", choices=METRICS, default="bleu", help="metric to optimise (default bleu; the tuner "
                   "must support it)")
    m.add_argument("--tokenize", default="none", help="BLEU tokeniser as sacrebleu -tok (default none: n-best lists are "
                   "usually tokenised like their references; 13a, intl, ... otherwise)")
    m.add_argument("--lowercase", action="store_true", help="case-insensitive BLEU")
    m.add_argument("--lang", default="en", help="target language for METEOR (default en)")
    for name, cls in tuners.items():
        cls().add_arguments(p.add_argument_group(name))
    o = p.add_argument_group("output")
    o.add_argument("-v", "--verbose", action="store_true", help="print the tuning metric per epoch / iteration")
    o.add_argument("--plot", metavar="PNG", help="draw the tuning curve and the final weights")
    o.add_argument("--quiet", action="store_true", help="no progress bar")
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
    """The chosen tuner plug-in, after checking --runs and that it optimises --metric."""
    tuner = plugins.tuners()[args.tuner]()
    if args.runs < 1:
        raise InputError("--runs must be at least 1")
    if args.metric not in tuner.metrics:
        raise InputError(f"--tuner {args.tuner} optimises {', '.join(tuner.metrics)}, not {args.metric}")
    return tuner


def _inputs(args):
    """(n-best list, reference streams, start weights), cut to --sentences."""
    nbest, _ = load_nbest(args, args.nbest)
    refs = read_references(args.ref)
    if len(refs[0]) != nbest.n_sentences:
        raise InputError(f"{len(refs[0])} reference lines for {nbest.n_sentences} n-best sentences", args.ref[0])
    if args.sentences:
        keep = _sentence_range(args.sentences, nbest.n_sentences)
        nbest = nbest.select_sentences(keep)
        refs = [[stream[i] for i in keep] for stream in refs]
    w0 = np.zeros(len(nbest.feature_names))
    if args.init:
        w0 = weight_vector(read_weights(args.init), nbest.feature_names, source=args.init)
    return nbest, refs, w0


def _tune_run(args, tuner, data, w0, r: int, path: str, metric: str) -> tuple:
    """One run with seed seed + r - 1, written to `path` with its config; (score, path, w, curve, r)."""
    seed = args.seed + r - 1
    label = f"run {r}: " if args.runs > 1 else ""
    res = tuner.tune(data, w0, seed=seed, options=tuner.options(args), progress=not args.quiet,
                     log=(lambda msg: print(label + msg, file=sys.stderr)) if args.verbose else None)
    curve, initial, best = res.curve, res.initial_score, res.tuned_score
    w = normalize(res.weights, args.normalize, data.tuned)
    print(f"{label}{metric} initial {initial:.2f} -> tuned {best:.2f} ({args.tuner}, seed {seed})")
    meta = {
        "tuner": args.tuner, "seed": seed, "run": r, "runs": args.runs, "command": sys.argv,
        "nbest": os.path.abspath(args.nbest), "references": [os.path.abspath(x) for x in args.ref],
        "sentences": args.sentences, "metric": args.metric, "tokenize": args.tokenize, "lowercase": args.lowercase,
        "init": args.init, "tuned_features": [n for n, t in zip(data.feature_names, data.tuned) if t],
        "fixed_features": [n for n, t in zip(data.feature_names, data.tuned) if not t],
        "normalize": args.normalize, "options": tuner.options(args),
        "hypotheses": data.nbest.n_hyps, "duplicates_merged": data.n_input_hyps - data.nbest.n_hyps,
        "initial_score": initial, "tuned_score": best, "curve": curve, **res.extra,
    }
    write_weights(path, dict(zip(data.feature_names, w.tolist())), meta)
    return best, path, w, curve, r


def _write_best_of_runs(args, data, results: list, metric: str) -> None:
    """OUTPUT = a copy of the run with the best tuning score, and the spread of the runs."""
    best_run = max(results, key=lambda x: x[0])
    meta = {"tuner": args.tuner, "best_of_runs": best_run[1], "run": best_run[4], "runs": args.runs,
            "tuned_scores": [x[0] for x in results], "command": sys.argv}
    write_weights(args.output, dict(zip(data.feature_names, best_run[2].tolist())), meta)
    scores = np.array([x[0] for x in results])
    print(f"{args.runs} runs: {metric} mean {scores.mean():.2f}, sd {scores.std(ddof=1):.2f}; "
          f"best run {best_run[4]} copied to {args.output}")


def run(args) -> int:
    tuner = _tuner(args)
    paths = run_paths(args.output, args.runs)
    check_outputs([args.output, *(paths if args.runs > 1 else []), args.plot],
                  [*nbest_inputs(args), *args.ref, args.init])
    start = time.time()
    nbest, refs, w0 = _inputs(args)
    data = prepare(nbest, refs, metric=args.metric, tokenize=args.tokenize, lowercase=args.lowercase,
                   tune=_names(args.tune_features), fix=_names(args.fix), lang=args.lang,
                   progress=not args.quiet, source=args.nbest)
    if args.normalize != "none" and not data.tuned.all():
        raise InputError(f"--normalize {args.normalize} would rescale fixed features; use --normalize none with --fix/--tune")
    metric = args.metric.upper() if args.metric != "chrf++" else "chrF++"
    merged = data.n_input_hyps - data.nbest.n_hyps
    print(f"tuning set: {nbest.n_sentences} sentences, {data.nbest.n_hyps} hypotheses"
          + (f" ({merged} exact duplicates merged)" if merged else "")
          + f", {int(data.tuned.sum())} of {len(data.feature_names)} features tuned", file=sys.stderr)
    results = [_tune_run(args, tuner, data, w0, r, path, metric)
               for r, path in enumerate(paths, start=1)]
    if args.runs > 1:
        _write_best_of_runs(args, data, results, metric)
    if args.plot:
        plot_tuning(args.plot, [(f"run {x[4]}", x[3]) for x in results], data.feature_names,
                    max(results, key=lambda x: x[0])[2], metric=metric, tuner=args.tuner, step_name=tuner.step_name)
    print(f"done in {time.time() - start:.1f}s", file=sys.stderr)
    return 0
