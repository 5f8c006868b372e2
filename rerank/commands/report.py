"""`rerank report`: the evaluation of `rerank eval` as one self-contained HTML page (rerank.htmlreport):
the flags of `rerank.EvalOptions` and `rerank.ReportOptions`, and `rerank.report`, which reads,
scores and writes."""

from __future__ import annotations

import argparse
import sys

from rerank.cliargs import add_quiet, bars, command_line
from rerank.commands._common import reading
from rerank.commands._evaluation import add_evaluation_arguments, eval_options, inputs
from rerank.options import add_option_flags, options_from_args

EPILOG = """\
The inputs are those of `rerank eval` (see `rerank eval --help`): references (-r, repeatable), the
baseline (-b), systems as [NAME=]PATH (a file, a quoted glob or a run prefix PATH.run1 ...), n-best
lists with weights (--nbest/--weights, which also give the oracle curve), metrics and
--segment-scores NAME=FILE.tsv. Systems with several runs: tables and buckets average the runs,
the changed sentences compare the first run of each.

The page: the significance table (\u2020/\u2021, bootstrap intervals of each improvement) with a plot;
scores by reference-length bucket and word F-measure by word-frequency bucket (as compare-mt), with
each system's difference from the baseline; for every system the sentences whose output changed,
sorted by sentence-level gain, in a "better" and a "worse" section with the differing words marked;
the oracle BLEU of the top k hypotheses of the n-best lists (--oracle-metric: chrF, TER, METEOR or an
n-best column instead, as `rerank oracle --metric`); the metric signatures and this command line.
Style and pictures (SVG) are inside the file: it opens from disk without a server or network.

examples:
  rerank report -r test.de -b base.de mlmme=rerank.de -o report.html --metrics bleu,chrf,ter
  rerank report -r ref.0 -r ref.1 -b base.txt --nbest test.nbest --weights w.json -o report.html
  rerank report -r ref.de -b base.de --nbest test.nbest --weights w.json --oracle-metric ter -o report.html
"""


def add_parser(subparsers) -> None:
    from rerank import ReportOptions

    p = subparsers.add_parser(
        "report", help="write an HTML report: significance, buckets, changed sentences, oracle curve",
        description="Score a baseline and systems exactly as `rerank eval` does and write one static, "
        "self-contained HTML page that shows where each system wins and loses.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_evaluation_arguments(p)
    r = p.add_argument_group("report")
    r.add_argument("-o", "--output", required=True, metavar="HTML", help="the HTML file to write")
    add_option_flags(r, ReportOptions)
    add_quiet(r)
    p.set_defaults(func=run)


def run(args) -> int:
    import rerank

    options = eval_options(args)
    args.command_line = command_line()
    page = options_from_args(rerank.ReportOptions, args)
    baseline, systems = inputs(args)
    with reading("nbest-"):
        rerank.report(args.ref, baseline, systems, args.output, options, page, progress=bars(args))
    if not args.quiet:
        print(f"wrote {args.output}", file=sys.stderr)
    return 0
