"""`rerank features`: add the columns of installed feature plug-ins (s_s, s_i, ...) to an n-best list
(`rerank.add_features_file`)."""

from __future__ import annotations

import sys

import rerank
from rerank.cliargs import add_device_option, add_nbest_positional, add_quiet, add_threads_option, bars, resolve_nbest
from rerank.commands import COMMANDS
from rerank.commands._common import add_nbest_input, add_output_format, format_help, installed_features, nbest_file, reading
from rerank.options import add_option_flags, options_from_args


def add_parser(subparsers):
    features = installed_features()
    listing = "; ".join(f"{', '.join(cls.columns)} ({name}): {cls.description}" for name, cls in features.items())
    parser = subparsers.add_parser(
        "features", help=COMMANDS["features"][1],
        description="Compute features of every hypothesis with the installed feature plug-ins (entry-point "
        "group rerank.features) and add them as named columns next to the existing ones. Installed: "
        + (listing or "none") + ". --shard i/N processes the i-th of N sentence ranges; its ids start at "
        "--id-offset (default 0, so every shard reads as a list of its own; give the shard's first "
        "sentence, printed on stderr, to keep the original ids so that `cat` of the outputs equals "
        "the unsharded output). Under torchrun (torchrun --nproc_per_node N -m rerank features ...) the ranks "
        "split the model features' work and rank 0 writes the output, the bytes one process writes. " + format_help(),
    )
    add_nbest_positional(parser)
    add_nbest_input(parser, positional=False, owned={"src": "src"})
    add_option_flags(parser, rerank.FeatureRun)
    add_device_option(parser, note="; under torchrun, cuda is each rank's cuda:LOCAL_RANK")
    add_threads_option(parser, default=1, why=": the encoders' small products run fastest on one thread; torch's "
                       "default spins when the cores are shared")
    parser.add_argument("-o", "--output", required=True, help="output n-best file")
    add_output_format(parser)
    add_quiet(parser)
    for name, cls in features.items():
        cls().add_arguments(parser.add_argument_group(f"feature plug-in {name}"))
    parser.set_defaults(func=run)


def run(args) -> int:
    """Under torchrun (WORLD_SIZE > 1) every rank runs this: the model features split their work
    over the ranks (rerank.distributed), rank 0 alone tells and writes; a failure on any rank stops
    them all at their next exchange."""
    resolve_nbest(args)
    run_options = options_from_args(rerank.FeatureRun, args)   # --device and --threads too (the shared flags)
    options = {name: cls.options_from_args(args) for name, cls in installed_features().items()}
    with reading():
        done = rerank.add_features_file(nbest_file(args), args.output, run_options, options=options, progress=bars(args),
                                        to=args.out_format)
    if args.shard and done.paths:   # rank 0 (or the only process) tells
        print(f"note: shard {args.shard} holds sentences {done.first}..{done.end - 1} (--id-offset {done.first} keeps "
              "their ids)", file=sys.stderr)
    return 0
