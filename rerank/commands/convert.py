"""`rerank convert`: from any n-best format of the table to any it can write (`rerank.convert_file`)."""

from __future__ import annotations

import rerank
from rerank.cliargs import add_quiet, bars
from rerank.commands._common import add_nbest_input, add_output_format, format_help, nbest_file, reading
from rerank.options import Writing, add_option_flags


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "convert", help="convert an n-best list between formats",
        description="Read an n-best list in one format and write it in another, keeping every "
        "hypothesis, its order and its features (a fairseq H/D score becomes feature `nmt`); what "
        "the output format cannot hold (features in fairseq, totals in plain) is named on stderr. "
        + format_help(),
    )
    add_nbest_input(parser)
    add_quiet(parser)
    parser.add_argument("-o", "--output", required=True, help="output file (.gz compresses; - for stdout)")
    add_output_format(parser)
    parser.add_argument("--save-refs", metavar="FILE", help="fairseq input: write the T- lines (references) here (default: not written)")
    parser.add_argument("--save-sources", metavar="FILE", help="fairseq input: write the S- lines (sources) here (default: not written)")
    add_option_flags(parser, Writing)
    parser.set_defaults(func=run)


def run(args) -> int:
    with reading():
        rerank.convert_file(nbest_file(args), args.output, args.out_format, save_refs=args.save_refs,
                            save_sources=args.save_sources, progress=bars(args), wait=args.wait)
    return 0
