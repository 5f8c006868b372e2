"""`rerank tune`: tune feature weights on an n-best list with k-best MIRA, MERT or PRO."""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from rerank import plugins
from rerank.commands import COMMANDS
from rerank.cliargs import (add_nbest_positional, add_quiet, nonnegative_int, positive_int, resolve_nbest,
                            bars, stderr_log)
from rerank.commands._common import format_help, nbest_inputs, add_nbest_input, load_nbest
from rerank.errors import InputError
from rerank.io import read_references
from rerank.metrics.registry import metric_names, objective_display, objective_metrics
from rerank.outputs import check_outputs

METRICS = metric_names(quality=True, builtin=True)  # for the help (--metric takes plug-ins too)
NORMALIZE = ("none", "l1", "max")   # rerank.api.TuneSettings.NORMALIZE, without importing the API to build the parser


def add_parser(subparsers):
    tuners = plugins.tuners()
    p = subparsers.add_parser(
        "tune", help=COMMANDS["tune"][1],
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
    p.add_argument("-r", "--ref", action="append", metavar="REF", help="reference file (repeat for several; required "
                   "unless every component of --metric is a column:NAME; default: none)")
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
    p.add_argument("--normalize", choices=NORMALIZE, default="none",
                   help="rescale the output weights (sum |w| = 1 or max |w| = 1; ranking unchanged; default: %(default)s)")
    p.add_argument("--sentences", metavar="A-B", help="tune on sentences A..B only (0-based, inclusive; the references "
                   "are cut the same way; default: all)")
    m = p.add_argument_group("metric")
    m.add_argument("--metric", default="bleu", metavar="METRIC",
                   help=f"what to optimise: {', '.join(METRICS)} (TER is minimised); column:NAME, the mean over the "
                   "sentences of the chosen hypotheses' n-best column NAME (e.g. COMET scores joined with `rerank "
                   "add-feature`; it needs no references, and is the objective, never a feature: it gets no weight); or "
                   "an interpolation as Moses' interpolated scorer, METRIC=W,METRIC=W (bleu=0.5,column:comet=0.5: "
                   "sum of W x each component on its own scale, BLEU 0-100, a column as it is, each oriented by its "
                   "direction, so higher is better; weights >= 0, not all 0) (default: %(default)s)")
    m.add_argument("--lower-better", metavar="NAME[,NAME]", help="these columns of --metric are better when lower "
                   "(default: a column is better when higher)")
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


def _names(text: str | None) -> tuple[str, ...]:
    return tuple(n.strip() for n in text.split(",") if n.strip()) if text else ()


def _sentence_range(text: str, n: int) -> np.ndarray:
    try:
        a, _, b = text.partition("-")
        lo, hi = int(a), int(b) if b else int(a)
    except ValueError:
        raise InputError(f"--sentences {text!r}: expected A-B (0-based, inclusive)") from None
    if not 0 <= lo <= hi < n:
        raise InputError(f"--sentences {text!r}: out of range for {n} sentences")
    return np.arange(lo, hi + 1)


def settings(args):
    """The TuneSettings of the parsed command line (the tuner's options from its own flags)."""
    from rerank.api import TuneSettings

    tuner = plugins.tuners()[args.tuner]()
    return TuneSettings(tuner=args.tuner, metric=args.metric, runs=args.runs, seed=args.seed, tokenize=args.tokenize,
                        lowercase=args.lowercase, lang=args.lang, tune_features=_names(args.tune_features),
                        fix=_names(args.fix), normalize=args.normalize, tuner_options=tuner.options_from_args(args),
                        lower_better=_names(args.lower_better))


def _inputs(args):
    """(n-best list, reference streams), cut to --sentences."""
    nbest, _ = load_nbest(args, args.nbest)
    if not args.ref:  # every component of --metric is a column (checked before): no references
        if args.sentences:
            nbest = nbest.select_sentences(_sentence_range(args.sentences, nbest.n_sentences))
        return nbest, None
    refs = read_references(args.ref)
    if len(refs[0]) != nbest.n_sentences:
        raise InputError(f"{len(refs[0])} reference lines for {nbest.n_sentences} n-best sentences in {args.nbest}",
                         args.ref[0])
    if args.sentences:
        keep = _sentence_range(args.sentences, nbest.n_sentences)
        nbest = nbest.select_sentences(keep)
        refs = [[stream[i] for i in keep] for stream in refs]
    return nbest, refs


def _tuning_set(data) -> None:
    merged = data.n_input_hyps - data.nbest.n_hyps
    print(f"tuning set: {data.nbest.n_sentences} sentences, {data.nbest.n_hyps} hypotheses"
          + (f" ({merged} exact duplicates merged)" if merged else "")
          + f", {int(data.tuned.sum())} of {len(data.feature_names)} features tuned", file=sys.stderr)


def run(args) -> int:
    from rerank.api import tune_outputs, tuner_for

    resolve_nbest(args)
    chosen = settings(args)  # --metric's syntax and --lower-better (InputErrors naming the option)
    if objective_metrics(args.metric) and not args.ref:
        raise InputError(f"--metric {args.metric} needs references (-r REF); only column:NAME components need none")
    tuner_for(chosen)  # the tuner, its metric, options and extras, before reading big files
    writes, stale = tune_outputs(args.output, args.runs)
    check_outputs([*writes, args.plot, *stale], [*nbest_inputs(args), *(args.ref or []), args.init])
    with stderr_log():  # the library's notes and warnings on stderr (the CLI may have done it already)
        return _run(args, chosen)


def _run(args, chosen) -> int:
    from rerank.api import tune

    start = time.time()
    nbest, refs = _inputs(args)
    metric = objective_display(args.metric)

    def show(run) -> None:
        label = f"run {run.run}: " if args.runs > 1 else ""
        how = f"reused {run.path} (same settings and inputs): " if run.reused else ""
        print(f"{label}{how}{metric} initial {run.initial_score:.2f} -> tuned {run.score:.2f} "
              f"({args.tuner}, seed {run.seed})")

    record = {"command": sys.argv, "references": [os.path.abspath(x) for x in args.ref or []] or None, "sentences": args.sentences,
              "nbest_text": {"post_process": args.post_process, "unescape": args.unescape}}
    result = tune(nbest, refs, chosen, init=args.init, output=args.output, progress=bars(args),
                  verbose=(lambda msg: print(msg, file=sys.stderr)) if args.verbose else lambda msg: None,
                  on_start=_tuning_set, on_run=show, record=record, source=args.nbest)
    if args.runs > 1:
        print(f"{result.summary()} copied to {args.output}")
    if args.plot:
        result.plot(args.plot)
    print(f"done in {time.time() - start:.1f}s", file=sys.stderr)
    return 0
