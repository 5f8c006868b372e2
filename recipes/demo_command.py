"""`rerank demo`: the whole pipeline on the data shipped inside the package."""

from __future__ import annotations

import argparse
import os

from rerank.cliargs import nonnegative_int, positive_int
from rerank.device import add_torch_options, setup_torch
from rerank.errors import InputError


def bootstrap_count(text: str) -> int:
    """argparse type: 0 (no bootstrap) or at least 2 resamples, as `rerank eval --bootstrap`."""
    value = nonnegative_int(text)
    if value == 1:
        raise argparse.ArgumentTypeError("must be 0 (no s_sel or intervals) or at least 2, got 1")
    return value


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "demo", help="rerank the shipped Multi30k n-best lists end to end (a few minutes on a CPU)",
        description="Reads the Multi30k En→De val and test_2016 n-best lists shipped in the package, "
        "adds the sentence-sentence embedding feature s_s(source, hyp) with the shipped small "
        "MLMME model (text only: no image features exist for the shipped data, so s_i is not "
        "used) and the consensus feature mbr, tunes feature weights on val with k-best MIRA (R runs "
        "per system; when the lists carry the precomputed channel and LM columns channel, channel_norm, "
        "lm, lm_norm, two more systems: + channel + lm, and all features), reranks "
        "test_2016 and prints BLEU, METEOR and TER with stratified approximate-randomisation "
        "significance: † against the NMT 1-best, ‡ against MIRA on the NMT features alone.",
    )
    parser.add_argument("--out", help="keep every file here: feature n-best lists, weights, outputs, tables, plot "
                        "(default: none, only the report is printed)")
    parser.add_argument("--flavour", help="NMT flavour of the shipped lists: weak, regular, optimised "
                        "(default: optimised)")
    parser.add_argument("--nbest-size", type=positive_int, default=20, help="20 or 50 (default: %(default)s)")
    parser.add_argument("--runs", type=positive_int, default=3, help="MIRA runs (seeds) per system (default: %(default)s)")
    parser.add_argument("--epochs", type=positive_int, default=60, help="MIRA epochs (default: %(default)s)")
    parser.add_argument("--ar", type=positive_int, default=10000,
                        help="approximate randomisation trials (default: %(default)s)")
    parser.add_argument("--bootstrap", type=bootstrap_count, default=1000,
                        help="bootstrap samples for s_sel and CIs; 0: none (default: %(default)s)")
    parser.add_argument("--metrics", default="bleu,meteor,ter", help="comma-separated metrics (default: %(default)s)")
    parser.add_argument("--model", help="embedding model to use instead of the shipped one (default: the shipped "
                        "mlmme-bpe)")
    parser.add_argument("--sentences", type=positive_int,
                        help="use only the first N sentences of val and test, a quick look (default: all)")
    parser.add_argument("--seed", type=nonnegative_int, default=1, help="(default: %(default)s)")
    add_torch_options(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    """The demo, with its log lines (INFO records of the `rerank` loggers) on stderr."""
    import logging

    from rerank.cliargs import stderr_log

    with stderr_log(logging.INFO):
        return _run(args)


def _run(args) -> int:
    from rerank.recipes.demo import run_demo

    setup_torch(args)
    if args.out and os.path.exists(args.out) and not os.path.isdir(args.out):
        raise InputError("--out must be a directory, this is a file", args.out)
    report = run_demo(out_dir=args.out, flavour=args.flavour, n=args.nbest_size, runs=args.runs, epochs=args.epochs,
                      ar_trials=args.ar, bootstrap=args.bootstrap, model=args.model, seed=args.seed,
                      metrics=tuple(args.metrics.split(",")), device=args.device,
                      sentences=args.sentences)
    print(report)
    return 0
