"""`rerank add-feature`: join scores from separate files as named feature columns
(`rerank.join_score_files`)."""

from __future__ import annotations

import rerank
from rerank.cliargs import bars
from rerank.commands._common import add_nbest_input, add_output_format, format_help, nbest_file, reading
from rerank.errors import InputError
from rerank.options import Writing, add_option_flags


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "add-feature", help="add a feature column from a file of scores",
        description="Join one float per hypothesis (or one per sentence, broadcast to its "
        "hypotheses) as a new named feature column, in order. Give --name/--scores once per "
        "column. Score files: one number per line (text, gzip'd) or a 1-D .npy. " + format_help(),
    )
    add_nbest_input(parser)
    parser.add_argument("--name", action="append", required=True, help="name of the new feature column")
    parser.add_argument("--scores", action="append", required=True, help="file of scores for the matching --name")
    parser.add_argument("--replace", action="store_true", help="overwrite an existing column of the same name in "
                        "place (default: a name the n-best has is an error, nothing is written)")
    parser.add_argument("-o", "--output", required=True, help="output n-best file")
    add_output_format(parser)
    add_option_flags(parser, Writing)
    parser.set_defaults(func=run)


def run(args) -> int:
    if len(args.name) != len(args.scores):
        raise InputError(f"{len(args.name)} --name but {len(args.scores)} --scores: give them in pairs")
    with reading():
        rerank.join_score_files(nbest_file(args), list(zip(args.name, args.scores)), args.output, to=args.out_format,
                                replace=args.replace, progress=bars(args), wait=args.wait)
    return 0
