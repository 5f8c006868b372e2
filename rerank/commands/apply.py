"""`rerank apply`: rerank with feature weights and write the best hypotheses (and, with --ref,
score them against one or more references): `rerank.apply_file`."""

from __future__ import annotations

import sys

import rerank
from rerank.cliargs import add_quiet, bars
from rerank.commands._common import add_nbest_input, format_help, nbest_file, reading
from rerank.options import add_option_flags, options_from_args


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "apply", help="rerank an n-best list with weights; write the 1-best",
        description="Score every hypothesis as w·f, write the arg-max hypothesis of each sentence "
        "(one line per sentence; ties go to the earlier hypothesis of the list) and optionally the "
        "whole n-best re-sorted by the new score (its total column is w·f). Weights: JSON "
        "{\"feature\": weight} (or {\"weights\": {...}}) or Moses `name= v1 v2` lines; a weight for a "
        "feature the n-best lacks is an error, a feature without weight gets 0 with a warning. "
        "With --ref (repeatable: several references), the 1-best and the first hypotheses of the lists "
        "are scored as `rerank eval` scores them. " + format_help(),
    )
    add_nbest_input(parser)
    add_quiet(parser)
    parser.add_argument("-w", "--weights", required=True, help="weights file (JSON or Moses lines)")
    parser.add_argument("-o", "--output", required=True, help="1-best output, one hypothesis per sentence (- for stdout)")
    add_option_flags(parser, rerank.ApplyOptions)
    parser.set_defaults(func=run)


def run(args) -> int:
    options = options_from_args(rerank.ApplyOptions, args)
    with reading():
        applied = rerank.apply_file(nbest_file(args), args.weights, args.output, options, progress=bars(args))
    out = sys.stderr if args.output == "-" else sys.stdout
    for score in applied.scores:
        print(f"{score.display} = {score.score:.2f}  (first hypotheses: {score.first_score:.2f})  {score.signature}",
              file=out)
    return 0
