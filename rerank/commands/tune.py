"""`rerank tune`: tune feature weights on an n-best list with k-best MIRA, MERT or PRO (`rerank.tune`)."""

from __future__ import annotations

import sys
import time

import rerank
from rerank.cliargs import add_nbest_positional, add_quiet, bars, resolve_nbest
from rerank.commands import COMMANDS
from rerank.commands._common import add_nbest_input, format_help, installed_tuners, nbest_file, reading
from rerank.options import Writing, add_option_flags, options_from_args


def add_parser(subparsers):
    tuners = installed_tuners()
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
        "and redone, as are run files beyond --runs and the old w.json, so the files never mix two invocations "
        "(and two at once cannot write them: the second refuses, naming the first, or waits with --wait).",
    )
    add_nbest_positional(p)
    add_nbest_input(p, positional=False)
    p.add_argument("-r", "--ref", dest="refs", action="append", metavar="REF", help="reference file (repeat for "
                   "several; required unless every component of --metric is a column:NAME; default: none)")
    p.add_argument("-o", "--output", required=True, help="output weights (JSON; the run config is in its \"meta\")")
    p.add_argument("--init", metavar="WEIGHTS", help="starting weights (JSON or Moses lines; default: all zero as kbmira)")
    p.add_argument_group("metric")  # first among the settings' sections, as before
    add_option_flags(p, rerank.TuneSettings)
    for name, cls in tuners.items():
        cls().add_arguments(p.add_argument_group(name))
    o = p.add_argument_group("output")
    o.add_argument("-v", "--verbose", action="store_true", help="print the tuning metric per epoch / iteration "
                   "(default: only the result of each run)")
    o.add_argument("--plot", metavar="PNG", help="draw the tuning curve and the final weights (default: no plot)")
    add_option_flags(o, Writing)   # --wait: of -o (its run files with it) and --plot
    add_quiet(o)
    p.set_defaults(func=run)


def settings(args):
    """The TuneSettings of the parsed command line (the tuner's options from its own flags)."""
    chosen = options_from_args(rerank.TuneSettings, args)
    tuner = installed_tuners().get(chosen.tuner)
    if tuner is None:
        return chosen  # rerank.tune says that the tuner is unknown
    return rerank.TuneSettings.make(chosen, tuner_options=tuner.options_from_args(args))


def _tuning_set(data) -> None:
    merged = data.n_input_hyps - data.nbest.n_hyps
    print(f"tuning set: {data.nbest.n_sentences} sentences, {data.nbest.n_hyps} hypotheses"
          + (f" ({merged} exact duplicates merged)" if merged else "")
          + f", {int(data.tuned.sum())} of {len(data.feature_names)} features tuned", file=sys.stderr)


def run(args) -> int:
    resolve_nbest(args)
    chosen = settings(args)
    start = time.time()
    metric = chosen.metric_display

    def show(run) -> None:
        label = f"run {run.run}: " if chosen.runs > 1 else ""
        how = f"reused {run.path} (same settings and inputs): " if run.reused else ""
        print(f"{label}{how}{metric} initial {run.initial_score:.2f} -> tuned {run.score:.2f} "
              f"({chosen.tuner}, seed {run.seed})")

    events = rerank.TuneEvents(progress=bars(args), on_start=_tuning_set, on_run=show,
                               verbose=(lambda msg: print(msg, file=sys.stderr)) if args.verbose else lambda msg: None)
    with reading():
        result = rerank.tune(nbest_file(args), args.refs, chosen, init=args.init, output=args.output, plot=args.plot,
                             events=events, record={"command": sys.argv}, wait=args.wait)
    chosen_line = result.selection_summary()
    if chosen_line:
        print(chosen_line)
    if chosen.runs > 1:
        print(f"{result.summary()} copied to {args.output}")
    print(f"done in {time.time() - start:.1f}s", file=sys.stderr)
    return 0
