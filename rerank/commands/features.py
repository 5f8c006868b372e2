"""`rerank features`: add the columns of installed feature plug-ins (s_s, s_i, ...) to an n-best list."""

from __future__ import annotations

import contextlib
import logging
import os
import sys

from rerank import distributed, plugins
from rerank.commands import COMMANDS
from rerank.cliargs import (add_nbest_positional, add_quiet, nonnegative_int, resolve_nbest,
                            bars)
from rerank.commands._common import format_help, nbest_inputs, add_nbest_input, add_output_format, load_nbest, write_output
from rerank.device import add_device_option, add_threads_option
from rerank.errors import InputError
from rerank.features import shard_range
from rerank.io import read_lines, read_references
from rerank.outputs import check_outputs, nbest_outputs
from rerank.score_cache import default_cache_path


def add_parser(subparsers):
    features = plugins.features()
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
    parser.add_argument("--which", help="comma-separated columns to add (default: those the given options ask for, "
                        "e.g. s_s for -m MODEL, plus s_i with --images)")
    parser.add_argument("--src", help="source sentences, one per n-best sentence (raw text; default: none, "
                        "which features needing them refuse)")
    parser.add_argument("-r", "--ref", action="append", metavar="REF", help="reference file, one line per n-best "
                        "sentence, for the features that need references (comet_ref; repeat for several; default: none)")
    parser.add_argument("--src-lang", default="en", help="source language (default: %(default)s)")
    parser.add_argument("--tgt-lang", default="de", help="hypothesis language (default: %(default)s)")
    parser.add_argument("--shard", help="process shard i of N (e.g. 1/4) of the sentences (default: all of them)")
    parser.add_argument("--id-offset", type=nonnegative_int, default=0, help="id of the first output sentence (default: %(default)s)")
    add_device_option(parser, note="; under torchrun, cuda is each rank's cuda:LOCAL_RANK")
    add_threads_option(parser, default=1, why=": the encoders' small products run fastest on one thread; torch's "
                       "default spins when the cores are shared")
    parser.add_argument("--score-cache", metavar="FILE", default=None, help="score cache of users' models (Hugging Face, "
                        "CTranslate2, sentence-transformers), keyed by model digest and pair, so a re-run costs "
                        "nothing (default: $RERANK_CACHE_DIR/scores.sqlite or ~/.cache/mlmme-rerank/scores.sqlite)")
    parser.add_argument("--no-score-cache", action="store_true", help="neither read nor write the score cache")
    parser.add_argument("--replace", action="store_true", help="overwrite columns the n-best has already, in place "
                        "(default: such a column is an error, nothing is written)")
    parser.add_argument("-o", "--output", required=True, help="output n-best file")
    add_output_format(parser)
    add_quiet(parser)
    for name, cls in features.items():
        cls().add_arguments(parser.add_argument_group(f"feature plug-in {name}"))
    parser.set_defaults(func=run)


def _plugin_files(args) -> list[str]:
    """Existing files named by any option (the plug-ins' model, image and other inputs)."""
    options = [v for k, v in vars(args).items() if k not in ("output", "score_cache")]
    values = [x for v in options for x in (v if isinstance(v, list) else [v]) if isinstance(x, str)]
    return [v for v in values if os.path.isfile(v)]


def run(args) -> int:
    """Under torchrun (WORLD_SIZE > 1) every rank runs this: the model features split their work
    over the ranks (rerank.distributed), rank 0 alone tells and writes; a failure on any rank stops
    them all at their next exchange."""
    resolve_nbest(args)
    features = plugins.features()
    with distributed.ranks(), _notes_on_main():
        return distributed.checked(lambda: _run(args, features))


@contextlib.contextmanager
def _notes_on_main():
    """The library's notes and warnings (logger `rerank`) on rank 0 only: the other ranks' are the same."""
    logger = logging.getLogger("rerank")
    level = logger.level
    if not distributed.is_main():
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _run(args, features: dict) -> int:
    from rerank.api import FeatureContext, add_features, plan_features

    main = distributed.is_main()
    check_outputs(nbest_outputs(args.output, args.out_format),
                  [*nbest_inputs(args), args.src, *(args.ref or []), *_plugin_files(args)])
    which = [w.strip() for w in args.which.split(",") if w.strip()] if args.which else None
    options = {name: cls.options_from_args(args) for name, cls in features.items()}
    plan_features(which, options=options)  # names, options and extras, before a big list is read
    nbest, _ = load_nbest(args)
    try:
        start, end = shard_range(nbest.n_sentences, args.shard)
    except InputError as exc:
        raise InputError(f"--{exc}") from None  # the library's "shard 3/2: ..." named as the flag
    sources = None
    if args.src:
        sources = read_lines(args.src)
        if len(sources) != nbest.n_sentences:
            raise InputError(f"{len(sources)} source lines for {nbest.n_sentences} n-best sentences in {args.nbest}",
                             args.src)
        sources = sources[start:end]
    references = None
    if args.ref:
        references = [stream[start:end] for stream in read_references(args.ref, nbest.n_sentences, args.nbest)]
    if args.shard and main:
        print(f"note: shard {args.shard} holds sentences {start}..{end - 1} (--id-offset {start} keeps their ids)",
              file=sys.stderr)
    part = nbest.select_sentences(range(start, end)) if (start, end) != (0, nbest.n_sentences) else nbest
    context = FeatureContext(nbest_path=args.nbest, sources=sources, references=references, src_lang=args.src_lang, tgt_lang=args.tgt_lang,
                             device=distributed.local_device(args.device), threads=args.threads, first_sentence=start,
                             total_sentences=nbest.n_sentences, progress=bars(args) if main else False,
                             cache=None if args.no_score_cache else (args.score_cache or default_cache_path()))
    part = add_features(part, which, context=context, replace=args.replace, source=args.nbest, options=options)
    if main:
        write_output(part, args.output, args.out_format, first_id=args.id_offset)
    return 0
