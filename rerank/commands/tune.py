"""`rerank tune`: tune feature weights on an n-best list with k-best MIRA, MERT or PRO."""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

from rerank import __version__, plugins
from rerank.metrics.bleu import bleu_signature, make_bleu
from rerank.cliargs import (add_nbest_positional, add_quiet, nonnegative_int, positive_int, resolve_nbest,
                            show_progress, stderr_log)
from rerank.commands._common import format_help, nbest_inputs, add_nbest_input, load_nbest
from rerank.errors import InputError, require
from rerank.metrics import make_metric
from rerank.io import file_digest, read_references
from rerank.metrics.registry import QUALITY_METRICS, display_name, metric_info
from rerank.multirun import TuneRun, run_paths, stale_runs, tune_runs
from rerank.outputs import check_outputs
from rerank.tuning import prepare, weight_shares
from rerank.tuning_plot import plot_tuning
from rerank.weights import read_weights, weight_vector

METRICS = QUALITY_METRICS
# options that do not change a run's result (a run file written with other values is reused)
NOT_SETTINGS = ("output", "plot", "verbose", "quiet", "func", "command", "runs", "nbest_option", "cache",
                "nbest_owned_options")


def add_parser(subparsers):
    tuners = plugins.tuners()
    p = subparsers.add_parser(
        "tune", help="tune feature weights (" + ", ".join(tuners) + ")",
        description="Tune the feature weights of a reranker on an n-best list and its references with one "
        "of the installed tuners (entry-point group rerank.tuners): "
        + "; ".join(f"{name}: {cls.description}" for name, cls in tuners.items())
        + ". The BLEU is sacrebleu's corpus BLEU, equal to `rerank eval`'s for the same 1-best and "
        "tokenisation. " + format_help(),
        epilog="Example: rerank tune dev.nbest --ref dev.ref --tuner mira --runs 3 -o w.json "
        "(writes w.run1.json .. w.run3.json, each when its run ends, and w.json = the run with the best tuning "
        "score in the metric's direction (the lowest TER), with the same metadata, at the end). "
        "Run again after an interruption: a run file with the same "
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


def _tuner(args):
    """The chosen tuner plug-in, after checking that it optimises --metric and the tokenizer's name."""
    tuner = plugins.tuners()[args.tuner]()
    if args.metric not in tuner.metrics:
        raise InputError(f"--tuner {args.tuner} optimises {', '.join(tuner.metrics)}, not {args.metric}")
    make_bleu(args.tokenize, args.lowercase)  # checks the tokenizer name before reading big files
    require(getattr(tuner, "requires", ()), f"the {args.tuner} tuner")  # a missing extra, before any work
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


def _meta(args) -> dict:
    """What every run file records about this command (the library adds the run's own fields)."""
    return {"command": sys.argv, "nbest": os.path.abspath(args.nbest), "references": [os.path.abspath(x) for x in args.ref],
            "sentences": args.sentences, "metric": args.metric, "tokenize": args.tokenize, "lowercase": args.lowercase,
            "signature": metric_signature(args.metric, args.tokenize, args.lowercase, args.lang, len(args.ref)),
            "init": args.init, "nbest_text": {"post_process": args.post_process, "unescape": args.unescape}}


def _print_run(args, metric: str, run: TuneRun) -> None:
    """The line of one run, as it ends (or is reused)."""
    label = f"run {run.run}: " if args.runs > 1 else ""
    how = f"reused {run.path} (same settings and inputs): " if run.reused else ""
    print(f"{label}{how}{metric} initial {run.initial_score:.2f} -> tuned {run.score:.2f} "
          f"({args.tuner}, seed {run.seed})")


def run(args) -> int:
    resolve_nbest(args)
    tuner = _tuner(args)
    paths = run_paths(args.output, args.runs)
    check_outputs([args.output, *(paths if args.runs > 1 else []), args.plot, *stale_runs(args.output, args.runs)],
                  [*nbest_inputs(args), *args.ref, args.init])
    with stderr_log():  # the library's notes and warnings on stderr (the CLI may have done it already)
        return _run(args, tuner)


def _run(args, tuner) -> int:
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
    result = tune_runs(data, tuner, tuner_name=args.tuner, runs=args.runs, seed=args.seed, w0=w0,
                       options=tuner.options_from_args(args), normalize=args.normalize, output=args.output,
                       settings=_settings(args), meta=_meta(args), progress=show_progress(args),
                       verbose=(lambda msg: print(msg, file=sys.stderr)) if args.verbose else None,
                       on_run=lambda run: _print_run(args, metric, run))
    if args.runs > 1:
        print(f"{result.summary()} copied to {args.output}")
    if args.plot:
        kept = result.runs[result.best]
        w = np.array([result.weights[n] for n in data.feature_names])
        plot_tuning(args.plot, [(f"run {x.run}", x.curve) for x in result.runs], data.feature_names, w,
                    metric=metric, tuner=args.tuner, step_name=tuner.step_name,
                    higher_is_better=metric_info(args.metric).higher_is_better, shares=weight_shares(data, w),
                    run_label=f"run {kept.run}" + (f" (kept of {len(result.runs)})" if len(result.runs) > 1 else ""))
    print(f"done in {time.time() - start:.1f}s", file=sys.stderr)
    return 0
