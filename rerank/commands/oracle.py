"""`rerank oracle`: the best hypothesis per sentence by a sentence-level score (BLEU+1 by default, any
metric of the registry or an n-best column), and the corpus score of the picks (`rerank.oracle`)."""

from __future__ import annotations

import rerank
from rerank.cliargs import add_quiet, bars
from rerank.commands._common import add_nbest_input, format_help, nbest_file, reading
from rerank.options import add_option_flags, options_from_args


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "oracle", help="write the per-sentence oracle hypotheses and print their score (BLEU, chrF, TER, METEOR or a column)",
        description="Pick, for every sentence, the hypothesis with the best sentence-level score against the references "
        "(ties go to the earlier hypothesis), write those hypotheses, and print the corpus score of the picks next to "
        "that of the first hypothesis of every list. --metric bleu (the default): sentence BLEU+1 (Lin & Och 2004) "
        "picks and sacrebleu's corpus BLEU; chrf, chrf++, ter, meteor: the metric of each hypothesis alone, the "
        "highest (TER: the lowest), and the metric's corpus score of the picks, as `rerank eval` computes it; "
        "column:NAME: the n-best list's own column NAME (e.g. COMET scores joined with `rerank add-feature`), the "
        "highest (--lower-better NAME: the lowest), and the mean of the picked values over the sentences; it needs "
        "no references. " + format_help(),
    )
    add_nbest_input(parser)
    parser.add_argument("-r", "--ref", dest="refs", action="append", metavar="REF", help="reference file (repeat for several "
                        "references; required except with --metric column:NAME, default: none)")
    parser.add_argument("-o", "--output", help="write the oracle hypotheses here, one per sentence "
                        "(- for stdout; default: only the scores are printed)")
    add_option_flags(parser, rerank.OracleOptions)
    add_quiet(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    options = options_from_args(rerank.OracleOptions, args)
    with reading():
        found = rerank.oracle(nbest_file(args), args.refs, options, output=args.output, progress=bars(args))
    width = len(f"first-hypothesis {found.display}")
    print(f"{'first-hypothesis ' + found.display:<{width}} = {found.first_score:.{found.decimals}f}")
    print(f"{'oracle ' + found.display:<{width}} = {found.score:.{found.decimals}f}  "
          f"({found.changed} of {len(found.rows)} sentences changed)")
    print(f"signature: {found.signature}")
    return 0
