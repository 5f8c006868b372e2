"""Options shared by the commands (the n-best positional with its --nbest alias, --quiet and
when to show progress bars), and the files they name."""

from __future__ import annotations

import argparse
import os
import sys

from rerank.errors import InputError


def nbest_inputs(args: argparse.Namespace) -> list[str | None]:
    """The files an n-best read (rerank.commands._common.load_nbest) may open: the list, the
    plain format's side files given, and PATH.ids / PATH.features.tsv it reads when none are."""
    side = []
    if args.nbest and args.nbest != "-" and args.in_format in (None, "plain"):
        side = [p for p in (args.nbest + ".ids", args.nbest + ".features.tsv") if os.path.exists(p)]
    return [args.nbest, args.plain_ids, args.plain_sizes, args.plain_features, *side]


def add_nbest_positional(parser) -> None:
    """The n-best input as a positional, with --nbest as an alias (resolve with `resolve_nbest`)."""
    parser.add_argument("nbest", nargs="?", help="input n-best file (- for stdin)")
    parser.add_argument("--nbest", dest="nbest_option", metavar="NBEST",
                        help="the input n-best file (alias of the positional)")


def resolve_nbest(args: argparse.Namespace) -> str:
    """Set and return args.nbest from the positional or --nbest (exactly one of them)."""
    if args.nbest and args.nbest_option:
        raise InputError("give the n-best file once (positional or --nbest)")
    args.nbest = args.nbest or args.nbest_option
    if not args.nbest:
        raise InputError("give the input n-best file (positional or --nbest)")
    return args.nbest


def add_quiet(parser) -> None:
    parser.add_argument("--quiet", action="store_true",
                        help="no progress bar (default: bars on stderr when it is a terminal)")


def show_progress(args: argparse.Namespace) -> bool:
    """Progress bars go to stderr, only when it is a terminal and --quiet is not given."""
    return not args.quiet and sys.stderr.isatty()
